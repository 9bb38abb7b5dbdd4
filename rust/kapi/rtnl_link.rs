// SPDX-License-Identifier: GPL-2.0

//! Link types: `rtnl_link_ops` for the Ethernet netdevs of
//! [`super::ether`], so that `ip link add link PARENT name NAME type KIND`
//! creates a netdev of the driver, `ip link del` removes it and `ip -d link
//! show` prints the kind, the parent and the driver's attributes.
//!
//! Two kinds of netdev carry the ops: those created by `ip link add`,
//! which the core owns (unregistered by `ip link del`, by the driver, or
//! when the module's link type goes; freed by the core after the driver's
//! data drops), and those an [`EtherRegistration`] owns, which carry the
//! ops only to be recognised and shown: `ip link del` leaves them alone.
//!
//! Namespaces: a link is created in the namespace the request names (`ip
//! link add ... netns NS`), its parent found by `IFLA_LINK` where the
//! request says (the requester's namespace, or `link-netns`'s). Links may
//! move (`ip link set ... netns`), and a namespace that goes away deletes
//! the links in it through `dellink`, as any virtual netdev's. A
//! registration's netdevs stay where they were made, in the initial
//! namespace. Since a link's ifindex and namespace change with a move, a
//! driver names its links by [`LinkId`].

use crate::bindings;
use crate::kapi::ether::{EtherDevice, EtherDriver, EtherRegistration, Placement, Private};
use crate::kapi::net::Net;
use crate::kapi::netdev::RtnlGuard;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::num::NonZeroUsize;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::to_result;
use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// iblan's link attributes (`include/uapi/linux/if_iblan.h`, through
/// bindgen), for drivers that do not reach the bindings.
pub mod iblan {
    use crate::bindings;

    /// `IFLA_IBLAN_RDMA_DEV`: string.
    pub const RDMA_DEV: u32 = bindings::IFLA_IBLAN_RDMA_DEV;
    /// `IFLA_IBLAN_PORT`: u32.
    pub const PORT: u32 = bindings::IFLA_IBLAN_PORT;
    /// `IFLA_IBLAN_LAN`: u8.
    pub const LAN: u32 = bindings::IFLA_IBLAN_LAN;
    /// `IFLA_IBLAN_LID`: u16.
    pub const LID: u32 = bindings::IFLA_IBLAN_LID;
    /// `IFLA_IBLAN_PEERS`: u32.
    pub const PEERS: u32 = bindings::IFLA_IBLAN_PEERS;
    /// `IFLA_IBLAN_MODE`: u8.
    pub const MODE: u32 = bindings::IFLA_IBLAN_MODE;
    /// `IBLAN_MODE_UD`: every frame in UD datagrams.
    pub const MODE_UD: u8 = bindings::iblan_mode_IBLAN_MODE_UD as u8;
    /// `IBLAN_MODE_CONNECTED`: unicast over a connection per peer.
    pub const MODE_CONNECTED: u8 = bindings::iblan_mode_IBLAN_MODE_CONNECTED as u8;

    /// The policy of iblan's attributes: `MODE` may be set (a u8 up to
    /// `MODE_CONNECTED`), the others are refused in a request.
    pub const POLICY: super::AttrPolicy = super::AttrPolicy {
        max: bindings::__IFLA_IBLAN_MAX - 1,
        table: policy_table,
    };

    fn policy_table() -> *const bindings::nla_policy {
        // SAFETY: returns the address of a static table; no state.
        unsafe { bindings::srnic_iblan_link_policy() }
    }
}

/// The attributes (`IFLA_INFO_DATA`) a link type accepts in a request:
/// the highest attribute and the core's policy table, which checks each
/// attribute's type, length and range before the driver sees it.
///
/// # Invariants
///
/// `table` returns a static table of `max + 1` entries.
pub struct AttrPolicy {
    max: u32,
    table: fn() -> *const bindings::nla_policy,
}

/// The driver's attributes of an `ip link set DEV type KIND ...` request
/// (`changelink`), checked against the driver's [`AttrPolicy`].
///
/// # Invariants
///
/// `data` is the core's parsed `IFLA_INFO_DATA` table of this request
/// (of the policy's size, validated against it), or null if the request
/// had none; valid for `'a`.
pub struct LinkChange<'a> {
    data: *mut *mut bindings::nlattr,
    _request: PhantomData<&'a ()>,
}

impl LinkChange<'_> {
    /// The u8 attribute `kind`, if the request has it. The policy gave
    /// its type (a u8) and range.
    pub fn u8(&self, kind: u32) -> Option<u8> {
        let kind = c_int::try_from(kind).ok()?;
        let mut value = 0u8;
        // SAFETY: `data` is the request's table or null (type invariant),
        // which the shim checks; `kind` is within the policy (the driver
        // names its own attributes).
        let present = unsafe { bindings::srnic_link_data_u8(self.data, kind, &mut value) };
        (present == 1).then_some(value)
    }
}

/// What a new link is made of; see [`LinkDriver::new_link`].
pub struct NewLink<'a, T> {
    /// The driver's data, moved into the netdev.
    pub data: T,
    /// The netdev's address.
    pub mac: [u8; 6],
    /// Its parent device and port.
    pub placement: Placement<'a>,
}

/// An Ethernet driver whose netdevs are a link type.
pub trait LinkDriver: EtherDriver {
    /// The kind: `ip link add ... type KIND`.
    const KIND: &'static CStr;
    /// The MTU range and the default MTU of a new link (`ip link add ...
    /// mtu N` is checked against the range before the driver runs).
    const MTU: ((u32, u32), u32);
    /// The most transmit queues a link's netdev may use.
    const MAX_TX_QUEUES: u16;

    /// The driver's static ops.
    fn link_ops() -> &'static LinkOps<Self>;

    /// `ip link add link PARENT [address MAC] type KIND`: the data of a
    /// new link on `parent` (one of this driver's netdevs, found by
    /// `IFLA_LINK`), with the requested address if any. Errors go to the
    /// user with a message in `extack`; nothing is created then.
    fn new_link<'a>(
        rtnl: &'a RtnlGuard,
        parent: &'a EtherDevice<Self>,
        address: Option<[u8; 6]>,
        extack: &mut ExtAck,
    ) -> Result<NewLink<'a, Self>>;

    /// The link `new_link` made is registered: the driver may record it.
    fn link_registered(rtnl: &RtnlGuard, dev: &EtherDevice<Self>);

    /// The link is being unregistered (`ip link del`, [`EtherDevice::delete_link`],
    /// or the link type going): the driver forgets it. Its data drops
    /// later, once the core is done with the netdev, without RTNL.
    fn link_deleted(rtnl: &RtnlGuard, dev: &EtherDevice<Self>);

    /// The bytes [`Self::fill_info`] writes at most: a sum of
    /// [`LinkInfo::size`] terms.
    fn info_size(dev: &EtherDevice<Self>) -> usize;

    /// The driver's attributes, in `IFLA_INFO_DATA`. RTNL held.
    fn fill_info(dev: &EtherDevice<Self>, info: &mut LinkInfo<'_>) -> Result;

    /// The attributes a request may carry; `None`: none (then `ip link
    /// set DEV type KIND ...` is refused with `EOPNOTSUPP`, and the data
    /// of `ip link add` is ignored).
    const POLICY: Option<AttrPolicy> = None;

    /// `ip link set DEV type KIND ...`: applies `change`, whose attributes
    /// passed [`Self::POLICY`], to `dev` (one of this driver's netdevs,
    /// made by `ip link add` or by a registration). Errors go to the user
    /// with a message in `extack`. Called only with a policy.
    fn change_link(
        _rtnl: &RtnlGuard,
        _dev: &EtherDevice<Self>,
        _change: &LinkChange<'_>,
        _extack: &mut ExtAck,
    ) -> Result {
        Err(crate::kapi::not_supported())
    }

    /// The namespace of the netdev's parent, in which its
    /// [`EtherDriver::iflink`] is an ifindex; `None`: the netdev's own.
    /// `ip link` names the parent's namespace (`link-netnsid`) when it is
    /// another. Under RCU or RTNL: must not sleep.
    fn link_net(_dev: &EtherDevice<Self>) -> Option<&Net> {
        None
    }
}

/// A netdev of a link type, named by its identity: its ifindex and its
/// namespace change when it moves, this does not. As long as the netdev
/// is registered, [`EtherDevice::by_link_id`] finds it by this; once it is
/// gone, the value may name a later netdev.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LinkId(NonZeroUsize);

impl LinkId {
    /// The value, never 0 (for an atomic slot where 0 means none).
    pub fn to_bits(self) -> usize {
        self.0.get()
    }

    /// The id whose [`Self::to_bits`] is `bits`; `None` for 0.
    pub fn from_bits(bits: usize) -> Option<Self> {
        NonZeroUsize::new(bits).map(Self)
    }
}

/// The error message of a netlink request (`struct netlink_ext_ack`),
/// which `ip` prints after "Error:".
pub struct ExtAck(*mut bindings::netlink_ext_ack);

impl ExtAck {
    /// Sets the message (the first 79 bytes of it).
    pub fn message(&mut self, args: core::fmt::Arguments<'_>) {
        if self.0.is_null() {
            return;
        }
        let mut text = Text {
            buf: [0; 80],
            at: 0,
        };
        let _ = core::fmt::write(&mut text, args);
        // SAFETY: the core's extack for this request; `text` is
        // NUL-terminated (the last byte is never written) and copied.
        unsafe { bindings::srnic_extack_msg(self.0, text.buf.as_ptr().cast::<c_char>()) };
    }
}

/// A NUL-terminated message being formatted.
struct Text {
    buf: [u8; 80],
    at: usize,
}

impl core::fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for byte in s.bytes() {
            // Keep the final NUL.
            if self.at + 1 >= self.buf.len() {
                break;
            }
            if let Some(slot) = self.buf.get_mut(self.at) {
                *slot = byte;
            }
            self.at += 1;
        }
        Ok(())
    }
}

/// The attributes of one netdev being written into a netlink message.
///
/// # Invariants
///
/// `skb` is the message the core is filling in its `fill_info` call, valid
/// for `'a`.
pub struct LinkInfo<'a> {
    skb: *mut bindings::sk_buff,
    _message: PhantomData<&'a mut ()>,
}

/// An attribute's payload.
pub enum Attr<'a> {
    /// `NLA_U8`.
    U8(u8),
    /// `NLA_U16`.
    U16(u16),
    /// `NLA_U32`.
    U32(u32),
    /// `NLA_NUL_STRING`.
    Str(&'a CStr),
}

impl LinkInfo<'_> {
    /// The room one attribute of a payload of `payload` bytes takes (a
    /// string's payload counts its NUL).
    pub fn size(payload: usize) -> usize {
        let payload = c_int::try_from(payload).unwrap_or(c_int::MAX);
        // SAFETY: arithmetic only.
        unsafe { bindings::srnic_nla_total_size(payload) }
    }

    /// Appends attribute `kind`; `EMSGSIZE` when the message is full.
    pub fn put(&mut self, kind: u32, value: Attr<'_>) -> Result {
        let kind = c_int::try_from(kind).map_err(|_| EINVAL)?;
        // SAFETY: by the type invariant, the message the core is filling,
        // valid for `'a`; the string is NUL-terminated.
        to_result(unsafe {
            match value {
                Attr::U8(v) => bindings::srnic_nla_put_u8(self.skb, kind, v),
                Attr::U16(v) => bindings::srnic_nla_put_u16(self.skb, kind, v),
                Attr::U32(v) => bindings::srnic_nla_put_u32(self.skb, kind, v),
                Attr::Str(v) => bindings::srnic_nla_put_string(self.skb, kind, v.as_char_ptr()),
            }
        })
    }
}

/// A driver's `rtnl_link_ops`, in a static.
///
/// # Invariants
///
/// `raw` is uninitialised, and only its address used, until
/// [`Self::register`] writes it, once, before registering it; it is not
/// written after that.
pub struct LinkOps<T: LinkDriver> {
    raw: Opaque<bindings::rtnl_link_ops>,
    /// Set while a [`LinkRegistration`] lives: `raw` is then the core's,
    /// and not written.
    registered: AtomicBool,
    _driver: PhantomData<T>,
}

/// The registered link type of `T`, shared: the module holds one and every
/// netdev [`EtherRegistration::new_linked`] made holds one, so the type is
/// unregistered (deleting the links `ip link add` made) only after the
/// last of those netdevs is gone.
pub struct LinkRegistration<T: LinkDriver>(Arc<Registered<T>>);

impl<T: LinkDriver> Clone for LinkRegistration<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

struct Registered<T: LinkDriver> {
    ops: &'static LinkOps<T>,
}

impl<T: LinkDriver> Drop for Registered<T> {
    fn drop(&mut self) {
        // SAFETY: registered by `LinkOps::register`, which made this value the only way to
        // unregister; no netdev of `new_linked` is left (each held a clone). The core deletes the
        // links `ip link add` made and waits for unregistrations in flight.
        unsafe { bindings::rtnl_link_unregister(self.ops.raw.get()) };
        self.ops.registered.store(false, Ordering::Release);
    }
}

// SAFETY: the core serialises its use of the ops (RTNL); the struct is
// only written before registration (type invariant).
unsafe impl<T: LinkDriver> Sync for LinkOps<T> {}

/// RTNL, which the core holds around the ops' callbacks.
///
/// # Safety
///
/// RTNL is held by this thread for as long as the guard is used.
unsafe fn rtnl_held() -> ManuallyDrop<RtnlGuard> {
    // SAFETY: per the caller; `ManuallyDrop` never unlocks what the core
    // locked.
    ManuallyDrop::new(unsafe { RtnlGuard::assume_held() })
}

impl<T: LinkDriver> LinkOps<T> {
    /// Unregistered ops.
    pub const fn new() -> Self {
        Self {
            raw: Opaque::uninit(),
            registered: AtomicBool::new(false),
            _driver: PhantomData,
        }
    }

    pub(crate) fn as_raw(&self) -> *const bindings::rtnl_link_ops {
        self.raw.get()
    }

    /// Registers the link type, until the returned registration and its
    /// clones are gone; `EBUSY` while it is registered already.
    pub fn register(&'static self) -> Result<LinkRegistration<T>> {
        if self.registered.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        // SAFETY: an ops table of NULL pointers and zeroes is valid; the
        // used fields are set below.
        let mut ops: bindings::rtnl_link_ops = unsafe { core::mem::zeroed() };
        ops.kind = T::KIND.as_char_ptr();
        ops.priv_size = core::mem::size_of::<Private<T>>();
        ops.setup = Some(Self::setup);
        ops.get_num_tx_queues = Some(Self::num_tx_queues);
        ops.newlink = Some(Self::newlink);
        ops.dellink = Some(Self::dellink);
        ops.get_size = Some(Self::get_size);
        ops.fill_info = Some(Self::fill_info);
        if let Some(policy) = &T::POLICY {
            ops.maxtype = policy.max;
            ops.policy = (policy.table)();
            ops.changelink = Some(Self::changelink);
        }
        ops.get_link_net = Some(Self::get_link_net);
        // SAFETY: not registered (the flag was clear, and this call set
        // it), so nobody else reads it; in a static.
        unsafe { self.raw.get().write(ops) };
        // SAFETY: initialised ops in static memory.
        if let Err(err) = to_result(unsafe { bindings::rtnl_link_register(self.raw.get()) }) {
            self.registered.store(false, Ordering::Release);
            return Err(err);
        }
        // From here on, dropping it unregisters.
        match Arc::new(Registered { ops: self }, GFP_KERNEL) {
            Ok(registered) => Ok(LinkRegistration(registered)),
            Err(err) => {
                // SAFETY: registered just above; no netdev of `new_linked`
                // exists (making one takes a registration), and the core
                // deletes any link `ip link add` made meanwhile.
                unsafe { bindings::rtnl_link_unregister(self.raw.get()) };
                self.registered.store(false, Ordering::Release);
                Err(err.into())
            }
        }
    }

    /// The transmit queues a new link's netdev is allocated with, unless
    /// the request gives `numtxqueues`: the driver uses as many as its
    /// data serves ([`EtherDriver::tx_queues`]) among them.
    extern "C" fn num_tx_queues() -> u32 {
        T::MAX_TX_QUEUES.max(1).into()
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered.
    unsafe extern "C" fn setup(raw: *mut bindings::net_device) {
        let ((min, max), mtu) = T::MTU;
        // SAFETY: a fresh netdev the core allocated for these ops; the
        // ops tables are statics of the wrapper.
        unsafe {
            bindings::ether_setup(raw);
            bindings::srnic_netdev_setup_ops(
                raw,
                EtherDevice::<T>::netdev_ops_table(),
                EtherDevice::<T>::ethtool_ops_table(),
                min,
                max,
                mtu,
            );
            if let Some(group) = T::sysfs_group() {
                group.apply(raw);
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered.
    unsafe extern "C" fn newlink(
        src_net: *mut bindings::net,
        raw: *mut bindings::net_device,
        tb: *mut *mut bindings::nlattr,
        data: *mut *mut bindings::nlattr,
        extack: *mut bindings::netlink_ext_ack,
    ) -> c_int {
        // SAFETY: the core calls `newlink` with RTNL held.
        let rtnl = unsafe { rtnl_held() };
        let mut ack = ExtAck(extack);
        // SAFETY: the request's parsed attributes.
        let ifindex = unsafe { bindings::srnic_link_attr_link(tb) };
        if ifindex == 0 {
            ack.message(format_args!(
                "{}: give the parent: ip link add link DEV ...",
                T::KIND
            ));
            return EINVAL.to_errno();
        }
        // The core passes the namespace `IFLA_LINK` is meant in (the
        // requester's, or `IFLA_LINK_NETNSID`'s); the netdev itself was
        // allocated in the one it goes to (`IFLA_NET_NS_*`, or that one,
        // to be moved after this returns).
        // SAFETY: the namespace of the request, alive during it.
        let net = unsafe { Net::from_raw(src_net) };
        let Some(parent) = EtherDevice::<T>::by_ifindex(&rtnl, net, ifindex) else {
            ack.message(format_args!(
                "{}: the parent (link) is not an {} netdev",
                T::KIND,
                T::KIND
            ));
            return ENODEV.to_errno();
        };
        let mut mac = [0u8; 6];
        // SAFETY: as above; room for 6 bytes.
        let address = match unsafe { bindings::srnic_link_attr_address(tb, mac.as_mut_ptr()) } {
            0 => None,
            6 => Some(mac),
            _ => {
                ack.message(format_args!("{}: the address must have 6 bytes", T::KIND));
                return EINVAL.to_errno();
            }
        };
        let new = match T::new_link(&rtnl, parent, address, &mut ack) {
            Ok(new) => new,
            Err(err) => return err.to_errno(),
        };
        // SAFETY: the private area of this fresh, unregistered netdev is
        // ours, sized and aligned for `Private<T>` (`priv_size`), and was
        // zeroed by the allocation (as NAPI wants it).
        let private = unsafe { bindings::srnic_netdev_priv(raw).cast::<Private<T>>() };
        // SAFETY: as above; `data` is moved in once.
        if let Err(err) = unsafe { Private::write(private, raw, true, new.data) } {
            // Nothing written: the core frees the netdev.
            return err.to_errno();
        }
        // SAFETY: the placement's parent is alive (its borrow) and
        // referenced by registration. Movable: `dellink` deletes it when
        // its namespace goes, and the driver names it by `LinkId`.
        unsafe {
            new.placement.apply(raw);
            bindings::srnic_eth_hw_addr_set(raw, new.mac.as_ptr());
            bindings::srnic_netdev_set_link_ops(raw, self_ops::<T>(), true);
            bindings::srnic_netdev_link_lock_classes(raw);
            bindings::netif_carrier_off(raw);
        }
        // SAFETY: a set-up netdev; RTNL held.
        let err = unsafe { bindings::register_netdevice(raw) };
        if err != 0 {
            // SAFETY: not registered and no destructor set: undo here;
            // the core frees the netdev.
            unsafe {
                Private::del_napis(private);
                Private::drop_data(private);
            }
            return err;
        }
        // SAFETY: registered under the RTNL we hold, so its `ndo_uninit`
        // has not run; its queues in use are the ones `write` set.
        unsafe {
            (*private).registered(raw);
            bindings::srnic_netif_spread_xps(raw, bindings::srnic_netdev_real_num_tx_queues(raw));
        }
        // SAFETY: registered under the RTNL we hold, so no unregistration
        // (whose end runs the destructor) can have started.
        unsafe { bindings::srnic_netdev_set_destructor(raw, Some(Self::destructor)) };
        // SAFETY: registered with initialised data, valid under RTNL.
        let dev = unsafe { EtherDevice::<T>::from_raw(raw) };
        T::link_registered(&rtnl, dev);
        match Self::configure_new(&rtnl, dev, data, &mut ack) {
            Ok(()) => 0,
            Err(err) => {
                // As `dellink` would: the core frees the netdev once it is
                // unregistered (`free_netdev` defers to that).
                T::link_deleted(&rtnl, dev);
                // SAFETY: registered under the RTNL we hold.
                unsafe { bindings::unregister_netdevice_queue(raw, core::ptr::null_mut()) };
                err.to_errno()
            }
        }
    }

    /// Applies the driver's attributes of an `ip link add` request to the
    /// link it made (as `ip link set` would), then checks the MTU the
    /// request gave, which the core set against the widest range the
    /// driver allows, against what the link carries now.
    fn configure_new(
        rtnl: &RtnlGuard,
        dev: &EtherDevice<T>,
        data: *mut *mut bindings::nlattr,
        ack: &mut ExtAck,
    ) -> Result {
        if T::POLICY.is_some() && !data.is_null() {
            // The core parsed `data` against the ops' policy, for this
            // call.
            let change = LinkChange {
                data,
                _request: PhantomData,
            };
            T::change_link(rtnl, dev, &change, ack)?;
        }
        let mtu = dev.as_netdev().mtu();
        T::change_mtu(dev, mtu).inspect_err(|_| {
            ack.message(format_args!(
                "{}: an MTU of {} is more than this link carries",
                T::KIND,
                mtu
            ));
        })
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered.
    unsafe extern "C" fn dellink(raw: *mut bindings::net_device, head: *mut bindings::list_head) {
        // SAFETY: the core calls `dellink` with RTNL held, for a
        // registered netdev with these ops.
        let rtnl = unsafe { rtnl_held() };
        // SAFETY: as above; its data is initialised.
        let dev = unsafe { EtherDevice::<T>::from_raw(raw) };
        if !dev.private().by_link {
            // Its registration unregisters it.
            return;
        }
        T::link_deleted(&rtnl, dev);
        // SAFETY: registered (the core found it), RTNL held; `head` is the
        // core's batch.
        unsafe { bindings::unregister_netdevice_queue(raw, head) };
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered, for one of its netdevs.
    unsafe extern "C" fn changelink(
        raw: *mut bindings::net_device,
        _tb: *mut *mut bindings::nlattr,
        data: *mut *mut bindings::nlattr,
        extack: *mut bindings::netlink_ext_ack,
    ) -> c_int {
        // SAFETY: the core calls `changelink` with RTNL held.
        let rtnl = unsafe { rtnl_held() };
        // SAFETY: as above, a registered netdev with these ops (the core
        // checked `dev->rtnl_link_ops`), its data initialised.
        let dev = unsafe { EtherDevice::<T>::from_raw(raw) };
        // The core parsed `data` against the ops' policy, for this call.
        let change = LinkChange {
            data,
            _request: PhantomData,
        };
        let mut ack = ExtAck(extack);
        match T::change_link(&rtnl, dev, &change, &mut ack) {
            Ok(()) => 0,
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the core, once, after unregistering a netdev that
    /// `newlink` registered.
    unsafe extern "C" fn destructor(raw: *mut bindings::net_device) {
        // SAFETY: unregistered (its cell cleared), NAPI disabled, not yet
        // freed, in process context; the data was initialised by `newlink`
        // and drops once, here.
        unsafe {
            T::teardown(EtherDevice::from_raw(raw));
            let private = bindings::srnic_netdev_priv(raw).cast::<Private<T>>();
            Private::del_napis(private);
            Private::drop_data(private);
        }
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered.
    unsafe extern "C" fn get_size(raw: *const bindings::net_device) -> usize {
        // SAFETY: a registered netdev with these ops (RTNL held).
        let dev = unsafe { EtherDevice::<T>::from_raw(raw.cast_mut()) };
        T::info_size(dev)
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered.
    unsafe extern "C" fn get_link_net(raw: *const bindings::net_device) -> *mut bindings::net {
        // SAFETY: a registered netdev with these ops (RTNL or RCU held,
        // and its data initialised while it is listed).
        let dev = unsafe { EtherDevice::<T>::from_raw(raw.cast_mut()) };
        match T::link_net(dev) {
            Some(net) => net.as_raw(),
            // SAFETY: as above; its namespace outlives the call.
            None => unsafe { bindings::srnic_netdev_net(raw) },
        }
    }

    /// # Safety
    ///
    /// Called only by the core through the `rtnl_link_ops` this module
    /// registered.
    unsafe extern "C" fn fill_info(
        skb: *mut bindings::sk_buff,
        raw: *const bindings::net_device,
    ) -> c_int {
        // SAFETY: a registered netdev with these ops (RTNL held).
        let dev = unsafe { EtherDevice::<T>::from_raw(raw.cast_mut()) };
        let mut info = LinkInfo {
            skb,
            _message: PhantomData,
        };
        match T::fill_info(dev, &mut info) {
            Ok(()) => 0,
            Err(err) => err.to_errno(),
        }
    }
}

impl<T: LinkDriver> Default for LinkOps<T> {
    fn default() -> Self {
        Self::new()
    }
}

fn self_ops<T: LinkDriver>() -> *const bindings::rtnl_link_ops {
    T::link_ops().as_raw()
}

impl<T: LinkDriver> EtherDevice<T> {
    /// The netdev `ifindex` of `net`, if it is one of `T`'s (it carries
    /// `T`'s link ops). Valid while RTNL is held.
    pub fn by_ifindex<'a>(_rtnl: &'a RtnlGuard, net: &Net, ifindex: i32) -> Option<&'a Self> {
        // SAFETY: RTNL held (the guard); the namespace is alive.
        let raw = unsafe { bindings::__dev_get_by_index(net.as_raw(), ifindex) };
        if raw.is_null() {
            return None;
        }
        // SAFETY: a listed netdev, valid under RTNL.
        let ops = unsafe { (*raw).rtnl_link_ops };
        if ops != self_ops::<T>() {
            return None;
        }
        // SAFETY: a registered netdev with `T`'s link ops: either an
        // `EtherRegistration<T>`'s or one `newlink` registered, both with
        // initialised `Private<T>`; it stays until RTNL is released.
        Some(unsafe { Self::from_raw(raw) })
    }

    /// Its [`LinkId`].
    pub fn link_id(&self) -> LinkId {
        // A netdev's address is never 0.
        LinkId(NonZeroUsize::new(self.as_raw() as usize).unwrap_or(NonZeroUsize::MIN))
    }

    /// The netdev `id` names, if it is registered, with `T`'s link ops, in
    /// any namespace. Valid while RTNL is held. A namespace being
    /// dismantled is no longer searched: its netdevs are about to be
    /// deleted (the links through `dellink`).
    pub fn by_link_id(_rtnl: &RtnlGuard, id: LinkId) -> Option<&Self> {
        // SAFETY: RTNL held (the guard); the pointer is only compared
        // with listed netdevs.
        let raw =
            unsafe { bindings::srnic_link_find(id.to_bits() as *const c_void, self_ops::<T>()) };
        if raw.is_null() {
            return None;
        }
        // SAFETY: a registered netdev with `T`'s link ops (as in
        // `by_ifindex`), listed until RTNL is released.
        Some(unsafe { Self::from_raw(raw) })
    }

    /// Deletes a netdev `ip link add` made, as `ip link del` would (the
    /// driver hears [`LinkDriver::link_deleted`]); its data has dropped
    /// when RTNL is released. A netdev an [`EtherRegistration`] owns is
    /// left alone.
    pub fn delete_link(&self, rtnl: &RtnlGuard) {
        // Once: an unregistering netdev is no longer registered.
        if !self.private().by_link || !self.as_netdev().is_registered() {
            return;
        }
        T::link_deleted(rtnl, self);
        // SAFETY: registered (checked under the RTNL we hold, and nothing
        // else unregisters it before we release it).
        unsafe { bindings::unregister_netdevice_queue(self.as_raw(), core::ptr::null_mut()) };
    }
}

impl<T: LinkDriver> EtherRegistration<T> {
    /// As [`EtherRegistration::new`], for a netdev of `T`'s link type:
    /// `ip -d link` shows its kind and attributes, and `ip link add link`
    /// may name it as a parent.
    /// The netdev holds `link`: the type stays registered while it lives.
    pub fn new_linked(
        link: &LinkRegistration<T>,
        name_format: &CStr,
        mac: [u8; 6],
        placement: Placement<'_>,
        data: T,
    ) -> Result<Self> {
        let ops = link.0.ops.as_raw();
        let mut reg = Self::create(name_format, T::MTU, mac, placement, ops, data)?;
        reg.hold(link.0.clone());
        Ok(reg)
    }
}
