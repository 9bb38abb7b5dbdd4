// SPDX-License-Identifier: GPL-2.0

//! Completion queues: a ring of CQEs the transport produces into and the
//! consumer (a kernel ULP through `poll_cq`, or a process through its
//! mapping) consumes from.
//!
//! Events follow the arming rules of an RNIC's CQ: armed for solicited
//! completions, a CQE raises the event only if its WQE was solicited (or
//! it reports an error); armed for the next completion, any CQE does. An
//! arming gives at most one event. With moderation (`modify_cq`), the
//! event then waits until `count` CQEs have arrived or `period`
//! microseconds have passed, whichever comes first. The event itself is
//! raised on the CQ's completion vector, an IRQ (`kapi::irq`).

use crate::device::{limits, SrnicDevice};
use crate::kapi::rdma::queue::{response, Queue};
use crate::kapi::rdma::verbs::{CqArm, PollOutput, WcStatus, WorkCompletion, CQE_SIZE};
use crate::kapi::rdma::{Cq, Device, UserData};
use crate::kapi::sync::SpinLockIrq;
use crate::pure::ring::RingGeometry;
use kernel::prelude::*;

/// Driver data of a CQ.
#[pin_data]
pub(crate) struct SrnicCq {
    #[pin]
    state: SpinLockIrq<CqState>,
    /// CQEs go to user space in its encoding.
    user: bool,
}

struct CqState {
    queue: Queue,
    /// The kernel's producer index; the copy in the ring is for readers.
    producer: u32,
    /// The consumer index of a kernel CQ (a user CQ's is in the ring).
    consumer: u32,
    arm: Option<CqArm>,
    moderation: Moderation,
    /// CQEs since an arming was met whose event moderation still holds
    /// back (0: no event waits).
    held: u32,
}

/// `modify_cq`'s settings; both zero means every event goes at once.
#[derive(Clone, Copy, Default)]
struct Moderation {
    count: u16,
    period_us: u16,
}

impl Moderation {
    fn is_on(self) -> bool {
        self.count > 1 || self.period_us > 0
    }

    /// CQEs after which the event goes without waiting longer.
    fn cqes_needed(self) -> u32 {
        match (self.count, self.period_us) {
            (0, 0) => 1,
            (0, _) => u32::MAX,
            (count, _) => count.into(),
        }
    }

    /// How long the event waits at most.
    fn wait_us(self) -> u16 {
        match self.period_us {
            0 => MAX_MODERATION_PERIOD_US,
            period => period,
        }
    }
}

/// The longest an event may wait, in microseconds; also the wait of a
/// count set without a period, so that the last CQEs of a burst never
/// wait forever.
pub(crate) const MAX_MODERATION_PERIOD_US: u16 = 4095;
/// The most CQEs an event may wait for.
pub(crate) const MAX_MODERATION_COUNT: u16 = u16::MAX;

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
        user.then(|| self.queue.checked_consumer())
            .unwrap_or(Some(self.consumer))
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
                    arm: None,
                    moderation: Moderation::default(),
                    held: 0,
                }),
                user: is_user,
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
        let meets_arming = match state.arm {
            Some(CqArm::NextCompletion) => true,
            Some(CqArm::Solicited) => solicited || wc.status != WcStatus::Success,
            None => false,
        };
        let moderation = state.moderation;
        if state.held > 0 {
            // An event waits: this CQE counts towards it.
            state.held = state.held.saturating_add(1);
        } else if meets_arming {
            state.arm = None;
            state.held = 1;
        } else {
            return upcalls;
        }
        // The timer is started and stopped under the lock, so that a late
        // stop never cancels the wait of the next arming.
        if state.held >= moderation.cqes_needed() {
            state.held = 0;
            upcalls.completion = true;
            if moderation.is_on() {
                cq.stop_moderation_timer();
            }
        } else if state.held == 1 {
            cq.start_moderation_timer(moderation.wait_us().into());
        }
        upcalls
    }

    /// The moderation wait ended: the held event goes now.
    pub(crate) fn moderation_expired(&self) -> CqUpcalls {
        let mut state = self.state.lock();
        let mut upcalls = CqUpcalls::default();
        if state.held > 0 {
            state.held = 0;
            upcalls.completion = true;
        }
        upcalls
    }

    /// Sets the event moderation (`modify_cq`).
    pub(crate) fn moderate(&self, count: u16, period_us: u16) -> Result {
        if period_us > MAX_MODERATION_PERIOD_US {
            return Err(EINVAL);
        }
        self.state.lock().moderation = Moderation { count, period_us };
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
        let mut state = self.state.lock();
        // A request for any completion overrides one for solicited ones.
        if state.arm != Some(CqArm::NextCompletion) {
            state.arm = Some(arm);
        }
        state.consumer(self.user) != Some(state.producer)
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
