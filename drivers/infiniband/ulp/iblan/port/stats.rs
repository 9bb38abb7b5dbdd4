// SPDX-License-Identifier: GPL-2.0

//! A LAN port's counters: the `ethtool -S` names, the link statistics of
//! `ip -s link`, and the debugfs table of the name service and forwarding.

use super::*;

/// `ethtool -S` names, in the order of [`Stat`].
pub(super) const STAT_NAMES: &[&CStr] = &[
    c_str!("tx_frames"),
    c_str!("tx_posts"),
    c_str!("tx_fanout_frames"),
    c_str!("tx_fanout_posts"),
    c_str!("tx_fragmented_frames"),
    c_str!("tx_unknown_lid_floods"),
    c_str!("tx_no_peer_drops"),
    c_str!("tx_post_errors"),
    c_str!("tx_queue_stops"),
    c_str!("tx_copies"),
    c_str!("tx_foreign_direct"),
    c_str!("tx_foreign_floods"),
    c_str!("rx_datagrams"),
    c_str!("rx_reassembled_frames"),
    c_str!("rx_sar_drops_duplicate"),
    c_str!("rx_sar_drops_inconsistent"),
    c_str!("rx_sar_drops_evicted"),
    c_str!("rx_sar_drops_expired"),
    c_str!("rx_unknown_sender_drops"),
    c_str!("rx_malformed_drops"),
    c_str!("rx_alloc_drops"),
    c_str!("rx_errors"),
    c_str!("rx_dma_syncs_for_cpu"),
    c_str!("rx_not_for_us_drops"),
    c_str!("fdb_learned"),
    c_str!("fdb_moved"),
    c_str!("dma_syncs_for_device"),
    c_str!("ns_announcements_sent"),
    c_str!("ns_announcements_received"),
    c_str!("ns_peers_added"),
    c_str!("ns_peers_aged_out"),
    c_str!("ns_peers_left"),
    c_str!("ns_lid_conflicts"),
    c_str!("ns_lid_changes"),
    c_str!("ns_inbox_drops"),
    c_str!("ns_table_full_drops"),
    c_str!("cm_offers_refused"),
    c_str!("cm_malformed_drops"),
    c_str!("cm_offers_sent"),
    c_str!("cm_offers_accepted"),
    c_str!("cm_connections_up"),
    c_str!("cm_connections_failed"),
    c_str!("cm_connections_closed"),
    c_str!("cm_inbox_drops"),
    c_str!("cm_unknown_peer_drops"),
    c_str!("tx_connected_frames"),
    c_str!("rx_connected_frames"),
    c_str!("tx_too_big_drops"),
    c_str!("rx_pages_handed_up"),
    c_str!("rx_pages_copied"),
    c_str!("ns_peers"),
    c_str!("ns_lid"),
];

// One name per counter, then the peer count and the LID.
const _: () = assert!(STAT_NAMES.len() == Stat::Count as usize + 2);

/// `ethtool -S` names of each transmit queue's values, shown as
/// `tx_queue_<N>_<name>`, in the order of [`TxQueue::stats`].
pub(super) const TX_QUEUE_STAT_NAMES: &[&CStr] =
    &[c_str!("packets"), c_str!("bytes"), c_str!("stops")];

#[derive(Clone, Copy)]
#[repr(usize)]
pub(super) enum Stat {
    TxFrames,
    TxPosts,
    TxFanoutFrames,
    TxFanoutPosts,
    TxFragmented,
    TxUnknownLidFloods,
    TxNoPeer,
    TxPostErrors,
    TxQueueStops,
    TxCopies,
    TxForeignDirect,
    TxForeignFloods,
    RxDatagrams,
    RxReassembled,
    RxSarDuplicate,
    RxSarInconsistent,
    RxSarEvicted,
    RxSarExpired,
    RxUnknownSender,
    RxMalformed,
    RxAlloc,
    RxErrors,
    RxDmaSyncs,
    RxNotForUs,
    FdbLearned,
    FdbMoved,
    DmaSyncsForDevice,
    NsSent,
    NsReceived,
    NsAdded,
    NsAged,
    NsLeft,
    NsConflicts,
    NsLidChanges,
    NsInboxDrops,
    NsTableFull,
    CmOffersRefused,
    CmMalformed,
    CmOffersSent,
    CmAccepted,
    CmUp,
    CmFailed,
    CmClosed,
    CmInboxDrops,
    CmUnknownPeer,
    TxConnected,
    RxConnected,
    TxTooBig,
    RxPagesHandedUp,
    RxPagesCopied,
    Count,
}

/// The interface statistics of `ip -s link`.
#[derive(Default)]
pub(super) struct Link {
    pub(super) rx_packets: AtomicU64,
    pub(super) rx_bytes: AtomicU64,
    pub(super) rx_dropped: AtomicU64,
    pub(super) rx_multicast: AtomicU64,
    pub(super) tx_packets: AtomicU64,
    pub(super) tx_bytes: AtomicU64,
    pub(super) tx_dropped: AtomicU64,
}

/// `/sys/kernel/debug/iblan/<netdev>/peers`: this node, then the name
/// service's table.
impl Show for LanDev {
    fn show(&self, out: &mut SeqOut) {
        use core::fmt::Write;
        let now = now_ms();
        let _ = writeln!(
            out,
            "{:<6} {:<6} {:<39} {:<8} {:<10} {:<18} age_ms",
            "who", "lid", "gid", "qpn", "qkey", "node_guid"
        );
        let mut row = |who: &str, lid: u16, gid: &[u8; 16], qpn: u32, qkey: u32, guid: u64, age| {
            let _ = writeln!(
                out,
                "{who:<6} {lid:#06x} {} {qpn:<#8x} {qkey:<#10x} {guid:#018x} {age}",
                Gid(gid)
            );
        };
        row(
            "self",
            self.lid.load(Ordering::Relaxed),
            &self.sgid,
            self.qp.qp_num(),
            self.config.qkey(),
            self.guid,
            0,
        );
        for entry in self.peers.lock().iter() {
            let p = &entry.peer;
            let age = now.saturating_sub(entry.last_seen_ms);
            row("peer", p.lid, &p.gid, p.qpn, p.qkey, p.guid, age);
        }
        let _ = writeln!(out, "{:<6} {:<6} {:<17} age_ms", "who", "lid", "mac");
        self.forwarding.show(out);
    }
}

/// A GID in IPv6 notation (without zero compression: a fixed width).
pub(super) struct Gid<'a>(&'a [u8; 16]);

impl core::fmt::Display for Gid<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            let word = pair.iter().fold(0u16, |w, b| (w << 8) | u16::from(*b));
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{word:04x}")?;
        }
        Ok(())
    }
}

impl LanDev {
    pub(super) fn count(&self, stat: Stat) {
        self.add(stat, 1);
    }

    pub(super) fn add(&self, stat: Stat, n: u64) {
        if let Some(counter) = self.stats.get(stat as usize) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}
