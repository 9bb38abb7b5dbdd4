// SPDX-License-Identifier: GPL-2.0

//! Event counters with one copy per CPU: counting is a local add without
//! atomics or shared cache lines, reading sums the copies.

use crate::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;

/// `N` per-CPU `u64` counters.
///
/// # Invariants
///
/// `base` is this value's own per-CPU allocation of `N` `u64` counters
/// (`N` fits in a `u32`), freed only by `drop`.
pub struct PerCpuCounters<const N: usize> {
    base: NonNull<u64>,
}

// SAFETY: each CPU writes only its own copy (with preemption-safe
// `this_cpu_add`); reads only sum.
unsafe impl<const N: usize> Send for PerCpuCounters<N> {}
// SAFETY: as above.
unsafe impl<const N: usize> Sync for PerCpuCounters<N> {}

impl<const N: usize> PerCpuCounters<N> {
    /// `N` counters at zero.
    pub fn new() -> Result<Self> {
        let count = u32::try_from(N).map_err(|_| EINVAL)?;
        // SAFETY: allocates zeroed per-CPU memory, freed in `drop`.
        let base = unsafe { bindings::srnic_percpu_counters_alloc(count) };
        Ok(Self {
            base: NonNull::new(base).ok_or(ENOMEM)?,
        })
    }

    /// Adds `value` to counter `index` (ignored if out of range).
    pub fn add(&self, index: usize, value: u64) {
        if index < N {
            // SAFETY: by the type invariant `base` holds `N` counters, and
            // `index` is below `N`.
            unsafe { bindings::srnic_percpu_counter_add(self.base.as_ptr(), index as u32, value) };
        }
    }

    /// Counter `index` summed over all CPUs.
    pub fn sum(&self, index: usize) -> u64 {
        if index >= N {
            return 0;
        }
        // SAFETY: as in `add`.
        unsafe { bindings::srnic_percpu_counter_sum(self.base.as_ptr(), index as u32) }
    }
}

impl<const N: usize> Drop for PerCpuCounters<N> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, our allocation, freed once.
        unsafe { bindings::srnic_percpu_counters_free(self.base.as_ptr()) };
    }
}

/// A count many CPUs change at once, kept as the kernel's
/// `percpu_counter`: an add changes this CPU's share, and folds it into
/// the shared total only once it reaches `BATCH` either way. Reading the
/// total is cheap and off by at most `BATCH` per online CPU, which suits a
/// bound that must hold roughly without a cache line written per event.
///
/// # Invariants
///
/// `raw` is this value's own initialised `percpu_counter`, destroyed and
/// freed only by `drop`.
pub struct ApproximateCount<const BATCH: i32> {
    raw: NonNull<bindings::percpu_counter>,
}

// SAFETY: `percpu_counter` is made to be added to and read from any CPU
// and context at once (its folding lock is taken with interrupts off).
unsafe impl<const BATCH: i32> Send for ApproximateCount<BATCH> {}
// SAFETY: as above.
unsafe impl<const BATCH: i32> Sync for ApproximateCount<BATCH> {}

impl<const BATCH: i32> ApproximateCount<BATCH> {
    /// A count at zero; may sleep.
    pub fn new() -> Result<Self> {
        // SAFETY: allocates and initialises a counter, freed in `drop`.
        let raw = unsafe { bindings::srnic_approximate_count_new() };
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
        })
    }

    /// Adds `amount` (which may be negative).
    pub fn add(&self, amount: i64) {
        // SAFETY: by the type invariant `raw` is a live, initialised counter.
        unsafe { bindings::srnic_approximate_count_add(self.raw.as_ptr(), amount, BATCH) };
    }

    /// The shared total, without the shares not yet folded into it.
    pub fn approximate(&self) -> i64 {
        // SAFETY: as in `add`.
        unsafe { bindings::srnic_approximate_count_read(self.raw.as_ptr()) }
    }
}

impl<const BATCH: i32> Drop for ApproximateCount<BATCH> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, our counter, destroyed once.
        unsafe { bindings::srnic_approximate_count_free(self.raw.as_ptr()) };
    }
}
