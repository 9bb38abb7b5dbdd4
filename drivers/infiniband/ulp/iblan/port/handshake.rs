// SPDX-License-Identifier: GPL-2.0

//! Connected mode's handshake on the wire (`pure::connect`). A LAN port
//! is in datagram mode, the only one so far, so it answers every OFFER
//! with a REFUSE at once: a node in connected mode then keeps UD to this
//! one without waiting for its offers to time out.

use super::*;
use crate::pure::connect::{ConnectMessage, Op, MAX_CONNECTED_FRAME};

impl LanDev {
    /// A handshake datagram from the node with GID `sgid`, sent from its
    /// QP `src_qp`. Receive path (NAPI).
    pub(super) fn handshake(&self, sgid: &[u8; 16], src_qp: u32, payload: &[u8]) {
        let Ok(message) = ConnectMessage::parse(payload) else {
            self.count(Stat::CmMalformed);
            return;
        };
        // Only an offer asks for an answer; anything else answers an
        // offer this node never made.
        if message.op != Op::Offer {
            return;
        }
        let refusal = ConnectMessage {
            op: Op::Refuse,
            qpn: 0,
            psn: 0,
            your_qpn: message.qpn,
            max_frame: MAX_CONNECTED_FRAME,
            lan: self.config.lan,
        };
        if self.answer(sgid, src_qp, &refusal.encode()) {
            self.count(Stat::CmOffersRefused);
        }
    }

    /// Sends `bytes` to QP `qpn` of the peer with GID `gid`, through the
    /// peer's address handle: a node not in the table gets no answer.
    /// Whether it was posted; not when the previous answer is still in
    /// flight (the offerer retries) or the send queue is full.
    fn answer(&self, gid: &[u8; 16], qpn: u32, bytes: &[u8]) -> bool {
        // A QPN from the wire: a UD QP has 24 bits and is not QP 0 or 1.
        if !(2..1 << 24).contains(&qpn) {
            self.count(Stat::CmMalformed);
            return false;
        }
        if self
            .sq_free
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |f| f.checked_sub(1))
            .is_err()
        {
            return false;
        }
        let mut peers = self.peers.lock();
        let posted = match peers.find(|e| &e.peer.gid == gid) {
            Some(at) => match peers.slots.get(at) {
                Some(Some(entry)) => self.qp.post_buffer(
                    ANSWER_BUFFER,
                    bytes,
                    &entry.peer.ah,
                    qpn,
                    self.config.qkey(),
                ),
                _ => Err(ENOENT),
            },
            None => Err(ENOENT),
        };
        if posted.is_ok() {
            // The peer's AH is retired only after this send completes.
            peers.count_posts(0, 1);
        }
        drop(peers);
        if posted.is_ok() {
            self.count(Stat::DmaSyncsForDevice);
            true
        } else {
            self.sq_free.fetch_add(1, Ordering::AcqRel);
            false
        }
    }
}
