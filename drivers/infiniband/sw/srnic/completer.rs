// SPDX-License-Identifier: GPL-2.0

//! The completer: retires send WQEs in posting order from what the
//! responder answers. An ACK completes every SEND and WRITE up to its PSN;
//! a read response places its data and completes the READ with its last
//! packet; an atomic acknowledge returns the original value. Any answer
//! also acknowledges everything before its PSN. An RNR NAK makes the
//! requester wait and resend; other NAKs complete the WQE in error and
//! move the QP to ERR, which flushes the rest.

use crate::counters::Counter;
use crate::cq::SrnicCq;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::rxe_abi::wqe::{self, WorkWqe};
use crate::kapi::rdma::verbs::{QpState, WcOpcode, WcStatus};
use crate::kapi::rdma::Qp;
use crate::payload::{self, CopyError};
use crate::pure::aeth::{rnr_timer_us, NakCode, Syndrome, RNR_RETRY_FOREVER};
use crate::pure::headers::Operation;
use crate::pure::psn::{packets_for, Psn, PSN_MASK};
use crate::pure::wr::{opcode, QpType};
use crate::qp::{QpInner, SrnicQp, Upcalls};
use crate::requester::{local_status, now_ns, wqe_state};
use crate::transport::{Hop, Packet};
use core::sync::atomic::Ordering;

use crate::kapi::rdma::access::send::SIGNALED as IB_SEND_SIGNALED;

/// What the completer made of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Refused (not from the peer, for a PSN never sent, not the response
    /// awaited): nothing changed, so the requester has nothing new to do
    /// and is not run (a forged answer must not make a QP work).
    Rejected,
    /// Not used, but something went missing that the requester is to
    /// ask for again.
    Resend,
    /// Used.
    Taken,
}

impl From<bool> for Outcome {
    fn from(taken: bool) -> Self {
        if taken {
            Self::Taken
        } else {
            Self::Rejected
        }
    }
}

/// Takes an answer for `qp`'s requester.
pub(crate) fn receive(qp: &Qp<SrnicDevice>, guard: &RcuReadGuard, packet: &Packet<'_>) -> Outcome {
    receive_noting_unsent(qp, guard, packet).0
}

/// Takes an answer for `qp`'s requester, and says whether the send queue
/// then holds WQEs the requester has not sent yet: read under the lock
/// the answer was taken under, so that the wire's receive path, which
/// hands the requester over to the QP's work only if there are, need not
/// take the lock a second time for every packet.
pub(crate) fn receive_noting_unsent(
    qp: &Qp<SrnicDevice>,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
) -> (Outcome, bool) {
    let this: &SrnicQp = qp;
    let mut upcalls = Upcalls::default();
    let (taken, unsent) = {
        let mut state = this.state.lock();
        let taken = handle(qp, &mut state, guard, packet, &mut upcalls);
        (taken, state.requester.index != state.sq.producer)
    };
    if taken == Outcome::Rejected {
        qp.device().counters.inc(Counter::RejectedAnswers);
    }
    upcalls.run(qp);
    this.after_upcalls(qp);
    (taken, unsent)
}

/// Whether a completion of the WQE at SQ index `index` (`None`: of any
/// WQE, for a flush) must wait because the requester reads its payload
/// right now (see `SrnicQp::reading`). If so, the requester is told, and
/// the caller leaves a note in `Requester` for [`after_read`] (under the
/// QP's lock, which the requester takes before it reads the note). Under
/// the QP's lock: `reading` may only be cleared meanwhile, not set.
pub(crate) fn must_wait_for_read(this: &SrnicQp, index: Option<u32>) -> bool {
    let busy = |reading: u32| match index {
        Some(index) => reading == index.wrapping_add(1),
        None => reading != 0,
    };
    if !busy(this.reading.load(Ordering::SeqCst)) {
        return false;
    }
    this.waits_for_read.store(true, Ordering::SeqCst);
    // Checked again after the note: a requester that finished in between
    // may have missed it.
    busy(this.reading.load(Ordering::SeqCst))
}

/// Does what the completer left to the requester while it read a WQE's
/// payload, in the order the completer would have: the acknowledgement,
/// the oldest WQE's error completion, then the send queue's flush.
pub(crate) fn after_read(qp: &Qp<SrnicDevice>) {
    let this: &SrnicQp = qp;
    let mut upcalls = Upcalls::default();
    {
        let mut state = this.state.lock();
        let psn = state.requester.deferred_ack.take();
        let live = state.attrs.state == QpState::Rts || state.attrs.state == QpState::Sqd;
        if let (Some(psn), true) = (psn, live) {
            acknowledge(qp, &mut state, psn, &mut upcalls);
        }
        if let Some(status) = state.requester.deferred_fail.take() {
            fail_oldest(qp, &mut state, status, &mut upcalls);
        }
        if core::mem::take(&mut state.requester.flush_after_read)
            && state.attrs.state == QpState::Error
        {
            this.flush_send_queue(qp, &mut state, &mut upcalls);
        }
    }
    upcalls.run(qp);
    this.after_upcalls(qp);
}

/// The datagrams and UC messages the requester has sent are complete
/// (neither is acknowledged).
pub(crate) fn unanswered_sent(qp: &Qp<SrnicDevice>) {
    let this: &SrnicQp = qp;
    let mut upcalls = Upcalls::default();
    {
        let mut state = this.state.lock();
        while let Some((_, wqe)) = oldest_sent(qp, &state) {
            if wqe.state() != wqe_state::SENT {
                break;
            }
            complete_oldest(qp, &mut state, &wqe, WcStatus::Success, &mut upcalls);
        }
    }
    upcalls.run(qp);
}

/// The requester's own memory failed while the packet with `psn` was
/// being read: its WQE completes with a local protection error.
pub(crate) fn source_fault(qp: &Qp<SrnicDevice>, psn: Psn) {
    let this: &SrnicQp = qp;
    let mut upcalls = Upcalls::default();
    {
        let mut state = this.state.lock();
        if state.attrs.state == QpState::Rts || state.attrs.state == QpState::Sqd {
            acknowledge(qp, &mut state, before(psn), &mut upcalls);
            fail_oldest(qp, &mut state, WcStatus::LocalProtectionError, &mut upcalls);
        }
    }
    upcalls.run(qp);
    this.after_upcalls(qp);
}

/// The packet `psn` could not be built: a page of its payload is paged on
/// demand and not present (a message longer than what the requester
/// checks before it starts, or a page that went meanwhile). The QP's work
/// faults it in, and the requester sends again from there after a moment
/// rather than after a retransmission timeout.
pub(crate) fn source_absent(qp: &Qp<SrnicDevice>, psn: Psn, fault: crate::memory::Fault) {
    let this: &SrnicQp = qp;
    let mut state = this.state.lock();
    if state.attrs.state == QpState::Rts || state.attrs.state == QpState::Sqd {
        wait_for_page(qp, &mut state, psn, fault);
    }
}

/// The PSN before `psn`.
fn before(psn: Psn) -> Psn {
    psn.add(PSN_MASK)
}

/// Takes an answer of the peer to what `qp` sent: completes, resends or
/// fails WQEs, or rejects the packet.
fn handle(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Outcome {
    let Some(oldest) = admissible(qp, state, packet) else {
        return Outcome::Rejected;
    };
    let psn = packet.psn();
    let syndrome = packet.hdr.aeth.map(|a| Syndrome::decode(a.syndrome));
    match packet.hdr.info.operation {
        Operation::Acknowledge => match syndrome.flatten() {
            Some(syndrome) => acknowledgement(qp, state, psn, syndrome, upcalls),
            None => Outcome::Rejected,
        },
        Operation::ReadResponse => {
            if matches!(syndrome, Some(Some(s)) if s != Syndrome::Ack) {
                return Outcome::Rejected;
            }
            read_response_in_order(qp, state, guard, packet, oldest, upcalls)
        }
        Operation::AtomicAcknowledge => {
            acknowledge(qp, state, before(psn), upcalls);
            atomic_acknowledge(qp, state, guard, packet, upcalls).into()
        }
        _ => Outcome::Rejected,
    }
}

/// Whether `packet` may answer anything of `qp`: an RC QP sending (RTS or
/// SQD), the packet from its peer, for a PSN it sent, with something sent
/// still waiting, which it returns (the oldest WQE sent, with its slot).
/// What fails is counted where it says something about the peer.
fn admissible(
    qp: &Qp<SrnicDevice>,
    state: &QpInner,
    packet: &Packet<'_>,
) -> Option<(u32, WorkWqe)> {
    if !matches!(state.attrs.state, QpState::Rts | QpState::Sqd) {
        return None;
    }
    let counters = &qp.device().counters;
    // Only RC is answered, and only by the peer.
    if qp.qp_type() != QpType::Rc {
        counters.inc(Counter::MalformedPackets);
        return None;
    }
    if !state.is_from_peer(packet) {
        counters.inc(Counter::ForeignPackets);
        return None;
    }
    // An answer to a PSN never sent answers nothing (a forged packet): it
    // must not complete anything.
    if !packet.psn().is_before(state.requester.sent_end) {
        counters.inc(Counter::MalformedPackets);
        return None;
    }
    // Nothing sent is waiting for an answer: this one (a late duplicate,
    // or forged) answers nothing.
    oldest_sent(qp, state)
}

/// An ACK, RNR NAK or NAK for `psn`.
fn acknowledgement(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    psn: Psn,
    syndrome: Syndrome,
    upcalls: &mut Upcalls,
) -> Outcome {
    let counters = &qp.device().counters;
    match syndrome {
        Syndrome::Ack => {
            let before_ack = (state.requester.acked, state.sq.consumer);
            acknowledge_up_to(qp, state, psn, upcalls);
            // A repeated (or forged) ACK that moved nothing gives the
            // requester nothing to do.
            (before_ack != (state.requester.acked, state.sq.consumer)).into()
        }
        Syndrome::Rnr(code) => {
            counters.inc(Counter::RnrNaksReceived);
            acknowledge_up_to(qp, state, before(psn), upcalls);
            let from = resend_point(state, psn);
            receiver_not_ready(qp, state, from, code, upcalls);
            Outcome::Taken
        }
        Syndrome::Nak(NakCode::PsnSequence) => {
            counters.inc(Counter::SequenceNaksReceived);
            acknowledge_up_to(qp, state, before(psn), upcalls);
            state.requester.lost();
            let from = resend_point(state, psn);
            resend_from(qp, state, from);
            Outcome::Taken
        }
        Syndrome::Nak(code) => {
            acknowledge_up_to(qp, state, before(psn), upcalls);
            let (status, counter) = match code {
                NakCode::RemoteAccess => (WcStatus::RemoteAccessError, Counter::AccessNaksReceived),
                NakCode::RemoteOperation => (
                    WcStatus::RemoteOperationError,
                    Counter::OperationNaksReceived,
                ),
                _ => (
                    WcStatus::RemoteInvalidRequestError,
                    Counter::InvalidRequestNaksReceived,
                ),
            };
            counters.inc(counter);
            fail_oldest(qp, state, status, upcalls);
            Outcome::Taken
        }
    }
}

/// A READ response packet, taken if it is the next one expected.
///
/// Responses come in order: the first one of a READ also says that
/// everything before it arrived; any other must be the next PSN expected,
/// or it is dropped (the timer re-requests what is missing).
fn read_response_in_order(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    oldest: (u32, WorkWqe),
    upcalls: &mut Upcalls,
) -> Outcome {
    let psn = packet.psn();
    // The oldest WQE is read from the work ring once per packet, and again
    // only if the acknowledgement retired it.
    let mut oldest = Some(oldest);
    acknowledge_from(qp, state, before(psn), &mut oldest, upcalls);
    let first_of_oldest = oldest
        .as_ref()
        .is_some_and(|(_, wqe)| Psn::new(wqe.first_psn()) == psn);
    if psn != state.requester.acked && !first_of_oldest {
        // The peer is still answering: the rest of a stream past a gap, or
        // a replay of data already here that an earlier resend asked for. A
        // responder sends the streams one after the other, so a long one
        // delays the answer to the next request by more than a timeout;
        // the timer restarts (without granting retries) rather than queue
        // yet another replay behind them.
        state.requester.last_progress = now_ns();
        let acked = state.requester.acked;
        if acked.is_before(psn) && state.requester.rerequested != Some(acked) {
            // A response went missing: ask for the rest now rather than at
            // the timeout.
            state.requester.rerequested = Some(acked);
            state.requester.lost();
            resend_from(qp, state, acked);
            qp.device().counters.inc(Counter::OutOfSequenceResponses);
            return Outcome::Resend;
        }
        return Outcome::Rejected;
    }
    let Some(oldest) = oldest else {
        return Outcome::Rejected;
    };
    read_response(qp, state, guard, packet, oldest, upcalls).into()
}

/// The oldest WQE the requester has (at least partly) sent, with its slot.
fn oldest_sent(qp: &Qp<SrnicDevice>, state: &QpInner) -> Option<(u32, WorkWqe)> {
    let this: &SrnicQp = qp;
    let index = state.sq.consumer;
    let started = index != state.requester.index || state.requester.sent > 0;
    if index == state.sq.producer || !started {
        return None;
    }
    wqe::read_send(&this.work, index).ok().map(|w| (index, w))
}

/// Operations a response (not an ACK) completes.
fn is_read_or_atomic(op: u32) -> bool {
    matches!(
        op,
        opcode::RDMA_READ
            | opcode::ATOMIC_CMP_AND_SWP
            | opcode::ATOMIC_FETCH_AND_ADD
            | opcode::ATOMIC_WRITE
            | opcode::FLUSH
    )
}

/// Completes every SEND and WRITE whose last packet is at or before
/// `psn`, and the executed local operations among them, in order.
fn acknowledge(qp: &Qp<SrnicDevice>, state: &mut QpInner, psn: Psn, upcalls: &mut Upcalls) {
    let mut oldest = oldest_sent(qp, state);
    acknowledge_from(qp, state, psn, &mut oldest, upcalls);
}

/// [`acknowledge`], from `oldest`, the oldest WQE sent (with its slot) as
/// the caller read it under this lock hold, which it leaves the oldest
/// sent once done: the work ring is read again only when a WQE retires.
fn acknowledge_from(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    psn: Psn,
    oldest: &mut Option<(u32, WorkWqe)>,
    upcalls: &mut Upcalls,
) {
    let this: &SrnicQp = qp;
    while let Some((index, wqe)) = oldest.as_ref() {
        let index = *index;
        if wqe.state() == wqe_state::DONE {
            let go_on = retire_local(qp, state, wqe, upcalls);
            *oldest = oldest_sent(qp, state);
            if !go_on {
                return;
            }
            continue;
        }
        let last = if is_read_or_atomic(wqe.opcode()) {
            None
        } else {
            last_packet_sent(state, wqe)
        };
        let Some(last) = last.filter(|last| !psn.is_before(*last)) else {
            return;
        };
        if must_wait_for_read(this, Some(index)) {
            // The requester reads this WQE's payload right now (sending it
            // again): it completes the WQE once done.
            state.requester.deferred_ack = Some(psn);
            qp.device().counters.inc(Counter::DeferredAcks);
            return;
        }
        let req = &mut state.requester;
        if req.index == state.sq.consumer && req.psn.is_before(last.next()) {
            // Being sent again after a loss, and the peer has all of it:
            // the requester goes on with the next WQE at the PSN that WQE
            // had, not from where this one's resend had got to.
            req.psn = last.next();
        }
        complete_oldest(qp, state, wqe, WcStatus::Success, upcalls);
        *oldest = oldest_sent(qp, state);
    }
}

/// What an ACK or NAK for `psn` says: the peer has every request up to
/// it. SENDs and WRITEs up to it complete and the window moves, but never
/// past a READ or atomic still waiting for its response: the peer having
/// the request is not the requester having the answer, which only the
/// response brings. Were `acked` past it, the response's later packets
/// would look like replays, and every resend would start after it, so
/// that the READ could only end in `RETRY_EXC_ERR`.
fn acknowledge_up_to(qp: &Qp<SrnicDevice>, state: &mut QpInner, psn: Psn, upcalls: &mut Upcalls) {
    acknowledge(qp, state, psn, upcalls);
    let unanswered = oldest_sent(qp, state)
        .filter(|(_, wqe)| is_read_or_atomic(wqe.opcode()) && wqe.state() != wqe_state::DONE)
        .map(|(_, wqe)| Psn::new(wqe.first_psn()));
    match unanswered {
        // Up to its first packet; past any of its response already here.
        Some(first) if before(first).is_before(psn) => progress(state, before(first)),
        _ => progress(state, psn),
    }
}

/// Where a NAK for `psn` sends the requester back to: `psn`, or the
/// response still awaited before it.
fn resend_point(state: &QpInner, psn: Psn) -> Psn {
    let acked = state.requester.acked;
    if acked.is_before(psn) {
        acked
    } else {
        psn
    }
}

/// The PSN of the last packet of the SEND or WRITE `wqe`, if that packet has
/// been sent at least once. A message sent again from its middle after a
/// loss is pending once more, but its last packet went out before when its
/// PSN is below the highest ever sent.
fn last_packet_sent(state: &QpInner, wqe: &WorkWqe) -> Option<Psn> {
    if wqe.state() == wqe_state::SENT {
        return Some(Psn::new(wqe.last_psn()));
    }
    let packets = packets_for(wqe.length(), state.segment_bytes())?;
    let last = Psn::new(wqe.first_psn()).add(packets.checked_sub(1)?);
    last.is_before(state.requester.sent_end).then_some(last)
}

/// The peer has everything up to `psn`: the window moves and the
/// retransmission timer starts over.
fn progress(state: &mut QpInner, psn: Psn) {
    let next = psn.next();
    let req = &mut state.requester;
    // Only forward, and never past what was sent (ever: a requester
    // sending again after a loss may be behind what the peer has).
    if next.is_before(req.acked) || req.sent_end.is_before(next) {
        return;
    }
    if next != req.acked {
        req.acked = next;
        req.last_progress = now_ns();
        req.retry_left = state.attrs.retry_cnt;
        req.probed = false;
        req.delivered();
    }
}

/// How often the retransmission timers are looked at, in milliseconds.
pub(crate) const TIMER_TICK_MS: u32 = 5;

/// How long a tail that asked for no acknowledgement waits for one
/// before the completer probes it (see `requester::MIN_TIMEOUT_FOR_PROBES`).
const TAIL_PROBE_NS: u64 = 4_000_000;

/// The retransmission timer of `qp`: if it sent packets the peer has not
/// acknowledged within the QP's `timeout` (4.096 us x 2^timeout, doubled
/// after each of the first two resends that brought no progress), resends from the first of
/// them, or after `retry_cnt` such resends completes the oldest WQE with
/// `RETRY_EXC_ERR`. Whether the timer still runs.
pub(crate) fn check_timeout(qp: &Qp<SrnicDevice>) -> bool {
    let this: &SrnicQp = qp;
    let mut upcalls = Upcalls::default();
    let mut resent = false;
    let mut unsent = false;
    let running = {
        let mut state = this.state.lock();
        // Only RC waits for answers (UC and UD complete once sent).
        let quiet = !matches!(state.attrs.state, QpState::Rts | QpState::Sqd)
            || qp.qp_type() != QpType::Rc
            || state.peer == Hop::ThisDevice
            || state.attrs.timeout == 0
            || oldest_sent(qp, &state).is_none();
        if quiet {
            false
        } else {
            // WQEs a post left to an answer (`requester::answer_will_send`)
            // that no run has looked at since go out now.
            unsent = state.requester.left_to_answer;
            // Each fruitless resend doubles the wait (a peer that is slow
            // to answer is not made slower by a flood of resends).
            let backoff = state
                .attrs
                .retry_cnt
                .saturating_sub(state.requester.retry_left);
            let timeout_ns = (4096u64 << state.attrs.timeout.min(31)) << backoff.min(2);
            let now = now_ns();
            let checked = core::mem::replace(&mut state.requester.last_check, now);
            if now.saturating_sub(checked) >= timeout_ns {
                // This host did not run the timer for a whole timeout (a
                // starved VM, a long stall): the answers may be waiting
                // in its own receive queue. The wait starts over rather
                // than count a silence that was ours.
                state.requester.last_progress = now;
                true
            } else if now.saturating_sub(state.requester.last_progress) < timeout_ns {
                let req = &state.requester;
                if !req.probed
                    && req.asked_end != req.sent_end
                    && now.saturating_sub(req.last_progress) >= TAIL_PROBE_NS
                {
                    // The last packets went out without asking for an
                    // acknowledgement (ends of unsignaled messages) and
                    // nothing has come since.
                    state.requester.probed = true;
                    if probe_tail(qp, &mut state) {
                        qp.device().counters.inc(Counter::TailProbes);
                        resent = true;
                    }
                }
                true
            } else {
                let counters = &qp.device().counters;
                counters.inc(Counter::Timeouts);
                if state.requester.retry_left == 0 {
                    counters.inc(Counter::RetryExceeded);
                    fail_oldest(qp, &mut state, WcStatus::RetryExceeded, &mut upcalls);
                    false
                } else {
                    state.requester.retry_left -= 1;
                    if oldest_sent(qp, &state).is_some_and(|(_, w)| w.opcode() == opcode::FLUSH) {
                        // Perhaps the peer dropped it for its ICRC: the
                        // other kind goes next (see `Requester`).
                        state.requester.rxe_flush_icrc = !state.requester.rxe_flush_icrc;
                    }
                    let from = state.requester.acked;
                    state.requester.lost();
                    resend_from(qp, &mut state, from);
                    state.requester.last_progress = now;
                    resent = true;
                    true
                }
            }
        }
    };
    upcalls.run(qp);
    this.after_upcalls(qp);
    if resent || unsent {
        crate::requester::run(qp);
    }
    running
}

/// Completes executed local operations at the head of the queue (called
/// by the requester after it executes one).
pub(crate) fn retire(qp: &Qp<SrnicDevice>, state: &mut QpInner, upcalls: &mut Upcalls) {
    while let Some((_, wqe)) = oldest_sent(qp, state) {
        if wqe.state() != wqe_state::DONE || !retire_local(qp, state, &wqe, upcalls) {
            return;
        }
    }
}

/// Completes the local operation at the head; false if it failed (and the
/// QP went to ERR).
fn retire_local(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    wqe: &WorkWqe,
    upcalls: &mut Upcalls,
) -> bool {
    let status = match wqe.status() {
        local_status::SUCCESS => WcStatus::Success,
        _ if wqe.opcode() == opcode::BIND_MW => WcStatus::MemoryWindowBindError,
        local_status::PROTECTION => WcStatus::LocalProtectionError,
        _ => WcStatus::LocalQpOperationError,
    };
    complete_oldest(qp, state, wqe, status, upcalls);
    if status != WcStatus::Success {
        let this: &SrnicQp = qp;
        this.enter_error(qp, state, upcalls);
        return false;
    }
    true
}

/// Retires the head WQE with `status`; a completion is written if the WR
/// asked for one, the QP signals all, or it failed.
fn complete_oldest(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    wqe: &WorkWqe,
    status: WcStatus,
    upcalls: &mut Upcalls,
) {
    let this: &SrnicQp = qp;
    let signaled =
        status != WcStatus::Success || this.sq_sig_all || wqe.send_flags() & IB_SEND_SIGNALED != 0;
    if signaled {
        let mut wc = qp.completion(wqe.wr_id(), status, WcOpcode::of_send(wqe.opcode()));
        wc.byte_len = wqe.length();
        upcalls.send.merge(SrnicCq::push(qp.send_cq(), &wc, false));
    }
    if wqe.has_rd_atomic() {
        state.requester.rd_atomic = state.requester.rd_atomic.saturating_sub(1);
    }
    let next = this.work.geometry().next(state.sq.consumer);
    if state.requester.index == state.sq.consumer {
        // Completed while being sent (an error): the requester moves on.
        state.requester.index = next;
        state.requester.sent = 0;
    }
    state.sq.consumer = next;
    if let Some(user) = &state.sq.user {
        user.set_consumer(next);
    }
    // Progress: the RNR budget is per message.
    state.requester.rnr_left = state.attrs.rnr_retry;
}

/// Completes the oldest sent WQE with error `status` and moves the QP to
/// ERR.
fn fail_oldest(qp: &Qp<SrnicDevice>, state: &mut QpInner, status: WcStatus, upcalls: &mut Upcalls) {
    let this: &SrnicQp = qp;
    if let Some((index, wqe)) = oldest_sent(qp, state) {
        if must_wait_for_read(this, Some(index)) {
            // Completed by the requester once it has read the payload;
            // ERR now (its flush waits for the read too).
            state.requester.deferred_fail = Some(status);
        } else {
            complete_oldest(qp, state, &wqe, status, upcalls);
        }
    }
    this.enter_error(qp, state, upcalls);
}

/// Completes `wqe`, which the requester could not send, with `status`
/// and moves the QP to ERR.
pub(crate) fn fail_local(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    wqe: &WorkWqe,
    status: WcStatus,
    upcalls: &mut Upcalls,
) {
    complete_oldest(qp, state, wqe, status, upcalls);
    let this: &SrnicQp = qp;
    this.enter_error(qp, state, upcalls);
}

/// Sends the last packet sent again, asking for an acknowledgement: a
/// peer that has it acknowledges everything it has (a duplicate with
/// AckReq is answered so), and one that lacks an earlier packet NAKs the
/// first it lacks, which starts the usual go-back-N from there. One packet
/// probes the whole tail; nothing is known lost, so neither the window nor
/// the retries shrink. Only when the requester rests at the end of a SEND
/// or WRITE, the messages whose ends may go unasked; otherwise the
/// retransmission timer stays in charge. Whether a probe went.
fn probe_tail(qp: &Qp<SrnicDevice>, state: &mut QpInner) -> bool {
    let this: &SrnicQp = qp;
    let mtu = state.segment_bytes();
    let req = &state.requester;
    if req.sent != 0 || req.psn != req.sent_end || req.index == state.sq.consumer {
        return false;
    }
    let last = this.work.geometry().prev(req.index);
    let Ok(wqe) = wqe::read_send(&this.work, last) else {
        return false;
    };
    let unasked_kind = matches!(
        wqe.opcode(),
        opcode::SEND
            | opcode::SEND_WITH_IMM
            | opcode::SEND_WITH_INV
            | opcode::RDMA_WRITE
            | opcode::RDMA_WRITE_WITH_IMM
    );
    let last_psn = Psn::new(wqe.last_psn());
    if !unasked_kind || last_psn.next() != req.sent_end {
        return false;
    }
    let Some(at) = u32::try_from(last_psn.distance_from(Psn::new(wqe.first_psn())))
        .ok()
        .and_then(|packets| packets.checked_mul(mtu))
    else {
        return false;
    };
    let req = &mut state.requester;
    // The requester goes back to that one packet, which it sends asking
    // (the last of a resend asks), and then on with new work.
    req.index = last;
    req.sent = at;
    req.psn = last_psn;
    true
}

/// Goes back to the packet `psn` of the oldest WQE (go-back-N).
fn resend_from(qp: &Qp<SrnicDevice>, state: &mut QpInner, psn: Psn) {
    let Some((index, wqe)) = oldest_sent(qp, state) else {
        return;
    };
    let first = Psn::new(wqe.first_psn());
    let offset = psn.distance_from(first);
    let mtu = state.segment_bytes();
    qp.device().counters.inc(Counter::Resends);
    let req = &mut state.requester;
    req.rewind(index);
    // One-packet requests are always sent again whole.
    let one_packet = matches!(
        wqe.opcode(),
        opcode::ATOMIC_CMP_AND_SWP
            | opcode::ATOMIC_FETCH_AND_ADD
            | opcode::ATOMIC_WRITE
            | opcode::FLUSH
    );
    // Into the middle of a message: from that packet on (a READ asks
    // again for the rest of its data). The PSN came in a NAK: one past the
    // message's packets (which `acknowledge` would have completed) resends
    // it whole rather than as an empty last packet.
    let at = u32::try_from(offset)
        .ok()
        .and_then(|packets| packets.checked_mul(mtu))
        .filter(|&bytes| bytes < wqe.length());
    match at {
        Some(at) if offset > 0 && !one_packet => {
            req.sent = at;
            req.psn = psn;
        }
        _ => req.psn = first,
    }
}

/// How long the requester waits for a page of its own memory paged on
/// demand before it asks again.
const PAGE_WAIT_US: u32 = 1000;

/// A response found the page it lands in paged on demand and not
/// present: the QP's work faults it in, and the requester asks again from
/// `psn` after a moment, as after an RNR NAK but without spending RNR
/// retries (the wait is this node's, not the peer's).
fn wait_for_page(qp: &Qp<SrnicDevice>, state: &mut QpInner, psn: Psn, fault: crate::memory::Fault) {
    let this: &SrnicQp = qp;
    this.want_fault(qp, fault);
    resend_from(qp, state, psn);
    let until = now_ns().saturating_add(u64::from(PAGE_WAIT_US) * 1000);
    state.requester.last_progress = until;
    state.requester.rnr_until = Some(until);
    qp.run_work_after(PAGE_WAIT_US / 1000);
}

fn receiver_not_ready(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    psn: Psn,
    code: u8,
    upcalls: &mut Upcalls,
) {
    if oldest_sent(qp, state).is_none() {
        return;
    }
    if state.attrs.rnr_retry != RNR_RETRY_FOREVER {
        if state.requester.rnr_left == 0 {
            qp.device().counters.inc(Counter::RnrRetryExceeded);
            fail_oldest(qp, state, WcStatus::RnrRetryExceeded, upcalls);
            return;
        }
        state.requester.rnr_left -= 1;
    }
    resend_from(qp, state, psn);
    let wait_us = rnr_timer_us(code);
    // Waiting out the RNR timer is not a transport timeout.
    let until = now_ns().saturating_add(u64::from(wait_us).saturating_mul(1000));
    state.requester.last_progress = until;
    state.requester.rnr_until = Some(until);
    qp.run_work_after(wait_us.div_ceil(1000).max(1));
}

/// A READ response packet for `oldest`, the oldest WQE sent (with its
/// slot): its data placed, and the READ completed by its last packet.
fn read_response(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    (index, wqe): (u32, WorkWqe),
    upcalls: &mut Upcalls,
) -> bool {
    let psn = packet.psn();
    let first = Psn::new(wqe.first_psn());
    if matches!(wqe.opcode(), opcode::ATOMIC_WRITE | opcode::FLUSH) {
        // Their answer is an empty READ response.
        if psn != first || packet.hdr.payload_len != 0 {
            return false;
        }
        progress(state, psn);
        complete_oldest(qp, state, &wqe, WcStatus::Success, upcalls);
        return true;
    }
    let count = Psn::new(wqe.last_psn())
        .distance_from(first)
        .checked_add(1)
        .and_then(|count| u32::try_from(count).ok())
        .filter(|count| *count > 0);
    let awaited =
        wqe.opcode() == opcode::RDMA_READ && count.is_some_and(|count| psn.is_within(first, count));
    if !awaited {
        // Not the response awaited (a duplicate, or out of order).
        return false;
    }
    let mtu = state.segment_bytes();
    // Where the packet's data goes, from its PSN and length: checked, as
    // both come from the packet.
    let offset = u32::try_from(psn.distance_from(first))
        .ok()
        .and_then(|packets| packets.checked_mul(mtu));
    let len = u32::try_from(packet.hdr.payload_len).ok();
    let ends = packet.hdr.info.ends_message();
    let placed = offset.zip(len).and_then(|(offset, len)| {
        let end = offset.checked_add(len).filter(|end| *end <= wqe.length())?;
        let well_sized = if ends {
            end == wqe.length()
        } else {
            len == mtu
        };
        well_sized.then_some((offset, len))
    });
    let Some((offset, len)) = placed else {
        fail_oldest(qp, state, WcStatus::BadResponseError, upcalls);
        return false;
    };
    if len > 0 {
        let Some(source) = packet.payload.as_ref() else {
            fail_oldest(qp, state, WcStatus::BadResponseError, upcalls);
            return false;
        };
        let target = crate::requester::wqe_sges(qp, index, &wqe);
        let copied = payload::copy(
            guard,
            source,
            packet.payload_at,
            &target,
            u64::from(offset),
            len,
        );
        if let Err(side) = copied {
            let status = match side {
                CopyError::Destination => WcStatus::LocalProtectionError,
                CopyError::Source => WcStatus::RemoteAccessError,
                CopyError::Absent(fault) => {
                    wait_for_page(qp, state, psn, fault);
                    return true;
                }
            };
            fail_oldest(qp, state, status, upcalls);
            return false;
        }
    }
    progress(state, psn);
    if ends {
        complete_oldest(qp, state, &wqe, WcStatus::Success, upcalls);
    }
    true
}

fn atomic_acknowledge(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> bool {
    let Some((index, wqe)) = oldest_sent(qp, state) else {
        return false;
    };
    let atomic = matches!(
        wqe.opcode(),
        opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD
    );
    if !atomic || packet.psn() != Psn::new(wqe.first_psn()) {
        return false;
    }
    let Some(original) = packet.hdr.atomic_ack else {
        return false;
    };
    let target = crate::requester::wqe_sges(qp, index, &wqe);
    let bytes = original.to_ne_bytes();
    match payload::store(guard, &target, &bytes) {
        Ok(()) => {}
        // The responder answers the atomic sent again from its cache of
        // recent results, without executing it twice.
        Err(CopyError::Absent(fault)) => {
            wait_for_page(qp, state, packet.psn(), fault);
            return true;
        }
        Err(_) => {
            fail_oldest(qp, state, WcStatus::LocalProtectionError, upcalls);
            return false;
        }
    }
    progress(state, packet.psn());
    complete_oldest(qp, state, &wqe, WcStatus::Success, upcalls);
    true
}
