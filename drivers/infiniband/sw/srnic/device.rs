// SPDX-License-Identifier: GPL-2.0

//! An srnic device: one RoCEv2 port on one Ethernet netdev.

use crate::counters::Counters;
use crate::cq::SrnicCq;
use crate::kapi::netdev::NetDevice;
use crate::kapi::rdma::table::ObjectTable;
use crate::kapi::rdma::verbs::{
    AddressVector, CqArm, PollOutput, QpCaps, QpInit, QpModify, QpQuery, SrqAttributes, SrqModify,
};
use crate::kapi::rdma::wr::{RecvChain, SendChain};
use crate::kapi::rdma::{
    Advice, Ah, CounterNames, Cq, Device, DeviceAttributes, Driver, LinkLayer, MemoryRange, Mr,
    MrKind, Mw, MwType, OdpCaps, PhysState, PortAttributes, PortEvent, PortState, Qp, Srq,
    UserData, UserMemory, UserVerb, DEVICE_ATOMIC_WRITE, DEVICE_FLUSH_GLOBAL,
    DEVICE_FLUSH_PERSISTENT, DEVICE_MEM_MGT_EXTENSIONS, DEVICE_MEM_WINDOW,
    DEVICE_MEM_WINDOW_TYPE_2B, DEVICE_PORT_ACTIVE_EVENT, DEVICE_RC_RNR_NAK_GEN, DEVICE_SRQ_RESIZE,
    DEVICE_SYS_IMAGE_GUID, ODP_ATOMIC, ODP_READ, ODP_RECV, ODP_SEND, ODP_SRQ_RECV, ODP_WRITE,
    PORT_CM_SUP,
};
use crate::memory::{SrnicAh, SrnicMr, SrnicMw};
use crate::pure::mtu::{active_mtu_for_netdev, IbMtu};
use crate::pure::wr::QpType;
use crate::qp::SrnicQp;
use crate::srq::SrnicSrq;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// The only port of an srnic device.
const PORT: u32 = 1;

/// GID table entries: room for the IPv4 and IPv6 addresses of the netdev and
/// its VLAN and macvlan uppers, each as a RoCEv2 GID.
const GID_TABLE_LEN: u32 = 128;

/// The device's limits, as `ibv_devinfo -v` shows them and the verbs
/// enforce them.
pub(crate) mod limits {
    /// Protection domains.
    pub(crate) const MAX_PD: u32 = 1 << 16;
    /// Queue pairs.
    pub(crate) const MAX_QP: u32 = 1 << 16;
    /// Work requests per send or receive queue.
    pub(crate) const MAX_QP_WR: u32 = 1 << 14;
    /// Scatter/gather entries per work request.
    pub(crate) const MAX_SGE: u32 = crate::kapi::rdma::rxe_abi::wqe::MAX_SGE_CHECK as u32;
    /// Inline bytes per send work request.
    pub(crate) const MAX_INLINE: u32 = 512;
    /// Completion queues.
    pub(crate) const MAX_CQ: u32 = 1 << 14;
    /// Entries per completion queue.
    pub(crate) const MAX_CQE: u32 = (1 << 15) - 1;
    /// Memory regions.
    pub(crate) const MAX_MR: u32 = 1 << 16;
    /// Memory windows.
    pub(crate) const MAX_MW: u32 = 1 << 16;
    /// Address handles.
    pub(crate) const MAX_AH: u32 = 1 << 16;
    /// Shared receive queues.
    pub(crate) const MAX_SRQ: u32 = 1 << 14;
    /// Work requests per shared receive queue.
    pub(crate) const MAX_SRQ_WR: u32 = 1 << 14;
    /// RDMA READs and atomics a QP's responder takes at once: what its
    /// outbox and atomic results have room for (128, as rxe).
    pub(crate) const MAX_DEST_RD_ATOMIC: u32 = crate::pure::outbox::MAX_READS as u32;
    /// RDMA READs and atomics a QP's requester has outstanding at most.
    /// It costs the requester nothing, and tools such as perftest set it
    /// to the peer's responder depth, which is 128 on rxe.
    pub(crate) const MAX_INIT_RD_ATOMIC: u32 = 128;
    /// Pages in a fast-registration page list.
    pub(crate) const MAX_FAST_REG_PAGES: u32 = 512;
    /// The IB largest message size (2 GiB).
    pub(crate) const MAX_MSG_SIZE: u32 = 1 << 31;
}

use limits::{MAX_MSG_SIZE, MAX_PD};

/// First QP number handed out: QP0 and QP1 are special, and low numbers
/// stay clear of them for easy reading of traces.
const FIRST_QPN: u32 = 16;
/// QP numbers are 24 bits; the highest, 0xFFFFFF, names multicast.
const LAST_QPN: u32 = (1 << 24) - 2;
/// The GSI QP's number.
const GSI_QPN: u32 = 1;
/// MR and MW tables share the key space; MWs index above MRs.
pub(crate) const FIRST_MW_INDEX: u32 = limits::MAX_MR + 1;

/// A count of objects of one kind against its limit.
#[derive(Default)]
pub(crate) struct Quota(AtomicU32);

impl Quota {
    /// Takes one; `ENOMEM` at the limit.
    pub(crate) fn acquire(&self, max: u32) -> Result {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| ENOMEM)
    }

    /// Gives one back.
    pub(crate) fn release(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Objects in use per kind.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) pd: Quota,
    pub(crate) cq: Quota,
    pub(crate) qp: Quota,
    pub(crate) srq: Quota,
    pub(crate) mr: Quota,
    pub(crate) mw: Quota,
    pub(crate) ah: Quota,
}

/// No IEEE OUI is registered for srnic; like other soft devices it reports
/// the all-ones vendor ID.
const VENDOR_ID: u32 = 0xff_ffff;

/// Per-device state.
pub(crate) struct SrnicDevice {
    /// Whether the port was last reported active, so each transition
    /// raises exactly one event.
    port_active: AtomicBool,
    pub(crate) counts: Counts,
    /// QPs by number: where incoming packets find their QP.
    pub(crate) qps: ObjectTable<Qp<SrnicDevice>>,
    /// MRs by key index.
    pub(crate) mrs: ObjectTable<Mr<SrnicDevice>>,
    /// MWs by key index.
    pub(crate) mws: ObjectTable<Mw<SrnicDevice>>,
    /// AHs by the number user WQEs carry.
    pub(crate) ahs: ObjectTable<Ah<SrnicDevice>>,
    /// Multicast groups and the QPs attached to them.
    pub(crate) mcast: crate::mcast::GroupTable,
    /// Rotates the low byte of memory keys.
    pub(crate) key_byte: AtomicU32,
    /// Transport counters.
    pub(crate) counters: Counters,
    /// The netdev's interface index, under which the wire finds the device.
    pub(crate) ifindex: i32,
    /// Received packets all of the device's QPs hold for their receive
    /// work (`wire::steer`), which it bounds.
    pub(crate) steered: Arc<crate::wire::DeviceSteered>,
    /// The devices of the netdev's namespace, this one among them once
    /// attached.
    pub(crate) neighbourhood: Arc<crate::wire::Neighbourhood>,
}

impl Drop for SrnicDevice {
    fn drop(&mut self) {
        // Receivers no longer find us (the kapi unlisted the device).
        crate::wire::leave(&self.neighbourhood);
    }
}

impl SrnicDevice {
    pub(crate) fn new(netdev: &NetDevice) -> Result<Self> {
        Ok(SrnicDevice {
            port_active: AtomicBool::new(Self::port_is_usable(netdev)),
            counts: Counts::default(),
            qps: ObjectTable::new(FIRST_QPN, LAST_QPN)?,
            mrs: ObjectTable::new(1, limits::MAX_MR)?,
            mws: ObjectTable::new(FIRST_MW_INDEX, FIRST_MW_INDEX + limits::MAX_MW - 1)?,
            ahs: ObjectTable::new(1, limits::MAX_AH)?,
            mcast: crate::mcast::new_table()?,
            key_byte: AtomicU32::new(0),
            counters: Counters::new()?,
            ifindex: netdev.ifindex(),
            steered: Arc::new(crate::wire::DeviceSteered::new()?, GFP_KERNEL)?,
            neighbourhood: crate::wire::join(netdev)?,
        })
    }

    /// The port is active while the netdev is up, has carrier and has room
    /// for at least the smallest IB MTU.
    fn port_is_usable(netdev: &NetDevice) -> bool {
        netdev.is_running() && netdev.has_carrier() && active_mtu_for_netdev(netdev.mtu()).is_some()
    }

    /// Follows the netdev's state (up, carrier, MTU); raises `PORT_ACTIVE`
    /// or `PORT_ERR` when the port's state changes.
    pub(crate) fn update_port_state(dev: &Device<Self>) {
        let up = Self::port_is_usable(dev.netdev());
        if dev.port_active.swap(up, Ordering::AcqRel) == up {
            return;
        }
        pr_info!(
            "{}: port {} {} ({})\n",
            dev.name(),
            PORT,
            if up { "active" } else { "down" },
            dev.netdev().name()
        );
        dev.dispatch_port_event(
            PORT,
            if up {
                PortEvent::Active
            } else {
                PortEvent::Error
            },
        );
    }

    /// The active MTU is derived from the netdev MTU at every query, and IB
    /// has no event for an MTU change; this tells the administrator what the
    /// change means for RDMA.
    pub(crate) fn log_mtu_change(dev: &Device<Self>) {
        let mtu = dev.netdev().mtu();
        match active_mtu_for_netdev(mtu) {
            Some(ib_mtu) => pr_info!(
                "{}: netdev MTU {}, active IB MTU {}\n",
                dev.name(),
                mtu,
                ib_mtu.bytes()
            ),
            None => pr_warn!(
                "{}: netdev MTU {} is too small for RoCE, port has no usable MTU\n",
                dev.name(),
                mtu
            ),
        }
    }
}

#[vtable]
impl Driver for SrnicDevice {
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttributes> {
        Ok(DeviceAttributes {
            sys_image_guid: dev.node_guid(),
            max_mr_size: u64::MAX,
            // Any power of two from 4 KiB up.
            page_size_cap: !0xfff,
            vendor_id: VENDOR_ID,
            max_pd: MAX_PD,
            max_qp: limits::MAX_QP,
            max_qp_wr: limits::MAX_QP_WR,
            max_cq: limits::MAX_CQ,
            max_cqe: limits::MAX_CQE,
            max_mr: limits::MAX_MR,
            max_ah: limits::MAX_AH,
            max_cq_moderation_count: crate::pure::cq_event::MAX_MODERATION_COUNT,
            max_cq_moderation_period: crate::pure::cq_event::MAX_MODERATION_PERIOD_US,
            max_mcast_grp: crate::mcast::MAX_GROUPS,
            max_mcast_qp_attach: crate::mcast::MAX_QPS_PER_GROUP as u32,
            max_total_mcast_qp_attach: crate::mcast::MAX_ATTACHMENTS as u32,
            max_sge: limits::MAX_SGE,
            max_srq: limits::MAX_SRQ,
            max_srq_wr: limits::MAX_SRQ_WR,
            max_mw: limits::MAX_MW,
            max_qp_rd_atom: limits::MAX_DEST_RD_ATOMIC,
            max_qp_init_rd_atom: limits::MAX_INIT_RD_ATOMIC,
            max_fast_reg_page_list_len: limits::MAX_FAST_REG_PAGES,
            atomic_hca: true,
            max_pkeys: 1,
            device_cap_flags: DEVICE_PORT_ACTIVE_EVENT
                | DEVICE_SYS_IMAGE_GUID
                | DEVICE_RC_RNR_NAK_GEN
                | DEVICE_SRQ_RESIZE
                | DEVICE_MEM_WINDOW
                | DEVICE_MEM_WINDOW_TYPE_2B
                | DEVICE_MEM_MGT_EXTENSIONS
                // IBA 1.5 memory placement: soft memory has no separate
                // persistence domain, so both placement types are met
                // once the data is in the pages (see responder.rs).
                | DEVICE_FLUSH_GLOBAL
                | DEVICE_FLUSH_PERSISTENT
                | DEVICE_ATOMIC_WRITE,
            local_dma_lkey: true,
            // Memory paged on demand serves every operation of every
            // transport (see memory.rs and the requester's and
            // responder's waits for pages).
            odp: OdpCaps {
                rc: ODP_SEND | ODP_RECV | ODP_WRITE | ODP_READ | ODP_ATOMIC | ODP_SRQ_RECV,
                uc: ODP_SEND | ODP_RECV | ODP_WRITE | ODP_SRQ_RECV,
                ud: ODP_SEND | ODP_RECV | ODP_SRQ_RECV,
                implicit: true,
            },
            ..Default::default()
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttributes> {
        if port != PORT {
            return Err(EINVAL);
        }
        let netdev = dev.netdev();
        let phys_mtu = netdev.mtu();
        let active_mtu = active_mtu_for_netdev(phys_mtu);
        let up = Self::port_is_usable(netdev);
        // Speed comes from the netdev's ethtool settings; a netdev without
        // them (virtio reports none) gets the core's default.
        let (active_speed, active_width) = dev.eth_speed(port).unwrap_or((1, 1));
        Ok(PortAttributes {
            state: if up {
                PortState::Active
            } else {
                PortState::Down
            },
            phys_state: if up {
                PhysState::LinkUp
            } else {
                PhysState::Disabled
            },
            max_mtu: IbMtu::Mtu4096,
            active_mtu: active_mtu.unwrap_or(IbMtu::Mtu256),
            phys_mtu,
            gid_tbl_len: GID_TABLE_LEN,
            pkey_tbl_len: 1,
            port_cap_flags: PORT_CM_SUP,
            max_msg_sz: MAX_MSG_SIZE,
            active_speed,
            active_width,
        })
    }

    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        match (port, index) {
            (PORT, 0) => Ok(crate::pure::headers::DEFAULT_PKEY),
            _ => Err(EINVAL),
        }
    }

    fn alloc_pd(dev: &Device<Self>) -> Result {
        dev.counts.pd.acquire(MAX_PD)
    }

    fn dealloc_pd(dev: &Device<Self>) {
        dev.counts.pd.release();
    }

    type Cq = SrnicCq;
    type Qp = SrnicQp;
    type Srq = SrnicSrq;
    type Ah = SrnicAh;
    type Mr = SrnicMr;
    type Mw = SrnicMw;

    fn create_cq(
        dev: &Device<Self>,
        cqe: u32,
        _comp_vector: u32,
        user: Option<&UserData>,
    ) -> Result<(u32, impl PinInit<SrnicCq, Error>)> {
        SrnicCq::create(dev, cqe, user)
    }

    fn destroy_cq(cq: &Cq<Self>) {
        cq.device().counts.cq.release();
    }

    fn resize_cq(cq: &Cq<Self>, cqe: u32, user: Option<&UserData>) -> Result<u32> {
        cq.resize(cqe, user)
    }

    fn poll_cq(cq: &Cq<Self>, out: &mut PollOutput) {
        cq.poll(out)
    }

    fn req_notify_cq(cq: &Cq<Self>, arm: CqArm) -> bool {
        cq.arm(arm)
    }

    fn modify_cq(cq: &Cq<Self>, count: u16, period_us: u16) -> Result {
        cq.moderate(count, period_us)
    }

    fn cq_moderation_expired(cq: &Cq<Self>) {
        cq.moderation_expired().run(cq);
    }

    fn create_qp(
        dev: &Device<Self>,
        init: &QpInit,
        user: Option<&UserData>,
    ) -> Result<(QpCaps, impl PinInit<SrnicQp, Error>)> {
        SrnicQp::create(dev, init, user)
    }

    fn publish_qp(qp: &Qp<Self>) -> Result<u32> {
        let dev = qp.device();
        if qp.qp_type() == QpType::Gsi {
            dev.qps.insert_at(GSI_QPN, qp).map(|()| GSI_QPN)
        } else {
            dev.qps.insert(qp)
        }
    }

    fn destroy_qp(qp: &Qp<Self>) {
        SrnicQp::destroy(qp)
    }

    fn attach_mcast(qp: &Qp<Self>, mgid: &[u8; 16]) -> Result {
        crate::mcast::attach(qp, mgid)
    }

    fn detach_mcast(qp: &Qp<Self>, mgid: &[u8; 16]) -> Result {
        crate::mcast::detach(qp, mgid)
    }

    fn modify_qp(qp: &Qp<Self>, modify: &QpModify) -> Result {
        SrnicQp::modify(qp, modify)
    }

    fn query_qp(qp: &Qp<Self>) -> QpQuery {
        qp.query()
    }

    fn post_send(qp: &Qp<Self>, wrs: &mut SendChain<'_>) -> Result {
        SrnicQp::post_send(qp, wrs)
    }

    fn doorbell(qp: &Qp<Self>) -> Result {
        SrnicQp::doorbell(qp)
    }

    fn post_recv(qp: &Qp<Self>, wrs: &mut RecvChain<'_>) -> Result {
        SrnicQp::post_recv(qp, wrs)
    }

    fn create_srq(
        dev: &Device<Self>,
        attrs: &SrqAttributes,
        user: Option<&UserData>,
    ) -> Result<(SrqAttributes, impl PinInit<SrnicSrq, Error>)> {
        SrnicSrq::create(dev, attrs, user)
    }

    fn destroy_srq(srq: &Srq<Self>) {
        SrnicSrq::destroy(srq)
    }

    fn modify_srq(srq: &Srq<Self>, modify: &SrqModify, user: Option<&UserData>) -> Result {
        srq.modify(modify, user)
    }

    fn query_srq(srq: &Srq<Self>) -> SrqAttributes {
        srq.query()
    }

    fn post_srq_recv(srq: &Srq<Self>, wrs: &mut RecvChain<'_>) -> Result {
        srq.post(wrs)
    }

    fn create_ah(
        dev: &Device<Self>,
        av: &AddressVector,
        user: bool,
    ) -> Result<impl PinInit<SrnicAh, Error>> {
        SrnicAh::create(dev, av, user)
    }

    fn publish_ah(ah: &Ah<Self>) -> Result<u32> {
        SrnicAh::publish(ah)
    }

    fn destroy_ah(ah: &Ah<Self>) {
        SrnicAh::destroy(ah)
    }

    fn query_ah(ah: &Ah<Self>) -> AddressVector {
        ah.av()
    }

    fn ah_number(ah: &Ah<Self>) -> u32 {
        ah.number()
    }

    fn create_mr(
        dev: &Device<Self>,
        kind: MrKind,
        access: u32,
    ) -> Result<impl PinInit<SrnicMr, Error>> {
        SrnicMr::create(dev, kind, access)
    }

    fn publish_mr(mr: &Mr<Self>) -> Result<u32> {
        SrnicMr::publish(mr)
    }

    fn rereg_mr(
        mr: &Mr<Self>,
        verb: &UserVerb<'_>,
        memory: Option<(UserMemory, u64)>,
        access: Option<u32>,
        relocate: Option<&dyn Fn()>,
    ) -> Result<Option<UserMemory>> {
        mr.rereg(verb, memory, access, relocate)
    }

    fn mr_access(mr: &Mr<Self>) -> u32 {
        mr.access()
    }

    fn destroy_mr(mr: &Mr<Self>) -> Result {
        SrnicMr::destroy(mr)
    }

    fn map_mr_pages(
        mr: &Mr<Self>,
        pages: &[u64],
        page_size: u32,
        iova: u64,
        length: u64,
    ) -> Result {
        mr.map_pages(pages, page_size, iova, length)
    }

    /// The rest of a requester's run that spent its budget, answers
    /// waiting in the outbox, the end of an RNR wait, the retransmission
    /// timer, and the flush of receives a process posted in ERR, on the
    /// QP's own CPU.
    fn qp_work(qp: &Qp<Self>) {
        SrnicQp::run_fault(qp);
        // The completion events of the rest go out once, at its end: a
        // consumer that waits for them wakes once per work (a few runs of
        // up to a MiB each, `requester::RUN_BUDGET`), not once per
        // message. A page fault resolved above may sleep for long; nothing
        // is held across it.
        let _held = qp.device().comp_vectors().hold_raises();
        crate::outbox::run(qp);
        let waiting = crate::requester::kick_waiting(qp);
        let timing = crate::completer::check_timeout(qp);
        let sweeping = SrnicQp::sweep(qp);
        if waiting || timing {
            qp.run_work_after(crate::completer::TIMER_TICK_MS);
        } else if sweeping {
            qp.run_work_after(crate::qp::SWEEP_INTERVAL_MS);
        }
    }

    /// Packets of bulk transfers that arrived on another CPU (see
    /// `wire::steer`).
    fn qp_receive_work(qp: &Qp<Self>) {
        crate::wire::receive_steered(qp);
    }

    const ON_DEMAND_PAGING: bool = true;

    fn advise_mr(
        dev: &Device<Self>,
        pd: usize,
        advice: Advice,
        _sync: bool,
        ranges: &[MemoryRange],
    ) -> Result {
        // Always done by return: a prefetch is a fault like the
        // transport's, and this verb already runs in process context.
        crate::memory::advise(dev, pd, advice, ranges)
    }

    const COUNTERS: &'static CounterNames = &crate::counters::NAMES;

    fn read_counters(dev: &Device<Self>, _port: u32, values: &mut [u64]) {
        dev.counters.read(values);
    }

    fn create_mw(dev: &Device<Self>, mw_type: MwType) -> Result<impl PinInit<SrnicMw, Error>> {
        SrnicMw::create(dev, mw_type)
    }

    fn publish_mw(mw: &Mw<Self>) -> Result<u32> {
        SrnicMw::publish(mw)
    }

    fn destroy_mw(mw: &Mw<Self>) {
        SrnicMw::destroy(mw)
    }
}
