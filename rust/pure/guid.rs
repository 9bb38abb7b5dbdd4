// SPDX-License-Identifier: GPL-2.0

//! Node GUIDs derived from Ethernet MAC addresses.

/// The modified EUI-64 of a MAC address (RFC 4291, appendix A): `ff:fe` in the
/// middle and the universal/local bit inverted. RoCE devices use it as their
/// node GUID, so the GUID matches the IPv6 link-local GID of the same netdev.
pub fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The node GUID as the core stores it: the EUI-64 bytes in network order,
/// held in a `u64` whose in-memory layout is those bytes.
pub fn node_guid_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_ne_bytes(eui64_from_mac(mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_universal_local_bit_and_inserts_fffe() {
        assert_eq!(
            eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        assert_eq!(
            eui64_from_mac([0x00, 0x1b, 0x21, 0xaa, 0xbb, 0xcc]),
            [0x02, 0x1b, 0x21, 0xff, 0xfe, 0xaa, 0xbb, 0xcc]
        );
    }

    #[test]
    fn guid_memory_layout_is_network_order() {
        let guid = node_guid_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(
            guid.to_ne_bytes(),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
    }
}
