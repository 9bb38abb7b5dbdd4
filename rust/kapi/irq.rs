// SPDX-License-Identifier: GPL-2.0

//! Interrupt vectors raised by software, the way an RNIC raises MSI-X
//! vectors: every vector is a real Linux IRQ of a private IRQ domain, so
//! `/proc/interrupts`, `/proc/irq/N/smp_affinity`, irqbalance and CPU
//! hotplug treat it as a device's interrupt.
//!
//! Raising a vector queues an event on it and interrupts the CPU of the
//! vector's effective affinity (an IPI, or an `irq_work` self-interrupt
//! when that is the raising CPU); there the IRQ is handled through
//! the generic IRQ layer (`handle_edge_irq`, per-CPU counts), and its
//! handler delivers the queued events. An event queued while the vector is
//! already raised rides on that interrupt (coalescing). With `threadirqs`
//! the handler runs in the IRQ's thread, whose priority `chrt` sets.
//!
//! A task that produces completions in a bounded run (a QP's work copying
//! a batch of messages) may hold the interrupts it would raise until the
//! run ends ([`SoftVectors::hold_raises`]), as an RNIC's interrupt
//! moderation does: a consumer waiting for events then wakes once per run,
//! not once per message, and a vector on another CPU costs one IPI per
//! run.

use crate::bindings;
use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr::null_mut;
use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use kernel::ffi::{c_int, c_uint};
use kernel::prelude::*;
use kernel::str::{CStr, CString};
use kernel::types::Opaque;
use kernel::{c_str, fmt};

/// No CPU: a vector no offlining has moved.
const NO_CPU: i32 = -1;

/// The CPU hotplug state of every vector set (dynamic; 0 when none).
static HOTPLUG_STATE: AtomicI32 = AtomicI32::new(0);

/// Vector sets added to [`HOTPLUG_STATE`] and not yet dropped.
static HOTPLUG_INSTANCES: AtomicUsize = AtomicUsize::new(0);

/// Registers the CPU hotplug callbacks that bring vectors back to a CPU
/// that comes online again. Call once at module load.
pub fn install() -> Result {
    // SAFETY: the name is static; the callbacks stay valid until `remove`,
    // which the module calls before it goes.
    let state = unsafe {
        bindings::srnic_cpuhp_setup_state_multi(
            c_str!("srnic/comp_vectors:online").as_char_ptr(),
            Some(cpu_online_cb),
            Some(cpu_offline_cb),
        )
    };
    if state < 0 {
        return Err(Error::from_errno(state));
    }
    HOTPLUG_STATE.store(state, Ordering::Release);
    Ok(())
}

/// Undoes [`install`] once every vector set is gone; with sets left it
/// keeps the state (their drops still take their instances out of it)
/// and fails with `EBUSY`.
pub fn remove() -> Result {
    let state = HOTPLUG_STATE.swap(0, Ordering::SeqCst);
    if state <= 0 {
        return Ok(());
    }
    if HOTPLUG_INSTANCES.load(Ordering::SeqCst) != 0 {
        HOTPLUG_STATE.store(state, Ordering::SeqCst);
        return Err(EBUSY);
    }
    // SAFETY: `state` came from `install`, and no instance is in it or
    // can come: a set counts itself before it reads the state, which is
    // cleared now.
    unsafe { bindings::srnic_cpuhp_remove_multi_state(state) };
    Ok(())
}

/// The interrupts a task's raises owe, sent when it drops
/// ([`SoftVectors::hold_raises`]). Not `Send`: the hold names the task
/// that made it.
#[must_use = "raises are held only until the guard drops"]
pub struct HeldRaises<'a> {
    set: &'a SoftVectors,
    /// The CPU whose holder slot this guard filled, if it did.
    slot: Option<usize>,
    _this_task: core::marker::PhantomData<*mut ()>,
}

impl Drop for HeldRaises<'_> {
    fn drop(&mut self) {
        let Some(cpu) = self.slot else {
            return;
        };
        if let Some(holder) = self.set.inner.holders.get(cpu) {
            holder.task.store(null_mut(), Ordering::Release);
        }
        // Every interrupt owed, this task's and any other holder's:
        // cheaper than tracking whose. Read before the swap, so that a
        // vector nobody owes stays a shared cache line; this task always
        // reads its own stores.
        for vector in self.set.inner.vectors.iter() {
            if vector.owed.load(Ordering::Relaxed) && vector.owed.swap(false, Ordering::AcqRel) {
                vector.kick();
            }
        }
    }
}

/// Something a vector delivers: a node the raiser links into the vector's
/// queue and the handler unlinks and passes to `deliver`. Embedded in the
/// object it notifies (a CQ), which calls [`SoftVectors::quiesce`] before
/// it goes.
///
/// # Invariants
///
/// Made by [`Self::init`] in memory that stays in place until
/// [`SoftVectors::quiesce`] returned for it. `node` is on no queue while
/// `queued` is clear: only the raiser that sets `queued` links it, and the
/// handler clears `queued` only after taking it off its queue.
#[repr(C)]
pub struct IrqEvent {
    node: Opaque<bindings::llist_node>,
    /// Linked into a vector's queue: set by the raiser, cleared by the
    /// handler just before `deliver`.
    queued: AtomicBool,
    deliver: unsafe fn(*const IrqEvent),
}

impl IrqEvent {
    /// Writes an unlinked event that calls `deliver` with its own address.
    ///
    /// # Safety
    /// `slot` is writable memory that stays in place while the event can
    /// be raised; `deliver` may be called in hard-IRQ context with the
    /// event's address until [`SoftVectors::quiesce`] returned.
    pub unsafe fn init(slot: *mut Self, deliver: unsafe fn(*const IrqEvent)) {
        // SAFETY: the caller guarantees `slot` is writable.
        unsafe {
            slot.write(Self {
                node: Opaque::new(bindings::llist_node::default()),
                queued: AtomicBool::new(false),
                deliver,
            })
        };
    }
}

/// One vector: its IRQ, its queue of raised events and its counts.
struct Vector {
    irq: c_uint,
    /// `srnic0-comp<N>`: the IRQ's name for as long as it is requested.
    name: CString,
    /// Raises the IRQ on this CPU (a self-interrupt).
    work: Opaque<bindings::irq_work>,
    /// Raises the IRQ on another CPU (an IPI).
    call: Opaque<bindings::call_single_data_t>,
    /// IPIs sent whose callback has not finished.
    calls_in_flight: AtomicU32,
    /// Events raised and not yet delivered.
    queue: Opaque<bindings::llist_head>,
    /// A holder of raises ([`HeldRaises`]) queued the first of the events
    /// now queued and owes the interrupt; its drop (or any holder's) sends
    /// it.
    owed: AtomicBool,
    requested: AtomicBool,
    /// Events delivered.
    delivered: AtomicU64,
    /// Events that found the vector already raised, or its interrupt
    /// owed by a holder, and rode along.
    coalesced: AtomicU64,
    /// Handler runs begun and ended. The IRQ core runs one handler of an
    /// IRQ at a time, so when `ended` reaches a value `begun` had, every
    /// run begun by then is over.
    begun: AtomicU64,
    ended: AtomicU64,
    /// The CPU whose offlining moved this vector away, and the affinity it
    /// had: it goes back when that CPU returns.
    displaced_from: AtomicI32,
    saved_affinity: UnsafeCell<bindings::cpumask>,
}

impl Vector {
    /// Interrupts `cpu` to handle the vector there; false if it cannot
    /// (no such CPU online), so the caller handles it on its own CPU.
    fn interrupt(&self, cpu: c_int) -> bool {
        self.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        // Only the raiser that found the queue empty, or the one that took
        // over a holder's owed interrupt, sends the call; one still pending
        // (-EBUSY) is one whose run takes the new event too.
        // SAFETY: the call is initialised (`SoftVectors`' type invariant).
        let ret = unsafe { bindings::smp_call_function_single_async(cpu, self.call.get()) };
        if ret == 0 {
            return true;
        }
        self.calls_in_flight.fetch_sub(1, Ordering::AcqRel);
        if ret == EBUSY.to_errno() {
            self.coalesced.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Has the vector's CPU handle its queue: an IPI, or a self-interrupt
    /// when that is this CPU (or it cannot be interrupted). Any context.
    fn kick(&self) {
        // With preemption off no CPU can go offline between reading the
        // affinity and interrupting it.
        // SAFETY: balanced below; the IRQ is mapped while the vector exists
        // (`SoftVectors`' type invariant), and so is its work.
        unsafe {
            bindings::srnic_preempt_disable();
            let cpu = bindings::srnic_irq_effective_cpu(self.irq);
            if cpu == bindings::srnic_this_cpu() || !self.interrupt(cpu) {
                bindings::irq_work_queue(self.work.get());
            }
            bindings::srnic_preempt_enable();
        }
    }

    /// Waits until no interrupt of the vector is raised or handled.
    /// Sleeps.
    fn wait_idle(&self) {
        // SAFETY: the work and IRQ live as long as the vector; these only
        // wait.
        unsafe {
            while self.calls_in_flight.load(Ordering::Acquire) != 0 {
                bindings::msleep(1);
            }
            bindings::irq_work_sync(self.work.get());
            bindings::synchronize_irq(self.irq);
        }
    }
}

/// A set of software-raised IRQ vectors (a device's completion vectors).
///
/// # Invariants
///
/// `inner.fwnode` and `inner.domain` are NULL or the set's own. Until
/// `drop`, every vector in `inner.vectors` has its `irq` mapped in that
/// domain and its `work` and `call` initialised to raise it with the
/// vector's pinned address; if `requested`, the IRQ is requested with that
/// address as `dev_id`. `hotplug` is an instance of hotplug state
/// `hotplug_state` (from [`install`]) exactly when that is positive.
#[pin_data(PinnedDrop)]
pub struct SoftVectors {
    /// This set's instance of the CPU hotplug state.
    #[pin]
    hotplug: Opaque<bindings::hlist_node>,
    inner: Inner,
}

struct Inner {
    /// The hotplug state `hotplug` was added to (0: none). Kept here, not
    /// read back from [`install`]'s global at drop, so that a [`remove`]
    /// in between cannot make the drop name another state.
    hotplug_state: c_int,
    fwnode: *mut bindings::fwnode_handle,
    domain: *mut bindings::irq_domain,
    vectors: KVec<Pin<KBox<Vector>>>,
    /// By CPU number: who holds raises there ([`SoftVectors::hold_raises`]).
    holders: KVec<Holder>,
}

/// A CPU's holder of raises, on a cache line of its own: each CPU's is
/// written on every hold.
#[repr(align(64))]
struct Holder {
    /// The task whose raises on the CPU are held, or null. Compared,
    /// never followed.
    task: AtomicPtr<c_void>,
}

// SAFETY: the raw pointers are the set's own domain objects, used only to
// tear them down in `drop`; vectors are reached through shared references
// to atomics, the kernel-synchronised irq_work and llist, and the saved
// affinity, which only the serialised hotplug callbacks touch.
unsafe impl Send for SoftVectors {}
// SAFETY: as above.
unsafe impl Sync for SoftVectors {}

/// Our software interrupt chip: nothing to program, only an affinity.
struct Chip(bindings::irq_chip);
// SAFETY: read-only after compilation; the kernel only reads it.
unsafe impl Sync for Chip {}

static CHIP: Chip = Chip(bindings::irq_chip {
    name: c_str!("srnic").as_char_ptr(),
    irq_ack: Some(ack_cb),
    irq_set_affinity: Some(set_affinity_cb),
    flags: bindings::IRQCHIP_SKIP_SET_WAKE as _,
    // SAFETY: the remaining fields are optional callbacks and data; zero
    // (none) is valid for each.
    ..unsafe { core::mem::zeroed() }
});

struct DomainOps(bindings::irq_domain_ops);
// SAFETY: as for `Chip`.
unsafe impl Sync for DomainOps {}

static DOMAIN_OPS: DomainOps = DomainOps(bindings::irq_domain_ops {
    map: Some(map_cb),
    // SAFETY: as for `CHIP`.
    ..unsafe { core::mem::zeroed() }
});

/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn map_cb(
    _domain: *mut bindings::irq_domain,
    irq: c_uint,
    _hwirq: bindings::irq_hw_number_t,
) -> c_int {
    // SAFETY: the domain maps a fresh descriptor; the chip is static.
    unsafe { bindings::srnic_irq_set_soft_chip(irq, &CHIP.0) };
    0
}

/// The edge flow acknowledges every interrupt; a software one needs
/// nothing.
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn ack_cb(_data: *mut bindings::irq_data) {}

/// The chip's affinity setter: the first online CPU of `mask` takes the
/// vector; the next raise goes there.
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn set_affinity_cb(
    data: *mut bindings::irq_data,
    mask: *const bindings::cpumask,
    force: bool,
) -> c_int {
    // SAFETY: the IRQ core passes the vector's data and a valid mask.
    let cpu = unsafe {
        if force {
            bindings::srnic_cpumask_first(mask)
        } else {
            bindings::srnic_cpumask_first_online(mask)
        }
    };
    // SAFETY: no preconditions.
    if cpu >= unsafe { bindings::srnic_nr_cpu_ids() } {
        return EINVAL.to_errno();
    }
    // SAFETY: `data` is the vector's, under the descriptor lock the core
    // holds while calling the chip.
    unsafe { bindings::srnic_irq_update_effective_cpu(data, cpu) };
    bindings::SRNIC_IRQ_SET_MASK_OK as c_int
}

/// Runs on the raising CPU, interrupts off: hands the IRQ to the generic
/// layer, which counts it and calls the handler.
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn raise_here_cb(work: *mut bindings::irq_work) {
    let offset = core::mem::offset_of!(Vector, work);
    // SAFETY: only a vector's irq_work runs this; the vector outlives its
    // work (`drop` syncs it).
    let vector = unsafe { &*work.cast::<u8>().sub(offset).cast::<Vector>() };
    // SAFETY: irq_work callbacks run with interrupts disabled; the IRQ is
    // mapped while the vector exists.
    unsafe { bindings::generic_handle_irq(vector.irq) };
}

/// The IPI's callback on the target CPU, interrupts off: as above.
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn raise_there_cb(info: *mut c_void) {
    // SAFETY: `info` is the vector whose `call` this is; `drop` waits for
    // `calls_in_flight` to fall to zero, which is this callback's last
    // access.
    let vector = unsafe { &*info.cast::<Vector>() };
    // SAFETY: as in `raise_here_cb`.
    unsafe { bindings::generic_handle_irq(vector.irq) };
    vector.calls_in_flight.fetch_sub(1, Ordering::Release);
}

/// The vector's IRQ handler: delivers its queued events, oldest first.
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn handler_cb(_irq: c_int, dev_id: *mut c_void) -> bindings::irqreturn {
    // SAFETY: `dev_id` is the vector given to `request_threaded_irq`,
    // which `free_irq` (waiting for running handlers) ends before it goes.
    let vector = unsafe { &*dev_id.cast::<Vector>() };
    vector.begun.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the queue is a valid llist head.
    let mut node =
        unsafe { bindings::llist_reverse_order(bindings::srnic_llist_del_all(vector.queue.get())) };
    let offset = core::mem::offset_of!(IrqEvent, node);
    while !node.is_null() {
        // SAFETY: by `IrqEvent`'s type invariant, every node on a queue is
        // the `node` of a live `IrqEvent`, whose owner waits in `quiesce`
        // until `queued` is clear and this handler has returned.
        unsafe {
            let next = (*node).next;
            let event = node.cast::<u8>().sub(offset).cast::<IrqEvent>();
            // Cleared before delivering: an event raised during delivery
            // is queued again, not lost.
            (*event).queued.store(false, Ordering::SeqCst);
            ((*event).deliver)(event);
            node = next;
        }
        vector.delivered.fetch_add(1, Ordering::Relaxed);
    }
    vector.ended.fetch_add(1, Ordering::SeqCst);
    bindings::irqreturn_IRQ_HANDLED
}

/// # Safety
/// `node` is the `hotplug` field of a live `SoftVectors`.
unsafe fn from_hotplug_node<'a>(node: *mut bindings::hlist_node) -> &'a SoftVectors {
    let offset = core::mem::offset_of!(SoftVectors, hotplug);
    // SAFETY: the caller guarantees `node` lies in a live set.
    unsafe { &*node.cast::<u8>().sub(offset).cast::<SoftVectors>() }
}

/// A CPU is about to go: remember which vectors it serves, and their
/// affinity, so they return with it. (The IRQ core then moves them.)
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn cpu_offline_cb(cpu: c_uint, node: *mut bindings::hlist_node) -> c_int {
    // SAFETY: instances are removed before their set drops.
    let set = unsafe { from_hotplug_node(node) };
    for vector in set.inner.vectors.iter() {
        // SAFETY: the IRQ is mapped while the vector exists.
        let serving = unsafe { bindings::srnic_irq_effective_cpu(vector.irq) };
        // A vector already displaced keeps the affinity from before its
        // first move, to return to when that CPU comes back.
        if serving as c_uint != cpu || vector.displaced_from.load(Ordering::Acquire) != NO_CPU {
            continue;
        }
        // SAFETY: the hotplug core serialises the callbacks of a state, the
        // only users of `saved_affinity`; the IRQ's mask is valid.
        unsafe { *vector.saved_affinity.get() = *bindings::srnic_irq_affinity(vector.irq) };
        vector.displaced_from.store(cpu as i32, Ordering::Release);
    }
    0
}

/// A CPU came back: the vectors its offlining moved return to it.
///
/// # Safety
///
/// Called only by the IRQ core, irq_work, an IPI or CPU hotplug for the
/// vectors and domain this module set up, with the data it registered.
unsafe extern "C" fn cpu_online_cb(cpu: c_uint, node: *mut bindings::hlist_node) -> c_int {
    // SAFETY: as in `cpu_offline_cb`.
    let set = unsafe { from_hotplug_node(node) };
    for vector in set.inner.vectors.iter() {
        if vector.displaced_from.load(Ordering::Acquire) != cpu as i32 {
            continue;
        }
        vector.displaced_from.store(NO_CPU, Ordering::Release);
        // SAFETY: serialised as in `cpu_offline_cb`; the IRQ is mapped. A
        // failure leaves the vector where the IRQ core put it.
        let _ = unsafe { bindings::irq_set_affinity(vector.irq, vector.saved_affinity.get()) };
    }
    0
}

impl SoftVectors {
    /// Creates `count` vectors whose IRQs are called `<prefix><N>`, each
    /// aimed at its own CPU (as far as there are CPUs).
    pub fn new(prefix: &CStr, count: u32) -> Result<Pin<KBox<Self>>> {
        let mut set = KBox::pin_init(
            pin_init!(Self {
                hotplug: Opaque::new(bindings::hlist_node::default()),
                inner: Inner {
                    hotplug_state: 0,
                    fwnode: null_mut(),
                    domain: null_mut(),
                    vectors: KVec::new(),
                    holders: KVec::new(),
                },
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `inner` is not structurally pinned; only `hotplug` is,
        // and it is not moved. On error the set drops, undoing what was
        // done so far.
        let inner = unsafe { &mut Pin::get_unchecked_mut(set.as_mut()).inner };
        // SAFETY: the name is copied by the callee.
        inner.fwnode =
            unsafe { bindings::srnic_irq_domain_alloc_named_fwnode(prefix.as_char_ptr()) };
        if inner.fwnode.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: a fresh fwnode and our static ops.
        inner.domain =
            unsafe { bindings::srnic_irq_domain_create_linear(inner.fwnode, count, &DOMAIN_OPS.0) };
        if inner.domain.is_null() {
            return Err(ENOMEM);
        }
        inner.vectors.reserve(count as usize, GFP_KERNEL)?;
        // SAFETY: no preconditions.
        let cpus = unsafe { bindings::srnic_nr_cpu_ids() };
        inner.holders.reserve(cpus as usize, GFP_KERNEL)?;
        for _ in 0..cpus {
            inner.holders.push(
                Holder {
                    task: AtomicPtr::new(null_mut()),
                },
                GFP_KERNEL,
            )?;
        }
        for index in 0..count {
            // SAFETY: `index` is below the domain's size.
            let irq = unsafe {
                bindings::irq_create_mapping_affinity(inner.domain, index as _, core::ptr::null())
            };
            if irq == 0 {
                return Err(ENOMEM);
            }
            let name = CString::try_from_fmt(fmt!("{}{}", prefix, index));
            let vector = name.and_then(|name| {
                KBox::pin(
                    Vector {
                        irq,
                        name,
                        // Initialised below, in place.
                        work: Opaque::uninit(),
                        call: Opaque::uninit(),
                        calls_in_flight: AtomicU32::new(0),
                        queue: Opaque::new(bindings::llist_head::default()),
                        owed: AtomicBool::new(false),
                        requested: AtomicBool::new(false),
                        delivered: AtomicU64::new(0),
                        coalesced: AtomicU64::new(0),
                        begun: AtomicU64::new(0),
                        ended: AtomicU64::new(0),
                        displaced_from: AtomicI32::new(NO_CPU),
                        // SAFETY: an empty mask is all zeroes.
                        saved_affinity: UnsafeCell::new(unsafe { core::mem::zeroed() }),
                    },
                    GFP_KERNEL,
                )
                .map_err(Into::into)
            });
            let vector = match vector {
                Ok(vector) => vector,
                Err(err) => {
                    // SAFETY: mapped above and not requested.
                    unsafe { bindings::irq_dispose_mapping(irq) };
                    return Err(err);
                }
            };
            let info: *const Vector = &*vector;
            // SAFETY: both are in the vector's fixed allocation.
            unsafe {
                bindings::srnic_init_irq_work_hard(vector.work.get(), Some(raise_here_cb));
                bindings::srnic_init_csd(
                    vector.call.get(),
                    Some(raise_there_cb),
                    info.cast_mut().cast(),
                );
            }
            inner.vectors.push(vector, GFP_KERNEL)?;
        }
        for (index, vector) in inner.vectors.iter().enumerate() {
            let dev_id: *const Vector = &**vector;
            // SAFETY: the handler and `dev_id` stay valid until `free_irq`
            // in `drop`; so does the name.
            let ret = unsafe {
                bindings::request_threaded_irq(
                    vector.irq,
                    Some(handler_cb),
                    None,
                    0,
                    vector.name.as_char_ptr(),
                    dev_id.cast_mut().cast(),
                )
            };
            if ret != 0 {
                return Err(Error::from_errno(ret));
            }
            vector.requested.store(true, Ordering::Release);
            // The hint tells irqbalance the home CPU; the user may still
            // move the vector.
            // SAFETY: the mask is static (`cpumask_of`).
            unsafe {
                let home = bindings::srnic_cpumask_of(crate::kapi::cpu::spread(index as u32));
                bindings::__irq_apply_affinity_hint(vector.irq, home, true);
            }
        }
        // Counted before the state is read, so that `remove`, which clears
        // the state before it reads the count, either sees this set or
        // leaves it a cleared state to skip.
        HOTPLUG_INSTANCES.fetch_add(1, Ordering::SeqCst);
        let state = HOTPLUG_STATE.load(Ordering::SeqCst);
        if state <= 0 {
            HOTPLUG_INSTANCES.fetch_sub(1, Ordering::SeqCst);
            return Ok(set);
        }
        // SAFETY: the node is pinned in the set, which removes the instance
        // in `drop` before it goes.
        let ret = unsafe { bindings::srnic_cpuhp_add_instance(state, set.hotplug.get()) };
        if ret != 0 {
            HOTPLUG_INSTANCES.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::from_errno(ret));
        }
        // SAFETY: as above.
        unsafe { Pin::get_unchecked_mut(set.as_mut()).inner.hotplug_state = state };
        Ok(set)
    }

    /// The number of vectors.
    pub fn count(&self) -> u32 {
        self.inner.vectors.len() as u32
    }

    /// Raises `event` on vector `index`: its delivery runs soon in the
    /// vector's handler on the vector's CPU. An event already raised and
    /// not yet delivered is delivered once. Any context.
    pub fn raise(&self, index: u32, event: &IrqEvent) {
        let Some(vector) = self.inner.vectors.get(index as usize) else {
            return;
        };
        if event.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: by the type invariant of `IrqEvent`, the event stays in
        // place until its owner's `quiesce`, and its node, `queued` having
        // been clear, is on no queue; the queue is a valid llist head.
        let was_empty = unsafe { bindings::srnic_llist_add(event.node.get(), vector.queue.get()) };
        if !was_empty {
            // The vector is raised already (or owed by a holder); its
            // handler takes this too.
            vector.coalesced.fetch_add(1, Ordering::Relaxed);
            // Someone not holding does not wait for a holder's run to
            // end (a holder preempted by this raiser would keep its event
            // until it runs again): it sends the interrupt owed, once.
            if vector.owed.load(Ordering::Relaxed)
                && !self.held_here()
                && vector.owed.swap(false, Ordering::AcqRel)
            {
                vector.kick();
            }
            return;
        }
        if self.held_here() {
            // Sent when the holder's run ends; raises until then, from
            // any CPU, find the queue taken and ride along.
            vector.owed.store(true, Ordering::Release);
            return;
        }
        vector.kick();
    }

    /// Whether the caller is a task whose raises on this CPU are held.
    fn held_here(&self) -> bool {
        // SAFETY: no preconditions; null outside task context, so that an
        // interrupt never defers its raise to the task it interrupted.
        let task = unsafe { bindings::srnic_task_here() };
        if task.is_null() {
            return false;
        }
        // A task that moves to another CPU right after this read still
        // finds its own slot: it is the one that set it.
        // SAFETY: no preconditions.
        let cpu = unsafe { bindings::srnic_raw_this_cpu() };
        self.inner
            .holders
            .get(cpu as usize)
            .is_some_and(|holder| holder.task.load(Ordering::Relaxed) == task)
    }

    /// Holds the interrupts that this task's raises on this CPU would send
    /// until the guard drops, which sends each one once. Events still
    /// reach their queues at once; a raise by anyone not holding sends an
    /// owed interrupt at once, and other holders' raises ride along, so
    /// every event is delivered after the drop at the latest. Hold only
    /// across a run of bounded length that never waits for an event's
    /// delivery, nor for a lock whose holder may: [`Self::quiesce`], which
    /// a CQ's destruction calls, may wait for the drop. A CPU held by
    /// another task, or a hold within a hold on the same CPU, holds
    /// nothing.
    pub fn hold_raises(&self) -> HeldRaises<'_> {
        // SAFETY: no preconditions.
        let task = unsafe { bindings::srnic_task_here() };
        // SAFETY: no preconditions.
        let cpu = unsafe { bindings::srnic_raw_this_cpu() } as usize;
        let slot = match self.inner.holders.get(cpu) {
            Some(holder) if !task.is_null() => holder
                .task
                .compare_exchange(null_mut(), task, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
                .then_some(cpu),
            _ => None,
        };
        HeldRaises {
            set: self,
            slot,
            _this_task: core::marker::PhantomData,
        }
    }

    /// Waits until `event`, raised on vector `index`, is neither queued
    /// nor being delivered. The caller ensures nothing raises it again.
    /// Sleeps; other events of the vector do not hold it up, but a
    /// holder's run that owes the vector's interrupt does, until it ends.
    pub fn quiesce(&self, index: u32, event: &IrqEvent) {
        let Some(vector) = self.inner.vectors.get(index as usize) else {
            return;
        };
        // Queued events are delivered soon: their interrupt is raised, or
        // about to be, or owed by a holder whose bounded run is about to
        // end.
        while event.queued.load(Ordering::SeqCst) {
            // SAFETY: process context.
            unsafe { bindings::msleep(1) };
        }
        // The handler run that cleared `queued` had begun by now; wait
        // until it (and so its delivery) is over.
        let begun = vector.begun.load(Ordering::SeqCst);
        while vector.ended.load(Ordering::SeqCst) < begun {
            // SAFETY: process context.
            unsafe { bindings::msleep(1) };
        }
    }

    /// The CPUs vector `index` runs on, for kernel consumers placing their
    /// queues (`get_vector_affinity`).
    pub fn effective_affinity(&self, index: u32) -> *const bindings::cpumask {
        match self.inner.vectors.get(index as usize) {
            // SAFETY: the IRQ is mapped (type invariant); the mask lives in
            // its descriptor.
            Some(vector) => unsafe { bindings::srnic_irq_effective_affinity(vector.irq) },
            None => core::ptr::null(),
        }
    }

    /// The Linux IRQ number of vector `index`.
    pub fn irq(&self, index: u32) -> Option<u32> {
        self.inner
            .vectors
            .get(index as usize)
            .map(|vector| vector.irq)
    }

    /// Events delivered by vector `index`, and how many of them rode on an
    /// interrupt raised for another.
    pub fn counts(&self, index: u32) -> (u64, u64) {
        self.inner
            .vectors
            .get(index as usize)
            .map(|v| {
                (
                    v.delivered.load(Ordering::Relaxed),
                    v.coalesced.load(Ordering::Relaxed),
                )
            })
            .unwrap_or((0, 0))
    }
}

#[pinned_drop]
impl PinnedDrop for SoftVectors {
    fn drop(self: Pin<&mut Self>) {
        let hotplug = self.hotplug.get();
        // SAFETY: nothing is moved out; the set is being dropped.
        let inner = unsafe { &mut Pin::get_unchecked_mut(self).inner };
        if inner.hotplug_state > 0 {
            // SAFETY: an instance of that state (type invariant); after
            // this no callback sees the set.
            unsafe { bindings::srnic_cpuhp_remove_instance(inner.hotplug_state, hotplug) };
            HOTPLUG_INSTANCES.fetch_sub(1, Ordering::SeqCst);
        }
        for vector in inner.vectors.iter() {
            // Nothing raises the vector any more (its events' owners are
            // gone): once the raises under way have run, none comes.
            vector.wait_idle();
            if vector.requested.load(Ordering::Acquire) {
                let dev_id: *const Vector = &**vector;
                // SAFETY: requested in `new` with this `dev_id`; the hint
                // must be gone before the IRQ is freed. `free_irq` waits
                // for a running handler.
                unsafe {
                    bindings::__irq_apply_affinity_hint(vector.irq, core::ptr::null(), false);
                    bindings::free_irq(vector.irq, dev_id.cast_mut().cast());
                }
            }
            // SAFETY: the IRQ is free and its work idle.
            unsafe { bindings::irq_dispose_mapping(vector.irq) };
        }
        drop(core::mem::replace(&mut inner.vectors, KVec::new()));
        if !inner.domain.is_null() {
            // SAFETY: every mapping is disposed of.
            unsafe { bindings::irq_domain_remove(inner.domain) };
        }
        if !inner.fwnode.is_null() {
            // SAFETY: the domain using it is gone.
            unsafe { bindings::irq_domain_free_fwnode(inner.fwnode) };
        }
    }
}
