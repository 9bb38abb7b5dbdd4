// SPDX-License-Identifier: GPL-2.0

//! The AETH syndrome (IBTA 9.7.5.1): whether a response acknowledges, asks
//! the requester to wait for a receive buffer (RNR NAK), or refuses (NAK),
//! and the RNR timer codes both sides use.

/// Credit count meaning "no end-to-end flow control" in an ACK.
const NO_CREDITS: u8 = 0x1f;

/// NAK codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NakCode {
    /// A PSN ahead of the expected one: resend from the expected one.
    PsnSequence,
    /// An opcode out of sequence, a length the receive buffer cannot take,
    /// an operation the QP does not allow.
    InvalidRequest,
    /// A key, range or access right that does not hold.
    RemoteAccess,
    /// The responder could not complete the operation.
    RemoteOperation,
    /// Invalid RD request (RD transport, which srnic does not have).
    InvalidRdRequest,
}

/// What an AETH says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syndrome {
    /// Positive acknowledgement.
    Ack,
    /// Receiver not ready: retry after the timer `code` names.
    Rnr(u8),
    /// Negative acknowledgement.
    Nak(NakCode),
}

impl Syndrome {
    /// Decodes an AETH syndrome byte; `None` for reserved values.
    pub fn decode(byte: u8) -> Option<Self> {
        let low = byte & 0x1f;
        match byte >> 5 {
            0 => Some(Self::Ack),
            1 => Some(Self::Rnr(low)),
            3 => Some(Self::Nak(match low {
                0 => NakCode::PsnSequence,
                1 => NakCode::InvalidRequest,
                2 => NakCode::RemoteAccess,
                3 => NakCode::RemoteOperation,
                4 => NakCode::InvalidRdRequest,
                _ => return None,
            })),
            _ => None,
        }
    }

    /// The syndrome byte.
    pub fn encode(self) -> u8 {
        match self {
            Self::Ack => NO_CREDITS,
            Self::Rnr(code) => 0x20 | (code & 0x1f),
            Self::Nak(code) => {
                0x60 | match code {
                    NakCode::PsnSequence => 0,
                    NakCode::InvalidRequest => 1,
                    NakCode::RemoteAccess => 2,
                    NakCode::RemoteOperation => 3,
                    NakCode::InvalidRdRequest => 4,
                }
            }
        }
    }
}

/// RNR timer codes in microseconds (IBTA table 45); code 0 is the longest.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// How long RNR timer `code` (5 bits; higher bits are ignored) waits, in
/// microseconds.
pub fn rnr_timer_us(code: u8) -> u32 {
    RNR_TIMER_US
        .get(usize::from(code & 0x1f))
        .copied()
        .unwrap_or(655_360)
}

/// `rnr_retry` 7 means "retry forever".
pub const RNR_RETRY_FOREVER: u8 = 7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_or_is_reserved() {
        for byte in 0..=255u8 {
            if let Some(s) = Syndrome::decode(byte) {
                let again = Syndrome::decode(s.encode());
                assert_eq!(again, Some(s), "byte {byte:#x}");
            }
        }
        assert_eq!(Syndrome::decode(0x1f), Some(Syndrome::Ack));
        assert_eq!(Syndrome::decode(0x2c), Some(Syndrome::Rnr(12)));
        assert_eq!(
            Syndrome::decode(0x62),
            Some(Syndrome::Nak(NakCode::RemoteAccess))
        );
        assert_eq!(Syndrome::decode(0x40), None);
        assert_eq!(Syndrome::decode(0x65), None);
    }

    #[test]
    fn rnr_timer_grows_after_code_zero() {
        assert_eq!(rnr_timer_us(0), 655_360);
        assert_eq!(rnr_timer_us(12), 640);
        for code in 2..32u8 {
            assert!(rnr_timer_us(code) > rnr_timer_us(code - 1));
        }
        assert_eq!(rnr_timer_us(0x3f), rnr_timer_us(31));
    }
}
