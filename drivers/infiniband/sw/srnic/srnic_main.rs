// SPDX-License-Identifier: GPL-2.0

//! srnic: a soft RDMA NIC. The InfiniBand transport in software over UDP/IP,
//! byte-compatible with RoCEv2, registered with the kernel's RDMA core.
//!
//! `rdma link add srnic0 type srnic netdev eth0` creates a device bound to an
//! Ethernet netdev; user space reaches it through the rxe user ABI.

#[path = "../../../../rust/bindings/mod.rs"]
mod bindings;
#[path = "../../../../rust/kapi/mod.rs"]
#[macro_use]
pub mod kapi;
#[path = "../../../../rust/pure/mod.rs"]
pub mod pure;

mod completer;
mod counters;
mod cq;
mod device;
mod mcast;
mod memory;
mod outbox;
mod params;
mod payload;
mod qp;
mod registry;
mod requester;
mod responder;
mod srq;
mod transport;
mod wire;

use kapi::netdev::NetdevNotifier;
use kapi::rdma::LinkRegistration;
use kernel::prelude::*;

module! {
    type: SrnicModule,
    name: "srnic",
    author: "The srnic developers",
    description: "Soft RDMA NIC: RoCEv2 in software, in Rust",
    license: "GPL",
    alias: ["rdma-link-srnic"],
}

struct SrnicModule {
    // Both are `Some` while the module is loaded; `drop` takes them in order.
    link: Option<LinkRegistration<registry::SrnicLink>>,
    notifier: Option<NetdevNotifier<registry::NetdevWatcher>>,
}

/// Takes the completion vectors' CPU hotplug state away; every vector set
/// is gone by then (a set left would keep it, and say so).
fn remove_vector_hotplug() {
    if kapi::irq::remove().is_err() {
        pr_err!("srnic: completion vectors outlive the module; their CPU hotplug state stays\n");
    }
}

impl kernel::Module for SrnicModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        kapi::irq::install()?;
        if let Err(err) = wire::install() {
            remove_vector_hotplug();
            return Err(err);
        }
        if let Err(err) = registry::install(module) {
            wire::remove();
            remove_vector_hotplug();
            return Err(err);
        }
        let notifier = match NetdevNotifier::register(registry::NetdevWatcher) {
            Ok(notifier) => notifier,
            Err(err) => {
                registry::remove_all();
                wire::remove();
                remove_vector_hotplug();
                return Err(err);
            }
        };
        let link = match LinkRegistration::register() {
            Ok(link) => link,
            Err(err) => {
                drop(notifier);
                registry::remove_all();
                wire::remove();
                remove_vector_hotplug();
                return Err(err);
            }
        };
        Ok(SrnicModule {
            link: Some(link),
            notifier: Some(notifier),
        })
    }
}

impl Drop for SrnicModule {
    fn drop(&mut self) {
        // No new devices, then no more netdev events, then remove the
        // devices that remain (as rxe does, rmmod removes them).
        drop(self.link.take());
        registry::begin_shutdown();
        drop(self.notifier.take());
        registry::remove_all();
        // Devices are gone; close the socket, and the vectors' hotplug
        // state, last.
        wire::remove();
        remove_vector_hotplug();
    }
}
