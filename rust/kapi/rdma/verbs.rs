// SPDX-License-Identifier: GPL-2.0

//! The values verbs exchange, in Rust form: QP types, states, capabilities
//! and attributes, address vectors and work completions.

use super::rxe_abi::queue::Queue;
use super::udata::Pod;
use crate::bindings;
use crate::pure::wr::QpType;
use kernel::prelude::*;

/// `enum ib_qp_state`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QpState {
    /// Just created, or reset: no work.
    #[default]
    Reset,
    /// Receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drained.
    Sqd,
    /// Send queue error (UC and UD).
    Sqe,
    /// Error: all work is flushed.
    Error,
}

impl QpState {
    fn from_raw(raw: bindings::ib_qp_state) -> Result<Self> {
        Ok(match raw {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Error,
            _ => return Err(EINVAL),
        })
    }

    fn to_raw(self) -> bindings::ib_qp_state {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Error => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

pub(crate) fn qp_type_from_raw(raw: bindings::ib_qp_type) -> Result<QpType> {
    Ok(match raw {
        bindings::ib_qp_type_IB_QPT_RC => QpType::Rc,
        bindings::ib_qp_type_IB_QPT_UC => QpType::Uc,
        bindings::ib_qp_type_IB_QPT_UD => QpType::Ud,
        bindings::ib_qp_type_IB_QPT_GSI => QpType::Gsi,
        _ => return Err(crate::kapi::not_supported()),
    })
}

fn qp_type_to_raw(qp_type: QpType) -> bindings::ib_qp_type {
    match qp_type {
        QpType::Rc => bindings::ib_qp_type_IB_QPT_RC,
        QpType::Uc => bindings::ib_qp_type_IB_QPT_UC,
        QpType::Ud => bindings::ib_qp_type_IB_QPT_UD,
        QpType::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
    }
}

/// Whether the IBTA state machine allows `from` -> `to` for `qp_type` with
/// exactly the attributes in `mask` (the core's table).
pub fn transition_allowed(from: QpState, to: QpState, qp_type: QpType, mask: QpAttrMask) -> bool {
    // SAFETY: a pure function of its arguments.
    unsafe {
        bindings::ib_modify_qp_is_ok(
            from.to_raw(),
            to.to_raw(),
            qp_type_to_raw(qp_type),
            mask.0 as bindings::ib_qp_attr_mask,
        )
    }
}

/// Queue sizes of a QP (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send WR.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive WR.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send WR.
    pub max_inline_data: u32,
}

impl QpCaps {
    fn from_raw(raw: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: raw.max_send_wr,
            max_recv_wr: raw.max_recv_wr,
            max_send_sge: raw.max_send_sge,
            max_recv_sge: raw.max_recv_sge,
            max_inline_data: raw.max_inline_data,
        }
    }

    fn write_to(&self, raw: &mut bindings::ib_qp_cap) {
        raw.max_send_wr = self.max_send_wr;
        raw.max_recv_wr = self.max_recv_wr;
        raw.max_send_sge = self.max_send_sge;
        raw.max_recv_sge = self.max_recv_sge;
        raw.max_inline_data = self.max_inline_data;
    }
}

/// What `create_qp` asks for.
#[derive(Clone, Copy, Debug)]
pub struct QpInit {
    /// Transport type.
    pub qp_type: QpType,
    /// Requested queue sizes.
    pub caps: QpCaps,
    /// Whether every send WR completes with a CQE, signalled or not.
    pub sq_sig_all: bool,
    /// Whether receives come from an SRQ rather than the QP's own RQ.
    pub has_srq: bool,
    /// `IB_QP_CREATE_*` flags.
    pub create_flags: u32,
}

impl QpInit {
    pub(crate) fn from_raw(raw: &bindings::ib_qp_init_attr) -> Result<Self> {
        Ok(Self {
            qp_type: qp_type_from_raw(raw.qp_type)?,
            caps: QpCaps::from_raw(&raw.cap),
            sq_sig_all: raw.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            has_srq: !raw.srq.is_null(),
            create_flags: raw.create_flags,
        })
    }
}

/// A set of `IB_QP_*` attribute bits (`enum ib_qp_attr_mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpAttrMask(pub u32);

#[allow(missing_docs)]
impl QpAttrMask {
    pub const STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_STATE;
    pub const CUR_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_CUR_STATE;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    pub const ACCESS_FLAGS: u32 = bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    pub const PKEY_INDEX: u32 = bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    pub const PORT: u32 = bindings::ib_qp_attr_mask_IB_QP_PORT;
    pub const QKEY: u32 = bindings::ib_qp_attr_mask_IB_QP_QKEY;
    pub const AV: u32 = bindings::ib_qp_attr_mask_IB_QP_AV;
    pub const PATH_MTU: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MTU;
    pub const TIMEOUT: u32 = bindings::ib_qp_attr_mask_IB_QP_TIMEOUT;
    pub const RETRY_CNT: u32 = bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    pub const RNR_RETRY: u32 = bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    pub const RQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_RQ_PSN;
    pub const MAX_QP_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    pub const ALT_PATH: u32 = bindings::ib_qp_attr_mask_IB_QP_ALT_PATH;
    pub const MIN_RNR_TIMER: u32 = bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    pub const SQ_PSN: u32 = bindings::ib_qp_attr_mask_IB_QP_SQ_PSN;
    pub const MAX_DEST_RD_ATOMIC: u32 = bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    pub const PATH_MIG_STATE: u32 = bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
    pub const CAP: u32 = bindings::ib_qp_attr_mask_IB_QP_CAP;
    pub const DEST_QPN: u32 = bindings::ib_qp_attr_mask_IB_QP_DEST_QPN;
    pub const RATE_LIMIT: u32 = bindings::ib_qp_attr_mask_IB_QP_RATE_LIMIT;

    /// Whether any bit of `bits` is set.
    pub fn has(self, bits: u32) -> bool {
        self.0 & bits != 0
    }
}

/// Where a QP's packets go (RoCE): the resolved address vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddressVector {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Source GID, resolved from the GID table entry the core chose.
    pub sgid: [u8; 16],
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Whether the source GID is a RoCEv2 (UDP) GID.
    pub roce_v2: bool,
    /// IPv6 flow label.
    pub flow_label: u32,
    /// IP hop limit (TTL).
    pub hop_limit: u8,
    /// IP traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Static rate (`enum ib_rate`).
    pub static_rate: u8,
    /// Destination MAC address, resolved by the core.
    pub dmac: [u8; 6],
}

impl AddressVector {
    /// Whether the destination is IPv4 (an IPv4-mapped GID).
    pub fn is_ipv4(&self) -> bool {
        self.dgid[..10].iter().all(|b| *b == 0) && self.dgid[10] == 0xff && self.dgid[11] == 0xff
    }

    /// # Safety
    ///
    /// `raw` must be an attribute the core filled for a RoCE port, whose
    /// `sgid_attr` is NULL or valid for the call.
    pub(crate) unsafe fn from_raw(raw: &bindings::rdma_ah_attr) -> Result<Self> {
        if raw.ah_flags & bindings::ib_ah_flags_IB_AH_GRH as u8 == 0 {
            // RoCE addresses are always global.
            return Err(EINVAL);
        }
        // SAFETY: the caller guarantees `sgid_attr` is NULL or valid.
        let sgid_attr = unsafe { raw.grh.sgid_attr.as_ref() }.ok_or(EINVAL)?;
        // SAFETY: the GID union is 16 plain bytes in every view.
        let (dgid, sgid) = unsafe { (raw.grh.dgid.raw, sgid_attr.gid.raw) };
        // SAFETY: the core resolved the RoCE view for a RoCE port.
        let dmac = unsafe { raw.__bindgen_anon_1.roce.dmac };
        Ok(Self {
            dgid,
            sgid,
            sgid_index: raw.grh.sgid_index,
            roce_v2: sgid_attr.gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
            flow_label: raw.grh.flow_label,
            hop_limit: raw.grh.hop_limit,
            traffic_class: raw.grh.traffic_class,
            sl: raw.sl,
            static_rate: raw.static_rate,
            dmac,
        })
    }

    pub(crate) fn write_to(&self, raw: &mut bindings::rdma_ah_attr) {
        raw.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        raw.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        raw.port_num = 1;
        raw.sl = self.sl;
        raw.static_rate = self.static_rate;
        raw.grh.dgid.raw = self.dgid;
        raw.grh.flow_label = self.flow_label;
        raw.grh.sgid_index = self.sgid_index;
        raw.grh.hop_limit = self.hop_limit;
        raw.grh.traffic_class = self.traffic_class;
        raw.__bindgen_anon_1.roce = bindings::roce_ah_attr { dmac: self.dmac };
    }
}

/// The attributes a QP keeps (`struct ib_qp_attr`, RoCE subset).
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttributes {
    /// Current state.
    pub state: QpState,
    /// Path MTU (`enum ib_mtu`).
    pub path_mtu: u32,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Next expected receive PSN.
    pub rq_psn: u32,
    /// Next send PSN.
    pub sq_psn: u32,
    /// Remote QP number (RC, UC).
    pub dest_qp_num: u32,
    /// `IB_ACCESS_REMOTE_*` flags for incoming operations.
    pub qp_access_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Whether to report `IB_EVENT_SQ_DRAINED`.
    pub en_sqd_async_notify: bool,
    /// Whether the SQ is draining (SQD only).
    pub sq_draining: bool,
    /// Outstanding RDMA READ and atomics this QP initiates.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READ and atomics this QP responds to.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = forever).
    pub rnr_retry: u8,
    /// Address vector (RC, UC).
    pub av: AddressVector,
}

/// A `modify_qp` request: the attributes in `mask` carry new values.
#[derive(Clone, Copy, Debug)]
pub struct QpModify {
    /// Which attributes change.
    pub mask: QpAttrMask,
    /// The state the caller believes the QP is in, if it says.
    pub cur_state: Option<QpState>,
    /// New values (only those in `mask` are meaningful).
    pub attrs: QpAttributes,
    /// Requested port (must be 1).
    pub port: u32,
    /// Resize request (`IB_QP_CAP`).
    pub caps: QpCaps,
}

impl QpModify {
    /// # Safety
    ///
    /// As for [`AddressVector::from_raw`] for `raw.ah_attr`.
    pub(crate) unsafe fn from_raw(raw: &bindings::ib_qp_attr, mask: u32) -> Result<Self> {
        let mask = QpAttrMask(mask);
        let av = if mask.has(QpAttrMask::AV) {
            // SAFETY: forwarded from the caller.
            unsafe { AddressVector::from_raw(&raw.ah_attr)? }
        } else {
            AddressVector::default()
        };
        Ok(Self {
            mask,
            cur_state: if mask.has(QpAttrMask::CUR_STATE) {
                Some(QpState::from_raw(raw.cur_qp_state)?)
            } else {
                None
            },
            attrs: QpAttributes {
                state: if mask.has(QpAttrMask::STATE) {
                    QpState::from_raw(raw.qp_state)?
                } else {
                    QpState::Reset
                },
                path_mtu: raw.path_mtu,
                qkey: raw.qkey,
                rq_psn: raw.rq_psn,
                sq_psn: raw.sq_psn,
                dest_qp_num: raw.dest_qp_num,
                qp_access_flags: raw.qp_access_flags as u32,
                pkey_index: raw.pkey_index,
                en_sqd_async_notify: raw.en_sqd_async_notify != 0,
                sq_draining: false,
                max_rd_atomic: raw.max_rd_atomic,
                max_dest_rd_atomic: raw.max_dest_rd_atomic,
                min_rnr_timer: raw.min_rnr_timer,
                timeout: raw.timeout,
                retry_cnt: raw.retry_cnt,
                rnr_retry: raw.rnr_retry,
                av,
            },
            port: raw.port_num,
            caps: QpCaps::from_raw(&raw.cap),
        })
    }
}

/// What `query_qp` reports.
pub struct QpQuery {
    /// The kept attributes.
    pub attrs: QpAttributes,
    /// The allocated queue sizes.
    pub caps: QpCaps,
    /// Whether every send WR is signalled.
    pub sq_sig_all: bool,
}

impl QpQuery {
    pub(crate) fn write_to(
        &self,
        out: &mut bindings::ib_qp_attr,
        init: &mut bindings::ib_qp_init_attr,
    ) {
        let a = &self.attrs;
        out.qp_state = a.state.to_raw();
        out.cur_qp_state = a.state.to_raw();
        out.path_mtu = a.path_mtu;
        out.path_mig_state = bindings::ib_mig_state_IB_MIG_MIGRATED;
        out.qkey = a.qkey;
        out.rq_psn = a.rq_psn;
        out.sq_psn = a.sq_psn;
        out.dest_qp_num = a.dest_qp_num;
        out.qp_access_flags = a.qp_access_flags as i32;
        self.caps.write_to(&mut out.cap);
        a.av.write_to(&mut out.ah_attr);
        out.pkey_index = a.pkey_index;
        out.en_sqd_async_notify = u8::from(a.en_sqd_async_notify);
        out.sq_draining = u8::from(a.sq_draining);
        out.max_rd_atomic = a.max_rd_atomic;
        out.max_dest_rd_atomic = a.max_dest_rd_atomic;
        out.min_rnr_timer = a.min_rnr_timer;
        out.port_num = 1;
        out.timeout = a.timeout;
        out.retry_cnt = a.retry_cnt;
        out.rnr_retry = a.rnr_retry;
        self.caps.write_to(&mut init.cap);
        init.sq_sig_type = if self.sq_sig_all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
    }
}

/// Completion status (`enum ib_wc_status`; user space uses the same
/// numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WcStatus {
    Success,
    LocalLengthError,
    LocalQpOperationError,
    LocalProtectionError,
    WrFlushError,
    MemoryWindowBindError,
    BadResponseError,
    LocalAccessError,
    RemoteInvalidRequestError,
    RemoteAccessError,
    RemoteOperationError,
    RetryExceeded,
    RnrRetryExceeded,
    FatalError,
    GeneralError,
}

impl WcStatus {
    fn to_raw(self) -> u32 {
        match self {
            Self::Success => bindings::ib_wc_status_IB_WC_SUCCESS,
            Self::LocalLengthError => bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
            Self::LocalQpOperationError => bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
            Self::LocalProtectionError => bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
            Self::WrFlushError => bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
            Self::MemoryWindowBindError => bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
            Self::BadResponseError => bindings::ib_wc_status_IB_WC_BAD_RESP_ERR,
            Self::LocalAccessError => bindings::ib_wc_status_IB_WC_LOC_ACCESS_ERR,
            Self::RemoteInvalidRequestError => bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
            Self::RemoteAccessError => bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
            Self::RemoteOperationError => bindings::ib_wc_status_IB_WC_REM_OP_ERR,
            Self::RetryExceeded => bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
            Self::RnrRetryExceeded => bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
            Self::FatalError => bindings::ib_wc_status_IB_WC_FATAL_ERR,
            Self::GeneralError => bindings::ib_wc_status_IB_WC_GENERAL_ERR,
        }
    }
}

/// What a completion reports (`enum ib_wc_opcode`; user space numbers the
/// ones it can see the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    CompareSwap,
    FetchAdd,
    AtomicWrite,
    Flush,
    BindMw,
    LocalInvalidate,
    RegMr,
    Recv,
    RecvRdmaWithImm,
}

impl WcOpcode {
    fn to_raw(self) -> u32 {
        match self {
            Self::Send => bindings::ib_wc_opcode_IB_WC_SEND,
            Self::RdmaWrite => bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
            Self::RdmaRead => bindings::ib_wc_opcode_IB_WC_RDMA_READ,
            Self::CompareSwap => bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
            Self::FetchAdd => bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
            Self::AtomicWrite => bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
            Self::Flush => bindings::ib_wc_opcode_IB_WC_FLUSH,
            Self::BindMw => bindings::ib_wc_opcode_IB_WC_BIND_MW,
            Self::LocalInvalidate => bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
            Self::RegMr => bindings::ib_wc_opcode_IB_WC_REG_MR,
            Self::Recv => bindings::ib_wc_opcode_IB_WC_RECV,
            Self::RecvRdmaWithImm => bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
        }
    }

    /// The completion opcode of a send WR opcode (`IB_WR_*` number).
    pub fn of_send(wr_opcode: u32) -> Self {
        use crate::pure::wr::opcode;
        match wr_opcode {
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM => Self::RdmaWrite,
            opcode::RDMA_READ => Self::RdmaRead,
            opcode::ATOMIC_CMP_AND_SWP => Self::CompareSwap,
            opcode::ATOMIC_FETCH_AND_ADD => Self::FetchAdd,
            opcode::ATOMIC_WRITE => Self::AtomicWrite,
            opcode::FLUSH => Self::Flush,
            opcode::LOCAL_INV => Self::LocalInvalidate,
            opcode::BIND_MW => Self::BindMw,
            opcode::REG_MR => Self::RegMr,
            _ => Self::Send,
        }
    }
}

/// A work completion, about to be written into a CQ.
#[derive(Clone, Copy, Debug)]
pub struct WorkCompletion {
    /// The WR's ID (for kernel consumers possibly a `struct ib_cqe *`).
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Operation.
    pub opcode: WcOpcode,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// The local QP.
    pub qp_num: u32,
    /// Source QP (UD receives).
    pub src_qp: u32,
    /// Immediate data (network order) if `with_imm`, invalidated rkey if
    /// `with_invalidate`.
    pub ex: u32,
    /// Immediate data present.
    pub with_imm: bool,
    /// An rkey was invalidated.
    pub with_invalidate: bool,
    /// A GRH precedes the data (UD receives).
    pub with_grh: bool,
    /// The sender's MAC (UD receives).
    pub smac: Option<[u8; 6]>,
    /// The VLAN a datagram came in on (UD receives over RoCE): the core
    /// finds the GID it came to by address and VLAN.
    pub vlan_id: Option<u16>,
    /// Network header type (`RDMA_NETWORK_*`, UD receives).
    pub network_hdr_type: u8,
    /// The `struct ib_qp` of a kernel QP, for `ib_wc.qp`.
    pub(crate) qp: usize,
}

/// A CQ slot of a kernel CQ: the user-space form, followed by what kernel
/// consumers need besides (the QP pointer, the kernel's flag encoding).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct KernelCqe {
    wc: bindings::ib_uverbs_wc,
    qp: u64,
    kernel_flags: u32,
    network_hdr_type: u32,
    smac: [u8; 6],
    vlan_id: u16,
}

// SAFETY: integers and a Pod struct, laid out without implicit padding
// (48 + 8 + 4 + 4 + 6 + 2 bytes).
unsafe impl Pod for KernelCqe {}

/// Bytes a CQ slot needs.
pub const CQE_SIZE: u32 = core::mem::size_of::<KernelCqe>() as u32;

/// `ibv_wc_flags` bits as libibverbs defines them; the kernel's
/// `ib_wc_flags` number them differently and no uapi header has them.
mod user_wc_flags {
    pub(super) const GRH: u32 = 1 << 0;
    pub(super) const WITH_IMM: u32 = 1 << 1;
    pub(super) const WITH_INV: u32 = 1 << 3;
}

impl WorkCompletion {
    fn user_flags(&self) -> u32 {
        let mut flags = 0;
        if self.with_grh {
            flags |= user_wc_flags::GRH;
        }
        if self.with_imm {
            flags |= user_wc_flags::WITH_IMM;
        }
        if self.with_invalidate {
            flags |= user_wc_flags::WITH_INV;
        }
        flags
    }

    fn kernel_flags(&self) -> u32 {
        let mut flags = 0;
        if self.with_grh {
            flags |= bindings::ib_wc_flags_IB_WC_GRH;
        }
        if self.with_imm {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_IMM;
        }
        if self.with_invalidate {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        }
        if self.smac.is_some() {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_SMAC;
        }
        if self.network_hdr_type != 0 {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
        }
        if self.vlan_id.is_some() {
            flags |= bindings::ib_wc_flags_IB_WC_WITH_VLAN;
        }
        flags
    }

    fn user_form(&self) -> bindings::ib_uverbs_wc {
        bindings::ib_uverbs_wc {
            wr_id: self.wr_id,
            status: self.status.to_raw(),
            opcode: self.opcode.to_raw(),
            vendor_err: 0,
            byte_len: self.byte_len,
            ex: bindings::ib_uverbs_wc__bindgen_ty_1 {
                invalidate_rkey: self.ex,
            },
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags: self.user_flags(),
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            port_num: 1,
            reserved: 0,
        }
    }

    /// Writes the completion into slot `index` of a CQ's queue, in the
    /// form user space reads (`user`) or the kernel's.
    pub fn write(&self, queue: &Queue, index: u32, user: bool) -> Result {
        if user {
            return queue.write(index, 0, &self.user_form());
        }
        let smac = self.smac.unwrap_or_default();
        queue.write(
            index,
            0,
            &KernelCqe {
                wc: self.user_form(),
                qp: self.qp as u64,
                kernel_flags: self.kernel_flags(),
                network_hdr_type: u32::from(self.network_hdr_type),
                smac,
                vlan_id: self.vlan_id.unwrap_or_default(),
            },
        )
    }
}

/// The caller's array of `poll_cq`.
///
/// # Invariants
///
/// `wc` is valid for writing `capacity` entries while the value lives, and
/// `filled <= capacity`.
pub struct PollOutput {
    wc: *mut bindings::ib_wc,
    capacity: usize,
    filled: usize,
}

impl PollOutput {
    /// # Safety
    ///
    /// `wc` must be valid for writing `capacity` entries for the lifetime
    /// of the value.
    pub(crate) unsafe fn new(wc: *mut bindings::ib_wc, capacity: usize) -> Self {
        Self {
            wc,
            capacity,
            filled: 0,
        }
    }

    /// Whether there is room for another completion.
    pub fn has_room(&self) -> bool {
        self.filled < self.capacity
    }

    /// Entries filled so far.
    pub fn filled(&self) -> usize {
        self.filled
    }

    /// Moves the kernel completion in slot `index` of `queue` to the
    /// caller's array. `EINVAL` if full.
    pub fn take_from(&mut self, queue: &Queue, index: u32) -> Result {
        if !self.has_room() {
            return Err(EINVAL);
        }
        let cqe: KernelCqe = queue.read(index, 0)?;
        let wc = cqe.wc;
        let mut out = bindings::ib_wc {
            status: wc.status,
            opcode: wc.opcode,
            byte_len: wc.byte_len,
            qp: cqe.qp as usize as *mut bindings::ib_qp,
            src_qp: wc.src_qp,
            wc_flags: cqe.kernel_flags as i32,
            pkey_index: wc.pkey_index,
            port_num: 1,
            network_hdr_type: cqe.network_hdr_type as u8,
            vlan_id: cqe.vlan_id,
            ..Default::default()
        };
        out.__bindgen_anon_1.wr_id = wc.wr_id;
        // SAFETY: both union views are a plain 32-bit integer.
        out.ex.invalidate_rkey = unsafe { wc.ex.invalidate_rkey };
        out.smac = cqe.smac;
        // SAFETY: `filled < capacity` (checked), and the array is valid
        // for `capacity` entries (type invariant).
        unsafe { self.wc.add(self.filled).write(out) };
        self.filled += 1;
        Ok(())
    }
}

/// How `req_notify_cq` arms a CQ.
pub use crate::pure::cq_event::CqArm;

/// SRQ attributes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqAttributes {
    /// Depth.
    pub max_wr: u32,
    /// Scatter/gather entries per WR.
    pub max_sge: u32,
    /// Limit below which `IB_EVENT_SRQ_LIMIT_REACHED` fires (0: disarmed).
    pub srq_limit: u32,
}

impl SrqAttributes {
    pub(crate) fn from_raw(raw: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: raw.max_wr,
            max_sge: raw.max_sge,
            srq_limit: raw.srq_limit,
        }
    }

    pub(crate) fn write_to(&self, raw: &mut bindings::ib_srq_attr) {
        raw.max_wr = self.max_wr;
        raw.max_sge = self.max_sge;
        raw.srq_limit = self.srq_limit;
    }
}

/// Which SRQ attributes `modify_srq` changes.
#[derive(Clone, Copy, Debug)]
pub struct SrqModify {
    /// Resize to `attrs.max_wr`.
    pub resize: bool,
    /// Arm the limit at `attrs.srq_limit`.
    pub limit: bool,
    /// The new values.
    pub attrs: SrqAttributes,
}
