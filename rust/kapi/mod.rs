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

pub mod global;
pub mod netdev;
pub mod rdma;
