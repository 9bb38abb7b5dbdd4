// SPDX-License-Identifier: GPL-2.0

//! An `ib_device` with driver data, its verbs table, registration and
//! lifetime.
//!
//! Lifetime rules, which the types below encode:
//! - The core frees the `ib_device` allocation when its `struct device`
//!   reference count drops to zero; [`DeviceRef`] holds one such reference,
//!   so the memory outlives it.
//! - The driver data `T` lives from [`Device::register`] until the core calls
//!   `dealloc_driver`, after unregistration has fenced off every verb. Only
//!   [`ActiveDevice`], which holds the core's registration refcount
//!   (`ib_device_try_get`), gives access to `T` from outside a verb.

use super::attr::{DeviceAttributes, LinkLayer, PortAttributes, PortEvent};
use super::objects::{Ah, Cq, Mr, MrKind, Mw, MwType, Qp, Srq};
use super::odp::{Advice, MemoryRange};
use super::shared_id::{DeviceHold, DriverIdPin};
use super::table::{Listable, Listing};
use super::udata::UserData;
use super::umem::{UserMemory, UserVerb};
use super::verbs::{
    AddressVector, CqArm, PollOutput, QpCaps, QpInit, QpModify, QpQuery, SrqAttributes, SrqModify,
};
use super::wr::{RecvChain, SendChain};
use crate::bindings;
use crate::kapi::irq::SoftVectors;
use crate::kapi::netdev::NetDevice;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::{from_result, to_result, VTABLE_DEFAULT_ERROR};
use kernel::ffi::{c_char, c_int};
use kernel::fmt;
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::str::{CStr, CString};
use kernel::types::Opaque;
use kernel::ThisModule;

/// The user-space ABI this provider speaks: rdma-core's rxe provider
/// (`librxe`) binds to devices of this driver id.
const DRIVER_ID: bindings::rdma_driver_id = bindings::rdma_driver_id_RDMA_DRIVER_RXE;

/// The uverbs ABI version of the rxe ABI (`rdma_user_rxe.h` layouts).
const RXE_UVERBS_ABI_VERSION: u32 = 2;

/// The names of a driver's port counters, as the core's statistics
/// descriptors.
pub struct CounterNames {
    descs: &'static [CounterDesc],
}

// SAFETY: the descriptors only point at static strings.
unsafe impl Sync for CounterNames {}

impl CounterNames {
    /// No counters.
    pub const EMPTY: Self = Self { descs: &[] };

    /// Counters named by `descs`.
    pub const fn new(descs: &'static [CounterDesc]) -> Self {
        Self { descs }
    }
}

/// The descriptor of one counter of [`CounterNames`], as the core reads it.
#[derive(Clone, Copy)]
pub struct CounterDesc(bindings::rdma_stat_desc);

impl CounterDesc {
    /// The counter called `name`; static, as the core keeps the pointer.
    pub const fn new(name: &'static CStr) -> Self {
        Self(counter_desc(name))
    }
}

/// The descriptor of a counter called `name`, which must outlive it.
const fn counter_desc(name: &CStr) -> bindings::rdma_stat_desc {
    bindings::rdma_stat_desc {
        name: name.as_char_ptr(),
        flags: 0,
        priv_: core::ptr::null(),
    }
}

/// The verbs a driver implements for its devices. Every device has exactly
/// one port, numbered 1.
///
/// The verbs every RDMA device has are required. The others are optional,
/// as in the core's `ib_device_ops`: the ops table offers a verb only if
/// the driver's `#[vtable] impl` defines it (`HAS_*`), and the core answers
/// `EOPNOTSUPP` for the rest. One verb stands for its group: `create_srq`
/// for the SRQ verbs, `map_mr_pages` for fast registration (`alloc_mr`,
/// `map_mr_sg`), `create_mw` for memory windows, `read_counters` for the
/// port's counters.
#[vtable]
pub trait Driver: Sized + Send + Sync + 'static {
    /// Device attributes, as `ibv_query_device` reports them.
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttributes>;

    /// Port attributes, as `ibv_query_port` reports them.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttributes>;

    /// The link layer of `port`.
    fn link_layer(dev: &Device<Self>, port: u32) -> LinkLayer;

    /// The P_Key at `index` of `port`'s table.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// Accounts for a new protection domain.
    fn alloc_pd(dev: &Device<Self>) -> Result;

    /// Releases what `alloc_pd` accounted for.
    fn dealloc_pd(dev: &Device<Self>);

    /// Driver data of a completion queue.
    type Cq: Send + Sync;
    /// Driver data of a queue pair.
    type Qp: Send + Sync;
    /// Driver data of a shared receive queue.
    type Srq: Send + Sync;
    /// Driver data of an address handle.
    type Ah: Send + Sync;
    /// Driver data of a memory region.
    type Mr: Send + Sync;
    /// Driver data of a memory window.
    type Mw: Send + Sync;

    /// Creates a CQ of at least `cqe` entries bound to `comp_vector`;
    /// returns the entries it holds and its data. A user CQ (`user`) also
    /// writes the ABI's response.
    fn create_cq(
        dev: &Device<Self>,
        cqe: u32,
        comp_vector: u32,
        user: Option<&UserData>,
    ) -> Result<(u32, impl PinInit<Self::Cq, Error>)>;
    /// Releases what `create_cq` accounted for, before the data drops.
    fn destroy_cq(cq: &Cq<Self>);
    /// Resizes a CQ keeping its unpolled completions; returns the entries
    /// it now holds.
    fn resize_cq(_cq: &Cq<Self>, _cqe: u32, _user: Option<&UserData>) -> Result<u32> {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Moves completions to a kernel consumer's array.
    fn poll_cq(cq: &Cq<Self>, out: &mut PollOutput);
    /// Arms a kernel CQ; returns whether completions are already waiting.
    fn req_notify_cq(cq: &Cq<Self>, arm: CqArm) -> bool;
    /// Sets a CQ's event moderation: its event waits for `count` CQEs or
    /// `period_us` microseconds, whichever comes first (0 and 0: none).
    fn modify_cq(_cq: &Cq<Self>, _count: u16, _period_us: u16) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The moderation wait set with [`Cq::start_moderation_timer`] ended
    /// (hard-IRQ context).
    fn cq_moderation_expired(_cq: &Cq<Self>) {}

    /// Creates a QP: returns the capabilities it really has and its data.
    /// A user QP also writes the ABI's response.
    fn create_qp(
        dev: &Device<Self>,
        init: &QpInit,
        user: Option<&UserData>,
    ) -> Result<(QpCaps, impl PinInit<Self::Qp, Error>)>;
    /// Makes a created QP reachable (by number); returns its number.
    fn publish_qp(qp: &Qp<Self>) -> Result<u32>;
    /// Takes a QP out of service before its data drops: unreachable,
    /// outstanding work flushed. Afterwards nothing but the QP's own work
    /// item may queue that work item (the core then cancels it).
    fn destroy_qp(qp: &Qp<Self>);
    /// Attaches QP `qp` to multicast group `mgid` (the core allows only UD
    /// QPs to ask).
    fn attach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Detaches QP `qp` from multicast group `mgid`.
    fn detach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Changes a QP's state and attributes.
    fn modify_qp(qp: &Qp<Self>, modify: &QpModify) -> Result;
    /// A QP's attributes.
    fn query_qp(qp: &Qp<Self>) -> QpQuery;
    /// Posts a kernel caller's send WRs.
    fn post_send(qp: &Qp<Self>, wrs: &mut SendChain<'_>) -> Result;
    /// A user QP's doorbell: new WQEs are in its send ring.
    fn doorbell(qp: &Qp<Self>) -> Result;
    /// Posts a kernel caller's receive WRs.
    fn post_recv(qp: &Qp<Self>, wrs: &mut RecvChain<'_>) -> Result;

    /// Creates an SRQ; returns its real attributes and data. A user SRQ
    /// also writes the ABI's response.
    ///
    /// The default is never called (the ops table leaves the SRQ verbs
    /// out), but its body needs a type: the data's own.
    fn create_srq(
        _dev: &Device<Self>,
        _attrs: &SrqAttributes,
        _user: Option<&UserData>,
    ) -> Result<(SrqAttributes, impl PinInit<Self::Srq, Error>)> {
        Err::<(SrqAttributes, Self::Srq), _>(EINVAL)
    }
    /// Releases what `create_srq` accounted for, before the data drops.
    fn destroy_srq(_srq: &Srq<Self>) {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Resizes an SRQ or arms its limit.
    fn modify_srq(_srq: &Srq<Self>, _modify: &SrqModify, _user: Option<&UserData>) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// An SRQ's attributes.
    fn query_srq(_srq: &Srq<Self>) -> SrqAttributes {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Posts a kernel caller's receive WRs to an SRQ.
    fn post_srq_recv(_srq: &Srq<Self>, _wrs: &mut RecvChain<'_>) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an address handle, for a user process if `user`.
    fn create_ah(
        dev: &Device<Self>,
        av: &AddressVector,
        user: bool,
    ) -> Result<impl PinInit<Self::Ah, Error>>;
    /// Makes an AH reachable by number; returns the (non-zero) number.
    fn publish_ah(ah: &Ah<Self>) -> Result<u32>;
    /// Takes an AH out of service before its data drops.
    fn destroy_ah(ah: &Ah<Self>);
    /// An AH's address vector.
    fn query_ah(ah: &Ah<Self>) -> AddressVector;
    /// An AH's number, as WQEs carry it.
    fn ah_number(ah: &Ah<Self>) -> u32;

    /// Creates a memory region: all of kernel memory (`Dma`), pinned user
    /// memory (`User`), or one for fast registration (`FastReg`).
    fn create_mr(
        dev: &Device<Self>,
        kind: MrKind,
        access: u32,
    ) -> Result<impl PinInit<Self::Mr, Error>>;
    /// Makes an MR reachable by key; returns the key (lkey = rkey).
    fn publish_mr(mr: &Mr<Self>) -> Result<u32>;
    /// Re-registers a user MR in place: new memory and/or access, in the
    /// process `verb` runs for. Returns the memory the MR no longer uses:
    /// the caller releases it once no RCU reader can still reach it.
    ///
    /// `relocate`, if given, moves the MR to another PD and returns once
    /// every RCU reader that could have seen the old PD is done: the
    /// driver calls it once, after anything that may fail and while no key
    /// of the MR can be looked up, before it installs the new memory and
    /// access (so that a QP of neither PD sees a mix of old and new).
    fn rereg_mr(
        _mr: &Mr<Self>,
        _verb: &UserVerb<'_>,
        _memory: Option<(UserMemory, u64)>,
        _access: Option<u32>,
        _relocate: Option<&dyn Fn()>,
    ) -> Result<Option<UserMemory>> {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// An MR's current access flags.
    fn mr_access(mr: &Mr<Self>) -> u32;
    /// Takes an MR out of service before its data drops; an error keeps
    /// it registered (the core reports it to the caller).
    fn destroy_mr(mr: &Mr<Self>) -> Result;
    /// Sets the pages of a fast-registration MR from the core's page walk.
    fn map_mr_pages(
        _mr: &Mr<Self>,
        _pages: &[u64],
        _page_size: u32,
        _iova: u64,
        _length: u64,
    ) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Advice on ranges of regions of the protection domain `pd`
    /// (`ibv_advise_mr`, `ib_advise_mr`): prefetching memory paged on
    /// demand. Process context; `sync` asks for it to be done on return.
    fn advise_mr(
        _dev: &Device<Self>,
        _pd: usize,
        _advice: Advice,
        _sync: bool,
        _ranges: &[MemoryRange],
    ) -> Result {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Deferred upkeep the driver asked for with
    /// [`Device::schedule_maintenance`]; runs in process context, never
    /// after the device's data is dropped.
    fn maintenance(_dev: &Device<Self>) {}

    /// A QP's own deferred work ([`Qp::run_work_soon`],
    /// [`Qp::run_work_after`]); runs in process context on the QP's CPU,
    /// one run at a time, never after the QP is destroyed.
    fn qp_work(_qp: &Qp<Self>) {}

    /// A QP's receive work ([`Qp::run_receive_work_elsewhere`]); runs in
    /// process context, one run at a time, never after the QP is
    /// destroyed.
    fn qp_receive_work(_qp: &Qp<Self>) {}

    /// Whether user regions may be paged on demand (`IB_ACCESS_ON_DEMAND`
    /// registers [`MrKind::OnDemand`]); otherwise such registrations fail
    /// with `EOPNOTSUPP`.
    const ON_DEMAND_PAGING: bool = false;

    /// The names of the port's counters (`rdma statistic show link`).
    const COUNTERS: &'static CounterNames = &CounterNames::EMPTY;

    /// Fills `values` (one per name in [`Self::COUNTERS`]) with the
    /// counters of `port` now.
    fn read_counters(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) {}

    /// Creates a memory window. The default is never called (the ops table
    /// leaves the window verbs out), but its body needs a type.
    fn create_mw(_dev: &Device<Self>, _mw_type: MwType) -> Result<impl PinInit<Self::Mw, Error>> {
        Err::<Self::Mw, _>(EINVAL)
    }
    /// Makes an MW reachable by key; returns its rkey.
    fn publish_mw(_mw: &Mw<Self>) -> Result<u32> {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Takes an MW out of service before its data drops.
    fn destroy_mw(_mw: &Mw<Self>) {
        kernel::build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// How to set up a device at registration.
pub struct DeviceConfig<'a> {
    /// The device name, as given to `rdma link add`.
    pub name: &'a CStr,
    /// The Ethernet netdev that carries the port's traffic.
    pub netdev: &'a NetDevice,
    /// Node GUID, in network byte order as the core stores it.
    pub node_guid: u64,
    /// Node description (at most 64 bytes are kept).
    pub node_desc: &'a CStr,
    /// Number of completion vectors, each an IRQ named
    /// `<name>-comp<N>` (at least one).
    pub num_comp_vectors: u32,
    /// The module that implements the verbs.
    pub module: &'static ThisModule,
    /// The module's watch on rxe, which shares the driver id.
    pub rxe_pin: &'a DriverIdPin,
}

/// An `ib_device` followed by the driver's data.
///
/// # Invariants
///
/// Lives in an `ib_device` allocation of the core, `ib` first, that
/// [`Self::register`] set up: `netdev` holds a `dev_hold` reference until
/// `dealloc_driver` and `maintenance` is an initialised delayed work;
/// `data`, `vectors` and `rxe_hold` are initialised until `dealloc_driver`
/// drops them, once, after cancelling `maintenance`, and sets
/// `deallocated`. A `&Device<T>` exists only while `data` is initialised.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    /// Set once `dealloc_driver` has dropped `data`; outside `data` so that
    /// holders of a [`DeviceRef`] can still read it.
    deallocated: AtomicBool,
    /// The port's netdev, referenced (`dev_hold`) until `dealloc_driver`.
    /// Outside `data`: the core may ask for it while tearing a failed
    /// registration down, after `data` is gone.
    netdev: NonNull<bindings::net_device>,
    /// Work the driver schedules for later (`Driver::maintenance`);
    /// cancelled before `data` drops.
    maintenance: Opaque<bindings::delayed_work>,
    /// The completion vectors and the port counters' names (the driver's,
    /// then two per vector); dropped after `data`, whose CQs use them.
    vectors: VectorState,
    /// Keeps `rdma_rxe`, whose unload would take this device, loaded until
    /// the device is deallocated.
    rxe_hold: DeviceHold,
    /// Its entry in a driver's table, taken out before `data` drops.
    listing: Listing,
    data: T,
}

// SAFETY: `dealloc_driver` unlists the device before anything of it drops,
// and the core frees it only afterwards.
unsafe impl<T: Driver> Listable for Device<T> {
    fn listing(&self) -> &Listing {
        &self.listing
    }
}

/// A device's completion vectors and its counter descriptors.
struct VectorState {
    set: Pin<KBox<SoftVectors>>,
    /// Names of the per-vector counters, which `descs` points into.
    _names: KVec<CString>,
    descs: KVec<bindings::rdma_stat_desc>,
}

impl VectorState {
    fn new<T: Driver>(name: &CStr, count: u32) -> Result<Self> {
        let prefix = CString::try_from_fmt(fmt!("{}-comp", name))?;
        let set = SoftVectors::new(&prefix, count.max(1))?;
        let mut names = KVec::new();
        let mut descs = KVec::new();
        for desc in T::COUNTERS.descs {
            descs.push(desc.0, GFP_KERNEL)?;
        }
        for index in 0..set.count() {
            for what in ["events", "coalesced"] {
                let name = CString::try_from_fmt(fmt!("comp_vector{}_{}", index, what))?;
                // The string's heap buffer does not move with the KVec.
                descs.push(counter_desc(&name), GFP_KERNEL)?;
                names.push(name, GFP_KERNEL)?;
            }
        }
        Ok(Self {
            set,
            _names: names,
            descs,
        })
    }
}

// SAFETY: the core serialises what it does to `ib` with its own locks and
// runs verbs on any CPU concurrently; the driver only reads fields fixed at
// registration, queues `maintenance` (an internally locked work item) and
// shares `data`, which is `Sync`. `netdev` is only passed to the core.
unsafe impl<T: Driver> Sync for Device<T> {}
// SAFETY: as above; nothing in it is tied to a thread.
unsafe impl<T: Driver> Send for Device<T> {}

impl<T: Driver> Deref for Device<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

impl<T: Driver> Device<T> {
    /// The device owning `ib`.
    ///
    /// # Safety
    ///
    /// `ib` must be the `ib` field of a `Device<T>` whose data is
    /// initialised and not yet dropped, for `'a`.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` `Device<T>`, and
        // the caller guarantees `data` is live.
        unsafe { &*ib.cast::<Self>() }
    }

    pub(crate) fn as_ib(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// The device's completion vectors.
    pub fn comp_vectors(&self) -> &SoftVectors {
        &self.vectors.set
    }

    /// Whether `netdev` carries this device's port.
    pub fn is_carried_by(&self, netdev: &NetDevice) -> bool {
        core::ptr::eq(self.netdev.as_ptr(), netdev.as_raw())
    }

    /// The netdev that carries the port's traffic.
    pub fn netdev(&self) -> &NetDevice {
        // SAFETY: by the type invariant, the device holds a reference on the
        // netdev until `dealloc_driver`, and `&self` exists only before that.
        unsafe { NetDevice::from_raw(self.netdev.as_ptr()) }
    }

    /// The device name (`srnic0`), as it is now: copied, since a rename
    /// may change it at any time.
    pub fn name(&self) -> DeviceName {
        // SAFETY: the device is allocated.
        unsafe { device_name(self.as_ib()) }
    }

    /// The node GUID, in network byte order as the core stores it.
    pub fn node_guid(&self) -> u64 {
        // SAFETY: set before registration and never changed.
        unsafe { (*self.as_ib()).node_guid }
    }

    /// The Ethernet link speed and width of `port`, in IB terms, from the
    /// carrier netdev's ethtool settings.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: the device is valid; the out-pointers are local.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_ib(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Whether `gid` is one of port 1's RoCE GIDs (v2 or v1).
    pub fn has_gid(&self, gid: &[u8; 16]) -> bool {
        let mut raw = bindings::ib_gid::default();
        raw.raw = *gid;
        [
            bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
            bindings::ib_gid_type_IB_GID_TYPE_ROCE,
        ]
        .into_iter()
        .any(|gid_type| {
            // SAFETY: the device is registered while its verbs run; the
            // lookup takes its own lock and returns a counted entry or an
            // error pointer.
            let attr = unsafe {
                bindings::rdma_find_gid_by_port(
                    self.as_ib(),
                    &raw,
                    gid_type,
                    1,
                    core::ptr::null_mut(),
                )
            };
            if attr.is_null() || kernel::error::from_err_ptr(attr.cast_mut()).is_err() {
                return false;
            }
            // SAFETY: a counted entry from the lookup, released once.
            unsafe { bindings::rdma_put_gid_attr(attr) };
            true
        })
    }

    /// Calls `f` with the netdev that port 1's RoCEv2 GID `gid` belongs to
    /// (the device's netdev, or a VLAN or other upper of it); `None` if the
    /// port has no such GID, or its netdev is going. Where several entries
    /// hold the same GID (a VLAN's IPv6 link-local address is its real
    /// device's), the first one's.
    pub fn with_gid_netdev<R>(&self, gid: &[u8; 16], f: impl FnOnce(&NetDevice) -> R) -> Option<R> {
        let mut raw = bindings::ib_gid::default();
        raw.raw = *gid;
        // SAFETY: the device is registered while its verbs and its wire
        // run; the lookup takes the table's lock itself and returns a
        // counted entry or an error pointer.
        let attr = unsafe {
            bindings::rdma_find_gid_by_port(
                self.as_ib(),
                &raw,
                bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
                1,
                core::ptr::null_mut(),
            )
        };
        // SAFETY: `attr` is what the lookup returned.
        unsafe { Self::with_attr_netdev(attr, f) }
    }

    /// Calls `f` with the netdev of entry `index` of port 1's GID table
    /// (see [`Self::with_gid_netdev`]); `None` if the entry is empty.
    pub fn with_gid_index_netdev<R>(
        &self,
        index: u32,
        f: impl FnOnce(&NetDevice) -> R,
    ) -> Option<R> {
        let index = c_int::try_from(index).ok()?;
        // SAFETY: as in `with_gid_netdev`; the core checks the index
        // against the table's size.
        let attr = unsafe { bindings::rdma_get_gid_attr(self.as_ib(), 1, index) };
        // SAFETY: `attr` is what the lookup returned.
        unsafe { Self::with_attr_netdev(attr, f) }
    }

    /// # Safety
    ///
    /// `attr` is an error pointer, NULL, or a counted GID entry, whose
    /// count this call takes over.
    unsafe fn with_attr_netdev<R>(
        attr: *const bindings::ib_gid_attr,
        f: impl FnOnce(&NetDevice) -> R,
    ) -> Option<R> {
        if attr.is_null() || kernel::error::from_err_ptr(attr.cast_mut()).is_err() {
            return None;
        }
        let result = {
            let _guard = crate::kapi::rcu::RcuReadGuard::new();
            // SAFETY: a counted entry, read under the RCU read lock as the
            // core requires; the result is a netdev or an error pointer.
            let ndev = unsafe { bindings::rdma_read_gid_attr_ndev_rcu(attr) };
            match kernel::error::from_err_ptr(ndev) {
                // SAFETY: the entry's netdev stays valid until the RCU read
                // section ends, after `f` returns.
                Ok(ndev) if !ndev.is_null() => Some(f(unsafe { NetDevice::from_raw(ndev) })),
                _ => None,
            }
        };
        // SAFETY: the count the lookup took, released once.
        unsafe { bindings::rdma_put_gid_attr(attr) };
        result
    }

    /// Runs `Driver::maintenance` after `msecs` milliseconds, unless it is
    /// already scheduled.
    pub fn schedule_maintenance(&self, msecs: u32) {
        // SAFETY: by the type invariant, initialised at registration and
        // cancelled (synchronously) before the data drops, so the work never
        // outlives it.
        unsafe { bindings::srnic_schedule_delayed_work(self.maintenance.get(), msecs) };
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn maintenance_cb(work: *mut bindings::work_struct) {
        // SAFETY: only our maintenance work runs this; it is a field of a
        // `Device<T>` whose data is live until the work is cancelled.
        unsafe {
            let dwork = bindings::srnic_to_delayed_work(work);
            let offset = core::mem::offset_of!(Self, maintenance);
            let dev = &*dwork.cast::<u8>().sub(offset).cast::<Self>();
            T::maintenance(dev);
        }
    }

    /// Delivers a port event to the core and its clients.
    pub fn dispatch_port_event(&self, port: u32, event: PortEvent) {
        let mut raw = bindings::ib_event {
            device: self.as_ib(),
            event: event.to_raw(),
            ..Default::default()
        };
        raw.element.port_num = port;
        // SAFETY: `raw` names this live device; the core copies what it
        // keeps.
        unsafe { bindings::ib_dispatch_event(&raw) };
    }

    /// Allocates a device with `data` and registers it with the RDMA core.
    pub fn register(data: T, config: &DeviceConfig<'_>) -> Result<DeviceRef<T>> {
        // First: if rxe is unloading, it would take the device with it.
        let rxe_hold = config.rxe_pin.device()?;
        let vectors = VectorState::new::<T>(config.name, config.num_comp_vectors)?;
        let num_comp_vectors = vectors.set.count();
        // SAFETY: allocates a zeroed device of our size; `ib_device` is the
        // first field of `Device<T>`, as the core requires.
        let ib = unsafe { bindings::srnic_ib_alloc_device(core::mem::size_of::<Self>()) };
        let Some(ib) = NonNull::new(ib) else {
            return Err(ENOMEM);
        };
        let dev = ib.as_ptr().cast::<Self>();
        // SAFETY: `dev` points to a fresh allocation large enough for
        // `Self`; its fields are not initialised yet, so write without
        // dropping. The netdev reference is dropped in `dealloc_driver`.
        unsafe {
            core::ptr::addr_of_mut!((*dev).deallocated).write(AtomicBool::new(false));
            bindings::srnic_dev_hold(config.netdev.as_raw());
            core::ptr::addr_of_mut!((*dev).netdev).write(NonNull::from(config.netdev).cast());
            bindings::srnic_init_delayed_work(
                core::ptr::addr_of_mut!((*dev).maintenance).cast(),
                Some(Self::maintenance_cb),
            );
            core::ptr::addr_of_mut!((*dev).vectors).write(vectors);
            core::ptr::addr_of_mut!((*dev).rxe_hold).write(rxe_hold);
            core::ptr::addr_of_mut!((*dev).listing).write(Listing::new());
            core::ptr::addr_of_mut!((*dev).data).write(data);
        }

        // From here on `ib_dealloc_device` runs `dealloc_driver`, which drops
        // `data`: the ops table is installed right after `data` is written.
        let ops = Self::ops_table(config.module);
        // SAFETY: `ib` is a valid, unregistered device; the core copies the
        // table.
        unsafe { bindings::ib_set_device_ops(ib.as_ptr(), &ops) };

        // SAFETY: the device is unregistered and owned by this function, so
        // its fields may be written.
        unsafe {
            let raw = &mut *ib.as_ptr();
            raw.node_type = bindings::RDMA_NODE_IB_CA as u8;
            raw.phys_port_cnt = 1;
            raw.num_comp_vectors = num_comp_vectors as c_int;
            raw.node_guid = config.node_guid;
            raw.local_dma_lkey = 0;
            // The legacy write commands a provider opts into: librxe's send
            // doorbell and its CQ arming use them. POLL_CQ, POST_RECV and
            // POST_SRQ_RECV stay out: a user CQ's, QP's or SRQ's ring is the
            // process's, and the kernel's poll would take its entries (a
            // CQE's QP pointer among them) as the kernel's own
            // (`verbs_user hostile` checks they are refused).
            raw.uverbs_cmd_mask |= (1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
                | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
            // Chosen by the user: udev's RDMA renaming leaves it alone.
            raw.name_assign_type = bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
            let desc = config.node_desc.as_bytes();
            let room = raw.node_desc.len().saturating_sub(1);
            for (dst, src) in raw.node_desc.iter_mut().zip(desc.iter().take(room)) {
                *dst = *src as c_char;
            }
        }

        // Held across registration: once registered, a concurrent
        // `rdma link delete` may unregister the device at any moment, and
        // this reference keeps its memory valid for the returned handle.
        // SAFETY: `ib` is allocated by the core and not freed.
        let reference = unsafe { DeviceRef::new(ib) };

        let unwind = |err: Error| {
            // SAFETY: the device was never registered (or registration
            // failed and was unwound by the core); this frees it and drops
            // `data` through `dealloc_driver`.
            unsafe { bindings::ib_dealloc_device(ib.as_ptr()) };
            err
        };
        // The netdev is reported through `get_netdev`, not bound with
        // `ib_device_set_netdev`: that would enter the device in the core's
        // netdev table, where rxe, which shares our driver id, would find it
        // and take it for one of its own.
        //
        // SAFETY: the device is fully set up; a NULL DMA device selects
        // virtual DMA, which a software device uses.
        to_result(unsafe {
            bindings::ib_register_device(
                ib.as_ptr(),
                config.name.as_char_ptr(),
                core::ptr::null_mut(),
            )
        })
        .map_err(unwind)?;
        Ok(reference)
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn alloc_hw_port_stats_cb(
        ib: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        // SAFETY: the core asks while registering or registered, when the
        // data is live.
        let descs = unsafe { &Self::from_ib(ib).vectors.descs };
        // The result outlives the descriptors (the core frees it in
        // `ib_device_release`), but freeing it reads none of them.
        // SAFETY: the descriptors live until `dealloc_driver`, and no
        // statistics are read after unregistration.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(
                descs.as_ptr(),
                descs.len() as _,
                bindings::SRNIC_HW_STATS_LIFESPAN_MS as _,
            )
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn get_hw_stats_cb(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: core::ffi::c_int,
    ) -> core::ffi::c_int {
        // SAFETY: verbs run only while the device's data is live; the core
        // passes the stats it got from `alloc_hw_port_stats` (holding their
        // lock), with `num_counters` values.
        unsafe {
            let dev = Self::from_ib(ib);
            let count = usize::try_from((*stats).num_counters).unwrap_or(0);
            let values = (*stats).value.as_mut_slice(count);
            let own = T::COUNTERS.descs.len().min(values.len());
            let (driver, vectors) = values.split_at_mut(own);
            T::read_counters(dev, port, driver);
            for (index, pair) in vectors.chunks_mut(2).enumerate() {
                let (events, coalesced) = dev.comp_vectors().counts(index as u32);
                for (slot, value) in pair.iter_mut().zip([events, coalesced]) {
                    *slot = value;
                }
            }
            (*stats).num_counters
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn get_vector_affinity_cb(
        ib: *mut bindings::ib_device,
        comp_vector: c_int,
    ) -> *const bindings::cpumask {
        // SAFETY: a verb of a live device.
        let dev = unsafe { Self::from_ib(ib) };
        match u32::try_from(comp_vector) {
            Ok(index) => dev.comp_vectors().effective_affinity(index),
            Err(_) => core::ptr::null(),
        }
    }

    /// `callback` if the driver offers the verb behind it.
    fn offered<F>(offered: bool, callback: F) -> Option<F> {
        if offered {
            Some(callback)
        } else {
            None
        }
    }

    fn ops_table(module: &'static ThisModule) -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: module.as_ptr().cast(),
            driver_id: DRIVER_ID,
            uverbs_abi_ver: RXE_UVERBS_ABI_VERSION,
            query_device: Some(Self::query_device_cb),
            query_port: Some(Self::query_port_cb),
            alloc_hw_port_stats: Self::offered(T::HAS_READ_COUNTERS, Self::alloc_hw_port_stats_cb),
            get_hw_stats: Self::offered(T::HAS_READ_COUNTERS, Self::get_hw_stats_cb),
            get_vector_affinity: Some(Self::get_vector_affinity_cb),
            get_port_immutable: Some(Self::get_port_immutable_cb),
            get_link_layer: Some(Self::get_link_layer_cb),
            get_netdev: Some(Self::get_netdev_cb),
            query_pkey: Some(Self::query_pkey_cb),
            alloc_ucontext: Some(Self::alloc_ucontext_cb),
            dealloc_ucontext: Some(Self::dealloc_ucontext_cb),
            disassociate_ucontext: Some(Self::disassociate_ucontext_cb),
            alloc_pd: Some(Self::alloc_pd_cb),
            dealloc_pd: Some(Self::dealloc_pd_cb),
            dealloc_driver: Some(Self::dealloc_driver_cb),
            mmap: Some(Self::mmap_cb),
            mmap_free: Some(Self::mmap_free_cb),
            create_cq: Some(Self::create_cq_cb),
            destroy_cq: Some(Self::destroy_cq_cb),
            resize_cq: Self::offered(T::HAS_RESIZE_CQ, Self::resize_cq_cb),
            poll_cq: Some(Self::poll_cq_cb),
            req_notify_cq: Some(Self::req_notify_cq_cb),
            modify_cq: Self::offered(T::HAS_MODIFY_CQ, Self::modify_cq_cb),
            fill_res_cq_entry: Some(Self::fill_res_cq_entry_cb),
            create_qp: Some(Self::create_qp_cb),
            modify_qp: Some(Self::modify_qp_cb),
            query_qp: Some(Self::query_qp_cb),
            destroy_qp: Some(Self::destroy_qp_cb),
            post_send: Some(Self::post_send_cb),
            post_recv: Some(Self::post_recv_cb),
            attach_mcast: Self::offered(T::HAS_ATTACH_MCAST, Self::attach_mcast_cb),
            detach_mcast: Self::offered(T::HAS_DETACH_MCAST, Self::detach_mcast_cb),
            create_srq: Self::offered(T::HAS_CREATE_SRQ, Self::create_srq_cb),
            modify_srq: Self::offered(T::HAS_CREATE_SRQ, Self::modify_srq_cb),
            query_srq: Self::offered(T::HAS_CREATE_SRQ, Self::query_srq_cb),
            destroy_srq: Self::offered(T::HAS_CREATE_SRQ, Self::destroy_srq_cb),
            post_srq_recv: Self::offered(T::HAS_CREATE_SRQ, Self::post_srq_recv_cb),
            create_ah: Some(Self::create_ah_cb),
            create_user_ah: Some(Self::create_ah_cb),
            query_ah: Some(Self::query_ah_cb),
            destroy_ah: Some(Self::destroy_ah_cb),
            get_dma_mr: Some(Self::get_dma_mr_cb),
            reg_user_mr: Some(Self::reg_user_mr_cb),
            rereg_user_mr: Self::offered(T::HAS_REREG_MR, Self::rereg_user_mr_cb),
            alloc_mr: Self::offered(T::HAS_MAP_MR_PAGES, Self::alloc_mr_cb),
            map_mr_sg: Self::offered(T::HAS_MAP_MR_PAGES, Self::map_mr_sg_cb),
            dereg_mr: Some(Self::dereg_mr_cb),
            advise_mr: Self::offered(T::HAS_ADVISE_MR, Self::advise_mr_cb),
            alloc_mw: Self::offered(T::HAS_CREATE_MW, Self::alloc_mw_cb),
            dealloc_mw: Self::offered(T::HAS_CREATE_MW, Self::dealloc_mw_cb),
            size_ib_pd: core::mem::size_of::<bindings::ib_pd>(),
            size_ib_ucontext: core::mem::size_of::<bindings::ib_ucontext>(),
            size_ib_cq: core::mem::size_of::<Cq<T>>(),
            size_ib_qp: core::mem::size_of::<Qp<T>>(),
            size_ib_srq: core::mem::size_of::<Srq<T>>(),
            size_ib_ah: core::mem::size_of::<Ah<T>>(),
            size_ib_mw: core::mem::size_of::<Mw<T>>(),
            ..Default::default()
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn query_device_cb(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: verbs run only while the device's data is live.
            let dev = unsafe { Self::from_ib(ib) };
            // The rxe ABI passes no driver data with this verb.
            // SAFETY: `udata` is NULL or valid for the call.
            if let Some(udata) = unsafe { udata.as_ref() } {
                if udata.inlen != 0 || udata.outlen != 0 {
                    return Err(EINVAL);
                }
            }
            let attrs = T::query_device(dev)?;
            // SAFETY: the core passes a valid attribute struct to fill.
            attrs.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn query_port_cb(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: verbs run only while the device's data is live.
            let dev = unsafe { Self::from_ib(ib) };
            let attrs = T::query_port(dev, port)?;
            // SAFETY: the core passes a zeroed attribute struct to fill.
            attrs.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn get_port_immutable_cb(
        ib: *mut bindings::ib_device,
        port: u32,
        immutable: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: called during registration, with the data live.
            let dev = unsafe { Self::from_ib(ib) };
            let attrs = T::query_port(dev, port)?;
            let core_cap_flags = match T::link_layer(dev, port) {
                LinkLayer::Ethernet => bindings::SRNIC_CORE_PORT_IBA_ROCE_UDP_ENCAP,
            };
            // SAFETY: the core passes a valid struct to fill.
            let immutable = unsafe { &mut *immutable };
            immutable.pkey_tbl_len = c_int::from(attrs.pkey_tbl_len);
            immutable.gid_tbl_len = i32::try_from(attrs.gid_tbl_len).map_err(|_| EINVAL)?;
            immutable.core_cap_flags = core_cap_flags;
            immutable.max_mad_size = bindings::SRNIC_IB_MGMT_MAD_SIZE;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn get_link_layer_cb(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: verbs run only while the device's data is live.
        let dev = unsafe { Self::from_ib(ib) };
        match T::link_layer(dev, port) {
            LinkLayer::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }

    /// The core's RoCE GID management, `rdma link show` and address
    /// resolution find the port's netdev here. May be called in atomic
    /// context, and (on a failed registration) after `data` is gone.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn get_netdev_cb(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> *mut bindings::net_device {
        if port != 1 {
            return core::ptr::null_mut();
        }
        // SAFETY: the field is set before registration and stays valid for
        // the life of the allocation; the place expression does not touch
        // `data`.
        let netdev = unsafe { (*ib.cast::<Self>()).netdev.as_ptr() };
        // SAFETY: the device's reference keeps the netdev alive until
        // `dealloc_driver`; past that only a failed registration calls
        // here, while `rdma link add` still holds the netdev.
        let netdev_ref = unsafe { NetDevice::from_raw(netdev) };
        // Once the netdev unregisters the port has none (the device follows
        // through its driver's notifier).
        if !netdev_ref.is_registered() {
            return core::ptr::null_mut();
        }
        // SAFETY: as above; the caller drops this reference with `dev_put`.
        unsafe { bindings::srnic_dev_hold(netdev) };
        netdev
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn query_pkey_cb(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: verbs run only while the device's data is live.
            let dev = unsafe { Self::from_ib(ib) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: the core passes a valid out-pointer.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn alloc_ucontext_cb(
        _uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        // The rxe ABI's GET_CONTEXT carries no driver data either way.
        // SAFETY: `udata` is NULL or valid for the call.
        match unsafe { udata.as_ref() } {
            Some(udata) if udata.inlen != 0 => EINVAL.to_errno(),
            _ => 0,
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn dealloc_ucontext_cb(_uctx: *mut bindings::ib_ucontext) {}

    /// With this op the core can unregister a device that processes still
    /// have open: it destroys their objects, zaps the mappings it made for
    /// them and reports `IBV_EVENT_DEVICE_FATAL`, instead of waiting for
    /// them to exit (which would also block the removal of the netdev).
    /// The device keeps no other per-context state to tear down.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn disassociate_ucontext_cb(_uctx: *mut bindings::ib_ucontext) {}

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn alloc_pd_cb(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a PD whose `device` is set and live.
            let dev = unsafe { Self::from_ib((*pd).device) };
            T::alloc_pd(dev)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn dealloc_pd_cb(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a PD allocated by `alloc_pd_cb`.
        let dev = unsafe { Self::from_ib((*pd).device) };
        T::dealloc_pd(dev);
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core (or the workqueue) through the
    /// `ib_device_ops` or work item this module set up, with live objects of
    /// this device as its contract for the operation gives.
    unsafe extern "C" fn dealloc_driver_cb(ib: *mut bindings::ib_device) {
        let dev = ib.cast::<Self>();
        // SAFETY: the core calls this exactly once, after the last verb, for
        // a device whose data and netdev reference `register` set up; the
        // allocation itself is freed later by the core.
        unsafe {
            // Out of every table, waiting for lookups, first: a lookup may
            // schedule the maintenance work.
            (*dev).listing.unlist();
            // The maintenance work may requeue itself; this waits for it
            // and keeps it from running again.
            bindings::cancel_delayed_work_sync(core::ptr::addr_of_mut!((*dev).maintenance).cast());
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*dev).data));
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*dev).vectors));
            bindings::srnic_dev_put((*dev).netdev.as_ptr());
            // Last: from here on rxe may unload, and its exit finds this
            // device deallocated.
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*dev).rxe_hold));
            (*dev).deallocated.store(true, Ordering::Release);
        }
    }
}

/// An RDMA device's name as it was when copied.
pub type DeviceName = crate::kapi::netdev::FixedName<{ bindings::IB_DEVICE_NAME_MAX as usize }>;

/// Copies the name of `ib`. `ib_device_rename` rewrites the `name` array
/// in place (and frees the kobject's copy, so `dev_name` may not be kept):
/// one volatile read copies whatever bytes are there, even mid-rename.
///
/// # Safety
///
/// `ib` must be an allocated `ib_device`.
pub(crate) unsafe fn device_name(ib: *const bindings::ib_device) -> DeviceName {
    // SAFETY: the array is valid for reads while the device is allocated,
    // per the caller.
    let raw = unsafe { core::ptr::addr_of!((*ib).name).read_volatile() };
    // `c_char` is `i8` on some architectures.
    #[allow(clippy::unnecessary_cast)]
    DeviceName::new(raw.map(|c| c as u8))
}

/// Whether an RDMA device (of any driver) is called `name`.
pub fn name_in_use(name: &CStr) -> bool {
    // SAFETY: `name` is NUL-terminated; a found device comes with a
    // registration reference, dropped at once.
    let found = unsafe {
        bindings::ib_device_get_by_name(
            name.as_char_ptr(),
            bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        )
    };
    if found.is_null() {
        return false;
    }
    // SAFETY: balances the reference `ib_device_get_by_name` took.
    unsafe { bindings::ib_device_put(found) };
    true
}

/// A reference that keeps a device's memory allocated; it does not keep the
/// device registered.
///
/// # Invariants
///
/// Holds one reference (`srnic_ib_device_get`) on the `ib_device` of a
/// `Device<T>` that [`Device::register`] allocated, so the allocation, and
/// `deallocated` in it, stays; its `data` is live only while a registration
/// reference is held too ([`ActiveDevice`]).
pub struct DeviceRef<T: Driver> {
    ib: NonNull<bindings::ib_device>,
    _data: core::marker::PhantomData<T>,
}

// SAFETY: the reference count is atomic, and the device is only reached
// through `ActiveDevice`, which requires `T: Sync`.
unsafe impl<T: Driver> Send for DeviceRef<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Sync for DeviceRef<T> {}

impl<T: Driver> DeviceRef<T> {
    /// # Safety
    ///
    /// `ib` must be a `Device<T>`'s `ib_device`, allocated by the core and
    /// not yet freed.
    unsafe fn new(ib: NonNull<bindings::ib_device>) -> Self {
        // SAFETY: the caller guarantees `ib` is allocated; dropped in `drop`.
        unsafe { bindings::srnic_ib_device_get(ib.as_ptr()) };
        Self {
            ib,
            _data: core::marker::PhantomData,
        }
    }

    /// Whether the device is gone for good: unregistered and its data
    /// dropped. A device that is only inactive may still be unregistering,
    /// or be moving to another network namespace and come back.
    pub fn is_deallocated(&self) -> bool {
        // SAFETY: our reference keeps the allocation, and so the flag, valid
        // (type invariant);
        // the place expression borrows only the flag, not the dropped data.
        unsafe {
            (*self.ib.as_ptr().cast::<Device<T>>())
                .deallocated
                .load(Ordering::Acquire)
        }
    }

    /// Access to the device while it is registered, or `None` once
    /// unregistration has begun.
    pub fn active(&self) -> Option<ActiveDevice<'_, T>> {
        // SAFETY: the memory is kept by our reference (type invariant); the
        // registration refcount is zero before registration and after unregistration
        // begins, and `dealloc_driver` runs only after it drains.
        if unsafe { bindings::srnic_ib_device_try_get(self.ib.as_ptr()) } {
            Some(ActiveDevice { owner: self })
        } else {
            None
        }
    }

    /// Unregisters the device and waits until that is complete. Harmless if
    /// it is unregistered already or concurrently.
    pub fn unregister(&self) {
        // SAFETY: the memory is kept by our reference (type invariant); the core serialises
        // concurrent unregistrations and returns only once the device is gone, including
        // `dealloc_driver`.
        unsafe { bindings::ib_unregister_device(self.ib.as_ptr()) };
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds (type invariant), put once.
        unsafe { bindings::srnic_ib_device_put_ref(self.ib.as_ptr()) };
    }
}

/// A registered device, kept registered while this lives (unregistration
/// waits for it).
pub struct ActiveDevice<'a, T: Driver> {
    owner: &'a DeviceRef<T>,
}

impl<T: Driver> ActiveDevice<'_, T> {
    /// Starts unregistering the device from a context that may not sleep on
    /// it (the netdev notifier, which holds RTNL). The work runs once this
    /// and every other active reference is dropped.
    pub fn unregister_queued(&self) {
        // SAFETY: the device is registered; the core takes its own reference
        // for the queued work.
        unsafe { bindings::ib_unregister_device_queued(self.owner.ib.as_ptr()) };
    }
}

impl<T: Driver> Deref for ActiveDevice<'_, T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: the registration refcount we hold keeps the data live.
        unsafe { Device::from_ib(self.owner.ib.as_ptr()) }
    }
}

impl<T: Driver> Drop for ActiveDevice<'_, T> {
    fn drop(&mut self) {
        // SAFETY: balances the successful `ib_device_try_get` in `active`.
        unsafe { bindings::ib_device_put(self.owner.ib.as_ptr()) };
    }
}
