// SPDX-License-Identifier: GPL-2.0

//! A table of objects by number (QP numbers, memory keys, address handle
//! numbers, devices by interface index), read locklessly under RCU.
//!
//! The table holds plain pointers to objects owned elsewhere (by the RDMA
//! core or by their verbs container). What keeps such a pointer from
//! outliving its object is the object's [`Listing`]: listed objects are the
//! kapi's own types ([`Listable`]), whose destruction unlists them, waiting
//! for lookups to end, before any part of them drops or their memory goes.
//! A driver may take an object out earlier with [`ObjectTable::remove`].

use crate::bindings;
use crate::kapi::rcu::{self, RcuReadGuard};
use core::cell::UnsafeCell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use kernel::alloc::flags::GFP_KERNEL;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

struct Inner {
    xa: Opaque<bindings::xarray>,
    /// The next number cyclic allocation tries; written under the xarray's
    /// lock by `xa_alloc_cyclic`.
    next: UnsafeCell<u32>,
}

// SAFETY: the xarray is internally locked, and `next` is only touched under
// its lock; the entries are plain pointers the xarray does not follow.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Inner {
    /// Forgets entry `id`, without waiting for lookups that found it.
    fn erase(&self, id: u32) {
        // SAFETY: the xarray is initialised.
        unsafe { bindings::srnic_xa_erase(self.xa.get(), id as usize) };
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Listings hold the table while they are listed, so none is left.
        // SAFETY: no other user remains once the last reference drops.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}

/// Marks a listing that an insertion has claimed and not yet completed.
fn claimed() -> *mut Inner {
    NonNull::dangling().as_ptr()
}

/// Where an object records the table entry that names it.
///
/// # Invariants
///
/// `table` is null (not listed), [`claimed`] (an insertion under way), or
/// a pointer from `Arc::into_raw` of the table the object is entered in
/// under number `id`, whose reference the listing owns.
pub struct Listing {
    table: AtomicPtr<Inner>,
    id: AtomicU32,
}

impl Listing {
    /// Not listed.
    pub(crate) const fn new() -> Self {
        Self {
            table: AtomicPtr::new(ptr::null_mut()),
            id: AtomicU32::new(0),
        }
    }

    /// Takes the object out of the table it is listed in, if any, and
    /// waits until no lookup can still see it: the object may go after.
    /// Sleeps if it was listed.
    ///
    /// The kapi calls it when an object is destroyed, while no one else
    /// uses the object (so no insertion of it is under way).
    pub(crate) fn unlist(&self) {
        self.take(None);
    }

    /// Unlists the object if it is listed in `only` (any table: `None`);
    /// an insertion under way is left to finish.
    fn take(&self, only: Option<*const Inner>) {
        let raw = self.table.load(Ordering::Acquire);
        if raw.is_null() || raw == claimed() || only.is_some_and(|t| !ptr::eq(t, raw)) {
            return;
        }
        if self
            .table
            .compare_exchange(raw, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        // SAFETY: `raw` came from `Arc::into_raw` (type invariant), and the
        // exchange above made this call the one owner of that reference.
        let table = unsafe { Arc::from_raw(raw) };
        table.erase(self.id.load(Ordering::Acquire));
        // Not proven by type: like every sleeping function, unlisting is
        // documented to need process context outside a read-side section
        // (the kernel's `might_sleep` and lockdep checks report a caller
        // that breaks it).
        // SAFETY: objects are taken out by destroy verbs and teardown, in
        // process context and holding no guard.
        unsafe { rcu::synchronize() };
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        self.unlist();
    }
}

/// Objects a table can hold: the kapi's verbs objects and devices.
///
/// # Safety
///
/// `listing` always returns the same [`Listing`], and whoever destroys the
/// object calls [`Listing::unlist`] on it (or drops it) before any other
/// part of the object drops and before its memory is freed or reused.
pub unsafe trait Listable {
    /// The object's listing.
    fn listing(&self) -> &Listing;
}

/// Numbers in `min..=max` mapped to `&T`.
///
/// # Invariants
///
/// `inner.xa` is initialised by `new` and destroyed only when the last
/// reference to `inner` drops, and `inner.next` is accessed only under its
/// lock. Every entry points to a `T` whose [`Listing`] records the entry,
/// so it stays valid until the entry is erased and a grace period has
/// passed (the [`Listable`] contract).
pub struct ObjectTable<T> {
    inner: Arc<Inner>,
    min: u32,
    max: u32,
    _objects: core::marker::PhantomData<*const T>,
}

// SAFETY: the xarray is internally locked; entries are only handed out as
// `&T`, so `T: Sync` is what sharing requires.
unsafe impl<T: Sync> Send for ObjectTable<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for ObjectTable<T> {}

impl<T: Listable> ObjectTable<T> {
    /// An empty table handing out numbers in `min..=max`.
    pub fn new(min: u32, max: u32) -> Result<Self> {
        let inner = Arc::new(
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
    /// number is not reused soon after its object went away. `EBUSY` if
    /// the object is listed (in this table or another) already.
    pub fn insert(&self, object: &T) -> Result<u32> {
        self.list(object, |entry| {
            let mut id = 0u32;
            // SAFETY: the xarray is initialised; `next` is only touched
            // under its lock, which `xa_alloc_cyclic_irq` takes.
            let ret = unsafe {
                bindings::srnic_xa_alloc_cyclic(
                    self.inner.xa.get(),
                    &mut id,
                    entry,
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
        })
    }

    /// Enters `object` under exactly `id`, which may lie outside the cyclic
    /// range (QP1); `EBUSY` if the number is taken or the object listed.
    pub fn insert_at(&self, id: u32, object: &T) -> Result {
        self.list(object, |entry| {
            // SAFETY: the xarray is initialised; `EBUSY` if the number is
            // taken.
            to_result(unsafe { bindings::srnic_xa_insert(self.inner.xa.get(), id as usize, entry) })
                .map(|()| id)
        })
        .map(|_| ())
    }

    /// Claims the listing of `object`, enters it with `enter`, and records
    /// the entry in the listing.
    fn list(
        &self,
        object: &T,
        enter: impl FnOnce(*mut core::ffi::c_void) -> Result<u32>,
    ) -> Result<u32> {
        let listing = object.listing();
        listing
            .table
            .compare_exchange(
                ptr::null_mut(),
                claimed(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .map_err(|_| EBUSY)?;
        let entry: *const T = object;
        match enter(entry.cast_mut().cast()) {
            Ok(id) => {
                listing.id.store(id, Ordering::Release);
                let table = Arc::into_raw(self.inner.clone()).cast_mut();
                listing.table.store(table, Ordering::Release);
                Ok(id)
            }
            Err(err) => {
                listing.table.store(ptr::null_mut(), Ordering::Release);
                Err(err)
            }
        }
    }

    /// The object numbered `id`, valid while `guard` lives.
    pub fn get<'g>(&self, _guard: &'g RcuReadGuard, id: u32) -> Option<&'g T> {
        // SAFETY: `xa_load` may run under RCU alone. An entry is removed and a grace period passes
        // before its object may drop or be freed (`Listable`), so what we load stays valid for the
        // read-side section `guard` spans.
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

    /// Takes `object` out of this table, if it is listed here, and waits
    /// until no lookup can still see it. Sleeps: call it from process
    /// context outside any [`rcu::RcuReadGuard`], as every sleeping
    /// function.
    pub fn remove(&self, object: &T) {
        let table: *const Inner = &*self.inner;
        object.listing().take(Some(table));
    }
}
