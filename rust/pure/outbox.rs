// SPDX-License-Identifier: GPL-2.0

//! The order in which a responder's answers to requests from the wire
//! leave (srnic's `outbox.rs` sends them): READ responses a burst at a
//! time, acknowledgements behind any response still going out, repeated
//! READs merged with what is still to send. Kept under the QP's lock.

use super::aeth::Syndrome;
use super::fifo::Fifo;
use super::headers::opcode::RC_ACKNOWLEDGE;
use super::psn::Psn;

/// READs and atomics a responder takes at once (`max_dest_rd_atomic`; the
/// device advertises it as `max_qp_rd_atom`). As many as rxe takes: small
/// READs on a wire whose queues stretch the round trip are bound by how
/// many are outstanding (2 B READs between two VMs: 16 moved 0.035 MiB/s,
/// 32 0.041, 64 0.048).
pub const MAX_READS: usize = 128;
/// Answers that may wait at once: each READ outstanding with the ACK that
/// may follow it, and a last slot kept for the NAK that ends the QP.
const SLOTS: usize = 2 * MAX_READS + 2;
/// Packets one run sends at most; the QP's own work sends the rest.
pub const BURST: u32 = 64;
/// Refused transmits in a row, with nothing sent in between, after which
/// the waiting answers are given up (the requester's timer then asks
/// again, or runs out of retries).
const MAX_REFUSALS: u32 = 500;

/// A READ response, from packet `next` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingRead {
    /// The key the request named, checked again for every piece.
    pub rkey: u32,
    /// Where the response's first byte is read from.
    pub va: u64,
    /// Bytes in the whole response.
    pub length: u32,
    /// The PSN of the response's first packet (the request's).
    pub psn: Psn,
    /// The MSN the response's AETHs carry.
    pub msn: u32,
    /// Payload bytes per packet, as when the request came.
    pub mtu: u32,
    /// Packets in the whole response.
    pub count: u32,
    /// The first packet not yet sent.
    pub next: u32,
}

impl PendingRead {
    /// Which packet of the response `psn` is, if it is one.
    fn packet_of(&self, psn: Psn) -> Option<u32> {
        let offset = u32::try_from(psn.distance_from(self.psn)).ok()?;
        (offset < self.count).then_some(offset)
    }
}

/// An answer without payload: an ACK or NAK, an atomic acknowledge, or the
/// empty READ response to an ATOMIC WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The BTH opcode of the answer.
    pub opcode: u8,
    /// The PSN it answers.
    pub psn: Psn,
    /// The AETH syndrome: ACK, RNR NAK or NAK and its code.
    pub syndrome: u8,
    /// The AETH's MSN.
    pub msn: u32,
    /// An atomic acknowledge's original value.
    pub original: Option<u64>,
}

impl Answer {
    /// An answer of `opcode` for `psn` with the AETH's `syndrome` and
    /// `msn`, and an atomic acknowledge's `original` value.
    pub fn new(opcode: u8, psn: Psn, syndrome: u8, msn: u32, original: Option<u64>) -> Self {
        Self {
            opcode,
            psn,
            syndrome,
            msn,
            original,
        }
    }

    /// A plain ACK, which a later one makes redundant.
    fn is_plain_ack(&self) -> bool {
        self.opcode == RC_ACKNOWLEDGE && Syndrome::decode(self.syndrome) == Some(Syndrome::Ack)
    }
}

/// One answer waiting to leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A READ response, sent in bursts.
    Read(PendingRead),
    /// An answer of one packet.
    Answer(Answer),
}

impl Entry {
    fn psn(&self) -> Psn {
        match self {
            Entry::Read(read) => read.psn,
            Entry::Answer(answer) => answer.psn,
        }
    }
}

/// What one CPU sends of the oldest entry, outside the QP lock.
#[derive(Clone, Copy, Debug)]
pub struct Burst {
    /// The entry the burst sends (a copy: the QP lock is not held).
    pub entry: Entry,
    /// For a READ response: the packet after the last one to send.
    pub until: u32,
    generation: u32,
}

/// The answers waiting to leave, oldest first.
pub struct Outbox {
    entries: Fifo<Entry, SLOTS>,
    /// A CPU is sending a burst of the oldest entry.
    sending: bool,
    /// The NAK that ended the QP waits last: what is queued still goes
    /// out, in the error state, and nothing more is taken.
    closing: bool,
    /// Changes whenever entries are dropped, so that a burst sent for an
    /// entry that is gone does not advance the one now in its place.
    generation: u32,
    /// Transmits refused in a row.
    refusals: u32,
}

impl Default for Outbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Outbox {
    /// An outbox with nothing waiting.
    pub const fn new() -> Self {
        Self {
            entries: Fifo::new(),
            sending: false,
            closing: false,
            generation: 0,
            refusals: 0,
        }
    }

    /// Answers waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no answer waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether nothing waits and nobody sends: an answer may leave at once.
    pub fn is_idle(&self) -> bool {
        self.entries.is_empty() && !self.sending
    }

    /// Whether the NAK that ended the QP still waits to leave.
    pub fn is_closing(&self) -> bool {
        self.closing
    }

    /// Drops everything that waits (the QP left the states that answer).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.generation = self.generation.wrapping_add(1);
        self.refusals = 0;
        self.closing = false;
    }

    /// Appends `entry` unless only the slot kept for the last NAK is left.
    fn push(&mut self, entry: Entry) -> bool {
        if self.closing || self.entries.len() + 1 >= SLOTS {
            return false;
        }
        self.entries.push(entry).is_ok()
    }

    /// Queues the response to a new READ; whether there was room.
    pub fn push_read(&mut self, read: PendingRead) -> bool {
        self.push(Entry::Read(read))
    }

    /// Queues the NAK that ended the QP behind what waits (whose answers
    /// come first: the NAK names the request that broke the rules, not one
    /// before it); false if nothing waits and it may leave at once.
    pub fn push_final(&mut self, answer: Answer) -> bool {
        if self.is_idle() {
            return false;
        }
        if self.entries.push(Entry::Answer(answer)).is_err() {
            // Cannot happen (a slot is kept for it); the NAK matters more
            // than the last answer.
            self.entries.truncate(self.entries.len().saturating_sub(1));
            let _ = self.entries.push(Entry::Answer(answer));
        }
        self.closing = true;
        true
    }

    /// Takes a READ the requester sent again from `read.psn` on (it lost
    /// part of the response); whether `read` itself was queued.
    ///
    /// If a queued response holds that PSN, it goes on from there: nothing
    /// if that packet is still to go, else it is sent again from there
    /// (and a burst sending it now no longer counts). Either way what was
    /// queued from `read.psn` on is dropped, because the requester sends
    /// those requests again too. A response no longer queued goes last.
    /// Once the last NAK waits, nothing changes (the QP answers no more
    /// requests; truncating would drop the NAK).
    pub fn push_repeated_read(&mut self, read: PendingRead) -> bool {
        if self.closing {
            return false;
        }
        let holder = self
            .entries
            .iter()
            .enumerate()
            .find_map(|(at, entry)| match entry {
                Entry::Read(queued) => queued.packet_of(read.psn).map(|packet| (at, packet)),
                Entry::Answer(_) => None,
            });
        if let Some((at, packet)) = holder {
            let keep = at + 1;
            if keep < self.entries.len() {
                self.entries.truncate(keep);
                self.generation = self.generation.wrapping_add(1);
            }
            let rewind = match self.entries.iter().nth(at) {
                Some(Entry::Read(queued)) => packet < queued.next,
                _ => false,
            };
            if rewind {
                // A burst in flight reports against the old position.
                self.generation = self.generation.wrapping_add(1);
                if let Some(Entry::Read(queued)) = self.entries.get_mut(at) {
                    queued.next = packet;
                }
            }
            return false;
        }
        let keep = self
            .entries
            .iter()
            .position(|entry| !entry.psn().is_before(read.psn))
            .unwrap_or(self.entries.len());
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.generation = self.generation.wrapping_add(1);
        }
        self.push_read(read)
    }

    /// Queues `answer` behind what waits; whether there was room. A plain
    /// ACK replaces one waiting last (it acknowledges everything before).
    pub fn push_answer(&mut self, answer: Answer) -> bool {
        // Not the one a burst is sending: it leaves the queue once sent.
        let in_flight = self.sending && self.entries.len() == 1;
        if let Some(Entry::Answer(last)) = self.entries.back_mut().filter(|_| !in_flight) {
            if last.is_plain_ack() && answer.is_plain_ack() {
                *last = answer;
                return true;
            }
        }
        self.push(Entry::Answer(answer))
    }

    /// The next burst of at most `budget` packets, unless nothing waits or
    /// another CPU is sending. After a refused transmit the burst is one
    /// packet, a probe: the sender hands the stack a burst as one list,
    /// and rebuilding a whole list (a pass over each payload byte) only to
    /// have it refused again would cost the most when the queue is slowest.
    pub fn take_burst(&mut self, budget: u32) -> Option<Burst> {
        if self.sending {
            return None;
        }
        let budget = if self.refusals > 0 { 1 } else { budget };
        let entry = *self.entries.front()?;
        let until = match entry {
            Entry::Read(read) => read.count.min(read.next.saturating_add(budget)),
            Entry::Answer(_) => 1,
        };
        self.sending = true;
        Some(Burst {
            entry,
            until,
            generation: self.generation,
        })
    }

    /// `sent` packets of `burst` went out; `refused` if the next one did
    /// not. Whether the waiting answers were given up.
    pub fn finish_burst(&mut self, burst: &Burst, sent: u32, refused: bool) -> bool {
        self.sending = false;
        if burst.generation == self.generation {
            let done = match self.entries.front_mut() {
                Some(Entry::Read(read)) => {
                    read.next = read.next.saturating_add(sent).min(read.count);
                    read.next == read.count
                }
                Some(Entry::Answer(_)) => sent > 0,
                None => false,
            };
            if done {
                self.entries.pop();
            }
        }
        if self.entries.is_empty() {
            // The last NAK, if one waited, is out.
            self.closing = false;
        }
        if sent > 0 || !refused {
            self.refusals = 0;
        }
        if !refused || sent > 0 {
            return false;
        }
        self.refusals += 1;
        if self.refusals < MAX_REFUSALS {
            return false;
        }
        self.clear();
        true
    }
}
