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
use crate::memory::{lookup_mr, Fault, Reached, Span, Unreachable};

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
    /// Bytes in hand in several pieces, end to end: a received packet's
    /// payload in the linear part of its skb and its page fragments.
    Pieces(&'a [SharedRange<'a>]),
    /// A checked range of a region.
    Region(Span<'a>),
}

/// Which side of a copy failed.
pub(crate) enum CopyError {
    /// The source could not be read (a local protection error if it is
    /// the requester's).
    Source,
    /// The destination could not be written.
    Destination,
    /// A page of either side is paged on demand and not present: nothing
    /// is lost, the copy is tried again once it is faulted in.
    Absent(Fault),
}

/// The first `want` bytes of `range`, or all of it if it is shorter.
fn at_most(range: Reached<'_>, want: usize) -> Option<Reached<'_>> {
    let len = want.min(range.len());
    range.first(len)
}

/// Where byte `at` of a local extent is.
enum LocalPiece<'g> {
    /// Kernel memory (the local DMA key).
    Kernel(SharedRange<'g>),
    /// A checked span of the region an SGE names, and how much of it is
    /// wanted.
    Region(Span<'g>, usize),
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
    ) -> Result<Reached<'g>, Unreachable>
    where
        'a: 'g,
    {
        let (span, at, want) = match self {
            Self::Inline(data) => {
                let at = usize::try_from(at).map_err(|_| Unreachable::Denied)?;
                let left = data.len().checked_sub(at).filter(|l| *l > 0);
                let left = left.ok_or(Unreachable::Denied)?;
                let range = data.sub(at, want.min(left)).ok_or(Unreachable::Denied)?;
                return Ok(Reached::unheld(range));
            }
            Self::Pieces(pieces) => {
                let mut at = usize::try_from(at).map_err(|_| Unreachable::Denied)?;
                for piece in pieces.iter() {
                    match at.checked_sub(piece.len()) {
                        Some(after) => at = after,
                        None => {
                            let left = piece.len() - at;
                            let range = piece.sub(at, want.min(left));
                            return range.map(Reached::unheld).ok_or(Unreachable::Denied);
                        }
                    }
                }
                return Err(Unreachable::Denied);
            }
            Self::Region(span) => (*span, at, want),
            Self::Local { .. } => match self.local(guard, at, want, access) {
                Some(LocalPiece::Kernel(range)) => return Ok(Reached::unheld(range)),
                Some(LocalPiece::Region(span, want)) => (span, 0, want),
                None => return Err(Unreachable::Denied),
            },
        };
        at_most(span.translate(guard, at)?, want).ok_or(Unreachable::Denied)
    }

    /// Byte `at` of a local extent, at most `want` bytes of it, its key
    /// checked for `access`.
    fn local<'g>(
        &self,
        guard: &'g RcuReadGuard,
        at: u64,
        want: usize,
        access: u32,
    ) -> Option<LocalPiece<'g>>
    where
        'a: 'g,
    {
        let Self::Local {
            dev,
            sges,
            pd,
            kernel,
        } = self
        else {
            return None;
        };
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
            return kernel
                .as_ref()?
                .bytes_at(guard, addr, n)
                .map(LocalPiece::Kernel);
        }
        let mr = lookup_mr(dev, guard, sge.lkey())?;
        if mr.pd_id() != *pd {
            return None;
        }
        let left32 = u32::try_from(left).ok()?;
        let span = Span::check(mr, sge.lkey(), addr, left32, access)?;
        Some(LocalPiece::Region(span, want.min(left as usize)))
    }
}

/// The first part of the first `len` bytes of a local extent that lies
/// in a region paged on demand and is not present now (writable, if
/// `access` writes): what to fault in before a message starts, so that
/// its packets find their pages. Keys that do not check out are left to
/// the copy, which reports them.
pub(crate) fn first_absent(
    guard: &RcuReadGuard,
    extent: &Extent<'_>,
    len: u32,
    access: u32,
) -> Option<Fault> {
    let Extent::Local { dev, sges, pd, .. } = extent else {
        return None;
    };
    let mut left = len;
    let mut n = 0;
    while left > 0 {
        let sge = sges.get(n)?;
        n += 1;
        let here = sge.length().min(left);
        left -= here;
        if sge.lkey() == LOCAL_DMA_LKEY || here == 0 {
            continue;
        }
        let Some(mr) = lookup_mr(dev, guard, sge.lkey()) else {
            continue;
        };
        if !mr.on_demand() || mr.pd_id() != *pd {
            continue;
        }
        let fault = Span::check(mr, sge.lkey(), sge.addr(), here, access)
            .and_then(|span| span.first_absent());
        if fault.is_some() {
            return fault;
        }
    }
    None
}

/// The error of one side of a copy.
fn side_error(unreachable: Unreachable, side: CopyError) -> CopyError {
    match unreachable {
        Unreachable::Denied => side,
        Unreachable::Absent(fault) => CopyError::Absent(fault),
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
            .map_err(|e| side_error(e, CopyError::Source))?;
        let to = dst
            .chunk(guard, dst_at + done, from.len(), LOCAL_WRITE)
            .map_err(|e| side_error(e, CopyError::Destination))?;
        let step = to.len();
        if step == 0 {
            return Err(CopyError::Destination);
        }
        // Either side may be pages a process writes meanwhile, and they may
        // overlap (one region read and written): `copy_from` is a move
        // that allows both. `to` is no longer than `from`.
        let piece = from.bytes().sub(0, step).ok_or(CopyError::Source)?;
        to.bytes()
            .copy_from(&piece)
            .map_err(|_| CopyError::Destination)?;
        done += step as u64;
        // In the reverse order of their making (see `Reached`).
        drop(to);
        drop(from);
    }
    Ok(())
}

/// Calls `f` with each contiguous piece of bytes `at..at + len` of `src`
/// in order (each within one page for page-backed memory), without
/// touching them; stops at the first error `f` returns. A piece is
/// reachable only while `f` runs (see [`Reached`]).
pub(crate) fn for_each_piece<'g, E>(
    guard: &'g RcuReadGuard,
    src: &Extent<'g>,
    at: u64,
    len: u32,
    mut f: impl FnMut(&Reached<'g>) -> Result<(), E>,
) -> Result<(), PieceError<E>> {
    let mut done = 0u64;
    let len = u64::from(len);
    while done < len {
        let want = (len - done) as usize;
        let from = src.chunk(guard, at + done, want, 0).map_err(|e| match e {
            Unreachable::Denied => PieceError::Source,
            Unreachable::Absent(fault) => PieceError::Absent(fault),
        })?;
        let n = from.len();
        if n == 0 {
            return Err(PieceError::Source);
        }
        f(&from).map_err(PieceError::Piece)?;
        done += n as u64;
    }
    Ok(())
}

/// Why [`for_each_piece`] stopped.
pub(crate) enum PieceError<E> {
    /// The source could not be read.
    Source,
    /// A page of the source is paged on demand and not present.
    Absent(Fault),
    /// The callback said so.
    Piece(E),
}

/// Writes `bytes` (an atomic's original value) to the start of `dst`.
pub(crate) fn store(guard: &RcuReadGuard, dst: &Extent<'_>, bytes: &[u8]) -> Result<(), CopyError> {
    let src = Extent::Inline(SharedRange::from_slice(bytes));
    copy(guard, &src, 0, dst, 0, bytes.len() as u32)
}
