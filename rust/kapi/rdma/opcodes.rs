// SPDX-License-Identifier: GPL-2.0

//! The numbers `rust/pure` names for the wire and the verbs, checked when
//! the modules are built against the kernel's own: every packet opcode
//! against `ib_pack.h` and every work request opcode against
//! `enum ib_wr_opcode` and the uverbs ABI's `enum ib_uverbs_wr_opcode`. A
//! mismatch fails the build; nothing here runs.

use crate::bindings;
use crate::pure::headers::opcode as packet;
use crate::pure::wr::opcode as wr;

macro_rules! same {
    ($($ours:expr => $kernel:expr),* $(,)?) => {
        $(const _: () = assert!($ours as u64 == $kernel as u64);)*
    };
}

same! {
    packet::RC_SEND_FIRST => bindings::IB_OPCODE_RC_SEND_FIRST,
    packet::RC_SEND_MIDDLE => bindings::IB_OPCODE_RC_SEND_MIDDLE,
    packet::RC_SEND_LAST => bindings::IB_OPCODE_RC_SEND_LAST,
    packet::RC_SEND_LAST_WITH_IMMEDIATE => bindings::IB_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE,
    packet::RC_SEND_ONLY => bindings::IB_OPCODE_RC_SEND_ONLY,
    packet::RC_SEND_ONLY_WITH_IMMEDIATE => bindings::IB_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE,
    packet::RC_RDMA_WRITE_FIRST => bindings::IB_OPCODE_RC_RDMA_WRITE_FIRST,
    packet::RC_RDMA_WRITE_MIDDLE => bindings::IB_OPCODE_RC_RDMA_WRITE_MIDDLE,
    packet::RC_RDMA_WRITE_LAST => bindings::IB_OPCODE_RC_RDMA_WRITE_LAST,
    packet::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE => bindings::IB_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
    packet::RC_RDMA_WRITE_ONLY => bindings::IB_OPCODE_RC_RDMA_WRITE_ONLY,
    packet::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE => bindings::IB_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    packet::UC_SEND_FIRST => bindings::IB_OPCODE_UC_SEND_FIRST,
    packet::UC_SEND_MIDDLE => bindings::IB_OPCODE_UC_SEND_MIDDLE,
    packet::UC_SEND_LAST => bindings::IB_OPCODE_UC_SEND_LAST,
    packet::UC_SEND_LAST_WITH_IMMEDIATE => bindings::IB_OPCODE_UC_SEND_LAST_WITH_IMMEDIATE,
    packet::UC_SEND_ONLY => bindings::IB_OPCODE_UC_SEND_ONLY,
    packet::UC_SEND_ONLY_WITH_IMMEDIATE => bindings::IB_OPCODE_UC_SEND_ONLY_WITH_IMMEDIATE,
    packet::UC_RDMA_WRITE_FIRST => bindings::IB_OPCODE_UC_RDMA_WRITE_FIRST,
    packet::UC_RDMA_WRITE_MIDDLE => bindings::IB_OPCODE_UC_RDMA_WRITE_MIDDLE,
    packet::UC_RDMA_WRITE_LAST => bindings::IB_OPCODE_UC_RDMA_WRITE_LAST,
    packet::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE => bindings::IB_OPCODE_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
    packet::UC_RDMA_WRITE_ONLY => bindings::IB_OPCODE_UC_RDMA_WRITE_ONLY,
    packet::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE => bindings::IB_OPCODE_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    packet::RC_RDMA_READ_REQUEST => bindings::IB_OPCODE_RC_RDMA_READ_REQUEST,
    packet::RC_RDMA_READ_RESPONSE_FIRST => bindings::IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST,
    packet::RC_RDMA_READ_RESPONSE_MIDDLE => bindings::IB_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE,
    packet::RC_RDMA_READ_RESPONSE_LAST => bindings::IB_OPCODE_RC_RDMA_READ_RESPONSE_LAST,
    packet::RC_RDMA_READ_RESPONSE_ONLY => bindings::IB_OPCODE_RC_RDMA_READ_RESPONSE_ONLY,
    packet::RC_ACKNOWLEDGE => bindings::IB_OPCODE_RC_ACKNOWLEDGE,
    packet::RC_ATOMIC_ACKNOWLEDGE => bindings::IB_OPCODE_RC_ATOMIC_ACKNOWLEDGE,
    packet::RC_COMPARE_SWAP => bindings::IB_OPCODE_RC_COMPARE_SWAP,
    packet::RC_FETCH_ADD => bindings::IB_OPCODE_RC_FETCH_ADD,
    packet::RC_SEND_LAST_WITH_INVALIDATE => bindings::IB_OPCODE_RC_SEND_LAST_WITH_INVALIDATE,
    packet::RC_SEND_ONLY_WITH_INVALIDATE => bindings::IB_OPCODE_RC_SEND_ONLY_WITH_INVALIDATE,
    packet::RC_FLUSH => bindings::IB_OPCODE_RC_FLUSH,
    packet::RC_ATOMIC_WRITE => bindings::IB_OPCODE_RC_ATOMIC_WRITE,
    packet::UD_SEND_ONLY => bindings::IB_OPCODE_UD_SEND_ONLY,
    packet::UD_SEND_ONLY_WITH_IMMEDIATE => bindings::IB_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE,
}

same! {
    wr::RDMA_WRITE => bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
    wr::RDMA_WRITE => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE,
    wr::RDMA_WRITE_WITH_IMM => bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
    wr::RDMA_WRITE_WITH_IMM => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM,
    wr::SEND => bindings::ib_wr_opcode_IB_WR_SEND,
    wr::SEND => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND,
    wr::SEND_WITH_IMM => bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
    wr::SEND_WITH_IMM => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM,
    wr::RDMA_READ => bindings::ib_wr_opcode_IB_WR_RDMA_READ,
    wr::RDMA_READ => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ,
    wr::ATOMIC_CMP_AND_SWP => bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
    wr::ATOMIC_CMP_AND_SWP => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP,
    wr::ATOMIC_FETCH_AND_ADD => bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
    wr::ATOMIC_FETCH_AND_ADD => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD,
    wr::LOCAL_INV => bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
    wr::LOCAL_INV => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV,
    wr::BIND_MW => bindings::ib_wr_opcode_IB_WR_BIND_MW,
    wr::BIND_MW => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW,
    wr::SEND_WITH_INV => bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV,
    wr::SEND_WITH_INV => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV,
    wr::TSO => bindings::ib_wr_opcode_IB_WR_LSO,
    wr::TSO => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_TSO,
    wr::RDMA_READ_WITH_INV => bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV,
    wr::RDMA_READ_WITH_INV => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ_WITH_INV,
    wr::MASKED_ATOMIC_CMP_AND_SWP => bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_CMP_AND_SWP,
    wr::MASKED_ATOMIC_CMP_AND_SWP => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP,
    wr::MASKED_ATOMIC_FETCH_AND_ADD => bindings::ib_wr_opcode_IB_WR_MASKED_ATOMIC_FETCH_AND_ADD,
    wr::MASKED_ATOMIC_FETCH_AND_ADD => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD,
    wr::FLUSH => bindings::ib_wr_opcode_IB_WR_FLUSH,
    wr::FLUSH => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_FLUSH,
    wr::ATOMIC_WRITE => bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    wr::ATOMIC_WRITE => bindings::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_WRITE,
    wr::REG_MR => bindings::ib_wr_opcode_IB_WR_REG_MR,
}
