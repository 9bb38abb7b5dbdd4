// SPDX-License-Identifier: GPL-2.0

//! RDMA providers: devices registered with the RDMA core, their verbs, and
//! `rdma link` types.

pub mod access;
mod attr;
pub mod consumer;
mod device;
mod link;
mod objects;
mod opcodes;
mod ops;
pub mod queue;
mod shared_id;
pub mod table;
mod udata;
mod umem;
pub mod verbs;
pub mod wqe;

// Not every driver uses every export (iblan uses the consumer side only).
#[allow(unused_imports)]
pub use attr::{
    DeviceAttributes, LinkLayer, PhysState, PortAttributes, PortEvent, PortState,
    DEVICE_ATOMIC_WRITE, DEVICE_FLUSH_GLOBAL, DEVICE_FLUSH_PERSISTENT, DEVICE_MEM_MGT_EXTENSIONS,
    DEVICE_MEM_WINDOW, DEVICE_MEM_WINDOW_TYPE_2B, DEVICE_PORT_ACTIVE_EVENT, DEVICE_RC_RNR_NAK_GEN,
    DEVICE_SRQ_RESIZE, DEVICE_SYS_IMAGE_GUID, PORT_CM_SUP,
};
#[allow(unused_imports)]
pub use device::{name_in_use, CounterDesc, CounterNames, Device, DeviceConfig, DeviceRef, Driver};
#[allow(unused_imports)]
pub use link::{LinkRegistration, LinkType};
#[allow(unused_imports)]
pub use objects::{Ah, Cq, Mr, MrKind, Mw, MwType, Qp, QpEvent, Srq};
#[allow(unused_imports)]
pub use shared_id::DriverIdPin;
#[allow(unused_imports)]
pub use udata::UserData;
#[allow(unused_imports)]
pub use umem::{UserMemory, UserRange, UserVerb};
