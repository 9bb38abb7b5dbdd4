// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for a memory region (`struct ib_umem`), with its
//! pages in an array so that translating an address is one division.

use crate::bindings;
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

    /// The kernel address of byte `offset` of the region and how many
    /// bytes of the region's memory follow it contiguously (to the end of
    /// its page or of the region).
    pub fn address(&self, offset: u64) -> Option<(*mut u8, usize)> {
        let (page, within) = self.locate(offset)?;
        // SAFETY: the page is pinned while `self` lives; without highmem
        // (checked when the shims build) every page has a kernel address.
        let base = unsafe { bindings::srnic_page_address(page.as_ptr()) }.cast::<u8>();
        let in_page = PAGE_SIZE as usize - within;
        let in_region = (self.length - offset).min(in_page as u64) as usize;
        // SAFETY: `within` is below the page size, so this stays in the page.
        Some((unsafe { base.add(within) }, in_region))
    }
}

impl Drop for UserMemory {
    fn drop(&mut self) {
        // SAFETY: pinned by `pin`, released once; verbs that drop an MR run
        // in process context.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}
