// SPDX-License-Identifier: GPL-2.0

//! A driver's own file in a netdev's sysfs directory,
//! `/sys/class/net/<dev>/<name>`, as IPoIB's `mode`: the driver shows its
//! text and takes a new one under RTNL.

use crate::bindings;
use crate::kapi::ether::{EtherDevice, EtherDriver};
use crate::kapi::netdev::{rtnl_try_lock, RtnlGuard};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::ffi::c_char;
use kernel::prelude::*;
use kernel::types::Opaque;

/// What a netdev's sysfs file does, for driver `T`.
pub trait SysfsFileOps: EtherDriver {
    /// The file's text (at most a page; a newline is added).
    fn show(dev: &EtherDevice<Self>, out: &mut SysfsText<'_>);
    /// A write of `text` (its trailing newline removed). RTNL held.
    fn store(rtnl: &RtnlGuard, dev: &EtherDevice<Self>, text: &[u8]) -> Result;
}

/// A sysfs file of every netdev of driver `T`, in a static: the driver
/// hands it to [`EtherDriver::sysfs_group`] once [`Self::init`] ran.
///
/// # Invariants
///
/// `attr`, `attrs` and `group` are uninitialised, and only their
/// addresses used, until [`Self::init`] writes them, once (the flag); they
/// are not written after that, and `group` is handed out only after.
pub struct SysfsFile<T: SysfsFileOps> {
    name: &'static CStr,
    attr: Opaque<bindings::device_attribute>,
    attrs: Opaque<[*mut bindings::attribute; 2]>,
    group: Opaque<bindings::attribute_group>,
    ready: AtomicBool,
    _driver: PhantomData<T>,
}

// SAFETY: written once by `init` before anyone reads it (type invariant),
// then read only (by the core, through the group).
unsafe impl<T: SysfsFileOps> Sync for SysfsFile<T> {}

/// A built group of a [`SysfsFile`], in its static.
///
/// # Invariants
///
/// Points at the initialised, static group of a [`SysfsFile`].
#[derive(Clone, Copy)]
pub struct SysfsGroup(*const bindings::attribute_group);

impl SysfsGroup {
    /// Adds the group to a netdev being set up.
    ///
    /// # Safety
    ///
    /// `raw` is a netdev not registered yet.
    pub(crate) unsafe fn apply(self, raw: *mut bindings::net_device) {
        // SAFETY: per the caller; the group is static (type invariant).
        unsafe { bindings::srnic_netdev_set_sysfs_group(raw, self.0) };
    }
}

/// Text being written into a sysfs page.
pub struct SysfsText<'a> {
    page: &'a mut [u8],
    at: usize,
}

impl core::fmt::Write for SysfsText<'_> {
    fn write_str(&mut self, text: &str) -> core::fmt::Result {
        // Keep room for the newline.
        let room = self.page.len().saturating_sub(self.at + 1);
        let len = text.len().min(room);
        let end = self.at + len;
        if let (Some(out), Some(src)) =
            (self.page.get_mut(self.at..end), text.as_bytes().get(..len))
        {
            out.copy_from_slice(src);
            self.at = end;
        }
        Ok(())
    }
}

/// Bytes of a sysfs page.
const PAGE: usize = kernel::page::PAGE_SIZE;
/// `S_IRUGO | S_IWUSR`: everyone reads, root writes.
const MODE_RW: u16 = 0o644;

impl<T: SysfsFileOps> SysfsFile<T> {
    /// The file `name`, not usable before [`Self::init`].
    pub const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            attr: Opaque::uninit(),
            attrs: Opaque::uninit(),
            group: Opaque::uninit(),
            ready: AtomicBool::new(false),
            _driver: PhantomData,
        }
    }

    /// Builds the attribute and its group, once: before the first netdev
    /// that shows the file is made (module init). Later calls do nothing.
    pub fn init(&'static self) {
        if self.ready.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: an attribute of NULL pointers and zeroes is valid; the
        // used fields are set below.
        let mut attr: bindings::device_attribute = unsafe { core::mem::zeroed() };
        attr.attr.name = self.name.as_char_ptr();
        attr.attr.mode = MODE_RW;
        attr.show = Some(Self::show);
        attr.store = Some(Self::store);
        // SAFETY: as above.
        let mut group: bindings::attribute_group = unsafe { core::mem::zeroed() };
        group.attrs = self.attrs.get().cast();
        // SAFETY: not ready, so nobody reads these yet (type invariant);
        // they are in a static, and module init runs once.
        unsafe {
            self.attr.get().write(attr);
            // The attribute's own `struct attribute` is its first member.
            self.attrs
                .get()
                .write([self.attr.get().cast(), core::ptr::null_mut()]);
            self.group.get().write(group);
        }
        self.ready.store(true, Ordering::Release);
    }

    /// The group that adds the file to a netdev, once [`Self::init`]
    /// ran: what [`EtherDriver::sysfs_group`] returns.
    pub fn group(&'static self) -> Option<SysfsGroup> {
        self.ready
            .load(Ordering::Acquire)
            .then(|| SysfsGroup(self.group.get().cast_const()))
    }

    /// # Safety
    ///
    /// Called only by sysfs for this attribute of a netdev of driver `T`,
    /// with a page of `PAGE` bytes.
    unsafe extern "C" fn show(
        device: *mut bindings::device,
        _attr: *mut bindings::device_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: the attribute is in the netdev's group, so `device` is
        // the netdev's; its data lives until after its sysfs files are
        // removed, which waits for this call.
        let dev = unsafe { EtherDevice::<T>::from_raw(bindings::srnic_to_net_dev(device)) };
        // SAFETY: sysfs's page, ours for the call.
        let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), PAGE) };
        let mut text = SysfsText { page, at: 0 };
        T::show(dev, &mut text);
        let at = text.at;
        if let Some(newline) = text.page.get_mut(at) {
            *newline = b'\n';
        }
        (at + 1) as isize
    }

    /// # Safety
    ///
    /// Called only by sysfs for this attribute of a netdev of driver `T`,
    /// with `count` bytes at `buf`.
    unsafe extern "C" fn store(
        device: *mut bindings::device,
        _attr: *mut bindings::device_attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        // Unregistration holds RTNL while it removes this file, which
        // waits for this call: waiting for RTNL here could deadlock, so
        // the write is restarted instead.
        let Some(rtnl) = rtnl_try_lock() else {
            // SAFETY: in the writing task's syscall; no state.
            return unsafe { bindings::srnic_restart_syscall() } as isize;
        };
        // SAFETY: as in `show`.
        let dev = unsafe { EtherDevice::<T>::from_raw(bindings::srnic_to_net_dev(device)) };
        // SAFETY: sysfs's copy of the write, `count` bytes, for the call.
        let text = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        let result = T::store(&rtnl, dev, text);
        drop(rtnl);
        match result {
            Ok(()) => isize::try_from(count).unwrap_or(isize::MAX),
            Err(err) => err.to_errno() as isize,
        }
    }
}
