// SPDX-License-Identifier: GPL-2.0

//! RCU read-side sections, and waiting for the ones in progress.
//!
//! Object tables are read under RCU on the data path, so a lookup costs no
//! atomic operation; removing an object waits for a grace period before its
//! memory may go.

use core::marker::PhantomData;

/// An RCU read-side critical section, ended on drop. Not `Send`: it must end
/// on the CPU that began it.
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
        // SAFETY: balances the lock taken in `new`, on the same CPU.
        unsafe { crate::bindings::srnic_rcu_read_unlock() };
    }
}

/// Waits until every read-side section that began before the call has
/// ended. Sleeps.
pub fn synchronize() {
    // SAFETY: called from process context, outside any read-side section
    // (the callers are verbs that may sleep).
    unsafe { crate::bindings::synchronize_rcu() };
}
