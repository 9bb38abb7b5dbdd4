// SPDX-License-Identifier: GPL-2.0

//! Living with the kernel's rxe under its driver id.
//!
//! Devices register as `RDMA_DRIVER_RXE` because stock librxe knows no
//! other: it opens every context with that id, and the core refuses any
//! ioctl whose id is not the device's (`EINVAL`), so a device of another id
//! cannot be driven by librxe at all. The id has one more user: rxe's
//! module exit calls `ib_unregister_driver(RDMA_DRIVER_RXE)`, which
//! unregisters every device of the id, ours too, with their user contexts.
//!
//! So while any device of this module exists (registered, or unregistered
//! but not yet deallocated), the module holds a reference on `rdma_rxe`:
//! `rmmod rdma_rxe` fails with "in use" instead, and succeeds again once
//! the last device is gone. The reference is taken when the first device
//! registers if rxe is loaded, or when rxe finishes loading (a module
//! notifier) if devices exist by then.
//!
//! Nothing else in the core reaches a device by driver id alone: `rdma
//! link delete` names one device, and rxe's netdev lookups go through the
//! core's netdev table, which our devices stay out of (see `device.rs`).

use crate::bindings;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, Mutex};
use kernel::types::Opaque;

/// The module that unregisters every device of the shared id at exit.
const RXE_MODULE: &CStr = kernel::c_str!("rdma_rxe");

/// A reference on a loaded module, which keeps it from unloading.
struct ModuleRef(NonNull<bindings::module>);

// SAFETY: module references may be dropped from any thread.
unsafe impl Send for ModuleRef {}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: the reference was taken by a successful `try_module_get`
        // and is put once, here.
        unsafe { bindings::module_put(self.0.as_ptr()) };
    }
}

struct PinState {
    /// Devices of this module that exist.
    devices: usize,
    /// The reference on rxe, held while `devices > 0` and rxe is loaded.
    rxe: Option<ModuleRef>,
}

impl PinState {
    /// Takes the reference on rxe if it is loaded and live and none is held.
    /// `EAGAIN` if rxe is unloading: its exit would take the new device.
    fn pin_loaded(&mut self) -> Result {
        if self.rxe.is_some() {
            return Ok(());
        }
        // SAFETY: the name is NUL-terminated; a found kobject comes with a
        // reference, put below.
        let Some(kobj) =
            NonNull::new(unsafe { bindings::srnic_module_kobject_find(RXE_MODULE.as_char_ptr()) })
        else {
            // Not loaded.
            return Ok(());
        };
        // SAFETY: every entry of the "module" kset is a module's kobject.
        let module = unsafe { bindings::srnic_module_of_kobject(kobj.as_ptr()) };
        let result = if module.is_null() {
            // Built in: never unloads.
            Ok(())
        } else {
            // SAFETY: our kobject reference keeps the module allocated
            // (unloading waits for its kobject's last reference).
            match unsafe { bindings::srnic_module_state(module) } {
                bindings::SRNIC_MODULE_STATE_LIVE => {
                    // Its unload needs a zero reference count, so this
                    // fails only once an unload has begun.
                    // SAFETY: as above.
                    if unsafe { bindings::try_module_get(module) } {
                        self.rxe = NonNull::new(module).map(ModuleRef);
                        Ok(())
                    } else {
                        Err(EAGAIN)
                    }
                }
                bindings::SRNIC_MODULE_STATE_GOING => Err(EAGAIN),
                // Still initialising: its LIVE notification comes later.
                _ => Ok(()),
            }
        };
        // SAFETY: balances the reference the lookup took.
        unsafe { bindings::kobject_put(kobj.as_ptr()) };
        result
    }
}

#[pin_data]
struct Shared {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    #[pin]
    state: Mutex<PinState>,
}

// SAFETY: the notifier block is touched only by the module notifier
// chain, which serialises registration, calls and unregistration; the
// state is behind a mutex.
unsafe impl Send for Shared {}
// SAFETY: as above; `&Shared` gives access to nothing else.
unsafe impl Sync for Shared {}

impl Shared {
    /// # Safety
    ///
    /// Called only by the module notifier chain for the block this module
    /// registered, with a `struct module` as `data`.
    unsafe extern "C" fn module_event(
        nb: *mut bindings::notifier_block,
        action: c_ulong,
        data: *mut c_void,
    ) -> c_int {
        let done = bindings::NOTIFY_DONE as c_int;
        if c_int::try_from(action) != Ok(bindings::SRNIC_MODULE_STATE_LIVE) {
            return done;
        }
        let module = data.cast::<bindings::module>();
        // SAFETY: module notifications carry the module, valid for the
        // call; its name is NUL-terminated.
        if !unsafe { bindings::srnic_module_name_is(module, RXE_MODULE.as_char_ptr()) } {
            return done;
        }
        // SAFETY: `nb` is the `nb` field of the `Shared` that `DriverIdPin`
        // registered and keeps alive until it unregisters it; `Opaque` is
        // transparent.
        let shared = unsafe {
            &*kernel::container_of!(nb.cast::<Opaque<bindings::notifier_block>>(), Shared, nb)
        };
        let mut state = shared.state.lock();
        // Fails only if an unload of rxe began right after it went live;
        // nothing can hold it back then.
        // SAFETY: `module` is valid for the call (above).
        if state.devices > 0 && state.rxe.is_none() && unsafe { bindings::try_module_get(module) } {
            if let Some(module) = NonNull::new(module) {
                state.rxe = Some(ModuleRef(module));
            }
        }
        done
    }
}

/// Keeps `rdma_rxe` loaded while devices registered through it exist. A
/// module that registers devices of the rxe driver id owns one, for as long
/// as it may create devices.
pub struct DriverIdPin {
    shared: Arc<Shared>,
}

impl DriverIdPin {
    /// Starts watching for rxe to load.
    pub fn new() -> Result<Self> {
        let nb = bindings::notifier_block {
            notifier_call: Some(Shared::module_event),
            ..Default::default()
        };
        let shared = Arc::pin_init(
            pin_init!(Shared {
                nb: Opaque::new(nb),
                state <- new_mutex!(PinState { devices: 0, rxe: None }, "srnic_rxe_pin"),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: the block lives in the `Arc`, which never moves it and
        // which `self` keeps until `drop` unregisters it.
        to_result(unsafe { bindings::register_module_notifier(shared.nb.get()) })?;
        Ok(Self { shared })
    }

    /// Counts one more device, taking the reference on rxe if this is the
    /// first and rxe is loaded. The device keeps the result until it is
    /// deallocated.
    pub(crate) fn device(&self) -> Result<DeviceHold> {
        let mut state = self.shared.state.lock();
        state.pin_loaded()?;
        state.devices += 1;
        Ok(DeviceHold {
            shared: self.shared.clone(),
        })
    }
}

impl Drop for DriverIdPin {
    fn drop(&mut self) {
        // SAFETY: registered in `new`; once this returns no callback runs,
        // and the block stays allocated as long as any `Arc` does.
        unsafe { bindings::unregister_module_notifier(self.shared.nb.get()) };
    }
}

/// One device's share of the reference on rxe.
pub(crate) struct DeviceHold {
    shared: Arc<Shared>,
}

impl Drop for DeviceHold {
    fn drop(&mut self) {
        let released = {
            let mut state = self.shared.state.lock();
            state.devices = state.devices.saturating_sub(1);
            if state.devices == 0 {
                state.rxe.take()
            } else {
                None
            }
        };
        // Put outside the lock; rxe may unload from here on.
        drop(released);
    }
}
