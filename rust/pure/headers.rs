// SPDX-License-Identifier: GPL-2.0

//! InfiniBand transport headers as RoCEv2 carries them (IBTA vol. 1,
//! chapter 9; RoCEv2 annex A17): the base transport header (BTH), the
//! extended headers (RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH,
//! DETH, and IBA 1.5's FETH), and the opcode table that says which of them each opcode carries.
//!
//! Parsing reads only what the slice holds and trusts nothing: an unknown
//! opcode, a short packet or a pad count longer than the payload is an
//! error, never a panic or a read past the end.

/// Bytes of each header.
pub const BTH_LEN: usize = 12;
/// RDMA extended transport header.
pub const RETH_LEN: usize = 16;
/// ACK extended transport header.
pub const AETH_LEN: usize = 4;
/// Atomic extended transport header.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Atomic acknowledge extended transport header.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Immediate data.
pub const IMM_LEN: usize = 4;
/// Invalidate extended transport header.
pub const IETH_LEN: usize = 4;
/// Datagram extended transport header.
pub const DETH_LEN: usize = 8;
/// FLUSH extended transport header.
pub const FETH_LEN: usize = 4;
/// The invariant CRC that ends every packet.
pub const ICRC_LEN: usize = 4;

/// The default partition's key, full member: the only entry of a port's
/// P_Key table (RoCE has no subnet manager to hand out others).
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Whether a packet carrying P_Key `theirs` may enter a QP of partition
/// `ours` (IBTA 10.9.3): the same partition, not the invalid one, and not
/// both limited members.
pub const fn pkey_matches(theirs: u16, ours: u16) -> bool {
    const MEMBER_FULL: u16 = 0x8000;
    const PARTITION: u16 = 0x7fff;
    theirs & PARTITION == ours & PARTITION
        && theirs & PARTITION != 0
        && (theirs | ours) & MEMBER_FULL != 0
}

/// Why a packet cannot be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than its headers and ICRC.
    Truncated,
    /// An opcode srnic does not know.
    UnknownOpcode,
    /// The pad count is more than the payload.
    BadPad,
    /// A transport header version other than 0.
    BadVersion,
}

/// The transport an opcode belongs to (its top three bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connection.
    Rc,
    /// Unreliable connection.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// Extended headers, as bits of [`OpcodeInfo::headers`]; on the wire
/// FETH comes first, then the others in bit order.
pub mod hdr {
    /// RDMA extended transport header.
    pub const RETH: u8 = 1 << 0;
    /// Datagram extended transport header.
    pub const DETH: u8 = 1 << 1;
    /// Atomic extended transport header.
    pub const ATOMIC_ETH: u8 = 1 << 2;
    /// ACK extended transport header.
    pub const AETH: u8 = 1 << 3;
    /// Atomic acknowledge extended transport header.
    pub const ATOMIC_ACK_ETH: u8 = 1 << 4;
    /// Immediate data.
    pub const IMM: u8 = 1 << 5;
    /// Invalidate extended transport header.
    pub const IETH: u8 = 1 << 6;
    /// FLUSH extended transport header (before the RETH).
    pub const FETH: u8 = 1 << 7;
}

/// Where a packet stands in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// First of several.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several.
    Last,
    /// The whole message.
    Only,
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// SEND (with or without immediate or invalidate).
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// ACK or NAK.
    Acknowledge,
    /// Atomic acknowledge.
    AtomicAcknowledge,
    /// Compare and swap.
    CompareSwap,
    /// Fetch and add.
    FetchAdd,
    /// RDMA ATOMIC WRITE: eight bytes stored at once (answered like a
    /// zero-length READ).
    AtomicWrite,
    /// RDMA FLUSH: makes the writes before it visible or persistent
    /// (answered like a zero-length READ).
    Flush,
}

/// What an opcode carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode byte.
    pub opcode: u8,
    /// Its transport.
    pub transport: Transport,
    /// The operation.
    pub operation: Operation,
    /// The packet's place in its message.
    pub position: Position,
    /// The extended headers, [`hdr`] bits.
    pub headers: u8,
    /// Whether a payload may follow the headers.
    pub payload: bool,
}

impl OpcodeInfo {
    /// Bytes of the BTH and extended headers.
    pub const fn header_len(&self) -> usize {
        let h = self.headers;
        let mut len = BTH_LEN;
        if h & hdr::FETH != 0 {
            len += FETH_LEN;
        }
        if h & hdr::RETH != 0 {
            len += RETH_LEN;
        }
        if h & hdr::DETH != 0 {
            len += DETH_LEN;
        }
        if h & hdr::ATOMIC_ETH != 0 {
            len += ATOMIC_ETH_LEN;
        }
        if h & hdr::AETH != 0 {
            len += AETH_LEN;
        }
        if h & hdr::ATOMIC_ACK_ETH != 0 {
            len += ATOMIC_ACK_ETH_LEN;
        }
        if h & hdr::IMM != 0 {
            len += IMM_LEN;
        }
        if h & hdr::IETH != 0 {
            len += IETH_LEN;
        }
        len
    }

    /// Whether the message ends with this packet.
    pub const fn ends_message(&self) -> bool {
        matches!(self.position, Position::Last | Position::Only)
    }

    /// Whether this is the first or a middle packet of a message of
    /// several with payload (a SEND, WRITE or READ response on a
    /// connection), where more of the message follows.
    pub const fn continues_message(&self) -> bool {
        matches!(self.position, Position::First | Position::Middle)
            && matches!(
                self.operation,
                Operation::Send | Operation::Write | Operation::ReadResponse
            )
    }
}

const fn op(
    opcode: u8,
    transport: Transport,
    operation: Operation,
    position: Position,
    headers: u8,
    payload: bool,
) -> OpcodeInfo {
    OpcodeInfo {
        opcode,
        transport,
        operation,
        position,
        headers,
        payload,
    }
}

/// Every opcode srnic sends or accepts, named once (IBA table 35 and the
/// IBA 1.5 additions), as the kernel's `ib_pack.h` names them without its
/// `IB_OPCODE_` prefix; the table below and the drivers use these, and the
/// drivers check them against the kernel's values when they are built.
pub mod opcode {
    /// RC send first.
    pub const RC_SEND_FIRST: u8 = 0x00;
    /// RC send middle.
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    /// RC send last.
    pub const RC_SEND_LAST: u8 = 0x02;
    /// RC send last with immediate.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    /// RC send only.
    pub const RC_SEND_ONLY: u8 = 0x04;
    /// RC send only with immediate.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    /// RC rdma write first.
    pub const RC_RDMA_WRITE_FIRST: u8 = 0x06;
    /// RC rdma write middle.
    pub const RC_RDMA_WRITE_MIDDLE: u8 = 0x07;
    /// RC rdma write last.
    pub const RC_RDMA_WRITE_LAST: u8 = 0x08;
    /// RC rdma write last with immediate.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    /// RC rdma write only.
    pub const RC_RDMA_WRITE_ONLY: u8 = 0x0a;
    /// RC rdma write only with immediate.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0b;
    /// UC send first.
    pub const UC_SEND_FIRST: u8 = 0x20;
    /// UC send middle.
    pub const UC_SEND_MIDDLE: u8 = 0x21;
    /// UC send last.
    pub const UC_SEND_LAST: u8 = 0x22;
    /// UC send last with immediate.
    pub const UC_SEND_LAST_WITH_IMMEDIATE: u8 = 0x23;
    /// UC send only.
    pub const UC_SEND_ONLY: u8 = 0x24;
    /// UC send only with immediate.
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x25;
    /// UC rdma write first.
    pub const UC_RDMA_WRITE_FIRST: u8 = 0x26;
    /// UC rdma write middle.
    pub const UC_RDMA_WRITE_MIDDLE: u8 = 0x27;
    /// UC rdma write last.
    pub const UC_RDMA_WRITE_LAST: u8 = 0x28;
    /// UC rdma write last with immediate.
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x29;
    /// UC rdma write only.
    pub const UC_RDMA_WRITE_ONLY: u8 = 0x2a;
    /// UC rdma write only with immediate.
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x2b;
    /// RC rdma read request.
    pub const RC_RDMA_READ_REQUEST: u8 = 0x0c;
    /// RC rdma read response first.
    pub const RC_RDMA_READ_RESPONSE_FIRST: u8 = 0x0d;
    /// RC rdma read response middle.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    /// RC rdma read response last.
    pub const RC_RDMA_READ_RESPONSE_LAST: u8 = 0x0f;
    /// RC rdma read response only.
    pub const RC_RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    /// RC acknowledge.
    pub const RC_ACKNOWLEDGE: u8 = 0x11;
    /// RC atomic acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    /// RC compare swap.
    pub const RC_COMPARE_SWAP: u8 = 0x13;
    /// RC fetch add.
    pub const RC_FETCH_ADD: u8 = 0x14;
    /// RC send last with invalidate.
    pub const RC_SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    /// RC send only with invalidate.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    /// RC flush.
    pub const RC_FLUSH: u8 = 0x1c;
    /// RC atomic write.
    pub const RC_ATOMIC_WRITE: u8 = 0x1d;
    /// UD send only.
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// UD send only with immediate.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x65;
}

use Operation::*;
use Position::*;
use Transport::*;

/// The operations of one connected transport, at its opcode base.
macro_rules! connected {
    ($base:expr, $t:expr) => {
        [
            op($base, $t, Send, First, 0, true),
            op($base | 0x01, $t, Send, Middle, 0, true),
            op($base | 0x02, $t, Send, Last, 0, true),
            op($base | 0x03, $t, Send, Last, hdr::IMM, true),
            op($base | 0x04, $t, Send, Only, 0, true),
            op($base | 0x05, $t, Send, Only, hdr::IMM, true),
            op($base | 0x06, $t, Write, First, hdr::RETH, true),
            op($base | 0x07, $t, Write, Middle, 0, true),
            op($base | 0x08, $t, Write, Last, 0, true),
            op($base | 0x09, $t, Write, Last, hdr::IMM, true),
            op($base | 0x0a, $t, Write, Only, hdr::RETH, true),
            op($base | 0x0b, $t, Write, Only, hdr::RETH | hdr::IMM, true),
        ]
    };
}

const RC_COMMON: [OpcodeInfo; 12] = connected!(opcode::RC_SEND_FIRST, Rc);
const UC_COMMON: [OpcodeInfo; 12] = connected!(opcode::UC_SEND_FIRST, Uc);
const RC_ONLY: [OpcodeInfo; 10] = [
    op(
        opcode::RC_RDMA_READ_REQUEST,
        Rc,
        ReadRequest,
        Only,
        hdr::RETH,
        false,
    ),
    op(
        opcode::RC_RDMA_READ_RESPONSE_FIRST,
        Rc,
        ReadResponse,
        First,
        hdr::AETH,
        true,
    ),
    op(
        opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        Rc,
        ReadResponse,
        Middle,
        0,
        true,
    ),
    op(
        opcode::RC_RDMA_READ_RESPONSE_LAST,
        Rc,
        ReadResponse,
        Last,
        hdr::AETH,
        true,
    ),
    op(
        opcode::RC_RDMA_READ_RESPONSE_ONLY,
        Rc,
        ReadResponse,
        Only,
        hdr::AETH,
        true,
    ),
    op(
        opcode::RC_ACKNOWLEDGE,
        Rc,
        Acknowledge,
        Only,
        hdr::AETH,
        false,
    ),
    op(
        opcode::RC_ATOMIC_ACKNOWLEDGE,
        Rc,
        AtomicAcknowledge,
        Only,
        hdr::AETH | hdr::ATOMIC_ACK_ETH,
        false,
    ),
    op(
        opcode::RC_COMPARE_SWAP,
        Rc,
        CompareSwap,
        Only,
        hdr::ATOMIC_ETH,
        false,
    ),
    op(
        opcode::RC_FETCH_ADD,
        Rc,
        FetchAdd,
        Only,
        hdr::ATOMIC_ETH,
        false,
    ),
    op(
        opcode::RC_SEND_LAST_WITH_INVALIDATE,
        Rc,
        Send,
        Last,
        hdr::IETH,
        true,
    ),
];
const RC_SEND_ONLY_INV: OpcodeInfo = op(
    opcode::RC_SEND_ONLY_WITH_INVALIDATE,
    Rc,
    Send,
    Only,
    hdr::IETH,
    true,
);
const RC_ATOMIC_WRITE: OpcodeInfo = op(
    opcode::RC_ATOMIC_WRITE,
    Rc,
    AtomicWrite,
    Only,
    hdr::RETH,
    true,
);
const RC_FLUSH: OpcodeInfo = op(
    opcode::RC_FLUSH,
    Rc,
    Flush,
    Only,
    hdr::FETH | hdr::RETH,
    false,
);
const UD_OPS: [OpcodeInfo; 2] = [
    op(opcode::UD_SEND_ONLY, Ud, Send, Only, hdr::DETH, true),
    op(
        opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
        Ud,
        Send,
        Only,
        hdr::DETH | hdr::IMM,
        true,
    ),
];

/// What `opcode` carries, if srnic knows it.
pub fn opcode_info(opcode: u8) -> Option<OpcodeInfo> {
    let low = (opcode & 0x1f) as usize;
    match opcode >> 5 {
        0 if low < 12 => RC_COMMON.get(low).copied(),
        0 if opcode == RC_SEND_ONLY_INV.opcode => Some(RC_SEND_ONLY_INV),
        0 if opcode == RC_ATOMIC_WRITE.opcode => Some(RC_ATOMIC_WRITE),
        0 if opcode == RC_FLUSH.opcode => Some(RC_FLUSH),
        0 => RC_ONLY.iter().find(|o| o.opcode == opcode).copied(),
        1 => UC_COMMON.get(low).copied(),
        3 => UD_OPS.iter().find(|o| o.opcode == opcode).copied(),
        _ => None,
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    let mut v = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        v.copy_from_slice(s);
    }
    u16::from_be_bytes(v)
}

fn be32(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        v.copy_from_slice(s);
    }
    u32::from_be_bytes(v)
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    u64::from_be_bytes(v)
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = out.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// The base transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bth {
    /// Opcode.
    pub opcode: u8,
    /// Solicited event.
    pub solicited: bool,
    /// Migration state.
    pub migreq: bool,
    /// Pad bytes after the payload (0 to 3).
    pub pad: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// Acknowledge requested.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Parses the first [`BTH_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<Self, ParseError> {
        if b.len() < BTH_LEN {
            return Err(ParseError::Truncated);
        }
        let flags = b.get(1).copied().unwrap_or(0);
        if flags & 0x0f != 0 {
            return Err(ParseError::BadVersion);
        }
        let fb = b.get(4).copied().unwrap_or(0);
        Ok(Self {
            opcode: b.first().copied().unwrap_or(0),
            solicited: flags & 0x80 != 0,
            migreq: flags & 0x40 != 0,
            pad: (flags >> 4) & 0x3,
            pkey: be16(b, 2),
            fecn: fb & 0x80 != 0,
            becn: fb & 0x40 != 0,
            dest_qp: be32(b, 4) & 0x00ff_ffff,
            ack_req: b.get(8).copied().unwrap_or(0) & 0x80 != 0,
            psn: be32(b, 8) & 0x00ff_ffff,
        })
    }

    /// Writes the header into the first [`BTH_LEN`] bytes of `out`.
    pub fn write(&self, out: &mut [u8]) {
        let flags = (u8::from(self.solicited) << 7)
            | (u8::from(self.migreq) << 6)
            | ((self.pad & 0x3) << 4);
        let fb = (u32::from(self.fecn) << 31) | (u32::from(self.becn) << 30);
        put(out, 0, &[self.opcode, flags]);
        put(out, 2, &self.pkey.to_be_bytes());
        put(out, 4, &(fb | (self.dest_qp & 0x00ff_ffff)).to_be_bytes());
        let a = u32::from(self.ack_req) << 31;
        put(out, 8, &(a | (self.psn & 0x00ff_ffff)).to_be_bytes());
    }
}

/// The RDMA extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Bytes of the whole transfer.
    pub dma_len: u32,
}

impl Reth {
    fn parse(b: &[u8]) -> Self {
        Self {
            va: be64(b, 0),
            rkey: be32(b, 8),
            dma_len: be32(b, 12),
        }
    }

    /// Writes the header at the start of `out`.
    pub fn write(&self, out: &mut [u8]) {
        put(out, 0, &self.va.to_be_bytes());
        put(out, 8, &self.rkey.to_be_bytes());
        put(out, 12, &self.dma_len.to_be_bytes());
    }
}

/// The ACK extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    /// ACK, RNR NAK or NAK, with its credit count, timer or code.
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    fn parse(b: &[u8]) -> Self {
        let v = be32(b, 0);
        Self {
            syndrome: (v >> 24) as u8,
            msn: v & 0x00ff_ffff,
        }
    }

    /// Writes the header at the start of `out`.
    pub fn write(&self, out: &mut [u8]) {
        let v = (u32::from(self.syndrome) << 24) | (self.msn & 0x00ff_ffff);
        put(out, 0, &v.to_be_bytes());
    }
}

/// The atomic extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value, or the value to add.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl AtomicEth {
    fn parse(b: &[u8]) -> Self {
        Self {
            va: be64(b, 0),
            rkey: be32(b, 8),
            swap_add: be64(b, 12),
            compare: be64(b, 20),
        }
    }

    /// Writes the header at the start of `out`.
    pub fn write(&self, out: &mut [u8]) {
        put(out, 0, &self.va.to_be_bytes());
        put(out, 8, &self.rkey.to_be_bytes());
        put(out, 12, &self.swap_add.to_be_bytes());
        put(out, 20, &self.compare.to_be_bytes());
    }
}

/// FLUSH placement types (`enum ib_placement_type`), bits of
/// [`Feth::placement`].
pub mod placement {
    /// Visible to every later reader of the memory.
    pub const GLOBAL: u8 = 1 << 0;
    /// Persistent across a loss of power.
    pub const PERSISTENT: u8 = 1 << 1;
}

/// FLUSH selectivity levels (`enum ib_selectivity_level`).
pub mod selectivity {
    /// The range the RETH names.
    pub const RANGE: u8 = 0;
    /// The whole region the RETH's rkey names (its address and length are
    /// not looked at).
    pub const MEMORY_REGION: u8 = 1;
}

/// The FLUSH extended transport header: a 32-bit word whose bits 3-0 are
/// the placement type and bits 5-4 the selectivity level; the rest is
/// reserved (sent as zero, ignored on receipt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Feth {
    /// [`placement`] bits (4 bits).
    pub placement: u8,
    /// A [`selectivity`] level (2 bits).
    pub selectivity: u8,
}

impl Feth {
    const PLACEMENT_MASK: u32 = 0xf;
    const SELECTIVITY_SHIFT: u32 = 4;
    const SELECTIVITY_MASK: u32 = 0x3;

    /// Parses the first [`FETH_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Self {
        let v = be32(b, 0);
        Self {
            placement: (v & Self::PLACEMENT_MASK) as u8,
            selectivity: ((v >> Self::SELECTIVITY_SHIFT) & Self::SELECTIVITY_MASK) as u8,
        }
    }

    /// Writes the header at the start of `out`; bits beyond each field's
    /// width are dropped.
    pub fn write(&self, out: &mut [u8]) {
        let v = (u32::from(self.placement) & Self::PLACEMENT_MASK)
            | ((u32::from(self.selectivity) & Self::SELECTIVITY_MASK) << Self::SELECTIVITY_SHIFT);
        put(out, 0, &v.to_be_bytes());
    }
}

/// The datagram extended transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

impl Deth {
    fn parse(b: &[u8]) -> Self {
        Self {
            qkey: be32(b, 0),
            src_qp: be32(b, 4) & 0x00ff_ffff,
        }
    }

    /// Writes the header at the start of `out`.
    pub fn write(&self, out: &mut [u8]) {
        put(out, 0, &self.qkey.to_be_bytes());
        put(out, 4, &(self.src_qp & 0x00ff_ffff).to_be_bytes());
    }
}

/// A parsed packet: its headers and where its payload lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// What the opcode carries.
    pub info: OpcodeInfo,
    /// The base transport header.
    pub bth: Bth,
    /// RETH, if the opcode has one.
    pub reth: Option<Reth>,
    /// AETH, if the opcode has one.
    pub aeth: Option<Aeth>,
    /// AtomicETH, if the opcode has one.
    pub atomic: Option<AtomicEth>,
    /// The original remote data of an atomic acknowledge.
    pub atomic_ack: Option<u64>,
    /// Immediate data, in network order as the CQE carries it.
    pub imm: Option<u32>,
    /// The rkey to invalidate.
    pub ieth: Option<u32>,
    /// DETH, if the opcode has one.
    pub deth: Option<Deth>,
    /// FETH, if the opcode has one.
    pub feth: Option<Feth>,
    /// Offset of the payload in the packet.
    pub payload_offset: usize,
    /// Bytes of payload, without pad.
    pub payload_len: usize,
}

/// Parses a transport packet (from the BTH to the ICRC, inclusive).
pub fn parse(packet: &[u8]) -> Result<Packet, ParseError> {
    parse_head(packet, packet.len())
}

/// Parses a transport packet of `len` bytes (from the BTH to the ICRC,
/// inclusive) whose first bytes are `head`, for a packet whose payload
/// lies elsewhere (in page fragments): `head` must hold the headers its
/// opcode carries (`Truncated` if not); bytes after them are not read.
pub fn parse_head(head: &[u8], len: usize) -> Result<Packet, ParseError> {
    let bth = Bth::parse(head)?;
    let info = opcode_info(bth.opcode).ok_or(ParseError::UnknownOpcode)?;
    let header_len = info.header_len();
    let body = len
        .checked_sub(header_len + ICRC_LEN)
        .ok_or(ParseError::Truncated)?;
    let pad = usize::from(bth.pad);
    let payload_len = body.checked_sub(pad).ok_or(ParseError::BadPad)?;
    if !info.payload && body != 0 {
        return Err(ParseError::BadPad);
    }
    let packet = head.get(..header_len).ok_or(ParseError::Truncated)?;
    let mut at = BTH_LEN;
    let mut take = |flag: u8, len: usize| -> Option<&[u8]> {
        if info.headers & flag == 0 {
            return None;
        }
        let slice = packet.get(at..at + len);
        at += len;
        slice
    };
    let feth = take(hdr::FETH, FETH_LEN).map(Feth::parse);
    let reth = take(hdr::RETH, RETH_LEN).map(Reth::parse);
    let deth = take(hdr::DETH, DETH_LEN).map(Deth::parse);
    let atomic = take(hdr::ATOMIC_ETH, ATOMIC_ETH_LEN).map(AtomicEth::parse);
    let aeth = take(hdr::AETH, AETH_LEN).map(Aeth::parse);
    let atomic_ack = take(hdr::ATOMIC_ACK_ETH, ATOMIC_ACK_ETH_LEN).map(|b| be64(b, 0));
    let imm = take(hdr::IMM, IMM_LEN).map(|b| be32(b, 0).to_be());
    let ieth = take(hdr::IETH, IETH_LEN).map(|b| be32(b, 0));
    Ok(Packet {
        info,
        bth,
        reth,
        aeth,
        atomic,
        atomic_ack,
        imm,
        ieth,
        deth,
        feth,
        payload_offset: header_len,
        payload_len,
    })
}

/// Pad bytes that bring `payload_len` to a multiple of four.
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - (payload_len & 3)) & 3) as u8
}

/// Writes the BTH and the extended headers `p.info` says its opcode
/// carries, in wire order, from `p`'s fields (a missing one is written as
/// zeros); returns their length, or `None` if `out` is too short.
pub fn write_headers(p: &Packet, out: &mut [u8]) -> Option<usize> {
    let len = p.info.header_len();
    let out = out.get_mut(..len)?;
    out.fill(0);
    p.bth.write(out);
    let h = p.info.headers;
    let mut at = BTH_LEN;
    // The next header's bytes, if the opcode carries it (`len` counts
    // every header present, so the range is inside `out`).
    let mut take = |flag: u8, size: usize| -> Option<core::ops::Range<usize>> {
        if h & flag == 0 {
            return None;
        }
        let range = at..at + size;
        at += size;
        Some(range)
    };
    let feth = take(hdr::FETH, FETH_LEN);
    let reth = take(hdr::RETH, RETH_LEN);
    let deth = take(hdr::DETH, DETH_LEN);
    let atomic = take(hdr::ATOMIC_ETH, ATOMIC_ETH_LEN);
    let aeth = take(hdr::AETH, AETH_LEN);
    let atomic_ack = take(hdr::ATOMIC_ACK_ETH, ATOMIC_ACK_ETH_LEN);
    let imm = take(hdr::IMM, IMM_LEN);
    let ieth = take(hdr::IETH, IETH_LEN);
    if let Some(b) = feth.and_then(|r| out.get_mut(r)) {
        p.feth.unwrap_or_default().write(b);
    }
    if let Some(b) = reth.and_then(|r| out.get_mut(r)) {
        p.reth.unwrap_or_default().write(b);
    }
    if let Some(b) = deth.and_then(|r| out.get_mut(r)) {
        p.deth.unwrap_or_default().write(b);
    }
    if let Some(b) = atomic.and_then(|r| out.get_mut(r)) {
        p.atomic.unwrap_or_default().write(b);
    }
    if let Some(b) = aeth.and_then(|r| out.get_mut(r)) {
        p.aeth.unwrap_or_default().write(b);
    }
    if let Some(b) = atomic_ack.and_then(|r| out.get_mut(r)) {
        put(b, 0, &p.atomic_ack.unwrap_or(0).to_be_bytes());
    }
    if let Some(b) = imm.and_then(|r| out.get_mut(r)) {
        // Kept in network order: its bytes go out as they are.
        put(b, 0, &p.imm.unwrap_or(0).to_ne_bytes());
    }
    if let Some(b) = ieth.and_then(|r| out.get_mut(r)) {
        put(b, 0, &p.ieth.unwrap_or(0).to_be_bytes());
    }
    Some(len)
}
