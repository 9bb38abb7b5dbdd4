// SPDX-License-Identifier: GPL-2.0

//! The port's transport counters, per CPU, as `rdma statistic show link
//! DEV/1` lists them.

use crate::kapi::percpu::PerCpuCounters;
use crate::kapi::rdma::{CounterDesc, CounterNames};

/// What srnic counts; the order is the order of [`NAMES`]. Timeouts,
/// transport retries, ICRC errors and malformed packets come with the
/// RoCEv2 wire; loopback has none, and they read zero.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counter {
    SentPackets,
    SentBytes,
    ReceivedPackets,
    ReceivedBytes,
    /// Go-back-N restarts (after a sequence NAK or an RNR wait).
    Resends,
    /// Retransmission timer expiries.
    Timeouts,
    RnrNaksSent,
    RnrNaksReceived,
    SequenceNaksSent,
    SequenceNaksReceived,
    AccessNaksSent,
    AccessNaksReceived,
    InvalidRequestNaksSent,
    InvalidRequestNaksReceived,
    OperationNaksSent,
    OperationNaksReceived,
    /// Requests seen before (re-acknowledged or re-executed).
    DuplicateRequests,
    /// Requests ahead of the expected PSN, dropped.
    OutOfSequenceRequests,
    RetryExceeded,
    RnrRetryExceeded,
    IcrcErrors,
    /// Packets dropped as malformed (bad headers or lengths).
    MalformedPackets,
    /// Packets for a QP that does not exist.
    UnknownQpPackets,
    /// Datagrams with the wrong Q_Key.
    QkeyViolations,
    /// Datagrams that found no receive WQE.
    NoReceiveDrops,
    /// Packets with no route to their destination.
    UnroutableDatagrams,
    /// READ responses after a gap (the rest is asked for again).
    OutOfSequenceResponses,
    /// UC messages dropped by the responder (a lost packet, no receive
    /// WQE, or a request it may not execute).
    DroppedMessages,
    /// Packets for a connected QP from an address other than its peer's.
    ForeignPackets,
    /// Packets of a partition the port is not a member of.
    PkeyViolations,
    /// Answers (READ response packets, ACKs) the device queue refused,
    /// sent again a moment later.
    TransmitRetries,
    /// Answers given up: too many queued behind a READ response, the
    /// region gone before its response was sent, or refused for too long
    /// (the requester asks again).
    AnswersDropped,
    /// Answers (ACKs, NAKs, READ responses, atomic acknowledgements) the
    /// completer refused: for a PSN never sent or no longer outstanding,
    /// from an address other than the peer's, or not the response awaited.
    RejectedAnswers,
    /// Times the requester was started (by a post, an answer, a timer or
    /// its work); a refused answer must not start it.
    RequesterRuns,
    /// Accesses to memory paged on demand that found a page not present
    /// (and waited for it: an RNR NAK, a deferred send, a dropped
    /// response or datagram).
    OdpMisses,
    /// Ranges of such memory faulted in by a QP's work.
    OdpFaults,
    /// Faults that failed (the process maps no memory there): the access
    /// that wanted it fails.
    OdpFaultErrors,
    /// Acknowledgements of a WQE the requester was sending again at that
    /// moment, completed once it had read the payload.
    DeferredAcks,
    /// Received packets of multi-packet messages handed to the QP's
    /// receive work on another CPU.
    SteeredPackets,
    /// Such packets dropped because the QP's receive backlog was full.
    SteerDrops,
    /// Quiet tails of unsignaled messages sent again to draw an
    /// acknowledgement.
    TailProbes,
    /// Packets built with their payload as page fragments of the sender's
    /// memory (not copied): never for a device without scatter-gather.
    ZeroCopyPackets,
    /// Posts from user space whose messages were left to the requester run
    /// an acknowledgement on its way starts (see
    /// `requester::answer_will_send`).
    PostsLeftToAnswers,
}

const COUNT: usize = Counter::PostsLeftToAnswers as usize + 1;

const DESCS: [CounterDesc; COUNT] = [
    CounterDesc::new(kernel::c_str!("sent_packets")),
    CounterDesc::new(kernel::c_str!("sent_bytes")),
    CounterDesc::new(kernel::c_str!("received_packets")),
    CounterDesc::new(kernel::c_str!("received_bytes")),
    CounterDesc::new(kernel::c_str!("resends")),
    CounterDesc::new(kernel::c_str!("timeouts")),
    CounterDesc::new(kernel::c_str!("rnr_naks_sent")),
    CounterDesc::new(kernel::c_str!("rnr_naks_received")),
    CounterDesc::new(kernel::c_str!("sequence_naks_sent")),
    CounterDesc::new(kernel::c_str!("sequence_naks_received")),
    CounterDesc::new(kernel::c_str!("access_naks_sent")),
    CounterDesc::new(kernel::c_str!("access_naks_received")),
    CounterDesc::new(kernel::c_str!("invalid_request_naks_sent")),
    CounterDesc::new(kernel::c_str!("invalid_request_naks_received")),
    CounterDesc::new(kernel::c_str!("operation_naks_sent")),
    CounterDesc::new(kernel::c_str!("operation_naks_received")),
    CounterDesc::new(kernel::c_str!("duplicate_requests")),
    CounterDesc::new(kernel::c_str!("out_of_sequence_requests")),
    CounterDesc::new(kernel::c_str!("retry_exceeded")),
    CounterDesc::new(kernel::c_str!("rnr_retry_exceeded")),
    CounterDesc::new(kernel::c_str!("icrc_errors")),
    CounterDesc::new(kernel::c_str!("malformed_packets")),
    CounterDesc::new(kernel::c_str!("unknown_qp_packets")),
    CounterDesc::new(kernel::c_str!("qkey_violations")),
    CounterDesc::new(kernel::c_str!("no_receive_drops")),
    CounterDesc::new(kernel::c_str!("unroutable_datagrams")),
    CounterDesc::new(kernel::c_str!("out_of_sequence_responses")),
    CounterDesc::new(kernel::c_str!("dropped_messages")),
    CounterDesc::new(kernel::c_str!("foreign_packets")),
    CounterDesc::new(kernel::c_str!("pkey_violations")),
    CounterDesc::new(kernel::c_str!("transmit_retries")),
    CounterDesc::new(kernel::c_str!("answers_dropped")),
    CounterDesc::new(kernel::c_str!("rejected_answers")),
    CounterDesc::new(kernel::c_str!("requester_runs")),
    CounterDesc::new(kernel::c_str!("odp_misses")),
    CounterDesc::new(kernel::c_str!("odp_faults")),
    CounterDesc::new(kernel::c_str!("odp_fault_errors")),
    CounterDesc::new(kernel::c_str!("deferred_acks")),
    CounterDesc::new(kernel::c_str!("steered_packets")),
    CounterDesc::new(kernel::c_str!("steer_drops")),
    CounterDesc::new(kernel::c_str!("tail_probes")),
    CounterDesc::new(kernel::c_str!("zero_copy_packets")),
    CounterDesc::new(kernel::c_str!("posts_left_to_answers")),
];

/// The names the core shows.
pub(crate) static NAMES: CounterNames = CounterNames::new(&DESCS);

/// A device's counters.
pub(crate) struct Counters(PerCpuCounters<COUNT>);

impl Counters {
    pub(crate) fn new() -> kernel::prelude::Result<Self> {
        Ok(Self(PerCpuCounters::new()?))
    }

    /// Counts one `counter` event.
    pub(crate) fn inc(&self, counter: Counter) {
        self.0.add(counter as usize, 1);
    }

    /// Adds `value` to `counter`.
    pub(crate) fn add(&self, counter: Counter, value: u64) {
        self.0.add(counter as usize, value);
    }

    /// Fills `values` in the order of [`NAMES`].
    pub(crate) fn read(&self, values: &mut [u64]) {
        for (index, value) in values.iter_mut().enumerate().take(COUNT) {
            *value = self.0.sum(index);
        }
    }
}
