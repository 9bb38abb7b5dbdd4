// SPDX-License-Identifier: GPL-2.0

//! iblan: an 802.3 Ethernet LAN emulated over an RDMA fabric (seed 003).
//!
//! A client of every RDMA device: each RoCE port with UD QPs gets a netdev
//! `iblanN` whose MAC address embeds the node's LID. Nodes find each other
//! through a name service on a multicast group, with no server; frames
//! travel whole over UD, fragmented to the path MTU, and broadcasts are
//! posted once per peer from the same buffer.

#[path = "../../../../rust/bindings/mod.rs"]
mod bindings;
#[path = "../../../../rust/kapi/mod.rs"]
#[macro_use]
mod kapi;
#[path = "../../../../rust/pure/mod.rs"]
mod pure;

mod forwarding;
mod params;
mod port;

use kapi::debugfs;
use kapi::ether::EtherRegistration;
use kapi::global::ModuleGlobal;
use kapi::rdma::consumer::{Client, ClientHandler, IbDevice, PortEventHandler, PortEvents};
use kapi::rtnl_link::LinkOps;
use kernel::c_str;
use kernel::prelude::*;
use params::LanConfig;
use port::LanDev;

module! {
    type: IblanModule,
    name: "iblan",
    author: "The srnic developers",
    description: "802.3 Ethernet emulated over RDMA UD, LIDs in MAC addresses",
    license: "GPL",
}

struct IblanModule;

static CLIENT: Client<IblanClient> = Client::new();

/// `ip link add ... type iblan`.
static LINK: LinkOps<LanDev> = LinkOps::new();

/// `/sys/kernel/debug/iblan`, with a directory per netdev.
static DEBUGFS: ModuleGlobal<debugfs::Dir> = ModuleGlobal::new();

impl kernel::Module for IblanModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Refuse bad parameters now rather than at every port.
        LanConfig::from_params()?;
        DEBUGFS.install(KBox::pin(
            debugfs::Dir::new(c_str!("iblan"), None),
            GFP_KERNEL,
        )?)?;
        // The link type first: the ports' netdevs carry it.
        if let Err(err) = LINK.register() {
            // SAFETY: no port exists, so nothing uses the directory.
            drop(unsafe { DEBUGFS.remove() });
            return Err(err);
        }
        if let Err(err) = CLIENT.register() {
            // SAFETY: registered just above; the client's failed
            // registration removed every port it had added.
            unsafe { LINK.unregister() };
            // SAFETY: no port exists, so nothing uses the directory.
            drop(unsafe { DEBUGFS.remove() });
            return Err(err);
        }
        Ok(Self)
    }
}

impl Drop for IblanModule {
    fn drop(&mut self) {
        // SAFETY: registered in `init`, which succeeded.
        unsafe { CLIENT.unregister() };
        // After the ports (which delete their children): waits for any
        // `ip link del` still finishing.
        // SAFETY: registered in `init`; no port is left.
        unsafe { LINK.unregister() };
        // SAFETY: every port (the directory's only users) went with the
        // client.
        drop(unsafe { DEBUGFS.remove() });
    }
}

/// One LAN port. Fields drop in order: the debugfs files before the netdev
/// they show.
struct Port {
    _peers_file: Option<debugfs::File<LanDev>>,
    _dir: Option<debugfs::Dir>,
    _registration: EtherRegistration<LanDev>,
}

impl Port {
    fn new(registration: EtherRegistration<LanDev>) -> Self {
        let dev = registration.device();
        let dir = DEBUGFS
            .get()
            .map(|root| debugfs::Dir::new(dev.as_netdev().name().as_c_str(), Some(root)));
        // SAFETY: the data lives in the netdev, which the registration
        // keeps until after the file is dropped (field order).
        let file = dir.as_ref().and_then(|dir| unsafe {
            debugfs::File::new(c_str!("peers"), dir, core::ptr::from_ref(dev.data())).ok()
        });
        Self {
            _peers_file: file,
            _dir: dir,
            _registration: registration,
        }
    }
}

/// The client: one netdev per RoCE port of every RDMA device.
struct IblanClient;

/// What iblan keeps per RDMA device: its ports, owned by the handler of
/// their carrier, so that events stop (the registration drops) before the
/// netdevs go.
type PerDevice = PortEvents<CarrierFollower>;

/// Makes each netdev's carrier follow its port.
struct CarrierFollower {
    /// (RDMA port, LAN port) pairs.
    ports: KVec<(u32, Port)>,
}

impl PortEventHandler for CarrierFollower {
    fn port_event(&self, port: u32, active: bool) {
        for (p, lan) in self.ports.iter() {
            if *p == port {
                let dev = lan._registration.device();
                dev.data().carrier_changed(dev, active);
            }
        }
    }
}

impl ClientHandler for IblanClient {
    const NAME: &'static CStr = c_str!("iblan");
    type PerDevice = PerDevice;

    fn client() -> &'static Client<Self> {
        &CLIENT
    }

    fn add(dev: &IbDevice) -> Result<Pin<KBox<PerDevice>>> {
        let config = LanConfig::from_params()?;
        let mut ports = KVec::new();
        for port in dev.ports() {
            if !dev.port_is_roce(port) {
                // InfiniBand ports need an SA multicast join for the name
                // service, which iblan does not do yet.
                continue;
            }
            match port::create(dev, port, config) {
                Ok(reg) => ports.push((port, Port::new(reg)), GFP_KERNEL)?,
                Err(err) => {
                    pr_warn!(
                        "iblan: no netdev for {} port {}: {:?}\n",
                        dev.name(),
                        port,
                        err
                    );
                }
            }
        }
        let events = PortEvents::register(dev, CarrierFollower { ports })?;
        Ok(KBox::pin(events, GFP_KERNEL)?)
    }

    fn remove(_dev: &IbDevice, data: Pin<KBox<PerDevice>>) {
        // The LANs `ip link add` made on each port go first, and no new
        // one can be made.
        for (_, port) in data.handler().ports.iter() {
            LanDev::close_children(port._registration.device());
        }
        drop(data);
    }
}
