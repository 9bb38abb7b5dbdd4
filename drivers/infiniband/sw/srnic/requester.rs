// SPDX-License-Identifier: GPL-2.0

//! The requester: consumes send WQEs in order (seed 000) and turns each
//! into request packets: SEND and RDMA WRITE segmented to the path MTU,
//! one packet for an RDMA READ request, an atomic, an ATOMIC WRITE or a
//! FLUSH. It assigns PSNs,
//! asks for an acknowledgement at the end of each message, honours fences
//! and the read/atomic depth (`max_rd_atomic`), and executes the local
//! operations (fast registration, local invalidation) in queue order.
//!
//! The transport state of a WQE lives in its work-ring slot: the PSNs of
//! its first and last packet, and whether it is sent or done.

use crate::completer;
use crate::counters::Counter;
use crate::cq::SrnicCq;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::rxe_abi::wqe::{self, Remote, SendOp, WorkWqe};
use crate::kapi::rdma::verbs::QpState;
use crate::kapi::rdma::verbs::WcStatus;
use crate::kapi::rdma::Qp;
use crate::memory;
use crate::payload::{self, Extent, SgeList, LOCAL_WRITE};
use crate::pure::grh::IpHeader;
use crate::pure::headers::Transport;
use crate::pure::headers::{AtomicEth, Deth, Feth, BTH_LEN, DETH_LEN, ICRC_LEN, IMM_LEN};
use crate::pure::psn::{packets_for, Psn};
use crate::pure::wr::{opcode, request_opcode, QpType};
use crate::qp::{QpInner, SrnicQp, Upcalls};
use crate::transport::{self, Packet};
use crate::wire;
use core::sync::atomic::Ordering;

/// `wqe.state()` of a send WQE in the work ring.
pub(crate) mod wqe_state {
    /// Not (completely) sent yet.
    pub(crate) const PENDING: u32 = 0;
    /// Every packet sent; the answer is awaited.
    pub(crate) const SENT: u32 = 1;
    /// A local operation, executed; its outcome is in `wqe.status()`.
    pub(crate) const DONE: u32 = 2;
}

/// `wqe.status()` of a local operation.
pub(crate) mod local_status {
    pub(crate) const SUCCESS: u32 = 0;
    pub(crate) const PROTECTION: u32 = 1;
    pub(crate) const UNSUPPORTED: u32 = 2;
}

use crate::kapi::rdma::access::send::{
    FENCE as IB_SEND_FENCE, INLINE as IB_SEND_INLINE, SIGNALED as IB_SEND_SIGNALED,
    SOLICITED as IB_SEND_SOLICITED,
};

/// Opcodes of the requests that are not SEND or WRITE.
use crate::pure::headers::opcode::{
    RC_ATOMIC_WRITE, RC_COMPARE_SWAP, RC_FETCH_ADD, RC_FLUSH, RC_RDMA_READ_REQUEST, UD_SEND_ONLY,
    UD_SEND_ONLY_WITH_IMMEDIATE,
};

/// Per-QP requester state.
#[derive(Default)]
pub(crate) struct Requester {
    /// The next PSN to send.
    pub(crate) psn: Psn,
    /// The WQE being sent, or the next one to send.
    pub(crate) index: u32,
    /// Bytes of that WQE already sent.
    pub(crate) sent: u32,
    /// Reads and atomics sent and not yet answered.
    pub(crate) rd_atomic: u32,
    /// An RNR NAK asked for quiet until this time (`now_ns`).
    pub(crate) rnr_until: Option<u64>,
    /// RNR NAKs still tolerated for the oldest WQE.
    pub(crate) rnr_left: u8,
    /// The first PSN not yet acknowledged.
    pub(crate) acked: Psn,
    /// Timeouts still tolerated without progress (from `retry_cnt`).
    pub(crate) retry_left: u8,
    /// When the peer last acknowledged something (`now_ns`), or the first
    /// packet went out after a quiet time.
    pub(crate) last_progress: u64,
    /// One past the highest PSN ever sent (a resend rewinds `psn`, not
    /// this): answers beyond it answer nothing.
    pub(crate) sent_end: Psn,
    /// The PSN from which READ data was last asked for again after a gap
    /// (once per gap: responses already on their way must not each cause
    /// another replay).
    pub(crate) rerequested: Option<Psn>,
    /// Packets that may be out unacknowledged now: halved by every loss,
    /// grown by one with every acknowledgement that moves the window, so
    /// that a lossy path does not resend a whole window per lost packet.
    pub(crate) window: i32,
    /// When the retransmission timer was last looked at (`now_ns`).
    pub(crate) last_check: u64,
    /// FLUSH requests go out with rxe's ICRC rather than the standard one
    /// (`icrc::rxe_flush_icrc`). rxe drops a FLUSH whose ICRC is not its
    /// own, and a standard peer one whose ICRC is rxe's, so a FLUSH that
    /// times out is sent again with the other kind, and the kind that got
    /// an answer stays (as does rxe's once the peer sent a FLUSH with it).
    pub(crate) rxe_flush_icrc: bool,
    /// Completions the completer left to the requester because it was
    /// reading the WQE's payload outside the lock (see
    /// `SrnicQp::reading`), done once the read is over
    /// (`completer::after_read`): an acknowledgement up to this PSN ...
    pub(crate) deferred_ack: Option<Psn>,
    /// ... the oldest WQE's error completion, with this status ...
    pub(crate) deferred_fail: Option<WcStatus>,
    /// ... and the flush of the send queue (the QP is in ERR).
    pub(crate) flush_after_read: bool,
    /// One past the last packet sent that asked for an acknowledgement.
    /// Packets beyond it (the ends of unsignaled messages) asked for
    /// none: if nothing answers for a while, the completer probes.
    pub(crate) asked_end: Psn,
    /// The tail was probed since the last progress.
    pub(crate) probed: bool,
    /// A post left WQEs to the run an answer starts
    /// ([`answer_will_send`]) and no run has looked at the queue since:
    /// the retransmission timer's tick runs the requester if this stays.
    pub(crate) left_to_answer: bool,
}

/// Packets sent and not yet acknowledged, at most. A window is sent per
/// round trip: on a wire whose queues stretch the round trip to
/// milliseconds under load, 128 packets of 1 KiB left both ends idle half
/// the time. It stays below what one QP may have waiting for its receive
/// work at the peer (`wire::STEERED_MAX`, 1024), so that a full window is
/// never dropped there.
const WINDOW: i32 = 512;
const _: () = assert!((WINDOW as u32) < crate::wire::STEERED_MAX);
/// The most response packets one READ may ask for: with a window of other
/// packets outstanding before it, its PSNs stay within half the PSN
/// space, the farthest apart two PSNs can be told in order. Only a READ
/// of nearly 2 GiB at a 256-byte MTU needs more.
const MAX_READ_PACKETS: u32 = (crate::pure::psn::SPACE / 2) - WINDOW as u32;
/// The window is never cut below this many packets.
const MIN_WINDOW: i32 = 4;
/// A long message asks for an acknowledgement every so many packets, so
/// that the window keeps moving.
const ACK_EVERY: u32 = 32;

/// The shortest QP timeout (`4.096 usec << timeout`, about 16.8 ms) under
/// which the end of an unsignaled message may go without asking for an
/// acknowledgement: the completer's tail probe, looked at every
/// `completer::TIMER_TICK_MS`, must come well before the timeout. With
/// shorter timeouts, or none (0), every message end asks.
pub(crate) const MIN_TIMEOUT_FOR_PROBES: u8 = 12;

impl Requester {
    pub(crate) fn set_psn(&mut self, psn: u32) {
        self.psn = Psn::new(psn);
        self.acked = self.psn;
        self.sent_end = self.psn;
        self.asked_end = self.psn;
        self.window = WINDOW;
    }

    /// Packets that may be out now.
    fn window(&self) -> i32 {
        self.window.clamp(MIN_WINDOW, WINDOW)
    }

    /// A packet was lost (a sequence NAK, a gap in READ responses, a
    /// timeout): fewer packets go out at once.
    pub(crate) fn lost(&mut self) {
        self.window = (self.window() / 2).max(MIN_WINDOW);
    }

    /// The window moved: one more packet may go out at once.
    pub(crate) fn delivered(&mut self) {
        self.window = (self.window() + 1).min(WINDOW);
    }

    /// Accounts for a one-packet request its responder answers (an atomic
    /// or ATOMIC WRITE) at the current PSN; moves on to `next_index`.
    fn sent_one_answered(&mut self, wqe: &mut WorkWqe, next_index: u32) {
        wqe.set_first_psn(self.psn.get());
        wqe.set_last_psn(self.psn.get());
        wqe.set_state(wqe_state::SENT);
        wqe.set_has_rd_atomic(true);
        self.psn = self.psn.next();
        self.rd_atomic = self.rd_atomic.saturating_add(1);
        self.index = next_index;
        self.sent = 0;
    }

    /// Starts over at WQE `index`, nothing of it sent and nothing
    /// outstanding (after a flush, or to resend from there).
    pub(crate) fn rewind(&mut self, index: u32) {
        self.index = index;
        self.sent = 0;
        self.rd_atomic = 0;
        self.rnr_until = None;
    }
}

/// Nanoseconds of the monotonic clock (`ktime_get`).
pub(crate) fn now_ns() -> u64 {
    // The monotonic clock starts at boot and never goes back.
    u64::try_from(kernel::time::Ktime::ktime_get().to_ns()).unwrap_or(0)
}

/// The payload bytes of a path MTU (`enum ib_mtu`, validated by modify).
pub(crate) fn mtu_bytes(path_mtu: u32) -> u32 {
    256u32 << path_mtu.clamp(1, 5).saturating_sub(1)
}

/// What a requester's run finds to do next.
// Moved once per packet, as an `Option<Packet>` would be; boxing the
// packet would allocate per packet instead.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Next<'a> {
    /// A request packet to send.
    Send(Packet<'a>),
    /// Nothing it may send now.
    Wait,
    /// A packet whose payload is larger than this run may carry: the QP's
    /// own work sends it.
    LeaveToWork,
}

/// The next request packet of `qp`, carrying at most `max_payload` bytes.
/// Local operations met on the way are executed.
pub(crate) fn next_packet<'a>(
    qp: &'a Qp<SrnicDevice>,
    guard: &'a RcuReadGuard,
    upcalls: &mut Upcalls,
    max_payload: u32,
) -> Next<'a> {
    let this: &'a SrnicQp = qp;
    let mut state = this.state.lock();
    // This run sees every WQE posted so far.
    state.requester.left_to_answer = false;
    loop {
        if !may_send(&mut state) {
            return Next::Wait;
        }
        let index = state.requester.index;
        if index == state.sq.producer {
            return Next::Wait;
        }
        let Ok(mut wqe) = wqe::read_send(&this.work, index) else {
            return Next::Wait;
        };
        if state.requester.sent == 0 {
            match start_message(qp, &mut state, guard, index, &mut wqe, upcalls) {
                Start::Send => {
                    if answered_by_a_message(wqe.opcode()) {
                        this.steered_count.note_request();
                    }
                }
                Start::Done => continue,
                Start::Wait => return Next::Wait,
            }
        }
        let next = match qp.qp_type() {
            QpType::Ud | QpType::Gsi => next_datagram(qp, &mut state, guard, index, wqe, upcalls),
            QpType::Rc => next_connected(qp, &mut state, index, wqe, max_payload, false),
            QpType::Uc => next_connected(qp, &mut state, index, wqe, max_payload, true),
        };
        if let Next::Send(packet) = &next {
            // Set under the lock, so that an acknowledgement (under it
            // too) never completes this WQE while its payload is read.
            // Only for the wire: a QP of this node answers within the
            // send, after it has read the payload, on this CPU.
            if packet.hop == crate::transport::Hop::Wire {
                this.reading.store(index.wrapping_add(1), Ordering::SeqCst);
            }
        }
        return next;
    }
}

/// Whether the QP's state lets the requester send (RTS, or SQD within a
/// message) and no RNR wait holds it back; ends an RNR wait that is over.
fn may_send(state: &mut QpInner) -> bool {
    let sending = match state.attrs.state {
        QpState::Rts => true,
        // SQD finishes the message it is in.
        QpState::Sqd => state.requester.sent > 0,
        _ => false,
    };
    if !sending {
        return false;
    }
    if let Some(until) = state.requester.rnr_until {
        if now_ns() < until {
            return false;
        }
        state.requester.rnr_until = None;
    }
    true
}

/// What to do with a WQE before its first packet.
enum Start {
    /// Send its first packet.
    Send,
    /// A local operation, executed and retired: go on with the next WQE.
    Done,
    /// Not yet: a fence or the limit of outstanding READs and atomics.
    Wait,
}

/// Whether the peer's next SEND or WRITE answers a request of this opcode,
/// as in a ping-pong (`wire::steer`). A READ's or an atomic's answer is
/// its response.
fn answered_by_a_message(opcode: u32) -> bool {
    matches!(
        opcode,
        opcode::SEND
            | opcode::SEND_WITH_IMM
            | opcode::SEND_WITH_INV
            | opcode::RDMA_WRITE
            | opcode::RDMA_WRITE_WITH_IMM
    )
}

/// Executes a local operation (invalidate, fast registration, window
/// bind), or checks that a request may start: a fenced one waits for the
/// READs and atomics before it, and these wait for a free slot of the
/// responder's `max_rd_atomic`.
fn start_message(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &RcuReadGuard,
    index: u32,
    wqe: &mut WorkWqe,
    upcalls: &mut Upcalls,
) -> Start {
    let this: &SrnicQp = qp;
    if wqe.send_flags() & IB_SEND_FENCE != 0 && state.requester.rd_atomic > 0 {
        return Start::Wait;
    }
    match wqe.opcode() {
        opcode::LOCAL_INV | opcode::REG_MR | opcode::BIND_MW => {
            execute_local(qp, state, guard, wqe);
            if wqe::write_send(&this.work, index, wqe).is_err() {
                return Start::Wait;
            }
            state.requester.index = this.work.geometry().next(index);
            completer::retire(qp, state, upcalls);
            Start::Done
        }
        opcode::RDMA_READ
            if !packets_for(wqe.length(), state.segment_bytes())
                .is_some_and(|packets| packets <= MAX_READ_PACKETS) =>
        {
            // Failed in its turn, once the WQEs before it have completed
            // (the requester runs again after each answer); it waits here
            // until then, so nothing after it goes out.
            if state.sq.consumer == index {
                completer::fail_local(qp, state, wqe, WcStatus::LocalLengthError, upcalls);
            }
            Start::Wait
        }
        opcode::RDMA_READ
        | opcode::ATOMIC_CMP_AND_SWP
        | opcode::ATOMIC_FETCH_AND_ADD
        | opcode::ATOMIC_WRITE
        | opcode::FLUSH => {
            let depth = u32::from(state.attrs.max_rd_atomic).max(1);
            if state.requester.rd_atomic >= depth || awaits_pages(qp, guard, index, wqe) {
                Start::Wait
            } else {
                Start::Send
            }
        }
        _ if awaits_pages(qp, guard, index, wqe) => Start::Wait,
        _ => Start::Send,
    }
}

/// Whether a page of the WQE's own memory is paged on demand and not
/// present (what it sends from, or where a READ's data or an atomic's
/// result lands); the QP's work then faults it in and restarts the
/// requester. Checked before the first packet, so that a message's
/// packets find their pages and the answers theirs.
fn awaits_pages(qp: &Qp<SrnicDevice>, guard: &RcuReadGuard, index: u32, wqe: &WorkWqe) -> bool {
    let (extent, len, access) = match wqe.op() {
        SendOp::Send { .. } | SendOp::Write { .. } | SendOp::AtomicWrite { .. } => {
            let Some(data) = wqe_data(qp, index, wqe) else {
                return false;
            };
            (data, wqe.length(), 0)
        }
        SendOp::Read { .. } => (wqe_sges(qp, index, wqe), wqe.length(), LOCAL_WRITE),
        SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => {
            (wqe_sges(qp, index, wqe), 8, LOCAL_WRITE)
        }
        _ => return false,
    };
    let Some(fault) = payload::first_absent(guard, &extent, len, access) else {
        return false;
    };
    let this: &SrnicQp = qp;
    this.want_fault(qp, fault);
    true
}

/// The datagram of a UD or GSI WQE. One that cannot be sent (too long
/// for the MTU) fails, and the QP with it.
fn next_datagram<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    index: u32,
    mut wqe: WorkWqe,
    upcalls: &mut Upcalls,
) -> Next<'a> {
    let this: &SrnicQp = qp;
    let built = build_datagram(qp, state, guard, index, &mut wqe);
    if wqe::write_send(&this.work, index, &wqe).is_err() {
        return Next::Wait;
    }
    match built {
        Ok(packet) => Next::Send(packet),
        Err(status) => {
            state.requester.index = this.work.geometry().next(index);
            completer::fail_local(qp, state, &wqe, status, upcalls);
            Next::Wait
        }
    }
}

/// The next packet of an RC or UC WQE, within the window (a resend goes
/// out whole), or `LeaveToWork` if its payload exceeds `max_payload`.
fn next_connected<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    index: u32,
    mut wqe: WorkWqe,
    max_payload: u32,
    unreliable: bool,
) -> Next<'a> {
    let this: &SrnicQp = qp;
    if payload_of_next(state, &wqe) > max_payload && !copies_in_poster(qp, &wqe) {
        return Next::LeaveToWork;
    }
    let req = &mut state.requester;
    let in_flight = req.psn.distance_from(req.acked);
    let window = req.window();
    // A resend repeats at once what went out before (the peer may have all
    // of it and acknowledges only up to what it is sent again); the window
    // limits new packets.
    let resending = req.psn.is_before(req.sent_end);
    if in_flight >= WINDOW || (in_flight >= window && !resending) {
        return Next::Wait;
    }
    let last_resent = resending && req.psn.next() == req.sent_end;
    if in_flight <= 0 {
        // Quiet until now: the retransmission timer starts here.
        req.last_progress = now_ns();
    }
    let (ip, hop) = state.path();
    let progress = wqe.progress();
    let packet = build(qp, state, index, &mut wqe, unreliable).map(|mut p| {
        p.ip = Some(ip);
        p.hop = hop;
        // UC is never acknowledged. The packet that fills the window, and
        // the last one of a resend, ask for an acknowledgement, or the
        // window would not move.
        p.hdr.bth.ack_req = !unreliable
            && (p.hdr.bth.ack_req
                || p.psn().get() % ACK_EVERY == ACK_EVERY - 1
                || (!resending && in_flight + 1 == window)
                || last_resent);
        p
    });
    let asked = packet.as_ref().is_some_and(|p| p.hdr.bth.ack_req);
    let req = &mut state.requester;
    if asked {
        req.asked_end = req.psn;
    }
    if unreliable {
        // Nothing is outstanding once sent.
        req.acked = req.psn;
    }
    if req.sent_end.is_before(req.psn) {
        req.sent_end = req.psn;
    }
    // A message's middle packets leave its WQE as it was: stored only
    // when its progress changed (five fields, per packet otherwise).
    if wqe.progress() != progress && wqe::write_send(&this.work, index, &wqe).is_err() {
        return Next::Wait;
    }
    packet.map_or(Next::Wait, Next::Send)
}

/// Whether a large piece of `wqe` is sent in the poster's own run rather
/// than left to the QP's work: a SEND of a process that polls its send CQ
/// (a kernel consumer may post from a context that must not copy for
/// long). Such a poster only spins until the SEND completes, and the
/// receiver of a SEND usually polls too, so the work would share a CPU
/// with a poller, and the switches between them would cost a good part of
/// a 64 KiB copy. The poster's own CPU does the copy instead. A WRITE's
/// target sleeps: its CPU is free for the work, which overlaps the copy
/// with the poster.
fn copies_in_poster(qp: &Qp<SrnicDevice>, wqe: &WorkWqe) -> bool {
    let send_cq: &SrnicCq = qp.send_cq();
    matches!(wqe.op(), SendOp::Send { .. }) && qp.is_user() && send_cq.is_polled()
}

/// The payload bytes of the next packet of `wqe`, the WQE the requester
/// is in (of an RC or UC QP).
fn payload_of_next(state: &QpInner, wqe: &WorkWqe) -> u32 {
    match wqe.op() {
        SendOp::Send { .. } | SendOp::Write { .. } => wqe
            .length()
            .saturating_sub(state.requester.sent)
            .min(state.segment_bytes()),
        SendOp::AtomicWrite { .. } => wqe.length(),
        _ => 0,
    }
}

/// Executes a local operation; the outcome goes into the WQE.
fn execute_local(qp: &Qp<SrnicDevice>, _state: &QpInner, guard: &RcuReadGuard, wqe: &mut WorkWqe) {
    let dev = qp.device();
    let pd = qp.pd_id();
    let outcome = match wqe.op() {
        // REG_MR WQEs come only from kernel posts.
        SendOp::RegMr { key, access } => memory::fast_register(dev, guard, pd, key, access),
        SendOp::LocalInvalidate { rkey } => memory::invalidate(dev, guard, pd, rkey),
        SendOp::BindMw(request) => memory::bind_window(dev, guard, pd, qp.qp_num(), &request),
        _ => {
            wqe.set_status(local_status::UNSUPPORTED);
            wqe.set_state(wqe_state::DONE);
            return;
        }
    };
    wqe.set_status(match outcome {
        Ok(()) => local_status::SUCCESS,
        Err(_) => local_status::PROTECTION,
    });
    wqe.set_state(wqe_state::DONE);
}

/// Where the data of the send WQE in slot `index` is: its inline bytes,
/// or its SGEs.
fn wqe_data<'a>(qp: &'a Qp<SrnicDevice>, index: u32, wqe: &WorkWqe) -> Option<Extent<'a>> {
    let this: &'a SrnicQp = qp;
    if wqe.send_flags() & IB_SEND_INLINE != 0 {
        let length = wqe.length();
        let data = wqe::send_inline(&this.work, index, length).ok()?;
        return Some(Extent::Inline(data));
    }
    Some(wqe_sges(qp, index, wqe))
}

/// The SGEs of the send WQE in slot `index`, under the QP's PD.
pub(crate) fn wqe_sges<'a>(qp: &'a Qp<SrnicDevice>, index: u32, wqe: &WorkWqe) -> Extent<'a> {
    let this: &'a SrnicQp = qp;
    Extent::Local {
        dev: qp.device(),
        sges: SgeList::Work {
            queue: &this.work,
            index,
            count: wqe.num_sge(),
        },
        pd: qp.pd_id(),
        kernel: qp.kernel_memory(),
    }
}

/// Q_Keys with the high bit set mean "the QP's own Q_Key".
const QKEY_FROM_QP: u32 = 0x8000_0000;
/// The Q_Key of QP1.
pub(crate) const GSI_QKEY: u32 = 0x8001_0000;
/// UDP header bytes.
const UDP_LEN: usize = 8;

/// Makes the one packet of the datagram WQE in slot `index`.
fn build_datagram<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    guard: &'a RcuReadGuard,
    index: u32,
    wqe: &mut WorkWqe,
) -> Result<Packet<'a>, WcStatus> {
    let this: &'a SrnicQp = qp;
    let dev = qp.device();
    let mtu = crate::pure::mtu::active_mtu_for_netdev(dev.netdev().mtu())
        .map(|m| m.bytes())
        .unwrap_or(0);
    let length = wqe.length();
    if length > mtu {
        return Err(WcStatus::LocalLengthError);
    }
    let ud = wqe.ud();
    let qkey = if qp.qp_type() == QpType::Gsi {
        // QP1 speaks only to QP1s, with their well-known Q_Key.
        GSI_QKEY
    } else if ud.remote_qkey & QKEY_FROM_QP != 0 {
        state.attrs.qkey
    } else {
        ud.remote_qkey
    };
    let imm = match wqe.op() {
        SendOp::Send { imm, .. } => imm,
        _ => None,
    };
    let with_imm = imm.is_some();
    let code = if with_imm {
        UD_SEND_ONLY_WITH_IMMEDIATE
    } else {
        UD_SEND_ONLY
    };
    let psn = state.requester.psn;
    let mut packet =
        Packet::new(code, ud.remote_qpn, psn).ok_or(WcStatus::LocalQpOperationError)?;
    packet.hdr.deth = Some(Deth {
        qkey,
        src_qp: qp.qp_num(),
    });
    packet.hdr.imm = imm;
    packet.hdr.bth.solicited = wqe.send_flags() & IB_SEND_SOLICITED != 0;
    if length > 0 {
        let extent = wqe_data(qp, index, wqe).ok_or(WcStatus::LocalQpOperationError)?;
        packet = packet.with_payload(extent, 0, length);
    }
    // Where it goes: a user AH by number, which must be of the QP's PD;
    // a kernel WR's AH wrote its destination into the WQE. A datagram with
    // neither is not sent (and counted) but completes: UD promises no
    // delivery.
    let av = if ud.ah_num != 0 {
        dev.ahs
            .get(guard, ud.ah_num)
            .filter(|ah| ah.pd_id() == qp.pd_id())
            .map(|ah| ah.av())
    } else if this.user {
        None
    } else {
        wqe.kernel_ud_av()
    };
    if let Some(av) = av {
        let length = usize::try_from(length).map_err(|_| WcStatus::LocalLengthError)?;
        let pad = usize::from(crate::pure::headers::pad_for(length));
        let headers = UDP_LEN + BTH_LEN + DETH_LEN + if with_imm { IMM_LEN } else { 0 };
        let ip_payload_len = headers
            .checked_add(length)
            .and_then(|n| n.checked_add(pad))
            .and_then(|n| n.checked_add(ICRC_LEN))
            .ok_or(WcStatus::LocalLengthError)?;
        packet.ip = Some(IpHeader {
            sgid: av.sgid,
            dgid: av.dgid,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
            flow_label: av.flow_label,
            ip_payload_len: u16::try_from(ip_payload_len).unwrap_or(u16::MAX),
        });
    }
    wqe.set_first_psn(psn.get());
    wqe.set_last_psn(psn.get());
    wqe.set_state(wqe_state::SENT);
    state.requester.psn = psn.next();
    state.requester.index = this.work.geometry().next(index);
    state.requester.sent = 0;
    Ok(packet)
}

/// Where a WQE's next packet goes: the WQE's slot and the one after it,
/// the destination QP, and the packet's PSN.
#[derive(Clone, Copy)]
struct Place {
    index: u32,
    next_index: u32,
    dest: u32,
    psn: Psn,
    /// Its end may go without asking for an acknowledgement if its
    /// completion is not to be seen: the QP's timeout leaves room for a
    /// tail probe.
    probes: bool,
}

/// Makes the next packet of the WQE in slot `index` and moves the
/// requester on; `unreliable` for UC.
fn build<'a>(
    qp: &'a Qp<SrnicDevice>,
    state: &mut QpInner,
    index: u32,
    wqe: &mut WorkWqe,
    unreliable: bool,
) -> Option<Packet<'a>> {
    let this: &'a SrnicQp = qp;
    let mtu = state.segment_bytes();
    let place = Place {
        index,
        next_index: this.work.geometry().next(index),
        dest: state.attrs.dest_qp_num,
        psn: state.requester.psn,
        probes: state.attrs.timeout >= MIN_TIMEOUT_FOR_PROBES,
    };
    let req = &mut state.requester;
    let length = wqe.length();
    let (dest, psn, next_index) = (place.dest, place.psn, place.next_index);
    match wqe.op() {
        SendOp::Read { remote } => build_read(req, wqe, place, remote, mtu),
        SendOp::AtomicWrite { remote } => {
            // Eight bytes with a RETH, answered like a READ.
            let mut packet = Packet::new(RC_ATOMIC_WRITE, dest, psn)?
                .with_reth(remote.addr, remote.rkey, length)
                .with_payload(wqe_data(qp, index, wqe)?, 0, length);
            packet.hdr.bth.ack_req = true;
            req.sent_one_answered(wqe, next_index);
            Some(packet)
        }
        SendOp::Flush {
            remote,
            length,
            placement,
            selectivity,
        } => {
            // FETH and RETH, no payload, answered like a READ: it takes
            // one PSN and one read/atomic slot, and is sent again whole.
            let mut packet =
                Packet::new(RC_FLUSH, dest, psn)?.with_reth(remote.addr, remote.rkey, length);
            packet.hdr.feth = Some(Feth {
                placement,
                selectivity,
            });
            packet.rxe_flush_icrc = req.rxe_flush_icrc;
            packet.hdr.bth.ack_req = true;
            req.sent_one_answered(wqe, next_index);
            Some(packet)
        }
        op @ (SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. }) => {
            let (code, swap_add, compare) = match op {
                SendOp::CompareSwap { compare, swap, .. } => (RC_COMPARE_SWAP, swap, compare),
                SendOp::FetchAdd { add, .. } => (RC_FETCH_ADD, add, 0),
                _ => return None,
            };
            let mut packet = Packet::new(code, dest, psn)?.with_atomic(AtomicEth {
                va: remote.addr,
                rkey: remote.rkey,
                swap_add,
                compare,
            });
            packet.hdr.bth.ack_req = true;
            req.sent_one_answered(wqe, next_index);
            Some(packet)
        }
        op => build_segment(qp, req, wqe, place, op, mtu, unreliable),
    }
}

/// A READ request for what of the READ has not arrived yet.
fn build_read<'a>(
    req: &mut Requester,
    wqe: &mut WorkWqe,
    place: Place,
    remote: Remote,
    mtu: u32,
) -> Option<Packet<'a>> {
    let length = wqe.length();
    let psn = place.psn;
    // After lost responses, only the rest is asked for again.
    let at = req.sent.min(length);
    let rest = length.checked_sub(at)?;
    let packets = packets_for(rest, mtu)?;
    // The remote address is the peer's to check against its region; a sum
    // past 2^64 wraps to an address no region covers, and the peer
    // refuses it.
    let packet = Packet::new(RC_RDMA_READ_REQUEST, place.dest, psn)?.with_reth(
        remote.addr.wrapping_add(u64::from(at)),
        remote.rkey,
        rest,
    );
    if at == 0 {
        wqe.set_first_psn(psn.get());
        wqe.set_last_psn(psn.add(packets.checked_sub(1)?).get());
    }
    wqe.set_state(wqe_state::SENT);
    wqe.set_has_rd_atomic(true);
    req.psn = psn.add(packets);
    req.rd_atomic = req.rd_atomic.saturating_add(1);
    req.index = place.next_index;
    req.sent = 0;
    Some(packet)
}

/// The next packet of a SEND or RDMA WRITE: at most `mtu` bytes from where
/// the last one ended, the RETH on the first, the immediate data or key to
/// invalidate on the last.
fn build_segment<'a>(
    qp: &'a Qp<SrnicDevice>,
    req: &mut Requester,
    wqe: &mut WorkWqe,
    place: Place,
    op: SendOp,
    mtu: u32,
    unreliable: bool,
) -> Option<Packet<'a>> {
    let length = wqe.length();
    let psn = place.psn;
    let at = req.sent;
    let size = length.saturating_sub(at).min(mtu);
    let end = at.checked_add(size)?;
    let first = at == 0;
    let last = end >= length;
    let code = request_opcode(unreliable, wqe.opcode(), first, last)?;
    let mut packet = Packet::new(code, place.dest, psn)?;
    if first {
        wqe.set_first_psn(psn.get());
        if let SendOp::Write { remote, .. } = op {
            packet = packet.with_reth(remote.addr, remote.rkey, length);
        }
    }
    if size > 0 {
        packet = packet.with_payload(wqe_data(qp, place.index, wqe)?, u64::from(at), size);
    }
    if last {
        match op {
            SendOp::Send { imm, invalidate } => {
                packet.hdr.imm = imm;
                packet.hdr.ieth = invalidate;
            }
            SendOp::Write { imm, .. } => packet.hdr.imm = imm,
            _ => {}
        }
        // The end of a message asks for an acknowledgement if its
        // completion is to be seen. An unsignaled one in a stream leaves
        // it to a later message, to every 32nd packet, or to the
        // completer's probe of a quiet tail: one packet fewer per message.
        let this: &SrnicQp = qp;
        packet.hdr.bth.ack_req =
            !place.probes || this.sq_sig_all || wqe.send_flags() & IB_SEND_SIGNALED != 0;
        packet.hdr.bth.solicited = wqe.send_flags() & IB_SEND_SOLICITED != 0;
        wqe.set_last_psn(psn.get());
        wqe.set_state(wqe_state::SENT);
        req.index = place.next_index;
        req.sent = 0;
    } else {
        wqe.set_state(wqe_state::PENDING);
        req.sent = end;
    }
    req.psn = psn.next();
    Some(packet)
}

/// How much one run of a requester may send before the QP's own work (on
/// the QP's CPU) goes on with the rest.
#[derive(Clone, Copy)]
pub(crate) struct Budget {
    /// Packets: the caller may be a doorbell or a softirq, neither of which
    /// may run for long.
    packets: u32,
    /// Payload bytes: packets between QPs of this node carry up to 64 KiB
    /// each. The answer to a READ on this node is charged piece by piece;
    /// what the budget leaves of it waits in the responder's outbox for
    /// that QP's own work.
    pub(crate) bytes: usize,
    /// The largest payload one packet of this run may carry.
    pub(crate) packet_bytes: u32,
    /// A process's own system call: a packet over `packet_bytes` is
    /// copied here after all if the QP is this CPU's own and the CPU its
    /// work would take is busy (`Qp::copy_in_poster`).
    copies_if_work_busy: bool,
}

impl Budget {
    /// Whether a packet with `payload` bytes fits in what is left.
    pub(crate) fn allows(&self, payload: usize) -> bool {
        self.bytes > 0 && u32::try_from(payload).is_ok_and(|n| n <= self.packet_bytes)
    }
}

/// The budget of a run from the QP's work or from an answer's softirq.
pub(crate) const RUN_BUDGET: Budget = Budget {
    packets: 64,
    bytes: 1024 * 1024,
    packet_bytes: u32::MAX,
    copies_if_work_busy: false,
};

/// The budget of a run from a post: a small packet goes out (or, on this
/// node, is delivered) at once in the poster's context, which is the
/// lowest latency; a large one is left to the QP's work, so that its copy
/// runs on the QP's CPU while the poster goes on posting and polling, and
/// the QPs of one process spread their copies over the CPUs (except a
/// SEND whose poster polls, `copies_in_poster`). Packets on the wire (one
/// path MTU) are always small.
const POST_BUDGET: Budget = Budget {
    packet_bytes: 16 * 1024,
    ..RUN_BUDGET
};

/// The budget of a run from a user process's doorbell: its own system
/// call, in which a SEND it polls for (`copies_in_poster`) is copied whole
/// up to 4 MiB, rather than handing the rest of a large one to the QP's
/// work, which would compete with the poller again; so is any large
/// packet of a QP whose own CPU is the poster's when the CPU its work
/// would take is busy with another QP's (`Qp::copy_in_poster`).
const DOORBELL_BUDGET: Budget = Budget {
    bytes: 4 * 1024 * 1024,
    copies_if_work_busy: true,
    ..POST_BUDGET
};

/// Runs the requester of `qp` until it has nothing to send (or has to wait
/// for a response or a timer), or its budget is spent, in which case the
/// QP's own work goes on with it (on the QP's CPU). If another CPU is running
/// it, leaves that CPU a note to look again instead.
pub(crate) fn run(qp: &Qp<SrnicDevice>) {
    run_within(qp, RUN_BUDGET)
}

fn run_within(qp: &Qp<SrnicDevice>, mut budget: Budget) {
    let this: &SrnicQp = qp;
    qp.device().counters.inc(Counter::RequesterRuns);
    if this.requester_busy.swap(true, Ordering::AcqRel) {
        this.requester_again.store(true, Ordering::Release);
        return;
    }
    let mut sender = wire::Sender::new(qp.device())
        .through(this.egress())
        .keeping_route_in(&this.route);
    let mut queue_full = false;
    let mut spent = false;
    loop {
        this.requester_again.store(false, Ordering::Release);
        while !spent && !queue_full {
            if budget.packets == 0 {
                spent = true;
                break;
            }
            budget.packets -= 1;
            let guard = RcuReadGuard::new();
            let mut upcalls = Upcalls::default();
            let next = next_packet(qp, &guard, &mut upcalls, budget.packet_bytes);
            upcalls.run(qp);
            let packet = match next {
                Next::Send(packet) => packet,
                Next::Wait => break,
                Next::LeaveToWork if budget.copies_if_work_busy && qp.copy_in_poster() => {
                    // The QP is this CPU's, and handing the packet over
                    // would gain no CPU: the process copies it itself. The
                    // QPs of one process then copy on both CPUs, this
                    // one's here and the others' in their works.
                    budget.copies_if_work_busy = false;
                    budget.packet_bytes = u32::MAX;
                    budget.packets += 1;
                    continue;
                }
                Next::LeaveToWork => {
                    spent = true;
                    break;
                }
            };
            // Datagrams and UC messages are done once sent: their
            // payload has been read, and no answer will come.
            let done = packet.hdr.deth.is_some()
                || (packet.hdr.info.transport == Transport::Uc && packet.hdr.info.ends_message());
            budget.bytes = budget.bytes.saturating_sub(packet.hdr.payload_len);
            // A READ on this node is answered within the send, as far as
            // the budget goes.
            queue_full = transport::send(qp.device(), &guard, &mut sender, qp, packet, &mut budget);
            // The payload is read: its WQE may complete. One that an
            // acknowledgement could not complete meanwhile completes now.
            this.reading.store(0, Ordering::SeqCst);
            if this.waits_for_read.swap(false, Ordering::SeqCst) {
                completer::after_read(qp);
            }
            if budget.bytes == 0 {
                spent = true;
            }
            if done {
                completer::unanswered_sent(qp);
            }
        }
        // Out before another CPU may send for this QP, so that the packets
        // leave in PSN order. A refused list is like one lost on the wire:
        // the retransmission timer is running.
        if matches!(sender.flush(), Err(wire::SendError::Refused)) {
            queue_full = true;
        }
        this.requester_busy.store(false, Ordering::Release);
        if queue_full {
            // The device queue is full: the QP's work goes on in a moment,
            // rather than this run building lists it would refuse too.
            this.requester_pending.store(true, Ordering::Release);
            qp.run_work_after(QUEUE_FULL_WAIT_MS);
            break;
        }
        if spent {
            // The QP's own work goes on with it, on the QP's CPU. Queued
            // only now that this CPU has let go: a run that found the
            // requester busy would leave just a note, which nobody reads
            // once this run has stopped.
            this.requester_to_work(qp);
            break;
        }
        if !this.requester_again.load(Ordering::Acquire)
            || this.requester_busy.swap(true, Ordering::AcqRel)
        {
            break;
        }
    }
}

/// Runs the requester after a post: at once within the post's budget, or,
/// when the poster holds interrupts off, from the QP's own work (sending
/// enables bottom halves, which must wait until interrupts are on again).
pub(crate) fn run_after_post(qp: &Qp<SrnicDevice>) {
    if crate::kapi::sync::irqs_disabled() {
        let this: &SrnicQp = qp;
        this.requester_to_work(qp);
        return;
    }
    // Completion events of messages delivered on this node within the
    // post go out once, when it returns.
    let _held = qp.device().comp_vectors().hold_raises();
    if qp.is_user() {
        run_within(qp, DOORBELL_BUDGET);
    } else {
        run_within(qp, POST_BUDGET);
    }
}

/// Packets unacknowledged from which a user post on the wire leaves its
/// WQEs to the run that the next acknowledgement starts
/// ([`answer_will_send`]): two acknowledgement intervals, so that the wire
/// stays busy with what is in flight until that run.
const CORK_IN_FLIGHT: i32 = 2 * ACK_EVERY as i32;

/// The most bytes a post may add and still leave its messages to an
/// answer's run ([`answer_will_send`]): a quarter of a list at the
/// 1024-byte path MTU of a 1500-byte wire.
const CORK_MAX_POSTED: u64 = 16 * 1024;

/// Whether the WQEs just posted to `qp` may wait for the requester run an
/// acknowledgement on its way will start (`run_after_answer`, which sees
/// them under the lock it takes the answer under), rather than go out in
/// the post's own run; if so, notes it for the retransmission timer. On a
/// paced wire every run ends in a list handed to the device and its
/// doorbell; a process that posts one message per call would ring it per
/// message. Only for short messages (`posted_bytes`, the post's, at most
/// [`CORK_MAX_POSTED`]: a longer one fills a list of its own, and a SEND
/// is better copied by a poller itself, see `copies_in_poster`), and only
/// while enough packets are in flight that answers are asked for: a post
/// to an idle QP, a latency test's, or one behind a resend or an RNR wait
/// runs at once. An answer may still start no run
/// (lost, or refused: an ACK that cannot pass a READ whose response was
/// lost), so the timer's next tick (`completer::check_timeout`, which a
/// QP without a timeout has not) runs the requester while the note stays.
pub(crate) fn answer_will_send(
    qp: &Qp<SrnicDevice>,
    state: &mut QpInner,
    posted_bytes: u64,
) -> bool {
    let req = &state.requester;
    let left = (1..=CORK_MAX_POSTED).contains(&posted_bytes)
        && qp.qp_type() == QpType::Rc
        && state.attrs.timeout != 0
        && state.attrs.state == QpState::Rts
        && state.peer == transport::Hop::Wire
        && req.rnr_until.is_none()
        && !req.psn.is_before(req.sent_end)
        && req.acked.is_before(req.asked_end)
        && req.psn.distance_from(req.acked) >= CORK_IN_FLIGHT;
    if left {
        state.requester.left_to_answer = true;
    }
    left
}

/// Runs the requester after an answer from the wire moved its state (the
/// window, the read depth, a resend). With bottom halves off (the wire's
/// softirq) the run is left to the QP's own work, if there is anything
/// to send: packets sent now would wait in this CPU's backlog until the
/// softirq ends, and a run on another CPU meanwhile (a post, the work)
/// would overtake them where the device delivers per CPU (a veth, the
/// queues of a multiqueue NIC), which the peer sees as loss. `unsent`:
/// whether the send queue held WQEs not sent yet when the answer was
/// taken; one posted since runs the requester from its post.
pub(crate) fn run_after_answer(qp: &Qp<SrnicDevice>, unsent: bool) {
    if !crate::kapi::sync::bottom_halves_off() {
        run(qp);
        return;
    }
    if unsent {
        let this: &SrnicQp = qp;
        this.requester_to_work(qp);
    }
}

/// How long a requester waits after the device queue refused its packets.
const QUEUE_FULL_WAIT_MS: u32 = 1;

/// Restarts `qp`'s requester if an RNR wait has ended; whether it is still
/// waiting (the QP's own work calls this).
pub(crate) fn kick_waiting(qp: &Qp<SrnicDevice>) -> bool {
    let this: &SrnicQp = qp;
    if this.requester_pending.swap(false, Ordering::AcqRel) {
        run(qp);
    }
    let until = this.state.lock().requester.rnr_until;
    match until {
        Some(until) if now_ns() < until => true,
        Some(_) => {
            run(qp);
            false
        }
        None => false,
    }
}
