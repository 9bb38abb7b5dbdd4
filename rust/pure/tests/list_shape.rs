// SPDX-License-Identifier: GPL-2.0

use srnic_pure::list_shape::ListShape;

/// The shape after datagrams of `lens` join a list that starts with
/// `first`, each only if the shape takes it (`stay_even` as given); also
/// how many joined.
fn fill(first: u32, lens: &[u32], stay_even: bool) -> (ListShape, usize) {
    let mut shape = ListShape::new(first);
    let mut joined = 0;
    for &len in lens {
        if !shape.takes(len, stay_even) {
            break;
        }
        shape.join(len);
        joined += 1;
    }
    (shape, joined)
}

#[test]
fn one_datagram_is_even() {
    assert!(ListShape::new(1084).is_even());
}

#[test]
fn equal_datagrams_and_a_shorter_last_are_even() {
    let (shape, joined) = fill(1068, &[1068, 1068, 600], true);
    assert_eq!(joined, 3);
    assert!(shape.is_even());
}

#[test]
fn a_list_kept_even_ends_after_a_shorter_datagram() {
    // A WRITE's first packet is longer by its RETH: the next, shorter,
    // ends the list.
    let (shape, joined) = fill(1084, &[1068, 1068, 1068], true);
    assert_eq!(joined, 1);
    assert!(shape.is_even());
    assert!(!shape.takes(1084, true));
    assert!(!shape.takes(1068, true));
}

#[test]
fn a_list_free_to_be_uneven_takes_shorter_ones_anywhere() {
    let (shape, joined) = fill(1084, &[1068, 1068, 1084, 60, 1068], false);
    assert_eq!(joined, 5);
    assert!(!shape.is_even());
}

#[test]
fn no_datagram_longer_than_the_first_joins() {
    for stay_even in [false, true] {
        let shape = ListShape::new(1068);
        assert!(!shape.takes(1069, stay_even));
        assert!(shape.takes(1068, stay_even));
    }
}

#[test]
fn a_shorter_datagram_before_the_last_makes_the_list_uneven() {
    let mut shape = ListShape::new(1068);
    shape.join(500);
    assert!(shape.is_even());
    shape.join(500);
    assert!(!shape.is_even());
}

#[test]
fn a_longer_datagram_makes_the_list_uneven() {
    // `join` does not check `takes`; a caller that skipped it still gets
    // an honest answer.
    let mut shape = ListShape::new(1068);
    shape.join(1200);
    assert!(!shape.is_even());
}
