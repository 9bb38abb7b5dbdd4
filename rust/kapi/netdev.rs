// SPDX-License-Identifier: GPL-2.0

//! Network devices, references to them, RTNL and the netdev notifier.

use super::rcu::RcuReadGuard;
use crate::bindings;
use core::marker::PhantomPinned;
use core::pin::Pin;
use kernel::alloc::KBox;
use kernel::error::to_result;
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;

/// A `struct net_device`, borrowed.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Borrows the netdev at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `net_device` that stays valid (referenced
    /// or otherwise pinned by the caller's context) for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper of `net_device`, and
        // the caller guarantees validity for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The raw pointer, for the abstractions in this crate.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// A copy of the interface name, for messages. A rename under RTNL may
    /// rewrite it while it is copied, so it is never an identity.
    pub fn name(&self) -> NetdevName {
        // SAFETY: `name` is an array inside the valid netdev; the volatile
        // read copies whatever bytes are there, even mid-rename.
        let raw = unsafe { core::ptr::addr_of!((*self.as_raw()).name).read_volatile() };
        // `c_char` is `i8` on some architectures.
        #[allow(clippy::unnecessary_cast)]
        NetdevName::new(raw.map(|c| c as u8))
    }

    /// The network namespace the netdev is in, as an opaque identity (the
    /// address, never followed).
    pub fn namespace(&self) -> usize {
        // SAFETY: the netdev is valid; the pointer is only read.
        unsafe { bindings::srnic_netdev_net(self.as_raw()) as usize }
    }

    /// The network namespace the netdev is in now, for the read-side
    /// section `_guard`. A netdev may move to another namespace at any
    /// time and its old one then go, but a namespace is freed only after
    /// a grace period that follows the move (`dev_net_rcu`).
    pub fn net<'g>(&'g self, _guard: &'g super::rcu::RcuReadGuard) -> &'g super::net::Net {
        // SAFETY: the netdev is valid, and the namespace read under the
        // section stays until it ends, which `'g` cannot outlast.
        unsafe { super::net::Net::from_raw(bindings::srnic_netdev_net_rcu(self.as_raw())) }
    }

    /// The network namespace the netdev is in, while RTNL is held: a
    /// netdev changes namespace only under RTNL, and a namespace takes its
    /// devices out (under RTNL) before it goes.
    pub fn net_under_rtnl<'a>(&'a self, _rtnl: &'a RtnlGuard) -> &'a super::net::Net {
        // SAFETY: the netdev is valid; its namespace outlives the RTNL
        // section `'a` borrows.
        unsafe { super::net::Net::from_raw(bindings::srnic_netdev_net(self.as_raw())) }
    }

    /// A counted reference on the network namespace the netdev is in now;
    /// `None` if that namespace is being dismantled.
    pub fn net_ref(&self) -> Option<super::net::NetRef> {
        let guard = super::rcu::RcuReadGuard::new();
        self.net(&guard).get()
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: the netdev is valid.
        unsafe { bindings::srnic_netdev_ifindex(self.as_raw()) }
    }

    /// The MTU in bytes.
    pub fn mtu(&self) -> u32 {
        // SAFETY: the field is inside the valid netdev; it changes under
        // RTNL with `WRITE_ONCE`, so a volatile read sees a whole value.
        unsafe { core::ptr::addr_of!((*self.as_raw()).mtu).read_volatile() }
    }

    /// Whether the interface is administratively up (`IFF_UP` and running).
    pub fn is_running(&self) -> bool {
        // SAFETY: the netdev is valid.
        unsafe { bindings::srnic_netif_running(self.as_raw()) }
    }

    /// Whether the interface has carrier.
    pub fn has_carrier(&self) -> bool {
        // SAFETY: the netdev is valid.
        unsafe { bindings::srnic_netif_carrier_ok(self.as_raw()) }
    }

    /// Whether the interface is registered (not yet being unregistered).
    pub fn is_registered(&self) -> bool {
        // SAFETY: the netdev is valid.
        unsafe { bindings::srnic_netdev_is_registered(self.as_raw()) }
    }

    /// The VLAN id of an 802.1Q VLAN interface; `None` for any other.
    pub fn vlan_id(&self) -> Option<u16> {
        // SAFETY: the netdev is valid; a VLAN interface's id is set when
        // it is created and never changes.
        u16::try_from(unsafe { bindings::srnic_netdev_vlan_id(self.as_raw()) }).ok()
    }

    /// The VLAN the RDMA core ascribes to addresses of this interface
    /// (`rdma_read_gid_l2_fields`): its own if it is a VLAN, else that of
    /// the first device it is stacked on, if that is a VLAN (a macvlan on
    /// a VLAN).
    pub fn rdma_vlan_id(&self, guard: &RcuReadGuard) -> Option<u16> {
        if let Some(id) = self.vlan_id() {
            return Some(id);
        }
        let mut id = None;
        self.find_lower(guard, |lower| {
            id = lower.vlan_id();
            true
        });
        id
    }

    /// Calls `found` on the devices this one is stacked on (a VLAN's or a
    /// macvlan's real device, a bond's slaves), at every level, depth
    /// first, nearest first, until it returns `true`; whether it did.
    pub fn find_lower(
        &self,
        _guard: &RcuReadGuard,
        mut found: impl FnMut(&NetDevice) -> bool,
    ) -> bool {
        let mut found: &mut dyn FnMut(&NetDevice) -> bool = &mut found;
        let mut private = bindings::netdev_nested_priv {
            data: core::ptr::addr_of_mut!(found).cast(),
            ..Default::default()
        };
        // `visit_lower` reads `private.data` as the `&mut dyn FnMut` it
        // points to, which lives on this stack frame for the whole walk.
        // SAFETY: the netdev is valid, the caller holds the RCU read lock
        // the walk needs (`_guard`), and `private` outlives the walk.
        let stopped = unsafe {
            bindings::netdev_walk_all_lower_dev_rcu(self.as_raw(), Some(visit_lower), &mut private)
        };
        stopped != 0
    }

    /// The interface flags (`IFF_*`), read once as a whole word: they
    /// change under RTNL while the data path reads them.
    fn flags(&self) -> u32 {
        // SAFETY: the netdev is valid; `flags` is read as a whole word.
        unsafe { core::ptr::addr_of!((*self.as_raw()).flags).read_volatile() }
    }

    /// Whether this is a loopback interface.
    pub fn is_loopback(&self) -> bool {
        self.flags() & bindings::net_device_flags_IFF_LOOPBACK != 0
    }

    /// Whether the interface receives every frame (`IFF_PROMISC`: set by
    /// packet capture, bridges and macvlans among others).
    pub fn is_promiscuous(&self) -> bool {
        self.flags() & bindings::net_device_flags_IFF_PROMISC != 0
    }

    /// Makes the netdev receive frames sent to Ethernet multicast address
    /// `mac`, one reference more (the core counts each address's users).
    /// Process or softirq context, interrupts on.
    pub fn multicast_add(&self, mac: &[u8; 6]) -> Result {
        // SAFETY: the netdev is valid; `dev_mc_add` copies the address and
        // takes the netdev's address lock itself.
        to_result(unsafe { bindings::dev_mc_add(self.as_raw(), mac.as_ptr()) })
    }

    /// Drops one reference [`Self::multicast_add`] took on `mac`.
    pub fn multicast_del(&self, mac: &[u8; 6]) -> Result {
        // SAFETY: as in `multicast_add`.
        to_result(unsafe { bindings::dev_mc_del(self.as_raw(), mac.as_ptr()) })
    }

    /// The 6-byte hardware address of an Ethernet-type interface, or `None`
    /// for interfaces with no Ethernet framing (tunnels, IP-only devices).
    pub fn ethernet_address(&self) -> Option<[u8; 6]> {
        let dev = self.as_raw();
        // SAFETY: the netdev is valid; these fields change only under RTNL
        // (a bond taking a slave's type), and a stale value only
        // misclassifies the netdev, which the caller reports as an error.
        let (kind, addr_len, addr) = unsafe { ((*dev).type_, (*dev).addr_len, (*dev).dev_addr) };
        if u32::from(kind) != bindings::ARPHRD_ETHER
            || usize::from(addr_len) != bindings::ETH_ALEN as usize
            || addr.is_null()
        {
            return None;
        }
        let mut mac = [0u8; 6];
        // SAFETY: `dev_addr` points to at least `addr_len` (6) bytes owned
        // by the netdev; address changes happen under RTNL and a torn read
        // only yields a stale address.
        unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), mac.len()) };
        Some(mac)
    }
}

/// One step of [`NetDevice::find_lower`]'s walk: nonzero stops it.
///
/// # Safety
///
/// Called only by `netdev_walk_all_lower_dev_rcu` from `find_lower`, with
/// the `private` that set up.
unsafe extern "C" fn visit_lower(
    dev: *mut bindings::net_device,
    private: *mut bindings::netdev_nested_priv,
) -> c_int {
    // SAFETY: `data` points to `find_lower`'s `&mut dyn FnMut`, which
    // outlives the walk and nothing else uses while it runs.
    let found = unsafe { &mut *(*private).data.cast::<&mut dyn FnMut(&NetDevice) -> bool>() };
    // SAFETY: the walk runs under the RCU read lock and hands out devices
    // linked below the valid start device, which stay valid until it ends.
    let dev = unsafe { NetDevice::from_raw(dev) };
    c_int::from(found(dev))
}

/// A name copied out of a kernel object at one moment (a netdev's or an
/// RDMA device's, which a rename may change and free at any time):
/// displays up to its first NUL.
pub struct FixedName<const N: usize>([u8; N]);

/// A netdev's name as it was when copied.
pub type NetdevName = FixedName<16>;

impl<const N: usize> FixedName<N> {
    /// Wraps the bytes of a copied name.
    pub fn new(bytes: [u8; N]) -> Self {
        Self(bytes)
    }

    /// The name as a C string (the last byte is always NUL; a torn copy is
    /// cut there).
    pub fn as_c_str(&mut self) -> &CStr {
        if let Some(last) = self.0.last_mut() {
            *last = 0;
        }
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(0);
        CStr::from_bytes_with_nul(self.0.get(..=len).unwrap_or(&[0])).unwrap_or(kernel::c_str!(""))
    }
}

impl<const N: usize> core::fmt::Display for FixedName<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        for &byte in self.0.iter().take(len) {
            let shown = if byte.is_ascii_graphic() {
                byte as char
            } else {
                '?'
            };
            core::fmt::Write::write_char(f, shown)?;
        }
        Ok(())
    }
}

/// Holds the RTNL lock until dropped.
pub struct RtnlGuard(());

/// Takes the RTNL lock, which serialises netdev state changes and the
/// netdev notifier.
pub fn rtnl_lock() -> RtnlGuard {
    // SAFETY: taking RTNL from process context; released on drop.
    unsafe { bindings::rtnl_lock() };
    RtnlGuard(())
}

/// Takes RTNL if it is free: for work that RTNL holders may wait for.
pub fn rtnl_try_lock() -> Option<RtnlGuard> {
    // SAFETY: takes the lock or nothing; the guard releases what it took.
    // Made lazily: a guard made and dropped when the lock is busy would
    // release another thread's RTNL.
    (unsafe { bindings::rtnl_trylock() } != 0).then(|| RtnlGuard(()))
}

impl RtnlGuard {
    /// A guard for RTNL the caller already holds (a callback the core
    /// runs under RTNL); dropping it unlocks, so callers wrap it in
    /// `ManuallyDrop`.
    ///
    /// # Safety
    ///
    /// RTNL is held by this thread for as long as the guard is used.
    pub(crate) unsafe fn assume_held() -> Self {
        RtnlGuard(())
    }
}

impl Drop for RtnlGuard {
    fn drop(&mut self) {
        // SAFETY: the guard exists only while RTNL is held by this thread.
        unsafe { bindings::rtnl_unlock() };
    }
}

/// The netdev events drivers act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The interface came up.
    Up,
    /// The interface went down.
    Down,
    /// Carrier or other state changed.
    Change,
    /// The MTU changed.
    ChangeMtu,
    /// The hardware address changed.
    ChangeAddr,
    /// The interface is being unregistered; drop every reference to it.
    Unregister,
    /// Any other event.
    Other(u64),
}

impl NetdevEvent {
    fn from_raw(event: c_ulong) -> Self {
        let event = event as u64;
        match event as u32 {
            _ if event > u64::from(u32::MAX) => Self::Other(event),
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other(event),
        }
    }
}

/// What a netdev notifier does with each event.
pub trait NetdevHandler: Send + Sync {
    /// Called for every event on every netdev, in process context with RTNL
    /// held.
    fn event(&self, event: NetdevEvent, dev: &NetDevice);
}

struct NotifierBlock<H> {
    nb: Opaque<bindings::notifier_block>,
    handler: H,
    _pin: PhantomPinned,
}

/// A registered netdev notifier; unregistered when dropped.
pub struct NetdevNotifier<H: NetdevHandler> {
    block: Pin<KBox<NotifierBlock<H>>>,
}

// SAFETY: the notifier block is only touched by the notifier chain, which
// serialises its use, and `H` is `Send + Sync`.
unsafe impl<H: NetdevHandler> Send for NetdevNotifier<H> {}
// SAFETY: as above; `&self` exposes nothing.
unsafe impl<H: NetdevHandler> Sync for NetdevNotifier<H> {}

impl<H: NetdevHandler> NetdevNotifier<H> {
    /// Registers `handler` for netdev events. Registration replays
    /// `NETDEV_REGISTER` and `NETDEV_UP` for existing netdevs.
    pub fn register(handler: H) -> Result<Self> {
        let nb = bindings::notifier_block {
            notifier_call: Some(Self::notifier_call),
            ..Default::default()
        };
        let block = KBox::pin(
            NotifierBlock {
                nb: Opaque::new(nb),
                handler,
                _pin: PhantomPinned,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: the block is pinned in memory until `drop` unregisters it.
        to_result(unsafe { bindings::register_netdevice_notifier(block.nb.get()) })?;
        Ok(Self { block })
    }

    /// # Safety
    ///
    /// Called only by the netdev notifier chain for the notifier block this
    /// module registered.
    unsafe extern "C" fn notifier_call(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        info: *mut c_void,
    ) -> c_int {
        // SAFETY: `nb` is the `nb` field of a pinned `NotifierBlock<H>`
        // registered in `register`; `Opaque` is transparent.
        let block = unsafe {
            &*kernel::container_of!(
                nb.cast::<Opaque<bindings::notifier_block>>(),
                NotifierBlock<H>,
                nb
            )
        };
        // SAFETY: netdev notifier payloads start with `netdev_notifier_info`,
        // which names a netdev that is valid for the duration of the call.
        let dev = unsafe { NetDevice::from_raw(bindings::srnic_netdev_notifier_info_to_dev(info)) };
        block.handler.event(NetdevEvent::from_raw(event), dev);
        bindings::NOTIFY_DONE as c_int
    }
}

impl<H: NetdevHandler> Drop for NetdevNotifier<H> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; after this returns no callback
        // runs, so the block may be freed.
        unsafe { bindings::unregister_netdevice_notifier(self.block.nb.get()) };
    }
}
