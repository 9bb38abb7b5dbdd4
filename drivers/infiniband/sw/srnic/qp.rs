// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the send queue the requester consumes, the receive queue
//! (or an SRQ) the responder consumes, the IBTA state machine and the flush
//! of outstanding work when a QP fails or closes (seed 004).

use crate::counters::Counter;
use crate::cq::{CqUpcalls, SrnicCq};
use crate::device::{limits, SrnicDevice};
use crate::kapi::rdma::rxe_abi::queue::{response, Queue};
use crate::kapi::rdma::rxe_abi::wqe::{self, RecvCopy};
use crate::kapi::rdma::verbs::{
    transition_allowed, AddressVector, QpAttrMask, QpAttributes, QpCaps, QpInit, QpModify, QpQuery,
    QpState, WcOpcode, WcStatus,
};
use crate::kapi::rdma::wr::{RecvChain, SendChain, SendWr};
use crate::kapi::rdma::{Device, Qp, QpEvent, UserData};
use crate::kapi::skb::SkbQueue;
use crate::kapi::sync::SpinLockIrq;
use crate::memory::Fault;
use crate::pure::grh::IpHeader;
use crate::pure::ring::RingGeometry;
use crate::pure::wr::{QpType, SendLimits};
use crate::requester::{mtu_bytes, Requester};
use crate::responder::Responder;
use crate::transport::{Hop, Packet};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use kernel::prelude::*;

/// Driver data of a QP.
#[pin_data]
pub(crate) struct SrnicQp {
    #[pin]
    pub(crate) state: SpinLockIrq<QpInner>,
    /// What the requester reads: kernel WQEs, or validated copies of user
    /// WQEs. Slots are written only under `state`'s lock, for WQEs not yet
    /// handed to the requester.
    pub(crate) work: Queue,
    pub(crate) caps: QpCaps,
    pub(crate) sq_sig_all: bool,
    pub(crate) user: bool,
    /// One CPU at a time runs the requester; others leave it a note.
    pub(crate) requester_busy: AtomicBool,
    pub(crate) requester_again: AtomicBool,
    /// The requester stopped at its budget with work left; the QP's own
    /// work goes on with it.
    pub(crate) requester_pending: AtomicBool,
    /// One past the SQ index of the WQE whose payload the requester is
    /// reading outside the QP's lock for the wire (0: none). Set under the
    /// lock, cleared without it. A resend may be reading a WQE when the
    /// acknowledgement of its first send arrives, and a QP may fail (or be
    /// moved to ERR) while its requester reads: completing the WQE then
    /// would let the consumer free (or reuse) memory that is still read,
    /// which for a kernel consumer's DMA-lkey memory is a use after free.
    /// The completer leaves such completions to the requester instead
    /// (`waits_for_read`, and the notes in `Requester`).
    pub(crate) reading: AtomicU32,
    /// Completions wait for the requester's read to end (see `reading`).
    pub(crate) waits_for_read: AtomicBool,
    /// A user QP in ERR with its own RQ: receives posted now reach the
    /// kernel by no call, so the QP's own work flushes them.
    needs_sweep: AtomicBool,
    /// The interface index the connection's packets leave through (its
    /// source GID's netdev: a VLAN GID's is the VLAN), 0 if unknown.
    egress: AtomicI32,
    /// Memory paged on demand that an access of this QP found absent, for
    /// the QP's work to fault in.
    #[pin]
    fault: SpinLockIrq<Option<Fault>>,
    /// Received packets of multi-packet messages, waiting for the QP's
    /// receive work on another CPU (`wire::steer`).
    #[pin]
    pub(crate) steered: SkbQueue,
    /// Packets steered and not yet through the transport, counted against
    /// the device's bound too. While there are any, every packet for the
    /// QP from the wire is steered too, so that none overtakes them.
    pub(crate) steered_count: crate::wire::SteeredCount,
    /// The route of the requester's packets, kept between its runs.
    #[pin]
    pub(crate) route: crate::wire::RouteKeeper,
}

/// How often receives posted to user QPs in ERR are flushed.
pub(crate) const SWEEP_INTERVAL_MS: u32 = 20;

pub(crate) struct SendQueue {
    /// The ring a user process writes, same geometry as the work ring.
    pub(crate) user: Option<Queue>,
    /// WQEs posted (kernel) or fetched from the user ring.
    pub(crate) producer: u32,
    /// The oldest WQE not yet completed.
    pub(crate) consumer: u32,
}

pub(crate) struct RecvQueue {
    pub(crate) queue: Queue,
    /// WQEs posted by a kernel consumer (user space keeps its own in the
    /// ring).
    pub(crate) producer: u32,
    pub(crate) consumer: u32,
}

/// The payload of one packet between QPs of this node (see
/// [`QpInner::segment_bytes`]): as much as a GSO packet carries.
pub(crate) const LOCAL_SEGMENT_BYTES: u32 = 64 * 1024;

pub(crate) struct QpInner {
    pub(crate) attrs: QpAttributes,
    pub(crate) sq: SendQueue,
    pub(crate) rq: Option<RecvQueue>,
    pub(crate) requester: Requester,
    pub(crate) responder: Responder,
    /// Where the connected peer (RC, UC) is.
    pub(crate) peer: Hop,
}

impl QpInner {
    /// The IP header of the connection's packets (payload length left for
    /// the wire to fill), and where they go.
    pub(crate) fn path(&self) -> (IpHeader, Hop) {
        let av = &self.attrs.av;
        let ip = IpHeader {
            sgid: av.sgid,
            dgid: av.dgid,
            traffic_class: av.traffic_class,
            hop_limit: av.hop_limit,
            flow_label: av.flow_label,
            ip_payload_len: 0,
        };
        (ip, self.peer)
    }

    /// Whether a packet for this connected QP (RC, UC) comes from its
    /// peer: from the peer's GID to ours, and the way the peer is reached
    /// (a peer on this node never sends over the wire, so a wire packet
    /// claiming to be from it is forged).
    pub(crate) fn is_from_peer(&self, packet: &Packet<'_>) -> bool {
        let av = &self.attrs.av;
        let by_wire = packet.hop == Hop::Wire;
        packet
            .ip
            .is_some_and(|ip| ip.sgid == av.dgid && ip.dgid == av.sgid)
            && by_wire == (self.peer == Hop::Wire)
    }

    /// The payload bytes of one packet of this connection: the path MTU
    /// on the wire; between QPs of this node, where no packet is ever
    /// framed, [`LOCAL_SEGMENT_BYTES`], so that a message costs a few
    /// hand-overs (each copying straight from MR to MR) instead of one per
    /// path MTU. Both ends of a connection see the same hop kind, so they
    /// agree on it, and `is_from_peer` keeps wire packets away from it.
    pub(crate) fn segment_bytes(&self) -> u32 {
        match self.peer {
            Hop::Wire => mtu_bytes(self.attrs.path_mtu),
            Hop::ThisDevice | Hop::Device(_) => LOCAL_SEGMENT_BYTES,
        }
    }
}

/// Upcalls collected under the QP lock, run after it is released.
#[derive(Default)]
#[must_use]
pub(crate) struct Upcalls {
    pub(crate) send: CqUpcalls,
    pub(crate) recv: CqUpcalls,
    events: [Option<QpEvent>; 2],
    /// The QP's SRQ drained below its limit.
    pub(crate) srq_limit: bool,
}

impl Upcalls {
    pub(crate) fn event(&mut self, event: QpEvent) {
        if let Some(slot) = self.events.iter_mut().find(|e| e.is_none()) {
            *slot = Some(event);
        }
    }

    pub(crate) fn run(self, qp: &Qp<SrnicDevice>) {
        self.send.run(qp.send_cq());
        self.recv.run(qp.recv_cq());
        for event in self.events.into_iter().flatten() {
            qp.event(event);
        }
        if self.srq_limit {
            if let Some(srq) = qp.srq() {
                srq.limit_event();
            }
        }
    }
}

fn ring(capacity: u32, slot: u32) -> Result<RingGeometry> {
    // A QP without receives still has a one-slot ring: librxe maps it.
    RingGeometry::new(capacity.max(1), slot, limits::MAX_QP_WR).map_err(|_| EINVAL)
}

impl SrnicQp {
    pub(crate) fn create(
        dev: &Device<SrnicDevice>,
        init: &QpInit,
        user: Option<&UserData>,
    ) -> Result<(QpCaps, impl PinInit<Self, Error>)> {
        let caps = init.caps;
        if init.create_flags != 0 {
            return Err(EINVAL);
        }
        if caps.max_send_wr > limits::MAX_QP_WR
            || caps.max_recv_wr > limits::MAX_QP_WR
            || caps.max_send_sge > limits::MAX_SGE
            || caps.max_recv_sge > limits::MAX_SGE
            || caps.max_inline_data > limits::MAX_INLINE
        {
            return Err(EINVAL);
        }
        if init.qp_type == QpType::Gsi && user.is_some() {
            return Err(EINVAL);
        }
        dev.counts.qp.acquire(limits::MAX_QP)?;
        let made = Self::make_queues(init, user).and_then(|q| {
            let responder =
                Responder::new(RecvCopy::with_capacity(limits::MAX_SGE)?, init.qp_type)?;
            Ok((q, responder))
        });
        let ((work, sq, rq, actual), responder) = made.inspect_err(|_| dev.counts.qp.release())?;
        let is_user = user.is_some();
        let sq_sig_all = init.sq_sig_all;
        let steered_count = crate::wire::SteeredCount::new(dev);
        Ok((
            actual,
            try_pin_init!(Self {
                state <- new_spinlock_irq!(QpInner {
                    attrs: QpAttributes::default(),
                    sq,
                    rq,
                    requester: Requester::default(),
                    responder,
                    peer: Hop::Wire,
                }),
                work,
                caps: actual,
                sq_sig_all,
                user: is_user,
                requester_busy: AtomicBool::new(false),
                requester_again: AtomicBool::new(false),
                requester_pending: AtomicBool::new(false),
                reading: AtomicU32::new(0),
                waits_for_read: AtomicBool::new(false),
                needs_sweep: AtomicBool::new(false),
                egress: AtomicI32::new(0),
                fault <- new_spinlock_irq!(None),
                steered <- SkbQueue::new(),
                steered_count,
                route <- new_spinlock_irq!(None),
            }? Error),
        ))
    }

    fn make_queues(
        init: &QpInit,
        user: Option<&UserData>,
    ) -> Result<(Queue, SendQueue, Option<RecvQueue>, QpCaps)> {
        let caps = init.caps;
        let send_slot = wqe::send_slot_size(caps.max_send_sge, caps.max_inline_data);
        let send = ring(caps.max_send_wr, send_slot)?;
        let room = wqe::send_slot_room(send.elem_size());
        let mut actual = QpCaps {
            max_send_wr: send.capacity(),
            // Report what the slot really holds: librxe bounds its writes
            // by these.
            max_send_sge: (room / 16).min(limits::MAX_SGE),
            max_inline_data: room.min(limits::MAX_INLINE),
            ..Default::default()
        };
        let work = Queue::new(send)?;
        let mut user_sq = None;
        let mut sq_mi = Default::default();
        if let Some(user) = user {
            let mut queue = Queue::new(send)?;
            sq_mi = queue.share(user)?;
            user_sq = Some(queue);
        }
        let mut rq = None;
        let mut rq_mi = None;
        if !init.has_srq {
            let recv = ring(caps.max_recv_wr, wqe::recv_slot_size(caps.max_recv_sge))?;
            actual.max_recv_wr = recv.capacity();
            actual.max_recv_sge = wqe::recv_slot_sges(recv.elem_size()).min(limits::MAX_SGE);
            let mut queue = Queue::new(recv)?;
            if let Some(user) = user {
                rq_mi = Some(queue.share(user)?);
            }
            rq = Some(RecvQueue {
                queue,
                producer: 0,
                consumer: 0,
            });
        }
        if let Some(user) = user {
            response::qp(user, rq_mi, sq_mi)?;
        }
        Ok((
            work,
            SendQueue {
                user: user_sq,
                producer: 0,
                consumer: 0,
            },
            rq,
            actual,
        ))
    }

    fn limits(&self) -> SendLimits {
        SendLimits {
            max_sge: self.caps.max_send_sge,
            max_inline: self.caps.max_inline_data,
            max_message: limits::MAX_MSG_SIZE,
        }
    }

    pub(crate) fn query(&self) -> QpQuery {
        let state = self.state.lock();
        QpQuery {
            attrs: state.attrs,
            caps: self.caps,
            sq_sig_all: self.sq_sig_all,
        }
    }

    pub(crate) fn modify(qp: &Qp<SrnicDevice>, modify: &QpModify) -> Result {
        let this: &SrnicQp = qp;
        let mask = modify.mask;
        validate(qp, modify)?;
        // A destination that is one of this node's srnic GIDs is reached
        // without the wire.
        let peer = mask
            .has(QpAttrMask::AV)
            .then(|| crate::transport::hop_to(qp.device(), &modify.attrs.av.dgid));
        // The GID entry the core chose, not the address (a VLAN's IPv6
        // link-local address is also its real device's): the connection's
        // packets leave through that entry's netdev.
        let egress = mask.has(QpAttrMask::AV).then(|| {
            crate::wire::egress_of_index(qp.device(), modify.attrs.av.sgid_index).unwrap_or(0)
        });
        let mut upcalls = Upcalls::default();
        {
            let mut state = this.state.lock();
            let current = state.attrs.state;
            let next = if mask.has(QpAttrMask::STATE) {
                modify.attrs.state
            } else {
                current
            };
            if let Some(claimed) = modify.cur_state {
                if claimed != current && current != QpState::Error {
                    return Err(EINVAL);
                }
            }
            if !transition_allowed(current, next, qp.qp_type(), mask) {
                return Err(EINVAL);
            }
            // A path moved between the wire and this node would change
            // the segment size under WQEs already sent (their PSNs count
            // segments of the old size): only a connection not yet
            // running may do that.
            let flips = peer.is_some_and(|p| (p == Hop::Wire) != (state.peer == Hop::Wire));
            if flips && matches!(current, QpState::Rts | QpState::Sqd) {
                return Err(EINVAL);
            }
            apply(&mut state.attrs, modify);
            state.attrs.state = next;
            if let Some(peer) = peer {
                state.peer = peer;
            }
            if let Some(egress) = egress {
                this.egress.store(egress, Ordering::Relaxed);
            }
            if mask.has(QpAttrMask::SQ_PSN) {
                state.requester.set_psn(modify.attrs.sq_psn);
            }
            if mask.has(QpAttrMask::RQ_PSN) {
                state.responder.set_psn(modify.attrs.rq_psn);
            }
            if mask.has(QpAttrMask::RNR_RETRY) {
                state.requester.rnr_left = modify.attrs.rnr_retry;
            }
            if mask.has(QpAttrMask::RETRY_CNT) {
                state.requester.retry_left = modify.attrs.retry_cnt;
            }
            this.needs_sweep.store(
                next == QpState::Error && this.user && state.rq.is_some(),
                Ordering::Release,
            );
            match next {
                QpState::Reset if current != QpState::Reset => this.reset(&mut state),
                QpState::Error if current != QpState::Error => {
                    this.flush(qp, &mut state, &mut upcalls);
                    if qp.srq().is_some() {
                        upcalls.event(QpEvent::LastWqeReached);
                    }
                }
                QpState::Sqd if current != QpState::Sqd => {
                    // Nothing is in flight before the transport runs; the
                    // queue is drained as soon as it is asked to be.
                    state.attrs.sq_draining = false;
                    if state.attrs.en_sqd_async_notify {
                        upcalls.event(QpEvent::SqDrained);
                    }
                }
                _ => {}
            }
        }
        upcalls.run(qp);
        this.schedule_sweep(qp);
        // Leaving SQD, or RNR retries granted again: work may be waiting.
        crate::requester::run(qp);
        Ok(())
    }

    /// The interface the connection's packets leave through, if known;
    /// otherwise each flow finds it from its source GID.
    pub(crate) fn egress(&self) -> Option<i32> {
        Some(self.egress.load(Ordering::Relaxed)).filter(|ifindex| *ifindex > 0)
    }

    fn schedule_sweep(&self, qp: &Qp<SrnicDevice>) {
        if self.needs_sweep.load(Ordering::Acquire) {
            qp.run_work_after(SWEEP_INTERVAL_MS);
        }
    }

    /// Flushes what a process posted to this QP since it entered ERR;
    /// returns whether the QP still needs sweeping.
    pub(crate) fn sweep(qp: &Qp<SrnicDevice>) -> bool {
        let this: &SrnicQp = qp;
        if !this.needs_sweep.load(Ordering::Acquire) {
            return false;
        }
        let mut upcalls = Upcalls::default();
        {
            let mut state = this.state.lock();
            if state.attrs.state != QpState::Error {
                return false;
            }
            this.flush(qp, &mut state, &mut upcalls);
        }
        upcalls.run(qp);
        true
    }

    /// RESET discards all work without completions.
    fn reset(&self, state: &mut QpInner) {
        let sq = &mut state.sq;
        let start = match &sq.user {
            Some(user) => user.checked_producer().unwrap_or(0),
            None => 0,
        };
        sq.producer = start;
        sq.consumer = start;
        if let Some(user) = &sq.user {
            user.set_consumer(start);
        }
        if let Some(rq) = &mut state.rq {
            let start = if self.user {
                rq.queue.checked_producer().unwrap_or(0)
            } else {
                0
            };
            rq.producer = start;
            rq.consumer = start;
            rq.queue.set_producer(start);
            rq.queue.set_consumer(start);
        }
        let attrs = &mut state.attrs;
        *attrs = QpAttributes::default();
        self.egress.store(0, Ordering::Relaxed);
        state.requester = Requester::default();
        // The requester starts where the send queue now does: the slots
        // before it hold WQEs of the QP's last life (and ones refused as
        // malformed), which must not be sent again.
        state.requester.rewind(state.sq.consumer);
        state.responder.reset();
    }

    /// Completes every outstanding WQE with `IB_WC_WR_FLUSH_ERR`, SQ and RQ
    /// each in posting order, each exactly once (the consumer index moves
    /// past each as it completes).
    pub(crate) fn flush(&self, qp: &Qp<SrnicDevice>, state: &mut QpInner, upcalls: &mut Upcalls) {
        let recv_cq = qp.recv_cq();
        if crate::completer::must_wait_for_read(self, None) {
            // The requester reads a WQE's payload: the send queue is
            // flushed once it is done (the receive queue now).
            state.requester.flush_after_read = true;
        } else {
            self.flush_send_queue(qp, state, upcalls);
        }
        // A receive taken from the SRQ for a message still arriving is this
        // QP's to flush.
        if let Some(wr_id) = state.responder.drop_srq_receive() {
            let wc = qp.completion(wr_id, WcStatus::WrFlushError, WcOpcode::Recv);
            upcalls.recv.merge(SrnicCq::push(recv_cq, &wc, false));
        }
        if let Some(rq) = &mut state.rq {
            let geometry = *rq.queue.geometry();
            let end = if self.user {
                rq.queue.checked_producer().unwrap_or(rq.consumer)
            } else {
                rq.producer
            };
            while rq.consumer != end {
                let index = rq.consumer;
                let wr_id = wqe::recv_wr_id(&rq.queue, index).unwrap_or(0);
                let wc = qp.completion(wr_id, WcStatus::WrFlushError, WcOpcode::Recv);
                upcalls.recv.merge(SrnicCq::push(recv_cq, &wc, false));
                rq.consumer = geometry.next(index);
            }
            rq.queue.set_consumer(rq.consumer);
        }
    }

    /// The send queue's part of [`Self::flush`].
    pub(crate) fn flush_send_queue(
        &self,
        qp: &Qp<SrnicDevice>,
        state: &mut QpInner,
        upcalls: &mut Upcalls,
    ) {
        let send_cq = qp.send_cq();
        let sq = &mut state.sq;
        let geometry = *self.work.geometry();
        // User WQEs not yet fetched are flushed too, their IDs read once;
        // a hostile producer index (out of range, or lapping the WQEs in
        // flight) flushes what was fetched.
        let end = match &sq.user {
            Some(user) => user
                .checked_producer()
                .filter(|&p| geometry.new_entries(p, sq.producer, sq.consumer).is_some())
                .unwrap_or(sq.producer),
            None => sq.producer,
        };
        // WQEs before the kernel's producer index were fetched (checked
        // copies in the work ring); the rest are read from the user's ring.
        let mut fetched = geometry.used(sq.producer, sq.consumer);
        while sq.consumer != end {
            let index = sq.consumer;
            let (wr_id, opcode) = match (&sq.user, fetched) {
                (Some(user), 0) => (
                    wqe::user_send_wr_id(user, index).unwrap_or(0),
                    WcOpcode::Send,
                ),
                _ => wqe::send_summary(&self.work, index)
                    .map(|s| (s.wr_id, WcOpcode::of_send(s.opcode)))
                    .unwrap_or((0, WcOpcode::Send)),
            };
            fetched = fetched.saturating_sub(1);
            let wc = qp.completion(wr_id, WcStatus::WrFlushError, opcode);
            upcalls.send.merge(SrnicCq::push(send_cq, &wc, false));
            sq.consumer = geometry.next(index);
        }
        sq.producer = sq.consumer;
        if let Some(user) = &sq.user {
            user.set_consumer(sq.consumer);
        }
        state.requester.rewind(sq.consumer);
    }

    /// Moves the QP to ERR on its own (a bad WQE or ring index).
    fn fail(&self, qp: &Qp<SrnicDevice>, state: &mut QpInner, upcalls: &mut Upcalls) {
        if state.attrs.state == QpState::Error {
            return;
        }
        upcalls.event(QpEvent::Fatal);
        self.enter_error(qp, state, upcalls);
    }

    /// Moves the QP to ERR after an error completion (IBTA 10.3.1: the
    /// transport reports it through the CQ, not an event) and flushes
    /// everything outstanding.
    pub(crate) fn enter_error(
        &self,
        qp: &Qp<SrnicDevice>,
        state: &mut QpInner,
        upcalls: &mut Upcalls,
    ) {
        if state.attrs.state == QpState::Error {
            return;
        }
        state.attrs.state = QpState::Error;
        self.needs_sweep
            .store(self.user && state.rq.is_some(), Ordering::Release);
        self.flush(qp, state, upcalls);
        if qp.srq().is_some() {
            upcalls.event(QpEvent::LastWqeReached);
        }
    }

    /// The QP's `needs_sweep` work, if it has some, is scheduled.
    pub(crate) fn after_upcalls(&self, qp: &Qp<SrnicDevice>) {
        self.schedule_sweep(qp);
    }

    pub(crate) fn post_send(qp: &Qp<SrnicDevice>, wrs: &mut SendChain<'_>) -> Result {
        let this: &SrnicQp = qp;
        let limits = this.limits();
        let mut upcalls = Upcalls::default();
        let result = (|| {
            let mut state = this.state.lock();
            let qp_state = state.attrs.state;
            check_can_send(qp_state)?;
            let in_error = qp_state == QpState::Error;
            for wr in wrs.by_ref() {
                let sq = &mut state.sq;
                let geometry = *this.work.geometry();
                if geometry.is_full(sq.producer, sq.consumer) {
                    return Err(ENOMEM);
                }
                let ud_av = ud_destination(qp, &wr);
                if in_error {
                    // Flushed below whatever it asks for (`ib_drain_qp`
                    // posts an RDMA WRITE even on UD QPs).
                    wqe::write_flush_marker(&this.work, sq.producer, &wr)?;
                } else {
                    wqe::write_kernel_send(
                        &this.work,
                        sq.producer,
                        &wr,
                        qp.qp_type(),
                        &limits,
                        ud_av.as_ref(),
                    )?;
                }
                sq.producer = geometry.next(sq.producer);
            }
            if in_error {
                this.flush(qp, &mut state, &mut upcalls);
            }
            Ok(())
        })();
        upcalls.run(qp);
        // What was queued before a failing WR goes out too.
        crate::requester::run_after_post(qp);
        result
    }

    /// librxe rang the doorbell: fetch and validate new user WQEs.
    pub(crate) fn doorbell(qp: &Qp<SrnicDevice>) -> Result {
        let this: &SrnicQp = qp;
        let limits = this.limits();
        let mut upcalls = Upcalls::default();
        let mut left_to_answer = false;
        let result = (|| {
            let mut state = this.state.lock();
            let qp_state = state.attrs.state;
            check_can_send(qp_state)?;
            if qp_state == QpState::Error {
                this.flush(qp, &mut state, &mut upcalls);
                return Ok(());
            }
            let Some(user) = &state.sq.user else {
                return Err(EINVAL);
            };
            let Some(end) = user.checked_producer() else {
                pr_warn_ratelimited!(
                    "{}: QP {}: send queue producer index out of range\n",
                    qp.device().name(),
                    qp.qp_num()
                );
                this.fail(qp, &mut state, &mut upcalls);
                return Ok(());
            };
            let geometry = *this.work.geometry();
            // A producer that laps the consumer would have the WQEs in
            // flight overwritten in the work ring (lost completions, and
            // slots changing under the requester): as hostile as one out
            // of range.
            if geometry
                .new_entries(end, state.sq.producer, state.sq.consumer)
                .is_none()
            {
                pr_warn_ratelimited!(
                    "{}: QP {}: send queue producer index laps the work in flight\n",
                    qp.device().name(),
                    qp.qp_num()
                );
                this.fail(qp, &mut state, &mut upcalls);
                return Ok(());
            }
            let mut posted_bytes = 0u64;
            while state.sq.producer != end {
                let sq = &mut state.sq;
                let index = sq.producer;
                let Some(user) = &sq.user else { break };
                let fetched = wqe::fetch_user_send(&this.work, user, index, qp.qp_type(), &limits);
                let length = match fetched {
                    Ok(length) => length,
                    Err(err) => {
                        pr_warn_ratelimited!(
                            "{}: QP {}: invalid send WQE ({:?})\n",
                            qp.device().name(),
                            qp.qp_num(),
                            err
                        );
                        // The bad WQE completes in error, the rest flush.
                        let wr_id = wqe::send_summary(&this.work, index)
                            .map(|s| s.wr_id)
                            .unwrap_or(0);
                        if index == sq.consumer {
                            let wc = qp.completion(
                                wr_id,
                                WcStatus::LocalQpOperationError,
                                WcOpcode::Send,
                            );
                            upcalls.send.merge(SrnicCq::push(qp.send_cq(), &wc, false));
                            sq.consumer = geometry.next(index);
                            sq.producer = sq.consumer;
                            user.set_consumer(sq.consumer);
                        }
                        this.fail(qp, &mut state, &mut upcalls);
                        return Ok(());
                    }
                };
                posted_bytes = posted_bytes.saturating_add(u64::from(length));
                sq.producer = geometry.next(index);
            }
            left_to_answer = crate::requester::answer_will_send(qp, &mut state, posted_bytes);
            Ok(())
        })();
        upcalls.run(qp);
        this.schedule_sweep(qp);
        if left_to_answer {
            qp.device().counters.inc(Counter::PostsLeftToAnswers);
        } else {
            crate::requester::run_after_post(qp);
        }
        result
    }

    pub(crate) fn post_recv(qp: &Qp<SrnicDevice>, wrs: &mut RecvChain<'_>) -> Result {
        let this: &SrnicQp = qp;
        let max_sge = this.caps.max_recv_sge;
        let mut upcalls = Upcalls::default();
        let result = (|| {
            let mut state = this.state.lock();
            if state.attrs.state == QpState::Reset {
                return Err(EINVAL);
            }
            let in_error = state.attrs.state == QpState::Error;
            let Some(rq) = &mut state.rq else {
                // Receives of this QP come from its SRQ.
                return Err(EINVAL);
            };
            let geometry = *rq.queue.geometry();
            for wr in wrs.by_ref() {
                if geometry.is_full(rq.producer, rq.consumer) {
                    return Err(ENOMEM);
                }
                wqe::write_kernel_recv(&rq.queue, rq.producer, &wr, max_sge)?;
                rq.producer = geometry.next(rq.producer);
                rq.queue.set_producer(rq.producer);
            }
            if in_error {
                this.flush(qp, &mut state, &mut upcalls);
            }
            Ok(())
        })();
        upcalls.run(qp);
        result
    }

    /// Destruction: flushed completions are not required, but the queues
    /// are left consistent for anyone still mapping them.
    /// Asks the QP's work to fault `fault` in. One waits at a time: a
    /// request made meanwhile is dropped here (inside the read-side
    /// section that found its region, so it is not the last hold of the
    /// registration) and made again when its access is tried again.
    pub(crate) fn want_fault(&self, qp: &Qp<SrnicDevice>, fault: Fault) {
        qp.device().counters.inc(Counter::OdpMisses);
        let surplus = {
            let mut slot = self.fault.lock();
            if slot.is_none() {
                *slot = Some(fault);
                None
            } else {
                Some(fault)
            }
        };
        drop(surplus);
        qp.run_work_soon();
    }

    /// Leaves the requester to the QP's own work. The work is queued only
    /// if no run that takes the requester is queued already (the flag is
    /// set only with one queued, or within the work before it looks): a
    /// READ's requester hands over after every response packet, and
    /// re-arming a queued work takes a timer and a lock each time.
    pub(crate) fn requester_to_work(&self, qp: &Qp<SrnicDevice>) {
        if !self.requester_pending.swap(true, Ordering::AcqRel) {
            qp.run_work_soon();
        }
    }

    /// Faults in what an access asked for, from the QP's work (process
    /// context, no lock held), and restarts the requester, which may have
    /// been waiting for it.
    pub(crate) fn run_fault(qp: &Qp<SrnicDevice>) {
        let this: &SrnicQp = qp;
        let Some(fault) = this.fault.lock().take() else {
            return;
        };
        let counters = &qp.device().counters;
        counters.inc(Counter::OdpFaults);
        if fault.run().is_err() {
            counters.inc(Counter::OdpFaultErrors);
        }
        // Here, in process context, the registration may end with it.
        drop(fault);
        this.requester_pending.store(true, Ordering::Release);
    }

    pub(crate) fn destroy(qp: &Qp<SrnicDevice>) {
        let dev = qp.device();
        dev.qps.remove(qp);
        crate::mcast::detach_all(qp);
        dev.counts.qp.release();
    }
}

/// Sends may be posted from RTS on (in ERR they are flushed).
fn check_can_send(state: QpState) -> Result {
    match state {
        QpState::Reset | QpState::Init | QpState::Rtr => Err(EINVAL),
        _ => Ok(()),
    }
}

fn validate(qp: &Qp<SrnicDevice>, modify: &QpModify) -> Result {
    let mask = modify.mask;
    let a = &modify.attrs;
    if mask.has(QpAttrMask::PORT) && modify.port != 1 {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::PKEY_INDEX) && a.pkey_index != 0 {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::PATH_MTU) && !(1..=5).contains(&a.path_mtu) {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::TIMEOUT) && a.timeout > 31 {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::RETRY_CNT) && a.retry_cnt > 7 {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::RNR_RETRY) && a.rnr_retry > 7 {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::MIN_RNR_TIMER) && a.min_rnr_timer > 31 {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::MAX_QP_RD_ATOMIC)
        && u32::from(a.max_rd_atomic) > limits::MAX_INIT_RD_ATOMIC
    {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::MAX_DEST_RD_ATOMIC)
        && u32::from(a.max_dest_rd_atomic) > limits::MAX_DEST_RD_ATOMIC
    {
        return Err(EINVAL);
    }
    if mask.has(QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN | QpAttrMask::SQ_PSN) {
        let too_big = |v: u32| v > 0x00ff_ffff;
        if (mask.has(QpAttrMask::DEST_QPN) && too_big(a.dest_qp_num))
            || (mask.has(QpAttrMask::RQ_PSN) && too_big(a.rq_psn))
            || (mask.has(QpAttrMask::SQ_PSN) && too_big(a.sq_psn))
        {
            return Err(EINVAL);
        }
    }
    if mask.has(QpAttrMask::CAP) {
        // Queues are not resized after creation.
        let caps = &modify.caps;
        let have = qp.caps;
        if caps.max_send_wr > have.max_send_wr || caps.max_recv_wr > have.max_recv_wr {
            return Err(EINVAL);
        }
    }
    if mask.has(QpAttrMask::ALT_PATH | QpAttrMask::PATH_MIG_STATE | QpAttrMask::RATE_LIMIT) {
        return Err(EINVAL);
    }
    Ok(())
}

fn apply(attrs: &mut QpAttributes, modify: &QpModify) {
    let mask = modify.mask;
    let new = &modify.attrs;
    macro_rules! take {
        ($($bit:ident => $field:ident),* $(,)?) => {
            $(if mask.has(QpAttrMask::$bit) {
                attrs.$field = new.$field;
            })*
        };
    }
    take!(
        EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify,
        ACCESS_FLAGS => qp_access_flags,
        PKEY_INDEX => pkey_index,
        QKEY => qkey,
        AV => av,
        PATH_MTU => path_mtu,
        TIMEOUT => timeout,
        RETRY_CNT => retry_cnt,
        RNR_RETRY => rnr_retry,
        RQ_PSN => rq_psn,
        MAX_QP_RD_ATOMIC => max_rd_atomic,
        MIN_RNR_TIMER => min_rnr_timer,
        SQ_PSN => sq_psn,
        MAX_DEST_RD_ATOMIC => max_dest_rd_atomic,
        DEST_QPN => dest_qp_num,
    );
}

/// Where a kernel UD WR goes: its address handle's destination (`None`
/// for other types).
fn ud_destination(qp: &Qp<SrnicDevice>, wr: &SendWr<'_>) -> Option<AddressVector> {
    match qp.qp_type() {
        QpType::Ud | QpType::Gsi => wr.ud_ah(qp).map(|ah| ah.av()),
        _ => None,
    }
}
