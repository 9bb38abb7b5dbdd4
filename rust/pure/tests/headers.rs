// SPDX-License-Identifier: GPL-2.0

//! The transport header codec: the opcode table, round trips, and packets
//! of random bytes, which must parse or fail but never panic or claim
//! bytes that are not there.

use srnic_pure::headers::{
    self, hdr, opcode_info, pad_for, placement, selectivity, Aeth, AtomicEth, Bth, Deth, Feth,
    Operation, ParseError, Position, Reth, Transport, BTH_LEN, ICRC_LEN,
};

#[test]
fn messages_that_continue() {
    let continuing: Vec<u8> = (0..=255u8)
        .filter(|op| opcode_info(*op).is_some_and(|info| info.continues_message()))
        .collect();
    // RC SEND first/middle, WRITE first/middle, READ response
    // first/middle; UC SEND and WRITE first/middle. UD has one packet a
    // message; requests for a READ or an atomic carry no payload.
    assert_eq!(
        continuing,
        vec![0x00, 0x01, 0x06, 0x07, 0x0d, 0x0e, 0x20, 0x21, 0x26, 0x27]
    );
}

#[test]
fn opcode_table() {
    let known: Vec<u8> = (0..=255u8)
        .filter(|op| opcode_info(*op).is_some())
        .collect();
    // RC: 0x00-0x14, 0x16, 0x17, 0x1c, 0x1d; UC: 0x20-0x2b; UD: 0x64, 0x65.
    let mut expected: Vec<u8> = (0x00..=0x14).chain([0x16, 0x17, 0x1c, 0x1d]).collect();
    expected.extend(0x20..=0x2b);
    expected.extend([0x64, 0x65]);
    assert_eq!(known, expected);
    for op in known {
        let info = opcode_info(op).unwrap();
        assert_eq!(info.opcode, op);
        let transport = match op >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            _ => Transport::Ud,
        };
        assert_eq!(info.transport, transport, "{op:#x}");
    }
    let read_request = opcode_info(0x0c).unwrap();
    assert_eq!(read_request.header_len(), BTH_LEN + 16);
    assert!(!read_request.payload);
    let atomic_ack = opcode_info(0x12).unwrap();
    assert_eq!(atomic_ack.headers, hdr::AETH | hdr::ATOMIC_ACK_ETH);
    assert_eq!(atomic_ack.header_len(), BTH_LEN + 4 + 8);
    let write_only_imm = opcode_info(0x2b).unwrap();
    assert_eq!(write_only_imm.position, Position::Only);
    assert_eq!(write_only_imm.header_len(), BTH_LEN + 16 + 4);
    assert!(opcode_info(0x17).unwrap().headers & hdr::IETH != 0);
}

#[test]
fn headers_apart_from_their_payload() {
    // A WRITE FIRST (BTH and RETH) with a payload of 10 and a pad of 2,
    // of which only the headers are at hand.
    let bth = Bth {
        opcode: 0x06,
        pad: 2,
        pkey: 0xffff,
        dest_qp: 0x11,
        psn: 7,
        ..Bth::default()
    };
    let reth = Reth {
        va: 0x1000,
        rkey: 0x42,
        dma_len: 4096,
    };
    let len = BTH_LEN + 16 + 10 + 2 + ICRC_LEN;
    let mut packet = vec![0xa5u8; len];
    bth.write(&mut packet);
    reth.write(&mut packet[BTH_LEN..]);
    let whole = headers::parse(&packet).unwrap();
    assert_eq!(whole.payload_len, 10);
    for cut in BTH_LEN + 16..=len {
        assert_eq!(headers::parse_head(&packet[..cut], len), Ok(whole));
    }
    for cut in 0..BTH_LEN + 16 {
        assert_eq!(
            headers::parse_head(&packet[..cut], len),
            Err(ParseError::Truncated),
            "cut at {cut}"
        );
    }
    // The length still bounds the payload and its pad.
    assert_eq!(
        headers::parse_head(&packet[..BTH_LEN + 16], BTH_LEN + 16 + 1 + ICRC_LEN),
        Err(ParseError::BadPad)
    );
    assert_eq!(
        headers::parse_head(&packet[..BTH_LEN + 16], BTH_LEN + 16 + 3),
        Err(ParseError::Truncated)
    );
}

#[test]
fn round_trip() {
    let bth = Bth {
        opcode: 0x0a,
        solicited: true,
        migreq: false,
        pad: 3,
        pkey: 0xffff,
        fecn: false,
        becn: true,
        dest_qp: 0x12_3456,
        ack_req: true,
        psn: 0xab_cdef,
    };
    let reth = Reth {
        va: 0x1122_3344_5566_7788,
        rkey: 0xdead_beef,
        dma_len: 5,
    };
    let mut packet = vec![0u8; BTH_LEN + 16 + 8 + ICRC_LEN];
    bth.write(&mut packet);
    reth.write(&mut packet[BTH_LEN..]);
    let parsed = headers::parse(&packet).unwrap();
    assert_eq!(parsed.bth, bth);
    assert_eq!(parsed.reth, Some(reth));
    assert_eq!(parsed.payload_len, 5);
    assert_eq!(pad_for(5), 3);
    assert_eq!(pad_for(8), 0);

    let mut b = [0u8; 28];
    let atomic = AtomicEth {
        va: 1,
        rkey: 2,
        swap_add: 3,
        compare: 4,
    };
    atomic.write(&mut b);
    let mut packet = vec![0u8; BTH_LEN + 28 + ICRC_LEN];
    Bth {
        opcode: 0x13,
        ..Default::default()
    }
    .write(&mut packet);
    packet[BTH_LEN..BTH_LEN + 28].copy_from_slice(&b);
    assert_eq!(headers::parse(&packet).unwrap().atomic, Some(atomic));

    let mut packet = vec![0u8; BTH_LEN + 4 + ICRC_LEN];
    Bth {
        opcode: 0x11,
        ..Default::default()
    }
    .write(&mut packet);
    Aeth {
        syndrome: 0x60,
        msn: 0xff_ffff,
    }
    .write(&mut packet[BTH_LEN..]);
    assert_eq!(
        headers::parse(&packet).unwrap().aeth.unwrap().msn,
        0xff_ffff
    );

    let mut packet = vec![0u8; BTH_LEN + 8 + 4 + ICRC_LEN];
    Bth {
        opcode: 0x65,
        ..Default::default()
    }
    .write(&mut packet);
    Deth {
        qkey: 7,
        src_qp: 0xff_fffe,
    }
    .write(&mut packet[BTH_LEN..]);
    packet[BTH_LEN + 8..BTH_LEN + 12].copy_from_slice(&[1, 2, 3, 4]);
    let parsed = headers::parse(&packet).unwrap();
    assert_eq!(parsed.deth.unwrap().src_qp, 0xff_fffe);
    assert_eq!(parsed.imm.unwrap().to_ne_bytes(), [1, 2, 3, 4]);
}

#[test]
fn malformed_packets() {
    assert_eq!(headers::parse(&[0; 11]), Err(ParseError::Truncated));
    let mut ack = [0u8; BTH_LEN + 4 + ICRC_LEN];
    ack[0] = 0x11;
    assert!(headers::parse(&ack).is_ok());
    // An ACK carries no payload.
    let mut long_ack = [0u8; BTH_LEN + 4 + 4 + ICRC_LEN];
    long_ack[0] = 0x11;
    assert_eq!(headers::parse(&long_ack), Err(ParseError::BadPad));
    // A pad count larger than the payload.
    let mut send = [0u8; BTH_LEN + 2 + ICRC_LEN];
    send[0] = 0x04;
    send[1] = 0x30;
    assert_eq!(headers::parse(&send), Err(ParseError::BadPad));
    // Unknown opcode, bad transport version.
    let mut unknown = [0u8; 64];
    unknown[0] = 0x15;
    assert_eq!(headers::parse(&unknown), Err(ParseError::UnknownOpcode));
    let mut version = [0u8; 64];
    version[1] = 0x01;
    assert_eq!(headers::parse(&version), Err(ParseError::BadVersion));
    // A RETH-carrying opcode cut short.
    let mut write = [0u8; BTH_LEN + 10];
    write[0] = 0x0a;
    assert_eq!(headers::parse(&write), Err(ParseError::Truncated));
}

#[test]
fn random_packets_never_overreach() {
    let mut state = 0x0123_4567_89ab_cdefu64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut buffer = [0u8; 128];
    for _ in 0..200_000 {
        let len = (next() % 128) as usize;
        for b in buffer.iter_mut().take(len) {
            *b = next() as u8;
        }
        // Known opcodes half the time, so that parsing goes deep.
        if len > 0 && next() % 2 == 0 {
            buffer[0] = [
                0x00, 0x04, 0x06, 0x0a, 0x0c, 0x10, 0x11, 0x12, 0x13, 0x17, 0x2b, 0x65,
            ][(next() % 12) as usize];
            if len > 1 {
                buffer[1] &= 0xf0;
            }
        }
        if let Ok(p) = headers::parse(&buffer[..len]) {
            assert!(p.payload_offset + p.payload_len + usize::from(p.bth.pad) + ICRC_LEN == len);
            assert_eq!(p.payload_offset, p.info.header_len());
        }
    }
}

/// Every packet that parses is written back to the same header bytes.
#[test]
fn written_headers_parse_back_identically() {
    let mut state = 0x0bad_5eed_1234_5678u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut buffer = [0u8; 128];
    let mut checked = 0;
    for _ in 0..100_000 {
        let len = 64 + (next() % 64) as usize;
        for b in buffer.iter_mut().take(len) {
            *b = next() as u8;
        }
        buffer[0] = [
            0x00, 0x03, 0x04, 0x05, 0x06, 0x0a, 0x0b, 0x0c, 0x0d, 0x10, 0x11, 0x12, 0x13, 0x14,
            0x16, 0x17, 0x2b, 0x64, 0x65,
        ][(next() % 19) as usize];
        // Version 0, any pad.
        buffer[1] &= 0xf0;
        let Ok(p) = headers::parse(&buffer[..len]) else {
            continue;
        };
        let mut out = [0u8; 128];
        let written = headers::write_headers(&p, &mut out).expect("room");
        assert_eq!(written, p.payload_offset);
        // Reserved bits (BTH byte 4's low 6, RETH/ATOMIC none) are written
        // as zero: compare what the parser reads back.
        let again = headers::parse(
            &{
                let mut whole = buffer;
                whole[..written].copy_from_slice(&out[..written]);
                whole
            }[..len],
        )
        .expect("parses again");
        assert_eq!(again, p);
        checked += 1;
    }
    assert!(checked > 10_000, "only {checked} packets checked");
    let p = headers::parse(&[0u8; 64]).expect("an RC SEND FIRST");
    assert_eq!(headers::write_headers(&p, &mut [0u8; 4]), None);
}

#[test]
fn pkey_membership() {
    use srnic_pure::headers::{pkey_matches, DEFAULT_PKEY};
    // Full members of the default partition meet each other and limited
    // members of it; two limited members do not meet.
    assert!(pkey_matches(0xffff, DEFAULT_PKEY));
    assert!(pkey_matches(0x7fff, DEFAULT_PKEY));
    assert!(pkey_matches(0xffff, 0x7fff));
    assert!(!pkey_matches(0x7fff, 0x7fff));
    // Another partition, and the invalid one, never.
    assert!(!pkey_matches(0x8001, DEFAULT_PKEY));
    assert!(!pkey_matches(0x0000, DEFAULT_PKEY));
    assert!(!pkey_matches(0x8000, 0x8000));
    assert!(!pkey_matches(0x1234, DEFAULT_PKEY));
}

#[test]
fn flush_opcode() {
    let flush = opcode_info(0x1c).unwrap();
    assert_eq!(flush.operation, Operation::Flush);
    assert_eq!(flush.transport, Transport::Rc);
    assert_eq!(flush.position, Position::Only);
    assert_eq!(flush.headers, hdr::FETH | hdr::RETH);
    assert_eq!(flush.header_len(), BTH_LEN + 4 + 16);
    assert!(!flush.payload);
    let atomic_write = opcode_info(0x1d).unwrap();
    assert_eq!(atomic_write.operation, Operation::AtomicWrite);
    assert_eq!(atomic_write.headers, hdr::RETH);
    assert!(atomic_write.payload);
}

#[test]
fn feth_bits() {
    // Bits 3-0 placement, 5-4 selectivity, big-endian.
    let mut out = [0xffu8; 4];
    Feth {
        placement: placement::GLOBAL | placement::PERSISTENT,
        selectivity: selectivity::MEMORY_REGION,
    }
    .write(&mut out);
    assert_eq!(out, [0, 0, 0, 0x13]);
    // Wider values are cut to the field widths.
    Feth {
        placement: 0xff,
        selectivity: 0xff,
    }
    .write(&mut out);
    assert_eq!(out, [0, 0, 0, 0x3f]);
    // Reserved bits are ignored on receipt.
    let parsed = Feth::parse(&[0xff, 0xff, 0xff, 0xc1]);
    assert_eq!(parsed.placement, placement::GLOBAL);
    assert_eq!(parsed.selectivity, 0);
    assert_eq!(
        Feth::parse(&[0, 0, 0, 0x12]).selectivity,
        selectivity::MEMORY_REGION
    );
}

/// A FLUSH request as rxe sends it: BTH, FETH, RETH, no payload, ICRC.
#[test]
fn flush_wire_layout() {
    let bth = Bth {
        opcode: 0x1c,
        pkey: 0xffff,
        dest_qp: 0x11,
        ack_req: true,
        psn: 0x42,
        ..Default::default()
    };
    let mut bytes = vec![0u8; BTH_LEN + 4 + 16 + ICRC_LEN];
    bth.write(&mut bytes);
    bytes[BTH_LEN + 3] = 0x11; // global, whole region
    bytes[BTH_LEN + 4..BTH_LEN + 12].copy_from_slice(&0x7f00_0000_1000u64.to_be_bytes());
    bytes[BTH_LEN + 12..BTH_LEN + 16].copy_from_slice(&0x1234u32.to_be_bytes());
    bytes[BTH_LEN + 16..BTH_LEN + 20].copy_from_slice(&64u32.to_be_bytes());
    let p = headers::parse(&bytes).unwrap();
    assert_eq!(
        p.feth,
        Some(Feth {
            placement: placement::GLOBAL,
            selectivity: selectivity::MEMORY_REGION
        })
    );
    assert_eq!(
        p.reth,
        Some(Reth {
            va: 0x7f00_0000_1000,
            rkey: 0x1234,
            dma_len: 64
        })
    );
    assert_eq!(p.payload_len, 0);
    assert_eq!(p.payload_offset, BTH_LEN + 20);
    // Written back, the same bytes.
    let mut again = vec![0u8; bytes.len()];
    assert_eq!(headers::write_headers(&p, &mut again), Some(BTH_LEN + 20));
    assert_eq!(again[..BTH_LEN + 20], bytes[..BTH_LEN + 20]);
    // A FLUSH carries no payload.
    let mut longer = bytes.clone();
    longer.extend([0u8; 4]);
    assert_eq!(headers::parse(&longer), Err(ParseError::BadPad));
}

/// Every named opcode means in the table what its name says.
#[test]
fn opcode_names_match_the_table() {
    use headers::opcode::*;
    use Operation::*;
    use Position::*;
    let named = [
        (RC_SEND_FIRST, Transport::Rc, Send, First, 0),
        (RC_SEND_MIDDLE, Transport::Rc, Send, Middle, 0),
        (RC_SEND_LAST, Transport::Rc, Send, Last, 0),
        (
            RC_SEND_LAST_WITH_IMMEDIATE,
            Transport::Rc,
            Send,
            Last,
            hdr::IMM,
        ),
        (RC_SEND_ONLY, Transport::Rc, Send, Only, 0),
        (
            RC_SEND_ONLY_WITH_IMMEDIATE,
            Transport::Rc,
            Send,
            Only,
            hdr::IMM,
        ),
        (RC_RDMA_WRITE_FIRST, Transport::Rc, Write, First, hdr::RETH),
        (RC_RDMA_WRITE_MIDDLE, Transport::Rc, Write, Middle, 0),
        (RC_RDMA_WRITE_LAST, Transport::Rc, Write, Last, 0),
        (
            RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            Transport::Rc,
            Write,
            Last,
            hdr::IMM,
        ),
        (RC_RDMA_WRITE_ONLY, Transport::Rc, Write, Only, hdr::RETH),
        (
            RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            Transport::Rc,
            Write,
            Only,
            hdr::RETH | hdr::IMM,
        ),
        (UC_SEND_FIRST, Transport::Uc, Send, First, 0),
        (
            UC_SEND_ONLY_WITH_IMMEDIATE,
            Transport::Uc,
            Send,
            Only,
            hdr::IMM,
        ),
        (UC_RDMA_WRITE_FIRST, Transport::Uc, Write, First, hdr::RETH),
        (
            UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            Transport::Uc,
            Write,
            Only,
            hdr::RETH | hdr::IMM,
        ),
        (
            RC_RDMA_READ_REQUEST,
            Transport::Rc,
            ReadRequest,
            Only,
            hdr::RETH,
        ),
        (
            RC_RDMA_READ_RESPONSE_FIRST,
            Transport::Rc,
            ReadResponse,
            First,
            hdr::AETH,
        ),
        (
            RC_RDMA_READ_RESPONSE_MIDDLE,
            Transport::Rc,
            ReadResponse,
            Middle,
            0,
        ),
        (
            RC_RDMA_READ_RESPONSE_LAST,
            Transport::Rc,
            ReadResponse,
            Last,
            hdr::AETH,
        ),
        (
            RC_RDMA_READ_RESPONSE_ONLY,
            Transport::Rc,
            ReadResponse,
            Only,
            hdr::AETH,
        ),
        (RC_ACKNOWLEDGE, Transport::Rc, Acknowledge, Only, hdr::AETH),
        (
            RC_ATOMIC_ACKNOWLEDGE,
            Transport::Rc,
            AtomicAcknowledge,
            Only,
            hdr::AETH | hdr::ATOMIC_ACK_ETH,
        ),
        (
            RC_COMPARE_SWAP,
            Transport::Rc,
            CompareSwap,
            Only,
            hdr::ATOMIC_ETH,
        ),
        (RC_FETCH_ADD, Transport::Rc, FetchAdd, Only, hdr::ATOMIC_ETH),
        (
            RC_SEND_LAST_WITH_INVALIDATE,
            Transport::Rc,
            Send,
            Last,
            hdr::IETH,
        ),
        (
            RC_SEND_ONLY_WITH_INVALIDATE,
            Transport::Rc,
            Send,
            Only,
            hdr::IETH,
        ),
        (RC_FLUSH, Transport::Rc, Flush, Only, hdr::FETH | hdr::RETH),
        (RC_ATOMIC_WRITE, Transport::Rc, AtomicWrite, Only, hdr::RETH),
        (UD_SEND_ONLY, Transport::Ud, Send, Only, hdr::DETH),
        (
            UD_SEND_ONLY_WITH_IMMEDIATE,
            Transport::Ud,
            Send,
            Only,
            hdr::DETH | hdr::IMM,
        ),
    ];
    for (code, transport, operation, position, extra) in named {
        let info = opcode_info(code).unwrap_or_else(|| panic!("{code:#04x} is not in the table"));
        assert_eq!(
            (
                info.opcode,
                info.transport,
                info.operation,
                info.position,
                info.headers
            ),
            (code, transport, operation, position, extra),
            "opcode {code:#04x}"
        );
    }
}
