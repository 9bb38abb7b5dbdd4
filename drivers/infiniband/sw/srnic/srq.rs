// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues.

use crate::device::{limits, SrnicDevice};
use crate::kapi::rdma::rxe_abi::queue::{response, Queue};
use crate::kapi::rdma::rxe_abi::wqe::{self, RecvCopy};
use crate::kapi::rdma::verbs::{SrqAttributes, SrqModify};
use crate::kapi::rdma::wr::RecvChain;
use crate::kapi::rdma::{Device, Srq, UserData};
use crate::kapi::sync::SpinLockIrq;
use crate::pure::ring::RingGeometry;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;

/// SRQ numbers for the ABI's response (XRC would use them).
static NEXT_SRQ_NUM: AtomicU32 = AtomicU32::new(1);

/// Driver data of an SRQ.
#[pin_data]
pub(crate) struct SrnicSrq {
    #[pin]
    state: SpinLockIrq<SrqState>,
    max_sge: u32,
    user: bool,
}

struct SrqState {
    queue: Queue,
    /// Kernel posts (user space keeps its own in the ring).
    producer: u32,
    consumer: u32,
    /// Armed limit (0: disarmed); fires once when the SRQ drains below it.
    limit: u32,
}

fn geometry(max_wr: u32, max_sge: u32) -> Result<RingGeometry> {
    RingGeometry::new(max_wr, wqe::recv_slot_size(max_sge), limits::MAX_SRQ_WR).map_err(|_| EINVAL)
}

impl SrqState {
    /// The producer index, from the ring if user space produces.
    fn producer(&self, user: bool) -> Option<u32> {
        if user {
            self.queue.checked_producer()
        } else {
            Some(self.producer)
        }
    }
}

impl SrnicSrq {
    pub(crate) fn create(
        dev: &Device<SrnicDevice>,
        attrs: &SrqAttributes,
        user: Option<&UserData>,
    ) -> Result<(SrqAttributes, impl PinInit<Self, Error>)> {
        if attrs.max_wr == 0 || attrs.max_wr > limits::MAX_SRQ_WR || attrs.max_sge > limits::MAX_SGE
        {
            return Err(EINVAL);
        }
        if attrs.srq_limit > attrs.max_wr {
            return Err(EINVAL);
        }
        dev.counts.srq.acquire(limits::MAX_SRQ)?;
        let made: Result<Queue> = (|| {
            let geometry = geometry(attrs.max_wr, attrs.max_sge)?;
            let mut queue = Queue::new(geometry)?;
            if let Some(user) = user {
                let mi = queue.share(user)?;
                response::srq(user, mi, NEXT_SRQ_NUM.fetch_add(1, Ordering::Relaxed))?;
            }
            Ok(queue)
        })();
        let queue = made.inspect_err(|_| dev.counts.srq.release())?;
        let max_sge = wqe::recv_slot_sges(queue.geometry().elem_size()).min(limits::MAX_SGE);
        let actual = SrqAttributes {
            max_wr: queue.geometry().capacity(),
            max_sge,
            srq_limit: attrs.srq_limit,
        };
        let is_user = user.is_some();
        let limit = attrs.srq_limit;
        Ok((
            actual,
            try_pin_init!(Self {
                state <- new_spinlock_irq!(SrqState {
                    queue,
                    producer: 0,
                    consumer: 0,
                    limit,
                }),
                max_sge,
                user: is_user,
            }? Error),
        ))
    }

    pub(crate) fn query(&self) -> SrqAttributes {
        let state = self.state.lock();
        SrqAttributes {
            max_wr: state.queue.geometry().capacity(),
            max_sge: self.max_sge,
            srq_limit: state.limit,
        }
    }

    pub(crate) fn modify(&self, modify: &SrqModify, user: Option<&UserData>) -> Result {
        let new = &modify.attrs;
        if modify.resize {
            if new.max_wr == 0 || new.max_wr > limits::MAX_SRQ_WR {
                return Err(EINVAL);
            }
            let geometry = geometry(new.max_wr, self.max_sge)?;
            let mut queue = Queue::new(geometry)?;
            if let Some(user) = user {
                // The new ring's whereabouts go to an address the command
                // names, before the switch and outside the lock.
                let addr = response::srq_resize_address(user)?;
                let mi = queue.share(user)?;
                response::srq_resized(addr, mi)?;
            }
            let mut state = self.state.lock();
            let producer = state.producer(self.user).ok_or(EINVAL)?;
            let pending = state.queue.geometry().used(producer, state.consumer);
            if modify.limit && new.srq_limit > geometry.capacity() {
                return Err(EINVAL);
            }
            queue.take_entries(&state.queue, state.consumer, pending)?;
            let old_queue = core::mem::replace(&mut state.queue, queue);
            state.producer = pending;
            state.consumer = 0;
            if modify.limit {
                state.limit = new.srq_limit;
            }
            drop(state);
            drop(old_queue);
            return Ok(());
        }
        if modify.limit {
            let mut state = self.state.lock();
            if new.srq_limit > state.queue.geometry().capacity() {
                return Err(EINVAL);
            }
            state.limit = new.srq_limit;
        }
        Ok(())
    }

    pub(crate) fn post(&self, wrs: &mut RecvChain<'_>) -> Result {
        let mut state = self.state.lock();
        let geometry = *state.queue.geometry();
        for wr in wrs.by_ref() {
            if geometry.is_full(state.producer, state.consumer) {
                return Err(ENOMEM);
            }
            let index = state.producer;
            wqe::write_kernel_recv(&state.queue, index, &wr, self.max_sge)?;
            state.producer = geometry.next(index);
            let producer = state.producer;
            state.queue.set_producer(producer);
        }
        Ok(())
    }

    /// Takes the oldest receive WQE into `copy` (read once, then checked):
    /// `Some(limit_reached)` if there was one, where `limit_reached` says
    /// the SRQ just drained below its armed limit (which disarms it).
    pub(crate) fn take(&self, copy: &mut RecvCopy) -> Result<Option<bool>> {
        let mut state = self.state.lock();
        let producer = state.producer(self.user).ok_or(EINVAL)?;
        let consumer = state.consumer;
        if producer == consumer {
            return Ok(None);
        }
        copy.fetch(&state.queue, consumer, self.max_sge)?;
        let geometry = *state.queue.geometry();
        state.consumer = geometry.next(consumer);
        let next = state.consumer;
        state.queue.set_consumer(next);
        let left = geometry.used(producer, next);
        let limit_reached = state.limit != 0 && left < state.limit;
        if limit_reached {
            state.limit = 0;
        }
        Ok(Some(limit_reached))
    }

    pub(crate) fn destroy(srq: &Srq<SrnicDevice>) {
        srq.device().counts.srq.release();
    }
}
