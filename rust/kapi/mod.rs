// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel API that srnic and iblan need and the
//! `kernel` crate of 6.12 does not have: RDMA devices and link types,
//! netdevs and their notifier, and module-wide state reachable from C
//! callbacks.
//!
//! A driver crate includes this tree with `#[path]` next to `bindings`:
//!
//! ```ignore
//! #[path = "../../../../rust/bindings/mod.rs"]
//! mod bindings;
//! #[path = "../../../../rust/kapi/mod.rs"]
//! #[macro_use]
//! pub mod kapi;
//! ```

// This tree is library code compiled into each driver crate, which declares
// it `pub mod kapi`: its `pub` items are API (one driver may leave some
// unused, as a library's users do), and an unused private item is an error.
#![allow(unreachable_pub)]

pub mod cpu;
pub mod crc;
pub mod debugfs;
pub mod ether;
pub mod global;
pub mod irq;
#[macro_use]
pub mod print;
pub mod net;
pub mod netdev;
#[macro_use]
pub mod param;
pub mod percpu;
pub mod rcu;
pub mod rtnl_link;
pub mod skb;
pub mod sysfs;
#[macro_use]
pub mod sync;
pub mod rdma;
pub mod shared;
pub mod udp;
#[macro_use]
pub mod work;

use kernel::error::Error;

/// `EADDRNOTAVAIL`, which the `kernel` crate of 6.12 does not name.
pub fn address_not_available() -> Error {
    Error::from_errno(-(crate::bindings::EADDRNOTAVAIL as kernel::ffi::c_int))
}

/// `EOPNOTSUPP`, which the `kernel` crate of 6.12 does not name.
pub fn not_supported() -> Error {
    Error::from_errno(-(crate::bindings::EOPNOTSUPP as kernel::ffi::c_int))
}

/// Empties `vec`, keeping its capacity (the `kernel` crate's vector of
/// 6.12 has no `clear`). For elements with nothing to drop.
pub fn clear_copies<T: Copy>(vec: &mut kernel::alloc::KVec<T>) {
    // SAFETY: a length of 0 is within any capacity and claims no element
    // initialised; the elements given up are `Copy`, so none needs a drop.
    unsafe { vec.set_len(0) };
}
