// SPDX-License-Identifier: GPL-2.0

//! RCU read-side sections, and waiting for the ones in progress.
//!
//! Object tables are read under RCU on the data path, so a lookup costs no
//! atomic operation; removing an object waits for a grace period before its
//! memory may go.

use core::marker::PhantomData;

/// An RCU read-side critical section, ended on drop. Not `Send`: it must end
/// in the task that began it.
///
/// # Invariants
///
/// The value holds the read-side section its `new` began, which only its
/// `drop` ends.
pub struct RcuReadGuard {
    _not_send: PhantomData<*mut ()>,
}

impl RcuReadGuard {
    /// Begins a read-side section.
    pub fn new() -> Self {
        // SAFETY: always allowed; balanced in `drop`.
        unsafe { crate::bindings::srnic_rcu_read_lock() };
        Self {
            _not_send: PhantomData,
        }
    }
}

impl Default for RcuReadGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RcuReadGuard {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, balances the lock taken in `new`, in
        // the same task (not `Send`).
        unsafe { crate::bindings::srnic_rcu_read_unlock() };
    }
}

/// Waits until every read-side section that began before the call has
/// ended. Sleeps.
///
/// # Safety
///
/// Process context, and no read-side section open in this task (no
/// [`RcuReadGuard`] alive on its stack). Inside one, the wait would not
/// wait for it: the sleep ends the section's protection on a kernel
/// without preemptible RCU, so objects it found could be freed under it
/// by others' waits that then return.
pub unsafe fn synchronize() {
    // SAFETY: process context, outside any read-side section of this task
    // (the caller's contract).
    unsafe { crate::bindings::synchronize_rcu() };
}
