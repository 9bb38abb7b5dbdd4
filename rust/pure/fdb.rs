// SPDX-License-Identifier: GPL-2.0

//! iblan's forwarding table: which node of the LAN a foreign MAC address
//! sits behind, as an Ethernet switch learns it.
//!
//! A bridge, macvlan or bond on a node sends frames whose source MAC is
//! not an iblan address, so its LID cannot be read from the address. The
//! receiver learns the sender's LID for that source MAC and later sends
//! frames to it to that node alone; until then, and after the entry ages
//! out, such frames go to every node (flooding, as a switch does).
//!
//! The table is set-associative over a caller-owned slice (the kernel
//! allocates it): a MAC hashes to one bucket of [`WAYS`] slots, so learning
//! and lookup cost a bounded few compares, and a full bucket replaces its
//! least recently seen entry. Every MAC comes from the wire; none is
//! trusted beyond being six bytes.

use super::lan::{LID_MAX, LID_MIN};
use core::ops::{Deref, DerefMut};

/// Slots per bucket.
pub const WAYS: usize = 4;
/// The default number of slots (a multiple of [`WAYS`]).
pub const DEFAULT_SLOTS: usize = 256;
/// How long an entry lives without a frame from its MAC: a Linux bridge's
/// default ageing time.
pub const AGEING_MS: u64 = 300_000;

/// One learned address. A LID of 0 (never a unicast LID) marks a free slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    mac: [u8; 6],
    lid: u16,
    seen_ms: u64,
}

impl Slot {
    /// A free slot.
    pub const FREE: Slot = Slot {
        mac: [0; 6],
        lid: 0,
        seen_ms: 0,
    };

    fn is_free(&self) -> bool {
        self.lid == 0
    }

    fn live(&self, now_ms: u64, ageing_ms: u64) -> bool {
        !self.is_free() && now_ms.saturating_sub(self.seen_ms) < ageing_ms
    }
}

/// What [`Fdb::learn`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// The MAC was not known (or had aged out): a new entry.
    New,
    /// Known behind the same node: its age restarts.
    Refreshed,
    /// Known behind another node: it moved.
    Moved,
    /// New, in place of the bucket's least recently seen entry.
    Replaced,
    /// Not a MAC to learn (multicast or all zero) or not a unicast LID.
    Ignored,
}

/// A learned entry as [`Fdb::entries`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The foreign MAC.
    pub mac: [u8; 6],
    /// The LID of the node it sits behind.
    pub lid: u16,
    /// Milliseconds since a frame from it was last seen.
    pub age_ms: u64,
}

/// A forwarding table over `slots`.
pub struct Fdb<S> {
    slots: S,
    ageing_ms: u64,
}

/// The bucket of `mac` among `buckets` (FNV-1a over the six bytes).
fn bucket_of(mac: &[u8; 6], buckets: usize) -> usize {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in mac {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash as usize) % buckets.max(1)
}

impl<S: Deref<Target = [Slot]>> Fdb<S> {
    /// A table over `slots` (a multiple of [`WAYS`] long; the remainder is
    /// left unused), whose entries age out after `ageing_ms`.
    pub fn new(slots: S, ageing_ms: u64) -> Self {
        Self { slots, ageing_ms }
    }

    fn buckets(&self) -> usize {
        self.slots.deref().len() / WAYS
    }

    fn bucket(&self, mac: &[u8; 6]) -> &[Slot] {
        let start = bucket_of(mac, self.buckets()) * WAYS;
        self.slots
            .deref()
            .get(start..start + WAYS)
            .unwrap_or_default()
    }

    /// The LID of the node `mac` was last seen behind, if that is less
    /// than the ageing time ago.
    pub fn lookup(&self, mac: &[u8; 6], now_ms: u64) -> Option<u16> {
        self.bucket(mac)
            .iter()
            .find(|s| s.live(now_ms, self.ageing_ms) && s.mac == *mac)
            .map(|s| s.lid)
    }

    /// The live entries, for debugfs.
    pub fn entries(&self, now_ms: u64) -> impl Iterator<Item = Entry> + '_ {
        let ageing_ms = self.ageing_ms;
        self.slots
            .deref()
            .iter()
            .filter(move |s| s.live(now_ms, ageing_ms))
            .map(move |s| Entry {
                mac: s.mac,
                lid: s.lid,
                age_ms: now_ms.saturating_sub(s.seen_ms),
            })
    }

    /// How many entries are live.
    pub fn len(&self, now_ms: u64) -> usize {
        self.entries(now_ms).count()
    }

    /// Whether no entry is live.
    pub fn is_empty(&self, now_ms: u64) -> bool {
        self.len(now_ms) == 0
    }
}

impl<S: DerefMut<Target = [Slot]>> Fdb<S> {
    fn bucket_mut(&mut self, mac: &[u8; 6]) -> &mut [Slot] {
        let start = bucket_of(mac, self.buckets()) * WAYS;
        self.slots
            .deref_mut()
            .get_mut(start..start + WAYS)
            .unwrap_or_default()
    }

    /// Records that a frame from `mac` came from the node `lid` at
    /// `now_ms`. Only unicast MACs and unicast LIDs are learned.
    pub fn learn(&mut self, mac: &[u8; 6], lid: u16, now_ms: u64) -> Learned {
        if mac[0] & 1 != 0 || *mac == [0; 6] || !(LID_MIN..=LID_MAX).contains(&lid) {
            return Learned::Ignored;
        }
        let ageing_ms = self.ageing_ms;
        let bucket = self.bucket_mut(mac);
        if let Some(slot) = bucket
            .iter_mut()
            .find(|s| s.live(now_ms, ageing_ms) && s.mac == *mac)
        {
            let moved = slot.lid != lid;
            slot.lid = lid;
            slot.seen_ms = now_ms;
            return if moved {
                Learned::Moved
            } else {
                Learned::Refreshed
            };
        }
        let new = Slot {
            mac: *mac,
            lid,
            seen_ms: now_ms,
        };
        if let Some(slot) = bucket.iter_mut().find(|s| !s.live(now_ms, ageing_ms)) {
            *slot = new;
            return Learned::New;
        }
        match bucket.iter_mut().min_by_key(|s| s.seen_ms) {
            Some(oldest) => {
                *oldest = new;
                Learned::Replaced
            }
            // A table too short for one bucket learns nothing.
            None => Learned::Ignored,
        }
    }

    /// Forgets every MAC behind `lid` (the node left or changed its LID);
    /// returns how many.
    pub fn forget_lid(&mut self, lid: u16) -> usize {
        let mut forgotten = 0;
        for slot in self.slots.deref_mut() {
            if !slot.is_free() && slot.lid == lid {
                *slot = Slot::FREE;
                forgotten += 1;
            }
        }
        forgotten
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        for slot in self.slots.deref_mut() {
            *slot = Slot::FREE;
        }
    }
}
