// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire: packets to and from other nodes as UDP datagrams on
//! port 4791 over IPv4 or IPv6, routed and resolved by the kernel's own IP
//! stack.
//!
//! Transmission writes the transport headers with the pure codec, puts
//! the payload in the skb (as page fragments of the sender's memory, or
//! copied once), adds the UDP and IP headers and the ICRC, and hands the
//! packets of a burst to the IP stack a list at a time (`Sender`).
//! Reception makes only the headers linear, checks the ICRC over them and
//! the payload where it lies (page fragments, read in place), parses the
//! transport headers (which never trusts a length or an opcode), finds the
//! device by the interface the packet came in on (its netdev, or a VLAN of
//! it), and hands the packet to the engine, whose copy out of the skb is
//! the payload's only one. Packets leave through the netdev of their
//! source GID: a VLAN GID's tagged, through its VLAN interface.
//!
//! Each network namespace with srnic devices has its own pair of sockets
//! (IPv4 and IPv6), opened with its first device and closed with its last
//! one, or when the namespace goes. If the port is taken (the kernel's rxe
//! has it while loaded), srnic says so, and the namespace's devices reach
//! only this node's GIDs until a later device finds the port free.

use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::cpu;
use crate::kapi::crc::{Crc32Engine, TIMED_BYTES};
use crate::kapi::global::SharedGlobal;
use crate::kapi::net::{NamespaceHandler, NamespaceWatcher, Net};
use crate::kapi::netdev::NetDevice;
use crate::kapi::percpu::ApproximateCount;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::table::ObjectTable;
use crate::kapi::rdma::{Device, Qp};
use crate::kapi::shared::SharedRange;
use crate::kapi::skb::SkBuff;
use crate::kapi::sync::{cond_resched, SpinLockIrq};
use crate::kapi::udp::{self, Family, Route, UdpReceiver, UdpTunnel};
use crate::payload::{self, Extent, PieceError};
use crate::pure::grh::{ipv4_mapped, is_ipv4_mapped, udp_header, IpHeader, GRH_LEN};
use crate::pure::headers::opcode::RC_FLUSH;
use crate::pure::headers::{self, pad_for, Transport, BTH_LEN, ICRC_LEN};
use crate::pure::icrc::{rxe_flush_icrc, Icrc, IcrcError, IPV4_HEADER_LEN, UDP_HEADER_LEN};
use crate::pure::split_checked;
use crate::pure::steer::Runs;
use crate::pure::wr::QpType;
use crate::qp::SrnicQp;
use crate::transport::{self, Hop, Packet};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

/// The RoCEv2 UDP port.
pub(crate) const ROCE_PORT: u16 = 4791;

/// Room before the IP header for the link layer (Ethernet, VLAN tags).
const LINK_HEADROOM: u32 = 64;

/// The srnic devices of one network namespace: where its sockets deliver,
/// and where a packet for another device of the namespace finds it.
pub(crate) struct Neighbourhood {
    /// Devices by the interface index of their netdev.
    by_ifindex: ObjectTable<Device<SrnicDevice>>,
    /// The kernel's fastest CRC-32, for the ICRC of every packet that
    /// goes out or comes in.
    crc: Crc32Engine,
}

impl Neighbourhood {
    /// The device of this namespace that has `gid`, other than `except`.
    fn device_with_gid<'g>(
        &self,
        guard: &'g RcuReadGuard,
        gid: &[u8; 16],
        except: &Device<SrnicDevice>,
    ) -> Option<&'g Device<SrnicDevice>> {
        let mut found = None;
        self.by_ifindex.for_each(guard, |dev| {
            if found.is_none() && !core::ptr::eq(dev, except) && dev.has_gid(gid) {
                found = Some(dev);
            }
        });
        found
    }
}

/// The wire state of a namespace that has devices.
struct NamespaceWire {
    /// Its sockets, closed first when it goes: they deliver to
    /// `neighbourhood`.
    sockets: KVec<UdpTunnel<Neighbourhood>>,
    /// The namespace, as an identity (entries leave before it goes).
    net: usize,
    devices: usize,
    neighbourhood: Arc<Neighbourhood>,
}

/// Module-wide wire state.
#[pin_data]
pub(crate) struct Wire {
    /// Hears namespaces go; taken and dropped first at module exit, which
    /// waits for running exits (and the references to the state they
    /// hold), so the state's last reference, and the sockets' closing,
    /// stays with `remove`, never in an exit, which could not unregister
    /// the watcher.
    #[pin]
    watcher: Mutex<Option<NamespaceWatcher<Wire>>>,
    /// Namespaces with devices; a free slot is reused by the next one.
    #[pin]
    namespaces: Mutex<KVec<Option<NamespaceWire>>>,
    /// The CRC-32 timed at module init, which each namespace's engine
    /// copies: timed once, so that the choice the log names is the one
    /// every device makes (unless the driver cannot be allocated for a
    /// namespace, which then takes the library's).
    crc: Crc32Engine,
}

static WIRE: SharedGlobal<Wire> = SharedGlobal::new();

/// Sets up the wire state at module init (no socket yet).
pub(crate) fn install() -> Result {
    // Which CRC-32 computes the ICRC: a driver of the crypto API (such as
    // crc32-pclmul) or the library's table-driven crc32_le(), whichever
    // was timed faster here.
    let crc = Crc32Engine::new();
    match (crc.driver(), crc.timing()) {
        (Some(driver), Some(timing)) => pr_info!(
            "ICRC computed by {} ({} ns for {} bytes, crc32_le {} ns)\n",
            driver,
            timing.driver_ns,
            TIMED_BYTES,
            timing.library_ns
        ),
        (Some(driver), None) => pr_info!("ICRC computed by {}\n", driver),
        (None, Some(timing)) => pr_info!(
            "ICRC computed by crc32_le ({} ns for {} bytes, the crypto API's crc32 {} ns)\n",
            timing.library_ns,
            TIMED_BYTES,
            timing.driver_ns
        ),
        (None, None) => pr_info!("ICRC computed by crc32_le (no crc32 in the crypto API)\n"),
    }
    let watcher = NamespaceWatcher::register()?;
    let wire = Arc::pin_init(
        pin_init!(Wire {
            watcher <- new_mutex!(Some(watcher)),
            namespaces <- new_mutex!(KVec::new()),
            crc,
        }),
        GFP_KERNEL,
    )?;
    WIRE.install(wire)
}

/// Closes the sockets and frees the state, at module exit after every
/// device is gone.
pub(crate) fn remove() {
    let Some(wire) = WIRE.remove() else {
        return;
    };
    // Exits that found the state before it was removed finish before the
    // watcher is unregistered; those that run from here on find the global
    // empty. Devices, which also call `WIRE.get` from their drop, are all
    // gone: `wire` is then the last reference.
    let watcher = wire.watcher.lock().take();
    drop(watcher);
    drop(wire);
}

impl NamespaceHandler for Wire {
    fn exit(net: &Net) {
        let Some(wire) = WIRE.get() else {
            return;
        };
        let gone = wire
            .namespaces
            .lock()
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|n| n.net == net.identity()))
            .and_then(Option::take);
        // Its devices are gone or leaving (their netdevs left the
        // namespace first); the sockets close here, outside the lock.
        drop(gone);
    }
}

/// Opens the sockets of `net`, saying which cannot be opened.
fn open_sockets(
    net: &Net,
    neighbourhood: &Arc<Neighbourhood>,
    name: &NetDevice,
) -> KVec<UdpTunnel<Neighbourhood>> {
    let mut sockets = KVec::new();
    for (family, label) in [(Family::V4, "IPv4"), (Family::V6, "IPv6")] {
        match UdpTunnel::open(net, family, ROCE_PORT, neighbourhood.clone()) {
            Ok(socket) => {
                if sockets.push(socket, GFP_KERNEL).is_err() {
                    pr_warn!("{}: out of memory for the {} socket\n", name.name(), label);
                }
            }
            Err(err) => pr_warn!(
                "{}: UDP port {} ({}) is taken ({:?}; is rdma_rxe loaded?): devices on this network namespace reach only this node's GIDs over {}\n",
                name.name(),
                ROCE_PORT,
                label,
                err,
                label
            ),
        }
    }
    sockets
}

/// Joins a device on `netdev` to its namespace's wire: opens the sockets if
/// it is the first. The device leaves with [`leave`].
pub(crate) fn join(netdev: &NetDevice) -> Result<Arc<Neighbourhood>> {
    let wire = WIRE.get().ok_or(ENODEV)?;
    // Counted: the sockets are opened in it, which sleeps.
    let net = netdev.net_ref().ok_or(ENODEV)?;
    let net = &*net;
    let mut namespaces = wire.namespaces.lock();
    if let Some(entry) = namespaces
        .iter_mut()
        .flatten()
        .find(|n| n.net == net.identity())
    {
        entry.devices += 1;
        if entry.sockets.len() < 2 {
            // The port may be free by now (rxe unloaded): try again.
            drop(core::mem::take(&mut entry.sockets));
            entry.sockets = open_sockets(net, &entry.neighbourhood, netdev);
        }
        return Ok(entry.neighbourhood.clone());
    }
    let free = namespaces.iter().position(Option::is_none);
    if free.is_none() {
        namespaces.reserve(1, GFP_KERNEL)?;
    }
    let neighbourhood = Arc::new(
        Neighbourhood {
            by_ifindex: ObjectTable::new(1, i32::MAX as u32)?,
            crc: Crc32Engine::like(&wire.crc),
        },
        GFP_KERNEL,
    )?;
    let sockets = open_sockets(net, &neighbourhood, netdev);
    let entry = NamespaceWire {
        sockets,
        net: net.identity(),
        devices: 1,
        neighbourhood: neighbourhood.clone(),
    };
    match free.and_then(|at| namespaces.get_mut(at)) {
        Some(slot) => *slot = Some(entry),
        // Cannot fail: room was reserved above.
        None => {
            let _ = namespaces.push(Some(entry), GFP_KERNEL);
        }
    }
    Ok(neighbourhood)
}

/// Makes `dev` reachable from the wire: lists it under its netdev's
/// interface index in its namespace.
pub(crate) fn attach(dev: &Device<SrnicDevice>) {
    // The device leaves the table when it is deallocated, before its data
    // drops (its `leave`).
    if dev
        .neighbourhood
        .by_ifindex
        .insert_at(dev.ifindex as u32, dev)
        .is_err()
    {
        pr_warn!(
            "{}: cannot list the device for received packets\n",
            dev.name()
        );
    }
}

/// Takes a device off the wire of `neighbourhood`, closing the
/// namespace's sockets if it was the last device there. The kapi took the
/// device out of `by_ifindex`, waiting for receivers that found it, before
/// its data (which calls this) drops.
pub(crate) fn leave(neighbourhood: &Arc<Neighbourhood>) {
    let Some(wire) = WIRE.get() else {
        return;
    };
    let gone = {
        let mut namespaces = wire.namespaces.lock();
        let slot = namespaces.iter_mut().find(|slot| {
            slot.as_ref()
                .is_some_and(|n| Arc::ptr_eq(&n.neighbourhood, neighbourhood))
        });
        // None: the namespace went first and took its sockets along.
        match slot {
            Some(Some(entry)) if entry.devices > 1 => {
                entry.devices -= 1;
                None
            }
            Some(slot) => slot.take(),
            None => None,
        }
    };
    drop(gone);
}

/// The UDP source port of a connection: a hash of its QP numbers, in the
/// range RoCEv2 reserves for it, so that flows spread over queues.
pub(crate) fn source_port(qpn: u32, dest_qpn: u32) -> u16 {
    let hash = (qpn ^ dest_qpn.rotate_left(12)).wrapping_mul(0x9e37_79b1) >> 18;
    0xc000 | (hash as u16 & 0x3fff)
}

/// Why a packet did not go out.
pub(crate) enum SendError {
    /// The sender's memory could not be read.
    Source,
    /// A page of the sender's memory is paged on demand and not present:
    /// dropped, to be sent again once it is faulted in.
    Absent(crate::memory::Fault),
    /// No route, no memory, or addresses of two families: dropped (the
    /// sender retries).
    Dropped,
    /// The device queue had no room: dropped with the rest of its list.
    Refused,
}

/// The device of `dev`'s namespace, other than `dev`, that has `gid`: the
/// engine takes packets to it without the wire.
pub(crate) fn neighbour_with_gid(dev: &Device<SrnicDevice>, gid: &[u8; 16]) -> Option<i32> {
    let guard = RcuReadGuard::new();
    dev.neighbourhood
        .device_with_gid(&guard, gid, dev)
        .map(|peer| peer.ifindex)
}

/// The device of `dev`'s namespace with netdev `ifindex`, if it is there.
pub(crate) fn neighbour<'g>(
    dev: &Device<SrnicDevice>,
    guard: &'g RcuReadGuard,
    ifindex: i32,
) -> Option<&'g Device<SrnicDevice>> {
    dev.neighbourhood.by_ifindex.get(guard, ifindex as u32)
}

/// The interface index of `netdev` if it is in `dev`'s namespace, where
/// the wire's sockets and route lookups are.
fn in_namespace(dev: &Device<SrnicDevice>, netdev: &NetDevice) -> Option<i32> {
    (netdev.namespace() == dev.netdev().namespace()).then(|| netdev.ifindex())
}

/// The interface that packets from GID `index` of `dev`'s port leave
/// through: the GID's netdev, the device's own or a VLAN (or other upper)
/// of it, whose addresses the core lists as GIDs of the port. `None` if
/// the entry is empty or its netdev is in another namespace.
pub(crate) fn egress_of_index(dev: &Device<SrnicDevice>, index: u8) -> Option<i32> {
    dev.with_gid_index_netdev(u32::from(index), |netdev| in_namespace(dev, netdev))
        .flatten()
}

/// The interface that packets from `sgid` leave through (see
/// [`egress_of_index`]), found by the GID's value; the device's own
/// netdev for an address that is not a GID of the port (the route lookup
/// then refuses a source address this node does not have).
fn egress_of(dev: &Device<SrnicDevice>, sgid: &[u8; 16]) -> core::result::Result<i32, SendError> {
    match dev.with_gid_netdev(sgid, |netdev| in_namespace(dev, netdev)) {
        Some(Some(ifindex)) => Ok(ifindex),
        Some(None) => {
            // A VLAN moved to another namespace: its packets cannot leave
            // from this one.
            dev.counters.inc(Counter::UnroutableDatagrams);
            Err(SendError::Dropped)
        }
        None => Ok(dev.ifindex),
    }
}

/// The route to the destination of `ip`, out of interface `oif`.
fn route_for(
    dev: &Device<SrnicDevice>,
    ip: &IpHeader,
    oif: i32,
) -> core::result::Result<Route, SendError> {
    let guard = RcuReadGuard::new();
    let net = dev.netdev().net(&guard);
    let route = if ip.is_ipv4() {
        let address = |gid: &[u8; 16]| {
            gid.get(12..16)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .ok_or(SendError::Dropped)
        };
        Route::lookup4(
            net,
            address(&ip.dgid)?,
            address(&ip.sgid)?,
            ip.traffic_class,
            oif,
        )
    } else if !is_ipv4_mapped(&ip.sgid) && !is_ipv4_mapped(&ip.dgid) {
        Route::lookup6(
            net,
            &ip.dgid,
            &ip.sgid,
            ip.traffic_class,
            ip.flow_label,
            oif,
        )
    } else {
        // An IPv4 GID talking to an IPv6 one.
        Err(EINVAL)
    };
    route.map_err(|_| {
        dev.counters.inc(Counter::UnroutableDatagrams);
        SendError::Dropped
    })
}

/// Payloads at least this long leave as page fragments of the sender's
/// memory; shorter ones are copied (a page reference costs more than
/// copying a few hundred bytes).
const FRAGMENT_MIN: usize = 512;

/// Page fragments of the payload an skb may have (one more fragment is the
/// pad and ICRC trailer).
const MAX_PIECES: usize = 16;

/// Datagrams a list holds at most: a burst of the requester or the outbox.
const LIST_DATAGRAMS: u32 = 64;

/// What datagrams must share to travel in one list: their route and their
/// UDP flow (the stack cuts a list apart with the first one's addresses
/// and ports in mind).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Flow {
    ip: IpHeader,
    sport: u16,
}

impl Flow {
    fn of(ip: &IpHeader, sport: u16) -> Self {
        Self {
            ip: IpHeader {
                ip_payload_len: 0,
                ..*ip
            },
            sport,
        }
    }
}

/// A list being filled, with what its next datagram needs.
struct OpenList {
    flow: Flow,
    datagrams: udp::DatagramList,
    /// The IPv4 identification of the list's first datagram; the stack
    /// numbers the others on from it, and the ICRC covers them.
    first_ident: u16,
    /// Identifications reserved from `first_ident` on: the most datagrams
    /// the list may hold.
    reserved: u32,
    /// The first datagram's length. The stack checks only the first
    /// against the path MTU, so no later one may be longer. Shorter ones
    /// may come anywhere: segmentation gives each datagram its own
    /// lengths, so a message's first packet, longer by its RETH, and the
    /// rest of the message go out as one list.
    first_len: usize,
    /// Payload bytes of the list's packets, for the counters.
    payload_bytes: u64,
}

impl OpenList {
    fn takes(&self, flow: &Flow, datagram_len: usize) -> bool {
        self.flow == *flow
            && datagram_len <= self.first_len
            && self.datagrams.count() < self.reserved
            && self.datagrams.bytes() as usize + datagram_len <= udp::DatagramList::MAX_BYTES
    }
}

/// The route a connected QP's packets took last, kept for the next run of
/// its requester: a route lookup costs more than building a small packet,
/// and a QP's packets have one destination. Checked before each use. Only
/// plain IPv4 routes are kept (see [`Route::outlives_namespace`]).
pub(crate) struct KeptRoute {
    flow: Flow,
    /// The interface it was looked up for (see [`Sender::through`]).
    egress: i32,
    route: Route,
}

/// Where a QP keeps its [`KeptRoute`].
pub(crate) type RouteKeeper = SpinLockIrq<Option<KeptRoute>>;

/// Sends a burst of packets: one route lookup for each destination, and
/// the packets of a flow through the IP stack a list at a time (one pass
/// through routing, netfilter and the queueing discipline, and the
/// device's doorbell rung once per list). Packets wait in the list until
/// `flush` (or a packet of another flow, or a full list); a caller flushes
/// before it lets another CPU send for the same QP, so that its packets
/// leave in the order they were made.
pub(crate) struct Sender<'d> {
    dev: &'d Device<SrnicDevice>,
    /// The interface a connected QP's packets leave through, as its
    /// source GID's entry says; `None`: found from each flow's source GID.
    egress: Option<i32>,
    /// The last flow's route, and whether its device takes page
    /// fragments.
    route: Option<(Flow, Route, bool)>,
    /// Where the route is kept between bursts, if anywhere.
    keeper: Option<&'d RouteKeeper>,
    list: Option<OpenList>,
    /// Datagrams a list started from now on may hold.
    list_max: u32,
    sent: u32,
}

impl<'d> Sender<'d> {
    /// A sender for bursts of up to `LIST_DATAGRAMS` packets.
    pub(crate) fn new(dev: &'d Device<SrnicDevice>) -> Self {
        Self::expecting(dev, LIST_DATAGRAMS)
    }

    /// A sender for `packets` packets or fewer (lists reserve that many
    /// IPv4 identifications).
    pub(crate) fn expecting(dev: &'d Device<SrnicDevice>, packets: u32) -> Self {
        Self {
            dev,
            egress: None,
            route: None,
            keeper: None,
            list: None,
            list_max: packets.clamp(1, LIST_DATAGRAMS),
            sent: 0,
        }
    }

    /// Sends through interface `egress` (if known): that of the source GID
    /// of the connected QP whose packets this sender takes.
    pub(crate) fn through(mut self, egress: Option<i32>) -> Self {
        self.egress = egress;
        self
    }

    /// Takes the route from `keeper` while it holds, and keeps the route
    /// looked up otherwise there (for a connected QP, whose packets leave
    /// [`Sender::through`] a known interface).
    pub(crate) fn keeping_route_in(mut self, keeper: &'d RouteKeeper) -> Self {
        self.keeper = Some(keeper);
        self
    }

    /// The next lists are for `packets` packets or fewer.
    pub(crate) fn reserve_for(&mut self, packets: u32) {
        self.list_max = packets.clamp(1, LIST_DATAGRAMS);
    }

    /// Packets the IP stack took so far (flushed, not refused).
    pub(crate) fn sent(&self) -> u32 {
        self.sent
    }

    /// The route of `flow`: the one the last packet took, or a new one.
    fn route_for(&mut self, flow: &Flow) -> core::result::Result<Route, SendError> {
        if let Some((cached, route, _)) = &self.route {
            if cached == flow {
                return Ok(route.clone());
            }
        }
        self.route = None;
        let route = match self.kept_route(flow) {
            Some(route) => route,
            None => self.look_up(flow)?,
        };
        let gathers = route.device_gathers();
        self.route = Some((*flow, route.clone(), gathers));
        Ok(route)
    }

    /// The route kept for `flow`, if it still holds.
    fn kept_route(&self, flow: &Flow) -> Option<Route> {
        let (keeper, egress) = (self.keeper?, self.egress?);
        let kept = keeper.lock();
        kept.as_ref()
            .filter(|kept| kept.flow == *flow && kept.egress == egress && kept.route.is_current())
            .map(|kept| kept.route.clone())
    }

    /// Looks up the route of `flow`, and keeps it if there is a keeper.
    fn look_up(&self, flow: &Flow) -> core::result::Result<Route, SendError> {
        let oif = match self.egress {
            Some(ifindex) => ifindex,
            None => egress_of(self.dev, &flow.ip.sgid)?,
        };
        let route = route_for(self.dev, &flow.ip, oif)?;
        if route.is_local() {
            // An address of this node that no srnic device has (the
            // engine takes those): nobody would take the packet.
            self.dev.counters.inc(Counter::UnroutableDatagrams);
            return Err(SendError::Dropped);
        }
        // Only a route that may outlive its namespace is kept: a QP may
        // live on after the namespace of its netdev has gone.
        let keeper = self.keeper.filter(|_| route.outlives_namespace());
        if let (Some(keeper), Some(egress)) = (keeper, self.egress) {
            let kept = KeptRoute {
                flow: *flow,
                egress,
                route: route.clone(),
            };
            // The route it replaces is let go outside the lock.
            let replaced = keeper.lock().replace(kept);
            drop(replaced);
        }
        Ok(route)
    }

    /// Builds `packet`, to the address in `packet.ip` from UDP port
    /// `sport`, and adds it to the list of its flow. `Refused` if the
    /// stack refused the list sent to make room for it, `Dropped` if the
    /// packet could not be made; either way the packet is not in the list.
    pub(crate) fn send(
        &mut self,
        guard: &RcuReadGuard,
        packet: &Packet<'_>,
        sport: u16,
    ) -> core::result::Result<(), SendError> {
        let Some(ip) = packet.ip else {
            return Err(SendError::Dropped);
        };
        let flow = Flow::of(&ip, sport);
        let datagram_len = ip_header_len(&ip) + UDP_HEADER_LEN + transport_len(&packet.hdr);
        if !self
            .list
            .as_ref()
            .is_some_and(|list| list.takes(&flow, datagram_len))
        {
            self.flush()?;
            self.route_for(&flow)?;
        }
        let idents = match &self.list {
            Some(list) => Ok(list.first_ident.wrapping_add(list.datagrams.count() as u16)),
            None => Err(self.list_max),
        };
        // The list's route is this flow's (looked up when it began).
        let gathers = self
            .route
            .as_ref()
            .is_some_and(|(cached, _, gathers)| *cached == flow && *gathers);
        let (skb, first_ident) = build(self.dev, guard, packet, &ip, sport, idents, gathers)?;
        let payload_bytes = packet.hdr.payload_len as u64;
        match &mut self.list {
            Some(list) => {
                list.datagrams.push(skb).map_err(|_| SendError::Dropped)?;
                list.payload_bytes += payload_bytes;
            }
            None => {
                self.list = Some(OpenList {
                    flow,
                    datagrams: udp::DatagramList::new(skb, ip_header_len(&ip) as u32)
                        .map_err(|_| SendError::Dropped)?,
                    first_ident,
                    reserved: self.list_max,
                    first_len: datagram_len,
                    payload_bytes,
                });
            }
        }
        Ok(())
    }

    /// Hands the list to the IP stack. `Refused` if it refused it (a full
    /// device queue): none of the list's packets went out.
    pub(crate) fn flush(&mut self) -> core::result::Result<(), SendError> {
        let Some(list) = self.list.take() else {
            return Ok(());
        };
        let route = self.route_for(&list.flow)?;
        let count = list.datagrams.count();
        let skb = list.datagrams.into_skb().map_err(|_| SendError::Dropped)?;
        let guard = RcuReadGuard::new();
        udp::transmit(self.dev.netdev().net(&guard), skb, route).map_err(|_| SendError::Refused)?;
        drop(guard);
        self.sent += count;
        self.dev
            .counters
            .add(Counter::SentPackets, u64::from(count));
        self.dev
            .counters
            .add(Counter::SentBytes, list.payload_bytes);
        Ok(())
    }
}

impl Drop for Sender<'_> {
    fn drop(&mut self) {
        // Like a packet lost on the wire, for a caller that had no use for
        // the outcome.
        let _ = self.flush();
    }
}

/// Sends `packet` to the address in `packet.ip` from UDP port `sport`, on
/// its own, through interface `egress` if known (see [`Sender::through`]).
pub(crate) fn transmit(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    sport: u16,
    egress: Option<i32>,
) -> core::result::Result<(), SendError> {
    let mut sender = Sender::expecting(dev, 1).through(egress);
    sender.send(guard, packet, sport)?;
    sender.flush()
}

fn ip_header_len(ip: &IpHeader) -> usize {
    if ip.is_ipv4() {
        IPV4_HEADER_LEN
    } else {
        GRH_LEN
    }
}

/// The bytes of a packet from its BTH to its ICRC.
fn transport_len(hdr: &headers::Packet) -> usize {
    hdr.info.header_len() + hdr.payload_len + usize::from(pad_for(hdr.payload_len)) + ICRC_LEN
}

/// The datagram of `packet`: IP and UDP headers, transport headers,
/// payload, pad and ICRC. An IPv4 datagram takes identification
/// `Ok(ident)`, or, given `Err(count)`, the first of a fresh run of
/// `count`; the identification is returned with the datagram. Its payload
/// stays in the sender's pages only if the device `gathers` them.
fn build(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    ip: &IpHeader,
    sport: u16,
    ident: core::result::Result<u16, u32>,
    gathers: bool,
) -> core::result::Result<(SkBuff, u16), SendError> {
    let ipv4 = ip.is_ipv4();
    let ip_len = ip_header_len(ip);
    let mut hdr = packet.hdr;
    let payload_len = hdr.payload_len;
    let pad = usize::from(pad_for(payload_len));
    hdr.bth.pad = pad as u8;
    let transport_bytes = transport_len(&hdr);
    let udp_len = UDP_HEADER_LEN + transport_bytes;
    let total_len = ip_len + udp_len;
    let (Ok(udp_len16), Ok(_)) = (u16::try_from(udp_len), u16::try_from(total_len)) else {
        return Err(SendError::Dropped);
    };
    let headroom = LINK_HEADROOM + (ip_len + UDP_HEADER_LEN) as u32;
    let mut built = None;
    // Only RC keeps the sender's memory until the peer has it (UD and UC
    // complete a WQE once its packets are made, before they have left).
    // A device without scatter-gather (virtio-net on a backend without
    // offloads) would have the stack copy the fragments anyway, after an
    // skb head and page references made for nothing.
    if gathers && payload_len >= FRAGMENT_MIN && hdr.info.transport == Transport::Rc {
        built = fragmented(guard, packet, &hdr, headroom)?;
    }
    let (mut skb, fragments) = match built {
        Some(skb) => {
            dev.counters.inc(Counter::ZeroCopyPackets);
            (skb, true)
        }
        None => (
            copied(guard, packet, &hdr, headroom, transport_bytes)?,
            false,
        ),
    };
    let wire_ip = IpHeader {
        hop_limit: if ip.hop_limit == 0 { 64 } else { ip.hop_limit },
        ip_payload_len: udp_len16,
        ..*ip
    };
    skb.push_bytes(&udp_header(sport, ROCE_PORT, udp_len16))
        .map_err(|_| SendError::Dropped)?;
    let mut ident_used = 0;
    if ipv4 {
        let mut header = udp::Ipv4HeaderBytes(wire_ip.ipv4_header());
        ident_used = match ident {
            Ok(ident) => {
                let (_, from_ident) = header.0.split_at_mut(4);
                for (to, from) in from_ident.iter_mut().zip(ident.to_be_bytes()) {
                    *to = from;
                }
                ident
            }
            Err(count) => udp::select_idents(dev.netdev().net(guard), &mut header, count),
        };
        skb.push_bytes(&header.0).map_err(|_| SendError::Dropped)?;
    } else {
        skb.push_bytes(&wire_ip.ipv6_header())
            .map_err(|_| SendError::Dropped)?;
    }
    let engine = &dev.neighbourhood.crc;
    if !fragments {
        // Everything is in the linear part, the ICRC's room last.
        let data = skb.data_mut();
        let crc_at = data.len().checked_sub(ICRC_LEN).ok_or(SendError::Dropped)?;
        let (covered, crc) = data.split_at_mut(crc_at);
        let (ip_bytes, rest) = covered.split_at(ip_len);
        let mut icrc = icrc_over(engine, ip_bytes, rest).map_err(|_| SendError::Dropped)?;
        if packet.rxe_flush_icrc && hdr.bth.opcode == RC_FLUSH {
            // rxe's FLUSH ICRC: the transport headers once more (a FLUSH
            // has no payload, so it is always linear).
            icrc.update(rest.get(UDP_HEADER_LEN..).ok_or(SendError::Dropped)?);
        }
        crc.copy_from_slice(&icrc.finish().to_le_bytes());
    } else {
        let data = skb.data();
        let (ip_bytes, rest) = split_checked(data, ip_len).ok_or(SendError::Dropped)?;
        let icrc = icrc_over(engine, ip_bytes, rest).map_err(|_| SendError::Dropped)?;
        // The payload is in pages the sender's process may be writing
        // right now: the engine reads them once, from C (the skb holds
        // the pages; no slice is formed over them).
        let register = skb
            .crc32_page_frags(engine, icrc.register())
            .map_err(|_| SendError::Dropped)?;
        let mut icrc = Icrc::from_register(register);
        let mut trailer = [0u8; 3 + ICRC_LEN];
        let (pad_bytes, _) = trailer.split_at(pad);
        icrc.update(pad_bytes);
        let crc = icrc.finish().to_le_bytes();
        let end = pad + ICRC_LEN;
        let (_, crc_room) = trailer.split_at_mut(pad);
        crc_room
            .get_mut(..ICRC_LEN)
            .ok_or(SendError::Dropped)?
            .copy_from_slice(&crc);
        let trailer = trailer.get(..end).ok_or(SendError::Dropped)?;
        skb.append_copy(trailer).map_err(|_| SendError::Dropped)?;
    }
    Ok((skb, ident_used))
}

/// The ICRC of the IP header `ip` and the packet bytes `head` from the UDP
/// header on, so far: the headers with masked fields by the pure code, the
/// rest (most of it payload) by `engine`.
fn icrc_over(engine: &Crc32Engine, ip: &[u8], head: &[u8]) -> Result<Icrc, IcrcError> {
    let (icrc, rest) = Icrc::start_masked(ip, head)?;
    Ok(Icrc::from_register(engine.update(icrc.register(), rest)))
}

/// An skb with the transport headers of `hdr` in its linear part and the
/// payload as page fragments of the sender's memory, which the skb holds
/// references on until it is sent: no copy. `None` if the memory cannot be
/// referenced so (inline data, kernel memory outside the page map, a
/// fast-registration region) or is in too many pieces; the caller copies
/// instead.
fn fragmented(
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    hdr: &headers::Packet,
    headroom: u32,
) -> core::result::Result<Option<SkBuff>, SendError> {
    let header_len = hdr.info.header_len();
    let Some(source) = packet.payload.as_ref() else {
        return Err(SendError::Source);
    };
    // Pieces are a received skb's, which its pages go with.
    if matches!(source, Extent::Inline { .. } | Extent::Pieces(..)) {
        return Ok(None);
    }
    let header_len32 = u32::try_from(header_len).map_err(|_| SendError::Dropped)?;
    let mut skb = SkBuff::alloc(headroom, header_len32).ok_or(SendError::Dropped)?;
    {
        let body = skb.put(header_len32).map_err(|_| SendError::Dropped)?;
        headers::write_headers(hdr, body).ok_or(SendError::Dropped)?;
    }
    let mut pieces = 0usize;
    let appended = payload::for_each_piece(
        guard,
        source,
        packet.payload_at,
        hdr.payload_len as u32,
        |piece| {
            // A fast-registration region's pages may be freed once it is
            // invalidated, while the skb still holds them: copied.
            if piece.is_held() {
                return Err(());
            }
            // Page by page: a region's piece may span several.
            let mut rest = piece.bytes();
            while !rest.is_empty() {
                let (here, after) = rest.split_at(rest.first_page_len()).ok_or(())?;
                if pieces == MAX_PIECES {
                    return Err(());
                }
                skb.append_range(&here).map_err(|_| ())?;
                pieces += 1;
                rest = after;
            }
            Ok(())
        },
    );
    match appended {
        Ok(()) => Ok(Some(skb)),
        Err(PieceError::Source) => Err(SendError::Source),
        Err(PieceError::Absent(fault)) => Err(SendError::Absent(fault)),
        // Not page-backed, held, or too many pieces: copy instead.
        Err(PieceError::Piece(())) => Ok(None),
    }
}

/// An skb with the transport headers, the payload copied from the
/// sender's memory, the pad and room for the ICRC, all in its linear part.
fn copied(
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    hdr: &headers::Packet,
    headroom: u32,
    transport_len: usize,
) -> core::result::Result<SkBuff, SendError> {
    let header_len = hdr.info.header_len();
    let payload_len = hdr.payload_len;
    let as_u32 = |len: usize| u32::try_from(len).map_err(|_| SendError::Dropped);
    let mut skb = SkBuff::alloc(headroom, as_u32(transport_len)?).ok_or(SendError::Dropped)?;
    let head = skb
        .put(as_u32(header_len)?)
        .map_err(|_| SendError::Dropped)?;
    headers::write_headers(hdr, head).ok_or(SendError::Dropped)?;
    if payload_len > 0 {
        // Copied straight into the room after the headers, each byte
        // written once.
        let source = packet.payload.as_ref().ok_or(SendError::Source)?;
        payload::for_each_piece(
            guard,
            source,
            packet.payload_at,
            as_u32(payload_len)?,
            |piece| skb.put_copy(&piece.bytes()),
        )
        .map_err(|e| match e {
            PieceError::Source => SendError::Source,
            PieceError::Absent(fault) => SendError::Absent(fault),
            PieceError::Piece(_) => SendError::Dropped,
        })?;
    }
    // The pad, zeroed, and the ICRC's room.
    let trailer = transport_len
        .checked_sub(header_len + payload_len)
        .ok_or(SendError::Dropped)?;
    skb.put(as_u32(trailer)?).map_err(|_| SendError::Dropped)?;
    Ok(skb)
}

impl Neighbourhood {
    /// The device a packet that arrived on `netdev` is for: the one on
    /// `netdev`, or, for a VLAN (or other upper) of a device's netdev,
    /// whose addresses the core lists as GIDs of that device's port, the
    /// one on the netdev below it.
    fn device_on<'g>(
        &self,
        guard: &'g RcuReadGuard,
        netdev: &NetDevice,
    ) -> Option<&'g Device<SrnicDevice>> {
        if let Some(dev) = self.by_ifindex.get(guard, netdev.ifindex() as u32) {
            return Some(dev);
        }
        let mut found = None;
        netdev.find_lower(guard, |lower| {
            found = self.by_ifindex.get(guard, lower.ifindex() as u32);
            found.is_some()
        });
        found
    }
}

/// Page fragments a received datagram may have and still be read in place
/// (the kernel's default `MAX_SKB_FRAGS`); one with more is made linear.
const RX_FRAGS: usize = 17;

/// Pieces of a received datagram: its linear part, then its fragments.
const RX_PIECES: usize = RX_FRAGS + 1;

impl UdpReceiver for Neighbourhood {
    fn receive(&self, mut skb: SkBuff) {
        if linear_headers(&mut skb).is_err() {
            return;
        }
        let guard = RcuReadGuard::new();
        let Some(arrived) = skb.device(&guard) else {
            return;
        };
        let Some(dev) = self.device_on(&guard, arrived) else {
            return;
        };
        let Some((skb, dest)) = steer(dev, &guard, skb) else {
            return;
        };
        take(dev, &guard, &self.crc, &skb, skb.device(&guard), dest);
        // `skb` is freed here: the engine has copied what it keeps.
    }
}

/// Most packets that may wait for one QP's receive work; more are
/// dropped (and sent again by the requester), like a full receive ring.
pub(crate) const STEERED_MAX: u32 = 1024;

/// Most packets all QPs of one device may hold for their receive work:
/// packets are queued before their ICRC is checked, so forged ones could
/// otherwise pile up across many QPs. Kept roughly (see [`SteeredCount`]).
const STEERED_DEVICE_MAX: i64 = 4096;

/// Packets a CPU counts on its own before it adds them to the device's
/// total: the total is off by at most this much per CPU.
const STEERED_COUNT_BATCH: i32 = 32;

/// The device-wide count of steered packets not yet through.
pub(crate) type DeviceSteered = ApproximateCount<STEERED_COUNT_BATCH>;

/// One QP's steered packets not yet through, and its share of its
/// device's count, which it gives back when the QP goes; with the two
/// hints that decide which of its packets are bulk (`pure::steer`).
pub(crate) struct SteeredCount {
    pending: AtomicU32,
    device: Arc<DeviceSteered>,
    /// Where the peer's request under way stands (`pure::steer::Runs`).
    /// A hint, kept without a lock: a QP's packets arriving on two CPUs
    /// at once may miscount it, which moves only where a packet is taken.
    /// (Such packets race to the QP's lock whatever is counted here, as
    /// they always did: the transport puts them in order, or asks for
    /// them again.)
    runs: AtomicU32,
    /// This side's requester sent a request since the peer's last message
    /// began: the peer's next one answers it.
    sent_request: AtomicBool,
}

impl SteeredCount {
    pub(crate) fn new(dev: &Device<SrnicDevice>) -> Self {
        Self {
            pending: AtomicU32::new(0),
            device: dev.steered.clone(),
            runs: AtomicU32::new(0),
            sent_request: AtomicBool::new(false),
        }
    }

    /// The requester starts a request. Written only when it changes: a
    /// stream's poster would otherwise write a line the receive path reads
    /// once per message.
    pub(crate) fn note_request(&self) {
        if !self.sent_request.load(Ordering::Relaxed) {
            self.sent_request.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the packet of `info` may be taken on another CPU, by where
    /// the peer's message under way stands (`pure::steer::may_steer`).
    fn may_steer(&self, info: Option<headers::OpcodeInfo>) -> bool {
        let bits = self.runs.load(Ordering::Relaxed);
        let mut runs = Runs::from_bits(bits);
        let sent = || {
            self.sent_request.load(Ordering::Relaxed)
                && self.sent_request.swap(false, Ordering::Relaxed)
        };
        let steer = crate::pure::steer::may_steer(info, &mut runs, sent);
        // Written only when it changed: the line is shared with `pending`.
        if runs.to_bits() != bits {
            self.runs.store(runs.to_bits(), Ordering::Relaxed);
        }
        steer
    }

    /// Packets steered and not yet through.
    fn pending(&self) -> u32 {
        // Acquire: pairs with `release`, so that a packet seen through is.
        self.pending.load(Ordering::Acquire)
    }

    /// Counts one more packet, if the device is below its bound.
    fn charge(&self) -> bool {
        if self.device.approximate() >= STEERED_DEVICE_MAX {
            return false;
        }
        self.device.add(1);
        self.pending.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// A steered packet is through.
    fn release_one(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
        self.device.add(-1);
    }
}

impl Drop for SteeredCount {
    fn drop(&mut self) {
        // The QP's queue goes with it, and the packets still in it.
        self.device.add(-i64::from(*self.pending.get_mut()));
    }
}

/// Hands `skb` to the receive work of the QP it is for, on another CPU,
/// if it is part of a bulk transfer (a first or middle packet of a message
/// of several on a connection, but for the first few packets of a SEND or
/// WRITE that answers one of ours: `pure::steer`), or if packets steered
/// before it are still waiting, so that it cannot overtake them; gives it
/// back to be taken here otherwise. Steering lets this CPU (on a veth, the
/// sender's) go on while another copies the payload into memory and
/// answers; a one-packet message, and a short answer, is taken here,
/// where its latency is least, unless packets before it wait. The headers
/// read here are only a hint: the receive work checks the whole packet.
fn steer<'g>(
    dev: &Device<SrnicDevice>,
    guard: &'g RcuReadGuard,
    mut skb: SkBuff,
) -> Option<(SkBuff, Option<&'g Qp<SrnicDevice>>)> {
    let Some(bth) = skb
        .data()
        .get(UDP_HEADER_LEN..)
        .and_then(|bytes| headers::Bth::parse(bytes).ok())
    else {
        return Some((skb, None));
    };
    let Some(qp) = dev.qps.get(guard, bth.dest_qp) else {
        return Some((skb, None));
    };
    if !matches!(qp.qp_type(), QpType::Rc | QpType::Uc) {
        return Some((skb, Some(qp)));
    }
    let this: &SrnicQp = qp;
    let count = &this.steered_count;
    // Followed for every packet, so that a message's place is known when
    // its steered packets have drained.
    let bulk = count.may_steer(headers::opcode_info(bth.opcode));
    let waiting = count.pending() != 0;
    if !waiting && (!bulk || !cpu::others_online()) {
        return Some((skb, Some(qp)));
    }
    if this.steered.len() >= STEERED_MAX || !count.charge() {
        if !waiting {
            // Nothing of this QP's waits: taken here, it overtakes none.
            return Some((skb, Some(qp)));
        }
        dev.counters.inc(Counter::SteerDrops);
        return None;
    }
    skb.leave_receive_path();
    this.steered.push(skb);
    dev.counters.inc(Counter::SteeredPackets);
    qp.run_receive_work_elsewhere();
    None
}

/// Takes the packets steered to `qp` (see [`steer`]), in order, from its
/// receive work.
pub(crate) fn receive_steered(qp: &Qp<SrnicDevice>) {
    let this: &SrnicQp = qp;
    let dev = qp.device();
    let mut taken = 0u32;
    // Completion events go out once per batch (see `STEERED_BATCH`), whose
    // packets may each start a requester's run (an answer's).
    let mut held = dev.comp_vectors().hold_raises();
    while let Some(skb) = this.steered.pop() {
        {
            let guard = RcuReadGuard::new();
            // No device: steering is for connections, whose packets need
            // none (a datagram's VLAN is read from it).
            take(dev, &guard, &dev.neighbourhood.crc, &skb, None, Some(qp));
        }
        drop(skb);
        // Counted through only once it is: a packet that arrives before
        // then is steered behind it.
        this.steered_count.release_one();
        taken = taken.wrapping_add(1);
        if taken % STEERED_BATCH == 0 {
            // A backlog of up to `STEERED_MAX` takes a while; others on
            // this CPU get their turn between batches, and the batch's
            // events go out first.
            drop(held);
            cond_resched();
            held = dev.comp_vectors().hold_raises();
        }
    }
}

/// Steered packets taken between chances for others to run.
const STEERED_BATCH: u32 = 64;

/// Checks a datagram that came to `dev` (through the netdev `arrived`, if
/// it is known) and hands its packet to the transport.
fn take(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    crc: &Crc32Engine,
    skb: &SkBuff,
    arrived: Option<&NetDevice>,
    dest: Option<&Qp<SrnicDevice>>,
) {
    let mut pieces = [SharedRange::from_slice(&[]); RX_PIECES];
    match parse(skb, crc, &mut pieces) {
        Ok(datagram) => {
            let counters = &dev.counters;
            let Ok(hdr) = headers::parse_head(datagram.transport_head, datagram.transport_len)
            else {
                counters.inc(Counter::MalformedPackets);
                return;
            };
            if !headers::pkey_matches(hdr.bth.pkey, headers::DEFAULT_PKEY) {
                counters.inc(Counter::PkeyViolations);
                return;
            }
            let Some(payload) = payload_of(&mut pieces, datagram.pieces, &hdr) else {
                counters.inc(Counter::MalformedPackets);
                return;
            };
            counters.inc(Counter::ReceivedPackets);
            counters.add(Counter::ReceivedBytes, hdr.payload_len as u64);
            // The core finds the GID a datagram came to by its address
            // and VLAN (`ib_init_ah_attr_from_wc`), as it would reply.
            let vlan = match arrived {
                Some(arrived) if hdr.deth.is_some() => arrived.rdma_vlan_id(guard),
                _ => None,
            };
            let packet = Packet {
                hdr,
                payload: Some(payload),
                payload_at: 0,
                ip: Some(datagram.ip),
                hop: Hop::Wire,
                vlan,
                rxe_flush_icrc: datagram.rxe_flush_icrc,
            };
            transport::receive_from_wire(dev, guard, packet, dest);
        }
        Err(counter) => dev.counters.inc(counter),
    }
}

/// Makes the UDP and transport headers of a received datagram linear, to
/// be parsed from one slice, and leaves its payload where it is (page
/// fragments, read once by the ICRC check and once by the copy into
/// memory). The BTH comes first: its opcode tells how long the headers
/// are. Made linear whole: a datagram whose data is not all in page
/// fragments readable in place (a `frag_list` of IP fragments or of a GRO
/// list), or is in too many, and a FLUSH, which has no payload and whose
/// rxe ICRC covers its headers twice.
fn linear_headers(skb: &mut SkBuff) -> Result {
    if !skb
        .page_frag_count()
        .is_some_and(|count| count as usize <= RX_FRAGS)
    {
        return skb.linearize();
    }
    // Never more than the datagram: a shorter one is refused when parsed.
    let len = skb.len();
    skb.pull_linear(len.min((UDP_HEADER_LEN + BTH_LEN) as u32))?;
    let Some(info) = skb
        .data()
        .get(UDP_HEADER_LEN)
        .and_then(|opcode| headers::opcode_info(*opcode))
    else {
        // Too short or an unknown opcode: refused when parsed.
        return Ok(());
    };
    if info.opcode == RC_FLUSH {
        return skb.linearize();
    }
    let header_len = u32::try_from(UDP_HEADER_LEN + info.header_len()).map_err(|_| EINVAL)?;
    skb.pull_linear(len.min(header_len))
}

/// A received datagram whose ICRC checks.
struct Datagram<'a> {
    /// Its IP header.
    ip: IpHeader,
    /// The linear bytes of its transport packet (BTH to ICRC): all its
    /// headers if it has them (`linear_headers`).
    transport_head: &'a [u8],
    /// Bytes of its transport packet.
    transport_len: usize,
    /// How many pieces hold the datagram from its UDP header on.
    pieces: usize,
    /// Whether its ICRC was rxe's FLUSH variant.
    rxe_flush_icrc: bool,
}

/// The datagram in `skb` if its ICRC checks, with its bytes from the UDP
/// header on, end to end, in `pieces`: the linear part, then the page
/// fragments; the counter to bump if it is refused.
fn parse<'a>(
    skb: &'a SkBuff,
    engine: &Crc32Engine,
    pieces: &mut [SharedRange<'a>; RX_PIECES],
) -> core::result::Result<Datagram<'a>, Counter> {
    let bytes = skb.network_header_on().ok_or(Counter::MalformedPackets)?;
    let (ip_len, mut header) = match bytes.first().map(|b| b >> 4) {
        // IPv4 without options.
        Some(4) if bytes.first() == Some(&0x45) => {
            let field = |at: usize| bytes.get(at).copied().ok_or(Counter::MalformedPackets);
            let address = |at: usize| {
                bytes
                    .get(at..at + 4)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(ipv4_mapped)
                    .ok_or(Counter::MalformedPackets)
            };
            let header = IpHeader {
                sgid: address(12)?,
                dgid: address(16)?,
                traffic_class: field(1)?,
                hop_limit: field(8)?,
                flow_label: 0,
                ip_payload_len: 0,
            };
            (IPV4_HEADER_LEN, header)
        }
        // IPv6 with UDP right after the header.
        Some(6) => (
            GRH_LEN,
            IpHeader::from_ipv6(bytes).ok_or(Counter::MalformedPackets)?,
        ),
        _ => return Err(Counter::MalformedPackets),
    };
    let (ip, linear) = split_checked(bytes, ip_len).ok_or(Counter::MalformedPackets)?;
    let udp_len = linear
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(|b| usize::from(u16::from_be_bytes(b)))
        .ok_or(Counter::MalformedPackets)?;
    // The UDP length bounds the datagram (Ethernet may pad short frames).
    let linear = linear.get(..udp_len).unwrap_or(linear);
    let (first, frag_slots) = pieces.split_first_mut().ok_or(Counter::MalformedPackets)?;
    *first = SharedRange::from_slice(linear);
    let mut frag_slots = frag_slots.iter_mut();
    let mut count = 1usize;
    let mut total = linear.len();
    skb.page_frags(|frag| {
        let slot = frag_slots.next().ok_or(E2BIG)?;
        total = total.checked_add(frag.len()).ok_or(EINVAL)?;
        *slot = frag;
        count += 1;
        Ok(())
    })
    .map_err(|_| Counter::MalformedPackets)?;
    if udp_len > total {
        return Err(Counter::MalformedPackets);
    }
    let crc_at = udp_len
        .checked_sub(ICRC_LEN)
        .filter(|at| *at >= UDP_HEADER_LEN)
        .ok_or(Counter::MalformedPackets)?;
    let pieces = pieces.get(..count).ok_or(Counter::MalformedPackets)?;
    // The linear bytes as a slice, then those in page fragments, which may
    // be pages a local sender's process writes meanwhile (looped back
    // through a veth), read in place once each, from C.
    let head = linear.get(..crc_at).unwrap_or(linear);
    let mut icrc = icrc_over(engine, ip, head).map_err(|_| Counter::MalformedPackets)?;
    for_each_within(pieces, head.len(), crc_at - head.len(), |range| {
        icrc = Icrc::from_register(engine.update_range(icrc.register(), &range));
        Some(())
    })
    .ok_or(Counter::MalformedPackets)?;
    let mut received = [0u8; ICRC_LEN];
    let mut filled = 0usize;
    for_each_within(pieces, crc_at, ICRC_LEN, |range| {
        let end = filled.checked_add(range.len())?;
        let into = received.get_mut(filled..end)?;
        SharedRange::from_mut_slice(into).copy_from(&range).ok()?;
        filled = end;
        Some(())
    })
    .ok_or(Counter::MalformedPackets)?;
    let received = u32::from_le_bytes(received);
    let mut rxe_flush = false;
    if received != icrc.finish() {
        // rxe's FLUSH requests carry an ICRC of their own (see
        // `rxe_flush_icrc`): taken too, so that rxe's FLUSHes get through.
        // A FLUSH is linear (`linear_headers`).
        let flush = linear.get(UDP_HEADER_LEN).copied() == Some(RC_FLUSH);
        rxe_flush = flush
            && linear
                .get(..crc_at)
                .is_some_and(|covered| rxe_flush_icrc(ip, covered) == Ok(received));
        if !rxe_flush {
            return Err(Counter::IcrcErrors);
        }
    }
    header.ip_payload_len = udp_len as u16;
    let transport_head = linear
        .get(UDP_HEADER_LEN..)
        .ok_or(Counter::MalformedPackets)?;
    Ok(Datagram {
        ip: header,
        transport_head,
        transport_len: udp_len - UDP_HEADER_LEN,
        pieces: count,
        rxe_flush_icrc: rxe_flush,
    })
}

/// Calls `f` with the parts of `pieces`, taken end to end, that hold bytes
/// `at..at + len` of them, in order; `None` if they end before, or if `f`
/// says so.
fn for_each_within<'a>(
    pieces: &[SharedRange<'a>],
    at: usize,
    len: usize,
    mut f: impl FnMut(SharedRange<'a>) -> Option<()>,
) -> Option<()> {
    let mut skip = at;
    let mut left = len;
    for piece in pieces {
        if left == 0 {
            break;
        }
        let Some(from) = piece.len().checked_sub(skip).filter(|n| *n > 0) else {
            skip -= piece.len();
            continue;
        };
        let take = from.min(left);
        f(piece.sub(skip, take)?)?;
        skip = 0;
        left -= take;
    }
    (left == 0).then_some(())
}

/// The payload of a received packet with headers `hdr` whose datagram, from
/// the UDP header on, is `pieces[..count]`: a range of the linear part if
/// it is all there, else those pieces narrowed to it in place.
fn payload_of<'p, 'a: 'p>(
    pieces: &'p mut [SharedRange<'a>],
    count: usize,
    hdr: &headers::Packet,
) -> Option<Extent<'p>> {
    let start = UDP_HEADER_LEN.checked_add(hdr.payload_offset)?;
    let len = hdr.payload_len;
    let linear = *pieces.first()?;
    if start.checked_add(len)? <= linear.len() {
        return linear.sub(start, len).map(Extent::Inline);
    }
    let mut kept = 0usize;
    let mut skip = start;
    let mut left = len;
    for i in 0..count {
        if left == 0 {
            break;
        }
        let piece = *pieces.get(i)?;
        let Some(from) = piece.len().checked_sub(skip).filter(|n| *n > 0) else {
            skip -= piece.len();
            continue;
        };
        let take = from.min(left);
        // `kept <= i`: no piece still to be read is overwritten.
        *pieces.get_mut(kept)? = piece.sub(skip, take)?;
        kept += 1;
        skip = 0;
        left -= take;
    }
    if left != 0 {
        return None;
    }
    let pieces: &'p [SharedRange<'a>] = pieces;
    Some(Extent::Pieces(pieces.get(..kept)?))
}
