// SPDX-License-Identifier: GPL-2.0

//! Ring index arithmetic against a model, and hostile indices.

use srnic_pure::ring::{RingError, RingGeometry};
use std::collections::VecDeque;

/// A small deterministic generator: the tests need variety, not quality.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

#[test]
fn construction() {
    assert_eq!(RingGeometry::new(0, 64, 100), Err(RingError::ZeroCapacity));
    assert_eq!(RingGeometry::new(101, 64, 100), Err(RingError::TooLarge));
    assert_eq!(RingGeometry::new(1, 0, 100), Err(RingError::BadElementSize));
    assert_eq!(
        RingGeometry::new(1, (1 << 20) + 1, 100),
        Err(RingError::BadElementSize)
    );
    assert_eq!(
        RingGeometry::new(u32::MAX, 64, u32::MAX),
        Err(RingError::TooLarge)
    );
    // 2^20 slots of 2^12 bytes would need 2^32 bytes of data.
    assert_eq!(
        RingGeometry::new(1 << 20, 4096, u32::MAX),
        Err(RingError::TooLarge)
    );
    for (capacity, slots) in [
        (1, 2),
        (2, 4),
        (3, 4),
        (4, 8),
        (7, 8),
        (8, 16),
        (16383, 16384),
    ] {
        let ring = RingGeometry::new(capacity, 64, 1 << 20).unwrap();
        assert_eq!(ring.slots(), slots, "capacity {capacity}");
        assert_eq!(ring.capacity(), slots - 1);
        assert_eq!(ring.index_mask(), slots - 1);
        assert!(ring.capacity() >= capacity);
    }
    for (elem, rounded, log2) in [
        (1, 1, 0),
        (3, 4, 2),
        (48, 64, 6),
        (64, 64, 6),
        (224, 256, 8),
    ] {
        let ring = RingGeometry::new(4, elem, 16).unwrap();
        assert_eq!(ring.elem_size(), rounded);
        assert_eq!(ring.log2_elem_size(), log2);
        assert_eq!(ring.data_bytes(), 8 * rounded as usize);
    }
}

#[test]
fn slot_offsets_stay_inside_for_any_index() {
    let ring = RingGeometry::new(100, 48, 1000).unwrap();
    let mut rng = Lcg(7);
    for raw in [0, 1, 127, 128, 129, u32::MAX, u32::MAX - 1]
        .into_iter()
        .chain((0..10000).map(|_| rng.next()))
    {
        let offset = ring.slot_offset(raw);
        assert!(offset + ring.elem_size() as usize <= ring.data_bytes());
        assert_eq!(offset % ring.elem_size() as usize, 0);
    }
}

#[test]
fn hostile_indices_are_refused() {
    let ring = RingGeometry::new(15, 64, 100).unwrap();
    for raw in 0..=15 {
        assert_eq!(ring.check_index(raw), Some(raw));
    }
    for raw in [16, 17, 255, 1 << 31, u32::MAX] {
        assert_eq!(ring.check_index(raw), None);
    }
}

/// Produce and consume at random, comparing every answer with a queue.
#[test]
fn matches_a_queue_model() {
    let mut rng = Lcg(42);
    for capacity in [1, 2, 3, 5, 8, 31, 100] {
        let ring = RingGeometry::new(capacity, 16, 1000).unwrap();
        let mut model = VecDeque::new();
        let (mut producer, mut consumer) = (0u32, 0u32);
        let mut next_value = 0u32;
        let mut slots = vec![0u32; ring.slots() as usize];
        for _ in 0..20000 {
            assert_eq!(ring.used(producer, consumer) as usize, model.len());
            assert_eq!(ring.is_empty(producer, consumer), model.is_empty());
            assert_eq!(
                ring.is_full(producer, consumer),
                model.len() == ring.capacity() as usize
            );
            assert_eq!(
                ring.free(producer, consumer) as usize,
                ring.capacity() as usize - model.len()
            );
            if rng.next().is_multiple_of(2) {
                if !ring.is_full(producer, consumer) {
                    slots[ring.slot_offset(producer) / 16] = next_value;
                    model.push_back(next_value);
                    next_value += 1;
                    producer = ring.next(producer);
                }
            } else if !ring.is_empty(producer, consumer) {
                assert_eq!(
                    Some(slots[ring.slot_offset(consumer) / 16]),
                    model.pop_front()
                );
                consumer = ring.next(consumer);
            }
            assert!(producer <= ring.index_mask() && consumer <= ring.index_mask());
        }
    }
}

#[test]
fn resize_fits() {
    let ring = RingGeometry::new(7, 64, 100).unwrap();
    assert!(ring.fits(7));
    assert!(!ring.fits(8));
}

#[test]
fn new_entries_never_lap_the_consumer() {
    let ring = RingGeometry::new(15, 64, 1 << 20).unwrap();
    // Nothing in flight: any masked producer is admitted.
    for p in 0..16 {
        assert_eq!(ring.new_entries(p, 3, 3), Some((p + 16 - 3) % 16));
    }
    // Ten in flight (consumer 0, fetched 10): five more fit.
    assert_eq!(ring.new_entries(10, 10, 0), Some(0));
    assert_eq!(ring.new_entries(15, 10, 0), Some(5));
    // Pointing back into the entries in flight laps the consumer.
    for p in 0..10 {
        assert_eq!(ring.new_entries(p, 10, 0), None, "producer {p}");
    }
    // Across the wrap: consumer 12, fetched 2 (six in flight).
    assert_eq!(ring.new_entries(11, 2, 12), Some(9));
    assert_eq!(ring.new_entries(12, 2, 12), None);
    assert_eq!(ring.new_entries(1, 2, 12), None);
    // A full ring admits nothing but itself.
    assert_eq!(ring.new_entries(15, 15, 0), Some(0));
    for p in 0..15 {
        assert_eq!(ring.new_entries(p, 15, 0), None);
    }
}

#[test]
fn new_entries_against_a_model() {
    let mut rng = Lcg(7);
    for log2 in 1..8u32 {
        let slots = 1u32 << log2;
        let ring = RingGeometry::new(slots - 1, 64, 1 << 20).unwrap();
        for _ in 0..2000 {
            let consumer = rng.next() & ring.index_mask();
            let in_flight = rng.next() % slots;
            let fetched = (consumer + in_flight) & ring.index_mask();
            let producer = rng.next() & ring.index_mask();
            // The model: walking from `fetched` to `producer` one slot at
            // a time must not step onto `consumer` (the slot of the oldest
            // entry still in flight) unless nothing is in flight and the
            // walk is empty.
            let mut steps = 0;
            let mut at = fetched;
            let mut laps = false;
            while at != producer {
                at = ring.next(at);
                steps += 1;
                if at == consumer && at != producer {
                    laps = true;
                }
                if at == consumer && at == producer && in_flight > 0 {
                    laps = true;
                }
            }
            let expect = (!laps).then_some(steps);
            assert_eq!(
                ring.new_entries(producer, fetched, consumer),
                expect,
                "slots {slots} consumer {consumer} fetched {fetched} producer {producer}"
            );
            if let Some(new) = expect {
                assert!(new + in_flight <= ring.capacity());
            }
        }
    }
}

#[test]
fn prev_undoes_next_and_wraps() {
    let g = RingGeometry::new(5, 64, 100).unwrap();
    let mask = g.index_mask();
    assert_eq!(g.prev(0), mask);
    assert_eq!(g.next(mask), 0);
    for index in 0..=mask {
        assert_eq!(g.prev(g.next(index)), index);
        assert_eq!(g.next(g.prev(index)), index);
    }
}
