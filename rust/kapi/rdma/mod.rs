// SPDX-License-Identifier: GPL-2.0

//! RDMA providers: devices registered with the RDMA core, their verbs, and
//! `rdma link` types.

mod attr;
mod device;
mod link;

pub use attr::{
    DeviceAttributes, LinkLayer, PhysState, PortAttributes, PortEvent, PortState,
    DEVICE_PORT_ACTIVE_EVENT, DEVICE_SYS_IMAGE_GUID, PORT_CM_SUP,
};
pub use device::{name_in_use, Device, DeviceConfig, DeviceRef, Driver};
pub use link::{LinkRegistration, LinkType};
