// SPDX-License-Identifier: GPL-2.0

//! A LAN port's transmit path: choosing the peers of a frame, reserving
//! send-queue slots, posting every fragment from one mapping, and freeing
//! the frame after its last send completes.

use super::*;

impl LanDev {
    /// Sends one frame on transmit queue `queue`; see
    /// [`EtherDriver::start_xmit`]. All its fragments go on the queue's
    /// QP.
    pub(super) fn transmit(
        &self,
        dev: &EtherDevice<LanDev>,
        queue: u16,
        mut skb: SkBuff,
    ) -> TxOutcome {
        let Some(txq) = self.tx.get(usize::from(queue)) else {
            return self.drop_frame();
        };
        // The Ethernet header is in the linear part, fragments or not.
        let Some(mac) = rx::mac_at(skb.data(), 0) else {
            return self.drop_frame();
        };
        let (kind, lid) = self.destination(&mac);
        if let (true, Some(lid)) = (self.connected_mode(), lid) {
            match self.transmit_connected(dev, queue, skb, lid) {
                Ok(outcome) => return outcome,
                // No connection up yet: over UD meanwhile.
                Err(back) => skb = back,
            }
        }
        let Some(plan) = self.plan_frame(&mut skb) else {
            return self.drop_frame();
        };
        let frame_len = skb.data().len();
        let fragments = plan.count();
        // The table stays locked from the choice of peers to their last
        // post: a peer cannot leave (and lose its AH) in between.
        let mut peers = self.peers.lock();
        let (targets, peer_count) = peers.targets(lid);
        self.count_flood(kind, lid, &targets);
        if peer_count == 0 {
            drop(peers);
            self.count(Stat::TxNoPeer);
            return self.drop_frame();
        }
        let posts = (fragments * peer_count) as u32;
        if posts > SEND_DEPTH {
            drop(peers);
            return self.drop_frame();
        }
        // Reserve send queue slots; without room the stack keeps the frame.
        let Some(mut slots) = SendSlots::reserve(&txq.sq_free, posts) else {
            drop(peers);
            self.stop_queue(dev, txq, queue);
            // A completion may have freed room meanwhile.
            if txq.sq_free.load(Ordering::Acquire) >= posts {
                dev.wake_tx_queue(queue);
            }
            return TxOutcome::Busy(skb);
        };
        let Ok(header_len) = self.write_fragment_headers(&mut skb, &plan) else {
            drop(peers);
            return self.drop_frame();
        };
        // The QP maps the frame, and frees it (unmapped) after the last
        // of the posts completes.
        let sent = txq.qp.send_skb(skb, posts, |poster| {
            'peers: for peer in peers.selected(targets) {
                for index in 0..fragments {
                    let Some((offset, len)) = plan.fragment(index) else {
                        break 'peers;
                    };
                    // The fragment's header, then its part of the frame.
                    let parts = [
                        (index * FRAG_HEADER_LEN, FRAG_HEADER_LEN),
                        (header_len + offset, len),
                    ];
                    if poster.post(&parts, &peer.ah, peer.qpn, peer.qkey).is_err() {
                        self.count(Stat::TxPostErrors);
                        break 'peers;
                    }
                }
            }
        });
        let Ok(posted) = sent else {
            drop(peers);
            return self.drop_frame();
        };
        peers.count_posts(1 + usize::from(queue), posted.into());
        drop(peers);
        // Each posted slot comes back with its completion, the rest now.
        slots.posted(posted);
        drop(slots);
        self.count_sent(
            frame_len,
            fragments,
            posted,
            matches!(targets, Targets::All),
        );
        txq.packets.fetch_add(1, Ordering::Relaxed);
        txq.bytes.fetch_add(frame_len as u64, Ordering::Relaxed);
        // Stop early rather than fail the next frame.
        if txq.sq_free.load(Ordering::Acquire) < SEND_DEPTH / 8 {
            self.stop_queue(dev, txq, queue);
        }
        TxOutcome::Sent
    }

    /// Stops transmit queue `queue` for want of send entries; its
    /// completions wake it.
    fn stop_queue(&self, dev: &EtherDevice<LanDev>, txq: &TxQueue, queue: u16) {
        dev.stop_tx_queue(queue);
        self.count(Stat::TxQueueStops);
        txq.stops.fetch_add(1, Ordering::Relaxed);
    }

    /// A frame that cannot be sent: counted as dropped, and gone.
    pub(super) fn drop_frame(&self) -> TxOutcome {
        self.link.tx_dropped.fetch_add(1, Ordering::Relaxed);
        TxOutcome::Sent
    }

    /// Makes the frame linear and returns how it is cut into datagrams;
    /// `None` if it cannot be sent so.
    fn plan_frame(&self, skb: &mut SkBuff) -> Option<FragmentPlan> {
        if skb.len() as usize > MAX_FRAME_LEN {
            // Connected mode's MTU, to a peer with no connection up (yet),
            // or flooded: datagrams cannot carry it.
            self.count(Stat::TxTooBig);
            return None;
        }
        // Without scatter-gather (datagram mode) the stack hands over
        // linear frames; one that is not costs a copy, counted.
        if skb.is_nonlinear() {
            self.count(Stat::TxCopies);
        }
        skb.linearize().ok()?;
        FragmentPlan::new(skb.data().len(), self.datagram_len as usize).ok()
    }

    /// What kind of MAC `mac` is, and the LID of the node a frame to it
    /// goes to: an iblan MAC's own, or the node a foreign MAC was learned
    /// behind; `None` floods. (Looked up before the peer table is locked:
    /// the forwarding table has a lock of its own.)
    fn destination(&self, mac: &[u8; 6]) -> (MacKind, Option<u16>) {
        let kind = lan::classify_mac(mac, self.config.vendor, self.config.lan);
        let lid = match kind {
            MacKind::Unicast { lid } => Some(lid),
            MacKind::Foreign => self.forwarding.lookup(mac),
            MacKind::Broadcast | MacKind::Multicast => None,
        };
        (kind, lid)
    }

    /// Counts a frame that floods where it should not, or a foreign MAC's
    /// frame that went to the node it was learned behind.
    fn count_flood(&self, kind: MacKind, lid: Option<u16>, targets: &Targets) {
        let fanout = matches!(targets, Targets::All);
        if kind == MacKind::Foreign {
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
    }

    /// Writes the fragment headers in front of the frame, so that one
    /// mapping covers everything every post points at; returns their
    /// length.
    fn write_fragment_headers(&self, skb: &mut SkBuff, plan: &FragmentPlan) -> Result<usize> {
        let fragments = plan.count();
        let header_len = fragments * FRAG_HEADER_LEN;
        // `cow_head` makes the headroom private (the frame itself may be
        // shared with a clone), and only the pushed bytes are written.
        skb.cow_head(header_len as u32)?;
        let headers = skb.push(header_len as u32)?;
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
        Ok(header_len)
    }

    /// Counts a frame whose `posted` sends are under way.
    fn count_sent(&self, frame_len: usize, fragments: usize, posted: u32, fanout: bool) {
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
    }

    /// A send of transmit queue `queue` completed: its entry is free, and
    /// a stopped queue with room enough again is woken.
    pub(super) fn send_slot_freed(&self, dev: &EtherDevice<LanDev>, txq: &TxQueue, queue: u16) {
        let free = txq.sq_free.fetch_add(1, Ordering::AcqRel) + 1;
        if free >= SEND_DEPTH / 2
            && dev.tx_queue_stopped(queue)
            && self.running.load(Ordering::Acquire)
        {
            dev.wake_tx_queue(queue);
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
