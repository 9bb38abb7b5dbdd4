// SPDX-License-Identifier: GPL-2.0

//! The responder: takes request packets in PSN order and executes them.
//! SENDs fill a receive WQE of the QP's RQ or SRQ (RNR NAK if none is
//! posted); RDMA WRITEs land in the region their rkey names after the key,
//! range and access checks; RDMA READs are answered with response packets
//! straight from the region; atomics run on 8-byte aligned targets and
//! their result is kept to answer a duplicate; FLUSHes are answered once
//! the writes before them are placed. A packet ahead of the
//! expected PSN is NAKed once; one behind it is a duplicate, re-ACKed or
//! re-executed. A request that breaks the rules is NAKed, and the QP goes
//! to ERR.

use crate::counters::Counter;
use crate::cq::SrnicCq;
use crate::device::{limits, SrnicDevice};
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::access::{
    network, FLUSH_GLOBAL, FLUSH_PERSISTENT, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE,
};
use crate::kapi::rdma::rxe_abi::wqe::RecvCopy;
use crate::kapi::rdma::verbs::{QpState, WcOpcode, WcStatus};
use crate::kapi::rdma::Qp;
use crate::kapi::shared::{SharedRange, SharedWord};
use crate::memory::{self, remote_region, remote_start, Fault, Reached, Span, Unreachable};
use crate::outbox::answer_of;
use crate::payload::{self, CopyError, Extent, SgeList};
use crate::pure::aeth::{NakCode, Syndrome};
use crate::pure::fifo::Fifo;
use crate::pure::grh::{IpHeader, GRH_LEN};
use crate::pure::headers::{placement, selectivity, Operation, Position, Transport};
use crate::pure::outbox::{Outbox, PendingRead, MAX_READS};
use crate::pure::psn::{packets_for, Psn, PSN_MASK};
use crate::pure::wr::QpType;
use crate::qp::{QpInner, SrnicQp, Upcalls};
use crate::transport::{Hop, Packet};
use kernel::alloc::{flags::GFP_KERNEL, KVBox};

use crate::pure::headers::opcode::{
    RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE, RC_RDMA_READ_RESPONSE_FIRST as RC_READ_RESPONSE_FIRST,
    RC_RDMA_READ_RESPONSE_LAST as RC_READ_RESPONSE_LAST,
    RC_RDMA_READ_RESPONSE_MIDDLE as RC_READ_RESPONSE_MIDDLE,
    RC_RDMA_READ_RESPONSE_ONLY as RC_READ_RESPONSE_ONLY,
};

/// Where the receive WQE of the message in progress came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReceiveFrom {
    /// The QP's own RQ: it leaves the ring when the message completes.
    Rq,
    /// The SRQ: it left the SRQ when taken, and is this QP's now.
    Srq,
}

/// The RDMA WRITE in progress.
#[derive(Clone, Copy)]
struct WriteTarget {
    rkey: u32,
    va: u64,
    length: u32,
    placed: u32,
}

/// How far behind the expected PSN a packet that shows a resend lost its
/// first packet again may be (further back it is more likely reordered).
const RESEND_LOST_WITHIN: i32 = 4;

/// Per-QP responder state.
pub(crate) struct Responder {
    /// The next PSN expected.
    psn: Psn,
    /// Messages completed (the AETH's MSN).
    msn: u32,
    /// The receive WQE of the message in progress, copied out of its ring.
    recv: RecvCopy,
    recv_from: Option<ReceiveFrom>,
    /// Bytes of the SEND in progress placed.
    recv_placed: u32,
    write: Option<WriteTarget>,
    /// The multi-packet message in progress.
    in_message: Option<Operation>,
    /// A PSN sequence NAK went out and the expected PSN has not come
    /// since: the highest PSN that arrived after it.
    nak_sent: Option<Psn>,
    /// UC: the message in progress was lost; packets are dropped until the
    /// first packet of the next message.
    dropping: bool,
    /// What answers READs and atomics: RC QPs only (UC, UD and GSI QPs
    /// answer nothing, and their 14 KiB would be wasted).
    answers: Option<KVBox<Answers>>,
}

/// An RC responder's answers: boxed, as with room for `MAX_READS` READs
/// they are 14 KiB, too much for the stack the QP is made on.
pub(crate) struct Answers {
    /// The PSN and original value of the latest atomics, for duplicates
    /// (as many as may be outstanding).
    atomics: Fifo<(Psn, u64), MAX_READS>,
    /// Answers to requests from the wire waiting to leave.
    pub(crate) outbox: Outbox,
}

/// What the responder answers.
pub(crate) enum Reply<'a> {
    /// Nothing (not asked for an acknowledgement, or dropped).
    None,
    /// An ACK, NAK or atomic acknowledge.
    Packet(Packet<'a>),
    /// Read response packets.
    Read(ReadResponse<'a>),
    /// Answers that wait in the outbox (wire only): `outbox::run` sends them.
    Queued,
    /// The requester's memory could not be read: its WQE fails locally.
    SourceFault,
}

/// The response to an RDMA READ: `length` bytes of `mr` from `offset`,
/// packets `from..to` of it.
pub(crate) struct ReadResponse<'a> {
    span: Span<'a>,
    length: u32,
    psn: Psn,
    mtu: u32,
    dest: u32,
    msn: u32,
    ip: Option<IpHeader>,
    hop: Hop,
    /// Packets in the whole response.
    count: u32,
    from: u32,
    to: u32,
    /// The request's key and address, to find the region again when the
    /// response waits in the outbox.
    rkey: u32,
    va: u64,
    /// Whether the request was a duplicate.
    duplicate: bool,
}

impl<'a> ReadResponse<'a> {
    /// The response packets, in PSN order.
    pub(crate) fn packets(&self) -> impl Iterator<Item = Packet<'a>> + '_ {
        let count = self.count;
        (self.from..self.to.min(count)).filter_map(move |n| {
            let code = match (n == 0, n + 1 == count) {
                (true, true) => RC_READ_RESPONSE_ONLY,
                (true, false) => RC_READ_RESPONSE_FIRST,
                (false, true) => RC_READ_RESPONSE_LAST,
                (false, false) => RC_READ_RESPONSE_MIDDLE,
            };
            let mut packet = Packet::new(code, self.dest, self.psn.add(n))?;
            packet.ip = self.ip;
            packet.hop = self.hop;
            if n == 0 || n + 1 == count {
                packet = packet.with_aeth(Syndrome::Ack.encode(), self.msn);
            }
            let at = n.checked_mul(self.mtu)?;
            let len = self.length.checked_sub(at)?.min(self.mtu);
            if len > 0 {
                let region = Extent::Region(self.span);
                packet = packet.with_payload(region, u64::from(at), len);
            }
            Some(packet)
        })
    }

    /// The first packet [`Self::packets`] makes.
    pub(crate) fn first(&self) -> u32 {
        self.from
    }

    /// Where the packets go.
    pub(crate) fn set_path(&mut self, ip: IpHeader, hop: Hop) {
        self.ip = Some(ip);
        self.hop = hop;
    }

    /// The response as an outbox entry, none of it sent yet.
    fn pending(&self) -> PendingRead {
        PendingRead {
            rkey: self.rkey,
            va: self.va,
            length: self.length,
            psn: self.psn,
            msn: self.msn,
            mtu: self.mtu,
            count: self.count,
            next: 0,
        }
    }
}

/// Packets `read.next..until` of a response waiting in the outbox, if its
/// region still grants the READ.
pub(crate) fn read_response<'g>(
    qp: &Qp<SrnicDevice>,
    guard: &'g RcuReadGuard,
    read: &PendingRead,
    dest: u32,
    until: u32,
) -> Option<ReadResponse<'g>> {
    let span = remote_region(qp, guard, read.rkey, read.va, read.length, REMOTE_READ)?;
    Some(ReadResponse {
        span,
        length: read.length,
        psn: read.psn,
        mtu: read.mtu,
        dest,
        msn: read.msn,
        ip: None,
        hop: Hop::Wire,
        count: read.count,
        from: read.next,
        to: until,
        rkey: read.rkey,
        va: read.va,
        duplicate: false,
    })
}

impl Responder {
    /// A responder for a QP of `qp_type`.
    pub(crate) fn new(recv: RecvCopy, qp_type: QpType) -> kernel::error::Result<Self> {
        // Built from a constant straight into the allocation.
        const NO_ANSWERS: Answers = Answers {
            atomics: Fifo::new(),
            outbox: Outbox::new(),
        };
        let answers = match qp_type {
            QpType::Rc => Some(KVBox::new(NO_ANSWERS, GFP_KERNEL)?),
            _ => None,
        };
        Ok(Self {
            psn: Psn::default(),
            msn: 0,
            recv,
            recv_from: None,
            recv_placed: 0,
            write: None,
            in_message: None,
            nak_sent: None,
            dropping: false,
            answers,
        })
    }

    /// The answers waiting to leave; `None` for a QP that answers nothing.
    pub(crate) fn outbox(&mut self) -> Option<&mut Outbox> {
        self.answers
            .as_deref_mut()
            .map(|answers| &mut answers.outbox)
    }

    /// Whether nothing waits in the outbox.
    fn outbox_idle(&self) -> bool {
        self.answers
            .as_deref()
            .map_or(true, |answers| answers.outbox.is_idle())
    }

    pub(crate) fn set_psn(&mut self, psn: u32) {
        self.psn = Psn::new(psn);
    }

    /// Back to the state of a new QP (RESET).
    pub(crate) fn reset(&mut self) {
        self.psn = Psn::default();
        self.msn = 0;
        self.recv_from = None;
        self.recv_placed = 0;
        self.write = None;
        self.in_message = None;
        self.nak_sent = None;
        self.dropping = false;
        if let Some(answers) = self.answers.as_deref_mut() {
            answers.atomics.clear();
            answers.outbox.clear();
        }
    }

    /// Forgets what was placed of the message in progress; a receive WQE
    /// it had taken stays for the next message.
    fn abandon_message(&mut self) {
        self.in_message = None;
        self.write = None;
        self.recv_placed = 0;
    }

    /// Gives up the receive WQE of a message in progress; its ID if it came
    /// from the SRQ (the QP must flush it; an RQ WQE is still in the ring).
    pub(crate) fn drop_srq_receive(&mut self) -> Option<u64> {
        let from = self.recv_from.take();
        self.recv_placed = 0;
        self.in_message = None;
        self.write = None;
        (from == Some(ReceiveFrom::Srq)).then_some(self.recv.wr_id)
    }
}

/// Takes a request packet for `qp`.
pub(crate) fn receive<'a>(
    qp: &'a Qp<SrnicDevice>,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
) -> Reply<'a> {
    let this: &SrnicQp = qp;
    let mut upcalls = Upcalls::default();
    let reply = {
        let mut state = this.state.lock();
        let mut reply = handle(qp, &mut state, guard, packet, &mut upcalls);
        // Answers go back along the connection; on the wire, through the
        // outbox whenever something waits there.
        let (ip, hop) = state.path();
        match &mut reply {
            Reply::Packet(p) => {
                p.ip = Some(ip);
                p.hop = hop;
            }
            Reply::Read(read) => read.set_path(ip, hop),
            _ => {}
        }
        // On this node, answers wait only behind the rest of a READ
        // response the requester's run left to this QP's work.
        if hop == Hop::Wire || !state.responder.outbox_idle() {
            reply = through_outbox(qp, &mut state, reply);
        }
        reply
    };
    upcalls.run(qp);
    this.after_upcalls(qp);
    reply
}

/// Leaves the rest of `read`, from packet `next` on, to this QP's work:
/// the requester on this node that asked for it ran out of budget.
pub(crate) fn defer_read(qp: &Qp<SrnicDevice>, read: &ReadResponse<'_>, next: u32) {
    let this: &SrnicQp = qp;
    let mut pending = read.pending();
    pending.next = next;
    let queued = {
        let mut state = this.state.lock();
        match state.responder.outbox() {
            Some(outbox) if read.duplicate => outbox.push_repeated_read(pending),
            Some(outbox) => outbox.push_read(pending),
            None => false,
        }
    };
    // A repeated READ not queued was merged with the response waiting.
    if queued || read.duplicate {
        qp.run_work_soon();
    } else {
        qp.device().counters.inc(Counter::AnswersDropped);
    }
}

/// Routes an answer to a request from the wire: READ responses always
/// wait their turn in the outbox (to go out a burst at a time), other
/// answers only behind something already waiting there.
fn through_outbox<'a>(qp: &Qp<SrnicDevice>, state: &mut QpInner, reply: Reply<'a>) -> Reply<'a> {
    let closing = state.attrs.state == QpState::Error;
    let Some(outbox) = state.responder.outbox() else {
        // Nothing to answer on this QP.
        return reply;
    };
    let queued = match &reply {
        Reply::Read(read) if read.duplicate => outbox.push_repeated_read(read.pending()),
        Reply::Read(read) => outbox.push_read(read.pending()),
        Reply::Packet(packet) if closing => {
            // A NAK that ended the QP: after the answers to the requests
            // before it, and nothing after it.
            match answer_of(packet) {
                Some(answer) if outbox.push_final(answer) => return Reply::Queued,
                _ => {
                    outbox.clear();
                    return reply;
                }
            }
        }
        Reply::Packet(_) if outbox.is_idle() => return reply,
        Reply::Packet(packet) => match answer_of(packet) {
            Some(answer) => outbox.push_answer(answer),
            None => return reply,
        },
        _ => return reply,
    };
    if !queued {
        // A repeated READ whose packets are still to go needs nothing
        // more; anything else found no room.
        if !matches!(&reply, Reply::Read(read) if read.duplicate) {
            qp.device().counters.inc(Counter::AnswersDropped);
        }
        return Reply::None;
    }
    Reply::Queued
}

/// Packs an ACK or NAK.
fn acknowledge<'a>(state: &QpInner, psn: Psn, syndrome: Syndrome) -> Reply<'a> {
    let dest = state.attrs.dest_qp_num;
    match Packet::new(RC_ACKNOWLEDGE, dest, psn) {
        Some(p) => Reply::Packet(p.with_aeth(syndrome.encode(), state.responder.msn & PSN_MASK)),
        None => Reply::None,
    }
}

/// NAKs the packet `psn` with `code` and moves the QP to ERR.
fn refuse<'a>(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    psn: Psn,
    code: NakCode,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    if qp.qp_type() == QpType::Uc {
        // UC has no NAKs: the message is dropped and the QP goes on.
        drop_message(qp, state);
        return Reply::None;
    }
    qp.device().counters.inc(match code {
        NakCode::RemoteAccess => Counter::AccessNaksSent,
        NakCode::RemoteOperation => Counter::OperationNaksSent,
        _ => Counter::InvalidRequestNaksSent,
    });
    let reply = acknowledge(state, psn, Syndrome::Nak(code));
    let this: &SrnicQp = qp;
    this.enter_error(qp, state, upcalls);
    reply
}

fn handle<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    if !matches!(
        state.attrs.state,
        QpState::Rtr | QpState::Rts | QpState::Sqd
    ) {
        return Reply::None;
    }
    match (qp.qp_type(), packet.hdr.info.transport) {
        (QpType::Rc, Transport::Rc) | (QpType::Uc, Transport::Uc)
            if !state.is_from_peer(packet) =>
        {
            qp.device().counters.inc(Counter::ForeignPackets);
            return Reply::None;
        }
        (QpType::Rc, Transport::Rc) => {}
        (QpType::Uc, Transport::Uc) => return unreliable(qp, state, guard, packet, upcalls),
        (QpType::Ud | QpType::Gsi, Transport::Ud) => {
            datagram(qp, state, guard, packet, upcalls);
            return Reply::None;
        }
        _ => {
            qp.device().counters.inc(Counter::MalformedPackets);
            return Reply::None;
        }
    }
    let psn = packet.psn();
    let expected = state.responder.psn;
    let ahead = psn.distance_from(expected);
    if ahead > 0 {
        // Something was lost: ask for it once, drop the rest until it
        // comes. A packet a little past the expected one but older than
        // one already seen since the NAK means the requester went back and
        // the expected packet was lost again: asking once more then spares
        // a whole retransmission timeout.
        let counters = &qp.device().counters;
        if let Some(highest) = state.responder.nak_sent {
            let went_back = psn.is_before(highest) && ahead <= RESEND_LOST_WITHIN;
            if !went_back {
                if highest.is_before(psn) {
                    state.responder.nak_sent = Some(psn);
                }
                counters.inc(Counter::OutOfSequenceRequests);
                return Reply::None;
            }
        }
        counters.inc(Counter::SequenceNaksSent);
        state.responder.nak_sent = Some(psn);
        return acknowledge(state, expected, Syndrome::Nak(NakCode::PsnSequence));
    }
    if ahead < 0 {
        qp.device().counters.inc(Counter::DuplicateRequests);
        return duplicate(qp, state, guard, packet, upcalls);
    }
    state.responder.nak_sent = None;
    let info = packet.hdr.info;
    let continues = matches!(info.position, Position::Middle | Position::Last);
    let in_order = match state.responder.in_message {
        Some(op) => continues && op == info.operation,
        None => !continues,
    };
    if !in_order {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    }
    match info.operation {
        Operation::Send => send(qp, state, guard, packet, upcalls),
        Operation::Write => write(qp, state, guard, packet, upcalls),
        Operation::ReadRequest => read(qp, state, guard, packet, upcalls, false),
        Operation::CompareSwap | Operation::FetchAdd => atomic(qp, state, guard, packet, upcalls),
        Operation::AtomicWrite => atomic_write(qp, state, guard, packet, upcalls),
        Operation::Flush => flush(qp, state, guard, packet, upcalls),
        _ => refuse(qp, state, psn, NakCode::InvalidRequest, upcalls),
    }
}

/// Drops the UC message in progress, up to the next first packet.
fn drop_message(qp: &Qp<SrnicDevice>, state: &mut QpInner) {
    qp.device().counters.inc(Counter::DroppedMessages);
    state.responder.abandon_message();
    state.responder.dropping = true;
}

/// A UC request. Nothing is acknowledged. After a gap in the PSNs the
/// message in progress is lost, and the responder picks up again at the
/// first packet of a later message (with a receive WQE that the lost
/// message had taken, if any). A message the responder cannot take is
/// dropped and counted; the QP goes on.
fn unreliable<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let info = packet.hdr.info;
    let starts = matches!(info.position, Position::First | Position::Only);
    let psn = packet.psn();
    let counters = &qp.device().counters;
    let resp = &mut state.responder;
    if psn != resp.psn {
        counters.inc(Counter::OutOfSequenceRequests);
        if resp.in_message.is_some() && !resp.dropping {
            counters.inc(Counter::DroppedMessages);
        }
        resp.abandon_message();
        resp.dropping = true;
    }
    resp.psn = psn;
    if starts {
        if resp.in_message.is_some() {
            // The last packet of the message in progress never came.
            counters.inc(Counter::DroppedMessages);
            resp.abandon_message();
        }
        resp.dropping = false;
    } else if resp.in_message != Some(info.operation) {
        resp.dropping = true;
    }
    if resp.dropping {
        resp.psn = psn.next();
        return Reply::None;
    }
    let reply = match info.operation {
        Operation::Send => send(qp, state, guard, packet, upcalls),
        Operation::Write => write(qp, state, guard, packet, upcalls),
        _ => {
            drop_message(qp, state);
            Reply::None
        }
    };
    if state.responder.dropping {
        state.responder.psn = psn.next();
    }
    match reply {
        // Loopback: the requester's own memory failed.
        Reply::SourceFault => Reply::SourceFault,
        // An acknowledgement someone asked for: UC has none.
        _ => Reply::None,
    }
}

/// A request the responder has seen before (its ACK got lost).
fn duplicate<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let psn = packet.psn();
    match packet.hdr.info.operation {
        // Reads have no side effects: answered again.
        Operation::ReadRequest => read(qp, state, guard, packet, upcalls, true),
        // Storing the same eight bytes again changes nothing, and a
        // FLUSH has nothing more to place: answered again.
        Operation::AtomicWrite | Operation::Flush => empty_read_response(state, psn),
        Operation::CompareSwap | Operation::FetchAdd => {
            let done = state
                .responder
                .answers
                .as_deref()
                .and_then(|answers| answers.atomics.iter().find(|(done, _)| *done == psn));
            match done {
                Some(&(_, original)) => atomic_acknowledge(state, psn, original),
                None => Reply::None,
            }
        }
        _ if packet.hdr.bth.ack_req => {
            // Everything before the expected PSN has arrived.
            let last = state.responder.psn.add(PSN_MASK);
            acknowledge(state, last, Syndrome::Ack)
        }
        _ => Reply::None,
    }
}

/// Takes a receive WQE for a new message into `state.responder.recv`:
/// `Ok(false)` if none is posted, `Err` if the posted one is malformed.
fn take_receive(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    upcalls: &mut Upcalls,
) -> Result<bool, ()> {
    let this: &SrnicQp = qp;
    if state.responder.recv_from.is_some() {
        return Ok(true);
    }
    let max_sge = this.caps.max_recv_sge;
    if let Some(rq) = &state.rq {
        let producer = if this.user {
            rq.queue.checked_producer().ok_or(())?
        } else {
            rq.producer
        };
        if producer == rq.consumer {
            return Ok(false);
        }
        state
            .responder
            .recv
            .fetch(&rq.queue, rq.consumer, max_sge)
            .map_err(|_| ())?;
        state.responder.recv_from = Some(ReceiveFrom::Rq);
        return Ok(true);
    }
    let Some(srq) = qp.srq() else {
        return Ok(false);
    };
    match srq.take(&mut state.responder.recv) {
        Ok(Some(limit_reached)) => {
            upcalls.srq_limit |= limit_reached;
            state.responder.recv_from = Some(ReceiveFrom::Srq);
            Ok(true)
        }
        Ok(None) => Ok(false),
        Err(_) => Err(()),
    }
}

/// Completes the receive WQE of the message just finished.
#[allow(clippy::too_many_arguments)]
fn complete_receive(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    status: WcStatus,
    opcode: WcOpcode,
    byte_len: u32,
    packet: &Packet<'_>,
    invalidated: Option<u32>,
    upcalls: &mut Upcalls,
) {
    let Some(from) = state.responder.recv_from.take() else {
        return;
    };
    let mut wc = qp.completion(state.responder.recv.wr_id, status, opcode);
    wc.byte_len = byte_len;
    wc.src_qp = state.attrs.dest_qp_num;
    if let (Some(deth), Some(ip)) = (packet.hdr.deth, packet.ip) {
        wc.src_qp = deth.src_qp;
        wc.with_grh = true;
        wc.vlan_id = packet.vlan;
        wc.network_hdr_type = if ip.is_ipv4() {
            network::IPV4
        } else {
            network::IPV6
        };
    }
    if let Some(imm) = packet.hdr.imm {
        wc.with_imm = true;
        wc.ex = imm;
    } else if let Some(rkey) = invalidated {
        wc.with_invalidate = true;
        wc.ex = rkey;
    }
    upcalls
        .recv
        .merge(SrnicCq::push(qp.recv_cq(), &wc, packet.hdr.bth.solicited));
    if from == ReceiveFrom::Rq {
        if let Some(rq) = &mut state.rq {
            rq.consumer = rq.queue.geometry().next(rq.consumer);
            rq.queue.set_consumer(rq.consumer);
        }
    }
    state.responder.recv_placed = 0;
}

/// The end of a SEND or WRITE packet that was executed: next PSN, and an
/// ACK if asked.
fn accepted<'a>(state: &mut QpInner, packet: &Packet<'_>, operation: Operation) -> Reply<'a> {
    let psn = packet.psn();
    let resp = &mut state.responder;
    resp.psn = psn.next();
    if packet.hdr.info.ends_message() {
        resp.msn = resp.msn.wrapping_add(1);
        resp.in_message = None;
    } else {
        resp.in_message = Some(operation);
    }
    if packet.hdr.bth.ack_req {
        acknowledge(state, psn, Syndrome::Ack)
    } else {
        Reply::None
    }
}

/// A UD datagram: Q_Key checked, then the GRH area and the payload go
/// into the next receive WQE. Datagrams are never acknowledged; one that
/// cannot be taken is dropped and counted.
fn datagram(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) {
    let counters = &qp.device().counters;
    let (Some(deth), Some(ip)) = (packet.hdr.deth, packet.ip) else {
        counters.inc(Counter::MalformedPackets);
        return;
    };
    let qkey = if qp.qp_type() == QpType::Gsi {
        crate::requester::GSI_QKEY
    } else {
        state.attrs.qkey
    };
    if deth.qkey != qkey {
        counters.inc(Counter::QkeyViolations);
        return;
    }
    match take_receive(qp, state, upcalls) {
        Ok(true) => {}
        Ok(false) => {
            counters.inc(Counter::NoReceiveDrops);
            return;
        }
        Err(()) => {
            let this: &SrnicQp = qp;
            this.enter_error(qp, state, upcalls);
            return;
        }
    }
    let len = packet.hdr.payload_len as u32;
    let total = len + GRH_LEN as u32;
    if total > state.responder.recv.length {
        complete_receive(
            qp,
            state,
            WcStatus::LocalLengthError,
            WcOpcode::Recv,
            0,
            packet,
            None,
            upcalls,
        );
        return;
    }
    let target = Extent::Local {
        dev: qp.device(),
        sges: SgeList::Copied(&state.responder.recv.sges),
        pd: qp.pd_id(),
        kernel: qp.kernel_memory(),
    };
    let grh = ip.grh();
    let mut placed = payload::store(guard, &target, &grh);
    if placed.is_ok() && len > 0 {
        placed = match packet.payload.as_ref() {
            Some(source) => payload::copy(
                guard,
                source,
                packet.payload_at,
                &target,
                GRH_LEN as u64,
                len,
            ),
            None => Err(CopyError::Source),
        };
    }
    let status = match placed {
        Ok(()) => WcStatus::Success,
        Err(CopyError::Source) => WcStatus::GeneralError,
        Err(CopyError::Destination) => WcStatus::LocalProtectionError,
        // The receive buffer is paged on demand and not present: the
        // datagram is lost (counted) and the receive WQE waits for the
        // next one, by which time its page is faulted in.
        Err(CopyError::Absent(fault)) => {
            let this: &SrnicQp = qp;
            this.want_fault(qp, fault);
            qp.device().counters.inc(Counter::NoReceiveDrops);
            return;
        }
    };
    complete_receive(
        qp,
        state,
        status,
        WcOpcode::Recv,
        total,
        packet,
        None,
        upcalls,
    );
    state.responder.psn = packet.psn().next();
}

fn rnr<'a>(qp: &Qp<SrnicDevice>, state: &mut QpInner, psn: Psn) -> Reply<'a> {
    if qp.qp_type() == QpType::Uc {
        qp.device().counters.inc(Counter::NoReceiveDrops);
        drop_message(qp, state);
        return Reply::None;
    }
    qp.device().counters.inc(Counter::RnrNaksSent);
    acknowledge(state, psn, Syndrome::Rnr(state.attrs.min_rnr_timer))
}

/// A page of memory paged on demand is not present: the QP's work faults
/// it in, and the request waits for it. An RNR NAK asks the requester to
/// send it again after its RNR timer; UC drops the message (nothing asks
/// again, as with any UC loss).
fn wait_for_page<'a>(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    psn: Psn,
    fault: Fault,
) -> Reply<'a> {
    let this: &SrnicQp = qp;
    this.want_fault(qp, fault);
    rnr(qp, state, psn)
}

fn send<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let psn = packet.psn();
    match take_receive(qp, state, upcalls) {
        Ok(true) => {}
        Ok(false) => return rnr(qp, state, psn),
        Err(()) => return refuse(qp, state, psn, NakCode::RemoteOperation, upcalls),
    }
    let len = packet.hdr.payload_len as u32;
    let placed = state.responder.recv_placed;
    let fits = placed
        .checked_add(len)
        .filter(|end| *end <= state.responder.recv.length);
    let Some(end) = fits else {
        complete_receive(
            qp,
            state,
            WcStatus::LocalLengthError,
            WcOpcode::Recv,
            placed,
            packet,
            None,
            upcalls,
        );
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    if len > 0 {
        let Some(source) = packet.payload.as_ref() else {
            return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
        };
        let target = Extent::Local {
            dev: qp.device(),
            sges: SgeList::Copied(&state.responder.recv.sges),
            pd: qp.pd_id(),
            kernel: qp.kernel_memory(),
        };
        match payload::copy(
            guard,
            source,
            packet.payload_at,
            &target,
            u64::from(placed),
            len,
        ) {
            Ok(()) => {}
            Err(CopyError::Source) => return Reply::SourceFault,
            Err(CopyError::Absent(fault)) => return wait_for_page(qp, state, psn, fault),
            Err(CopyError::Destination) => {
                complete_receive(
                    qp,
                    state,
                    WcStatus::LocalProtectionError,
                    WcOpcode::Recv,
                    placed,
                    packet,
                    None,
                    upcalls,
                );
                return refuse(qp, state, psn, NakCode::RemoteOperation, upcalls);
            }
        }
    }
    state.responder.recv_placed = end;
    if packet.hdr.info.ends_message() {
        let invalidated = packet
            .hdr
            .ieth
            .filter(|rkey| memory::invalidate(qp.device(), guard, qp.pd_id(), *rkey).is_ok());
        complete_receive(
            qp,
            state,
            WcStatus::Success,
            WcOpcode::Recv,
            end,
            packet,
            invalidated,
            upcalls,
        );
    }
    accepted(state, packet, Operation::Send)
}

fn write<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let psn = packet.psn();
    if let Some(reth) = packet.hdr.reth {
        if reth.dma_len > limits::MAX_MSG_SIZE {
            // Longer than a message may be.
            return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
        }
        let allowed = state.attrs.qp_access_flags & REMOTE_WRITE != 0
            && (reth.dma_len == 0
                || remote_region(qp, guard, reth.rkey, reth.va, reth.dma_len, REMOTE_WRITE)
                    .is_some());
        if !allowed {
            return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
        }
        state.responder.write = Some(WriteTarget {
            rkey: reth.rkey,
            va: reth.va,
            length: reth.dma_len,
            placed: 0,
        });
    }
    let Some(mut target) = state.responder.write else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    if packet.hdr.imm.is_some() {
        // The immediate consumes a receive WQE; without one, nothing of
        // this packet is placed and it will come again.
        match take_receive(qp, state, upcalls) {
            Ok(true) => {}
            Ok(false) => return rnr(qp, state, psn),
            Err(()) => return refuse(qp, state, psn, NakCode::RemoteOperation, upcalls),
        }
    }
    let len = packet.hdr.payload_len as u32;
    let Some(end) = target
        .placed
        .checked_add(len)
        .filter(|e| *e <= target.length)
    else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    if packet.hdr.info.ends_message() && end != target.length {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    }
    if len > 0 {
        let Some(source) = packet.payload.as_ref() else {
            return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
        };
        let va = target.va.wrapping_add(u64::from(target.placed));
        let Some(span) = remote_region(qp, guard, target.rkey, va, len, REMOTE_WRITE) else {
            return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
        };
        let region = Extent::Region(span);
        match payload::copy(guard, source, packet.payload_at, &region, 0, len) {
            Ok(()) => {}
            Err(CopyError::Source) => return Reply::SourceFault,
            Err(CopyError::Absent(fault)) => return wait_for_page(qp, state, psn, fault),
            Err(CopyError::Destination) => {
                return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls)
            }
        }
    }
    target.placed = end;
    state.responder.write = Some(target);
    if packet.hdr.info.ends_message() {
        state.responder.write = None;
        if packet.hdr.imm.is_some() {
            complete_receive(
                qp,
                state,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                target.length,
                packet,
                None,
                upcalls,
            );
        }
    }
    accepted(state, packet, Operation::Write)
}

fn read<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
    duplicate: bool,
) -> Reply<'a> {
    let psn = packet.psn();
    let Some(reth) = packet.hdr.reth else {
        return Reply::None;
    };
    if reth.dma_len > limits::MAX_MSG_SIZE {
        // Longer than a message may be: its packets would outnumber the
        // PSNs that tell new requests from old ones.
        if duplicate {
            return Reply::None;
        }
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    }
    let mtu = state.segment_bytes();
    let region = if reth.dma_len == 0 {
        None
    } else {
        remote_region(qp, guard, reth.rkey, reth.va, reth.dma_len, REMOTE_READ)
    };
    let allowed =
        state.attrs.qp_access_flags & REMOTE_READ != 0 && (reth.dma_len == 0 || region.is_some());
    if !allowed {
        if duplicate {
            return Reply::None;
        }
        return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
    }
    let Some(packets) = packets_for(reth.dma_len, mtu) else {
        return Reply::None;
    };
    // The response is sent from the region's pages as it goes: those paged
    // on demand are faulted in first (pages that go meanwhile end the
    // response early, and the requester asks again).
    let on_demand = region.as_ref().is_some_and(|span| span.mr.on_demand());
    if let Some(fault) = region
        .as_ref()
        .filter(|_| on_demand)
        .and_then(Span::first_absent)
    {
        return wait_for_page(qp, state, psn, fault);
    }
    let msn = if duplicate {
        state.responder.msn
    } else {
        state.responder.psn = psn.add(packets);
        state.responder.msn = state.responder.msn.wrapping_add(1);
        state.responder.msn
    };
    // A zero-length read is answered by one response without data.
    let Some(span) = region else {
        return match Packet::new(RC_READ_RESPONSE_ONLY, state.attrs.dest_qp_num, psn) {
            Some(p) => Reply::Packet(p.with_aeth(Syndrome::Ack.encode(), msn & PSN_MASK)),
            None => Reply::None,
        };
    };
    Reply::Read(ReadResponse {
        span,
        length: reth.dma_len,
        psn,
        mtu,
        dest: state.attrs.dest_qp_num,
        msn: msn & PSN_MASK,
        ip: None,
        hop: Hop::Wire,
        count: packets,
        from: 0,
        to: packets,
        rkey: reth.rkey,
        va: reth.va,
        duplicate,
    })
}

/// The answer to an ATOMIC WRITE: a READ response without data.
fn empty_read_response<'a>(state: &QpInner, psn: Psn) -> Reply<'a> {
    match Packet::new(RC_READ_RESPONSE_ONLY, state.attrs.dest_qp_num, psn) {
        Some(p) => {
            Reply::Packet(p.with_aeth(Syndrome::Ack.encode(), state.responder.msn & PSN_MASK))
        }
        None => Reply::None,
    }
}

/// Why an atomic's target cannot be operated on now.
enum TargetError {
    /// The NAK to send.
    Refused(NakCode),
    /// Its page is paged on demand and not present.
    Absent(Fault),
}

impl TargetError {
    /// The answer to the request at `psn`: the NAK, or an RNR NAK while
    /// the page is faulted in.
    fn answer<'a>(
        self,
        qp: &Qp<SrnicDevice>,
        state: &mut QpInner,
        psn: Psn,
        upcalls: &mut Upcalls,
    ) -> Reply<'a> {
        match self {
            Self::Refused(code) => refuse(qp, state, psn, code, upcalls),
            Self::Absent(fault) => wait_for_page(qp, state, psn, fault),
        }
    }
}

/// The eight bytes at `va` behind `rkey`, if the key grants `access`; see
/// [`atomic_word`].
fn atomic_target<'g>(
    qp: &Qp<SrnicDevice>,
    guard: &'g RcuReadGuard,
    rkey: u32,
    va: u64,
    access: u32,
) -> core::result::Result<Reached<'g>, TargetError> {
    let span = remote_region(qp, guard, rkey, va, 8, access)
        .ok_or(TargetError::Refused(NakCode::RemoteAccess))?;
    span.translate(guard, 0).map_err(|e| match e {
        Unreachable::Denied => TargetError::Refused(NakCode::RemoteAccess),
        Unreachable::Absent(fault) => TargetError::Absent(fault),
    })
}

/// The target's bytes as one atomic word, while it is borrowed, if they
/// are 8-byte aligned. The owning process and copies into the region may
/// access them meanwhile; `SharedWord` uses the kernel's atomics, which
/// allow that.
fn atomic_word<'r>(target: &'r Reached<'_>) -> Option<SharedWord<'r>> {
    SharedWord::at(&target.bytes())
}

/// RDMA ATOMIC WRITE: eight bytes stored in one go at an aligned target
/// the rkey grants remote write to.
fn atomic_write<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let psn = packet.psn();
    let (Some(reth), Some(source)) = (packet.hdr.reth, packet.payload.as_ref()) else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    // IBA oA19-28: exactly eight bytes, no pad, to an aligned address.
    if packet.hdr.payload_len != 8
        || packet.hdr.bth.pad != 0
        || reth.dma_len != 8
        || reth.va % 8 != 0
    {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    }
    if state.attrs.qp_access_flags & REMOTE_WRITE == 0 {
        return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
    }
    // The value first: the target is held (interrupts off, for a
    // fast-registration region) only for the store.
    let mut value = [0u8; 8];
    let staging = Extent::Inline(SharedRange::from_mut_slice(&mut value));
    match payload::copy(guard, source, packet.payload_at, &staging, 0, 8) {
        Ok(()) => {}
        Err(CopyError::Absent(fault)) => return wait_for_page(qp, state, psn, fault),
        Err(_) => return Reply::SourceFault,
    }
    let target = match atomic_target(qp, guard, reth.rkey, reth.va, REMOTE_WRITE) {
        Ok(target) => target,
        Err(e) => return e.answer(qp, state, psn, upcalls),
    };
    let Some(cell) = atomic_word(&target) else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    cell.store(u64::from_ne_bytes(value));
    drop(target);
    let resp = &mut state.responder;
    resp.psn = psn.next();
    resp.msn = resp.msn.wrapping_add(1);
    empty_read_response(state, psn)
}

/// The access a FLUSH of `placement` type needs of the QP and the region;
/// `None` for a type with no known bit or reserved bits.
fn flush_access(placement: u8) -> Option<u32> {
    const KNOWN: u8 = placement::GLOBAL | placement::PERSISTENT;
    if placement == 0 || placement & !KNOWN != 0 {
        return None;
    }
    let mut access = 0;
    if placement & placement::GLOBAL != 0 {
        access |= FLUSH_GLOBAL;
    }
    if placement & placement::PERSISTENT != 0 {
        access |= FLUSH_PERSISTENT;
    }
    Some(access)
}

/// RDMA FLUSH: the writes before it are to be visible (global placement)
/// or persistent. Both the QP and the region (or window) the rkey names
/// must grant the flush access of each placement type asked for (as rxe
/// checks them); the range is checked like a READ's, or not at all when
/// the whole region is flushed.
///
/// Ordering: the responder executes requests in PSN order, and a WRITE's
/// data is copied into the target pages while its packet is taken, under
/// this QP's lock; so when the FLUSH's turn comes, every write before it
/// is already placed, and a READ response still queued in the outbox goes
/// out before this answer. What is left is to order those stores before
/// the answer, for any reader of the memory: a write barrier. Soft memory
/// has no persistence domain apart from the pages (srnic does not map
/// persistent memory specially), so that barrier is also all a persistent
/// flush can do; srnic advertises both placement types on that basis.
fn flush<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let psn = packet.psn();
    let (Some(feth), Some(reth)) = (packet.hdr.feth, packet.hdr.reth) else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    let Some(access) = flush_access(feth.placement) else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    if state.attrs.qp_access_flags & access != access {
        return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
    }
    let granted = match feth.selectivity {
        selectivity::RANGE => {
            remote_region(qp, guard, reth.rkey, reth.va, reth.dma_len, access).is_some()
        }
        selectivity::MEMORY_REGION => remote_start(qp, guard, reth.rkey)
            .and_then(|start| remote_region(qp, guard, reth.rkey, start, 0, access))
            .is_some(),
        _ => return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls),
    };
    if !granted {
        return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
    }
    if packet.rxe_flush_icrc {
        // The peer is an rxe: this QP's own FLUSHes speak its dialect.
        state.requester.rxe_flush_icrc = true;
    }
    crate::kapi::sync::write_barrier();
    let resp = &mut state.responder;
    resp.psn = psn.next();
    resp.msn = resp.msn.wrapping_add(1);
    empty_read_response(state, psn)
}

fn atomic_acknowledge<'a>(state: &QpInner, psn: Psn, original: u64) -> Reply<'a> {
    match Packet::new(RC_ATOMIC_ACKNOWLEDGE, state.attrs.dest_qp_num, psn) {
        Some(p) => {
            let mut p = p.with_aeth(Syndrome::Ack.encode(), state.responder.msn & PSN_MASK);
            p.hdr.atomic_ack = Some(original);
            Reply::Packet(p)
        }
        None => Reply::None,
    }
}

fn atomic<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    packet: &Packet<'_>,
    upcalls: &mut Upcalls,
) -> Reply<'a> {
    let psn = packet.psn();
    let Some(request) = packet.hdr.atomic else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    if request.va % 8 != 0 {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    }
    if state.attrs.qp_access_flags & REMOTE_ATOMIC == 0 {
        return refuse(qp, state, psn, NakCode::RemoteAccess, upcalls);
    }
    let target = match atomic_target(qp, guard, request.rkey, request.va, REMOTE_ATOMIC) {
        Ok(target) => target,
        Err(e) => return e.answer(qp, state, psn, upcalls),
    };
    let Some(cell) = atomic_word(&target) else {
        return refuse(qp, state, psn, NakCode::InvalidRequest, upcalls);
    };
    let original = if packet.hdr.info.operation == Operation::CompareSwap {
        cell.compare_exchange(request.compare, request.swap_add)
    } else {
        cell.fetch_add(request.swap_add)
    };
    // The region may be invalidated from here on.
    drop(target);
    let resp = &mut state.responder;
    if let Some(answers) = resp.answers.as_deref_mut() {
        if answers.atomics.is_full() {
            answers.atomics.pop();
        }
        let _ = answers.atomics.push((psn, original));
    }
    resp.psn = psn.next();
    resp.msn = resp.msn.wrapping_add(1);
    atomic_acknowledge(state, psn, original)
}
