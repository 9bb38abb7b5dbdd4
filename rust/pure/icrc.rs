// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC (ICRC) that ends every RoCEv2 packet: a CRC-32 (the
//! Ethernet polynomial, reflected) over the IP, UDP and transport headers
//! and the payload, with the fields routers may change masked to ones and
//! 64 bits of ones standing in for the InfiniBand LRH (RoCEv2, annex A17).

/// CRC-32 lookup tables for the reflected polynomial 0xEDB88320, for
/// eight bytes at a time: `TABLES[0]` advances the CRC by one byte, and
/// `TABLES[k]` gives the effect of a byte followed by `k` zero bytes.
const TABLES: [[u32; 256]; 8] = {
    let mut tables = [[0u32; 256]; 8];
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
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
};

/// One table entry; the index is masked to a byte, so always inside.
#[inline(always)]
fn entry(table: usize, index: u32) -> u32 {
    TABLES
        .get(table)
        .and_then(|t| t.get((index & 0xff) as usize))
        .copied()
        .unwrap_or(0)
}

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

    /// Adds `bytes`, eight at a time (payloads are most of the bytes a
    /// RoCEv2 node checks and signs).
    pub fn update(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            self.update_word(u64::from_le_bytes(le));
        }
        let mut crc = self.0;
        for b in words.remainder() {
            crc = entry(0, crc ^ u32::from(*b)) ^ (crc >> 8);
        }
        self.0 = crc;
    }

    /// Adds eight bytes given as the value they spell read little-endian
    /// (the first byte lowest), for callers that read memory a word at a
    /// time without forming a slice over it.
    #[inline(always)]
    pub fn update_word(&mut self, word: u64) {
        let low = (word as u32) ^ self.0;
        let high = (word >> 32) as u32;
        self.0 = entry(7, low)
            ^ entry(6, low >> 8)
            ^ entry(5, low >> 16)
            ^ entry(4, low >> 24)
            ^ entry(3, high)
            ^ entry(2, high >> 8)
            ^ entry(1, high >> 16)
            ^ entry(0, high >> 24);
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

/// Adds the UDP header and the BTH with their variant fields masked: the
/// first `UDP_HEADER_LEN + BTH_LEN` bytes of `udp_to_pad`; the rest of the
/// packet is added as it is. Returns that rest.
fn masked_headers<'a>(crc: &mut Crc32, udp_to_pad: &'a [u8]) -> Result<&'a [u8], IcrcError> {
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
    Ok(bth_tail.get(1..).unwrap_or(&[]))
}

/// The IP header with the fields routers may change masked.
fn masked_ip(crc: &mut Crc32, ip: &[u8]) -> Result<(), IcrcError> {
    crc.update(&[0xff; 8]);
    match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let ip = ip.get(..IPV4_HEADER_LEN).ok_or(IcrcError::Truncated)?;
            let mut header = [0u8; IPV4_HEADER_LEN];
            header.copy_from_slice(ip);
            // Type of service, time to live and header checksum.
            header[1] = 0xff;
            header[8] = 0xff;
            header[10] = 0xff;
            header[11] = 0xff;
            crc.update(&header);
        }
        Some(6) => {
            let ip = ip.get(..IPV6_HEADER_LEN).ok_or(IcrcError::Truncated)?;
            let mut header = [0u8; IPV6_HEADER_LEN];
            header.copy_from_slice(ip);
            // Traffic class and flow label (all but the version nibble),
            // and the hop limit.
            header[0] |= 0x0f;
            header[1] = 0xff;
            header[2] = 0xff;
            header[3] = 0xff;
            header[7] = 0xff;
            crc.update(&header);
        }
        _ => return Err(IcrcError::Truncated),
    }
    Ok(())
}

/// An ICRC computed piece by piece, for packets whose payload is not next
/// to their headers (page fragments).
#[derive(Debug, Clone, Copy)]
pub struct Icrc(Crc32);

impl Icrc {
    /// Starts the ICRC of a packet with IP header `ip` (IPv4 or IPv6, told
    /// by its version) and first bytes `head`, from the UDP header on; at
    /// least the UDP header and the BTH must be there.
    pub fn start(ip: &[u8], head: &[u8]) -> Result<Self, IcrcError> {
        let (mut icrc, rest) = Self::start_masked(ip, head)?;
        icrc.update(rest);
        Ok(icrc)
    }

    /// Starts as [`Icrc::start`] does, but adds only the headers with
    /// masked fields (IP, UDP, BTH) and returns the rest of `head`, for the
    /// caller to add as it is, with this type or with a CRC engine of its
    /// own ([`Icrc::register`]).
    pub fn start_masked<'h>(ip: &[u8], head: &'h [u8]) -> Result<(Self, &'h [u8]), IcrcError> {
        let mut crc = Crc32::new();
        masked_ip(&mut crc, ip)?;
        let rest = masked_headers(&mut crc, head)?;
        Ok((Self(crc), rest))
    }

    /// The CRC register so far, as Linux's `crc32_le()` keeps it (the
    /// reflected CRC-32, not inverted): what another implementation of the
    /// same CRC takes to go on from here.
    pub const fn register(&self) -> u32 {
        self.0 .0
    }

    /// Goes on from `register`, which another implementation of the same
    /// CRC advanced from [`Icrc::register`].
    pub const fn from_register(register: u32) -> Self {
        Self(Crc32(register))
    }

    /// Adds the next bytes of the packet (payload, pad).
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Adds the next eight bytes of the packet, given as the value they
    /// spell read little-endian ([`Crc32::update_word`]).
    #[inline(always)]
    pub fn update_word(&mut self, word: u64) {
        self.0.update_word(word);
    }

    /// The ICRC, which the wire carries little-endian.
    pub fn finish(self) -> u32 {
        self.0.finish()
    }
}

/// The ICRC of a RoCEv2 packet over IPv4: `ip` is the 20-byte IPv4
/// header, `udp_to_pad` everything from the UDP header to the end of the
/// pad, before the ICRC. The wire carries the result little-endian.
pub fn icrc_ipv4(ip: &[u8], udp_to_pad: &[u8]) -> Result<u32, IcrcError> {
    let ip = ip.get(..IPV4_HEADER_LEN).ok_or(IcrcError::Truncated)?;
    if ip.first().map(|b| b >> 4) != Some(4) {
        return Err(IcrcError::Truncated);
    }
    Ok(Icrc::start(ip, udp_to_pad)?.finish())
}

/// The ICRC of a RoCEv2 packet over IPv6 (see [`icrc_ipv4`]).
pub fn icrc_ipv6(ip: &[u8], udp_to_pad: &[u8]) -> Result<u32, IcrcError> {
    let ip = ip.get(..IPV6_HEADER_LEN).ok_or(IcrcError::Truncated)?;
    if ip.first().map(|b| b >> 4) != Some(6) {
        return Err(IcrcError::Truncated);
    }
    Ok(Icrc::start(ip, udp_to_pad)?.finish())
}

/// The ICRC that rxe (Linux 6.2 to 6.12 at least) gives an RDMA FLUSH
/// request: its opcode table has no payload offset for FLUSH, so after the
/// (masked) headers its CRC runs once more over the transport headers'
/// own bytes, unmasked, as if they were the payload. `ip` and
/// `udp_to_pad` as for [`icrc_ipv4`]. A FLUSH carries no payload, so the
/// transport headers are all of `udp_to_pad` after the UDP header.
pub fn rxe_flush_icrc(ip: &[u8], udp_to_pad: &[u8]) -> Result<u32, IcrcError> {
    let transport = udp_to_pad
        .get(UDP_HEADER_LEN..)
        .ok_or(IcrcError::Truncated)?;
    let mut icrc = Icrc::start(ip, udp_to_pad)?;
    icrc.update(transport);
    Ok(icrc.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC one bit at a time, straight from the definition.
    fn crc32_bitwise(bytes: &[u8]) -> u32 {
        !crc32_le(0xffff_ffff, bytes)
    }

    #[test]
    fn eight_bytes_at_a_time_matches_the_definition() {
        // Every length up to a few words, every split point, varied bytes.
        let data: Vec<u8> = (0u32..300)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in 0..data.len() {
            let want = crc32_bitwise(&data[..len]);
            let mut whole = Crc32::new();
            whole.update(&data[..len]);
            assert_eq!(whole.finish(), want, "length {len}");
            let split = len / 3;
            let mut parts = Crc32::new();
            parts.update(&data[..split]);
            parts.update(&data[split..len]);
            assert_eq!(parts.finish(), want, "length {len} split at {split}");
        }
    }

    #[test]
    fn piece_by_piece_matches_one_pass() {
        let mut ip = [0u8; IPV6_HEADER_LEN];
        ip[0] = 0x60;
        ip[6] = 17;
        let packet: Vec<u8> = (0u32..200).map(|i| (i * 7 + 3) as u8).collect();
        let whole = icrc_ipv6(&ip, &packet).unwrap();
        for split in 20..packet.len() {
            let mut icrc = Icrc::start(&ip, &packet[..20]).unwrap();
            icrc.update(&packet[20..split]);
            icrc.update(&packet[split..]);
            assert_eq!(icrc.finish(), whole, "split at {split}");
        }
        let mut ip4 = [0u8; IPV4_HEADER_LEN];
        ip4[0] = 0x45;
        let mut icrc = Icrc::start(&ip4, &packet[..40]).unwrap();
        icrc.update(&packet[40..]);
        assert_eq!(icrc.finish(), icrc_ipv4(&ip4, &packet).unwrap());
    }

    /// What Linux's `crc32_le()` does to a register: the reflected CRC
    /// bit by bit, without the inversions.
    fn crc32_le(mut crc: u32, bytes: &[u8]) -> u32 {
        for b in bytes {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn register_goes_on_in_another_implementation() {
        let packet: Vec<u8> = (0u32..300).map(|i| (i * 13 + 5) as u8).collect();
        for (ip, whole) in [
            (
                [0x45u8; IPV4_HEADER_LEN].to_vec(),
                icrc_ipv4 as fn(&[u8], &[u8]) -> _,
            ),
            (
                {
                    let mut ip = [0u8; IPV6_HEADER_LEN];
                    ip[0] = 0x60;
                    ip.to_vec()
                },
                icrc_ipv6,
            ),
        ] {
            let (icrc, rest) = Icrc::start_masked(&ip, &packet).unwrap();
            // The UDP header and the BTH up to its masked byte went in.
            assert_eq!(rest.len(), packet.len() - UDP_HEADER_LEN - 5);
            let (head, payload) = rest.split_at(40);
            let mut icrc = Icrc::from_register(crc32_le(icrc.register(), head));
            icrc.update(&payload[..100]);
            let icrc = Icrc::from_register(crc32_le(icrc.register(), &payload[100..]));
            assert_eq!(icrc.finish(), whole(&ip, &packet).unwrap());
        }
    }

    #[test]
    fn word_by_word_matches_bytes() {
        let data: Vec<u8> = (0..203u32).map(|i| (i * 89 + 7) as u8).collect();
        for lead in 0..8 {
            let mut bytes = Crc32::new();
            bytes.update(&data);
            // Bytes up to `lead`, then words, then the tail, as a reader of
            // shared memory hands them on.
            let mut words = Crc32::new();
            words.update(&data[..lead]);
            let mut chunks = data[lead..].chunks_exact(8);
            for chunk in &mut chunks {
                words.update_word(u64::from_le_bytes(chunk.try_into().unwrap()));
            }
            words.update(chunks.remainder());
            assert_eq!(words.finish(), bytes.finish(), "lead {lead}");
        }
    }

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
