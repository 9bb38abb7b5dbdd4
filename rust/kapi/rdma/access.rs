// SPDX-License-Identifier: GPL-2.0

//! The verbs' flags by name: memory access (`enum ib_access_flags`), send
//! work requests (`enum ib_send_flags`) and the network type of a UD
//! completion (`enum rdma_network_type`), so that drivers name no bindings.

use crate::bindings;

/// `IB_ACCESS_LOCAL_WRITE`: the device may write the memory locally.
pub const LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
/// `IB_ACCESS_REMOTE_WRITE`.
pub const REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
/// `IB_ACCESS_REMOTE_READ`.
pub const REMOTE_READ: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ;
/// `IB_ACCESS_REMOTE_ATOMIC`.
pub const REMOTE_ATOMIC: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
/// `IB_ACCESS_MW_BIND`: windows may be bound to the region.
pub const MW_BIND: u32 = bindings::ib_access_flags_IB_ACCESS_MW_BIND;
/// `IB_ACCESS_FLUSH_GLOBAL`: FLUSH to global visibility.
pub const FLUSH_GLOBAL: u32 = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
/// `IB_ACCESS_FLUSH_PERSISTENT`: FLUSH to persistence.
pub const FLUSH_PERSISTENT: u32 = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;

/// What requires local write as well (the verbs' rule for regions and
/// windows).
pub const NEEDS_LOCAL_WRITE: u32 = REMOTE_WRITE | REMOTE_ATOMIC;

/// The access flags that need the pages pinned for writing: the core pins
/// with `FOLL_WRITE` exactly when one of them is set (`ib_access_writable`).
pub const WRITING_ACCESS: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND;

/// Flags of a send work request (`enum ib_send_flags`).
pub mod send {
    use crate::bindings;

    /// `IB_SEND_FENCE`: wait for earlier READs and atomics.
    pub const FENCE: u32 = bindings::ib_send_flags_IB_SEND_FENCE as u32;
    /// `IB_SEND_SIGNALED`: complete with a CQE.
    pub const SIGNALED: u32 = bindings::ib_send_flags_IB_SEND_SIGNALED as u32;
    /// `IB_SEND_SOLICITED`: the solicited event bit.
    pub const SOLICITED: u32 = bindings::ib_send_flags_IB_SEND_SOLICITED as u32;
    /// `IB_SEND_INLINE`: the payload is in the WQE.
    pub const INLINE: u32 = bindings::ib_send_flags_IB_SEND_INLINE as u32;
}

/// The network header of a UD receive (`enum rdma_network_type`, as a work
/// completion's `network_hdr_type` holds it).
pub mod network {
    use crate::bindings;

    /// `RDMA_NETWORK_IPV4`.
    pub const IPV4: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
    /// `RDMA_NETWORK_IPV6`.
    pub const IPV6: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV6 as u8;
}
