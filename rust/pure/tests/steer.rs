// SPDX-License-Identifier: GPL-2.0

//! Which packets of a connection's messages may be steered to another CPU.

use srnic_pure::headers::{opcode, opcode_info};
use srnic_pure::steer::{may_steer, Runs, TAKEN_HERE};

/// The opcodes of a message of `packets` packets made of `first`,
/// `middle`, `last` and `only`.
fn message(packets: usize, [first, middle, last, only]: [u8; 4]) -> Vec<u8> {
    match packets {
        1 => vec![only],
        n => {
            let mut m = vec![first];
            m.extend((2..n).map(|_| middle));
            m.push(last);
            m
        }
    }
}

const WRITE: [u8; 4] = [
    opcode::RC_RDMA_WRITE_FIRST,
    opcode::RC_RDMA_WRITE_MIDDLE,
    opcode::RC_RDMA_WRITE_LAST,
    opcode::RC_RDMA_WRITE_ONLY,
];
const SEND: [u8; 4] = [
    opcode::RC_SEND_FIRST,
    opcode::RC_SEND_MIDDLE,
    opcode::RC_SEND_LAST,
    opcode::RC_SEND_ONLY,
];
const READ_RESPONSE: [u8; 4] = [
    opcode::RC_RDMA_READ_RESPONSE_FIRST,
    opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
    opcode::RC_RDMA_READ_RESPONSE_LAST,
    opcode::RC_RDMA_READ_RESPONSE_ONLY,
];

/// One side of a QP: what it received, and whether it sent a request
/// since the peer's last message began.
#[derive(Default)]
struct Receiver {
    runs: Runs,
    sent_request: bool,
}

impl Receiver {
    fn packet(&mut self, opcode: u8) -> bool {
        let sent = &mut self.sent_request;
        may_steer(opcode_info(opcode), &mut self.runs, || {
            core::mem::take(sent)
        })
    }

    /// Which packets of `opcodes` (in order) may be steered.
    fn marks(&mut self, opcodes: &[u8]) -> Vec<bool> {
        opcodes.iter().map(|&op| self.packet(op)).collect()
    }
}

#[test]
fn a_stream_is_steered_from_the_first_packet() {
    let mut rx = Receiver::default();
    for kind in [WRITE, SEND] {
        for _ in 0..3 {
            let marks = rx.marks(&message(4, kind));
            assert_eq!(marks, [true, true, true, false]);
            let marks = rx.marks(&message(64, kind));
            assert!(marks[..63].iter().all(|s| *s) && !marks[63]);
        }
    }
}

#[test]
fn a_short_answer_stays_whole() {
    let mut rx = Receiver::default();
    for kind in [WRITE, SEND] {
        for packets in 1..=usize::from(TAKEN_HERE) + 1 {
            rx.sent_request = true;
            let marks = rx.marks(&message(packets, kind));
            assert!(marks.iter().all(|s| !s), "{packets} packets: {marks:?}");
            assert_eq!(rx.runs, Runs::default());
            assert!(!rx.sent_request, "the answer took the note");
        }
    }
}

#[test]
fn a_long_answer_is_steered_after_its_first_packets() {
    let mut rx = Receiver {
        sent_request: true,
        ..Default::default()
    };
    // 64 KiB over a 1024-byte MTU.
    let marks = rx.marks(&message(64, WRITE));
    let first = usize::from(TAKEN_HERE);
    assert!(marks[..first].iter().all(|s| !s));
    // The last packet is taken where it comes unless packets before it
    // still wait (the driver's rule, not this one's).
    assert!(marks[first..63].iter().all(|s| *s));
    assert!(!marks[63]);
    // Nothing sent since: the next message is a stream's.
    assert_eq!(rx.marks(&message(4, SEND)), [true, true, true, false]);
}

#[test]
fn read_responses_are_always_steered_and_answers_in_between_change_nothing() {
    let mut rx = Receiver {
        sent_request: true,
        ..Default::default()
    };
    let write = message(64, WRITE);
    let mut marks = rx.marks(&write[..10]);
    // The peer answers this side's requests meanwhile: acknowledgements
    // and a READ response, its own stream.
    assert!(!rx.packet(opcode::RC_ACKNOWLEDGE));
    assert_eq!(rx.marks(&message(3, READ_RESPONSE)), [true, true, false]);
    marks.extend(rx.marks(&write[10..]));
    let first = usize::from(TAKEN_HERE);
    assert!(marks[..first].iter().all(|s| !s), "{marks:?}");
    assert!(marks[first..63].iter().all(|s| *s), "{marks:?}");
}

#[test]
fn a_new_first_packet_starts_over_and_unknown_opcodes_change_nothing() {
    let mut rx = Receiver::default();
    rx.marks(&message(64, WRITE)[..20]);
    // A first packet after a lost last one: a new message, an answer.
    rx.sent_request = true;
    assert!(!rx.packet(opcode::RC_SEND_FIRST));
    assert!(!rx.packet(opcode::RC_SEND_MIDDLE));
    let before = rx.runs;
    assert!(!may_steer(None, &mut rx.runs, || unreachable!()));
    assert_eq!(rx.runs, before);
}

#[test]
fn the_state_survives_a_round_trip_through_a_word() {
    let mut rx = Receiver {
        sent_request: true,
        ..Default::default()
    };
    rx.marks(&message(64, WRITE)[..7]);
    assert_eq!(Runs::from_bits(rx.runs.to_bits()), rx.runs);
    assert_ne!(rx.runs, Runs::default());
    assert_eq!(Runs::from_bits(0), Runs::default());
}
