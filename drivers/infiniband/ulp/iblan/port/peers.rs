// SPDX-License-Identifier: GPL-2.0

//! The peers a LAN port knows: fixed slots named by index, and the peers
//! that left, kept until the sends posted to them have completed.

use super::connected::RcLink;
use super::*;
use crate::pure::connect::Connection;

/// The QPs a LAN port sends on: the main QP (announcements) first, then
/// each transmit queue's.
pub(super) const QPS: usize = 1 + MAX_TX_QUEUES;

/// A count per QP, in the order of [`QPS`]. Sends complete in order on one
/// QP, not across QPs, so posts are counted per QP.
pub(super) type Posts = [u64; QPS];

/// A known node of the LAN.
pub(super) struct Peer {
    pub(super) gid: [u8; 16],
    pub(super) guid: u64,
    pub(super) lid: u16,
    pub(super) qpn: u32,
    pub(super) qkey: u32,
    pub(super) ah: Ah,
    /// The RC connection to it (connected mode), once one is made. It
    /// leaves with the peer, and is destroyed in process context (see
    /// `connected`).
    pub(super) rc: Option<Arc<RcLink>>,
}

pub(super) struct PeerEntry {
    pub(super) peer: Peer,
    pub(super) last_seen_ms: u64,
    /// Connected mode's handshake with it.
    pub(super) conn: Connection,
    /// The transmit path asked for a connection.
    pub(super) want_rc: bool,
    /// The largest frame it takes, from its last OFFER.
    pub(super) offered_max_frame: u32,
}

/// A peer that left the table, kept until the sends posted before it left
/// have completed: a device may read the AH until then. Its AH is then
/// destroyed by the name service, in process context, never in the
/// completion path: some providers (rxe) take their AH lock without
/// disabling bottom halves, so an AH must come and go in one context.
pub(super) struct Retired {
    /// Held, never read: dropping it destroys the AH (and the connection).
    pub(super) peer: Peer,
    /// Each QP's post count when the peer left.
    pub(super) posted_before: Posts,
}

/// Where one frame goes.
#[derive(Clone, Copy)]
pub(super) enum Targets {
    /// The peer in this slot.
    One(usize),
    /// Every peer: broadcast, multicast or an unknown LID.
    All,
}

/// The known nodes, in fixed slots: a slot's index names its peer while
/// it is there (reassemblies are keyed by it). Every send is posted under
/// this table's lock, so `posted` orders posts against peers leaving.
pub(super) struct PeerTable {
    /// `MAX_PEERS` slots, on the heap: the table is too big for a stack.
    pub(super) slots: KVec<Option<PeerEntry>>,
    /// `MAX_RETIRED` slots of peers that left, waiting for their sends.
    pub(super) retired: KVec<Option<Retired>>,
    /// Sends posted on each QP since it was created.
    pub(super) posted: Posts,
}

impl PeerTable {
    pub(super) fn new() -> Result<Self> {
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
            posted: [0; QPS],
        })
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &PeerEntry> {
        self.slots.iter().flatten()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut PeerEntry> {
        self.slots.iter_mut().flatten()
    }

    pub(super) fn len(&self) -> usize {
        self.iter().count()
    }

    /// The slot of the first entry `pred` accepts.
    pub(super) fn find(&self, pred: impl Fn(&PeerEntry) -> bool) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(&pred))
    }

    /// The peer whose GID is `gid`, now heard from: a node that sends
    /// stays in the table even when its announcements are lost (a
    /// congested wire drops datagrams, announcements among them). Its
    /// slot and LID.
    pub(super) fn heard_from(&mut self, gid: &[u8; 16], now: u64) -> Option<(usize, u16)> {
        let at = self.find(|e| &e.peer.gid == gid)?;
        let entry = self.get_mut(at)?;
        entry.last_seen_ms = now;
        Some((at, entry.peer.lid))
    }

    pub(super) fn get_mut(&mut self, at: usize) -> Option<&mut PeerEntry> {
        self.slots.get_mut(at).and_then(Option::as_mut)
    }

    /// Moves the peer in slot `at` to the retired ones; false if there is
    /// no room there yet (the peer then stays until a later try).
    pub(super) fn retire(&mut self, at: usize) -> bool {
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
                    peer: entry.peer,
                    posted_before,
                });
                true
            }
            None => false,
        }
    }

    /// Takes one retired peer whose sends have all completed, on every
    /// QP, to be dropped outside the lock.
    pub(super) fn take_released(&mut self, completed: &Posts) -> Option<Retired> {
        let done = |r: &Retired| {
            r.posted_before
                .iter()
                .zip(completed)
                .all(|(before, done)| before <= done)
        };
        self.retired
            .iter_mut()
            .find(|r| r.as_ref().is_some_and(done))
            .and_then(Option::take)
    }

    /// Counts `count` sends posted on QP `qp` (in the order of [`QPS`]).
    pub(super) fn count_posts(&mut self, qp: usize, count: u64) {
        if let Some(posted) = self.posted.get_mut(qp) {
            *posted += count;
        }
    }

    /// Whether every slot holds a peer.
    pub(super) fn is_full(&self) -> bool {
        self.slots.iter().all(Option::is_some)
    }

    /// Adds `entry`; a full table gives it back.
    pub(super) fn insert(&mut self, entry: PeerEntry) -> core::result::Result<(), PeerEntry> {
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
    pub(super) fn targets(&self, lid: Option<u16>) -> (Targets, usize) {
        if let Some(at) = lid.and_then(|lid| self.find(|e| e.peer.lid == lid)) {
            return (Targets::One(at), 1);
        }
        (Targets::All, self.len())
    }

    /// The peers of `targets`.
    pub(super) fn selected(&self, targets: Targets) -> impl Iterator<Item = &Peer> {
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
