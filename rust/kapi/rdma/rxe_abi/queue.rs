// SPDX-License-Identifier: GPL-2.0

//! The memory of a work or completion queue: a ring in the layout of the
//! rxe user ABI (`struct rxe_queue_buf`: a header with the element size, the
//! index mask and producer and consumer indices on cache lines of their own,
//! then the slots), allocated so that it can be mapped into a process.
//!
//! The geometry lives in kernel memory ([`RingGeometry`]); the copy in the
//! header is for user space only and is never read back. Once a queue is
//! shared, user space may write anything anywhere in it: the accessors
//! never let a value read from the queue choose an address outside it.

use crate::bindings;
use crate::kapi::rdma::udata::{Pod, UserData};
use crate::pure::ring::RingGeometry;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KBox};
use kernel::error::to_result;
use kernel::prelude::*;

/// Bytes before the first slot.
const HEADER: usize = core::mem::size_of::<bindings::rxe_queue_buf>();
const PRODUCER: usize = core::mem::offset_of!(bindings::rxe_queue_buf, producer_index);
const CONSUMER: usize = core::mem::offset_of!(bindings::rxe_queue_buf, consumer_index);
const PAGE_SIZE: usize = bindings::SRNIC_PAGE_SIZE;

/// Where user space finds a shared queue: `mmap` of the uverbs command file
/// at `offset` for `size` bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapInfo {
    /// Offset to pass to `mmap`.
    pub offset: u64,
    /// Bytes to map.
    pub size: u32,
}

impl MmapInfo {
    pub(crate) fn to_abi(self) -> bindings::mminfo {
        bindings::mminfo {
            offset: self.offset,
            size: self.size,
            pad: 0,
        }
    }
}

/// The core's mmap entry for a shared queue, with the buffer it maps.
/// Freed by `mmap_free` once the queue dropped it and no `mmap` call is
/// using it; pages still mapped into a process keep their own references.
///
/// # Invariants
///
/// `entry` comes first, so the core's entry pointer is the mapping's.
/// `base` is the `vmalloc_user` buffer of the [`Queue`] that inserted the
/// entry, of the entry's size; the mapping owns it from then on, and
/// [`Self::free`] frees both.
#[repr(C)]
pub(crate) struct QueueMapping {
    entry: bindings::rdma_user_mmap_entry,
    base: NonNull<u8>,
}

impl QueueMapping {
    /// Maps the queue behind `entry` into `vma`.
    ///
    /// # Safety
    ///
    /// `entry` must be the entry of a live `QueueMapping`, referenced by the
    /// caller; `vma` is the area the core is setting up.
    pub(crate) unsafe fn map(
        entry: *mut bindings::rdma_user_mmap_entry,
        vma: *mut bindings::vm_area_struct,
    ) -> Result {
        let mapping = entry.cast::<QueueMapping>();
        // SAFETY: by the type invariant, `entry` is the first field of the live `QueueMapping` and
        // the buffer a `vmalloc_user` allocation of the entry's size, which the core checked is as
        // large as the area (it refuses entries whose size differs).
        to_result(unsafe { bindings::remap_vmalloc_range(vma, (*mapping).base.as_ptr().cast(), 0) })
    }

    /// Frees the mapping and its buffer.
    ///
    /// # Safety
    ///
    /// Called once, by the core's `mmap_free`, with the last reference.
    pub(crate) unsafe fn free(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: the entry came from `KBox::into_raw` in `share`; pages
        // still mapped into processes hold their own page references, so
        // `vfree` only drops the kernel's.
        unsafe {
            let mapping = KBox::from_raw(entry.cast::<QueueMapping>());
            bindings::vfree(mapping.base.as_ptr().cast());
        }
    }
}

/// A ring of fixed-size slots behind an rxe queue header.
///
/// # Invariants
///
/// `base` is a page-aligned `vmalloc_user` buffer of `bytes` bytes, at
/// least the header and `geometry.data_bytes()`, allocated while the value
/// lives: the queue owns it until [`Self::share`], then `mapping`, the mmap
/// entry inserted for it, does (the queue holding a reference to it).
pub struct Queue {
    base: NonNull<u8>,
    bytes: usize,
    geometry: RingGeometry,
    /// Set once shared: the core's entry then owns the buffer.
    mapping: Option<NonNull<QueueMapping>>,
}

// SAFETY: the buffer is plain memory reached only through the accessors
// below: the indices with atomics, slot contents with volatile copies
// (`copy_shared`), except through `slot_bytes`, whose callers use it only
// on queues user space cannot write.
unsafe impl Send for Queue {}
// SAFETY: as above.
unsafe impl Sync for Queue {}

/// Copies `len` bytes from `src` to `dst` with volatile accesses, one
/// aligned word (or byte) at a time: a ring user space may write or read at
/// the same moment is read exactly once, and the compiler may neither read
/// its bytes again later nor merge the accesses with others.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and
/// the two ranges must not overlap.
unsafe fn copy_shared(src: *const u8, dst: *mut u8, len: usize) {
    const WORD: usize = core::mem::size_of::<u64>();
    let mut done = 0;
    while done < len {
        // SAFETY: `done < len`, so both stay in their ranges.
        let (from, to) = unsafe { (src.add(done), dst.add(done)) };
        if len - done >= WORD && from as usize % WORD == 0 && to as usize % WORD == 0 {
            // SAFETY: eight aligned bytes inside both ranges.
            unsafe {
                to.cast::<u64>()
                    .write_volatile(from.cast::<u64>().read_volatile())
            };
            done += WORD;
        } else {
            // SAFETY: one byte inside both ranges.
            unsafe { to.write_volatile(from.read_volatile()) };
            done += 1;
        }
    }
}

impl Queue {
    /// A zeroed queue of `geometry`.
    pub fn new(geometry: RingGeometry) -> Result<Self> {
        let bytes = HEADER
            .checked_add(geometry.data_bytes())
            .and_then(|b| b.checked_next_multiple_of(PAGE_SIZE))
            .ok_or(ENOMEM)?;
        // SAFETY: allocates zeroed, page-aligned memory that may later be
        // mapped into user space.
        let base = NonNull::new(unsafe { bindings::srnic_vmalloc_user(bytes as _) }.cast::<u8>())
            .ok_or(ENOMEM)?;
        let queue = Self {
            base,
            bytes,
            geometry,
            mapping: None,
        };
        // SAFETY: the header is inside the fresh buffer and aligned.
        unsafe {
            let header = base.as_ptr().cast::<bindings::rxe_queue_buf>();
            (*header).log2_elem_size = geometry.log2_elem_size();
            (*header).index_mask = geometry.index_mask();
        }
        Ok(queue)
    }

    /// The ring's geometry, as the kernel keeps it.
    pub fn geometry(&self) -> &RingGeometry {
        &self.geometry
    }

    /// Makes the queue mappable by the process that makes `user`'s call.
    pub fn share(&mut self, user: &UserData) -> Result<MmapInfo> {
        if self.mapping.is_some() {
            return Err(EINVAL);
        }
        let size = u32::try_from(self.bytes).map_err(|_| ENOMEM)?;
        let mapping = KBox::new(
            QueueMapping {
                // SAFETY: a zeroed entry is what the core expects to fill.
                entry: unsafe { core::mem::zeroed() },
                base: self.base,
            },
            GFP_KERNEL,
        )?;
        let mapping = KBox::into_raw(mapping);
        // SAFETY: `mapping` is a fresh allocation whose first field is the
        // entry; the ucontext is the caller's and outlives the call.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                user.ucontext(),
                core::ptr::addr_of_mut!((*mapping).entry),
                self.bytes,
            )
        };
        if ret < 0 {
            // SAFETY: not inserted, so still ours alone; the buffer stays
            // with the queue.
            drop(unsafe { KBox::from_raw(mapping) });
            return Err(Error::from_errno(ret));
        }
        // SAFETY: inserted entries are valid until removed.
        let offset =
            unsafe { bindings::srnic_mmap_offset(core::ptr::addr_of_mut!((*mapping).entry)) };
        self.mapping = NonNull::new(mapping);
        Ok(MmapInfo { offset, size })
    }

    fn index(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is PRODUCER or CONSUMER, 4-byte aligned offsets in
        // the header, which lives as long as `self` (type invariant); every
        // access to them is atomic.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(at).cast()) }
    }

    /// The producer index as stored: untrusted if user space produces.
    pub fn producer(&self) -> u32 {
        self.index(PRODUCER).load(Ordering::Acquire)
    }

    /// The producer index user space stored, if it is one the ABI allows.
    pub fn checked_producer(&self) -> Option<u32> {
        self.geometry.check_index(self.producer())
    }

    /// The consumer index user space stored, if it is one the ABI allows.
    pub fn checked_consumer(&self) -> Option<u32> {
        self.geometry.check_index(self.consumer())
    }

    /// Publishes a new producer index, after the slots it covers.
    pub fn set_producer(&self, value: u32) {
        self.index(PRODUCER)
            .store(value & self.geometry.index_mask(), Ordering::Release);
    }

    /// The consumer index as stored: untrusted if user space consumes.
    pub fn consumer(&self) -> u32 {
        self.index(CONSUMER).load(Ordering::Acquire)
    }

    /// Publishes a new consumer index, once done with the slots it frees.
    pub fn set_consumer(&self, value: u32) {
        self.index(CONSUMER)
            .store(value & self.geometry.index_mask(), Ordering::Release);
    }

    /// The address of `offset` bytes into slot `index` (masked), if `len`
    /// bytes from there stay inside the slot.
    fn at(&self, index: u32, offset: usize, len: usize) -> Result<*mut u8> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.geometry.elem_size() as usize {
            return Err(EINVAL);
        }
        let at = HEADER + self.geometry.slot_offset(index) + offset;
        // SAFETY: `slot_offset` is below `data_bytes` for any index and the
        // slot's range is checked above, so the address is in the buffer
        // (type invariant).
        Ok(unsafe { self.base.as_ptr().add(at) })
    }

    /// The address of `len` bytes at `offset` in slot `index`, for bulk
    /// copies; only meaningful for queues user space cannot write.
    pub fn slot_bytes(&self, index: u32, offset: usize, len: usize) -> Result<*const u8> {
        self.at(index, offset, len).map(|p| p.cast_const())
    }

    /// Reads a `T` at `offset` in slot `index`, once.
    pub fn read<T: Pod>(&self, index: u32, offset: usize) -> Result<T> {
        let ptr = self.at(index, offset, core::mem::size_of::<T>())?;
        let mut value = T::default();
        // SAFETY: in bounds (checked); any bytes are a valid `T` (`Pod`);
        // the local does not overlap the ring. One volatile copy: user
        // space may write concurrently, and what was read is what is used.
        unsafe {
            copy_shared(
                ptr.cast_const(),
                (&mut value as *mut T).cast::<u8>(),
                core::mem::size_of::<T>(),
            )
        };
        Ok(value)
    }

    /// Writes a `T` at `offset` in slot `index`.
    pub fn write<T: Pod>(&self, index: u32, offset: usize, value: &T) -> Result {
        let ptr = self.at(index, offset, core::mem::size_of::<T>())?;
        // SAFETY: in bounds (checked); a copy of plain data from a value
        // that does not overlap the ring, which user space may read
        // meanwhile.
        unsafe {
            copy_shared(
                (value as *const T).cast::<u8>(),
                ptr,
                core::mem::size_of::<T>(),
            )
        };
        Ok(())
    }

    /// Writes `bytes` at `offset` in slot `index`.
    pub fn write_bytes(&self, index: u32, offset: usize, bytes: &[u8]) -> Result {
        let dst = self.at(index, offset, bytes.len())?;
        // SAFETY: in bounds (checked); the source is kernel memory that does
        // not overlap the queue.
        unsafe { copy_shared(bytes.as_ptr(), dst, bytes.len()) };
        Ok(())
    }

    /// Fills this (new, empty) queue with the `count` entries of `old`
    /// starting at slot `first`, in order from slot 0, and publishes them:
    /// what a resize keeps. `EINVAL` if they do not fit.
    pub fn take_entries(&self, old: &Queue, first: u32, count: u32) -> Result {
        if !self.geometry.fits(count) {
            return Err(EINVAL);
        }
        let mut from = first;
        for index in 0..count {
            self.copy_slot(index, old, from)?;
            from = old.geometry.next(from);
        }
        self.set_consumer(0);
        self.set_producer(count);
        Ok(())
    }

    /// Copies slot `from_index` of `from` into slot `index` of this queue,
    /// as much as both slots hold: one read of memory user space may write.
    pub fn copy_slot(&self, index: u32, from: &Queue, from_index: u32) -> Result {
        let len = self.geometry.elem_size().min(from.geometry.elem_size()) as usize;
        let dst = self.at(index, 0, len)?;
        let src = from.at(from_index, 0, len)?;
        // SAFETY: both ranges are in bounds (checked) and in different
        // allocations, so they do not overlap.
        unsafe { copy_shared(src, dst, len) };
        Ok(())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        match self.mapping {
            // SAFETY: by the type invariant, the entry `share` inserted, holding our reference;
            // removing it drops the queue's reference, and `mmap_free` frees the buffer once no
            // `mmap` call holds one.
            Some(mapping) => unsafe {
                bindings::rdma_user_mmap_entry_remove(core::ptr::addr_of_mut!(
                    (*mapping.as_ptr()).entry
                ))
            },
            // SAFETY: never shared, so the buffer is ours alone (type
            // invariant).
            None => unsafe { bindings::vfree(self.base.as_ptr().cast()) },
        }
    }
}

/// Writes the rxe ABI's responses for objects with shared queues.
pub mod response {
    use super::{MmapInfo, UserData};
    use crate::bindings;
    use kernel::prelude::*;

    /// The response to creating or resizing a CQ.
    pub fn cq(user: &UserData, mi: MmapInfo) -> Result {
        user.write(&bindings::rxe_create_cq_resp { mi: mi.to_abi() })
    }

    /// The response to creating a QP: the RQ (zero with an SRQ) and the SQ.
    pub fn qp(user: &UserData, rq: Option<MmapInfo>, sq: MmapInfo) -> Result {
        user.write(&bindings::rxe_create_qp_resp {
            rq_mi: rq.unwrap_or_default().to_abi(),
            sq_mi: sq.to_abi(),
        })
    }

    /// The response to creating an SRQ.
    pub fn srq(user: &UserData, mi: MmapInfo, srq_num: u32) -> Result {
        user.write(&bindings::rxe_create_srq_resp {
            mi: mi.to_abi(),
            srq_num,
            reserved: 0,
        })
    }

    /// The user address where `modify_srq` must leave the new queue's
    /// mmap info after a resize.
    pub fn srq_resize_address(user: &UserData) -> Result<u64> {
        Ok(user.read::<bindings::rxe_modify_srq_cmd>()?.mmap_info_addr)
    }

    /// Leaves a resized SRQ's mmap info at `addr` in the caller's memory.
    pub fn srq_resized(addr: u64, mi: MmapInfo) -> Result {
        crate::kapi::rdma::udata::copy_to_user_address(addr, &mi.to_abi())
    }

    /// The response to creating an AH: its number, which user space puts
    /// in UD send WQEs.
    pub fn ah(user: &UserData, ah_num: u32) -> Result {
        user.write(&bindings::rxe_create_ah_resp {
            ah_num,
            reserved: 0,
        })
    }
}
