// SPDX-License-Identifier: GPL-2.0

//! Memory regions, memory windows and address handles: the objects the
//! transport finds by key or number on every packet.
//!
//! A key is `index << 8 | key byte`: the index finds the object in the
//! device's table in constant time, and the key byte, which changes with
//! every registration, makes a stale key miss.

use crate::device::{limits, SrnicDevice};
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::verbs::AddressVector;
use crate::kapi::rdma::{Ah, Device, Mr, MrKind, Mw, MwType, UserMemory};
use crate::kapi::sync::SpinLockIrq;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KVec};
use kernel::prelude::*;

/// What an MR maps.
enum MrMapping {
    /// Kernel virtual addresses, as they are.
    Dma,
    /// Pinned user pages from `iova`.
    User { memory: UserMemory, iova: u64 },
    /// Pages set by fast registration.
    FastReg {
        max_pages: u32,
        pages: KVec<u64>,
        page_size: u32,
        iova: u64,
        length: u64,
    },
}

/// Driver data of an MR.
#[pin_data]
pub(crate) struct SrnicMr {
    key: AtomicU32,
    access: AtomicU32,
    /// Whether the key works: fast-registration regions are valid between
    /// a REG_MR and the next invalidation.
    valid: AtomicBool,
    #[pin]
    mapping: SpinLockIrq<MrMapping>,
}

fn key_of(index: u32, dev: &Device<SrnicDevice>) -> u32 {
    (index << 8) | (dev.key_byte.fetch_add(1, Ordering::Relaxed) & 0xff)
}

impl SrnicMr {
    pub(crate) fn create(
        _dev: &Device<SrnicDevice>,
        kind: MrKind,
        access: u32,
    ) -> Result<impl PinInit<Self, Error>> {
        let valid = !matches!(kind, MrKind::FastReg { .. });
        let mapping = match kind {
            MrKind::Dma => MrMapping::Dma,
            MrKind::User { memory, iova } => MrMapping::User { memory, iova },
            MrKind::FastReg { max_pages } => {
                if max_pages == 0 || max_pages > limits::MAX_FAST_REG_PAGES {
                    return Err(EINVAL);
                }
                let mut pages = KVec::new();
                pages.reserve(max_pages as usize, GFP_KERNEL)?;
                MrMapping::FastReg {
                    max_pages,
                    pages,
                    page_size: 0,
                    iova: 0,
                    length: 0,
                }
            }
        };
        Ok(try_pin_init!(Self {
            key: AtomicU32::new(0),
            access: AtomicU32::new(access),
            valid: AtomicBool::new(valid),
            mapping <- new_spinlock_irq!(mapping),
        }? Error))
    }

    pub(crate) fn publish(mr: &Mr<SrnicDevice>) -> Result<u32> {
        let dev = mr.device();
        dev.counts.mr.acquire(limits::MAX_MR)?;
        // SAFETY: the MR stays in the table until `destroy` removes it,
        // which waits for lookups to end before the MR is freed.
        let index = unsafe { dev.mrs.insert(NonNull::from(mr)) }
            .inspect_err(|_| dev.counts.mr.release())?;
        let key = key_of(index, dev);
        mr.key.store(key, Ordering::Release);
        Ok(key)
    }

    pub(crate) fn access(&self) -> u32 {
        self.access.load(Ordering::Acquire)
    }

    pub(crate) fn rereg(&self, memory: Option<(UserMemory, u64)>, access: Option<u32>) -> Result {
        let old = if let Some((memory, iova)) = memory {
            let mut mapping = self.mapping.lock();
            if !matches!(*mapping, MrMapping::User { .. }) {
                return Err(EINVAL);
            }
            Some(core::mem::replace(
                &mut *mapping,
                MrMapping::User { memory, iova },
            ))
        } else {
            None
        };
        // The transport reaches pages by address inside RCU read-side
        // sections; the old pages stay pinned until those have ended, and
        // are unpinned outside the lock (it may sleep).
        if old.is_some() {
            crate::kapi::rcu::synchronize();
        }
        drop(old);
        if let Some(access) = access {
            self.access.store(access, Ordering::Release);
        }
        Ok(())
    }

    pub(crate) fn map_pages(&self, new: &[u64], size: u32, start: u64, len: u64) -> Result {
        let mut mapping = self.mapping.lock();
        let MrMapping::FastReg {
            max_pages,
            pages,
            page_size,
            iova,
            length,
        } = &mut *mapping
        else {
            return Err(EINVAL);
        };
        if new.len() > *max_pages as usize {
            return Err(EINVAL);
        }
        // SAFETY: page addresses are plain integers with nothing to drop.
        unsafe { pages.set_len(0) };
        // Capacity for `max_pages` was reserved at allocation.
        pages.extend_from_slice(new, kernel::alloc::flags::GFP_ATOMIC)?;
        *page_size = size;
        *iova = start;
        *length = len;
        Ok(())
    }

    pub(crate) fn destroy(mr: &Mr<SrnicDevice>) {
        let dev = mr.device();
        dev.mrs.remove(mr.key.load(Ordering::Acquire) >> 8);
        dev.counts.mr.release();
    }
}

/// The MR `key` names, valid while `guard` lives: constant time (one
/// table load) and safe against a concurrent deregistration, which removes
/// the MR and waits for every read-side section before freeing it.
pub(crate) fn lookup_mr<'g>(
    dev: &Device<SrnicDevice>,
    guard: &'g RcuReadGuard,
    key: u32,
) -> Option<&'g Mr<SrnicDevice>> {
    let mr = dev.mrs.get(guard, key >> 8)?;
    // A stale key (an older registration under this index) misses, and so
    // does an invalidated one.
    (mr.key.load(Ordering::Acquire) == key && mr.valid.load(Ordering::Acquire)).then_some(mr)
}

/// Why a fast registration or an invalidation is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// No such region, or not one this operation applies to.
    NoRegion,
    /// The region belongs to another protection domain.
    WrongPd,
}

/// Executes a REG_MR work request: `key` (the region's index with a new
/// key byte, see `ib_update_fast_reg_key`) becomes valid with `access`.
pub(crate) fn fast_register(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    pd: usize,
    key: u32,
    access: u32,
) -> core::result::Result<(), KeyError> {
    let mr = dev.mrs.get(guard, key >> 8).ok_or(KeyError::NoRegion)?;
    if mr.pd_id() != pd {
        return Err(KeyError::WrongPd);
    }
    if !matches!(*mr.mapping.lock(), MrMapping::FastReg { .. }) {
        return Err(KeyError::NoRegion);
    }
    mr.access.store(access, Ordering::Release);
    mr.key.store(key, Ordering::Release);
    mr.valid.store(true, Ordering::Release);
    Ok(())
}

/// Invalidates the fast-registration region `key` names (LOCAL_INV, or
/// SEND_WITH_INV from the peer).
pub(crate) fn invalidate(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    pd: usize,
    key: u32,
) -> core::result::Result<(), KeyError> {
    let mr = lookup_mr(dev, guard, key).ok_or(KeyError::NoRegion)?;
    if mr.pd_id() != pd {
        return Err(KeyError::WrongPd);
    }
    if !matches!(*mr.mapping.lock(), MrMapping::FastReg { .. }) {
        return Err(KeyError::NoRegion);
    }
    mr.valid.store(false, Ordering::Release);
    Ok(())
}

const PAGE_SIZE: u64 = crate::bindings::SRNIC_PAGE_SIZE as u64;

impl SrnicMr {
    /// Whether `[iova, iova + len)` lies in the region and the region
    /// grants `access`; the offset of `iova` in it if so.
    pub(crate) fn check_range(&self, iova: u64, len: u32, access: u32) -> Option<u64> {
        if self.access() & access != access {
            return None;
        }
        let mapping = self.mapping.lock();
        let (start, length) = match &*mapping {
            MrMapping::Dma => return Some(iova),
            MrMapping::User { memory, iova } => (*iova, memory.length()),
            MrMapping::FastReg { iova, length, .. } => (*iova, *length),
        };
        let offset = iova.checked_sub(start)?;
        let end = offset.checked_add(u64::from(len))?;
        (end <= length).then_some(offset)
    }

    /// The kernel address of byte `offset` of the region (as
    /// [`Self::check_range`] gives it) and how many bytes follow it
    /// contiguously. The address is usable while `_guard` lives: pages go
    /// only after a grace period (deregistration and reregistration wait
    /// for one).
    pub(crate) fn translate(&self, _guard: &RcuReadGuard, offset: u64) -> Option<(*mut u8, usize)> {
        let mapping = self.mapping.lock();
        match &*mapping {
            // Kernel virtual addresses: the kernel consumer owns them.
            MrMapping::Dma => Some((
                offset as usize as *mut u8,
                (PAGE_SIZE - offset % PAGE_SIZE) as usize,
            )),
            MrMapping::User { memory, .. } => memory.address(offset),
            MrMapping::FastReg {
                pages,
                page_size,
                iova,
                length,
                ..
            } => {
                if offset >= *length || *page_size == 0 {
                    return None;
                }
                let page_size = u64::from(*page_size);
                let absolute = offset.checked_add(iova % page_size)?;
                let page = *pages.get(usize::try_from(absolute / page_size).ok()?)?;
                let within = absolute % page_size;
                let contiguous = (page_size - within).min(length - offset);
                Some((
                    page.checked_add(within)? as usize as *mut u8,
                    contiguous as usize,
                ))
            }
        }
    }
}

/// Driver data of an MW.
pub(crate) struct SrnicMw {
    key: AtomicU32,
}

impl SrnicMw {
    pub(crate) fn create(_dev: &Device<SrnicDevice>, _mw_type: MwType) -> Result<Self> {
        Ok(Self {
            key: AtomicU32::new(0),
        })
    }

    pub(crate) fn publish(mw: &Mw<SrnicDevice>) -> Result<u32> {
        let dev = mw.device();
        dev.counts.mw.acquire(limits::MAX_MW)?;
        // SAFETY: removed in `destroy`, which waits for lookups to end.
        let index = unsafe { dev.mws.insert(NonNull::from(mw)) }
            .inspect_err(|_| dev.counts.mw.release())?;
        let key = key_of(index, dev);
        mw.key.store(key, Ordering::Release);
        Ok(key)
    }

    pub(crate) fn destroy(mw: &Mw<SrnicDevice>) {
        let dev = mw.device();
        dev.mws.remove(mw.key.load(Ordering::Acquire) >> 8);
        dev.counts.mw.release();
    }
}

/// Driver data of an AH.
pub(crate) struct SrnicAh {
    av: AddressVector,
    number: AtomicU32,
    user: bool,
}

impl SrnicAh {
    pub(crate) fn create(
        _dev: &Device<SrnicDevice>,
        av: &AddressVector,
        user: bool,
    ) -> Result<Self> {
        Ok(Self {
            av: *av,
            number: AtomicU32::new(0),
            user,
        })
    }

    /// User AHs get a number user WQEs name them by; kernel WRs carry the
    /// AH itself, so kernel AHs stay out of the table (and their
    /// destruction, which may not sleep, need not wait for lookups).
    pub(crate) fn publish(ah: &Ah<SrnicDevice>) -> Result<u32> {
        let dev = ah.device();
        dev.counts.ah.acquire(limits::MAX_AH)?;
        if !ah.user {
            return Ok(0);
        }
        // SAFETY: removed in `destroy`, which waits for lookups to end.
        let number = unsafe { dev.ahs.insert(NonNull::from(ah)) }
            .inspect_err(|_| dev.counts.ah.release())?;
        ah.number.store(number, Ordering::Release);
        Ok(number)
    }

    pub(crate) fn number(&self) -> u32 {
        self.number.load(Ordering::Acquire)
    }

    pub(crate) fn av(&self) -> AddressVector {
        self.av
    }

    pub(crate) fn destroy(ah: &Ah<SrnicDevice>) {
        let dev = ah.device();
        // Only user AHs are in the table, and the core destroys those in
        // process context.
        if ah.user {
            dev.ahs.remove(ah.number());
        }
        dev.counts.ah.release();
    }
}
