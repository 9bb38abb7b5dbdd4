// SPDX-License-Identifier: GPL-2.0

//! iblan's forwarding table of foreign MACs: learning, moves, ageing,
//! bounded buckets and what is never learned.

use srnic_pure::fdb::*;

fn table() -> Fdb<Vec<Slot>> {
    Fdb::new(vec![Slot::FREE; DEFAULT_SLOTS], AGEING_MS)
}

fn mac(n: u32) -> [u8; 6] {
    let b = n.to_be_bytes();
    [0x52, 0x54, b[0], b[1], b[2], b[3]]
}

#[test]
fn learns_refreshes_and_moves() {
    let mut fdb = table();
    let m = mac(1);
    assert_eq!(fdb.lookup(&m, 0), None);
    assert_eq!(fdb.learn(&m, 7, 10), Learned::New);
    assert_eq!(fdb.lookup(&m, 11), Some(7));
    assert_eq!(fdb.learn(&m, 7, 20), Learned::Refreshed);
    assert_eq!(fdb.learn(&m, 9, 30), Learned::Moved);
    assert_eq!(fdb.lookup(&m, 31), Some(9));
    assert_eq!(fdb.len(31), 1);
}

#[test]
fn entries_age_out() {
    let mut fdb = Fdb::new(vec![Slot::FREE; DEFAULT_SLOTS], 1000);
    let m = mac(2);
    fdb.learn(&m, 3, 5000);
    assert_eq!(fdb.lookup(&m, 5999), Some(3));
    assert_eq!(fdb.lookup(&m, 6000), None);
    assert!(fdb.is_empty(6000));
    // An aged entry is learned anew, in its old slot or another.
    assert_eq!(fdb.learn(&m, 4, 6000), Learned::New);
    assert_eq!(fdb.len(6000), 1);
    // A clock that goes backwards never makes an entry older.
    assert_eq!(fdb.lookup(&m, 10), Some(4));
}

#[test]
fn never_learns_group_zero_or_bad_lids() {
    let mut fdb = table();
    assert_eq!(fdb.learn(&[0xff; 6], 5, 0), Learned::Ignored);
    assert_eq!(fdb.learn(&[0x33, 0x33, 0, 0, 0, 1], 5, 0), Learned::Ignored);
    assert_eq!(fdb.learn(&[0; 6], 5, 0), Learned::Ignored);
    for lid in [0, 0xc000, 0xffff] {
        assert_eq!(fdb.learn(&mac(4), lid, 0), Learned::Ignored);
    }
    assert!(fdb.is_empty(0));
}

#[test]
fn a_full_bucket_replaces_its_least_recently_seen() {
    let mut fdb = table();
    // Many more MACs than slots: the table stays bounded, every live entry
    // answers with the LID it was learned with, and the newest is known.
    for n in 0..(4 * DEFAULT_SLOTS as u32) {
        let learned = fdb.learn(&mac(n), (n % 100 + 1) as u16, u64::from(n));
        assert_ne!(learned, Learned::Ignored);
        assert_eq!(
            fdb.lookup(&mac(n), u64::from(n)),
            Some((n % 100 + 1) as u16)
        );
    }
    let now = 4 * DEFAULT_SLOTS as u64;
    assert!(fdb.len(now) <= DEFAULT_SLOTS);
    for entry in fdb.entries(now) {
        let n = u32::from_be_bytes([entry.mac[2], entry.mac[3], entry.mac[4], entry.mac[5]]);
        assert_eq!(entry.lid, (n % 100 + 1) as u16);
        assert_eq!(entry.age_ms, now - u64::from(n));
    }
}

#[test]
fn forgetting_a_node_forgets_its_macs() {
    let mut fdb = table();
    for n in 0..20 {
        fdb.learn(&mac(n), if n % 2 == 0 { 1 } else { 2 }, 0);
    }
    assert_eq!(fdb.forget_lid(1), 10);
    assert_eq!(fdb.lookup(&mac(0), 0), None);
    assert_eq!(fdb.lookup(&mac(1), 0), Some(2));
    fdb.clear();
    assert!(fdb.is_empty(0));
}

#[test]
fn short_tables_learn_nothing_and_never_panic() {
    for len in 0..WAYS {
        let mut fdb = Fdb::new(vec![Slot::FREE; len], AGEING_MS);
        assert_eq!(fdb.learn(&mac(1), 1, 0), Learned::Ignored);
        assert_eq!(fdb.lookup(&mac(1), 0), None);
    }
    // A length that is not a multiple of the ways uses whole buckets only.
    let mut fdb = Fdb::new(vec![Slot::FREE; WAYS + 1], AGEING_MS);
    for n in 0..10 {
        fdb.learn(&mac(n), 1, u64::from(n));
    }
    assert!(fdb.len(10) <= WAYS);
}
