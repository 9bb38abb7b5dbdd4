// SPDX-License-Identifier: GPL-2.0

//! A LAN port's completions and receive path: NAPI polling, receive
//! buffers, whole frames and reassembly, the Ethernet receive filter and
//! learning where foreign MACs sit.

use super::*;

/// Completion events wake the port's NAPI.
pub(super) struct Events {
    /// The netdev while it is registered; the ticker finds it here too.
    pub(super) netdev: DeviceCell<LanDev>,
}

impl CqHandler for Events {
    fn completion(&self) {
        let rcu = RcuReadGuard::new();
        if let Some(dev) = self.netdev.get(&rcu) {
            dev.napi_schedule();
        }
    }
}

/// Open reassemblies and their buffers.
pub(super) struct Reassembly {
    pub(super) table: Reassembler<KVec<ReassemblySlot>>,
    pub(super) buffers: KVec<KVec<u8>>,
}

impl Reassembly {
    /// Every slot closed, each with a buffer for the largest frame.
    pub(super) fn new() -> Result<Self> {
        let mut buffers = KVec::with_capacity(REASSEMBLY_SLOTS, GFP_KERNEL)?;
        for _ in 0..REASSEMBLY_SLOTS {
            buffers.push(KVec::from_elem(0u8, MAX_FRAME_LEN, GFP_KERNEL)?, GFP_KERNEL)?;
        }
        Ok(Self {
            table: Reassembler::new(KVec::from_elem(
                ReassemblySlot::CLOSED,
                REASSEMBLY_SLOTS,
                GFP_KERNEL,
            )?),
            buffers,
        })
    }
}

/// Copies a fragment's payload to its place in a reassembly buffer.
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
pub(super) fn mac_at(frame: &[u8], at: usize) -> Option<[u8; 6]> {
    frame.get(at..at + 6)?.try_into().ok()
}

impl LanDev {
    /// Gives a receive buffer back to the device.
    pub(super) fn repost(&self, received: Received<'_, Events>) -> Result {
        // The QP syncs it for the device first.
        self.count(Stat::DmaSyncsForDevice);
        received.repost()
    }

    pub(super) fn completion(&self, dev: &EtherDevice<LanDev>, wc: WorkCompletion<'_>) {
        let flushed = wc.flushed();
        let received = match self.qp.complete(wc) {
            Completion::Received(received) => received,
            sent @ (Completion::SkbSent | Completion::BufferSent(_)) => {
                // Retired peers whose sends are all done may go (see
                // `release_retired`).
                self.sends_completed.fetch_add(1, Ordering::AcqRel);
                if matches!(sent, Completion::BufferSent(ANNOUNCE_BUFFER)) {
                    self.announce_busy.store(false, Ordering::Release);
                }
                // The main QP sends announcements and handshake answers
                // only.
                self.sq_free.fetch_add(1, Ordering::AcqRel);
                return;
            }
            Completion::Foreign => return,
        };
        if !self.running.load(Ordering::Acquire) {
            // Down or going: nothing is delivered. The buffer goes back to
            // the device, or every down under traffic would shrink the
            // receive ring for good; a flushed one (the QP is being
            // destroyed) is let go.
            if !flushed && self.repost(received).is_err() {
                self.count(Stat::RxErrors);
            }
            return;
        }
        if !received.ok() {
            // A local error: the buffer goes back, nothing to deliver.
            self.count(Stat::RxErrors);
            let _ = self.repost(received);
            return;
        }
        self.count(Stat::RxDatagrams);
        // The QP handed over only what the device wrote (from a bounce
        // buffer, or out of stale cache lines).
        self.count(Stat::RxDmaSyncs);
        self.received(
            dev,
            received.bytes(),
            received.ipv4_header(),
            received.src_qp(),
        );
        if self.repost(received).is_err() {
            self.count(Stat::RxErrors);
        }
    }

    /// One datagram: GRH area, then an iblan fragment, announcement or
    /// handshake message (from QP `src_qp`).
    pub(super) fn received(
        &self,
        dev: &EtherDevice<LanDev>,
        bytes: &[u8],
        ipv4: bool,
        src_qp: u32,
    ) {
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
        if payload.first() == Some(&CONNECT_KIND) {
            self.handshake(&sgid, src_qp, payload);
            return;
        }
        match lan::classify_datagram(payload) {
            Ok(Datagram::Announcement(_)) => {
                let mut inbox = self.inbox.lock();
                let at = inbox.count;
                match (
                    inbox.pending.get_mut(at),
                    <[u8; ANNOUNCE_LEN]>::try_from(payload),
                ) {
                    (Some(slot), Ok(copy)) => {
                        *slot = copy;
                        inbox.count += 1;
                    }
                    // Full: the name service has not run since it filled;
                    // the sender announces again.
                    (None, _) => self.count(Stat::NsInboxDrops),
                    (Some(_), Err(_)) => {}
                }
                drop(inbox);
                if self.running.load(Ordering::Acquire) {
                    self.ticker.schedule(0);
                }
            }
            Ok(Datagram::Fragment { header, payload }) => {
                let sender = self.peers.lock().heard_from(&sgid, now_ms());
                self.fragment(dev, sender, &header, payload);
            }
            Err(_) => self.count(Stat::RxMalformed),
        }
    }

    /// A fragment from `sender` (its slot in the peer table and LID;
    /// `None`: a node not, or no longer, known).
    pub(super) fn fragment(
        &self,
        dev: &EtherDevice<LanDev>,
        sender: Option<(usize, u16)>,
        header: &lan::FragmentHeader,
        payload: &[u8],
    ) {
        let lid = sender.map(|(_, lid)| lid);
        if header.count == 1 {
            self.deliver(dev, lid, payload);
            return;
        }
        // Reassemblies are keyed by the sender's slot in the peer table,
        // which the GID names uniquely (QPNs repeat across nodes).
        let Some((sender, _)) = sender else {
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
                self.deliver(dev, lid, payload);
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
                // not run with interrupts off (it may transmit at once),
                // and learning takes locks that disable bottom halves.
                let frame = reassembly
                    .buffers
                    .get(slot)
                    .and_then(|b| b.get(..total_len));
                let source = frame.and_then(|f| mac_at(f, 6));
                let skb = frame
                    .filter(|f| self.wanted(dev, f))
                    .and_then(|f| self.frame_skb(dev, f));
                drop(guard);
                if let Some(source) = source {
                    self.learn_source(lid, &source);
                }
                if let Some(skb) = skb {
                    self.count(Stat::RxReassembled);
                    self.hand_up(dev, skb);
                }
            }
            Step::Drop { reason, .. } => self.count(match reason {
                lan::DropReason::Duplicate => Stat::RxSarDuplicate,
                _ => Stat::RxSarInconsistent,
            }),
        }
    }

    /// Hands one whole frame from the node with LID `lid` (`None`: not
    /// known) to the stack, if the netdev takes it.
    pub(super) fn deliver(&self, dev: &EtherDevice<LanDev>, lid: Option<u16>, frame: &[u8]) {
        if let Some(source) = mac_at(frame, 6) {
            self.learn_source(lid, &source);
        }
        if !self.wanted(dev, frame) {
            return;
        }
        if let Some(skb) = self.frame_skb(dev, frame) {
            self.hand_up(dev, skb);
        }
    }

    /// Whether the netdev takes `frame`, as an Ethernet port's filter
    /// decides before anything is copied: broadcast and multicast, unicast
    /// to its own MAC, and any unicast in promiscuous mode (a bridge port,
    /// a macvlan's lower device, packet capture).
    pub(super) fn wanted(&self, dev: &EtherDevice<LanDev>, frame: &[u8]) -> bool {
        let Some(dest) = mac_at(frame, 0) else {
            self.count(Stat::RxMalformed);
            return false;
        };
        if dest[0] & 1 != 0 || dest == dev.mac() || dev.as_netdev().is_promiscuous() {
            return true;
        }
        self.count(Stat::RxNotForUs);
        false
    }

    /// Hands a whole received frame to the stack, counted in the link
    /// statistics.
    pub(super) fn hand_up(&self, dev: &EtherDevice<LanDev>, skb: SkBuff) {
        let frame = skb.data();
        let len = frame.len() as u64;
        if frame.first().is_some_and(|b| b & 1 != 0) {
            self.link.rx_multicast.fetch_add(1, Ordering::Relaxed);
        }
        self.link.rx_packets.fetch_add(1, Ordering::Relaxed);
        self.link.rx_bytes.fetch_add(len, Ordering::Relaxed);
        dev.receive(skb);
    }

    /// Learns the node with LID `lid` as where `source` sits if it is a
    /// foreign MAC (from every frame, taken or not, as a switch learns).
    pub(super) fn learn_source(&self, lid: Option<u16>, source: &[u8; 6]) {
        if lan::classify_mac(source, self.config.vendor, self.config.lan) != MacKind::Foreign {
            return;
        }
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
    pub(super) fn frame_skb(&self, dev: &EtherDevice<LanDev>, frame: &[u8]) -> Option<SkBuff> {
        if frame.len() < 14 {
            self.count(Stat::RxMalformed);
            return None;
        }
        let Some(mut skb) = dev.alloc_rx_skb(frame.len() as u32) else {
            self.count(Stat::RxAlloc);
            self.link.rx_dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        if skb.put_slice(frame).is_err() {
            self.count(Stat::RxAlloc);
            return None;
        }
        Some(skb)
    }

    pub(super) fn poll(&self, dev: &EtherDevice<LanDev>, budget: u32) -> u32 {
        // The connections get half of each pass: a peer sending over its
        // connection as fast as frames are taken must not hold up (and,
        // with the UD receive queue full, drop) every other node's
        // datagrams.
        let (mut done, links_left) = self.poll_links(dev, budget.div_ceil(2));
        let mut batch: [WorkCompletion<'_>; 16] = Default::default();
        while done < budget {
            // Never more than the budget: NAPI counts what it gets back.
            let want = batch.len().min((budget - done) as usize);
            let got = self.qp.poll(batch.get_mut(..want).unwrap_or_default());
            for wc in batch.iter_mut().take(got) {
                self.completion(dev, core::mem::take(wc));
            }
            done += got as u32;
            if got < want {
                break;
            }
        }
        if links_left {
            // Polled again at once.
            return budget;
        }
        done.min(budget)
    }

    /// Reclaims every posted WR after the QPs moved to ERR.
    pub(super) fn drain(&self, dev: &EtherDevice<LanDev>) {
        let _ = self.qp.flush();
        for txq in self.tx.iter() {
            let _ = txq.qp.flush();
        }
        let mut batch: [WorkCompletion<'_>; 16] = Default::default();
        // Flushing is asynchronous on soft devices: wait up to ~2 s.
        for _ in 0..2000 {
            let mut got = self.qp.poll(&mut batch);
            for wc in batch.iter_mut().take(got) {
                self.completion(dev, core::mem::take(wc));
            }
            for (queue, txq) in self.tx.iter().enumerate() {
                let polled = txq.qp.poll(&mut batch);
                for wc in batch.iter_mut().take(polled) {
                    self.tx_completion(dev, txq, queue as u16, core::mem::take(wc));
                }
                got += polled;
            }
            if got == 0 {
                let idle = self.sq_free.load(Ordering::Acquire) == ANNOUNCE_DEPTH
                    && self
                        .tx
                        .iter()
                        .all(|txq| txq.sq_free.load(Ordering::Acquire) == SEND_DEPTH);
                if idle {
                    break;
                }
                sleep_ms(1);
            }
        }
    }
}
