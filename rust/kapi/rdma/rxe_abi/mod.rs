// SPDX-License-Identifier: GPL-2.0

//! The rxe user ABI, which srnic speaks so that rdma-core's librxe drives
//! it: the layout of the rings shared with user space and of the work
//! queue entries in them. The generic RDMA device and its verbs know
//! nothing of these layouts.

pub mod queue;
pub mod wqe;

use crate::bindings;
use crate::kapi::rdma::udata::Pod;

// SAFETY: the rxe ABI structs are `repr(C)`, made of integers and arrays of
// integers, and laid out without implicit padding (the uapi header pads by
// hand, as it must for 32/64-bit compatibility).
unsafe impl Pod for bindings::rxe_create_cq_resp {}
// SAFETY: as above.
unsafe impl Pod for bindings::rxe_resize_cq_resp {}
// SAFETY: as above.
unsafe impl Pod for bindings::rxe_create_qp_resp {}
// SAFETY: as above.
unsafe impl Pod for bindings::rxe_create_srq_resp {}
// SAFETY: as above.
unsafe impl Pod for bindings::rxe_modify_srq_cmd {}
// SAFETY: as above.
unsafe impl Pod for bindings::rxe_create_ah_resp {}
// SAFETY: as above.
unsafe impl Pod for bindings::mminfo {}
// SAFETY: two integers, 16 bytes, no padding.
unsafe impl Pod for bindings::rxe_sge {}
