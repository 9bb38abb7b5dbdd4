// SPDX-License-Identifier: GPL-2.0

//! Driver-specific data of a verb called from user space: the command's
//! extra input and the response's extra output (`struct ib_udata`).

use crate::bindings;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::prelude::*;

/// Plain data that may be copied to and from user space and shared memory
/// byte by byte: every bit pattern is a valid value and there is no padding
/// the kernel would leak.
///
/// # Safety
///
/// Implementors must be `repr(C)` integers and arrays of them with no
/// implicit padding, for which any byte content is valid.
pub unsafe trait Pod: Default {}

// SAFETY: as above; a 48-byte struct of integers, padded by hand.
unsafe impl Pod for bindings::ib_uverbs_wc {}
// SAFETY: integers only.
unsafe impl Pod for u64 {}
// SAFETY: integers only.
unsafe impl Pod for u32 {}

/// The driver data of one verb call from user space.
///
/// # Invariants
///
/// `raw` is the `ib_udata` of the verb call in progress, embedded in that
/// call's attribute bundle, and valid while the value lives (it does not
/// outlive the call).
pub struct UserData {
    raw: NonNull<bindings::ib_udata>,
}

impl UserData {
    /// # Safety
    ///
    /// `raw` must be NULL or a valid `ib_udata` for the duration of the
    /// verb, which the returned value must not outlive.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Option<Self> {
        NonNull::new(raw).map(|raw| Self { raw })
    }

    fn raw(&self) -> &bindings::ib_udata {
        // SAFETY: valid while `self` lives (type invariant).
        unsafe { self.raw.as_ref() }
    }

    /// Bytes of driver input the caller passed.
    pub fn inlen(&self) -> usize {
        self.raw().inlen
    }

    /// Bytes of driver output the caller has room for.
    pub fn outlen(&self) -> usize {
        self.raw().outlen
    }

    /// Reads the driver input as a `T`; `EINVAL` if the caller passed less.
    pub fn read<T: Pod>(&self) -> Result<T> {
        let size = core::mem::size_of::<T>();
        if self.inlen() < size {
            return Err(EINVAL);
        }
        let mut value = T::default();
        // SAFETY: `value` has room for `size` bytes and any bytes are a valid
        // `T` (`Pod`); the udata's input buffer has at least `size` bytes.
        to_result(unsafe {
            bindings::srnic_copy_from_udata((&mut value as *mut T).cast(), self.raw.as_ptr(), size)
        })?;
        Ok(value)
    }

    /// Writes `value` as the driver output; `EINVAL` if the caller left no
    /// room for it (librxe always does).
    pub fn write<T: Pod>(&self, value: &T) -> Result {
        let size = core::mem::size_of::<T>();
        if self.outlen() < size {
            return Err(EINVAL);
        }
        // SAFETY: `value` is `size` readable bytes without padding (`Pod`);
        // the output buffer has room for them.
        to_result(unsafe {
            bindings::srnic_copy_to_udata(self.raw.as_ptr(), (value as *const T).cast(), size)
        })
    }

    /// The user context the call came from.
    pub(crate) fn ucontext(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: by the type invariant, the udata is embedded in the call's
        // attribute bundle.
        unsafe { bindings::srnic_udata_ucontext(self.raw.as_ptr()) }
    }
}

/// Copies `value` to the user address `addr` of the calling process.
pub fn copy_to_user_address<T: Pod>(addr: u64, value: &T) -> Result {
    let size = core::mem::size_of::<T>();
    // SAFETY: `value` is `size` readable bytes without padding; the copy
    // checks the user address range and faults safely.
    let left = unsafe { bindings::srnic_copy_to_user(addr, (value as *const T).cast(), size) };
    if left != 0 {
        return Err(EFAULT);
    }
    Ok(())
}
