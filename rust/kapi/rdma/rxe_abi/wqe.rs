// SPDX-License-Identifier: GPL-2.0

//! Work queue entries in the rxe layout (`struct rxe_send_wqe`,
//! `struct rxe_recv_wqe`, each followed by its scatter/gather list or inline
//! data), written from kernel work requests or copied out of user rings and
//! validated there.
//!
//! A send queue of a user QP has two rings of equal geometry: the one user
//! space writes, and a kernel copy that WQEs are moved into (once, then
//! validated) when the doorbell rings. Everything after the doorbell reads
//! only the copy.

use super::queue::Queue;
use crate::bindings;
use crate::kapi::rdma::udata::Pod;
use crate::kapi::rdma::verbs::AddressVector;
use crate::kapi::rdma::wr::{RecvWr, SendWr};
use crate::kapi::shared::SharedRange;
use crate::pure::wr::{self, opcode, QpType, SendLimits, WqeError};
use core::mem::{offset_of, size_of};
use kernel::alloc::flags::{GFP_ATOMIC, GFP_KERNEL};
use kernel::alloc::KVec;
use kernel::prelude::*;

// SAFETY: `repr(C)` integers, arrays and unions of them, so any bytes are
// a valid value. Not free of padding: `rxe_av` has a tail byte after its
// GRH and address unions of two sizes. That padding could only leak if a
// send WQE were written to memory user space reads, and none is: send
// WQEs are read from user rings and written only to the kernel-private
// work ring. The kernel-only `reg.mr` view is a pointer, which any bit
// pattern may fill; it is never read from a user WQE (REG_MR is refused
// there).
unsafe impl Pod for bindings::rxe_send_wqe {}
// SAFETY: as above, integers only.
unsafe impl Pod for bindings::rxe_recv_wqe {}

const SEND_HEADER: usize = size_of::<bindings::rxe_send_wqe>();
const RECV_HEADER: usize = size_of::<bindings::rxe_recv_wqe>();
const SGE_SIZE: usize = size_of::<bindings::rxe_sge>();
use crate::kapi::rdma::access::send::{INLINE as IB_SEND_INLINE, SIGNALED as IB_SEND_SIGNALED};
/// What a kernel FLUSH asks for: the core's work requests cannot say, so
/// the whole region of the rkey, made visible to every later reader.
const KERNEL_FLUSH_PLACEMENT: u8 = crate::pure::headers::placement::GLOBAL;
const KERNEL_FLUSH_SELECTIVITY: u8 = crate::pure::headers::selectivity::MEMORY_REGION;

/// Bytes a send slot needs for `max_sge` SGEs or `max_inline` inline bytes.
pub fn send_slot_size(max_sge: u32, max_inline: u32) -> u32 {
    let payload = (max_sge as usize * SGE_SIZE).max(max_inline as usize);
    (SEND_HEADER + payload) as u32
}

/// Most SGEs and inline bytes a send slot of `slot_size` holds.
pub fn send_slot_room(slot_size: u32) -> u32 {
    (slot_size as usize).saturating_sub(SEND_HEADER) as u32
}

/// Bytes a receive slot needs for `max_sge` SGEs.
pub fn recv_slot_size(max_sge: u32) -> u32 {
    (RECV_HEADER + max_sge as usize * SGE_SIZE) as u32
}

/// SGEs a receive slot of `slot_size` holds.
pub fn recv_slot_sges(slot_size: u32) -> u32 {
    ((slot_size as usize).saturating_sub(RECV_HEADER) / SGE_SIZE) as u32
}

/// Marks a WQE's `rxe_av` as holding a destination (`port_num` is 0 in a
/// zeroed WQE).
const AV_PRESENT_PORT: u8 = 1;

/// The rxe layout of `av`; the source GID sits in `sgid_addr` as an IPv6
/// address.
fn encode_av(av: &AddressVector) -> bindings::rxe_av {
    let mut raw = bindings::rxe_av {
        port_num: AV_PRESENT_PORT,
        network_type: if av.is_ipv4() {
            bindings::RXE_NETWORK_TYPE_IPV4 as u8
        } else {
            bindings::RXE_NETWORK_TYPE_IPV6 as u8
        },
        dmac: av.dmac,
        ..Default::default()
    };
    raw.grh.dgid.raw = av.dgid;
    raw.grh.flow_label = av.flow_label;
    raw.grh.sgid_index = av.sgid_index;
    raw.grh.hop_limit = av.hop_limit;
    raw.grh.traffic_class = av.traffic_class;
    raw.sgid_addr._sockaddr_in6.sin6_addr.in6_u.u6_addr8 = av.sgid;
    raw
}

/// The destination a kernel UD WQE carries (see [`write_kernel_send`]);
/// `None` if it carries none. Only for WQEs of kernel QPs: a user WQE's
/// `av` is whatever the process wrote.
fn kernel_ud_av(wqe: &bindings::rxe_send_wqe) -> Option<AddressVector> {
    // SAFETY: every view of these unions is plain bytes and integers, so
    // any bit pattern is a valid value of the field read.
    let (raw, dgid, sgid) = unsafe {
        let raw = &wqe.wr.wr.ud.av;
        (
            raw,
            raw.grh.dgid.raw,
            raw.sgid_addr._sockaddr_in6.sin6_addr.in6_u.u6_addr8,
        )
    };
    if raw.port_num != AV_PRESENT_PORT {
        return None;
    }
    Some(AddressVector {
        dgid,
        sgid,
        sgid_index: raw.grh.sgid_index,
        roce_v2: true,
        flow_label: raw.grh.flow_label,
        hop_limit: raw.grh.hop_limit,
        traffic_class: raw.grh.traffic_class,
        sl: 0,
        static_rate: 0,
        dmac: raw.dmac,
    })
}

fn wqe_error(_: WqeError) -> Error {
    EINVAL
}

/// Writes kernel send WR `wr` into slot `index` of `queue`, after checking
/// it against the QP's type and limits. `ah_num` names the address handle
/// of a UD WR.
pub fn write_kernel_send(
    queue: &Queue,
    index: u32,
    wr: &SendWr<'_>,
    qp_type: QpType,
    limits: &SendLimits,
    ud_av: Option<&AddressVector>,
) -> Result {
    let raw = wr.raw();
    let sges = wr.sges()?;
    let flags = raw.send_flags as u32;
    let inline = flags & IB_SEND_INLINE != 0;
    let total = sges
        .iter()
        .try_fold(0u32, |sum, sge| sum.checked_add(sge.length))
        .ok_or(EINVAL)?;
    wr::validate_send(
        qp_type,
        limits,
        raw.opcode,
        inline,
        sges.len() as u32,
        total,
        sges.iter().map(|sge| sge.length),
    )
    .map_err(wqe_error)?;

    let mut wqe = bindings::rxe_send_wqe::default();
    wqe.wr.wr_id = wr.wr_id();
    wqe.wr.opcode = raw.opcode;
    wqe.wr.send_flags = flags;
    // SAFETY: both views of the union are 32 bits.
    wqe.wr.ex.invalidate_rkey = unsafe { raw.ex.invalidate_rkey };
    let this = raw as *const bindings::ib_send_wr;
    // SAFETY: for each opcode family the core's callers embed the WR in the
    // matching container, with the WR as its first field.
    unsafe {
        match (qp_type, raw.opcode) {
            (QpType::Ud | QpType::Gsi, _) => {
                let ud = &*this.cast::<bindings::ib_ud_wr>();
                wqe.wr.wr.ud.remote_qpn = ud.remote_qpn;
                wqe.wr.wr.ud.remote_qkey = ud.remote_qkey;
                wqe.wr.wr.ud.pkey_index = ud.pkey_index;
                // Kernel AHs have no number: the destination travels in
                // the WQE, as the rxe layout allows.
                if let Some(av) = ud_av {
                    wqe.wr.wr.ud.av = encode_av(av);
                }
            }
            (
                _,
                opcode::RDMA_WRITE
                | opcode::RDMA_WRITE_WITH_IMM
                | opcode::RDMA_READ
                | opcode::ATOMIC_WRITE,
            ) => {
                let rdma = &*this.cast::<bindings::ib_rdma_wr>();
                wqe.wr.wr.rdma.remote_addr = rdma.remote_addr;
                wqe.wr.wr.rdma.rkey = rdma.rkey;
                wqe.iova = rdma.remote_addr;
            }
            (_, opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD) => {
                let atomic = &*this.cast::<bindings::ib_atomic_wr>();
                wqe.wr.wr.atomic.remote_addr = atomic.remote_addr;
                wqe.wr.wr.atomic.compare_add = atomic.compare_add;
                wqe.wr.wr.atomic.swap = atomic.swap;
                wqe.wr.wr.atomic.rkey = atomic.rkey;
                wqe.iova = atomic.remote_addr;
            }
            (_, opcode::FLUSH) => {
                // The core defines no container with a FLUSH's range and
                // placement: a kernel FLUSH comes in an `ib_rdma_wr` (the
                // most a caller can be expected to have filled in) and
                // makes the whole region of its rkey globally visible.
                let rdma = &*this.cast::<bindings::ib_rdma_wr>();
                wqe.wr.wr.flush.remote_addr = rdma.remote_addr;
                wqe.wr.wr.flush.length = 0;
                wqe.wr.wr.flush.rkey = rdma.rkey;
                wqe.wr.wr.flush.type_ = KERNEL_FLUSH_PLACEMENT;
                wqe.wr.wr.flush.level = KERNEL_FLUSH_SELECTIVITY;
                wqe.iova = rdma.remote_addr;
            }
            (_, opcode::REG_MR) => {
                let reg = &*this.cast::<bindings::ib_reg_wr>();
                wqe.wr.wr.reg.__bindgen_anon_1.mr = reg.mr;
                wqe.wr.wr.reg.key = reg.key;
                wqe.wr.wr.reg.access = reg.access as u32;
            }
            _ => {}
        }
    }
    wqe.dma.length = total;
    wqe.dma.resid = total;
    let payload = SEND_HEADER;
    if inline {
        // Inline data is copied now, so the caller's buffers are free as
        // soon as the post returns.
        wqe.dma.num_sge = 0;
        let mut at = payload;
        for sge in sges {
            let len = sge.length as usize;
            if len == 0 {
                continue;
            }
            // SAFETY: a kernel caller's inline SGE addresses kernel memory
            // of `length` bytes (virtual DMA: the address is the pointer).
            let src = unsafe { core::slice::from_raw_parts(sge.addr as usize as *const u8, len) };
            queue.write_bytes(index, at, src)?;
            at += len;
        }
    } else {
        wqe.dma.num_sge = sges.len() as u32;
        for (i, sge) in sges.iter().enumerate() {
            let out = bindings::rxe_sge {
                addr: sge.addr,
                length: sge.length,
                lkey: sge.lkey,
            };
            queue.write(index, payload + i * SGE_SIZE, &out)?;
        }
    }
    queue.write(index, 0, &wqe)
}

/// Writes just the ID and opcode of a kernel send WR posted to a QP in
/// ERR, which is flushed without looking at the rest.
pub fn write_flush_marker(queue: &Queue, index: u32, wr: &SendWr<'_>) -> Result {
    let mut wqe = bindings::rxe_send_wqe::default();
    wqe.wr.wr_id = wr.wr_id();
    wqe.wr.opcode = wr.opcode();
    queue.write(index, 0, &wqe)
}

/// Moves the user's send WQE in slot `index` of `user` into the same slot
/// of `work` and validates the copy; the copy is then normalised (lengths
/// recomputed, transport state cleared) for the requester. Returns the
/// message's length (the SGEs' sum, or the inline bytes).
pub fn fetch_user_send(
    work: &Queue,
    user: &Queue,
    index: u32,
    qp_type: QpType,
    limits: &SendLimits,
) -> core::result::Result<u32, WqeError> {
    work.copy_slot(index, user, index)
        .map_err(|_| WqeError::TooManySges)?;
    let mut wqe: bindings::rxe_send_wqe = work.read(index, 0).map_err(|_| WqeError::TooManySges)?;
    let op = wqe.wr.opcode;
    // REG_MR carries a kernel pointer: never from user space.
    if op == opcode::REG_MR {
        return Err(WqeError::BadOpcode);
    }
    // FLUSH names its range in `dma.length`, as librxe writes it and rxe
    // reads it; it moves no data, so that is not an SGE total. Read once,
    // from the copy.
    let flush_length = wqe.dma.length;
    let data_op = matches!(
        op,
        opcode::SEND | opcode::SEND_WITH_IMM | opcode::SEND_WITH_INV
    ) || matches!(
        op,
        opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM | opcode::ATOMIC_WRITE
    );
    // librxe's `ibv_wr_set_inline_data*` fill inline data without setting
    // the flag: an SGE-less WQE with a length is inline too.
    let inline = wqe.wr.send_flags & IB_SEND_INLINE != 0
        || (data_op && wqe.dma.num_sge == 0 && wqe.dma.length > 0);
    let total = if inline {
        wr::validate_send(
            qp_type,
            limits,
            op,
            true,
            0,
            wqe.dma.length,
            core::iter::empty(),
        )?
    } else {
        let num_sge = wqe.dma.num_sge;
        if num_sge > limits.max_sge {
            return Err(WqeError::TooManySges);
        }
        let mut lengths = [0u32; MAX_SGE_CHECK];
        let mut total = 0u32;
        for i in 0..num_sge as usize {
            let sge: bindings::rxe_sge = work
                .read(index, SEND_HEADER + i * SGE_SIZE)
                .map_err(|_| WqeError::TooManySges)?;
            total = total
                .checked_add(sge.length)
                .ok_or(WqeError::LengthOverflow)?;
            if let Some(slot) = lengths.get_mut(i) {
                *slot = sge.length;
            }
        }
        // The declared length is not trusted (librxe's `ibv_wr_set_sge_list`
        // gets it wrong): the SGEs define it.
        wr::validate_send(
            qp_type,
            limits,
            op,
            false,
            num_sge,
            total,
            lengths.iter().copied().take(num_sge as usize),
        )?
    };
    wqe.status = 0;
    wqe.state = 0;
    wqe.mask = 0;
    wqe.first_psn = 0;
    wqe.last_psn = 0;
    wqe.ack_length = 0;
    wqe.ssn = 0;
    wqe.has_rd_atomic = 0;
    wqe.dma.length = total;
    wqe.dma.resid = total;
    wqe.dma.cur_sge = 0;
    wqe.dma.sge_offset = 0;
    if inline {
        wqe.dma.num_sge = 0;
        wqe.wr.send_flags |= IB_SEND_INLINE;
    }
    match op {
        opcode::RDMA_WRITE
        | opcode::RDMA_WRITE_WITH_IMM
        | opcode::RDMA_READ
        | opcode::ATOMIC_WRITE => {
            // SAFETY: plain integers in every view.
            wqe.iova = unsafe { wqe.wr.wr.rdma.remote_addr };
        }
        opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD => {
            // SAFETY: plain integers in every view.
            wqe.iova = unsafe { wqe.wr.wr.atomic.remote_addr };
        }
        opcode::FLUSH => {
            // SAFETY: plain integers in every view.
            wqe.iova = unsafe { wqe.wr.wr.flush.remote_addr };
            // The requester reads the range from the flush fields only.
            wqe.wr.wr.flush.length = flush_length;
        }
        _ => wqe.iova = 0,
    }
    work.write(index, 0, &wqe)
        .map_err(|_| WqeError::TooManySges)?;
    Ok(total)
}

/// The most SGEs a WQE may have (the device's `max_sge`).
pub const MAX_SGE_CHECK: usize = 32;

/// What flushing or completing a send WQE needs of it.
#[derive(Clone, Copy, Debug)]
pub struct SendSummary {
    /// The WR's ID.
    pub wr_id: u64,
    /// `IB_WR_*` opcode.
    pub opcode: u32,
    /// Whether the WR asked for a completion.
    pub signaled: bool,
    /// The AH number of a UD WQE.
    pub ah_num: u32,
}

/// Reads what completing the send WQE in slot `index` needs.
pub fn send_summary(queue: &Queue, index: u32) -> Result<SendSummary> {
    let wqe: bindings::rxe_send_wqe = queue.read(index, 0)?;
    Ok(SendSummary {
        wr_id: wqe.wr.wr_id,
        opcode: wqe.wr.opcode,
        signaled: wqe.wr.send_flags & IB_SEND_SIGNALED != 0,
        // SAFETY: plain integers in every view.
        ah_num: unsafe { wqe.wr.wr.ud.ah_num },
    })
}

/// Reads the WR ID of a user send WQE that was never fetched (to flush
/// it), once.
pub fn user_send_wr_id(user: &Queue, index: u32) -> Result<u64> {
    user.read::<u64>(index, offset_of!(bindings::rxe_send_wqe, wr))
}

/// Writes kernel receive WR `wr` into slot `index` of `queue`.
pub fn write_kernel_recv(queue: &Queue, index: u32, wr: &RecvWr<'_>, max_sge: u32) -> Result {
    let raw = wr.raw();
    let count = usize::try_from(raw.num_sge).map_err(|_| EINVAL)?;
    if count > max_sge as usize {
        return Err(EINVAL);
    }
    let sges: &[bindings::ib_sge] = if count == 0 {
        &[]
    } else if raw.sg_list.is_null() {
        return Err(EINVAL);
    } else {
        // SAFETY: a kernel caller's WR points to `num_sge` SGEs.
        unsafe { core::slice::from_raw_parts(raw.sg_list, count) }
    };
    let total = sges
        .iter()
        .try_fold(0u32, |sum, sge| sum.checked_add(sge.length))
        .ok_or(EINVAL)?;
    wr::validate_recv(max_sge, count as u32, total, sges.iter().map(|s| s.length))
        .map_err(wqe_error)?;
    for (i, sge) in sges.iter().enumerate() {
        let out = bindings::rxe_sge {
            addr: sge.addr,
            length: sge.length,
            lkey: sge.lkey,
        };
        queue.write(index, RECV_HEADER + i * SGE_SIZE, &out)?;
    }
    let mut wqe = bindings::rxe_recv_wqe {
        wr_id: wr.wr_id(),
        ..Default::default()
    };
    wqe.dma.length = total;
    wqe.dma.resid = total;
    wqe.dma.num_sge = count as u32;
    queue.write(index, 0, &wqe)
}

/// Reads the WR ID of the receive WQE in slot `index`, once.
pub fn recv_wr_id(queue: &Queue, index: u32) -> Result<u64> {
    queue.read::<u64>(index, offset_of!(bindings::rxe_recv_wqe, wr_id))
}

/// Reads the send WQE header in slot `index` of a kernel-owned work ring.
pub fn read_send(queue: &Queue, index: u32) -> Result<WorkWqe> {
    queue.read(index, 0).map(WorkWqe)
}

/// Stores the transport's per-WQE state back into slot `index`: the fields
/// that [`WorkWqe`]'s setters change, and nothing else, which never changes
/// once posted. The requester stores them whenever a packet it builds
/// moves them (see [`WorkWqe::progress`], which lists the same fields).
pub fn write_send(queue: &Queue, index: u32, wqe: &WorkWqe) -> Result {
    type Wqe = bindings::rxe_send_wqe;
    queue.write(index, offset_of!(Wqe, status), &wqe.0.status)?;
    queue.write(index, offset_of!(Wqe, state), &wqe.0.state)?;
    queue.write(index, offset_of!(Wqe, first_psn), &wqe.0.first_psn)?;
    queue.write(index, offset_of!(Wqe, last_psn), &wqe.0.last_psn)?;
    queue.write(index, offset_of!(Wqe, has_rd_atomic), &wqe.0.has_rd_atomic)
}

/// SGE `n` of the send WQE in slot `index`.
pub fn send_sge(queue: &Queue, index: u32, n: u32) -> Result<Sge> {
    queue
        .read(index, SEND_HEADER + n as usize * SGE_SIZE)
        .map(Sge)
}

/// A scatter/gather element of a WQE: `length` bytes at `addr` under the
/// local key `lkey`, all unchecked until the key is looked up.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Sge(bindings::rxe_sge);

impl Sge {
    /// The address (the region's IOVA, or a kernel address under the
    /// local DMA key).
    pub fn addr(&self) -> u64 {
        self.0.addr
    }

    /// The byte count.
    pub fn length(&self) -> u32 {
        self.0.length
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

/// A remote buffer a WQE names: an address in the peer's region or window
/// of key `rkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    /// The remote address.
    pub addr: u64,
    /// The remote key.
    pub rkey: u32,
}

/// A memory window bind a WQE asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwBind {
    /// The window's current key.
    pub mw_rkey: u32,
    /// Its key once bound.
    pub new_rkey: u32,
    /// The region it binds to.
    pub mr_lkey: u32,
    /// The first address the window covers.
    pub addr: u64,
    /// Its length.
    pub length: u64,
    /// The access it grants.
    pub access: u32,
}

/// What a send WQE asks for: its opcode with the fields the opcode gives
/// meaning to (the one view of the WQE's unions the opcode selects).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// SEND, with immediate data (big endian, as on the wire) or a key to
    /// invalidate at the peer.
    Send {
        /// `IB_WR_SEND_WITH_IMM`'s immediate data.
        imm: Option<u32>,
        /// `IB_WR_SEND_WITH_INV`'s key.
        invalidate: Option<u32>,
    },
    /// RDMA WRITE, with immediate data or not.
    Write {
        /// Where.
        remote: Remote,
        /// `IB_WR_RDMA_WRITE_WITH_IMM`'s immediate data.
        imm: Option<u32>,
    },
    /// RDMA READ into the WQE's SGEs.
    Read {
        /// From where.
        remote: Remote,
    },
    /// Atomic compare and swap.
    CompareSwap {
        /// The 8-byte target.
        remote: Remote,
        /// The value expected there.
        compare: u64,
        /// The value stored if it is.
        swap: u64,
    },
    /// Atomic fetch and add.
    FetchAdd {
        /// The 8-byte target.
        remote: Remote,
        /// The addend.
        add: u64,
    },
    /// ATOMIC WRITE of the WQE's 8 bytes.
    AtomicWrite {
        /// The 8-byte target.
        remote: Remote,
    },
    /// FLUSH of a remote range.
    Flush {
        /// Its start.
        remote: Remote,
        /// Its length.
        length: u32,
        /// The placement type (FETH).
        placement: u8,
        /// The selectivity level (FETH).
        selectivity: u8,
    },
    /// Local invalidation of a key.
    LocalInvalidate {
        /// The key.
        rkey: u32,
    },
    /// Fast registration of a region (kernel WQEs only).
    RegMr {
        /// The region's new key.
        key: u32,
        /// Its access.
        access: u32,
    },
    /// Binding a memory window.
    BindMw(MwBind),
    /// Any other opcode (the number).
    Other(u32),
}

/// A UD WQE's destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdDest {
    /// The remote QPN.
    pub remote_qpn: u32,
    /// Its Q_Key (high bit set: the QP's own).
    pub remote_qkey: u32,
    /// A user AH by number (0: none).
    pub ah_num: u32,
}

/// A send WQE of a kernel-owned work ring, copied out of it: the work
/// request, and the state the requester and completer keep for it there.
///
/// # Invariants
///
/// The work ring is the kernel's own (user WQEs are copied and checked into
/// it once), so its fields hold what the kernel wrote.
#[repr(transparent)]
pub struct WorkWqe(bindings::rxe_send_wqe);

impl WorkWqe {
    /// `IB_WR_*` opcode.
    pub fn opcode(&self) -> u32 {
        self.0.wr.opcode
    }

    /// The WR's ID.
    pub fn wr_id(&self) -> u64 {
        self.0.wr.wr_id
    }

    /// `IB_SEND_*` flags.
    pub fn send_flags(&self) -> u32 {
        self.0.wr.send_flags
    }

    /// The message length: the sum of the SGEs, or the inline bytes.
    pub fn length(&self) -> u32 {
        self.0.dma.length
    }

    /// How many SGEs follow the header.
    pub fn num_sge(&self) -> u32 {
        self.0.dma.num_sge
    }

    /// The operation and its fields.
    pub fn op(&self) -> SendOp {
        let wr = &self.0.wr;
        // SAFETY (every union read below): the unions' views are plain
        // integers of `repr(C)` structs, so any bit pattern is a valid
        // value of the view read; the opcode says which view holds
        // meaning. The kernel-only `reg.mr` pointer is never read.
        let rdma = || {
            // SAFETY: see above.
            let r = unsafe { wr.wr.rdma };
            Remote {
                addr: r.remote_addr,
                rkey: r.rkey,
            }
        };
        // SAFETY: see above; both views are 32 bits.
        let (imm, invalidate) = unsafe { (wr.ex.imm_data, wr.ex.invalidate_rkey) };
        match wr.opcode {
            opcode::SEND => SendOp::Send {
                imm: None,
                invalidate: None,
            },
            opcode::SEND_WITH_IMM => SendOp::Send {
                imm: Some(imm),
                invalidate: None,
            },
            opcode::SEND_WITH_INV => SendOp::Send {
                imm: None,
                invalidate: Some(invalidate),
            },
            opcode::RDMA_WRITE => SendOp::Write {
                remote: rdma(),
                imm: None,
            },
            opcode::RDMA_WRITE_WITH_IMM => SendOp::Write {
                remote: rdma(),
                imm: Some(imm),
            },
            opcode::RDMA_READ => SendOp::Read { remote: rdma() },
            opcode::ATOMIC_WRITE => SendOp::AtomicWrite { remote: rdma() },
            opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD => {
                // SAFETY: see above.
                let a = unsafe { wr.wr.atomic };
                let remote = Remote {
                    addr: a.remote_addr,
                    rkey: a.rkey,
                };
                if wr.opcode == opcode::ATOMIC_CMP_AND_SWP {
                    SendOp::CompareSwap {
                        remote,
                        compare: a.compare_add,
                        swap: a.swap,
                    }
                } else {
                    SendOp::FetchAdd {
                        remote,
                        add: a.compare_add,
                    }
                }
            }
            opcode::FLUSH => {
                // SAFETY: see above.
                let f = unsafe { wr.wr.flush };
                SendOp::Flush {
                    remote: Remote {
                        addr: f.remote_addr,
                        rkey: f.rkey,
                    },
                    length: f.length,
                    placement: f.type_,
                    selectivity: f.level,
                }
            }
            opcode::LOCAL_INV => SendOp::LocalInvalidate { rkey: invalidate },
            opcode::REG_MR => {
                // SAFETY: see above; `key` and `access` only.
                let (key, access) = unsafe { (wr.wr.reg.key, wr.wr.reg.access) };
                SendOp::RegMr { key, access }
            }
            opcode::BIND_MW => {
                // SAFETY: see above.
                let mw = unsafe { wr.wr.mw };
                SendOp::BindMw(MwBind {
                    mw_rkey: mw.mw_rkey,
                    new_rkey: mw.rkey,
                    mr_lkey: mw.mr_lkey,
                    addr: mw.addr,
                    length: mw.length,
                    access: mw.access,
                })
            }
            other => SendOp::Other(other),
        }
    }

    /// The destination of a UD WQE (meaningful on UD and GSI QPs only).
    pub fn ud(&self) -> UdDest {
        // SAFETY: plain integers in every view of the union.
        let ud = unsafe { self.0.wr.wr.ud };
        UdDest {
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
            ah_num: ud.ah_num,
        }
    }

    /// The address vector a kernel UD WQE carries; see [`kernel_ud_av`].
    pub fn kernel_ud_av(&self) -> Option<AddressVector> {
        kernel_ud_av(&self.0)
    }

    /// The transport's progress through the WQE (driver-defined values).
    pub fn state(&self) -> u32 {
        self.0.state
    }

    /// Sets [`Self::state`].
    pub fn set_state(&mut self, state: u32) {
        self.0.state = state;
    }

    /// A local operation's outcome (driver-defined values).
    pub fn status(&self) -> u32 {
        self.0.status
    }

    /// Sets [`Self::status`].
    pub fn set_status(&mut self, status: u32) {
        self.0.status = status;
    }

    /// The PSN of the WQE's first packet.
    pub fn first_psn(&self) -> u32 {
        self.0.first_psn
    }

    /// Sets [`Self::first_psn`].
    pub fn set_first_psn(&mut self, psn: u32) {
        self.0.first_psn = psn;
    }

    /// The PSN of its last packet.
    pub fn last_psn(&self) -> u32 {
        self.0.last_psn
    }

    /// Sets [`Self::last_psn`].
    pub fn set_last_psn(&mut self, psn: u32) {
        self.0.last_psn = psn;
    }

    /// Whether it took one of the QP's READ/atomic slots.
    pub fn has_rd_atomic(&self) -> bool {
        self.0.has_rd_atomic != 0
    }

    /// Sets [`Self::has_rd_atomic`].
    pub fn set_has_rd_atomic(&mut self, taken: bool) {
        self.0.has_rd_atomic = u32::from(taken);
    }

    /// What [`write_send`] stores, for a caller that stores only a WQE
    /// whose progress changed.
    pub fn progress(&self) -> [u32; 5] {
        let w = &self.0;
        [w.status, w.state, w.first_psn, w.last_psn, w.has_rd_atomic]
    }
}

/// The `len` inline bytes of the send WQE in slot `index`, for reading;
/// `EINVAL` if they are not all in the slot.
pub fn send_inline(queue: &Queue, index: u32, len: u32) -> Result<SharedRange<'_>> {
    let at = queue.slot_bytes(index, SEND_HEADER, len as usize)?;
    // SAFETY: `len` bytes inside the slot (checked), in the ring's buffer, which lives while
    // `queue` is borrowed; the buffer is reached only by raw accesses, never by Rust references.
    // Read only: the ring may be one a process maps.
    unsafe { SharedRange::foreign(at.cast_mut(), len as usize, false) }.ok_or(EINVAL)
}

/// A receive WQE copied out of its ring.
pub struct RecvCopy {
    /// The WR's ID.
    pub wr_id: u64,
    /// The sum of the SGE lengths.
    pub length: u32,
    /// The scatter list (capacity reserved for the largest).
    pub sges: KVec<Sge>,
}

impl RecvCopy {
    /// An empty copy able to hold `max_sge` SGEs without allocating again.
    pub fn with_capacity(max_sge: u32) -> Result<Self> {
        let mut sges = KVec::new();
        sges.reserve(max_sge as usize, GFP_KERNEL)?;
        Ok(Self {
            wr_id: 0,
            length: 0,
            sges,
        })
    }

    /// Copies the receive WQE in slot `index` of `queue` (which user space
    /// may be writing) into `self`, each field read once, and checks the
    /// copy: at most `max_sge` SGEs whose lengths add up in 32 bits.
    pub fn fetch(&mut self, queue: &Queue, index: u32, max_sge: u32) -> Result {
        let wqe: bindings::rxe_recv_wqe = queue.read(index, 0)?;
        let count = wqe.dma.num_sge;
        if count > max_sge || count as usize > self.sges.capacity() {
            return Err(EINVAL);
        }
        // SAFETY: SGEs are plain integers with nothing to drop.
        unsafe { self.sges.set_len(0) };
        let mut total = 0u32;
        for n in 0..count as usize {
            let sge: bindings::rxe_sge = queue.read(index, RECV_HEADER + n * SGE_SIZE)?;
            total = total.checked_add(sge.length).ok_or(EINVAL)?;
            // Within the reserved capacity: does not allocate.
            self.sges.push(Sge(sge), GFP_ATOMIC)?;
        }
        self.wr_id = wqe.wr_id;
        self.length = total;
        Ok(())
    }
}
