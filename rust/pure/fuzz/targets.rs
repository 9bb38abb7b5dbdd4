// SPDX-License-Identifier: GPL-2.0

//! The fuzz targets: every parser and state machine of `rust/pure`, each
//! with the properties it must keep on any input. A panic anywhere (an
//! assertion here, or an overflow or index out of bounds in the code under
//! test, which the kernel would turn into an oops) is a failure.

use super::engine::{hit, Input, Target};
use srnic_pure::aeth::{rnr_timer_us, Syndrome};
use srnic_pure::connect::{
    Action, ConnectMessage, Connection, Op, CONNECT_LEN, MAX_CONNECTED_FRAME,
};
use srnic_pure::cq_event::{CqArm, EventAction, EventState, Moderation, MAX_MODERATION_PERIOD_US};
use srnic_pure::fdb::{self, Fdb, Learned};
use srnic_pure::fifo::Fifo;
use srnic_pure::grh::{self, IpHeader};
use srnic_pure::headers::{self, hdr, Aeth, AtomicEth, Bth, Deth, Feth, Packet, ParseError, Reth};
use srnic_pure::icrc::{self, Icrc, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN};
use srnic_pure::lan::{self, Datagram, FragmentPlan, Reassembler, ReassemblySlot, Step};
use srnic_pure::mtu::{active_mtu_for_netdev, ROCEV2_MAX_OVERHEAD};
use srnic_pure::outbox::{Answer, Burst, Entry, Outbox, PendingRead, BURST, MAX_READS};
use srnic_pure::psn::{packets_for, Psn};
use srnic_pure::ring::RingGeometry;
use srnic_pure::steer::{may_steer, Runs, TAKEN_HERE};
use srnic_pure::wr::{self, QpType, SendLimits};
use srnic_pure::{guid, mcast};
use std::collections::VecDeque;

/// Every target: name, function, longest input.
pub const TARGETS: &[(&str, Target, usize)] = &[
    ("headers", headers_raw, 512),
    ("headers_roundtrip", headers_roundtrip, 512),
    ("rx", rx_packet, 2048),
    ("grh", grh_target, 128),
    ("scalars", scalars, 64),
    ("ring", ring, 512),
    ("wr", wr_target, 256),
    ("fifo", fifo, 512),
    ("cq_event", cq_event, 512),
    ("outbox", outbox, 1024),
    ("lan_datagram", lan_datagram, 1024),
    ("lan_reassembly", lan_reassembly, 1024),
    ("fdb", fdb_target, 1024),
    ("connect", connect, 512),
    ("steer", steer_target, 512),
];

fn parse_error_code(e: ParseError) -> u64 {
    match e {
        ParseError::Truncated => 0,
        ParseError::UnknownOpcode => 1,
        ParseError::BadPad => 2,
        ParseError::BadVersion => 3,
    }
}

/// Every opcode the codec knows.
fn known_opcodes() -> Vec<headers::OpcodeInfo> {
    (0..=255u8).filter_map(headers::opcode_info).collect()
}

/// Offset of the DETH in a packet of `info`, if it has one.
fn deth_offset(info: &headers::OpcodeInfo) -> Option<usize> {
    (info.headers & hdr::DETH != 0).then(|| {
        headers::BTH_LEN
            + if info.headers & hdr::RETH != 0 {
                headers::RETH_LEN
            } else {
                0
            }
    })
}

/// Checks a parsed packet against the bytes it came from.
fn check_parsed(data: &[u8], p: &Packet) {
    let info = p.info;
    assert_eq!(headers::opcode_info(p.bth.opcode), Some(info));
    assert_eq!(p.payload_offset, info.header_len());
    assert_eq!(
        p.payload_offset + p.payload_len + usize::from(p.bth.pad) + headers::ICRC_LEN,
        data.len(),
        "headers, payload, pad and ICRC make the packet"
    );
    assert!(p.bth.pad <= 3);
    if !info.payload {
        assert_eq!(p.payload_len, 0);
        assert_eq!(p.bth.pad, 0, "no pad without payload");
    }
    let has = |flag| info.headers & flag != 0;
    assert_eq!(p.reth.is_some(), has(hdr::RETH));
    assert_eq!(p.deth.is_some(), has(hdr::DETH));
    assert_eq!(p.atomic.is_some(), has(hdr::ATOMIC_ETH));
    assert_eq!(p.aeth.is_some(), has(hdr::AETH));
    assert_eq!(p.atomic_ack.is_some(), has(hdr::ATOMIC_ACK_ETH));
    assert_eq!(p.imm.is_some(), has(hdr::IMM));
    assert_eq!(p.ieth.is_some(), has(hdr::IETH));
    assert_eq!(p.feth.is_some(), has(hdr::FETH));
    assert!(p.bth.dest_qp <= 0xff_ffff && p.bth.psn <= 0xff_ffff);

    // Writing the parsed headers gives the bytes back, but for the
    // reserved bits parsing ignores.
    let len = info.header_len();
    let mut out = vec![0u8; len];
    assert_eq!(headers::write_headers(p, &mut out), Some(len));
    let mut want = data[..len].to_vec();
    want[4] &= 0xc0;
    want[8] &= 0x80;
    if let Some(at) = deth_offset(&info) {
        want[at + 4] = 0;
    }
    if info.headers & hdr::FETH != 0 {
        // The FETH is the first extended header; all but its low six bits
        // are reserved.
        want[headers::BTH_LEN..headers::BTH_LEN + 3].fill(0);
        want[headers::BTH_LEN + 3] &= 0x3f;
    }
    assert_eq!(out, want, "write_headers(parse(x)) == x");
    // Too short a buffer is refused, not overrun.
    if len > 0 {
        assert_eq!(headers::write_headers(p, &mut out[..len - 1]), None);
    }

    // The payload and the ICRC are not the headers' business.
    let mut other = data.to_vec();
    for b in &mut other[len..] {
        *b ^= 0xa5;
    }
    assert_eq!(headers::parse(&other), Ok(*p));
}

/// A transport packet as it arrives (BTH to ICRC).
fn headers_raw(data: &[u8]) {
    let bth = Bth::parse(data);
    // The receive path parses only the linear first bytes when the rest is
    // in page fragments: any cut gives the whole packet's answer, or
    // `Truncated` if it cuts into the headers.
    let cut = data.last().map_or(0, |b| usize::from(*b)) % (data.len() + 1);
    let from_head = headers::parse_head(&data[..cut], data.len());
    match headers::parse(data) {
        Err(e) => {
            hit(1, parse_error_code(e));
            if let Ok(bth) = bth {
                hit(2, u64::from(bth.opcode));
            }
            assert!(from_head.is_err(), "parse_head takes what parse refuses");
        }
        Ok(p) => {
            assert_eq!(bth, Ok(p.bth));
            hit(3, u64::from(p.bth.opcode));
            hit(4, u64::from(p.bth.pad) | (p.payload_len.min(8) as u64) << 2);
            check_parsed(data, &p);
            if cut >= p.info.header_len() {
                assert_eq!(from_head, Ok(p), "parse_head(headers) == parse(packet)");
            } else {
                assert_eq!(from_head, Err(ParseError::Truncated));
            }
        }
    }
}

/// Packets built by the codec from arbitrary field values: the parser
/// gives back exactly what was written.
fn headers_roundtrip(data: &[u8]) {
    let mut input = Input::new(data);
    let ops = known_opcodes();
    let info = ops[usize::from(input.u8()) % ops.len()];
    hit(1, u64::from(info.opcode));
    let has = |flag| info.headers & flag != 0;
    let payload_len = if info.payload {
        usize::from(input.u16() % 4200)
    } else {
        0
    };
    let pad = headers::pad_for(payload_len);
    assert_eq!((payload_len + usize::from(pad)) % 4, 0);
    let bth = Bth {
        opcode: info.opcode,
        solicited: input.bool(),
        migreq: input.bool(),
        pad,
        pkey: input.u16(),
        fecn: input.bool(),
        becn: input.bool(),
        dest_qp: input.u32() & 0xff_ffff,
        ack_req: input.bool(),
        psn: input.u32() & 0xff_ffff,
    };
    let reth = has(hdr::RETH).then(|| Reth {
        va: input.u64(),
        rkey: input.u32(),
        dma_len: input.u32(),
    });
    let deth = has(hdr::DETH).then(|| Deth {
        qkey: input.u32(),
        src_qp: input.u32() & 0xff_ffff,
    });
    let atomic = has(hdr::ATOMIC_ETH).then(|| AtomicEth {
        va: input.u64(),
        rkey: input.u32(),
        swap_add: input.u64(),
        compare: input.u64(),
    });
    let aeth = has(hdr::AETH).then(|| Aeth {
        syndrome: input.u8(),
        msn: input.u32() & 0xff_ffff,
    });
    let atomic_ack = has(hdr::ATOMIC_ACK_ETH).then(|| input.u64());
    let imm = has(hdr::IMM).then(|| input.u32());
    let ieth = has(hdr::IETH).then(|| input.u32());
    let feth = has(hdr::FETH).then(|| Feth {
        placement: input.u8() & 0xf,
        selectivity: input.u8() & 0x3,
    });
    let header_len = info.header_len();
    let packet = Packet {
        info,
        bth,
        reth,
        aeth,
        atomic,
        atomic_ack,
        imm,
        ieth,
        deth,
        feth,
        payload_offset: header_len,
        payload_len,
    };
    let total = header_len + payload_len + usize::from(pad) + headers::ICRC_LEN;
    let mut buf = vec![0u8; total];
    assert_eq!(headers::write_headers(&packet, &mut buf), Some(header_len));
    let fill = input.rest();
    if !fill.is_empty() {
        for (i, b) in buf[header_len..].iter_mut().enumerate() {
            *b = fill[i % fill.len()];
        }
    }
    assert_eq!(headers::parse(&buf), Ok(packet), "parse(encode(x)) == x");
    // One byte short: never the same packet.
    assert_ne!(headers::parse(&buf[..total - 1]), Ok(packet));
}

/// The ICRC by the book: a bitwise CRC-32 over a masked copy.
fn reference_icrc(ip: &[u8], udp_to_pad: &[u8]) -> Option<u32> {
    let mut masked = vec![0xffu8; 8];
    match ip.first()? >> 4 {
        4 => {
            let mut h = ip.get(..IPV4_HEADER_LEN)?.to_vec();
            for i in [1, 8, 10, 11] {
                h[i] = 0xff;
            }
            masked.extend(h);
        }
        6 => {
            let mut h = ip.get(..IPV6_HEADER_LEN)?.to_vec();
            h[0] |= 0x0f;
            for i in [1, 2, 3, 7] {
                h[i] = 0xff;
            }
            masked.extend(h);
        }
        _ => return None,
    }
    if udp_to_pad.len() < UDP_HEADER_LEN + 5 {
        return None;
    }
    let mut rest = udp_to_pad.to_vec();
    rest[6] = 0xff;
    rest[7] = 0xff;
    rest[UDP_HEADER_LEN + 4] = 0xff;
    masked.extend(rest);
    let mut crc = 0xffff_ffffu32;
    for b in masked {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    Some(!crc)
}

/// CRC-32 of a message followed by its own CRC (little-endian).
const CRC32_RESIDUE: u32 = 0x2144_df1c;

/// An IP packet as a RoCEv2 receiver gets it: IP header, UDP, transport
/// headers, payload, ICRC. The ICRC is checked, the headers parsed.
fn rx_packet(data: &[u8]) {
    let v6 = data.first().map(|b| b >> 4) == Some(6);
    let ip_len = if v6 { IPV6_HEADER_LEN } else { IPV4_HEADER_LEN };
    let (ip, rest) = data.split_at(ip_len.min(data.len()));
    let Some(crc_at) = rest.len().checked_sub(headers::ICRC_LEN) else {
        let _ = icrc::icrc_ipv4(ip, rest);
        let _ = icrc::icrc_ipv6(ip, rest);
        return;
    };
    let (udp_to_pad, wire) = rest.split_at(crc_at);
    let computed = if v6 {
        icrc::icrc_ipv6(ip, udp_to_pad)
    } else {
        icrc::icrc_ipv4(ip, udp_to_pad)
    };
    let reference = reference_icrc(ip, udp_to_pad);
    assert_eq!(computed.ok(), reference, "ICRC as the annex defines it");
    let Ok(computed) = computed else {
        hit(1, 0);
        return;
    };
    let wire = u32::from_le_bytes([wire[0], wire[1], wire[2], wire[3]]);
    hit(2, u64::from(computed == wire));

    // Piece by piece, at any split after the BTH, gives the same; adding
    // the ICRC itself gives CRC-32's residue (how a receiver may verify).
    let split = UDP_HEADER_LEN + 5 + (wire as usize) % (udp_to_pad.len() - UDP_HEADER_LEN - 4);
    let split = split.min(udp_to_pad.len());
    let mut pieces = Icrc::start(ip, &udp_to_pad[..split]).expect("started above");
    pieces.update(&udp_to_pad[split..]);
    let mut verify = pieces;
    assert_eq!(pieces.finish(), computed, "split at {split}");
    verify.update(&computed.to_le_bytes());
    assert_eq!(verify.finish(), CRC32_RESIDUE);

    // What routers may change does not count; any other bit does.
    let mut ip2 = ip[..ip_len].to_vec();
    if v6 {
        ip2[1] ^= 0x5a;
        ip2[7] = ip2[7].wrapping_sub(1);
    } else {
        ip2[1] ^= 0x5a;
        ip2[8] = ip2[8].wrapping_sub(1);
        ip2[10] ^= 0xff;
    }
    let mut body = udp_to_pad.to_vec();
    body[6] ^= 0x33;
    body[UDP_HEADER_LEN + 4] ^= 0xc0;
    let again = if v6 {
        icrc::icrc_ipv6(&ip2, &body)
    } else {
        icrc::icrc_ipv4(&ip2, &body)
    };
    assert_eq!(again, Ok(computed), "masked fields are invariant");
    let mut at = (wire as usize >> 8) % body.len();
    if at == 6 || at == 7 || at == UDP_HEADER_LEN + 4 {
        at = 0;
    }
    body[at] ^= 1 << (wire % 8);
    body[6] ^= 0x33;
    let flipped = if v6 {
        icrc::icrc_ipv6(&ip2, &body)
    } else {
        icrc::icrc_ipv4(&ip2, &body)
    };
    assert_ne!(
        flipped,
        Ok(computed),
        "a flipped bit at {at} changes the ICRC"
    );

    // The transport part, as the receive path parses it after the check.
    let transport = &rest[UDP_HEADER_LEN..];
    if let Ok(p) = headers::parse(transport) {
        hit(3, u64::from(p.bth.opcode));
        check_parsed(transport, &p);
    }
}

/// The GRH area and IP headers.
fn grh_target(data: &[u8]) {
    let sum = grh::ipv4_checksum(data);
    // A header followed by its checksum sums to zero; and the input
    // repeated past 64 Ki words (where a plain u32 sum overflowed).
    // (A flag byte, not every input: 140 kB per run is slow.)
    if data.len().is_multiple_of(2) && data.len() <= 64 {
        let mut with = data.to_vec();
        with.extend_from_slice(&sum.to_be_bytes());
        assert_eq!(grh::ipv4_checksum(&with), 0);
    }
    if data.first() == Some(&0xff) && data.len().is_multiple_of(2) {
        let long: Vec<u8> = data.iter().copied().cycle().take(140_000).collect();
        assert_eq!(grh::ipv4_checksum(&long), reference_checksum(&long));
    }
    if let Some(h) = IpHeader::from_ipv6(data) {
        hit(1, u64::from(h.is_ipv4()));
        assert_eq!(&h.ipv6_header()[..], &data[..grh::GRH_LEN]);
    }
    let mut input = Input::new(data);
    let v4 = input.bool();
    let mut sgid = gid_from(&mut input);
    let mut dgid = gid_from(&mut input);
    if v4 {
        sgid = grh::ipv4_mapped([sgid[0], sgid[1], sgid[2], sgid[3]]);
        dgid = grh::ipv4_mapped([dgid[0], dgid[1], dgid[2], dgid[3]]);
        assert!(grh::is_ipv4_mapped(&sgid));
    }
    let h = IpHeader {
        sgid,
        dgid,
        traffic_class: input.u8(),
        hop_limit: input.u8(),
        flow_label: input.u32(),
        ip_payload_len: input.u16(),
    };
    let area = h.grh();
    if h.is_ipv4() {
        hit(2, 4);
        assert!(area[..20].iter().all(|b| *b == 0));
        assert_eq!(grh::ipv4_checksum(&area[20..]), 0, "checksummed");
        assert_eq!(&area[20..], &h.ipv4_header()[..]);
        assert_eq!(&area[32..36], &h.sgid[12..]);
    } else {
        hit(2, 6);
        let back = IpHeader::from_ipv6(&area).expect("an IPv6 header");
        assert_eq!(
            back,
            IpHeader {
                flow_label: h.flow_label & 0xf_ffff,
                ..h
            }
        );
    }
    let udp = grh::udp_header(input.u16(), 4791, input.u16());
    assert_eq!(&udp[2..4], &4791u16.to_be_bytes());
}

/// RFC 1071's sum in 64 bits, folded at the end.
fn reference_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = bytes
        .chunks(2)
        .map(|p| u64::from(p[0]) << 8 | u64::from(p.get(1).copied().unwrap_or(0)))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn gid_from(input: &mut Input) -> [u8; 16] {
    let mut gid = [0u8; 16];
    let s = input.bytes(16);
    gid[..s.len()].copy_from_slice(s);
    gid
}

/// Functions of a few integers: PSN math, MTU, AETH syndromes, P_Keys,
/// multicast and LID MAC addresses.
fn scalars(data: &[u8]) {
    let mut input = Input::new(data);
    let (a, b, n) = (Psn::new(input.u32()), Psn::new(input.u32()), input.u32());
    let d = a.distance_from(b);
    assert!((-(1 << 23)..(1 << 23)).contains(&d));
    assert_eq!(b.add(d as u32), a);
    assert_eq!(a.is_before(b), d < 0);
    if d != -(1 << 23) {
        assert_eq!(b.distance_from(a), -d);
    }
    assert_eq!(a.add(n).get(), a.get().wrapping_add(n) & 0xff_ffff);
    let within = a.is_within(b, n);
    let offset = a.get().wrapping_sub(b.get()) & 0xff_ffff;
    assert_eq!(within, offset < n);
    hit(1, u64::from(within) | u64::from(a.is_before(b)) << 1);

    let (length, mtu) = (input.u32(), input.u32());
    match packets_for(length, mtu) {
        None => assert_eq!(mtu, 0),
        Some(count) => {
            let (count, length, mtu) = (u64::from(count), u64::from(length), u64::from(mtu));
            assert!(count >= 1 && count * mtu >= length);
            assert!(length == 0 || (count - 1) * mtu < length);
        }
    }

    let netdev_mtu = input.u32();
    match active_mtu_for_netdev(netdev_mtu) {
        Some(m) => {
            hit(2, m.bytes().into());
            assert!(u64::from(m.bytes()) + u64::from(ROCEV2_MAX_OVERHEAD) <= u64::from(netdev_mtu));
        }
        None => assert!(netdev_mtu < 256 + ROCEV2_MAX_OVERHEAD),
    }

    let byte = input.u8();
    if let Some(s) = Syndrome::decode(byte) {
        hit(3, u64::from(byte >> 5));
        assert_eq!(Syndrome::decode(s.encode()), Some(s));
    }
    assert!(rnr_timer_us(byte) >= 10);

    let (p, q) = (input.u16(), input.u16());
    assert_eq!(headers::pkey_matches(p, q), headers::pkey_matches(q, p));

    let gid = gid_from(&mut input);
    if let Some(mac) = mcast::multicast_mac(&gid) {
        assert!(mac[0] & 1 != 0, "a group MAC has the I/G bit");
    }
    assert!((lan::LID_MIN..=lan::LID_MAX).contains(&lan::initial_lid(&gid)));
    let mac = [
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
    ];
    let _ = guid::node_guid_from_mac(mac);
    let vendor = [mac[0], mac[1], mac[2]];
    match lan::classify_mac(&mac, vendor, mac[3]) {
        lan::MacKind::Unicast { lid } => {
            assert_eq!(lan::check_new_address(&mac, vendor, mac[3]), Ok(lid));
            assert_eq!(lan::mac_for(vendor, mac[3], lid), mac);
        }
        kind => {
            hit(
                4,
                match kind {
                    lan::MacKind::Broadcast => 0,
                    lan::MacKind::Multicast => 1,
                    _ => 2,
                },
            );
            assert!(lan::check_new_address(&mac, vendor, mac[3]).is_err());
        }
    }
    let after = input.u16();
    let taken = input.u16();
    if let Some(lid) = lan::next_free_lid(after, |l| l == taken) {
        assert!((lan::LID_MIN..=lan::LID_MAX).contains(&lid));
        assert!(lid != after && lid != taken);
    }
}

/// Ring geometry from untrusted sizes, then producer and consumer indices
/// moved against a model.
fn ring(data: &[u8]) {
    let mut input = Input::new(data);
    let (capacity, elem, max) = (input.u32() >> (input.u8() % 32), input.u32(), input.u32());
    let Ok(g) = RingGeometry::new(capacity, elem % (1 << 21), max) else {
        hit(1, 0);
        return;
    };
    hit(1, u64::from(g.slots().trailing_zeros()));
    assert!(g.slots().is_power_of_two() && g.capacity() >= capacity);
    assert!(g.capacity() <= capacity.saturating_mul(2));
    assert!(g.elem_size() >= elem % (1 << 21));
    assert!(g.data_bytes() <= 1 << 31);
    let (mut prod, mut cons, mut queued) = (0u32, 0u32, 0u64);
    while !input.is_empty() {
        let op = input.u8();
        match op % 4 {
            0 => {
                if !g.is_full(prod, cons) {
                    prod = g.next(prod);
                    queued += 1;
                }
            }
            1 => {
                if !g.is_empty(prod, cons) {
                    cons = g.next(cons);
                    queued -= 1;
                }
            }
            2 => {
                // An index from user space: only a masked one passes.
                let raw = input.u32();
                let checked = g.check_index(raw);
                assert_eq!(checked.is_some(), raw <= g.index_mask());
                let any = checked.unwrap_or(raw);
                assert!(g.used(any, cons) <= g.capacity());
                assert!(g.free(prod, any) <= g.capacity());
                assert!(g.slot_offset(raw) + g.elem_size() as usize <= g.data_bytes());
            }
            _ => {
                // A burst: produce n at once if it fits.
                let n = u32::from(input.u8());
                if g.fits(n + g.used(prod, cons)) {
                    prod = prod.wrapping_add(n) & g.index_mask();
                    queued += u64::from(n);
                }
            }
        }
        assert_eq!(u64::from(g.used(prod, cons)), queued);
        assert_eq!(g.used(prod, cons) + g.free(prod, cons), g.capacity());
        assert_eq!(g.is_empty(prod, cons), queued == 0);
        assert_eq!(g.is_full(prod, cons), queued == u64::from(g.capacity()));
    }
}

/// Work request validation, against a model in 64-bit arithmetic.
fn wr_target(data: &[u8]) {
    let mut input = Input::new(data);
    let qp = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi][usize::from(input.u8() % 4)];
    let op = match input.u8() {
        x if x < 240 => u32::from(x % 17),
        x if x < 250 => wr::opcode::REG_MR,
        _ => input.u32(),
    };
    let limits = SendLimits {
        max_sge: u32::from(input.u8() % 40),
        max_inline: input.u32() % 1024,
        max_message: input.u32(),
    };
    let inline = input.u8() > 200;
    let num_sge = match input.u8() {
        x if x < 250 => u32::from(x % 40),
        _ => input.u32(),
    };
    let sges: Vec<u32> = (0..input.u8() % 40)
        .map(|_| input.u32() >> (input.u8() % 33).min(31))
        .collect();
    let sum: u64 = sges
        .iter()
        .take(num_sge as usize)
        .map(|l| u64::from(*l))
        .sum();
    let declared = if input.bool() {
        sum as u32
    } else {
        input.u32()
    };
    let result = wr::validate_send(
        qp,
        &limits,
        op,
        inline,
        num_sge,
        declared,
        sges.iter().copied(),
    );
    hit(
        1,
        result.map_or_else(|e| e as u64 + 1, |_| 0) | u64::from(op.min(32)) << 8,
    );
    if let Ok(total) = result {
        assert!(wr::opcode_allowed(qp, op));
        // Local operations and FLUSH name no local memory.
        let no_data = matches!(
            op,
            wr::opcode::LOCAL_INV | wr::opcode::BIND_MW | wr::opcode::REG_MR | wr::opcode::FLUSH
        );
        if no_data {
            assert_eq!(total, 0);
            assert!(num_sge == 0 && !inline);
        } else {
            assert_eq!(total, declared);
            assert!(total <= limits.max_message);
            if inline {
                assert!(total <= limits.max_inline);
            } else {
                assert!(num_sge <= limits.max_sge);
                assert_eq!(u64::from(total), sum);
            }
        }
    }
    let recv = wr::validate_recv(limits.max_sge, num_sge, declared, sges.iter().copied());
    match recv {
        Ok(total) => {
            assert_eq!(u64::from(total), sum);
            assert!(num_sge <= limits.max_sge);
        }
        Err(_) => assert!(num_sge > limits.max_sge || sum != u64::from(declared)),
    }

    // Request opcodes are ones the codec knows, at the right place.
    let (uc, first, last) = (input.bool(), input.bool(), input.bool());
    if let Some(code) = wr::request_opcode(uc, op, first, last) {
        let info = headers::opcode_info(code).expect("a known opcode");
        use headers::{Operation, Position, Transport};
        assert_eq!(
            info.transport,
            if uc { Transport::Uc } else { Transport::Rc }
        );
        let position = match (first, last) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, true) => Position::Last,
            (false, false) => Position::Middle,
        };
        assert_eq!(info.position, position);
        let write = matches!(op, wr::opcode::RDMA_WRITE | wr::opcode::RDMA_WRITE_WITH_IMM);
        let expect_op = if write {
            Operation::Write
        } else {
            Operation::Send
        };
        assert_eq!(info.operation, expect_op);
        let imm = matches!(
            op,
            wr::opcode::SEND_WITH_IMM | wr::opcode::RDMA_WRITE_WITH_IMM
        );
        assert_eq!(info.headers & hdr::IMM != 0, imm && last);
        assert_eq!(
            info.headers & hdr::IETH != 0,
            op == wr::opcode::SEND_WITH_INV && last
        );
        assert_eq!(info.headers & hdr::RETH != 0, write && first);
    }
}

/// The bounded FIFO against `VecDeque`, at a few sizes.
fn fifo(data: &[u8]) {
    let mut input = Input::new(data);
    match input.u8() % 4 {
        0 => fifo_n::<0>(&mut input),
        1 => fifo_n::<1>(&mut input),
        2 => fifo_n::<3>(&mut input),
        _ => fifo_n::<8>(&mut input),
    }
}

fn fifo_n<const N: usize>(input: &mut Input) {
    let mut f: Fifo<u8, N> = Fifo::new();
    let mut model: VecDeque<u8> = VecDeque::new();
    while !input.is_empty() {
        let op = input.u8();
        let v = input.u8();
        hit(1, u64::from(op % 8) | (model.len() as u64) << 3);
        match op % 8 {
            0..=2 => {
                let r = f.push(v);
                if model.len() < N {
                    assert_eq!(r, Ok(()));
                    model.push_back(v);
                } else {
                    assert_eq!(r, Err(v));
                }
            }
            3 | 4 => assert_eq!(f.pop(), model.pop_front()),
            5 => {
                let n = usize::from(v % 10);
                assert_eq!(f.get_mut(n).copied(), model.get(n).copied());
                if let Some(x) = f.get_mut(n) {
                    *x = x.wrapping_add(1);
                    model[n] = model[n].wrapping_add(1);
                }
            }
            6 => {
                let keep = usize::from(v % 10);
                f.truncate(keep);
                model.truncate(keep);
            }
            _ => match v % 4 {
                0 => {
                    f.clear();
                    model.clear();
                }
                1 => {
                    if let Some(x) = f.back_mut() {
                        *x = v;
                        *model.back_mut().expect("model agrees") = v;
                    }
                }
                2 => {
                    if let Some(x) = f.front_mut() {
                        *x = v;
                        *model.front_mut().expect("model agrees") = v;
                    }
                }
                _ => {
                    let mut copy = f;
                    assert_eq!(copy.pop(), model.front().copied());
                }
            },
        }
        assert_eq!(f.len(), model.len());
        assert_eq!(f.is_empty(), model.is_empty());
        assert_eq!(f.is_full(), model.len() >= N);
        assert_eq!(f.front().copied(), model.front().copied());
        assert!(f.iter().copied().eq(model.iter().copied()));
    }
}

/// CQ arming and moderation: an event only for an arming that was met, at
/// most one per arming, and a held event is never lost (its wait runs).
fn cq_event(data: &[u8]) {
    let mut input = Input::new(data);
    let mut s = EventState::default();
    let mut armed = false;
    let mut held = false;
    let mut wait_running = false;
    let mut moderation_on = false;
    while !input.is_empty() {
        let op = input.u8();
        hit(
            1,
            u64::from(op % 6) | u64::from(held) << 3 | u64::from(armed) << 4,
        );
        match op % 6 {
            0 => {
                s.arm(CqArm::NextCompletion);
                armed = true;
            }
            1 => {
                s.arm(CqArm::Solicited);
                armed = true;
            }
            2 | 3 => {
                let action = s.on_cqe(op & 0x80 != 0);
                hit(
                    2,
                    match action {
                        EventAction::None => 0,
                        EventAction::StartWait(_) => 1,
                        EventAction::Raise { stop_wait } => 2 + u64::from(stop_wait),
                    },
                );
                match action {
                    EventAction::None => {}
                    EventAction::StartWait(us) => {
                        assert!(!held, "one wait per held event");
                        assert!(armed, "an event only for an arming");
                        assert!((1..=MAX_MODERATION_PERIOD_US).contains(&us));
                        armed = false;
                        held = true;
                        wait_running = true;
                    }
                    EventAction::Raise { stop_wait } => {
                        assert!(held || armed, "an event only for an arming");
                        if held {
                            assert!(wait_running);
                        } else {
                            armed = false;
                        }
                        held = false;
                        if stop_wait {
                            wait_running = false;
                        }
                        if !moderation_on {
                            // Without moderation nothing waits.
                            assert!(!stop_wait);
                        }
                    }
                }
            }
            4 => {
                let (count, period) = (input.u16(), input.u16() % 5000);
                match Moderation::new(count, period) {
                    Ok(m) => {
                        s.moderate(m);
                        moderation_on = count > 1 || period > 0;
                    }
                    Err(_) => assert!(period > MAX_MODERATION_PERIOD_US),
                }
            }
            _ => {
                if wait_running {
                    wait_running = false;
                    let raised = s.on_wait_over();
                    assert_eq!(raised, held, "the wait raises the held event");
                    held = false;
                }
            }
        }
        assert!(!held || wait_running, "a held event has its wait running");
    }
}

/// The responder's outbox under any sequence of requests and transmits.
fn outbox(data: &[u8]) {
    let mut input = Input::new(data);
    let mut o = Outbox::new();
    let mut burst: Option<Burst> = None;
    let mut psn = Psn::new(input.u32());
    let mut closing = false;
    // The PSN of the last packet that went out, while their order holds
    // (a clear or a repeated READ starts it again), and whether the burst
    // in flight was overtaken by one of those.
    let mut last_sent: Option<Psn> = None;
    let mut stale = false;
    // The READs the requester sent: first PSN and packets.
    let mut issued: Vec<(Psn, u32)> = Vec::new();
    while !input.is_empty() {
        let op = input.u8();
        hit(1, u64::from(op % 8) | (o.len().min(40) as u64) << 3);
        match op % 8 {
            0 | 1 => {
                let count = 1 + u32::from(input.u8() % 20);
                let read = PendingRead {
                    rkey: input.u32(),
                    va: input.u64(),
                    length: count * 256,
                    psn,
                    msn: input.u32() & 0xff_ffff,
                    mtu: 256,
                    count,
                    next: 0,
                };
                issued.push((psn, count));
                psn = psn.add(count);
                let before = o.len();
                let queued = o.push_read(read);
                if closing {
                    assert!(!queued, "nothing is taken after the last NAK");
                }
                assert_eq!(o.len(), before + usize::from(queued));
            }
            2 => {
                // The requester asks again for the tail of a READ it sent.
                let Some(&(first, count)) =
                    issued.get(usize::from(input.u8()) % issued.len().max(1))
                else {
                    continue;
                };
                let skip = u32::from(input.u8()) % count;
                let read = PendingRead {
                    rkey: 1,
                    va: 0,
                    length: (count - skip) * 256,
                    psn: first.add(skip),
                    msn: 0,
                    mtu: 256,
                    count: count - skip,
                    next: 0,
                };
                let _ = o.push_repeated_read(read);
                last_sent = None;
                stale |= burst.is_some();
            }
            3 | 4 => {
                let syndrome = if op & 0x80 != 0 { 0x1f } else { input.u8() };
                let answer = Answer::new(0x11, psn, syndrome, 0, None);
                psn = psn.next();
                let queued = o.push_answer(answer);
                if !queued {
                    assert!(closing || o.len() + 1 >= 2 * MAX_READS + 2);
                }
            }
            5 => {
                if burst.is_none() {
                    let budget = u32::from(input.u8() % 80);
                    burst = o.take_burst(budget);
                    match &burst {
                        None => assert!(o.is_empty()),
                        Some(b) => {
                            if let Entry::Read(r) = b.entry {
                                assert!(r.next <= b.until && b.until <= r.count);
                                assert!(b.until - r.next <= budget.max(1));
                            }
                            // Only one CPU sends at a time.
                            assert!(o.take_burst(BURST).is_none());
                        }
                    }
                }
            }
            6 => {
                if let Some(b) = burst.take() {
                    let room = match b.entry {
                        Entry::Read(r) => b.until - r.next,
                        Entry::Answer(_) => 1,
                    };
                    let sent = u32::from(input.u8()) % (room + 1);
                    let refused = input.bool() && sent < room;
                    let before = o.len();
                    if !stale {
                        sent_in_order(&b, sent, &mut last_sent);
                    }
                    stale = false;
                    let gave_up = o.finish_burst(&b, sent, refused);
                    hit(2, u64::from(gave_up) | u64::from(refused) << 1);
                    assert!(o.len() <= before);
                    if gave_up {
                        assert!(o.is_empty());
                    }
                    if o.is_empty() {
                        closing = false;
                    }
                }
            }
            _ => {
                if input.bool() {
                    if closing {
                        // The QP ended once; it sends no second NAK.
                        continue;
                    }
                    let nak = Answer::new(0x11, psn, 0x61, 0, None);
                    psn = psn.next();
                    if o.push_final(nak) {
                        closing = true;
                        assert!(o.is_closing());
                    } else {
                        assert!(o.is_idle());
                    }
                } else {
                    o.clear();
                    closing = false;
                    last_sent = None;
                    stale |= burst.is_some();
                }
            }
        }
        assert!(o.len() <= 2 * MAX_READS + 2);
        assert_eq!(o.is_closing(), closing);
        assert_eq!(o.is_idle(), o.is_empty() && burst.is_none());
    }
    // Whatever waits goes out, in order, once the stack takes everything.
    if let Some(b) = burst.take() {
        if !stale {
            sent_in_order(&b, burst_room(&b), &mut last_sent);
        }
        o.finish_burst(&b, burst_room(&b), false);
    }
    for _ in 0..(2 * MAX_READS + 2) * 21 {
        let Some(b) = o.take_burst(BURST) else {
            break;
        };
        sent_in_order(&b, burst_room(&b), &mut last_sent);
        assert!(!o.finish_burst(&b, burst_room(&b), false));
    }
    assert!(o.is_empty(), "the outbox drains");
    assert!(!o.is_closing());
}

/// Packets a burst may send.
fn burst_room(b: &Burst) -> u32 {
    match b.entry {
        Entry::Read(r) => b.until - r.next,
        Entry::Answer(_) => 1,
    }
}

/// Checks that the `sent` packets of `b` leave after `last` in PSN order.
fn sent_in_order(b: &Burst, sent: u32, last: &mut Option<Psn>) {
    let (first, n) = match b.entry {
        Entry::Read(r) => (r.psn.add(r.next), sent),
        Entry::Answer(a) => (a.psn, sent.min(1)),
    };
    for k in 0..n {
        let p = first.add(k);
        if let Some(l) = *last {
            assert!(
                p.distance_from(l) > 0,
                "{p:?} after {l:?}: answers leave in PSN order"
            );
        }
        *last = Some(p);
    }
}

/// A datagram of the emulated LAN as it arrives from the fabric.
fn lan_datagram(data: &[u8]) {
    match lan::classify_datagram(data) {
        Err(e) => hit(1, e as u64),
        Ok(Datagram::Fragment { header, payload }) => {
            hit(2, u64::from(header.count == 1));
            assert_eq!(&header.encode()[..], &data[..lan::FRAG_HEADER_LEN]);
            assert_eq!(payload, &data[lan::FRAG_HEADER_LEN..]);
            assert!(usize::from(header.offset) + payload.len() <= lan::MAX_FRAME_LEN);
            assert!(header.index < header.count);
        }
        Ok(Datagram::Announcement(a)) => {
            hit(3, u64::from(a.leaving));
            assert_eq!(&a.encode()[..], data, "encode(parse(x)) == x");
            assert_eq!(lan::Announcement::parse(&a.encode()), Ok(a));
        }
    }
}

/// A frame cut to the path MTU and put back together from its fragments in
/// any order, with duplicates, losses and strangers' fragments in between.
fn lan_reassembly(data: &[u8]) {
    let mut input = Input::new(data);
    let slots = 1 + usize::from(input.u8() % 4);
    let mut table = Reassembler::new(vec![ReassemblySlot::CLOSED; slots]);
    // What each slot's buffer holds, as the caller would copy it.
    let mut buffers = vec![vec![None::<u8>; lan::MAX_FRAME_LEN]; slots];
    let mut now = 0u64;
    let mut frame_no = 0u16;
    // (sender, frame) keys a stranger's fragment was taken for.
    let mut tainted = std::collections::HashSet::new();
    while !input.is_empty() {
        let frame_len = usize::from(input.u16()) % (lan::MAX_FRAME_LEN + 2);
        let datagram_len = usize::from(input.u16() % 9100);
        let sender = u16::from(input.u8() % 3);
        frame_no = frame_no.wrapping_add(1);
        let plan = match FragmentPlan::new(frame_len, datagram_len) {
            Ok(plan) => plan,
            Err(e) => {
                hit(1, e as u64);
                continue;
            }
        };
        let count = plan.count();
        hit(2, count.min(70) as u64);
        let frame: Vec<u8> = (0..frame_len)
            .map(|i| (i as u8) ^ (frame_no as u8))
            .collect();
        // Each fragment's datagram, checked by the receive side's parser.
        let mut datagrams = Vec::new();
        let mut covered = 0;
        for i in 0..count {
            let (offset, len) = plan.fragment(i).expect("inside the plan");
            assert_eq!(offset, covered, "fragments are contiguous");
            assert!(len + lan::FRAG_HEADER_LEN <= datagram_len);
            covered += len;
            let header = plan.header(i, frame_no).expect("a header");
            let mut d = header.encode().to_vec();
            d.extend_from_slice(&frame[offset..offset + len]);
            datagrams.push(d);
        }
        assert_eq!(covered, frame_len);
        assert!(plan.fragment(count).is_none());
        // Deliver in an order, duplicates and losses the input picks.
        let sends = usize::from(input.u8() % 80);
        let mut order: Vec<usize> = (0..count).collect();
        for i in (1..count).rev() {
            order.swap(i, usize::from(input.u8()) % (i + 1));
        }
        for k in 0..sends.max(count) {
            let pick = match order.get(k) {
                Some(&i) if input.u8() < 240 => i,
                _ => usize::from(input.u8()) % count,
            };
            now += u64::from(input.u8() % 8);
            let stranger = input.u8() > 250;
            let bytes = if stranger {
                // A fragment of nobody's frame, from the input.
                input.bytes(64).to_vec()
            } else {
                datagrams[pick].clone()
            };
            let Ok(Datagram::Fragment { header, payload }) = lan::classify_datagram(&bytes) else {
                assert!(stranger, "our own fragments parse");
                continue;
            };
            if stranger {
                tainted.insert((sender, header.frame));
            }
            let step = table.accept(sender, &header, payload.len(), now);
            let copy = |slot: usize, offset: usize, buffers: &mut Vec<Vec<Option<u8>>>| {
                assert!(slot < slots);
                let end = offset + payload.len();
                assert!(end <= lan::MAX_FRAME_LEN, "the copy stays in the buffer");
                for (i, b) in payload.iter().enumerate() {
                    buffers[slot][offset + i] = Some(*b);
                }
            };
            match step {
                Step::Deliver => {
                    hit(3, 0);
                    assert_eq!(header.count, 1);
                    if !stranger {
                        assert_eq!(payload, &frame[..]);
                    }
                }
                Step::Copy {
                    slot,
                    offset,
                    fresh,
                    evicted,
                } => {
                    hit(3, 1 + u64::from(fresh) + 2 * u64::from(evicted.is_some()));
                    if fresh {
                        buffers[slot].fill(None);
                    }
                    if let Some(e) = evicted {
                        assert_eq!(e, slot);
                    }
                    copy(slot, offset, &mut buffers);
                }
                Step::Complete {
                    slot,
                    offset,
                    total_len,
                } => {
                    hit(3, 5);
                    copy(slot, offset, &mut buffers);
                    assert!(total_len <= lan::MAX_FRAME_LEN);
                    // Every byte of the frame was copied in.
                    let got: Option<Vec<u8>> = buffers[slot][..total_len].iter().copied().collect();
                    let got = got.expect("a complete frame has no holes");
                    if header.frame == frame_no && !tainted.contains(&(sender, frame_no)) {
                        // Our own fragments alone rebuild our frame.
                        hit(4, 1);
                        assert_eq!(got, frame, "the frame as it was sent");
                    }
                    buffers[slot].fill(None);
                }
                Step::Drop { reason, freed_slot } => {
                    hit(3, 6 + reason as u64);
                    if let Some(s) = freed_slot {
                        assert!(s < slots);
                        buffers[s].fill(None);
                    }
                }
            }
        }
        assert!(table.open() <= slots);
        if input.u8() > 200 {
            now += 200;
            table.expire(now, |slot| {
                assert!(slot < slots);
                buffers[slot].fill(None);
            });
            assert_eq!(table.open(), 0);
        }
    }
}

/// iblan's forwarding table against a model without buckets: a MAC is
/// found only behind the LID it was last learned with and only while it
/// is younger than the ageing time; the table never holds more than its
/// slots, and nothing but unicast MACs and unicast LIDs is ever learned.
fn fdb_target(data: &[u8]) {
    const AGEING: u64 = 1000;
    let mut input = Input::new(data);
    let slots = usize::from(input.u8() % 40);
    let mut table = Fdb::new(vec![fdb::Slot::FREE; slots], AGEING);
    // MAC -> (LID, last seen), every learning the table accepted.
    let mut model: std::collections::HashMap<[u8; 6], (u16, u64)> = Default::default();
    let mut now = 0u64;
    while !input.is_empty() {
        let op = input.u8();
        // Few distinct MACs, so that they collide and repeat.
        let mut mac = [0x52, 0x54, 0, 0, 0, input.u8() % 24];
        if op & 0x80 != 0 {
            mac[0] |= 1;
        }
        now += u64::from(input.u8()) * 8;
        hit(2, u64::from(op % 4) | (table.len(now) as u64) << 2);
        match op % 4 {
            0 | 1 => {
                let lid = match input.u8() % 8 {
                    0 => 0,
                    1 => 0xc000,
                    n => u16::from(n),
                };
                let learned = table.learn(&mac, lid, now);
                let learnable = mac[0] & 1 == 0 && (1..0xc000).contains(&lid);
                if !learnable || slots < fdb::WAYS {
                    assert_eq!(learned, Learned::Ignored);
                } else {
                    let known = model.get(&mac).filter(|(_, seen)| now - seen < AGEING);
                    match learned {
                        Learned::Refreshed => assert_eq!(known.map(|k| k.0), Some(lid)),
                        Learned::Moved => assert!(known.is_some_and(|k| k.0 != lid)),
                        Learned::New | Learned::Replaced => {}
                        Learned::Ignored => panic!("a learnable MAC was ignored"),
                    }
                    model.insert(mac, (lid, now));
                }
            }
            2 => {
                let found = table.lookup(&mac, now);
                if let Some(lid) = found {
                    let known = model.get(&mac).filter(|(_, seen)| now - seen < AGEING);
                    assert_eq!(known.map(|k| k.0), Some(lid), "a stale or wrong LID");
                }
            }
            _ => {
                let lid = u16::from(input.u8() % 8);
                table.forget_lid(lid);
                model.retain(|_, (l, _)| *l != lid);
                assert!(table.entries(now).all(|e| e.lid != lid));
            }
        }
        assert!(table.len(now) <= slots - slots % fdb::WAYS);
        // The newest learning of a learnable MAC is always found.
        for entry in table.entries(now) {
            assert_eq!(model.get(&entry.mac).map(|k| k.0), Some(entry.lid));
            assert!(entry.age_ms < AGEING);
        }
    }
}

/// Connected mode's handshake: any bytes parse to a message that encodes
/// back to them, or to an error; one side driven by any sequence of
/// events and messages destroys only QPs it was given, each once, and
/// holds at most one.
fn connect(data: &[u8]) {
    let mut input = Input::new(data);
    let parsed = ConnectMessage::parse(input.bytes(CONNECT_LEN));
    match parsed {
        Err(e) => hit(1, e as u64),
        Ok(msg) => {
            hit(2, msg.op as u64);
            assert_eq!(ConnectMessage::parse(&msg.encode()), Ok(msg));
        }
    }
    let mut conn = Connection::new(MAX_CONNECTED_FRAME, 0, input.bool());
    let mut live: Vec<u32> = Vec::new();
    let mut next_qpn = 0x100u32;
    let mut now = 0u64;
    while !input.is_empty() {
        now += u64::from(input.u16() % 512);
        let action = match input.u8() % 8 {
            0 => conn.want(now),
            1 => conn.tick(now),
            2 => conn.fail(now),
            3 => conn.close(),
            4 => {
                conn.frame_received(MAX_CONNECTED_FRAME);
                Action::None
            }
            _ => {
                // A message of the peer, made valid from the input.
                let op =
                    [Op::Offer, Op::Accept, Op::Confirm, Op::Refuse][usize::from(input.u8() % 4)];
                let own = conn.qpn().unwrap_or(2);
                let msg = ConnectMessage {
                    op,
                    qpn: 2 + u32::from(input.u8() % 4),
                    psn: input.u32() & 0xff_ffff,
                    your_qpn: if op == Op::Offer {
                        0
                    } else if input.bool() {
                        own
                    } else {
                        3
                    },
                    max_frame: MAX_CONNECTED_FRAME,
                    lan: 0,
                };
                conn.receive(&msg, input.bool(), now)
            }
        };
        hit(3, action_code(&action));
        // What the driver does with it: each step may ask for at most
        // one follow-up (a QP made), whose answer is an action too.
        let follow = match action {
            Action::CreateQp => {
                next_qpn += 1;
                live.push(next_qpn);
                conn.offer(next_qpn, 0, now)
            }
            Action::CreateAndAccept { peer_qpn, peer_psn } => {
                next_qpn += 1;
                live.push(next_qpn);
                conn.accepted(next_qpn, 0, (peer_qpn, peer_psn), now)
            }
            other => other,
        };
        if let Action::Destroy(qpn) = follow {
            let before = live.len();
            live.retain(|&q| q != qpn);
            assert_eq!(live.len() + 1, before, "destroyed QP {qpn} it did not hold");
        }
        assert!(live.len() <= 1, "holds QPs {live:?}");
        assert_eq!(conn.qpn(), live.first().copied(), "{conn:?} vs {live:?}");
        if let Some((qpn, _)) = conn.up() {
            assert_eq!(Some(qpn), conn.qpn());
        }
    }
}

fn action_code(action: &Action) -> u64 {
    match action {
        Action::None => 0,
        Action::CreateQp => 1,
        Action::Send(_) => 2,
        Action::ConnectAndSend { .. } => 3,
        Action::CreateAndAccept { .. } => 4,
        Action::Destroy(_) => 5,
    }
}

/// Any run of opcodes, each with a note of whether this side sent a
/// request: the state follows a model of it, never overflows, survives
/// the trip through its atomic word, and asks for the note only at the
/// start or the one packet of a SEND or WRITE.
fn steer_target(data: &[u8]) {
    use headers::{Operation, Position};
    let mut runs = Runs::default();
    // The model: packets of the peer's request under way, and whether it
    // answers one of ours.
    let (mut packets, mut answers) = (0u32, false);
    for pair in data.chunks(2) {
        let (opcode, sent) = (pair[0], pair.get(1).is_some_and(|b| b & 1 != 0));
        let info = headers::opcode_info(opcode);
        let mut asked = false;
        let steer = may_steer(info, &mut runs, || {
            asked = true;
            sent
        });
        assert_eq!(Runs::from_bits(runs.to_bits()), runs);
        let kind = info.map(|i| (i.operation, i.position));
        let expected = match kind {
            Some((Operation::ReadResponse, p)) => matches!(p, Position::First | Position::Middle),
            Some((Operation::Send | Operation::Write, Position::First)) => {
                (packets, answers) = (1, sent);
                !sent
            }
            Some((Operation::Send | Operation::Write, Position::Middle)) => {
                packets += 1;
                !answers || packets > u32::from(TAKEN_HERE)
            }
            Some((Operation::Send | Operation::Write, _)) => {
                (packets, answers) = (0, false);
                false
            }
            _ => false,
        };
        let asks = matches!(
            kind,
            Some((
                Operation::Send | Operation::Write,
                Position::First | Position::Only
            ))
        );
        assert_eq!(steer, expected, "opcode {opcode:#x}");
        assert_eq!(asked, asks, "opcode {opcode:#x}");
        hit(1, u64::from(steer) | u64::from(asked) << 1);
    }
}
