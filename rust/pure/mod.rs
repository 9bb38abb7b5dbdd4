// SPDX-License-Identifier: GPL-2.0

//! Logic that needs no kernel: compiled into the kernel modules and into the
//! host crate in this directory, where it is unit-tested and fuzzed.
//!
//! Files here must use only `core`.

// Library code compiled into each driver crate; `pub` is its API.
#![allow(unreachable_pub)]

pub mod aeth;
pub mod connect;
pub mod cq_event;
pub mod fdb;
pub mod fifo;
pub mod grh;
pub mod guid;
pub mod headers;
pub mod icrc;
pub mod lan;
pub mod mcast;
pub mod mtu;
pub mod outbox;
pub mod psn;
pub mod qp_cpu;
pub mod ring;
pub mod steer;
pub mod wr;

/// `bytes` split at `at`, or `None` if it is shorter: `split_at_checked`,
/// which the kernel's minimum Rust version (1.78) does not have.
pub fn split_checked(bytes: &[u8], at: usize) -> Option<(&[u8], &[u8])> {
    Some((bytes.get(..at)?, bytes.get(at..)?))
}
