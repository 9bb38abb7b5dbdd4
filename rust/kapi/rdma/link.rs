// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type TYPE netdev DEV`: link types a module provides.

use crate::bindings;
use crate::kapi::netdev::NetDevice;
use core::marker::{PhantomData, PhantomPinned};
use core::pin::Pin;
use kernel::alloc::KBox;
use kernel::error::from_result;
use kernel::ffi::{c_char, c_int};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::types::Opaque;

/// A link type: what `rdma link add ... type NAME` creates.
pub trait LinkType: 'static {
    /// The type name users pass to `rdma link add`. The module should carry
    /// the alias `rdma-link-NAME` so the core can load it on demand.
    const NAME: &'static CStr;

    /// Creates a device called `name` on `netdev`. Runs in process context
    /// and may sleep; the netdev is referenced for the duration of the call.
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result;
}

struct LinkOps {
    ops: Opaque<bindings::rdma_link_ops>,
    _pin: PhantomPinned,
}

/// A registered link type; unregistered when dropped.
pub struct LinkRegistration<L: LinkType> {
    ops: Pin<KBox<LinkOps>>,
    _type: PhantomData<L>,
}

// SAFETY: the registration is only touched at creation and drop; the core
// serialises its use of the ops.
unsafe impl<L: LinkType> Send for LinkRegistration<L> {}
// SAFETY: no `&self` methods touch the ops.
unsafe impl<L: LinkType> Sync for LinkRegistration<L> {}

impl<L: LinkType> LinkRegistration<L> {
    /// Registers the link type `L`.
    pub fn register() -> Result<Self> {
        let ops = bindings::rdma_link_ops {
            type_: L::NAME.as_char_ptr(),
            newlink: Some(Self::newlink_cb),
            ..Default::default()
        };
        let ops = KBox::pin(
            LinkOps {
                ops: Opaque::new(ops),
                _pin: PhantomPinned,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: the ops are pinned until `drop` unregisters them; `NAME`
        // is static.
        unsafe { bindings::rdma_link_register(ops.ops.get()) };
        // The core only warns when the type exists already, and then leaves
        // the ops off its list; `list_add` is what sets `next`.
        // SAFETY: the ops are valid. Another type's unregistration may
        // rewrite `next` concurrently (never to NULL once linked), hence the
        // volatile read.
        let next = unsafe { core::ptr::addr_of!((*ops.ops.get()).list.next).read_volatile() };
        if next.is_null() {
            return Err(EEXIST);
        }
        Ok(Self {
            ops,
            _type: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core's netlink handler for the link type this
    /// module registered.
    unsafe extern "C" fn newlink_cb(
        name: *const c_char,
        netdev: *mut bindings::net_device,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a NUL-terminated name on its stack that
            // lives for the call.
            let name = unsafe { CStr::from_char_ptr(name) };
            // SAFETY: the core holds a reference on the netdev for the call.
            let netdev = unsafe { NetDevice::from_raw(netdev) };
            L::newlink(name, netdev)?;
            Ok(0)
        })
    }
}

impl<L: LinkType> Drop for LinkRegistration<L> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`. Unregistering waits for running
        // `newlink` calls, which hold the core's link-ops lock.
        unsafe { bindings::rdma_link_unregister(self.ops.ops.get()) };
    }
}
