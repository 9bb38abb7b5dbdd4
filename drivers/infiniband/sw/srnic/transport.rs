// SPDX-License-Identifier: GPL-2.0

//! The RC engine's packets and how they travel: the requester of a QP
//! makes request packets, the responder of the destination QP answers them
//! with acknowledgements or read responses, and the completer of the
//! requesting QP retires its WQEs from those answers.
//!
//! A packet here is its decoded headers (exactly what the RoCEv2 codec in
//! `pure::headers` parses off the wire) plus where its payload lies in
//! memory. Between QPs of one device (loopback), or of two devices of one
//! namespace, a packet is handed straight from one role to the next, and
//! its payload is copied once, from the sender's memory into the
//! receiver's.
//!
//! Each QP's requester (`requester::run`) runs on one CPU at a time
//! (`requester_busy`); the roles of one QP share its lock, and no role holds a lock while another
//! QP's role runs, so two QPs sending to each other cannot deadlock.

use crate::completer;
use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::{Device, Qp};
use crate::outbox;
use crate::payload::Extent;
use crate::pure::grh::IpHeader;
use crate::pure::headers::Operation;
use crate::pure::headers::{self, Aeth, AtomicEth, Bth, Reth};
use crate::pure::mcast::MULTICAST_QPN;
use crate::pure::psn::Psn;
use crate::qp::SrnicQp;
use crate::requester::{self, Budget};
use crate::responder::{self, Reply};
use crate::wire;

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
    /// Where a connection's request goes (datagrams find out per packet).
    pub(crate) hop: Hop,
    /// The VLAN a datagram from the wire came in on, for its completion.
    pub(crate) vlan: Option<u16>,
    /// A FLUSH request whose ICRC is (to be) rxe's, not the standard one
    /// (see `icrc::rxe_flush_icrc`).
    pub(crate) rxe_flush_icrc: bool,
}

/// Where a packet goes from the device that sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hop {
    /// To a QP of the same device (loopback).
    ThisDevice,
    /// To the srnic device of the same namespace whose netdev has this
    /// interface index: through the engine, without the wire.
    Device(i32),
    /// Over the wire, to another node.
    Wire,
}

/// Where packets from `dev` to `dgid` go.
pub(crate) fn hop_to(dev: &Device<SrnicDevice>, dgid: &[u8; 16]) -> Hop {
    if dev.has_gid(dgid) {
        Hop::ThisDevice
    } else if let Some(ifindex) = wire::neighbour_with_gid(dev, dgid) {
        Hop::Device(ifindex)
    } else {
        Hop::Wire
    }
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
                    pkey: crate::pure::headers::DEFAULT_PKEY,
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
                feth: None,
                payload_offset: 0,
                payload_len: 0,
            },
            payload: None,
            payload_at: 0,
            ip: None,
            hop: Hop::Wire,
            vlan: None,
            rxe_flush_icrc: false,
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

/// Sends a request `source`'s requester made: over the wire, or straight
/// to its destination on this node, where the pieces of a READ response
/// are charged to `budget`. Whether the device queue was full.
pub(crate) fn send(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    sender: &mut wire::Sender<'_>,
    source: &Qp<SrnicDevice>,
    packet: Packet<'_>,
    budget: &mut Budget,
) -> bool {
    let datagram = packet.hdr.deth.is_some();
    let hop = match packet.ip {
        // Each datagram has its own destination.
        Some(ip) if datagram => hop_to(dev, &ip.dgid),
        _ => packet.hop,
    };
    if !datagram && hop != Hop::ThisDevice {
        // The retransmission timer needs looking at while packets are
        // out (a no-op while the check is already scheduled).
        source.run_work_after(completer::TIMER_TICK_MS);
    }
    match hop {
        Hop::ThisDevice => deliver(dev, dev, guard, source, packet, budget),
        Hop::Device(ifindex) => match wire::neighbour(dev, guard, ifindex) {
            Some(peer) => deliver(dev, peer, guard, source, packet, budget),
            // Gone: like a packet lost on the wire.
            None => dev.counters.inc(Counter::UnroutableDatagrams),
        },
        Hop::Wire => {
            let sport = wire::source_port(source.qp_num(), packet.hdr.bth.dest_qp);
            match sender.send(guard, &packet, sport) {
                Err(wire::SendError::Source) => completer::source_fault(source, packet.psn()),
                Err(wire::SendError::Refused) => return true,
                Err(wire::SendError::Absent(fault)) => {
                    completer::source_absent(source, packet.psn(), fault)
                }
                Ok(()) | Err(wire::SendError::Dropped) => {}
            }
        }
    }
    false
}

/// Takes a packet that came over the wire to `dev`; `found` is the QP the
/// receive path already looked up for it, if any.
pub(crate) fn receive_from_wire(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    packet: Packet<'_>,
    found: Option<&Qp<SrnicDevice>>,
) {
    if packet.hdr.bth.dest_qp == MULTICAST_QPN {
        match packet.ip {
            Some(ip) if packet.hdr.deth.is_some() => {
                crate::mcast::deliver(dev, guard, &ip.dgid, &packet)
            }
            _ => dev.counters.inc(Counter::MalformedPackets),
        }
        return;
    }
    let dest_qpn = packet.hdr.bth.dest_qp;
    let found = found.filter(|qp| qp.qp_num() == dest_qpn);
    let Some(dest) = found.or_else(|| dev.qps.get(guard, dest_qpn)) else {
        dev.counters.inc(Counter::UnknownQpPackets);
        return;
    };
    match packet.hdr.info.operation {
        Operation::Acknowledge | Operation::AtomicAcknowledge | Operation::ReadResponse => {
            // Answers free the read/atomic depth, end waits, or ask for a
            // resend; one the completer refused (forged, stale) changed
            // nothing and makes the requester do nothing.
            let (outcome, unsent) = completer::receive_noting_unsent(dest, guard, &packet);
            if outcome != completer::Outcome::Rejected {
                requester::run_after_answer(dest, unsent);
            }
        }
        _ => {
            let sport = wire::source_port(dest.qp_num(), packet.hdr.bth.dest_qp);
            match responder::receive(dest, guard, &packet) {
                // A READ response from the wire always waits in the outbox.
                Reply::None | Reply::SourceFault | Reply::Read(_) => {}
                Reply::Packet(answer) => {
                    let _ = wire::transmit(dev, guard, &answer, sport, dest.egress());
                }
                // With bottom halves off, the answers are left to the
                // QP's work, as the requester's runs are (see
                // `requester::run_after_answer`): sent now they would wait
                // in this CPU's backlog, where a run on another CPU could
                // overtake them.
                Reply::Queued if crate::kapi::sync::bottom_halves_off() => dest.run_work_soon(),
                Reply::Queued => outbox::run(dest),
            }
        }
    }
}

/// Hands `packet`, which `source`'s requester on `dev` made, to its
/// destination QP on `peer` (`dev` itself, or another device of this node),
/// and the answers back: of a READ response, the pieces `budget` allows
/// (charged per piece), and the rest through the destination's outbox,
/// from its own work.
fn deliver(
    dev: &Device<SrnicDevice>,
    peer: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    source: &Qp<SrnicDevice>,
    packet: Packet<'_>,
    budget: &mut Budget,
) {
    count_hop(dev, peer, &packet);
    let Some(dest) = peer.qps.get(guard, packet.hdr.bth.dest_qp) else {
        // No such QP: a real wire would drop the packet too; the requester
        // finds out when its retries run out.
        peer.counters.inc(Counter::UnknownQpPackets);
        return;
    };
    match responder::receive(dest, guard, &packet) {
        Reply::None => {}
        Reply::Packet(answer) => {
            answer_to(peer, dev, guard, answer);
        }
        Reply::Read(read) => {
            let mut next = read.first();
            for answer in read.packets() {
                if !budget.allows(answer.hdr.payload_len) {
                    // The rest waits in the responder's outbox, so that
                    // one run (and one RCU read section) copies a bounded
                    // amount of a READ of up to 2 GiB.
                    responder::defer_read(dest, &read, next);
                    return;
                }
                budget.bytes = budget.bytes.saturating_sub(answer.hdr.payload_len);
                if !answer_to(peer, dev, guard, answer) {
                    return;
                }
                next = next.saturating_add(1);
            }
        }
        Reply::SourceFault => completer::source_fault(source, packet.psn()),
        // Behind a READ response still going out: the responder's own
        // work hands it over in turn.
        Reply::Queued => dest.run_work_soon(),
    }
}

/// Hands a response from `peer` to the completer of its QP on `dev`;
/// whether it was taken.
fn answer_to(
    peer: &Device<SrnicDevice>,
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    answer: Packet<'_>,
) -> bool {
    count_hop(peer, dev, &answer);
    match dev.qps.get(guard, answer.hdr.bth.dest_qp) {
        Some(requester) => {
            completer::receive(requester, guard, &answer) == completer::Outcome::Taken
        }
        None => {
            dev.counters.inc(Counter::UnknownQpPackets);
            false
        }
    }
}

/// Hands `answer`, which waited in the outbox of a responder on `from`,
/// to the requester on this node it is for (`hop`: the responder's way to
/// it). That requester goes on from its own work, not from the
/// responder's. Whether the answer was taken.
pub(crate) fn answer_later(
    from: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    hop: Hop,
    answer: Packet<'_>,
) -> bool {
    let to = match hop {
        Hop::ThisDevice => from,
        Hop::Device(ifindex) => match wire::neighbour(from, guard, ifindex) {
            Some(to) => to,
            None => return false,
        },
        Hop::Wire => return false,
    };
    count_hop(from, to, &answer);
    let Some(requester) = to.qps.get(guard, answer.hdr.bth.dest_qp) else {
        to.counters.inc(Counter::UnknownQpPackets);
        return false;
    };
    let outcome = completer::receive(requester, guard, &answer);
    if outcome != completer::Outcome::Rejected {
        // The READ may be complete (its depth free again), or the window
        // moved.
        let this: &SrnicQp = requester;
        this.requester_to_work(requester);
    }
    outcome == completer::Outcome::Taken
}

/// A packet that stays on this node is one sent by `from` and one
/// received by `to` (the same device for loopback).
fn count_hop(from: &Device<SrnicDevice>, to: &Device<SrnicDevice>, packet: &Packet<'_>) {
    let bytes = packet.hdr.payload_len as u64;
    from.counters.inc(Counter::SentPackets);
    from.counters.add(Counter::SentBytes, bytes);
    to.counters.inc(Counter::ReceivedPackets);
    to.counters.add(Counter::ReceivedBytes, bytes);
}
