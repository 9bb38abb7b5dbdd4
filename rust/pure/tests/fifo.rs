// SPDX-License-Identifier: GPL-2.0

use srnic_pure::fifo::Fifo;

#[test]
fn keeps_order_and_refuses_when_full() {
    let mut q: Fifo<u32, 3> = Fifo::new();
    assert!(q.is_empty());
    assert_eq!(q.push(1), Ok(()));
    assert_eq!(q.push(2), Ok(()));
    assert_eq!(q.push(3), Ok(()));
    assert!(q.is_full());
    assert_eq!(q.push(4), Err(4));
    assert_eq!(q.pop(), Some(1));
    assert_eq!(q.push(4), Ok(()));
    assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
    assert_eq!(q.front(), Some(&2));
    *q.back_mut().unwrap() = 40;
    assert_eq!(q.pop(), Some(2));
    assert_eq!(q.pop(), Some(3));
    assert_eq!(q.pop(), Some(40));
    assert_eq!(q.pop(), None);
    assert!(q.front().is_none() && q.back_mut().is_none());
}

#[test]
fn wraps_around_many_times() {
    let mut q: Fifo<u64, 5> = Fifo::new();
    let mut next_in = 0u64;
    let mut next_out = 0u64;
    for round in 0..1000u64 {
        for _ in 0..(round % 5 + 1) {
            if q.push(next_in).is_ok() {
                next_in += 1;
            }
        }
        for _ in 0..(round % 3 + 1) {
            if let Some(v) = q.pop() {
                assert_eq!(v, next_out);
                next_out += 1;
            }
        }
        assert_eq!(q.len() as u64, next_in - next_out);
        assert!(q.len() <= 5);
    }
    q.clear();
    assert!(q.is_empty());
    assert_eq!(q.push(7), Ok(()));
    assert_eq!(q.front_mut().map(|v| *v), Some(7));
}

#[test]
fn zero_capacity_holds_nothing() {
    let mut q: Fifo<u8, 0> = Fifo::new();
    assert_eq!(q.push(1), Err(1));
    assert_eq!(q.pop(), None);
    assert_eq!(q.iter().count(), 0);
}

#[test]
fn truncate_drops_the_newest() {
    let mut q: Fifo<u32, 4> = Fifo::new();
    for v in 0..4 {
        q.push(v).unwrap();
    }
    q.pop();
    q.push(4).unwrap();
    q.truncate(2);
    assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![1, 2]);
    q.truncate(5);
    assert_eq!(q.len(), 2);
    q.push(9).unwrap();
    assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![1, 2, 9]);
    q.clear();
    assert_eq!(q.pop(), None);
}
