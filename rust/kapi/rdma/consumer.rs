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
use core::marker::{PhantomData, PhantomPinned};
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::alloc::{KBox, KVec};
use kernel::error::{from_err_ptr, to_result};
use kernel::ffi::{c_int, c_void};
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

    fn as_raw(&self) -> *mut bindings::ib_device {
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

    /// Maps `len` bytes at `addr` for the device: `to_device` for what it
    /// reads (send), else for what it writes (receive). The soft devices'
    /// mapping is the kernel virtual address.
    ///
    /// # Safety
    ///
    /// The bytes stay allocated until `unmap` with the same arguments.
    pub unsafe fn map(&self, addr: *const u8, len: usize, to_device: bool) -> Result<Mapping> {
        // SAFETY: per the caller, the range is allocated kernel memory.
        let dma = unsafe {
            bindings::srnic_ulp_dma_map(
                self.0.device.as_raw(),
                addr.cast_mut().cast(),
                len,
                to_device,
            )
        };
        if dma == 0 {
            return Err(ENOMEM);
        }
        Ok(Mapping {
            dma,
            len,
            lkey: self.local_dma_lkey(),
        })
    }

    /// Undoes `map`.
    ///
    /// # Safety
    ///
    /// `dma`, `len` and `to_device` are those of a mapping `map` returned
    /// and that was not unmapped yet, no work request uses it any more,
    /// and none of its gather elements ([`Mapping::sge`]) is posted again.
    /// (With bounce buffering, unmapping another mapping would release its
    /// bounce slots, or copy a bounce buffer over memory someone else owns.)
    pub unsafe fn unmap(&self, dma: u64, len: usize, to_device: bool) {
        // SAFETY: per the caller, a live mapping of ours that the device is
        // done with.
        unsafe { bindings::srnic_ulp_dma_unmap(self.0.device.as_raw(), dma, len, to_device) };
    }
}

/// A mapping [`Pd::map`] made: its device address and length, and the
/// gather elements inside it.
#[derive(Clone, Copy)]
pub struct Mapping {
    dma: u64,
    len: usize,
    lkey: u32,
}

impl Mapping {
    /// The device address of the first byte.
    pub fn dma(&self) -> u64 {
        self.dma
    }

    /// The gather element of `len` bytes at `offset` in the mapping, if
    /// they are inside it.
    pub fn sge(&self, offset: usize, len: usize) -> Option<Sge> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(Sge {
            addr: self.dma.checked_add(offset as u64)?,
            length: u32::try_from(len).ok()?,
            lkey: self.lkey,
        })
    }
}

/// A kernel buffer with its own mapping for a device, in one direction,
/// for as long as it lives: a receive buffer the device writes (reposted
/// many times), or a send buffer the CPU rewrites between sends.
///
/// Whoever owns the bytes at a time must say so on each hand-over: on a
/// device that maps through bounce buffers (swiotlb) or is not cache
/// coherent, the CPU otherwise reads stale bytes, or the device sends
/// them. [`Self::for_cpu`] after the device's completion, before reading;
/// [`Self::for_device`] before each post.
pub struct DmaBuffer {
    /// Never resized, so the mapping keeps covering it.
    bytes: KVec<u8>,
    dma: u64,
    lkey: u32,
    to_device: bool,
    device: DeviceRef,
}

impl DmaBuffer {
    /// `len` zeroed bytes mapped for `pd`'s device: `to_device` for a buffer
    /// the device reads (sends), else one it writes (receives).
    ///
    /// # Safety
    ///
    /// The device uses the buffer between a post that points at it and that
    /// post's completion (or flush). The owner keeps such a post from
    /// overlapping the buffer's drop (it destroys or drains the QP first)
    /// and the life of a slice from [`Self::for_cpu`].
    pub unsafe fn new(pd: &Pd, len: usize, to_device: bool) -> Result<Self> {
        let bytes = KVec::from_elem(0u8, len, GFP_KERNEL)?;
        // SAFETY: the vector's heap block is the mapped range; it is never
        // resized and is freed only after `Drop` unmaps it.
        let mapping = unsafe { pd.map(bytes.as_ptr(), len, to_device)? };
        Ok(Self {
            bytes,
            dma: mapping.dma,
            lkey: mapping.lkey,
            to_device,
            device: pd.0.device.clone(),
        })
    }

    /// The gather element of the first `len` bytes (at most all).
    pub fn sge(&self, len: usize) -> Sge {
        Sge {
            addr: self.dma,
            length: u32::try_from(len.min(self.bytes.len())).unwrap_or(u32::MAX),
            lkey: self.lkey,
        }
    }

    /// The buffer's length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The first `len` bytes (at most all), handed to the CPU: call once the
    /// device's completion for the buffer arrived; repost it (with
    /// [`Self::for_device`] first) only after the last read of the slice,
    /// as [`Self::new`] requires.
    pub fn for_cpu(&self, len: usize) -> &[u8] {
        let len = len.min(self.bytes.len());
        // SAFETY: `dma` is this buffer's live mapping, `len` within it. Per
        // `new`'s contract the device does not write the bytes while the
        // returned slice lives.
        unsafe {
            bindings::srnic_ulp_dma_sync_for_cpu(
                self.device.as_raw(),
                self.dma,
                len,
                self.to_device,
            )
        };
        self.bytes.get(..len).unwrap_or(&[])
    }

    /// Hands the whole buffer to the device: before posting a receive into
    /// it, or a send of what [`Self::write`] put in.
    pub fn for_device(&self) {
        // SAFETY: `dma` is this buffer's live mapping, of this length.
        unsafe {
            bindings::srnic_ulp_dma_sync_for_device(
                self.device.as_raw(),
                self.dma,
                self.bytes.len(),
                self.to_device,
            )
        };
    }

    /// Copies `src` (at most the buffer's length) to the start of the
    /// buffer. Hand it to the device with [`Self::for_device`] afterwards.
    ///
    /// # Safety
    ///
    /// No work request that points at the buffer is outstanding (the device
    /// reads or writes it only between a post and its completion), and no
    /// slice from [`Self::for_cpu`] is alive.
    pub unsafe fn write(&self, src: &[u8]) {
        let len = src.len().min(self.bytes.len());
        // SAFETY: `len` bytes fit in the buffer; the pointer is the heap
        // block's own (not derived from a shared slice), and per the caller
        // nothing else reads or writes those bytes meanwhile.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.bytes.as_ptr().cast_mut(), len)
        };
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, with its length and direction;
        // the bytes are still allocated, and per `new`'s contract no work
        // request uses them any more.
        unsafe {
            bindings::srnic_ulp_dma_unmap(
                self.device.as_raw(),
                self.dma,
                self.bytes.len(),
                self.to_device,
            )
        };
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

/// A completion queue polled by its owner, with a handler for its events.
/// The QPs that use it hold it, so it is destroyed after the last of them.
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

/// What a QP holds of its CQs: that they live, whatever their handlers.
trait Held: Send + Sync {}
impl<H: CqHandler> Held for CqInner<H> {}

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
    pub fn poll(&self, out: &mut [WorkCompletion]) -> usize {
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

    fn as_raw(&self) -> *mut bindings::ib_cq {
        self.0.raw.as_ptr()
    }

    /// Whether the CQ belongs to the device of `pd`.
    fn on_device_of(&self, pd: &Pd) -> bool {
        self.0.pd.0.device.as_raw() == pd.0.device.as_raw()
    }

    fn held(&self) -> Arc<dyn Held> {
        self.0.clone()
    }
}

impl<H: CqHandler> Drop for CqInner<H> {
    fn drop(&mut self) {
        // SAFETY: created in `Cq::new`; the QPs using it are gone (each
        // holds it). No event runs after destruction, so the handler box
        // (dropped after this) may go.
        unsafe { bindings::ib_destroy_cq_user(self.raw.as_ptr(), core::ptr::null_mut()) };
    }
}

/// A work completion (`struct ib_wc`).
#[repr(transparent)]
#[derive(Default)]
pub struct WorkCompletion(bindings::ib_wc);

impl WorkCompletion {
    /// The WR's identifier.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: kernel CQs without `ib_cqe` use the `wr_id` member.
        unsafe { self.0.__bindgen_anon_1.wr_id }
    }

    /// Whether the WR succeeded; flushed and failed WRs are not.
    pub fn ok(&self) -> bool {
        self.0.status == bindings::ib_wc_status_IB_WC_SUCCESS
    }

    /// The raw status, for messages.
    pub fn status(&self) -> u32 {
        self.0.status
    }

    /// Bytes received (GRH area included on UD).
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len
    }

    /// The sender's QPN (UD receive).
    pub fn src_qp(&self) -> u32 {
        self.0.src_qp
    }

    /// Whether the receive's first 40 bytes hold an IPv4 header (in their
    /// last 20) rather than a GRH or IPv6 header.
    pub fn ipv4_header(&self) -> bool {
        self.0.network_hdr_type == super::access::network::IPV4
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
/// a [`Mapping`], with the local DMA lkey of their PD. Only those make
/// one, so a posted element always covers memory mapped for the device
/// (their `unsafe` constructors keep it so while work requests use it).
#[derive(Clone, Copy)]
pub struct Sge {
    addr: u64,
    length: u32,
    lkey: u32,
}

/// A UD QP in RTS, with its send and receive CQ.
///
/// # Invariants
///
/// `raw` is a UD QP that `new` created on `pd` and brought to RTS (ERR
/// after [`Self::flush`]), owned by this value and destroyed only by
/// `drop`; `_cqs` keeps its CQs, and `groups` lists the multicast groups it
/// is attached to.
pub struct UdQp {
    raw: NonNull<bindings::ib_qp>,
    groups: KVec<[u8; 16]>,
    /// What it was made with, kept until it is destroyed.
    pd: Pd,
    _cqs: [Arc<dyn Held>; 2],
}

// SAFETY: the core's QPs may be posted to and destroyed from any thread.
unsafe impl Send for UdQp {}
// SAFETY: posting is serialised by the provider.
unsafe impl Sync for UdQp {}

/// The most gather elements a post takes here.
pub const MAX_SEND_SGE: usize = 4;

impl UdQp {
    /// Creates a UD QP and brings it to RTS on `port` with `qkey`.
    pub fn new<S: CqHandler, R: CqHandler>(
        pd: &Pd,
        send_cq: &Cq<S>,
        recv_cq: &Cq<R>,
        depths: (u32, u32),
        port: u32,
        qkey: u32,
        caller: &'static CStr,
    ) -> Result<Self> {
        // A CQ of another device would reach that device's provider
        // through this one's.
        if !send_cq.on_device_of(pd) || !recv_cq.on_device_of(pd) {
            return Err(EINVAL);
        }
        // SAFETY: live PD and CQs of its device, which outlive the QP (the
        // owner drops it first).
        let raw = from_err_ptr(unsafe {
            bindings::srnic_ulp_create_ud_qp(
                pd.0.raw.as_ptr(),
                send_cq.as_raw(),
                recv_cq.as_raw(),
                depths.0,
                depths.1,
                MAX_SEND_SGE as u32,
                caller.as_char_ptr(),
            )
        })?;
        let qp = Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            groups: KVec::new(),
            pd: pd.clone(),
            _cqs: [send_cq.held(), recv_cq.held()],
        };
        // SAFETY: the QP was just created, in RESET.
        to_result(unsafe { bindings::srnic_ulp_ud_qp_ready(qp.raw.as_ptr(), port, qkey) })?;
        Ok(qp)
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: set at creation, immutable.
        unsafe { (*self.raw.as_ptr()).qp_num }
    }

    /// Posts one signalled send of `sges` to `remote_qpn` through `ah`.
    pub fn post_send(
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
            out.addr = sge.addr;
            out.length = sge.length;
            out.lkey = sge.lkey;
        }
        // SAFETY: a live QP in RTS and a live AH (type invariants) of its PD
        // (checked); the elements cover
        // mapped memory (`Sge`) and are read during the call (the provider
        // copies the WR).
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

    /// Posts one receive into `sge`.
    pub fn post_recv(&self, wr_id: u64, sge: Sge) -> Result {
        let raw = bindings::ib_sge {
            addr: sge.addr,
            length: sge.length,
            lkey: sge.lkey,
        };
        // SAFETY: a live QP; the element covers mapped memory (`Sge`) and
        // is read during the call.
        to_result(unsafe { bindings::srnic_ulp_post_recv(self.raw.as_ptr(), wr_id, &raw) })
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

impl Drop for UdQp {
    fn drop(&mut self) {
        for mgid in self.groups.iter() {
            let mut gid = bindings::ib_gid { raw: *mgid };
            // SAFETY: an attached group (type invariant).
            let _ = unsafe { bindings::ib_detach_mcast(self.raw.as_ptr(), &mut gid, 0) };
        }
        // SAFETY: ours (type invariant); no post runs concurrently with drop.
        let _ = unsafe { bindings::ib_destroy_qp_user(self.raw.as_ptr(), core::ptr::null_mut()) };
    }
}
