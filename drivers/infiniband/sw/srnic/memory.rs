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
use crate::kapi::rdma::{
    access::{LOCAL_WRITE, WRITING_ACCESS},
    Advice, Ah, Device, KernelMemory, MemoryRange, Miss, Mr, MrKind, Mw, MwType, OdpMemory, Qp,
    UserMemory, UserVerb,
};
use crate::kapi::shared::SharedRange;
use crate::kapi::sync::{cpu_relax, IrqsOff, SpinLockIrq};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::alloc::{flags::GFP_KERNEL, KVec};
use kernel::prelude::*;

/// What an MR maps.
enum MrMapping {
    /// Kernel virtual addresses, as they are.
    Dma(KernelMemory),
    /// Pinned user pages from `iova`.
    User { memory: UserMemory, iova: u64 },
    /// User pages from `iova`, paged in on demand.
    OnDemand { memory: OdpMemory, iova: u64 },
    /// Pages set by fast registration.
    FastReg {
        memory: KernelMemory,
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
    /// Whether the key works: fast-registration regions are valid between
    /// a REG_MR and the next invalidation.
    valid: AtomicBool,
    /// Memory windows bound to the region, or [`DEREGISTERING`] once
    /// deregistration has begun (no window binds any more).
    windows: AtomicU32,
    /// Whether the region is paged on demand (for life: re-registration
    /// keeps it so).
    on_demand: bool,
    /// Whether the region is one of fast registration (for life).
    fast_reg: bool,
    /// Copies into or out of the pages of a fast-registration region under
    /// way ([`Reached`]). An invalidation waits until they end: the kernel
    /// consumer frees those pages as soon as it completes, and waiting a
    /// grace period per invalidation would cost one per I/O.
    copies: AtomicU32,
    #[pin]
    state: SpinLockIrq<MrState>,
}

/// The error of a pin for writing that the process's mapping refused.
fn write_refused(err: Error) -> Error {
    if err == EFAULT {
        EACCES
    } else {
        err
    }
}

/// The windows count of a region being deregistered.
const DEREGISTERING: u32 = u32::MAX;

/// What a region grants and maps. Access and mapping change together,
/// under the lock, so a check and the copy it authorises always see one
/// registration.
struct MrState {
    access: u32,
    /// Changes with every re-registration: a [`Span`] checked under one
    /// generation translates under no other.
    generation: u32,
    mapping: MrMapping,
}

impl MrState {
    /// Bumps the generation: every span checked before is void.
    fn change(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }
}

impl MrMapping {
    /// Whether the memory may be written. Kernel memory is the kernel
    /// consumer's to grant; user memory only if it was pinned for writing.
    fn writable(&self) -> bool {
        match self {
            Self::Dma(_) | Self::FastReg { .. } => true,
            Self::User { memory, .. } => memory.writable(),
            Self::OnDemand { memory, .. } => memory.writable(),
        }
    }

    /// The region's first address and length.
    fn extent(&self) -> Option<(u64, u64)> {
        match self {
            Self::Dma(_) => None,
            Self::User { memory, iova } => Some((*iova, memory.length())),
            Self::OnDemand { memory, iova } => Some((*iova, memory.length())),
            Self::FastReg { iova, length, .. } => Some((*iova, *length)),
        }
    }
}

/// A range of a region that the region's current registration grants an
/// access to, from `offset` in it. Its bytes are reachable through
/// [`Span::translate`] only while that registration lasts.
#[derive(Clone, Copy)]
pub(crate) struct Span<'g> {
    pub(crate) mr: &'g Mr<SrnicDevice>,
    pub(crate) offset: u64,
    /// Where the access checked ends.
    end: u64,
    /// Whether the access writes.
    write: bool,
    generation: u32,
}

/// A range of an on-demand region to fault in from process context
/// ([`crate::qp::SrnicQp::want_fault`]) before an access to it is tried
/// again. It holds the registration: dropped only in process context or
/// inside the read-side section that found the region.
pub(crate) struct Fault {
    memory: OdpMemory,
    offset: u64,
    len: u64,
    write: bool,
}

impl Fault {
    /// Faults the range in. Process context.
    pub(crate) fn run(&self) -> Result {
        self.memory.fault(self.offset, self.len, self.write)
    }
}

/// Why a span's bytes cannot be reached.
pub(crate) enum Unreachable {
    /// An access error: outside the region, re-registered, or denied.
    Denied,
    /// Not present now: fault in, then try again.
    Absent(Fault),
}

impl<'g> Span<'g> {
    /// Checks that `key` still names `mr` (found by [`lookup_mr`]), that
    /// `[iova, iova + len)` lies in it and that it grants `access` (and,
    /// for writing, that its memory may be written).
    pub(crate) fn check(
        mr: &'g Mr<SrnicDevice>,
        key: u32,
        iova: u64,
        len: u32,
        access: u32,
    ) -> Option<Self> {
        let state = mr.state.lock();
        // Again under the lock: an invalidation or a re-registration that
        // completed since the lookup changed the generation read below,
        // and a span checked under it would reach the new registration.
        if !mr.is_named_by(key) {
            return None;
        }
        if state.access & access != access {
            return None;
        }
        if access & WRITING_ACCESS != 0 && !state.mapping.writable() {
            return None;
        }
        let offset = match state.mapping.extent() {
            // Kernel virtual addresses: the offset is the address.
            None => iova,
            Some((start, length)) => {
                let offset = iova.checked_sub(start)?;
                let end = offset.checked_add(u64::from(len))?;
                if end > length {
                    return None;
                }
                offset
            }
        };
        Some(Self {
            mr,
            offset,
            end: offset.saturating_add(u64::from(len)),
            write: access & WRITING_ACCESS != 0,
            generation: state.generation,
        })
    }

    /// The first part of the span not present now, if its region is
    /// paged on demand (a hint: pages may go at any time).
    pub(crate) fn first_absent(&self) -> Option<Fault> {
        let state = self.mr.state.lock();
        if state.generation != self.generation {
            return None;
        }
        let MrMapping::OnDemand { memory, .. } = &state.mapping else {
            return None;
        };
        let (offset, len) = memory.first_absent(
            self.offset,
            self.end.saturating_sub(self.offset),
            self.write,
        )?;
        Some(Fault {
            memory: memory.clone(),
            offset,
            len,
            write: self.write,
        })
    }

    /// The memory at byte `at` of the span, as far as it is contiguous;
    /// denied once the region was re-registered, absent if its page is
    /// paged on demand and not present. Usable while `guard` and the value
    /// returned live: pages go only after a grace period (deregistration,
    /// re-registration and the invalidation of on-demand pages wait for
    /// one) or, for fast registration, once the value is dropped.
    pub(crate) fn translate(
        &self,
        guard: &'g RcuReadGuard,
        at: u64,
    ) -> Result<Reached<'g>, Unreachable> {
        let offset = self.offset.checked_add(at).ok_or(Unreachable::Denied)?;
        // Off before the copy is counted, so that no softirq of this CPU
        // invalidates the region and waits for a copy it interrupted.
        let irqs = self.mr.fast_reg.then(IrqsOff::save);
        let state = self.mr.state.lock();
        if state.generation != self.generation {
            return Err(Unreachable::Denied);
        }
        if let MrMapping::OnDemand { memory, .. } = &state.mapping {
            return memory
                .bytes_at(guard, offset, self.write)
                .map_err(|miss| match miss {
                    Miss::Denied => Unreachable::Denied,
                    Miss::Absent => Unreachable::Absent(Fault {
                        memory: memory.clone(),
                        offset,
                        len: self.end.saturating_sub(offset).max(1),
                        write: self.write,
                    }),
                })
                .map(Reached::unheld);
        }
        let range = self
            .translate_pinned(guard, &state.mapping, offset)
            .ok_or(Unreachable::Denied)?;
        // Counted under the lock: an invalidation, which changes the
        // generation under it, sees every copy that got past the check.
        let hold = irqs.map(|irqs| {
            self.mr.copies.fetch_add(1, Ordering::Relaxed);
            CopyHold {
                mr: self.mr,
                _irqs: irqs,
            }
        });
        Ok(Reached { range, hold })
    }

    fn translate_pinned(
        &self,
        guard: &'g RcuReadGuard,
        mapping: &MrMapping,
        offset: u64,
    ) -> Option<SharedRange<'g>> {
        match mapping {
            // Kernel virtual addresses: the kernel consumer owns them.
            MrMapping::Dma(memory) => {
                memory.bytes_at(guard, offset, (PAGE_SIZE - offset % PAGE_SIZE) as usize)
            }
            MrMapping::User { memory, .. } => memory.bytes_at(guard, offset),
            MrMapping::OnDemand { .. } => None,
            MrMapping::FastReg {
                memory,
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
                memory.bytes_at(guard, page.checked_add(within)?, contiguous as usize)
            }
        }
    }
}

/// Bytes a [`Span`] translated to, reachable while the value lives. In a
/// fast-registration region they are a copy under way, which an
/// invalidation of the region waits for; interrupts stay off meanwhile.
/// Values taken together are dropped in the reverse order of their
/// making.
pub(crate) struct Reached<'g> {
    range: SharedRange<'g>,
    hold: Option<CopyHold<'g>>,
}

/// One copy under way in a fast-registration region.
struct CopyHold<'g> {
    mr: &'g Mr<SrnicDevice>,
    /// Restored after the count is given back (fields drop after `drop`).
    _irqs: IrqsOff,
}

impl Drop for CopyHold<'_> {
    fn drop(&mut self) {
        // Release: the copy's stores are done before an invalidation
        // that sees the count drop completes.
        self.mr.copies.fetch_sub(1, Ordering::Release);
    }
}

impl<'g> Reached<'g> {
    /// Bytes that no invalidation takes away (inline data, a packet, a
    /// kernel consumer's own memory).
    pub(crate) fn unheld(range: SharedRange<'g>) -> Self {
        Self { range, hold: None }
    }

    /// The bytes, for as long as this value is borrowed: the borrow
    /// checker keeps a range from outliving the hold.
    pub(crate) fn bytes(&self) -> SharedRange<'_> {
        self.range
    }

    /// Their number.
    pub(crate) fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the bytes are a copy under way in a fast-registration
    /// region: usable only while this value lives.
    pub(crate) fn is_held(&self) -> bool {
        self.hold.is_some()
    }

    /// The first `len` bytes, still held.
    pub(crate) fn first(self, len: usize) -> Option<Self> {
        let range = self.range.sub(0, len)?;
        Some(Self {
            range,
            hold: self.hold,
        })
    }
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
        let fast_reg = matches!(kind, MrKind::FastReg { .. });
        let valid = !fast_reg;
        let on_demand = matches!(kind, MrKind::OnDemand { .. });
        let mapping = match kind {
            MrKind::Dma { memory } => MrMapping::Dma(memory),
            MrKind::User { memory, iova } => MrMapping::User { memory, iova },
            MrKind::OnDemand { memory, iova } => MrMapping::OnDemand { memory, iova },
            MrKind::FastReg { max_pages, memory } => {
                if max_pages == 0 || max_pages > limits::MAX_FAST_REG_PAGES {
                    return Err(EINVAL);
                }
                let mut pages = KVec::new();
                pages.reserve(max_pages as usize, GFP_KERNEL)?;
                MrMapping::FastReg {
                    memory,
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
            valid: AtomicBool::new(valid),
            windows: AtomicU32::new(0),
            on_demand,
            fast_reg,
            copies: AtomicU32::new(0),
            state <- new_spinlock_irq!(MrState {
                access,
                generation: 0,
                mapping,
            }),
        }? Error))
    }

    pub(crate) fn publish(mr: &Mr<SrnicDevice>) -> Result<u32> {
        let dev = mr.device();
        dev.counts.mr.acquire(limits::MAX_MR)?;
        let index = dev
            .mrs
            .insert(mr)
            .inspect_err(|_| dev.counts.mr.release())?;
        let key = key_of(index, dev);
        mr.key.store(key, Ordering::Release);
        Ok(key)
    }

    /// Whether the region is paged on demand.
    pub(crate) fn on_demand(&self) -> bool {
        self.on_demand
    }

    pub(crate) fn access(&self) -> u32 {
        self.state.lock().access
    }

    /// Re-registers a user region: new memory, new access, or both. Access
    /// that writes needs pages pinned for writing: a region pinned
    /// read-only is pinned again, and if the process may not write its
    /// memory the re-registration fails with `EACCES`.
    ///
    /// The core serialises re-registrations of one region, so the mapping
    /// read here is still the region's when the new one replaces it.
    /// Returns the memory replaced, which the transport may still be
    /// reaching by address: the caller releases it after a grace period.
    pub(crate) fn rereg(
        &self,
        verb: &UserVerb<'_>,
        memory: Option<(UserMemory, u64)>,
        access: Option<u32>,
        relocate: Option<&dyn Fn()>,
    ) -> Result<Option<UserMemory>> {
        let (current_access, read_only_pin) = {
            let state = self.state.lock();
            let MrMapping::User { memory, iova } = &state.mapping else {
                // On-demand regions keep their registration (see the kapi).
                return Err(if matches!(state.mapping, MrMapping::OnDemand { .. }) {
                    crate::kapi::not_supported()
                } else {
                    EINVAL
                });
            };
            let read_only = (!memory.writable()).then(|| (memory.range(), *iova));
            (state.access, read_only)
        };
        let access = access.unwrap_or(current_access);
        let memory = match (memory, read_only_pin) {
            (Some(memory), _) => Some(memory),
            (None, Some((range, iova))) if access & WRITING_ACCESS != 0 => {
                let memory = range.pin(verb, access).map_err(write_refused)?;
                Some((memory, iova))
            }
            (None, _) => None,
        };
        if memory
            .as_ref()
            .is_some_and(|(memory, _)| access & WRITING_ACCESS != 0 && !memory.writable())
        {
            return Err(EACCES);
        }
        // Nothing fails from here on. A move to another PD happens while
        // the region's keys look up nothing: a QP of the old PD never
        // reaches the new registration, nor one of the new PD the old.
        if let Some(relocate) = relocate {
            self.valid.store(false, Ordering::Release);
            relocate();
        }
        let old = {
            let mut state = self.state.lock();
            state.access = access;
            state.change();
            memory.map(|(memory, iova)| {
                core::mem::replace(&mut state.mapping, MrMapping::User { memory, iova })
            })
        };
        if relocate.is_some() {
            self.valid.store(true, Ordering::Release);
        }
        // The transport reaches pages by address inside RCU read-side
        // sections: the old pages go back to the caller, which keeps them
        // pinned until those have ended (and unpins outside the lock).
        Ok(old.and_then(|old| match old {
            MrMapping::User { memory, .. } => Some(memory),
            _ => None,
        }))
    }

    pub(crate) fn map_pages(&self, new: &[u64], size: u32, start: u64, len: u64) -> Result {
        let mut state = self.state.lock();
        state.change();
        let MrMapping::FastReg {
            max_pages,
            pages,
            memory: _,
            page_size,
            iova,
            length,
        } = &mut state.mapping
        else {
            return Err(EINVAL);
        };
        if new.len() > *max_pages as usize {
            return Err(EINVAL);
        }
        crate::kapi::clear_copies(pages);
        // Capacity for `max_pages` was reserved at allocation.
        pages.extend_from_slice(new, kernel::alloc::flags::GFP_ATOMIC)?;
        *page_size = size;
        *iova = start;
        *length = len;
        Ok(())
    }

    /// Waits until the copies that reached the invalidated region have
    /// ended. Holders have interrupts off and take no lock that a caller
    /// of this holds while copying, so they end.
    fn wait_for_copies(&self) {
        while self.copies.load(Ordering::Acquire) != 0 {
            cpu_relax();
        }
    }

    /// Takes the region out of service; `EBUSY` while memory windows are
    /// bound to it (they would outlive it, and its index and key could come
    /// to name another process's region).
    pub(crate) fn destroy(mr: &Mr<SrnicDevice>) -> Result {
        mr.windows
            .compare_exchange(0, DEREGISTERING, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| EBUSY)?;
        let dev = mr.device();
        dev.mrs.remove(mr);
        dev.counts.mr.release();
        Ok(())
    }

    /// Counts a window bound to the region; fails once it is being
    /// deregistered.
    fn hold_for_window(&self) -> bool {
        self.windows
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < DEREGISTERING - 1).then_some(n + 1)
            })
            .is_ok()
    }

    /// Uncounts a window that no longer binds the region.
    fn release_for_window(&self) {
        let _ = self
            .windows
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != 0 && n != DEREGISTERING).then(|| n - 1)
            });
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
    mr.is_named_by(key).then_some(mr)
}

impl SrnicMr {
    /// Whether `key` names the region now: a stale key (an older
    /// registration under its index) does not, nor an invalidated one.
    fn is_named_by(&self, key: u32) -> bool {
        self.key.load(Ordering::Acquire) == key && self.valid.load(Ordering::Acquire)
    }
}

/// `ibv_advise_mr`: prefetches the ranges of regions of `pd` that are
/// paged on demand (pinned regions are resident already). A key that
/// names no region of `pd`, or a range outside its region or beyond the
/// access it grants (writing, for a prefetch for writing), is `EINVAL`.
/// Process context.
pub(crate) fn advise(
    dev: &Device<SrnicDevice>,
    pd: usize,
    advice: Advice,
    ranges: &[MemoryRange],
) -> Result {
    let write = advice == Advice::PrefetchWrite;
    for range in ranges {
        let on_demand = {
            let guard = RcuReadGuard::new();
            let mr = lookup_mr(dev, &guard, range.lkey).ok_or(EINVAL)?;
            if mr.pd_id() != pd {
                return Err(EINVAL);
            }
            let access = if write { LOCAL_WRITE } else { 0 };
            let span =
                Span::check(mr, range.lkey, range.addr, range.length, access).ok_or(EINVAL)?;
            let state = mr.state.lock();
            match &state.mapping {
                // A clone made inside the section that found the region:
                // dropped below, in process context.
                MrMapping::OnDemand { memory, .. } => Some((memory.clone(), span.offset)),
                _ => None,
            }
        };
        if let Some((memory, offset)) = on_demand {
            let fault = advice != Advice::PrefetchNoFault;
            memory.prefetch(offset, u64::from(range.length), write, fault)?;
        }
    }
    Ok(())
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
    let mut state = mr.state.lock();
    // A valid region is invalidated before it is registered again (as on
    // hardware): only then have the copies under its old key ended.
    if !matches!(state.mapping, MrMapping::FastReg { .. }) || mr.valid.load(Ordering::Acquire) {
        return Err(KeyError::NoRegion);
    }
    state.access = access;
    state.change();
    // Key and validity change under the lock, which `Span::check` holds
    // while it looks at them and the generation.
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
        let old = mw.binding.lock().take();
        release_binding(dev, guard, old);
        return Ok(());
    }
    let mr = lookup_mr(dev, guard, key).ok_or(KeyError::NoRegion)?;
    if mr.pd_id() != pd {
        return Err(KeyError::WrongPd);
    }
    {
        let mut state = mr.state.lock();
        // Again under the lock: a registration under a new key may have
        // come between the lookup and here, which this key must not end.
        if !matches!(state.mapping, MrMapping::FastReg { .. }) || !mr.is_named_by(key) {
            return Err(KeyError::NoRegion);
        }
        // Spans checked before the invalidation reach nothing after it,
        // and none is checked after it (see `Span::check`).
        state.change();
        mr.valid.store(false, Ordering::Release);
    }
    // The consumer may free the pages once this completes: copies that
    // reached them before the change end first. No copy is counted in
    // an invalid region, so the count only falls.
    mr.wait_for_copies();
    Ok(())
}

const PAGE_SIZE: u64 = kernel::page::PAGE_SIZE as u64;

impl SrnicMr {
    /// Whether `[iova, iova + len)` lies in the region.
    fn contains(&self, iova: u64, len: u64) -> bool {
        let state = self.state.lock();
        let Some((start, length)) = state.mapping.extent() else {
            return true;
        };
        iova.checked_sub(start)
            .and_then(|offset| offset.checked_add(len))
            .is_some_and(|end| end <= length)
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
    /// The region, looked up again at each access (an invalidated region
    /// takes the window's access with it). The binding is counted in the
    /// region, which cannot be deregistered while it lasts, so its index
    /// names no other region meanwhile.
    mr_key: u32,
    addr: u64,
    length: u64,
    access: u32,
    /// The QP a type 2 window is bound through, the only one it serves.
    qp_num: Option<u32>,
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
        let index = dev
            .mws
            .insert(mw)
            .inspect_err(|_| dev.counts.mw.release())?;
        let key = key_of(index, dev);
        mw.key.store(key, Ordering::Release);
        Ok(key)
    }

    pub(crate) fn destroy(mw: &Mw<SrnicDevice>) {
        let dev = mw.device();
        // Out of the table first: once no bind can reach the window, its
        // binding is final and its region may be released.
        dev.mws.remove(mw);
        let binding = mw.binding.lock().take();
        release_binding(dev, &RcuReadGuard::new(), binding);
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

/// Uncounts a window's binding in its region.
fn release_binding(dev: &Device<SrnicDevice>, guard: &RcuReadGuard, binding: Option<MwBinding>) {
    if let Some(binding) = binding {
        // The region is still in the table: the binding kept it there.
        if let Some(mr) = dev.mrs.get(guard, binding.mr_key >> 8) {
            mr.release_for_window();
        }
    }
}

use crate::kapi::rdma::access::{MW_BIND, NEEDS_LOCAL_WRITE};
use crate::kapi::rdma::rxe_abi::wqe::MwBind;

/// Executes a BIND_MW work request of QP `qp_num` in protection domain
/// `pd`: the window gets the new rkey and its view of the region (a
/// zero-length bind of a type 1 window unbinds it).
pub(crate) fn bind_window(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    pd: usize,
    qp_num: u32,
    request: &MwBind,
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
        let old = binding.take();
        mw.key.store(request.new_rkey, Ordering::Release);
        drop(binding);
        release_binding(dev, guard, old);
        return Ok(());
    }
    let mr = lookup_mr(dev, guard, request.mr_lkey).ok_or(KeyError::NoRegion)?;
    let mr_access = mr.access();
    if mr.pd_id() != pd || mr_access & MW_BIND == 0 {
        return Err(KeyError::WrongPd);
    }
    if request.access & NEEDS_LOCAL_WRITE != 0 && mr_access & LOCAL_WRITE == 0 {
        return Err(KeyError::WrongPd);
    }
    if !mr.contains(request.addr, request.length) {
        return Err(KeyError::NoRegion);
    }
    if !mr.hold_for_window() {
        // Being deregistered.
        return Err(KeyError::NoRegion);
    }
    let old = binding.replace(MwBinding {
        mr_key: request.mr_lkey,
        addr: request.addr,
        length: request.length,
        access: request.access,
        qp_num: (mw.mw_type == MwType::Type2).then_some(qp_num),
    });
    mw.key.store(request.new_rkey, Ordering::Release);
    drop(binding);
    release_binding(dev, guard, old);
    Ok(())
}

/// The region span behind remote key `rkey` for `[va, va + len)` with
/// `access`, seen from `qp`: a region's own key, or a window bound to one.
/// Both the window and the region are checked against the QP's PD at every
/// use.
pub(crate) fn remote_region<'g>(
    qp: &Qp<SrnicDevice>,
    guard: &'g RcuReadGuard,
    rkey: u32,
    va: u64,
    len: u32,
    access: u32,
) -> Option<Span<'g>> {
    let (dev, pd, qp_num) = (qp.device(), qp.pd_id(), qp.qp_num());
    if !is_window_key(rkey) {
        let mr = lookup_mr(dev, guard, rkey)?;
        if mr.pd_id() != pd {
            return None;
        }
        return Span::check(mr, rkey, va, len, access);
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
    if mr.pd_id() != pd {
        return None;
    }
    // The window writes through the region only while the region itself
    // may be written locally (as the bind required).
    let through = if access & WRITING_ACCESS != 0 {
        LOCAL_WRITE
    } else {
        0
    };
    Span::check(mr, binding.mr_key, va, len, through)
}

/// The first address of what remote key `rkey` names for `qp`: a
/// region's start (0 for a DMA region, whose addresses are the kernel's),
/// or a window's. A FLUSH of a whole region is checked as a zero-byte
/// span there, whatever the range its RETH names.
pub(crate) fn remote_start(qp: &Qp<SrnicDevice>, guard: &RcuReadGuard, rkey: u32) -> Option<u64> {
    let dev = qp.device();
    if is_window_key(rkey) {
        let mw = lookup_mw(dev, guard, rkey)?;
        let binding = (*mw.binding.lock())?;
        return Some(binding.addr);
    }
    let mr = lookup_mr(dev, guard, rkey)?;
    let state = mr.state.lock();
    Some(state.mapping.extent().map_or(0, |(start, _)| start))
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
        let number = dev
            .ahs
            .insert(ah)
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
            dev.ahs.remove(ah);
        }
        dev.counts.ah.release();
    }
}
