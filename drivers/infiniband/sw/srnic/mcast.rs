// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD QPs of a device are attached to which group,
//! the netdev's membership of each group's Ethernet address, and the
//! delivery of a datagram sent to a group to every QP attached to it.
//!
//! A group is an IP multicast address, so its datagrams are IP multicast
//! on the wire. The netdev accepts the group's Ethernet address while a QP
//! is attached; the IP layer delivers only groups the host joined, which
//! rdma_cm does for its users (as for rxe). The IP layer also loops a
//! group's datagrams back to this host when it is a member, so QPs of this
//! node receive what their neighbours on the node send.

use crate::counters::Counter;
use crate::device::SrnicDevice;
use crate::kapi::rcu::RcuReadGuard;
use crate::kapi::rdma::{Device, Qp};
use crate::kapi::sync::SpinLockIrq;
use crate::pure::mcast::multicast_mac;
use crate::pure::wr::QpType;
use crate::transport::Packet;
use core::pin::Pin;
use kernel::alloc::flags::GFP_KERNEL;
use kernel::alloc::{KBox, KVec};
use kernel::prelude::*;

/// Groups with at least one QP attached, per device.
pub(crate) const MAX_GROUPS: u32 = 64;
/// QPs attached to one group.
pub(crate) const MAX_QPS_PER_GROUP: usize = 32;
/// Attachments of QPs to groups, all groups together.
pub(crate) const MAX_ATTACHMENTS: usize = 256;

/// A QP's membership of a group; QP number 0 marks a free slot (QP0 does
/// not exist on RoCE, and only UD QPs attach).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Attachment {
    mgid: [u8; 16],
    qpn: u32,
}

impl Attachment {
    fn is_free(&self) -> bool {
        self.qpn == 0
    }
}

/// A device's attachments, in fixed slots allocated with the device.
pub(crate) struct Groups {
    slots: KVec<Attachment>,
    /// Distinct groups with members.
    groups: u32,
}

/// The lock-protected table a device keeps.
pub(crate) type GroupTable = Pin<KBox<SpinLockIrq<Groups>>>;

pub(crate) fn new_table() -> Result<GroupTable> {
    let slots = KVec::from_elem(Attachment::default(), MAX_ATTACHMENTS, GFP_KERNEL)?;
    KBox::pin_init(
        new_spinlock_irq!(Groups { slots, groups: 0 }, "srnic_mcast_groups"),
        GFP_KERNEL,
    )
}

impl Groups {
    fn members(&self, mgid: &[u8; 16]) -> usize {
        self.slots
            .iter()
            .filter(|a| a.mgid == *mgid && !a.is_free())
            .count()
    }

    /// Adds an attachment; `Ok(false)` if it was there already.
    fn add(&mut self, wanted: Attachment) -> Result<bool> {
        if self.slots.contains(&wanted) {
            return Ok(false);
        }
        let members = self.members(&wanted.mgid);
        if members >= MAX_QPS_PER_GROUP || (members == 0 && self.groups >= MAX_GROUPS) {
            return Err(ENOMEM);
        }
        let slot = self.slots.iter_mut().find(|a| a.is_free()).ok_or(ENOMEM)?;
        *slot = wanted;
        if members == 0 {
            self.groups += 1;
        }
        Ok(true)
    }

    /// Removes an attachment; whether it was there.
    fn remove(&mut self, unwanted: Attachment) -> bool {
        let Some(slot) = self.slots.iter_mut().find(|a| **a == unwanted) else {
            return false;
        };
        *slot = Attachment::default();
        if self.members(&unwanted.mgid) == 0 {
            self.groups = self.groups.saturating_sub(1);
        }
        true
    }
}

/// Attaches UD QP `qp` to group `mgid`; attaching twice is not an error.
pub(crate) fn attach(qp: &Qp<SrnicDevice>, mgid: &[u8; 16]) -> Result {
    if qp.qp_type() != QpType::Ud {
        return Err(EINVAL);
    }
    let mac = multicast_mac(mgid).ok_or(EINVAL)?;
    let dev = qp.device();
    let wanted = Attachment {
        mgid: *mgid,
        qpn: qp.qp_num(),
    };
    if !dev.mcast.lock().add(wanted)? {
        return Ok(());
    }
    // The netdev counts each address's users: one reference per
    // attachment, taken outside the lock (it takes its own with bottom
    // halves off, which must not nest in ours).
    if let Err(err) = dev.netdev().multicast_add(&mac) {
        dev.mcast.lock().remove(wanted);
        return Err(err);
    }
    Ok(())
}

/// Detaches QP `qp` from group `mgid`; `EINVAL` if it was not attached.
pub(crate) fn detach(qp: &Qp<SrnicDevice>, mgid: &[u8; 16]) -> Result {
    let mac = multicast_mac(mgid).ok_or(EINVAL)?;
    let dev = qp.device();
    let unwanted = Attachment {
        mgid: *mgid,
        qpn: qp.qp_num(),
    };
    if !dev.mcast.lock().remove(unwanted) {
        return Err(EINVAL);
    }
    // Only fails for an address the netdev does not have, which an
    // attachment always added.
    let _ = dev.netdev().multicast_del(&mac);
    Ok(())
}

/// Drops every attachment of a QP being destroyed that its owner left.
pub(crate) fn detach_all(qp: &Qp<SrnicDevice>) {
    if qp.qp_type() != QpType::Ud {
        return;
    }
    let dev = qp.device();
    let qpn = qp.qp_num();
    loop {
        let gone = {
            let mut groups = dev.mcast.lock();
            let found = groups.slots.iter().find(|a| a.qpn == qpn).copied();
            if let Some(attachment) = found {
                groups.remove(attachment);
            }
            found
        };
        let Some(gone) = gone else { break };
        if let Some(mac) = multicast_mac(&gone.mgid) {
            let _ = dev.netdev().multicast_del(&mac);
        }
    }
}

/// Hands a datagram sent to group `mgid` to every QP of `dev` attached to
/// it (each takes a receive WQE and checks the Q_Key on its own).
pub(crate) fn deliver(
    dev: &Device<SrnicDevice>,
    guard: &RcuReadGuard,
    mgid: &[u8; 16],
    packet: &Packet<'_>,
) {
    let mut members = [0u32; MAX_QPS_PER_GROUP];
    let mut count = 0;
    {
        let groups = dev.mcast.lock();
        for attachment in groups
            .slots
            .iter()
            .filter(|a| a.mgid == *mgid && !a.is_free())
        {
            if let Some(slot) = members.get_mut(count) {
                *slot = attachment.qpn;
                count += 1;
            }
        }
    }
    if count == 0 {
        dev.counters.inc(Counter::UnknownQpPackets);
        return;
    }
    for qpn in members.iter().take(count) {
        if let Some(qp) = dev.qps.get(guard, *qpn) {
            // Datagrams are never answered.
            let _ = crate::responder::receive(qp, guard, packet);
        }
    }
}
