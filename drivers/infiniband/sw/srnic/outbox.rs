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
//! Between QPs of this node a READ response is handed over piece by
//! piece within the requester's run, as far as its byte budget goes; the
//! rest waits here too, and the QP's work hands it to the requester's
//! completer a bounded number of pieces per run, the answers that came
//! behind it after it.
//!
//! The queue and its rules are `pure::outbox`'s; it lives in the QP's
//! state, under its lock. One CPU at a time sends, others only add
//! entries.

use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::verbs::QpState;
use crate::kapi::rdma::Qp;
use crate::pure::aeth::{NakCode, Syndrome};
use crate::pure::grh::IpHeader;
use crate::pure::headers::opcode::RC_ACKNOWLEDGE;
use crate::pure::outbox::{Answer, Burst, Entry, PendingRead, BURST};
use crate::qp::SrnicQp;
use crate::responder;
use crate::transport::{Hop, Packet};
use crate::wire;

/// How long to wait after a refused transmit, in milliseconds.
const RETRY_MS: u32 = 1;

/// Pieces of a READ response to a requester on this node one run hands
/// over at most: as many bytes as a requester's run moves.
const LOCAL_BURST: u32 =
    (crate::requester::RUN_BUDGET.bytes / crate::qp::LOCAL_SEGMENT_BYTES as usize) as u32;

/// `packet` as an answer, if it has no payload.
pub(crate) fn answer_of(packet: &Packet<'_>) -> Option<Answer> {
    if packet.payload.is_some() {
        return None;
    }
    let aeth = packet.hdr.aeth?;
    Some(Answer::new(
        packet.hdr.bth.opcode,
        packet.psn(),
        aeth.syndrome,
        aeth.msn,
        packet.hdr.atomic_ack,
    ))
}

fn answer_packet<'a>(answer: &Answer, dest_qp: u32) -> Option<Packet<'a>> {
    let mut packet = Packet::new(answer.opcode, dest_qp, answer.psn)?;
    packet = packet.with_aeth(answer.syndrome, answer.msn);
    packet.hdr.atomic_ack = answer.original;
    Some(packet)
}

/// A burst taken from the outbox, and the path it leaves by.
struct Departure {
    burst: Burst,
    ip: IpHeader,
    hop: Hop,
    dest_qp: u32,
}

impl Departure {
    /// Whether the burst goes to a QP of this node rather than the wire.
    fn local(&self) -> bool {
        self.hop != Hop::Wire
    }
}

/// What became of a burst.
#[derive(Default)]
struct Outcome {
    /// Packets sent (or handed to a QP of this node).
    sent: u32,
    /// The device queue refused a packet: try again a moment later.
    refused: bool,
    /// Nothing more can be made of the entry: it leaves the outbox.
    gone: bool,
}

/// Sends what waits in `qp`'s outbox, a budget's worth; the QP's own work
/// goes on with the rest, at once, or a moment later if the device queue
/// refused a packet.
pub(crate) fn run(qp: &Qp<SrnicDevice>) {
    let guard = RcuReadGuard::new();
    let sport = wire::source_port(qp.qp_num(), qp.qp_num());
    let mut budget = BURST;
    // One route lookup for all the bursts of this run.
    let this: &SrnicQp = qp;
    let mut sender = wire::Sender::new(qp.device()).through(this.egress());
    while let Some(departure) = take_burst(this, &mut budget) {
        let outcome = send_burst(qp, &guard, &mut sender, sport, &departure);
        if !settle(qp, &departure.burst, &outcome) {
            return;
        }
        budget = budget.saturating_sub(outcome.sent);
        if budget == 0 {
            qp.run_work_soon();
            return;
        }
    }
}

/// Takes the next burst of at most `budget` packets (fewer between QPs of
/// this node, whose pieces are 64 KiB), or empties the outbox of a QP
/// that no longer answers.
fn take_burst(this: &SrnicQp, budget: &mut u32) -> Option<Departure> {
    let mut state = this.state.lock();
    let answering = match state.attrs.state {
        QpState::Rtr | QpState::Rts | QpState::Sqd => true,
        // The NAK that ended the QP, and what came before it.
        QpState::Error => state.responder.outbox().is_some_and(|o| o.is_closing()),
        _ => false,
    };
    if !answering {
        if let Some(outbox) = state.responder.outbox() {
            outbox.clear();
        }
        return None;
    }
    let (ip, hop) = state.path();
    if hop != Hop::Wire {
        *budget = (*budget).min(LOCAL_BURST);
    }
    let burst = state.responder.outbox()?.take_burst(*budget)?;
    Some(Departure {
        burst,
        ip,
        hop,
        dest_qp: state.attrs.dest_qp_num,
    })
}

/// Sends one burst, outside the QP lock.
fn send_burst(
    qp: &Qp<SrnicDevice>,
    guard: &RcuReadGuard,
    sender: &mut wire::Sender<'_>,
    sport: u16,
    departure: &Departure,
) -> Outcome {
    let sent_before = sender.sent();
    if !departure.local() {
        sender.reserve_for(match departure.burst.entry {
            Entry::Read(read) => departure.burst.until.saturating_sub(read.next),
            Entry::Answer(_) => 1,
        });
    }
    let mut outcome = match departure.burst.entry {
        Entry::Read(read) => send_read_burst(qp, guard, sender, sport, departure, &read),
        Entry::Answer(answer) => send_answer(qp, guard, sender, sport, departure, &answer),
    };
    // What was made before a fault still goes (after a refusal, the list
    // is gone already and this sends nothing).
    if sender.flush().is_err() {
        outcome.refused = true;
    }
    if !departure.local() {
        outcome.sent = sender.sent().saturating_sub(sent_before);
    }
    if outcome.sent == 0 && !outcome.refused {
        // Nothing could be made of the entry.
        outcome.gone = true;
    }
    if outcome.gone {
        outcome.refused = false;
    }
    outcome
}

/// Sends packets `read.next..until` of a READ response. Between QPs of
/// this node `Outcome::sent` counts the pieces handed over; on the wire
/// the caller counts what the sender sent.
fn send_read_burst(
    qp: &Qp<SrnicDevice>,
    guard: &RcuReadGuard,
    sender: &mut wire::Sender<'_>,
    sport: u16,
    departure: &Departure,
    read: &PendingRead,
) -> Outcome {
    let mut outcome = Outcome::default();
    let dev = qp.device();
    let (ip, hop) = (departure.ip, departure.hop);
    let until = departure.burst.until;
    match responder::read_response(qp, guard, read, departure.dest_qp, until) {
        Some(mut response) if departure.local() => {
            response.set_path(ip, hop);
            for packet in response.packets() {
                // A piece the completer refuses (its QP left RTS, say):
                // the rest would be refused too.
                if !crate::transport::answer_later(dev, guard, hop, packet) {
                    outcome.gone = true;
                    break;
                }
                outcome.sent = outcome.sent.saturating_add(1);
            }
        }
        Some(mut response) => {
            response.set_path(ip, Hop::Wire);
            for packet in response.packets() {
                match sender.send(guard, &packet, sport) {
                    Ok(()) => {}
                    // The region's memory cannot be read: no retry would
                    // do better.
                    Err(wire::SendError::Source) => {
                        outcome.gone = true;
                        break;
                    }
                    // The QP's work faults the page in before it sends the
                    // rest.
                    Err(wire::SendError::Absent(fault)) => {
                        let this: &crate::qp::SrnicQp = qp;
                        this.want_fault(qp, fault);
                        outcome.refused = true;
                        break;
                    }
                    Err(_) => {
                        outcome.refused = true;
                        break;
                    }
                }
            }
        }
        // The region went away: nothing left to answer with. A requester
        // on this node has no timer to ask again (its answers come while
        // it sends): it hears why, as if the region had been gone when it
        // asked.
        None => {
            if departure.local() {
                let nak = Answer::new(
                    RC_ACKNOWLEDGE,
                    read.psn.add(read.next),
                    Syndrome::Nak(NakCode::RemoteAccess).encode(),
                    read.msn,
                    None,
                );
                if let Some(mut nak) = answer_packet(&nak, departure.dest_qp) {
                    nak.ip = Some(ip);
                    nak.hop = hop;
                    let _ = crate::transport::answer_later(dev, guard, hop, nak);
                }
            }
            outcome.gone = true;
        }
    }
    outcome
}

/// Sends an answer of one packet.
fn send_answer(
    qp: &Qp<SrnicDevice>,
    guard: &RcuReadGuard,
    sender: &mut wire::Sender<'_>,
    sport: u16,
    departure: &Departure,
    answer: &Answer,
) -> Outcome {
    let mut outcome = Outcome::default();
    match answer_packet(answer, departure.dest_qp) {
        Some(mut packet) if departure.local() => {
            packet.ip = Some(departure.ip);
            packet.hop = departure.hop;
            // Taken or not (a repeated ACK), it has been handed over.
            let _ = crate::transport::answer_later(qp.device(), guard, departure.hop, packet);
            outcome.sent = 1;
        }
        Some(mut packet) => {
            packet.ip = Some(departure.ip);
            outcome.refused = sender.send(guard, &packet, sport).is_err();
        }
        None => outcome.gone = true,
    }
    outcome
}

/// Records what became of `burst` in the outbox and the counters; returns
/// whether the run goes on (false once the device queue refused a packet:
/// the QP's work then tries again a moment later, unless the outbox gave
/// the waiting answers up).
fn settle(qp: &Qp<SrnicDevice>, burst: &Burst, outcome: &Outcome) -> bool {
    let this: &SrnicQp = qp;
    let dev = qp.device();
    let given_up = {
        let mut state = this.state.lock();
        // Only a QP with an outbox takes bursts.
        let Some(outbox) = state.responder.outbox() else {
            return false;
        };
        if outcome.gone {
            // Counted as sent: the entry leaves the queue.
            let until = match burst.entry {
                Entry::Read(read) => read.count - read.next.min(read.count),
                Entry::Answer(_) => 1,
            };
            outbox.finish_burst(burst, until, false);
            false
        } else {
            outbox.finish_burst(burst, outcome.sent, outcome.refused)
        }
    };
    if outcome.gone || given_up {
        dev.counters.inc(Counter::AnswersDropped);
    }
    if outcome.refused {
        dev.counters.inc(Counter::TransmitRetries);
        if !given_up {
            qp.run_work_after(RETRY_MS);
        }
        return false;
    }
    true
}
