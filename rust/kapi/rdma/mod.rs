// SPDX-License-Identifier: GPL-2.0

//! RDMA providers: devices registered with the RDMA core, their verbs, and
//! `rdma link` types.

pub mod access;
mod attr;
pub mod consumer;
mod device;
mod link;
mod objects;
mod odp;
mod opcodes;
mod ops;
pub mod rc;
pub mod rxe_abi;
mod shared_id;
pub mod table;
mod udata;
mod umem;
pub mod verbs;
pub mod wr;

pub use attr::{
    DeviceAttributes, LinkLayer, OdpCaps, PhysState, PortAttributes, PortEvent, PortState,
    DEVICE_ATOMIC_WRITE, DEVICE_FLUSH_GLOBAL, DEVICE_FLUSH_PERSISTENT, DEVICE_MEM_MGT_EXTENSIONS,
    DEVICE_MEM_WINDOW, DEVICE_MEM_WINDOW_TYPE_2B, DEVICE_PORT_ACTIVE_EVENT, DEVICE_RC_RNR_NAK_GEN,
    DEVICE_SRQ_RESIZE, DEVICE_SYS_IMAGE_GUID, ODP_ATOMIC, ODP_READ, ODP_RECV, ODP_SEND,
    ODP_SRQ_RECV, ODP_WRITE, PORT_CM_SUP,
};
pub use device::{name_in_use, CounterDesc, CounterNames, Device, DeviceConfig, DeviceRef, Driver};
pub use link::{LinkRegistration, LinkType};
pub use objects::{Ah, Cq, Mr, MrKind, Mw, MwType, Qp, QpEvent, Srq};
pub use odp::{Advice, MemoryRange, Miss, OdpMemory, ON_DEMAND};
pub use shared_id::DriverIdPin;
pub use udata::UserData;
pub use umem::{KernelMemory, UserMemory, UserRange, UserVerb};
