// SPDX-License-Identifier: GPL-2.0

//! Multicast GIDs and the Ethernet addresses their groups use.

use srnic_pure::mcast::{is_multicast_gid, multicast_mac, MULTICAST_QPN};

fn ipv4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&a);
    gid
}

#[test]
fn ipv4_groups_map_their_low_23_bits() {
    assert_eq!(
        multicast_mac(&ipv4_mapped([224, 0, 0, 251])),
        Some([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb])
    );
    // The 24th bit is dropped: 239.129.1.2 and 239.1.1.2 share a MAC.
    assert_eq!(
        multicast_mac(&ipv4_mapped([239, 129, 1, 2])),
        Some([0x01, 0x00, 0x5e, 0x01, 0x01, 0x02])
    );
    assert_eq!(
        multicast_mac(&ipv4_mapped([239, 255, 255, 255])),
        Some([0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff])
    );
}

#[test]
fn ipv6_groups_map_their_low_32_bits() {
    let mut gid = [0u8; 16];
    gid[0] = 0xff;
    gid[1] = 0x0e;
    gid[12..].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
    assert_eq!(
        multicast_mac(&gid),
        Some([0x33, 0x33, 0x12, 0x34, 0x56, 0x78])
    );
}

#[test]
fn unicast_gids_are_not_groups() {
    assert!(!is_multicast_gid(&ipv4_mapped([10, 0, 0, 1])));
    assert!(!is_multicast_gid(&ipv4_mapped([240, 0, 0, 1])));
    assert!(!is_multicast_gid(&ipv4_mapped([223, 255, 255, 255])));
    let mut link_local = [0u8; 16];
    link_local[0] = 0xfe;
    link_local[1] = 0x80;
    assert!(!is_multicast_gid(&link_local));
    assert!(!is_multicast_gid(&[0u8; 16]));
    assert_eq!(MULTICAST_QPN, (1 << 24) - 1);
}
