// SPDX-License-Identifier: GPL-2.0

//! Module-wide state for C callbacks that carry no context pointer.

use core::pin::Pin;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::alloc::KBox;
use kernel::prelude::*;

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
