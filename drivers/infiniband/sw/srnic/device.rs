// SPDX-License-Identifier: GPL-2.0

//! An srnic device: one RoCEv2 port on one Ethernet netdev.

use crate::kapi::netdev::NetDevice;
use crate::kapi::rdma::{
    Device, DeviceAttributes, Driver, LinkLayer, PhysState, PortAttributes, PortEvent, PortState,
    DEVICE_PORT_ACTIVE_EVENT, DEVICE_SYS_IMAGE_GUID, PORT_CM_SUP,
};
use crate::pure::mtu::{active_mtu_for_netdev, IbMtu};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;

/// The only port of an srnic device.
const PORT: u32 = 1;

/// GID table entries: room for the IPv4 and IPv6 addresses of the netdev and
/// its VLAN and macvlan uppers, each as a RoCEv2 GID.
const GID_TABLE_LEN: u32 = 128;

/// Protection domains per device.
const MAX_PD: u32 = 1 << 16;

/// The IB largest message size (2 GiB).
const MAX_MSG_SIZE: u32 = 1 << 31;

/// No IEEE OUI is registered for srnic; like other soft devices it reports
/// the all-ones vendor ID.
const VENDOR_ID: u32 = 0xff_ffff;

/// The default (full-membership) P_Key, the only one on Ethernet ports.
const DEFAULT_PKEY: u16 = 0xffff;

/// Per-device state.
pub(crate) struct SrnicDevice {
    /// Whether the port was last reported active, so each transition
    /// raises exactly one event.
    port_active: AtomicBool,
    pd_count: AtomicU32,
}

impl SrnicDevice {
    pub(crate) fn new(netdev: &NetDevice) -> Self {
        SrnicDevice {
            port_active: AtomicBool::new(Self::port_is_usable(netdev)),
            pd_count: AtomicU32::new(0),
        }
    }

    /// The port is active while the netdev is up, has carrier and has room
    /// for at least the smallest IB MTU.
    fn port_is_usable(netdev: &NetDevice) -> bool {
        netdev.is_running() && netdev.has_carrier() && active_mtu_for_netdev(netdev.mtu()).is_some()
    }

    /// Follows the netdev's state (up, carrier, MTU); raises `PORT_ACTIVE`
    /// or `PORT_ERR` when the port's state changes.
    pub(crate) fn update_port_state(dev: &Device<Self>) {
        let up = Self::port_is_usable(dev.netdev());
        if dev.port_active.swap(up, Ordering::AcqRel) == up {
            return;
        }
        pr_info!(
            "{}: port {} {} ({})\n",
            dev.name(),
            PORT,
            if up { "active" } else { "down" },
            dev.netdev().name()
        );
        dev.dispatch_port_event(
            PORT,
            if up {
                PortEvent::Active
            } else {
                PortEvent::Error
            },
        );
    }

    /// The active MTU is derived from the netdev MTU at every query, and IB
    /// has no event for an MTU change; this tells the administrator what the
    /// change means for RDMA.
    pub(crate) fn log_mtu_change(dev: &Device<Self>) {
        let mtu = dev.netdev().mtu();
        match active_mtu_for_netdev(mtu) {
            Some(ib_mtu) => pr_info!(
                "{}: netdev MTU {}, active IB MTU {}\n",
                dev.name(),
                mtu,
                ib_mtu.bytes()
            ),
            None => pr_warn!(
                "{}: netdev MTU {} is too small for RoCE, port has no usable MTU\n",
                dev.name(),
                mtu
            ),
        }
    }
}

impl Driver for SrnicDevice {
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttributes> {
        Ok(DeviceAttributes {
            sys_image_guid: dev.node_guid(),
            max_mr_size: u64::MAX,
            // Any power of two from 4 KiB up.
            page_size_cap: !0xfff,
            vendor_id: VENDOR_ID,
            max_pd: MAX_PD,
            max_pkeys: 1,
            device_cap_flags: DEVICE_PORT_ACTIVE_EVENT | DEVICE_SYS_IMAGE_GUID,
            ..Default::default()
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttributes> {
        if port != PORT {
            return Err(EINVAL);
        }
        let netdev = dev.netdev();
        let phys_mtu = netdev.mtu();
        let active_mtu = active_mtu_for_netdev(phys_mtu);
        let up = Self::port_is_usable(netdev);
        // Speed comes from the netdev's ethtool settings; a netdev without
        // them (virtio reports none) gets the core's default.
        let (active_speed, active_width) = dev.eth_speed(port).unwrap_or((1, 1));
        Ok(PortAttributes {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            phys_state: if up {
                PhysState::LinkUp
            } else {
                PhysState::Disabled
            },
            max_mtu: IbMtu::Mtu4096,
            active_mtu: active_mtu.unwrap_or(IbMtu::Mtu256),
            phys_mtu,
            gid_tbl_len: GID_TABLE_LEN,
            pkey_tbl_len: 1,
            port_cap_flags: PORT_CM_SUP,
            max_msg_sz: MAX_MSG_SIZE,
            active_speed,
            active_width,
        })
    }

    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        match (port, index) {
            (PORT, 0) => Ok(DEFAULT_PKEY),
            _ => Err(EINVAL),
        }
    }

    fn alloc_pd(dev: &Device<Self>) -> Result {
        dev.pd_count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_PD).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    fn dealloc_pd(dev: &Device<Self>) {
        dev.pd_count.fetch_sub(1, Ordering::AcqRel);
    }
}
