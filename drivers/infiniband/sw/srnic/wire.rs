// SPDX-License-Identifier: GPL-2.0

//! The RoCEv2 wire: packets to and from other nodes as UDP datagrams on
//! port 4791 over IPv4, routed and resolved by the kernel's own IP stack.
//!
//! Transmission writes the transport headers with the pure codec, copies
//! the payload once from the sender's memory into the skb, adds the UDP
//! and IP headers and the ICRC. Reception checks the ICRC, parses the
//! transport headers (which never trusts a length or an opcode), finds the
//! device by the interface the packet came in on, and hands the packet to
//! the engine, whose copy out of the skb is the payload's only one.
//!
//! The socket is opened with the first device. If the port is taken (the
//! kernel's rxe has it while loaded), srnic says so, and its devices reach
//! only their own GIDs until a later device finds the port free.

use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::global::ModuleGlobal;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::table::ObjectTable;
use crate::kapi::rdma::Device;
use crate::kapi::skb::SkBuff;
use crate::kapi::udp::{self, Route4, UdpReceiver, UdpTunnel};
use crate::payload::{self, CopyError, Extent};
use crate::pure::grh::{ipv4_mapped, is_ipv4_mapped, udp_header, IpHeader};
use crate::pure::headers::{self, pad_for, ICRC_LEN};
use crate::pure::icrc::{icrc_ipv4, IPV4_HEADER_LEN, UDP_HEADER_LEN};
use crate::transport::{self, Packet};
use core::ptr::NonNull;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::Mutex;

/// The RoCEv2 UDP port.
pub(crate) const ROCE_PORT: u16 = 4791;

/// Room before the IP header for the link layer (Ethernet, VLAN tags).
const LINK_HEADROOM: u32 = 64;

/// Module-wide wire state.
#[pin_data]
pub(crate) struct Wire {
    /// The socket, once one could be opened.
    #[pin]
    tunnel: Mutex<Option<UdpTunnel>>,
    /// Devices by the interface index of their netdev: where received
    /// packets find their device.
    by_ifindex: ObjectTable<Device<SrnicDevice>>,
}

static WIRE: ModuleGlobal<Wire> = ModuleGlobal::new();

/// Sets up the wire state at module init (no socket yet).
pub(crate) fn install() -> Result {
    let wire = KBox::pin_init(
        try_pin_init!(Wire {
            tunnel <- new_mutex!(None),
            by_ifindex: ObjectTable::new(1, i32::MAX as u32)?,
        }? Error),
        GFP_KERNEL,
    )?;
    WIRE.install(wire)
}

/// Closes the socket and frees the state, at module exit after every
/// device is gone.
pub(crate) fn remove() {
    // Devices, which also call `WIRE.get` from their drop, are all gone.
    // SAFETY: the receive callback is the other user of `WIRE.get`;
    // dropping the tunnel (inside) waits for running callbacks.
    let wire = unsafe { WIRE.remove() };
    drop(wire);
}

/// Makes `dev` reachable from the wire: opens the socket if there is none
/// yet, and lists the device under its netdev's interface index.
pub(crate) fn attach(dev: &Device<SrnicDevice>) {
    let Some(wire) = WIRE.get() else {
        return;
    };
    {
        let mut tunnel = wire.tunnel.lock();
        if tunnel.is_none() {
            match UdpTunnel::open::<Wire>(ROCE_PORT) {
                Ok(socket) => *tunnel = Some(socket),
                Err(err) => pr_warn!(
                    "{}: UDP port {} is taken ({:?}; is rdma_rxe loaded?): the device reaches only its own GIDs\n",
                    dev.name(),
                    ROCE_PORT,
                    err
                ),
            }
        }
    }
    let ifindex = dev.ifindex;
    // SAFETY: the device leaves the table in its data's drop (`detach`),
    // which waits for lookups to end, before its memory goes.
    let listed = unsafe {
        wire.by_ifindex
            .insert_at(ifindex as u32, NonNull::from(dev))
    };
    if listed.is_err() {
        pr_warn!(
            "{}: cannot list the device for received packets\n",
            dev.name()
        );
    }
}

/// Takes the device with netdev `ifindex` off the wire; waits for
/// receivers that may have found it.
pub(crate) fn detach(ifindex: i32) {
    if let Some(wire) = WIRE.get() {
        wire.by_ifindex.remove(ifindex as u32);
    }
}

/// The UDP source port of a connection: a hash of its QP numbers, in the
/// range RoCEv2 reserves for it, so that flows spread over queues.
pub(crate) fn source_port(qpn: u32, dest_qpn: u32) -> u16 {
    let hash = (qpn ^ dest_qpn.rotate_left(12)).wrapping_mul(0x9e37_79b1) >> 18;
    0xc000 | (hash as u16 & 0x3fff)
}

/// Why a packet did not go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// The sender's memory could not be read.
    Source,
    /// No route, no memory, or not IPv4: dropped (the sender retries).
    Dropped,
}

/// Sends `packet` to the address in `packet.ip` from UDP port `sport`.
pub(crate) fn transmit(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    packet: &Packet<'_>,
    sport: u16,
) -> core::result::Result<(), SendError> {
    let counters = &dev.counters;
    let Some(ip) = packet.ip else {
        return Err(SendError::Dropped);
    };
    if !is_ipv4_mapped(&ip.sgid) || !is_ipv4_mapped(&ip.dgid) {
        // IPv6 GIDs are not carried yet.
        counters.inc(Counter::UnroutableDatagrams);
        return Err(SendError::Dropped);
    }
    let mut hdr = packet.hdr;
    let payload_len = hdr.payload_len;
    let pad = pad_for(payload_len);
    hdr.bth.pad = pad;
    let header_len = hdr.info.header_len();
    let transport_len = header_len + payload_len + usize::from(pad) + ICRC_LEN;
    let udp_len = UDP_HEADER_LEN + transport_len;
    let total_len = IPV4_HEADER_LEN + udp_len;
    let (Ok(transport_len32), Ok(udp_len16), Ok(_)) = (
        u32::try_from(transport_len),
        u16::try_from(udp_len),
        u16::try_from(total_len),
    ) else {
        return Err(SendError::Dropped);
    };
    let address = |gid: &[u8; 16]| {
        gid.get(12..16)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .ok_or(SendError::Dropped)
    };
    let daddr = address(&ip.dgid)?;
    let saddr = address(&ip.sgid)?;
    let route = Route4::lookup(daddr, saddr, ip.traffic_class, dev.ifindex).map_err(|_| {
        counters.inc(Counter::UnroutableDatagrams);
        SendError::Dropped
    })?;
    let headroom = LINK_HEADROOM + (IPV4_HEADER_LEN + UDP_HEADER_LEN) as u32;
    let mut skb = SkBuff::alloc(headroom, transport_len32).ok_or(SendError::Dropped)?;
    {
        let body = skb.put(transport_len32).map_err(|_| SendError::Dropped)?;
        headers::write_headers(&hdr, body).ok_or(SendError::Dropped)?;
        if payload_len > 0 {
            let source = packet.payload.as_ref().ok_or(SendError::Source)?;
            let into = body.get_mut(header_len..).ok_or(SendError::Dropped)?;
            let target = Extent::Inline {
                data: into.as_ptr(),
                len: payload_len as u32,
            };
            payload::copy(
                dev,
                guard,
                source,
                packet.payload_at,
                &target,
                0,
                payload_len as u32,
            )
            .map_err(|e| match e {
                CopyError::Source => SendError::Source,
                CopyError::Destination => SendError::Dropped,
            })?;
        }
    }
    let wire_ip = IpHeader {
        hop_limit: if ip.hop_limit == 0 { 64 } else { ip.hop_limit },
        ip_payload_len: udp_len16,
        ..ip
    };
    skb.push_bytes(&udp_header(sport, ROCE_PORT, udp_len16))
        .and_then(|()| skb.push_bytes(&wire_ip.ipv4_header()))
        .map_err(|_| SendError::Dropped)?;
    udp::select_ident(&mut skb);
    {
        let data = skb.data_mut();
        let crc_at = data.len().checked_sub(ICRC_LEN).ok_or(SendError::Dropped)?;
        let (covered, crc) = data.split_at_mut(crc_at);
        let (ip_bytes, rest) = covered.split_at(IPV4_HEADER_LEN);
        let icrc = icrc_ipv4(ip_bytes, rest).map_err(|_| SendError::Dropped)?;
        crc.copy_from_slice(&icrc.to_le_bytes());
    }
    counters.inc(Counter::SentPackets);
    counters.add(Counter::SentBytes, payload_len as u64);
    udp::transmit(skb, route).map_err(|_| SendError::Dropped)
}

impl UdpReceiver for Wire {
    fn receive(mut skb: SkBuff) {
        let Some(wire) = WIRE.get() else {
            return;
        };
        if skb.linearize().is_err() {
            return;
        }
        let guard = RcuReadGuard::new();
        let Some(dev) = wire.by_ifindex.get(&guard, skb.ifindex() as u32) else {
            return;
        };
        match parse(&skb) {
            Ok((packet_bytes, ip)) => {
                let counters = &dev.counters;
                let Ok(hdr) = headers::parse(packet_bytes) else {
                    counters.inc(Counter::MalformedPackets);
                    return;
                };
                let payload = packet_bytes
                    .get(hdr.payload_offset..hdr.payload_offset + hdr.payload_len)
                    .map(|p| Extent::Inline {
                        data: p.as_ptr(),
                        len: p.len() as u32,
                    });
                counters.inc(Counter::ReceivedPackets);
                counters.add(Counter::ReceivedBytes, hdr.payload_len as u64);
                let packet = Packet {
                    hdr,
                    payload,
                    payload_at: 0,
                    ip: Some(ip),
                    remote: true,
                };
                transport::receive_from_wire(dev, &guard, packet);
            }
            Err(counter) => dev.counters.inc(counter),
        }
        // `skb` is freed here: the engine has copied what it keeps.
    }
}

/// The transport packet (BTH to ICRC) of a received datagram whose ICRC
/// checks, and its IP header; the counter to bump if it is refused.
fn parse(skb: &SkBuff) -> core::result::Result<(&[u8], IpHeader), Counter> {
    let bytes = skb.from_network_header().ok_or(Counter::MalformedPackets)?;
    let ip = bytes
        .get(..IPV4_HEADER_LEN)
        .ok_or(Counter::MalformedPackets)?;
    // IPv4 without options (IPv6 is not carried yet).
    if ip.first() != Some(&0x45) {
        return Err(Counter::MalformedPackets);
    }
    let datagram = bytes
        .get(IPV4_HEADER_LEN..)
        .ok_or(Counter::MalformedPackets)?;
    let udp_len = datagram
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(|b| usize::from(u16::from_be_bytes(b)))
        .ok_or(Counter::MalformedPackets)?;
    // The UDP length bounds the datagram (Ethernet may pad short frames).
    let datagram = datagram.get(..udp_len).ok_or(Counter::MalformedPackets)?;
    let crc_at = datagram
        .len()
        .checked_sub(ICRC_LEN)
        .filter(|at| *at >= UDP_HEADER_LEN)
        .ok_or(Counter::MalformedPackets)?;
    let (covered, crc) = datagram.split_at(crc_at);
    let expected = icrc_ipv4(ip, covered).map_err(|_| Counter::MalformedPackets)?;
    let mut received = [0u8; 4];
    received.copy_from_slice(crc);
    if u32::from_le_bytes(received) != expected {
        return Err(Counter::IcrcErrors);
    }
    let address = |at: usize| {
        ip.get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(ipv4_mapped)
            .ok_or(Counter::MalformedPackets)
    };
    let header = IpHeader {
        sgid: address(12)?,
        dgid: address(16)?,
        traffic_class: ip.get(1).copied().unwrap_or(0),
        hop_limit: ip.get(8).copied().unwrap_or(0),
        flow_label: 0,
        ip_payload_len: udp_len as u16,
    };
    let transport_bytes = datagram
        .get(UDP_HEADER_LEN..)
        .ok_or(Counter::MalformedPackets)?;
    Ok((transport_bytes, header))
}
