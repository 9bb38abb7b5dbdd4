// SPDX-License-Identifier: GPL-2.0

//! Verbs objects: the core's `ib_cq`, `ib_qp`, `ib_srq`, `ib_ah` and
//! `ib_mw` (allocated by the core at the size the driver declares), and
//! `ib_mr` (allocated by the driver), each followed by the driver's data.
//!
//! The driver's data is initialised in place when the object is created
//! and dropped when it is destroyed; the core frees the memory afterwards.

use super::device::{Device, Driver};
use super::table::{Listable, Listing};
use super::umem::KernelMemory;
use super::verbs::{WcOpcode, WcStatus, WorkCompletion};
use crate::bindings;
use crate::kapi::cpu;
use crate::kapi::irq::IrqEvent;
use crate::pure::qp_cpu;
use crate::pure::wr::QpType;
use core::ops::Deref;
use kernel::alloc::KVec;
use kernel::init::PinInit;
use kernel::prelude::*;
use kernel::types::Opaque;

macro_rules! core_object {
    ($(#[$doc:meta])* $name:ident, $raw:ident, $data:ident $(, $(#[$fdoc:meta])* $field:ident: $fty:ty)*) => {
        $(#[$doc])*
        #[repr(C)]
        pub struct $name<T: Driver> {
            ib: Opaque<bindings::$raw>,
            $($(#[$fdoc])* $field: $fty,)*
            /// Its entry in a driver's table, taken out before `data` drops.
            listing: Listing,
            data: T::$data,
        }

        // SAFETY: `drop_data` unlists the object before the data drops,
        // and the core frees the memory only after `drop_data`; nothing
        // else of the object drops.
        unsafe impl<T: Driver> Listable for $name<T> {
            fn listing(&self) -> &Listing {
                &self.listing
            }
        }

        // SAFETY: extra fields (a QP's work item) synchronise themselves.
        // The core object is `Opaque` and read only through raw places,
        // field by field: fields the core (or the driver) may still write
        // while other CPUs read them (a QP's number, its CQs, an MR's PD)
        // are read with volatile loads. The driver data is `Send + Sync`.
        unsafe impl<T: Driver> Sync for $name<T> {}
        // SAFETY: as above.
        unsafe impl<T: Driver> Send for $name<T> {}

        impl<T: Driver> Deref for $name<T> {
            type Target = T::$data;

            fn deref(&self) -> &T::$data {
                &self.data
            }
        }

        impl<T: Driver> $name<T> {
            /// # Safety
            ///
            /// `raw` must be the core object of a live `Self` (data
            /// initialised and not dropped) for `'a`.
            pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::$raw) -> &'a Self {
                // SAFETY: the core object is the first field of `repr(C)`
                // `Self`, and the caller guarantees the data is live.
                unsafe { &*raw.cast::<Self>() }
            }

            pub(crate) fn as_raw(&self) -> *mut bindings::$raw {
                self.ib.get()
            }

            /// Initialises the driver data of the core object `raw`.
            ///
            /// # Safety
            ///
            /// `raw` must be a core object of this type's size whose data
            /// is not initialised.
            pub(crate) unsafe fn init_data(
                raw: *mut bindings::$raw,
                init: impl PinInit<T::$data, Error>,
            ) -> Result {
                let this = raw.cast::<Self>();
                // SAFETY: the listing lies in the core's allocation, which
                // is ours and not yet shared.
                unsafe { core::ptr::addr_of_mut!((*this).listing).write(Listing::new()) };
                // SAFETY: the data slot lies in the core's allocation, which
                // never moves; on error the initialiser leaves it
                // uninitialised.
                unsafe { init.__pinned_init(core::ptr::addr_of_mut!((*this).data)) }
            }

            /// Drops the driver data of the core object `raw`.
            ///
            /// # Safety
            ///
            /// The data must be initialised; it is dropped exactly once and
            /// not used afterwards. Sleeps if the object is still listed.
            pub(crate) unsafe fn drop_data(raw: *mut bindings::$raw) {
                let this = raw.cast::<Self>();
                // SAFETY: initialised with the data (`init_data`); out of
                // every table, waiting for lookups, before the data goes.
                unsafe { (*this).listing.unlist() };
                // SAFETY: see above.
                unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*this).data)) }
            }

            /// The device the object belongs to.
            pub fn device(&self) -> &Device<T> {
                // SAFETY: objects exist only while their device's verbs run.
                unsafe { Device::from_ib((*self.as_raw()).device) }
            }
        }
    };
}

core_object!(
    /// A completion queue.
    Cq, ib_cq, Cq,
    /// Its completion vector, checked at creation.
    vector: u32,
    /// The completion event it raises on its vector.
    event: IrqEvent,
    /// Delays its event for moderation (`Driver::cq_moderation_expired`).
    moderation: Opaque<bindings::hrtimer>
);
core_object!(
    /// A queue pair.
    Qp, ib_qp, Qp,
    /// The QP's own work item ([`Driver::qp_work`]), run on the QP's CPU.
    work: Opaque<bindings::delayed_work>,
    /// Its receive work ([`Driver::qp_receive_work`]), run on a CPU other
    /// than the one that queued it.
    receive_work: Opaque<bindings::work_struct>
);
core_object!(
    /// A shared receive queue.
    Srq, ib_srq, Srq
);
core_object!(
    /// An address handle.
    Ah, ib_ah, Ah
);
core_object!(
    /// A memory window.
    Mw, ib_mw, Mw
);

impl<T: Driver> Cq<T> {
    /// Prepares the vector binding, event and moderation timer of a CQ
    /// being created, before anything can raise its event.
    ///
    /// # Safety
    /// `raw` is a CQ the core allocated at our size, not yet returned to
    /// the core; `vector` is below the device's vector count.
    pub(crate) unsafe fn init_events(raw: *mut bindings::ib_cq, vector: u32) {
        let this = raw.cast::<Self>();
        // SAFETY: the caller guarantees the memory is ours and unshared;
        // the timer is initialised before its callback is set.
        unsafe {
            core::ptr::addr_of_mut!((*this).vector).write(vector);
            IrqEvent::init(core::ptr::addr_of_mut!((*this).event), Self::deliver_event);
            let timer = core::ptr::addr_of_mut!((*this).moderation).cast::<bindings::hrtimer>();
            bindings::hrtimer_init(
                timer,
                bindings::SRNIC_CLOCK_MONOTONIC as _,
                bindings::SRNIC_HRTIMER_MODE_REL_HARD,
            );
            (*timer).function = Some(Self::moderation_cb);
        }
    }

    /// Stops the CQ's timer and waits until its event is delivered; then
    /// the data may drop.
    ///
    /// # Safety
    /// `raw` is a CQ prepared by [`Self::init_events`] that no QP uses and
    /// nothing raises any more.
    pub(crate) unsafe fn quiesce_events(raw: *mut bindings::ib_cq) {
        // SAFETY: the caller guarantees the CQ is live and idle.
        unsafe {
            let cq = Self::from_raw(raw);
            bindings::hrtimer_cancel(cq.moderation.get());
            cq.device().comp_vectors().quiesce(cq.vector, &cq.event);
        }
    }

    /// Tells the CQ its completion event has come.
    ///
    /// # Safety
    ///
    /// `event` must be the `event` field of a live CQ of this device (the
    /// vectors call this only with events `init_events` set up).
    unsafe fn deliver_event(event: *const IrqEvent) {
        let offset = core::mem::offset_of!(Self, event);
        // SAFETY: only a CQ's event is initialised with this function; the
        // CQ is live until `quiesce_events` has seen the event delivered.
        let cq = unsafe { &*event.cast::<u8>().sub(offset).cast::<Self>() };
        cq.completion_event();
    }

    /// # Safety
    ///
    /// Called only by the kernel for the timer, work item or page walk of an
    /// object of this device that it was set up for.
    unsafe extern "C" fn moderation_cb(timer: *mut bindings::hrtimer) -> bindings::hrtimer_restart {
        let offset = core::mem::offset_of!(Self, moderation);
        // SAFETY: only a CQ's timer runs this; `quiesce_events` cancels it
        // (waiting for a running callback) before the data drops.
        let cq = unsafe { &*timer.cast::<u8>().sub(offset).cast::<Self>() };
        T::cq_moderation_expired(cq);
        bindings::hrtimer_restart_HRTIMER_NORESTART
    }

    /// The CQ's completion vector.
    pub fn comp_vector(&self) -> u32 {
        self.vector
    }

    /// Raises the CQ's completion event on its vector: the consumer's
    /// handler runs soon, in the vector's IRQ on the vector's CPU, once
    /// however often this is called before it runs. Any context.
    pub fn raise_completion_event(&self) {
        self.device().comp_vectors().raise(self.vector, &self.event);
    }

    /// Calls [`Driver::cq_moderation_expired`] in `usecs` microseconds
    /// (hard-IRQ context), replacing a wait already set.
    pub fn start_moderation_timer(&self, usecs: u32) {
        let nanos = i64::from(usecs) * 1000;
        // SAFETY: the timer was initialised at creation and is cancelled
        // before the CQ goes.
        unsafe {
            bindings::hrtimer_start_range_ns(
                self.moderation.get(),
                nanos,
                0,
                bindings::SRNIC_HRTIMER_MODE_REL_HARD,
            )
        };
    }

    /// Cancels the moderation wait unless its callback already runs
    /// (which then finds nothing to do, or does it).
    pub fn stop_moderation_timer(&self) {
        // SAFETY: as in `start_moderation_timer`; this does not wait.
        unsafe { bindings::hrtimer_try_to_cancel(self.moderation.get()) };
    }

    /// Calls the consumer's completion handler. Must not be called with
    /// locks held that the handler's verbs take (it may poll and post).
    pub fn completion_event(&self) {
        // SAFETY: the CQ is live; the handler is the consumer's.
        unsafe { bindings::srnic_cq_comp_handler(self.as_raw()) }
    }

    /// Reports a CQ overrun to the consumer (`IB_EVENT_CQ_ERR`).
    pub fn error_event(&self) {
        // SAFETY: the CQ is live.
        unsafe { bindings::srnic_cq_event(self.as_raw(), bindings::ib_event_type_IB_EVENT_CQ_ERR) }
    }

    /// Whether a user process owns the CQ.
    pub fn is_user(&self) -> bool {
        // SAFETY: set by the core before create and never changed.
        unsafe { !(*self.as_raw()).uobject.is_null() }
    }
}

/// Asynchronous QP events the driver raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The QP failed (a bad WQE or ring index): `IB_EVENT_QP_FATAL`.
    Fatal,
    /// The SQ drained in SQD: `IB_EVENT_SQ_DRAINED`.
    SqDrained,
    /// The last WQE of an SRQ-attached QP in ERR: `IB_EVENT_QP_LAST_WQE_REACHED`.
    LastWqeReached,
}

/// One field of a QP's `ib_qp`, read with a volatile load: the core sets
/// `send_cq`, `recv_cq` and the driver `qp_num` after the QP is in the
/// table where the transport finds it, and `_ib_modify_qp` rewrites others
/// while the transport runs, so no reference may span the struct.
macro_rules! qp_field {
    ($qp:expr, $field:ident) => {
        // SAFETY: the QP is live, so the field is valid for reads; a
        // volatile load reads the value there now and assumes nothing
        // about later ones.
        unsafe { core::ptr::addr_of!((*$qp.as_raw()).$field).read_volatile() }
    };
}

impl<T: Driver> Qp<T> {
    /// Prepares the QP's work item, before anything can queue it.
    ///
    /// # Safety
    /// `raw` is a QP the core allocated at our size, not yet published.
    pub(crate) unsafe fn init_work(raw: *mut bindings::ib_qp) {
        // SAFETY: the caller guarantees the memory is ours and unshared.
        unsafe {
            bindings::srnic_init_delayed_work(
                core::ptr::addr_of_mut!((*raw.cast::<Self>()).work).cast(),
                Some(Self::work_cb),
            );
            bindings::srnic_init_work(
                core::ptr::addr_of_mut!((*raw.cast::<Self>()).receive_work).cast(),
                Some(Self::receive_work_cb),
            );
        }
    }

    /// Waits for the work item to finish and cancels it, even if it
    /// queues itself again.
    ///
    /// # Safety
    /// `raw` is a QP prepared by [`Self::init_work`] that nothing outside
    /// its own work item can find any more.
    pub(crate) unsafe fn cancel_work(raw: *mut bindings::ib_qp) {
        // SAFETY: the work items were initialised; the caller guarantees
        // no one else queues them. The receive work may queue the QP's
        // work, never the other way round, so it is cancelled first.
        unsafe {
            bindings::srnic_cancel_work_sync(
                core::ptr::addr_of_mut!((*raw.cast::<Self>()).receive_work).cast(),
            );
            bindings::cancel_delayed_work_sync(
                core::ptr::addr_of_mut!((*raw.cast::<Self>()).work).cast(),
            );
        }
    }

    /// # Safety
    ///
    /// Called only by the kernel for a QP's receive work item.
    unsafe extern "C" fn receive_work_cb(work: *mut bindings::work_struct) {
        // SAFETY: only a QP's receive work item runs this; it is the
        // `receive_work` field of a `Qp<T>` whose data lives until the
        // work is cancelled.
        unsafe {
            let offset = core::mem::offset_of!(Self, receive_work);
            let qp = &*work.cast::<u8>().sub(offset).cast::<Self>();
            T::qp_receive_work(qp);
        }
    }

    /// Runs [`Driver::qp_receive_work`] soon on a CPU other than this one
    /// (the QP's own, or the next online CPU if that is this one or
    /// offline; this one if no other is online); a run already pending
    /// serves. High priority: it is the receive path's work, which would
    /// otherwise run in a softirq.
    pub fn run_receive_work_elsewhere(&self) {
        let target = qp_cpu::receive_cpu(
            cpu::home_of(self.qp_num()),
            cpu::this_cpu_hint(),
            cpu::next_online,
            cpu::is_online,
        );
        // A CPU that went offline since it was picked is no harm: the
        // workqueue runs an offline CPU's works elsewhere.
        // SAFETY: initialised at creation, cancelled before the data drops;
        // as for `run_work_soon`, a `&Qp` exists only while it may be found.
        unsafe {
            bindings::srnic_queue_highpri_work_on(
                cpu::for_workqueue(target),
                self.receive_work.get(),
            )
        };
    }

    /// # Safety
    ///
    /// Called only by the kernel for the timer, work item or page walk of an
    /// object of this device that it was set up for.
    unsafe extern "C" fn work_cb(work: *mut bindings::work_struct) {
        // Counted while it runs, for `copy_in_poster`.
        // SAFETY: no precondition: adds one to this CPU's count.
        let entered_on = unsafe { bindings::srnic_qp_work_enter() };
        // SAFETY: only a QP's work item runs this; it is the `work` field of
        // a `Qp<T>` whose data lives until the work is cancelled.
        unsafe {
            let dwork = bindings::srnic_to_delayed_work(work);
            let offset = core::mem::offset_of!(Self, work);
            let qp = &*dwork.cast::<u8>().sub(offset).cast::<Self>();
            T::qp_work(qp);
        }
        // SAFETY: takes back the one added above, from the CPU it went to.
        unsafe { bindings::srnic_qp_work_exit(entered_on) };
    }

    /// Runs [`Driver::qp_work`] as soon as possible on the QP's own CPU
    /// (QPs are spread over the online CPUs by number), sooner than a
    /// delayed run already pending. Called by a process (not a work) on
    /// the QP's CPU, it runs on the next online CPU instead: the process
    /// goes on (polling, often) where it is. Called while the work runs
    /// (from itself, or from anywhere meanwhile), the run lands on the
    /// CPU that runs it whatever the target says: the workqueue queues an
    /// item that one of its workers is running on that worker's pool, so
    /// a handed-over work stays where it went. That holds within one
    /// workqueue: this and [`Qp::run_work_after`] both use `system_wq`.
    pub fn run_work_soon(&self) {
        let target = qp_cpu::work_cpu(
            cpu::home_of(self.qp_num()),
            cpu::this_cpu_hint(),
            cpu::in_process(),
            cpu::next_online,
        );
        // A `&Qp` reaches the driver only from the core's calls and from
        // the driver's own lookups, which `Driver::destroy_qp` ends before
        // the work is cancelled.
        // SAFETY: initialised at creation, cancelled before the data drops.
        unsafe { bindings::srnic_mod_delayed_work_on(cpu::for_workqueue(target), self.work.get()) };
    }

    /// Whether a process here had better do the QP's copying itself than
    /// hand it to [`Qp::run_work_soon`]: this CPU is the QP's own, so the
    /// work would take another CPU, and that one runs a QP's work already.
    /// A QP whose own CPU is another one is handed there, busy or not, so
    /// that a process's QPs divide between the CPUs by their numbers.
    /// Also true with no other CPU online, or the QP's CPU offline
    /// (`pure::qp_cpu::copy_in_poster`). A hint, which may be out of date
    /// at once.
    pub fn copy_in_poster(&self) -> bool {
        qp_cpu::copy_in_poster(
            cpu::home_of(self.qp_num()),
            cpu::this_cpu_hint(),
            cpu::next_online,
            // SAFETY: no precondition: reads a per-CPU count; `next` is
            // `next_online`'s, and the shim reads 0 for a number that is
            // no possible CPU.
            |next| unsafe { bindings::srnic_qp_works_running_on(next) } > 0,
        )
    }

    /// Runs [`Driver::qp_work`] on the QP's own CPU after `msecs`
    /// milliseconds, unless a run is already pending.
    pub fn run_work_after(&self, msecs: u32) {
        let target = cpu::for_workqueue(cpu::home_of(self.qp_num()));
        // SAFETY: as in `run_work_soon`.
        unsafe { bindings::srnic_queue_delayed_work_on(target, self.work.get(), msecs) };
    }

    /// The QP's transport type.
    pub fn qp_type(&self) -> QpType {
        // Creation refused every other type.
        super::verbs::qp_type_from_raw(qp_field!(self, qp_type)).unwrap_or(QpType::Rc)
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        qp_field!(self, qp_num)
    }

    /// Whether a user process owns the QP.
    pub fn is_user(&self) -> bool {
        !qp_field!(self, uobject).is_null()
    }

    /// For a kernel consumer's QP, the word that the addresses its work
    /// requests give with the local DMA key are the consumer's memory.
    pub fn kernel_memory(&self) -> Option<KernelMemory> {
        // SAFETY: a QP without a user object was created by a kernel
        // consumer (`ib_create_qp_kernel`), whose SGEs carry its memory.
        (!self.is_user()).then(|| unsafe { KernelMemory::new() })
    }

    /// The CQ of send completions.
    pub fn send_cq(&self) -> &Cq<T> {
        let cq = qp_field!(self, send_cq);
        // SAFETY: the core holds a use count on the QP's CQs while the QP
        // lives, and all CQs of this device are `Cq<T>`.
        unsafe { Cq::from_raw(cq) }
    }

    /// The CQ of receive completions.
    pub fn recv_cq(&self) -> &Cq<T> {
        let cq = qp_field!(self, recv_cq);
        // SAFETY: as for `send_cq`.
        unsafe { Cq::from_raw(cq) }
    }

    /// Identifies the QP's protection domain (compared, never followed).
    pub fn pd_id(&self) -> usize {
        qp_field!(self, pd) as usize
    }

    /// The SRQ receives come from, if any.
    pub fn srq(&self) -> Option<&Srq<T>> {
        let srq = qp_field!(self, srq);
        if srq.is_null() {
            return None;
        }
        // SAFETY: the core holds a use count on the SRQ while the QP lives.
        Some(unsafe { Srq::from_raw(srq) })
    }

    /// Raises an asynchronous event on the QP.
    pub fn event(&self, event: QpEvent) {
        let raw = match event {
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
        };
        // SAFETY: the QP is live.
        unsafe { bindings::srnic_qp_event(self.as_raw(), raw) }
    }

    /// A completion of this QP for `wr_id`.
    pub fn completion(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            qp_num: self.qp_num(),
            src_qp: 0,
            ex: 0,
            with_imm: false,
            with_invalidate: false,
            with_grh: false,
            smac: None,
            vlan_id: None,
            network_hdr_type: 0,
            qp: self.as_raw() as usize,
        }
    }
}

impl<T: Driver> Srq<T> {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`.
    pub fn limit_event(&self) {
        // SAFETY: the SRQ is live.
        unsafe {
            bindings::srnic_srq_event(
                self.as_raw(),
                bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            )
        }
    }

    /// Whether a user process owns the SRQ.
    pub fn is_user(&self) -> bool {
        // SAFETY: set by the core before create and never changed.
        unsafe { !(*self.as_raw()).uobject.is_null() }
    }
}

/// Memory window types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Bound with the bind verb, PD-wide.
    Type1,
    /// Bound with a bind WR, to one QP.
    Type2,
}

impl<T: Driver> Ah<T> {
    /// Identifies the handle's protection domain (compared, never
    /// followed).
    pub fn pd_id(&self) -> usize {
        // SAFETY: set by the core before create and never changed.
        unsafe { (*self.as_raw()).pd as usize }
    }
}

impl<T: Driver> Mw<T> {
    /// Identifies the window's protection domain (compared, never
    /// followed).
    pub fn pd_id(&self) -> usize {
        // SAFETY: set by the core before alloc and never changed.
        unsafe { (*self.as_raw()).pd as usize }
    }

    /// The window's type.
    pub fn mw_type(&self) -> MwType {
        // SAFETY: set by the core before alloc and never changed.
        if unsafe { (*self.as_raw()).type_ } == bindings::ib_mw_type_IB_MW_TYPE_2 {
            MwType::Type2
        } else {
            MwType::Type1
        }
    }
}

/// A memory region, allocated by the driver.
#[repr(C)]
#[pin_data]
pub struct Mr<T: Driver> {
    head: MrHead,
    /// Its entry in a driver's table; declared before `data`, so that it
    /// drops (and unlists the MR, waiting for lookups) first.
    listing: Listing,
    #[pin]
    data: T::Mr,
}

// SAFETY: an MR is a pinned box whose fields drop in declaration order:
// `listing` unlists it before `data` drops and the memory goes; `head`,
// dropped before, has nothing to drop.
unsafe impl<T: Driver> Listable for Mr<T> {
    fn listing(&self) -> &Listing {
        &self.listing
    }
}

/// The part of an [`Mr`] that does not depend on the driver, so that the
/// C page callback, which cannot be generic, can reach it.
#[repr(C)]
struct MrHead {
    ib: Opaque<bindings::ib_mr>,
    /// Where `ib_sg_to_pages`' per-page callback puts pages, during
    /// `map_mr_sg` only.
    collector: core::cell::Cell<*mut KVec<u64>>,
}

/// # Safety
///
/// Called only by the kernel for the timer, work item or page walk of an
/// object of this device that it was set up for.
unsafe extern "C" fn collect_page(mr: *mut bindings::ib_mr, addr: u64) -> core::ffi::c_int {
    // SAFETY: only called by `ib_sg_to_pages` from `Mr::collect_pages`, on
    // an MR (whose head comes first) with the collector pointing at that
    // caller's live vector.
    let pages = unsafe { &mut *(*mr.cast::<MrHead>()).collector.get() };
    // The walk runs in the caller's context, which may not sleep.
    match pages.push(addr, kernel::alloc::flags::GFP_ATOMIC) {
        Ok(()) => 0,
        Err(_) => ENOMEM.to_errno(),
    }
}

// SAFETY: as for the core objects; `collector` is used only inside
// `map_mr_sg`, which the core never runs concurrently on one MR.
unsafe impl<T: Driver> Sync for Mr<T> {}
// SAFETY: as above.
unsafe impl<T: Driver> Send for Mr<T> {}

impl<T: Driver> Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

impl<T: Driver> Mr<T> {
    pub(crate) fn new(data: impl PinInit<T::Mr, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            head: MrHead {
                ib: Opaque::new(bindings::ib_mr::default()),
                collector: core::cell::Cell::new(core::ptr::null_mut()),
            },
            listing: Listing::new(),
            data <- data,
        }? Error)
    }

    /// # Safety
    ///
    /// `raw` must be the `ib_mr` of a live `Mr<T>` for `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::ib_mr) -> &'a Self {
        // SAFETY: first field of the `repr(C)` struct; live per the caller.
        unsafe { &*raw.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_mr {
        self.head.ib.get()
    }

    /// Walks `sg` into pages of the MR's page size (`ib_sg_to_pages`),
    /// collecting their addresses in `pages`; returns the entries mapped.
    ///
    /// # Safety
    ///
    /// `sg` must be a list of `nents` entries; no other `map_mr_sg` on this
    /// MR may run concurrently.
    pub(crate) unsafe fn collect_pages(
        &self,
        sg: *mut bindings::scatterlist,
        nents: core::ffi::c_int,
        offset: *mut core::ffi::c_uint,
        pages: &mut KVec<u64>,
    ) -> Result<core::ffi::c_int> {
        self.head.collector.set(pages);
        // SAFETY: forwarded from the caller; the callback finds the vector
        // through `collector`, reset before return.
        let mapped = unsafe {
            bindings::ib_sg_to_pages(self.as_raw(), sg, nents, offset, Some(collect_page))
        };
        self.head.collector.set(core::ptr::null_mut());
        if mapped < 0 {
            return Err(Error::from_errno(mapped));
        }
        Ok(mapped)
    }

    /// The device the region belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: the core sets `device` before the MR is used and MRs
        // exist only while their device's verbs run.
        unsafe { Device::from_ib((*self.as_raw()).device) }
    }

    /// Records the device and PD before the MR is published (the core
    /// sets the same only after the verb returns).
    ///
    /// # Safety
    ///
    /// The MR is not yet visible to anyone else, and `pd` is a live PD.
    pub(crate) unsafe fn set_owner(&self, pd: *mut bindings::ib_pd) {
        // SAFETY: the MR is not yet visible to anyone; `pd` is live (the
        // caller's contract).
        unsafe {
            (*self.as_raw()).device = (*pd).device;
            (*self.as_raw()).pd = pd;
        }
    }

    /// The region's protection domain, as the core knows it.
    pub(crate) fn pd_raw(&self) -> *mut bindings::ib_pd {
        // SAFETY: as in `pd_id`.
        unsafe { core::ptr::addr_of!((*self.as_raw()).pd).read_volatile() }
    }

    /// Moves the region to PD `pd` during a re-registration, as the core
    /// does after it (`WRITE_ONCE`); see `rereg_user_mr_cb`.
    ///
    /// # Safety
    ///
    /// `pd` is a live PD of the region's device that outlives the region's
    /// stay in it; the core serialises re-registrations of one region.
    pub(crate) unsafe fn move_to_pd(&self, pd: *mut bindings::ib_pd) {
        // SAFETY: the field is valid for writes while the MR lives; readers
        // load it once (`pd_id`), seeing the old or the new PD.
        unsafe { core::ptr::addr_of_mut!((*self.as_raw()).pd).write_volatile(pd) }
    }

    /// Identifies the region's protection domain (compared, never
    /// followed).
    pub fn pd_id(&self) -> usize {
        // `set_owner` sets the PD before the MR is published, but the core
        // rewrites it when a re-registration moves the region to another PD.
        // SAFETY: the field is valid for reads while the MR lives; one
        // volatile load (`READ_ONCE`) sees the old or the new PD, not a tear.
        unsafe { core::ptr::addr_of!((*self.as_raw()).pd).read_volatile() as usize }
    }

    /// Sets the keys the core reports for the region.
    pub(crate) fn set_keys(&self, lkey: u32, rkey: u32) {
        // SAFETY: the driver owns the MR's key fields; the core reads them
        // only after the verb that set them returns.
        unsafe {
            (*self.as_raw()).lkey = lkey;
            (*self.as_raw()).rkey = rkey;
        }
    }

    /// Sets the address and length the core reports for the region.
    pub(crate) fn set_range(&self, iova: u64, length: u64) {
        // SAFETY: as for `set_keys`.
        unsafe {
            (*self.as_raw()).iova = iova;
            (*self.as_raw()).length = length;
        }
    }
}

/// What a new memory region covers.
pub enum MrKind {
    /// All of kernel memory, addressed by kernel virtual (DMA) address.
    Dma {
        /// A kernel consumer's memory: `get_dma_mr` is a kernel verb.
        memory: super::umem::KernelMemory,
    },
    /// Pinned user memory, addressed from `iova`.
    User {
        /// The pinned pages.
        memory: super::umem::UserMemory,
        /// The address the region's first byte has on the wire.
        iova: u64,
    },
    /// User memory paged in on demand, addressed from `iova`.
    OnDemand {
        /// The registration.
        memory: super::odp::OdpMemory,
        /// The address the region's first byte has on the wire.
        iova: u64,
    },
    /// Pages given later by fast registration, at most `max_pages`.
    FastReg {
        /// Capacity of the page list.
        max_pages: u32,
        /// The pages `map_mr_sg` gives are a kernel consumer's: only
        /// kernel consumers allocate such regions (`ib_alloc_mr`).
        memory: super::umem::KernelMemory,
    },
}
