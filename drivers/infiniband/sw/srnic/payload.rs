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
use crate::kapi::rdma::Device;
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
        /// A kernel QP, which may use the local DMA key.
        kernel: bool,
    },
    /// Inline data copied into a kernel-owned work ring.
    Inline { data: *const u8, len: u32 },
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

impl Extent<'_> {
    /// The contiguous memory at byte `at` of the extent: its address and
    /// length (at most `want`); `access` is what a local key must grant.
    fn chunk(
        &self,
        guard: &RcuReadGuard,
        at: u64,
        want: usize,
        access: u32,
    ) -> Option<(*mut u8, usize)> {
        match self {
            Self::Inline { data, len } => {
                let left = u64::from(*len).checked_sub(at).filter(|l| *l > 0)?;
                let n = want.min(left as usize);
                // SAFETY: `at < len`, and the inline data is `len` bytes.
                Some((unsafe { data.add(at as usize) }.cast_mut(), n))
            }
            Self::Region(span) => {
                let (ptr, n) = span.translate(guard, at)?;
                Some((ptr, n.min(want)))
            }
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
                    if !kernel {
                        return None;
                    }
                    // A kernel virtual address, owned by the kernel consumer.
                    return Some((addr as usize as *mut u8, want.min(left as usize)));
                }
                let mr = lookup_mr(dev, guard, sge.lkey())?;
                if mr.pd_id() != *pd {
                    return None;
                }
                let left32 = u32::try_from(left).ok()?;
                let span = Span::check(mr, addr, left32, access)?;
                let (ptr, n) = span.translate(guard, 0)?;
                Some((ptr, n.min(want).min(left as usize)))
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
        let (from, n) = src
            .chunk(guard, src_at + done, want, 0)
            .ok_or(CopyError::Source)?;
        let (to, m) = dst
            .chunk(guard, dst_at + done, n, LOCAL_WRITE)
            .ok_or(CopyError::Destination)?;
        let step = n.min(m);
        if step == 0 {
            return Err(CopyError::Destination);
        }
        // Either side may be pages a process maps and writes while they are
        // copied: raw pointers only, no reference is ever formed over them,
        // and the copy is the kernel's `memmove`, which (like
        // `copy_from_user`) tolerates concurrent writers; what such a
        // process then reads is undefined by the verbs, not by the kernel.
        // SAFETY: both chunks are memory the keys grant for at least `step`
        // bytes, kept alive by `guard` (regions) or by their kernel owner;
        // they may overlap (one region read and written), hence a move.
        unsafe { core::ptr::copy(from.cast_const(), to, step) };
        done += step as u64;
    }
    Ok(())
}

/// Calls `f` with each contiguous piece of bytes `at..at + len` of `src`
/// in order (each within one page for page-backed memory), without
/// touching them; stops at the first error `f` returns.
pub(crate) fn for_each_piece<E>(
    guard: &RcuReadGuard,
    src: &Extent<'_>,
    at: u64,
    len: u32,
    mut f: impl FnMut(*const u8, usize) -> Result<(), E>,
) -> Result<(), PieceError<E>> {
    let mut done = 0u64;
    let len = u64::from(len);
    while done < len {
        let want = (len - done) as usize;
        let (from, n) = src
            .chunk(guard, at + done, want, 0)
            .ok_or(PieceError::Source)?;
        if n == 0 {
            return Err(PieceError::Source);
        }
        f(from.cast_const(), n).map_err(PieceError::Piece)?;
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
    let src = Extent::Inline {
        data: bytes.as_ptr(),
        len: bytes.len() as u32,
    };
    copy(guard, &src, 0, dst, 0, bytes.len() as u32)
}
