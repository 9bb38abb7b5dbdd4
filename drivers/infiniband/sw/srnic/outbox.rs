// SPDX-License-Identifier: GPL-2.0

//! The responder's answers to requests from the wire, in the order they
//! must leave. A READ response goes out a burst at a time: the first from
//! the softirq that took the request, the rest from the QP's own work, so
//! a 4 MiB READ neither holds a softirq for thousands of packets nor
//! overruns the device queue. A transmit the queue refuses is tried again
//! a moment later rather than left to the requester's timeout. ACKs and
//! NAKs that come while a response is still going out wait behind it: an
//! acknowledgement past a READ's PSNs would tell the requester that its
//! response was lost.
//!
//! The entries live in the QP's state, under its lock; one CPU at a time
//! sends (`sending`), others only add entries.

use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::verbs::QpState;
use crate::kapi::rdma::Qp;
use crate::pure::aeth::Syndrome;
use crate::pure::fifo::Fifo;
use crate::pure::psn::Psn;
use crate::qp::SrnicQp;
use crate::responder;
use crate::transport::{Hop, Packet};
use crate::wire;

/// Answers that may wait at once. The requester has at most
/// `max_dest_rd_atomic` READs outstanding, and only responses longer than
/// a burst, or behind one, wait here; one more is dropped, and the
/// requester asks for it again.
const SLOTS: usize = 32;
/// Packets one run sends at most; the QP's own work sends the rest.
const BURST: u32 = 64;
/// Refused transmits in a row after which the waiting answers are given up
/// (the requester's timer then asks again, or runs out of retries).
const MAX_REFUSALS: u32 = 500;
/// How long to wait after a refused transmit, in milliseconds.
const RETRY_MS: u32 = 1;

const RC_ACKNOWLEDGE: u8 = 0x11;

/// A READ response, from packet `next` on.
#[derive(Clone, Copy)]
pub(crate) struct PendingRead {
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) length: u32,
    pub(crate) psn: Psn,
    pub(crate) msn: u32,
    /// Packets in the whole response.
    pub(crate) count: u32,
    /// The first packet not yet sent.
    pub(crate) next: u32,
}

impl PendingRead {
    /// Whether the packets still to send include `psn`.
    fn will_send(&self, psn: Psn) -> bool {
        let offset = psn.distance_from(self.psn);
        offset >= 0 && (offset as u32) >= self.next && (offset as u32) < self.count
    }
}

/// An answer without payload: an ACK or NAK, an atomic acknowledge, or the
/// empty READ response to an ATOMIC WRITE.
#[derive(Clone, Copy)]
pub(crate) struct Answer {
    opcode: u8,
    psn: Psn,
    syndrome: u8,
    msn: u32,
    original: Option<u64>,
}

impl Answer {
    /// `packet` as an answer, if it has no payload.
    pub(crate) fn of(packet: &Packet<'_>) -> Option<Self> {
        if packet.payload.is_some() {
            return None;
        }
        let aeth = packet.hdr.aeth?;
        Some(Self {
            opcode: packet.hdr.bth.opcode,
            psn: packet.psn(),
            syndrome: aeth.syndrome,
            msn: aeth.msn,
            original: packet.hdr.atomic_ack,
        })
    }

    fn packet<'a>(&self, dest_qp: u32) -> Option<Packet<'a>> {
        let mut packet = Packet::new(self.opcode, dest_qp, self.psn)?;
        packet = packet.with_aeth(self.syndrome, self.msn);
        packet.hdr.atomic_ack = self.original;
        Some(packet)
    }

    /// A plain ACK, which a later one makes redundant.
    fn is_plain_ack(&self) -> bool {
        self.opcode == RC_ACKNOWLEDGE && Syndrome::decode(self.syndrome) == Some(Syndrome::Ack)
    }
}

#[derive(Clone, Copy)]
enum Entry {
    Read(PendingRead),
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
#[derive(Clone, Copy)]
struct Burst {
    entry: Entry,
    /// For a READ response: the packet after the last one to send.
    until: u32,
    generation: u32,
}

/// The answers waiting to leave, oldest first.
pub(crate) struct Outbox {
    entries: Fifo<Entry, SLOTS>,
    /// A CPU is sending a burst of the oldest entry.
    sending: bool,
    /// Changes whenever entries are dropped, so that a burst sent for an
    /// entry that is gone does not advance the one now in its place.
    generation: u32,
    /// Transmits refused in a row.
    refusals: u32,
}

impl Outbox {
    pub(crate) const fn new() -> Self {
        Self {
            entries: Fifo::new(),
            sending: false,
            generation: 0,
            refusals: 0,
        }
    }

    /// Whether nothing waits and nobody sends: an answer may leave at once.
    pub(crate) fn is_idle(&self) -> bool {
        self.entries.is_empty() && !self.sending
    }

    /// Drops everything that waits (the QP left the states that answer).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.generation = self.generation.wrapping_add(1);
        self.refusals = 0;
    }

    /// Queues the response to a new READ; whether there was room.
    pub(crate) fn push_read(&mut self, read: PendingRead) -> bool {
        self.entries.push(Entry::Read(read)).is_ok()
    }

    /// Queues the response to a READ the requester sent again from `psn`
    /// on (it lost some of the first response): nothing if the packets
    /// still to send include it. Otherwise what was queued from `psn` on
    /// is dropped, because the requester sends those requests again too,
    /// and the response goes last. Whether it was queued.
    pub(crate) fn push_repeated_read(&mut self, read: PendingRead) -> bool {
        let will_send = self.entries.iter().any(|entry| match entry {
            Entry::Read(queued) => queued.will_send(read.psn),
            Entry::Answer(_) => false,
        });
        if will_send {
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
    pub(crate) fn push_answer(&mut self, answer: Answer) -> bool {
        // Not the one a burst is sending: it leaves the queue once sent.
        let in_flight = self.sending && self.entries.len() == 1;
        if let Some(Entry::Answer(last)) = self.entries.back_mut().filter(|_| !in_flight) {
            if last.is_plain_ack() && answer.is_plain_ack() {
                *last = answer;
                return true;
            }
        }
        self.entries.push(Entry::Answer(answer)).is_ok()
    }

    /// The next burst of at most `budget` packets, unless nothing waits or
    /// another CPU is sending.
    fn take_burst(&mut self, budget: u32) -> Option<Burst> {
        if self.sending {
            return None;
        }
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
    fn finish_burst(&mut self, burst: &Burst, sent: u32, refused: bool) -> bool {
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
        if !refused {
            self.refusals = 0;
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

/// Sends what waits in `qp`'s outbox, a budget's worth; the QP's own work
/// goes on with the rest, at once, or a moment later if the device queue
/// refused a packet.
pub(crate) fn run(qp: &Qp<SrnicDevice>) {
    let this: &SrnicQp = qp;
    let dev = qp.device();
    let guard = RcuReadGuard::new();
    let sport = wire::source_port(qp.qp_num(), qp.qp_num());
    let mut budget = BURST;
    loop {
        let (burst, ip, dest_qp, mtu) = {
            let mut state = this.state.lock();
            if !matches!(
                state.attrs.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd
            ) {
                state.responder.outbox.clear();
                return;
            }
            let Some(burst) = state.responder.outbox.take_burst(budget) else {
                return;
            };
            let (ip, _) = state.path();
            (burst, ip, state.attrs.dest_qp_num, state.segment_bytes())
        };
        let mut sent = 0;
        let mut refused = false;
        let mut gone = false;
        match burst.entry {
            Entry::Read(read) => {
                match responder::read_response(qp, &guard, &read, mtu, dest_qp, burst.until) {
                    Some(mut response) => {
                        response.set_path(ip, Hop::Wire);
                        for packet in response.packets() {
                            if wire::transmit(dev, &guard, &packet, sport).is_err() {
                                refused = true;
                                break;
                            }
                            sent += 1;
                        }
                    }
                    // The region went away: nothing left to answer with.
                    None => gone = true,
                }
            }
            Entry::Answer(answer) => {
                if let Some(mut packet) = answer.packet(dest_qp) {
                    packet.ip = Some(ip);
                    if wire::transmit(dev, &guard, &packet, sport).is_err() {
                        refused = true;
                    } else {
                        sent = 1;
                    }
                } else {
                    gone = true;
                }
            }
        }
        if sent == 0 && !refused {
            // Nothing could be made of the entry.
            gone = true;
        }
        let given_up = {
            let mut state = this.state.lock();
            let outbox = &mut state.responder.outbox;
            if gone {
                // Counted as sent: the entry leaves the queue.
                let until = match burst.entry {
                    Entry::Read(read) => read.count - read.next.min(read.count),
                    Entry::Answer(_) => 1,
                };
                outbox.finish_burst(&burst, until, false);
                false
            } else {
                outbox.finish_burst(&burst, sent, refused)
            }
        };
        if gone || given_up {
            dev.counters.inc(Counter::AnswersDropped);
        }
        if refused {
            dev.counters.inc(Counter::TransmitRetries);
            if !given_up {
                qp.run_work_after(RETRY_MS);
            }
            return;
        }
        budget = budget.saturating_sub(sent);
        if budget == 0 {
            qp.run_work_soon();
            return;
        }
    }
}
