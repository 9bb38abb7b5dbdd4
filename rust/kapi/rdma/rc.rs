// SPDX-License-Identifier: GPL-2.0

//! A reliable-connected QP for kernel ULPs: one peer, whole messages as
//! single SENDs (iblan's connected mode carries Ethernet frames of up to
//! 64 KiB on one), receive buffers of whole pages, and skbs sent from where
//! they lie, gathered, without a copy.
//!
//! It shares the PD, the CQ, the DMA mappings and the completion tokens of
//! [`super::consumer`]; its QP owns its CQ, as a [`super::consumer::UdQp`]
//! does, so every completion is of one of its own work requests.

use super::consumer::{Cq, CqHandler, DmaMapping, Pd, WorkCompletion, WR_KIND_MASK, WR_RECV};
use crate::bindings;
use crate::kapi::skb::SkBuff;
use crate::kapi::sync::SpinLockBh;
use core::cell::UnsafeCell;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::alloc::flags::{__GFP_NOWARN, __GFP_ZERO, GFP_ATOMIC};
use kernel::alloc::Flags;
use kernel::alloc::{KBox, KVVec, KVec};
use kernel::error::{from_err_ptr, to_result};
use kernel::ffi::c_int;
use kernel::page::{Page, PAGE_SIZE};
use kernel::prelude::*;

/// Work request identifiers beyond [`WR_RECV`] (`WR_RECV | i << 2`, a
/// receive into buffer `i`): `WR_SEND | s << 2`, the send of sequence
/// number `s`.
const WR_SEND: u64 = 2;

/// Send sequence numbers are counted modulo this (they fill an identifier
/// above its two kind bits).
const SEQ_MASK: u64 = u64::MAX >> 2;

/// The most gather elements of one send: an skb's linear part and 17 page
/// fragments (`MAX_SKB_FRAGS` as the kernel builds it by default). An skb
/// of more pieces (or more than the device takes) is linearized first.
pub const RC_MAX_SEND_SGE: usize = 18;

/// What an RC connection waits for and allows (IBTA encodings):
///
/// - `timeout` 14: a lost packet is retried after 4.096 µs × 2^14 ≈ 67 ms,
///   long enough for a software peer on a busy CPU, short enough for a
///   dead peer to be noticed within a second (7 retries);
/// - `retry_cnt` 7: the most transport retries the field holds, before the
///   send completes with an error and the QP goes to ERR;
/// - `rnr_retry` 7: a receiver whose buffers are all in use (its NAPI has
///   not reposted them yet) makes the sender wait and retry forever rather
///   than break the connection: the frame goes once a buffer is back;
/// - `min_rnr_timer` 12: such a receiver asks for 0.64 ms between retries,
///   about the time NAPI takes to hand a budget of frames on;
/// - `max_rd_atomic` 0 and `max_dest_rd_atomic` 1: SENDs only, no RDMA
///   READ or atomic is issued (nor granted: no remote access rights); the
///   responder keeps one resource, as some providers want at least one.
const POLICY: bindings::srnic_ulp_rc_policy = bindings::srnic_ulp_rc_policy {
    timeout: 14,
    retry_cnt: 7,
    rnr_retry: 7,
    min_rnr_timer: 12,
    max_rd_atomic: 0,
    max_dest_rd_atomic: 1,
};

/// PSNs and QP numbers are 24-bit.
const MASK_24: u32 = 0xff_ffff;

/// What an [`RcQp`] is made with.
#[derive(Clone, Copy, Debug)]
pub struct RcQpConfig {
    /// The port it is on.
    pub port: u32,
    /// Send and receive queue depths.
    pub depths: (u32, u32),
    /// Bytes each receive buffer takes at most (a whole message).
    pub recv_len: usize,
}

/// The peer of an [`RcQp`] and the way to it.
#[derive(Clone, Copy, Debug)]
pub struct RcPath {
    /// The GID index of the QP's port it sends from.
    pub sgid_index: u8,
    /// The peer's GID.
    pub dgid: [u8; 16],
    /// The hop limit of its packets.
    pub hop_limit: u8,
    /// The peer's QP number and the PSN its first send carries.
    pub dest_qpn: u32,
    /// See `dest_qpn`.
    pub dest_psn: u32,
    /// The path MTU in bytes (256 to 4096, a power of two): the port's
    /// active MTU as the caller learned it. Not queried here: a provider
    /// may take RTNL for the port's attributes, which a caller that
    /// connects from a work item RTNL waits for must not.
    pub mtu: u32,
}

/// A send slot of the ring: the skb of the send posted with sequence
/// number `seq`, and its `count` gather elements as the device took them,
/// the first the skb's linear part if `linear`, the others page fragments.
struct Slot {
    seq: u64,
    skb: Option<SkBuff>,
    count: usize,
    linear: bool,
    sges: [bindings::ib_sge; RC_MAX_SEND_SGE],
}

/// The sends in flight, in posting order.
///
/// # Invariants
///
/// The sends of sequence numbers `tail` up to `head` (modulo `SEQ_MASK +
/// 1`) were posted, at most `slots.len()` of them; the send of number `s`
/// sits in slot `s % slots.len()`, with `seq == s`, holding its skb until
/// its completion (or the QP's drop) takes it, and with it the skb's
/// mappings, which `count` and `sges` describe; every other slot holds no
/// skb.
struct SendRing {
    slots: KVVec<Slot>,
    head: u64,
    tail: u64,
}

impl SendRing {
    fn new(depth: u32) -> Result<Self> {
        let mut slots = KVVec::with_capacity(depth as usize, GFP_KERNEL)?;
        for _ in 0..depth {
            let slot = Slot {
                seq: 0,
                skb: None,
                count: 0,
                linear: false,
                sges: [bindings::ib_sge::default(); RC_MAX_SEND_SGE],
            };
            slots.push(slot, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            tail: 0,
        })
    }

    fn in_flight(&self) -> u64 {
        self.head.wrapping_sub(self.tail) & SEQ_MASK
    }

    fn room(&self) -> u64 {
        (self.slots.len() as u64).saturating_sub(self.in_flight())
    }

    fn slot(&mut self, seq: u64) -> Option<&mut Slot> {
        let index = seq.checked_rem(self.slots.len() as u64)?;
        self.slots.get_mut(usize::try_from(index).ok()?)
    }

    /// Takes the skb of the send of number `seq`, if it is in flight, with
    /// its mappings undone for `dev`; moves `tail` past the sends over.
    ///
    /// # Safety
    ///
    /// The device no longer reads that send's memory: its completion
    /// arrived, or the QP is destroyed.
    unsafe fn take(&mut self, dev: *mut bindings::ib_device, seq: u64) -> Option<SkBuff> {
        if seq.wrapping_sub(self.tail) & SEQ_MASK >= self.in_flight() {
            return None;
        }
        let slot = self.slot(seq)?;
        if slot.seq != seq {
            return None;
        }
        let skb = slot.skb.take()?;
        // SAFETY: the mappings of this send (type invariant), which the
        // device no longer uses (the caller's promise), undone once: the
        // slot gave up its skb.
        unsafe { slot.unmap(dev) };
        // Completions come in posting order on an RC QP, so this is the
        // tail; if a provider reorders them, the tail waits for the oldest.
        while self.tail != self.head {
            let tail = self.tail;
            if self.slot(tail).is_some_and(|slot| slot.skb.is_some()) {
                break;
            }
            self.tail = tail.wrapping_add(1) & SEQ_MASK;
        }
        Some(skb)
    }

    /// Gives up the skbs in flight without unmapping or freeing them: for
    /// a QP that could not be destroyed, whose device may still read them.
    fn leak(&mut self) {
        for slot in self.slots.iter_mut() {
            if let Some(skb) = slot.skb.take() {
                let _ = skb.into_raw();
            }
        }
    }
}

impl Slot {
    /// Maps the pieces of `skb` for `dev` into this slot: its linear part,
    /// then each page fragment, at most `max` of them. `EINVAL` if there
    /// are more; `ENOMEM` if one could not be mapped (the others are
    /// undone then).
    fn map(
        &mut self,
        dev: *mut bindings::ib_device,
        skb: &SkBuff,
        lkey: u32,
        max: usize,
    ) -> Result {
        let frags = skb.page_frag_count().ok_or(EINVAL)?;
        let data = skb.data();
        let linear_len = u32::try_from(data.len()).map_err(|_| EINVAL)?;
        self.count = 0;
        self.linear = linear_len > 0;
        if usize::from(self.linear) + frags as usize > max.min(RC_MAX_SEND_SGE) {
            return Err(EINVAL);
        }
        if self.linear {
            self.push(lkey, || {
                // SAFETY: the skb's linear data, which stays put until the
                // slot gives the skb up after unmapping it.
                let addr = unsafe {
                    bindings::srnic_ulp_dma_map(
                        dev,
                        data.as_ptr().cast_mut().cast(),
                        data.len(),
                        true,
                    )
                };
                (addr, linear_len)
            })?;
        }
        for i in 0..frags {
            let mapped = self.push(lkey, || {
                let mut len = 0u32;
                // SAFETY: fragment `i` of the skb, which holds its page until
                // the slot gives the skb up, unmapped; `len` is written only.
                let addr =
                    unsafe { bindings::srnic_ulp_dma_map_skb_frag(dev, skb.as_raw(), i, &mut len) };
                (addr, len)
            });
            if let Err(err) = mapped {
                // SAFETY: the pieces mapped above, unused by the device:
                // nothing was posted.
                unsafe { self.unmap(dev) };
                return Err(err);
            }
        }
        Ok(())
    }

    /// Maps the next piece with `map`, which returns its address (0 if the
    /// mapping failed) and length, into the next gather element.
    fn push(&mut self, lkey: u32, map: impl FnOnce() -> (u64, u32)) -> Result {
        // Room first: a mapping made is always recorded, to be undone.
        let sge = self.sges.get_mut(self.count).ok_or(EINVAL)?;
        let (addr, length) = map();
        if addr == 0 {
            return Err(ENOMEM);
        }
        *sge = bindings::ib_sge { addr, length, lkey };
        self.count += 1;
        Ok(())
    }

    /// Undoes the mappings of the slot.
    ///
    /// # Safety
    ///
    /// They are the slot's live mappings for `dev`, which the device no
    /// longer uses.
    unsafe fn unmap(&mut self, dev: *mut bindings::ib_device) {
        let count = core::mem::take(&mut self.count);
        for (i, sge) in self.sges.iter().take(count).enumerate() {
            let (addr, len) = (sge.addr, sge.length as usize);
            // SAFETY: mapped by `map`, as a single mapping (the linear part)
            // or a page's, to the device; per the caller, unused now.
            unsafe {
                if i == 0 && self.linear {
                    bindings::srnic_ulp_dma_unmap(dev, addr, len, true)
                } else {
                    bindings::srnic_ulp_dma_unmap_page(dev, addr, len, true)
                }
            };
        }
    }
}

/// A page of a receive buffer with its mapping (undone first: declared
/// first).
struct RecvPage {
    map: DmaMapping,
    page: Page,
}

impl RecvPage {
    /// A zeroed page, mapped for `pd`'s device to write.
    ///
    /// # Safety
    ///
    /// The device writes the page only while a receive that points at it
    /// is posted.
    unsafe fn new(pd: &Pd, flags: Flags) -> Result<Self> {
        let page = Page::alloc_page(flags | __GFP_ZERO)?;
        // SAFETY: the page is freed after the mapping (declared after it);
        // the device uses it as the caller promises.
        let map = unsafe { DmaMapping::page(pd, &page, false)? };
        Ok(Self { map, page })
    }

    /// The first `len` bytes of the page (at most all).
    ///
    /// # Safety
    ///
    /// The device does not write them while the slice lives, and they
    /// were handed to the CPU since it last did.
    unsafe fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: a page this value owns (allocated zeroed, so every byte
        // is initialised), in the linear map (no highmem: shims.c); the
        // kernel crate's `struct page` is the one our bindings declare.
        let base = unsafe { bindings::srnic_page_address(self.page.as_ptr().cast()) };
        // SAFETY: `len` is within the page, which lives as long as `self`;
        // per the caller nothing writes it meanwhile.
        unsafe { core::slice::from_raw_parts(base.cast::<u8>(), len.min(PAGE_SIZE)) }
    }
}

/// The fewest bytes of a received page that [`RcReceived::hand_over`]
/// hands to the stack in the page itself; fewer are copied. A page given
/// up is charged whole to the socket that receives it, so a short piece
/// in a page of its own would fill receive buffers many times faster than
/// its bytes do (and cost a page's allocation and clearing besides).
pub const HAND_OVER_MIN: usize = PAGE_SIZE / 2;

/// A receive buffer's pages and the gather list that covers the first
/// `recv_len` bytes of them, element `i` over page `i`.
struct RecvPages {
    pages: KVec<RecvPage>,
    sges: KVec<bindings::ib_sge>,
}

impl RecvPages {
    /// Each page with how many of the first `len` bytes lie in it, for the
    /// pages those bytes reach.
    fn spans(&self, len: usize) -> impl Iterator<Item = (&RecvPage, usize)> {
        self.pages.iter().scan(len, |left, page| {
            let here = (*left).min(PAGE_SIZE);
            *left -= here;
            (here > 0).then_some((page, here))
        })
    }
}

/// A receive buffer: its pages, and whether a receive into it is posted.
///
/// # Invariants
///
/// `pages` changes only while the buffer is neither posted nor read, by
/// its owner: the [`RcReceived`] of its completed receive (which hands
/// pages to the stack and puts fresh ones in their place).
struct RecvBuffer {
    pages: UnsafeCell<RecvPages>,
    posted: AtomicBool,
}

impl RecvBuffer {
    /// `len` bytes in whole zeroed pages mapped for `pd`'s device.
    ///
    /// # Safety
    ///
    /// Owned by an [`RcQp`] of `pd`, which destroys its QP before its
    /// buffers go and reads a buffer only between its receive's completion
    /// and its next post.
    unsafe fn new(pd: &Pd, len: usize) -> Result<Self> {
        let count = len.div_ceil(PAGE_SIZE);
        let mut pages = KVec::with_capacity(count, GFP_KERNEL)?;
        let mut sges = KVec::with_capacity(count, GFP_KERNEL)?;
        for i in 0..count {
            // SAFETY: the caller's promise on the buffer is the page's.
            let page = unsafe { RecvPage::new(pd, GFP_KERNEL)? };
            let in_page = len.saturating_sub(i * PAGE_SIZE);
            sges.push(page.map.sge(in_page, pd.local_dma_lkey()).raw(), GFP_KERNEL)?;
            pages.push(page, GFP_KERNEL)?;
        }
        Ok(Self {
            pages: UnsafeCell::new(RecvPages { pages, sges }),
            posted: AtomicBool::new(false),
        })
    }

    /// The buffer's pages.
    ///
    /// # Safety
    ///
    /// No [`Self::pages_mut`] of the buffer runs or lives meanwhile: the
    /// caller owns the buffer (its receive completed, or it is being
    /// posted), or it is posted and only its gather list is read.
    unsafe fn pages(&self) -> &RecvPages {
        // SAFETY: no mutable reference exists meanwhile (the caller's
        // promise and the type invariant).
        unsafe { &*self.pages.get() }
    }

    /// The buffer's pages, to replace some.
    ///
    /// # Safety
    ///
    /// The caller owns the buffer (its receive completed and it is not
    /// posted again), and no other reference to its pages lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn pages_mut(&self) -> &mut RecvPages {
        // SAFETY: the only reference (the caller's promise).
        unsafe { &mut *self.pages.get() }
    }

    /// The first `len` bytes of `buffer`, page by page.
    ///
    /// # Safety
    ///
    /// As for [`RecvPage::bytes`], for each of them, and as for
    /// [`Self::pages`] while the pieces live.
    unsafe fn pieces(buffer: Option<&Self>, len: usize) -> impl Iterator<Item = &[u8]> {
        buffer
            .into_iter()
            // SAFETY: the caller's promise.
            .flat_map(move |buffer| unsafe { buffer.pages() }.spans(len))
            .map(|(page, here)| {
                // SAFETY: the caller's promise.
                unsafe { page.bytes(here) }
            })
    }
}

/// An RC QP with its own CQ and receive buffers, for one peer: SENDs of
/// whole skbs, receives of whole messages into lists of pages.
///
/// # Invariants
///
/// `raw` is an RC QP that `new` created on `parts.pd` with `parts.cq` (of
/// no other QP) for its sends and receives, owned by this value and
/// destroyed first by `drop`, before the skbs of `send` and then `parts`
/// go (which `drop` leaks with a QP it could not destroy).
///
/// Every WR on it was posted here: a receive into `parts.recv[i]` with the
/// identifier `WR_RECV | i << 2`, a send of an skb with `WR_SEND | s << 2`,
/// `s` its sequence number in `send` (see [`SendRing`]). Receive buffer `i`
/// is posted once while its `posted` flag is set, or owned by one
/// [`RcReceived`] (or by nobody: lost until the QP goes); the CPU reads it
/// only through that [`RcReceived`].
pub struct RcQp<H: CqHandler> {
    raw: NonNull<bindings::ib_qp>,
    port: u32,
    first_psn: u32,
    /// Gather elements a send may have (at most [`RC_MAX_SEND_SGE`]).
    max_send_sge: usize,
    send: Pin<KBox<SpinLockBh<SendRing>>>,
    parts: ManuallyDrop<Parts<H>>,
}

/// What the QP of an [`RcQp`] uses, dropped after it is destroyed, in this
/// order: the receive buffers, the CQ, and what the QP was made with.
struct Parts<H: CqHandler> {
    recv: KVec<RecvBuffer>,
    cq: Cq<H>,
    pd: Pd,
}

// SAFETY: the core's QPs may be posted to and destroyed from any thread;
// the send ring is behind its lock, and receive buffers are shared as the
// type invariant says.
unsafe impl<H: CqHandler> Send for RcQp<H> {}
// SAFETY: posting is serialised by the provider (receives) and the ring's
// lock (sends); the buffers as above.
unsafe impl<H: CqHandler> Sync for RcQp<H> {}

impl<H: CqHandler> RcQp<H> {
    /// Creates an RC QP on `pd` with a CQ of its own (send and receive, on
    /// completion vector `vector`, events to `handler`), moves it to INIT
    /// on `config.port` (no remote access rights: SENDs only), and posts
    /// every receive buffer. `EINVAL` for an empty queue or buffer, or a
    /// buffer of more pages than the device takes gather elements.
    /// Process context.
    pub fn new(
        pd: &Pd,
        vector: u32,
        handler: H,
        config: &RcQpConfig,
        caller: &'static CStr,
    ) -> Result<Self> {
        let (send_depth, recv_depth) = config.depths;
        let pages = config.recv_len.div_ceil(PAGE_SIZE);
        let (device_send_sge, device_recv_sge) = pd.device().max_sge();
        let send_sge = RC_MAX_SEND_SGE.min(device_send_sge as usize);
        if send_depth == 0 || recv_depth == 0 || pages == 0 || send_sge == 0 {
            return Err(EINVAL);
        }
        if pages > device_recv_sge as usize {
            return Err(EINVAL);
        }
        let entries = send_depth.checked_add(recv_depth).ok_or(EINVAL)?;
        let cq = Cq::new(pd, entries, vector, handler, caller)?;
        let send = KBox::pin_init(
            new_spinlock_bh!(SendRing::new(send_depth)?, "srnic_rc_send"),
            GFP_KERNEL,
        )?;
        let mut recv = KVec::with_capacity(recv_depth as usize, GFP_KERNEL)?;
        for _ in 0..recv_depth {
            // SAFETY: owned by the QP made below, which destroys its QP
            // before its buffers drop and posts and reads them as its
            // invariant says.
            let buffer = unsafe { RecvBuffer::new(pd, config.recv_len)? };
            recv.push(buffer, GFP_KERNEL)?;
        }
        let (mut granted_send, mut granted_recv) = (send_sge as u32, pages as u32);
        // SAFETY: a live PD and a CQ of its device, which outlive the QP
        // (`parts`, dropped after `drop` destroys it); the caps are written
        // back only.
        let raw = from_err_ptr(unsafe {
            bindings::srnic_ulp_create_rc_qp(
                pd.as_raw(),
                cq.as_raw(),
                send_depth,
                recv_depth,
                &mut granted_send,
                &mut granted_recv,
                caller.as_char_ptr(),
            )
        })?;
        let qp = Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            port: config.port,
            // SAFETY: takes no arguments; any context.
            first_psn: unsafe { kernel::bindings::get_random_u32() } & MASK_24,
            max_send_sge: send_sge.min(granted_send as usize),
            send,
            parts: ManuallyDrop::new(Parts {
                recv,
                cq,
                pd: pd.clone(),
            }),
        };
        // A provider that granted fewer receive elements than asked for
        // would fail every receive post.
        if (granted_recv as usize) < pages {
            return Err(EINVAL);
        }
        // SAFETY: the QP was just created, in RESET.
        to_result(unsafe { bindings::srnic_ulp_rc_qp_init(qp.raw.as_ptr(), qp.port) })?;
        for index in 0..qp.parts.recv.len() {
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

    /// The PSN of this side's first send: random, 24 bits, chosen in
    /// [`Self::new`].
    pub fn first_psn(&self) -> u32 {
        self.first_psn
    }

    /// INIT to RTR to RTS, to the peer on `path`, with its MTU and the
    /// retry policy of `POLICY`. `EINVAL` for a QP number or PSN beyond 24
    /// bits, or an MTU that is not an IB MTU. Process context (the core resolves
    /// the peer's MAC address: it may sleep).
    pub fn connect(&self, path: &RcPath) -> Result {
        if path.dest_qpn > MASK_24 || path.dest_psn > MASK_24 {
            return Err(EINVAL);
        }
        let path_mtu = match path.mtu {
            256 => bindings::ib_mtu_IB_MTU_256,
            512 => bindings::ib_mtu_IB_MTU_512,
            1024 => bindings::ib_mtu_IB_MTU_1024,
            2048 => bindings::ib_mtu_IB_MTU_2048,
            4096 => bindings::ib_mtu_IB_MTU_4096,
            _ => return Err(EINVAL),
        };
        // SAFETY: a live QP (type invariant); the GID and the policy are
        // read during the call.
        to_result(unsafe {
            bindings::srnic_ulp_rc_qp_connect(
                self.raw.as_ptr(),
                self.port,
                path.sgid_index,
                path.dgid.as_ptr(),
                path.hop_limit,
                path.dest_qpn,
                path.dest_psn,
                self.first_psn,
                path_mtu,
                &POLICY,
            )
        })
    }

    /// The CQ: its handler, arming and moderation.
    pub fn cq(&self) -> &Cq<H> {
        &self.parts.cq
    }

    /// Sends the whole skb as one signalled SEND: its linear part and each
    /// page fragment mapped for the device and gathered, without a copy;
    /// an skb with a frag_list, or more pieces than the QP's send elements,
    /// is linearized first. The skb is unmapped and freed when its send
    /// completes (or is flushed, or the QP is dropped). Gives the skb back
    /// with the error if it cannot be posted: `ENOSPC` when the send queue
    /// is full (the caller stops its queue and retries after completions),
    /// `ENOMEM` if it could not be linearized or mapped, the provider's
    /// error if the post failed (`EINVAL` before [`Self::connect`]).
    ///
    /// The skb's control block is left alone. Any context with interrupts
    /// enabled (ndo_start_xmit, BH off, included); the CQ's handler must
    /// not poll the QP from within a post (a provider that completes
    /// inline calls it then), as NAPI does not.
    pub fn send_skb(&self, skb: SkBuff) -> core::result::Result<(), (SkBuff, Error)> {
        let mut skb = skb;
        let fits = skb.page_frag_count().is_some_and(|frags| {
            usize::from(!skb.data().is_empty()) + frags as usize <= self.max_send_sge
        });
        if !fits {
            if let Err(err) = skb.linearize() {
                return Err((skb, err));
            }
        }
        let dev = self.parts.pd.device().as_raw();
        let lkey = self.parts.pd.local_dma_lkey();
        let mut ring = self.send.lock();
        if ring.room() == 0 {
            return Err((skb, ENOSPC));
        }
        let seq = ring.head;
        let Some(slot) = ring.slot(seq) else {
            return Err((skb, EINVAL));
        };
        // An skb still here breaks the ring's invariant: never post over it.
        if slot.skb.is_some() {
            return Err((skb, EINVAL));
        }
        if let Err(err) = slot.map(dev, &skb, lkey, self.max_send_sge) {
            return Err((skb, err));
        }
        let wr_id = WR_SEND | seq << 2;
        // The elements are read during the call (the provider copies the
        // WR); the mappings stay until the completion of this identifier (or
        // the QP's drop) takes the skb from the slot.
        // SAFETY: a live QP (type invariant); elements of live mappings.
        let posted = to_result(unsafe {
            bindings::srnic_ulp_post_send_sges(
                self.raw.as_ptr(),
                wr_id,
                slot.sges.as_ptr(),
                slot.count as c_int,
            )
        });
        if let Err(err) = posted {
            // SAFETY: mapped just above and not posted.
            unsafe { slot.unmap(dev) };
            return Err((skb, err));
        }
        slot.seq = seq;
        slot.skb = Some(skb);
        ring.head = seq.wrapping_add(1) & SEQ_MASK;
        Ok(())
    }

    /// Free send queue entries now.
    pub fn send_room(&self) -> u32 {
        u32::try_from(self.send.lock().room()).unwrap_or(u32::MAX)
    }

    /// Polls up to `out.len()` completions of its CQ; returns how many were
    /// written (at the start of `out`).
    pub fn poll<'q>(&'q self, out: &mut [WorkCompletion<'q>]) -> usize {
        self.parts.cq.poll(out)
    }

    /// What `wc`, polled from this QP, gives back. A send's skb is freed
    /// here (as consumed if it was sent, else as dropped).
    pub fn complete<'q>(&'q self, wc: WorkCompletion<'q>) -> RcCompletion<'q, H> {
        if !wc.of_qp(self.raw.as_ptr()) {
            return RcCompletion::Foreign;
        }
        let ok = wc.ok();
        let id = wc.wr_id();
        match id & WR_KIND_MASK {
            WR_RECV => {
                let index = usize::try_from(id >> 2).unwrap_or(usize::MAX);
                let Some(buffer) = self.parts.recv.get(index) else {
                    return RcCompletion::Foreign;
                };
                // A buffer not posted has no receive to complete.
                if !buffer.posted.swap(false, Ordering::AcqRel) {
                    return RcCompletion::Foreign;
                }
                let mut len = 0;
                if ok {
                    // Only what the device wrote comes over (from a bounce
                    // buffer, or out of stale cache lines).
                    // SAFETY: the completion made this caller the buffer's
                    // owner (it cleared `posted`); nothing else reads it.
                    let pages = unsafe { buffer.pages() };
                    for (page, here) in pages.spans(wc.byte_len()) {
                        len += page.map.for_cpu(here);
                    }
                }
                RcCompletion::Received(RcReceived {
                    qp: self,
                    index,
                    len,
                    ok,
                    handed: false,
                })
            }
            WR_SEND => {
                let dev = self.parts.pd.device().as_raw();
                // SAFETY: the send's completion arrived: the device is done
                // with its memory.
                let skb = unsafe { self.send.lock().take(dev, id >> 2) };
                match skb {
                    Some(skb) if ok => skb.consume(),
                    Some(skb) => drop(skb),
                    None => return RcCompletion::Foreign,
                }
                RcCompletion::Sent(ok)
            }
            _ => RcCompletion::Foreign,
        }
    }

    /// Moves the QP to ERR: every posted WR completes, flushed.
    pub fn flush(&self) -> Result {
        // SAFETY: a live QP.
        to_result(unsafe { bindings::srnic_ulp_qp_to_error(self.raw.as_ptr()) })
    }

    /// Posts receive buffer `index`.
    ///
    /// # Safety
    ///
    /// The buffer is not posted, and nothing reads it from now until its
    /// receive completes (its [`RcReceived`] is given up, if it had one).
    unsafe fn post_recv(&self, index: usize) -> Result {
        let buffer = self.parts.recv.get(index).ok_or(EINVAL)?;
        // SAFETY: the caller owns the buffer until the provider takes the
        // receive below, the borrow's last use; nothing replaces its pages
        // until that receive completes (type invariant of `RecvBuffer`).
        let sges = unsafe { &buffer.pages().sges };
        let count = c_int::try_from(sges.len()).map_err(|_| EINVAL)?;
        buffer.posted.store(true, Ordering::Release);
        let wr_id = WR_RECV | (index as u64) << 2;
        // SAFETY: a live QP; the elements cover the buffer's live mappings,
        // which the device may write (the caller's promise) until the
        // completion; they are read during the call.
        let posted = to_result(unsafe {
            bindings::srnic_ulp_post_recv_sges(self.raw.as_ptr(), wr_id, sges.as_ptr(), count)
        });
        if posted.is_err() {
            buffer.posted.store(false, Ordering::Release);
        }
        posted
    }
}

impl<H: CqHandler> Drop for RcQp<H> {
    fn drop(&mut self) {
        // SAFETY: ours (type invariant); no post runs concurrently with
        // drop.
        let destroyed =
            unsafe { bindings::ib_destroy_qp_user(self.raw.as_ptr(), core::ptr::null_mut()) };
        let mut ring = self.send.lock();
        if destroyed != 0 {
            // The provider may still use the memory of its WRs and the CQ:
            // all of it stays, mapped, for good.
            ring.leak();
            drop(ring);
            pr_warn!(
                "srnic: an RC QP could not be destroyed ({destroyed}): its memory is leaked\n"
            );
            return;
        }
        let dev = self.parts.pd.device().as_raw();
        let (mut seq, head) = (ring.tail, ring.head);
        while seq != head {
            // SAFETY: the QP is destroyed: the device reads none of the
            // memory of its sends.
            drop(unsafe { ring.take(dev, seq) });
            seq = seq.wrapping_add(1) & SEQ_MASK;
        }
        drop(ring);
        // SAFETY: dropped once, here, after the QP that used the buffers and
        // the CQ is destroyed; not used after (this is the value's drop).
        unsafe { ManuallyDrop::drop(&mut self.parts) };
    }
}

/// What a completion of an [`RcQp`] gave back.
pub enum RcCompletion<'q, H: CqHandler> {
    /// A receive buffer with the message that arrived in it.
    Received(RcReceived<'q, H>),
    /// An skb's send completed (`true`) or failed or was flushed (`false`):
    /// the skb is freed either way.
    Sent(bool),
    /// Of no WR of this QP.
    Foreign,
}

/// A receive buffer of an [`RcQp`] whose receive completed: it is not
/// posted until [`Self::repost`]; dropped instead, it is posted no more.
pub struct RcReceived<'q, H: CqHandler> {
    qp: &'q RcQp<H>,
    index: usize,
    /// Bytes the device wrote, handed to the CPU (0 if it failed).
    len: usize,
    ok: bool,
    /// Whether [`Self::hand_over`] ran: pages of the message may have
    /// gone to the stack, so none of it is read here any more.
    handed: bool,
}

impl<H: CqHandler> RcReceived<'_, H> {
    /// Whether the receive succeeded; flushed and failed ones did not (a
    /// flushed buffer reposted completes flushed again: drop it instead).
    pub fn ok(&self) -> bool {
        self.ok
    }

    /// Bytes of the message (0 if the receive failed).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The message, piece by piece in order (the buffer is a list of
    /// pages).
    /// Nothing once [`Self::hand_over`] ran (the pages in the buffer are
    /// fresh ones then).
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> {
        // Its pages were replaced if `handed`: none of the message is left.
        let len = if self.handed { 0 } else { self.len };
        let buffer = self.qp.parts.recv.get(self.index);
        // SAFETY: ours, unposted (QP invariant), borrowed by the slices;
        // `complete` handed these `len` bytes to the CPU.
        unsafe { RecvBuffer::pieces(buffer, len) }
    }

    /// Appends the message from byte `from` on to `skb` as page fragments,
    /// without copying it: each page of the buffer that holds at least
    /// [`HAND_OVER_MIN`] of those bytes goes to the skb as it is, unmapped,
    /// and a fresh page mapped for the device takes its place for the next
    /// receive. The bytes of other pages, and of a page that cannot be
    /// replaced (no memory at once: this runs in atomic context), are
    /// copied. Returns how many pages went over and how many were copied
    /// for want of a fresh page;
    /// `EMSGSIZE` if the skb has no room for the fragments (what was
    /// appended stays appended). Once only: afterwards [`Self::pieces`] is
    /// empty and this fails with `EINVAL`.
    pub fn hand_over(&mut self, skb: &mut SkBuff, from: usize) -> Result<(u32, u32)> {
        if core::mem::replace(&mut self.handed, true) {
            return Err(EINVAL);
        }
        let Some(buffer) = self.qp.parts.recv.get(self.index) else {
            return Err(EINVAL);
        };
        let pd = &self.qp.parts.pd;
        let lkey = pd.local_dma_lkey();
        // SAFETY: this value owns the buffer, unposted (type invariant of
        // the QP); `&mut self` excludes the pieces, the only other
        // references to it.
        let pages = unsafe { buffer.pages_mut() };
        let (mut given, mut copied) = (0, 0);
        let mut left = self.len;
        for index in 0..pages.pages.len() {
            let here = left.min(PAGE_SIZE);
            if here == 0 {
                break;
            }
            left -= here;
            let offset = from.saturating_sub(index * PAGE_SIZE).min(here);
            if offset == here {
                continue;
            }
            if skb.frags_full() {
                return Err(Error::from_errno(-(bindings::EMSGSIZE as c_int)));
            }
            let (Some(page), Some(sge)) = (pages.pages.get_mut(index), pages.sges.get_mut(index))
            else {
                return Err(EINVAL);
            };
            let short = here - offset < HAND_OVER_MIN;
            let fresh = if short {
                None
            } else {
                // SAFETY: the fresh page goes into this buffer, which the
                // device writes only while a receive into it is posted.
                unsafe { RecvPage::new(pd, GFP_ATOMIC | __GFP_NOWARN) }.ok()
            };
            match fresh {
                Some(fresh) => {
                    *sge = fresh.map.sge(sge.length as usize, lkey).raw();
                    let RecvPage { map, page } = core::mem::replace(page, fresh);
                    // Unmapped before the stack reads it (for the CPU
                    // since the completion).
                    drop(map);
                    skb.give_page(page, offset, here - offset)
                        .map_err(|(_, err)| err)?;
                    given += 1;
                }
                None => {
                    // SAFETY: this value owns the buffer (above), whose
                    // first `len` bytes the completion handed to the CPU;
                    // this page was not replaced.
                    let bytes = unsafe { page.bytes(here) };
                    skb.append_copy(bytes.get(offset..).unwrap_or(&[]))?;
                    if !short {
                        copied += 1;
                    }
                }
            }
        }
        Ok((given, copied))
    }

    /// Posts the buffer again, for the next message.
    pub fn repost(self) -> Result {
        if let Some(buffer) = self.qp.parts.recv.get(self.index) {
            // What the CPU read, or cached, goes back to the device.
            // SAFETY: this value owns the buffer, unposted; no piece of it
            // lives (`self` is taken by value, the pieces borrow it).
            for (page, here) in unsafe { buffer.pages() }.spans(self.len) {
                page.map.for_device(here);
            }
        }
        // SAFETY: this value owns the buffer, unposted (type invariant of
        // the QP), and gives it up here: no slice of it outlives `self`.
        unsafe { self.qp.post_recv(self.index) }
    }
}
