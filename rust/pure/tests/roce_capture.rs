// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 packets the kernel's rxe sent during `rping` between two test
//! VMs (captured by the `rxe_rping` scenario's pcap; IPv4 packets, from
//! the IP header to the ICRC): our codec must read them and compute the
//! same ICRC.

use srnic_pure::headers::{self, Operation, Position, Transport};
use srnic_pure::icrc::{icrc_ipv4, rxe_flush_icrc};

/// (opcode, IPv4 packet as hex)
const CAPTURED: &[(u8, &str)] = &[
    (0x64, "45000134413640004011e4800a0000020a000001d87212b7012000006400ffff0000000180000000800100000000000101070203000000000000000275d301df0010000000000000df01d375000000000000000001061c06505400fffe00000200000000000000000000110100000001000000a0f37b99a7ffff37f0ffffffff00000000000000000000ffff0a00000200000000000000000000ffff0a000001c9e1a0000040008800000000000000000000000000000000000000000000000000000000000000000000000000000000000000000040eb6c0000000000000000000000000a0000020000000000000000000000000a00000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000002c59f508"),
    (0x4, "4500003c416440004011e54a0a0000020a000001de2812b7002800000400ffff0000001180cd775e0000557af98d35f00000058400000040a28a5af9"),
    (0x11, "45000030e2a54000401144150a0000010a000002de2812b7001c00001100ffff0000001100cd775e1f0000010fc52785"),
    (0xc, "4500003ce2a64000401144080a0000010a000002de2812b7002800000c00ffff0000001180f37b990000557af98d35f00000058400000040dab2bce6"),
    (0x10, "45000070416740004011e5130a0000020a000001de2812b7005c00001000ffff0000001100f37b991f00000172646d612d70696e672d303a204142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172008b60a017"),
    (0xa, "4500007ce2ab4000401143c30a0000010a000002de2812b7006800000a00ffff0000001180f37b9b0000557af98d0170000004860000004072646d612d70696e672d303a204142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717200910ed654"),
];

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// The IPv4 header and everything from UDP to the ICRC, trimmed to the
/// IP total length (frames may carry Ethernet padding).
fn split(packet: &[u8]) -> (&[u8], &[u8]) {
    let total = u16::from_be_bytes([packet[2], packet[3]]) as usize;
    (&packet[..20], &packet[20..total])
}

#[test]
fn icrc_matches_rxe() {
    for (opcode, hex) in CAPTURED {
        let packet = bytes(hex);
        let (ip, udp_to_icrc) = split(&packet);
        let (udp_to_pad, icrc) = udp_to_icrc.split_at(udp_to_icrc.len() - 4);
        let wire = u32::from_le_bytes(icrc.try_into().unwrap());
        assert_eq!(icrc_ipv4(ip, udp_to_pad), Ok(wire), "opcode {opcode:#x}");
    }
}

#[test]
fn icrc_detects_a_flipped_bit_but_not_a_changed_ttl() {
    let packet = bytes(CAPTURED[1].1);
    let (ip, udp_to_icrc) = split(&packet);
    let (udp_to_pad, _) = udp_to_icrc.split_at(udp_to_icrc.len() - 4);
    let good = icrc_ipv4(ip, udp_to_pad).unwrap();
    let mut ip2 = ip.to_vec();
    ip2[8] = ip2[8].wrapping_sub(1);
    ip2[10] ^= 0x55;
    assert_eq!(icrc_ipv4(&ip2, udp_to_pad).unwrap(), good);
    let mut body = udp_to_pad.to_vec();
    let last = body.len() - 1;
    body[last] ^= 1;
    assert_ne!(icrc_ipv4(ip, &body).unwrap(), good);
}

#[test]
fn parses_what_rxe_sent() {
    for (opcode, hex) in CAPTURED {
        let packet = bytes(hex);
        let (_, udp_to_icrc) = split(&packet);
        let transport = &udp_to_icrc[8..];
        let parsed = headers::parse(transport).unwrap_or_else(|e| panic!("{opcode:#x}: {e:?}"));
        assert_eq!(parsed.bth.opcode, *opcode);
        assert_eq!(
            parsed.payload_offset + parsed.payload_len + usize::from(parsed.bth.pad) + 4,
            transport.len()
        );
        let info = parsed.info;
        match opcode {
            0x64 => {
                assert_eq!(info.transport, Transport::Ud);
                let deth = parsed.deth.unwrap();
                assert_eq!(deth.qkey, 0x8001_0000, "QP1's well-known Q_Key");
                assert_eq!(parsed.payload_len, 256, "a MAD");
            }
            0x04 => assert_eq!(
                (info.operation, info.position),
                (Operation::Send, Position::Only)
            ),
            0x11 => {
                let aeth = parsed.aeth.unwrap();
                assert_eq!(aeth.syndrome, 0x1f, "ACK with unlimited credits");
                assert_eq!(parsed.payload_len, 0);
            }
            0x0c => {
                let reth = parsed.reth.unwrap();
                assert_eq!(reth.dma_len, 64);
                assert_eq!(parsed.payload_len, 0);
            }
            0x10 => assert!(parsed.aeth.is_some() && parsed.payload_len == 64),
            0x0a => assert!(parsed.reth.unwrap().dma_len as usize == parsed.payload_len),
            _ => {}
        }
        // Writing the headers back gives the same bytes.
        let mut bth = [0u8; 12];
        parsed.bth.write(&mut bth);
        assert_eq!(&bth[..], &transport[..12], "BTH of {opcode:#x}");
    }
}

/// An RDMA FLUSH (global, range) rxe of Linux 6.12 sent to srnic in the
/// `rc_interop` scenario (IPv4 packet as hex).
const RXE_FLUSH: &str = "45000040387040004011ee3a0a0000020a000001c13212b7002c00001c00ffff000000118000001e000000010000560a6381e0000000020100008000da9b6200";

#[test]
fn rxe_flush_has_its_own_icrc() {
    let packet = bytes(RXE_FLUSH);
    let (ip, udp_to_icrc) = split(&packet);
    let (udp_to_pad, icrc) = udp_to_icrc.split_at(udp_to_icrc.len() - 4);
    let wire = u32::from_le_bytes(icrc.try_into().unwrap());
    // Not the standard ICRC: the transport headers are covered twice.
    assert_ne!(icrc_ipv4(ip, udp_to_pad), Ok(wire));
    assert_eq!(rxe_flush_icrc(ip, udp_to_pad), Ok(wire));
    let parsed = headers::parse(&udp_to_icrc[8..]).unwrap();
    assert_eq!(parsed.info.operation, Operation::Flush);
    let feth = parsed.feth.unwrap();
    assert_eq!((feth.placement, feth.selectivity), (1, 0));
    assert_eq!(parsed.reth.unwrap().dma_len, 0x8000);
    assert_eq!(parsed.payload_len, 0);
}
