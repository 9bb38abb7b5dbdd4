// SPDX-License-Identifier: GPL-2.0

//! A LAN port's transmit queues: one send-only UD QP per queue, on a CQ of
//! its own on the completion vector of the queue's number, whose events
//! raise the queue's NAPI; that NAPI reclaims the queue's sends and wakes
//! the queue. `ethtool -C tx-usecs U tx-frames F` moderates those CQs:
//! an event waits for F completions or U microseconds, whichever comes
//! first, so a queue stopped for room is woken at most U later, whatever
//! the number of sends still outstanding (F without U is refused).
//!
//! Receivers do not care which QP a frame left from: they know a sender by
//! the GID its datagrams come from (the name service's key), never by its
//! source QPN, so every queue's QP of a node is accepted as that node.

use super::*;

/// Completion events of a transmit queue's CQ wake the queue's NAPI.
pub(super) struct TxEvents {
    /// The netdev while it is registered (the main CQ's cell, shared).
    netdev: DeviceCell<LanDev>,
    queue: u16,
}

impl CqHandler for TxEvents {
    fn completion(&self) {
        let rcu = RcuReadGuard::new();
        if let Some(dev) = self.netdev.get(&rcu) {
            dev.tx_napi_schedule(self.queue);
        }
    }
}

/// One transmit queue.
pub(super) struct TxQueue {
    /// Send-only: no receive buffers, no send buffers of its own (frames
    /// go from their skbs).
    pub(super) qp: UdQp<TxEvents>,
    /// Free send entries.
    pub(super) sq_free: AtomicU32,
    /// Sends completed (or flushed); compared with `PeerTable::posted`.
    pub(super) completed: AtomicU64,
    /// Frames and bytes sent on it, and the times it stopped for room.
    pub(super) packets: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) stops: AtomicU64,
}

impl TxQueue {
    /// One queue per online CPU, up to the device's completion vectors and
    /// [`MAX_TX_QUEUES`], queue `i` on vector `i`.
    pub(super) fn open_all(
        dev: &IbDevice,
        pd: &Pd,
        port: u32,
        config: &LanConfig,
        netdev: &DeviceCell<LanDev>,
    ) -> Result<KVec<TxQueue>> {
        let count = (crate::kapi::cpu::online_count() as usize)
            .min(dev.num_comp_vectors() as usize)
            .clamp(1, MAX_TX_QUEUES);
        let mut queues = KVec::with_capacity(count, GFP_KERNEL)?;
        for queue in 0..count as u16 {
            let cq = Cq::new(
                pd,
                SEND_DEPTH,
                queue.into(),
                TxEvents {
                    netdev: netdev.clone(),
                    queue,
                },
                CALLER,
            )?;
            let qp_config = UdQpConfig {
                depths: (SEND_DEPTH, 0),
                port,
                qkey: config.qkey(),
                recv_len: 0,
                send_buffers: &[],
            };
            queues.push(
                TxQueue {
                    qp: UdQp::new(pd, cq, &qp_config, CALLER)?,
                    sq_free: AtomicU32::new(SEND_DEPTH),
                    completed: AtomicU64::new(0),
                    packets: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    stops: AtomicU64::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        Ok(queues)
    }

    /// Arms the CQ; polls again at once if completions came meanwhile.
    pub(super) fn arm(&self, dev: &EtherDevice<LanDev>) {
        if self.qp.cq().arm() {
            dev.tx_napi_schedule(self.qp.cq().handler().queue);
        }
    }

    /// The `ethtool -S` values of [`TX_QUEUE_STAT_NAMES`].
    pub(super) fn stats(&self, out: &mut [u64]) {
        for (value, counter) in out
            .iter_mut()
            .zip([&self.packets, &self.bytes, &self.stops])
        {
            *value = counter.load(Ordering::Relaxed);
        }
    }
}

impl LanDev {
    /// The NAPI poll of transmit queue `queue`: reclaims its sends.
    pub(super) fn tx_poll(&self, dev: &EtherDevice<LanDev>, queue: u16, budget: u32) -> u32 {
        let Some(txq) = self.tx.get(usize::from(queue)) else {
            return 0;
        };
        let mut done = 0;
        let mut batch: [WorkCompletion<'_>; 16] = Default::default();
        while done < budget {
            let got = txq.qp.poll(&mut batch);
            for wc in batch.iter_mut().take(got) {
                self.tx_completion(dev, txq, queue, core::mem::take(wc));
            }
            done += got as u32;
            if got < batch.len() {
                break;
            }
        }
        done.min(budget)
    }

    /// One completion of a transmit queue's QP.
    pub(super) fn tx_completion(
        &self,
        dev: &EtherDevice<LanDev>,
        txq: &TxQueue,
        queue: u16,
        wc: WorkCompletion<'_>,
    ) {
        match txq.qp.complete(wc) {
            Completion::SkbSent | Completion::BufferSent(_) => {
                // Retired peers whose sends are all done may go (see
                // `release_retired`).
                txq.completed.fetch_add(1, Ordering::AcqRel);
                self.send_slot_freed(dev, txq, queue);
            }
            // The QP has no receive buffers; nothing else is its own.
            Completion::Received(_) | Completion::Foreign => {}
        }
    }

    /// Moderates every transmit queue's CQ with `new`; if the device
    /// refuses it, the CQs already changed go back to `old`.
    pub(super) fn moderate_tx(&self, new: Moderation, old: Moderation) -> Result {
        for (done, txq) in self.tx.iter().enumerate() {
            if let Err(err) = new.apply(txq.qp.cq()) {
                for txq in self.tx.iter().take(done) {
                    let _ = old.apply(txq.qp.cq());
                }
                return Err(err);
            }
        }
        Ok(())
    }

    /// Every QP's completed sends, in the order of `PeerTable::posted`.
    pub(super) fn sends_completed(&self) -> Posts {
        let mut completed = [0; QPS];
        if let Some(main) = completed.first_mut() {
            *main = self.sends_completed.load(Ordering::Acquire);
        }
        for (out, txq) in completed.iter_mut().skip(1).zip(self.tx.iter()) {
            *out = txq.completed.load(Ordering::Acquire);
        }
        completed
    }
}
