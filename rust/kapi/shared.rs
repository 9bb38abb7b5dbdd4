// SPDX-License-Identifier: GPL-2.0

//! Atomic access to memory that parties outside Rust's view reach at the
//! same time: the eight bytes an RDMA atomic targets in a registered
//! region, which the owning process and other copies into the region may
//! touch with plain loads and stores while the responder operates on them.
//!
//! Rust's atomics may not be mixed with non-atomic accesses to the same
//! bytes, so the operations are the kernel's own (`cmpxchg64`,
//! `smp_store_release`), marked accesses in the kernel's memory model,
//! which make the responder's read-modify-write indivisible whatever the
//! others do.

use crate::bindings;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// Eight aligned bytes of shared memory, valid for `'a`.
///
/// # Invariants
///
/// `word` is 8-byte aligned and valid for reads and writes for `'a`.
pub struct SharedWord<'a> {
    word: NonNull<u64>,
    _memory: PhantomData<&'a ()>,
}

impl<'a> SharedWord<'a> {
    /// The word at `address`, if it is 8-byte aligned and not null.
    ///
    /// # Safety
    ///
    /// The eight bytes at `address` must stay valid for reads and writes
    /// for `'a`. Others may access them meanwhile.
    pub unsafe fn new(address: *mut u8) -> Option<Self> {
        if address as usize % 8 != 0 {
            return None;
        }
        Some(Self {
            word: NonNull::new(address.cast::<u64>())?,
            _memory: PhantomData,
        })
    }

    /// Stores `desired` if the word holds `expected`; returns what it held.
    pub fn compare_exchange(&self, expected: u64, desired: u64) -> u64 {
        // SAFETY: valid and aligned per the type invariant.
        unsafe { bindings::srnic_shared_cmpxchg64(self.word.as_ptr(), expected, desired) }
    }

    /// Adds `addend` (wrapping); returns what the word held.
    pub fn fetch_add(&self, addend: u64) -> u64 {
        // SAFETY: valid and aligned per the type invariant.
        unsafe { bindings::srnic_shared_fetch_add64(self.word.as_ptr(), addend) }
    }

    /// Stores `value` in one access, ordered after what came before.
    pub fn store(&self, value: u64) {
        // SAFETY: valid and aligned per the type invariant.
        unsafe { bindings::srnic_shared_store64(self.word.as_ptr(), value) }
    }
}
