// SPDX-License-Identifier: GPL-2.0

//! A LAN port's name service: announcements to the LAN's group, the peer
//! table they fill and age, LID conflicts and the probe, and following
//! the RDMA port's state; all in process context (the ticker).

use super::*;

/// Announcements the receive path saw, for the name service to process.
pub(super) struct Inbox {
    pub(super) pending: [[u8; ANNOUNCE_LEN]; 16],
    pub(super) count: usize,
    /// The next to take, below `count`.
    pub(super) taken: usize,
}

impl Inbox {
    /// The oldest announcement not yet taken.
    pub(super) fn pop(&mut self) -> Option<[u8; ANNOUNCE_LEN]> {
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

// Fields drop in declaration order after this, which is the order the
// verbs objects must go in.
impl_has_delayed_work! {
    impl HasDelayedWork for LanDev { ticker } fn run(&self) {
        self.name_service();
    }
}

impl LanDev {
    /// The announcement of this node, `leaving` or not.
    pub(super) fn send_announcement(&self, leaving: bool) {
        self.send_to_group(leaving, false);
    }

    /// An announcement, or with `probe` a probe for this node's LID.
    pub(super) fn send_to_group(&self, leaving: bool, probe: bool) {
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
        let mut peers = self.peers.lock();
        // The QP writes the bytes into its buffer and syncs it for the
        // device, unless (EBUSY) the previous announcement is in flight.
        let posted = self.qp.post_buffer(
            ANNOUNCE_BUFFER,
            &bytes,
            &self.group_ah,
            0xff_ffff,
            self.config.qkey(),
        );
        if posted != Err(EBUSY) {
            self.count(Stat::DmaSyncsForDevice);
        }
        if posted.is_ok() {
            peers.count_posts(0, 1);
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
    pub(super) fn name_service(&self) {
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
        self.run_connections();
        self.settle_lid();
        self.follow_port();
        let last = self.last_announce_ms.load(Ordering::Relaxed);
        if self.announce_soon.swap(false, Ordering::AcqRel) || now >= last + ANNOUNCE_EVERY_MS {
            self.send_announcement(false);
        }
        // A kick during this run (a handshake message, a frame asking for
        // a connection) stands: the period must not postpone it by a tick.
        self.ticker.schedule_unless_pending(TICK_MS);
    }

    pub(super) fn take_announcement(&self, a: &Announcement, now: u64) {
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
                    let lid = peers.get_mut(at).map(|e| e.peer.lid);
                    if peers.retire(at) {
                        self.count(Stat::NsLeft);
                        // What sat behind the node is unknown again.
                        if let Some(lid) = lid {
                            self.forwarding.forget(lid);
                        }
                    }
                    true
                }
                Some(at) => {
                    // The AH depends on the GID alone, the key: a peer
                    // that moved to another LID or QP keeps it.
                    if let Some(entry) = peers.get_mut(at) {
                        entry.last_seen_ms = now;
                        if entry.peer.lid != a.lid {
                            // The MACs learned behind its old LID would
                            // go to whoever holds that LID next.
                            self.forwarding.forget(entry.peer.lid);
                            entry.peer.lid = a.lid;
                        }
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

    pub(super) fn add_peer(&self, a: &Announcement, now: u64) {
        // Checked before the AH is made: a LAN with more nodes than the
        // table holds would otherwise make and destroy one for every
        // announcement of a node that does not fit.
        if self.peers.lock().is_full() {
            self.count(Stat::NsTableFull);
            return;
        }
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
                rc: None,
            },
            last_seen_ms: now,
            conn: connected::new_connection(&self.sgid, &a.gid, self.config.lan),
            want_rc: false,
            offered_max_frame: crate::pure::connect::MAX_CONNECTED_FRAME,
        };
        // A table that filled since the check gives the entry back,
        // dropped here (process context, outside the lock).
        let inserted = self.peers.lock().insert(entry);
        if inserted.is_ok() {
            self.count(Stat::NsAdded);
            // A newcomer learns of this node now, not at the next period.
            self.announce_soon.store(true, Ordering::Relaxed);
        } else {
            self.count(Stat::NsTableFull);
        }
    }

    pub(super) fn age_peers(&self, now: u64) {
        let aged = self.remove_peers(|e| now > e.last_seen_ms + PEER_LIFETIME_MS);
        self.add(Stat::NsAged, aged);
    }

    /// Retires the peers `pred` picks; returns how many.
    pub(super) fn remove_peers(&self, pred: impl Fn(&PeerEntry) -> bool) -> u64 {
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
    pub(super) fn release_retired(&self) {
        loop {
            let completed = self.sends_completed();
            // Not in the loop's head: the guard would live through the body.
            let Some(released) = self.peers.lock().take_released(&completed) else {
                break;
            };
            if let Some(link) = released.peer.rc {
                self.retire_link(link);
            }
        }
    }

    pub(super) fn lid_in_use(&self, lid: u16) -> bool {
        self.peers.lock().iter().any(|e| e.peer.lid == lid)
    }

    /// Whether a member of the LAN holds `lid` (this LAN port's LID, not
    /// yet announced): asks the members to announce themselves with a
    /// probe and listens for [`PROBE_MS`]. Before the netdev is
    /// registered only: the CQ is polled here, not by NAPI. Announcements
    /// heard are not kept; the name service hears them again.
    pub(super) fn lid_taken(&self, lid: u16) -> bool {
        self.send_to_group(false, true);
        let deadline = now_ms() + PROBE_MS;
        let mut batch: [WorkCompletion<'_>; 16] = Default::default();
        let mut taken = false;
        while !taken && now_ms() < deadline {
            let got = self.qp.poll(&mut batch);
            for wc in batch.iter_mut().take(got) {
                taken |= self.probe_completion(core::mem::take(wc), lid);
            }
            if got == 0 {
                sleep_ms(10);
            }
        }
        taken
    }

    /// One completion while probing: whether it is an announcement of
    /// another node holding `lid` in this LAN.
    pub(super) fn probe_completion(&self, wc: WorkCompletion<'_>, lid: u16) -> bool {
        let received = match self.qp.complete(wc) {
            Completion::Received(received) => received,
            Completion::BufferSent(_) => {
                self.sends_completed.fetch_add(1, Ordering::AcqRel);
                self.announce_busy.store(false, Ordering::Release);
                self.sq_free.fetch_add(1, Ordering::AcqRel);
                return false;
            }
            Completion::SkbSent | Completion::Foreign => return false,
        };
        let mut taken = false;
        if received.ok() {
            self.count(Stat::RxDatagrams);
            self.count(Stat::RxDmaSyncs);
            if let Some((_, payload)) = crate::pure::split_checked(received.bytes(), GRH_LEN) {
                if let Ok(Datagram::Announcement(a)) = lan::classify_datagram(payload) {
                    taken = !a.leaving
                        && !a.probe
                        && a.lan == self.config.lan
                        && a.lid == lid
                        && a.gid != self.sgid;
                }
            }
        }
        if self.repost(received).is_err() {
            self.count(Stat::RxErrors);
        }
        taken
    }

    /// A child's carrier follows the port from here (the port's events
    /// reach the module's netdevs only).
    pub(super) fn follow_port(&self) {
        if self.parent_ifindex == 0 {
            return;
        }
        // Carrier changes need no sleep: a read-side section will do.
        let rcu = RcuReadGuard::new();
        let Some(dev) = self.qp.cq().handler().netdev.get(&rcu) else {
            return;
        };
        let active = self.port_up.load(Ordering::Relaxed);
        if active != dev.as_netdev().has_carrier() {
            self.carrier_changed(dev, active);
        }
    }

    /// Moves to the LID the conflict rule gave, once RTNL is free.
    pub(super) fn settle_lid(&self) {
        let wanted = self.lid_wanted.load(Ordering::Relaxed);
        if wanted == 0 {
            return;
        }
        // Never wait for RTNL here: `ndo_stop` holds it while it cancels
        // this work.
        let Some(rtnl) = rtnl_try_lock() else {
            return;
        };
        let Some(dev) = self.qp.cq().handler().netdev.get_rtnl(&rtnl) else {
            return;
        };
        let mac = lan::mac_for(self.config.vendor, self.config.lan, wanted);
        if dev.set_mac_locked(&rtnl, &mac).is_ok() {
            self.count(Stat::NsLidChanges);
        }
        drop(rtnl);
        self.lid_wanted.store(0, Ordering::Relaxed);
    }
}
