// SPDX-License-Identifier: GPL-2.0

//! Work requests of kernel callers: the core's singly linked chains of
//! `ib_send_wr` and `ib_recv_wr`, walked one WR at a time.

use super::device::Driver;
use super::objects::{Ah, Qp};
use crate::bindings;
use crate::pure::wr::QpType;
use kernel::prelude::*;

/// One kernel send WR of a chain.
///
/// # Invariants
///
/// `posted_to` is the QP whose `post_send` the chain came with.
pub struct SendWr<'a> {
    raw: &'a bindings::ib_send_wr,
    posted_to: *const bindings::ib_qp,
}

impl<'a> SendWr<'a> {
    /// The WR's `IB_WR_*` opcode.
    pub fn opcode(&self) -> u32 {
        self.raw.opcode
    }

    /// The WR's ID.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: both views of the union are 64 bits; the ID is opaque.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// The WR as the core wrote it, for the driver ABI's encoders.
    pub(crate) fn raw(&self) -> &'a bindings::ib_send_wr {
        self.raw
    }

    /// The WR's scatter/gather list.
    pub(crate) fn sges(&self) -> Result<&'a [bindings::ib_sge]> {
        let count = usize::try_from(self.raw.num_sge).map_err(|_| EINVAL)?;
        if count == 0 {
            return Ok(&[]);
        }
        if self.raw.sg_list.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: a kernel caller's WR points to `num_sge` SGEs valid for
        // the call.
        Ok(unsafe { core::slice::from_raw_parts(self.raw.sg_list, count) })
    }

    /// The address handle of the WR, if it was posted to `qp` and that is
    /// a UD or GSI QP; `None` otherwise or if it names none.
    pub fn ud_ah<T: Driver>(&self, qp: &Qp<T>) -> Option<&'a Ah<T>> {
        // Only the QP the WR was posted to says how the WR is laid out and
        // which driver its AH belongs to.
        if !core::ptr::eq(self.posted_to, qp.as_raw()) {
            return None;
        }
        if !matches!(qp.qp_type(), QpType::Ud | QpType::Gsi) {
            return None;
        }
        // SAFETY: WRs posted to a UD or GSI QP sit first in an `ib_ud_wr` (the core's contract with
        // kernel callers), and this one was posted to `qp` (type invariant, checked above); its AH
        // is one of `qp`'s device, so an `Ah<T>`, which the poster keeps alive for the call.
        unsafe {
            let ah = (*(self.raw as *const bindings::ib_send_wr).cast::<bindings::ib_ud_wr>()).ah;
            if ah.is_null() {
                None
            } else {
                Some(Ah::from_raw(ah))
            }
        }
    }
}

/// One kernel receive WR of a chain.
pub struct RecvWr<'a> {
    raw: &'a bindings::ib_recv_wr,
}

impl<'a> RecvWr<'a> {
    /// The WR as the core wrote it, for the driver ABI's encoders.
    pub(crate) fn raw(&self) -> &'a bindings::ib_recv_wr {
        self.raw
    }

    /// The WR's ID.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: both views of the union are 64 bits; the ID is opaque.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }
}

/// A WR type of the core's singly linked chains.
pub trait ChainedWr: Sized {
    /// How the driver sees one WR.
    type View<'a>
    where
        Self: 'a;

    /// The next WR of the chain, or NULL.
    fn next_wr(&self) -> *const Self;

    /// The driver's view of this WR, posted to `qp` (NULL: to an SRQ).
    fn view(&self, qp: *const bindings::ib_qp) -> Self::View<'_>;
}

impl ChainedWr for bindings::ib_send_wr {
    type View<'a> = SendWr<'a>;

    fn next_wr(&self) -> *const Self {
        self.next
    }

    fn view(&self, qp: *const bindings::ib_qp) -> SendWr<'_> {
        SendWr {
            raw: self,
            posted_to: qp,
        }
    }
}

impl ChainedWr for bindings::ib_recv_wr {
    type View<'a> = RecvWr<'a>;

    fn next_wr(&self) -> *const Self {
        self.next
    }

    fn view(&self, _qp: *const bindings::ib_qp) -> RecvWr<'_> {
        RecvWr { raw: self }
    }
}

/// A kernel caller's chain of WRs; remembers the last one handed out, which
/// is the one that failed if the driver stops with an error.
///
/// # Invariants
///
/// `next` is NULL or a WR of a chain (each link NULL or a WR) valid for
/// `'a`; `last` is NULL or one of its WRs; the chain was posted to
/// `posted_to` (NULL: to an SRQ).
pub struct Chain<'a, W: ChainedWr> {
    next: *const W,
    last: *const W,
    posted_to: *const bindings::ib_qp,
    _wrs: core::marker::PhantomData<&'a W>,
}

/// A chain of send WRs.
pub type SendChain<'a> = Chain<'a, bindings::ib_send_wr>;
/// A chain of receive WRs.
pub type RecvChain<'a> = Chain<'a, bindings::ib_recv_wr>;

impl<W: ChainedWr> Chain<'_, W> {
    /// # Safety
    ///
    /// `first` must be NULL or a valid chain for the lifetime, posted to
    /// `posted_to` (NULL for an SRQ's).
    pub(crate) unsafe fn new(first: *const W, posted_to: *const bindings::ib_qp) -> Self {
        Self {
            next: first,
            last: first,
            posted_to,
            _wrs: core::marker::PhantomData,
        }
    }

    pub(crate) fn failed_wr(&self) -> *const W {
        self.last
    }
}

impl<'a, W: ChainedWr + 'a> Iterator for Chain<'a, W> {
    type Item = W::View<'a>;

    fn next(&mut self) -> Option<W::View<'a>> {
        // SAFETY: NULL or a WR valid for `'a` (type invariant).
        let raw: &'a W = unsafe { self.next.as_ref() }?;
        self.last = self.next;
        self.next = raw.next_wr();
        Some(raw.view(self.posted_to))
    }
}
