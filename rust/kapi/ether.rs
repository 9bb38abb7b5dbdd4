// SPDX-License-Identifier: GPL-2.0

//! An Ethernet netdev a driver implements: `net_device_ops`, `ethtool_ops`
//! and NAPI, with the driver's data in the netdev's private area.

use crate::bindings;
use crate::kapi::debugfs;
use crate::kapi::netdev::{NetDevice, RtnlGuard};
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::skb::SkBuff;
use core::marker::PhantomData;
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::to_result;
use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// What `ndo_start_xmit` did with a frame.
pub enum TxOutcome {
    /// Taken (sent, or dropped and counted): the driver owns the skb.
    Sent,
    /// No room: the stack keeps the skb and retries (the driver stopped the
    /// queue and wakes it when there is room).
    Busy(SkBuff),
}

/// The interface statistics of `ip -s link`.
#[derive(Default)]
pub struct LinkStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Received frames dropped.
    pub rx_dropped: u64,
    /// Multicast frames received.
    pub multicast: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped on send.
    pub tx_dropped: u64,
}

/// An Ethernet driver.
pub trait EtherDriver: Sized + Send + Sync + 'static {
    /// `ethtool -i` driver name.
    const DRIVER: &'static CStr;
    /// `ethtool -i` version.
    const VERSION: &'static CStr;
    /// `ethtool -S` names, one per value [`Self::ethtool_stats`] writes.
    const STAT_NAMES: &'static [&'static CStr];
    /// `ethtool -S` names of every transmit queue's values, shown after
    /// [`Self::STAT_NAMES`] as `tx_queue_<N>_<name>`, one set per queue
    /// the netdev has ([`EtherDevice::tx_queues`]), in use or not.
    const TX_QUEUE_STAT_NAMES: &'static [&'static CStr] = &[];

    /// `ndo_open`, after NAPI is enabled. RTNL held.
    fn open(dev: &EtherDevice<Self>) -> Result;
    /// `ndo_stop`, before NAPI is disabled. RTNL held.
    fn stop(dev: &EtherDevice<Self>) -> Result;
    /// How many transmit queues this data serves (at least 1), each with
    /// a NAPI of its own for its send completions ([`Self::tx_poll`]).
    /// Asked once, before the netdev is registered; the netdev gets this
    /// many, or fewer if it was allocated with fewer (`ip link add ...
    /// numtxqueues N`): [`EtherDevice::tx_queues`] says how many.
    fn tx_queues(&self) -> u16;
    /// `ndo_start_xmit` of a frame the stack put on transmit queue
    /// `queue` (below [`EtherDevice::tx_queues`]): softirq or process
    /// context with bottom halves off, the queue's lock held.
    fn start_xmit(dev: &EtherDevice<Self>, queue: u16, skb: SkBuff) -> TxOutcome;
    /// The NAPI poll of transmit queue `queue`, as [`Self::poll`]: at most
    /// `budget` units of work; with fewer, [`Self::tx_poll_done`] follows.
    fn tx_poll(dev: &EtherDevice<Self>, queue: u16, budget: u32) -> u32;
    /// The NAPI of transmit queue `queue` completed; see [`Self::tx_poll`].
    fn tx_poll_done(dev: &EtherDevice<Self>, queue: u16);
    /// `ethtool -S` values of transmit queue `queue`, `out.len() ==
    /// TX_QUEUE_STAT_NAMES.len()`.
    fn tx_queue_stats(_dev: &EtherDevice<Self>, _queue: u16, _out: &mut [u64]) {}
    /// Validates a new address; the wrapper sets it on success. RTNL held.
    fn set_mac_address(dev: &EtherDevice<Self>, mac: &[u8; 6]) -> Result;
    /// Validates a new MTU (within the registered range); the wrapper sets
    /// it on success. RTNL held.
    fn change_mtu(dev: &EtherDevice<Self>, mtu: u32) -> Result;
    /// The interface statistics. Any context.
    fn stats64(dev: &EtherDevice<Self>, stats: &mut LinkStats);
    /// The NAPI poll: at most `budget` units of work, returns how many. If
    /// fewer, the wrapper completes NAPI and then calls
    /// [`Self::poll_done`], where the driver re-arms its event source (and
    /// reschedules if work arrived meanwhile).
    fn poll(dev: &EtherDevice<Self>, budget: u32) -> u32;
    /// NAPI completed; see [`Self::poll`].
    fn poll_done(dev: &EtherDevice<Self>);
    /// `ethtool -i` bus info, written into `out` (NUL-terminated).
    fn bus_info(dev: &EtherDevice<Self>, out: &mut [u8; 32]);
    /// `ethtool -S` values, `out.len() == STAT_NAMES.len()`.
    fn ethtool_stats(dev: &EtherDevice<Self>, out: &mut [u64]);
    /// The ifindex of the netdev this one sits on (`ip link`'s
    /// `name@parent`), if any. Any context.
    fn iflink(_dev: &EtherDevice<Self>) -> Option<i32> {
        None
    }
    /// Whether [`Self::set_coalesce`] takes the transmit values
    /// (`tx-usecs`, `tx-frames`); without, the core refuses them
    /// (`EOPNOTSUPP`).
    const COALESCE_TX: bool = false;
    /// `ethtool -c`: the interrupt coalescing in force. RTNL held.
    fn coalesce(_dev: &EtherDevice<Self>) -> Result<Coalesce> {
        Err(super::not_supported())
    }
    /// `ethtool -C`: new interrupt coalescing, every value (the ones the
    /// user left out as they were). The core refuses any parameter but
    /// `rx-usecs` and `rx-frames`, and the `tx-` ones with
    /// [`Self::COALESCE_TX`]. RTNL held.
    fn set_coalesce(_dev: &EtherDevice<Self>, _coalesce: Coalesce) -> Result {
        Err(super::not_supported())
    }
    /// Where code outside the netdev's callbacks (an event handler, a work
    /// item) finds the netdev: asked once, before registration, and filled
    /// from registration until the netdev begins to unregister.
    fn device_cell(&self) -> Option<&DeviceCell<Self>> {
        None
    }
    /// The netdev is unregistered (stopped, NAPI disabled) and its data
    /// about to drop: the last look at both together. Process context.
    fn teardown(_dev: &EtherDevice<Self>) {}
    /// A sysfs file of the driver's own in every netdev's directory
    /// ([`super::sysfs::SysfsFile::group`]), asked before registration.
    fn sysfs_group() -> Option<super::sysfs::SysfsGroup> {
        None
    }
}

/// The netdev of driver `T`, for code that does not get it from a
/// callback: a CQ event handler or a work item, in its own allocation.
/// Readers find it under RCU or RTNL; the netdev's code fills and clears
/// it, so a driver cannot leave it pointing at a freed netdev.
///
/// # Invariants
///
/// `netdev` is NULL or a registered netdev of driver `T` whose `Private<T>`
/// holds a clone of this cell: it is stored only after that netdev is
/// registered, and its `ndo_uninit` (under RTNL) clears it; the core then
/// waits for an RCU grace period (`synchronize_net`) before it releases
/// the netdev, whose data drops and memory is freed after that.
pub struct DeviceCell<T: EtherDriver>(Arc<CellInner<T>>);

struct CellInner<T> {
    netdev: AtomicPtr<bindings::net_device>,
    _driver: PhantomData<T>,
}

impl<T: EtherDriver> Clone for DeviceCell<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: EtherDriver> DeviceCell<T> {
    /// An empty cell; [`EtherDriver::device_cell`] hands it to a netdev.
    pub fn new() -> Result<Self> {
        let inner = CellInner {
            netdev: AtomicPtr::new(core::ptr::null_mut()),
            _driver: PhantomData,
        };
        Ok(Self(Arc::new(inner, GFP_KERNEL)?))
    }

    /// The netdev, while it is registered, for the read-side section.
    pub fn get<'a>(&self, _rcu: &'a RcuReadGuard) -> Option<&'a EtherDevice<T>> {
        let raw = self.0.netdev.load(Ordering::Acquire);
        if raw.is_null() {
            return None;
        }
        // SAFETY: a registered netdev of `T` (type invariant), which is
        // freed only after a grace period that follows its clearing, so
        // after the section `_rcu` holds.
        Some(unsafe { EtherDevice::from_raw(raw) })
    }

    /// The netdev, while it is registered, for as long as RTNL is held.
    pub fn get_rtnl<'a>(&self, _rtnl: &'a RtnlGuard) -> Option<&'a EtherDevice<T>> {
        let raw = self.0.netdev.load(Ordering::Acquire);
        if raw.is_null() {
            return None;
        }
        // SAFETY: a registered netdev of `T` (type invariant), cleared by
        // its `ndo_uninit`, which runs under RTNL: not before `_rtnl` goes.
        Some(unsafe { EtherDevice::from_raw(raw) })
    }

    /// The netdev whose `Private<T>` holds this cell is registered.
    ///
    /// # Safety
    ///
    /// `raw` is that netdev, registered, and its `ndo_uninit` has not run.
    pub(super) unsafe fn set(&self, raw: *mut bindings::net_device) {
        self.0.netdev.store(raw, Ordering::Release);
    }

    /// `raw` begins to unregister: no lookup finds it once this returns.
    /// Lookups that found it before are waited for by the core: after
    /// every `ndo_uninit` of an unregistration it waits a grace period
    /// (`synchronize_net`) before it drops the netdev's registration
    /// reference, and the netdev's data goes only after that.
    fn clear(&self, raw: *mut bindings::net_device) {
        // Another netdev sharing the cell is left in it: only its own
        // `ndo_uninit` may take it out.
        let _ = self.0.netdev.compare_exchange(
            raw,
            core::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

/// Interrupt coalescing, as `ethtool -c/-C` shows and sets it: for
/// receive and for transmit completions, an interrupt (a NAPI run) waits
/// for `frames` completions or `usecs` microseconds, whichever comes
/// first; 0 and 0 is an interrupt each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coalesce {
    /// `rx-usecs`.
    pub rx_usecs: u32,
    /// `rx-frames`.
    pub rx_frames: u32,
    /// `tx-usecs`.
    pub tx_usecs: u32,
    /// `tx-frames`.
    pub tx_frames: u32,
}

/// Where a netdev sits in the device model: its parent device
/// (`SET_NETDEV_DEV`, what udev's names and `ethtool -i` bus info derive
/// from) and which port of that device it is (`dev_port`).
///
/// # Invariants
///
/// `parent` is NULL or a device that stays alive for `'a`.
pub struct Placement<'a> {
    pub(crate) parent: *mut bindings::device,
    pub(crate) dev_port: u16,
    pub(crate) _parent: PhantomData<&'a ()>,
}

impl Placement<'_> {
    /// No parent (a virtual netdev), port 0.
    pub fn none() -> Self {
        Self {
            parent: core::ptr::null_mut(),
            dev_port: 0,
            _parent: PhantomData,
        }
    }

    /// Applies the placement to a netdev not yet registered.
    ///
    /// # Safety
    ///
    /// `raw` is a valid netdev, not registered; the parent (if any) is
    /// alive, and registration takes its own reference to it.
    pub(crate) unsafe fn apply(&self, raw: *mut bindings::net_device) {
        // SAFETY: per the caller.
        unsafe { bindings::srnic_netdev_set_parent(raw, self.parent, self.dev_port) };
    }
}

/// The netdev's private area: NAPI and the driver's data.
///
/// # Invariants
///
/// Lives in the private area of a netdev that [`EtherRegistration::create`]
/// or the link type's `newlink` set up: from then until its owner (told by
/// `by_link`) tears it down just before the netdev is freed, `data` is
/// initialised and `napi` and every `tx_napi` are added to that netdev.
#[repr(C)]
pub(crate) struct Private<T: EtherDriver> {
    pub(crate) napi: Opaque<bindings::napi_struct>,
    /// Created by `ip link add` (see `rtnl_link`): unregistered by `ip
    /// link del` and freed by the core. Otherwise owned by an
    /// [`EtherRegistration`].
    pub(crate) by_link: bool,
    /// What `data` gave as its [`DeviceCell`], kept here so that the same
    /// one is cleared whatever `data` says later.
    cell: Option<DeviceCell<T>>,
    /// One NAPI per transmit queue, in a buffer that never grows (so never
    /// moves), added to the netdev with the main one.
    tx_napi: KVec<TxNapi>,
    pub(crate) data: T,
}

/// A transmit queue's NAPI. The NAPI comes first: the poll finds the queue
/// number from the NAPI's address.
#[repr(C)]
pub(crate) struct TxNapi {
    napi: Opaque<bindings::napi_struct>,
    queue: u16,
}

impl TxNapi {
    /// `count` zeroed NAPIs (as `netif_napi_add` wants them), numbered.
    fn vec(count: u16) -> Result<KVec<Self>> {
        let mut napis = KVec::with_capacity(count.into(), GFP_KERNEL)?;
        for queue in 0..count {
            // SAFETY: all zeroes is a valid `napi_struct` (integers,
            // pointers, lists and optional function pointers).
            let napi = Opaque::new(unsafe { core::mem::zeroed::<bindings::napi_struct>() });
            // Within the capacity: the buffer does not move.
            napis.push(TxNapi { napi, queue }, GFP_KERNEL)?;
        }
        Ok(napis)
    }
}

impl<T: EtherDriver> Private<T> {
    /// Moves `data` into the private area at `private` of netdev `raw`,
    /// and adds its NAPIs to the netdev: the main one and one per transmit
    /// queue, as many as the data serves and the netdev has. On error
    /// nothing is written (and `data` is dropped).
    ///
    /// # Safety
    ///
    /// `private` is the private area of `raw`, a netdev not registered
    /// yet, sized and aligned for `Self`, whose fields other than `napi`
    /// are not initialised (nothing is dropped) and `napi` is zeroed.
    pub(super) unsafe fn write(
        private: *mut Self,
        raw: *mut bindings::net_device,
        by_link: bool,
        data: T,
    ) -> Result {
        // SAFETY: a valid netdev (the caller's promise).
        let allocated = unsafe { bindings::srnic_netdev_num_tx_queues(raw) };
        let count = data
            .tx_queues()
            .max(1)
            .min(u16::try_from(allocated).unwrap_or(u16::MAX));
        let tx_napi = TxNapi::vec(count)?;
        // SAFETY: not registered yet, so no qdisc to reset: only the count
        // changes, within what the netdev has.
        to_result(unsafe { bindings::srnic_netif_set_tx_queues(raw, count.into()) })?;
        let cell = data.device_cell().cloned();
        // SAFETY: per the caller, each field is written once; the NAPIs are
        // zeroed and stay in place (the main one in the private area, the
        // others in a buffer that never grows) until `del_napis`.
        unsafe {
            core::ptr::addr_of_mut!((*private).by_link).write(by_link);
            core::ptr::addr_of_mut!((*private).cell).write(cell);
            core::ptr::addr_of_mut!((*private).tx_napi).write(tx_napi);
            core::ptr::addr_of_mut!((*private).data).write(data);
            bindings::srnic_netif_napi_add(
                raw,
                (*private).napi.get(),
                Some(EtherDevice::<T>::napi_poll),
            );
            for tx in (*private).tx_napi.iter() {
                bindings::srnic_netif_napi_add_tx(
                    raw,
                    tx.napi.get(),
                    Some(EtherDevice::<T>::tx_napi_poll),
                );
            }
        }
        Ok(())
    }

    /// Removes the NAPIs [`Self::write`] added.
    ///
    /// # Safety
    ///
    /// Written by [`Self::write`] and not dropped yet; the netdev is not
    /// registered (any more), so its NAPIs are disabled.
    pub(super) unsafe fn del_napis(private: *mut Self) {
        // SAFETY: per the caller, added by `write` and disabled.
        unsafe {
            for tx in (*private).tx_napi.iter() {
                bindings::srnic_netif_napi_del(tx.napi.get());
            }
            bindings::srnic_netif_napi_del((*private).napi.get());
        }
    }

    /// The netdev is registered: its cell (if any) shows it from now on.
    ///
    /// # Safety
    ///
    /// `raw` is this area's netdev, registered, and its `ndo_uninit` has
    /// not run.
    pub(super) unsafe fn registered(&self, raw: *mut bindings::net_device) {
        if let Some(cell) = &self.cell {
            // SAFETY: per the caller; the cell is this netdev's.
            unsafe { cell.set(raw) };
        }
    }

    /// Drops what [`Self::write`] wrote.
    ///
    /// # Safety
    ///
    /// Written by [`Self::write`] and not dropped yet; the netdev is not
    /// registered (any more) and nothing uses its data now or later.
    pub(super) unsafe fn drop_data(private: *mut Self) {
        // SAFETY: per the caller, initialised and unused; dropped once.
        unsafe {
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*private).data));
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*private).cell));
            core::ptr::drop_in_place(core::ptr::addr_of_mut!((*private).tx_napi));
        }
    }
}

/// A registered Ethernet netdev of driver `T`, borrowed.
#[repr(transparent)]
pub struct EtherDevice<T: EtherDriver>(Opaque<bindings::net_device>, PhantomData<T>);

// SAFETY: the netdev API is thread safe; `T` is `Send + Sync`.
unsafe impl<T: EtherDriver> Sync for EtherDevice<T> {}
// SAFETY: as above.
unsafe impl<T: EtherDriver> Send for EtherDevice<T> {}

impl<T: EtherDriver> EtherDevice<T> {
    /// # Safety
    ///
    /// `raw` is a netdev of this wrapper for driver `T`, valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::net_device) -> &'a Self {
        // SAFETY: transparent wrapper; validity per the caller.
        unsafe { &*raw.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    pub(crate) fn private(&self) -> &Private<T> {
        // SAFETY: the private area holds a `Private<T>`, initialised from
        // registration to the netdev's freeing (its type invariant).
        unsafe { &*bindings::srnic_netdev_priv(self.as_raw()).cast::<Private<T>>() }
    }

    /// The driver's data.
    pub fn data(&self) -> &T {
        &self.private().data
    }

    /// The driver's data, pinned: it is written in place when the netdev
    /// is made, and dropped in place before the netdev is freed.
    pub fn data_pinned(&self) -> Pin<&T> {
        // SAFETY: never moved out of the private area (see above), and its
        // memory is freed only after it dropped.
        unsafe { Pin::new_unchecked(self.data()) }
    }

    /// The netdev, for generic queries.
    pub fn as_netdev(&self) -> &NetDevice {
        // SAFETY: a valid netdev for the borrow.
        unsafe { NetDevice::from_raw(self.as_raw()) }
    }

    /// Whether the netdev has a parent device (then the core fills
    /// `ethtool -i` bus info with the parent's name when the driver
    /// leaves it empty).
    pub fn has_parent(&self) -> bool {
        // SAFETY: a valid netdev.
        unsafe { bindings::srnic_netdev_has_parent(self.as_raw()) }
    }

    /// The current MAC address.
    pub fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: `dev_addr` has at least 6 bytes on an Ethernet netdev.
        unsafe {
            core::ptr::copy_nonoverlapping(
                bindings::srnic_netdev_addr(self.as_raw()),
                mac.as_mut_ptr(),
                6,
            )
        };
        mac
    }

    /// Changes the address from the driver's own decision, through
    /// `ndo_set_mac_address` and the notifiers, as `ip link set` would.
    pub fn set_mac_locked(&self, _rtnl: &RtnlGuard, mac: &[u8; 6]) -> Result {
        // SAFETY: RTNL is held (the guard); the address is 6 bytes.
        to_result(unsafe { bindings::srnic_dev_set_mac(self.as_raw(), mac.as_ptr()) })
    }

    /// Changes the MTU from the driver's own decision, through
    /// `ndo_change_mtu` and the notifiers, as `ip link set mtu` would.
    pub fn set_mtu_locked(&self, _rtnl: &RtnlGuard, mtu: u32) -> Result {
        // SAFETY: RTNL is held (the guard); a registered netdev.
        to_result(unsafe { bindings::srnic_dev_set_mtu(self.as_raw(), mtu) })
    }

    /// Offers scatter-gather (page fragments in transmitted skbs) to the
    /// stack, or stops offering it.
    pub fn set_scatter_gather_locked(&self, _rtnl: &RtnlGuard, on: bool) {
        // SAFETY: RTNL is held (the guard); a registered netdev.
        unsafe { bindings::srnic_netdev_set_sg(self.as_raw(), on) };
    }

    /// The link is up.
    pub fn carrier_on(&self) {
        // SAFETY: a registered netdev; any context.
        unsafe { bindings::netif_carrier_on(self.as_raw()) };
    }

    /// The link is down.
    pub fn carrier_off(&self) {
        // SAFETY: as above.
        unsafe { bindings::netif_carrier_off(self.as_raw()) };
    }

    /// Stops every transmit queue.
    pub fn stop_all_queues(&self) {
        // SAFETY: a registered netdev.
        unsafe { bindings::srnic_netif_tx_stop_all(self.as_raw()) };
    }

    /// Restarts every transmit queue.
    pub fn wake_all_queues(&self) {
        // SAFETY: a registered netdev.
        unsafe { bindings::srnic_netif_tx_wake_all(self.as_raw()) };
    }

    /// The transmit queues the netdev has, each with its NAPI: the
    /// maximum `ethtool -L` may set.
    pub fn tx_queues(&self) -> u16 {
        self.private().tx_napi.len() as u16
    }

    /// The transmit queues in use (`ethtool -L tx N`): the stack puts
    /// frames on the first this many. Any context.
    pub fn tx_queues_in_use(&self) -> u16 {
        // SAFETY: a valid netdev; a plain read of a field.
        let count = unsafe { bindings::srnic_netdev_real_num_tx_queues(self.as_raw()) };
        u16::try_from(count).unwrap_or(u16::MAX)
    }

    /// Stops transmit queue `queue` (no room); nothing if there is no such
    /// queue.
    pub fn stop_tx_queue(&self, queue: u16) {
        if queue < self.tx_queues() {
            // SAFETY: a registered netdev and one of its queues.
            unsafe { bindings::srnic_netif_tx_stop(self.as_raw(), queue.into()) };
        }
    }

    /// Restarts transmit queue `queue`.
    pub fn wake_tx_queue(&self, queue: u16) {
        if queue < self.tx_queues() {
            // SAFETY: a registered netdev and one of its queues.
            unsafe { bindings::srnic_netif_tx_wake(self.as_raw(), queue.into()) };
        }
    }

    /// Whether transmit queue `queue` is stopped.
    pub fn tx_queue_stopped(&self, queue: u16) -> bool {
        // SAFETY: a registered netdev and one of its queues (checked).
        queue < self.tx_queues()
            && unsafe { bindings::srnic_netif_tx_stopped(self.as_raw(), queue.into()) }
    }

    /// Schedules the NAPI poll. Any context, hard IRQ included.
    pub fn napi_schedule(&self) {
        // SAFETY: `napi` is added (type invariant of `Private`); scheduling a
        // disabled NAPI does nothing.
        unsafe { bindings::srnic_napi_schedule(self.private().napi.get()) };
    }

    /// Schedules the NAPI poll of transmit queue `queue`. Any context.
    pub fn tx_napi_schedule(&self, queue: u16) {
        if let Some(tx) = self.private().tx_napi.get(usize::from(queue)) {
            // SAFETY: added with the netdev's other NAPIs (type invariant
            // of `Private`); scheduling a disabled NAPI does nothing.
            unsafe { bindings::srnic_napi_schedule(tx.napi.get()) };
        }
    }

    /// An skb for a received frame of `len` bytes. From the poll only.
    pub fn alloc_rx_skb(&self, len: u32) -> Option<SkBuff> {
        // SAFETY: the poll's NAPI; returns NULL or a fresh skb we own.
        unsafe { SkBuff::from_raw(bindings::napi_alloc_skb(self.private().napi.get(), len)) }
    }

    /// Hands a received Ethernet frame to the stack. From the poll only.
    pub fn receive(&self, skb: SkBuff) {
        let raw = skb.into_raw();
        // SAFETY: our skb with a whole Ethernet frame, which the stack
        // takes; the poll's NAPI.
        unsafe { bindings::srnic_napi_receive_ether(self.private().napi.get(), raw) };
    }

    /// Calls `f` on every NAPI of the netdev, the main one first.
    ///
    /// # Safety
    ///
    /// What `f` does is valid for every added NAPI of the netdev.
    unsafe fn napis(&self, f: impl Fn(*mut bindings::napi_struct)) {
        f(self.private().napi.get());
        for tx in self.private().tx_napi.iter() {
            f(tx.napi.get());
        }
    }

    pub(crate) fn netdev_ops_table() -> &'static bindings::net_device_ops {
        &Self::NETDEV_OPS
    }

    pub(crate) fn ethtool_ops_table() -> &'static bindings::ethtool_ops {
        &Self::ETHTOOL_OPS
    }

    const NETDEV_OPS: bindings::net_device_ops = {
        // SAFETY: an ops table of NULL pointers is valid; the used ones
        // are set below.
        let mut ops: bindings::net_device_ops = unsafe { core::mem::zeroed() };
        ops.ndo_open = Some(Self::ndo_open);
        ops.ndo_stop = Some(Self::ndo_stop);
        ops.ndo_start_xmit = Some(Self::ndo_start_xmit);
        ops.ndo_set_mac_address = Some(Self::ndo_set_mac_address);
        ops.ndo_validate_addr = Some(bindings::eth_validate_addr);
        ops.ndo_change_mtu = Some(Self::ndo_change_mtu);
        ops.ndo_get_stats64 = Some(Self::ndo_get_stats64);
        ops.ndo_get_iflink = Some(Self::ndo_get_iflink);
        ops.ndo_uninit = Some(Self::ndo_uninit);
        ops
    };

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_uninit(raw: *mut bindings::net_device) {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        if let Some(cell) = &dev.private().cell {
            cell.clear(raw);
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_get_iflink(raw: *const bindings::net_device) -> c_int {
        // SAFETY: as in `ndo_open`; only shared access follows.
        let dev = unsafe { Self::from_raw(raw.cast_mut()) };
        T::iflink(dev).unwrap_or_else(|| dev.as_netdev().ifindex())
    }

    const ETHTOOL_OPS: bindings::ethtool_ops = {
        // SAFETY: as for `NETDEV_OPS`.
        let mut ops: bindings::ethtool_ops = unsafe { core::mem::zeroed() };
        ops.get_drvinfo = Some(Self::get_drvinfo);
        ops.get_link = Some(bindings::ethtool_op_get_link);
        ops.get_sset_count = Some(Self::get_sset_count);
        ops.get_strings = Some(Self::get_strings);
        ops.get_ethtool_stats = Some(Self::get_ethtool_stats);
        ops.supported_coalesce_params = if T::COALESCE_TX {
            bindings::SRNIC_ETHTOOL_COALESCE_RX | bindings::SRNIC_ETHTOOL_COALESCE_TX
        } else {
            bindings::SRNIC_ETHTOOL_COALESCE_RX
        };
        ops.get_coalesce = Some(Self::get_coalesce);
        ops.set_coalesce = Some(Self::set_coalesce);
        ops.get_channels = Some(Self::get_channels);
        ops.set_channels = Some(Self::set_channels);
        ops
    };

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn get_channels(
        raw: *mut bindings::net_device,
        out: *mut bindings::ethtool_channels,
    ) {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        // SAFETY: the core passes a struct to fill, which only this call
        // writes.
        let out = unsafe { &mut *out };
        // One receive queue, the main NAPI's; a NAPI per transmit queue.
        out.max_rx = 1;
        out.rx_count = 1;
        out.max_tx = dev.tx_queues().into();
        out.tx_count = dev.tx_queues_in_use().into();
        out.max_other = 0;
        out.other_count = 0;
        out.max_combined = 0;
        out.combined_count = 0;
    }

    /// `ethtool -L DEV tx N`: the stack uses the first N transmit queues,
    /// with or without the netdev up (every queue's resources exist while
    /// the netdev does). CPUs are spread over them again.
    ///
    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn set_channels(
        raw: *mut bindings::net_device,
        new: *mut bindings::ethtool_channels,
    ) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        // SAFETY: the core passes the request for the duration of the call.
        let new = unsafe { &*new };
        // The core checked each count against its maximum; these are the
        // combinations it lets through that mean nothing here.
        if new.rx_count != 1 || new.combined_count != 0 || new.other_count != 0 {
            return EINVAL.to_errno();
        }
        if new.tx_count == 0 || new.tx_count > dev.tx_queues().into() {
            return EINVAL.to_errno();
        }
        if new.tx_count == u32::from(dev.tx_queues_in_use()) {
            return 0;
        }
        // SAFETY: RTNL is held by our caller (ethtool); at most the queues
        // the netdev has (checked).
        let err = unsafe { bindings::srnic_netif_set_tx_queues(raw, new.tx_count) };
        if err == 0 {
            // SAFETY: a registered netdev; `tx_count` queues in use.
            unsafe { bindings::srnic_netif_spread_xps(raw, new.tx_count) };
        }
        err
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_open(raw: *mut bindings::net_device) -> c_int {
        // SAFETY: the core calls ops on our registered netdev.
        let dev = unsafe { Self::from_raw(raw) };
        // SAFETY: the NAPIs were added and are disabled while the netdev is
        // down.
        unsafe { dev.napis(|napi| bindings::napi_enable(napi)) };
        match T::open(dev) {
            Ok(()) => 0,
            Err(err) => {
                // SAFETY: enabled just above.
                unsafe { dev.napis(|napi| bindings::napi_disable(napi)) };
                err.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_stop(raw: *mut bindings::net_device) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        let result = T::stop(dev);
        // SAFETY: enabled by `ndo_open`, which succeeded (the netdev is up).
        unsafe { dev.napis(|napi| bindings::napi_disable(napi)) };
        result.map_or_else(|e| e.to_errno(), |()| 0)
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_start_xmit(
        skb: *mut bindings::sk_buff,
        raw: *mut bindings::net_device,
    ) -> bindings::netdev_tx_t {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        if skb.is_null() {
            return bindings::SRNIC_NETDEV_TX_OK;
        }
        // SAFETY: the skb the stack hands over, valid.
        let queue = unsafe { bindings::srnic_skb_queue_mapping(skb) };
        // SAFETY: the stack hands over the skb.
        let Some(skb) = (unsafe { SkBuff::from_raw(skb) }) else {
            return bindings::SRNIC_NETDEV_TX_OK;
        };
        // The stack picks among the queues in use, which the netdev has;
        // the driver's lookups are checked all the same.
        match T::start_xmit(dev, queue, skb) {
            TxOutcome::Sent => bindings::SRNIC_NETDEV_TX_OK,
            TxOutcome::Busy(skb) => {
                // The stack still owns it and requeues it.
                let _ = skb.into_raw();
                bindings::SRNIC_NETDEV_TX_BUSY
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_set_mac_address(
        raw: *mut bindings::net_device,
        addr: *mut c_void,
    ) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        // SAFETY: the core passes a `struct sockaddr`, whose data holds at
        // least 6 bytes.
        let mac: [u8; 6] = unsafe {
            core::ptr::read_unaligned(bindings::srnic_sockaddr_data(addr).cast::<[u8; 6]>())
        };
        match T::set_mac_address(dev, &mac) {
            Ok(()) => {
                // SAFETY: RTNL is held by our caller; 6 bytes.
                unsafe { bindings::srnic_eth_hw_addr_set(raw, mac.as_ptr()) };
                0
            }
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_change_mtu(raw: *mut bindings::net_device, mtu: c_int) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        let Ok(mtu) = u32::try_from(mtu) else {
            return EINVAL.to_errno();
        };
        match T::change_mtu(dev, mtu) {
            Ok(()) => {
                // SAFETY: RTNL is held by our caller.
                unsafe { bindings::srnic_netdev_set_mtu(raw, mtu) };
                0
            }
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn ndo_get_stats64(
        raw: *mut bindings::net_device,
        out: *mut bindings::rtnl_link_stats64,
    ) {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        let mut stats = LinkStats::default();
        T::stats64(dev, &mut stats);
        // SAFETY: the core passes a zeroed struct for us to fill, which
        // rtnetlink places in a message at only 4-byte alignment: every
        // store is unaligned.
        unsafe {
            use core::ptr::addr_of_mut;
            addr_of_mut!((*out).rx_packets).write_unaligned(stats.rx_packets);
            addr_of_mut!((*out).rx_bytes).write_unaligned(stats.rx_bytes);
            addr_of_mut!((*out).rx_dropped).write_unaligned(stats.rx_dropped);
            addr_of_mut!((*out).multicast).write_unaligned(stats.multicast);
            addr_of_mut!((*out).tx_packets).write_unaligned(stats.tx_packets);
            addr_of_mut!((*out).tx_bytes).write_unaligned(stats.tx_bytes);
            addr_of_mut!((*out).tx_dropped).write_unaligned(stats.tx_dropped);
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn get_drvinfo(
        raw: *mut bindings::net_device,
        info: *mut bindings::ethtool_drvinfo,
    ) {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        let mut bus = [0u8; 32];
        T::bus_info(dev, &mut bus);
        if let Some(last) = bus.last_mut() {
            *last = 0;
        }
        // SAFETY: a struct the core passes; NUL-terminated strings.
        unsafe {
            bindings::srnic_ethtool_drvinfo(
                info,
                T::DRIVER.as_char_ptr(),
                T::VERSION.as_char_ptr(),
                bus.as_ptr().cast::<c_char>(),
            )
        };
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn get_sset_count(raw: *mut bindings::net_device, set: c_int) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        if set == bindings::SRNIC_ETH_SS_STATS {
            Self::stat_count(dev) as c_int
        } else {
            EOPNOTSUPP_ERRNO
        }
    }

    /// The `ethtool -S` values: the driver's, then each transmit queue's.
    /// Fixed for the netdev's life, whatever `ethtool -L` sets.
    fn stat_count(&self) -> usize {
        T::STAT_NAMES.len() + usize::from(self.tx_queues()) * T::TX_QUEUE_STAT_NAMES.len()
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn get_strings(raw: *mut bindings::net_device, set: u32, out: *mut u8) {
        if set != bindings::SRNIC_ETH_SS_STATS as u32 {
            return;
        }
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        const LEN: usize = bindings::SRNIC_ETH_GSTRING_LEN as usize;
        // SAFETY: the core passes room for `get_sset_count` strings of
        // ETH_GSTRING_LEN bytes each.
        let out = unsafe { core::slice::from_raw_parts_mut(out, dev.stat_count() * LEN) };
        out.fill(0);
        let mut slots = out.chunks_exact_mut(LEN);
        for (name, slot) in T::STAT_NAMES.iter().zip(&mut slots) {
            let bytes = name.as_bytes();
            let n = bytes.len().min(LEN - 1);
            if let (Some(to), Some(from)) = (slot.get_mut(..n), bytes.get(..n)) {
                to.copy_from_slice(from);
            }
        }
        for queue in 0..dev.tx_queues() {
            for (name, slot) in T::TX_QUEUE_STAT_NAMES.iter().zip(&mut slots) {
                // The last byte stays NUL: the writer stops short of it.
                let (room, _) = slot.split_at_mut(LEN - 1);
                let mut text = SliceWriter { out: room, at: 0 };
                let _ = core::fmt::write(&mut text, format_args!("tx_queue_{queue}_{name}"));
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn get_ethtool_stats(
        raw: *mut bindings::net_device,
        _stats: *mut bindings::ethtool_stats,
        out: *mut u64,
    ) {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        // SAFETY: the core passes room for `get_sset_count` values.
        let out = unsafe { core::slice::from_raw_parts_mut(out, dev.stat_count()) };
        out.fill(0);
        let (own, queues) = out.split_at_mut(T::STAT_NAMES.len().min(out.len()));
        T::ethtool_stats(dev, own);
        let per_queue = T::TX_QUEUE_STAT_NAMES.len();
        if per_queue > 0 {
            for (queue, values) in (0..dev.tx_queues()).zip(queues.chunks_exact_mut(per_queue)) {
                T::tx_queue_stats(dev, queue, values);
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn get_coalesce(
        raw: *mut bindings::net_device,
        out: *mut bindings::ethtool_coalesce,
        _kernel: *mut bindings::kernel_ethtool_coalesce,
        _extack: *mut bindings::netlink_ext_ack,
    ) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        match T::coalesce(dev) {
            Ok(coalesce) => {
                // SAFETY: the core passes a zeroed struct to fill, which
                // only this call writes.
                let out = unsafe { &mut *out };
                out.rx_coalesce_usecs = coalesce.rx_usecs;
                out.rx_max_coalesced_frames = coalesce.rx_frames;
                out.tx_coalesce_usecs = coalesce.tx_usecs;
                out.tx_max_coalesced_frames = coalesce.tx_frames;
                0
            }
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn set_coalesce(
        raw: *mut bindings::net_device,
        new: *mut bindings::ethtool_coalesce,
        _kernel: *mut bindings::kernel_ethtool_coalesce,
        _extack: *mut bindings::netlink_ext_ack,
    ) -> c_int {
        // SAFETY: as in `ndo_open`.
        let dev = unsafe { Self::from_raw(raw) };
        // SAFETY: the core passes the current values with the user's
        // changes applied, for the duration of the call.
        let new = unsafe { &*new };
        let coalesce = Coalesce {
            rx_usecs: new.rx_coalesce_usecs,
            rx_frames: new.rx_max_coalesced_frames,
            tx_usecs: new.tx_coalesce_usecs,
            tx_frames: new.tx_max_coalesced_frames,
        };
        match T::set_coalesce(dev, coalesce) {
            Ok(()) => 0,
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn napi_poll(napi: *mut bindings::napi_struct, budget: c_int) -> c_int {
        // SAFETY: NAPI of one of our netdevs, which outlives its NAPI.
        let dev = unsafe { Self::from_raw(bindings::srnic_napi_dev(napi)) };
        let budget = u32::try_from(budget).unwrap_or(0);
        let done = T::poll(dev, budget).min(budget);
        // SAFETY: the NAPI instance being polled; completing with less
        // than the budget is the protocol.
        if done < budget && unsafe { bindings::napi_complete_done(napi, done as c_int) } {
            T::poll_done(dev);
        }
        done as c_int
    }

    /// # Safety
    ///
    /// Called only by the network stack through the `net_device_ops`,
    /// `ethtool_ops` or NAPI instance this module registered, for its own
    /// netdev.
    unsafe extern "C" fn tx_napi_poll(napi: *mut bindings::napi_struct, budget: c_int) -> c_int {
        // SAFETY: a transmit queue's NAPI of one of our netdevs, which
        // outlives it: the first field of a `TxNapi` (`repr(C)`), which
        // lives as long as the NAPI is added.
        let (dev, queue) = unsafe {
            (
                Self::from_raw(bindings::srnic_napi_dev(napi)),
                (*napi.cast::<TxNapi>()).queue,
            )
        };
        let budget = u32::try_from(budget).unwrap_or(0);
        let done = T::tx_poll(dev, queue, budget).min(budget);
        // SAFETY: the NAPI instance being polled, as in `napi_poll`.
        if done < budget && unsafe { bindings::napi_complete_done(napi, done as c_int) } {
            T::tx_poll_done(dev, queue);
        }
        done as c_int
    }
}

const EOPNOTSUPP_ERRNO: c_int = -(bindings::EOPNOTSUPP as c_int);

/// Writes text into a slice, cutting it at the slice's end.
struct SliceWriter<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl core::fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, text: &str) -> core::fmt::Result {
        for byte in text.bytes() {
            if let Some(slot) = self.out.get_mut(self.at) {
                *slot = byte;
                self.at += 1;
            }
        }
        Ok(())
    }
}

/// A registered Ethernet netdev; unregistered and freed when dropped.
///
/// # Invariants
///
/// `raw` is a netdev that [`Self::create`] registered, with a `Private<T>`
/// whose `by_link` is false: this value owns it, and nothing else
/// unregisters or frees it (`dellink` leaves it alone) until `drop`.
pub struct EtherRegistration<T: EtherDriver> {
    raw: NonNull<bindings::net_device>,
    /// Shows the netdev's data: removed before the netdev goes.
    debugfs: Option<debugfs::File<T>>,
    /// What the netdev needs to outlive (its link type's registration):
    /// dropped after it is freed.
    held: Option<Arc<dyn Send + Sync>>,
    _driver: PhantomData<T>,
}

// SAFETY: the registration may be dropped from any process context.
unsafe impl<T: EtherDriver> Send for EtherRegistration<T> {}
// SAFETY: `&self` only gives out `&EtherDevice<T>`, which is `Sync`.
unsafe impl<T: EtherDriver> Sync for EtherRegistration<T> {}

impl<T: EtherDriver> EtherRegistration<T> {
    /// Allocates an Ethernet netdev named after `name_format` (`"iblan%d"`)
    /// holding `data`, and registers it with its carrier off.
    pub fn new(
        name_format: &CStr,
        mtu_range: (u32, u32),
        mtu: u32,
        mac: [u8; 6],
        placement: Placement<'_>,
        data: T,
    ) -> Result<Self> {
        Self::create(
            name_format,
            (mtu_range, mtu),
            mac,
            placement,
            core::ptr::null(),
            data,
        )
    }

    /// As [`Self::new`], with `link_ops` (null: none) set before
    /// registration: a netdev of that link type's driver `T`.
    pub(crate) fn create(
        name_format: &CStr,
        (mtu_range, mtu): ((u32, u32), u32),
        mac: [u8; 6],
        placement: Placement<'_>,
        link_ops: *const bindings::rtnl_link_ops,
        data: T,
    ) -> Result<Self> {
        let queues = u32::from(data.tx_queues().max(1));
        // SAFETY: allocates a zeroed netdev with room for `Private<T>`.
        let raw = unsafe {
            bindings::alloc_etherdev_mqs(core::mem::size_of::<Private<T>>() as c_int, queues, 1)
        };
        let Some(raw) = NonNull::new(raw) else {
            return Err(ENOMEM);
        };
        let raw = raw.as_ptr();
        // SAFETY: the fresh netdev's private area is ours, aligned for any
        // driver data (NETDEV_ALIGN) and sized for `Private<T>`; the NAPI
        // struct is zeroed, as `netif_napi_add` wants it.
        let private = unsafe { bindings::srnic_netdev_priv(raw).cast::<Private<T>>() };
        // SAFETY: as above; `data` is moved in once.
        if let Err(err) = unsafe { Private::write(private, raw, false, data) } {
            // SAFETY: nothing was written; never registered.
            unsafe { bindings::free_netdev(raw) };
            return Err(err);
        }
        // The netdev stays in the initial namespace (not movable): a
        // namespace going away hands its virtual netdevs to their link
        // ops' `dellink`, which leaves a registration's netdev to it.
        // SAFETY: the placement's parent is alive (its borrow) and
        // referenced by registration.
        unsafe {
            placement.apply(raw);
            if !link_ops.is_null() {
                bindings::srnic_netdev_set_link_ops(raw, link_ops, false);
            }
            if let Some(group) = T::sysfs_group() {
                group.apply(raw);
            }
            bindings::srnic_netdev_setup_ether(
                raw,
                name_format.as_char_ptr(),
                Self::netdev_ops(),
                Self::ethtool_ops(),
                mtu_range.0,
                mtu_range.1,
                mtu,
            );
            bindings::srnic_eth_hw_addr_set(raw, mac.as_ptr());
            bindings::netif_carrier_off(raw);
        }
        // SAFETY: a fully set up netdev.
        if let Err(err) = to_result(unsafe { bindings::register_netdev(raw) }) {
            // SAFETY: never registered: undo in reverse.
            unsafe {
                Private::del_napis(private);
                Private::drop_data(private);
                bindings::free_netdev(raw);
            }
            return Err(err);
        }
        // SAFETY: registered just above, and only our drop unregisters it;
        // its queues in use are the ones `write` set.
        unsafe {
            (*private).registered(raw);
            bindings::srnic_netif_spread_xps(raw, bindings::srnic_netdev_real_num_tx_queues(raw));
        }
        Ok(Self {
            // SAFETY: checked non-NULL above.
            raw: unsafe { NonNull::new_unchecked(raw) },
            debugfs: None,
            held: None,
            _driver: PhantomData,
        })
    }

    /// Keeps `held` until after the netdev is freed.
    pub(crate) fn hold(&mut self, held: Arc<dyn Send + Sync>) {
        self.held = Some(held);
    }

    fn netdev_ops() -> &'static bindings::net_device_ops {
        EtherDevice::<T>::netdev_ops_table()
    }

    fn ethtool_ops() -> &'static bindings::ethtool_ops {
        EtherDevice::<T>::ethtool_ops_table()
    }

    /// The netdev.
    pub fn device(&self) -> &EtherDevice<T> {
        // SAFETY: registered until drop (type invariant).
        unsafe { EtherDevice::from_raw(self.raw.as_ptr()) }
    }
}

impl<T: EtherDriver + debugfs::Show> EtherRegistration<T> {
    /// Shows the netdev's data in a file `name` of `dir` (replacing the one
    /// shown so far, if any) until the netdev goes.
    pub fn show_in_debugfs(&mut self, name: &CStr, dir: &debugfs::Dir) -> Result {
        let data = core::ptr::from_ref(self.device().data());
        // SAFETY: the data lives in the netdev, which this registration
        // frees only after `drop` has removed the file (or the file is
        // replaced, so removed, earlier).
        self.debugfs = Some(unsafe { debugfs::File::new(name, dir, data)? });
        Ok(())
    }
}

impl<T: EtherDriver> Drop for EtherRegistration<T> {
    fn drop(&mut self) {
        // No read of the data may start or run once it goes.
        drop(self.debugfs.take());
        let raw = self.raw.as_ptr();
        // Unregistering stops the netdev (`ndo_stop`, NAPI disabled), clears its cell
        // (`ndo_uninit`) and waits for its users; then the driver tears down, NAPI is removed,
        // the data dropped and the netdev freed.
        // SAFETY: by the type invariant, registered and ours, with an initialised `Private<T>`.
        unsafe {
            bindings::unregister_netdev(raw);
            T::teardown(EtherDevice::from_raw(raw));
            let private = bindings::srnic_netdev_priv(raw).cast::<Private<T>>();
            Private::del_napis(private);
            Private::drop_data(private);
            bindings::free_netdev(raw);
        }
    }
}
