// SPDX-License-Identifier: GPL-2.0

//! Spinlocks that disable interrupts or bottom halves while held.
//!
//! Verbs may be called from any context: kernel ULPs post work and poll
//! completion queues from hard-IRQ handlers, and the transport completes work
//! from softirq. Every lock those paths share is therefore taken with
//! interrupts disabled, which the `kernel` crate of 6.12 does not offer.
//! A lock that only process context and softirq share (a netdev's transmit
//! and NAPI) needs bottom halves off, nothing more: verbs posted under it
//! then run their work at once instead of deferring it.

use kernel::sync::lock::{Backend, Lock};

/// A spinlock taken with `spin_lock_irqsave`.
pub type SpinLockIrq<T> = Lock<T, IrqSpinLockBackend>;

/// Creates a [`SpinLockIrq`] initialiser with a lock class of its own.
macro_rules! new_spinlock_irq {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        kernel::sync::lock::Lock::<_, $crate::kapi::sync::IrqSpinLockBackend>::new(
            $inner,
            kernel::optional_name!($($name)?),
            kernel::static_lock_class!(),
        )
    };
}

/// The backend of [`SpinLockIrq`].
pub struct IrqSpinLockBackend;

// SAFETY: `spin_lock_irqsave` gives one CPU exclusive ownership until the
// matching `spin_unlock_irqrestore`; `relock` uses the same method (the
// trait's default calls `lock`).
unsafe impl Backend for IrqSpinLockBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: the caller passes a writable lock and a name and key that
        // live forever.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `init` ran; our bindings declare the
        // same `spinlock_t` as an opaque type.
        unsafe { crate::bindings::srnic_spin_lock_irqsave(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: the caller owns the lock, taken by `lock` with `flags`.
        unsafe { crate::bindings::srnic_spin_unlock_irqrestore(ptr.cast(), *flags) }
    }
}

/// Whether interrupts are off on this CPU: the caller holds a lock taken
/// with `spin_lock_irqsave` (`ib_mad` posts so) or runs in hard-IRQ
/// context. Sending a packet enables bottom halves, which must not happen
/// then.
pub fn irqs_disabled() -> bool {
    // SAFETY: reads this CPU's interrupt flag; no preconditions.
    unsafe { crate::bindings::srnic_irqs_disabled() }
}

/// Whether this CPU runs a softirq or holds bottom halves off: packets
/// handed to a device now wait in this CPU's backlog until bottom halves
/// run again, instead of being delivered within the call.
pub fn bottom_halves_off() -> bool {
    // SAFETY: reads this CPU's preempt count; no preconditions.
    unsafe { crate::bindings::srnic_in_softirq() }
}

/// Interrupts off on this CPU from [`IrqsOff::save`] until the value is
/// dropped, then back as they were. Values nest when dropped in the
/// reverse order of their making. Not `Send`: the state is this CPU's.
pub struct IrqsOff {
    flags: kernel::ffi::c_ulong,
    _this_cpu: core::marker::PhantomData<*mut ()>,
}

impl IrqsOff {
    /// Turns interrupts off on this CPU, remembering whether they were on.
    pub fn save() -> Self {
        Self {
            // SAFETY: saves this CPU's interrupt flag and clears it; the
            // flag goes back in `drop`, on this CPU (the value is not
            // `Send`).
            flags: unsafe { crate::bindings::srnic_local_irq_save() },
            _this_cpu: core::marker::PhantomData,
        }
    }
}

impl Drop for IrqsOff {
    fn drop(&mut self) {
        // SAFETY: `flags` came from `srnic_local_irq_save` on this CPU.
        unsafe { crate::bindings::srnic_local_irq_restore(self.flags) }
    }
}

/// Tells the CPU this one spins waiting for another (the kernel's
/// `cpu_relax`).
pub fn cpu_relax() {
    // SAFETY: a pause hint; no memory is accessed, any context may call it.
    unsafe { crate::bindings::srnic_cpu_relax() }
}

/// Lets the scheduler run others if they are due, in a long loop of
/// process context that holds no lock (a kernel without forced preemption
/// switches only at such points).
pub fn cond_resched() {
    // SAFETY: called in process context holding no spinlock or RCU read
    // lock, as documented; may sleep.
    unsafe { crate::bindings::srnic_cond_resched() }
}

/// A spinlock taken with `spin_lock_bh`: never from hard-IRQ context.
pub type SpinLockBh<T> = Lock<T, BhSpinLockBackend>;

/// Creates a [`SpinLockBh`] initialiser with a lock class of its own.
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        kernel::sync::lock::Lock::<_, $crate::kapi::sync::BhSpinLockBackend>::new(
            $inner,
            kernel::optional_name!($($name)?),
            kernel::static_lock_class!(),
        )
    };
}

/// The backend of [`SpinLockBh`].
pub struct BhSpinLockBackend;

// SAFETY: `spin_lock_bh` gives one CPU exclusive ownership until the
// matching `spin_unlock_bh`; `relock` uses the same method (the trait's
// default calls `lock`).
unsafe impl Backend for BhSpinLockBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: the caller passes a writable lock and a name and key that
        // live forever.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `init` ran; our bindings declare the
        // same `spinlock_t` as an opaque type.
        unsafe { crate::bindings::srnic_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard: &Self::GuardState) {
        // SAFETY: the caller owns the lock, taken by `lock`.
        unsafe { crate::bindings::srnic_spin_unlock_bh(ptr.cast()) }
    }
}

/// Orders every store this CPU made before it ahead of every store it
/// makes after it, for other CPUs and for devices (the kernel's `wmb`):
/// data placed in memory is there before the message that says so.
pub fn write_barrier() {
    // SAFETY: a barrier; no memory is accessed, any context may call it.
    unsafe { crate::bindings::srnic_wmb() }
}
