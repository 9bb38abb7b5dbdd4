// SPDX-License-Identifier: GPL-2.0

use srnic_pure::aeth::{NakCode, Syndrome};
use srnic_pure::outbox::{Answer, Entry, Outbox, PendingRead, BURST, MAX_READS};
use srnic_pure::psn::Psn;

const ACK: u8 = 0x11;

fn read(psn: u32, count: u32) -> PendingRead {
    PendingRead {
        rkey: 7,
        va: 0x1000,
        length: count * 1024,
        psn: Psn::new(psn),
        msn: 1,
        mtu: 1024,
        count,
        next: 0,
    }
}

fn ack(psn: u32) -> Answer {
    Answer::new(ACK, Psn::new(psn), Syndrome::Ack.encode(), 1, None)
}

fn nak(psn: u32) -> Answer {
    Answer::new(
        ACK,
        Psn::new(psn),
        Syndrome::Nak(NakCode::PsnSequence).encode(),
        1,
        None,
    )
}

/// Sends everything, `budget` packets a burst; the PSNs in order.
fn drain(outbox: &mut Outbox, budget: u32) -> Vec<u32> {
    let mut psns = Vec::new();
    while let Some(burst) = outbox.take_burst(budget) {
        let sent = match burst.entry {
            Entry::Read(r) => {
                for n in r.next..burst.until {
                    psns.push(r.psn.add(n).get());
                }
                burst.until - r.next
            }
            Entry::Answer(a) => {
                psns.push(a.psn.get());
                1
            }
        };
        assert!(!outbox.finish_burst(&burst, sent, false));
    }
    psns
}

#[test]
fn a_long_response_leaves_in_bursts() {
    let mut outbox = Outbox::new();
    assert!(outbox.is_idle());
    assert!(outbox.push_read(read(100, 200)));
    let burst = outbox.take_burst(BURST).unwrap();
    assert_eq!(burst.until, BURST);
    // Only one CPU sends at a time.
    assert!(outbox.take_burst(BURST).is_none());
    assert!(!outbox.is_idle());
    assert!(!outbox.finish_burst(&burst, BURST, false));
    assert_eq!(
        drain(&mut outbox, BURST),
        (100 + BURST..300).collect::<Vec<_>>()
    );
    assert!(outbox.is_idle());
}

#[test]
fn a_refused_packet_is_sent_again() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 10));
    let burst = outbox.take_burst(BURST).unwrap();
    // Four went out, the fifth was refused.
    assert!(!outbox.finish_burst(&burst, 4, true));
    assert_eq!(drain(&mut outbox, BURST), (4..10).collect::<Vec<_>>());
}

#[test]
fn after_a_refusal_one_packet_probes_the_queue() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 200));
    let burst = outbox.take_burst(BURST).unwrap();
    assert!(!outbox.finish_burst(&burst, 0, true));
    // Refused with nothing sent: the retry is a single packet.
    let probe = outbox.take_burst(BURST).unwrap();
    assert_eq!(probe.until, 1);
    assert!(!outbox.finish_burst(&probe, 0, true));
    let probe = outbox.take_burst(BURST).unwrap();
    assert_eq!(probe.until, 1);
    assert!(!outbox.finish_burst(&probe, 1, false));
    // It went out: full bursts again.
    let burst = outbox.take_burst(BURST).unwrap();
    assert_eq!(burst.until, 1 + BURST);
}

#[test]
fn answers_wait_behind_a_response_and_acks_merge() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(10, 5));
    assert!(outbox.push_answer(ack(15)));
    assert!(outbox.push_answer(ack(16)));
    assert!(outbox.push_answer(nak(17)));
    assert!(outbox.push_answer(ack(18)));
    assert_eq!(drain(&mut outbox, 2), vec![10, 11, 12, 13, 14, 16, 17, 18]);
}

#[test]
fn the_ack_being_sent_is_not_replaced() {
    let mut outbox = Outbox::new();
    outbox.push_answer(ack(5));
    let burst = outbox.take_burst(BURST).unwrap();
    // A later ACK arrives while the first one is on its way out.
    assert!(outbox.push_answer(ack(6)));
    assert!(!outbox.finish_burst(&burst, 1, false));
    assert_eq!(drain(&mut outbox, BURST), vec![6]);
}

#[test]
fn a_repeated_read_still_to_send_costs_nothing() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 100));
    let burst = outbox.take_burst(10).unwrap();
    outbox.finish_burst(&burst, 10, false);
    let mut again = read(50, 50);
    again.va += 50 * 1024;
    assert!(!outbox.push_repeated_read(again));
    assert_eq!(drain(&mut outbox, BURST), (10..100).collect::<Vec<_>>());
}

#[test]
fn a_repeated_read_replaces_what_follows_it() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 10));
    outbox.push_answer(ack(10));
    outbox.push_read(read(11, 10));
    // The first response went out whole, and its end was lost.
    let burst = outbox.take_burst(BURST).unwrap();
    outbox.finish_burst(&burst, 10, false);
    // The requester asks again from PSN 5: what it asked for after that
    // comes again too, so the queued ACK and READ go.
    assert!(outbox.push_repeated_read(read(5, 5)));
    assert_eq!(drain(&mut outbox, BURST), (5..10).collect::<Vec<_>>());
}

#[test]
fn a_repeated_read_covered_by_the_burst_in_flight_costs_nothing() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 100));
    let burst = outbox.take_burst(10).unwrap();
    // PSN 0 is on its way out right now.
    assert!(!outbox.push_repeated_read(read(0, 100)));
    outbox.finish_burst(&burst, 10, false);
    assert_eq!(drain(&mut outbox, BURST), (10..100).collect::<Vec<_>>());
}

#[test]
fn a_burst_for_a_dropped_entry_does_not_advance_its_successor() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(10, 10));
    outbox.push_read(read(30, 10));
    let burst = outbox.take_burst(BURST).unwrap();
    // Meanwhile the requester asks again from PSN 5: both queued
    // responses go, and the burst's report must not advance the new one.
    assert!(outbox.push_repeated_read(read(5, 25)));
    assert_eq!(outbox.len(), 1);
    outbox.finish_burst(&burst, 10, false);
    assert_eq!(drain(&mut outbox, BURST), (5..30).collect::<Vec<_>>());
}

#[test]
fn full_queue_refuses_and_clear_empties() {
    let mut outbox = Outbox::new();
    let mut pushed = 0;
    while outbox.push_read(read(pushed * 10, 10)) {
        pushed += 1;
        assert!(pushed < 1000);
    }
    assert!(pushed as usize >= 2 * MAX_READS);
    assert!(!outbox.push_answer(nak(0)));
    // The slot kept for the NAK that ends the QP.
    assert!(outbox.push_final(nak(1000)));
    outbox.clear();
    assert!(outbox.is_idle() && !outbox.is_closing());
}

#[test]
fn endless_refusals_give_the_queue_up() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 10));
    let mut given_up = false;
    for _ in 0..10_000 {
        let Some(burst) = outbox.take_burst(BURST) else {
            break;
        };
        if outbox.finish_burst(&burst, 0, true) {
            given_up = true;
            break;
        }
    }
    assert!(given_up);
    assert!(outbox.is_idle());
}

#[test]
fn psns_wrap() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0xff_fffe, 4));
    assert!(!outbox.push_repeated_read(read(0x00_0001, 1)));
    assert_eq!(drain(&mut outbox, BURST), vec![0xff_fffe, 0xff_ffff, 0, 1]);
}

#[test]
fn a_repeated_read_of_packets_already_sent_rewinds_the_response() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 100));
    outbox.push_read(read(100, 10));
    let burst = outbox.take_burst(30).unwrap();
    outbox.finish_burst(&burst, 30, false);
    // Packet 10 was lost: the response goes on from there, and the READ
    // after it is dropped (the requester asks for it again).
    assert!(!outbox.push_repeated_read(read(10, 90)));
    assert_eq!(outbox.len(), 1);
    assert_eq!(drain(&mut outbox, BURST), (10..100).collect::<Vec<_>>());
}

#[test]
fn a_rewind_voids_the_burst_in_flight() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 100));
    let burst = outbox.take_burst(30).unwrap();
    outbox.finish_burst(&burst, 30, false);
    let burst = outbox.take_burst(30).unwrap();
    assert!(!outbox.push_repeated_read(read(5, 95)));
    // The burst (30..60) reports afterwards: the response still goes on
    // from packet 5.
    outbox.finish_burst(&burst, 30, false);
    assert_eq!(drain(&mut outbox, BURST), (5..100).collect::<Vec<_>>());
}

#[test]
fn the_nak_that_ends_the_qp_goes_after_what_waits() {
    let mut outbox = Outbox::new();
    // Nothing waits: it may leave at once.
    assert!(!outbox.push_final(nak(3)));
    outbox.push_read(read(0, 10));
    assert!(outbox.push_final(nak(10)));
    assert!(outbox.is_closing());
    // Nothing more is taken after it.
    assert!(!outbox.push_read(read(11, 1)));
    assert!(!outbox.push_answer(ack(11)));
    assert_eq!(drain(&mut outbox, BURST), (0..11).collect::<Vec<_>>());
    assert!(!outbox.is_closing());
}

#[test]
fn a_repeated_read_does_not_drop_the_last_nak() {
    // Found by the fuzzer: a repeated READ truncated what followed it,
    // the last NAK too, and left the outbox closing with nothing to send.
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 4));
    assert!(outbox.push_final(nak(4)));
    assert!(!outbox.push_repeated_read(read(2, 2)));
    assert!(!outbox.push_repeated_read(read(0, 4)));
    assert_eq!(outbox.len(), 2);
    assert_eq!(drain(&mut outbox, BURST), (0..5).collect::<Vec<_>>());
    assert!(!outbox.is_closing());
}

#[test]
fn refusals_after_progress_do_not_give_up() {
    let mut outbox = Outbox::new();
    outbox.push_read(read(0, 10_000));
    for _ in 0..2_000 {
        let burst = outbox.take_burst(BURST).unwrap();
        // A few packets out, then the queue is full again.
        assert!(!outbox.finish_burst(&burst, 2, true));
    }
    assert_eq!(outbox.len(), 1);
}

/// A small deterministic generator (xorshift), so that failures repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random requests, repeats, refusals and bursts on two CPUs: the queue
/// stays within its room, every burst makes progress or reports a
/// refusal, and in between repeats the packets leave in PSN order.
#[test]
fn random_traffic_keeps_the_rules() {
    for seed in 1..200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut outbox = Outbox::new();
        let mut next_psn = rng.below(1 << 24) as u32;
        let mut last_sent: Option<Psn> = None;
        let mut in_flight = None;
        // Repeats so far, and at the time the burst in flight was taken
        // (packets of a burst taken before a repeat may precede it).
        let mut repeats = 0u32;
        let mut taken_at = 0u32;
        for _ in 0..2_000 {
            match rng.below(6) {
                0 => {
                    let count = 1 + rng.below(300) as u32;
                    if outbox.push_read(read(next_psn, count)) {
                        next_psn = Psn::new(next_psn).add(count).get();
                    }
                }
                1 => {
                    if outbox.push_answer(ack(next_psn)) {
                        next_psn = Psn::new(next_psn).next().get();
                    }
                }
                2 => {
                    // A repeat of something recent: the order starts over.
                    let back = rng.below(400) as u32;
                    let psn = Psn::new(next_psn).add((1 << 24) - 1 - back);
                    outbox.push_repeated_read(PendingRead {
                        psn,
                        count: back + 1,
                        ..read(0, 1)
                    });
                    last_sent = None;
                    repeats += 1;
                }
                3 if in_flight.is_none() => {
                    in_flight = outbox.take_burst(1 + rng.below(BURST as u64) as u32);
                    taken_at = repeats;
                    if let Some(burst) = &in_flight {
                        let first = match burst.entry {
                            Entry::Read(r) => {
                                assert!(burst.until > r.next && burst.until <= r.count);
                                r.psn.add(r.next)
                            }
                            Entry::Answer(a) => a.psn,
                        };
                        if let Some(last) = last_sent {
                            assert!(!first.is_before(last), "seed {seed}: PSN went back");
                        }
                    }
                }
                _ => {
                    if let Some(burst) = in_flight.take() {
                        let most = match burst.entry {
                            Entry::Read(r) => burst.until - r.next,
                            Entry::Answer(_) => 1,
                        };
                        let sent = rng.below(most as u64 + 1) as u32;
                        let refused = sent < most;
                        if sent > 0 && taken_at == repeats {
                            last_sent = Some(match burst.entry {
                                Entry::Read(r) => r.psn.add(r.next + sent - 1),
                                Entry::Answer(a) => a.psn,
                            });
                        }
                        outbox.finish_burst(&burst, sent, refused);
                    }
                }
            }
            assert!(outbox.len() <= 2 * MAX_READS + 2);
            assert_eq!(outbox.is_idle(), outbox.is_empty() && in_flight.is_none());
        }
    }
}
