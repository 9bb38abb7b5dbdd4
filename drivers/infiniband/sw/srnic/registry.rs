// SPDX-License-Identifier: GPL-2.0

//! The devices of this module: creation through `rdma link add`, removal
//! with their netdev or at module unload, and netdev state changes.
//!
//! Lock order: RTNL, then the device list. Nothing that may take RTNL
//! (registering or unregistering an `ib_device`) runs under the list lock.

use crate::device::SrnicDevice;
use crate::kapi::global::SharedGlobal;
use crate::kapi::netdev::{rtnl_lock, NetDevice, NetdevEvent, NetdevHandler};
use crate::kapi::rdma::{name_in_use, Device, DeviceConfig, DeviceRef, DriverIdPin, LinkType};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, Mutex};
use kernel::{new_mutex, ThisModule};

#[pin_data]
struct Registry {
    module: &'static ThisModule,
    /// Keeps `rdma_rxe` loaded while devices exist: its unload would take
    /// them (they share its driver id). Dropped with the registry, after
    /// every device is gone.
    rxe_pin: DriverIdPin,
    /// Set at module exit: unregistering the netdev notifier replays
    /// `NETDEV_UNREGISTER` for every netdev, which must not be taken for
    /// real removals.
    closing: AtomicBool,
    /// Serialises `rdma link add`, so that two requests for one netdev
    /// cannot both pass the duplicate check.
    #[pin]
    newlink: Mutex<()>,
    /// Every device this module registered that may not be fully gone yet.
    #[pin]
    devices: Mutex<KVec<DeviceRef<SrnicDevice>>>,
}

static REGISTRY: SharedGlobal<Registry> = SharedGlobal::new();

/// Sets up the registry at module init.
pub(crate) fn install(module: &'static ThisModule) -> Result {
    let rxe_pin = DriverIdPin::new()?;
    let registry = Arc::pin_init(
        pin_init!(Registry {
            module,
            rxe_pin,
            closing: AtomicBool::new(false),
            newlink <- new_mutex!(()),
            devices <- new_mutex!(KVec::new()),
        }),
        GFP_KERNEL,
    )?;
    REGISTRY.install(registry)
}

/// Makes the netdev notifier ignore events from now on; called at module
/// exit before the notifier is unregistered.
pub(crate) fn begin_shutdown() {
    if let Some(registry) = REGISTRY.get() {
        registry.closing.store(true, Ordering::Release);
    }
}

/// Unregisters every device and frees the registry, at module exit (or a
/// failed init) after the link type and the netdev notifier are gone.
pub(crate) fn remove_all() {
    // The users of `REGISTRY.get`, `newlink` and the netdev notifier, are
    // unregistered (and their running calls finished), so this is the last
    // reference and the registry goes at the end.
    let Some(registry) = REGISTRY.remove() else {
        return;
    };
    let devices = core::mem::take(&mut *registry.devices.lock());
    for device in devices.iter() {
        // Also fences against an unregistration already under way (queued
        // by a netdev removal or started by `rdma link delete`): it returns
        // only after that one has finished with this module's code.
        device.unregister();
    }
}

/// The `srnic` link type.
pub(crate) struct SrnicLink;

impl LinkType for SrnicLink {
    const NAME: &'static CStr = kernel::c_str!("srnic");

    fn newlink(name: &CStr, netdev: &NetDevice) -> Result {
        let registry = REGISTRY.get().ok_or(ENODEV)?;
        let _serialised = registry.newlink.lock();

        let Some(mac) = netdev.ethernet_address() else {
            pr_warn_ratelimited!(
                "{}: {} is not an Ethernet device, RoCE needs one\n",
                name,
                netdev.name()
            );
            return Err(EINVAL);
        };
        if netdev.is_loopback() {
            pr_warn_ratelimited!(
                "{}: {} is a loopback device, RoCE needs Ethernet\n",
                name,
                netdev.name()
            );
            return Err(EINVAL);
        }
        // The core would refuse a taken name too, but with ENFILE.
        if name_in_use(name) {
            pr_warn_ratelimited!("{}: an RDMA device of that name exists\n", name);
            return Err(EEXIST);
        }
        if registry.find_active_on(netdev) {
            pr_warn_ratelimited!(
                "{}: {} already carries an srnic device\n",
                name,
                netdev.name()
            );
            return Err(EEXIST);
        }
        registry.prune();

        let namespace = netdev.namespace();
        let config = DeviceConfig {
            name,
            netdev,
            node_guid: crate::pure::guid::node_guid_from_mac(mac),
            node_desc: kernel::c_str!("srnic"),
            num_comp_vectors: crate::params::comp_vectors(),
            module: registry.module,
            rxe_pin: &registry.rxe_pin,
        };
        let device = Device::register(SrnicDevice::new(netdev)?, &config)?;

        // The netdev may have started unregistering, or moved to another
        // namespace, while the device was being registered, in which case
        // the notifier ran before the device was listed. Under RTNL that
        // question has a stable answer.
        let rtnl = rtnl_lock();
        if !netdev.is_registered() || netdev.namespace() != namespace {
            drop(rtnl);
            device.unregister();
            return Err(ENODEV);
        }
        let mut devices = registry.devices.lock();
        if devices.reserve(1, GFP_KERNEL).is_err() {
            drop(devices);
            drop(rtnl);
            pr_err!("{}: out of memory listing the device\n", name);
            device.unregister();
            return Err(ENOMEM);
        }
        // The port may have changed while the device was registering, with
        // no event: catch up now that the notifier will see it.
        if let Some(dev) = device.active() {
            SrnicDevice::update_port_state(&dev);
            crate::wire::attach(&dev);
        }
        // Cannot fail: room for one more was reserved just above.
        let _ = devices.push(device, GFP_KERNEL);
        Ok(())
    }
}

impl Registry {
    /// Whether a registered device is bound to `netdev`.
    fn find_active_on(&self, netdev: &NetDevice) -> bool {
        self.devices
            .lock()
            .iter()
            .any(|device| device.active().is_some_and(|dev| dev.is_carried_by(netdev)))
    }

    /// Forgets devices that are gone for good, so that a long-lived module
    /// does not accumulate them.
    fn prune(&self) {
        let mut gone = KVec::new();
        {
            let mut devices = self.devices.lock();
            if !devices.iter().any(|device| device.is_deallocated()) {
                return;
            }
            let (Ok(mut kept), Ok(())) = (
                KVec::with_capacity(devices.len(), GFP_KERNEL),
                gone.reserve(devices.len(), GFP_KERNEL),
            ) else {
                return;
            };
            for device in core::mem::take(&mut *devices) {
                let list = if device.is_deallocated() {
                    &mut gone
                } else {
                    &mut kept
                };
                // Cannot fail: both have room for every device.
                let _ = list.push(device, GFP_KERNEL);
            }
            *devices = kept;
        }
        // `dealloc_driver` sets the flag just before it returns to the core;
        // this waits until the core has released the device, so nothing of
        // ours runs for it any more.
        for device in gone.iter() {
            device.unregister();
        }
    }
}

/// Follows the state of the netdevs that carry srnic devices.
pub(crate) struct NetdevWatcher;

impl NetdevHandler for NetdevWatcher {
    fn event(&self, event: NetdevEvent, netdev: &NetDevice) {
        let Some(registry) = REGISTRY.get() else {
            return;
        };
        if registry.closing.load(Ordering::Acquire) {
            return;
        }
        let devices = registry.devices.lock();
        for device in devices.iter() {
            let Some(dev) = device.active() else {
                continue;
            };
            if !dev.is_carried_by(netdev) {
                continue;
            }
            match event {
                NetdevEvent::Unregister => {
                    pr_info!(
                        "{}: removing, {} is going away\n",
                        dev.name(),
                        netdev.name()
                    );
                    dev.unregister_queued();
                }
                NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                    SrnicDevice::update_port_state(&dev)
                }
                NetdevEvent::ChangeMtu => {
                    SrnicDevice::log_mtu_change(&dev);
                    // Too small an MTU takes the port down, and back.
                    SrnicDevice::update_port_state(&dev);
                }
                NetdevEvent::ChangeAddr | NetdevEvent::Other(_) => {}
            }
        }
    }
}
