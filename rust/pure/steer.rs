// SPDX-License-Identifier: GPL-2.0

//! Which packets of a connection's messages may go to the QP's receive
//! work on another CPU (`wire::steer` in srnic). Handing a packet over
//! lets the CPU that received it go on while another copies its payload;
//! it costs a wake-up of that CPU, which a stream of messages shares and a
//! ping-pong pays once per message. So a SEND or WRITE of the peer's that
//! answers one of ours (this side started a SEND or WRITE since the peer's
//! last message began) keeps its first [`TAKEN_HERE`] packets on the
//! receiving CPU, and an answer of up to `TAKEN_HERE + 1` packets stays
//! there whole; a message of a stream is handed over from its first
//! packet. READ responses always are.

use super::headers::{OpcodeInfo, Operation, Position};

/// Packets of a message that answers one of ours taken where they arrive
/// before the rest of it may be handed over: such a message of up to
/// `TAKEN_HERE + 1` packets is never handed over for its own sake.
pub const TAKEN_HERE: u16 = 4;

/// Where the peer's request under way stands: its packets seen so far (0
/// between messages), and whether it answers one of ours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Runs {
    packets: u16,
    answers: bool,
}

impl Runs {
    /// The state in one word, for an atomic.
    pub fn to_bits(self) -> u32 {
        u32::from(self.packets) | u32::from(self.answers) << 16
    }

    /// The state [`Self::to_bits`] made.
    pub fn from_bits(bits: u32) -> Self {
        Self {
            packets: bits as u16,
            answers: bits & 1 << 16 != 0,
        }
    }
}

/// Whether the packet of `info` may be handed over, following the peer's
/// request under way in `runs`. `sent_request` says (and forgets) whether
/// this side started a SEND or WRITE since the peer's last message began;
/// it is asked at the first or only packet of each SEND or WRITE only. Acknowledgements,
/// READ and atomic requests leave `runs` as it is.
pub fn may_steer(
    info: Option<OpcodeInfo>,
    runs: &mut Runs,
    sent_request: impl FnOnce() -> bool,
) -> bool {
    let Some(info) = info else {
        return false;
    };
    match info.operation {
        Operation::Send | Operation::Write => {}
        Operation::ReadResponse => return info.continues_message(),
        _ => return false,
    }
    match info.position {
        Position::First => {
            runs.packets = 1;
            runs.answers = sent_request();
            !runs.answers
        }
        // Counted only as far as it matters, so that a stream's middle
        // packets leave the state (and its cache line) alone.
        Position::Middle if runs.answers && runs.packets <= TAKEN_HERE => {
            runs.packets += 1;
            runs.packets > TAKEN_HERE
        }
        Position::Middle => true,
        Position::Last | Position::Only => {
            if info.position == Position::Only {
                // A one-packet answer ends the exchange it belongs to.
                sent_request();
            }
            *runs = Runs::default();
            false
        }
    }
}
