// SPDX-License-Identifier: GPL-2.0

//! User memory registered for on-demand paging (`IB_ACCESS_ON_DEMAND`,
//! through the core's `struct ib_umem_odp`): nothing is pinned; pages are
//! faulted in when the transport first needs them, and given up when the
//! process's mapping of them changes.
//!
//! The transport reads the core's page list (`dma_list`: on a device
//! without DMA mapping, each entry is the page's kernel address and two
//! permission bits) inside RCU read-side sections, the way it reaches
//! pinned pages, and never faults there: a page not present is a
//! [`Miss::Absent`], which the caller answers by waiting (an RNR NAK, or
//! its own deferral) and by asking [`OdpMemory::fault`] from process
//! context for the range.
//!
//! The notifier's invalidation is what keeps this sound. Under the umem's
//! mutex (which every change of the page list holds) it first makes every
//! reader miss on the whole region, then waits for a grace period, so no
//! read-side section still uses a page it found before, and only then
//! clears the entries and lets the core mark the pages dirty. The page
//! itself is freed only after the notifier returns.

use super::access::WRITING_ACCESS;
use super::umem::UserVerb;
use crate::bindings;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::shared::SharedRange;
use crate::kapi::sync::SpinLockIrq;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::alloc::flags::{GFP_ATOMIC, GFP_KERNEL};
use kernel::alloc::KVec;
use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::sync::Arc;

/// `IB_ACCESS_ON_DEMAND`.
pub const ON_DEMAND: u32 = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND;

/// At most this much is faulted in by one call, so one request cannot
/// keep the QP's work busy for long; the transport asks again for the
/// rest.
const MAX_FAULT_BYTES: u64 = 4 << 20;

/// What `ibv_advise_mr` asks of a range (`enum ib_uverbs_advise_mr_advice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Fault the pages in for reading.
    Prefetch,
    /// Fault the pages in for writing.
    PrefetchWrite,
    /// Take in the pages that are present, without faulting.
    PrefetchNoFault,
}

impl Advice {
    pub(super) fn from_raw(advice: u32) -> Option<Self> {
        match advice {
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => {
                Some(Self::Prefetch)
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => {
                Some(Self::PrefetchWrite)
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => {
                Some(Self::PrefetchNoFault)
            }
            _ => None,
        }
    }
}

/// A range of a region named by its local key, as an SGE gives it.
#[derive(Debug, Clone, Copy)]
pub struct MemoryRange {
    /// The region's local key.
    pub lkey: u32,
    /// The first address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
}

/// Why a range of an on-demand region cannot be reached now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Outside the region, or a write to a region that may not be
    /// written, or a page the process does not map (its last fault
    /// failed): an access error.
    Denied,
    /// Not present (or not writable yet): fault it in and try again.
    Absent,
}

/// A user range registered for on-demand paging, or the whole address
/// space (an implicit region). Clones share the registration, which ends
/// when the last one drops; that may sleep, so a clone is dropped only in
/// process context, or inside the read-side section in which the region
/// that holds the registration was found (where it cannot be the last).
#[derive(Clone)]
pub struct OdpMemory {
    registration: Registration,
}

#[derive(Clone)]
enum Registration {
    /// One range, one umem.
    Range(Arc<OdpRegion>),
    /// The whole address space: a umem per chunk the transport touched.
    Implicit(Arc<ImplicitRegion>),
}

/// # Invariants
///
/// `umem` is a live `ib_umem_odp` of a device without DMA mapping, whose
/// notifier runs [`invalidate`] with `private` pointing at this value (set
/// once it is in its `Arc`, cleared by the release in `drop`).
struct OdpRegion {
    umem: NonNull<bindings::ib_umem_odp>,
    /// User address of the region's first byte, and its length.
    start: u64,
    length: u64,
    /// The umem's pages: first address, end, and page size.
    umem_start: u64,
    umem_end: u64,
    page_shift: u32,
    /// Whether the registration grants writing access.
    writable: bool,
    /// Invalidations in progress: while non-zero, every read misses.
    invalidating: AtomicU32,
    /// One past the index of the page whose last fault failed (0: none):
    /// the next access to it is denied rather than retried for ever.
    failed_page: AtomicU64,
}

/// Bytes of the address space one child umem of an implicit region
/// covers: a fault's worth, so that a fault never spans two.
const CHUNK_BYTES: u64 = MAX_FAULT_BYTES;

/// The most children one implicit region has (8 GiB of address space in
/// 4 MiB chunks): each holds page lists and a notifier the process is not
/// charged for, and lives as long as the region.
const MAX_CHILDREN_PER_REGION: usize = 2048;

/// The most children all implicit regions have together.
const MAX_CHILDREN: usize = 8192;

/// Children of all implicit regions.
static CHILDREN: AtomicUsize = AtomicUsize::new(0);

/// Gives back `n` children's places in [`CHILDREN`].
fn uncount_children(n: usize) {
    CHILDREN.fetch_sub(n, Ordering::AcqRel);
}

/// An implicit region: the core's implicit umem (which holds the process
/// and the access), and a child umem, an [`OdpRegion`] of its own, for
/// each chunk of the address space a fault reached.
///
/// # Invariants
///
/// `root` is a live implicit `ib_umem_odp`; `mm` is the registering
/// process's address space, grabbed (`mmgrab`) until drop, so that a
/// child can be made after the process has exited (it then fails). The
/// children are never removed before drop.
#[pin_data(PinnedDrop)]
struct ImplicitRegion {
    root: NonNull<bindings::ib_umem_odp>,
    mm: NonNull<bindings::mm_struct>,
    writable: bool,
    /// The children by chunk number, in order.
    #[pin]
    children: SpinLockIrq<KVec<(u64, Arc<OdpRegion>)>>,
    /// One past the number of the chunk whose child could not be made
    /// (0: none): the next access there is denied.
    failed_chunk: AtomicU64,
}

// SAFETY: the umem is owned and released once, in process context (see
// `OdpMemory`); the notifier serialises its own users with the umem's
// mutex.
unsafe impl Send for OdpRegion {}
// SAFETY: shared access reads the page list with marked loads and atomics.
unsafe impl Sync for OdpRegion {}
// SAFETY: the root umem and the grab of the address space are owned and
// released once, in process context; the children are behind a lock.
unsafe impl Send for ImplicitRegion {}
// SAFETY: shared access goes through the lock and atomics.
unsafe impl Sync for ImplicitRegion {}

static NOTIFIER_OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate),
};

/// A miss at `at` (a page or a chunk), where `mark` holds one past the
/// last one whose fault failed: that one is denied, once (the mark is
/// taken), and any other is absent.
fn miss_marked(mark: &AtomicU64, at: u64) -> Miss {
    match mark.compare_exchange(at + 1, 0, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Miss::Denied,
        Err(_) => Miss::Absent,
    }
}

fn access_bits(write: bool) -> u64 {
    bindings::SRNIC_ODP_READ_ALLOWED
        | if write {
            bindings::SRNIC_ODP_WRITE_ALLOWED
        } else {
            0
        }
}

impl OdpMemory {
    /// Registers `length` bytes at user address `start` of the process
    /// `verb` runs for, for on-demand paging with `access` (which holds
    /// [`ON_DEMAND`]); `start` 0 and `length` `u64::MAX` is an implicit
    /// region, the whole address space, addressed by user address.
    pub fn register(verb: &UserVerb<'_>, start: u64, length: u64, access: u32) -> Result<Self> {
        if length == 0 || access & ON_DEMAND == 0 {
            return Err(EINVAL);
        }
        let device = verb.device_ptr();
        // SAFETY: a live device (`UserVerb`'s invariant).
        if !unsafe { bindings::srnic_uses_virt_dma(device) } {
            return Err(crate::kapi::not_supported());
        }
        if start == 0 && length == u64::MAX {
            return ImplicitRegion::register(device, access);
        }
        start.checked_add(length).ok_or(EINVAL)?;
        // SAFETY: this task runs a user verb in process context
        // (`UserVerb`'s invariant), whose address space the umem records;
        // the ops are static.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_odp_get(
                device,
                start as usize,
                length as usize,
                access as i32,
                &NOTIFIER_OPS,
            )
        })?;
        let region = OdpRegion::adopt(umem, start, length, access & WRITING_ACCESS != 0)?;
        Ok(Self {
            registration: Registration::Range(region),
        })
    }

    /// Bytes covered (`u64::MAX` for an implicit region).
    pub fn length(&self) -> u64 {
        match &self.registration {
            Registration::Range(region) => region.length,
            Registration::Implicit(_) => u64::MAX,
        }
    }

    /// Whether the registration grants writing.
    pub fn writable(&self) -> bool {
        match &self.registration {
            Registration::Range(region) => region.writable,
            Registration::Implicit(implicit) => implicit.writable,
        }
    }

    /// Byte `offset` of the region and those after it in the same page
    /// (or to the region's end), for the read-side section `guard`, if
    /// its page is present (writable, for `write`).
    pub fn bytes_at<'g>(
        &self,
        guard: &'g RcuReadGuard,
        offset: u64,
        write: bool,
    ) -> core::result::Result<SharedRange<'g>, Miss> {
        match &self.registration {
            Registration::Range(region) => region.bytes_at(guard, offset, write),
            Registration::Implicit(implicit) => {
                if write && !implicit.writable {
                    return Err(Miss::Denied);
                }
                let chunk = offset / CHUNK_BYTES;
                let Some(child) = implicit.child(chunk) else {
                    return Err(implicit.absent(chunk));
                };
                // The region lives through the read-side section `'g`
                // that found it, as a range's umem does (see `OdpMemory`).
                // SAFETY: children stay until their region drops (type
                // invariant), which is after `'g`, as above.
                let child = unsafe { &*child };
                child.bytes_at(guard, offset - chunk * CHUNK_BYTES, write)
            }
        }
    }

    /// The first part of `[offset, offset + len)` that is not present
    /// (writable, for `write`) now, as an offset and a length to fault,
    /// or `None` if all of it is. Looks at most a fault's worth of pages
    /// (a few MiB), so that a long request costs a bounded look; its
    /// later pages are found missing as they are reached. A hint only:
    /// pages may go at any time.
    pub fn first_absent(&self, offset: u64, len: u64, write: bool) -> Option<(u64, u64)> {
        match &self.registration {
            Registration::Range(region) => region.first_absent(offset, len, write),
            Registration::Implicit(implicit) => {
                let end = offset.checked_add(len.min(MAX_FAULT_BYTES))?;
                let mut at = offset;
                while at < end {
                    let chunk = at / CHUNK_BYTES;
                    let chunk_start = chunk * CHUNK_BYTES;
                    let here = (end - at).min(chunk_start + CHUNK_BYTES - at);
                    let Some(child) = implicit.child(chunk) else {
                        return Some((at, end - at));
                    };
                    // SAFETY: as in `bytes_at`: children stay while the
                    // region lives, and `&self` keeps it alive.
                    let child = unsafe { &*child };
                    if let Some((absent, _)) = child.first_absent(at - chunk_start, here, write) {
                        return Some((chunk_start + absent, end - chunk_start - absent));
                    }
                    at += here;
                }
                None
            }
        }
    }

    /// Faults in `[offset, offset + len)` (at most a few MiB of it), for
    /// writing if `write`. Process context: it may sleep, and reaches the
    /// registering process's address space. On failure the first page
    /// of the range is marked, so that the access that wanted it is
    /// denied instead of waiting for ever.
    pub fn fault(&self, offset: u64, len: u64, write: bool) -> Result {
        self.each_child(offset, len.clamp(1, MAX_FAULT_BYTES), |region, at, here| {
            region.fault(at, here, write)
        })
    }

    /// Prefetches `[offset, offset + len)`, for writing if `write`: all of
    /// it faulted in, or with `fault` false only the pages present in the
    /// process taken into the page list. Process context.
    pub fn prefetch(&self, offset: u64, len: u64, write: bool, fault: bool) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.length() {
            return Err(EINVAL);
        }
        let mut at = offset;
        while at < end {
            let step = (end - at).min(MAX_FAULT_BYTES);
            self.each_child(at, step, |region, at, here| {
                if fault {
                    region.fault(at, here, write)
                } else {
                    region.take_present(at, here)
                }
            })?;
            at += step;
        }
        Ok(())
    }

    /// Calls `f` with the umem region, offset in it and length of each
    /// part of `[offset, offset + len)`: the range's own, or, for an
    /// implicit region, each chunk's child, made if it has none yet.
    /// Process context.
    fn each_child(
        &self,
        offset: u64,
        len: u64,
        mut f: impl FnMut(&OdpRegion, u64, u64) -> Result,
    ) -> Result {
        match &self.registration {
            Registration::Range(region) => f(region, offset, len),
            Registration::Implicit(implicit) => {
                let end = offset.checked_add(len).ok_or(EINVAL)?;
                let mut at = offset;
                while at < end {
                    let chunk = at / CHUNK_BYTES;
                    let chunk_start = chunk * CHUNK_BYTES;
                    let here = (end - at).min(chunk_start + CHUNK_BYTES - at);
                    let child = implicit.child_made(chunk)?;
                    f(&child, at - chunk_start, here)?;
                    at += here;
                }
                Ok(())
            }
        }
    }
}

impl OdpRegion {
    /// Takes ownership of a umem `ib_umem_odp_get` or
    /// `ib_umem_odp_alloc_child` made for `[start, start + length)`.
    fn adopt(
        umem: *mut bindings::ib_umem_odp,
        start: u64,
        length: u64,
        writable: bool,
    ) -> Result<Arc<Self>> {
        let umem = NonNull::new(umem).ok_or(ENOMEM)?;
        let (mut umem_start, mut umem_end, mut page_shift) = (0u64, 0u64, 0u32);
        // SAFETY: a live umem.
        unsafe {
            bindings::srnic_odp_bounds(
                umem.as_ptr(),
                &mut umem_start,
                &mut umem_end,
                &mut page_shift,
            )
        };
        let region = OdpRegion {
            umem,
            start,
            length,
            umem_start,
            umem_end,
            page_shift,
            writable,
            invalidating: AtomicU32::new(0),
            failed_page: AtomicU64::new(0),
        };
        // From here on `region`'s drop releases the umem.
        let region = Arc::new(region, GFP_KERNEL)?;
        // The `Arc` keeps the value at this address until its drop
        // releases the umem, after which the notifier no longer runs.
        // SAFETY: under the umem's mutex (the shim takes it), which the
        // notifier holds while it reads `private`; see above.
        unsafe {
            bindings::srnic_odp_set_owner(
                umem.as_ptr(),
                core::ptr::from_ref::<OdpRegion>(&region).cast_mut().cast(),
            )
        };
        Ok(region)
    }

    fn bytes_at<'g>(
        &self,
        _guard: &'g RcuReadGuard,
        offset: u64,
        write: bool,
    ) -> core::result::Result<SharedRange<'g>, Miss> {
        if offset >= self.length || (write && !self.writable) {
            return Err(Miss::Denied);
        }
        let address = self.start.checked_add(offset).ok_or(Miss::Denied)?;
        let page = self.page_of(address).ok_or(Miss::Denied)?;
        // Pairs with the release in `invalidate`: a reader that sees no
        // invalidation going on also sees the entries it cleared.
        if self.invalidating.load(Ordering::Acquire) != 0 {
            return Err(Miss::Absent);
        }
        let entry = self.entry(page);
        let needed = access_bits(write);
        if entry & needed != needed {
            return Err(self.absent(page));
        }
        let page_size = 1u64 << self.page_shift;
        let within = address & (page_size - 1);
        let in_page = page_size - within;
        let len = (self.length - offset).min(in_page) as usize;
        let base = entry & !(bindings::SRNIC_ODP_READ_ALLOWED | bindings::SRNIC_ODP_WRITE_ALLOWED);
        let at = base.checked_add(within).ok_or(Miss::Denied)?;
        // On a device without DMA mapping an entry is the kernel address
        // of a present page of `page_size` bytes, mapped for writing if
        // its write bit is set. It stays so for the section `'g`: an
        // invalidation makes readers miss (checked above, under the same
        // section) and waits for a grace period before it clears the
        // entry, and the page is freed only after that.
        // SAFETY: a present page for `'g`, as above; user memory, which no
        // Rust code owns.
        unsafe { SharedRange::foreign(at as usize as *mut u8, len, write) }.ok_or(Miss::Denied)
    }

    fn first_absent(&self, offset: u64, len: u64, write: bool) -> Option<(u64, u64)> {
        let end = offset
            .checked_add(len.min(MAX_FAULT_BYTES))?
            .min(self.length);
        if self.invalidating.load(Ordering::Acquire) != 0 {
            return Some((offset, end.saturating_sub(offset)));
        }
        let needed = access_bits(write);
        let page_size = 1u64 << self.page_shift;
        let mut at = offset;
        while at < end {
            let address = self.start.checked_add(at)?;
            let page = self.page_of(address)?;
            if self.entry(page) & needed != needed {
                return Some((at, end - at));
            }
            let next_page = (address | (page_size - 1)).checked_add(1)?;
            at = next_page - self.start;
        }
        None
    }

    /// Faults in `[offset, offset + len)` of this umem (at most a few
    /// MiB); see [`OdpMemory::fault`].
    fn fault(&self, offset: u64, len: u64, write: bool) -> Result {
        if offset >= self.length || (write && !self.writable) {
            return Err(EINVAL);
        }
        let len = len.clamp(1, MAX_FAULT_BYTES).min(self.length - offset);
        let address = self.start + offset;
        // SAFETY: a live umem; process context (the caller's contract,
        // stated above). On success the mutex is held and released below.
        let mapped = unsafe {
            bindings::ib_umem_odp_map_dma_and_lock(
                self.umem.as_ptr(),
                address,
                len,
                access_bits(write),
                true,
            )
        };
        if mapped < 0 {
            if let Some(page) = self.page_of(address) {
                self.failed_page.store(page + 1, Ordering::Release);
            }
            return Err(Error::from_errno(mapped));
        }
        // SAFETY: `ib_umem_odp_map_dma_and_lock` returned holding it.
        unsafe { bindings::srnic_odp_unlock(self.umem.as_ptr()) };
        Ok(())
    }
}

impl ImplicitRegion {
    /// The implicit region of the process a user verb of `device` runs
    /// for. Process context.
    fn register(device: *mut bindings::ib_device, access: u32) -> Result<OdpMemory> {
        // SAFETY: the caller runs a user verb of the live `device` in its
        // process's task.
        let root =
            from_err_ptr(unsafe { bindings::ib_umem_odp_alloc_implicit(device, access as i32) })?;
        let root = NonNull::new(root).ok_or(ENOMEM)?;
        // SAFETY: this task is the registering process's, with its
        // address space (a user verb); grabbed until drop.
        let mm = unsafe { bindings::srnic_mmgrab_current() };
        let Some(mm) = NonNull::new(mm) else {
            // SAFETY: made above, not shared with anyone.
            unsafe { bindings::ib_umem_odp_release(root.as_ptr()) };
            return Err(EINVAL);
        };
        let implicit = Arc::pin_init(
            pin_init!(ImplicitRegion {
                root,
                mm,
                writable: access & WRITING_ACCESS != 0,
                children <- new_spinlock_irq!(KVec::new()),
                failed_chunk: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
        .inspect_err(|_| {
            // SAFETY: never made into a region, so still ours alone.
            unsafe {
                bindings::ib_umem_odp_release(root.as_ptr());
                bindings::srnic_mmdrop(mm.as_ptr());
            }
        })?;
        Ok(OdpMemory {
            registration: Registration::Implicit(implicit),
        })
    }

    /// The child of `chunk`, if it has one: a pointer that stays valid
    /// while the region lives (children go only when it drops).
    fn child(&self, chunk: u64) -> Option<*const OdpRegion> {
        let children = self.children.lock();
        let at = children.binary_search_by_key(&chunk, |(c, _)| *c).ok()?;
        children
            .get(at)
            .map(|(_, child)| core::ptr::from_ref::<OdpRegion>(child))
    }

    /// A miss at `chunk`: denied once if its child could not be made.
    fn absent(&self, chunk: u64) -> Miss {
        miss_marked(&self.failed_chunk, chunk)
    }

    /// The child of `chunk`, made now if it has none: `EFAULT` if the
    /// process maps nothing there, `ENOMEM` past the bounds on children.
    /// Process context.
    fn child_made(&self, chunk: u64) -> Result<Arc<OdpRegion>> {
        if let Some(child) = self.find(chunk) {
            return Ok(child);
        }
        let start = chunk.checked_mul(CHUNK_BYTES).ok_or(EINVAL)?;
        let made = self.new_child(start).inspect_err(|_| {
            self.failed_chunk.store(chunk + 1, Ordering::Release);
        })?;
        let mut children = self.children.lock();
        match children.binary_search_by_key(&chunk, |(c, _)| *c) {
            // Another fault made it meanwhile: ours goes (outside the
            // lock, in this process context).
            Ok(at) => {
                let theirs = children.get(at).map(|(_, child)| child.clone());
                drop(children);
                drop(made);
                uncount_children(1);
                theirs.ok_or(EINVAL)
            }
            Err(at) => {
                // Checked again here: faults of other QPs may have made
                // children since `new_child` looked.
                let pushed = if children.len() >= MAX_CHILDREN_PER_REGION {
                    Err(ENOMEM)
                } else {
                    children
                        .push((chunk, made.clone()), GFP_ATOMIC)
                        .map_err(Error::from)
                };
                if let Err(e) = pushed {
                    drop(children);
                    drop(made);
                    uncount_children(1);
                    return Err(e);
                }
                if let Some(tail) = children.get_mut(at..) {
                    tail.rotate_right(1);
                }
                Ok(made)
            }
        }
    }

    /// A child for the chunk at `start`, counted against the bounds, if
    /// the process maps something in the chunk. A child is made for a
    /// mapping only: an access elsewhere fails anyway, and a child made
    /// for it would stay until the region goes.
    fn new_child(&self, start: u64) -> Result<Arc<OdpRegion>> {
        let end = start.checked_add(CHUNK_BYTES).ok_or(EINVAL)?;
        let (start_addr, end_addr) = (usize::try_from(start)?, usize::try_from(end)?);
        // SAFETY: the address space is grabbed (type invariant); process
        // context, as this function's callers are.
        if !unsafe { bindings::srnic_mm_maps_range(self.mm.as_ptr(), start_addr, end_addr) } {
            return Err(EFAULT);
        }
        if self.children.lock().len() >= MAX_CHILDREN_PER_REGION {
            return Err(ENOMEM);
        }
        CHILDREN
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_CHILDREN).then_some(n + 1)
            })
            .map_err(|_| ENOMEM)?;
        self.make_child(start).inspect_err(|_| uncount_children(1))
    }

    fn find(&self, chunk: u64) -> Option<Arc<OdpRegion>> {
        let children = self.children.lock();
        let at = children.binary_search_by_key(&chunk, |(c, _)| *c).ok()?;
        children.get(at).map(|(_, child)| child.clone())
    }

    fn make_child(&self, start: u64) -> Result<Arc<OdpRegion>> {
        // SAFETY: a live implicit root; the address space is grabbed, so
        // the core's `mmget_not_zero` looks at a live `mm_struct` (and
        // fails once the process has exited); the ops are static.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_odp_alloc_child(
                self.root.as_ptr(),
                start as usize,
                CHUNK_BYTES as usize,
                &NOTIFIER_OPS,
            )
        })?;
        OdpRegion::adopt(umem, start, CHUNK_BYTES, self.writable)
    }
}

#[pinned_drop]
impl PinnedDrop for ImplicitRegion {
    fn drop(self: Pin<&mut Self>) {
        // The children first: their umems hang off the root's process.
        let children = core::mem::take(&mut *self.children.lock());
        let made = children.len();
        drop(children);
        uncount_children(made);
        // SAFETY: the root is ours and released once, after its children;
        // the grab is ours and dropped once, last.
        unsafe {
            bindings::ib_umem_odp_release(self.root.as_ptr());
            bindings::srnic_mmdrop(self.mm.as_ptr());
        }
    }
}

impl OdpRegion {
    /// Takes the pages of `[offset, offset + len)` that the process has
    /// present into the page list, with the access they have there.
    fn take_present(&self, offset: u64, len: u64) -> Result {
        // SAFETY: a live umem; process context (`prefetch`'s contract). On
        // success the mutex is held and released below.
        let mapped = unsafe {
            bindings::ib_umem_odp_map_dma_and_lock(
                self.umem.as_ptr(),
                self.start + offset,
                len,
                bindings::SRNIC_ODP_READ_ALLOWED,
                false,
            )
        };
        if mapped < 0 {
            return Err(Error::from_errno(mapped));
        }
        // SAFETY: `ib_umem_odp_map_dma_and_lock` returned holding it.
        unsafe { bindings::srnic_odp_unlock(self.umem.as_ptr()) };
        Ok(())
    }

    /// The index in the page list of the page holding user `address`.
    fn page_of(&self, address: u64) -> Option<u64> {
        Some(address.checked_sub(self.umem_start)? >> self.page_shift)
    }

    /// Entry `page` of the page list, read once.
    fn entry(&self, page: u64) -> u64 {
        // SAFETY: `page` indexes the umem's list: `page_of` of an address
        // inside the region, which the umem covers.
        unsafe { bindings::srnic_odp_dma_entry(self.umem.as_ptr(), page) }
    }

    /// A miss at `page`: denied once if its last fault failed.
    fn absent(&self, page: u64) -> Miss {
        miss_marked(&self.failed_page, page)
    }
}

impl Drop for OdpRegion {
    fn drop(&mut self) {
        // SAFETY: the last reference (see `OdpMemory` for the context):
        // no reader can reach the pages, and the release removes the
        // notifier before it frees the umem.
        unsafe { bindings::ib_umem_odp_release(self.umem.as_ptr()) };
    }
}

/// The notifier's invalidation of `[range.start, range.end)`: see the
/// module's description.
///
/// # Safety
///
/// Called only by the MMU notifier of a umem that [`OdpMemory::register`]
/// made.
unsafe extern "C" fn invalidate(
    notifier: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    seq: usize,
) -> bool {
    // SAFETY: the notifier is the `notifier` field of a live umem (the
    // caller's contract), and `range` is the core's.
    let (umem, blockable) = unsafe {
        (
            bindings::srnic_odp_of_notifier(notifier),
            bindings::srnic_mmu_range_blockable(range),
        )
    };
    if blockable {
        // SAFETY: a live umem; a blockable invalidation may sleep.
        unsafe { bindings::srnic_odp_lock(umem) };
    // SAFETY: a live umem.
    } else if !unsafe { bindings::srnic_odp_trylock(umem) } {
        return false;
    }
    // SAFETY: under the umem's mutex, as the notifier contract asks of a
    // sequence update; the core's.
    unsafe { bindings::srnic_odp_set_seq(notifier, seq) };
    let (mut start, mut end) = (0u64, 0u64);
    // SAFETY: the core's range.
    unsafe { bindings::srnic_mmu_range_bounds(range, &mut start, &mut end) };
    // SAFETY: under the mutex, which guards `private`.
    let owner = unsafe { bindings::srnic_odp_owner(umem) }.cast::<OdpRegion>();
    // SAFETY: `private` is null or the `OdpRegion` of this umem, which
    // lives until its drop releases the umem (removing this notifier).
    let owner = unsafe { owner.as_ref() };
    let ok = match owner {
        // Nothing was ever faulted in before the owner was set.
        None => true,
        Some(region) => region.invalidate(start, end, blockable),
    };
    // SAFETY: locked above.
    unsafe { bindings::srnic_odp_unlock(umem) };
    ok
}

impl OdpRegion {
    /// Clears the page list over `[start, end)` (user addresses), under
    /// the umem's mutex; `false` if pages are mapped there and the
    /// caller may not wait.
    fn invalidate(&self, start: u64, end: u64, blockable: bool) -> bool {
        let page_size = 1u64 << self.page_shift;
        let mut at = start.max(self.umem_start) & !(page_size - 1);
        let end = end.min(self.umem_end);
        let mut mapped = false;
        while at < end {
            let Some(page) = self.page_of(at) else { break };
            if self.entry(page) != 0 {
                mapped = true;
                break;
            }
            at += page_size;
        }
        if !mapped {
            return true;
        }
        if !blockable {
            return false;
        }
        self.invalidating.fetch_add(1, Ordering::AcqRel);
        // SAFETY: a blockable invalidation runs in process context, and
        // the notifier runs outside any read-side section of ours.
        unsafe { crate::kapi::rcu::synchronize() };
        // SAFETY: under the mutex; the core clamps the range to the umem
        // and marks pages it had mapped for writing dirty.
        unsafe { bindings::ib_umem_odp_unmap_dma_pages(self.umem.as_ptr(), start, end) };
        self.invalidating.fetch_sub(1, Ordering::Release);
        true
    }
}
