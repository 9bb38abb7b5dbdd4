// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for a memory region (`struct ib_umem`), with its
//! pages in an array so that translating an address is one division.

use crate::bindings;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::shared::SharedRange;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::alloc::{flags::GFP_KERNEL, KVec};
use kernel::error::from_err_ptr;
use kernel::prelude::*;

const PAGE_SHIFT: u32 = bindings::SRNIC_PAGE_SHIFT;
const PAGE_SIZE: u64 = bindings::SRNIC_PAGE_SIZE as u64;

use super::access::WRITING_ACCESS;

/// Pinned user pages backing `[start, start + length)` of a process.
///
/// # Invariants
///
/// `umem` is a live pin of the range, released on drop; `pages` holds its
/// pages in order; the pages were pinned for writing if `writable`.
pub struct UserMemory {
    umem: NonNull<bindings::ib_umem>,
    pages: KVec<NonNull<bindings::page>>,
    /// The user address of the first byte.
    start: u64,
    /// Offset of `start` in the first page.
    first_offset: u64,
    length: u64,
    writable: bool,
}

/// A user range that was pinned, to pin again with other access.
#[derive(Clone, Copy)]
pub struct UserRange {
    start: u64,
    length: u64,
}

impl UserRange {
    /// Pins the range again, in the process `verb` runs for, with `access`.
    pub fn pin(&self, verb: &UserVerb<'_>, access: u32) -> Result<UserMemory> {
        UserMemory::pin(verb, self.start, self.length, access)
    }
}

/// A verb the RDMA core is running for a user process on a registered
/// device: the context user memory is pinned in. Pinning reaches the
/// address space of the calling task (`current->mm`) and the device's
/// DMA settings, so it needs a task with a user address space and a live
/// device; only kapi's verb callbacks make one, and it cannot leave the
/// task (not `Send`) or outlive the callback (`'a`).
///
/// # Invariants
///
/// `device` is a registered device, live for `'a`; the task that made the
/// value runs a verb of a user process (it has that process's address
/// space) in process context.
pub struct UserVerb<'a> {
    device: NonNull<bindings::ib_device>,
    _verb: PhantomData<(&'a bindings::ib_device, *mut ())>,
}

impl UserVerb<'_> {
    /// # Safety
    ///
    /// Called by the RDMA core's verb callback for a user verb (one with
    /// `udata`) of `device`, in the task of the process that made the
    /// verb; the value lives only in that callback.
    pub(crate) unsafe fn new(device: *mut bindings::ib_device) -> Option<Self> {
        Some(Self {
            device: NonNull::new(device)?,
            _verb: PhantomData,
        })
    }

    /// The device the verb runs on: registered and live while `self` is.
    pub(super) fn device_ptr(&self) -> *mut bindings::ib_device {
        self.device.as_ptr()
    }
}

// SAFETY: the umem and the page array are owned; pages are only handed out
// as addresses, and `ib_umem_release` may run on any CPU.
unsafe impl Send for UserMemory {}
// SAFETY: shared access only reads the array.
unsafe impl Sync for UserMemory {}

impl UserMemory {
    /// Pins `length` bytes at user address `start` of the process `verb`
    /// runs for, with `access` (`IB_ACCESS_*`, which decides whether the
    /// pages must be writable).
    pub fn pin(verb: &UserVerb<'_>, start: u64, length: u64, access: u32) -> Result<Self> {
        if length == 0 {
            return Err(EINVAL);
        }
        start.checked_add(length).ok_or(EINVAL)?;
        // `ib_umem_get` pins from `current->mm` and checks the range against
        // that address space and the pinning limit.
        // SAFETY: the device is live and this task runs a user verb in
        // process context (`UserVerb`'s invariant), which that needs.
        let umem = from_err_ptr(unsafe {
            bindings::ib_umem_get(
                verb.device.as_ptr(),
                start as _,
                length as usize,
                access as i32,
            )
        })?;
        let umem = NonNull::new(umem).ok_or(ENOMEM)?;
        let mut memory = Self {
            umem,
            pages: KVec::new(),
            start,
            first_offset: start % PAGE_SIZE,
            length,
            // What `ib_umem_get` decided `FOLL_WRITE` by.
            writable: access & WRITING_ACCESS != 0,
        };
        memory.collect_pages()?;
        Ok(memory)
    }

    fn collect_pages(&mut self) -> Result {
        let needed = (self.first_offset + self.length).div_ceil(PAGE_SIZE) as usize;
        self.pages.reserve(needed, GFP_KERNEL)?;
        let mut nents = 0u32;
        // SAFETY: the umem is pinned and owned; its table is valid while it
        // is.
        let mut sg = unsafe { bindings::srnic_umem_sgl(self.umem.as_ptr(), &mut nents) };
        for _ in 0..nents {
            if sg.is_null() || self.pages.len() >= needed {
                break;
            }
            // SAFETY: `sg` is an entry of the umem's table.
            let (first, length) = unsafe { (bindings::srnic_sg_page(sg), (*sg).length) };
            let count = (u64::from(length)).div_ceil(PAGE_SIZE);
            for n in 0..count {
                if self.pages.len() >= needed {
                    break;
                }
                // SAFETY: the entry covers `count` contiguous pages.
                let page = unsafe { bindings::srnic_nth_page(first, n as _) };
                let page = NonNull::new(page).ok_or(EFAULT)?;
                self.pages.push(page, GFP_KERNEL)?;
            }
            // SAFETY: walks the same table.
            sg = unsafe { bindings::srnic_sg_next(sg) };
        }
        if self.pages.len() != needed {
            return Err(EFAULT);
        }
        Ok(())
    }

    /// Pages pinned.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Bytes covered.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Whether the pages were pinned for writing. A read-only pin may hold
    /// pages the process cannot write (a file's page cache, the zero page):
    /// nothing may ever write through it.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The pinned user range, to pin again with other access.
    pub fn range(&self) -> UserRange {
        UserRange {
            start: self.start,
            length: self.length,
        }
    }

    /// The page holding byte `offset` of the region, and the offset in it.
    pub fn locate(&self, offset: u64) -> Option<(NonNull<bindings::page>, usize)> {
        if offset >= self.length {
            return None;
        }
        let absolute = offset + self.first_offset;
        let page = *self.pages.get((absolute >> PAGE_SHIFT) as usize)?;
        Some((page, (absolute % PAGE_SIZE) as usize))
    }

    /// Byte `offset` of the region and those of its memory that follow it
    /// contiguously (to the end of its page or of the region), for the
    /// read-side section `_guard`; writable if the pages were pinned so.
    ///
    /// The pages stay pinned until `self` drops, and a `UserMemory` goes
    /// only once no read-side section can reach it: a region's with the
    /// region, which its table unlists (waiting for a grace period) before
    /// the driver's data drops, and one replaced by a re-registration after
    /// the kapi's `synchronize`. A driver keeps a `UserMemory` only in the
    /// region it was pinned for, and hands a replaced one back.
    pub fn bytes_at<'g>(&self, _guard: &'g RcuReadGuard, offset: u64) -> Option<SharedRange<'g>> {
        let (page, within) = self.locate(offset)?;
        // SAFETY: the page is pinned while `self` lives; without highmem
        // (checked when the shims build) every page has a kernel address.
        let base = unsafe { bindings::srnic_page_address(page.as_ptr()) }.cast::<u8>();
        let in_page = PAGE_SIZE as usize - within;
        let in_region = (self.length - offset).min(in_page as u64) as usize;
        // SAFETY: `within` is below the page size, so this stays in the
        // page.
        let at = unsafe { base.add(within) };
        // SAFETY: `in_region` bytes of one pinned page, pinned for writing
        // if `writable`, which stay so for the section `'g` (see above);
        // user memory, which no Rust code owns.
        unsafe { SharedRange::foreign(at, in_region, self.writable) }
    }
}

/// The kapi's word, handed to a driver only with kernel consumers' memory
/// (a DMA region from `get_dma_mr`, a fast-registration region that only
/// kernel consumers allocate and map with `map_mr_sg`, a kernel QP's local
/// DMA key), that the addresses such a consumer gives are its memory.
///
/// The verbs contract for kernel consumers is that an address in a work
/// request or a page list is a kernel virtual address (this device does no
/// DMA mapping) of memory the consumer owns and keeps while the request is
/// outstanding or the mapping valid, and that a region with remote access
/// exposes it by the consumer's choice. The transport touches such memory
/// only while it processes a request or packet, inside one read-side
/// section, so a range lives no longer than that section.
///
/// # Invariants
///
/// Made only by kapi code that hands it with kernel consumers' memory.
#[derive(Clone, Copy)]
pub struct KernelMemory {
    _private: (),
}

impl KernelMemory {
    /// # Safety
    ///
    /// Handed only with memory of a kernel consumer, as described above.
    pub(in crate::kapi) unsafe fn new() -> Self {
        Self { _private: () }
    }

    /// The `len` bytes at kernel address `addr` a kernel consumer gave, for
    /// the read-side section `_guard`; `None` at a null or wrapping
    /// address.
    pub fn bytes_at<'g>(
        &self,
        _guard: &'g RcuReadGuard,
        addr: u64,
        len: usize,
    ) -> Option<SharedRange<'g>> {
        let addr = usize::try_from(addr).ok()?;
        // SAFETY: kernel memory its consumer owns and keeps while the
        // transport works on it (the verbs contract, see the type), which
        // is within the section `'g`; C code owns it, not Rust.
        unsafe { SharedRange::foreign(addr as *mut u8, len, true) }
    }
}

impl Drop for UserMemory {
    fn drop(&mut self) {
        // SAFETY: pinned by `pin`, released once; verbs that drop an MR run
        // in process context.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}
