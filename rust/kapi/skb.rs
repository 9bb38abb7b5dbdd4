// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`), owned: the UDP tunnel hands received
//! ones over, and transmission builds and hands them to the IP stack.

use super::crc::Crc32Engine;
use super::netdev::NetDevice;
use super::rcu::RcuReadGuard;
use super::shared::SharedRange;
use crate::bindings;
use core::ptr::NonNull;
use kernel::page::Page;
use kernel::prelude::*;

/// An `sk_buff` this code owns; freed on drop unless handed on.
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: an owned skb may be used and freed on any CPU.
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// An empty skb with `headroom` bytes before its data and room for
    /// `len` bytes of data; may be called in atomic context.
    pub fn alloc(headroom: u32, len: u32) -> Option<Self> {
        // SAFETY: allocates with GFP_ATOMIC; returns NULL or a fresh skb.
        NonNull::new(unsafe { bindings::srnic_alloc_skb(headroom, len) }).map(Self)
    }

    /// # Safety
    ///
    /// `skb` must be a valid skb whose ownership passes to the result.
    pub unsafe fn from_raw(skb: *mut bindings::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(Self)
    }

    /// Gives up ownership.
    pub fn into_raw(self) -> *mut bindings::sk_buff {
        let raw = self.0.as_ptr();
        core::mem::forget(self);
        raw
    }

    /// Appends `len` bytes of data (within the room `alloc` gave) and
    /// returns them, zeroed.
    pub fn put(&mut self, len: u32) -> Result<&mut [u8]> {
        if self.tailroom() < len {
            return Err(ENOSPC);
        }
        // SAFETY: the skb is ours and has the room (checked), so
        // `skb_put` returns `len` bytes inside its buffer.
        let data = unsafe { bindings::skb_put(self.0.as_ptr(), len) }.cast::<u8>();
        // SAFETY: as above; nothing else refers to these bytes.
        let bytes = unsafe { core::slice::from_raw_parts_mut(data, len as usize) };
        bytes.fill(0);
        Ok(bytes)
    }

    /// Appends a copy of `range` to the data (within the room `alloc`
    /// gave): one pass over the bytes, where [`Self::put`] would zero them
    /// first. `ENOSPC` without the room.
    pub fn put_copy(&mut self, range: &SharedRange<'_>) -> Result {
        let len = u32::try_from(range.len()).map_err(|_| EINVAL)?;
        if self.tailroom() < len {
            return Err(ENOSPC);
        }
        // SAFETY: the skb is ours and has the room (checked), so
        // `skb_put` returns `len` bytes inside its buffer.
        let data = unsafe { bindings::skb_put(self.0.as_ptr(), len) }.cast::<u8>();
        // The bytes become data only now, written whole; as in
        // `SharedRange::copy_from`, no Rust reference covers foreign bytes.
        // SAFETY: `range` is valid for reads of `len` bytes (its invariant),
        // `data` for writes (above); the raw copy races with no reference.
        unsafe { crate::kapi::shared::copy_bytes(range.as_ptr(), data, len as usize) };
        Ok(())
    }

    /// Appends a copy of `bytes` to the data, as [`Self::put_copy`] does.
    pub fn put_slice(&mut self, bytes: &[u8]) -> Result {
        self.put_copy(&SharedRange::from_slice(bytes))
    }

    /// Prepends `bytes` to the data.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Result {
        let len = u32::try_from(bytes.len()).map_err(|_| EINVAL)?;
        let room = self.push(len)?;
        for (to, from) in room.iter_mut().zip(bytes) {
            *to = *from;
        }
        Ok(())
    }

    /// Prepends `len` bytes of headroom to the data and returns them.
    pub fn push(&mut self, len: u32) -> Result<&mut [u8]> {
        if self.headroom() < len {
            return Err(ENOSPC);
        }
        // SAFETY: the skb is ours and has the headroom (checked).
        let data = unsafe { bindings::skb_push(self.0.as_ptr(), len) }.cast::<u8>();
        // SAFETY: `len` bytes at the new data start, ours alone.
        Ok(unsafe { core::slice::from_raw_parts_mut(data, len as usize) })
    }

    fn headroom(&self) -> u32 {
        // SAFETY: reads fields of our skb.
        unsafe {
            let skb = self.0.as_ref();
            skb.data.offset_from(skb.head).try_into().unwrap_or(0)
        }
    }

    fn tailroom(&self) -> u32 {
        // SAFETY: reads fields of our skb; `tail` and `end` are offsets
        // (64-bit kernels).
        unsafe {
            let skb = self.0.as_ref();
            skb.end.saturating_sub(skb.tail)
        }
    }

    /// Appends the `len` bytes at `addr` as a page fragment, which holds a
    /// reference on the page they are in: `EINVAL` if they are not in a
    /// page that may be referenced this way (vmalloc, slab, stack memory)
    /// or cross a page boundary, `EMSGSIZE` if the skb has
    /// no room for another fragment. The bytes are not read here.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be valid kernel memory now.
    pub unsafe fn append_page_bytes(&mut self, addr: *const u8, len: u32) -> Result {
        // SAFETY: the skb is ours; the caller vouches for the address,
        // which the shim checks before taking its page.
        kernel::error::to_result(unsafe {
            bindings::srnic_skb_append_page_bytes(self.0.as_ptr(), addr.cast(), len)
        })
    }

    /// Appends `range` as a page fragment, as [`Self::append_page_bytes`]
    /// does: `EINVAL` also for a range of a Rust buffer.
    ///
    /// The skb holds a reference on the page, so the bytes stay allocated
    /// as long as it needs them, after `range`'s lifetime too; that is
    /// only right for memory no Rust reference covers (whose owner may
    /// write it later, which [`Self::crc32_page_frags`] tolerates). A Rust
    /// buffer could meanwhile be a stack frame or an object reused through
    /// references, so it is refused.
    pub fn append_range(&mut self, range: &SharedRange<'_>) -> Result {
        if !range.is_foreign() {
            return Err(EINVAL);
        }
        let len = u32::try_from(range.len()).map_err(|_| EINVAL)?;
        // SAFETY: a range is valid for reads now (its invariant).
        unsafe { self.append_page_bytes(range.as_ptr(), len) }
    }

    /// Whether the skb has as many page fragments as it may have.
    pub fn frags_full(&self) -> bool {
        // SAFETY: the skb is ours.
        unsafe { bindings::srnic_skb_frags_full(self.0.as_ptr()) }
    }

    /// Gives `page` to the skb as its next page fragment, `len` bytes at
    /// `offset`; the skb frees the page when it is done with it. If it
    /// cannot (`EMSGSIZE`: no room for another fragment; `EINVAL`: the
    /// bytes are not within the page), the page comes back.
    pub fn give_page(
        &mut self,
        page: Page,
        offset: usize,
        len: usize,
    ) -> core::result::Result<(), (Page, Error)> {
        let (Ok(at), Ok(n)) = (u32::try_from(offset), u32::try_from(len)) else {
            return Err((page, EINVAL));
        };
        let (skb, raw_page) = (self.0.as_ptr(), page.as_ptr().cast());
        // The page's one reference passes to the skb if the shim takes it;
        // then nothing else holds the page (it is forgotten below).
        // SAFETY: the skb is ours, and the page ours with one reference.
        let taken = unsafe { bindings::srnic_skb_give_page(skb, raw_page, at, n) };
        if taken != 0 {
            return Err((page, Error::from_errno(taken)));
        }
        core::mem::forget(page);
        Ok(())
    }

    /// Appends a copy of `bytes` (at most a page: a trailer, or a piece of
    /// a received message) as a fragment of a freshly allocated page
    /// piece, after any page fragments. `EMSGSIZE` if the skb has no room
    /// for another fragment.
    pub fn append_copy(&mut self, bytes: &[u8]) -> Result {
        let len = u32::try_from(bytes.len()).map_err(|_| EINVAL)?;
        // SAFETY: the skb is ours; the shim copies `len` bytes from
        // `bytes`, which is valid for reads.
        kernel::error::to_result(unsafe {
            bindings::srnic_skb_append_copy(self.0.as_ptr(), bytes.as_ptr().cast(), len)
        })
    }

    /// The CRC register `register` advanced over the bytes of the page
    /// fragments, in order, by `engine`. The pages may be user memory that
    /// other threads write while the skb holds them: the engine reads them
    /// from C, never through a Rust reference. `EFAULT` if a fragment's
    /// page has no kernel mapping, `EINVAL` if [`Self::page_frags`] cannot
    /// hand them out.
    pub fn crc32_page_frags(&self, engine: &Crc32Engine, register: u32) -> Result<u32> {
        let mut register = register;
        self.page_frags(|range| {
            register = engine.update_range(register, &range);
            Ok(())
        })?;
        Ok(register)
    }

    /// The bytes of data, in the linear part and beyond.
    pub fn len(&self) -> u32 {
        // SAFETY: reads a field of our skb.
        unsafe { self.0.as_ref().len }
    }

    /// Whether the skb has no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether some of the data is in page fragments.
    pub fn is_nonlinear(&self) -> bool {
        // SAFETY: reads a field of our skb.
        unsafe { self.0.as_ref().data_len != 0 }
    }

    /// Makes all data contiguous.
    pub fn linearize(&mut self) -> Result {
        // SAFETY: the skb is ours.
        kernel::error::to_result(unsafe { bindings::srnic_skb_linearize(self.0.as_ptr()) })
    }

    /// Makes the first `len` bytes of data linear (`pskb_may_pull`),
    /// copying those that are in page fragments into the head, so that
    /// [`Self::data`] shows them: `EINVAL` if there are fewer, `ENOMEM` if
    /// the head could not grow. The head may move; `&mut self` ends every
    /// view of the old one first.
    pub fn pull_linear(&mut self, len: u32) -> Result {
        // SAFETY: the skb is ours; the shim checks `len` against its length.
        kernel::error::to_result(unsafe { bindings::srnic_skb_pull_linear(self.0.as_ptr(), len) })
    }

    /// How many page fragments hold the data beyond the linear part, if
    /// they hold all of it and [`Self::page_frags`] can show them: `None`
    /// for an skb that chains further skbs (`frag_list`) or has fragments
    /// of device memory the CPU cannot read.
    pub fn page_frag_count(&self) -> Option<u32> {
        // SAFETY: reads fields of our skb.
        let readable = unsafe { bindings::srnic_skb_frags_readable(self.0.as_ptr()) };
        // SAFETY: as above.
        readable.then(|| unsafe { bindings::srnic_skb_nr_frags(self.0.as_ptr()) })
    }

    /// Calls `f` with each page fragment in order, as a read-only range
    /// valid while the skb is borrowed, without touching its bytes; stops
    /// at the first error `f` returns. `EINVAL` if
    /// [`Self::page_frag_count`] is `None`, `EFAULT` if a fragment's page
    /// has no kernel mapping.
    ///
    /// The ranges are foreign memory: a fragment may be a page of a
    /// process that writes it meanwhile (an skb a local sender built from
    /// user pages, looped back through a veth), so its bytes are only ever
    /// read through the range (a C CRC, `memmove`), never a slice.
    pub fn page_frags<'a>(&'a self, mut f: impl FnMut(SharedRange<'a>) -> Result) -> Result {
        let count = self.page_frag_count().ok_or(EINVAL)?;
        for i in 0..count {
            let mut len = 0u32;
            // SAFETY: the skb is ours and `i` is below its fragment count;
            // the shim writes `len` only.
            let at = unsafe { bindings::srnic_skb_frag(self.0.as_ptr(), i, &mut len) };
            // The skb is ours and borrowed for `'a`: it is not freed and
            // its fragment table does not change before then (a clone's
            // table is read only to all its holders), so the pages stay
            // referenced. Their bytes may be written by others (a sender's
            // user pages), which a foreign range allows; Rust code reaches
            // a page fragment only as such a range (`data` is the head).
            // SAFETY: `at` maps `len` bytes the skb holds a page reference
            // on, valid for reads for `'a` (above); page memory outside
            // Rust's ownership, which no Rust reference covers.
            let range = unsafe { SharedRange::foreign(at.cast_mut().cast(), len as usize, false) };
            f(range.ok_or(EFAULT)?)?;
        }
        Ok(())
    }

    /// The data, from `data` on (linear part only).
    pub fn data(&self) -> &[u8] {
        // SAFETY: `data` points at `len - data_len` linear bytes of our skb.
        unsafe {
            let skb = self.0.as_ref();
            let linear = skb.len.saturating_sub(skb.data_len) as usize;
            core::slice::from_raw_parts(skb.data, linear)
        }
    }

    /// The data, writable (linear part only). For skbs the caller built
    /// itself: a clone shares its data with others (a stack skb handed to
    /// a driver may be one), so write such an skb only through the bytes
    /// [`Self::push`] returns after [`Self::cow_head`].
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`. The skb is ours, and its callers (srnic's
        // packet builders) allocated it, so no clone shares the data.
        unsafe {
            let skb = self.0.as_ref();
            let linear = skb.len.saturating_sub(skb.data_len) as usize;
            core::slice::from_raw_parts_mut(skb.data, linear)
        }
    }

    /// The bytes from the network header up to `data`, plus `data`: the
    /// IP header of a received packet followed by what `data` shows.
    pub fn network_header_on(&self) -> Option<&[u8]> {
        // SAFETY: both pointers are into our skb's linear buffer.
        unsafe {
            let skb = self.0.as_ref();
            let network = bindings::srnic_skb_network_header(self.0.as_ptr());
            let before = usize::try_from(skb.data.offset_from(network)).ok()?;
            let linear = skb.len.saturating_sub(skb.data_len) as usize;
            Some(core::slice::from_raw_parts(network, before + linear))
        }
    }

    /// The interface index of the device the skb arrived on.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: reads our skb's device pointer and, if set, its index.
        unsafe {
            let dev = bindings::srnic_skb_dev(self.0.as_ptr());
            if dev.is_null() {
                0
            } else {
                bindings::srnic_netdev_ifindex(dev)
            }
        }
    }

    /// The device a received skb arrived on (after VLAN untagging, the
    /// VLAN interface), for the receiver that holds it; `None` for an skb
    /// being built.
    pub fn device<'a>(&'a self, _guard: &'a RcuReadGuard) -> Option<&'a NetDevice> {
        // SAFETY: reads our skb's device pointer.
        let dev = unsafe { bindings::srnic_skb_dev(self.0.as_ptr()) };
        if dev.is_null() {
            return None;
        }
        // Unregistration purges a device's queued packets and waits for a
        // grace period before the device may be freed.
        // SAFETY: a received skb's device stays valid under RCU, and the
        // caller holds the RCU read lock for `'a`.
        Some(unsafe { NetDevice::from_raw(dev) })
    }

    /// Makes `headroom` bytes before the data writable by us alone: a
    /// clone's header is shared, so it is copied first.
    pub fn cow_head(&mut self, headroom: u32) -> Result {
        // SAFETY: the skb is ours.
        kernel::error::to_result(unsafe { bindings::srnic_skb_cow_head(self.0.as_ptr(), headroom) })
    }

    /// The control block, which belongs to the layer that holds the skb:
    /// a driver between `ndo_start_xmit` and freeing it.
    pub fn control_block(&self) -> &[core::sync::atomic::AtomicU64; 6] {
        // SAFETY: `cb` is 48 bytes aligned to 8 inside the skb we own;
        // atomics make shared access sound.
        unsafe { &*bindings::srnic_skb_cb(self.0.as_ptr()).cast() }
    }

    /// Frees the skb as consumed (delivered), not dropped.
    pub fn consume(self) {
        // SAFETY: ours; ownership ends here.
        unsafe { bindings::srnic_consume_skb(self.into_raw()) };
    }

    /// Readies a received skb to be kept after the receive callback
    /// returns: drops its route (one taken without a reference is valid
    /// only in the receive's RCU section), its socket, and its device
    /// (which may go while the skb waits; [`Self::device`] is `None`
    /// after this).
    pub fn leave_receive_path(&mut self) {
        // SAFETY: the skb is ours; nothing else holds its route, socket
        // or device pointer.
        unsafe { bindings::srnic_skb_leave_receive_path(self.0.as_ptr()) };
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }
}

/// A first-in first-out queue of skbs (`struct sk_buff_head`), with its
/// own spinlock (taken with interrupts off), usable from any context.
/// Skbs still queued are freed when it drops.
///
/// # Invariants
///
/// `head` was initialised by `skb_queue_head_init`, and every skb on it
/// is owned by the queue.
#[pin_data(PinnedDrop)]
pub struct SkbQueue {
    #[pin]
    head: kernel::types::Opaque<bindings::sk_buff_head>,
}

// SAFETY: the queue's spinlock serialises every access to the list; an
// owned skb may move between CPUs (`SkBuff` is `Send`).
unsafe impl Send for SkbQueue {}
// SAFETY: as above.
unsafe impl Sync for SkbQueue {}

impl SkbQueue {
    /// An empty queue.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: initialises the head in place, before any use.
            head <- kernel::types::Opaque::ffi_init(|head| unsafe {
                bindings::srnic_skb_queue_init(head)
            }),
        })
    }

    /// Appends `skb`.
    pub fn push(&self, skb: SkBuff) {
        // SAFETY: the head is initialised (invariant); the queue takes
        // over the skb's ownership.
        unsafe { bindings::srnic_skb_queue_push(self.head.get(), skb.into_raw()) };
    }

    /// Takes the oldest skb.
    pub fn pop(&self) -> Option<SkBuff> {
        // SAFETY: the head is initialised; a dequeued skb is ours
        // (invariant).
        unsafe { SkBuff::from_raw(bindings::srnic_skb_queue_pop(self.head.get())) }
    }

    /// Skbs on the queue (read without the lock: may be stale).
    pub fn len(&self) -> u32 {
        // SAFETY: the head is initialised; a lockless read of its count.
        unsafe { bindings::srnic_skb_queue_len(self.head.get()) }
    }

    /// Whether the queue is empty (read without the lock).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[pinned_drop]
impl PinnedDrop for SkbQueue {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the head is initialised; the skbs on it are the queue's
        // to free.
        unsafe { bindings::srnic_skb_queue_purge(self.head.get()) };
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: ours, freed once.
        unsafe { bindings::srnic_kfree_skb(self.0.as_ptr()) };
    }
}
