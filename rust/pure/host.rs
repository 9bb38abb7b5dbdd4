// SPDX-License-Identifier: GPL-2.0

//! Host build of srnic's pure logic, for `cargo test` and fuzzing. The kernel
//! modules compile the very same files through `mod.rs`.

#![cfg_attr(not(test), no_std)]

#[path = "mod.rs"]
mod pure;
pub use pure::*;
