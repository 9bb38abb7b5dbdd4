// SPDX-License-Identifier: GPL-2.0

//! Connected mode: unicast frames to a peer over one RC connection of the
//! pair, set up by the handshake of `pure::connect` in UD datagrams.
//!
//! Who does what:
//! - the receive path (NAPI) takes handshake datagrams: in datagram mode
//!   it refuses an OFFER at once; in connected mode it queues the message
//!   for the ticker;
//! - the ticker (process context) runs each peer's handshake: it creates,
//!   connects and destroys the RC QPs (all of which may sleep) and sends
//!   the handshake's datagrams;
//! - the transmit path sends a unicast frame over the peer's connection
//!   once it is up, and otherwise over UD, asking the ticker for a
//!   connection;
//! - each connection's CQ raises the port's NAPI, which polls the
//!   connections whose CQ had an event: frames in, sends reclaimed.
//!
//! A connection ([`RcLink`]) lives in its peer's entry of the peer
//! table. The transmit path posts to it and NAPI polls it under the
//! table's lock, so once it has left the table (under that lock) neither
//! reaches it any more, and it is destroyed in process context (destroying
//! a QP sleeps). The ticker takes a reference of its own while it connects
//! a QP outside the lock; if the connection leaves meanwhile, the ticker's
//! reference is the last, dropped in process context too.

use super::*;
use crate::kapi::rdma::rc::{RcCompletion, RcPath, RcQp, RcQpConfig, RcReceived};
use crate::pure::connect::{
    link_vector, offer_wins, Action, ConnectMessage, Connection, Op, State,
};
use crate::pure::connect::{CONNECT_LEN, MAX_CONNECTED_FRAME};
use crate::pure::fifo::Fifo;

/// Send entries of each connection: frames of up to 64 KiB each.
const LINK_SEND_DEPTH: u32 = 64;
/// Receive buffers of each connection, each a whole frame's pages.
const LINK_RECV_DEPTH: u32 = 32;
/// Handshake messages waiting for the ticker, at most.
const CM_INBOX: usize = 16;
/// Frames NAPI takes from the connections in one pass (under the peer
/// table's lock) before it hands them up; more wait for the next pass.
const FRAMES_PER_PASS: usize = 16;
/// Bytes of a frame received over a connection that go to the skb's
/// linear part; the rest go into page fragments.
const RX_HEAD: usize = 256;
/// How long a transmit queue may wait for room on a connection whose
/// sends make no progress before the connection is taken down. Its QP
/// retries RNR NAKs for ever (see `RcQp`), so a peer that never posts
/// receives would otherwise hold the queue, and every frame behind the
/// one for it, for good; a peer that is only slow completes a send well
/// within this.
const LINK_STALL_MS: u64 = 5000;
/// How long a connection delivers frames before its pair's hold-down
/// count starts over: a peer that takes a frame or two per connection and
/// then stalls stays held down longer and longer.
const LINK_PROVEN_MS: u64 = 30_000;
/// The largest MTU of connected mode, as IPoIB's.
pub(super) const MTU_MAX_CONNECTED: u32 = 65520;

/// The send buffers of the main QP that carry handshake messages.
pub(super) const HANDSHAKE_BUFFERS: core::ops::Range<usize> = 1..5;

/// A connection's CQ events: NAPI polls it.
pub(super) struct LinkEvents {
    netdev: DeviceCell<LanDev>,
    /// Completions arrived since NAPI last drained the CQ.
    pending: AtomicBool,
}

impl CqHandler for LinkEvents {
    fn completion(&self) {
        self.pending.store(true, Ordering::Release);
        let rcu = RcuReadGuard::new();
        if let Some(dev) = self.netdev.get(&rcu) {
            dev.data().links_pending.store(true, Ordering::Release);
            dev.napi_schedule();
        }
    }
}

/// One RC connection to a peer.
pub(super) struct RcLink {
    pub(super) qp: RcQp<LinkEvents>,
    /// The peer's GID: frames over the connection come from it.
    peer_gid: [u8; 16],
    /// Connected (RTS): frames may be posted.
    ready: AtomicBool,
    /// A frame arrived over it: on the accepter, the offerer is up.
    got_frame: AtomicBool,
    /// A work request failed (not flushed): the connection is broken.
    failed: AtomicBool,
    /// A send completed without error since the ticker last looked: the
    /// peer takes frames (after `LINK_PROVEN_MS`, its hold-down count
    /// starts over).
    delivered: AtomicBool,
    /// When the connection was made (`now_ms`).
    made_ms: u64,
    /// The largest frame the peer takes, from its OFFER or ACCEPT.
    peer_max_frame: AtomicU32,
    /// A transmit queue stopped for want of room on it: its send
    /// completions wake the queues.
    queue_stopped: AtomicBool,
    /// When a queue last stopped for it, or a send of it completed
    /// since (milliseconds, `now_ms`): a queue stopped longer than
    /// `LINK_STALL_MS` after that breaks the connection.
    last_progress_ms: AtomicU64,
}

impl RcLink {
    /// Whether a transmit queue has waited for room on the connection for
    /// longer than `LINK_STALL_MS` without one of its sends completing.
    fn stalled(&self, now: u64) -> bool {
        self.queue_stopped.load(Ordering::Acquire)
            && now.saturating_sub(self.last_progress_ms.load(Ordering::Relaxed)) > LINK_STALL_MS
    }
}

/// Handshake messages for the ticker, in arrival order: the sender's GID
/// and message.
pub(super) type CmInbox = Fifo<([u8; 16], ConnectMessage), CM_INBOX>;

/// The connection state of a new peer.
pub(super) fn new_connection(our_gid: &[u8; 16], their_gid: &[u8; 16], lan: u8) -> Connection {
    Connection::new(MAX_CONNECTED_FRAME, lan, offer_wins(our_gid, their_gid))
}

impl LanDev {
    /// Whether the port is in connected mode.
    pub(super) fn connected_mode(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// A handshake datagram from the node with GID `sgid`, sent from its
    /// QP `src_qp`. Receive path (NAPI).
    pub(super) fn handshake(&self, sgid: &[u8; 16], src_qp: u32, payload: &[u8]) {
        let Ok(message) = ConnectMessage::parse(payload) else {
            self.count(Stat::CmMalformed);
            return;
        };
        if !self.connected_mode() {
            // Only an offer asks for an answer; anything else answers an
            // offer this node never made, or no longer stands by.
            if message.op == Op::Offer {
                let refusal = self.refusal(message.qpn);
                if self.post_handshake(sgid, Some(src_qp), &refusal) {
                    self.count(Stat::CmOffersRefused);
                }
            }
            return;
        }
        if self.cm_inbox.lock().push((*sgid, message)).is_err() {
            // The offerer retries.
            self.count(Stat::CmInboxDrops);
            return;
        }
        if self.running.load(Ordering::Acquire) {
            self.ticker.schedule(0);
        }
    }

    /// A REFUSE of the peer's QP `your_qpn`.
    fn refusal(&self, your_qpn: u32) -> ConnectMessage {
        ConnectMessage::refusal(your_qpn, MAX_CONNECTED_FRAME, self.config.lan)
    }

    /// Sends `message` to the peer with GID `gid`, through its address
    /// handle, to QP `qpn` (`None`: the QP it announced). A node not in
    /// the table gets nothing. Whether it was posted: not when every
    /// handshake buffer is in flight or the send queue is full (the
    /// handshake retries).
    fn post_handshake(&self, gid: &[u8; 16], qpn: Option<u32>, message: &ConnectMessage) -> bool {
        // A QPN from the wire: a UD QP has 24 bits and is not QP 0 or 1.
        if qpn.is_some_and(|qpn| !(2..1 << 24).contains(&qpn)) {
            self.count(Stat::CmMalformed);
            return false;
        }
        if self
            .sq_free
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| f.checked_sub(1))
            .is_err()
        {
            return false;
        }
        let bytes: [u8; CONNECT_LEN] = message.encode();
        let mut peers = self.peers.lock();
        let mut posted = Err(ENOENT);
        if let Some(peer) = peers
            .find(|e| &e.peer.gid == gid)
            .and_then(|at| peers.slots.get(at))
            .and_then(Option::as_ref)
            .map(|e| &e.peer)
        {
            let qpn = qpn.unwrap_or(peer.qpn);
            for buffer in HANDSHAKE_BUFFERS {
                posted = self
                    .qp
                    .post_buffer(buffer, &bytes, &peer.ah, qpn, self.config.qkey());
                if posted != Err(EBUSY) {
                    break;
                }
            }
        }
        if posted.is_ok() {
            // The peer's AH is retired only after this send completes.
            peers.count_posts(0, 1);
        }
        drop(peers);
        if posted.is_ok() {
            self.count(Stat::DmaSyncsForDevice);
            true
        } else {
            self.sq_free.fetch_add(1, Ordering::AcqRel);
            false
        }
    }

    /// The ticker's part: handshake messages, retries and timeouts, broken
    /// connections, and connections the transmit path asked for. The time
    /// is read afresh for each message and each peer: making and
    /// connecting QPs sleeps, and the handshake's timers count from when
    /// its messages go.
    pub(super) fn run_connections(&self) {
        loop {
            // Not in the loop's head: the guard would live through the body.
            let next = self.cm_inbox.lock().pop();
            let Some((gid, message)) = next else {
                break;
            };
            let now = now_ms();
            let accepting = self.connected_mode();
            let action = self.with_connection(&gid, |entry| {
                if message.op == Op::Offer {
                    // What the offerer takes, should this side accept.
                    entry.offered_max_frame = message.max_frame;
                }
                self.step(entry, |conn| conn.receive(&message, accepting, now))
            });
            match action {
                Some(action) => self.act(&gid, action),
                None => self.count(Stat::CmUnknownPeer),
            }
        }
        for at in 0..MAX_PEERS {
            let now = now_ms();
            let step = {
                let mut peers = self.peers.lock();
                let Some(entry) = peers.get_mut(at) else {
                    continue;
                };
                let gid = entry.peer.gid;
                let (failed, got_frame, proven) =
                    entry.peer.rc.as_ref().map_or((false, false, false), |l| {
                        let failed = l.failed.load(Ordering::Acquire) || l.stalled(now);
                        let proven = !failed
                            && now.saturating_sub(l.made_ms) >= LINK_PROVEN_MS
                            && l.delivered.swap(false, Ordering::Relaxed);
                        (failed, l.got_frame.load(Ordering::Acquire), proven)
                    });
                if proven {
                    entry.conn.delivered();
                }
                let offered = entry.offered_max_frame;
                let mut action = if failed {
                    self.count(Stat::CmFailed);
                    entry.conn.fail(now)
                } else {
                    self.step(entry, |conn| {
                        if got_frame {
                            conn.frame_received(offered);
                        }
                        conn.tick(now)
                    })
                };
                if action == Action::None && entry.want_rc {
                    entry.want_rc = false;
                    if self.connected_mode() {
                        action = entry.conn.want(now);
                    }
                }
                (gid, action)
            };
            let (gid, action) = step;
            if action != Action::None {
                self.act(&gid, action);
            }
        }
    }

    /// Runs `f` on the entry of the peer with GID `gid`, under the table's
    /// lock; `None` if it is not in the table.
    fn with_connection<R>(&self, gid: &[u8; 16], f: impl FnOnce(&mut PeerEntry) -> R) -> Option<R> {
        let mut peers = self.peers.lock();
        let at = peers.find(|e| &e.peer.gid == gid)?;
        peers.get_mut(at).map(f)
    }

    /// Does what the handshake of the peer `gid` asks. Process context.
    fn act(&self, gid: &[u8; 16], action: Action) {
        match action {
            Action::None => {}
            Action::Send(message) => {
                if message.op == Op::Refuse {
                    self.count(Stat::CmOffersRefused);
                }
                self.post_handshake(gid, None, &message);
            }
            Action::CreateQp => {
                let Ok(link) = self.new_link(gid) else {
                    self.fail_connection(gid);
                    return;
                };
                let (qpn, psn) = (link.qp.qp_num(), link.qp.first_psn());
                // Making the QP may have slept: the offer's retries count
                // from when it goes.
                let now = now_ms();
                let next = self.publish(gid, link, |conn| conn.offer(qpn, psn, now));
                if matches!(next, Some(Action::Send(_))) {
                    self.count(Stat::CmOffersSent);
                }
                if let Some(next) = next {
                    self.act(gid, next);
                }
            }
            Action::CreateAndAccept { peer_qpn, peer_psn } => {
                let link = self.new_link(gid).and_then(|link| {
                    self.connect_link(&link, peer_qpn, peer_psn)?;
                    Ok(link)
                });
                let Ok(link) = link else {
                    self.fail_connection(gid);
                    return;
                };
                let (qpn, psn) = (link.qp.qp_num(), link.qp.first_psn());
                // Making and connecting the QP may sleep: the wait for
                // the CONFIRM starts when the ACCEPT goes, not with the run.
                let now = now_ms();
                let peer = (peer_qpn, peer_psn);
                let next = self.publish(gid, link, |conn| conn.accepted(qpn, psn, peer, now));
                if matches!(next, Some(Action::Send(_))) {
                    self.count(Stat::CmAccepted);
                }
                if let Some(next) = next {
                    self.act(gid, next);
                }
            }
            Action::ConnectAndSend {
                qpn,
                peer_qpn,
                peer_psn,
                then,
            } => {
                let link = self.with_connection(gid, |entry| {
                    entry
                        .peer
                        .rc
                        .as_ref()
                        .filter(|l| l.qp.qp_num() == qpn)
                        .cloned()
                });
                let Some(Some(link)) = link else {
                    return;
                };
                if self.connect_link(&link, peer_qpn, peer_psn).is_err() {
                    drop(link);
                    self.fail_connection(gid);
                    return;
                }
                // Closed meanwhile (datagram mode, the peer gone): the
                // peer must not come up towards a QP that is going.
                let current = self.with_connection(gid, |entry| {
                    entry.peer.rc.as_ref().is_some_and(|l| l.qp.qp_num() == qpn)
                });
                if current == Some(true) && self.connected_mode() {
                    self.post_handshake(gid, None, &then);
                }
            }
            Action::Destroy(qpn) => self.unpublish(gid, Some(qpn)),
        }
    }

    /// A connection attempt or connection with the peer `gid` failed.
    fn fail_connection(&self, gid: &[u8; 16]) {
        let now = now_ms();
        self.count(Stat::CmFailed);
        if let Some(Action::Destroy(qpn)) = self.with_connection(gid, |e| e.conn.fail(now)) {
            self.unpublish(gid, Some(qpn));
        }
    }

    /// A new RC QP for a connection to `gid`, in INIT, its CQ armed.
    fn new_link(&self, gid: &[u8; 16]) -> Result<Arc<RcLink>> {
        let events = LinkEvents {
            netdev: self.qp.cq().handler().netdev.clone(),
            pending: AtomicBool::new(false),
        };
        let config = RcQpConfig {
            port: self.port,
            depths: (LINK_SEND_DEPTH, LINK_RECV_DEPTH),
            recv_len: MAX_CONNECTED_FRAME as usize,
        };
        // Connections to different peers complete on different CPUs.
        let vector = link_vector(gid, self.pd.device().num_comp_vectors());
        let qp = RcQp::new(&self.pd, vector, events, &config, CALLER)?;
        let link = Arc::new(
            RcLink {
                qp,
                peer_gid: *gid,
                ready: AtomicBool::new(false),
                got_frame: AtomicBool::new(false),
                failed: AtomicBool::new(false),
                delivered: AtomicBool::new(false),
                made_ms: now_ms(),
                peer_max_frame: AtomicU32::new(MAX_CONNECTED_FRAME),
                queue_stopped: AtomicBool::new(false),
                last_progress_ms: AtomicU64::new(0),
            },
            GFP_KERNEL,
        )?;
        link.qp.cq().arm();
        Ok(link)
    }

    /// Connects `link` to the peer's QP `peer_qpn`, whose first PSN is
    /// `peer_psn`. Process context.
    fn connect_link(&self, link: &RcLink, peer_qpn: u32, peer_psn: u32) -> Result {
        let path = RcPath {
            sgid_index: self.sgid_index,
            dgid: link.peer_gid,
            hop_limit: 1,
            dest_qpn: peer_qpn,
            dest_psn: peer_psn,
            mtu: self.datagram_len,
        };
        link.qp.connect(&path)?;
        link.ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Puts `link` in the entry of the peer `gid` if `step` (the
    /// handshake, told of the new QP) keeps it; returns what to do next.
    /// A link not kept, or made after the port left connected mode, is
    /// dropped here, outside the lock: nobody else has seen it.
    fn publish(
        &self,
        gid: &[u8; 16],
        link: Arc<RcLink>,
        step: impl FnOnce(&mut Connection) -> Action,
    ) -> Option<Action> {
        let mut link = Some(link);
        let mut replaced = None;
        let next = self.with_connection(gid, |entry| {
            let action = self.step(entry, step);
            match action {
                Action::Send(_) if self.connected_mode() => {
                    replaced = entry.peer.rc.take();
                    entry.peer.rc = link.take();
                    Some(action)
                }
                // Datagram mode meanwhile: no connection after all.
                Action::Send(_) => Some(entry.conn.close()),
                _ => None,
            }
        });
        drop(link);
        if let Some(replaced) = replaced {
            self.retire_link(replaced);
        }
        next.flatten()
    }

    /// Runs `step` on the handshake of `entry` and keeps what follows
    /// from it: the counter of connections that came up, and the largest
    /// frame the peer takes over the connection.
    fn step(&self, entry: &mut PeerEntry, step: impl FnOnce(&mut Connection) -> Action) -> Action {
        let was_up = entry.conn.up().is_some();
        let action = step(&mut entry.conn);
        if let (Some(link), Some((_, peer_max_frame))) = (&entry.peer.rc, entry.conn.up()) {
            link.peer_max_frame.store(peer_max_frame, Ordering::Relaxed);
            if !was_up {
                self.count(Stat::CmUp);
            }
        }
        action
    }

    /// Takes the connection to `gid` (of QP `qpn`, or any) out of the
    /// table and destroys it after every NAPI poll that may hold it has
    /// ended. Process context.
    fn unpublish(&self, gid: &[u8; 16], qpn: Option<u32>) {
        let taken = self.with_connection(gid, |entry| {
            let matches = entry
                .peer
                .rc
                .as_ref()
                .is_some_and(|l| qpn.map_or(true, |qpn| l.qp.qp_num() == qpn));
            if matches {
                entry.peer.rc.take()
            } else {
                None
            }
        });
        if let Some(Some(link)) = taken {
            self.retire_link(link);
        }
    }

    /// Destroys `link`, out of the table now: NAPI, which polls only the
    /// connections in the table, under its lock, no longer reaches it.
    /// Process context (destroying a QP sleeps).
    pub(super) fn retire_link(&self, link: Arc<RcLink>) {
        self.count(Stat::CmClosed);
        link.ready.store(false, Ordering::Release);
        // Its completions will not wake a queue it stopped: wake them now
        // (a frame for the peer goes over UD, or is dropped).
        if link.queue_stopped.swap(false, Ordering::AcqRel) && self.running.load(Ordering::Acquire)
        {
            let rcu = RcuReadGuard::new();
            if let Some(dev) = self.qp.cq().handler().netdev.get(&rcu) {
                dev.wake_all_queues();
            }
        }
        drop(link);
    }

    /// Leaves connected mode: every connection goes, and each peer with
    /// one is told, so that it falls back to UD at once. Process context.
    pub(super) fn close_connections(&self) {
        for at in 0..MAX_PEERS {
            let closed = {
                let mut peers = self.peers.lock();
                let Some(entry) = peers.get_mut(at) else {
                    continue;
                };
                let peer_qpn = match entry.conn.state() {
                    State::Accepted { peer_qpn, .. } | State::Up { peer_qpn, .. } => Some(peer_qpn),
                    _ => None,
                };
                entry.want_rc = false;
                let _ = entry.conn.close();
                (entry.peer.gid, peer_qpn)
            };
            let (gid, peer_qpn) = closed;
            if let Some(peer_qpn) = peer_qpn {
                self.post_handshake(&gid, None, &self.refusal(peer_qpn));
            }
            self.unpublish(&gid, None);
        }
        // Messages that came meanwhile are stale.
        self.cm_inbox.lock().clear();
    }

    /// Sends `skb` to the peer in slot `at` over its connection if it is
    /// up, else gives it back (for UD) after asking the ticker for one.
    pub(super) fn transmit_connected(
        &self,
        dev: &EtherDevice<LanDev>,
        queue: u16,
        skb: SkBuff,
        lid: u16,
    ) -> core::result::Result<TxOutcome, SkBuff> {
        let len = skb.len();
        let mut peers = self.peers.lock();
        let Some(entry) = peers
            .find(|e| e.peer.lid == lid)
            .and_then(|at| peers.get_mut(at))
        else {
            return Err(skb);
        };
        let link = entry
            .peer
            .rc
            .as_ref()
            .filter(|l| entry.conn.up().is_some() && l.ready.load(Ordering::Acquire));
        let Some(link) = link else {
            if !entry.want_rc && !matches!(entry.conn.want(now_ms()), Action::None) {
                entry.want_rc = true;
                drop(peers);
                self.ticker.schedule(0);
            }
            return Err(skb);
        };
        if len > link.peer_max_frame.load(Ordering::Relaxed) {
            return Err(skb);
        }
        match link.qp.send_skb(skb) {
            Ok(()) => {
                drop(peers);
                self.count(Stat::TxConnected);
                self.link.tx_packets.fetch_add(1, Ordering::Relaxed);
                self.link.tx_bytes.fetch_add(len.into(), Ordering::Relaxed);
                if let Some(txq) = self.tx.get(usize::from(queue)) {
                    txq.packets.fetch_add(1, Ordering::Relaxed);
                    txq.bytes.fetch_add(len.into(), Ordering::Relaxed);
                }
                Ok(TxOutcome::Sent)
            }
            Err((skb, err)) if err == ENOSPC => {
                // The connection's completions wake the queue: stopped
                // under the lock, which NAPI polls them under, so that no
                // wake-up comes between the two.
                if !link.queue_stopped.load(Ordering::Acquire) {
                    link.last_progress_ms.store(now_ms(), Ordering::Relaxed);
                }
                link.queue_stopped.store(true, Ordering::Release);
                dev.stop_tx_queue(queue);
                drop(peers);
                self.count(Stat::TxQueueStops);
                Ok(TxOutcome::Busy(skb))
            }
            Err((skb, _)) => {
                drop(peers);
                self.count(Stat::TxPostErrors);
                drop(skb);
                Ok(self.drop_frame())
            }
        }
    }

    /// NAPI: polls the connections whose CQ had an event, within `budget`
    /// completions; returns how many it took (all of `budget` if some are
    /// left, so that NAPI polls again).
    ///
    /// The connections are polled under the peer table's lock, which is
    /// what keeps each alive meanwhile (a connection leaves the table under
    /// it, and is destroyed after); their frames are built there and
    /// handed up after it is released, as the stack may transmit at once.
    /// Returns the work done, and whether some is left.
    pub(super) fn poll_links(&self, dev: &EtherDevice<LanDev>, budget: u32) -> (u32, bool) {
        if !self.links_pending.swap(false, Ordering::AcqRel) {
            return (0, false);
        }
        let mut frames = Frames::default();
        let mut done = 0;
        let mut more = false;
        {
            let now = now_ms();
            let mut peers = self.peers.lock();
            for entry in peers.iter_mut() {
                let Some(link) = entry.peer.rc.as_ref() else {
                    continue;
                };
                let events = link.qp.cq().handler();
                if !events.pending.swap(false, Ordering::AcqRel) {
                    continue;
                }
                let left = budget.saturating_sub(done);
                let before = frames.count;
                let (taken, drained) = self.poll_link(dev, link, entry.peer.lid, left, &mut frames);
                done += taken;
                if frames.count > before {
                    // A node that sends stays known (see `heard_from`).
                    entry.last_seen_ms = now;
                }
                // Armed only once drained: an event then means new work.
                if !drained || link.qp.cq().arm() {
                    events.pending.store(true, Ordering::Release);
                    more = true;
                }
            }
        }
        for (skb, lid, source) in frames.taken() {
            if let Some(source) = source {
                self.learn_source(Some(lid), &source);
            }
            if let Some(skb) = skb {
                self.hand_up(dev, skb);
            }
        }
        if more {
            self.links_pending.store(true, Ordering::Release);
        }
        (done, more)
    }

    /// Takes up to `budget` completions of `link` to the peer with LID
    /// `lid`, as many as `frames` has room for; returns how many, and
    /// whether its CQ is empty.
    fn poll_link(
        &self,
        dev: &EtherDevice<LanDev>,
        link: &RcLink,
        lid: u16,
        budget: u32,
        frames: &mut Frames,
    ) -> (u32, bool) {
        let mut done = 0;
        let mut batch: [WorkCompletion<'_>; 16] = Default::default();
        loop {
            let want = batch
                .len()
                .min(frames.room())
                .min(budget.saturating_sub(done) as usize);
            let Some(slots) = batch.get_mut(..want).filter(|s| !s.is_empty()) else {
                return (done, false);
            };
            let got = link.qp.poll(slots);
            for wc in slots.iter_mut().take(got) {
                self.link_completion(dev, link, lid, core::mem::take(wc), frames);
            }
            done += got as u32;
            if got < want {
                return (done, true);
            }
        }
    }

    fn link_completion(
        &self,
        dev: &EtherDevice<LanDev>,
        link: &RcLink,
        lid: u16,
        wc: WorkCompletion<'_>,
        frames: &mut Frames,
    ) {
        let flushed = wc.flushed();
        match link.qp.complete(wc) {
            RcCompletion::Sent(ok) => {
                if ok {
                    link.delivered.store(true, Ordering::Relaxed);
                } else if !flushed {
                    self.link_broke(link);
                }
                link.last_progress_ms.store(now_ms(), Ordering::Relaxed);
                if link.queue_stopped.load(Ordering::Acquire)
                    && link.qp.send_room() >= LINK_SEND_DEPTH / 2
                    && self.running.load(Ordering::Acquire)
                {
                    link.queue_stopped.store(false, Ordering::Release);
                    dev.wake_all_queues();
                }
            }
            RcCompletion::Received(mut received) => {
                if !received.ok() {
                    // Flushed buffers stay unposted: the QP is going.
                    if !flushed {
                        self.link_broke(link);
                    }
                    return;
                }
                if self.running.load(Ordering::Acquire) && link.ready.load(Ordering::Acquire) {
                    let frame = self.link_frame(dev, link, &mut received);
                    frames.push(frame, lid);
                }
                if self.repost_link(received).is_err() {
                    self.count(Stat::RxErrors);
                }
            }
            RcCompletion::Foreign => {}
        }
    }

    fn repost_link(&self, received: RcReceived<'_, LinkEvents>) -> Result {
        self.count(Stat::DmaSyncsForDevice);
        received.repost()
    }

    /// The connection failed: the ticker takes it down, and the pair
    /// keeps UD for the hold-down.
    fn link_broke(&self, link: &RcLink) {
        if !link.failed.swap(true, Ordering::AcqRel) {
            self.count(Stat::RxErrors);
            if self.running.load(Ordering::Acquire) {
                self.ticker.schedule(0);
            }
        }
    }

    /// A frame that arrived over `link`, copied once into an skb with its
    /// headers linear and the rest in page fragments (no allocation of a
    /// 64 KiB linear block); with its source MAC, to learn where it sits.
    /// The skb is `None` if the netdev does not take the frame.
    fn link_frame(
        &self,
        dev: &EtherDevice<LanDev>,
        link: &RcLink,
        received: &mut RcReceived<'_, LinkEvents>,
    ) -> (Option<SkBuff>, Option<[u8; 6]>) {
        self.count(Stat::RxConnected);
        if !link.got_frame.swap(true, Ordering::AcqRel) {
            // The accepter learns here that the offerer is up.
            self.ticker.schedule(0);
        }
        let len = received.len();
        let (mut skb, source, head) = {
            let first = received.pieces().next().unwrap_or(&[]);
            if len < 14 || first.len() < 14 {
                self.count(Stat::RxMalformed);
                return (None, None);
            }
            let source = rx::mac_at(first, 6);
            if !self.wanted(dev, first) {
                return (None, source);
            }
            let head = first.len().min(RX_HEAD);
            let skb = dev.alloc_rx_skb(head as u32).and_then(|mut skb| {
                skb.put_slice(first.get(..head).unwrap_or(&[])).ok()?;
                Some(skb)
            });
            let Some(skb) = skb else {
                self.count(Stat::RxAlloc);
                self.link.rx_dropped.fetch_add(1, Ordering::Relaxed);
                return (None, source);
            };
            (skb, source, head)
        };
        // The rest goes up in the pages it arrived in: each is handed to
        // the stack and the buffer gets a fresh one.
        let handed = received.hand_over(&mut skb, head);
        match handed {
            Ok((given, copied)) => {
                self.add(Stat::RxPagesHandedUp, given.into());
                self.add(Stat::RxPagesCopied, copied.into());
                (Some(skb), source)
            }
            Err(_) => {
                self.count(Stat::RxAlloc);
                self.link.rx_dropped.fetch_add(1, Ordering::Relaxed);
                (None, source)
            }
        }
    }
}

/// Frames NAPI took from the connections under the peer table's lock, to
/// hand up after it: each skb (if the netdev takes it), the sender's LID
/// and the frame's source MAC.
#[derive(Default)]
struct Frames {
    taken: [FrameSlot; FRAMES_PER_PASS],
    count: usize,
}

type FrameSlot = (Option<SkBuff>, u16, Option<[u8; 6]>);

impl Frames {
    fn room(&self) -> usize {
        FRAMES_PER_PASS.saturating_sub(self.count)
    }

    fn push(&mut self, (skb, source): (Option<SkBuff>, Option<[u8; 6]>), lid: u16) {
        if let Some(slot) = self.taken.get_mut(self.count) {
            *slot = (skb, lid, source);
            self.count += 1;
        }
    }

    fn taken(&mut self) -> impl Iterator<Item = FrameSlot> + '_ {
        self.taken
            .iter_mut()
            .take(self.count)
            .map(|slot| (slot.0.take(), slot.1, slot.2))
    }
}

/// Puts the LAN port of `dev` in `mode` (`IBLAN_MODE_*`), as IPoIB does:
/// connected mode offers scatter-gather and raises the MTU to its
/// largest; datagram mode closes every connection and brings the MTU down
/// to what datagrams carry. Under RTNL.
pub(super) fn set_mode(rtnl: &RtnlGuard, dev: &EtherDevice<LanDev>, mode: u8) -> Result {
    let lan = dev.data();
    let connected = match mode {
        iblan::MODE_UD => false,
        iblan::MODE_CONNECTED => true,
        _ => return Err(EINVAL),
    };
    if lan.connected.swap(connected, Ordering::AcqRel) == connected {
        return Ok(());
    }
    if connected {
        dev.set_scatter_gather_locked(rtnl, true);
        if let Err(err) = dev.set_mtu_locked(rtnl, MTU_MAX_CONNECTED) {
            // Refused (a device stacked on it): the port stays as it was.
            lan.connected.store(false, Ordering::Release);
            dev.set_scatter_gather_locked(rtnl, false);
            return Err(err);
        }
    } else {
        // Datagram mode from here whatever the MTU change says: no
        // connection is left behind.
        lan.close_connections();
        dev.set_scatter_gather_locked(rtnl, false);
        if dev.as_netdev().mtu() > MTU_MAX {
            dev.set_mtu_locked(rtnl, MTU_MAX)?;
        }
    }
    Ok(())
}
