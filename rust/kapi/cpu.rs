// SPDX-License-Identifier: GPL-2.0

//! The CPUs as a QP's works see them (`pure::qp_cpu` decides): a
//! moment's view of the online mask, which may change at once. Callers
//! use it for hints and give the workqueue any CPU that may have gone.

use crate::bindings;

/// The online CPU after `cpu`, wrapping around; `cpu` itself if it is the
/// only one.
pub fn next_online(cpu: u32) -> u32 {
    // SAFETY: no preconditions: reads `nr_cpu_ids`.
    let cpus = unsafe { bindings::srnic_nr_cpu_ids() };
    // SAFETY: no preconditions: reads the online mask; a number at or
    // above `nr_cpu_ids` reads as "none after it".
    let next = unsafe { bindings::srnic_next_online_cpu_after(cpu) };
    if next < cpus {
        return next;
    }
    // SAFETY: no preconditions: reads the online mask.
    let first = unsafe { bindings::srnic_first_online_cpu() };
    if first < cpus {
        first
    } else {
        cpu
    }
}

/// Whether `cpu` is online now.
pub fn is_online(cpu: u32) -> bool {
    // SAFETY: no preconditions: out-of-range numbers read as offline.
    unsafe { bindings::srnic_cpu_online(cpu) }
}

/// The CPU this code runs on, which may change at once unless preemption
/// is off: a hint.
pub fn this_cpu_hint() -> u32 {
    // SAFETY: no preconditions.
    unsafe { bindings::srnic_raw_this_cpu() as u32 }
}

/// Whether this is a process's own context: a task, not an interrupt, a
/// softirq or a workqueue's worker.
pub fn in_process() -> bool {
    // SAFETY: no preconditions: reads the preempt count and task flags.
    unsafe { bindings::srnic_in_process() }
}

/// The number of online CPUs.
pub fn online_count() -> u32 {
    // SAFETY: no preconditions.
    unsafe { bindings::srnic_num_online_cpus() }
}

/// Whether more than one CPU is online: work handed to "another CPU" can
/// run beside this one.
pub fn others_online() -> bool {
    online_count() > 1
}

/// The CPU of queue `index` of a device, spread as the kernel spreads a
/// device's queues over the CPUs.
pub fn spread(index: u32) -> u32 {
    // SAFETY: no preconditions; -1 is NUMA_NO_NODE.
    unsafe { bindings::cpumask_local_spread(index, -1) }
}

/// The CPU that object number `number` (a QP's) calls its own: objects
/// spread over the online CPUs as a device's queues do. `None` if it is
/// offline by now.
pub fn home_of(number: u32) -> Option<u32> {
    let cpu = spread(number.checked_rem(online_count()).unwrap_or(0));
    is_online(cpu).then_some(cpu)
}

/// The workqueue's CPU argument for `cpu`: `None` lets it choose (for the
/// kernel's per-CPU system queues, the queuing CPU).
pub fn for_workqueue(cpu: Option<u32>) -> i32 {
    match cpu.and_then(|cpu| i32::try_from(cpu).ok()) {
        Some(cpu) => cpu,
        // SAFETY: no preconditions: a constant.
        None => unsafe { bindings::srnic_work_cpu_unbound() },
    }
}
