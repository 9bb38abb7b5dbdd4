// SPDX-License-Identifier: GPL-2.0

//! Which CPU does a QP's work, and when a poster copies itself.

use srnic_pure::qp_cpu::{copy_in_poster, receive_cpu, work_cpu};

/// `next_online` over CPUs 0..count, all online.
fn ring_of(count: u32) -> impl Fn(u32) -> u32 {
    move |cpu| (cpu + 1) % count
}

#[test]
fn work_goes_home_unless_a_process_hands_over_from_there() {
    let next = ring_of(2);
    assert_eq!(work_cpu(Some(0), 1, true, &next), Some(0));
    assert_eq!(work_cpu(Some(0), 0, true, &next), Some(1));
    // A work or an interrupt on the home CPU keeps it there.
    assert_eq!(work_cpu(Some(0), 0, false, &next), Some(0));
    // One CPU: the handover has nowhere else to go.
    assert_eq!(work_cpu(Some(0), 0, true, ring_of(1)), Some(0));
    // An offline home: any CPU.
    assert_eq!(work_cpu(None, 0, true, &next), None);
}

#[test]
fn poster_copies_only_for_its_own_cpus_qps_when_the_next_is_busy() {
    let next = ring_of(2);
    let busy = |_| true;
    let idle = |_| false;
    // Homed elsewhere: handed over, busy or not.
    assert!(!copy_in_poster(Some(1), 0, &next, busy));
    assert!(!copy_in_poster(Some(1), 0, &next, idle));
    // Homed here: the work would take CPU 1.
    assert!(copy_in_poster(Some(0), 0, &next, busy));
    assert!(!copy_in_poster(Some(0), 0, &next, idle));
    // The busy CPU asked about is the one the work would take.
    assert!(copy_in_poster(Some(2), 2, ring_of(4), |cpu| cpu == 3));
    assert!(!copy_in_poster(Some(2), 2, ring_of(4), |cpu| cpu == 1));
    // No other CPU, or an offline home: nothing to gain by handing over.
    assert!(copy_in_poster(Some(0), 0, ring_of(1), idle));
    assert!(copy_in_poster(None, 0, &next, idle));
}

#[test]
fn receive_work_goes_beside_this_cpu() {
    let next = ring_of(4);
    let online = |_| true;
    assert_eq!(receive_cpu(Some(2), 0, &next, online), Some(2));
    assert_eq!(receive_cpu(Some(0), 0, &next, online), Some(1));
    assert_eq!(receive_cpu(None, 3, &next, online), Some(0));
    // The CPU chosen went offline in between: the workqueue's choice.
    assert_eq!(receive_cpu(Some(0), 0, &next, |cpu| cpu != 1), None);
    assert_eq!(receive_cpu(Some(2), 0, &next, |cpu| cpu != 2), None);
    // One CPU: it takes the work too.
    assert_eq!(receive_cpu(Some(0), 0, ring_of(1), online), Some(0));
}
