// SPDX-License-Identifier: GPL-2.0

//! Delayed work on the system workqueue, embedded in a pinned owner: the
//! `kernel` crate of 6.12 has work items but no delayed ones.

use crate::bindings;
use core::marker::PhantomData;
use kernel::types::Opaque;

/// An owner that embeds a [`DelayedWork`] and runs when it fires.
///
/// # Safety
///
/// `OFFSET` is the byte offset of the `DelayedWork<Self>` field in `Self`.
pub unsafe trait HasDelayedWork: Sized + Sync {
    /// `core::mem::offset_of!(Self, field)`.
    const OFFSET: usize;
    /// The work ran. Process context; may sleep.
    fn run(&self);
}

/// A `struct delayed_work` inside its owner `T`.
#[repr(transparent)]
pub struct DelayedWork<T: HasDelayedWork> {
    raw: Opaque<bindings::delayed_work>,
    _owner: PhantomData<T>,
}

// SAFETY: the workqueue serialises the work item; scheduling and
// cancelling are safe from any thread.
unsafe impl<T: HasDelayedWork> Sync for DelayedWork<T> {}
// SAFETY: as above.
unsafe impl<T: HasDelayedWork> Send for DelayedWork<T> {}

impl<T: HasDelayedWork> DelayedWork<T> {
    /// Uninitialised: [`Self::init`] before first use.
    pub const fn new() -> Self {
        Self {
            raw: Opaque::uninit(),
            _owner: PhantomData,
        }
    }

    /// Initialises the work.
    ///
    /// # Safety
    ///
    /// The owner is at its final address and stays there until
    /// [`Self::cancel_sync`] has run after the last `schedule`; the work is
    /// not pending or running.
    pub unsafe fn init(&self) {
        // SAFETY: writable, idle work, per the caller.
        unsafe { bindings::srnic_init_delayed_work(self.raw.get(), Some(Self::trampoline)) };
    }

    /// Runs the work after `delay_ms` (again: the new delay replaces a
    /// pending one).
    pub fn schedule(&self, delay_ms: u64) {
        // SAFETY: initialised, per `init`'s contract.
        unsafe {
            bindings::srnic_mod_delayed_work(
                self.raw.get(),
                delay_ms.try_into().unwrap_or(usize::MAX),
            )
        };
    }

    /// Cancels the work and waits for a running instance to finish. Must
    /// not be called from the work itself or under a lock it takes.
    pub fn cancel_sync(&self) {
        // SAFETY: initialised.
        unsafe { bindings::cancel_delayed_work_sync(self.raw.get()) };
    }

    /// # Safety
    ///
    /// Called only by the workqueue for a work item this module initialised.
    unsafe extern "C" fn trampoline(work: *mut bindings::work_struct) {
        // SAFETY: the work is the first field of a `delayed_work`, which is
        // the transparent content of a `DelayedWork<T>` at `T::OFFSET` in a
        // live owner (`init`'s contract).
        let owner = unsafe { &*work.cast::<u8>().sub(T::OFFSET).cast::<T>() };
        owner.run();
    }
}

/// Milliseconds since boot, at jiffy resolution.
pub fn now_ms() -> u64 {
    // SAFETY: reads the jiffies counter.
    unsafe { bindings::srnic_jiffies_ms() }
}

/// Sleeps for about `ms` milliseconds. Process context.
pub fn sleep_ms(ms: u32) {
    // SAFETY: sleeping has no preconditions beyond process context, which
    // the caller's context is.
    unsafe { bindings::msleep(ms) };
}
