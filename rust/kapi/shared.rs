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
use kernel::prelude::*;

/// Bytes of memory the transport reads or writes in bulk, valid for `'a`:
/// a Rust buffer, or memory outside Rust's ownership (pinned user pages, a
/// kernel consumer's buffer, a kernel-private work ring) that others may
/// access at the same time. Only this crate's kapi makes ranges of foreign
/// memory, from what vouches for it (a pin, the verbs contract, the ring
/// that owns it); a driver narrows them and copies between them.
///
/// No Rust reference is ever formed over the bytes: a process may write
/// its pages while they are read, and a `&[u8]` would claim they do not
/// change.
///
/// # Invariants
///
/// `start..start + len` is valid for reads for `'a`, and for writes too if
/// `origin` says it is writable. A [`Origin::Slice`] range is not written
/// by anyone for `'a`; a [`Origin::SliceMut`] one is reached by no one else
/// for `'a`; no Rust reference is ever formed over the bytes of a
/// [`Origin::Foreign`] one, then or later (their owner is C code, a
/// process, or a kapi type that reaches them only through raw pointers).
#[derive(Clone, Copy)]
pub struct SharedRange<'a> {
    start: NonNull<u8>,
    len: usize,
    origin: Origin,
    _memory: PhantomData<&'a ()>,
}

/// Where the bytes of a [`SharedRange`] belong.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A shared Rust borrow: read only.
    Slice,
    /// An exclusive Rust borrow.
    SliceMut,
    /// Memory no Rust reference covers, which others may also access.
    Foreign { writable: bool },
}

impl<'a> SharedRange<'a> {
    /// The bytes of a buffer, for reading.
    pub fn from_slice(bytes: &'a [u8]) -> Self {
        // INVARIANT: a shared borrow is valid for reads and unwritten for
        // `'a`.
        Self {
            start: NonNull::from(bytes).cast(),
            len: bytes.len(),
            origin: Origin::Slice,
            _memory: PhantomData,
        }
    }

    /// The bytes of a buffer, for reading and writing.
    pub fn from_mut_slice(bytes: &'a mut [u8]) -> Self {
        let len = bytes.len();
        // INVARIANT: an exclusive borrow is valid for both, ours for `'a`.
        Self {
            start: NonNull::from(bytes).cast(),
            len,
            origin: Origin::SliceMut,
            _memory: PhantomData,
        }
    }

    /// A range of memory outside Rust's ownership; `None` at a null or
    /// wrapping address.
    ///
    /// # Safety
    ///
    /// `start..start + len` must be valid for reads for `'a`, and for
    /// writes if `writable`; no Rust reference may ever cover it (others
    /// may access it, but only through raw pointers or from outside Rust).
    pub(in crate::kapi) unsafe fn foreign(
        start: *mut u8,
        len: usize,
        writable: bool,
    ) -> Option<Self> {
        (start as usize).checked_add(len)?;
        // INVARIANT: the caller's contract.
        Some(Self {
            start: NonNull::new(start)?,
            len,
            origin: Origin::Foreign { writable },
            _memory: PhantomData,
        })
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the bytes may be written through the range.
    pub fn writable(&self) -> bool {
        match self.origin {
            Origin::Slice => false,
            Origin::SliceMut => true,
            Origin::Foreign { writable } => writable,
        }
    }

    /// The `len` bytes from byte `at`, if they are in the range.
    pub fn sub(&self, at: usize, len: usize) -> Option<Self> {
        if at.checked_add(len)? > self.len {
            return None;
        }
        // INVARIANT: a part of the range, valid as the whole is.
        Some(Self {
            // SAFETY: `at <= self.len`: in the range or one past its end,
            // which does not wrap (the invariant), so not null.
            start: unsafe { NonNull::new_unchecked(self.start.as_ptr().add(at)) },
            len,
            ..*self
        })
    }

    /// The range cut in two at byte `at`, if `at` is in it or at its end.
    pub fn split_at(&self, at: usize) -> Option<(Self, Self)> {
        let rest = self.len.checked_sub(at)?;
        Some((self.sub(0, at)?, self.sub(at, rest)?))
    }

    /// How many of the first bytes are in the page the range starts in.
    pub fn first_page_len(&self) -> usize {
        let page = kernel::page::PAGE_SIZE;
        (page - self.start.as_ptr() as usize % page).min(self.len)
    }

    /// Copies the bytes of `src`, which must be as many, into `self`:
    /// `EACCES` if `self` may not be written, `EINVAL` if the lengths
    /// differ. The two may overlap (a region read and written by one
    /// copy). Like `copy_from_user`, the copy tolerates others writing
    /// either side meanwhile; what a process then reads is undefined by
    /// the verbs, not by the kernel.
    pub fn copy_from(&self, src: &SharedRange<'_>) -> Result {
        if !self.writable() {
            return Err(EACCES);
        }
        if src.len != self.len {
            return Err(EINVAL);
        }
        // SAFETY: `src` is valid for reads and `self` for writes of `len` bytes (their invariants,
        // `self` writable as checked); no Rust reference exists over foreign bytes, and Rust
        // buffers are borrowed by the ranges, so raw accesses race with no reference.
        unsafe { copy_bytes(src.start.as_ptr(), self.start.as_ptr(), self.len) };
        Ok(())
    }

    /// The start address, for the kapi to hand to C.
    pub(in crate::kapi) fn as_ptr(&self) -> *mut u8 {
        self.start.as_ptr()
    }

    /// Whether the bytes are memory outside Rust's ownership.
    pub(in crate::kapi) fn is_foreign(&self) -> bool {
        matches!(self.origin, Origin::Foreign { .. })
    }
}

/// Copies `len` bytes from `src` to `dst`, which may overlap.
///
/// Disjoint ranges (every copy of the data path but a region read and
/// written by one request) take the kernel's `memcpy`: without ERMS it is
/// an unrolled loop, where `memmove` takes `rep movsq` for pieces whose
/// ends share their low byte (pages), which TCG runs slower (user space in
/// the VM, copies by page: 2800 against 2400 MiB/s).
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and
/// no Rust reference may cover either.
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    let (from, to) = (src as usize, dst as usize);
    if from.wrapping_add(len) <= to || to.wrapping_add(len) <= from {
        // SAFETY: the caller's contract, and the two ranges do not overlap
        // (checked; neither wraps, since each is valid for `len` bytes).
        unsafe { core::ptr::copy_nonoverlapping(src, dst, len) };
    } else {
        // SAFETY: the caller's contract; `copy` allows overlap.
        unsafe { core::ptr::copy(src, dst, len) };
    }
}

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
    /// The first eight bytes of `range`, if it has them, may be written
    /// and starts 8-byte aligned.
    pub fn at(range: &SharedRange<'a>) -> Option<Self> {
        if range.len() < 8 || !range.writable() || range.as_ptr() as usize % 8 != 0 {
            return None;
        }
        // INVARIANT: eight aligned bytes of a writable range, valid for
        // reads and writes for `'a` by its invariant.
        Some(Self {
            word: NonNull::new(range.as_ptr().cast::<u64>())?,
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
