// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes as drivers report them.

use crate::bindings;
use crate::pure::mtu::IbMtu;

/// `IB_DEVICE_PORT_ACTIVE_EVENT`: the device raises port events.
pub const DEVICE_PORT_ACTIVE_EVENT: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
/// `IB_DEVICE_SYS_IMAGE_GUID`: the device reports a system image GUID.
pub const DEVICE_SYS_IMAGE_GUID: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
/// `IB_DEVICE_RC_RNR_NAK_GEN`: the device sends RNR NAKs.
pub const DEVICE_RC_RNR_NAK_GEN: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64;
/// `IB_DEVICE_SRQ_RESIZE`: SRQs can be resized.
pub const DEVICE_SRQ_RESIZE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64;
/// `IB_DEVICE_MEM_WINDOW`: memory windows.
pub const DEVICE_MEM_WINDOW: u64 = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
/// `IB_DEVICE_MEM_WINDOW_TYPE_2B`: type 2B memory windows.
pub const DEVICE_MEM_WINDOW_TYPE_2B: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
/// `IB_DEVICE_MEM_MGT_EXTENSIONS`: fast registration and invalidation.
pub const DEVICE_MEM_MGT_EXTENSIONS: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
/// `IB_DEVICE_FLUSH_GLOBAL`: RDMA FLUSH with the global visibility
/// placement type (and regions with `IB_ACCESS_FLUSH_GLOBAL`).
pub const DEVICE_FLUSH_GLOBAL: u64 = bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64;
/// `IB_DEVICE_FLUSH_PERSISTENT`: RDMA FLUSH with the persistence
/// placement type (and regions with `IB_ACCESS_FLUSH_PERSISTENT`).
pub const DEVICE_FLUSH_PERSISTENT: u64 =
    bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64;
/// `IB_DEVICE_ATOMIC_WRITE`: RDMA ATOMIC WRITE.
pub const DEVICE_ATOMIC_WRITE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64;
/// `IB_PORT_CM_SUP`: the port supports connection management (rdma_cm).
pub const PORT_CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;

/// Device-wide attributes (`struct ib_device_attr`). Limits a driver leaves
/// at zero mean "not supported".
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceAttributes {
    /// Firmware version.
    pub fw_ver: u64,
    /// System image GUID, in network byte order as the core stores it.
    pub sys_image_guid: u64,
    /// Largest memory region, in bytes.
    pub max_mr_size: u64,
    /// Supported page sizes, as a bit mask.
    pub page_size_cap: u64,
    /// IEEE vendor ID.
    pub vendor_id: u32,
    /// Vendor part ID.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Most protection domains.
    pub max_pd: u32,
    /// Most queue pairs.
    pub max_qp: u32,
    /// Most work requests per queue.
    pub max_qp_wr: u32,
    /// Most completion queues.
    pub max_cq: u32,
    /// Most entries per completion queue.
    pub max_cqe: u32,
    /// Most memory regions.
    pub max_mr: u32,
    /// Most address handles.
    pub max_ah: u32,
    /// Partition keys per port.
    pub max_pkeys: u16,
    /// Most multicast groups.
    pub max_mcast_grp: u32,
    /// Most QPs attached to one multicast group.
    pub max_mcast_qp_attach: u32,
    /// Most attachments of QPs to groups, all groups together.
    pub max_total_mcast_qp_attach: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// Most shared receive queues.
    pub max_srq: u32,
    /// Most work requests per shared receive queue.
    pub max_srq_wr: u32,
    /// Most memory windows.
    pub max_mw: u32,
    /// Outstanding RDMA READ and atomics a QP responds to.
    pub max_qp_rd_atom: u32,
    /// Outstanding RDMA READ and atomics a QP initiates.
    pub max_qp_init_rd_atom: u32,
    /// Pages in a fast-registration page list.
    pub max_fast_reg_page_list_len: u32,
    /// Whether atomics are atomic with respect to the whole HCA (else none).
    pub atomic_hca: bool,
    /// Whether lkey 0 addresses all of kernel memory, so kernel consumers
    /// need no DMA MR.
    pub local_dma_lkey: bool,
    /// `IB_DEVICE_*` capability bits.
    pub device_cap_flags: u64,
    /// Most CQEs a CQ's event may wait for (`modify_cq`'s count).
    pub max_cq_moderation_count: u16,
    /// Longest a CQ's event may wait, in microseconds.
    pub max_cq_moderation_period: u16,
    /// What on-demand paging serves, per transport (`ODP_*` bits); all
    /// zero: no on-demand paging.
    pub odp: OdpCaps,
}

/// On-demand paging capabilities (`struct ib_odp_caps`): the operations
/// whose memory may be paged on demand, for each transport.
#[derive(Clone, Copy, Debug, Default)]
pub struct OdpCaps {
    /// RC.
    pub rc: u32,
    /// UC.
    pub uc: u32,
    /// UD.
    pub ud: u32,
    /// Whether implicit regions (the whole address space) are paged on
    /// demand too.
    pub implicit: bool,
}

/// `IB_ODP_SUPPORT_SEND`: memory of sends.
pub const ODP_SEND: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND;
/// `IB_ODP_SUPPORT_RECV`: memory of receives.
pub const ODP_RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV;
/// `IB_ODP_SUPPORT_WRITE`: targets of RDMA WRITE.
pub const ODP_WRITE: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE;
/// `IB_ODP_SUPPORT_READ`: sources of RDMA READ.
pub const ODP_READ: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ;
/// `IB_ODP_SUPPORT_ATOMIC`: targets of atomics.
pub const ODP_ATOMIC: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC;
/// `IB_ODP_SUPPORT_SRQ_RECV`: memory of receives from an SRQ.
pub const ODP_SRQ_RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;

impl DeviceAttributes {
    pub(crate) fn write_to(&self, out: &mut bindings::ib_device_attr) {
        let clamp = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        out.fw_ver = self.fw_ver;
        out.sys_image_guid = self.sys_image_guid;
        out.max_mr_size = self.max_mr_size;
        out.page_size_cap = self.page_size_cap;
        out.vendor_id = self.vendor_id;
        out.vendor_part_id = self.vendor_part_id;
        out.hw_ver = self.hw_ver;
        out.max_pd = clamp(self.max_pd);
        out.max_qp = clamp(self.max_qp);
        out.max_qp_wr = clamp(self.max_qp_wr);
        out.max_cq = clamp(self.max_cq);
        out.max_cqe = clamp(self.max_cqe);
        out.max_mr = clamp(self.max_mr);
        out.max_ah = clamp(self.max_ah);
        out.max_pkeys = self.max_pkeys;
        out.max_mcast_grp = clamp(self.max_mcast_grp);
        out.max_mcast_qp_attach = clamp(self.max_mcast_qp_attach);
        out.max_total_mcast_qp_attach = clamp(self.max_total_mcast_qp_attach);
        out.max_send_sge = clamp(self.max_sge);
        out.max_recv_sge = clamp(self.max_sge);
        out.max_sge_rd = clamp(self.max_sge);
        out.max_srq = clamp(self.max_srq);
        out.max_srq_wr = clamp(self.max_srq_wr);
        out.max_srq_sge = clamp(self.max_sge);
        out.max_mw = clamp(self.max_mw);
        out.cq_caps.max_cq_moderation_count = self.max_cq_moderation_count;
        out.cq_caps.max_cq_moderation_period = self.max_cq_moderation_period;
        out.max_qp_rd_atom = clamp(self.max_qp_rd_atom);
        out.max_qp_init_rd_atom = clamp(self.max_qp_init_rd_atom);
        out.max_res_rd_atom = clamp(self.max_qp_rd_atom.saturating_mul(self.max_qp));
        out.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        out.atomic_cap = if self.atomic_hca {
            bindings::ib_atomic_cap_IB_ATOMIC_HCA
        } else {
            bindings::ib_atomic_cap_IB_ATOMIC_NONE
        };
        out.max_pkeys = self.max_pkeys;
        // A soft device acknowledges as fast as the host runs (4.096 us *
        // 2^15 would be the slowest).
        out.local_ca_ack_delay = 15;
        out.device_cap_flags = self.device_cap_flags;
        // Every device made by `rdma link add` may be removed by
        // `rdma link delete`.
        out.kernel_cap_flags = u64::from(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
        if self.local_dma_lkey {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_LOCAL_DMA_LKEY);
        }
        let odp = self.odp;
        if odp.rc | odp.uc | odp.ud != 0 {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
            out.odp_caps.general_caps = u64::from(bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT);
            if odp.implicit {
                out.odp_caps.general_caps |=
                    u64::from(bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT);
            }
            out.odp_caps.per_transport_caps.rc_odp_caps = odp.rc;
            out.odp_caps.per_transport_caps.uc_odp_caps = odp.uc;
            out.odp_caps.per_transport_caps.ud_odp_caps = odp.ud;
        }
    }
}

/// Logical port state (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// No link.
    Down,
    /// Link up and usable.
    Active,
}

/// Physical port state (`enum ib_port_phys_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhysState {
    /// Administratively or physically down.
    Disabled,
    /// Link up.
    LinkUp,
}

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// RoCE: InfiniBand transport over Ethernet.
    Ethernet,
}

/// Asynchronous port events delivered to the core and its clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// The port became active.
    Active,
    /// The port left the active state.
    Error,
}

impl PortEvent {
    pub(crate) fn to_raw(self) -> bindings::ib_event_type {
        match self {
            PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
            PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
        }
    }
}

/// Per-port attributes (`struct ib_port_attr`).
#[derive(Clone, Copy, Debug)]
pub struct PortAttributes {
    /// Logical state.
    pub state: PortState,
    /// Physical state.
    pub phys_state: PhysState,
    /// Largest MTU the port supports.
    pub max_mtu: IbMtu,
    /// MTU usable now, given the carrier's MTU.
    pub active_mtu: IbMtu,
    /// The carrier's MTU in bytes.
    pub phys_mtu: u32,
    /// GID table entries.
    pub gid_tbl_len: u32,
    /// P_Key table entries.
    pub pkey_tbl_len: u16,
    /// `IB_PORT_*` capability bits.
    pub port_cap_flags: u32,
    /// Largest message, in bytes.
    pub max_msg_sz: u32,
    /// Link speed (`enum ib_port_speed`).
    pub active_speed: u16,
    /// Link width (`enum ib_port_width`).
    pub active_width: u8,
}

impl PortAttributes {
    pub(crate) fn write_to(&self, out: &mut bindings::ib_port_attr) {
        out.state = match self.state {
            PortState::Down => bindings::ib_port_state_IB_PORT_DOWN,
            PortState::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
        };
        out.phys_state = match self.phys_state {
            PhysState::Disabled => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            PhysState::LinkUp => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
        } as u8;
        out.max_mtu = self.max_mtu as bindings::ib_mtu;
        out.active_mtu = self.active_mtu as bindings::ib_mtu;
        out.phys_mtu = self.phys_mtu;
        out.gid_tbl_len = i32::try_from(self.gid_tbl_len).unwrap_or(i32::MAX);
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.port_cap_flags = self.port_cap_flags;
        out.max_msg_sz = self.max_msg_sz;
        out.active_speed = self.active_speed;
        out.active_width = self.active_width;
        out.max_vl_num = 1;
    }
}
