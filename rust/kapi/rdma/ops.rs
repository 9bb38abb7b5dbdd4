// SPDX-License-Identifier: GPL-2.0

//! The verbs on objects, from the core's C calls to the driver's
//! [`Driver`] methods: argument checks the ABI needs, in-place creation and
//! destruction of the driver's data, and the kernel's error conventions.

use super::access::{LOCAL_WRITE, NEEDS_LOCAL_WRITE};
use super::device::{Device, Driver};
use super::objects::{Ah, Cq, Mr, MrKind, Mw, MwType, Qp, Srq};
use super::odp::{Advice, MemoryRange, OdpMemory, ON_DEMAND};
use super::rxe_abi::queue::{response, QueueMapping};
use super::table::Listable;
use super::udata::UserData;
use super::umem::{KernelMemory, UserMemory, UserVerb};
use super::verbs::{AddressVector, CqArm, PollOutput, QpInit, QpModify, SrqAttributes, SrqModify};
use super::wr::{RecvChain, SendChain};
use crate::bindings;
use kernel::alloc::{flags::GFP_KERNEL, KBox, KVec};
use kernel::c_str;
use kernel::error::from_result;
use kernel::ffi::{c_int, c_uint, c_void};
use kernel::prelude::*;

fn err_ptr<P>(err: Error) -> *mut P {
    // An ERR_PTR: the negative errno as an address.
    err.to_errno() as isize as *mut c_void as *mut P
}

/// The access flags a region or window may have, and the rule that remote
/// writes and atomics need local write.
fn check_access(access: u32) -> Result {
    if access & NEEDS_LOCAL_WRITE != 0 && access & LOCAL_WRITE == 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// The errno of a post verb; on failure `bad_wr` names the WR that failed.
///
/// # Safety
///
/// `bad_wr` must be NULL or the caller's valid out-pointer.
unsafe fn post_result<W>(result: Result, bad_wr: *mut *const W, failed: *const W) -> c_int {
    match result {
        Ok(()) => 0,
        Err(err) => {
            if !bad_wr.is_null() {
                // SAFETY: the caller's out-pointer (see above).
                unsafe { bad_wr.write(failed) };
            }
            err.to_errno()
        }
    }
}

impl<T: Driver> Device<T> {
    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn mmap_cb(
        uctx: *mut bindings::ib_ucontext,
        vma: *mut bindings::vm_area_struct,
    ) -> c_int {
        // SAFETY: the core passes the caller's context and area; the entry
        // it finds is referenced until the put below.
        unsafe {
            let entry = bindings::rdma_user_mmap_entry_get(uctx, vma);
            if entry.is_null() {
                return EINVAL.to_errno();
            }
            let ret = match QueueMapping::map(entry, vma) {
                Ok(()) => 0,
                Err(err) => err.to_errno(),
            };
            bindings::rdma_user_mmap_entry_put(entry);
            ret
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn mmap_free_cb(entry: *mut bindings::rdma_user_mmap_entry) {
        // SAFETY: every entry this driver inserts is a `QueueMapping`; the
        // core calls this once, with the last reference.
        unsafe { QueueMapping::free(entry) }
    }

    // ---- CQ ----

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn create_cq_cb(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a fresh CQ of our size with `device`
            // set, its attributes, and NULL or the call's bundle.
            let (dev, attr, user) = unsafe {
                (
                    Self::from_ib((*cq).device),
                    &*attr,
                    UserData::from_raw(bindings::srnic_attrs_udata(attrs)),
                )
            };
            // No creation flag (timestamps, single-threaded, ignoring
            // overrun) is offered: a valid request for one is unsupported.
            if attr.flags != 0 {
                return Err(crate::kapi::not_supported());
            }
            // SAFETY: the device is live.
            let vectors = unsafe { (*dev.as_ib()).num_comp_vectors };
            if attr.comp_vector >= vectors as u32 {
                return Err(EINVAL);
            }
            let (entries, init) = T::create_cq(dev, attr.cqe, attr.comp_vector, user.as_ref())?;
            // SAFETY: the data slot is uninitialised; on success `cqe`
            // belongs to the driver. The vector was checked above.
            unsafe {
                Cq::<T>::init_events(cq, attr.comp_vector);
                Cq::<T>::init_data(cq, init)?;
                (*cq).cqe = entries as c_int;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn destroy_cq_cb(
        cq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core destroys a CQ once no QP uses it; its data was
        // initialised by create. With no QP, only the moderation timer can
        // still raise its event, and `quiesce_events` stops it first.
        unsafe {
            T::destroy_cq(Cq::<T>::from_raw(cq));
            Cq::<T>::quiesce_events(cq);
            Cq::<T>::drop_data(cq);
        }
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn resize_cq_cb(
        cq: *mut bindings::ib_cq,
        cqe: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            let cqe = u32::try_from(cqe).map_err(|_| EINVAL)?;
            // SAFETY: the CQ is live; udata is NULL or valid for the call.
            let (cq_ref, user) = unsafe { (Cq::<T>::from_raw(cq), UserData::from_raw(udata)) };
            let entries = T::resize_cq(cq_ref, cqe, user.as_ref())?;
            // SAFETY: the field belongs to the driver.
            unsafe { (*cq).cqe = entries as c_int };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn poll_cq_cb(
        cq: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        let Ok(capacity) = usize::try_from(num) else {
            return EINVAL.to_errno();
        };
        // SAFETY: the CQ is live; the caller's array holds `num` entries.
        let (cq, mut out) = unsafe { (Cq::<T>::from_raw(cq), PollOutput::new(wc, capacity)) };
        T::poll_cq(cq, &mut out);
        out.filled() as c_int
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn modify_cq_cb(
        cq: *mut bindings::ib_cq,
        count: u16,
        period: u16,
    ) -> c_int {
        // SAFETY: the CQ is live.
        let cq = unsafe { Cq::<T>::from_raw(cq) };
        from_result(|| T::modify_cq(cq, count, period).map(|()| 0))
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn fill_res_cq_entry_cb(
        msg: *mut bindings::sk_buff,
        cq: *mut bindings::ib_cq,
    ) -> c_int {
        // SAFETY: the core fills a live CQ's entry into its message.
        let cq = unsafe { Cq::<T>::from_raw(cq) };
        let vector = cq.comp_vector();
        let irq = cq.device().comp_vectors().irq(vector).unwrap_or(0);
        // SAFETY: `msg` is the core's message under construction.
        let nest = unsafe { bindings::srnic_nla_nest_start_driver(msg) };
        if nest.is_null() {
            return -(bindings::EMSGSIZE as c_int);
        }
        for (name, value) in [(c_str!("comp_vector"), vector), (c_str!("irq"), irq)] {
            // SAFETY: as above; the nest is open.
            let ret = unsafe { bindings::rdma_nl_put_driver_u32(msg, name.as_char_ptr(), value) };
            if ret != 0 {
                // SAFETY: the nest was opened above and is dropped whole.
                unsafe { bindings::srnic_nla_nest_cancel(msg, nest) };
                return ret;
            }
        }
        // SAFETY: closes the nest opened above.
        unsafe { bindings::srnic_nla_nest_end(msg, nest) };
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn req_notify_cq_cb(
        cq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        // SAFETY: the CQ is live.
        let cq = unsafe { Cq::<T>::from_raw(cq) };
        let arm = if flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
        {
            CqArm::Solicited
        } else {
            CqArm::NextCompletion
        };
        let waiting = T::req_notify_cq(cq, arm);
        if waiting && flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 {
            1
        } else {
            0
        }
    }

    // ---- QP ----

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn create_qp_cb(
        qp: *mut bindings::ib_qp,
        init_attr: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a fresh QP of our size with `device`,
            // type and queues set, the caller's attributes and NULL or the
            // call's udata.
            let (dev, init_attr, user) = unsafe {
                (
                    Self::from_ib((*qp).device),
                    &mut *init_attr,
                    UserData::from_raw(udata),
                )
            };
            let init = QpInit::from_raw(init_attr)?;
            if init_attr.port_num > 1 {
                return Err(EINVAL);
            }
            let (caps, data) = T::create_qp(dev, &init, user.as_ref())?;
            // SAFETY: the QP is ours and not yet published.
            unsafe { Qp::<T>::init_work(qp) };
            // SAFETY: the data slot is uninitialised.
            unsafe { Qp::<T>::init_data(qp, data)? };
            // SAFETY: initialised just above.
            let qp_ref = unsafe { Qp::<T>::from_raw(qp) };
            match T::publish_qp(qp_ref) {
                Ok(qpn) => {
                    // The QP is in the table already and in RESET: a packet
                    // that finds it now reads 0 or `qpn` and is dropped.
                    // SAFETY: the number is the driver's to set; readers
                    // use a volatile load (`Qp::qp_num`).
                    unsafe { core::ptr::addr_of_mut!((*qp).qp_num).write_volatile(qpn) };
                }
                Err(err) => {
                    // The driver may have listed the QP before it failed:
                    // out of every table, nothing queues its work but the
                    // work itself, which cancelling allows for.
                    qp_ref.listing().unlist();
                    // SAFETY: initialised above; the work as just said.
                    unsafe {
                        Qp::<T>::cancel_work(qp);
                        Qp::<T>::drop_data(qp);
                    }
                    return Err(err);
                }
            }
            init_attr.cap.max_send_wr = caps.max_send_wr;
            init_attr.cap.max_recv_wr = caps.max_recv_wr;
            init_attr.cap.max_send_sge = caps.max_send_sge;
            init_attr.cap.max_recv_sge = caps.max_recv_sge;
            init_attr.cap.max_inline_data = caps.max_inline_data;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn modify_qp_cb(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a live QP and the caller's attributes;
            // on a RoCE port it resolved `ah_attr`'s source GID and MAC.
            let (qp, modify) = unsafe {
                (
                    Qp::<T>::from_raw(qp),
                    QpModify::from_raw(&*attr, mask as u32)?,
                )
            };
            // The rxe ABI passes no driver data with this verb.
            // SAFETY: NULL or valid for the call.
            if let Some(user) = unsafe { UserData::from_raw(udata) } {
                if user.inlen() != 0 {
                    return Err(EINVAL);
                }
            }
            T::modify_qp(qp, &modify)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn query_qp_cb(
        qp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init_attr: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        // uverbs allocates both structs with plain `kmalloc` and copies them
        // to user space whole: zeroing them first leaks no kernel memory in
        // the fields we do not fill, and leaves `sgid_attr` NULL as required.
        // SAFETY: the core passes a live QP and two structs to fill.
        unsafe {
            core::ptr::write_bytes(attr, 0, 1);
            core::ptr::write_bytes(init_attr, 0, 1);
            let query = T::query_qp(Qp::<T>::from_raw(qp));
            query.write_to(&mut *attr, &mut *init_attr);
        }
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn destroy_qp_cb(
        qp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the QP is live until its data drops here. Once it is out of every table
        // (unlisting waits for the lookups that found it), nothing but its own work item can queue
        // the work again, which cancelling allows for.
        unsafe {
            let live = Qp::<T>::from_raw(qp);
            T::destroy_qp(live);
            live.listing().unlist();
            Qp::<T>::cancel_work(qp);
            Qp::<T>::drop_data(qp);
        }
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn post_send_cb(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        // SAFETY: the QP is live.
        let qp = unsafe { Qp::<T>::from_raw(qp) };
        if qp.is_user() {
            // librxe's doorbell: no WR, and `bad_wr` is not to be touched.
            return match T::doorbell(qp) {
                Ok(()) => 0,
                Err(err) => err.to_errno(),
            };
        }
        // SAFETY: a kernel caller's chain is valid for the call, posted to
        // this QP.
        let mut chain = unsafe { SendChain::new(wr, qp.as_raw()) };
        let result = T::post_send(qp, &mut chain);
        // SAFETY: the caller's out-pointer.
        unsafe { post_result(result, bad_wr, chain.failed_wr()) }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn attach_mcast_cb(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: the QP is live and `gid` valid for the call; every view
        // of the GID union is its 16 bytes.
        let (qp, mgid) = unsafe { (Qp::<T>::from_raw(qp), (*gid).raw) };
        match T::attach_mcast(qp, &mgid) {
            Ok(()) => 0,
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn detach_mcast_cb(
        qp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        // SAFETY: as in `attach_mcast_cb`.
        let (qp, mgid) = unsafe { (Qp::<T>::from_raw(qp), (*gid).raw) };
        match T::detach_mcast(qp, &mgid) {
            Ok(()) => 0,
            Err(err) => err.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn post_recv_cb(
        qp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: the QP is live; a kernel caller's chain is valid.
        let (qp, mut chain) = unsafe { (Qp::<T>::from_raw(qp), RecvChain::new(wr, qp)) };
        let result = T::post_recv(qp, &mut chain);
        // SAFETY: the caller's out-pointer.
        unsafe { post_result(result, bad_wr, chain.failed_wr()) }
    }

    // ---- SRQ ----

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn create_srq_cb(
        srq: *mut bindings::ib_srq,
        init_attr: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a fresh SRQ of our size, the caller's attributes, and
            // NULL or the call's udata.
            let (dev, init_attr, user) = unsafe {
                (
                    Self::from_ib((*srq).device),
                    &mut *init_attr,
                    UserData::from_raw(udata),
                )
            };
            if init_attr.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
                return Err(crate::kapi::not_supported());
            }
            let wanted = SrqAttributes::from_raw(&init_attr.attr);
            let (actual, data) = T::create_srq(dev, &wanted, user.as_ref())?;
            // SAFETY: the data slot is uninitialised.
            unsafe { Srq::<T>::init_data(srq, data)? };
            actual.write_to(&mut init_attr.attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn modify_srq_cb(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a live SRQ, the caller's attributes, NULL or udata.
            let (srq, attr, user) =
                unsafe { (Srq::<T>::from_raw(srq), &*attr, UserData::from_raw(udata)) };
            let modify = SrqModify {
                resize: mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0,
                limit: mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0,
                attrs: SrqAttributes::from_raw(attr),
            };
            T::modify_srq(srq, &modify, user.as_ref())?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn query_srq_cb(
        srq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        // SAFETY: a live SRQ and a struct to fill, which uverbs has on its
        // stack uninitialised: zeroed first, so every byte is defined.
        unsafe {
            core::ptr::write_bytes(attr, 0, 1);
            T::query_srq(Srq::<T>::from_raw(srq)).write_to(&mut *attr);
        }
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn destroy_srq_cb(
        srq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the core destroys an SRQ once no QP uses it.
        unsafe {
            T::destroy_srq(Srq::<T>::from_raw(srq));
            Srq::<T>::drop_data(srq);
        }
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn post_srq_recv_cb(
        srq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        // SAFETY: a live SRQ; a kernel caller's chain.
        let (srq, mut chain) = unsafe {
            (
                Srq::<T>::from_raw(srq),
                RecvChain::new(wr, core::ptr::null()),
            )
        };
        let result = T::post_srq_recv(srq, &mut chain);
        // SAFETY: the caller's out-pointer.
        unsafe { post_result(result, bad_wr, chain.failed_wr()) }
    }

    // ---- AH ----

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn create_ah_cb(
        ah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a fresh AH of our size; the core resolved the
            // attribute's source GID (and MAC) for a RoCE port.
            let (dev, av, user) = unsafe {
                (
                    Self::from_ib((*ah).device),
                    AddressVector::from_raw(&*(*init).ah_attr)?,
                    UserData::from_raw(udata),
                )
            };
            let data = T::create_ah(dev, &av, user.is_some())?;
            // SAFETY: the data slot is uninitialised.
            unsafe { Ah::<T>::init_data(ah, data)? };
            // SAFETY: initialised just above.
            let ah_ref = unsafe { Ah::<T>::from_raw(ah) };
            let published = T::publish_ah(ah_ref).and_then(|num| match &user {
                Some(user) => response::ah(user, num).inspect_err(|_| T::destroy_ah(ah_ref)),
                None => Ok(()),
            });
            if let Err(err) = published {
                // SAFETY: initialised above and no longer published.
                unsafe { Ah::<T>::drop_data(ah) };
                return Err(err);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn query_ah_cb(
        ah: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        // SAFETY: a live AH and a struct to fill.
        unsafe { T::query_ah(Ah::<T>::from_raw(ah)).write_to(&mut *attr) };
        0
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn destroy_ah_cb(ah: *mut bindings::ib_ah, _flags: u32) -> c_int {
        // SAFETY: the AH is live until its data drops here. Destruction may
        // not sleep (`RDMA_DESTROY_AH_SLEEPABLE` clear) only for kernel AHs;
        // the driver must not wait for anything then.
        unsafe {
            T::destroy_ah(Ah::<T>::from_raw(ah));
            Ah::<T>::drop_data(ah);
        }
        0
    }

    // ---- MR ----

    /// Creates and publishes an MR on `pd`.
    ///
    /// # Safety
    ///
    /// `pd` is a live PD of this driver's device, as the core passes to
    /// an MR verb.
    unsafe fn new_mr(
        pd: *mut bindings::ib_pd,
        kind: MrKind,
        access: u32,
    ) -> Result<*mut bindings::ib_mr> {
        check_access(access)?;
        // SAFETY: a live PD of this device (the caller's contract).
        let dev = unsafe { Self::from_ib((*pd).device) };
        let (iova, length) = match &kind {
            MrKind::User { memory, iova } => (*iova, memory.length()),
            MrKind::OnDemand { memory, iova } => (*iova, memory.length()),
            _ => (0, 0),
        };
        let data = T::create_mr(dev, kind, access)?;
        let mr = KBox::pin_init(Mr::<T>::new(data), GFP_KERNEL)?;
        // SAFETY: the box is never moved out of; `dereg_mr_cb` rebuilds it.
        let mr = unsafe { Pin::into_inner_unchecked(mr) };
        let raw = KBox::into_raw(mr);
        // SAFETY: just allocated.
        let mr_ref = unsafe { &*raw };
        // SAFETY: the MR is not published yet; `pd` is live.
        unsafe { mr_ref.set_owner(pd) };
        match T::publish_mr(mr_ref) {
            Ok(key) => {
                mr_ref.set_keys(key, key);
                mr_ref.set_range(iova, length);
                Ok(mr_ref.as_raw())
            }
            Err(err) => {
                // SAFETY: never published: ours alone.
                drop(unsafe { KBox::from_raw(raw) });
                Err(err)
            }
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn get_dma_mr_cb(
        pd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // The core asks for remote access alone for a PD's unsafe global
        // rkey on a device with a local DMA lkey (`__ib_alloc_pd`): kernel
        // memory is the kernel's to write anyway, so local write goes with
        // it rather than the rule of registration verbs refusing it.
        let access = access as u32 | LOCAL_WRITE;
        // SAFETY: `get_dma_mr` is a kernel verb (uverbs has no such
        // command): the region's addresses are a kernel consumer's.
        let memory = unsafe { KernelMemory::new() };
        // SAFETY: the core passes a live PD of this device.
        unsafe { Self::new_mr(pd, MrKind::Dma { memory }, access) }.unwrap_or_else(err_ptr)
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn reg_user_mr_cb(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let access = access as u32;
        let result = check_access(access).and_then(|()| {
            // SAFETY: a live PD.
            let ib = unsafe { (*pd).device };
            // SAFETY: the core calls `reg_user_mr` only for the uverbs
            // command of a user process, in its task; `verb` stays in
            // this callback.
            let verb = unsafe { UserVerb::new(ib) }.ok_or(EINVAL)?;
            let kind = if access & ON_DEMAND != 0 {
                if !T::ON_DEMAND_PAGING {
                    return Err(crate::kapi::not_supported());
                }
                let memory = OdpMemory::register(&verb, start, length, access)?;
                MrKind::OnDemand { memory, iova }
            } else {
                let memory = UserMemory::pin(&verb, start, length, access)?;
                MrKind::User { memory, iova }
            };
            // SAFETY: the core passes a live PD of this device.
            unsafe { Self::new_mr(pd, kind, access) }
        });
        result.unwrap_or_else(err_ptr)
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn rereg_user_mr_cb(
        mr: *mut bindings::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let flags = flags as u32;
        // SAFETY: a live MR of ours.
        let mr_ref = unsafe { Mr::<T>::from_raw(mr) };
        let old_pd = mr_ref.pd_raw();
        let moves = flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_PD != 0
            && !pd.is_null()
            && pd != old_pd;
        let moved = core::cell::Cell::new(false);
        // Called by the driver while the region's keys look up nothing: the
        // region leaves its PD, and every check made under the old PD (each
        // inside an RCU read-side section) is over, before the new access
        // and memory are installed. The core sets the same PD again after
        // this returns.
        let relocate = || {
            // SAFETY: the core passes the live PD the region moves to, and
            // serialises re-registrations of one region.
            unsafe { mr_ref.move_to_pd(pd) };
            moved.set(true);
            // SAFETY: a verb callback runs in process context, and the
            // driver calls this with no read-side section open.
            unsafe { crate::kapi::rcu::synchronize() };
        };
        let relocate: Option<&dyn Fn()> = if moves { Some(&relocate) } else { None };
        let result = (|| -> Result {
            // SAFETY: a live MR: its device is set. The core calls
            // `rereg_user_mr` only for the uverbs command of a user
            // process, in its task; `verb` stays in this callback.
            let verb = unsafe { UserVerb::new((*mr).device) }.ok_or(EINVAL)?;
            let new_access = if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
                check_access(access as u32)?;
                // Paging on demand is a property of a registration, which
                // re-registration keeps in place.
                if access as u32 & ON_DEMAND != 0 {
                    return Err(crate::kapi::not_supported());
                }
                Some(access as u32)
            } else {
                None
            };
            let memory = if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0 {
                // Pin with the access the region will have.
                let pin_access = new_access.unwrap_or_else(|| T::mr_access(mr_ref));
                Some((UserMemory::pin(&verb, start, length, pin_access)?, iova))
            } else {
                None
            };
            let range = memory.as_ref().map(|(m, iova)| (*iova, m.length()));
            let replaced = T::rereg_mr(mr_ref, &verb, memory, new_access, relocate)?;
            if let Some((iova, length)) = range {
                mr_ref.set_range(iova, length);
            }
            if let Some(replaced) = replaced {
                // The transport reaches pages by address inside RCU
                // read-side sections: the replaced pages stay pinned until
                // those have ended.
                // This frame opens no read-side section, and the driver's
                // ended when it returned (its guards are scoped values it
                // cannot hand back).
                // SAFETY: a verb callback runs in process context, and no
                // read-side section is open here.
                unsafe { crate::kapi::rcu::synchronize() };
                drop(replaced);
            }
            Ok(())
        })();
        if result.is_err() && moved.get() {
            // The core moves the region (and its PD's use count) only when
            // the re-registration succeeds: back to where the count is.
            // SAFETY: the PD the region was in, live while it counts the
            // region.
            unsafe { mr_ref.move_to_pd(old_pd) };
        }
        // NULL: the MR was changed in place.
        match result {
            Ok(()) => core::ptr::null_mut(),
            Err(err) => err_ptr(err),
        }
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn alloc_mr_cb(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return err_ptr(EINVAL);
        }
        let access = LOCAL_WRITE;
        let kind = MrKind::FastReg {
            max_pages: max_num_sg,
            // SAFETY: `alloc_mr` is a kernel verb (uverbs has no such
            // command), and so is `map_mr_sg`, which gives its pages.
            memory: unsafe { KernelMemory::new() },
        };
        // SAFETY: the core passes a live PD of this device.
        unsafe { Self::new_mr(pd, kind, access) }.unwrap_or_else(err_ptr)
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn map_mr_sg_cb(
        mr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        from_result(|| {
            // The core takes no lock here: the consumer that owns the MR
            // maps it from one context at a time (`ib_map_mr_sg`'s contract).
            // SAFETY: a live fast-registration MR of ours; the collector is
            // ours for the call.
            let mr_ref = unsafe { Mr::<T>::from_raw(mr) };
            let mut pages = KVec::new();
            // SAFETY: see above; `sg` has `sg_nents` entries.
            let mapped = unsafe { mr_ref.collect_pages(sg, sg_nents, sg_offset, &mut pages) };
            let mapped = mapped?;
            // SAFETY: `ib_sg_to_pages` set the MR's page size, iova and
            // length.
            let (page_size, iova, length) = unsafe { ((*mr).page_size, (*mr).iova, (*mr).length) };
            T::map_mr_pages(mr_ref, &pages, page_size, iova, length)?;
            Ok(mapped)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn advise_mr_cb(
        pd: *mut bindings::ib_pd,
        advice: bindings::ib_uverbs_advise_mr_advice,
        flags: u32,
        sg_list: *mut bindings::ib_sge,
        num_sge: u32,
        _attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            let advice = Advice::from_raw(advice).ok_or(EINVAL)?;
            if sg_list.is_null() || num_sge == 0 {
                return Err(EINVAL);
            }
            // SAFETY: the core passes a live PD of this device.
            let dev = unsafe { Self::from_ib((*pd).device) };
            // SAFETY: the core passes `num_sge` entries it copied in from
            // the caller, valid for the call.
            let sges = unsafe { core::slice::from_raw_parts(sg_list, num_sge as usize) };
            let mut ranges = KVec::new();
            ranges.reserve(sges.len(), GFP_KERNEL)?;
            for sge in sges {
                ranges.push(
                    MemoryRange {
                        lkey: sge.lkey,
                        addr: sge.addr,
                        length: sge.length,
                    },
                    GFP_KERNEL,
                )?;
            }
            let sync =
                flags & bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
            T::advise_mr(dev, pd as usize, advice, sync, &ranges)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn dereg_mr_cb(
        mr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: the MR is live until it is freed below.
        if let Err(err) = T::destroy_mr(unsafe { Mr::<T>::from_raw(mr) }) {
            return err.to_errno();
        }
        // SAFETY: the MR was allocated by `new_mr` as a `KBox<Mr<T>>`; the
        // driver took it out of service (no lookup can still reach it).
        drop(unsafe { KBox::from_raw(mr.cast::<Mr<T>>()) });
        0
    }

    // ---- MW ----

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn alloc_mw_cb(
        mw: *mut bindings::ib_mw,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a fresh MW of our size with `device` and `type` set.
            let (dev, mw_type) = unsafe {
                (
                    Self::from_ib((*mw).device),
                    if (*mw).type_ == bindings::ib_mw_type_IB_MW_TYPE_2 {
                        MwType::Type2
                    } else {
                        MwType::Type1
                    },
                )
            };
            let data = T::create_mw(dev, mw_type)?;
            // SAFETY: the data slot is uninitialised.
            unsafe { Mw::<T>::init_data(mw, data)? };
            // SAFETY: initialised just above.
            match T::publish_mw(unsafe { Mw::<T>::from_raw(mw) }) {
                Ok(rkey) => {
                    // SAFETY: the key is the driver's to set.
                    unsafe { (*mw).rkey = rkey };
                    Ok(0)
                }
                Err(err) => {
                    // SAFETY: initialised, never published.
                    unsafe { Mw::<T>::drop_data(mw) };
                    Err(err)
                }
            }
        })
    }

    /// # Safety
    ///
    /// Called only by the RDMA core through `ib_device_ops`, with live objects
    /// of this device as its contract for the operation gives.
    pub(super) unsafe extern "C" fn dealloc_mw_cb(mw: *mut bindings::ib_mw) -> c_int {
        // SAFETY: the MW is live until its data drops here.
        unsafe {
            T::destroy_mw(Mw::<T>::from_raw(mw));
            Mw::<T>::drop_data(mw);
        }
        0
    }
}
