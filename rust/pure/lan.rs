// SPDX-License-Identifier: GPL-2.0

//! iblan's pure logic (seed 003): MAC addresses that embed a LID, the name
//! service's announcement, the fragment header, segmentation of a frame to
//! the path MTU and bounded reassembly.
//!
//! Everything here parses untrusted bytes from the fabric: no length,
//! index or offset is used before it is checked.

use core::ops::DerefMut;

/// The default vendor ID: locally administered, unicast.
pub const DEFAULT_VENDOR: [u8; 3] = [0x02, 0x00, 0x00];
/// The unicast LID range (InfiniBand: 0xC000 and up are multicast).
pub const LID_MIN: u16 = 0x0001;
/// See [`LID_MIN`].
pub const LID_MAX: u16 = 0xbfff;
/// The largest frame: MTU 9000, the Ethernet header and one VLAN tag.
pub const MAX_FRAME_LEN: usize = 9000 + 14 + 4;
/// The most fragments one frame is cut into.
pub const MAX_FRAGMENTS: usize = 64;
/// The fragment header's length.
pub const FRAG_HEADER_LEN: usize = 8;
/// An announcement's length.
pub const ANNOUNCE_LEN: usize = 48;
/// How many LANs an RDMA port can be in: the MAC's LAN byte.
pub const LAN_COUNT: usize = u8::MAX as usize + 1;
/// How long a reassembly may stay open.
pub const REASSEMBLY_TIMEOUT_MS: u64 = 100;

const FRAGMENT_KIND: u8 = 0x01;
const MAGIC: [u8; 4] = *b"IBLN";
const VERSION: u8 = 1;
const FLAG_LEAVING: u8 = 0x01;
const FLAG_PROBE: u8 = 0x02;

/// The MAC address of `lid` on LAN `lan` (seed FIG. 2).
pub fn mac_for(vendor: [u8; 3], lan: u8, lid: u16) -> [u8; 6] {
    let [hi, lo] = lid.to_be_bytes();
    [vendor[0], vendor[1], vendor[2], lan, hi, lo]
}

/// What a destination MAC address means on a LAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacKind {
    /// A node of this LAN.
    Unicast {
        /// Its LID.
        lid: u16,
    },
    /// All ones.
    Broadcast,
    /// The I/G bit is set.
    Multicast,
    /// Unicast outside this LAN (another vendor ID, LAN or LID range).
    Foreign,
}

/// Classifies `mac` for the LAN `vendor`/`lan`.
pub fn classify_mac(mac: &[u8; 6], vendor: [u8; 3], lan: u8) -> MacKind {
    if *mac == [0xff; 6] {
        return MacKind::Broadcast;
    }
    if mac[0] & 1 != 0 {
        return MacKind::Multicast;
    }
    let lid = u16::from_be_bytes([mac[4], mac[5]]);
    if mac[..3] != vendor || mac[3] != lan || !(LID_MIN..=LID_MAX).contains(&lid) {
        return MacKind::Foreign;
    }
    MacKind::Unicast { lid }
}

/// Why an address cannot be a node's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressError {
    /// Broadcast or multicast (`EADDRNOTAVAIL`).
    Multicast,
    /// Another vendor ID or LAN index (`EINVAL`).
    WrongVendorOrLan,
    /// The LID is not a unicast LID (`EADDRNOTAVAIL`).
    LidOutOfRange,
}

impl AddressError {
    /// Whether the errno is `EINVAL` (else `EADDRNOTAVAIL`).
    pub fn is_invalid_argument(self) -> bool {
        self == Self::WrongVendorOrLan
    }
}

/// The LID of a new address a user sets for this node.
pub fn check_new_address(mac: &[u8; 6], vendor: [u8; 3], lan: u8) -> Result<u16, AddressError> {
    if mac[0] & 1 != 0 {
        return Err(AddressError::Multicast);
    }
    if mac[..3] != vendor || mac[3] != lan {
        return Err(AddressError::WrongVendorOrLan);
    }
    let lid = u16::from_be_bytes([mac[4], mac[5]]);
    if !(LID_MIN..=LID_MAX).contains(&lid) {
        return Err(AddressError::LidOutOfRange);
    }
    Ok(lid)
}

/// Why `ip link add ... address MAC type iblan` cannot make a LAN port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildAddressError {
    /// Broadcast or multicast (`EADDRNOTAVAIL`).
    Multicast,
    /// Bytes 0-2 are not the module's vendor ID (`EINVAL`).
    WrongVendor,
    /// Bytes 4-5 are not a unicast LID (`EADDRNOTAVAIL`).
    LidOutOfRange,
    /// The RDMA port has a netdev in this LAN already (`EBUSY`).
    LanInUse(u8),
}

/// The LAN index and LID a new LAN port's address asks for (seed FIG. 2:
/// vendor ID, LAN index, LID); `lan_in_use` says which LANs the RDMA port
/// has already: one netdev per LAN and port.
pub fn check_child_address(
    mac: &[u8; 6],
    vendor: [u8; 3],
    lan_in_use: impl Fn(u8) -> bool,
) -> Result<(u8, u16), ChildAddressError> {
    if mac[0] & 1 != 0 {
        return Err(ChildAddressError::Multicast);
    }
    if mac[..3] != vendor {
        return Err(ChildAddressError::WrongVendor);
    }
    let lid = u16::from_be_bytes([mac[4], mac[5]]);
    if !(LID_MIN..=LID_MAX).contains(&lid) {
        return Err(ChildAddressError::LidOutOfRange);
    }
    let lan = mac[3];
    if lan_in_use(lan) {
        return Err(ChildAddressError::LanInUse(lan));
    }
    Ok((lan, lid))
}

/// The lowest LAN index the RDMA port has no netdev in, for a LAN port
/// created without an address; `None` when all 256 are taken.
pub fn next_free_lan(lan_in_use: impl Fn(u8) -> bool) -> Option<u8> {
    (0..=u8::MAX).find(|lan| !lan_in_use(*lan))
}

/// A RoCE node's first LID, derived from its GID so that it is stable
/// across restarts and unlikely to collide (FNV-1a).
pub fn initial_lid(gid: &[u8; 16]) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in gid {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let span = u32::from(LID_MAX - LID_MIN) + 1;
    // Fits: the remainder is below `span`, at most 0xbfff.
    LID_MIN + ((hash ^ (hash >> 16)) % span) as u16
}

/// The first LID after `after` (wrapping within the unicast range, never
/// `after` itself) that `in_use` does not claim.
pub fn next_free_lid(after: u16, in_use: impl Fn(u16) -> bool) -> Option<u16> {
    let mut lid = after;
    for _ in 0..(LID_MAX - LID_MIN) {
        lid = if (LID_MIN..LID_MAX).contains(&lid) {
            lid + 1
        } else {
            LID_MIN
        };
        if lid != after && !in_use(lid) {
            return Some(lid);
        }
    }
    None
}

/// Whether this node keeps a LID another node also announces: the lower
/// node GUID keeps it, the same way on every node.
pub fn keeps_lid(our_guid: u64, their_guid: u64) -> bool {
    our_guid <= their_guid
}

/// Why a datagram is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than its header, or not the exact length of its kind.
    Length,
    /// Neither a fragment nor an announcement.
    Kind,
    /// An announcement of another version.
    Version,
    /// Reserved bits or bytes set.
    Reserved,
    /// A LID outside the unicast range.
    Lid,
    /// A QPN that cannot be a UD data QP.
    Qpn,
    /// Fragment index or count out of range.
    Fragment,
    /// Offset and length beyond the largest frame.
    Offset,
}

/// A node's announcement on the LAN's group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announcement {
    /// The node leaves the LAN.
    pub leaving: bool,
    /// A node about to join asks the LAN's members to announce themselves
    /// now, to learn whether a LID is taken. A probe claims nothing: its
    /// LID is the one asked about, and receivers neither add its sender
    /// nor weigh its LID against theirs.
    pub probe: bool,
    /// The LAN index.
    pub lan: u8,
    /// The node's LID.
    pub lid: u16,
    /// Its data QP.
    pub qpn: u32,
    /// Its Q_Key.
    pub qkey: u32,
    /// Its node GUID.
    pub node_guid: u64,
    /// The GID it sends from.
    pub gid: [u8; 16],
    /// Increases with every announcement.
    pub sequence: u32,
}

impl Announcement {
    /// The datagram.
    pub fn encode(&self) -> [u8; ANNOUNCE_LEN] {
        let mut out = [0u8; ANNOUNCE_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = VERSION;
        out[5] =
            if self.leaving { FLAG_LEAVING } else { 0 } | if self.probe { FLAG_PROBE } else { 0 };
        out[6] = self.lan;
        out[8..10].copy_from_slice(&self.lid.to_be_bytes());
        out[10..14].copy_from_slice(&self.qpn.to_be_bytes());
        out[14..18].copy_from_slice(&self.qkey.to_be_bytes());
        out[18..26].copy_from_slice(&self.node_guid.to_be_bytes());
        out[26..42].copy_from_slice(&self.gid);
        out[42..46].copy_from_slice(&self.sequence.to_be_bytes());
        out
    }

    /// Parses exactly one announcement; anything else is an error.
    pub fn parse(bytes: &[u8]) -> Result<Self, ParseError> {
        let b: &[u8; ANNOUNCE_LEN] = bytes.try_into().map_err(|_| ParseError::Length)?;
        if b[0..4] != MAGIC {
            return Err(ParseError::Kind);
        }
        if b[4] != VERSION {
            return Err(ParseError::Version);
        }
        if b[5] & !(FLAG_LEAVING | FLAG_PROBE) != 0 || b[7] != 0 || b[46] != 0 || b[47] != 0 {
            return Err(ParseError::Reserved);
        }
        let lid = u16::from_be_bytes([b[8], b[9]]);
        if !(LID_MIN..=LID_MAX).contains(&lid) {
            return Err(ParseError::Lid);
        }
        let qpn = u32::from_be_bytes([b[10], b[11], b[12], b[13]]);
        if !(2..1 << 24).contains(&qpn) {
            return Err(ParseError::Qpn);
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[26..42]);
        Ok(Self {
            leaving: b[5] & FLAG_LEAVING != 0,
            probe: b[5] & FLAG_PROBE != 0,
            lan: b[6],
            lid,
            qpn,
            qkey: u32::from_be_bytes([b[14], b[15], b[16], b[17]]),
            node_guid: u64::from_be_bytes([b[18], b[19], b[20], b[21], b[22], b[23], b[24], b[25]]),
            gid,
            sequence: u32::from_be_bytes([b[42], b[43], b[44], b[45]]),
        })
    }
}

/// The header in front of every piece of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentHeader {
    /// This fragment's index.
    pub index: u8,
    /// How many fragments the frame has.
    pub count: u8,
    /// The sender's frame number.
    pub frame: u16,
    /// Where this fragment's bytes go in the frame.
    pub offset: u16,
}

impl FragmentHeader {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; FRAG_HEADER_LEN] {
        let [f0, f1] = self.frame.to_be_bytes();
        let [o0, o1] = self.offset.to_be_bytes();
        [FRAGMENT_KIND, self.index, self.count, 0, f0, f1, o0, o1]
    }
}

/// A datagram of the LAN.
#[derive(Debug, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// A piece of a frame (or a whole one).
    Fragment {
        /// Its header, checked.
        header: FragmentHeader,
        /// Its bytes.
        payload: &'a [u8],
    },
    /// A name service announcement.
    Announcement(Announcement),
}

/// Parses a received datagram.
pub fn classify_datagram(bytes: &[u8]) -> Result<Datagram<'_>, ParseError> {
    match bytes.first() {
        Some(&FRAGMENT_KIND) => {
            let (head, payload) =
                super::split_checked(bytes, FRAG_HEADER_LEN).ok_or(ParseError::Length)?;
            let h: &[u8; FRAG_HEADER_LEN] = head.try_into().map_err(|_| ParseError::Length)?;
            if h[3] != 0 {
                return Err(ParseError::Reserved);
            }
            let header = FragmentHeader {
                index: h[1],
                count: h[2],
                frame: u16::from_be_bytes([h[4], h[5]]),
                offset: u16::from_be_bytes([h[6], h[7]]),
            };
            if header.count == 0
                || usize::from(header.count) > MAX_FRAGMENTS
                || header.index >= header.count
            {
                return Err(ParseError::Fragment);
            }
            if payload.is_empty() {
                return Err(ParseError::Length);
            }
            if usize::from(header.offset) + payload.len() > MAX_FRAME_LEN
                || (header.count == 1 && header.offset != 0)
            {
                return Err(ParseError::Offset);
            }
            Ok(Datagram::Fragment { header, payload })
        }
        Some(&b'I') => Announcement::parse(bytes).map(Datagram::Announcement),
        Some(_) => Err(ParseError::Kind),
        None => Err(ParseError::Length),
    }
}

/// Why a frame cannot be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentError {
    /// Empty or larger than [`MAX_FRAME_LEN`].
    FrameLength,
    /// The datagram has no room for a header and a byte.
    DatagramTooSmall,
    /// More than [`MAX_FRAGMENTS`] fragments.
    TooManyFragments,
}

/// How a frame is cut into datagrams.
#[derive(Clone, Copy, Debug)]
pub struct FragmentPlan {
    frame_len: usize,
    chunk: usize,
    count: usize,
}

impl FragmentPlan {
    /// Cuts a `frame_len` frame into datagrams of at most `datagram_len`
    /// bytes, header included.
    pub fn new(frame_len: usize, datagram_len: usize) -> Result<Self, SegmentError> {
        if frame_len == 0 || frame_len > MAX_FRAME_LEN {
            return Err(SegmentError::FrameLength);
        }
        let chunk = datagram_len
            .checked_sub(FRAG_HEADER_LEN)
            .filter(|c| *c > 0)
            .ok_or(SegmentError::DatagramTooSmall)?;
        let count = frame_len.div_ceil(chunk);
        if count > MAX_FRAGMENTS {
            return Err(SegmentError::TooManyFragments);
        }
        Ok(Self {
            frame_len,
            chunk,
            count,
        })
    }

    /// The number of fragments.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Offset and length of fragment `index`.
    pub fn fragment(&self, index: usize) -> Option<(usize, usize)> {
        if index >= self.count {
            return None;
        }
        let offset = index * self.chunk;
        Some((offset, self.chunk.min(self.frame_len - offset)))
    }

    /// The header of fragment `index` of frame number `frame`.
    pub fn header(&self, index: usize, frame: u16) -> Option<FragmentHeader> {
        let (offset, _) = self.fragment(index)?;
        Some(FragmentHeader {
            index: u8::try_from(index).ok()?,
            count: u8::try_from(self.count).ok()?,
            frame,
            offset: u16::try_from(offset).ok()?,
        })
    }
}

/// Why a reassembly was abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A fragment came twice.
    Duplicate,
    /// Fragments disagree (count, lengths, offsets).
    Inconsistent,
}

/// What the caller of [`Reassembler::accept`] does with a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A whole frame in one fragment: deliver its payload.
    Deliver,
    /// Copy the payload at `offset` into the buffer of `slot`. When
    /// `evicted` names a slot, the oldest reassembly was abandoned to make
    /// room (its buffer is `slot` itself, reused).
    Copy {
        /// The reassembly's buffer.
        slot: usize,
        /// Where the payload goes.
        offset: usize,
        /// The first fragment of this frame.
        fresh: bool,
        /// An abandoned reassembly whose slot this is now.
        evicted: Option<usize>,
    },
    /// Copy the payload at `offset` into `slot`, then deliver the first
    /// `total_len` bytes of that buffer: the frame is complete, the slot
    /// free.
    Complete {
        /// The reassembly's buffer.
        slot: usize,
        /// Where the payload goes.
        offset: usize,
        /// The frame's length.
        total_len: usize,
    },
    /// The frame is abandoned; its slot (if it had one) is free.
    Drop {
        /// Why.
        reason: DropReason,
        /// The freed slot.
        freed_slot: Option<usize>,
    },
}

/// One reassembly's state: storage for [`Reassembler`], which the caller
/// allocates (the kernel on the heap: 64 of them do not belong on a stack).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReassemblySlot {
    open: bool,
    sender: u16,
    frame: u16,
    count: u8,
    received: u64,
    /// Length of the non-last fragments, once one arrived (0: unknown).
    chunk: usize,
    /// Offset and length of the last fragment, once it arrived.
    last: Option<(usize, usize)>,
    started_ms: u64,
}

impl ReassemblySlot {
    /// A slot with no reassembly open.
    pub const CLOSED: Self = Self {
        open: false,
        sender: 0,
        frame: 0,
        count: 0,
        received: 0,
        chunk: 0,
        last: None,
        started_ms: 0,
    };
}

/// Open reassemblies, at most one per slot of `S`, keyed by (sender,
/// frame number).
pub struct Reassembler<S> {
    slots: S,
}

impl<S: DerefMut<Target = [ReassemblySlot]>> Reassembler<S> {
    /// No reassembly open, in `slots` (whatever they held).
    pub fn new(mut slots: S) -> Self {
        slots.fill(ReassemblySlot::CLOSED);
        Self { slots }
    }

    /// Abandons reassemblies open longer than the timeout.
    pub fn expire(&mut self, now_ms: u64, mut on_expired: impl FnMut(usize)) {
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if slot.open && now_ms.saturating_sub(slot.started_ms) > REASSEMBLY_TIMEOUT_MS {
                slot.open = false;
                on_expired(index);
            }
        }
    }

    /// How many reassemblies are open.
    pub fn open(&self) -> usize {
        self.slots.iter().filter(|s| s.open).count()
    }

    /// Takes one checked fragment (from [`classify_datagram`]) of `sender`.
    pub fn accept(
        &mut self,
        sender: u16,
        header: &FragmentHeader,
        payload_len: usize,
        now_ms: u64,
    ) -> Step {
        let offset = usize::from(header.offset);
        let index = usize::from(header.index);
        let count = usize::from(header.count);
        if count == 1 {
            return Step::Deliver;
        }
        if count > MAX_FRAGMENTS || index >= count || offset + payload_len > MAX_FRAME_LEN {
            return Step::Drop {
                reason: DropReason::Inconsistent,
                freed_slot: None,
            };
        }
        let found = self
            .slots
            .iter()
            .position(|s| s.open && s.sender == sender && s.frame == header.frame);
        let (at, fresh, evicted) = match found {
            Some(at) => (at, false, None),
            None => {
                let (at, evicted) = match self.slots.iter().position(|s| !s.open) {
                    Some(at) => (at, None),
                    None => {
                        let Some(oldest) = self
                            .slots
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, s)| s.started_ms)
                            .map(|(i, _)| i)
                        else {
                            return Step::Drop {
                                reason: DropReason::Inconsistent,
                                freed_slot: None,
                            };
                        };
                        (oldest, Some(oldest))
                    }
                };
                let Some(slot) = self.slots.get_mut(at) else {
                    return Step::Drop {
                        reason: DropReason::Inconsistent,
                        freed_slot: None,
                    };
                };
                *slot = ReassemblySlot {
                    open: true,
                    sender,
                    frame: header.frame,
                    count: header.count,
                    started_ms: now_ms,
                    ..ReassemblySlot::CLOSED
                };
                (at, true, evicted)
            }
        };
        let Some(slot) = self.slots.get_mut(at) else {
            return Step::Drop {
                reason: DropReason::Inconsistent,
                freed_slot: None,
            };
        };
        let abandon = |slot: &mut ReassemblySlot, reason| {
            slot.open = false;
            Step::Drop {
                reason,
                freed_slot: Some(at),
            }
        };
        if slot.count != header.count {
            return abandon(slot, DropReason::Inconsistent);
        }
        let bit = 1u64 << index;
        if slot.received & bit != 0 {
            return abandon(slot, DropReason::Duplicate);
        }
        let is_last = index + 1 == count;
        if is_last {
            slot.last = Some((offset, payload_len));
        } else {
            if slot.chunk != 0 && slot.chunk != payload_len {
                return abandon(slot, DropReason::Inconsistent);
            }
            slot.chunk = payload_len;
            if offset != index * payload_len {
                return abandon(slot, DropReason::Inconsistent);
            }
        }
        // Once both are known, the last fragment must sit right after the
        // others, and shorter or as long as them.
        if let (Some((last_offset, last_len)), chunk) = (slot.last, slot.chunk) {
            if chunk != 0 && (last_offset != (count - 1) * chunk || last_len > chunk) {
                return abandon(slot, DropReason::Inconsistent);
            }
        }
        slot.received |= bit;
        let all = if count == 64 {
            u64::MAX
        } else {
            (1u64 << count) - 1
        };
        if slot.received == all {
            let total_len = match slot.last {
                Some((last_offset, last_len)) => last_offset + last_len,
                None => return abandon(slot, DropReason::Inconsistent),
            };
            slot.open = false;
            return Step::Complete {
                slot: at,
                offset,
                total_len,
            };
        }
        Step::Copy {
            slot: at,
            offset,
            fresh,
            evicted,
        }
    }
}
