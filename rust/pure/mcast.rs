// SPDX-License-Identifier: GPL-2.0

//! Multicast groups on RoCEv2: a multicast GID is an IP multicast address
//! (IPv4-mapped `::ffff:224.0.0.0/4`, or IPv6 `ff00::/8`), its packets go
//! to QP number 0xFFFFFF, and the netdev receives them at the Ethernet
//! address IP maps the group to (RFC 1112 section 6.4, RFC 2464 section 7).

/// The destination QP number of every multicast packet.
pub const MULTICAST_QPN: u32 = 0xff_ffff;

/// Whether `gid` names a multicast group.
pub fn is_multicast_gid(gid: &[u8; 16]) -> bool {
    multicast_mac(gid).is_some()
}

/// The Ethernet address a netdev receives group `gid` at; `None` if `gid`
/// is not a multicast GID.
pub fn multicast_mac(gid: &[u8; 16]) -> Option<[u8; 6]> {
    let ipv4_mapped = gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    if ipv4_mapped {
        // 224.0.0.0/4: the low 23 bits of the group under 01:00:5e.
        (gid[12] & 0xf0 == 0xe0).then(|| [0x01, 0x00, 0x5e, gid[13] & 0x7f, gid[14], gid[15]])
    } else if gid[0] == 0xff {
        // The low 32 bits of the group under 33:33.
        Some([0x33, 0x33, gid[12], gid[13], gid[14], gid[15]])
    } else {
        None
    }
}
