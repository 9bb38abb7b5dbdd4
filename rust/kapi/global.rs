// SPDX-License-Identifier: GPL-2.0

//! Module-wide state for C callbacks that carry no context pointer.

use core::pin::Pin;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::alloc::KBox;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

use super::rcu::{self, RcuReadGuard};

/// State that a module installs once at init and removes at exit, reachable
/// from callbacks such as `rdma_link_ops::newlink` that get no private data.
pub struct ModuleGlobal<T> {
    ptr: AtomicPtr<T>,
}

// SAFETY: the global only hands out shared references to `T`, from any
// thread, and moves the owning box between threads at init and exit; that is
// sound when `T` is `Sync` and `Send`.
unsafe impl<T: Send + Sync> Sync for ModuleGlobal<T> {}

impl<T> Default for ModuleGlobal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ModuleGlobal<T> {
    /// An empty global.
    pub const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Installs `value`; fails with `EBUSY` if a value is installed already.
    pub fn install(&self, value: Pin<KBox<T>>) -> Result {
        // SAFETY: the box is turned back into a box only by `remove`, which
        // never moves the value out of it, so the pin is kept.
        let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(value) });
        if self
            .ptr
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `raw` came from `KBox::into_raw` above and was not
            // published.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(EBUSY);
        }
        Ok(())
    }

    /// The installed value, if any.
    pub fn get(&'static self) -> Option<&'static T> {
        let raw = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer was published by `install` and stays
        // valid until `remove`, whose caller guarantees that no reference
        // handed out here is still in use.
        unsafe { raw.as_ref() }
    }

    /// Takes the installed value back.
    ///
    /// # Safety
    ///
    /// Every path that may call [`Self::get`] must have been shut down (its
    /// callbacks unregistered and finished), so that no reference obtained
    /// from `get` outlives this call.
    pub unsafe fn remove(&self) -> Option<Pin<KBox<T>>> {
        let raw = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        if raw.is_null() {
            return None;
        }
        // SAFETY: `raw` came from `KBox::into_raw` in `install` and was
        // pinned there; it is unpublished now, so this is the only owner.
        Some(unsafe { Pin::new_unchecked(KBox::from_raw(raw)) })
    }
}

/// State a module installs once at init and removes at exit, reachable
/// from callbacks that get no private data, and shared by reference count:
/// [`Self::get`] hands out an [`Arc`], so taking the state out needs no
/// promise about who still uses it; the last holder frees it.
///
/// # Invariants
///
/// `ptr` is null or comes from `Arc::into_raw` of a reference the global
/// owns; [`Self::remove`] unpublishes it and waits for a grace period
/// before giving that reference up.
pub struct SharedGlobal<T> {
    ptr: AtomicPtr<T>,
}

// SAFETY: the global hands out `Arc<T>` to any thread and gives its own up
// on any thread; that is sound when `T` is `Send` and `Sync`.
unsafe impl<T: Send + Sync> Sync for SharedGlobal<T> {}

impl<T> Default for SharedGlobal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> SharedGlobal<T> {
    /// An empty global.
    pub const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Installs `value`; fails with `EBUSY` if a value is installed already.
    pub fn install(&self, value: Arc<T>) -> Result {
        let raw = Arc::into_raw(value).cast_mut();
        if self
            .ptr
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `raw` came from `Arc::into_raw` above and was not
            // published.
            drop(unsafe { Arc::from_raw(raw) });
            return Err(EBUSY);
        }
        Ok(())
    }

    /// The installed value, if any.
    pub fn get(&self) -> Option<Arc<T>> {
        let _guard = RcuReadGuard::new();
        let raw = self.ptr.load(Ordering::Acquire);
        if raw.is_null() {
            return None;
        }
        // SAFETY: `raw` came from `Arc::into_raw` (type invariant), and the
        // global's reference outlives this read-side section: `remove`
        // waits for a grace period after unpublishing it.
        let borrowed = unsafe { ArcBorrow::from_raw(raw) };
        Some(borrowed.into())
    }

    /// Takes the installed value back. Sleeps (it waits for `get`s that may
    /// have found it): call it from process context outside any
    /// [`RcuReadGuard`], as every sleeping function.
    pub fn remove(&self) -> Option<Arc<T>> {
        let raw = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        if raw.is_null() {
            return None;
        }
        // Not proven by type, like every sleeping function: a caller inside
        // a read-side section would be reported by the kernel's
        // `might_sleep` and lockdep checks.
        // SAFETY: callers are module init and exit, in process context and
        // holding no guard.
        unsafe { rcu::synchronize() };
        // SAFETY: `raw` came from `Arc::into_raw` and is unpublished now,
        // so the global's reference is ours to take.
        Some(unsafe { Arc::from_raw(raw) })
    }
}
