// SPDX-License-Identifier: GPL-2.0

//! The long fuzz run (`make fuzz`): every target of `fuzz/targets.rs` (or
//! those named) in turn, a slice at a time, for `--seconds` in all.
//!
//!     cargo run --profile fuzz --example fuzz -- [--seconds N] [--seed N]
//!         [--corpus-out DIR] [--crashes DIR] [TARGET...]
//!     cargo run --example fuzz -- --replay TARGET FILE...
//!     cargo run --example fuzz -- --write-seeds DIR [--pcap FILE]...
//!
//! Built with SanitizerCoverage (the Makefile's `FUZZ_RUSTFLAGS`) it keeps
//! the inputs that reach new edges, and writes them to `--corpus-out`, where
//! the next run starts from too. A failing input is written to `--crashes`
//! and the run exits 1.

#[path = "../fuzz/engine.rs"]
mod engine;
#[path = "../fuzz/targets.rs"]
mod targets;

use srnic_pure::grh::{self, IpHeader};
use srnic_pure::headers::{self, Packet};
use srnic_pure::icrc;
use srnic_pure::lan::{Announcement, FragmentPlan};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: fuzz [--seconds N] [--seed N] [--corpus-out DIR] [--crashes DIR] [TARGET...]\n       \
         fuzz --replay TARGET FILE...\n       fuzz --write-seeds DIR [--pcap FILE]..."
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut seconds = 300.0f64;
    let mut seed = None;
    let mut corpus_out = None;
    let mut crashes = PathBuf::from("fuzz-crashes");
    let mut names = Vec::new();
    let mut replay = None;
    let mut write_seeds = None;
    let mut pcaps = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => match args.next().and_then(|s| s.parse().ok()) {
                Some(s) => seconds = s,
                None => return usage(),
            },
            "--seed" => seed = args.next().and_then(|s| s.parse::<u64>().ok()),
            "--corpus-out" => corpus_out = args.next().map(PathBuf::from),
            "--crashes" => crashes = args.next().map(PathBuf::from).unwrap_or(crashes),
            "--replay" => replay = args.next(),
            "--write-seeds" => write_seeds = args.next().map(PathBuf::from),
            "--pcap" => pcaps.extend(args.next().map(PathBuf::from)),
            "-h" | "--help" => return usage(),
            _ => names.push(arg),
        }
    }
    if let Some(dir) = write_seeds {
        return write_all_seeds(&dir, &pcaps);
    }
    if let Some(name) = replay {
        return replay_files(&name, &names);
    }
    let chosen: Vec<_> = targets::TARGETS
        .iter()
        .filter(|t| names.is_empty() || names.iter().any(|n| n == t.0))
        .collect();
    if chosen.is_empty() || chosen.len() < names.len() {
        eprintln!(
            "targets: {}",
            targets::TARGETS
                .iter()
                .map(|t| t.0)
                .collect::<Vec<_>>()
                .join(" ")
        );
        return usage();
    }
    let seed = seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    println!(
        "fuzzing {} targets for {seconds} s, seed {seed}, edge coverage {}",
        chosen.len(),
        if engine::has_edge_coverage() {
            "on"
        } else {
            "off (target features only)"
        }
    );
    let mut fuzzers: Vec<engine::Fuzzer> = chosen
        .iter()
        .map(|&&(name, target, max_len)| {
            let mut seeds = engine::load_dir(&corpus_dir(name));
            let out = corpus_out.as_ref().map(|d| d.join(name));
            if let Some(dir) = &out {
                seeds.extend(engine::load_dir(dir));
            }
            engine::Fuzzer::new(name, target, max_len, seed, seeds, out)
        })
        .collect();
    let end = Instant::now() + Duration::from_secs_f64(seconds.max(0.0));
    // Slices short enough that every target gets its turn in a short run.
    let slice = Duration::from_secs_f64((seconds / (4.0 * fuzzers.len() as f64)).clamp(0.05, 5.0));
    let mut last_report = Instant::now();
    loop {
        for f in fuzzers.iter_mut() {
            let now = Instant::now();
            if now >= end && f.executions > 0 {
                break;
            }
            let outcome = f.run_until((now + slice).min(end));
            if let Some((input, message)) = outcome.failure {
                let _ = std::fs::create_dir_all(&crashes);
                let path = crashes.join(format!("{}-{}.hex", f.name, engine::name_of(&input)));
                let _ = std::fs::write(&path, engine::to_hex(&input) + "\n");
                eprintln!(
                    "FAILED {}: {message}\ninput ({} bytes): {}\nsaved as {} (replay: fuzz --replay {} FILE)",
                    f.name,
                    input.len(),
                    engine::to_hex(&input),
                    path.display(),
                    f.name
                );
                return ExitCode::FAILURE;
            }
        }
        let done = Instant::now() >= end;
        if done || last_report.elapsed() >= Duration::from_secs(30) {
            last_report = Instant::now();
            for f in &fuzzers {
                println!(
                    "  {:18} {:>10} runs {:>6} inputs {:>7} features",
                    f.name,
                    f.executions,
                    f.corpus.len(),
                    f.features()
                );
            }
        }
        if done {
            return ExitCode::SUCCESS;
        }
    }
}

fn replay_files(name: &str, files: &[String]) -> ExitCode {
    let Some(&(_, target, _)) = targets::TARGETS.iter().find(|t| t.0 == name) else {
        return usage();
    };
    let mut failed = false;
    for file in files {
        let Some(input) = engine::load_file(Path::new(file)) else {
            eprintln!("{file}: unreadable");
            return ExitCode::from(2);
        };
        match engine::run_one(target, &input) {
            Ok(()) => println!("{file}: ok"),
            Err(message) => {
                println!("{file}: FAILED: {message}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes one seed of `target`.
fn seed(dir: &Path, target: &str, label: &str, bytes: &[u8]) {
    let d = dir.join(target);
    let _ = std::fs::create_dir_all(&d);
    let _ = std::fs::write(d.join(format!("{label}.hex")), engine::to_hex(bytes) + "\n");
}

/// A transport packet of every opcode the codec knows, with a payload of
/// `payload_len` if the opcode carries one, and no ICRC computed.
fn transport_packet(opcode: u8, payload_len: usize) -> Option<Vec<u8>> {
    let info = headers::opcode_info(opcode)?;
    let payload_len = if info.payload { payload_len } else { 0 };
    let pad = headers::pad_for(payload_len);
    let has = |flag| info.headers & flag != 0;
    let p = Packet {
        info,
        bth: headers::Bth {
            opcode,
            solicited: false,
            migreq: true,
            pad,
            pkey: headers::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: 0x11,
            ack_req: true,
            psn: 0x00ab_cdef,
        },
        reth: has(headers::hdr::RETH).then_some(headers::Reth {
            va: 0x7f00_1234_5000,
            rkey: 0x1234,
            dma_len: payload_len as u32,
        }),
        aeth: has(headers::hdr::AETH).then_some(headers::Aeth {
            syndrome: 0x1f,
            msn: 7,
        }),
        atomic: has(headers::hdr::ATOMIC_ETH).then_some(headers::AtomicEth {
            va: 0x7f00_0000_1000,
            rkey: 0x4321,
            swap_add: 5,
            compare: 3,
        }),
        atomic_ack: has(headers::hdr::ATOMIC_ACK_ETH).then_some(3),
        imm: has(headers::hdr::IMM).then_some(0xdead_beef),
        ieth: has(headers::hdr::IETH).then_some(0x5678),
        deth: has(headers::hdr::DETH).then_some(headers::Deth {
            qkey: 0x8001_0000,
            src_qp: 1,
        }),
        feth: has(headers::hdr::FETH).then_some(headers::Feth {
            placement: headers::placement::GLOBAL,
            selectivity: headers::selectivity::RANGE,
        }),
        payload_offset: info.header_len(),
        payload_len,
    };
    let mut out = vec![0u8; info.header_len() + payload_len + usize::from(pad) + 4];
    headers::write_headers(&p, &mut out)?;
    for (i, b) in out[info.header_len()..].iter_mut().enumerate() {
        *b = i as u8;
    }
    Some(out)
}

/// The IP packet around `transport` (BTH to ICRC), with its ICRC.
fn ip_packet(v6: bool, transport: &[u8]) -> Vec<u8> {
    let mapped = |a| grh::ipv4_mapped(a);
    let udp_len = (8 + transport.len()) as u16;
    let h = IpHeader {
        sgid: if v6 {
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        } else {
            mapped([10, 0, 0, 1])
        },
        dgid: if v6 {
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]
        } else {
            mapped([10, 0, 0, 2])
        },
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
        ip_payload_len: udp_len,
    };
    let ip: Vec<u8> = if v6 {
        h.ipv6_header().to_vec()
    } else {
        h.ipv4_header().to_vec()
    };
    let mut body = grh::udp_header(0xc000, 4791, udp_len).to_vec();
    body.extend_from_slice(transport);
    let covered = body.len() - 4;
    let crc = if v6 {
        icrc::icrc_ipv6(&ip, &body[..covered])
    } else {
        icrc::icrc_ipv4(&ip, &body[..covered])
    }
    .unwrap_or(0);
    body[covered..].copy_from_slice(&crc.to_le_bytes());
    let mut packet = ip;
    packet.extend(body);
    packet
}

/// RoCEv2 IP packets of a pcap file (Ethernet, UDP port 4791).
fn pcap_packets(path: &Path) -> Vec<Vec<u8>> {
    let Ok(data) = std::fs::read(path) else {
        return Vec::new();
    };
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
    };
    if word(0) != Some(0xa1b2_c3d4) && word(0) != Some(0xa1b2_3c4d) {
        eprintln!("{}: not a little-endian pcap", path.display());
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = 24;
    while let Some(caplen) = word(at + 8) {
        let start = at + 16;
        let Some(frame) = data.get(start..start + caplen as usize) else {
            break;
        };
        at = start + caplen as usize;
        let ip = &frame[14.min(frame.len())..];
        let (ip_len, total) = match frame.get(12..14) {
            Some([0x08, 0x00]) if ip.len() >= 20 => {
                (20, usize::from(u16::from_be_bytes([ip[2], ip[3]])))
            }
            Some([0x86, 0xdd]) if ip.len() >= 40 => {
                (40, 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])))
            }
            _ => continue,
        };
        if ip.get(ip_len + 2..ip_len + 4) == Some(&4791u16.to_be_bytes()) {
            if let Some(p) = ip.get(..total) {
                out.push(p.to_vec());
            }
        }
    }
    out
}

fn write_all_seeds(dir: &Path, pcaps: &[PathBuf]) -> ExitCode {
    // Every opcode, as a transport packet and inside IPv4 and IPv6.
    for opcode in 0..=255u8 {
        for (len, tag) in [(0usize, "empty"), (13, "odd")] {
            let Some(t) = transport_packet(opcode, len) else {
                continue;
            };
            let info = headers::opcode_info(opcode).map(|i| i.payload);
            if len > 0 && info != Some(true) {
                continue;
            }
            seed(dir, "headers", &format!("op{opcode:02x}-{tag}"), &t);
            if len == 0 {
                seed(
                    dir,
                    "rx",
                    &format!("v4-op{opcode:02x}"),
                    &ip_packet(false, &t),
                );
            } else {
                seed(
                    dir,
                    "rx",
                    &format!("v6-op{opcode:02x}"),
                    &ip_packet(true, &t),
                );
            }
        }
    }
    // Captured traffic: the transport part for the parser, whole packets
    // for the receive path. Only distinct (opcode, length) pairs.
    let mut kept = std::collections::HashSet::new();
    for pcap in pcaps {
        let mut n = 0;
        for p in pcap_packets(pcap) {
            let ip_len = if p[0] >> 4 == 6 { 40 } else { 20 };
            let Some(transport) = p.get(ip_len + 8..) else {
                continue;
            };
            let key = (transport.first().copied(), transport.len());
            if !kept.insert(key) {
                continue;
            }
            let label = format!("capture-{}", engine::name_of(&p));
            seed(dir, "rx", &label, &p);
            seed(dir, "headers", &label, transport);
            n += 1;
        }
        println!("{}: {n} distinct RoCEv2 packets", pcap.display());
    }
    // iblan: a fragment of a frame cut at a 1024-byte MTU, a whole frame,
    // announcements.
    if let Ok(plan) = FragmentPlan::new(3000, 1024) {
        for i in 0..plan.count() {
            if let (Some(h), Some((_, len))) = (plan.header(i, 9), plan.fragment(i)) {
                let mut d = h.encode().to_vec();
                d.extend(std::iter::repeat_n(0x5a, len));
                seed(dir, "lan_datagram", &format!("fragment{i}"), &d);
            }
        }
    }
    let a = Announcement {
        leaving: false,
        probe: false,
        lan: 0,
        lid: 0x1234,
        qpn: 0x11,
        qkey: 0x1eee_1eee,
        node_guid: 0x0250_56ff_fe00_0001,
        gid: grh::ipv4_mapped([10, 0, 0, 1]),
        sequence: 3,
    };
    seed(dir, "lan_datagram", "announce", &a.encode());
    seed(
        dir,
        "lan_datagram",
        "announce-leaving",
        &Announcement { leaving: true, ..a }.encode(),
    );
    seed(
        dir,
        "lan_datagram",
        "announce-probe",
        &Announcement { probe: true, ..a }.encode(),
    );
    // Structured targets read their input as numbers; a few shapes each.
    let structured: &[(&str, &str, &[u8])] = &[
        (
            "headers_roundtrip",
            "rdma-write",
            &[0x0a, 0x10, 0x00, 1, 0, 0xff, 0xff, 0, 0, 0, 0, 0x11],
        ),
        ("headers_roundtrip", "ud-imm", &[0x65, 0x01, 0x01]),
        (
            "grh",
            "v4",
            &[
                1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
            ],
        ),
        (
            "grh",
            "v6",
            &[0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        ),
        (
            "scalars",
            "wrap",
            &[
                0, 0xff, 0xff, 0xf0, 0, 0, 0, 0x10, 0, 0, 0, 4, 0, 0, 4, 1, 0, 0, 4, 0, 0, 0, 5,
                0xdc, 0x1f,
            ],
        ),
        (
            "ring",
            "small",
            &[
                0, 0, 0, 8, 0, 0, 0, 0, 64, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 2, 0xff, 0xff, 0xff,
                0xff, 3, 5,
            ],
        ),
        (
            "wr",
            "send",
            &[
                0, 2, 4, 0, 0, 0, 64, 0, 1, 0, 0, 0, 2, 2, 0, 0, 0, 8, 0, 0, 0, 0, 8, 0, 1,
            ],
        ),
        (
            "wr",
            "atomic",
            &[0, 5, 4, 0, 0, 0, 64, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 8, 0, 1],
        ),
        (
            "fifo",
            "three",
            &[2, 0, 1, 0, 2, 0, 3, 0, 4, 3, 0, 5, 1, 6, 2, 7, 1],
        ),
        (
            "cq_event",
            "moderated",
            &[0, 4, 0, 4, 0, 10, 0, 2, 2, 2, 5, 1, 0x82],
        ),
        (
            "outbox",
            "read-and-acks",
            &[
                0, 0, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x83, 5, 64, 6, 2, 0,
                5, 64, 6, 1, 0, 2, 2, 3, 7, 1,
            ],
        ),
        (
            "lan_reassembly",
            "three-fragments",
            &[
                2, 0x0b, 0xb8, 0x04, 0x00, 1, 10, 2, 0, 1, 1, 1, 2, 0, 0, 1, 0, 2, 1, 0,
            ],
        ),
    ];
    for (target, label, bytes) in structured {
        seed(dir, target, label, bytes);
    }
    ExitCode::SUCCESS
}
