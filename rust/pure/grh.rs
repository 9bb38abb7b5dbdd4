// SPDX-License-Identifier: GPL-2.0

//! The 40 bytes a UD receive gets before the payload (the GRH area). On
//! RoCEv2 they hold the packet's IP header: an IPv6 header as it is, or an
//! IPv4 header in the last 20 bytes with the first 20 zero. Receivers read
//! the source address from it (and `ibv_wc.network_hdr_type` says which).

/// Bytes of the GRH area.
pub const GRH_LEN: usize = 40;

/// What the IP header of a RoCEv2 packet says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpHeader {
    /// Source GID (an IPv4-mapped address for IPv4).
    pub sgid: [u8; 16],
    /// Destination GID.
    pub dgid: [u8; 16],
    /// DSCP and ECN.
    pub traffic_class: u8,
    /// TTL or hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// Bytes after the IP header (UDP header to ICRC).
    pub ip_payload_len: u16,
}

/// The UDP header of a RoCEv2 datagram of `udp_len` bytes from `sport`
/// (no checksum: the ICRC protects the packet).
pub fn udp_header(sport: u16, dport: u16, udp_len: u16) -> [u8; 8] {
    let s = sport.to_be_bytes();
    let d = dport.to_be_bytes();
    let l = udp_len.to_be_bytes();
    [s[0], s[1], d[0], d[1], l[0], l[1], 0, 0]
}

/// The IPv4-mapped GID of `addr`.
pub fn ipv4_mapped(addr: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, addr[0], addr[1], addr[2], addr[3],
    ]
}

/// Whether `gid` is an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
pub fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

/// The one's-complement checksum of an IPv4 header.
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum = 0u32;
    for pair in header.chunks(2) {
        let hi = u32::from(pair.first().copied().unwrap_or(0));
        let lo = u32::from(pair.get(1).copied().unwrap_or(0));
        // Folding the carry each time keeps the sum below 2^17 whatever
        // the length (a plain sum overflowed past 64 Ki words).
        sum += (hi << 8) | lo;
        sum = (sum & 0xffff) + (sum >> 16);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl IpHeader {
    /// Whether the packet is IPv4 (both addresses mapped).
    pub fn is_ipv4(&self) -> bool {
        is_ipv4_mapped(&self.sgid) && is_ipv4_mapped(&self.dgid)
    }

    /// The IPv4 header of the packet (identification 0, checksummed).
    pub fn ipv4_header(&self) -> [u8; 20] {
        let total = self.ip_payload_len.saturating_add(20).to_be_bytes();
        let s = &self.sgid;
        let d = &self.dgid;
        let mut h = [
            0x45,
            self.traffic_class,
            total[0],
            total[1],
            0,
            0,
            // Don't fragment.
            0x40,
            0,
            self.hop_limit,
            17,
            0,
            0,
            s[12],
            s[13],
            s[14],
            s[15],
            d[12],
            d[13],
            d[14],
            d[15],
        ];
        let checksum = ipv4_checksum(&h).to_be_bytes();
        h[10] = checksum[0];
        h[11] = checksum[1];
        h
    }

    /// The IPv6 header of the packet (no extension headers).
    pub fn ipv6_header(&self) -> [u8; GRH_LEN] {
        let mut out = [0u8; GRH_LEN];
        let flow = self.flow_label & 0x000f_ffff;
        let word = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | flow;
        out[0..4].copy_from_slice(&word.to_be_bytes());
        out[4..6].copy_from_slice(&self.ip_payload_len.to_be_bytes());
        out[6] = 17;
        out[7] = self.hop_limit;
        out[8..24].copy_from_slice(&self.sgid);
        out[24..40].copy_from_slice(&self.dgid);
        out
    }

    /// The header fields of an IPv6 header (the first 40 bytes of
    /// `bytes`); `None` if it is not IPv6 or is followed by anything but
    /// UDP.
    pub fn from_ipv6(bytes: &[u8]) -> Option<Self> {
        let h = bytes.get(..GRH_LEN)?;
        let word = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        if word >> 28 != 6 || h[6] != 17 {
            return None;
        }
        let mut sgid = [0u8; 16];
        let mut dgid = [0u8; 16];
        sgid.copy_from_slice(&h[8..24]);
        dgid.copy_from_slice(&h[24..40]);
        Some(Self {
            sgid,
            dgid,
            traffic_class: (word >> 20) as u8,
            hop_limit: h[7],
            flow_label: word & 0x000f_ffff,
            ip_payload_len: u16::from_be_bytes([h[4], h[5]]),
        })
    }

    /// The GRH area of a UD receive: the IPv6 header, or for IPv4 the
    /// IPv4 header in its last 20 bytes.
    pub fn grh(&self) -> [u8; GRH_LEN] {
        if self.is_ipv4() {
            let mut out = [0u8; GRH_LEN];
            out[20..].copy_from_slice(&self.ipv4_header());
            out
        } else {
            self.ipv6_header()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn ipv4_header_sits_in_the_last_20_bytes_with_a_valid_checksum() {
        let h = IpHeader {
            sgid: mapped([10, 0, 0, 1]),
            dgid: mapped([10, 0, 0, 2]),
            traffic_class: 0x08,
            hop_limit: 64,
            flow_label: 0,
            ip_payload_len: 100,
        };
        let grh = h.grh();
        assert!(grh[..20].iter().all(|b| *b == 0));
        let ip = &grh[20..];
        assert_eq!(ip[0], 0x45);
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 120);
        assert_eq!(ip[8], 64);
        assert_eq!(ip[9], 17);
        assert_eq!(&ip[12..16], &[10, 0, 0, 1]);
        assert_eq!(&ip[16..20], &[10, 0, 0, 2]);
        // A header with its checksum sums to all ones.
        assert_eq!(ipv4_checksum(ip), 0);
    }

    #[test]
    fn checksum_of_any_length_does_not_overflow() {
        // Found by the fuzzer's property on long inputs: 0xffff words
        // summed past 2^32 overflowed. One's-complement sums of all-ones
        // words stay all ones, so the checksum is 0.
        assert_eq!(ipv4_checksum(&[0xff; 200_000]), 0);
        assert_eq!(ipv4_checksum(&[0xff; 200_001]), 0x00ff);
        assert_eq!(ipv4_checksum(&[]), 0xffff);
    }

    #[test]
    fn ipv6_header_fills_the_area() {
        let mut sgid = [0u8; 16];
        sgid[0] = 0xfe;
        sgid[1] = 0x80;
        sgid[15] = 1;
        let mut dgid = sgid;
        dgid[15] = 2;
        let h = IpHeader {
            sgid,
            dgid,
            traffic_class: 0xab,
            hop_limit: 1,
            flow_label: 0x12345,
            ip_payload_len: 300,
        };
        assert!(!h.is_ipv4());
        let grh = h.grh();
        assert_eq!(grh[0] >> 4, 6);
        let word = u32::from_be_bytes([grh[0], grh[1], grh[2], grh[3]]);
        assert_eq!((word >> 20) & 0xff, 0xab);
        assert_eq!(word & 0xfffff, 0x12345);
        assert_eq!(u16::from_be_bytes([grh[4], grh[5]]), 300);
        assert_eq!(grh[6], 17);
        assert_eq!(grh[7], 1);
        assert_eq!(&grh[8..24], &sgid);
        assert_eq!(&grh[24..40], &dgid);
    }

    #[test]
    fn ipv6_header_round_trips_through_its_parser() {
        let header = IpHeader {
            sgid: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            dgid: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            traffic_class: 0xa5,
            hop_limit: 7,
            flow_label: 0x1_2345,
            ip_payload_len: 1234,
        };
        let bytes = header.ipv6_header();
        assert_eq!(bytes[0] >> 4, 6);
        assert_eq!(bytes[6], 17);
        assert_eq!(IpHeader::from_ipv6(&bytes), Some(header));
        let mut not_udp = bytes;
        not_udp[6] = 6;
        assert_eq!(IpHeader::from_ipv6(&not_udp), None);
        assert_eq!(IpHeader::from_ipv6(&bytes[..39]), None);
        let mut ipv4 = bytes;
        ipv4[0] = 0x45;
        assert_eq!(IpHeader::from_ipv6(&ipv4), None);
    }
}
