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
//! mod kapi;
//! ```

// This tree is library code compiled into each driver crate: `pub` marks its
// API even though the including crate keeps the module itself private.
#![allow(unreachable_pub)]
// Not every driver uses every item of the library (iblan uses no verbs
// objects, and the transport's lookups come with the transport).
#![allow(dead_code, unused_macros)]

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
