// SPDX-License-Identifier: GPL-2.0

//! Delayed work on the system workqueue, embedded in a pinned owner: the
//! `kernel` crate of 6.12 has work items but no delayed ones.

use crate::bindings;
use core::marker::PhantomData;
use core::pin::Pin;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::types::Opaque;

/// An owner that embeds a [`DelayedWork`] and runs when it fires.
///
/// # Safety
///
/// `OFFSET` is the byte offset of the `DelayedWork<Self>` field in `Self`,
/// and `Drop` of `Self` begins with that field's
/// [`DelayedWork::cancel_sync`] (before any field drops, the work may still
/// be running). [`impl_has_delayed_work!`] implements both.
pub unsafe trait HasDelayedWork: Sized + Sync {
    /// `core::mem::offset_of!(Self, field)`.
    const OFFSET: usize;
    /// The work ran. Process context; may sleep.
    fn run(&self);
}

/// Implements [`HasDelayedWork`] for `owner`, whose field `field` is its
/// `DelayedWork<owner>`, and `Drop` for `owner`: it cancels the work, then
/// runs the body given (if any). The offset is the field's, and the macro
/// checks the field's type (a `DelayedWork` of another owner, or a type
/// that merely derefs to one, does not compile):
///
/// ```ignore
/// impl_has_delayed_work! {
///     impl HasDelayedWork for LanDev { ticker } fn run(&self) { self.tick(); }
///     fn drop(&mut self) { self.teardown(); }
/// }
/// ```
// iblan's name service uses it; srnic, which compiles the same tree, does not.
#[allow(unused_macros)]
macro_rules! impl_has_delayed_work {
    (impl HasDelayedWork for $owner:ty { $field:ident } fn run(&$this:ident) $body:block) => {
        impl_has_delayed_work! {
            impl HasDelayedWork for $owner { $field } fn run(&$this) $body
            fn drop(&mut self) {}
        }
    };
    (impl HasDelayedWork for $owner:ty { $field:ident } fn run(&$this:ident) $body:block
     fn drop(&mut $dthis:ident) $drop:block) => {
        // SAFETY: `OFFSET` is the offset of `$field`, which the function
        // below proves is a `DelayedWork<$owner>` (a raw pointer to a field
        // has the field's exact type: no deref coercion); the `Drop` below
        // cancels it first.
        unsafe impl $crate::kapi::work::HasDelayedWork for $owner {
            const OFFSET: usize = {
                #[allow(dead_code)]
                fn field_is_its_work(owner: &$owner) {
                    let _: *const $crate::kapi::work::DelayedWork<$owner> =
                        ::core::ptr::addr_of!(owner.$field);
                }
                ::core::mem::offset_of!($owner, $field)
            };
            fn run(&$this) $body
        }

        impl Drop for $owner {
            fn drop(&mut $dthis) {
                // Before any field drops: a running instance would use it.
                $dthis.$field.cancel_sync();
                $drop
            }
        }
    };
}

/// A `struct delayed_work` inside its owner `T`.
///
/// The owner is usually built by value and moved to its final place (a
/// netdev's private area, pinned there) before the work may be initialised
/// there, so initialisation is a step of its own ([`Self::init`]) that the
/// work records: until it has happened, [`Self::schedule`] and
/// [`Self::cancel_sync`] do nothing rather than touch uninitialised memory.
///
/// # Invariants
///
/// `raw` is an initialised `delayed_work` whose function is
/// [`Self::trampoline`] once `state` reads `READY` (with acquire
/// ordering), and stays so.
#[repr(C)]
pub struct DelayedWork<T: HasDelayedWork> {
    // First: the work's address is the `DelayedWork`'s (the trampoline
    // finds the owner from it).
    raw: Opaque<bindings::delayed_work>,
    state: AtomicU8,
    _owner: PhantomData<T>,
}

/// `DelayedWork::state`: not initialised, being initialised, ready.
const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;

// SAFETY: the workqueue serialises the work item; scheduling and
// cancelling are safe from any thread.
unsafe impl<T: HasDelayedWork> Sync for DelayedWork<T> {}
// SAFETY: as above.
unsafe impl<T: HasDelayedWork> Send for DelayedWork<T> {}

impl<T: HasDelayedWork> Default for DelayedWork<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: HasDelayedWork> DelayedWork<T> {
    /// Not initialised yet: [`Self::init`] it in its final place.
    pub const fn new() -> Self {
        Self {
            raw: Opaque::uninit(),
            state: AtomicU8::new(UNINIT),
            _owner: PhantomData,
        }
    }

    /// Initialises the work of `owner`, the first time it is called; later
    /// calls (and one racing the first) do nothing. The owner is pinned: it
    /// stays at this address until its `Drop`, which cancels the work
    /// first (the trait's contract).
    pub fn init(owner: Pin<&T>) {
        let owner: &T = owner.get_ref();
        // SAFETY: `T::OFFSET` is the offset of the owner's `DelayedWork<T>`
        // field (the trait's contract), inside the live owner.
        let work = unsafe {
            &*core::ptr::from_ref(owner)
                .cast::<u8>()
                .add(T::OFFSET)
                .cast::<Self>()
        };
        if work
            .state
            .compare_exchange(UNINIT, INITIALISING, Ordering::Acquire, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        // SAFETY: this call alone moved the state from `UNINIT`, so the work
        // was never initialised, scheduled or run, and nobody else writes
        // it meanwhile (the others see it not ready and leave it alone).
        unsafe { bindings::srnic_init_delayed_work(work.raw.get(), Some(Self::trampoline)) };
        work.state.store(READY, Ordering::Release);
    }

    /// Whether [`Self::init`] has initialised the work.
    pub fn is_ready(&self) -> bool {
        self.state.load(Ordering::Acquire) == READY
    }

    /// Runs the work after `delay_ms` (again: the new delay replaces a
    /// pending one). Before [`Self::init`], does nothing and says so.
    pub fn schedule(&self, delay_ms: u64) -> bool {
        self.arm(delay_ms, true)
    }

    /// Runs the work after `delay_ms` unless a run is already pending, which
    /// keeps its own delay: a periodic re-arm at the end of a run must not
    /// postpone a run that something asked for during it. Before
    /// [`Self::init`], does nothing and says so.
    pub fn schedule_unless_pending(&self, delay_ms: u64) -> bool {
        self.arm(delay_ms, false)
    }

    fn arm(&self, delay_ms: u64, replace_pending: bool) -> bool {
        if !self.is_ready() {
            return false;
        }
        let delay_ms = delay_ms.try_into().unwrap_or(usize::MAX);
        let raw = self.raw.get();
        // SAFETY: ready, so initialised (type invariant); the owner was pinned at `init` and
        // cancels the work in its `Drop` before it goes (the trait's contract), and nothing
        // schedules from then on (`Drop` holds the only reference).
        unsafe {
            if replace_pending {
                bindings::srnic_mod_delayed_work(raw, delay_ms)
            } else {
                bindings::srnic_queue_delayed_work(raw, delay_ms)
            }
        };
        true
    }

    /// Cancels the work and waits for a running instance to finish (nothing
    /// to do before [`Self::init`]: it cannot have been scheduled). Must
    /// not be called from the work itself or under a lock it takes.
    pub fn cancel_sync(&self) {
        if !self.is_ready() {
            return;
        }
        // SAFETY: ready, so initialised (type invariant).
        unsafe { bindings::cancel_delayed_work_sync(self.raw.get()) };
    }

    /// # Safety
    ///
    /// Called only by the workqueue for a work item this module initialised.
    unsafe extern "C" fn trampoline(work: *mut bindings::work_struct) {
        // The owner was pinned at `init`, and its `Drop` cancels the work (waiting for this run)
        // before anything of it goes (the trait's contract).
        // SAFETY: the work is the first field of a `delayed_work`, the first field of a
        // `repr(C)` `DelayedWork<T>` at `T::OFFSET` in that live owner.
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
