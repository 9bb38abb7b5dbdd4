// SPDX-License-Identifier: GPL-2.0

//! Network namespaces: a borrowed `struct net`, and a watcher that hears
//! when a namespace goes away, so per-namespace state (sockets) can be
//! released before the namespace's memory is.

use crate::bindings;
use core::marker::PhantomPinned;
use core::pin::Pin;
use kernel::alloc::KBox;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

/// A `struct net`, borrowed.
#[repr(transparent)]
pub struct Net(Opaque<bindings::net>);

impl Net {
    /// Borrows the namespace at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live namespace that stays alive for `'a` (a
    /// netdev in it is held, or the namespace's exit has not run).
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net) -> &'a Self {
        // SAFETY: `Net` is a transparent wrapper of `net`, and the caller
        // guarantees validity for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The initial namespace, which lives as long as the kernel.
    pub fn initial() -> &'static Self {
        // SAFETY: `init_net` is never freed.
        unsafe { Self::from_raw(bindings::srnic_init_net()) }
    }

    /// The raw pointer, for the abstractions in this crate.
    pub(crate) fn as_raw(&self) -> *mut bindings::net {
        self.0.get()
    }

    /// An identity for comparisons while the namespace lives (the address
    /// may be reused by a later namespace once this one is gone).
    pub fn identity(&self) -> usize {
        self.as_raw() as usize
    }

    /// A counted reference, which keeps the namespace beyond the borrow;
    /// `None` if it is being dismantled (its count reached zero).
    pub fn get(&self) -> Option<NetRef> {
        // SAFETY: the namespace is live for the borrow; a reference taken is
        // put by `NetRef`.
        let raw = unsafe { bindings::srnic_maybe_get_net(self.as_raw()) };
        core::ptr::NonNull::new(raw).map(NetRef)
    }
}

/// A counted reference on a network namespace (`get_net`).
///
/// # Invariants
///
/// Holds one reference on the namespace at `self.0`.
pub struct NetRef(core::ptr::NonNull<bindings::net>);

// SAFETY: a namespace reference may be put from any thread.
unsafe impl Send for NetRef {}
// SAFETY: `Net` exposes only thread-safe queries.
unsafe impl Sync for NetRef {}

impl core::ops::Deref for NetRef {
    type Target = Net;
    fn deref(&self) -> &Net {
        // SAFETY: the reference keeps the namespace alive (type invariant).
        unsafe { Net::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for NetRef {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds, put once.
        unsafe { bindings::srnic_put_net(self.0.as_ptr()) };
    }
}

/// What happens when a namespace goes away.
pub trait NamespaceHandler {
    /// Called in process context once the namespace's netdevs are gone,
    /// before its memory is freed; also for every namespace when the
    /// watcher is dropped.
    fn exit(net: &Net);
}

struct Operations {
    ops: Opaque<bindings::pernet_operations>,
    _pin: PhantomPinned,
}

/// A registered namespace watcher; unregistered when dropped.
pub struct NamespaceWatcher<H: NamespaceHandler> {
    operations: Pin<KBox<Operations>>,
    _handler: core::marker::PhantomData<H>,
}

// SAFETY: the operations are only touched by the namespace code, under its
// own lock; `H` has no state.
unsafe impl<H: NamespaceHandler> Send for NamespaceWatcher<H> {}
// SAFETY: as above; `&self` exposes nothing.
unsafe impl<H: NamespaceHandler> Sync for NamespaceWatcher<H> {}

impl<H: NamespaceHandler> NamespaceWatcher<H> {
    /// Registers `H` for the exit of every namespace.
    pub fn register() -> Result<Self> {
        let ops = bindings::pernet_operations {
            exit: Some(Self::exit_call),
            ..Default::default()
        };
        let operations = KBox::pin(
            Operations {
                ops: Opaque::new(ops),
                _pin: PhantomPinned,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: the operations stay pinned in memory until `drop`
        // unregisters them.
        to_result(unsafe { bindings::srnic_register_pernet(operations.ops.get()) })?;
        Ok(Self {
            operations,
            _handler: core::marker::PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called only by the network namespace core for the `pernet_operations`
    /// this module registered.
    unsafe extern "C" fn exit_call(net: *mut bindings::net) {
        // SAFETY: the namespace code calls exit with a namespace that is
        // alive until the call returns.
        H::exit(unsafe { Net::from_raw(net) });
    }
}

impl<H: NamespaceHandler> Drop for NamespaceWatcher<H> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; this runs `exit` for every
        // namespace and, once it returns, no callback runs any more.
        unsafe { bindings::srnic_unregister_pernet(self.operations.ops.get()) };
    }
}
