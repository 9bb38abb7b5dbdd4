// SPDX-License-Identifier: GPL-2.0

//! Memory regions, memory windows and address handles: the objects the
//! transport finds by key or number on every packet.
//!
//! A key is `index << 8 | key byte`: the index finds the object in the
//! device's table in constant time, and the key byte, which changes with
//! every registration, makes a stale key miss.

use crate::device::{limits, SrnicDevice, FIRST_MW_INDEX};
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
    if is_window_key(key) {
        let mw = lookup_mw(dev, guard, key).ok_or(KeyError::NoRegion)?;
        if mw.pd_id() != pd {
            return Err(KeyError::WrongPd);
        }
        // Type 1 windows are unbound by a zero-length bind, not
        // invalidated.
        if mw.mw_type != MwType::Type2 {
            return Err(KeyError::NoRegion);
        }
        *mw.binding.lock() = None;
        return Ok(());
    }
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

    /// Whether `[iova, iova + len)` lies in the region.
    pub(crate) fn contains(&self, iova: u64, len: u64) -> bool {
        let mapping = self.mapping.lock();
        let (start, length) = match &*mapping {
            MrMapping::Dma => return true,
            MrMapping::User { memory, iova } => (*iova, memory.length()),
            MrMapping::FastReg { iova, length, .. } => (*iova, *length),
        };
        iova.checked_sub(start)
            .and_then(|offset| offset.checked_add(len))
            .is_some_and(|end| end <= length)
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
#[pin_data]
pub(crate) struct SrnicMw {
    key: AtomicU32,
    mw_type: MwType,
    /// What the window grants, while bound.
    #[pin]
    binding: SpinLockIrq<Option<MwBinding>>,
}

/// A window's view of a region.
#[derive(Clone, Copy)]
struct MwBinding {
    /// The region (looked up again at each access: a region that went
    /// away takes the window's access with it).
    mr_key: u32,
    addr: u64,
    length: u64,
    access: u32,
    /// The QP a type 2 window is bound through, the only one it serves.
    qp_num: Option<u32>,
}

/// A BIND_MW work request.
pub(crate) struct BindRequest {
    pub(crate) mw_rkey: u32,
    pub(crate) new_rkey: u32,
    pub(crate) mr_lkey: u32,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: u32,
}

impl SrnicMw {
    pub(crate) fn create(
        _dev: &Device<SrnicDevice>,
        mw_type: MwType,
    ) -> Result<impl PinInit<Self, Error>> {
        Ok(try_pin_init!(Self {
            key: AtomicU32::new(0),
            mw_type,
            binding <- new_spinlock_irq!(None),
        }? Error))
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

fn lookup_mw<'g>(
    dev: &Device<SrnicDevice>,
    guard: &'g RcuReadGuard,
    key: u32,
) -> Option<&'g Mw<SrnicDevice>> {
    let mw = dev.mws.get(guard, key >> 8)?;
    (mw.key.load(Ordering::Acquire) == key).then_some(mw)
}

/// Whether `key` names a window rather than a region.
fn is_window_key(key: u32) -> bool {
    (key >> 8) >= FIRST_MW_INDEX
}

const MW_BIND: u32 = crate::bindings::ib_access_flags_IB_ACCESS_MW_BIND;
const LOCAL_WRITE: u32 = crate::bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
const NEEDS_LOCAL_WRITE: u32 = crate::bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | crate::bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;

/// Executes a BIND_MW work request of QP `qp_num` in protection domain
/// `pd`: the window gets the new rkey and its view of the region (a
/// zero-length bind of a type 1 window unbinds it).
pub(crate) fn bind_window(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    pd: usize,
    qp_num: u32,
    request: &BindRequest,
) -> core::result::Result<(), KeyError> {
    let mw = lookup_mw(dev, guard, request.mw_rkey).ok_or(KeyError::NoRegion)?;
    if mw.pd_id() != pd || request.new_rkey >> 8 != request.mw_rkey >> 8 {
        return Err(KeyError::WrongPd);
    }
    let mut binding = mw.binding.lock();
    if mw.mw_type == MwType::Type2 && binding.is_some() {
        // A type 2 window is invalidated before it is bound again.
        return Err(KeyError::NoRegion);
    }
    if request.length == 0 && mw.mw_type == MwType::Type1 {
        *binding = None;
        mw.key.store(request.new_rkey, Ordering::Release);
        return Ok(());
    }
    let mr = lookup_mr(dev, guard, request.mr_lkey).ok_or(KeyError::NoRegion)?;
    if mr.pd_id() != pd || mr.access() & MW_BIND == 0 {
        return Err(KeyError::WrongPd);
    }
    if request.access & NEEDS_LOCAL_WRITE != 0 && mr.access() & LOCAL_WRITE == 0 {
        return Err(KeyError::WrongPd);
    }
    if !mr.contains(request.addr, request.length) {
        return Err(KeyError::NoRegion);
    }
    *binding = Some(MwBinding {
        mr_key: request.mr_lkey,
        addr: request.addr,
        length: request.length,
        access: request.access,
        qp_num: (mw.mw_type == MwType::Type2).then_some(qp_num),
    });
    mw.key.store(request.new_rkey, Ordering::Release);
    Ok(())
}

/// The region and offset behind remote key `rkey` for `[va, va + len)`
/// with `access`, seen from QP `qp_num` in `pd`: a region's own key, or a
/// window bound to one.
pub(crate) fn remote_region<'g>(
    dev: &Device<SrnicDevice>,
    guard: &'g RcuReadGuard,
    pd: usize,
    qp_num: u32,
    rkey: u32,
    va: u64,
    len: u32,
    access: u32,
) -> Option<(&'g Mr<SrnicDevice>, u64)> {
    if !is_window_key(rkey) {
        let mr = lookup_mr(dev, guard, rkey)?;
        if mr.pd_id() != pd {
            return None;
        }
        return Some((mr, mr.check_range(va, len, access)?));
    }
    let mw = lookup_mw(dev, guard, rkey)?;
    if mw.pd_id() != pd {
        return None;
    }
    let binding = (*mw.binding.lock())?;
    if binding.access & access != access || binding.qp_num.is_some_and(|n| n != qp_num) {
        return None;
    }
    let offset = va.checked_sub(binding.addr)?;
    if offset.checked_add(u64::from(len))? > binding.length {
        return None;
    }
    let mr = lookup_mr(dev, guard, binding.mr_key)?;
    Some((mr, mr.check_range(va, len, 0)?))
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
