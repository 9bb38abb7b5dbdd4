// SPDX-License-Identifier: GPL-2.0

//! Checks every RoCEv2 packet (UDP port 4791 over IPv4 or IPv6, untagged
//! or in an 802.1Q VLAN) of a pcap capture: its ICRC and its transport
//! headers, with srnic's own codec.
//!
//!     cargo run --example roce_pcap -- CAPTURE.pcap
//!
//! Prints how many packets were checked and exits 1 if any is bad.

use srnic_pure::headers;
use srnic_pure::icrc::{
    icrc_ipv4, icrc_ipv6, rxe_flush_icrc, IPV4_HEADER_LEN, IPV6_HEADER_LEN, UDP_HEADER_LEN,
};
use std::process::ExitCode;

fn u32_at(b: &[u8], at: usize, little: bool) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if little {
        u32::from_le_bytes(bytes)
    } else {
        u32::from_be_bytes(bytes)
    })
}

/// The IP version of a RoCEv2 packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    V4,
    V6,
}

/// What is wrong with the Ethernet frame `frame`, if it is RoCEv2;
/// `Ok(None)` for other traffic. An 802.1Q tag is skipped (the ICRC does
/// not cover the link layer); `tagged` says whether there was one.
fn check(frame: &[u8], tagged: &mut bool) -> Result<Option<Version>, String> {
    const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
    const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
    const ETHERTYPE_VLAN: [u8; 2] = [0x81, 0x00];
    *tagged = frame.get(12..14) == Some(&ETHERTYPE_VLAN[..]);
    let type_at = if *tagged { 16 } else { 12 };
    let ip = frame.get(type_at + 2..).ok_or("short frame")?;
    let (version, ip_len) = match frame.get(type_at..type_at + 2) {
        Some(t) if t == ETHERTYPE_IPV4 => {
            if ip.first() != Some(&0x45) || ip.get(9) != Some(&17) {
                return Ok(None);
            }
            (Version::V4, IPV4_HEADER_LEN)
        }
        Some(t) if t == ETHERTYPE_IPV6 => {
            if ip.get(6) != Some(&17) {
                return Ok(None);
            }
            (Version::V6, IPV6_HEADER_LEN)
        }
        _ => return Ok(None),
    };
    let udp = ip.get(ip_len..).ok_or("short IP")?;
    let dport = u16::from_be_bytes([udp[2], udp[3]]);
    if dport != 4791 {
        return Ok(None);
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let datagram = udp.get(..udp_len).ok_or("UDP length past the frame")?;
    let crc_at = datagram.len().checked_sub(4).ok_or("no ICRC")?;
    let (covered, crc) = datagram.split_at(crc_at);
    let want = match version {
        Version::V4 => icrc_ipv4(&ip[..ip_len], covered),
        Version::V6 => icrc_ipv6(&ip[..ip_len], covered),
    }
    .map_err(|e| format!("{e:?}"))?;
    let got = u32::from_le_bytes(crc.try_into().map_err(|_| "ICRC")?);
    // rxe's FLUSH requests carry rxe's own ICRC (and srnic answers in
    // kind): that variant is right for them too.
    let flush = datagram.get(UDP_HEADER_LEN) == Some(&0x1c);
    if want != got && !(flush && rxe_flush_icrc(&ip[..ip_len], covered) == Ok(got)) {
        return Err(format!("ICRC {got:#010x}, expected {want:#010x}"));
    }
    headers::parse(&datagram[UDP_HEADER_LEN..]).map_err(|e| format!("headers: {e:?}"))?;
    Ok(Some(version))
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: roce_pcap CAPTURE.pcap");
        return ExitCode::from(2);
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let little = match u32_at(&data, 0, true) {
        Some(0xa1b2_c3d4) | Some(0xa1b2_3c4d) => true,
        Some(0xd4c3_b2a1) | Some(0x4d3c_b2a1) => false,
        _ => {
            eprintln!("{path}: not a pcap file");
            return ExitCode::from(2);
        }
    };
    let (mut at, mut bad, mut index) = (24usize, 0u64, 0u64);
    let (mut checked4, mut checked6, mut checked_tagged) = (0u64, 0u64, 0u64);
    while let Some(caplen) = u32_at(&data, at + 8, little) {
        index += 1;
        let start = at + 16;
        let Some(frame) = data.get(start..start + caplen as usize) else {
            eprintln!("{path}: truncated record {index}");
            break;
        };
        let mut tagged = false;
        let checked = check(frame, &mut tagged);
        if tagged && matches!(checked, Ok(Some(_))) {
            checked_tagged += 1;
        }
        match checked {
            Ok(Some(Version::V4)) => checked4 += 1,
            Ok(Some(Version::V6)) => checked6 += 1,
            Ok(None) => {}
            Err(why) => {
                bad += 1;
                if bad <= 10 {
                    println!("packet {index}: {why}");
                }
            }
        }
        at = start + caplen as usize;
    }
    println!(
        "{checked4} IPv4 and {checked6} IPv6 RoCEv2 packets with a correct ICRC and well-formed headers, {bad} bad"
    );
    println!("{checked_tagged} of the good ones in an 802.1Q VLAN");
    if bad > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
