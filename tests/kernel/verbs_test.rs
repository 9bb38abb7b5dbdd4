// SPDX-License-Identifier: GPL-2.0

//! In-kernel verbs test: a kernel consumer of srnic0 checks what user space
//! cannot reach: `ib_post_send`/`ib_post_recv` argument checks with
//! `bad_wr`, the flush of outstanding work when a kernel QP moves to ERR
//! (seed 004: every WR exactly once, in order), WRs posted in ERR, and
//! `ib_drain_qp`; then the completion events of kernel CQs (seed 002):
//! the arming rules, missed events, moderation, and each CQ's events on
//! the CPU of its vector; last IBA 1.5's RDMA FLUSH and ATOMIC WRITE from a
//! kernel consumer (both in an `ib_rdma_wr`) over a region
//! given flush access by fast registration.
//!
//! Loading the module runs the test; it loads only if every check passed,
//! and says what failed otherwise. The verbs are the core's consumer API,
//! called directly: this is a test, not a driver.

#[path = "../../rust/bindings/mod.rs"]
mod bindings;

use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use kernel::c_str;
use kernel::ffi::{c_char, c_int, c_void};
use kernel::prelude::*;

module! {
    type: VerbsTest,
    name: "srnic_verbs_test",
    author: "The srnic developers",
    description: "In-kernel verbs test for srnic: post checks, flush, drain",
    license: "GPL",
}

const DEVICE: &CStr = c_str!("srnic0");
const CALLER: &CStr = c_str!("srnic_verbs_test");
const SENDS: u32 = 8;
const RECVS: u32 = 12;
const RECV_BASE: u32 = 100;
const LATE_SEND_BASE: u32 = 200;
const LATE_RECV_BASE: u32 = 300;

/// Completions in the order the CQ delivered them: (WR tag, status).
static LOG: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];
static LOG_STATUS: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];
static LOG_LEN: AtomicUsize = AtomicUsize::new(0);

/// A WR's completion entry: the core calls `done` with the `ib_cqe`,
/// which is the first field, so the tag can be found from it.
#[repr(C)]
struct Tagged {
    cqe: bindings::ib_cqe,
    tag: u32,
}

/// # Safety
///
/// Called only by the core for a completion of a WR whose `wr_cqe` is the
/// `cqe` of a live [`Tagged`].
unsafe extern "C" fn done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: the core passes the completion of one of our WRs, whose
    // `wr_cqe` points at the `cqe` field of a live `Tagged`.
    let (tag, status) = unsafe {
        let tagged = (*wc).__bindgen_anon_1.wr_cqe.cast::<Tagged>();
        ((*tagged).tag, (*wc).status)
    };
    let at = LOG_LEN.fetch_add(1, Ordering::AcqRel);
    if let (Some(slot), Some(st)) = (LOG.get(at), LOG_STATUS.get(at)) {
        slot.store(tag, Ordering::Release);
        st.store(status, Ordering::Release);
    }
}

fn is_err<T>(ptr: *mut T) -> bool {
    (ptr as isize) < 0 && (ptr as isize) >= -4095
}

/// What the test holds, released in reverse order whatever happened.
struct Resources {
    dev: *mut bindings::ib_device,
    pd: *mut bindings::ib_pd,
    /// A CQ from `ib_alloc_cq` (the core polls it for us).
    cq: *mut bindings::ib_cq,
    /// CQs from `ib_create_cq`, with our own handler: two receive CQs and
    /// a send CQ.
    own_cqs: [*mut bindings::ib_cq; 3],
    qps: [*mut bindings::ib_qp; 2],
    /// What the SGEs point at: dropped after `drop` destroyed the QPs.
    buffer: Option<KBox<[u8; 64]>>,
}

impl Resources {
    fn new() -> Self {
        Self {
            dev: null_mut(),
            pd: null_mut(),
            cq: null_mut(),
            own_cqs: [null_mut(); 3],
            qps: [null_mut(); 2],
            buffer: None,
        }
    }
}

impl Drop for Resources {
    fn drop(&mut self) {
        // SAFETY: each pointer is NULL or an object this test created and
        // still owns; objects go before what they use.
        unsafe {
            for qp in self.qps {
                if !qp.is_null() {
                    bindings::ib_destroy_qp_user(qp, null_mut());
                }
            }
            if !self.cq.is_null() {
                bindings::ib_free_cq(self.cq);
            }
            for cq in self.own_cqs {
                if !cq.is_null() {
                    bindings::ib_destroy_cq_user(cq, null_mut());
                }
            }
            if !self.pd.is_null() {
                bindings::ib_dealloc_pd_user(self.pd, null_mut());
            }
            if !self.dev.is_null() {
                bindings::ib_device_put(self.dev);
            }
        }
    }
}

/// Test points reported so far, in KTAP numbering.
static TEST_POINTS: AtomicU32 = AtomicU32::new(0);

/// A KTAP test point: `ok N what`, or the failure the caller reports as
/// `not ok`.
fn check(ok: bool, what: &'static str) -> Result<(), &'static str> {
    check_quiet(ok, what)?;
    let number = TEST_POINTS.fetch_add(1, Ordering::Relaxed) + 1;
    pr_info!("ok {} {}\n", number, what);
    Ok(())
}

/// A QP of `qp_type` on `r.pd` with `r.cq` for both queues, or NULL.
///
/// # Safety
///
/// `r.pd` and `r.cq` are live objects of this test.
unsafe fn create_qp(
    r: &Resources,
    qp_type: bindings::ib_qp_type,
    depth: u32,
) -> *mut bindings::ib_qp {
    let mut init = bindings::ib_qp_init_attr {
        send_cq: r.cq,
        recv_cq: r.cq,
        sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
        qp_type,
        port_num: 1,
        ..Default::default()
    };
    init.cap.max_send_wr = depth;
    init.cap.max_recv_wr = depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    // SAFETY: a valid PD and attributes; the result is checked.
    let qp = unsafe { bindings::ib_create_qp_kernel(r.pd, &mut init, CALLER.as_char_ptr()) };
    if is_err(qp) {
        null_mut()
    } else {
        qp
    }
}

/// `ib_modify_qp`.
///
/// # Safety
///
/// `qp` is a live QP of this test.
unsafe fn modify(qp: *mut bindings::ib_qp, attr: &mut bindings::ib_qp_attr, mask: u32) -> c_int {
    // SAFETY: a live QP of ours and a filled attribute.
    unsafe { bindings::ib_modify_qp(qp, attr, mask as c_int) }
}

fn send_wr(
    tagged: &mut Tagged,
    sge: &mut bindings::ib_sge,
    num_sge: c_int,
) -> bindings::ib_send_wr {
    let mut wr = bindings::ib_send_wr {
        sg_list: sge,
        num_sge,
        opcode: bindings::ib_wr_opcode_IB_WR_SEND,
        send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
        ..Default::default()
    };
    wr.__bindgen_anon_1.wr_cqe = &mut tagged.cqe;
    wr
}

fn recv_wr(tagged: &mut Tagged, sge: &mut bindings::ib_sge) -> bindings::ib_recv_wr {
    let mut wr = bindings::ib_recv_wr {
        sg_list: sge,
        num_sge: 1,
        ..Default::default()
    };
    wr.__bindgen_anon_1.wr_cqe = &mut tagged.cqe;
    wr
}

/// Posts the send chain `wr`; the status and the WR it stopped at.
///
/// # Safety
///
/// `qp` is a live QP of this test; the chain's SGEs cover memory that
/// stays valid while the QP lives, and its `wr_cqe`s stay valid until
/// their completions are processed.
unsafe fn post_send(
    qp: *mut bindings::ib_qp,
    wr: &bindings::ib_send_wr,
) -> (c_int, *const bindings::ib_send_wr) {
    let mut bad: *const bindings::ib_send_wr = null_mut();
    // SAFETY: a live QP and a valid chain.
    let ret = unsafe { bindings::srnic_test_post_send(qp, wr, &mut bad) };
    (ret, bad)
}

/// Posts the receive chain `wr`; the status and the WR it stopped at.
///
/// # Safety
///
/// `qp` is a live QP of this test; the chain's SGEs cover memory that
/// stays valid while the QP lives, and its `wr_cqe`s stay valid until
/// their completions are processed.
unsafe fn post_recv(
    qp: *mut bindings::ib_qp,
    wr: &bindings::ib_recv_wr,
) -> (c_int, *const bindings::ib_recv_wr) {
    let mut bad: *const bindings::ib_recv_wr = null_mut();
    // SAFETY: a live QP and a valid chain.
    let ret = unsafe { bindings::srnic_test_post_recv(qp, wr, &mut bad) };
    (ret, bad)
}

/// Runs the completions of `cq` (its `done` callbacks) in this thread.
///
/// # Safety
///
/// `cq` is a live CQ of this test with `IB_POLL_DIRECT`.
unsafe fn process(cq: *mut bindings::ib_cq) {
    // SAFETY: a live CQ of ours polled directly, in this thread.
    unsafe { bindings::ib_process_cq_direct(cq, -1) };
}

/// The tags logged in `range` of the log.
fn logged(from: usize, to: usize) -> impl Iterator<Item = (u32, u32)> {
    (from..to).filter_map(|i| {
        Some((
            LOG.get(i)?.load(Ordering::Acquire),
            LOG_STATUS.get(i)?.load(Ordering::Acquire),
        ))
    })
}

/// Moves RC `qp` from RESET to RTS connected to itself over the port's
/// RoCEv2 link-local GID, whose MAC the core derives without ARP.
///
/// # Safety
///
/// `dev` is a registered device and `qp` a live RC QP of it, in RESET.
unsafe fn connect_to_itself(
    dev: *mut bindings::ib_device,
    qp: *mut bindings::ib_qp,
    timeout: u8,
    min_rnr_timer: u8,
    access: u32,
) -> Result<(), &'static str> {
    // SAFETY: the QP is live.
    let dest = unsafe { (*qp).qp_num };
    // SAFETY: per the caller.
    unsafe { connect_to(dev, qp, dest, timeout, min_rnr_timer, access) }
}

/// Moves RC `qp` from RESET to RTS connected to QP `dest` of the same
/// device (see `connect_to_itself`).
///
/// # Safety
///
/// As for [`connect_to_itself`].
unsafe fn connect_to(
    dev: *mut bindings::ib_device,
    qp: *mut bindings::ib_qp,
    dest: u32,
    timeout: u8,
    min_rnr_timer: u8,
    access: u32,
) -> Result<(), &'static str> {
    let mut attr = bindings::ib_qp_attr {
        qp_state: bindings::ib_qp_state_IB_QPS_INIT,
        port_num: 1,
        qp_access_flags: access as c_int,
        ..Default::default()
    };
    let m = bindings::ib_qp_attr_mask_IB_QP_STATE
        | bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX
        | bindings::ib_qp_attr_mask_IB_QP_PORT
        | bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    // SAFETY: live objects of this test (this function's contract).
    let ret = unsafe { modify(qp, &mut attr, m) };
    check(ret == 0, "modify RC to INIT")?;
    let mut gid = bindings::ib_gid::default();
    // SAFETY: a registered device; the GID is written to our local.
    let ret = unsafe { bindings::rdma_query_gid(dev, 1, 0, &mut gid) };
    check(ret == 0, "query GID 0")?;
    let mut attr = bindings::ib_qp_attr {
        qp_state: bindings::ib_qp_state_IB_QPS_RTR,
        path_mtu: bindings::ib_mtu_IB_MTU_1024,
        dest_qp_num: dest,
        max_dest_rd_atomic: 1,
        min_rnr_timer,
        ..Default::default()
    };
    attr.ah_attr.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    attr.ah_attr.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
    attr.ah_attr.port_num = 1;
    attr.ah_attr.grh.dgid = gid;
    attr.ah_attr.grh.sgid_index = 0;
    attr.ah_attr.grh.hop_limit = 1;
    let m = bindings::ib_qp_attr_mask_IB_QP_STATE
        | bindings::ib_qp_attr_mask_IB_QP_AV
        | bindings::ib_qp_attr_mask_IB_QP_PATH_MTU
        | bindings::ib_qp_attr_mask_IB_QP_DEST_QPN
        | bindings::ib_qp_attr_mask_IB_QP_RQ_PSN
        | bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC
        | bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    // SAFETY: live objects of this test (this function's contract).
    check(unsafe { modify(qp, &mut attr, m) } == 0, "modify RC to RTR")?;
    let mut attr = bindings::ib_qp_attr {
        qp_state: bindings::ib_qp_state_IB_QPS_RTS,
        timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..Default::default()
    };
    let m = bindings::ib_qp_attr_mask_IB_QP_STATE
        | bindings::ib_qp_attr_mask_IB_QP_TIMEOUT
        | bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT
        | bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY
        | bindings::ib_qp_attr_mask_IB_QP_SQ_PSN
        | bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    // SAFETY: live objects of this test (this function's contract).
    check(unsafe { modify(qp, &mut attr, m) } == 0, "modify RC to RTS")?;
    Ok(())
}

/// srnic0, with a reference the caller drops with `ib_device_put`.
fn get_device() -> Result<*mut bindings::ib_device, &'static str> {
    // SAFETY: a NUL-terminated name; the caller drops the reference.
    let dev = unsafe {
        bindings::ib_device_get_by_name(
            DEVICE.as_char_ptr(),
            bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        )
    };
    check(!dev.is_null(), "srnic0 exists")?;
    Ok(dev)
}

/// A PD on `dev`, which the caller deallocates.
///
/// # Safety
///
/// `dev` is a registered device.
unsafe fn alloc_pd(dev: *mut bindings::ib_device) -> Result<*mut bindings::ib_pd, &'static str> {
    // SAFETY: a registered device; the caller deallocates the PD.
    let pd = unsafe { bindings::__ib_alloc_pd(dev, 0, CALLER.as_char_ptr()) };
    check(!is_err(pd), "ib_alloc_pd")?;
    Ok(pd)
}

/// A 64-byte kernel buffer, kept in `r` until its QPs are gone, and the
/// SGE that covers it through the local DMA lkey of `r.pd`.
///
/// # Safety
///
/// `r.pd` is a live PD.
unsafe fn buffer_sge(r: &mut Resources) -> Result<bindings::ib_sge, &'static str> {
    let buffer = KBox::new([0u8; 64], GFP_KERNEL).map_err(|_| "allocate buffer")?;
    // SAFETY: the PD is live (the caller's contract); its local DMA lkey
    // covers kernel memory.
    let lkey = unsafe { (*r.pd).local_dma_lkey };
    let sge = bindings::ib_sge {
        addr: buffer.as_ptr() as u64,
        length: 64,
        lkey,
    };
    r.buffer = Some(buffer);
    Ok(sge)
}

fn run() -> Result<(), &'static str> {
    let mut r = Resources::new();
    r.dev = get_device()?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    r.pd = unsafe { alloc_pd(r.dev) }?;
    // SAFETY: as above.
    let cq = unsafe {
        bindings::__ib_alloc_cq(
            r.dev,
            null_mut(),
            128,
            0,
            bindings::ib_poll_context_IB_POLL_DIRECT,
            CALLER.as_char_ptr(),
        )
    };
    check(!is_err(cq), "ib_alloc_cq")?;
    r.cq = cq;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let qp = unsafe { create_qp(&r, bindings::ib_qp_type_IB_QPT_RC, 16) };
    check(!qp.is_null(), "ib_create_qp RC")?;
    r.qps[0] = qp;

    // The sends find no receive WR and are told to wait: with the longest
    // RNR timer (code 0, 655 ms) they are still waiting when the flush
    // comes a few milliseconds after the receives are posted; with a short
    // one a send could land in a receive first.
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { connect_to_itself(r.dev, qp, 31, 0, 0) }?;

    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let mut sge = unsafe { buffer_sge(&mut r) }?;
    let mut tags = KVec::new();
    let all = Iterator::chain(0..SENDS, RECV_BASE..RECV_BASE + RECVS);
    let all = Iterator::chain(all, LATE_SEND_BASE..LATE_SEND_BASE + 2);
    let all = Iterator::chain(all, LATE_RECV_BASE..LATE_RECV_BASE + 2);
    for tag in Iterator::chain(all, 900..902) {
        let cqe = bindings::ib_cqe { done: Some(done) };
        tags.push(Tagged { cqe, tag }, GFP_KERNEL)
            .map_err(|_| "allocate tags")?;
    }
    let (sends, rest) = tags.split_at_mut(SENDS as usize);
    let (recvs, rest) = rest.split_at_mut(RECVS as usize);
    let (late_sends, rest) = rest.split_at_mut(2);
    let (late_recvs, bad) = rest.split_at_mut(2);

    // A chain whose second WR has more SGEs than the device allows fails
    // there: the first is posted, `bad_wr` names the second.
    let mut too_many = send_wr(&mut bad[0], &mut sge, 33);
    let mut first = send_wr(&mut sends[0], &mut sge, 1);
    first.next = &mut too_many;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let (ret, bad_wr) = unsafe { post_send(qp, &first) };
    check(
        ret == -(bindings::EINVAL as c_int) && core::ptr::eq(bad_wr, &too_many),
        "post_send: too many SGEs fails with EINVAL, bad_wr at the bad WR",
    )?;
    for tagged in sends.iter_mut().skip(1) {
        let wr = send_wr(tagged, &mut sge, 1);
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        check(unsafe { post_send(qp, &wr) }.0 == 0, "post_send")?;
    }
    for tagged in recvs.iter_mut() {
        let wr = recv_wr(tagged, &mut sge);
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        check(unsafe { post_recv(qp, &wr) }.0 == 0, "post_recv")?;
    }
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { process(r.cq) };
    check(
        LOG_LEN.load(Ordering::Acquire) == 0,
        "nothing completes before the flush",
    )?;

    let mut attr = bindings::ib_qp_attr {
        qp_state: bindings::ib_qp_state_IB_QPS_ERR,
        ..Default::default()
    };
    check(
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        unsafe { modify(qp, &mut attr, bindings::ib_qp_attr_mask_IB_QP_STATE) } == 0,
        "modify RC to ERR",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { process(r.cq) };
    let flushed = LOG_LEN.load(Ordering::Acquire);
    check(flushed == (SENDS + RECVS) as usize, "ERR flushes N + M WRs")?;
    let flush = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR;
    let expected = Iterator::chain(0..SENDS, RECV_BASE..RECV_BASE + RECVS);
    check(
        logged(0, flushed).map(|(t, _)| t).eq(expected),
        "flushed in posting order, sends then receives",
    )?;
    check(
        logged(0, flushed).all(|(_, s)| s == flush),
        "every flushed WR completes with IB_WC_WR_FLUSH_ERR",
    )?;

    for tagged in late_sends.iter_mut() {
        let wr = send_wr(tagged, &mut sge, 1);
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        check(unsafe { post_send(qp, &wr) }.0 == 0, "post_send in ERR")?;
    }
    for tagged in late_recvs.iter_mut() {
        let wr = recv_wr(tagged, &mut sge);
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        check(unsafe { post_recv(qp, &wr) }.0 == 0, "post_recv in ERR")?;
    }
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { process(r.cq) };
    let total = LOG_LEN.load(Ordering::Acquire);
    let expected = Iterator::chain(
        LATE_SEND_BASE..LATE_SEND_BASE + 2,
        LATE_RECV_BASE..LATE_RECV_BASE + 2,
    );
    check(
        total == flushed + 4 && logged(flushed, total).map(|(t, _)| t).eq(expected),
        "WRs posted in ERR are flushed, in order",
    )?;

    // SAFETY: a live kernel QP whose CQ is polled directly; the drain WRs
    // complete through the core's own cqes.
    unsafe { bindings::ib_drain_qp(qp) };
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { process(r.cq) };
    check(
        LOG_LEN.load(Ordering::Acquire) == total,
        "ib_drain_qp returns, nothing duplicated",
    )?;

    // A full queue refuses more with ENOMEM, naming the WR that did not fit.
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let small = unsafe { create_qp(&r, bindings::ib_qp_type_IB_QPT_UD, 1) };
    check(!small.is_null(), "ib_create_qp UD")?;
    r.qps[1] = small;
    let mut attr = bindings::ib_qp_attr {
        qp_state: bindings::ib_qp_state_IB_QPS_INIT,
        port_num: 1,
        qkey: 0x1111_1111,
        ..Default::default()
    };
    let m = bindings::ib_qp_attr_mask_IB_QP_STATE
        | bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX
        | bindings::ib_qp_attr_mask_IB_QP_PORT
        | bindings::ib_qp_attr_mask_IB_QP_QKEY;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let ret = unsafe { modify(small, &mut attr, m) };
    check(ret == 0, "modify UD to INIT")?;
    let (a, b) = bad.split_at_mut(1);
    let mut second = recv_wr(&mut b[0], &mut sge);
    let mut first = recv_wr(&mut a[0], &mut sge);
    first.next = &mut second;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let (ret, bad_wr) = unsafe { post_recv(small, &first) };
    check(
        ret == -(bindings::ENOMEM as c_int) && core::ptr::eq(bad_wr, &second),
        "post_recv past capacity fails with ENOMEM at the WR that did not fit",
    )?;
    drop(r);
    Ok(())
}

/// Completion events per test CQ, the CPUs they ran on (a bit each), the
/// time of the last, and whether the handler arms the CQ again.
static EVENTS: [AtomicU32; 2] = [const { AtomicU32::new(0) }; 2];
static EVENT_CPUS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static LAST_EVENT_NS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
static REARM: [AtomicBool; 2] = [const { AtomicBool::new(false) }; 2];

/// # Safety
///
/// Called only by the core as the completion handler of a CQ this test
/// created, with the index it gave as the context.
unsafe extern "C" fn count_event(cq: *mut bindings::ib_cq, context: *mut c_void) {
    let index = context as usize;
    // SAFETY: no preconditions.
    let (cpu, now) = unsafe {
        (
            bindings::srnic_test_this_cpu(),
            bindings::srnic_test_now_ns(),
        )
    };
    if let (Some(events), Some(cpus), Some(last), Some(rearm)) = (
        EVENTS.get(index),
        EVENT_CPUS.get(index),
        LAST_EVENT_NS.get(index),
        REARM.get(index),
    ) {
        cpus.fetch_or(1u64.checked_shl(cpu as u32).unwrap_or(0), Ordering::AcqRel);
        last.store(now, Ordering::Release);
        events.fetch_add(1, Ordering::AcqRel);
        if rearm.load(Ordering::Acquire) {
            // SAFETY: the CQ is live while its events can come.
            unsafe {
                bindings::srnic_test_req_notify_cq(cq, bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP)
            };
        }
    }
}

fn events(index: usize) -> u32 {
    EVENTS.get(index).map_or(0, |e| e.load(Ordering::Acquire))
}

fn cpus_of(index: usize) -> u64 {
    EVENT_CPUS
        .get(index)
        .map_or(0, |c| c.load(Ordering::Acquire))
}

fn set_rearm(index: usize, on: bool) {
    if let Some(rearm) = REARM.get(index) {
        rearm.store(on, Ordering::Release);
    }
}

fn sleep_ms(ms: u32) {
    // SAFETY: module init runs in process context.
    unsafe { bindings::msleep(ms) };
}

fn now_ns() -> u64 {
    // SAFETY: no preconditions.
    unsafe { bindings::srnic_test_now_ns() }
}

/// Polls `cq` until `count` CQEs were taken (two seconds at most); all
/// must be successful.
///
/// # Safety
///
/// `cq` is a live CQ of this test that only this thread polls.
unsafe fn take(cq: *mut bindings::ib_cq, count: u32) -> Result<(), &'static str> {
    let mut taken = 0;
    for _ in 0..2000 {
        let mut wc = bindings::ib_wc::default();
        // SAFETY: a live CQ of ours, polled only by this thread.
        while unsafe { bindings::srnic_test_poll_cq(cq, 1, &mut wc) } > 0 {
            if wc.status != bindings::ib_wc_status_IB_WC_SUCCESS {
                return Err("a CQE of the events test reports an error");
            }
            taken += 1;
        }
        if taken >= count {
            return check_quiet(taken == count, "more CQEs than WRs");
        }
        sleep_ms(1);
    }
    Err("CQEs of the events test did not arrive within 2 s")
}

/// Takes `count` receive CQEs from `recv_cq` and as many send CQEs from
/// `send_cq`.
///
/// # Safety
///
/// Both are live CQs of this test that only this thread polls.
unsafe fn take_both(
    recv_cq: *mut bindings::ib_cq,
    send_cq: *mut bindings::ib_cq,
    count: u32,
) -> Result<(), &'static str> {
    // SAFETY: live objects of this test (this function's contract).
    unsafe { take(recv_cq, count) }?;
    // SAFETY: live objects of this test (this function's contract).
    unsafe { take(send_cq, count) }
}

/// Sends `count` unsolicited messages over the QP of `pair` (QP, its
/// receive CQ, its send CQ), takes their CQEs, and checks that CQ 0 has
/// seen `events` events in all once things settled.
///
/// # Safety
///
/// The QP and CQs of `pair` are live objects of this test, the QP
/// connected to itself, and `sge` covers memory that stays valid until
/// the WRs complete.
unsafe fn unsolicited_then_count(
    pair: (
        *mut bindings::ib_qp,
        *mut bindings::ib_cq,
        *mut bindings::ib_cq,
    ),
    sge: &mut bindings::ib_sge,
    count: u32,
    expected: u32,
    what: &'static str,
) -> Result<(), &'static str> {
    let (qp, recv_cq, send_cq) = pair;
    // SAFETY: live objects of this test (this function's contract).
    unsafe { exchange(qp, sge, count, false) }?;
    // SAFETY: live objects of this test (this function's contract).
    unsafe { take_both(recv_cq, send_cq, count) }?;
    sleep_ms(20);
    check(events(0) == expected, what)
}

/// Waits up to two seconds until CQ `index` has seen `count` events.
fn await_events(index: usize, count: u32) -> bool {
    for _ in 0..2000 {
        if events(index) >= count {
            return true;
        }
        sleep_ms(1);
    }
    false
}

/// Requests a completion event of `cq`.
///
/// # Safety
///
/// `cq` is a live CQ of this test.
unsafe fn arm(cq: *mut bindings::ib_cq, flags: bindings::ib_cq_notify_flags) -> c_int {
    // SAFETY: a live CQ of ours.
    unsafe { bindings::srnic_test_req_notify_cq(cq, flags) }
}

/// SEND `count` messages on `qp` to itself, each received: `solicited`
/// asks for the solicited event.
///
/// # Safety
///
/// `qp` is a live RC QP of this test connected to itself, and `sge`
/// covers memory that stays valid until the WRs complete.
unsafe fn exchange(
    qp: *mut bindings::ib_qp,
    sge: &mut bindings::ib_sge,
    count: u32,
    solicited: bool,
) -> Result<(), &'static str> {
    for _ in 0..count {
        let recv = bindings::ib_recv_wr {
            sg_list: sge,
            num_sge: 1,
            ..Default::default()
        };
        // SAFETY: live objects of this test (this function's contract).
        check_quiet(unsafe { post_recv(qp, &recv) }.0 == 0, "post_recv (events)")?;
        let mut flags = bindings::ib_send_flags_IB_SEND_SIGNALED;
        if solicited {
            flags |= bindings::ib_send_flags_IB_SEND_SOLICITED;
        }
        let send = bindings::ib_send_wr {
            sg_list: sge,
            num_sge: 1,
            opcode: bindings::ib_wr_opcode_IB_WR_SEND,
            send_flags: flags as c_int,
            ..Default::default()
        };
        // SAFETY: live objects of this test (this function's contract).
        check_quiet(unsafe { post_send(qp, &send) }.0 == 0, "post_send (events)")?;
    }
    Ok(())
}

fn check_quiet(ok: bool, what: &'static str) -> Result<(), &'static str> {
    if ok {
        Ok(())
    } else {
        Err(what)
    }
}

fn run_events() -> Result<(), &'static str> {
    let mut r = Resources::new();
    r.dev = get_device()?;
    // SAFETY: a registered device.
    let vectors = unsafe { (*r.dev).num_comp_vectors } as u32;
    // SAFETY: no preconditions.
    let online = unsafe { bindings::srnic_test_online_cpus() };
    check(
        vectors == online,
        "num_comp_vectors is the number of online CPUs",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    r.pd = unsafe { alloc_pd(r.dev) }?;
    let create_cq = |vector: u32, context: usize| {
        let attr = bindings::ib_cq_init_attr {
            cqe: 64,
            comp_vector: vector,
            flags: 0,
        };
        // SAFETY: a registered device, a handler valid while the module
        // is loaded, and attributes on our stack.
        let cq = unsafe {
            bindings::__ib_create_cq(
                r.dev,
                Some(count_event),
                None,
                context as *mut c_void,
                &attr,
                CALLER.as_char_ptr(),
            )
        };
        if is_err(cq) {
            null_mut()
        } else {
            cq
        }
    };
    let last_vector = vectors.saturating_sub(1);
    r.own_cqs = [create_cq(0, 0), create_cq(last_vector, 1), create_cq(0, 9)];
    let [cq, other_cq, send_cq] = r.own_cqs;
    check(
        r.own_cqs.iter().all(|cq| !cq.is_null()),
        "ib_create_cq with a handler, on vector 0 and the last vector",
    )?;
    // SAFETY: as in `create_cq`; the answer is checked.
    let beyond = unsafe {
        let attr = bindings::ib_cq_init_attr {
            cqe: 4,
            comp_vector: vectors,
            flags: 0,
        };
        bindings::__ib_create_cq(r.dev, None, None, null_mut(), &attr, CALLER.as_char_ptr())
    };
    check(
        beyond as isize == -(bindings::EINVAL as isize),
        "a CQ on vector num_comp_vectors fails with EINVAL",
    )?;
    for (slot, recv_cq) in r.qps.iter_mut().zip([cq, other_cq]) {
        let mut init = bindings::ib_qp_init_attr {
            send_cq,
            recv_cq,
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            port_num: 1,
            ..Default::default()
        };
        init.cap.max_send_wr = 64;
        init.cap.max_recv_wr = 64;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        // SAFETY: a valid PD and attributes; the result is checked.
        let qp = unsafe { bindings::ib_create_qp_kernel(r.pd, &mut init, CALLER.as_char_ptr()) };
        check(!is_err(qp), "ib_create_qp RC (events)")?;
        *slot = qp;
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        unsafe { connect_to_itself(r.dev, qp, 14, 12, 0) }?;
    }
    let [qp, other_qp] = r.qps;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    let mut sge = unsafe { buffer_sge(&mut r) }?;
    let solicited_only = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
    let next = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
    let missed = bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;

    check(
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        unsafe { arm(cq, solicited_only) } == 0,
        "arm for solicited completions",
    )?;
    let pair = (qp, cq, send_cq);
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe {
        unsolicited_then_count(
            pair,
            &mut sge,
            3,
            0,
            "unsolicited CQEs raise no event on a CQ armed for solicited",
        )
    }?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { exchange(qp, &mut sge, 1, true) }?;
    check(await_events(0, 1), "a solicited CQE raises the event")?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take_both(cq, send_cq, 1) }?;

    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    check(unsafe { arm(cq, next) } == 0, "arm for the next completion")?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe {
        unsolicited_then_count(
            pair,
            &mut sge,
            10,
            2,
            "ten CQEs after one arming raise exactly one event",
        )
    }?;

    // The receive's CQE is written before the ACK that completes the send.
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { exchange(qp, &mut sge, 1, false) }?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take(send_cq, 1) }?;
    check(
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        unsafe { arm(cq, next | missed) } > 0,
        "arming reports the CQE already waiting",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take(cq, 1) }?;
    check(
        // SAFETY: live objects of this test, owned by `r` until it drops at the
        // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
        unsafe { arm(cq, next | missed) } == 0,
        "arming an empty CQ reports nothing missed",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { exchange(qp, &mut sge, 1, false) }?;
    check(
        await_events(0, 3),
        "the armed CQ raises the event for the next CQE",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take_both(cq, send_cq, 1) }?;

    // Moderation by period: a count never reached, so the event waits the
    // whole period.
    // SAFETY: a live CQ of ours.
    let ret = unsafe { bindings::rdma_set_cq_moderation(cq, 1000, 3000) };
    check(ret == 0, "modify_cq: count 1000, period 3000 us")?;
    // SAFETY: as above.
    let ret = unsafe { bindings::rdma_set_cq_moderation(cq, 1, 5000) };
    check(
        ret == -(bindings::EINVAL as c_int),
        "modify_cq: a period above the advertised maximum fails with EINVAL",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    check(unsafe { arm(cq, next) } == 0, "arm with moderation")?;
    let start = now_ns();
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { exchange(qp, &mut sge, 1, false) }?;
    check(await_events(0, 4), "the moderated event comes")?;
    let last = LAST_EVENT_NS
        .first()
        .map_or(0, |t| t.load(Ordering::Acquire));
    let waited_us = last.saturating_sub(start) / 1000;
    pr_info!(
        "# moderated event after {} us (period 3000 us)\n",
        waited_us
    );
    check(waited_us >= 3000, "the event waits for the period")?;
    check(
        waited_us < 3000 + 500_000,
        "the event comes soon after the period",
    )?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take_both(cq, send_cq, 1) }?;

    // Moderation by count, the handler arming again each time.
    // SAFETY: a live CQ of ours.
    let ret = unsafe { bindings::rdma_set_cq_moderation(cq, 8, 4000) };
    check(ret == 0, "modify_cq: count 8, period 4000 us")?;
    set_rearm(0, true);
    let before = events(0);
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    check(unsafe { arm(cq, next) } == 0, "arm with count moderation")?;
    let start = now_ns();
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { exchange(qp, &mut sge, 48, false) }?;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take(cq, 48) }?;
    let elapsed_us = (now_ns().saturating_sub(start) / 1000) as u32;
    // SAFETY: live objects of this test, owned by `r` until it drops at the
    // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
    unsafe { take(send_cq, 48) }?;
    sleep_ms(10);
    set_rearm(0, false);
    let raised = events(0) - before;
    let bound = 48 / 8 + elapsed_us / 4000 + 1;
    pr_info!(
        "# 48 CQEs, count 8: {} events in {} us (at most {})\n",
        raised,
        elapsed_us,
        bound
    );
    check(
        raised >= 1 && raised <= bound,
        "events at most CQEs / count plus the period's share",
    )?;
    // SAFETY: a live CQ of ours.
    let ret = unsafe { bindings::rdma_set_cq_moderation(cq, 0, 0) };
    check(ret == 0, "modify_cq: moderation off")?;

    // Each CQ's events run on the CPU of its vector.
    for _ in 0..5 {
        for (index, (qp, cq)) in [(qp, cq), (other_qp, other_cq)].into_iter().enumerate() {
            let before = events(index);
            // SAFETY: live objects of this test, owned by `r` until it drops at the
            // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
            check_quiet(unsafe { arm(cq, next) } == 0, "arm (vectors)")?;
            // SAFETY: live objects of this test, owned by `r` until it drops at the
            // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
            unsafe { exchange(qp, &mut sge, 1, false) }?;
            check(await_events(index, before + 1), "event (vectors)")?;
            // SAFETY: live objects of this test, owned by `r` until it drops at the
            // end; SGEs cover `r.buffer`, and the tags outlive the last `process`.
            unsafe { take_both(cq, send_cq, 1) }?;
        }
    }
    for (index, vector) in [(0, 0), (1, last_vector)] {
        // SAFETY: a registered device and a valid vector.
        let serves = unsafe { bindings::srnic_test_vector_cpus(r.dev, vector as c_int) };
        let ran = cpus_of(index);
        pr_info!(
            "# CQ on vector {}: events on CPUs {:#x}, the vector serves {:#x}\n",
            vector,
            ran,
            serves
        );
        check(serves != 0, "get_vector_affinity names the vector's CPUs")?;
        check(
            ran & !serves == 0,
            "a CQ's events run only on its vector's CPUs",
        )?;
    }
    if last_vector > 0 {
        check(
            cpus_of(0) != cpus_of(1),
            "CQs on two vectors have their events on two CPUs",
        )?;
    }
    drop(r);
    Ok(())
}

/// The next CQE of `cq` (polled directly), within two seconds.
///
/// # Safety
///
/// `cq` is a live CQ of this test that only this thread polls.
unsafe fn next_wc(cq: *mut bindings::ib_cq) -> Result<bindings::ib_wc, &'static str> {
    for _ in 0..2000 {
        let mut wc = bindings::ib_wc::default();
        // SAFETY: per the caller, a live CQ only this thread polls.
        if unsafe { bindings::srnic_test_poll_cq(cq, 1, &mut wc) } > 0 {
            return Ok(wc);
        }
        sleep_ms(1);
    }
    Err("a CQE of the FLUSH test did not arrive within 2 s")
}

/// Whether the next CQE of `cq` is WR `id`'s with `status` and `opcode`.
///
/// # Safety
///
/// As for [`next_wc`].
unsafe fn completes(
    cq: *mut bindings::ib_cq,
    id: u64,
    status: bindings::ib_wc_status,
    opcode: Option<bindings::ib_wc_opcode>,
) -> Result<bool, &'static str> {
    // SAFETY: per the caller.
    let wc = unsafe { next_wc(cq) }?;
    // SAFETY: the CQ's WRs carry IDs, not cqes.
    let wr_id = unsafe { wc.__bindgen_anon_1.wr_id };
    let ok = wr_id == id && wc.status == status && opcode.map_or(true, |o| wc.opcode == o);
    if !ok {
        pr_info!(
            "# CQE: wr_id {} status {} opcode {}; expected wr_id {} status {}\n",
            wr_id,
            wc.status,
            wc.opcode,
            id,
            status
        );
    }
    Ok(ok)
}

/// A kernel WR of `opcode` with ID `id` and `sges` (signalled).
fn plain_wr(
    opcode: bindings::ib_wr_opcode,
    id: u64,
    sge: *mut bindings::ib_sge,
) -> bindings::ib_send_wr {
    let mut wr = bindings::ib_send_wr {
        sg_list: sge,
        num_sge: if sge.is_null() { 0 } else { 1 },
        opcode,
        send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as c_int,
        ..Default::default()
    };
    wr.__bindgen_anon_1.wr_id = id;
    wr
}

/// RDMA FLUSH and ATOMIC WRITE posted by a kernel consumer, between two RC
/// QPs of srnic0: a WRITE, then a FLUSH of the whole region (which fast
/// registration gave flush access) behind it; an
/// ATOMIC WRITE into it; a LOCAL_INV of it; a FLUSH through the PD's
/// global rkey, whose DMA region has no flush access, fails with a remote
/// access error.
fn run_flush() -> Result<(), &'static str> {
    const LOCAL_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    const REMOTE_WRITE: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    const FLUSH_GLOBAL: u32 = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
    const FLUSH_PERSISTENT: u32 = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;
    const SUCCESS: bindings::ib_wc_status = bindings::ib_wc_status_IB_WC_SUCCESS;
    let mut r = Resources::new();
    r.dev = get_device()?;
    // SAFETY: a registered device; `Resources` deallocates the PD.
    let pd = unsafe {
        bindings::__ib_alloc_pd(
            r.dev,
            bindings::ib_pd_flags_IB_PD_UNSAFE_GLOBAL_RKEY,
            CALLER.as_char_ptr(),
        )
    };
    check(!is_err(pd), "ib_alloc_pd with a global rkey")?;
    r.pd = pd;
    // SAFETY: as in `run`.
    let cq = unsafe {
        bindings::__ib_alloc_cq(
            r.dev,
            null_mut(),
            16,
            0,
            bindings::ib_poll_context_IB_POLL_DIRECT,
            CALLER.as_char_ptr(),
        )
    };
    check(!is_err(cq), "ib_alloc_cq (FLUSH)")?;
    r.cq = cq;
    // Two QPs connected to each other: the responder's QP goes to ERR on
    // the last FLUSH, and the requester's must still see the NAK.
    // SAFETY: `r.pd` and `r.cq` are live (checked above).
    let qp = unsafe { create_qp(&r, bindings::ib_qp_type_IB_QPT_RC, 8) };
    check(!qp.is_null(), "ib_create_qp RC (FLUSH requester)")?;
    r.qps[0] = qp;
    // SAFETY: as above.
    let peer = unsafe { create_qp(&r, bindings::ib_qp_type_IB_QPT_RC, 8) };
    check(!peer.is_null(), "ib_create_qp RC (FLUSH responder)")?;
    r.qps[1] = peer;
    let access = REMOTE_WRITE | FLUSH_GLOBAL | FLUSH_PERSISTENT;
    // SAFETY: both QPs are live.
    let (qpn, peer_qpn) = unsafe { ((*qp).qp_num, (*peer).qp_num) };
    // SAFETY: a registered device and two live RC QPs of it in RESET.
    unsafe { connect_to(r.dev, qp, peer_qpn, 14, 12, access) }?;
    // SAFETY: as above.
    unsafe { connect_to(r.dev, peer, qpn, 14, 12, access) }?;

    // SAFETY: `r.pd` is live; the source buffer stays in `r` until the
    // QPs are destroyed.
    let mut sge = unsafe { buffer_sge(&mut r) }?;
    let mut target = KBox::new([0u8; 64], GFP_KERNEL).map_err(|_| "allocate buffer")?;
    let source = r.buffer.as_mut().ok_or("the source buffer")?;
    for (i, b) in source.iter_mut().enumerate() {
        *b = i as u8 ^ 0x5a;
    }
    // SAFETY: a live PD and a kernel buffer that outlives the region.
    let mr = unsafe { bindings::srnic_test_fastreg_mr(pd, target.as_mut_ptr().cast(), 64) };
    check(!is_err(mr), "fast-registration region over the target")?;
    // SAFETY: a live region of ours.
    let (rkey, iova) = unsafe { ((*mr).rkey, (*mr).iova) };
    let result = (|| {
        let mut reg = bindings::ib_reg_wr {
            wr: plain_wr(bindings::ib_wr_opcode_IB_WR_REG_MR, 1, null_mut()),
            mr,
            key: rkey,
            access: (LOCAL_WRITE | REMOTE_WRITE | FLUSH_GLOBAL | FLUSH_PERSISTENT) as c_int,
        };
        reg.wr.num_sge = 0;
        // SAFETY: a live QP; the WR's SGE covers `r.buffer`.
        let ok = unsafe { post_send(qp, &reg.wr) }.0 == 0;
        check(ok, "post REG_MR with flush access")?;
        // SAFETY: the test's own CQ, polled by this thread only.
        let ok = unsafe { completes(cq, 1, SUCCESS, None) }?;
        check(ok, "REG_MR completes")?;

        let write = bindings::ib_rdma_wr {
            wr: plain_wr(bindings::ib_wr_opcode_IB_WR_RDMA_WRITE, 2, &mut sge),
            remote_addr: iova,
            rkey,
        };
        // SAFETY: a live QP; the WR's SGE covers `r.buffer`.
        let ok = unsafe { post_send(qp, &write.wr) }.0 == 0;
        check(ok, "post RDMA WRITE")?;
        // A kernel FLUSH names its region in an `ib_rdma_wr` and flushes
        // all of it (the core has no WR with a range or placement).
        let flush = bindings::ib_rdma_wr {
            wr: plain_wr(bindings::ib_wr_opcode_IB_WR_FLUSH, 3, null_mut()),
            remote_addr: iova,
            rkey,
        };
        // SAFETY: a live QP; the WR's SGE covers `r.buffer`.
        let ok = unsafe { post_send(qp, &flush.wr) }.0 == 0;
        check(ok, "post FLUSH (ib_rdma_wr)")?;
        // SAFETY: the test's own CQ, polled by this thread only.
        let ok = unsafe { completes(cq, 2, SUCCESS, None) }?;
        check(ok, "the WRITE completes")?;
        // SAFETY: the test's own CQ, polled by this thread only.
        let ok = unsafe { completes(cq, 3, SUCCESS, Some(bindings::ib_wc_opcode_IB_WC_FLUSH)) }?;
        check(ok, "the FLUSH completes as IB_WC_FLUSH")?;
        check(
            r.buffer.as_deref() == Some(&*target),
            "the WRITE is in the region when its FLUSH completes",
        )?;

        let value = 0x0123_4567_89ab_cdefu64;
        if let Some(source) = r.buffer.as_mut() {
            source[..8].copy_from_slice(&value.to_ne_bytes());
        }
        let mut eight = bindings::ib_sge { length: 8, ..sge };
        let atomic = bindings::ib_rdma_wr {
            wr: plain_wr(bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE, 4, &mut eight),
            remote_addr: iova + 8,
            rkey,
        };
        // SAFETY: a live QP; the WR's SGE covers `r.buffer`.
        let ok = unsafe { post_send(qp, &atomic.wr) }.0 == 0;
        check(ok, "post ATOMIC WRITE (ib_rdma_wr)")?;
        // SAFETY: the test's own CQ, polled by this thread only.
        let ok = unsafe {
            completes(
                cq,
                4,
                SUCCESS,
                Some(bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE),
            )
        }?;
        check(ok, "the ATOMIC WRITE completes as IB_WC_ATOMIC_WRITE")?;
        check(
            target[8..16] == value.to_ne_bytes(),
            "the ATOMIC WRITE stored its eight bytes",
        )?;

        // An invalidation waits for the copies into the region under way:
        // none is left, so it completes (a copy that kept its count would
        // hold it for good).
        let mut invalidate = plain_wr(bindings::ib_wr_opcode_IB_WR_LOCAL_INV, 7, null_mut());
        invalidate.ex.invalidate_rkey = rkey;
        // SAFETY: a live QP; the WR has no SGE.
        let ok = unsafe { post_send(qp, &invalidate) }.0 == 0;
        check(ok, "post LOCAL_INV of the region")?;
        // SAFETY: the test's own CQ, polled by this thread only.
        let ok =
            unsafe { completes(cq, 7, SUCCESS, Some(bindings::ib_wc_opcode_IB_WC_LOCAL_INV)) }?;
        check(ok, "LOCAL_INV completes after WRITEs into the region")?;

        let mut sge_list = sge;
        let with_sge = bindings::ib_rdma_wr {
            wr: plain_wr(bindings::ib_wr_opcode_IB_WR_FLUSH, 5, &mut sge_list),
            ..flush
        };
        // SAFETY: a live QP; the WR's SGE covers `r.buffer`.
        let (ret, _) = unsafe { post_send(qp, &with_sge.wr) };
        check(
            ret == -(bindings::EINVAL as c_int),
            "a FLUSH with an SGE is refused with EINVAL",
        )?;

        // SAFETY: a live PD allocated with IB_PD_UNSAFE_GLOBAL_RKEY.
        let global = unsafe { (*pd).unsafe_global_rkey };
        let denied = bindings::ib_rdma_wr {
            wr: plain_wr(bindings::ib_wr_opcode_IB_WR_FLUSH, 6, null_mut()),
            remote_addr: target.as_ptr() as u64,
            rkey: global,
        };
        // SAFETY: a live QP; the WR's SGE covers `r.buffer`.
        let ok = unsafe { post_send(qp, &denied.wr) }.0 == 0;
        check(ok, "post FLUSH to a region without flush access")?;
        // SAFETY: the test's own CQ, polled by this thread only.
        check(
            unsafe { completes(cq, 6, bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR, None) }?,
            "a FLUSH to a region without flush access fails with IB_WC_REM_ACCESS_ERR",
        )
    })();
    // The QPs go first (in ERR now, nothing in flight), then the region,
    // then the rest.
    for slot in r.qps.iter_mut() {
        // SAFETY: our QP, destroyed once; `Resources` skips it.
        unsafe { bindings::ib_destroy_qp_user(*slot, null_mut()) };
        *slot = null_mut();
    }
    // SAFETY: a region of ours no WR uses any more.
    unsafe { bindings::ib_dereg_mr_user(mr, null_mut()) };
    drop(r);
    drop(target);
    result
}

struct VerbsTest;

impl kernel::Module for VerbsTest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // KTAP: the plan comes last, when the number of points is known.
        pr_info!("KTAP version 1\n");
        let result = run().and_then(|()| run_events()).and_then(|()| run_flush());
        if let Err(what) = result {
            let number = TEST_POINTS.fetch_add(1, Ordering::Relaxed) + 1;
            pr_err!("not ok {} {}\n", number, what);
        }
        pr_info!("1..{}\n", TEST_POINTS.load(Ordering::Relaxed));
        match result {
            Ok(()) => {
                pr_info!("# all checks passed\n");
                Ok(VerbsTest)
            }
            Err(_) => Err(EIO),
        }
    }
}

// Keep `c_char` in use for the FFI names above on every configuration.
const _: Option<c_char> = None;
