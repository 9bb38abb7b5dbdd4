// SPDX-License-Identifier: GPL-2.0

//! The shape of a UDP datagram list, the skb that carries a burst of one
//! flow's datagrams through the IP stack at once (`kapi::udp::DatagramList`):
//! which datagram may join it, and whether it is even.
//!
//! The stack checks only a list's first datagram against the path MTU and
//! takes its UDP payload as the list's segment size, so no later datagram
//! may be longer. Cut apart datagram by datagram, as the stack does before
//! a NIC's driver or at the receiving UDP socket, shorter ones may come
//! anywhere. But whatever rewrites a list on its way (an XDP program that
//! takes fragments, a tc action that pulls its bytes) leaves the payloads
//! one run, which the stack then cuts at the segment size: right only for
//! an even list, every datagram as long as the first but the last, the
//! shape fraglist GRO builds. Only an even list may cross a device whole.

/// The lengths of a list's datagrams so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListShape {
    first_len: u32,
    /// A datagram shorter than the first has joined.
    ended_short: bool,
    even: bool,
}

impl ListShape {
    /// The shape of a list of one datagram of `first_len` bytes.
    pub const fn new(first_len: u32) -> Self {
        Self {
            first_len,
            ended_short: false,
            even: true,
        }
    }

    /// Whether a datagram of `len` bytes may join: no longer than the
    /// first, and, for a list that must stay even, not after a shorter one.
    pub fn takes(&self, len: u32, stay_even: bool) -> bool {
        len <= self.first_len && !(stay_even && self.ended_short)
    }

    /// Records a datagram of `len` bytes joining the list.
    pub fn join(&mut self, len: u32) {
        self.even &= !self.ended_short && len <= self.first_len;
        self.ended_short |= len < self.first_len;
    }

    /// Whether every datagram is as long as the first but the last, which
    /// may be shorter.
    pub fn is_even(&self) -> bool {
        self.even
    }
}
