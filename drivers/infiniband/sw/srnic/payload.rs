// SPDX-License-Identifier: GPL-2.0

//! Message bytes in memory: where a payload comes from or goes to (the
//! scatter/gather list of a WQE, inline data, or a range of a region named
//! by a remote key), and the one copy that moves it, page by page, straight
//! from source memory to destination memory.
//!
//! Every local key is looked up, and checked against the QP's protection
//! domain, access and range, at the moment its bytes are touched, under
//! the caller's RCU read-side section: a region deregistered meanwhile
//! simply fails the copy.

use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::rxe_abi::queue::Queue;
use crate::kapi::rdma::rxe_abi::wqe::{self, Sge};
use crate::kapi::rdma::{Device, KernelMemory};
use crate::kapi::shared::SharedRange;
use crate::memory::{lookup_mr, Span};

pub(crate) use crate::kapi::rdma::access::LOCAL_WRITE;

/// The key that means "kernel virtual address" to kernel consumers
/// (`local_dma_lkey`); never valid for a user QP.
const LOCAL_DMA_LKEY: u32 = 0;

/// A scatter/gather list.
#[derive(Clone, Copy)]
pub(crate) enum SgeList<'a> {
    /// In a send WQE of a kernel-owned work ring.
    Work {
        queue: &'a Queue,
        index: u32,
        count: u32,
    },
    /// Already copied out of its ring.
    Copied(&'a [Sge]),
}

impl SgeList<'_> {
    fn get(&self, n: u32) -> Option<Sge> {
        match self {
            Self::Work {
                queue,
                index,
                count,
            } => (n < *count)
                .then(|| wqe::send_sge(queue, *index, n).ok())
                .flatten(),
            Self::Copied(list) => list.get(n as usize).copied(),
        }
    }
}

/// Where the bytes of a message are, counted from the message's start.
#[derive(Clone, Copy)]
pub(crate) enum Extent<'a> {
    /// The SGEs of a local WQE, keys of `dev` checked against the QP's
    /// `pd`.
    Local {
        dev: &'a Device<SrnicDevice>,
        sges: SgeList<'a>,
        pd: usize,
        /// A kernel QP's word on its memory, with which it may use the
        /// local DMA key.
        kernel: Option<KernelMemory>,
    },
    /// Bytes in hand: inline data in a kernel-owned work ring, a received
    /// packet, or a local buffer.
    Inline(SharedRange<'a>),
    /// A checked range of a region.
    Region(Span<'a>),
}

/// Which side of a copy failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyError {
    /// The source could not be read (a local protection error if it is
    /// the requester's).
    Source,
    /// The destination could not be written.
    Destination,
}

/// The first `want` bytes of `range`, or all of it if it is shorter.
fn at_most<'g>(range: SharedRange<'g>, want: usize) -> Option<SharedRange<'g>> {
    range.sub(0, want.min(range.len()))
}

impl<'a> Extent<'a> {
    /// The contiguous memory at byte `at` of the extent, at most `want`
    /// bytes; `access` is what a local key must grant.
    fn chunk<'g>(
        &self,
        guard: &'g RcuReadGuard,
        at: u64,
        want: usize,
        access: u32,
    ) -> Option<SharedRange<'g>>
    where
        'a: 'g,
    {
        match self {
            Self::Inline(data) => {
                let at = usize::try_from(at).ok()?;
                let left = data.len().checked_sub(at).filter(|l| *l > 0)?;
                data.sub(at, want.min(left))
            }
            Self::Region(span) => at_most(span.translate(guard, at)?, want),
            Self::Local {
                dev,
                sges,
                pd,
                kernel,
            } => {
                let mut start = 0u64;
                let mut n = 0;
                let sge = loop {
                    let sge = sges.get(n)?;
                    let end = start + u64::from(sge.length());
                    if at < end {
                        break sge;
                    }
                    start = end;
                    n += 1;
                };
                let within = at - start;
                let left = u64::from(sge.length()) - within;
                let addr = sge.addr().checked_add(within)?;
                if sge.lkey() == LOCAL_DMA_LKEY {
                    // A kernel virtual address, owned by the kernel consumer.
                    let n = usize::try_from(left).ok()?.min(want);
                    return kernel.as_ref()?.bytes_at(guard, addr, n);
                }
                let mr = lookup_mr(dev, guard, sge.lkey())?;
                if mr.pd_id() != *pd {
                    return None;
                }
                let left32 = u32::try_from(left).ok()?;
                let span = Span::check(mr, addr, left32, access)?;
                at_most(span.translate(guard, 0)?, want.min(left as usize))
            }
        }
    }
}

/// Copies `len` bytes from byte `src_at` of `src` to byte `dst_at` of
/// `dst`: the only time these bytes are touched.
pub(crate) fn copy(
    guard: &RcuReadGuard,
    src: &Extent<'_>,
    src_at: u64,
    dst: &Extent<'_>,
    dst_at: u64,
    len: u32,
) -> Result<(), CopyError> {
    let mut done = 0u64;
    let len = u64::from(len);
    while done < len {
        let want = (len - done) as usize;
        let from = src
            .chunk(guard, src_at + done, want, 0)
            .ok_or(CopyError::Source)?;
        let to = dst
            .chunk(guard, dst_at + done, from.len(), LOCAL_WRITE)
            .ok_or(CopyError::Destination)?;
        let step = to.len();
        if step == 0 {
            return Err(CopyError::Destination);
        }
        // Either side may be pages a process writes meanwhile, and they may
        // overlap (one region read and written): `copy_from` is a move
        // that allows both. `to` is no longer than `from`.
        let from = from.sub(0, step).ok_or(CopyError::Source)?;
        to.copy_from(&from).map_err(|_| CopyError::Destination)?;
        done += step as u64;
    }
    Ok(())
}

/// Calls `f` with each contiguous piece of bytes `at..at + len` of `src`
/// in order (each within one page for page-backed memory), without
/// touching them; stops at the first error `f` returns.
pub(crate) fn for_each_piece<'g, E>(
    guard: &'g RcuReadGuard,
    src: &Extent<'g>,
    at: u64,
    len: u32,
    mut f: impl FnMut(SharedRange<'g>) -> Result<(), E>,
) -> Result<(), PieceError<E>> {
    let mut done = 0u64;
    let len = u64::from(len);
    while done < len {
        let want = (len - done) as usize;
        let from = src
            .chunk(guard, at + done, want, 0)
            .ok_or(PieceError::Source)?;
        let n = from.len();
        if n == 0 {
            return Err(PieceError::Source);
        }
        f(from).map_err(PieceError::Piece)?;
        done += n as u64;
    }
    Ok(())
}

/// Why [`for_each_piece`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PieceError<E> {
    /// The source could not be read.
    Source,
    /// The callback said so.
    Piece(E),
}

/// Writes `bytes` (an atomic's original value) to the start of `dst`.
pub(crate) fn store(guard: &RcuReadGuard, dst: &Extent<'_>, bytes: &[u8]) -> Result<(), CopyError> {
    let src = Extent::Inline(SharedRange::from_slice(bytes));
    copy(guard, &src, 0, dst, 0, bytes.len() as u32)
}
