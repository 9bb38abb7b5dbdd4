// SPDX-License-Identifier: GPL-2.0

//! Connected mode's handshake: message codec and the two sides of a pair
//! driven against each other, with lost messages, crossed offers, a peer
//! in datagram mode and one that does not know the handshake.

use srnic_pure::connect::*;

const MAX: u32 = MAX_CONNECTED_FRAME;

fn offer(qpn: u32) -> ConnectMessage {
    ConnectMessage {
        op: Op::Offer,
        qpn,
        psn: 0x12_3456,
        your_qpn: 0,
        max_frame: MAX,
        lan: 3,
    }
}

#[test]
fn messages_round_trip_and_are_checked() {
    for msg in [
        offer(0x11),
        ConnectMessage {
            op: Op::Accept,
            your_qpn: 0x11,
            qpn: 0xff_ffff,
            ..offer(0)
        },
        ConnectMessage {
            op: Op::Refuse,
            qpn: 0,
            psn: 0,
            your_qpn: 0x11,
            ..offer(0)
        },
    ] {
        let bytes = msg.encode();
        assert_eq!(ConnectMessage::parse(&bytes), Ok(msg));
        assert_eq!(
            ConnectMessage::parse(&bytes[..CONNECT_LEN - 1]),
            Err(ConnectError::Length)
        );
    }
    let good = offer(0x11).encode();
    let with = |at: usize, value: u8| {
        let mut bytes = good;
        bytes[at] = value;
        ConnectMessage::parse(&bytes)
    };
    assert_eq!(with(0, 1), Err(ConnectError::Kind));
    assert_eq!(with(1, 2), Err(ConnectError::Version));
    assert_eq!(with(2, 9), Err(ConnectError::Op));
    assert_eq!(with(3, 1), Err(ConnectError::Reserved));
    assert_eq!(with(23, 1), Err(ConnectError::Reserved));
    // A QPN or PSN beyond 24 bits, an OFFER that answers a QP.
    assert_eq!(with(4, 1), Err(ConnectError::Qpn));
    assert_eq!(with(8, 1), Err(ConnectError::Qpn));
    assert_eq!(with(15, 5), Err(ConnectError::Qpn));
    // QP 1 is special; an ACCEPT must name the QP it answers.
    let mut msg = offer(1);
    assert_eq!(ConnectMessage::parse(&msg.encode()), Err(ConnectError::Qpn));
    msg = ConnectMessage {
        op: Op::Accept,
        ..offer(0x20)
    };
    assert_eq!(ConnectMessage::parse(&msg.encode()), Err(ConnectError::Qpn));
    msg = ConnectMessage {
        max_frame: 59,
        ..offer(0x20)
    };
    assert_eq!(
        ConnectMessage::parse(&msg.encode()),
        Err(ConnectError::MaxFrame)
    );
}

/// One side of a simulated pair: its connection and the QPs it made.
struct Side {
    conn: Connection,
    next_qpn: u32,
    accepting: bool,
    /// Whether it knows the handshake at all (an older node does not).
    knows: bool,
    live_qps: Vec<u32>,
}

impl Side {
    fn new(wins: bool, first_qpn: u32) -> Self {
        Self {
            conn: Connection::new(MAX, 3, wins),
            next_qpn: first_qpn,
            accepting: true,
            knows: true,
            live_qps: Vec::new(),
        }
    }

    fn new_qp(&mut self) -> u32 {
        self.next_qpn += 1;
        self.live_qps.push(self.next_qpn);
        self.next_qpn
    }

    /// Carries out `action`; returns the messages it sends.
    fn act(&mut self, action: Action, now: u64) -> Vec<ConnectMessage> {
        match action {
            Action::None => vec![],
            Action::CreateQp => {
                let qpn = self.new_qp();
                let next = self.conn.offer(qpn, 7, now);
                self.act(next, now)
            }
            Action::Send(msg) => vec![msg],
            Action::ConnectAndSend { then, .. } => vec![then],
            Action::CreateAndAccept { peer_qpn, peer_psn } => {
                let qpn = self.new_qp();
                let next = self.conn.accepted(qpn, 9, (peer_qpn, peer_psn), now);
                self.act(next, now)
            }
            Action::Destroy(qpn) => {
                assert!(self.live_qps.contains(&qpn), "destroys QP {qpn} it lacks");
                self.live_qps.retain(|&q| q != qpn);
                vec![]
            }
        }
    }

    fn receive(&mut self, msg: ConnectMessage, now: u64) -> Vec<ConnectMessage> {
        if !self.knows {
            return vec![];
        }
        let bytes = msg.encode();
        let parsed = ConnectMessage::parse(&bytes).expect("a valid message");
        let action = self.conn.receive(&parsed, self.accepting, now);
        self.act(action, now)
    }
}

/// Runs the pair for `ms`, both wanting to send from `a_wants`/`b_wants`,
/// dropping the messages `lose` says (by their running number).
fn run(a: &mut Side, b: &mut Side, wants: (bool, bool), lose: impl Fn(usize) -> bool, ms: u64) {
    let mut to_a: Vec<ConnectMessage> = vec![];
    let mut to_b: Vec<ConnectMessage> = vec![];
    let mut sent = 0usize;
    let mut now = 0;
    while now < ms {
        if wants.0 {
            let action = a.conn.want(now);
            to_b.extend(a.act(action, now));
        }
        if wants.1 {
            let action = b.conn.want(now);
            to_a.extend(b.act(action, now));
        }
        let (for_a, for_b) = (core::mem::take(&mut to_a), core::mem::take(&mut to_b));
        for msg in for_b {
            sent += 1;
            if !lose(sent) {
                to_a.extend(b.receive(msg, now));
            }
        }
        for msg in for_a {
            sent += 1;
            if !lose(sent) {
                to_b.extend(a.receive(msg, now));
            }
        }
        let action = a.conn.tick(now);
        to_b.extend(a.act(action, now));
        let action = b.conn.tick(now);
        to_a.extend(b.act(action, now));
        now += 10;
    }
}

fn connected(a: &Side, b: &Side) -> bool {
    match (a.conn.state(), b.conn.state()) {
        (
            State::Up {
                qpn: qa,
                peer_qpn: pa,
                ..
            },
            State::Up {
                qpn: qb,
                peer_qpn: pb,
                ..
            },
        ) => qa == pb && qb == pa && a.live_qps == [qa] && b.live_qps == [qb],
        _ => false,
    }
}

#[test]
fn one_side_wants_and_both_come_up() {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    run(&mut a, &mut b, (true, false), |_| false, 100);
    assert!(connected(&a, &b), "{:?} {:?}", a.conn, b.conn);
    assert_eq!(a.conn.up(), Some((101, MAX)));
}

#[test]
fn crossed_offers_end_in_one_connection_either_way() {
    for a_wins in [true, false] {
        let (mut a, mut b) = (Side::new(a_wins, 100), Side::new(!a_wins, 200));
        run(&mut a, &mut b, (true, true), |_| false, 200);
        assert!(connected(&a, &b), "{:?} {:?}", a.conn, b.conn);
    }
}

#[test]
fn lost_messages_are_retried() {
    // Each of the first three messages lost in turn: the offer, the
    // accept, the confirm (the accepter then waits for a frame).
    for lost in 1..=3 {
        let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
        run(&mut a, &mut b, (true, false), |n| n == lost, 1000);
        if lost == 3 {
            assert!(a.conn.up().is_some());
            assert!(matches!(b.conn.state(), State::Accepted { .. }));
            b.conn.frame_received(MAX);
        }
        assert!(connected(&a, &b), "lost {lost}: {:?} {:?}", a.conn, b.conn);
    }
}

#[test]
fn a_lost_confirm_without_traffic_times_out_on_both_sides_consistently() {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    run(
        &mut a,
        &mut b,
        (true, false),
        |n| n == 3,
        ACCEPT_TIMEOUT_MS + 100,
    );
    // The accepter gave up; the offerer learns it from the broken QP
    // (its first send fails) and falls back too.
    assert_eq!(b.live_qps, Vec::<u32>::new());
    let action = a.conn.fail(ACCEPT_TIMEOUT_MS + 100);
    a.act(action, 0);
    assert!(a.live_qps.is_empty());
    assert!(a.conn.up().is_none());
}

#[test]
fn a_datagram_node_refuses_at_once() {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    b.accepting = false;
    run(&mut a, &mut b, (true, false), |_| false, 100);
    assert!(a.conn.up().is_none() && a.live_qps.is_empty() && b.live_qps.is_empty());
    assert!(matches!(a.conn.state(), State::Idle { not_before_ms } if not_before_ms > 0));
}

#[test]
fn an_older_node_never_answers_and_the_offers_stop() {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    b.knows = false;
    run(&mut a, &mut b, (true, false), |_| false, 2000);
    assert!(a.conn.up().is_none() && a.live_qps.is_empty());
    // Held down: one attempt per HOLD_DOWN_MS, not one per frame.
    assert!(matches!(a.conn.state(), State::Idle { not_before_ms } if not_before_ms > 2000));
    assert_eq!(a.conn.want(2000), Action::None);
}

#[test]
fn a_peer_that_starts_over_is_followed() {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    run(&mut a, &mut b, (true, false), |_| false, 100);
    assert!(connected(&a, &b));
    // a's QP broke: it fails, and after the hold-down offers again.
    let action = a.conn.fail(0);
    a.act(action, 0);
    let (mut a2, mut b2) = (a, b);
    a2.conn = Connection::new(MAX, 3, true);
    // b drops its side on the new offer; the retry finds it idle.
    run(&mut a2, &mut b2, (true, false), |_| false, 500);
    assert!(connected(&a2, &b2), "{:?} {:?}", a2.conn, b2.conn);
}

/// A pair connected on a's offer, and b's answer to another offer of a's
/// QP number with first PSN `psn` (a's QPs start at PSN 7).
fn offer_again_once_up(psn: u32) -> (Side, Side, Vec<ConnectMessage>) {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    run(&mut a, &mut b, (true, false), |_| false, 100);
    assert!(connected(&a, &b));
    let again = ConnectMessage {
        psn,
        ..offer(a.conn.qpn().expect("a has a QP"))
    };
    let answer = b.receive(again, 200);
    (a, b, answer)
}

#[test]
fn a_late_copy_of_the_offer_leaves_the_connection_standing() {
    // a's second offer went out before our ACCEPT reached it, and
    // arrives after the connection came up on both sides.
    let (a, b, answer) = offer_again_once_up(7);
    assert_eq!(answer, vec![]);
    assert!(connected(&a, &b), "{:?} {:?}", a.conn, b.conn);
}

#[test]
fn a_peer_that_started_over_with_its_old_qp_number_is_followed() {
    // a's device was made again and numbered its new QP as the old one,
    // with another first PSN: b lets the old connection go.
    let (_, b, answer) = offer_again_once_up(8);
    assert_eq!(answer, vec![]);
    assert_eq!(b.conn.state(), State::Idle { not_before_ms: 0 });
    assert!(b.live_qps.is_empty());
}

#[test]
fn close_gives_back_the_qp() {
    let (mut a, mut b) = (Side::new(true, 100), Side::new(false, 200));
    run(&mut a, &mut b, (true, false), |_| false, 100);
    assert_eq!(a.conn.close(), Action::Destroy(101));
    assert_eq!(a.conn.close(), Action::None);
    assert_eq!(a.conn.want(0), Action::CreateQp);
}

#[test]
fn the_lower_gid_wins() {
    let low = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let mut high = low;
    high[15] = 2;
    assert!(offer_wins(&low, &high));
    assert!(!offer_wins(&high, &low));
    assert!(!offer_wins(&low, &low));
}

#[test]
fn failures_in_a_row_hold_the_pair_down_longer_until_a_frame_is_delivered() {
    let mut conn = Connection::new(MAX, 3, true);
    let not_before = |conn: &Connection| match conn.state() {
        State::Idle { not_before_ms } => not_before_ms,
        state => panic!("not idle: {state:?}"),
    };
    let mut now = 1_000;
    for doublings in 0..=MAX_HOLD_DOWN_DOUBLINGS + 2 {
        assert_eq!(conn.want(now), Action::CreateQp);
        conn.fail(now);
        let hold = HOLD_DOWN_MS << doublings.min(MAX_HOLD_DOWN_DOUBLINGS);
        assert_eq!(not_before(&conn), now + hold, "failure {doublings}");
        assert_eq!(conn.want(now + hold - 1), Action::None);
        now += hold;
    }
    // Held down after failures in a row, the peer's offers wait too.
    let offer = ConnectMessage {
        op: Op::Offer,
        qpn: 7,
        psn: 1,
        your_qpn: 0,
        max_frame: MAX,
        lan: 3,
    };
    assert_eq!(conn.receive(&offer, true, now - 1), Action::None);
    // A connection that delivered starts the count over.
    conn.delivered();
    conn.fail(now);
    assert_eq!(not_before(&conn), now + HOLD_DOWN_MS);
    // After one failure the peer's offer is taken at once.
    assert!(matches!(
        conn.receive(&offer, true, now + 1),
        Action::CreateAndAccept { .. }
    ));
    conn.fail(now);
    assert_eq!(not_before(&conn), now + 2 * HOLD_DOWN_MS);
    // Leaving connected mode starts it over too.
    conn.close();
    conn.fail(now);
    assert_eq!(not_before(&conn), now + HOLD_DOWN_MS);
}

#[test]
fn connections_spread_over_the_vectors_by_peer() {
    // IPv4-mapped GIDs of 10.0.0.1 to 10.0.0.8, a node's peers.
    let peer = |host: u8| {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 0, host]);
        gid
    };
    for vectors in [1u32, 2, 3, 4] {
        let mut per_vector = [0u32; 4];
        for host in 1..=8 {
            let vector = link_vector(&peer(host), vectors);
            assert!(vector < vectors, "{vector} of {vectors} vectors");
            per_vector[vector as usize] += 1;
        }
        // Eight peers in turn: each vector has its share, or one more.
        for count in &per_vector[..vectors as usize] {
            assert!(
                (8 / vectors..=8 / vectors + 1).contains(count),
                "{per_vector:?}"
            );
        }
    }
    // The two ends of a pair of neighbouring addresses, each connecting to
    // the other, complete on different vectors of two.
    assert_ne!(link_vector(&peer(1), 2), link_vector(&peer(2), 2));
    // A device reporting no vectors gets the first.
    assert_eq!(link_vector(&peer(1), 0), 0);
    assert_eq!(link_vector(&[0xff; 16], u32::MAX), 16 * 0xff);
}
