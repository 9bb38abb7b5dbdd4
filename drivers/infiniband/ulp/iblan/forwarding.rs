// SPDX-License-Identifier: GPL-2.0

//! A LAN port's forwarding table: the node each foreign MAC address (a
//! bridge's, macvlan's or bond's, not an iblan address) was last seen
//! behind, learned from received frames and aged as a switch's FDB is.
//! Frames to a learned MAC go to that node alone; to an unknown one, to
//! every node. Only frames with foreign addresses touch it.

use crate::kapi::debugfs::SeqOut;
use crate::kapi::sync::SpinLockBh;
use crate::kapi::work::now_ms;
use crate::pure::fdb::{Fdb, Learned, Slot, AGEING_MS, DEFAULT_SLOTS};
use core::pin::Pin;
use kernel::prelude::*;

pub(crate) struct Forwarding {
    table: Pin<KBox<SpinLockBh<Fdb<KVec<Slot>>>>>,
}

impl Forwarding {
    pub(crate) fn new() -> Result<Self> {
        let slots = KVec::from_elem(Slot::FREE, DEFAULT_SLOTS, GFP_KERNEL)?;
        Ok(Self {
            table: KBox::pin_init(
                new_spinlock_bh!(Fdb::new(slots, AGEING_MS), "iblan_fdb"),
                GFP_KERNEL,
            )?,
        })
    }

    /// Records that a frame from `mac` came from the node `lid`.
    pub(crate) fn learn(&self, mac: &[u8; 6], lid: u16) -> Learned {
        self.table.lock().learn(mac, lid, now_ms())
    }

    /// The LID of the node `mac` sits behind, if learned and not aged.
    pub(crate) fn lookup(&self, mac: &[u8; 6]) -> Option<u16> {
        self.table.lock().lookup(mac, now_ms())
    }

    /// Forgets the MACs behind a node that left.
    pub(crate) fn forget(&self, lid: u16) {
        self.table.lock().forget_lid(lid);
    }

    /// The live entries, a line each: `fdb MAC LID AGE_MS`.
    pub(crate) fn show(&self, out: &mut SeqOut) {
        use core::fmt::Write;
        let now = now_ms();
        let table = self.table.lock();
        for e in table.entries(now) {
            let [a, b, c, d, f, g] = e.mac;
            let _ = writeln!(
                out,
                "fdb    {:#06x} {a:02x}:{b:02x}:{c:02x}:{d:02x}:{f:02x}:{g:02x} {}",
                e.lid, e.age_ms
            );
        }
    }
}
