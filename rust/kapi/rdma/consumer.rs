// SPDX-License-Identifier: GPL-2.0

//! The RDMA core's consumer side: a kernel ULP (iblan) as a client of every
//! RDMA device, and the objects it owns there: a PD, CQs, a UD QP and
//! address handles, with posting and polling.
//!
//! The provider side of this crate (the rest of `rdma`) implements verbs;
//! this module calls them, through the core, on any device: srnic, rxe or
//! a real HCA.

use crate::bindings;
use crate::kapi::netdev::NetDevice;
use crate::kapi::skb::SkBuff;
use core::marker::{PhantomData, PhantomPinned};
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::alloc::{KBox, KVec};
use kernel::error::{from_err_ptr, to_result};
use kernel::ffi::{c_int, c_void};
use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// A `struct ib_device` the core handed to a client, borrowed.
#[repr(transparent)]
pub struct IbDevice(Opaque<bindings::ib_device>);

impl IbDevice {
    /// # Safety
    ///
    /// `ptr` must be a registered device that stays valid for `'a` (a
    /// client's device between `add` and `remove`).
    unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: transparent wrapper; validity is the caller's promise.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_device {
        self.0.get()
    }

    /// The device name (`srnic0`, `rxe0`, ...), as it is now.
    pub fn name(&self) -> super::device::DeviceName {
        // SAFETY: the device is allocated while we reference it.
        unsafe { super::device::device_name(self.as_raw()) }
    }

    /// The node GUID as a number (the core keeps it in network order).
    pub fn node_guid(&self) -> u64 {
        // SAFETY: a plain field of the live device, set before registration.
        u64::from_be(unsafe { (*self.as_raw()).node_guid })
    }

    /// How many completion vectors the device has (at least 1).
    pub fn num_comp_vectors(&self) -> u32 {
        // SAFETY: a plain field of the live device, set before registration.
        let vectors = unsafe { (*self.as_raw()).num_comp_vectors };
        u32::try_from(vectors).unwrap_or(1).max(1)
    }

    /// The most gather elements a send and a receive work request of a QP
    /// may have on this device.
    pub fn max_sge(&self) -> (u32, u32) {
        // SAFETY: plain fields of the live device, set before registration.
        let (send, recv) = unsafe {
            let attrs = &(*self.as_raw()).attrs;
            (attrs.max_send_sge, attrs.max_recv_sge)
        };
        (
            u32::try_from(send).unwrap_or(0),
            u32::try_from(recv).unwrap_or(0),
        )
    }

    /// The port numbers, 1-based.
    pub fn ports(&self) -> core::ops::RangeInclusive<u32> {
        // SAFETY: the live device; the count is fixed at registration.
        1..=unsafe { bindings::srnic_ulp_phys_port_count(self.as_raw()) }
    }

    /// Whether `port` runs RoCE (IP-routed GIDs, no subnet manager).
    pub fn port_is_roce(&self, port: u32) -> bool {
        // SAFETY: the live device; the core checks the port number.
        unsafe { bindings::srnic_ulp_port_is_roce(self.as_raw(), port) }
    }

    /// Whether `port` is active (its link is up).
    pub fn port_active(&self, port: u32) -> bool {
        // SAFETY: the live device; the core checks the port number.
        unsafe { bindings::srnic_ulp_port_active(self.as_raw(), port) }
    }

    /// The active MTU of `port` in bytes.
    pub fn port_mtu(&self, port: u32) -> Result<u32> {
        // SAFETY: the live device; the core checks the port number.
        let mtu = unsafe { bindings::srnic_ulp_port_mtu_bytes(self.as_raw(), port) };
        to_result(mtu)?;
        u32::try_from(mtu).map_err(|_| EINVAL)
    }

    /// GID `index` of `port` and whether it is a RoCEv2 GID; `ENOENT` for an
    /// empty entry, `EINVAL` past the end of the table.
    pub fn gid(&self, port: u32, index: u32) -> Result<([u8; 16], bool)> {
        let mut gid = [0u8; 16];
        let mut roce_v2 = false;
        // SAFETY: the live device; both outputs are writable and sized for
        // what the shim writes.
        to_result(unsafe {
            bindings::srnic_ulp_gid_entry(
                self.as_raw(),
                port,
                index,
                gid.as_mut_ptr(),
                &mut roce_v2,
            )
        })?;
        Ok((gid, roce_v2))
    }

    /// The netdev under a RoCE `port`, referenced.
    pub fn port_netdev(&self, port: u32) -> Option<NetdevRef> {
        // SAFETY: the live device; a non-NULL result carries a reference
        // that `NetdevRef` puts.
        let raw = unsafe { bindings::srnic_ulp_port_netdev(self.as_raw(), port) };
        NonNull::new(raw).map(NetdevRef)
    }

    /// Takes a registration reference, so the device stays registered
    /// (its driver and verbs with it) beyond a borrow of the caller's;
    /// `ENODEV` once its unregistration has begun.
    ///
    /// The core's unregistration waits for these references after it has
    /// removed its clients: a client drops them in its `remove` at the
    /// latest (objects made on the device hold one each).
    pub fn get(&self) -> Result<DeviceRef> {
        // SAFETY: the device is live for the borrow; a reference taken is
        // put by `DeviceRef`.
        if unsafe { bindings::srnic_ib_device_try_get(self.as_raw()) } {
            Ok(DeviceRef(NonNull::from(self)))
        } else {
            Err(ENODEV)
        }
    }

    /// Where a netdev over `port` sits: under the device's parent (a PCI
    /// function for an HCA; none for a software device), as port
    /// `port - 1` of it.
    pub fn placement(&self, port: u32) -> crate::kapi::ether::Placement<'_> {
        crate::kapi::ether::Placement {
            // SAFETY: the device is live; its parent outlives it.
            parent: unsafe { bindings::srnic_ib_device_parent(self.as_raw()) },
            dev_port: u16::try_from(port.saturating_sub(1)).unwrap_or(u16::MAX),
            _parent: core::marker::PhantomData,
        }
    }
}

/// The longest RDMA device name, with its NUL.
pub const DEVICE_NAME_MAX: usize = bindings::IB_DEVICE_NAME_MAX as usize;

/// A registration reference on an RDMA device (`ib_device_try_get`): while
/// it is held the device cannot finish unregistering, so its memory, its
/// driver's verbs and their state stay.
///
/// # Invariants
///
/// Holds one registration reference on the device at `self.0`.
pub struct DeviceRef(NonNull<IbDevice>);

// SAFETY: a device reference may be put from any thread.
unsafe impl Send for DeviceRef {}
// SAFETY: `IbDevice` exposes only thread-safe queries.
unsafe impl Sync for DeviceRef {}

impl core::ops::Deref for DeviceRef {
    type Target = IbDevice;
    fn deref(&self) -> &IbDevice {
        // SAFETY: the registration reference keeps the device registered,
        // so its memory and its verbs are valid (type invariant).
        unsafe { self.0.as_ref() }
    }
}

impl Clone for DeviceRef {
    fn clone(&self) -> Self {
        // SAFETY: the device is live; the count is above zero while this
        // reference holds it, so the new one is taken.
        unsafe { bindings::srnic_ib_device_get_again(self.0.as_ref().as_raw()) };
        Self(self.0)
    }
}

impl Drop for DeviceRef {
    fn drop(&mut self) {
        // SAFETY: the reference this value holds (type invariant), put once.
        unsafe { bindings::ib_device_put(self.0.as_ref().as_raw()) };
    }
}

/// A counted reference to a netdev.
pub struct NetdevRef(NonNull<bindings::net_device>);

// SAFETY: netdev references may be put from any thread.
unsafe impl Send for NetdevRef {}
// SAFETY: `NetDevice` exposes only thread-safe queries.
unsafe impl Sync for NetdevRef {}

impl core::ops::Deref for NetdevRef {
    type Target = NetDevice;
    fn deref(&self) -> &NetDevice {
        // SAFETY: the reference keeps the netdev alive.
        unsafe { NetDevice::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for NetdevRef {
    fn drop(&mut self) {
        // SAFETY: the reference came from `ib_device_get_netdev`.
        unsafe { bindings::srnic_dev_put(self.0.as_ptr()) };
    }
}

/// Joins the IPv6 multicast `group` on `netdev` at the IP layer, which
/// RoCEv2 multicast needs (the IP layer drops groups the interface has not
/// joined); the membership is left when the value is dropped.
pub struct Ipv6Membership {
    netdev: NetdevRef,
    group: [u8; 16],
}

impl Ipv6Membership {
    /// Joins `group` on `netdev`.
    pub fn join(netdev: NetdevRef, group: [u8; 16]) -> Result<Self> {
        // SAFETY: a referenced netdev and a 16-byte address.
        to_result(unsafe { bindings::srnic_ulp_ipv6_mc_join(netdev.as_raw(), group.as_ptr()) })?;
        Ok(Self { netdev, group })
    }
}

impl Drop for Ipv6Membership {
    fn drop(&mut self) {
        // SAFETY: joined in `join`; the netdev is still referenced.
        let _ =
            unsafe { bindings::srnic_ulp_ipv6_mc_leave(self.netdev.as_raw(), self.group.as_ptr()) };
    }
}

/// What a client does with devices.
pub trait ClientHandler: Sized + Send + Sync + 'static {
    /// The client's name in the core.
    const NAME: &'static CStr;
    /// What the client keeps per device.
    type PerDevice: Send + Sync;
    /// What the client keeps while it is registered, shared by its devices.
    type Context: Send + Sync;
    /// The client's registration, which the core's callbacks need (the
    /// core's `add` does not say which client it is for).
    fn client() -> &'static Client<Self>;
    /// A device appeared (or the client registered while it exists).
    /// Process context; may sleep.
    fn add(context: &Self::Context, dev: &IbDevice) -> Result<Pin<KBox<Self::PerDevice>>>;
    /// The device goes (or the client unregisters): undo `add`.
    fn remove(context: &Self::Context, dev: &IbDevice, data: Pin<KBox<Self::PerDevice>>);
}

/// An `ib_client`, in a `static` of the driver.
///
/// # Invariants
///
/// `raw` is uninitialised, and only its address used, until
/// [`Self::register`] writes it, once, before registering it; it is not
/// written after that. [`ClientHandler::client`] returns this client.
pub struct Client<H: ClientHandler> {
    raw: Opaque<bindings::ib_client>,
    /// The context of the live [`ClientRegistration`] (NULL without one):
    /// set before the core may call `add`, freed after it can no more.
    context: AtomicPtr<H::Context>,
    /// Set while a [`ClientRegistration`] lives: `raw` is then the core's,
    /// and not written.
    registered: AtomicBool,
    _handler: PhantomData<H>,
}

// SAFETY: the core serialises its use of the client; the struct is only
// written before registration. The context is shared with the callbacks
// (`Sync`) and freed by whichever thread unregisters (`Send`).
unsafe impl<H: ClientHandler> Sync for Client<H> {}

impl<H: ClientHandler> Default for Client<H> {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered client; unregistered when dropped, after which its context
/// goes.
pub struct ClientRegistration<H: ClientHandler> {
    client: &'static Client<H>,
}

impl<H: ClientHandler> Client<H> {
    /// An unregistered client.
    pub const fn new() -> Self {
        Self {
            raw: Opaque::uninit(),
            context: AtomicPtr::new(core::ptr::null_mut()),
            registered: AtomicBool::new(false),
            _handler: PhantomData,
        }
    }

    /// Registers the client with `context`: `add` runs for every existing
    /// device now and for every later one, until the registration drops.
    /// `EBUSY` while the client is registered already.
    pub fn register(&'static self, context: H::Context) -> Result<ClientRegistration<H>> {
        let context = KBox::new(context, GFP_KERNEL)?;
        if self.registered.swap(true, Ordering::AcqRel) {
            return Err(EBUSY);
        }
        self.context
            .store(KBox::into_raw(context), Ordering::Release);
        let client = bindings::ib_client {
            name: H::NAME.as_char_ptr(),
            add: Some(Self::add_callback),
            remove: Some(Self::remove_callback),
            ..Default::default()
        };
        // SAFETY: the client is not registered (the flag was clear, and
        // this call set it), so nobody else reads it; it lives in a static.
        unsafe { self.raw.get().write(client) };
        // SAFETY: an initialised client in static memory.
        if let Err(err) = to_result(unsafe { bindings::ib_register_client(self.raw.get()) }) {
            // The core has removed every device it added and unregistered
            // the client itself: no callback runs any more.
            // SAFETY: as just said, not registered.
            unsafe { self.free_context() };
            return Err(err);
        }
        Ok(ClientRegistration { client: self })
    }

    /// Frees the context and lets the client be registered again.
    ///
    /// # Safety
    ///
    /// The client is not registered (any more): no callback runs.
    unsafe fn free_context(&self) {
        let context = self.context.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !context.is_null() {
            // SAFETY: `register` leaked this box, and the swap took it back
            // once; no callback uses it any more (the caller's promise).
            drop(unsafe { KBox::from_raw(context) });
        }
        self.registered.store(false, Ordering::Release);
    }

    /// The live registration's context.
    ///
    /// # Safety
    ///
    /// Called from the core's `add` or `remove` callback of this client,
    /// which run only while it is registered.
    unsafe fn context<'a>(&self) -> Option<&'a H::Context> {
        let context = self.context.load(Ordering::Acquire);
        // SAFETY: set before registration and freed only after
        // `ib_unregister_client` returned, when no callback runs any more
        // (the caller runs in one).
        unsafe { context.as_ref() }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core for the client, CQ or handler this module
    /// registered, with the context it registered.
    unsafe extern "C" fn add_callback(raw: *mut bindings::ib_device) -> c_int {
        // SAFETY: the core passes a registered device, valid until
        // `remove_callback` runs for it.
        let dev = unsafe { IbDevice::from_raw(raw) };
        // SAFETY: the core's `add` of this client.
        let Some(context) = (unsafe { H::client().context() }) else {
            return ENODEV.to_errno();
        };
        match H::add(context, dev) {
            Ok(data) => {
                // SAFETY: turned back into the box only by `remove_callback`,
                // which does not move the value out.
                let ptr = KBox::into_raw(unsafe { Pin::into_inner_unchecked(data) });
                // SAFETY: the client is registered (the core is calling it),
                // and is `H`'s (type invariant).
                unsafe {
                    bindings::ib_set_client_data(raw, H::client().raw.get(), ptr.cast::<c_void>())
                };
                0
            }
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core for the client, CQ or handler this module
    /// registered, with the context it registered.
    unsafe extern "C" fn remove_callback(raw: *mut bindings::ib_device, data: *mut c_void) {
        // SAFETY: as in `add_callback`; the device is still valid here.
        let dev = unsafe { IbDevice::from_raw(raw) };
        if data.is_null() {
            return;
        }
        // SAFETY: `data` is what `add_callback` stored: a leaked pinned box.
        let data = unsafe { Pin::new_unchecked(KBox::from_raw(data.cast::<H::PerDevice>())) };
        // SAFETY: the core's `remove` of this client.
        let Some(context) = (unsafe { H::client().context() }) else {
            return;
        };
        H::remove(context, dev, data);
    }
}

impl<H: ClientHandler> Drop for ClientRegistration<H> {
    fn drop(&mut self) {
        let client = self.client;
        // SAFETY: registered by `register` (a registration exists only
        // after success), once; `remove` has run for every device and no
        // callback runs when this returns.
        unsafe { bindings::ib_unregister_client(client.raw.get()) };
        // SAFETY: unregistered just above.
        unsafe { client.free_context() };
    }
}

/// Port state changes of one device.
pub trait PortEventHandler: Send + Sync {
    /// `port` became active (`true`) or went down (`false`). Process
    /// context.
    fn port_event(&self, port: u32, active: bool);
}

/// A registered `ib_event_handler`; unregistered when dropped.
pub struct PortEvents<H: PortEventHandler> {
    inner: Pin<KBox<EventsInner<H>>>,
}

struct EventsInner<H> {
    raw: Opaque<bindings::ib_event_handler>,
    device: DeviceRef,
    handler: H,
    _pin: PhantomPinned,
}

// SAFETY: the handler struct is only touched by the core, which serialises
// its use, and by `drop`; `H` is `Send + Sync`.
unsafe impl<H: PortEventHandler> Send for PortEvents<H> {}
// SAFETY: as above; `&self` exposes nothing.
unsafe impl<H: PortEventHandler> Sync for PortEvents<H> {}

impl<H: PortEventHandler> PortEvents<H> {
    /// Registers `handler` for the events of `dev`.
    pub fn register(dev: &IbDevice, handler: H) -> Result<Self> {
        let inner = KBox::pin(
            EventsInner {
                raw: Opaque::uninit(),
                device: dev.get()?,
                handler,
                _pin: PhantomPinned,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: the handler struct is pinned until `drop` unregisters it.
        unsafe {
            bindings::srnic_ulp_init_event_handler(
                inner.raw.get(),
                inner.device.as_raw(),
                Some(Self::callback),
            );
            bindings::ib_register_event_handler(inner.raw.get());
        }
        Ok(Self { inner })
    }

    /// The handler: what it owns stays until the registration drops, after
    /// the last event.
    pub fn handler(&self) -> &H {
        &self.inner.handler
    }

    /// # Safety
    ///
    /// Called only by the RDMA core for the client, CQ or handler this module
    /// registered, with the context it registered.
    unsafe extern "C" fn callback(
        raw: *mut bindings::ib_event_handler,
        event: *mut bindings::ib_event,
    ) {
        // SAFETY: `raw` is the `raw` field of a pinned `EventsInner<H>`
        // registered above; `Opaque` is transparent.
        let inner = unsafe {
            &*kernel::container_of!(
                raw.cast::<Opaque<bindings::ib_event_handler>>(),
                EventsInner<H>,
                raw
            )
        };
        // SAFETY: the core passes a valid event for the call's duration.
        let (kind, port) = unsafe { ((*event).event, (*event).element.port_num) };
        match kind {
            bindings::ib_event_type_IB_EVENT_PORT_ACTIVE => inner.handler.port_event(port, true),
            bindings::ib_event_type_IB_EVENT_PORT_ERR => inner.handler.port_event(port, false),
            _ => {}
        }
    }
}

impl<H: PortEventHandler> Drop for PortEvents<H> {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; no callback runs once this
        // returns.
        unsafe { bindings::ib_unregister_event_handler(self.inner.raw.get()) };
    }
}

/// A protection domain, shared: the CQs, QPs, AHs and buffers made with
/// it hold it, so it is deallocated only after the last of them (and the
/// device stays registered until then).
#[derive(Clone)]
pub struct Pd(Arc<PdInner>);

struct PdInner {
    raw: NonNull<bindings::ib_pd>,
    device: DeviceRef,
}

// SAFETY: the core's PD may be used and freed from any thread.
unsafe impl Send for PdInner {}
// SAFETY: shared use only reads immutable fields.
unsafe impl Sync for PdInner {}

impl Pd {
    /// Allocates a PD on `dev` for the module `caller`.
    pub fn new(dev: &IbDevice, caller: &'static CStr) -> Result<Self> {
        let device = dev.get()?;
        // SAFETY: a live device; the caller name is static.
        let raw = from_err_ptr(unsafe {
            bindings::srnic_ulp_alloc_pd(dev.as_raw(), caller.as_char_ptr())
        })?;
        let inner = PdInner {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            device,
        };
        Ok(Self(Arc::new(inner, GFP_KERNEL)?))
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_pd {
        self.0.raw.as_ptr()
    }

    /// Whether `self` and `other` are the same PD.
    fn same(&self, other: &Pd) -> bool {
        self.0.raw == other.0.raw
    }

    /// The lkey that covers all kernel memory the device can reach.
    pub fn local_dma_lkey(&self) -> u32 {
        // SAFETY: set at allocation, immutable since.
        unsafe { (*self.0.raw.as_ptr()).local_dma_lkey }
    }

    /// The device of the PD.
    pub fn device(&self) -> &IbDevice {
        &self.0.device
    }
}

/// A mapping of memory for a device, in one direction, for as long as it
/// lives (undone by `drop`): the memory of a [`DmaBuffer`], or a page of an
/// RC QP's receive buffer.
///
/// Whoever owns the bytes at a time says so on each hand-over: on a device
/// that maps through bounce buffers (swiotlb) or is not cache coherent,
/// the CPU otherwise reads stale bytes, or the device sends them.
///
/// # Invariants
///
/// `dma` is the live mapping of `len` bytes for `device`, in direction
/// `to_device`, made by `srnic_ulp_dma_map_page` if `page` is set, else by
/// `srnic_ulp_dma_map`; undone only by `drop`.
pub(super) struct DmaMapping {
    dma: u64,
    len: usize,
    to_device: bool,
    page: bool,
    device: DeviceRef,
}

impl DmaMapping {
    /// Maps the `len` bytes at `addr` for `pd`'s device: `to_device` for
    /// memory the device reads (sends), else memory it writes (receives).
    ///
    /// # Safety
    ///
    /// The bytes are memory of the kernel's linear map (kmalloc, pages), not
    /// freed before the mapping drops. The device uses them between a post
    /// that points at them and that post's completion (or flush); the owner
    /// keeps such a post from overlapping the mapping's drop (it destroys the
    /// QP first) and the CPU's own use of the bytes.
    unsafe fn single(pd: &Pd, addr: *const u8, len: usize, to_device: bool) -> Result<Self> {
        let device = pd.0.device.clone();
        // SAFETY: per the caller, `len` bytes of the linear map at `addr`,
        // allocated until `drop` unmaps them.
        let dma = unsafe {
            bindings::srnic_ulp_dma_map(device.as_raw(), addr.cast_mut().cast(), len, to_device)
        };
        Self::made(dma, len, to_device, false, device)
    }

    /// Maps all of `page` for `pd`'s device, as [`Self::single`] does.
    ///
    /// # Safety
    ///
    /// The page is not freed before the mapping drops; the device uses it
    /// as [`Self::single`] says.
    pub(super) unsafe fn page(pd: &Pd, page: &Page, to_device: bool) -> Result<Self> {
        let device = pd.0.device.clone();
        // SAFETY: a page the caller keeps allocated until `drop` unmaps it;
        // the kernel crate's `struct page` is the one our bindings declare.
        let dma = unsafe {
            bindings::srnic_ulp_dma_map_page(
                device.as_raw(),
                page.as_ptr().cast(),
                0,
                PAGE_SIZE,
                to_device,
            )
        };
        Self::made(dma, PAGE_SIZE, to_device, true, device)
    }

    fn made(dma: u64, len: usize, to_device: bool, page: bool, device: DeviceRef) -> Result<Self> {
        // The shims return 0 for a failed mapping.
        if dma == 0 {
            return Err(ENOMEM);
        }
        Ok(Self {
            dma,
            len,
            to_device,
            page,
            device,
        })
    }

    /// The gather element of the first `len` bytes (at most all).
    pub(super) fn sge(&self, len: usize, lkey: u32) -> Sge {
        Sge {
            addr: self.dma,
            length: u32::try_from(len.min(self.len)).unwrap_or(u32::MAX),
            lkey,
        }
    }

    /// Hands the first `len` bytes (at most all) to the CPU, once the
    /// device's completion for them arrived; returns how many.
    pub(super) fn for_cpu(&self, len: usize) -> usize {
        self.sync(len, bindings::srnic_ulp_dma_sync_for_cpu)
    }

    /// Hands the first `len` bytes (at most all) to the device: before a
    /// post, those the CPU wrote or read since the last hand-over.
    pub(super) fn for_device(&self, len: usize) {
        self.sync(len, bindings::srnic_ulp_dma_sync_for_device);
    }

    /// Syncs the first `len` bytes (at most all) with `sync`, one of the
    /// two shims; returns how many.
    fn sync(
        &self,
        len: usize,
        sync: unsafe extern "C" fn(*mut bindings::ib_device, u64, usize, bool),
    ) -> usize {
        let len = len.min(self.len);
        // SAFETY: `dma` is this live mapping (type invariant), `len` within
        // it; both shims take it so.
        unsafe { sync(self.device.as_raw(), self.dma, len, self.to_device) };
        len
    }
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        let (dev, dma, len, to_device) = (self.device.as_raw(), self.dma, self.len, self.to_device);
        // The memory is still allocated and no work request uses it any
        // more (the contract of `single` and `page`).
        // SAFETY: the mapping made by the function `page` says, with its
        // length and direction (type invariant), unused (above).
        unsafe {
            if self.page {
                bindings::srnic_ulp_dma_unmap_page(dev, dma, len, to_device)
            } else {
                bindings::srnic_ulp_dma_unmap(dev, dma, len, to_device)
            }
        };
    }
}

/// A kernel buffer with its own mapping for a device, in one direction,
/// for as long as it lives: a receive buffer the device writes (reposted
/// many times), or a send buffer the CPU rewrites between sends. Only a
/// [`UdQp`] owns them, and it alone posts them: see its invariants.
///
/// # Invariants
///
/// `map` maps all of `bytes` (never resized); it is declared first, so it
/// is undone before the bytes are freed.
struct DmaBuffer {
    map: DmaMapping,
    bytes: KVec<u8>,
    lkey: u32,
}

impl DmaBuffer {
    /// `len` zeroed bytes mapped for `pd`'s device: `to_device` for a buffer
    /// the device reads (sends), else one it writes (receives).
    ///
    /// # Safety
    ///
    /// The device uses the buffer as [`DmaMapping::single`] says: the CPU
    /// reads it ([`Self::bytes`]) and writes it ([`Self::write`]) only
    /// outside its posts.
    unsafe fn new(pd: &Pd, len: usize, to_device: bool) -> Result<Self> {
        let bytes = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        // SAFETY: the vector's heap block, never resized and freed only
        // after the mapping (declared first) is undone; posts as the
        // caller promises.
        let map = unsafe { DmaMapping::single(pd, bytes.as_ptr(), len, to_device)? };
        Ok(Self {
            map,
            bytes,
            lkey: pd.local_dma_lkey(),
        })
    }

    /// The gather element of the first `len` bytes (at most all).
    fn sge(&self, len: usize) -> Sge {
        self.map.sge(len, self.lkey)
    }

    /// Hands the first `len` bytes (at most all) to the CPU, once the
    /// device's completion for the buffer arrived; returns how many.
    fn for_cpu(&self, len: usize) -> usize {
        self.map.for_cpu(len)
    }

    /// The first `len` bytes (at most all), as [`Self::for_cpu`] handed
    /// them over.
    fn bytes(&self, len: usize) -> &[u8] {
        self.bytes.get(..len).unwrap_or(&[])
    }

    /// Hands the whole buffer to the device: before each post.
    fn for_device(&self) {
        self.map.for_device(self.bytes.len());
    }

    /// Copies `src` (at most the buffer's length) to the start of the
    /// buffer; returns how many bytes.
    ///
    /// # Safety
    ///
    /// No work request that points at the buffer is outstanding, and no
    /// slice from [`Self::bytes`] is alive, nor another write running.
    unsafe fn write(&self, src: &[u8]) -> usize {
        let len = src.len().min(self.bytes.len());
        // SAFETY: `len` bytes fit in the buffer; the pointer is the heap
        // block's own (not derived from a shared slice), and per the caller
        // nothing else reads or writes those bytes meanwhile.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.bytes.as_ptr().cast_mut(), len)
        };
        len
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated in `Pd::new`; its users (CQs, QPs, AHs) are
        // gone, since each holds the `Pd`, and the device is registered
        // (`device` is dropped after this).
        unsafe { bindings::ib_dealloc_pd_user(self.raw.as_ptr(), core::ptr::null_mut()) };
    }
}

/// What a CQ's completion event does.
pub trait CqHandler: Send + Sync + 'static {
    /// A completion arrived on an armed CQ. Any context, hard IRQ included.
    fn completion(&self);
}

/// A completion queue with a handler for its events, for one [`UdQp`],
/// which owns it (so it is destroyed after the QP) and polls it.
pub struct Cq<H: CqHandler>(Arc<CqInner<H>>);

struct CqInner<H: CqHandler> {
    raw: NonNull<bindings::ib_cq>,
    handler: Pin<KBox<H>>,
    /// Keeps the device registered while the CQ lives.
    pd: Pd,
}

// SAFETY: the core's CQ may be polled and freed from any thread; `H` is
// `Send + Sync`.
unsafe impl<H: CqHandler> Send for CqInner<H> {}
// SAFETY: as above.
unsafe impl<H: CqHandler> Sync for CqInner<H> {}

impl<H: CqHandler> Cq<H> {
    /// Creates a CQ of `entries` on completion vector `vector` of `pd`'s
    /// device. It is not armed yet.
    pub fn new(
        pd: &Pd,
        entries: u32,
        vector: u32,
        handler: H,
        caller: &'static CStr,
    ) -> Result<Self> {
        let handler = KBox::pin(handler, GFP_KERNEL)?;
        let context: *const H = &*handler;
        // SAFETY: a live device; the context is pinned in the box, which
        // the CQ outlives never (it is dropped after the CQ).
        let raw = from_err_ptr(unsafe {
            bindings::srnic_ulp_create_cq(
                pd.0.device.as_raw(),
                Some(Self::event),
                context.cast_mut().cast(),
                c_int::try_from(entries).map_err(|_| EINVAL)?,
                c_int::try_from(vector).map_err(|_| EINVAL)?,
                caller.as_char_ptr(),
            )
        })?;
        let inner = CqInner {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            handler,
            pd: pd.clone(),
        };
        Ok(Self(Arc::new(inner, GFP_KERNEL)?))
    }

    /// # Safety
    ///
    /// Called only by the RDMA core for the client, CQ or handler this module
    /// registered, with the context it registered.
    unsafe extern "C" fn event(_cq: *mut bindings::ib_cq, context: *mut c_void) {
        // SAFETY: the context is the pinned handler, alive while the CQ is.
        let handler = unsafe { &*context.cast::<H>() };
        handler.completion();
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.0.handler
    }

    /// Polls up to `out.len()` completions; returns how many were written.
    /// Through [`UdQp::poll`] only: the QP owns the CQ, so each
    /// completion is of one of its work requests.
    pub(super) fn poll(&self, out: &mut [WorkCompletion<'_>]) -> usize {
        let want = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        let (cq, wcs) = (self.as_raw(), out.as_mut_ptr().cast());
        // SAFETY: a live CQ; `WorkCompletion` is a transparent `ib_wc`, and
        // `out` has room for `want` of them.
        let got = unsafe { bindings::srnic_ulp_poll_cq(cq, want, wcs) };
        usize::try_from(got).unwrap_or(0)
    }

    /// Moderates the CQ's events: one waits for `count` completions or
    /// `period_us` microseconds, whichever comes first
    /// (`rdma_set_cq_moderation`; `EOPNOTSUPP` from a device without it,
    /// `EINVAL` beyond its limits).
    pub fn set_moderation(&self, count: u16, period_us: u16) -> Result {
        // SAFETY: a live CQ.
        to_result(unsafe { bindings::rdma_set_cq_moderation(self.as_raw(), count, period_us) })
    }

    /// Arms the CQ for its next completion. Returns `true` if completions
    /// arrived meanwhile, so the caller must poll again rather than wait.
    pub fn arm(&self) -> bool {
        // SAFETY: a live CQ.
        unsafe { bindings::srnic_ulp_arm_cq(self.as_raw()) > 0 }
    }

    pub(super) fn as_raw(&self) -> *mut bindings::ib_cq {
        self.0.raw.as_ptr()
    }

    /// Whether the CQ belongs to the device of `pd`.
    fn on_device_of(&self, pd: &Pd) -> bool {
        self.0.pd.0.device.as_raw() == pd.0.device.as_raw()
    }
}

impl<H: CqHandler> Drop for CqInner<H> {
    fn drop(&mut self) {
        // SAFETY: created in `Cq::new`; its QP is gone (it owns the CQ).
        // No event runs after destruction, so the handler box (dropped
        // after this) may go.
        unsafe { bindings::ib_destroy_cq_user(self.raw.as_ptr(), core::ptr::null_mut()) };
    }
}

/// A work completion (`struct ib_wc`) that [`UdQp::poll`] wrote: a token
/// for what the QP had posted, which [`UdQp::complete`] redeems once (it
/// takes the value; there is no copy).
#[repr(transparent)]
pub struct WorkCompletion<'q>(bindings::ib_wc, PhantomData<&'q ()>);

impl Default for WorkCompletion<'_> {
    /// An empty slot: redeemed, it is of no QP.
    fn default() -> Self {
        Self(bindings::ib_wc::default(), PhantomData)
    }
}

impl WorkCompletion<'_> {
    pub(super) fn wr_id(&self) -> u64 {
        // SAFETY: kernel CQs without `ib_cqe` use the `wr_id` member.
        unsafe { self.0.__bindgen_anon_1.wr_id }
    }

    /// Whether the completion is of a WR of `qp` (an empty slot is of none).
    pub(super) fn of_qp(&self, qp: *mut bindings::ib_qp) -> bool {
        self.0.qp == qp
    }

    /// The bytes a receive got, as the device reports them.
    pub(super) fn byte_len(&self) -> usize {
        self.0.byte_len as usize
    }

    /// Whether the WR succeeded; flushed and failed WRs are not.
    pub fn ok(&self) -> bool {
        self.0.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }

    /// Whether the WR was flushed: its QP moved to the error state (torn
    /// down, or failed on another WR) before the WR ran.
    pub fn flushed(&self) -> bool {
        self.0.status == bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR
    }

    /// The raw status, for messages.
    pub fn status(&self) -> u32 {
        self.0.status
    }

    /// The sender's QPN (UD receive).
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }
}

/// An address handle: the route to one peer or group.
///
/// # Invariants
///
/// `raw` is an AH that `new` created on `pd`, owned by this value and
/// destroyed only by `drop`.
pub struct Ah {
    raw: NonNull<bindings::ib_ah>,
    pd: Pd,
}

// SAFETY: AHs may be used and destroyed from any thread.
unsafe impl Send for Ah {}
// SAFETY: posting only reads it.
unsafe impl Sync for Ah {}

impl Ah {
    /// An AH on `pd` to `dgid` from GID index `sgid_index` of `port`.
    /// Process context (the core may resolve the destination).
    pub fn new(pd: &Pd, port: u32, sgid_index: u8, dgid: &[u8; 16], hop_limit: u8) -> Result<Self> {
        // SAFETY: a live PD; the GID is 16 readable bytes.
        let raw = from_err_ptr(unsafe {
            bindings::srnic_ulp_create_ah(
                pd.0.raw.as_ptr(),
                port,
                sgid_index,
                dgid.as_ptr(),
                hop_limit,
                0,
            )
        })?;
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            pd: pd.clone(),
        })
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: ours (type invariant). Without the sleepable flag the core
        // may destroy it in any context.
        let _ =
            unsafe { bindings::rdma_destroy_ah_user(self.raw.as_ptr(), 0, core::ptr::null_mut()) };
    }
}

/// A gather element of a send or receive: bytes of a [`DmaBuffer`] or of
/// a mapped skb, with the local DMA lkey of their PD.
#[derive(Clone, Copy, Default)]
pub(super) struct Sge {
    pub(super) addr: u64,
    pub(super) length: u32,
    pub(super) lkey: u32,
}

impl Sge {
    /// The element as the core takes it.
    pub(super) fn raw(&self) -> bindings::ib_sge {
        bindings::ib_sge {
            addr: self.addr,
            length: self.length,
            lkey: self.lkey,
        }
    }
}

/// Work request identifiers: every WR on a [`UdQp`] is the QP's own, so
/// the identifier says what its completion gives back. An skb's is its
/// address (aligned: low bits clear); buffers are numbered.
pub(super) const WR_KIND_MASK: u64 = 3;
pub(super) const WR_RECV: u64 = 1;
const WR_BUFFER: u64 = 2;

/// An in-flight skb's control block: how many posts still hold it, and
/// its mapping, to undo after the last.
const CB_POSTS: usize = 0;
const CB_DMA: usize = 1;
const CB_LEN: usize = 2;

/// A send buffer of a [`UdQp`] and whether a send of it is outstanding.
struct SendBuffer {
    buffer: DmaBuffer,
    posted: AtomicBool,
}

/// A UD QP in RTS, with its CQ, its receive buffers and its send buffers.
/// It posts and redeems its work requests itself: receives into its own
/// buffers, sends of its own buffers ([`Self::post_buffer`]) and of skbs
/// ([`Self::send_skb`]), and what each completion gives back
/// ([`Self::complete`]).
///
/// # Invariants
///
/// `raw` is a UD QP that `new` created on `pd` and brought to RTS (ERR
/// after [`Self::flush`]), owned by this value and destroyed first by
/// `drop` (before its buffers go); `cq` is its send and receive CQ, of no
/// other QP; `groups` lists the multicast groups it is attached to.
///
/// Every WR on it was posted here, with an identifier of `WR_RECV | i << 2`
/// (a receive into `recv[i]`), `WR_BUFFER | i << 2` (a send of `send[i]`)
/// or an skb's address (`send_skb`). Receive buffer `i` is either posted
/// once, or owned by one [`Received`] (or by nobody: lost until the QP
/// goes); the CPU reads it only through that [`Received`]. Send buffer `i`
/// is written only by the caller that set its `posted` flag, which only
/// the completion of its send clears. An skb's control block counts the
/// posts still holding it, and the completion that takes it to zero
/// unmaps and frees it.
pub struct UdQp<H: CqHandler> {
    raw: NonNull<bindings::ib_qp>,
    groups: KVec<[u8; 16]>,
    /// What it was made with, kept until it is destroyed.
    pd: Pd,
    cq: Cq<H>,
    recv: KVec<DmaBuffer>,
    send: KVec<SendBuffer>,
}

// SAFETY: the core's QPs may be posted to and destroyed from any thread;
// the buffers are shared as the type invariant says.
unsafe impl<H: CqHandler> Send for UdQp<H> {}
// SAFETY: posting is serialised by the provider; the buffers as above.
unsafe impl<H: CqHandler> Sync for UdQp<H> {}

/// The most gather elements a post takes here.
pub const MAX_SEND_SGE: usize = 4;

/// What a [`UdQp`] is made with.
pub struct UdQpConfig {
    /// Send and receive queue depths.
    pub depths: (u32, u32),
    /// The port and Q_Key it serves.
    pub port: u32,
    /// The Q_Key.
    pub qkey: u32,
    /// Bytes of each receive buffer (one per receive queue entry, all
    /// posted at once), GRH area included.
    pub recv_len: usize,
    /// The lengths of its send buffers ([`UdQp::post_buffer`]).
    pub send_buffers: &'static [usize],
}

impl<H: CqHandler> UdQp<H> {
    /// Creates a UD QP on `pd` with `cq` for its sends and receives, brings
    /// it to RTS and posts a receive into each of its receive buffers.
    pub fn new(pd: &Pd, cq: Cq<H>, config: &UdQpConfig, caller: &'static CStr) -> Result<Self> {
        // A CQ of another device would reach that device's provider
        // through this one's.
        if !cq.on_device_of(pd) {
            return Err(EINVAL);
        }
        let (send_depth, recv_depth) = config.depths;
        // SAFETY: a live PD and a CQ of its device, which outlive the QP
        // (fields, dropped after `drop` destroys it).
        let raw = from_err_ptr(unsafe {
            bindings::srnic_ulp_create_ud_qp(
                pd.0.raw.as_ptr(),
                cq.as_raw(),
                send_depth,
                recv_depth,
                MAX_SEND_SGE as u32,
                caller.as_char_ptr(),
            )
        })?;
        let mut qp = Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            groups: KVec::new(),
            pd: pd.clone(),
            cq,
            recv: KVec::with_capacity(recv_depth as usize, GFP_KERNEL)?,
            send: KVec::with_capacity(config.send_buffers.len(), GFP_KERNEL)?,
        };
        for _ in 0..recv_depth {
            // SAFETY: owned by the QP, which is destroyed before its
            // buffers drop, and posts and reads them as its invariant says.
            let buffer = unsafe { DmaBuffer::new(pd, config.recv_len, false)? };
            qp.recv.push(buffer, GFP_KERNEL)?;
        }
        for len in config.send_buffers {
            // SAFETY: as above.
            let buffer = unsafe { DmaBuffer::new(pd, *len, true)? };
            let send = SendBuffer {
                buffer,
                posted: AtomicBool::new(false),
            };
            qp.send.push(send, GFP_KERNEL)?;
        }
        let (port, qkey) = (config.port, config.qkey);
        // SAFETY: the QP was just created, in RESET.
        to_result(unsafe { bindings::srnic_ulp_ud_qp_ready(qp.raw.as_ptr(), port, qkey) })?;
        for index in 0..qp.recv.len() {
            // SAFETY: each buffer is posted once here, before anything may
            // complete or read it.
            unsafe { qp.post_recv(index)? };
        }
        Ok(qp)
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: set at creation, immutable.
        unsafe { (*self.raw.as_ptr()).qp_num }
    }

    /// The CQ: its handler, arming and moderation.
    pub fn cq(&self) -> &Cq<H> {
        &self.cq
    }

    /// Polls up to `out.len()` completions of this QP; returns how many
    /// were written (at the start of `out`).
    pub fn poll<'q>(&'q self, out: &mut [WorkCompletion<'q>]) -> usize {
        self.cq.poll(out)
    }

    /// Posts receive buffer `index`.
    ///
    /// # Safety
    ///
    /// The buffer is not posted, and nothing reads it from now until its
    /// receive completes (its [`Received`] is given up, if it had one).
    unsafe fn post_recv(&self, index: usize) -> Result {
        let buffer = self.recv.get(index).ok_or(EINVAL)?;
        // What the CPU read, or cached, of the last datagram must not hide
        // the next one the device writes.
        buffer.for_device();
        let raw = buffer.sge(buffer.bytes.len()).raw();
        let wr_id = WR_RECV | (index as u64) << 2;
        // SAFETY: a live QP; the element covers the buffer's live mapping,
        // which the device may write (the caller's promise) until the
        // completion; it is read during the call.
        to_result(unsafe { bindings::srnic_ulp_post_recv_sges(self.raw.as_ptr(), wr_id, &raw, 1) })
    }

    /// Posts one signalled send of `sges` to `remote_qpn` through `ah`.
    ///
    /// # Safety
    ///
    /// `wr_id` is one of the identifiers of the type invariant, for the
    /// memory `sges` covers, which stays mapped until the send completes.
    unsafe fn post_send(
        &self,
        wr_id: u64,
        sges: &[Sge],
        ah: &Ah,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> Result {
        if sges.is_empty() || sges.len() > MAX_SEND_SGE {
            return Err(EINVAL);
        }
        // An AH of another PD may be of another device, whose provider
        // this QP's would misread.
        if !ah.pd.same(&self.pd) {
            return Err(EINVAL);
        }
        let mut raw = [bindings::ib_sge::default(); MAX_SEND_SGE];
        for (out, sge) in raw.iter_mut().zip(sges) {
            *out = sge.raw();
        }
        // SAFETY: a live QP in RTS and a live AH (type invariants) of its PD (checked); the
        // elements cover mapped memory that stays mapped until the WR completes (the caller's
        // promise) and are read during the call (the provider copies the WR).
        to_result(unsafe {
            bindings::srnic_ulp_post_ud_send(
                self.raw.as_ptr(),
                wr_id,
                raw.as_ptr(),
                sges.len() as c_int,
                ah.raw.as_ptr(),
                remote_qpn,
                remote_qkey,
            )
        })
    }

    /// Writes `bytes` into send buffer `index` and sends them to
    /// `remote_qpn` through `ah`. `EBUSY` while the buffer's previous send
    /// has not completed (its completion is [`Completion::BufferSent`]).
    pub fn post_buffer(
        &self,
        index: usize,
        bytes: &[u8],
        ah: &Ah,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> Result {
        let send = self.send.get(index).ok_or(EINVAL)?;
        if send.posted.swap(true, Ordering::Acquire) {
            return Err(EBUSY);
        }
        // SAFETY: the flag was clear and this call set it, so no send of
        // the buffer is outstanding, and no other write runs (the type
        // invariant); nothing reads it on the CPU.
        let len = unsafe { send.buffer.write(bytes) };
        // The device must send these bytes, not a bounce buffer's old ones.
        send.buffer.for_device();
        let wr_id = WR_BUFFER | (index as u64) << 2;
        // SAFETY: the buffer's own identifier; it stays mapped until the QP
        // is destroyed, after every completion.
        let posted =
            unsafe { self.post_send(wr_id, &[send.buffer.sge(len)], ah, remote_qpn, remote_qkey) };
        if posted.is_err() {
            // Not posted: free to be written again.
            send.posted.store(false, Ordering::Release);
        }
        posted
    }

    /// Maps the linear data of `skb` for the device and lets `post` send
    /// parts of it, at most `max_posts` times; the skb is freed (and
    /// unmapped) after the last of those sends completes. Returns how many
    /// were posted, or the skb if it could not be mapped.
    ///
    /// The skb's control block is the QP's until it is freed.
    pub fn send_skb(
        &self,
        skb: SkBuff,
        max_posts: u32,
        post: impl FnOnce(&mut SkbPoster<'_, H>),
    ) -> core::result::Result<u32, SkBuff> {
        let data = skb.data();
        let len = data.len();
        // SAFETY: the skb's linear data, which stays put until the last
        // completion unmaps it and then frees the skb.
        let dma = unsafe {
            bindings::srnic_ulp_dma_map(
                self.pd.0.device.as_raw(),
                data.as_ptr().cast_mut().cast(),
                len,
                true,
            )
        };
        if dma == 0 {
            return Err(skb);
        }
        let cb = skb.control_block();
        // Every post the caller may make holds the skb until this call
        // gives back those it did not make.
        for (at, value) in [
            (CB_POSTS, u64::from(max_posts)),
            (CB_DMA, dma),
            (CB_LEN, len as u64),
        ] {
            if let Some(word) = cb.get(at) {
                word.store(value, Ordering::Relaxed);
            }
        }
        let wr_id = skb.into_raw() as u64;
        let mut poster = SkbPoster {
            qp: self,
            wr_id,
            dma,
            len,
            left: max_posts,
        };
        post(&mut poster);
        let unposted = poster.left;
        // With no post allowed, nothing else would free it.
        if unposted > 0 || max_posts == 0 {
            // SAFETY: the skb `wr_id` holds, with its mapping, in flight
            // with `unposted` of its count this call's own.
            unsafe { self.skb_sent(wr_id, unposted) };
        }
        Ok(max_posts - unposted)
    }

    /// `done` of the posts of the in-flight skb at `wr_id` are over: the
    /// last one unmaps and frees it.
    ///
    /// # Safety
    ///
    /// `wr_id` is an skb [`Self::send_skb`] gave to its posts, not freed
    /// yet, and `done` of its count are the caller's to give back (the
    /// completion of that many of its posts, or those it never made).
    unsafe fn skb_sent(&self, wr_id: u64, done: u32) {
        // SAFETY: per the caller, a live skb; only its count is written
        // concurrently, and atomically.
        let Some(skb) = (unsafe { SkBuff::from_raw(wr_id as *mut bindings::sk_buff) }) else {
            return;
        };
        let cb = skb.control_block();
        // The mapping is read first: once the count drops, the last holder
        // (on another CPU) may free the skb.
        let (Some(dma), Some(len), Some(posts)) =
            (cb.get(CB_DMA), cb.get(CB_LEN), cb.get(CB_POSTS))
        else {
            let _ = skb.into_raw();
            return;
        };
        let (dma, len) = (dma.load(Ordering::Relaxed), len.load(Ordering::Relaxed));
        if posts.fetch_sub(u64::from(done), Ordering::AcqRel) > u64::from(done) {
            // Others still hold it.
            let _ = skb.into_raw();
            return;
        }
        // SAFETY: `send_skb` mapped the skb's data with these values; this
        // is the last holder, so the device is done with them.
        unsafe {
            bindings::srnic_ulp_dma_unmap(self.pd.0.device.as_raw(), dma, len as usize, true)
        };
        skb.consume();
    }

    /// What `wc`, polled from this QP, gives back.
    pub fn complete<'q>(&'q self, wc: WorkCompletion<'q>) -> Completion<'q, H> {
        // Of another QP (or an empty slot): its token is not ours.
        if wc.0.qp != self.raw.as_ptr() {
            return Completion::Foreign;
        }
        let ok = wc.ok();
        let id = wc.wr_id();
        let index = (id >> 2) as usize;
        match id & WR_KIND_MASK {
            WR_RECV => {
                let Some(buffer) = self.recv.get(index) else {
                    return Completion::Foreign;
                };
                let len = if ok {
                    // Only what the device wrote comes over (from a bounce
                    // buffer, or out of stale cache lines).
                    buffer.for_cpu(wc.0.byte_len as usize)
                } else {
                    0
                };
                Completion::Received(Received {
                    qp: self,
                    index,
                    len,
                    ok,
                    ipv4: wc.0.network_hdr_type == super::access::network::IPV4,
                    src_qp: wc.0.src_qp,
                })
            }
            WR_BUFFER => match self.send.get(index) {
                Some(send) => {
                    // The device is done with it: it may be written again.
                    send.posted.store(false, Ordering::Release);
                    Completion::BufferSent(index)
                }
                None => Completion::Foreign,
            },
            0 => {
                // SAFETY: of this QP (checked), so an skb `send_skb` gave
                // to a post (type invariant), which this completion holds
                // and gives back, once: the completion is taken by value.
                unsafe { self.skb_sent(id, 1) };
                Completion::SkbSent
            }
            _ => Completion::Foreign,
        }
    }

    /// Attaches the QP to multicast group `mgid`.
    pub fn attach(&mut self, mgid: &[u8; 16]) -> Result {
        // Room first, so that a failed allocation leaves nothing attached.
        self.groups.reserve(1, GFP_KERNEL)?;
        let mut gid = bindings::ib_gid { raw: *mgid };
        // SAFETY: a live UD QP; the GID is read during the call.
        to_result(unsafe { bindings::ib_attach_mcast(self.raw.as_ptr(), &mut gid, 0) })?;
        // Cannot fail: the room was reserved.
        self.groups.push(*mgid, GFP_KERNEL)?;
        Ok(())
    }

    /// Moves the QP to ERR: every posted WR completes, flushed.
    pub fn flush(&self) -> Result {
        // SAFETY: a live QP.
        to_result(unsafe { bindings::srnic_ulp_qp_to_error(self.raw.as_ptr()) })
    }
}

impl<H: CqHandler> Drop for UdQp<H> {
    fn drop(&mut self) {
        for mgid in self.groups.iter() {
            let mut gid = bindings::ib_gid { raw: *mgid };
            // SAFETY: an attached group (type invariant).
            let _ = unsafe { bindings::ib_detach_mcast(self.raw.as_ptr(), &mut gid, 0) };
        }
        // SAFETY: ours (type invariant); no post runs concurrently with drop. Once destroyed the
        // device touches none of its WRs' memory, so the buffers (fields) may go; skbs still in
        // flight stay allocated and mapped (the owner drains the QP first).
        let _ = unsafe { bindings::ib_destroy_qp_user(self.raw.as_ptr(), core::ptr::null_mut()) };
    }
}

/// Posts the sends of one skb: see [`UdQp::send_skb`].
pub struct SkbPoster<'a, H: CqHandler> {
    qp: &'a UdQp<H>,
    wr_id: u64,
    dma: u64,
    len: usize,
    /// Posts the caller may still make.
    left: u32,
}

impl<H: CqHandler> SkbPoster<'_, H> {
    /// The gather element of `len` bytes at `offset` in the skb's data.
    fn sge(&self, (offset, len): (usize, usize)) -> Option<Sge> {
        if offset.checked_add(len)? > self.len {
            return None;
        }
        Some(Sge {
            addr: self.dma.checked_add(offset as u64)?,
            length: u32::try_from(len).ok()?,
            lkey: self.qp.pd.local_dma_lkey(),
        })
    }

    /// Sends the parts of the skb's data given as (offset, length), in
    /// order, to `remote_qpn` through `ah`. `EINVAL` for a part outside
    /// the data, `ENOSPC` past the posts the call allowed.
    pub fn post(
        &mut self,
        parts: &[(usize, usize)],
        ah: &Ah,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> Result {
        if self.left == 0 {
            return Err(ENOSPC);
        }
        let mut sges = [Sge::default(); MAX_SEND_SGE];
        if parts.len() > MAX_SEND_SGE {
            return Err(EINVAL);
        }
        for (out, part) in sges.iter_mut().zip(parts) {
            *out = self.sge(*part).ok_or(EINVAL)?;
        }
        let sges = sges.get(..parts.len()).ok_or(EINVAL)?;
        // SAFETY: the skb's identifier, for parts of its mapping (checked
        // above), which stays until the last post holding it completes:
        // this post is one of the count (`left` was above zero).
        unsafe {
            self.qp
                .post_send(self.wr_id, sges, ah, remote_qpn, remote_qkey)?
        };
        self.left -= 1;
        Ok(())
    }
}

/// What a completion of a [`UdQp`] gave back.
pub enum Completion<'q, H: CqHandler> {
    /// A receive buffer, with what arrived in it.
    Received(Received<'q, H>),
    /// A send of an skb [`UdQp::send_skb`] posted (freed after its last).
    SkbSent,
    /// The send of this send buffer: it may be posted again.
    BufferSent(usize),
    /// Of no WR of the QP (an empty slot, or another QP's).
    Foreign,
}

/// A receive buffer of a [`UdQp`] whose receive completed: it is not
/// posted until [`Self::repost`]; dropped instead, it is posted no more.
pub struct Received<'q, H: CqHandler> {
    qp: &'q UdQp<H>,
    index: usize,
    /// Bytes the device wrote, handed to the CPU (0 if it failed).
    len: usize,
    ok: bool,
    ipv4: bool,
    /// The sending QP (a UD receive's).
    src_qp: u32,
}

impl<H: CqHandler> Received<'_, H> {
    /// The QP the datagram was sent from, where an answer goes. From the
    /// wire: any 24-bit value.
    pub fn src_qp(&self) -> u32 {
        self.src_qp
    }

    /// Whether the receive succeeded; flushed and failed ones did not.
    pub fn ok(&self) -> bool {
        self.ok
    }

    /// Whether the datagram's first 40 bytes hold an IPv4 header (in their
    /// last 20) rather than a GRH or IPv6 header.
    pub fn ipv4_header(&self) -> bool {
        self.ipv4
    }

    /// What arrived: the GRH area, then the datagram.
    pub fn bytes(&self) -> &[u8] {
        self.qp
            .recv
            .get(self.index)
            .map_or(&[], |buffer| buffer.bytes(self.len))
    }

    /// Posts the buffer again, for the next datagram.
    pub fn repost(self) -> Result {
        // SAFETY: this value owns the buffer, unposted (type invariant of
        // the QP), and gives it up here: no slice of it outlives `self`.
        unsafe { self.qp.post_recv(self.index) }
    }
}
