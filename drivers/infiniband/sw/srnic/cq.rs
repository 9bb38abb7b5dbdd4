// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of CQEs the transport produces into and the
//! consumer (a kernel ULP through `poll_cq`, or a process through its
//! mapping) consumes from.
//!
//! Events follow the arming rules of an RNIC's CQ (`pure::cq_event`):
//! armed for solicited completions, a CQE raises the event only if its WQE
//! was solicited (or it reports an error); armed for the next completion,
//! any CQE does. An arming gives at most one event. With moderation
//! (`modify_cq`), the event then waits until `count` CQEs have arrived or
//! `period` microseconds have passed, whichever comes first. The event
//! itself is raised on the CQ's completion vector, an IRQ (`kapi::irq`).

use crate::device::{limits, SrnicDevice};
use crate::kapi::rdma::rxe_abi::queue::{response, Queue};
use crate::kapi::rdma::verbs::{CqArm, PollOutput, WcStatus, WorkCompletion, CQE_SIZE};
use crate::kapi::rdma::{Cq, Device, UserData};
use crate::kapi::sync::SpinLockIrq;
use crate::pure::cq_event::{EventAction, EventState, Moderation};
use crate::pure::ring::RingGeometry;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;

/// Driver data of a CQ.
#[pin_data]
pub(crate) struct SrnicCq {
    #[pin]
    state: SpinLockIrq<CqState>,
    /// CQEs go to user space in its encoding.
    user: bool,
    /// Whether the consumer has ever asked for a completion event. One
    /// that never has polls, spinning on its CPU while it waits.
    ever_armed: AtomicBool,
}

struct CqState {
    queue: Queue,
    /// The kernel's producer index; the copy in the ring is for readers.
    producer: u32,
    /// The consumer index of a kernel CQ (a user CQ's is in the ring).
    consumer: u32,
    /// Arming and moderation (`pure::cq_event`).
    events: EventState,
}

/// What pushing a completion asks of the caller once its locks are
/// released: the upcalls must not run under them.
#[derive(Clone, Copy, Default)]
#[must_use]
pub(crate) struct CqUpcalls {
    pub(crate) completion: bool,
    pub(crate) overrun: bool,
}

impl CqUpcalls {
    pub(crate) fn merge(&mut self, other: CqUpcalls) {
        self.completion |= other.completion;
        self.overrun |= other.overrun;
    }

    /// Runs the upcalls on `cq`; call with no driver lock held.
    pub(crate) fn run(self, cq: &Cq<SrnicDevice>) {
        if self.overrun {
            cq.error_event();
        }
        if self.completion {
            cq.raise_completion_event();
        }
    }
}

fn geometry(cqe: u32) -> Result<RingGeometry> {
    RingGeometry::new(cqe, CQE_SIZE, limits::MAX_CQE).map_err(|_| EINVAL)
}

impl CqState {
    /// The consumer index, from the ring if user space consumes. A hostile
    /// index reads as "full": completions are dropped and the consumer
    /// hears of the overrun, nothing worse.
    fn consumer(&self, user: bool) -> Option<u32> {
        if user {
            self.queue.checked_consumer()
        } else {
            Some(self.consumer)
        }
    }
}

impl SrnicCq {
    pub(crate) fn create(
        dev: &Device<SrnicDevice>,
        cqe: u32,
        user: Option<&UserData>,
    ) -> Result<(u32, impl PinInit<Self, Error>)> {
        if cqe == 0 || cqe > limits::MAX_CQE {
            return Err(EINVAL);
        }
        dev.counts.cq.acquire(limits::MAX_CQ)?;
        let made: Result<Queue> = (|| {
            let mut queue = Queue::new(geometry(cqe)?)?;
            if let Some(user) = user {
                let mi = queue.share(user)?;
                response::cq(user, mi)?;
            }
            Ok(queue)
        })();
        let queue = made.inspect_err(|_| dev.counts.cq.release())?;
        let capacity = queue.geometry().capacity();
        let is_user = user.is_some();
        Ok((
            capacity,
            try_pin_init!(Self {
                state <- new_spinlock_irq!(CqState {
                    queue,
                    producer: 0,
                    consumer: 0,
                    events: EventState::default(),
                }),
                user: is_user,
                ever_armed: AtomicBool::new(false),
            }? Error),
        ))
    }

    /// Appends a completion to `cq`. A full CQ drops it and reports the
    /// overrun (`IB_EVENT_CQ_ERR`): never overwrite what the consumer has
    /// not read.
    pub(crate) fn push(cq: &Cq<SrnicDevice>, wc: &WorkCompletion, solicited: bool) -> CqUpcalls {
        let this: &SrnicCq = cq;
        let mut state = this.state.lock();
        let mut upcalls = CqUpcalls::default();
        let geometry = *state.queue.geometry();
        let full = match state.consumer(this.user) {
            Some(consumer) => geometry.is_full(state.producer, consumer),
            None => true,
        };
        if full {
            upcalls.overrun = true;
            return upcalls;
        }
        let index = state.producer;
        if wc.write(&state.queue, index, this.user).is_err() {
            upcalls.overrun = true;
            return upcalls;
        }
        state.producer = geometry.next(index);
        let producer = state.producer;
        state.queue.set_producer(producer);
        // Error completions count as solicited.
        let solicited = solicited || wc.status != WcStatus::Success;
        // The timer is started and stopped under the lock, so that a late
        // stop never cancels the wait of the next arming.
        match state.events.on_cqe(solicited) {
            EventAction::None => {}
            EventAction::StartWait(usecs) => cq.start_moderation_timer(usecs.into()),
            EventAction::Raise { stop_wait } => {
                if stop_wait {
                    cq.stop_moderation_timer();
                }
                upcalls.completion = true;
            }
        }
        upcalls
    }

    /// The moderation wait ended: the held event goes now.
    pub(crate) fn moderation_expired(&self) -> CqUpcalls {
        CqUpcalls {
            completion: self.state.lock().events.on_wait_over(),
            overrun: false,
        }
    }

    /// Sets the event moderation (`modify_cq`).
    pub(crate) fn moderate(&self, count: u16, period_us: u16) -> Result {
        let moderation = Moderation::new(count, period_us).map_err(|_| EINVAL)?;
        self.state.lock().events.moderate(moderation);
        Ok(())
    }

    pub(crate) fn poll(&self, out: &mut PollOutput) {
        let mut state = self.state.lock();
        let geometry = *state.queue.geometry();
        while out.has_room() && state.consumer != state.producer {
            let index = state.consumer;
            if out.take_from(&state.queue, index).is_err() {
                break;
            }
            state.consumer = geometry.next(index);
        }
        let consumer = state.consumer;
        state.queue.set_consumer(consumer);
    }

    pub(crate) fn arm(&self, arm: CqArm) -> bool {
        self.ever_armed.store(true, Ordering::Relaxed);
        let mut state = self.state.lock();
        state.events.arm(arm);
        state.consumer(self.user) != Some(state.producer)
    }

    /// Whether the consumer polls this CQ: it has never asked for an
    /// event, so it spins while it waits for a completion.
    pub(crate) fn is_polled(&self) -> bool {
        !self.ever_armed.load(Ordering::Relaxed)
    }

    /// Moves the unpolled completions to a ring of `cqe` entries.
    pub(crate) fn resize(&self, cqe: u32, user: Option<&UserData>) -> Result<u32> {
        if cqe == 0 || cqe > limits::MAX_CQE {
            return Err(EINVAL);
        }
        let geometry = geometry(cqe)?;
        // The new ring is prepared (and shared) outside the lock, which
        // may not be held across allocation that sleeps.
        let mut queue = Queue::new(geometry)?;
        if let Some(user) = user {
            // Answered before the switch, outside the lock (the copy may
            // fault); user space ignores the answer if the verb fails.
            let mi = queue.share(user)?;
            response::cq(user, mi)?;
        }
        let mut state = self.state.lock();
        let consumer = state.consumer(self.user).ok_or(EINVAL)?;
        let pending = state.queue.geometry().used(state.producer, consumer);
        queue.take_entries(&state.queue, consumer, pending)?;
        let old_queue = core::mem::replace(&mut state.queue, queue);
        state.producer = pending;
        state.consumer = 0;
        drop(state);
        drop(old_queue);
        Ok(geometry.capacity())
    }
}
