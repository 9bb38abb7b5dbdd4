// SPDX-License-Identifier: GPL-2.0

//! Raw bindings to the kernel API in `srnic_helper.h`, generated at build
//! time by our own bindgen run (see `Kbuild`).
//!
//! Only the safe abstractions in `rust/kapi` use these; drivers do not.
//! Generated code carries no safety comments, so the lints that ask for
//! them are off here alone.

#![allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    unnecessary_transmutes
)]

use kernel::ffi;

// Types the kernel's own bindgen parameters map to Rust sizes by hand.
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("bindings_generated.rs");
