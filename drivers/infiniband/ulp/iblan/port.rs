// SPDX-License-Identifier: GPL-2.0

//! One emulated LAN port: the netdev `iblanN` over one RDMA port, its UD QP,
//! the name service and the data path.
//!
//! Which CPU does what: `ndo_start_xmit` posts sends on the sending CPU;
//! the QP's single CQ raises an event on its completion vector, which
//! schedules NAPI; the NAPI poll reclaims sends, copies each received
//! datagram once into an skb (or into a reassembly buffer) and reposts the
//! receive. The name service runs in a work item every second and when an
//! announcement arrives.

use crate::forwarding::Forwarding;
use crate::kapi::address_not_available;
use crate::kapi::debugfs::{SeqOut, Show};
use crate::kapi::ether::{
    Coalesce, EtherDevice, EtherDriver, EtherRegistration, LinkStats, TxOutcome,
};
use crate::kapi::netdev::{rtnl_lock, rtnl_try_lock, RtnlGuard};
use crate::kapi::rdma::consumer::{
    Ah, Cq, CqHandler, DeviceRef, DmaBuffer, IbDevice, Ipv6Membership, Pd, UdQp, WorkCompletion,
    DEVICE_NAME_MAX,
};
use crate::kapi::rtnl_link::{iblan, Attr, ExtAck, LinkDriver, LinkInfo, LinkOps, NewLink};
use crate::kapi::skb::SkBuff;
use crate::kapi::sync::{SpinLockBh, SpinLockIrq};
use crate::kapi::work::{now_ms, sleep_ms, DelayedWork, HasDelayedWork};
use crate::params::LanConfig;
use crate::pure::fdb::Learned;
use crate::pure::lan::{
    self, Announcement, Datagram, FragmentPlan, MacKind, Reassembler, ReassemblySlot, Step,
    ANNOUNCE_LEN, FRAG_HEADER_LEN, LAN_COUNT, MAX_FRAME_LEN,
};
use core::pin::Pin;
use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering,
};
use kernel::c_str;
use kernel::prelude::*;
use kernel::sync::Arc;

const CALLER: &CStr = c_str!("iblan");
const SEND_DEPTH: u32 = 1024;
const RECV_DEPTH: u32 = 256;
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
const MTU_MAX: u32 = 9000;

/// Work request identifiers: receives and the announcement are small
/// numbers, sends carry their skb's address (always above these).
const WR_ANNOUNCE: u64 = 1;
const WR_RECV_BASE: u64 = 1 << 32;
const WR_SKB_MIN: u64 = 1 << 40;

/// `ethtool -S` names, in the order of [`Stat`].
const STAT_NAMES: &[&CStr] = &[
    c_str!("tx_frames"),
    c_str!("tx_posts"),
    c_str!("tx_fanout_frames"),
    c_str!("tx_fanout_posts"),
    c_str!("tx_fragmented_frames"),
    c_str!("tx_unknown_lid_floods"),
    c_str!("tx_no_peer_drops"),
    c_str!("tx_post_errors"),
    c_str!("tx_queue_stops"),
    c_str!("tx_copies"),
    c_str!("tx_foreign_direct"),
    c_str!("tx_foreign_floods"),
    c_str!("rx_datagrams"),
    c_str!("rx_reassembled_frames"),
    c_str!("rx_sar_drops_duplicate"),
    c_str!("rx_sar_drops_inconsistent"),
    c_str!("rx_sar_drops_evicted"),
    c_str!("rx_sar_drops_expired"),
    c_str!("rx_unknown_sender_drops"),
    c_str!("rx_malformed_drops"),
    c_str!("rx_alloc_drops"),
    c_str!("rx_errors"),
    c_str!("rx_dma_syncs_for_cpu"),
    c_str!("rx_not_for_us_drops"),
    c_str!("fdb_learned"),
    c_str!("fdb_moved"),
    c_str!("dma_syncs_for_device"),
    c_str!("ns_announcements_sent"),
    c_str!("ns_announcements_received"),
    c_str!("ns_peers_added"),
    c_str!("ns_peers_aged_out"),
    c_str!("ns_peers_left"),
    c_str!("ns_lid_conflicts"),
    c_str!("ns_lid_changes"),
    c_str!("ns_peers"),
    c_str!("ns_lid"),
];

#[derive(Clone, Copy)]
#[repr(usize)]
enum Stat {
    TxFrames,
    TxPosts,
    TxFanoutFrames,
    TxFanoutPosts,
    TxFragmented,
    TxUnknownLidFloods,
    TxNoPeer,
    TxPostErrors,
    TxQueueStops,
    TxCopies,
    TxForeignDirect,
    TxForeignFloods,
    RxDatagrams,
    RxReassembled,
    RxSarDuplicate,
    RxSarInconsistent,
    RxSarEvicted,
    RxSarExpired,
    RxUnknownSender,
    RxMalformed,
    RxAlloc,
    RxErrors,
    RxDmaSyncs,
    RxNotForUs,
    FdbLearned,
    FdbMoved,
    DmaSyncsForDevice,
    NsSent,
    NsReceived,
    NsAdded,
    NsAged,
    NsLeft,
    NsConflicts,
    NsLidChanges,
    Count,
}

/// The interface statistics of `ip -s link`.
#[derive(Default)]
struct Link {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_dropped: AtomicU64,
    rx_multicast: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    tx_dropped: AtomicU64,
}

/// A known node of the LAN.
struct Peer {
    gid: [u8; 16],
    guid: u64,
    lid: u16,
    qpn: u32,
    qkey: u32,
    ah: Ah,
}

struct PeerEntry {
    peer: Peer,
    last_seen_ms: u64,
}

/// A peer that left the table, kept until the sends posted before it left
/// have completed: a device may read the AH until then. Its AH is then
/// destroyed by the name service, in process context, never in the
/// completion path: some providers (rxe) take their AH lock without
/// disabling bottom halves, so an AH must come and go in one context.
struct Retired {
    /// Held, never read: dropping it destroys the AH.
    _peer: Peer,
    /// The QP's post count when the peer left.
    posted_before: u64,
}

/// Where one frame goes.
#[derive(Clone, Copy)]
enum Targets {
    /// The peer in this slot.
    One(usize),
    /// Every peer: broadcast, multicast or an unknown LID.
    All,
}

/// The known nodes, in fixed slots: a slot's index names its peer while
/// it is there (reassemblies are keyed by it). Every send is posted under
/// this table's lock, so `posted` orders posts against peers leaving.
struct PeerTable {
    /// `MAX_PEERS` slots, on the heap: the table is too big for a stack.
    slots: KVec<Option<PeerEntry>>,
    /// `MAX_RETIRED` slots of peers that left, waiting for their sends.
    retired: KVec<Option<Retired>>,
    /// Sends posted on the QP since it was created.
    posted: u64,
}

impl PeerTable {
    fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_PEERS, GFP_KERNEL)?;
        let mut retired = KVec::with_capacity(MAX_RETIRED, GFP_KERNEL)?;
        for _ in 0..MAX_PEERS {
            slots.push(None, GFP_KERNEL)?;
        }
        for _ in 0..MAX_RETIRED {
            retired.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            retired,
            posted: 0,
        })
    }

    fn iter(&self) -> impl Iterator<Item = &PeerEntry> {
        self.slots.iter().flatten()
    }

    fn len(&self) -> usize {
        self.iter().count()
    }

    /// The slot of the first entry `pred` accepts.
    fn find(&self, pred: impl Fn(&PeerEntry) -> bool) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(&pred))
    }

    fn get_mut(&mut self, at: usize) -> Option<&mut PeerEntry> {
        self.slots.get_mut(at).and_then(Option::as_mut)
    }

    /// Moves the peer in slot `at` to the retired ones; false if there is
    /// no room there yet (the peer then stays until a later try).
    fn retire(&mut self, at: usize) -> bool {
        let posted_before = self.posted;
        let (Some(slot), Some(room)) = (
            self.slots.get_mut(at),
            self.retired.iter_mut().find(|r| r.is_none()),
        ) else {
            return false;
        };
        match slot.take() {
            Some(entry) => {
                *room = Some(Retired {
                    _peer: entry.peer,
                    posted_before,
                });
                true
            }
            None => false,
        }
    }

    /// Takes one retired peer whose sends have all completed, to be
    /// dropped outside the lock.
    fn take_released(&mut self, completed: u64) -> Option<Retired> {
        self.retired
            .iter_mut()
            .find(|r| r.as_ref().is_some_and(|r| r.posted_before <= completed))
            .and_then(Option::take)
    }

    /// Adds `entry`; a full table gives it back.
    fn insert(&mut self, entry: PeerEntry) -> core::result::Result<(), PeerEntry> {
        match self.slots.iter_mut().find(|s| s.is_none()) {
            Some(slot) => {
                *slot = Some(entry);
                Ok(())
            }
            None => Err(entry),
        }
    }

    /// Where a frame to `lid` (`None`: not a unicast LID of this LAN)
    /// goes, and to how many peers.
    fn targets(&self, lid: Option<u16>) -> (Targets, usize) {
        if let Some(at) = lid.and_then(|lid| self.find(|e| e.peer.lid == lid)) {
            return (Targets::One(at), 1);
        }
        (Targets::All, self.len())
    }

    /// The peers of `targets`.
    fn selected(&self, targets: Targets) -> impl Iterator<Item = &Peer> {
        self.slots
            .iter()
            .enumerate()
            .filter(move |(at, _)| match targets {
                Targets::One(one) => *at == one,
                Targets::All => true,
            })
            .filter_map(|(_, s)| s.as_ref().map(|e| &e.peer))
    }
}

/// Completion events wake the port's NAPI.
struct Events {
    netdev: AtomicPtr<EtherDevice<LanDev>>,
}

impl CqHandler for Events {
    fn completion(&self) {
        let dev = self.netdev.load(Ordering::Acquire);
        // SAFETY: set once the netdev is registered and cleared before it
        // goes; the CQ (and so this handler) is destroyed before the netdev
        // is freed.
        if let Some(dev) = unsafe { dev.as_ref() } {
            dev.napi_schedule();
        }
    }
}

/// Announcements the receive path saw, for the name service to process.
struct Inbox {
    pending: [[u8; ANNOUNCE_LEN]; 16],
    count: usize,
    /// The next to take, below `count`.
    taken: usize,
}

impl Inbox {
    /// The oldest announcement not yet taken.
    fn pop(&mut self) -> Option<[u8; ANNOUNCE_LEN]> {
        let next = self
            .pending
            .get(self.taken)
            .filter(|_| self.taken < self.count);
        match next {
            Some(bytes) => {
                let bytes = *bytes;
                self.taken += 1;
                Some(bytes)
            }
            None => {
                self.count = 0;
                self.taken = 0;
                None
            }
        }
    }
}

/// The netdev's private data. Fields drop in declaration order, which is
/// the order the verbs objects must go in.
pub(crate) struct LanDev {
    qp: UdQp,
    cq: Cq<Events>,
    /// After the QP: its sends are done (or flushed) when the AHs go.
    /// Bottom halves off, interrupts on: sends are posted under it, and a
    /// provider may then send at once (srnic defers a post made with
    /// interrupts off to a work item). Never taken in hard-IRQ context.
    peers: Pin<KBox<SpinLockBh<PeerTable>>>,
    /// Sends completed (or flushed); compared with `PeerTable::posted`.
    sends_completed: AtomicU64,
    group_ah: Ah,
    _membership: Ipv6Membership,
    /// Receive buffers: each holds the GRH area and one path-MTU datagram.
    /// After the QP: no receive into them is outstanding when they go.
    rx: KVec<DmaBuffer>,
    reassembly: Pin<KBox<SpinLockIrq<Reassembly>>>,
    /// Where foreign MACs (bridged, macvlan) sit.
    forwarding: Forwarding,
    /// The one announcement in flight (`announce_busy`), sent from here.
    announce: DmaBuffer,
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
    sq_free: AtomicU32,
    frame_number: AtomicU32,
    /// `ethtool -C` rx-usecs and rx-frames, the CQ's event moderation.
    /// Changed under RTNL only.
    coalesce_usecs: AtomicU32,
    coalesce_frames: AtomicU32,
    stats: [AtomicU64; Stat::Count as usize],
    link: Link,
    ticker: DelayedWork<LanDev>,
    /// On the port's own LAN port: the ifindex of its child in each LAN
    /// (0: none), one slot a LAN index; empty on a child. Changed under
    /// RTNL only. On the heap: the port's data is built on the stack.
    children: KVec<AtomicI32>,
    /// The RDMA port goes: no new children.
    closing: AtomicBool,
    /// Whether the RDMA port is active, shared by the port's LAN ports.
    port_up: Arc<AtomicBool>,
    /// A child's parent (0: this is the port's own LAN port).
    parent_ifindex: i32,
    /// Last: the verbs objects above go first.
    _hold: Option<DeviceRef>,
}

/// Open reassemblies and their buffers.
struct Reassembly {
    table: Reassembler<KVec<ReassemblySlot>>,
    buffers: KVec<KVec<u8>>,
}

// SAFETY: `ticker` is the field at this offset.
unsafe impl HasDelayedWork for LanDev {
    const OFFSET: usize = core::mem::offset_of!(LanDev, ticker);
    fn run(&self) {
        self.name_service();
    }
}

/// Creates the LAN port over `port` of `dev` in the module's LAN and
/// registers its netdev `iblanN`, the parent of the port's other LANs.
pub(crate) fn create(
    dev: &IbDevice,
    port: u32,
    config: LanConfig,
) -> Result<EtherRegistration<LanDev>> {
    let data = LanDev::new(dev, port, config, None, Origin::Port)?;
    let mac = lan::mac_for(config.vendor, config.lan, data.lid.load(Ordering::Relaxed));
    let reg = EtherRegistration::new_linked(c_str!("iblan%d"), mac, dev.placement(port), data)?;
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
        /// The parent's ifindex.
        parent: i32,
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
        let (parent_ifindex, hold, datagram_len, port_up) = match origin {
            Origin::Port => (
                0,
                None,
                dev.port_mtu(port)?,
                Arc::new(AtomicBool::new(dev.port_active(port)), GFP_KERNEL)?,
            ),
            Origin::Child {
                parent,
                hold,
                datagram_len,
                port_up,
            } => (parent, Some(hold), datagram_len, port_up),
        };
        let mut children = KVec::new();
        if is_port {
            children = KVec::with_capacity(LAN_COUNT, GFP_KERNEL)?;
            for _ in 0..LAN_COUNT {
                children.push(AtomicI32::new(0), GFP_KERNEL)?;
            }
        }
        let pd = Pd::new(dev, CALLER)?;
        let cq = Cq::new(
            &pd,
            SEND_DEPTH + RECV_DEPTH,
            0,
            Events {
                netdev: AtomicPtr::new(core::ptr::null_mut()),
            },
            CALLER,
        )?;
        let mut qp = UdQp::new(
            &pd,
            &cq,
            &cq,
            (SEND_DEPTH, RECV_DEPTH),
            port,
            config.qkey(),
            CALLER,
        )?;
        let membership = Ipv6Membership::join(netdev, group)?;
        qp.attach(&group)?;
        let group_ah = Ah::new(&pd, port, sgid_index, &group, 1)?;

        let mut rx = KVec::with_capacity(RECV_DEPTH as usize, GFP_KERNEL)?;
        let rx_len = GRH_LEN + datagram_len as usize;
        for _ in 0..RECV_DEPTH {
            // SAFETY: the buffer lives in `rx`, which drops after the QP (so
            // after every receive into it); `completion` reads a buffer only
            // between its receive's completion and its repost.
            let buffer = unsafe { DmaBuffer::new(&pd, rx_len, false)? };
            rx.push(buffer, GFP_KERNEL)?;
        }
        let mut buffers = KVec::with_capacity(REASSEMBLY_SLOTS, GFP_KERNEL)?;
        for _ in 0..REASSEMBLY_SLOTS {
            let buffer = KVec::from_elem(0u8, MAX_FRAME_LEN, GFP_KERNEL)?;
            buffers.push(buffer, GFP_KERNEL)?;
        }
        // SAFETY: the buffer drops after the QP (so after every send of it);
        // nothing takes a slice of it.
        let announce = unsafe { DmaBuffer::new(&pd, ANNOUNCE_LEN, true)? };

        let lid = lid.unwrap_or_else(|| lan::initial_lid(&sgid));
        let data = LanDev {
            qp,
            cq,
            peers: KBox::pin_init(
                new_spinlock_bh!(PeerTable::new()?, "iblan_peers"),
                GFP_KERNEL,
            )?,
            sends_completed: AtomicU64::new(0),
            group_ah,
            _membership: membership,
            rx,
            reassembly: KBox::pin_init(
                new_spinlock_irq!(
                    Reassembly {
                        table: Reassembler::new(KVec::from_elem(
                            ReassemblySlot::CLOSED,
                            REASSEMBLY_SLOTS,
                            GFP_KERNEL
                        )?),
                        buffers,
                    },
                    "iblan_reassembly"
                ),
                GFP_KERNEL,
            )?,
            forwarding: Forwarding::new()?,
            announce,
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
            sq_free: AtomicU32::new(SEND_DEPTH),
            frame_number: AtomicU32::new(0),
            coalesce_usecs: AtomicU32::new(0),
            coalesce_frames: AtomicU32::new(0),
            stats: [const { AtomicU64::new(0) }; Stat::Count as usize],
            link: Link::default(),
            ticker: DelayedWork::new(),
            pd,
            children,
            closing: AtomicBool::new(false),
            port_up,
            parent_ifindex,
            _hold: hold,
        };
        for index in 0..data.rx.len() {
            data.post_receive(index)?;
        }
        Ok(data)
    }

    /// The netdev is registered: completions may reach it now.
    fn attach(&self, netdev: &EtherDevice<LanDev>) {
        self.cq
            .handler()
            .netdev
            .store(core::ptr::from_ref(netdev).cast_mut(), Ordering::Release);
        if self.port_up.load(Ordering::Relaxed) {
            netdev.carrier_on();
        }
    }

    /// The netdev, once registered and until it goes.
    fn netdev(&self) -> Option<&EtherDevice<LanDev>> {
        let dev = self.cq.handler().netdev.load(Ordering::Acquire);
        // SAFETY: set once the netdev is registered and cleared before its
        // data (this) drops; the netdev's memory outlives its data.
        unsafe { dev.as_ref() }
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

    /// The LAN ports `ip link add` made on this one: deletes them and
    /// refuses new ones, before the RDMA device or the module goes. Their
    /// data has dropped when this returns.
    pub(crate) fn close_children(dev: &EtherDevice<LanDev>) {
        let lan = dev.data();
        let rtnl = rtnl_lock();
        lan.closing.store(true, Ordering::Relaxed);
        for child in lan.children.iter() {
            let ifindex = child.load(Ordering::Relaxed);
            if ifindex == 0 {
                continue;
            }
            match EtherDevice::<LanDev>::by_ifindex(
                &rtnl,
                dev.as_netdev().net_under_rtnl(&rtnl),
                ifindex,
            ) {
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
    fn count(&self, stat: Stat) {
        self.add(stat, 1);
    }

    fn add(&self, stat: Stat, n: u64) {
        if let Some(counter) = self.stats.get(stat as usize) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

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

    fn post_receive(&self, index: usize) -> Result {
        let buffer = self.rx.get(index).ok_or(EINVAL)?;
        // What the CPU read, or cached, of the last datagram must not hide
        // the next one the device writes.
        buffer.for_device();
        self.count(Stat::DmaSyncsForDevice);
        self.qp
            .post_recv(WR_RECV_BASE + index as u64, buffer.sge(buffer.len()))
    }

    /// Sends one frame; see [`EtherDriver::start_xmit`].
    fn transmit(&self, dev: &EtherDevice<LanDev>, mut skb: SkBuff) -> TxOutcome {
        // Without scatter-gather the stack hands over linear frames; one
        // that is not costs a copy, counted.
        if skb.is_nonlinear() {
            self.count(Stat::TxCopies);
        }
        if skb.linearize().is_err() {
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        }
        let frame_len = skb.data().len();
        let Some(mac) = skb
            .data()
            .get(..6)
            .and_then(|m| <[u8; 6]>::try_from(m).ok())
        else {
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        };
        let Ok(plan) = FragmentPlan::new(frame_len, self.datagram_len as usize) else {
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        };
        let lid = match lan::classify_mac(&mac, self.config.vendor, self.config.lan) {
            MacKind::Unicast { lid } => Some(lid),
            MacKind::Foreign => {
                let behind = self.forwarding.lookup(&mac);
                self.count(match behind {
                    Some(_) => Stat::TxForeignDirect,
                    None => Stat::TxForeignFloods,
                });
                behind
            }
            MacKind::Broadcast | MacKind::Multicast => None,
        };
        // The table stays locked from the choice of peers to their last
        // post: a peer cannot leave (and lose its AH) in between.
        let mut peers = self.peers.lock();
        let (targets, peer_count) = peers.targets(lid);
        let fanout = matches!(targets, Targets::All);
        if fanout && lid.is_some() {
            self.count(Stat::TxUnknownLidFloods);
        }
        if peer_count == 0 {
            drop(peers);
            self.count(Stat::TxNoPeer);
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        }
        let fragments = plan.count();
        let posts = (fragments * peer_count) as u32;
        if posts > SEND_DEPTH {
            drop(peers);
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        }
        // Reserve send queue slots; without room the stack keeps the frame.
        let mut free = self.sq_free.load(Ordering::Acquire);
        loop {
            if free < posts {
                drop(peers);
                dev.stop_queue();
                self.count(Stat::TxQueueStops);
                // A completion may have freed room meanwhile.
                if self.sq_free.load(Ordering::Acquire) >= posts {
                    dev.wake_queue();
                }
                return TxOutcome::Busy(skb);
            }
            match self.sq_free.compare_exchange(
                free,
                free - posts,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => free = now,
            }
        }
        // The fragment headers go in front of the frame, so that one
        // mapping covers everything every post points at.
        let header_len = (fragments * FRAG_HEADER_LEN) as u32;
        // `cow_head` makes the headroom private (the frame itself may be
        // shared with a clone), and only the pushed bytes are written.
        let pushed = match skb.cow_head(header_len) {
            Ok(()) => skb.push(header_len),
            Err(err) => Err(err),
        };
        let Ok(headers) = pushed else {
            drop(peers);
            self.sq_free.fetch_add(posts, Ordering::AcqRel);
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        };
        let frame = self.frame_number.fetch_add(1, Ordering::Relaxed) as u16;
        for index in 0..fragments {
            let at = index * FRAG_HEADER_LEN;
            if let (Some(out), Some(header)) = (
                headers.get_mut(at..at + FRAG_HEADER_LEN),
                plan.header(index, frame),
            ) {
                out.copy_from_slice(&header.encode());
            }
        }
        let total = skb.data().len();
        // SAFETY: the skb's data stays put until the last completion frees
        // it, after unmapping.
        let Ok(mapping) = (unsafe { self.pd.map(skb.data().as_ptr(), total, true) }) else {
            drop(peers);
            self.sq_free.fetch_add(posts, Ordering::AcqRel);
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        };
        let cb = skb.control_block();
        cb[0].store(u64::from(posts), Ordering::Relaxed);
        cb[1].store(mapping.dma(), Ordering::Relaxed);
        cb[2].store(total as u64, Ordering::Relaxed);
        let wr_id = skb.into_raw() as u64;
        let mut posted = 0u32;
        'peers: for peer in peers.selected(targets) {
            for index in 0..fragments {
                let Some((offset, len)) = plan.fragment(index) else {
                    break 'peers;
                };
                // Both inside the mapping of the frame (the plan's
                // fragments are), or nothing is posted.
                let (Some(header), Some(body)) = (
                    mapping.sge(index * FRAG_HEADER_LEN, FRAG_HEADER_LEN),
                    mapping.sge(header_len as usize + offset, len),
                ) else {
                    break 'peers;
                };
                let sges = [header, body];
                if self
                    .qp
                    .post_send(wr_id, &sges, &peer.ah, peer.qpn, peer.qkey)
                    .is_err()
                {
                    self.count(Stat::TxPostErrors);
                    break 'peers;
                }
                posted += 1;
            }
        }
        peers.posted += u64::from(posted);
        drop(peers);
        self.add(Stat::TxPosts, posted.into());
        self.count(Stat::TxFrames);
        if fanout {
            self.count(Stat::TxFanoutFrames);
            self.add(Stat::TxFanoutPosts, posted.into());
        }
        if fragments > 1 {
            self.count(Stat::TxFragmented);
        }
        self.link.tx_packets.fetch_add(1, Ordering::Relaxed);
        self.link
            .tx_bytes
            .fetch_add(frame_len as u64, Ordering::Relaxed);
        let unposted = posts - posted;
        if unposted > 0 {
            self.sq_free.fetch_add(unposted, Ordering::AcqRel);
            self.send_done(wr_id, unposted);
        }
        // Stop early rather than fail the next frame.
        if self.sq_free.load(Ordering::Acquire) < SEND_DEPTH / 8 {
            dev.stop_queue();
            self.count(Stat::TxQueueStops);
        }
        TxOutcome::Sent
    }

    /// `done` posts of the skb at `wr_id` completed; the last one unmaps
    /// and frees it.
    fn send_done(&self, wr_id: u64, done: u32) {
        let raw = wr_id as *mut crate::bindings::sk_buff;
        // SAFETY: `wr_id` is the skb `transmit` gave up to its posts, which
        // hold it until the last of them completes (the count in its
        // control block).
        let Some(skb) = (unsafe { SkBuff::from_raw(raw) }) else {
            return;
        };
        let cb = skb.control_block();
        let before = cb[0].fetch_sub(u64::from(done), Ordering::AcqRel);
        if before > u64::from(done) {
            // Others still hold it.
            let _ = skb.into_raw();
            return;
        }
        let dma = cb[1].load(Ordering::Relaxed);
        let len = cb[2].load(Ordering::Relaxed) as usize;
        // SAFETY: `transmit` mapped the skb's data with these values and
        // stored them in its control block before the first post; this is
        // the completion of the last post, so the device is done with them.
        unsafe { self.pd.unmap(dma, len, true) };
        skb.consume();
    }

    fn completion(&self, dev: &EtherDevice<LanDev>, wc: &WorkCompletion) {
        let id = wc.wr_id();
        if id >= WR_SKB_MIN || id == WR_ANNOUNCE {
            // Retired peers whose sends are all done may go (see
            // `release_retired`).
            self.sends_completed.fetch_add(1, Ordering::AcqRel);
            if id == WR_ANNOUNCE {
                self.announce_busy.store(false, Ordering::Release);
            } else {
                self.send_done(id, 1);
            }
            self.send_slot_freed(dev);
        } else if let Some(index) = id.checked_sub(WR_RECV_BASE) {
            let index = index as usize;
            if !self.running.load(Ordering::Acquire) {
                // Down or going: receives wait (or are flushed at teardown).
                return;
            }
            if !wc.ok() {
                // A local error: the buffer goes back, nothing to deliver.
                self.count(Stat::RxErrors);
                let _ = self.post_receive(index);
                return;
            }
            self.count(Stat::RxDatagrams);
            if let Some(buffer) = self.rx.get(index) {
                // Only what the device wrote comes over (from a bounce
                // buffer, or out of stale cache lines).
                let bytes = buffer.for_cpu(wc.byte_len() as usize);
                self.count(Stat::RxDmaSyncs);
                self.received(dev, bytes, wc.ipv4_header());
            }
            if self.post_receive(index).is_err() {
                self.count(Stat::RxErrors);
            }
        }
    }

    fn send_slot_freed(&self, dev: &EtherDevice<LanDev>) {
        let free = self.sq_free.fetch_add(1, Ordering::AcqRel) + 1;
        if free >= SEND_DEPTH / 2 && dev.queue_stopped() && self.running.load(Ordering::Acquire) {
            dev.wake_queue();
        }
    }

    /// One datagram: GRH area, then an iblan fragment or announcement.
    fn received(&self, dev: &EtherDevice<LanDev>, bytes: &[u8], ipv4: bool) {
        let Some((grh, payload)) = crate::pure::split_checked(bytes, GRH_LEN) else {
            self.count(Stat::RxMalformed);
            return;
        };
        let mut sgid = [0u8; 16];
        if ipv4 {
            // An IPv4 header in the area's last 20 bytes: source at 12.
            sgid[10] = 0xff;
            sgid[11] = 0xff;
            if let Some(src) = grh.get(32..36) {
                sgid[12..].copy_from_slice(src);
            }
        } else if let Some(src) = grh.get(8..24) {
            sgid.copy_from_slice(src);
        }
        match lan::classify_datagram(payload) {
            Ok(Datagram::Announcement(_)) => {
                let mut inbox = self.inbox.lock();
                let at = inbox.count;
                if let (Some(slot), Ok(copy)) = (
                    inbox.pending.get_mut(at),
                    <[u8; ANNOUNCE_LEN]>::try_from(payload),
                ) {
                    *slot = copy;
                    inbox.count += 1;
                }
                drop(inbox);
                if self.running.load(Ordering::Acquire) {
                    self.ticker.schedule(0);
                }
            }
            Ok(Datagram::Fragment { header, payload }) => {
                self.fragment(dev, &sgid, &header, payload);
            }
            Err(_) => self.count(Stat::RxMalformed),
        }
    }

    fn fragment(
        &self,
        dev: &EtherDevice<LanDev>,
        sgid: &[u8; 16],
        header: &lan::FragmentHeader,
        payload: &[u8],
    ) {
        if header.count == 1 {
            self.deliver(dev, sgid, payload);
            return;
        }
        // Reassemblies are keyed by the sender's slot in the peer table,
        // which the GID names uniquely (QPNs repeat across nodes).
        let sender = {
            let peers = self.peers.lock();
            peers.find(|e| &e.peer.gid == sgid)
        };
        let Some(sender) = sender else {
            self.count(Stat::RxUnknownSender);
            return;
        };
        let mut guard = self.reassembly.lock();
        let reassembly = &mut *guard;
        let now = now_ms();
        let mut expired = 0;
        reassembly.table.expire(now, |_| expired += 1);
        self.add(Stat::RxSarExpired, expired);
        match reassembly
            .table
            .accept(sender as u16, header, payload.len(), now)
        {
            Step::Deliver => {
                drop(guard);
                self.deliver(dev, sgid, payload);
            }
            Step::Copy {
                slot,
                offset,
                evicted,
                ..
            } => {
                if evicted.is_some() {
                    self.count(Stat::RxSarEvicted);
                }
                copy_into(&mut reassembly.buffers, slot, offset, payload);
            }
            Step::Complete {
                slot,
                offset,
                total_len,
            } => {
                copy_into(&mut reassembly.buffers, slot, offset, payload);
                // The frame is copied out under the lock, which keeps the
                // slot's buffer, and handed up after it: the stack must
                // not run with interrupts off (it may transmit at once).
                let skb = reassembly
                    .buffers
                    .get(slot)
                    .and_then(|b| b.get(..total_len))
                    .and_then(|frame| self.frame_skb(dev, frame));
                drop(guard);
                if let Some(skb) = skb {
                    self.count(Stat::RxReassembled);
                    self.hand_up(dev, sgid, skb);
                }
            }
            Step::Drop { reason, .. } => self.count(match reason {
                lan::DropReason::Duplicate => Stat::RxSarDuplicate,
                _ => Stat::RxSarInconsistent,
            }),
        }
    }

    /// Hands one whole frame from the node `sgid` to the stack.
    fn deliver(&self, dev: &EtherDevice<LanDev>, sgid: &[u8; 16], frame: &[u8]) {
        if let Some(skb) = self.frame_skb(dev, frame) {
            self.hand_up(dev, sgid, skb);
        }
    }

    /// Hands a whole received frame from the node `sgid` to the stack as
    /// an Ethernet port does: a unicast to another MAC only in promiscuous
    /// mode (a bridge port, a macvlan's lower device), counted in the link
    /// statistics; a foreign source MAC is learned behind its node.
    fn hand_up(&self, dev: &EtherDevice<LanDev>, sgid: &[u8; 16], skb: SkBuff) {
        let frame = skb.data();
        let (Some(dest), Some(source)) = (mac_at(frame, 0), mac_at(frame, 6)) else {
            self.count(Stat::RxMalformed);
            return;
        };
        let len = frame.len() as u64;
        let multicast = dest[0] & 1 != 0;
        if !multicast && dest != dev.mac() && !dev.as_netdev().is_promiscuous() {
            self.count(Stat::RxNotForUs);
            return;
        }
        if lan::classify_mac(&source, self.config.vendor, self.config.lan) == MacKind::Foreign {
            self.learn_source(sgid, &source);
        }
        if multicast {
            self.link.rx_multicast.fetch_add(1, Ordering::Relaxed);
        }
        self.link.rx_packets.fetch_add(1, Ordering::Relaxed);
        self.link.rx_bytes.fetch_add(len, Ordering::Relaxed);
        dev.receive(skb);
    }

    /// Learns that foreign MAC `source` sits behind the node `sgid`.
    fn learn_source(&self, sgid: &[u8; 16], source: &[u8; 6]) {
        let lid = self
            .peers
            .lock()
            .iter()
            .find(|e| &e.peer.gid == sgid)
            .map(|e| e.peer.lid);
        // A frame from a node not (or no longer) known teaches nothing.
        let Some(lid) = lid else {
            return;
        };
        match self.forwarding.learn(source, lid) {
            Learned::New | Learned::Replaced => self.count(Stat::FdbLearned),
            Learned::Moved => self.count(Stat::FdbMoved),
            Learned::Refreshed | Learned::Ignored => {}
        }
    }

    /// An skb holding a copy of `frame` (its single copy on receive);
    /// `None` if it is dropped.
    fn frame_skb(&self, dev: &EtherDevice<LanDev>, frame: &[u8]) -> Option<SkBuff> {
        if frame.len() < 14 {
            self.count(Stat::RxMalformed);
            return None;
        }
        let Some(mut skb) = dev.alloc_rx_skb(frame.len() as u32) else {
            self.count(Stat::RxAlloc);
            self.link.rx_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        match skb.put(frame.len() as u32) {
            Ok(room) => room.copy_from_slice(frame),
            Err(_) => {
                self.count(Stat::RxAlloc);
                return None;
            }
        }
        Some(skb)
    }

    /// The announcement of this node, `leaving` or not.
    fn send_announcement(&self, leaving: bool) {
        self.send_to_group(leaving, false);
    }

    /// An announcement, or with `probe` a probe for this node's LID.
    fn send_to_group(&self, leaving: bool, probe: bool) {
        if self.announce_busy.swap(true, Ordering::AcqRel) {
            return;
        }
        if self
            .sq_free
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| f.checked_sub(1))
            .is_err()
        {
            self.announce_busy.store(false, Ordering::Release);
            return;
        }
        let announcement = Announcement {
            leaving,
            probe,
            lan: self.config.lan,
            lid: self.lid.load(Ordering::Relaxed),
            qpn: self.qp.qp_num(),
            qkey: self.config.qkey(),
            node_guid: self.guid,
            gid: self.sgid,
            sequence: self.sequence.fetch_add(1, Ordering::Relaxed),
        };
        let bytes = announcement.encode();
        // SAFETY: no send of the buffer is outstanding (`announce_busy` was
        // false, and only the completion of that send clears it), and no
        // slice of it exists.
        unsafe { self.announce.write(&bytes) };
        // The device must send these bytes, not a bounce buffer's old ones.
        self.announce.for_device();
        self.count(Stat::DmaSyncsForDevice);
        let sge = self.announce.sge(ANNOUNCE_LEN);
        let mut peers = self.peers.lock();
        let posted = self.qp.post_send(
            WR_ANNOUNCE,
            &[sge],
            &self.group_ah,
            0xff_ffff,
            self.config.qkey(),
        );
        if posted.is_ok() {
            peers.posted += 1;
        }
        drop(peers);
        if posted.is_err() {
            self.announce_busy.store(false, Ordering::Release);
            self.sq_free.fetch_add(1, Ordering::AcqRel);
            return;
        }
        self.count(Stat::NsSent);
        self.last_announce_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// The name service: takes in announcements, ages peers out, resolves
    /// LID conflicts and announces this node.
    fn name_service(&self) {
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let now = now_ms();
        // One at a time: a copy of the whole inbox would weigh on the
        // worker's stack.
        loop {
            // Not in the loop's head: the guard would live through the body.
            let next = self.inbox.lock().pop();
            let Some(bytes) = next else {
                break;
            };
            if let Ok(Datagram::Announcement(a)) = lan::classify_datagram(&bytes) {
                self.take_announcement(&a, now);
            }
        }
        self.age_peers(now);
        self.release_retired();
        self.settle_lid();
        self.follow_port();
        let last = self.last_announce_ms.load(Ordering::Relaxed);
        if self.announce_soon.swap(false, Ordering::AcqRel) || now >= last + ANNOUNCE_EVERY_MS {
            self.send_announcement(false);
        }
        self.ticker.schedule(TICK_MS);
    }

    fn take_announcement(&self, a: &Announcement, now: u64) {
        if a.lan != self.config.lan || (a.node_guid == self.guid && a.gid == self.sgid) {
            return;
        }
        self.count(Stat::NsReceived);
        if a.probe {
            // A node about to join asks who is here: answer at once.
            self.announce_soon.store(true, Ordering::Relaxed);
            return;
        }
        let known = {
            let mut peers = self.peers.lock();
            match peers.find(|e| e.peer.gid == a.gid) {
                Some(at) if a.leaving => {
                    if peers.retire(at) {
                        self.count(Stat::NsLeft);
                    }
                    true
                }
                Some(at) => {
                    // The AH depends on the GID alone, the key: a peer
                    // that moved to another LID or QP keeps it.
                    if let Some(entry) = peers.get_mut(at) {
                        entry.last_seen_ms = now;
                        entry.peer.lid = a.lid;
                        entry.peer.qpn = a.qpn;
                        entry.peer.qkey = a.qkey;
                    }
                    true
                }
                None => a.leaving,
            }
        };
        if !known {
            self.add_peer(a, now);
        }
        if !a.leaving && a.lid == self.lid.load(Ordering::Relaxed) {
            self.count(Stat::NsConflicts);
            if lan::keeps_lid(self.guid, a.node_guid) {
                // Tell the other node at once that the LID is taken.
                self.announce_soon.store(true, Ordering::Relaxed);
            } else {
                let taken = |lid: u16| self.lid_in_use(lid) || lid == a.lid;
                if let Some(lid) = lan::next_free_lid(a.lid, taken) {
                    self.lid_wanted.store(lid, Ordering::Relaxed);
                }
            }
        }
    }

    fn add_peer(&self, a: &Announcement, now: u64) {
        let Ok(ah) = Ah::new(&self.pd, self.port, self.sgid_index, &a.gid, 1) else {
            return;
        };
        let entry = PeerEntry {
            peer: Peer {
                gid: a.gid,
                guid: a.node_guid,
                lid: a.lid,
                qpn: a.qpn,
                qkey: a.qkey,
                ah,
            },
            last_seen_ms: now,
        };
        // A full table gives the entry back, dropped here (process
        // context, outside the lock).
        let inserted = self.peers.lock().insert(entry);
        if inserted.is_ok() {
            self.count(Stat::NsAdded);
            // A newcomer learns of this node now, not at the next period.
            self.announce_soon.store(true, Ordering::Relaxed);
        }
    }

    fn age_peers(&self, now: u64) {
        let aged = self.remove_peers(|e| now > e.last_seen_ms + PEER_LIFETIME_MS);
        self.add(Stat::NsAged, aged);
    }

    /// Retires the peers `pred` picks; returns how many.
    fn remove_peers(&self, pred: impl Fn(&PeerEntry) -> bool) -> u64 {
        let mut peers = self.peers.lock();
        let mut removed = 0;
        for at in 0..MAX_PEERS {
            let Some(lid) = peers
                .slots
                .get(at)
                .and_then(Option::as_ref)
                .filter(|e| pred(e))
                .map(|e| e.peer.lid)
            else {
                continue;
            };
            if peers.retire(at) {
                // What sat behind the node is unknown again: flooded.
                self.forwarding.forget(lid);
                removed += 1;
            }
        }
        removed
    }

    /// Destroys the AHs of retired peers whose sends have all completed.
    /// Process context only (see [`Retired`]).
    fn release_retired(&self) {
        loop {
            let completed = self.sends_completed.load(Ordering::Acquire);
            // Not in the loop's head: the guard would live through the body.
            let Some(released) = self.peers.lock().take_released(completed) else {
                break;
            };
            drop(released);
        }
    }

    fn lid_in_use(&self, lid: u16) -> bool {
        self.peers.lock().iter().any(|e| e.peer.lid == lid)
    }

    /// Whether a member of the LAN holds `lid` (this LAN port's LID, not
    /// yet announced): asks the members to announce themselves with a
    /// probe and listens for [`PROBE_MS`]. Before the netdev is
    /// registered only: the CQ is polled here, not by NAPI. Announcements
    /// heard are not kept; the name service hears them again.
    fn lid_taken(&self, lid: u16) -> bool {
        self.send_to_group(false, true);
        let deadline = now_ms() + PROBE_MS;
        let mut batch: [WorkCompletion; 16] = Default::default();
        let mut taken = false;
        while !taken && now_ms() < deadline {
            let got = self.cq.poll(&mut batch);
            for wc in batch.iter().take(got) {
                taken |= self.probe_completion(wc, lid);
            }
            if got == 0 {
                sleep_ms(10);
            }
        }
        taken
    }

    /// One completion while probing: whether it is an announcement of
    /// another node holding `lid` in this LAN.
    fn probe_completion(&self, wc: &WorkCompletion, lid: u16) -> bool {
        let id = wc.wr_id();
        if id == WR_ANNOUNCE {
            self.sends_completed.fetch_add(1, Ordering::AcqRel);
            self.announce_busy.store(false, Ordering::Release);
            self.sq_free.fetch_add(1, Ordering::AcqRel);
            return false;
        }
        let Some(index) = id.checked_sub(WR_RECV_BASE).filter(|_| id < WR_SKB_MIN) else {
            return false;
        };
        let index = index as usize;
        let mut taken = false;
        if let (true, Some(buffer)) = (wc.ok(), self.rx.get(index)) {
            let bytes = buffer.for_cpu(wc.byte_len() as usize);
            self.count(Stat::RxDmaSyncs);
            self.count(Stat::RxDatagrams);
            if let Some((_, payload)) = crate::pure::split_checked(bytes, GRH_LEN) {
                if let Ok(Datagram::Announcement(a)) = lan::classify_datagram(payload) {
                    taken = !a.leaving
                        && !a.probe
                        && a.lan == self.config.lan
                        && a.lid == lid
                        && a.gid != self.sgid;
                }
            }
        }
        if self.post_receive(index).is_err() {
            self.count(Stat::RxErrors);
        }
        taken
    }

    /// A child's carrier follows the port from here (the port's events
    /// reach the module's netdevs only).
    fn follow_port(&self) {
        if self.parent_ifindex == 0 {
            return;
        }
        let Some(dev) = self.netdev() else {
            return;
        };
        let active = self.port_up.load(Ordering::Relaxed);
        if active != dev.as_netdev().has_carrier() {
            self.carrier_changed(dev, active);
        }
    }

    /// Moves to the LID the conflict rule gave, once RTNL is free.
    fn settle_lid(&self) {
        let wanted = self.lid_wanted.load(Ordering::Relaxed);
        if wanted == 0 {
            return;
        }
        let Some(dev) = self.netdev() else {
            return;
        };
        // Never wait for RTNL here: `ndo_stop` holds it while it cancels
        // this work.
        let Some(rtnl) = rtnl_try_lock() else {
            return;
        };
        let mac = lan::mac_for(self.config.vendor, self.config.lan, wanted);
        if dev.set_mac_locked(&rtnl, &mac).is_ok() {
            self.count(Stat::NsLidChanges);
        }
        drop(rtnl);
        self.lid_wanted.store(0, Ordering::Relaxed);
    }

    fn poll(&self, dev: &EtherDevice<LanDev>, budget: u32) -> u32 {
        let mut done = 0;
        let mut batch: [WorkCompletion; 16] = Default::default();
        while done < budget {
            let got = self.cq.poll(&mut batch);
            for wc in batch.iter().take(got) {
                self.completion(dev, wc);
            }
            done += got as u32;
            if got < batch.len() {
                break;
            }
        }
        done.min(budget)
    }

    /// Reclaims every posted WR after the QP moved to ERR.
    fn drain(&self, dev: &EtherDevice<LanDev>) {
        let _ = self.qp.flush();
        let mut batch: [WorkCompletion; 16] = Default::default();
        // Flushing is asynchronous on soft devices: wait up to ~2 s.
        for _ in 0..2000 {
            let got = self.cq.poll(&mut batch);
            for wc in batch.iter().take(got) {
                self.completion(dev, wc);
            }
            if got == 0 {
                if self.sq_free.load(Ordering::Acquire) == SEND_DEPTH {
                    break;
                }
                sleep_ms(1);
            }
        }
    }
}

impl EtherDriver for LanDev {
    const DRIVER: &'static CStr = c_str!("iblan");
    const VERSION: &'static CStr = c_str!("1.0");
    const STAT_NAMES: &'static [&'static CStr] = STAT_NAMES;

    fn open(dev: &EtherDevice<Self>) -> Result {
        let lan = dev.data();
        // The first open initialises the ticker (later ones find it so).
        // SAFETY: the data is at its final place in the netdev, and `Drop
        // for LanDev` cancels the work before the netdev's memory goes,
        // when nothing schedules it any more.
        unsafe { lan.ticker.init() };
        lan.running.store(true, Ordering::Release);
        lan.announce_soon.store(true, Ordering::Relaxed);
        lan.ticker.schedule(0);
        // Receives that completed while the netdev was down wait in the CQ.
        if lan.cq.arm() {
            dev.napi_schedule();
        }
        dev.wake_queue();
        Ok(())
    }

    fn stop(dev: &EtherDevice<Self>) -> Result {
        let lan = dev.data();
        dev.stop_queue();
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

    fn start_xmit(dev: &EtherDevice<Self>, skb: SkBuff) -> TxOutcome {
        dev.data().transmit(dev, skb)
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

    fn change_mtu(_dev: &EtherDevice<Self>, mtu: u32) -> Result {
        if !(68..=MTU_MAX).contains(&mtu) {
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
        if dev.data().cq.arm() {
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
        Ok(Coalesce {
            usecs: lan.coalesce_usecs.load(Ordering::Relaxed),
            frames: lan.coalesce_frames.load(Ordering::Relaxed),
        })
    }

    /// The one CQ takes the moderation: its events raise NAPI, which
    /// handles sends and receives alike.
    fn set_coalesce(dev: &EtherDevice<Self>, coalesce: Coalesce) -> Result {
        let lan = dev.data();
        let (Ok(usecs), Ok(frames)) = (
            u16::try_from(coalesce.usecs),
            u16::try_from(coalesce.frames),
        ) else {
            return Err(EINVAL);
        };
        lan.cq.set_moderation(frames, usecs)?;
        lan.coalesce_usecs.store(coalesce.usecs, Ordering::Relaxed);
        lan.coalesce_frames
            .store(coalesce.frames, Ordering::Relaxed);
        Ok(())
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
    const MTU: ((u32, u32), u32) = ((68, MTU_MAX), MTU_DEFAULT);

    fn link_ops() -> &'static LinkOps<Self> {
        &crate::LINK
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
            parent: parent.as_netdev().ifindex(),
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

    fn link_registered(rtnl: &RtnlGuard, dev: &EtherDevice<Self>) {
        let lan = dev.data();
        lan.attach(dev);
        if let Some(parent) = EtherDevice::<LanDev>::by_ifindex(
            rtnl,
            dev.as_netdev().net_under_rtnl(rtnl),
            lan.parent_ifindex,
        ) {
            if let Some(slot) = parent.data().children.get(usize::from(lan.config.lan)) {
                slot.store(dev.as_netdev().ifindex(), Ordering::Relaxed);
            }
        }
    }

    fn link_deleted(rtnl: &RtnlGuard, dev: &EtherDevice<Self>) {
        let lan = dev.data();
        if let Some(parent) = EtherDevice::<LanDev>::by_ifindex(
            rtnl,
            dev.as_netdev().net_under_rtnl(rtnl),
            lan.parent_ifindex,
        ) {
            if let Some(slot) = parent.data().children.get(usize::from(lan.config.lan)) {
                let _ = slot.compare_exchange(
                    dev.as_netdev().ifindex(),
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
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
        info.put(iblan::MODE, Attr::U8(iblan::MODE_UD))
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

impl Drop for LanDev {
    fn drop(&mut self) {
        // The netdev is unregistered (stopped) but not freed: reclaim every
        // posted WR, then the fields go in order.
        // Nothing schedules the ticker any more (NAPI is disabled, port
        // events unregistered); a late schedule from before is cancelled.
        self.ticker.cancel_sync();
        let dev = self
            .cq
            .handler()
            .netdev
            .swap(core::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: the netdev's memory is freed only after its data drops.
        if let Some(dev) = unsafe { dev.as_ref() } {
            self.drain(dev);
        }
    }
}

/// `/sys/kernel/debug/iblan/<netdev>/peers`: this node, then the name
/// service's table.
impl Show for LanDev {
    fn show(&self, out: &mut SeqOut) {
        use core::fmt::Write;
        let now = now_ms();
        let _ = writeln!(
            out,
            "{:<6} {:<6} {:<39} {:<8} {:<10} {:<18} age_ms",
            "who", "lid", "gid", "qpn", "qkey", "node_guid"
        );
        let mut row = |who: &str, lid: u16, gid: &[u8; 16], qpn: u32, qkey: u32, guid: u64, age| {
            let _ = writeln!(
                out,
                "{who:<6} {lid:#06x} {} {qpn:<#8x} {qkey:<#10x} {guid:#018x} {age}",
                Gid(gid)
            );
        };
        row(
            "self",
            self.lid.load(Ordering::Relaxed),
            &self.sgid,
            self.qp.qp_num(),
            self.config.qkey(),
            self.guid,
            0,
        );
        for entry in self.peers.lock().iter() {
            let p = &entry.peer;
            let age = now.saturating_sub(entry.last_seen_ms);
            row("peer", p.lid, &p.gid, p.qpn, p.qkey, p.guid, age);
        }
        let _ = writeln!(out, "{:<6} {:<6} {:<17} age_ms", "who", "lid", "mac");
        self.forwarding.show(out);
    }
}

/// A GID in IPv6 notation (without zero compression: a fixed width).
struct Gid<'a>(&'a [u8; 16]);

impl core::fmt::Display for Gid<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            let word = pair.iter().fold(0u16, |w, b| (w << 8) | u16::from(*b));
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{word:04x}")?;
        }
        Ok(())
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

fn copy_into(buffers: &mut KVec<KVec<u8>>, slot: usize, offset: usize, payload: &[u8]) {
    if let Some(out) = buffers
        .get_mut(slot)
        .and_then(|b| b.get_mut(offset..))
        .and_then(|b| b.get_mut(..payload.len()))
    {
        out.copy_from_slice(payload);
    }
}

/// The MAC address at `at` in `frame`.
fn mac_at(frame: &[u8], at: usize) -> Option<[u8; 6]> {
    frame.get(at..at + 6)?.try_into().ok()
}
