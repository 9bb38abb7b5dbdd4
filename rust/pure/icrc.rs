// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC (ICRC) that ends every RoCEv2 packet: a CRC-32 (the
//! Ethernet polynomial, reflected) over the IP, UDP and transport headers
//! and the payload, with the fields routers may change masked to ones and
//! 64 bits of ones standing in for the InfiniBand LRH (RoCEv2, annex A17).

/// CRC-32 lookup table for the reflected polynomial 0xEDB88320.
const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// A running CRC-32.
#[derive(Debug, Clone, Copy)]
pub struct Crc32(u32);

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A CRC over nothing yet.
    pub const fn new() -> Self {
        Self(0xffff_ffff)
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut crc = self.0;
        for b in bytes {
            // The index is masked to a byte: always inside the table.
            let entry = TABLE.get(((crc ^ u32::from(*b)) & 0xff) as usize);
            crc = entry.copied().unwrap_or(0) ^ (crc >> 8);
        }
        self.0 = crc;
    }

    /// The CRC of everything added.
    pub const fn finish(self) -> u32 {
        !self.0
    }
}

/// Bytes of an IPv4 header without options, an IPv6 header, a UDP header.
pub const IPV4_HEADER_LEN: usize = 20;
/// IPv6 fixed header.
pub const IPV6_HEADER_LEN: usize = 40;
/// UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// Why an ICRC cannot be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcError {
    /// A header is shorter than it must be.
    Truncated,
}

/// Adds the UDP header and transport packet (BTH to payload and pad,
/// without the ICRC) with their variant fields masked.
fn transport_part(crc: &mut Crc32, udp_to_pad: &[u8]) -> Result<(), IcrcError> {
    // UDP header with its checksum masked, then the BTH with its
    // FECN/BECN/reserved byte masked.
    const BTH_MASKED_BYTE: usize = UDP_HEADER_LEN + 4;
    if udp_to_pad.len() < BTH_MASKED_BYTE + 1 {
        return Err(IcrcError::Truncated);
    }
    let (udp, rest) = udp_to_pad.split_at(UDP_HEADER_LEN);
    let mut udp_copy = [0u8; UDP_HEADER_LEN];
    udp_copy.copy_from_slice(udp);
    udp_copy[6] = 0xff;
    udp_copy[7] = 0xff;
    crc.update(&udp_copy);
    let (bth_head, bth_tail) = rest.split_at(4);
    crc.update(bth_head);
    crc.update(&[0xff]);
    crc.update(bth_tail.get(1..).unwrap_or(&[]));
    Ok(())
}

/// The ICRC of a RoCEv2 packet over IPv4: `ip` is the 20-byte IPv4
/// header, `udp_to_pad` everything from the UDP header to the end of the
/// pad, before the ICRC. The wire carries the result little-endian.
pub fn icrc_ipv4(ip: &[u8], udp_to_pad: &[u8]) -> Result<u32, IcrcError> {
    let ip = ip.get(..IPV4_HEADER_LEN).ok_or(IcrcError::Truncated)?;
    let mut crc = Crc32::new();
    crc.update(&[0xff; 8]);
    let mut header = [0u8; IPV4_HEADER_LEN];
    header.copy_from_slice(ip);
    // Type of service, time to live and header checksum may change on
    // the way.
    header[1] = 0xff;
    header[8] = 0xff;
    header[10] = 0xff;
    header[11] = 0xff;
    crc.update(&header);
    transport_part(&mut crc, udp_to_pad)?;
    Ok(crc.finish())
}

/// The ICRC of a RoCEv2 packet over IPv6 (see [`icrc_ipv4`]).
pub fn icrc_ipv6(ip: &[u8], udp_to_pad: &[u8]) -> Result<u32, IcrcError> {
    let ip = ip.get(..IPV6_HEADER_LEN).ok_or(IcrcError::Truncated)?;
    let mut crc = Crc32::new();
    crc.update(&[0xff; 8]);
    let mut header = [0u8; IPV6_HEADER_LEN];
    header.copy_from_slice(ip);
    // Traffic class and flow label (all but the version nibble), and the
    // hop limit.
    header[0] |= 0x0f;
    header[1] = 0xff;
    header[2] = 0xff;
    header[3] = 0xff;
    header[7] = 0xff;
    crc.update(&header);
    transport_part(&mut crc, udp_to_pad)?;
    Ok(crc.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_value() {
        // The standard check value of CRC-32 over "123456789".
        let mut crc = Crc32::new();
        crc.update(b"123456789");
        assert_eq!(crc.finish(), 0xcbf4_3926);
    }

    #[test]
    fn short_input_is_an_error() {
        assert_eq!(icrc_ipv4(&[0; 19], &[0; 40]), Err(IcrcError::Truncated));
        assert_eq!(icrc_ipv4(&[0; 20], &[0; 12]), Err(IcrcError::Truncated));
        assert_eq!(icrc_ipv6(&[0; 39], &[0; 40]), Err(IcrcError::Truncated));
    }
}
