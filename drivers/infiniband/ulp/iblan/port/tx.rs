// SPDX-License-Identifier: GPL-2.0

//! A LAN port's transmit path: choosing the peers of a frame, reserving
//! send-queue slots, posting every fragment from one mapping, and freeing
//! the frame after its last send completes.

use super::*;

impl LanDev {
    /// Sends one frame; see [`EtherDriver::start_xmit`].
    pub(super) fn transmit(&self, dev: &EtherDevice<LanDev>, mut skb: SkBuff) -> TxOutcome {
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
        let kind = lan::classify_mac(&mac, self.config.vendor, self.config.lan);
        let foreign = kind == MacKind::Foreign;
        let lid = match kind {
            MacKind::Unicast { lid } => Some(lid),
            MacKind::Foreign => self.forwarding.lookup(&mac),
            MacKind::Broadcast | MacKind::Multicast => None,
        };
        // The table stays locked from the choice of peers to their last
        // post: a peer cannot leave (and lose its AH) in between.
        let mut peers = self.peers.lock();
        let (targets, peer_count) = peers.targets(lid);
        let fanout = matches!(targets, Targets::All);
        if foreign {
            // Whether the frame goes where its MAC was learned, or floods
            // (never learned, aged out, or that node is gone).
            self.count(if fanout {
                Stat::TxForeignFloods
            } else {
                Stat::TxForeignDirect
            });
        } else if fanout && lid.is_some() {
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
        let Some(mut slots) = SendSlots::reserve(&self.sq_free, posts) else {
            drop(peers);
            dev.stop_queue();
            self.count(Stat::TxQueueStops);
            // A completion may have freed room meanwhile.
            if self.sq_free.load(Ordering::Acquire) >= posts {
                dev.wake_queue();
            }
            return TxOutcome::Busy(skb);
        };
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
            self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
            return TxOutcome::Sent;
        };
        InFlight::of(&skb).start(posts, mapping.dma(), total);
        let wr_id = skb.into_wr_id();
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
        // Each posted slot comes back with its completion, the rest now.
        slots.posted(posted);
        drop(slots);
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
    pub(super) fn send_done(&self, wr_id: u64, done: u32) {
        // The count in the skb's control block picks the last completion;
        // every other gives the skb up again at once without touching it.
        // SAFETY: `wr_id` is the skb `transmit` gave up to its posts, which
        // hold it until the last of them completes.
        let Some(skb) = (unsafe { SkBuff::from_wr_id(wr_id) }) else {
            return;
        };
        let Some((dma, len)) = InFlight::of(&skb).complete(done) else {
            // Others still hold it.
            let _ = skb.into_wr_id();
            return;
        };
        // SAFETY: `transmit` mapped the skb's data with these values and
        // stored them in its control block before the first post; this is
        // the completion of the last post, so the device is done with them.
        unsafe { self.pd.unmap(dma, len, true) };
        skb.consume();
    }

    pub(super) fn send_slot_freed(&self, dev: &EtherDevice<LanDev>) {
        let free = self.sq_free.fetch_add(1, Ordering::AcqRel) + 1;
        if free >= SEND_DEPTH / 2 && dev.queue_stopped() && self.running.load(Ordering::Acquire) {
            dev.wake_queue();
        }
    }
}

/// Send-queue slots reserved for one frame. Those it does not post go back
/// when the reservation drops, on every way out of the transmit path.
struct SendSlots<'a> {
    free: &'a AtomicU32,
    reserved: u32,
}

impl<'a> SendSlots<'a> {
    /// Takes `count` of the `free` slots, or `None` if fewer are free.
    fn reserve(free: &'a AtomicU32, count: u32) -> Option<Self> {
        free.fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| {
            f.checked_sub(count)
        })
        .ok()?;
        Some(Self {
            free,
            reserved: count,
        })
    }

    /// `count` slots were posted: their completions give them back.
    fn posted(&mut self, count: u32) {
        self.reserved = self.reserved.saturating_sub(count);
    }
}

impl Drop for SendSlots<'_> {
    fn drop(&mut self) {
        if self.reserved > 0 {
            self.free.fetch_add(self.reserved, Ordering::AcqRel);
        }
    }
}

/// A frame's skb while its sends are in flight, as its control block
/// keeps it: how many posts still hold it, and its mapping to undo after
/// the last.
struct InFlight<'a>(&'a [AtomicU64; 6]);

impl<'a> InFlight<'a> {
    const POSTS: usize = 0;
    const DMA: usize = 1;
    const LEN: usize = 2;

    fn of(skb: &'a SkBuff) -> Self {
        Self(skb.control_block())
    }

    fn word(&self, at: usize) -> Option<&AtomicU64> {
        self.0.get(at)
    }

    /// `posts` sends will hold the skb, whose data is mapped at `dma`.
    fn start(&self, posts: u32, dma: u64, len: usize) {
        for (at, value) in [
            (Self::POSTS, u64::from(posts)),
            (Self::DMA, dma),
            (Self::LEN, len as u64),
        ] {
            if let Some(word) = self.word(at) {
                word.store(value, Ordering::Relaxed);
            }
        }
    }

    /// `done` more sends completed: the mapping to undo if they were the
    /// last. The mapping is read first: once the count drops, the last
    /// holder (on another CPU) may free the skb.
    fn complete(self, done: u32) -> Option<(u64, usize)> {
        let dma = self.word(Self::DMA)?.load(Ordering::Relaxed);
        let len = self.word(Self::LEN)?.load(Ordering::Relaxed) as usize;
        let before = self
            .word(Self::POSTS)?
            .fetch_sub(u64::from(done), Ordering::AcqRel);
        (before <= u64::from(done)).then_some((dma, len))
    }
}
