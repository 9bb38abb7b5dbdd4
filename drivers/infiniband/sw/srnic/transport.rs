// SPDX-License-Identifier: GPL-2.0

//! The RC engine's packets and how they travel: the requester of a QP
//! makes request packets, the responder of the destination QP answers them
//! with acknowledgements or read responses, and the completer of the
//! requesting QP retires its WQEs from those answers.
//!
//! A packet here is its decoded headers (exactly what the RoCEv2 codec in
//! `pure::headers` parses off the wire) plus where its payload lies in
//! memory. Between QPs of one device (loopback) a packet is handed straight
//! from one role to the next, and its payload is copied once, from the
//! sender's memory into the receiver's.
//!
//! Each QP's requester runs on one CPU at a time (`requester_busy`); the
//! roles of one QP share its lock, and no role holds a lock while another
//! QP's role runs, so two QPs sending to each other cannot deadlock.

use crate::completer;
use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::{Device, Qp};
use crate::payload::Extent;
use crate::pure::grh::IpHeader;
use crate::pure::headers::Operation;
use crate::pure::headers::{self, Aeth, AtomicEth, Bth, Reth};
use crate::pure::psn::Psn;
use crate::qp::{SrnicQp, Upcalls};
use crate::requester;
use crate::responder::{self, Reply};
use crate::wire;
use core::sync::atomic::Ordering;

/// Default P_Key, the only one srnic has.
const PKEY: u16 = 0xffff;

/// A packet between two roles.
pub(crate) struct Packet<'a> {
    /// Its headers; `payload_len` is the payload's length and
    /// `payload_offset` is unused.
    pub(crate) hdr: headers::Packet,
    /// Where the payload is, if there is one.
    pub(crate) payload: Option<Extent<'a>>,
    /// Offset of the payload's first byte in `payload`.
    pub(crate) payload_at: u64,
    /// The IP header the packet travels with (a datagram's receiver
    /// finds it in its GRH area).
    pub(crate) ip: Option<IpHeader>,
    /// Whether it goes over the wire (its destination is another node).
    pub(crate) remote: bool,
}

impl<'a> Packet<'a> {
    /// A packet of `opcode` for QP `dest_qp`, without extended headers or
    /// payload; `None` if the opcode is unknown.
    pub(crate) fn new(opcode: u8, dest_qp: u32, psn: Psn) -> Option<Self> {
        let info = headers::opcode_info(opcode)?;
        Some(Self {
            hdr: headers::Packet {
                info,
                bth: Bth {
                    opcode,
                    pkey: PKEY,
                    dest_qp,
                    psn: psn.get(),
                    ..Default::default()
                },
                reth: None,
                aeth: None,
                atomic: None,
                atomic_ack: None,
                imm: None,
                ieth: None,
                deth: None,
                payload_offset: 0,
                payload_len: 0,
            },
            payload: None,
            payload_at: 0,
            ip: None,
            remote: false,
        })
    }

    pub(crate) fn psn(&self) -> Psn {
        Psn::new(self.hdr.bth.psn)
    }

    pub(crate) fn with_payload(mut self, payload: Extent<'a>, at: u64, len: u32) -> Self {
        self.hdr.payload_len = len as usize;
        self.payload = Some(payload);
        self.payload_at = at;
        self
    }

    pub(crate) fn with_reth(mut self, va: u64, rkey: u32, dma_len: u32) -> Self {
        self.hdr.reth = Some(Reth { va, rkey, dma_len });
        self
    }

    pub(crate) fn with_atomic(mut self, atomic: AtomicEth) -> Self {
        self.hdr.atomic = Some(atomic);
        self
    }

    pub(crate) fn with_aeth(mut self, syndrome: u8, msn: u32) -> Self {
        self.hdr.aeth = Some(Aeth { syndrome, msn });
        self
    }
}

/// Packets one run of a requester sends at most: the caller may be a
/// doorbell or a softirq, neither of which may run for long.
const REQUESTER_BUDGET: u32 = 64;

/// Runs the requester of `qp` until it has nothing to send (or has to wait
/// for a response or a timer), or its budget is spent, in which case the
/// device's maintenance work goes on with it. If another CPU is running
/// it, leaves that CPU a note to look again instead.
pub(crate) fn run_requester(qp: &Qp<SrnicDevice>) {
    let this: &SrnicQp = qp;
    if this.requester_busy.swap(true, Ordering::AcqRel) {
        this.requester_again.store(true, Ordering::Release);
        return;
    }
    let mut budget = REQUESTER_BUDGET;
    loop {
        this.requester_again.store(false, Ordering::Release);
        loop {
            if budget == 0 {
                this.requester_pending.store(true, Ordering::Release);
                qp.device().schedule_maintenance(1);
                break;
            }
            budget -= 1;
            let guard = RcuReadGuard::new();
            let mut upcalls = Upcalls::default();
            let packet = requester::next_packet(qp, &guard, &mut upcalls);
            upcalls.run(qp);
            match packet {
                Some(packet) => {
                    let datagram = packet.hdr.deth.is_some();
                    send(qp.device(), &guard, qp, packet);
                    if datagram {
                        // Its payload has been read: the WQE is done.
                        completer::datagram_sent(qp);
                    }
                }
                None => break,
            }
        }
        this.requester_busy.store(false, Ordering::Release);
        // A spent budget leaves the rest to the maintenance work.
        if budget == 0
            || !this.requester_again.load(Ordering::Acquire)
            || this.requester_busy.swap(true, Ordering::AcqRel)
        {
            break;
        }
    }
}

/// Sends a request `source`'s requester made: over the wire, or straight
/// to its destination on this device.
fn send(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    source: &Qp<SrnicDevice>,
    packet: Packet<'_>,
) {
    let datagram_elsewhere =
        packet.hdr.deth.is_some() && !packet.ip.is_some_and(|ip| dev.has_gid(&ip.dgid));
    if packet.remote || datagram_elsewhere {
        if packet.remote {
            // The retransmission timer needs looking at while packets are
            // out (a no-op while the check is already scheduled).
            dev.schedule_maintenance(completer::TIMER_TICK_MS);
        }
        let sport = wire::source_port(source.qp_num(), packet.hdr.bth.dest_qp);
        if wire::transmit(dev, guard, &packet, sport) == Err(wire::SendError::Source) {
            completer::source_fault(source, packet.psn());
        }
        return;
    }
    deliver(dev, guard, source, packet);
}

/// Takes a packet that came over the wire to `dev`.
pub(crate) fn receive_from_wire(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    packet: Packet<'_>,
) {
    let Some(dest) = dev.qps.get(guard, packet.hdr.bth.dest_qp) else {
        dev.counters.inc(Counter::UnknownQpPackets);
        return;
    };
    match packet.hdr.info.operation {
        Operation::Acknowledge | Operation::AtomicAcknowledge | Operation::ReadResponse => {
            completer::receive(dest, guard, &packet);
            // Answers free the read/atomic depth, end waits, or ask for a
            // resend.
            run_requester(dest);
        }
        _ => {
            let sport = wire::source_port(dest.qp_num(), packet.hdr.bth.dest_qp);
            match responder::receive(dest, guard, &packet) {
                Reply::None | Reply::SourceFault => {}
                Reply::Packet(answer) => {
                    let _ = wire::transmit(dev, guard, &answer, sport);
                }
                Reply::Read(read) => {
                    for answer in read.packets() {
                        if wire::transmit(dev, guard, &answer, sport).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// Hands `packet`, which `source`'s requester made, to its destination QP
/// on this device, and the answers back.
fn deliver(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    source: &Qp<SrnicDevice>,
    packet: Packet<'_>,
) {
    count_hop(dev, &packet);
    let Some(dest) = dev.qps.get(guard, packet.hdr.bth.dest_qp) else {
        // No such QP: a real wire would drop the packet too; the requester
        // finds out when its retries run out.
        dev.counters.inc(Counter::UnknownQpPackets);
        return;
    };
    match responder::receive(dest, guard, &packet) {
        Reply::None => {}
        Reply::Packet(answer) => {
            answer_to(dev, guard, answer);
        }
        Reply::Read(read) => {
            for answer in read.packets() {
                if !answer_to(dev, guard, answer) {
                    break;
                }
            }
        }
        Reply::SourceFault => completer::source_fault(source, packet.psn()),
    }
}

/// Hands a response to the completer of its QP; whether it was taken.
fn answer_to(dev: &Device<SrnicDevice>, guard: &RcuReadGuard, answer: Packet<'_>) -> bool {
    count_hop(dev, &answer);
    match dev.qps.get(guard, answer.hdr.bth.dest_qp) {
        Some(requester) => completer::receive(requester, guard, &answer),
        None => {
            dev.counters.inc(Counter::UnknownQpPackets);
            false
        }
    }
}

/// A loopback packet is one sent and one received by this device.
fn count_hop(dev: &Device<SrnicDevice>, packet: &Packet<'_>) {
    let bytes = packet.hdr.payload_len as u64;
    let counters = &dev.counters;
    counters.inc(Counter::SentPackets);
    counters.add(Counter::SentBytes, bytes);
    counters.inc(Counter::ReceivedPackets);
    counters.add(Counter::ReceivedBytes, bytes);
}

/// Restarts `qp`'s requester if an RNR wait has ended; whether it is still
/// waiting (the device's maintenance work calls this).
pub(crate) fn kick_waiting(qp: &Qp<SrnicDevice>) -> bool {
    let this: &SrnicQp = qp;
    if this.requester_pending.swap(false, Ordering::AcqRel) {
        run_requester(qp);
    }
    let until = this.state.lock().requester.rnr_until;
    match until {
        Some(until) if crate::requester::now_ns() < until => true,
        Some(_) => {
            run_requester(qp);
            false
        }
        None => false,
    }
}
