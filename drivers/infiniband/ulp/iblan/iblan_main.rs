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
pub mod kapi;
#[path = "../../../../rust/pure/mod.rs"]
pub mod pure;

mod forwarding;
mod params;
mod port;

use kapi::debugfs;
use kapi::ether::EtherRegistration;
use kapi::rdma::consumer::{
    Client, ClientHandler, ClientRegistration, IbDevice, PortEventHandler, PortEvents,
};
use kapi::rtnl_link::{LinkOps, LinkRegistration};
use kapi::sysfs::SysfsFile;
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

struct IblanModule {
    _client: ClientRegistration<IblanClient>,
}

static CLIENT: Client<IblanClient> = Client::new();

/// `ip link add ... type iblan`.
static LINK: LinkOps<LanDev> = LinkOps::new();

/// `/sys/class/net/<dev>/mode`, as IPoIB's.
static MODE_FILE: SysfsFile<LanDev> = SysfsFile::new(c_str!("mode"));

/// What the client keeps while it is registered. Fields drop in order,
/// after the client's ports: the link type then waits for any `ip link
/// del` still finishing.
struct Context {
    /// The ports' netdevs carry it.
    link: LinkRegistration<LanDev>,
    /// `/sys/kernel/debug/iblan`, with a directory per netdev.
    debugfs: debugfs::Dir,
}

impl kernel::Module for IblanModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Refuse bad parameters now rather than at every port.
        LanConfig::from_params()?;
        // Before any netdev: each is made with the file.
        MODE_FILE.init();
        // The link type first: the ports' netdevs carry it.
        let link = LINK.register()?;
        let context = Context {
            link,
            debugfs: debugfs::Dir::new(c_str!("iblan"), None)?,
        };
        // Unregistered, and the context dropped, when the module is.
        Ok(Self {
            _client: CLIENT.register(context)?,
        })
    }
}

/// One LAN port: its netdev, with its debugfs directory and file.
struct Port {
    _registration: EtherRegistration<LanDev>,
}

impl Port {
    fn new(root: &debugfs::Dir, mut registration: EtherRegistration<LanDev>) -> Self {
        let mut name = registration.device().as_netdev().name();
        // Debugfs is best effort: the port works without its file. The
        // file holds the directory.
        if let Ok(dir) = debugfs::Dir::new(name.as_c_str(), Some(root)) {
            let _ = registration.show_in_debugfs(c_str!("peers"), &dir);
        }
        Self {
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
    type Context = Context;

    fn client() -> &'static Client<Self> {
        &CLIENT
    }

    fn add(context: &Context, dev: &IbDevice) -> Result<Pin<KBox<PerDevice>>> {
        let config = LanConfig::from_params()?;
        let mut ports = KVec::new();
        for port in dev.ports() {
            if !dev.port_is_roce(port) {
                // InfiniBand ports need an SA multicast join for the name
                // service, which iblan does not do yet.
                continue;
            }
            match port::create(&context.link, dev, port, config) {
                Ok(reg) => ports.push((port, Port::new(&context.debugfs, reg)), GFP_KERNEL)?,
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

    fn remove(_context: &Context, _dev: &IbDevice, data: Pin<KBox<PerDevice>>) {
        // The LANs `ip link add` made on each port go first, and no new
        // one can be made.
        for (_, port) in data.handler().ports.iter() {
            LanDev::close_children(port._registration.device());
        }
        drop(data);
    }
}
