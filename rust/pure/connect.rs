// SPDX-License-Identifier: GPL-2.0

//! Connected mode's handshake: the messages two LAN ports exchange in UD
//! datagrams to set up one RC connection between them, and the state of
//! that connection on each side.
//!
//! Nothing in the announcement changes: older nodes drop announcements
//! with unknown flags, so whether a peer takes connections is learned
//! from the handshake itself. A node that does not know the message
//! counts it as malformed and never answers, so the offer times out; a
//! node in datagram mode refuses it at once. Either way the pair keeps
//! UD, and tries again only after [`HOLD_DOWN_MS`].
//!
//! Both sides may offer at the same time; the offer of the side with the
//! lower GID wins, so the pair always ends with one connection:
//!
//! ```text
//!   offerer                                 accepter
//!   QP created, INIT   -- OFFER qpn,psn -->  QP created, connected (RTS)
//!   connected (RTS)    <-- ACCEPT qpn,psn -- (frames still over UD)
//!   up                 -- CONFIRM ------->   up
//! ```
//!
//! The accepter is up on the CONFIRM or on the first frame that arrives
//! over the connection, whichever comes first, so a lost CONFIRM costs
//! nothing; a lost OFFER or ACCEPT is covered by the offerer's retries,
//! which the accepter answers again with the same ACCEPT.

/// The first byte of a handshake datagram (fragments have `0x01`,
/// announcements `b'I'`).
pub const CONNECT_KIND: u8 = 0x02;
/// The handshake's version.
pub const CONNECT_VERSION: u8 = 1;
/// Bytes of a handshake datagram.
pub const CONNECT_LEN: usize = 24;
/// Between two offers of one attempt.
pub const OFFER_EVERY_MS: u64 = 250;
/// Offers of one attempt before the peer is taken not to do connections.
pub const OFFER_TRIES: u8 = 4;
/// How long an accepter waits for the CONFIRM or a first frame.
pub const ACCEPT_TIMEOUT_MS: u64 = 2000;
/// After a failed or refused attempt, or a connection that broke, the
/// pair keeps UD this long before it tries again; twice as long after each
/// further failure in a row, up to [`MAX_HOLD_DOWN_DOUBLINGS`] times, so a
/// peer that connects and then never takes a frame holds a transmit queue
/// a few seconds per ten minutes, not per ten seconds. A connection that
/// delivers a frame starts the count over.
pub const HOLD_DOWN_MS: u64 = 10_000;
/// The longest hold-down is [`HOLD_DOWN_MS`] times two to this (about 10
/// minutes).
pub const MAX_HOLD_DOWN_DOUBLINGS: u8 = 6;
/// Frames over a connection are at most this long (an Ethernet header, a
/// VLAN tag and the largest MTU of connected mode).
pub const MAX_CONNECTED_FRAME: u32 = 65520 + 14 + 4;

/// What a handshake datagram says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// "Here is my QP; connect to it and answer with yours."
    Offer,
    /// "Connected to your QP; here is mine."
    Accept,
    /// "Connected to yours: send over the connection."
    Confirm,
    /// "No connection": the receiver is in datagram mode, out of
    /// connections, or tears down the connection named.
    Refuse,
}

impl Op {
    fn code(self) -> u8 {
        match self {
            Op::Offer => 1,
            Op::Accept => 2,
            Op::Confirm => 3,
            Op::Refuse => 4,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Op::Offer,
            2 => Op::Accept,
            3 => Op::Confirm,
            4 => Op::Refuse,
            _ => return None,
        })
    }
}

/// A handshake datagram, big endian:
///
/// ```text
///   0  kind 0x02      1  version 1     2  op    3  reserved, 0
///   4  the sender's RC QPN (24 bits)
///   8  the sender's first PSN (24 bits)
///  12  the receiver's RC QPN this answers (0 in an OFFER)
///  16  the largest frame the sender takes over the connection
///  20  the sender's LAN index   21..24 reserved, 0
/// ```
///
/// The sender's GID, which with the port makes the connection's path, is
/// the one its datagram came from: the name service's key for the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectMessage {
    /// What it says.
    pub op: Op,
    /// The sender's RC QP.
    pub qpn: u32,
    /// The PSN the sender starts sending with.
    pub psn: u32,
    /// The receiver's QP it answers (OFFER: 0).
    pub your_qpn: u32,
    /// The largest frame the sender receives over the connection.
    pub max_frame: u32,
    /// The sender's LAN index.
    pub lan: u8,
}

/// Why a handshake datagram is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// Not exactly [`CONNECT_LEN`] bytes.
    Length,
    /// Not a handshake datagram.
    Kind,
    /// Another version.
    Version,
    /// An unknown op.
    Op,
    /// Reserved bits or bytes set.
    Reserved,
    /// A QPN or PSN beyond 24 bits, QPN 0 or 1 (special QPs), or an
    /// answer that names no QP.
    Qpn,
    /// A largest frame too small for a minimal Ethernet frame.
    MaxFrame,
}

const QPN_LIMIT: u32 = 1 << 24;
/// Ethernet's minimum frame, without the FCS.
const MIN_FRAME: u32 = 60;

impl ConnectMessage {
    /// A REFUSE of the connection of the receiver's QP `your_qpn`, from a
    /// side that takes frames of up to `max_frame` in LAN `lan`.
    pub fn refusal(your_qpn: u32, max_frame: u32, lan: u8) -> Self {
        Self {
            op: Op::Refuse,
            qpn: 0,
            psn: 0,
            your_qpn,
            max_frame,
            lan,
        }
    }

    /// The datagram.
    pub fn encode(&self) -> [u8; CONNECT_LEN] {
        let mut out = [0u8; CONNECT_LEN];
        out[0] = CONNECT_KIND;
        out[1] = CONNECT_VERSION;
        out[2] = self.op.code();
        out[4..8].copy_from_slice(&self.qpn.to_be_bytes());
        out[8..12].copy_from_slice(&self.psn.to_be_bytes());
        out[12..16].copy_from_slice(&self.your_qpn.to_be_bytes());
        out[16..20].copy_from_slice(&self.max_frame.to_be_bytes());
        out[20] = self.lan;
        out
    }

    /// Parses exactly one handshake datagram, every field checked.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConnectError> {
        let b: &[u8; CONNECT_LEN] = bytes.try_into().map_err(|_| ConnectError::Length)?;
        if b[0] != CONNECT_KIND {
            return Err(ConnectError::Kind);
        }
        if b[1] != CONNECT_VERSION {
            return Err(ConnectError::Version);
        }
        let op = Op::from_code(b[2]).ok_or(ConnectError::Op)?;
        if b[3] != 0 || b[21..24] != [0, 0, 0] {
            return Err(ConnectError::Reserved);
        }
        let word = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let (qpn, psn, your_qpn, max_frame) = (word(4), word(8), word(12), word(16));
        let is_qp = |qpn: u32| (2..QPN_LIMIT).contains(&qpn);
        // A REFUSE of an OFFER names no QP of its sender.
        let own_ok = is_qp(qpn) || (op == Op::Refuse && qpn == 0);
        let answer_ok = match op {
            Op::Offer => your_qpn == 0,
            Op::Accept | Op::Confirm | Op::Refuse => is_qp(your_qpn),
        };
        if !own_ok || !answer_ok || psn >= QPN_LIMIT {
            return Err(ConnectError::Qpn);
        }
        if max_frame < MIN_FRAME {
            return Err(ConnectError::MaxFrame);
        }
        Ok(Self {
            op,
            qpn,
            psn,
            your_qpn,
            max_frame,
            lan: b[20],
        })
    }
}

/// Whether this side's offer wins when both sides offer at once: the
/// lower GID's does. Both sides compare the same two GIDs.
pub fn offer_wins(our_gid: &[u8; 16], their_gid: &[u8; 16]) -> bool {
    our_gid < their_gid
}

/// The completion vector, of `vectors`, of the connection to the peer
/// `their_gid`: a node's connections spread over its vectors by their
/// peers' GIDs, so that each one's completions (frames handed up, and
/// what the stack sends back at once) run on its vector's CPU rather than
/// all on the first vector's. Peers whose addresses follow each other
/// take the vectors in turn. 0 if there are no `vectors`.
pub fn link_vector(their_gid: &[u8; 16], vectors: u32) -> u32 {
    let folded = their_gid
        .iter()
        .fold(0u32, |sum, byte| sum.wrapping_add(u32::from(*byte)));
    folded.checked_rem(vectors).unwrap_or(0)
}

/// Where one side of a pair stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No connection; frames go over UD. The next attempt may start at
    /// `not_before_ms` (0: at once).
    Idle {
        /// When the next attempt may start.
        not_before_ms: u64,
    },
    /// This side offered its QP `qpn` (in INIT) and waits for an ACCEPT;
    /// `tries` offers went out, the last at `sent_ms`.
    Offering {
        /// This side's QP.
        qpn: u32,
        /// Its first PSN.
        psn: u32,
        /// Offers sent.
        tries: u8,
        /// When the last one went.
        sent_ms: u64,
    },
    /// This side connected its QP `qpn` to the peer's and answered; frames
    /// still go over UD until the CONFIRM or the first frame over it.
    Accepted {
        /// This side's QP.
        qpn: u32,
        /// Its first PSN.
        psn: u32,
        /// The peer's QP.
        peer_qpn: u32,
        /// The peer's first PSN.
        peer_psn: u32,
        /// When the ACCEPT went first.
        since_ms: u64,
    },
    /// Connected: unicast frames to the peer go over QP `qpn`.
    Up {
        /// This side's QP.
        qpn: u32,
        /// The peer's QP.
        peer_qpn: u32,
        /// The peer's first PSN: with its QP, what tells a late copy of
        /// its offer from a new offer of a peer that started over and got
        /// the same QP number.
        peer_psn: u32,
        /// The largest frame the peer takes over it.
        peer_max_frame: u32,
    },
}

/// What the driver does after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// Create a QP (INIT) and call [`Connection::offer`] with it.
    CreateQp,
    /// Send this message to the peer.
    Send(ConnectMessage),
    /// Connect QP `qpn` to the peer's `peer_qpn` starting at `peer_psn`,
    /// then send `then` (an ACCEPT or a CONFIRM), or, if connecting
    /// fails, call [`Connection::fail`].
    ConnectAndSend {
        /// This side's QP.
        qpn: u32,
        /// The peer's QP.
        peer_qpn: u32,
        /// The peer's first PSN.
        peer_psn: u32,
        /// The answer once connected.
        then: ConnectMessage,
    },
    /// Create a QP, connect it to the peer's, then call
    /// [`Connection::accepted`] with it (or [`Connection::fail`]).
    CreateAndAccept {
        /// The peer's QP.
        peer_qpn: u32,
        /// The peer's first PSN.
        peer_psn: u32,
    },
    /// Destroy this side's QP `qpn` (the connection, or the attempt, is
    /// over; frames go over UD again).
    Destroy(u32),
}

/// One side's connection to one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connection {
    state: State,
    /// The largest frame this side takes over a connection.
    max_frame: u32,
    lan: u8,
    /// Whether this side's offer wins over the peer's.
    wins: bool,
    /// Failures since a connection last delivered a frame.
    failures: u8,
}

impl Connection {
    /// A pair with no connection yet.
    pub fn new(max_frame: u32, lan: u8, wins: bool) -> Self {
        Self {
            state: State::Idle { not_before_ms: 0 },
            max_frame,
            lan,
            wins,
            failures: 0,
        }
    }

    /// When the next attempt may start after a failure at `now_ms`; counts
    /// the failure.
    fn hold_down(&mut self, now_ms: u64) -> u64 {
        let doublings = self.failures.min(MAX_HOLD_DOWN_DOUBLINGS);
        self.failures = self.failures.saturating_add(1);
        now_ms.saturating_add(HOLD_DOWN_MS << doublings)
    }

    /// The connection has delivered frames for a while (the driver
    /// decides how long proves it): the next failure holds the pair down
    /// for [`HOLD_DOWN_MS`] again.
    pub fn delivered(&mut self) {
        self.failures = 0;
    }

    /// Where it stands.
    pub fn state(&self) -> State {
        self.state
    }

    /// The QP unicast frames to the peer go on, with the largest frame
    /// the peer takes over it, once the connection is up.
    pub fn up(&self) -> Option<(u32, u32)> {
        match self.state {
            State::Up {
                qpn,
                peer_max_frame,
                ..
            } => Some((qpn, peer_max_frame)),
            _ => None,
        }
    }

    /// This side's QP, in whatever state holds one.
    pub fn qpn(&self) -> Option<u32> {
        match self.state {
            State::Idle { .. } => None,
            State::Offering { qpn, .. } | State::Accepted { qpn, .. } | State::Up { qpn, .. } => {
                Some(qpn)
            }
        }
    }

    fn message(&self, op: Op, qpn: u32, psn: u32, your_qpn: u32) -> ConnectMessage {
        ConnectMessage {
            op,
            qpn,
            psn,
            your_qpn,
            max_frame: self.max_frame,
            lan: self.lan,
        }
    }

    /// A unicast frame is to go to the peer: start an attempt if none runs
    /// and the hold-down is over.
    pub fn want(&self, now_ms: u64) -> Action {
        match self.state {
            State::Idle { not_before_ms } if now_ms >= not_before_ms => Action::CreateQp,
            _ => Action::None,
        }
    }

    /// The QP [`Action::CreateQp`] asked for: offer it.
    pub fn offer(&mut self, qpn: u32, psn: u32, now_ms: u64) -> Action {
        if !matches!(self.state, State::Idle { .. }) {
            // The peer's offer came first and was accepted meanwhile.
            return Action::Destroy(qpn);
        }
        self.state = State::Offering {
            qpn,
            psn,
            tries: 1,
            sent_ms: now_ms,
        };
        Action::Send(self.message(Op::Offer, qpn, psn, 0))
    }

    /// The QP [`Action::CreateAndAccept`] connected: answer the offer.
    pub fn accepted(
        &mut self,
        qpn: u32,
        psn: u32,
        (peer_qpn, peer_psn): (u32, u32),
        now_ms: u64,
    ) -> Action {
        if !matches!(self.state, State::Idle { .. }) {
            return Action::Destroy(qpn);
        }
        self.state = State::Accepted {
            qpn,
            psn,
            peer_qpn,
            peer_psn,
            since_ms: now_ms,
        };
        Action::Send(self.message(Op::Accept, qpn, psn, peer_qpn))
    }

    /// A handshake message from the peer. `accepting`: this side is in
    /// connected mode and may make a connection.
    pub fn receive(&mut self, msg: &ConnectMessage, accepting: bool, now_ms: u64) -> Action {
        match (msg.op, self.state) {
            (Op::Offer, _) if !accepting => Action::Send(self.message(Op::Refuse, 0, 0, msg.qpn)),
            // Held down after failures in a row: the peer's offers wait
            // too, or a peer that breaks every connection would get one
            // per its own hold-down. Not refused: two sides held down
            // would answer each other's offers and double each other's
            // hold-down.
            (Op::Offer, State::Idle { not_before_ms })
                if self.failures > 1 && now_ms < not_before_ms =>
            {
                Action::None
            }
            (Op::Offer, State::Idle { .. }) => Action::CreateAndAccept {
                peer_qpn: msg.qpn,
                peer_psn: msg.psn,
            },
            // Both offered: the winner's offer stands, the other side
            // connects the QP it offered to the winner's and accepts.
            (Op::Offer, State::Offering { .. }) if self.wins => Action::None,
            (Op::Offer, State::Offering { qpn, psn, .. }) => {
                self.state = State::Accepted {
                    qpn,
                    psn,
                    peer_qpn: msg.qpn,
                    peer_psn: msg.psn,
                    since_ms: now_ms,
                };
                Action::ConnectAndSend {
                    qpn,
                    peer_qpn: msg.qpn,
                    peer_psn: msg.psn,
                    then: self.message(Op::Accept, qpn, psn, msg.qpn),
                }
            }
            // Our ACCEPT was lost: the same answer again.
            (
                Op::Offer,
                State::Accepted {
                    qpn,
                    psn,
                    peer_qpn,
                    peer_psn,
                    ..
                },
            ) if (peer_qpn, peer_psn) == (msg.qpn, msg.psn) => {
                Action::Send(self.message(Op::Accept, qpn, psn, peer_qpn))
            }
            // A late copy of the offer we are up with (a retry that our
            // ACCEPT overtook): the connection stands.
            (
                Op::Offer,
                State::Up {
                    peer_qpn, peer_psn, ..
                },
            ) if (peer_qpn, peer_psn) == (msg.qpn, msg.psn) => Action::None,
            // The peer started over (it tore its side down): so do we; its
            // next offer finds this side idle.
            (Op::Offer, State::Accepted { qpn, .. } | State::Up { qpn, .. }) => {
                self.state = State::Idle { not_before_ms: 0 };
                Action::Destroy(qpn)
            }
            (Op::Accept, State::Offering { qpn, .. }) if msg.your_qpn == qpn => {
                self.state = State::Up {
                    qpn,
                    peer_qpn: msg.qpn,
                    peer_psn: msg.psn,
                    peer_max_frame: msg.max_frame,
                };
                Action::ConnectAndSend {
                    qpn,
                    peer_qpn: msg.qpn,
                    peer_psn: msg.psn,
                    then: self.message(Op::Confirm, qpn, 0, msg.qpn),
                }
            }
            // An ACCEPT again after we are up (our retried offer crossed
            // the first one): the CONFIRM again.
            (Op::Accept, State::Up { qpn, peer_qpn, .. })
                if msg.your_qpn == qpn && msg.qpn == peer_qpn =>
            {
                Action::Send(self.message(Op::Confirm, qpn, 0, peer_qpn))
            }
            (
                Op::Confirm,
                State::Accepted {
                    qpn,
                    peer_qpn,
                    peer_psn,
                    ..
                },
            ) if msg.your_qpn == qpn && msg.qpn == peer_qpn => {
                self.state = State::Up {
                    qpn,
                    peer_qpn,
                    peer_psn,
                    peer_max_frame: msg.max_frame,
                };
                Action::None
            }
            (Op::Refuse, State::Offering { qpn, .. })
            | (Op::Refuse, State::Accepted { qpn, .. })
            | (Op::Refuse, State::Up { qpn, .. })
                if msg.your_qpn == qpn =>
            {
                self.state = State::Idle {
                    not_before_ms: self.hold_down(now_ms),
                };
                Action::Destroy(qpn)
            }
            // Stale, crossed or for another attempt: ignored.
            _ => Action::None,
        }
    }

    /// A frame arrived over this side's QP: on the accepter, the offerer
    /// is up, so this side is too (its CONFIRM may be lost).
    pub fn frame_received(&mut self, peer_max_frame: u32) {
        if let State::Accepted {
            qpn,
            peer_qpn,
            peer_psn,
            ..
        } = self.state
        {
            self.state = State::Up {
                qpn,
                peer_qpn,
                peer_psn,
                peer_max_frame,
            };
        }
    }

    /// Time passes: retries and timeouts.
    pub fn tick(&mut self, now_ms: u64) -> Action {
        match self.state {
            State::Offering {
                qpn,
                psn,
                tries,
                sent_ms,
            } if now_ms.saturating_sub(sent_ms) >= OFFER_EVERY_MS => {
                if tries >= OFFER_TRIES {
                    // No answer: an older node, or one gone.
                    self.state = State::Idle {
                        not_before_ms: self.hold_down(now_ms),
                    };
                    return Action::Destroy(qpn);
                }
                self.state = State::Offering {
                    qpn,
                    psn,
                    tries: tries + 1,
                    sent_ms: now_ms,
                };
                Action::Send(self.message(Op::Offer, qpn, psn, 0))
            }
            State::Accepted { qpn, since_ms, .. }
                if now_ms.saturating_sub(since_ms) >= ACCEPT_TIMEOUT_MS =>
            {
                self.state = State::Idle {
                    not_before_ms: self.hold_down(now_ms),
                };
                Action::Destroy(qpn)
            }
            _ => Action::None,
        }
    }

    /// The connection or the attempt failed (a QP error, a failed
    /// connect, the peer aged out): back to UD, for the hold-down.
    pub fn fail(&mut self, now_ms: u64) -> Action {
        let qpn = self.qpn();
        self.state = State::Idle {
            not_before_ms: self.hold_down(now_ms),
        };
        qpn.map_or(Action::None, Action::Destroy)
    }

    /// This side leaves connected mode, or forgets the peer: the QP goes,
    /// and a new attempt may start at once if it comes back.
    pub fn close(&mut self) -> Action {
        let qpn = self.qpn();
        self.state = State::Idle { not_before_ms: 0 };
        self.failures = 0;
        qpn.map_or(Action::None, Action::Destroy)
    }
}
