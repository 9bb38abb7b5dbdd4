// SPDX-License-Identifier: GPL-2.0

//! One emulated LAN port: the netdev `iblanN` over one RDMA port, its UD QP,
//! the name service and the data path.
//!
//! Which CPU does what: `ndo_start_xmit` posts sends on the sending CPU,
//! on the transmit queue the stack picked (CPU c uses queue c modulo the
//! queues in use). Each transmit queue has a send-only UD QP whose CQ is
//! on the completion vector of the queue's number and raises that queue's
//! NAPI, which reclaims its sends. The main QP receives (and sends the
//! announcements); its CQ, on vector 0, raises the main NAPI, which copies
//! each received datagram once into an skb (or into a reassembly buffer)
//! and reposts the receive. The name service runs in a work item every
//! second and when an announcement arrives.
//!
//! This file is the device and its lifetime: creation (by the module for an
//! RDMA port, or as an `ip link` child), the netdev and rtnl_link
//! operations, and teardown. Each role of the data path has its own file
//! under `port/`: `tx.rs` transmit, `rx.rs` completions, receive and
//! reassembly, `name_service.rs` the name service, `peers.rs` the peer
//! table, `stats.rs` the counters and the debugfs table.

use crate::forwarding::Forwarding;
use crate::kapi::address_not_available;
use crate::kapi::debugfs::{SeqOut, Show};
use crate::kapi::ether::{
    Coalesce, DeviceCell, EtherDevice, EtherDriver, EtherRegistration, LinkStats, TxOutcome,
};
use crate::kapi::net::Net;
use crate::kapi::netdev::{rtnl_lock, rtnl_try_lock, RtnlGuard};
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::consumer::{
    Ah, Completion, Cq, CqHandler, DeviceRef, IbDevice, Ipv6Membership, Pd, Received, UdQp,
    UdQpConfig, WorkCompletion, DEVICE_NAME_MAX,
};
use crate::kapi::rtnl_link::{
    iblan, Attr, AttrPolicy, ExtAck, LinkChange, LinkDriver, LinkId, LinkInfo, LinkOps,
    LinkRegistration, NewLink,
};
use crate::kapi::skb::SkBuff;
use crate::kapi::sync::{SpinLockBh, SpinLockIrq};
use crate::kapi::sysfs::{SysfsFileOps, SysfsGroup, SysfsText};
use crate::kapi::work::{now_ms, sleep_ms, DelayedWork};
use crate::params::LanConfig;
use crate::pure::connect::{CONNECT_KIND, CONNECT_LEN};
use crate::pure::fdb::Learned;
use crate::pure::lan::{
    self, Announcement, Datagram, FragmentPlan, MacKind, Reassembler, ReassemblySlot, Step,
    ANNOUNCE_LEN, FRAG_HEADER_LEN, LAN_COUNT, MAX_FRAME_LEN,
};
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

mod connected;
mod name_service;
mod peers;
mod rx;
mod stats;
mod tx;
mod txq;

use connected::{CmInbox, MTU_MAX_CONNECTED};
use name_service::Inbox;
use peers::{Peer, PeerEntry, PeerTable, Posts, Targets, QPS};
use rx::{Events, Reassembly};
use stats::{Link, Stat, STAT_NAMES, TX_QUEUE_STAT_NAMES};
use txq::TxQueue;

const CALLER: &CStr = c_str!("iblan");
/// Send entries of each transmit queue's QP.
const SEND_DEPTH: u32 = 1024;
/// Send entries of the main QP: the announcement and the handshake's
/// messages use them (one a send buffer in flight at a time).
const ANNOUNCE_DEPTH: u32 = 8;
const RECV_DEPTH: u32 = 256;
/// Transmit queues a LAN port has at most: one per CPU, up to the RDMA
/// device's completion vectors and this.
const MAX_TX_QUEUES: usize = 16;
/// The GRH (or IP header) area at the start of every UD receive.
const GRH_LEN: usize = 40;
/// Peers a LAN port knows at most.
const MAX_PEERS: usize = 64;
/// Peers that left and wait for their sends to complete: room for a whole
/// table leaving while the previous one still waits.
const MAX_RETIRED: usize = 2 * MAX_PEERS;
/// Reassemblies open at once.
const REASSEMBLY_SLOTS: usize = 64;
const ANNOUNCE_EVERY_MS: u64 = 2000;
/// A peer that missed three announcements is gone.
const PEER_LIFETIME_MS: u64 = 3 * ANNOUNCE_EVERY_MS;
const TICK_MS: u64 = 1000;
/// How long a new LAN port with a LID of the user's listens for a member
/// of its LAN holding it: members answer a probe at once.
const PROBE_MS: u64 = 500;
const MTU_DEFAULT: u32 = 1500;
/// The largest MTU of datagram mode (frames cut into datagrams).
const MTU_MAX: u32 = 9000;

/// The QP's send buffers: the announcement's, then the handshake's
/// ([`connected::HANDSHAKE_BUFFERS`]).
const SEND_BUFFERS: &[usize] = &[
    ANNOUNCE_LEN,
    CONNECT_LEN,
    CONNECT_LEN,
    CONNECT_LEN,
    CONNECT_LEN,
];
const ANNOUNCE_BUFFER: usize = 0;

/// The netdev's private data. Fields drop in declaration order, which is
/// the order the verbs objects must go in.
pub(crate) struct LanDev {
    /// With its CQ, its receive buffers (each the GRH area and one
    /// path-MTU datagram) and the announcement's send buffer.
    qp: UdQp<Events>,
    /// The transmit queues, each a send QP with its CQ; at least one.
    tx: KVec<TxQueue>,
    /// After the QP: its sends are done (or flushed) when the AHs go.
    /// Bottom halves off, interrupts on: sends are posted under it, and a
    /// provider may then send at once (srnic defers a post made with
    /// interrupts off to a work item). Never taken in hard-IRQ context.
    peers: Pin<KBox<SpinLockBh<PeerTable>>>,
    /// Sends of the main QP completed (or flushed); compared with
    /// `PeerTable::posted`, as each transmit queue's.
    sends_completed: AtomicU64,
    group_ah: Ah,
    _membership: Ipv6Membership,
    reassembly: Pin<KBox<SpinLockIrq<Reassembly>>>,
    /// Where foreign MACs (bridged, macvlan) sit.
    forwarding: Forwarding,
    pd: Pd,
    device: DeviceRef,
    config: LanConfig,
    port: u32,
    sgid_index: u8,
    sgid: [u8; 16],
    guid: u64,
    /// Bytes of a UD datagram's payload on this port (its active MTU).
    datagram_len: u32,
    lid: AtomicU16,
    /// A LID the name service wants but could not set yet (0: none).
    lid_wanted: AtomicU16,
    sequence: AtomicU32,
    last_announce_ms: AtomicU64,
    announce_busy: AtomicBool,
    announce_soon: AtomicBool,
    running: AtomicBool,
    inbox: Pin<KBox<SpinLockIrq<Inbox>>>,
    /// Free send entries of the main QP.
    sq_free: AtomicU32,
    frame_number: AtomicU32,
    /// `ethtool -C` rx-usecs and rx-frames, the main CQ's event
    /// moderation, and tx-usecs and tx-frames, every transmit queue's
    /// CQ's ([`Moderation::bits`]). Changed under RTNL only.
    rx_moderation: AtomicU32,
    tx_moderation: AtomicU32,
    /// On the heap: the port's data is built on the stack.
    stats: KBox<[AtomicU64; Stat::Count as usize]>,
    link: Link,
    ticker: DelayedWork<LanDev>,
    /// On the port's own LAN port: its child in each LAN, by
    /// [`LinkId::to_bits`] (0: none), one slot a LAN index; empty on a
    /// child. Not by ifindex: a child may sit in another namespace, and
    /// move. Changed under RTNL only. On the heap: the port's data is
    /// built on the stack.
    children: KVec<AtomicUsize>,
    /// The RDMA port goes: no new children.
    closing: AtomicBool,
    /// Connected mode: unicast over an RC connection per peer. Changed
    /// under RTNL only.
    connected: AtomicBool,
    /// A connection's CQ had an event: NAPI polls the connections.
    links_pending: AtomicBool,
    /// Handshake messages for the ticker.
    cm_inbox: Pin<KBox<SpinLockBh<CmInbox>>>,
    /// Whether the RDMA port is active, shared by the port's LAN ports.
    port_up: Arc<AtomicBool>,
    /// A child's parent's ifindex (0: this is the port's own LAN port), in
    /// the initial namespace, where the parent stays.
    parent_ifindex: i32,
    /// A child's parent, wherever the child is.
    parent: Option<LinkId>,
    /// Last: the verbs objects above go first.
    _hold: Option<DeviceRef>,
}

/// Creates the LAN port over `port` of `dev` in the module's LAN and
/// registers its netdev `iblanN`, the parent of the port's other LANs.
pub(crate) fn create(
    link: &LinkRegistration<LanDev>,
    dev: &IbDevice,
    port: u32,
    config: LanConfig,
) -> Result<EtherRegistration<LanDev>> {
    let data = LanDev::new(dev, port, config, None, Origin::Port)?;
    let mac = lan::mac_for(config.vendor, config.lan, data.lid.load(Ordering::Relaxed));
    let reg =
        EtherRegistration::new_linked(link, c_str!("iblan%d"), mac, dev.placement(port), data)?;
    reg.device().data().attach(reg.device());
    Ok(reg)
}

/// How a LAN port came to be.
enum Origin {
    /// The module made it for an RDMA port: the parent of the port's
    /// other LANs.
    Port,
    /// `ip link add link PARENT type iblan`.
    Child {
        /// The parent.
        parent: LinkId,
        /// Its ifindex.
        parent_ifindex: i32,
        /// The parent's datagram length and port state: a child is made
        /// under RTNL, where the port may not be queried (providers take
        /// RTNL for the port's speed).
        datagram_len: u32,
        port_up: Arc<AtomicBool>,
        /// Keeps the RDMA device registered until this LAN port's verbs
        /// objects are gone: `ip link del` destroys them after RTNL is
        /// released, when the client's `remove` may be running.
        hold: DeviceRef,
    },
}

impl LanDev {
    /// A LAN port over `port` of `dev`: its verbs objects, with its
    /// receives posted, and its name service's LID (`lid`, or the one it
    /// derives from the GID).
    fn new(
        dev: &IbDevice,
        port: u32,
        config: LanConfig,
        lid: Option<u16>,
        origin: Origin,
    ) -> Result<Self> {
        let group = config.group();
        let (sgid_index, sgid) = link_local_gid(dev, port)?;
        let netdev = dev.port_netdev(port).ok_or(ENODEV)?;
        let is_port = matches!(origin, Origin::Port);
        let ((parent_ifindex, parent), hold, datagram_len, port_up) = match origin {
            Origin::Port => (
                (0, None),
                None,
                dev.port_mtu(port)?,
                Arc::new(AtomicBool::new(dev.port_active(port)), GFP_KERNEL)?,
            ),
            Origin::Child {
                parent,
                parent_ifindex,
                hold,
                datagram_len,
                port_up,
            } => (
                (parent_ifindex, Some(parent)),
                Some(hold),
                datagram_len,
                port_up,
            ),
        };
        let mut children = KVec::new();
        if is_port {
            children = KVec::with_capacity(LAN_COUNT, GFP_KERNEL)?;
            for _ in 0..LAN_COUNT {
                children.push(AtomicUsize::new(0), GFP_KERNEL)?;
            }
        }
        let pd = Pd::new(dev, CALLER)?;
        let mut qp = Self::open_qp(&pd, port, &config, datagram_len)?;
        let tx = TxQueue::open_all(dev, &pd, port, &config, &qp.cq().handler().netdev)?;
        let membership = Ipv6Membership::join(netdev, group)?;
        qp.attach(&group)?;
        let group_ah = Ah::new(&pd, port, sgid_index, &group, 1)?;
        let lid = lid.unwrap_or_else(|| lan::initial_lid(&sgid));
        let data = LanDev {
            qp,
            tx,
            peers: KBox::pin_init(
                new_spinlock_bh!(PeerTable::new()?, "iblan_peers"),
                GFP_KERNEL,
            )?,
            sends_completed: AtomicU64::new(0),
            group_ah,
            _membership: membership,
            reassembly: KBox::pin_init(
                new_spinlock_irq!(Reassembly::new()?, "iblan_reassembly"),
                GFP_KERNEL,
            )?,
            forwarding: Forwarding::new()?,
            device: dev.get()?,
            config,
            port,
            sgid_index,
            sgid,
            guid: dev.node_guid(),
            datagram_len,
            lid: AtomicU16::new(lid),
            lid_wanted: AtomicU16::new(0),
            sequence: AtomicU32::new(0),
            last_announce_ms: AtomicU64::new(0),
            announce_busy: AtomicBool::new(false),
            announce_soon: AtomicBool::new(true),
            running: AtomicBool::new(false),
            inbox: KBox::pin_init(
                new_spinlock_irq!(
                    Inbox {
                        pending: [[0; ANNOUNCE_LEN]; 16],
                        count: 0,
                        taken: 0,
                    },
                    "iblan_inbox"
                ),
                GFP_KERNEL,
            )?,
            sq_free: AtomicU32::new(ANNOUNCE_DEPTH),
            frame_number: AtomicU32::new(0),
            rx_moderation: AtomicU32::new(0),
            tx_moderation: AtomicU32::new(0),
            stats: KBox::new(
                [const { AtomicU64::new(0) }; Stat::Count as usize],
                GFP_KERNEL,
            )?,
            link: Link::default(),
            ticker: DelayedWork::new(),
            pd,
            children,
            closing: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            links_pending: AtomicBool::new(false),
            cm_inbox: KBox::pin_init(
                new_spinlock_bh!(CmInbox::new(), "iblan_cm_inbox"),
                GFP_KERNEL,
            )?,
            port_up,
            parent_ifindex,
            parent,
            _hold: hold,
        };
        // The QP synced each receive buffer for the device and posted it.
        data.add(Stat::DmaSyncsForDevice, RECV_DEPTH.into());
        Ok(data)
    }

    /// The port's UD QP, on a CQ of its own, with its receive buffers
    /// (one datagram and its GRH each) posted.
    fn open_qp(pd: &Pd, port: u32, config: &LanConfig, datagram_len: u32) -> Result<UdQp<Events>> {
        let cq = Cq::new(
            pd,
            ANNOUNCE_DEPTH + RECV_DEPTH,
            0,
            Events {
                netdev: DeviceCell::new()?,
            },
            CALLER,
        )?;
        let qp_config = UdQpConfig {
            depths: (ANNOUNCE_DEPTH, RECV_DEPTH),
            port,
            qkey: config.qkey(),
            recv_len: GRH_LEN + datagram_len as usize,
            send_buffers: SEND_BUFFERS,
        };
        UdQp::new(pd, cq, &qp_config, CALLER)
    }

    /// The netdev is registered: its carrier follows the port from now.
    fn attach(&self, netdev: &EtherDevice<LanDev>) {
        if self.port_up.load(Ordering::Relaxed) {
            netdev.carrier_on();
        }
    }

    /// Whether the port has a LAN port in `lan` already (this one, the
    /// port's parent, or a child of it).
    fn lan_in_use(&self, lan: u8) -> bool {
        lan == self.config.lan
            || self
                .children
                .get(usize::from(lan))
                .is_some_and(|c| c.load(Ordering::Relaxed) != 0)
    }

    /// The LAN ports `ip link add` made on this one, in whatever
    /// namespace: deletes them and refuses new ones, before the RDMA
    /// device or the module goes. Their data has dropped when this
    /// returns, except a child's whose namespace is being dismantled
    /// right now: that namespace deletes it, and its hold on the RDMA
    /// device keeps the device until then.
    pub(crate) fn close_children(dev: &EtherDevice<LanDev>) {
        let lan = dev.data();
        let rtnl = rtnl_lock();
        lan.closing.store(true, Ordering::Relaxed);
        for child in lan.children.iter() {
            let Some(id) = LinkId::from_bits(child.load(Ordering::Relaxed)) else {
                continue;
            };
            match EtherDevice::<LanDev>::by_link_id(&rtnl, id) {
                Some(child) => child.delete_link(&rtnl),
                None => child.store(0, Ordering::Relaxed),
            }
        }
        // Releasing RTNL finishes the unregistrations: the children's
        // data drops here.
        drop(rtnl);
    }
}

/// The port's RoCEv2 GID of its netdev's IPv6 link-local address: every
/// RoCE port has one, and link-local needs no routing.
fn link_local_gid(dev: &IbDevice, port: u32) -> Result<(u8, [u8; 16])> {
    for index in 0..=255u8 {
        match dev.gid(port, index.into()) {
            Ok((gid, true)) if gid[0] == 0xfe && gid[1] & 0xc0 == 0x80 => return Ok((index, gid)),
            Ok(_) => {}
            Err(err) if err == EINVAL => break,
            Err(_) => {}
        }
    }
    Err(address_not_available())
}

impl LanDev {
    /// Follows the port's state.
    pub(crate) fn carrier_changed(&self, dev: &EtherDevice<LanDev>, active: bool) {
        if self.parent_ifindex == 0 {
            self.port_up.store(active, Ordering::Relaxed);
        }
        if active {
            dev.carrier_on();
            self.announce_soon.store(true, Ordering::Relaxed);
            if self.running.load(Ordering::Acquire) {
                self.ticker.schedule(0);
            }
        } else {
            dev.carrier_off();
        }
    }
}

/// A CQ's event moderation as `ethtool -C` sets it: an event waits for
/// `frames` completions or `usecs` microseconds, whichever comes first.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Moderation {
    usecs: u16,
    frames: u16,
}

impl Moderation {
    /// `ethtool`'s values; `EINVAL` beyond what `modify_cq` takes (the
    /// device may refuse less).
    fn new(usecs: u32, frames: u32) -> Result<Self> {
        match (u16::try_from(usecs), u16::try_from(frames)) {
            (Ok(usecs), Ok(frames)) => Ok(Self { usecs, frames }),
            _ => Err(EINVAL),
        }
    }

    /// Both in one word, for an atomic.
    fn bits(self) -> u32 {
        u32::from(self.usecs) | u32::from(self.frames) << 16
    }

    fn from_bits(bits: u32) -> Self {
        Self {
            usecs: bits as u16,
            frames: (bits >> 16) as u16,
        }
    }

    fn apply<H: CqHandler>(self, cq: &Cq<H>) -> Result {
        cq.set_moderation(self.frames, self.usecs)
    }
}

impl EtherDriver for LanDev {
    const DRIVER: &'static CStr = c_str!("iblan");
    const VERSION: &'static CStr = c_str!("1.0");
    const STAT_NAMES: &'static [&'static CStr] = STAT_NAMES;
    const TX_QUEUE_STAT_NAMES: &'static [&'static CStr] = TX_QUEUE_STAT_NAMES;
    const COALESCE_TX: bool = true;

    fn open(dev: &EtherDevice<Self>) -> Result {
        let lan = dev.data();
        // The first open initialises the ticker (later ones find it so).
        DelayedWork::init(dev.data_pinned());
        lan.running.store(true, Ordering::Release);
        lan.announce_soon.store(true, Ordering::Relaxed);
        lan.ticker.schedule(0);
        // Receives that completed while the netdev was down wait in the CQ.
        if lan.qp.cq().arm() {
            dev.napi_schedule();
        }
        for txq in lan.tx.iter() {
            txq.arm(dev);
        }
        dev.wake_all_queues();
        Ok(())
    }

    fn stop(dev: &EtherDevice<Self>) -> Result {
        let lan = dev.data();
        dev.stop_all_queues();
        // Not running first: the ticker then stops rescheduling itself.
        lan.running.store(false, Ordering::Release);
        lan.ticker.cancel_sync();
        // Room for the whole table among the retired peers.
        lan.release_retired();
        lan.send_announcement(true);
        // A node that is down hears nobody: it relearns the LAN when it
        // comes up, and meanwhile its stale table must not decide whether
        // a LID set by hand is free (the name service settles conflicts).
        lan.remove_peers(|_| true);
        Ok(())
    }

    fn tx_queues(&self) -> u16 {
        self.tx.len() as u16
    }

    fn start_xmit(dev: &EtherDevice<Self>, queue: u16, skb: SkBuff) -> TxOutcome {
        dev.data().transmit(dev, queue, skb)
    }

    fn tx_poll(dev: &EtherDevice<Self>, queue: u16, budget: u32) -> u32 {
        dev.data().tx_poll(dev, queue, budget)
    }

    fn tx_poll_done(dev: &EtherDevice<Self>, queue: u16) {
        if let Some(txq) = dev.data().tx.get(usize::from(queue)) {
            txq.arm(dev);
        }
    }

    fn tx_queue_stats(dev: &EtherDevice<Self>, queue: u16, out: &mut [u64]) {
        if let Some(txq) = dev.data().tx.get(usize::from(queue)) {
            txq.stats(out);
        }
    }

    fn set_mac_address(dev: &EtherDevice<Self>, mac: &[u8; 6]) -> Result {
        let lan = dev.data();
        let lid =
            lan::check_new_address(mac, lan.config.vendor, lan.config.lan).map_err(|err| {
                if err.is_invalid_argument() {
                    EINVAL
                } else {
                    address_not_available()
                }
            })?;
        if lid != lan.lid.load(Ordering::Relaxed) && lan.lid_in_use(lid) {
            return Err(address_not_available());
        }
        lan.lid.store(lid, Ordering::Relaxed);
        lan.announce_soon.store(true, Ordering::Relaxed);
        if lan.running.load(Ordering::Acquire) {
            lan.ticker.schedule(0);
        }
        Ok(())
    }

    fn change_mtu(dev: &EtherDevice<Self>, mtu: u32) -> Result {
        let max = if dev.data().connected_mode() {
            MTU_MAX_CONNECTED
        } else {
            MTU_MAX
        };
        if !(68..=max).contains(&mtu) {
            return Err(EINVAL);
        }
        Ok(())
    }

    fn stats64(dev: &EtherDevice<Self>, stats: &mut LinkStats) {
        let link = &dev.data().link;
        stats.rx_packets = link.rx_packets.load(Ordering::Relaxed);
        stats.rx_bytes = link.rx_bytes.load(Ordering::Relaxed);
        stats.rx_dropped = link.rx_dropped.load(Ordering::Relaxed);
        stats.multicast = link.rx_multicast.load(Ordering::Relaxed);
        stats.tx_packets = link.tx_packets.load(Ordering::Relaxed);
        stats.tx_bytes = link.tx_bytes.load(Ordering::Relaxed);
        stats.tx_dropped = link.tx_dropped.load(Ordering::Relaxed);
    }

    fn poll(dev: &EtherDevice<Self>, budget: u32) -> u32 {
        dev.data().poll(dev, budget)
    }

    fn poll_done(dev: &EtherDevice<Self>) {
        if dev.data().qp.cq().arm() {
            dev.napi_schedule();
        }
    }

    fn bus_info(dev: &EtherDevice<Self>, out: &mut [u8; 32]) {
        use core::fmt::Write;
        if dev.has_parent() {
            // The core names the parent (an HCA's PCI function).
            return;
        }
        let lan = dev.data();
        let mut w = BusInfo { out, at: 0 };
        let _ = write!(w, "{}:{}", lan.device.name(), lan.port);
    }

    fn iflink(dev: &EtherDevice<Self>) -> Option<i32> {
        let parent = dev.data().parent_ifindex;
        (parent != 0).then_some(parent)
    }

    fn coalesce(dev: &EtherDevice<Self>) -> Result<Coalesce> {
        let lan = dev.data();
        let rx = Moderation::from_bits(lan.rx_moderation.load(Ordering::Relaxed));
        let tx = Moderation::from_bits(lan.tx_moderation.load(Ordering::Relaxed));
        Ok(Coalesce {
            rx_usecs: rx.usecs.into(),
            rx_frames: rx.frames.into(),
            tx_usecs: tx.usecs.into(),
            tx_frames: tx.frames.into(),
        })
    }

    /// The rx- values moderate the main CQ, whose events raise the
    /// receive NAPI; the tx- values every transmit queue's CQ, whose
    /// events raise that queue's NAPI. All the queues' CQs take it, in use
    /// or not: they live as long as the netdev, so a queue `ethtool -L`
    /// adds later has it already. A change applies whole or not at all.
    fn set_coalesce(dev: &EtherDevice<Self>, coalesce: Coalesce) -> Result {
        let lan = dev.data();
        let rx = Moderation::new(coalesce.rx_usecs, coalesce.rx_frames)?;
        let tx = Moderation::new(coalesce.tx_usecs, coalesce.tx_frames)?;
        // A stopped queue waits for its send completions, and so for its
        // CQ's event: only a period bounds that wait on every device (srnic
        // caps a count alone at 4095 us, other devices may hold the event
        // until the count is met, which a stopped queue may never reach).
        if tx.frames > 1 && tx.usecs == 0 {
            return Err(EINVAL);
        }
        let old_rx = Moderation::from_bits(lan.rx_moderation.load(Ordering::Relaxed));
        let old_tx = Moderation::from_bits(lan.tx_moderation.load(Ordering::Relaxed));
        if tx != old_tx {
            lan.moderate_tx(tx, old_tx)?;
        }
        if rx != old_rx {
            if let Err(err) = rx.apply(lan.qp.cq()) {
                if tx != old_tx {
                    // Back as it was: the device took these values before.
                    let _ = lan.moderate_tx(old_tx, tx);
                }
                return Err(err);
            }
        }
        lan.rx_moderation.store(rx.bits(), Ordering::Relaxed);
        lan.tx_moderation.store(tx.bits(), Ordering::Relaxed);
        Ok(())
    }

    /// Completions reach the netdev through the CQ's handler, and the
    /// ticker finds it there.
    fn device_cell(&self) -> Option<&DeviceCell<Self>> {
        Some(&self.qp.cq().handler().netdev)
    }

    /// The netdev is unregistered (stopped) but not freed: every posted WR
    /// is reclaimed while the verbs objects and the netdev are both there.
    fn teardown(dev: &EtherDevice<Self>) {
        dev.data().drain(dev);
    }

    fn sysfs_group() -> Option<SysfsGroup> {
        crate::MODE_FILE.group()
    }

    fn ethtool_stats(dev: &EtherDevice<Self>, out: &mut [u64]) {
        let lan = dev.data();
        for (value, counter) in out.iter_mut().zip(lan.stats.iter()) {
            *value = counter.load(Ordering::Relaxed);
        }
        if let Some(peers) = out.get_mut(Stat::Count as usize) {
            *peers = lan.peers.lock().len() as u64;
        }
        if let Some(lid) = out.get_mut(Stat::Count as usize + 1) {
            *lid = lan.lid.load(Ordering::Relaxed).into();
        }
    }
}

impl LinkDriver for LanDev {
    const KIND: &'static CStr = c_str!("iblan");
    /// Up to connected mode's largest; datagram mode's `change_mtu`
    /// refuses more than it carries.
    const MTU: ((u32, u32), u32) = ((68, MTU_MAX_CONNECTED), MTU_DEFAULT);
    const MAX_TX_QUEUES: u16 = MAX_TX_QUEUES as u16;

    fn link_ops() -> &'static LinkOps<Self> {
        &crate::LINK
    }

    const POLICY: Option<AttrPolicy> = Some(iblan::POLICY);

    /// `ip link set DEV type iblan mode datagram|connected`.
    fn change_link(
        rtnl: &RtnlGuard,
        dev: &EtherDevice<Self>,
        change: &LinkChange<'_>,
        extack: &mut ExtAck,
    ) -> Result {
        match change.u8(iblan::MODE) {
            None => Ok(()),
            Some(mode) => connected::set_mode(rtnl, dev, mode).inspect_err(|err| {
                extack.message(format_args!(
                    "iblan: cannot change the mode: error {}",
                    err.to_errno()
                ));
            }),
        }
    }

    fn new_link<'a>(
        _rtnl: &'a RtnlGuard,
        parent: &'a EtherDevice<Self>,
        address: Option<[u8; 6]>,
        extack: &mut ExtAck,
    ) -> Result<NewLink<'a, Self>> {
        let p = parent.data();
        if p.parent_ifindex != 0 {
            extack.message(format_args!(
                "iblan: the parent must be the RDMA port's iblan netdev, not a LAN of it"
            ));
            return Err(EINVAL);
        }
        if p.closing.load(Ordering::Relaxed) {
            extack.message(format_args!("iblan: the RDMA device is going away"));
            return Err(ENODEV);
        }
        let vendor = p.config.vendor;
        let in_use = |lan| p.lan_in_use(lan);
        let (lan, lid) = match address {
            Some(mac) => match lan::check_child_address(&mac, vendor, in_use) {
                Ok((lan, lid)) => (lan, Some(lid)),
                Err(err) => return Err(refuse(extack, err, vendor)),
            },
            None => match lan::next_free_lan(in_use) {
                Some(lan) => (lan, None),
                None => {
                    extack.message(format_args!(
                        "iblan: every LAN index is in use on this port"
                    ));
                    return Err(EBUSY);
                }
            },
        };
        let Ok(hold) = p.device.get() else {
            extack.message(format_args!("iblan: the RDMA device is going away"));
            return Err(ENODEV);
        };
        let config = LanConfig { vendor, lan };
        let origin = Origin::Child {
            parent: parent.link_id(),
            parent_ifindex: parent.as_netdev().ifindex(),
            hold,
            datagram_len: p.datagram_len,
            port_up: p.port_up.clone(),
        };
        let data = LanDev::new(&p.device, p.port, config, lid, origin).inspect_err(|err| {
            extack.message(format_args!(
                "iblan: no LAN {} on {} port {}: error {}",
                lan,
                p.device.name(),
                p.port,
                err.to_errno()
            ));
        })?;
        if let Some(lid) = lid {
            if data.lid_taken(lid) {
                extack.message(format_args!(
                    "iblan: LID {lid:#06x} is in use in LAN {lan}: another node announces it"
                ));
                return Err(address_not_available());
            }
        }
        let mac = lan::mac_for(vendor, lan, data.lid.load(Ordering::Relaxed));
        Ok(NewLink {
            data,
            mac,
            placement: p.device.placement(p.port),
        })
    }

    /// The child's slot in its parent, found wherever the two are (the
    /// child may be in another namespace than its parent).
    fn link_registered(rtnl: &RtnlGuard, dev: &EtherDevice<Self>) {
        let lan = dev.data();
        lan.attach(dev);
        if let Some(parent) = lan
            .parent
            .and_then(|id| EtherDevice::<LanDev>::by_link_id(rtnl, id))
        {
            if let Some(slot) = parent.data().children.get(usize::from(lan.config.lan)) {
                slot.store(dev.link_id().to_bits(), Ordering::Relaxed);
            }
        }
    }

    fn link_deleted(rtnl: &RtnlGuard, dev: &EtherDevice<Self>) {
        let lan = dev.data();
        if let Some(parent) = lan
            .parent
            .and_then(|id| EtherDevice::<LanDev>::by_link_id(rtnl, id))
        {
            if let Some(slot) = parent.data().children.get(usize::from(lan.config.lan)) {
                let _ = slot.compare_exchange(
                    dev.link_id().to_bits(),
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// A child's parent is an RDMA port's own LAN port, made in the
    /// initial namespace, which it never leaves.
    fn link_net(dev: &EtherDevice<Self>) -> Option<&Net> {
        dev.data().parent.map(|_| Net::initial())
    }

    fn info_size(_dev: &EtherDevice<Self>) -> usize {
        LinkInfo::size(DEVICE_NAME_MAX)
            + LinkInfo::size(4)
            + LinkInfo::size(1)
            + LinkInfo::size(2)
            + LinkInfo::size(4)
            + LinkInfo::size(1)
    }

    fn fill_info(dev: &EtherDevice<Self>, info: &mut LinkInfo<'_>) -> Result {
        let lan = dev.data();
        let mut name = lan.device.name();
        info.put(iblan::RDMA_DEV, Attr::Str(name.as_c_str()))?;
        info.put(iblan::PORT, Attr::U32(lan.port))?;
        info.put(iblan::LAN, Attr::U8(lan.config.lan))?;
        info.put(iblan::LID, Attr::U16(lan.lid.load(Ordering::Relaxed)))?;
        let peers = lan.peers.lock().len() as u32;
        info.put(iblan::PEERS, Attr::U32(peers))?;
        let mode = if lan.connected_mode() {
            iblan::MODE_CONNECTED
        } else {
            iblan::MODE_UD
        };
        info.put(iblan::MODE, Attr::U8(mode))
    }
}

/// `/sys/class/net/<dev>/mode`: `datagram` or `connected`, and writes of
/// either, as `ip link set DEV type iblan mode ...`.
impl SysfsFileOps for LanDev {
    fn show(dev: &EtherDevice<Self>, out: &mut SysfsText<'_>) {
        use core::fmt::Write;
        let _ = out.write_str(if dev.data().connected_mode() {
            "connected"
        } else {
            "datagram"
        });
    }

    fn store(rtnl: &RtnlGuard, dev: &EtherDevice<Self>, text: &[u8]) -> Result {
        let mode = match text {
            b"datagram" => iblan::MODE_UD,
            b"connected" => iblan::MODE_CONNECTED,
            _ => return Err(EINVAL),
        };
        connected::set_mode(rtnl, dev, mode)
    }
}

/// Refuses a new LAN port's address, saying why.
fn refuse(extack: &mut ExtAck, err: lan::ChildAddressError, vendor: [u8; 3]) -> Error {
    use lan::ChildAddressError as E;
    match err {
        E::Multicast => {
            extack.message(format_args!(
                "iblan: a multicast address cannot be a node's address"
            ));
            address_not_available()
        }
        E::WrongVendor => {
            extack.message(format_args!(
                "iblan: the address must begin with the vendor ID {:02x}:{:02x}:{:02x}",
                vendor[0], vendor[1], vendor[2]
            ));
            EINVAL
        }
        E::LidOutOfRange => {
            extack.message(format_args!(
                "iblan: bytes 4-5 of the address are the LID, 0001 to bfff"
            ));
            address_not_available()
        }
        E::LanInUse(lan) => {
            extack.message(format_args!(
                "iblan: LAN {lan} (byte 3 of the address) has a netdev on this port already"
            ));
            EBUSY
        }
    }
}

/// Writes text into a fixed buffer, keeping a final NUL.
struct BusInfo<'a> {
    out: &'a mut [u8; 32],
    at: usize,
}

impl core::fmt::Write for BusInfo<'_> {
    fn write_str(&mut self, text: &str) -> core::fmt::Result {
        for byte in text.bytes() {
            if self.at + 1 >= self.out.len() {
                break;
            }
            if let Some(slot) = self.out.get_mut(self.at) {
                *slot = byte;
            }
            self.at += 1;
        }
        Ok(())
    }
}
