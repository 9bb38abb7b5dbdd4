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
use crate::pure::headers::opcode::RC_ACKNOWLEDGE;
use crate::pure::outbox::{Answer, Entry, BURST};
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

/// Sends what waits in `qp`'s outbox, a budget's worth; the QP's own work
/// goes on with the rest, at once, or a moment later if the device queue
/// refused a packet.
pub(crate) fn run(qp: &Qp<SrnicDevice>) {
    let this: &SrnicQp = qp;
    let dev = qp.device();
    let guard = RcuReadGuard::new();
    let sport = wire::source_port(qp.qp_num(), qp.qp_num());
    let mut budget = BURST;
    // One route lookup for all the bursts of this run.
    let mut sender = wire::Sender::new(dev).through(this.egress());
    loop {
        let (burst, ip, hop, dest_qp) = {
            let mut state = this.state.lock();
            let answering = match state.attrs.state {
                QpState::Rtr | QpState::Rts | QpState::Sqd => true,
                // The NAK that ended the QP, and what came before it.
                QpState::Error => state.responder.outbox.is_closing(),
                _ => false,
            };
            if !answering {
                state.responder.outbox.clear();
                return;
            }
            let (ip, hop) = state.path();
            if hop != Hop::Wire {
                // Pieces of up to 64 KiB each.
                budget = budget.min(LOCAL_BURST);
            }
            let Some(burst) = state.responder.outbox.take_burst(budget) else {
                return;
            };
            (burst, ip, hop, state.attrs.dest_qp_num)
        };
        let local = hop != Hop::Wire;
        let sent_before = sender.sent();
        let mut handed_over = 0u32;
        if !local {
            sender.reserve_for(match burst.entry {
                Entry::Read(read) => burst.until.saturating_sub(read.next),
                Entry::Answer(_) => 1,
            });
        }
        let mut refused = false;
        let mut gone = false;
        match burst.entry {
            Entry::Read(read) => {
                match responder::read_response(qp, &guard, &read, dest_qp, burst.until) {
                    Some(mut response) if local => {
                        response.set_path(ip, hop);
                        for packet in response.packets() {
                            // A piece the completer refuses (its QP left
                            // RTS, say): the rest would be refused too.
                            if !crate::transport::answer_later(dev, &guard, hop, packet) {
                                gone = true;
                                break;
                            }
                            handed_over = handed_over.saturating_add(1);
                        }
                    }
                    Some(mut response) => {
                        response.set_path(ip, Hop::Wire);
                        for packet in response.packets() {
                            match sender.send(&guard, &packet, sport) {
                                Ok(()) => {}
                                // The region's memory cannot be read: no
                                // retry would do better.
                                Err(wire::SendError::Source) => {
                                    gone = true;
                                    break;
                                }
                                Err(_) => {
                                    refused = true;
                                    break;
                                }
                            }
                        }
                    }
                    // The region went away: nothing left to answer with.
                    // A requester on this node has no timer to ask again
                    // (its answers come while it sends): it hears why,
                    // as if the region had been gone when it asked.
                    None => {
                        if local {
                            let nak = answer_packet(
                                &Answer::new(
                                    RC_ACKNOWLEDGE,
                                    read.psn.add(read.next),
                                    Syndrome::Nak(NakCode::RemoteAccess).encode(),
                                    read.msn,
                                    None,
                                ),
                                dest_qp,
                            );
                            if let Some(mut nak) = nak {
                                nak.ip = Some(ip);
                                nak.hop = hop;
                                let _ = crate::transport::answer_later(dev, &guard, hop, nak);
                            }
                        }
                        gone = true;
                    }
                }
            }
            Entry::Answer(answer) => match answer_packet(&answer, dest_qp) {
                Some(mut packet) if local => {
                    packet.ip = Some(ip);
                    packet.hop = hop;
                    // Taken or not (a repeated ACK), it has been handed over.
                    let _ = crate::transport::answer_later(dev, &guard, hop, packet);
                    handed_over = 1;
                }
                Some(mut packet) => {
                    packet.ip = Some(ip);
                    refused = sender.send(&guard, &packet, sport).is_err();
                }
                None => gone = true,
            },
        }
        // What was made before a fault still goes (after a refusal, the
        // list is gone already and this sends nothing).
        if sender.flush().is_err() {
            refused = true;
        }
        let sent = if local {
            handed_over
        } else {
            sender.sent().saturating_sub(sent_before)
        };
        if sent == 0 && !refused {
            // Nothing could be made of the entry.
            gone = true;
        }
        if gone {
            refused = false;
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
