// SPDX-License-Identifier: GPL-2.0

//! The kernel's fastest CRC-32 (the IEEE 802.3 polynomial, reflected), the
//! CRC under RoCEv2's ICRC: the crypto API's `crc32`, whose best driver on
//! x86 folds 64 bytes at a time with carry-less multiplies
//! (`crc32-pclmul`), or `crc32_le()` where no driver is there.
//!
//! Callers keep the CRC register themselves (as `crc32_le()` keeps it: not
//! inverted) and advance it over bytes here, so that headers with masked
//! fields can go through their own code and only the bulk comes here.

use super::shared::SharedRange;
use crate::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// A handle on the crypto API's `crc32`.
///
/// # Invariants
///
/// `tfm` is null or a transform this value allocated, whose state is the
/// bare 32-bit CRC register (checked when it was allocated), and freed
/// only by `drop`.
pub struct Crc32Engine {
    tfm: *mut bindings::crypto_shash,
}

// SAFETY: a transform may be used from any context and CPU at once (each
// update runs on its own descriptor on the stack); freeing it is `drop`'s.
unsafe impl Send for Crc32Engine {}
// SAFETY: as above: the shared uses only read the handle.
unsafe impl Sync for Crc32Engine {}

impl Crc32Engine {
    /// The crypto API's best `crc32` driver, or, without one, the library
    /// function. Allocating may load a module, so: process context.
    pub fn new() -> Self {
        // SAFETY: allocates a transform (or returns null), which `drop`
        // frees.
        let tfm = unsafe { bindings::srnic_crc32_engine_alloc() };
        // INVARIANT: null, or allocated here with its state size checked.
        Self { tfm }
    }

    /// The crypto driver that computes, e.g. `crc32-pclmul`; `None` for
    /// the library's `crc32_le()`.
    pub fn driver(&self) -> Option<&CStr> {
        NonNull::new(self.tfm)?;
        // SAFETY: a live transform (the invariant) names its driver with
        // a string that lives as long as the transform.
        let name = unsafe { bindings::srnic_crc32_engine_driver(self.tfm) };
        if name.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated and kept by the algorithm
        // while the transform, which `&self` borrows, lives.
        Some(unsafe { CStr::from_char_ptr(name) })
    }

    /// The CRC register `register` advanced over `bytes`.
    pub fn update(&self, register: u32, bytes: &[u8]) -> u32 {
        // SAFETY: `bytes` is valid for reads of its length; the transform
        // is null or live (the invariant).
        unsafe {
            bindings::srnic_crc32_update(self.tfm, register, bytes.as_ptr().cast(), bytes.len())
        }
    }

    /// The CRC register `register` advanced over the bytes of `range`,
    /// which others may write meanwhile: C reads them with plain loads,
    /// never through a Rust reference, and a racing write only makes the
    /// result a CRC of some old and some new values.
    pub fn update_range(&self, register: u32, range: &SharedRange<'_>) -> u32 {
        // SAFETY: a range is valid for reads of its length (its
        // invariant); no Rust reference is formed over it; the transform
        // is null or live.
        unsafe {
            bindings::srnic_crc32_update(self.tfm, register, range.as_ptr().cast(), range.len())
        }
    }
}

impl Default for Crc32Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Crc32Engine {
    fn drop(&mut self) {
        if !self.tfm.is_null() {
            // SAFETY: allocated by `new`, freed once, here; `&mut self`
            // means no update is running.
            unsafe { bindings::srnic_crc32_engine_free(self.tfm) };
        }
    }
}
