// SPDX-License-Identifier: GPL-2.0

//! Checks on a work request before the transport uses it: the opcode is
//! one the QP type allows, the scatter/gather list fits, lengths add up
//! without overflow. Applied to kernel WRs and to copies of user WQEs.

/// `enum ib_wr_opcode` (the kernel's and the uverbs ABI's numbers).
pub mod opcode {
    #![allow(missing_docs)]
    pub const RDMA_WRITE: u32 = 0;
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const SEND: u32 = 2;
    pub const SEND_WITH_IMM: u32 = 3;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub const LOCAL_INV: u32 = 7;
    pub const BIND_MW: u32 = 8;
    pub const SEND_WITH_INV: u32 = 9;
    pub const TSO: u32 = 10;
    pub const RDMA_READ_WITH_INV: u32 = 11;
    pub const MASKED_ATOMIC_CMP_AND_SWP: u32 = 12;
    pub const MASKED_ATOMIC_FETCH_AND_ADD: u32 = 13;
    pub const FLUSH: u32 = 14;
    pub const ATOMIC_WRITE: u32 = 15;
    /// Kernel-only fast registration.
    pub const REG_MR: u32 = 0x20;
}

/// Transport types of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connection.
    Rc,
    /// Unreliable connection.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// QP1, the general services (MAD) QP: UD.
    Gsi,
}

/// Why a WR is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeError {
    /// Unknown opcode, or not allowed on this QP type.
    BadOpcode,
    /// More SGEs than the QP has.
    TooManySges,
    /// More inline data than the QP has room for.
    InlineTooLong,
    /// Inline data with an operation that carries none.
    InlineNotAllowed,
    /// The declared length is not the sum of the SGEs.
    LengthMismatch,
    /// The SGE lengths overflow 32 bits.
    LengthOverflow,
    /// An atomic whose local buffer is not 8 bytes.
    BadAtomicLength,
    /// Longer than the largest message.
    MessageTooLong,
}

/// The send limits of a QP.
#[derive(Debug, Clone, Copy)]
pub struct SendLimits {
    /// SGEs per WR.
    pub max_sge: u32,
    /// Inline bytes per WR.
    pub max_inline: u32,
    /// Largest message.
    pub max_message: u32,
}

/// Whether a QP of `qp` type may post `op`.
pub fn opcode_allowed(qp: QpType, op: u32) -> bool {
    use opcode::*;
    match qp {
        QpType::Rc => matches!(
            op,
            RDMA_WRITE
                | RDMA_WRITE_WITH_IMM
                | SEND
                | SEND_WITH_IMM
                | RDMA_READ
                | ATOMIC_CMP_AND_SWP
                | ATOMIC_FETCH_AND_ADD
                | LOCAL_INV
                | BIND_MW
                | SEND_WITH_INV
                | REG_MR
                | ATOMIC_WRITE
                | FLUSH
        ),
        QpType::Uc => matches!(
            op,
            RDMA_WRITE | RDMA_WRITE_WITH_IMM | SEND | SEND_WITH_IMM | LOCAL_INV | BIND_MW | REG_MR
        ),
        QpType::Ud | QpType::Gsi => matches!(op, SEND | SEND_WITH_IMM),
    }
}

fn carries_data(op: u32) -> bool {
    use opcode::*;
    matches!(
        op,
        RDMA_WRITE | RDMA_WRITE_WITH_IMM | SEND | SEND_WITH_IMM | SEND_WITH_INV | ATOMIC_WRITE
    )
}

fn is_atomic(op: u32) -> bool {
    matches!(
        op,
        opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD
    )
}

fn is_local(op: u32) -> bool {
    matches!(op, opcode::LOCAL_INV | opcode::BIND_MW | opcode::REG_MR)
}

/// Validates a send WR; returns its message length.
pub fn validate_send(
    qp: QpType,
    limits: &SendLimits,
    op: u32,
    inline: bool,
    num_sge: u32,
    declared_length: u32,
    sge_lengths: impl Iterator<Item = u32>,
) -> Result<u32, WqeError> {
    if !opcode_allowed(qp, op) {
        return Err(WqeError::BadOpcode);
    }
    if is_local(op) || op == opcode::FLUSH {
        // Local operations and FLUSH move no data (a FLUSH's range is in
        // its own fields); whatever SGEs they name would be ignored, so
        // they are refused rather than silently dropped.
        if num_sge != 0 || inline {
            return Err(WqeError::TooManySges);
        }
        return Ok(0);
    }
    let total = if inline {
        if !carries_data(op) {
            return Err(WqeError::InlineNotAllowed);
        }
        if declared_length > limits.max_inline {
            return Err(WqeError::InlineTooLong);
        }
        declared_length
    } else {
        sge_total(limits.max_sge, num_sge, declared_length, sge_lengths)?
    };
    if (is_atomic(op) || op == opcode::ATOMIC_WRITE) && total != 8 {
        return Err(WqeError::BadAtomicLength);
    }
    if total > limits.max_message {
        return Err(WqeError::MessageTooLong);
    }
    Ok(total)
}

/// Validates a receive WR; returns the room it offers.
pub fn validate_recv(
    max_sge: u32,
    num_sge: u32,
    declared_length: u32,
    sge_lengths: impl Iterator<Item = u32>,
) -> Result<u32, WqeError> {
    sge_total(max_sge, num_sge, declared_length, sge_lengths)
}

/// The sum of a scatter/gather list's lengths, which must be the declared
/// length; the count is checked before any length is read.
fn sge_total(
    max_sge: u32,
    num_sge: u32,
    declared_length: u32,
    sge_lengths: impl Iterator<Item = u32>,
) -> Result<u32, WqeError> {
    if num_sge > max_sge {
        return Err(WqeError::TooManySges);
    }
    let mut total = 0u32;
    for length in sge_lengths.take(num_sge as usize) {
        total = total.checked_add(length).ok_or(WqeError::LengthOverflow)?;
    }
    if total != declared_length {
        return Err(WqeError::LengthMismatch);
    }
    Ok(total)
}

/// The RC or UC opcode of a packet of a SEND or RDMA WRITE message
/// (`op`, an `IB_WR_*` number) at its place in the message; `None` for
/// other operations, and for SEND_WITH_INV on UC, which has none.
pub fn request_opcode(uc: bool, op: u32, first: bool, last: bool) -> Option<u8> {
    use super::headers::opcode as wire;
    use opcode::*;
    let rc = match (op, first, last) {
        (SEND | SEND_WITH_IMM | SEND_WITH_INV, true, false) => wire::RC_SEND_FIRST,
        (SEND | SEND_WITH_IMM | SEND_WITH_INV, false, false) => wire::RC_SEND_MIDDLE,
        (SEND, false, true) => wire::RC_SEND_LAST,
        (SEND_WITH_IMM, false, true) => wire::RC_SEND_LAST_WITH_IMMEDIATE,
        (SEND, true, true) => wire::RC_SEND_ONLY,
        (SEND_WITH_IMM, true, true) => wire::RC_SEND_ONLY_WITH_IMMEDIATE,
        (SEND_WITH_INV, false, true) if !uc => wire::RC_SEND_LAST_WITH_INVALIDATE,
        (SEND_WITH_INV, true, true) if !uc => wire::RC_SEND_ONLY_WITH_INVALIDATE,
        (RDMA_WRITE | RDMA_WRITE_WITH_IMM, true, false) => wire::RC_RDMA_WRITE_FIRST,
        (RDMA_WRITE | RDMA_WRITE_WITH_IMM, false, false) => wire::RC_RDMA_WRITE_MIDDLE,
        (RDMA_WRITE, false, true) => wire::RC_RDMA_WRITE_LAST,
        (RDMA_WRITE_WITH_IMM, false, true) => wire::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (RDMA_WRITE, true, true) => wire::RC_RDMA_WRITE_ONLY,
        (RDMA_WRITE_WITH_IMM, true, true) => wire::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        _ => return None,
    };
    // UC's SEND and WRITE opcodes are RC's with UC's transport bits.
    Some(if uc { rc | wire::UC_SEND_FIRST } else { rc })
}
