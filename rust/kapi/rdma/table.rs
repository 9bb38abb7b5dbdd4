// SPDX-License-Identifier: GPL-2.0

//! A table of objects by number (QP numbers, memory keys, address handle
//! numbers), read locklessly under RCU.
//!
//! The table holds plain pointers: an object is owned elsewhere (by the
//! RDMA core or by its verbs container) and must be removed, and a grace
//! period passed, before its memory goes; [`ObjectTable::remove`] does both.

use crate::bindings;
use crate::kapi::rcu::{self, RcuReadGuard};
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

struct Inner {
    xa: Opaque<bindings::xarray>,
    /// The next number cyclic allocation tries; written under the xarray's
    /// lock by `xa_alloc_cyclic`.
    next: UnsafeCell<u32>,
}

/// Numbers in `min..=max` mapped to `&T`.
///
/// # Invariants
///
/// `inner.xa` is initialised by `new` and destroyed only by `drop`, and
/// `inner.next` is accessed only under its lock. Every entry points to a
/// `T` that stays valid until the entry is erased and a grace period has
/// passed (`insert`'s contract).
pub struct ObjectTable<T> {
    inner: KBox<Inner>,
    min: u32,
    max: u32,
    _objects: core::marker::PhantomData<*const T>,
}

// SAFETY: the xarray is internally locked; entries are only handed out as
// `&T`, so `T: Sync` is what sharing requires.
unsafe impl<T: Sync> Send for ObjectTable<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for ObjectTable<T> {}

impl<T> ObjectTable<T> {
    /// An empty table handing out numbers in `min..=max`.
    pub fn new(min: u32, max: u32) -> Result<Self> {
        let inner = KBox::new(
            Inner {
                xa: Opaque::uninit(),
                next: UnsafeCell::new(min),
            },
            GFP_KERNEL,
        )?;
        // SAFETY: the xarray sits in its final place on the heap and is
        // initialised once, before any use.
        unsafe { bindings::srnic_xa_init_alloc_irq(inner.xa.get()) };
        Ok(Self {
            inner,
            min,
            max,
            _objects: core::marker::PhantomData,
        })
    }

    /// Enters `object` under a free number, handed out cyclically so that a
    /// number is not reused soon after its object went away.
    ///
    /// # Safety
    ///
    /// `object` must stay valid until it is removed with [`Self::remove`].
    pub unsafe fn insert(&self, object: NonNull<T>) -> Result<u32> {
        let mut id = 0u32;
        // SAFETY: by the type invariant, the xarray is initialised and
        // `next` only touched under its lock, which `xa_alloc_cyclic_irq`
        // takes.
        let ret = unsafe {
            bindings::srnic_xa_alloc_cyclic(
                self.inner.xa.get(),
                &mut id,
                object.as_ptr().cast(),
                self.min,
                self.max,
                self.inner.next.get(),
            )
        };
        // A full table is a resource limit; `xa_alloc_cyclic` returns 1
        // when it wrapped around, which is success.
        match to_result(ret) {
            Err(err) if err == EBUSY => Err(ENOMEM),
            Err(err) => Err(err),
            Ok(()) => Ok(id),
        }
    }

    /// Enters `object` under exactly `id`, which may lie outside the cyclic
    /// range (QP1).
    ///
    /// # Safety
    ///
    /// As for [`Self::insert`].
    pub unsafe fn insert_at(&self, id: u32, object: NonNull<T>) -> Result {
        // SAFETY: the xarray is initialised; `EBUSY` if the number is taken.
        to_result(unsafe {
            bindings::srnic_xa_insert(self.inner.xa.get(), id as usize, object.as_ptr().cast())
        })
    }

    /// The object numbered `id`, valid while `guard` lives.
    pub fn get<'g>(&self, _guard: &'g RcuReadGuard, id: u32) -> Option<&'g T> {
        // SAFETY: `xa_load` may run under RCU alone. By the type invariant,
        // an entry is removed and a grace period passes before its object
        // may be freed, so what we load stays valid for the read-side
        // section `guard` spans.
        unsafe {
            bindings::xa_load(self.inner.xa.get(), id as usize)
                .cast::<T>()
                .as_ref()
        }
    }

    /// Calls `f` with every object in the table, valid while `guard` lives.
    pub fn for_each<'g>(&self, _guard: &'g RcuReadGuard, mut f: impl FnMut(&'g T))
    where
        T: 'g,
    {
        let mut index: usize = 0;
        let mut first = true;
        loop {
            // SAFETY: the xarray is initialised; iteration under RCU sees
            // each entry that stays present, and entries stay valid for the
            // read-side section (see `get`).
            let entry = unsafe { bindings::srnic_xa_next(self.inner.xa.get(), &mut index, first) };
            first = false;
            // SAFETY: as above.
            match unsafe { entry.cast::<T>().as_ref() } {
                Some(object) => f(object),
                None => break,
            }
        }
    }

    /// Removes the object numbered `id` and waits until no lookup can still
    /// see it. Sleeps: call it from process context outside any
    /// [`rcu::RcuReadGuard`], as every sleeping function.
    pub fn remove(&self, id: u32) {
        // SAFETY: the xarray is initialised.
        unsafe { bindings::srnic_xa_erase(self.inner.xa.get(), id as usize) };
        // Not proven by type: `remove` is, like every function that sleeps
        // (a mutex, an allocation that may wait), safe to call and
        // documented to need process context outside a read-side section;
        // a caller holding a guard would be reported by the kernel's
        // `might_sleep` and lockdep checks (the debug kernel of the tests).
        // SAFETY: its callers are destroy verbs and teardown, in process
        // context and holding no guard.
        unsafe { rcu::synchronize() };
    }

    /// Removes the object numbered `id` without waiting; the caller must
    /// wait for a grace period ([`rcu::synchronize`]) before freeing it.
    pub fn remove_deferred(&self, id: u32) {
        // SAFETY: the xarray is initialised.
        unsafe { bindings::srnic_xa_erase(self.inner.xa.get(), id as usize) };
    }
}

impl<T> Drop for ObjectTable<T> {
    fn drop(&mut self) {
        // Objects still entered belong to others; only the index goes.
        // SAFETY: no other user remains once the table drops.
        unsafe { bindings::xa_destroy(self.inner.xa.get()) };
    }
}
