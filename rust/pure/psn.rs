// SPDX-License-Identifier: GPL-2.0

//! Packet sequence numbers: 24 bits that wrap, compared within half the
//! number space (IBTA 9.7.1: a PSN is ahead of another if it is less than
//! 2^23 after it).

/// The number of distinct PSNs.
pub const SPACE: u32 = 1 << 24;
/// Mask of the 24 PSN bits.
pub const PSN_MASK: u32 = SPACE - 1;

/// A 24-bit packet sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// The PSN of the low 24 bits of `raw` (wire fields carry other bits
    /// next to it).
    pub const fn new(raw: u32) -> Self {
        Self(raw & PSN_MASK)
    }

    /// The PSN as a number below 2^24.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The PSN `n` packets later.
    pub const fn add(self, n: u32) -> Self {
        Self(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// The next PSN.
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// How far `self` is after `other`, in `-2^23..2^23`: negative if
    /// `self` comes first.
    pub const fn distance_from(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back to
        // sign-extend it.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Whether `self` comes before `other`.
    pub const fn is_before(self, other: Psn) -> bool {
        self.distance_from(other) < 0
    }

    /// Whether `self` lies in `[first, first + count)`.
    pub const fn is_within(self, first: Psn, count: u32) -> bool {
        let offset = self.0.wrapping_sub(first.0) & PSN_MASK;
        offset < count
    }
}

/// Packets a message of `length` bytes takes at path MTU `mtu` bytes
/// (at least one: a zero-length message is one packet). `None` for an MTU
/// of zero.
pub fn packets_for(length: u32, mtu: u32) -> Option<u32> {
    if mtu == 0 {
        return None;
    }
    Some(length.div_ceil(mtu).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(0xff_ffff).next(), Psn::new(0));
        assert_eq!(Psn::new(0x1ff_ffff).get(), 0xff_ffff);
        assert_eq!(Psn::new(10).add(u32::MAX), Psn::new(9));
    }

    #[test]
    fn distance_and_order() {
        let a = Psn::new(0xff_fff0);
        let b = Psn::new(0x10);
        assert_eq!(b.distance_from(a), 0x20);
        assert_eq!(a.distance_from(b), -0x20);
        assert!(a.is_before(b));
        assert!(!b.is_before(a));
        assert!(!a.is_before(a));
        // Exactly half the space away counts as behind.
        assert_eq!(Psn::new(1 << 23).distance_from(Psn::new(0)), -(1 << 23));
        assert_eq!(
            Psn::new((1 << 23) - 1).distance_from(Psn::new(0)),
            (1 << 23) - 1
        );
    }

    #[test]
    fn windows() {
        let first = Psn::new(0xff_fffe);
        assert!(Psn::new(0xff_fffe).is_within(first, 4));
        assert!(Psn::new(1).is_within(first, 4));
        assert!(!Psn::new(2).is_within(first, 4));
        assert!(!Psn::new(0xff_fffd).is_within(first, 4));
        assert!(!first.is_within(first, 0));
    }

    #[test]
    fn packet_counts() {
        assert_eq!(packets_for(0, 1024), Some(1));
        assert_eq!(packets_for(1024, 1024), Some(1));
        assert_eq!(packets_for(1025, 1024), Some(2));
        assert_eq!(packets_for(u32::MAX, 256), Some(1 << 24));
        assert_eq!(packets_for(1, 0), None);
    }

    #[test]
    fn distance_is_antisymmetric_except_at_half() {
        let mut x = 0x9e37_79b9u32;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let a = Psn::new(x);
            let b = Psn::new(x.rotate_left(11));
            let d = a.distance_from(b);
            assert_eq!(b.add(d as u32), a);
            if d != -(1 << 23) {
                assert_eq!(b.distance_from(a), -d);
            }
        }
    }
}
