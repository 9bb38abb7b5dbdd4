// SPDX-License-Identifier: GPL-2.0

//! The kernel's fastest CRC-32 (the IEEE 802.3 polynomial, reflected), the
//! CRC under RoCEv2's ICRC: the crypto API's `crc32`, whose best driver on
//! x86 folds 64 bytes at a time with carry-less multiplies
//! (`crc32-pclmul`), or the library's table-driven `crc32_le()`.
//!
//! Which one is faster depends on the CPU: carry-less multiplies win by
//! several times on hardware, but a CPU that emulates them (QEMU's TCG)
//! or makes saving the FPU state dear can run the table faster. An engine
//! made with [`Crc32Engine::new`] times both, as the kernel's RAID and XOR
//! code time their routines, and keeps the driver only if it is faster by
//! a margin; [`Crc32Engine::like`] makes more engines of the same choice
//! without timing again.
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
    timing: Option<Timing>,
}

/// What the choice of an engine was based on: the best time of each
/// candidate for [`TIMED_BYTES`] bytes.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Nanoseconds through the crypto API's driver.
    pub driver_ns: u64,
    /// Nanoseconds through the library's `crc32_le()`.
    pub library_ns: u64,
}

/// Bytes of one timed pass: a packet's payload at the 1024-byte path MTU
/// of a 1500-byte wire, what most ICRCs cover, sixteen times.
pub const TIMED_BYTES: usize = 16 * TIMED_RUN;

/// Bytes of one run of a timed pass.
const TIMED_RUN: usize = 1024;

/// Passes per candidate, alternating; each candidate's fastest counts,
/// so that an interrupt in one pass does not decide.
const TIMED_PASSES: usize = 6;

/// The driver is kept if it takes at most this share (in 1/16) of the
/// library's time: a margin for costs the timing does not see (the FPU
/// state a softirq saves when it interrupts a user task). Under QEMU's
/// TCG the driver times at 0.72 to 0.77 of the library, and in a profile
/// of a bulk transfer it cost 0.6 of the library per byte, FPU included;
/// a share of 12 made the choice a coin toss there. On hardware the
/// driver is several times faster.
const DRIVER_SHARE_SIXTEENTHS: u64 = 15;

// SAFETY: a transform may be used from any context and CPU at once (each
// update runs on its own descriptor on the stack); freeing it is `drop`'s.
unsafe impl Send for Crc32Engine {}
// SAFETY: as above: the shared uses only read the handle.
unsafe impl Sync for Crc32Engine {}

impl Crc32Engine {
    /// The crypto API's best `crc32` driver if it is faster on this CPU
    /// than the library function by a margin
    /// ([`DRIVER_SHARE_SIXTEENTHS`]), else the library function.
    /// Allocating may load a module, so: process context.
    pub fn new() -> Self {
        // SAFETY: allocates a transform (or returns null), which `drop`
        // frees.
        let tfm = unsafe { bindings::srnic_crc32_engine_alloc() };
        // INVARIANT: null, or allocated here with its state size checked.
        let mut engine = Self { tfm, timing: None };
        if tfm.is_null() {
            return engine;
        }
        let Ok(timing) = engine.time_candidates() else {
            // No memory to time with: the driver is the better guess.
            return engine;
        };
        engine.timing = Some(timing);
        if timing.driver_ns.saturating_mul(16)
            > timing.library_ns.saturating_mul(DRIVER_SHARE_SIXTEENTHS)
        {
            // SAFETY: allocated above and not used since but for timing.
            unsafe { bindings::srnic_crc32_engine_free(engine.tfm) };
            // INVARIANT: null.
            engine.tfm = core::ptr::null_mut();
        }
        engine
    }

    /// An engine that computes as `chosen` does, without timing again:
    /// one choice for the whole module, so that every namespace's
    /// packets, and both ends of a wire within one node, go through the
    /// same CRC implementation whatever the timings of the moment would
    /// say. The library if the driver cannot be allocated now (its
    /// [`Self::timing`] is then `None`). Allocating may sleep and load a
    /// module, so: process context, as for [`Self::new`].
    pub fn like(chosen: &Self) -> Self {
        let tfm = if chosen.tfm.is_null() {
            core::ptr::null_mut()
        } else {
            // SAFETY: no precondition but process context, which this
            // function requires of its callers (above); the transform
            // (or null) is this engine's, which `drop` frees.
            unsafe { bindings::srnic_crc32_engine_alloc() }
        };
        // The timing that chose, if this engine follows it.
        let timing = if tfm.is_null() == chosen.tfm.is_null() {
            chosen.timing
        } else {
            None
        };
        // INVARIANT: null, or allocated here with its state size checked.
        Self { tfm, timing }
    }

    /// The best time of the driver and of the library over
    /// [`TIMED_BYTES`] bytes.
    fn time_candidates(&self) -> Result<Timing> {
        let mut bytes = KVec::with_capacity(TIMED_RUN, GFP_KERNEL)?;
        // Any contents do; a counter keeps them from being one value.
        for at in 0..TIMED_RUN {
            bytes.push(at as u8, GFP_KERNEL)?;
        }
        let mut timing = Timing {
            driver_ns: u64::MAX,
            library_ns: u64::MAX,
        };
        // The first pass of each also brings its code and tables into
        // the caches; the minimum discounts it.
        for _ in 0..TIMED_PASSES {
            timing.driver_ns = timing.driver_ns.min(time_pass(self.tfm, &bytes));
            timing.library_ns = timing
                .library_ns
                .min(time_pass(core::ptr::null_mut(), &bytes));
        }
        Ok(timing)
    }

    /// What the choice was based on; `None` if there was no driver to
    /// time.
    pub fn timing(&self) -> Option<Timing> {
        self.timing
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

/// Nanoseconds for [`TIMED_BYTES`] bytes through `tfm` (null: the
/// library), in runs of `bytes`, by this CPU's scheduler clock
/// (`local_clock()`): it resolves nanoseconds where the timekeeping clock
/// has fallen back to jiffies (a VM whose vCPUs' TSCs disagree, where
/// both candidates read 0 ns). Preemption stays off so that the pass
/// begins and ends on one CPU's clock.
fn time_pass(tfm: *mut bindings::crypto_shash, bytes: &[u8]) -> u64 {
    // SAFETY: balanced below; nothing in between sleeps (a shash update
    // does not).
    unsafe { bindings::srnic_preempt_disable() };
    // SAFETY: no preconditions.
    let start = unsafe { bindings::srnic_local_clock() };
    let mut register = 0u32;
    for _ in 0..TIMED_BYTES / TIMED_RUN {
        // SAFETY: `bytes` is valid for reads of its length; `tfm` is null
        // or a live transform of the engine being made.
        register = unsafe {
            bindings::srnic_crc32_update(tfm, register, bytes.as_ptr().cast(), bytes.len())
        };
    }
    // Keeps the runs from being optimised away.
    core::hint::black_box(register);
    // SAFETY: no preconditions.
    let end = unsafe { bindings::srnic_local_clock() };
    // SAFETY: pairs with the disable above.
    unsafe { bindings::srnic_preempt_enable() };
    end.saturating_sub(start)
}

impl Default for Crc32Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Crc32Engine {
    fn drop(&mut self) {
        if !self.tfm.is_null() {
            // SAFETY: allocated by `new` or `like`, freed once, here;
            // `&mut self` means no update is running.
            unsafe { bindings::srnic_crc32_engine_free(self.tfm) };
        }
    }
}
