// SPDX-License-Identifier: GPL-2.0

//! Which CPU does a QP's work (`kapi::rdma::objects` in srnic). Each QP
//! has a home CPU, picked by its number, so that the QPs of a device
//! spread over the CPUs. What a process hands to a QP's work runs beside
//! it, so a handover from the QP's home CPU goes to the next CPU; a poster
//! that would gain no CPU by handing a large packet over copies it itself.
//!
//! CPUs are numbers; `None` leaves the choice to the workqueue (for the
//! kernel's per-CPU system queues, the queuing CPU), for a QP whose home
//! has gone offline. `next_online` gives the online CPU
//! after a CPU, wrapping around, or that CPU itself if it is the only one:
//! the caller's view of the CPU masks, asked only when needed.

/// Where a QP's work goes when queued now, from `this` CPU: its `home`,
/// unless a process (not a work, which the handover would not free) hands
/// it over from the home itself.
pub fn work_cpu(
    home: Option<u32>,
    this: u32,
    from_process: bool,
    next_online: impl FnOnce(u32) -> u32,
) -> Option<u32> {
    match home {
        Some(home) if from_process && home == this => Some(next_online(home)),
        other => other,
    }
}

/// Whether a process on `this` CPU had better copy a QP's large packet
/// itself than hand it to the QP's work. Only for a QP whose home is this
/// CPU (its work would go to the next one) and only when that next CPU is
/// already running a QP's work (`busy`), or there is none, or the home is
/// offline. A QP homed elsewhere is always handed there, busy or not: the
/// QPs of one process then divide between the poster's CPU and the others
/// by their numbers.
pub fn copy_in_poster(
    home: Option<u32>,
    this: u32,
    next_online: impl FnOnce(u32) -> u32,
    busy: impl FnOnce(u32) -> bool,
) -> bool {
    let Some(home) = home else {
        return true;
    };
    if home != this {
        return false;
    }
    let next = next_online(home);
    next == home || busy(next)
}

/// Where a QP's receive work goes, from `this` CPU: the QP's home, or, if
/// that is this CPU (or offline), the next online CPU, so that received
/// bulk is copied beside what this CPU goes on with (with one CPU, on
/// it). `None`, the workqueue's choice, when the CPU chosen is no longer
/// online.
pub fn receive_cpu(
    home: Option<u32>,
    this: u32,
    next_online: impl FnOnce(u32) -> u32,
    online: impl FnOnce(u32) -> bool,
) -> Option<u32> {
    let cpu = match home {
        Some(home) if home != this => home,
        _ => next_online(this),
    };
    online(cpu).then_some(cpu)
}
