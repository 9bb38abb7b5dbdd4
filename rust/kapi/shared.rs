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

/// What [`read_shared`] hands on, in memory order.
#[derive(Clone, Copy, Debug)]
pub enum SharedChunk<'a> {
    /// Eight aligned bytes, as the value they spell read little-endian
    /// (the first byte in memory is the lowest).
    Word(u64),
    /// Up to seven bytes before the first aligned word or after the last,
    /// already copied out.
    Bytes(&'a [u8]),
}

/// Reads the `len` bytes at `at` once each, in order, with marked
/// (volatile) accesses, handing them to `f` as aligned words and the few
/// bytes around them.
///
/// For memory others may write meanwhile, such as user pages that another
/// thread of the owning process stores into while the skb that carries
/// them waits to be sent: no Rust reference is formed over them (a `&[u8]`
/// would claim they do not change, and a racing write would then be
/// undefined behaviour). A racing write makes some of the values read old
/// and some new, nothing worse; what is handed on is a copy in registers,
/// so a consumer such as a CRC computes over exactly the values it saw.
///
/// # Safety
///
/// `at..at + len` must be valid for reads for the duration of the call.
pub unsafe fn read_shared(at: *const u8, len: usize, mut f: impl FnMut(SharedChunk<'_>)) {
    let mut done = 0usize;
    // Bytes up to the first aligned word, and then the tail.
    let lead = ((8 - (at as usize % 8)) % 8).min(len);
    let mut bytes = [0u8; 7];
    if lead > 0 {
        for (i, byte) in bytes.iter_mut().take(lead).enumerate() {
            // SAFETY: `i < lead <= len`, inside the range the caller
            // vouches for.
            *byte = unsafe { core::ptr::read_volatile(at.add(i)) };
        }
        f(SharedChunk::Bytes(bytes.get(..lead).unwrap_or(&[])));
        done = lead;
    }
    while len - done >= 8 {
        // SAFETY: `done..done + 8` is inside the range, and `at + done` is
        // 8-byte aligned (the lead brought it there).
        let word = unsafe { core::ptr::read_volatile(at.add(done).cast::<u64>()) };
        f(SharedChunk::Word(u64::from_le(word)));
        done += 8;
    }
    let tail = len - done;
    if tail > 0 {
        for (i, byte) in bytes.iter_mut().take(tail).enumerate() {
            // SAFETY: `done + i < len`, inside the range.
            *byte = unsafe { core::ptr::read_volatile(at.add(done + i)) };
        }
        f(SharedChunk::Bytes(bytes.get(..tail).unwrap_or(&[])));
    }
}
