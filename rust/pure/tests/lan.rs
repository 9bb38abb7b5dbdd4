// SPDX-License-Identifier: GPL-2.0

//! iblan's addresses, announcements, fragment headers, segmentation and
//! reassembly.

use srnic_pure::lan::*;

const V: [u8; 3] = DEFAULT_VENDOR;

#[test]
fn macs_embed_lan_and_lid() {
    assert_eq!(mac_for(V, 7, 0x1234), [0x02, 0, 0, 7, 0x12, 0x34]);
    assert_eq!(
        classify_mac(&mac_for(V, 7, 0x1234), V, 7),
        MacKind::Unicast { lid: 0x1234 }
    );
    assert_eq!(classify_mac(&[0xff; 6], V, 0), MacKind::Broadcast);
    assert_eq!(
        classify_mac(&[0x33, 0x33, 0, 0, 0, 1], V, 0),
        MacKind::Multicast
    );
    assert_eq!(
        classify_mac(&[0x01, 0, 0x5e, 0, 0, 1], V, 0),
        MacKind::Multicast
    );
    // Another LAN, another vendor, LIDs outside the unicast range.
    assert_eq!(classify_mac(&mac_for(V, 1, 5), V, 0), MacKind::Foreign);
    assert_eq!(
        classify_mac(&mac_for([4, 0, 0], 0, 5), V, 0),
        MacKind::Foreign
    );
    for lid in [0, 0xc000, 0xffff] {
        assert_eq!(classify_mac(&mac_for(V, 0, lid), V, 0), MacKind::Foreign);
    }
    assert_eq!(
        classify_mac(&mac_for(V, 0, LID_MAX), V, 0),
        MacKind::Unicast { lid: LID_MAX }
    );
}

#[test]
fn new_addresses_are_checked() {
    assert_eq!(check_new_address(&mac_for(V, 0, 9), V, 0), Ok(9));
    assert_eq!(
        check_new_address(&[0xff; 6], V, 0),
        Err(AddressError::Multicast)
    );
    assert_eq!(
        check_new_address(&mac_for(V, 1, 9), V, 0),
        Err(AddressError::WrongVendorOrLan)
    );
    assert_eq!(
        check_new_address(&mac_for([4, 0, 0], 0, 9), V, 0),
        Err(AddressError::WrongVendorOrLan)
    );
    assert_eq!(
        check_new_address(&mac_for(V, 0, 0xc001), V, 0),
        Err(AddressError::LidOutOfRange)
    );
    assert_eq!(
        check_new_address(&mac_for(V, 0, 0), V, 0),
        Err(AddressError::LidOutOfRange)
    );
    assert!(AddressError::WrongVendorOrLan.is_invalid_argument());
    assert!(!AddressError::LidOutOfRange.is_invalid_argument());
}

#[test]
fn lids_are_picked_in_range_and_conflicts_resolve_one_way() {
    let mut gid = [0u8; 16];
    for i in 0..=255u8 {
        gid[15] = i;
        gid[0] = i.wrapping_mul(7);
        let lid = initial_lid(&gid);
        assert!((LID_MIN..=LID_MAX).contains(&lid));
        assert_eq!(lid, initial_lid(&gid));
    }
    assert_eq!(next_free_lid(5, |_| false), Some(6));
    assert_eq!(next_free_lid(5, |l| l < 10), Some(10));
    assert_eq!(next_free_lid(LID_MAX, |_| false), Some(LID_MIN));
    assert_eq!(next_free_lid(3, |l| l != 3), None);
    assert!(keeps_lid(1, 2));
    assert!(!keeps_lid(2, 1));
    assert!(keeps_lid(2, 2));
}

fn announcement() -> Announcement {
    Announcement {
        leaving: false,
        probe: false,
        lan: 3,
        lid: 0x0102,
        qpn: 0x11,
        qkey: 0x1b1a0003,
        node_guid: 0x0011_2233_4455_6677,
        gid: [
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 1,
        ],
        sequence: 9,
    }
}

#[test]
fn announcements_have_the_documented_layout() {
    let golden: [u8; ANNOUNCE_LEN] = [
        b'I', b'B', b'L', b'N', 1, 0, 3, 0, // magic, version, flags, lan, reserved
        0x01, 0x02, 0, 0, 0, 0x11, 0x1b, 0x1a, 0, 3, // lid, qpn, qkey
        0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, // node GUID
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 1, // GID
        0, 0, 0, 9, 0, 0, // sequence, reserved
    ];
    let a = announcement();
    assert_eq!(a.encode(), golden);
    assert_eq!(Announcement::parse(&golden), Ok(a));
    assert_eq!(classify_datagram(&golden), Ok(Datagram::Announcement(a)));
    let leaving = Announcement { leaving: true, ..a };
    assert_eq!(Announcement::parse(&leaving.encode()), Ok(leaving));
    // A probe is flag bit 1.
    let probe = Announcement { probe: true, ..a };
    let mut golden_probe = golden;
    golden_probe[5] = 2;
    assert_eq!(probe.encode(), golden_probe);
    assert_eq!(Announcement::parse(&golden_probe), Ok(probe));
    // Flag bits above bit 1 are reserved.
    let mut reserved = golden;
    reserved[5] = 4;
    assert!(Announcement::parse(&reserved).is_err());
}

#[test]
fn bad_announcements_are_refused() {
    let good = announcement().encode();
    let with = |at: usize, value: u8| {
        let mut b = good;
        b[at] = value;
        Announcement::parse(&b)
    };
    assert_eq!(Announcement::parse(&good[..47]), Err(ParseError::Length));
    let mut long = [0u8; 49];
    long[..48].copy_from_slice(&good);
    assert_eq!(Announcement::parse(&long), Err(ParseError::Length));
    assert_eq!(with(1, b'X'), Err(ParseError::Kind));
    assert_eq!(with(4, 2), Err(ParseError::Version));
    assert_eq!(with(5, 4), Err(ParseError::Reserved));
    assert_eq!(with(7, 1), Err(ParseError::Reserved));
    assert_eq!(with(47, 1), Err(ParseError::Reserved));
    assert_eq!(with(8, 0xc0), Err(ParseError::Lid));
    let mut zero_lid = good;
    zero_lid[8] = 0;
    zero_lid[9] = 0;
    assert_eq!(Announcement::parse(&zero_lid), Err(ParseError::Lid));
    assert_eq!(with(10, 1), Err(ParseError::Qpn));
    let mut qp1 = good;
    qp1[13] = 1;
    assert_eq!(Announcement::parse(&qp1), Err(ParseError::Qpn));
}

#[test]
fn fragment_headers_round_trip_and_are_checked() {
    let h = FragmentHeader {
        index: 2,
        count: 5,
        frame: 0xabcd,
        offset: 2032,
    };
    let mut d = h.encode().to_vec();
    d.extend_from_slice(&[7; 100]);
    assert_eq!(
        classify_datagram(&d),
        Ok(Datagram::Fragment {
            header: h,
            payload: &[7; 100]
        })
    );
    let check = |h: FragmentHeader, len: usize| {
        let mut d = h.encode().to_vec();
        d.extend(std::iter::repeat_n(1, len));
        classify_datagram(&d).map(|_| ())
    };
    assert_eq!(
        check(
            FragmentHeader {
                index: 5,
                count: 5,
                ..h
            },
            1
        ),
        Err(ParseError::Fragment)
    );
    assert_eq!(
        check(
            FragmentHeader {
                count: 0,
                index: 0,
                ..h
            },
            1
        ),
        Err(ParseError::Fragment)
    );
    assert_eq!(
        check(
            FragmentHeader {
                count: 65,
                index: 0,
                ..h
            },
            1
        ),
        Err(ParseError::Fragment)
    );
    assert_eq!(check(h, 0), Err(ParseError::Length));
    assert_eq!(
        check(FragmentHeader { offset: 9000, ..h }, 19),
        Err(ParseError::Offset)
    );
    assert_eq!(check(FragmentHeader { offset: 9000, ..h }, 18), Ok(()));
    assert_eq!(
        check(
            FragmentHeader {
                count: 1,
                index: 0,
                offset: 1,
                ..h
            },
            10
        ),
        Err(ParseError::Offset)
    );
    let mut reserved = h.encode();
    reserved[3] = 1;
    assert_eq!(
        classify_datagram(&[&reserved[..], &[1][..]].concat()),
        Err(ParseError::Reserved)
    );
    assert_eq!(classify_datagram(&[]), Err(ParseError::Length));
    assert_eq!(classify_datagram(&[0x02, 0, 0]), Err(ParseError::Kind));
    assert_eq!(classify_datagram(&[0x01, 0, 1]), Err(ParseError::Length));
}

#[test]
fn plans_cut_frames_to_the_datagram() {
    let p = FragmentPlan::new(1514, 1024).unwrap();
    assert_eq!(p.count(), 2);
    assert_eq!(p.fragment(0), Some((0, 1016)));
    assert_eq!(p.fragment(1), Some((1016, 498)));
    assert_eq!(p.fragment(2), None);
    assert_eq!(
        p.header(1, 7),
        Some(FragmentHeader {
            index: 1,
            count: 2,
            frame: 7,
            offset: 1016
        })
    );
    assert_eq!(FragmentPlan::new(2032, 1024).unwrap().count(), 2);
    assert_eq!(FragmentPlan::new(2033, 1024).unwrap().count(), 3);
    assert_eq!(FragmentPlan::new(MAX_FRAME_LEN, 256).unwrap().count(), 37);
    assert_eq!(FragmentPlan::new(60, 4096).unwrap().count(), 1);
    assert!(matches!(
        FragmentPlan::new(0, 1024),
        Err(SegmentError::FrameLength)
    ));
    assert!(matches!(
        FragmentPlan::new(MAX_FRAME_LEN + 1, 1024),
        Err(SegmentError::FrameLength)
    ));
    assert!(matches!(
        FragmentPlan::new(100, 8),
        Err(SegmentError::DatagramTooSmall)
    ));
    assert!(matches!(
        FragmentPlan::new(MAX_FRAME_LEN, 100),
        Err(SegmentError::TooManyFragments)
    ));
}

/// A caller of the reassembler with real buffers, as the driver is.
struct Receiver {
    table: Reassembler<Vec<ReassemblySlot>>,
    buffers: Vec<Vec<u8>>,
    delivered: Vec<Vec<u8>>,
    drops: usize,
}

impl Receiver {
    fn new() -> Self {
        Self {
            table: Reassembler::new(vec![ReassemblySlot::CLOSED; 4]),
            buffers: vec![vec![0; MAX_FRAME_LEN]; 4],
            delivered: Vec::new(),
            drops: 0,
        }
    }

    fn take(&mut self, sender: u16, datagram: &[u8], now: u64) {
        let Ok(Datagram::Fragment { header, payload }) = classify_datagram(datagram) else {
            self.drops += 1;
            return;
        };
        self.table.expire(now, |_| ());
        match self.table.accept(sender, &header, payload.len(), now) {
            Step::Deliver => self.delivered.push(payload.to_vec()),
            Step::Copy {
                slot,
                offset,
                evicted,
                ..
            } => {
                self.drops += usize::from(evicted.is_some());
                self.buffers[slot][offset..offset + payload.len()].copy_from_slice(payload);
            }
            Step::Complete {
                slot,
                offset,
                total_len,
            } => {
                self.buffers[slot][offset..offset + payload.len()].copy_from_slice(payload);
                self.delivered
                    .push(self.buffers[slot][..total_len].to_vec());
            }
            Step::Drop { .. } => self.drops += 1,
        }
    }
}

fn datagrams(frame: &[u8], mtu: usize, number: u16) -> Vec<Vec<u8>> {
    let plan = FragmentPlan::new(frame.len(), mtu).unwrap();
    (0..plan.count())
        .map(|i| {
            let (offset, len) = plan.fragment(i).unwrap();
            let mut d = plan.header(i, number).unwrap().encode().to_vec();
            d.extend_from_slice(&frame[offset..offset + len]);
            d
        })
        .collect()
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn frames_reassemble_in_any_order() {
    let f = frame(9018, 1);
    let mut d = datagrams(&f, 1024, 1);
    let mut r = Receiver::new();
    for x in &d {
        r.take(1, x, 0);
    }
    d.reverse();
    for x in &d {
        r.take(1, x, 0);
    }
    assert_eq!(r.delivered, vec![f.clone(), f.clone()]);
    assert_eq!(r.table.open(), 0);
}

#[test]
fn duplicates_and_inconsistent_fragments_drop_the_frame() {
    let f = frame(3000, 2);
    let d = datagrams(&f, 1024, 5);
    let mut r = Receiver::new();
    r.take(1, &d[0], 0);
    r.take(1, &d[0], 0);
    for x in &d[1..] {
        r.take(1, x, 0);
    }
    assert!(
        r.delivered.is_empty(),
        "a frame with a duplicate was delivered"
    );
    // Fragments of two sizes.
    let other = datagrams(&f, 512, 6);
    let mut r = Receiver::new();
    r.take(1, &d[0], 0);
    let mut mixed = other[1].clone();
    mixed[1] = 1;
    mixed[2] = d.len() as u8;
    mixed[4..6].copy_from_slice(&5u16.to_be_bytes());
    r.take(1, &mixed, 0);
    for x in &d[1..] {
        r.take(1, x, 0);
    }
    assert!(r.delivered.is_empty());
}

#[test]
fn reassemblies_are_bounded_and_expire() {
    let mut r = Receiver::new();
    // Five frames missing their last fragment: the oldest is evicted.
    for n in 0..5u16 {
        let d = datagrams(&frame(2000, n as u8), 1024, n);
        r.take(1, &d[0], u64::from(n));
    }
    assert_eq!(r.table.open(), 4);
    assert_eq!(r.drops, 1);
    r.table.expire(1000, |_| ());
    assert_eq!(r.table.open(), 0);
    assert!(r.delivered.is_empty());
}

#[test]
fn senders_interleave() {
    let frames: Vec<_> = (0..3).map(|s| frame(2500, s)).collect();
    let per: Vec<_> = frames.iter().map(|f| datagrams(f, 1024, 9)).collect();
    let mut r = Receiver::new();
    for i in 0..3 {
        for (s, d) in per.iter().enumerate() {
            r.take(s as u16, &d[i], 0);
        }
    }
    assert_eq!(r.delivered, frames);
}

/// A deterministic generator for the randomised tests.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut r = Receiver::new();
    for round in 0..100_000 {
        let len = rng.below(80);
        let mut d: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if let Some(first) = d.first_mut() {
            *first = [0x01, b'I', rng.next() as u8][rng.below(3)];
        }
        let _ = classify_datagram(&d);
        r.take(rng.below(3) as u16, &d, round / 100);
    }
}

#[test]
fn random_streams_deliver_only_whole_frames() {
    let mut rng = XorShift(42);
    for round in 0..2000 {
        let len = 1 + rng.below(MAX_FRAME_LEN);
        let mtu = [256, 512, 1024, 2048, 4096][rng.below(5)];
        let f = frame(len, round as u8);
        let mut d = datagrams(&f, mtu, round as u16);
        // Shuffle, and sometimes lose or duplicate one.
        for i in (1..d.len()).rev() {
            d.swap(i, rng.below(i + 1));
        }
        let count = d.len();
        let fate = rng.below(4);
        if fate == 0 && count > 1 {
            d.pop();
        } else if fate == 1 {
            let copy = d[rng.below(count)].clone();
            d.push(copy);
        }
        let mut r = Receiver::new();
        for x in &d {
            r.take(1, x, 0);
        }
        for got in &r.delivered {
            assert_eq!(got, &f, "round {round}: a corrupt frame was delivered");
        }
        let delivered = r.delivered.len();
        match (fate, count) {
            // Lost: never delivered.
            (0, 2..) => assert_eq!(delivered, 0, "round {round}: a frame with a hole"),
            // A duplicated datagram of a one-fragment frame is two frames.
            (1, 1) => assert_eq!(delivered, 2, "round {round}"),
            // A duplicate before completion drops the frame; after, it
            // opens a reassembly that never completes.
            (1, _) => assert!(delivered <= 1, "round {round}"),
            _ => assert_eq!(
                delivered, 1,
                "round {round}: a whole frame was not delivered"
            ),
        }
    }
}

#[test]
fn child_addresses_name_lan_and_lid() {
    let none = |_: u8| false;
    // Seed FIG. 2: 02:00:00 vendor, LAN 5, LID 7.
    assert_eq!(
        check_child_address(&[0x02, 0, 0, 5, 0, 7], V, none),
        Ok((5, 7))
    );
    assert_eq!(
        check_child_address(&[0x02, 0, 0, 0xff, 0xbf, 0xff], V, none),
        Ok((0xff, 0xbfff))
    );
    assert_eq!(
        check_child_address(&[0x03, 0, 0, 5, 0, 7], V, none),
        Err(ChildAddressError::Multicast)
    );
    assert_eq!(
        check_child_address(&[0xff; 6], V, none),
        Err(ChildAddressError::Multicast)
    );
    assert_eq!(
        check_child_address(&[0x04, 0, 0, 5, 0, 7], V, none),
        Err(ChildAddressError::WrongVendor)
    );
    assert_eq!(
        check_child_address(&[0x02, 0, 1, 5, 0, 7], V, none),
        Err(ChildAddressError::WrongVendor)
    );
    for lid in [0u16, 0xc000, 0xffff] {
        let [hi, lo] = lid.to_be_bytes();
        assert_eq!(
            check_child_address(&[0x02, 0, 0, 5, hi, lo], V, none),
            Err(ChildAddressError::LidOutOfRange)
        );
    }
    // The LAN byte is checked against the port's LANs after the format.
    assert_eq!(
        check_child_address(&[0x02, 0, 0, 5, 0, 7], V, |lan| lan == 5),
        Err(ChildAddressError::LanInUse(5))
    );
    assert_eq!(
        check_child_address(&[0x02, 0, 0, 6, 0, 7], V, |lan| lan == 5),
        Ok((6, 7))
    );
    // Another vendor ID set by the module parameter.
    assert_eq!(
        check_child_address(&[0x0a, 0xbc, 0xde, 1, 0, 1], [0x0a, 0xbc, 0xde], none),
        Ok((1, 1))
    );
    // Whatever the child's address, its frames classify into its LAN only.
    let mac = [0x02, 0, 0, 5, 0, 7];
    assert_eq!(classify_mac(&mac, V, 5), MacKind::Unicast { lid: 7 });
    assert_eq!(classify_mac(&mac, V, 0), MacKind::Foreign);
}

#[test]
fn next_free_lan_takes_the_lowest() {
    assert_eq!(next_free_lan(|_| false), Some(0));
    assert_eq!(next_free_lan(|lan| lan == 0), Some(1));
    assert_eq!(next_free_lan(|lan| lan < 5 || lan == 6), Some(5));
    assert_eq!(next_free_lan(|lan| lan != 255), Some(255));
    assert_eq!(next_free_lan(|_| true), None);
}
