// SPDX-License-Identifier: GPL-2.0

//! Read-only debugfs files whose content a callback writes on each read.

use crate::bindings;
use core::marker::PhantomPinned;
use core::pin::Pin;
use kernel::alloc::KBox;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;

/// A debugfs directory; removed with its content when dropped.
pub struct Dir(*mut bindings::dentry);

// SAFETY: a dentry pointer may be removed from any thread.
unsafe impl Send for Dir {}
// SAFETY: `&Dir` exposes nothing mutable.
unsafe impl Sync for Dir {}

impl Dir {
    /// Creates `name` under `parent` (the debugfs root if `None`). Debugfs
    /// is best effort: a failure gives a directory nothing can be added to.
    pub fn new(name: &CStr, parent: Option<&Dir>) -> Self {
        let parent = parent.map_or(core::ptr::null_mut(), |p| p.0);
        // SAFETY: a NUL-terminated name and a valid (or NULL) parent.
        Self(unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), parent) })
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: created in `new`; removal waits for running reads, and
        // accepts error pointers.
        unsafe { bindings::debugfs_remove(self.0) };
    }
}

/// The content a read produces.
pub struct SeqOut(*mut bindings::seq_file);

impl core::fmt::Write for SeqOut {
    fn write_str(&mut self, text: &str) -> core::fmt::Result {
        // SAFETY: the seq_file of the running show callback; the bytes are
        // copied (seq_file retries with a larger buffer on overflow).
        unsafe { bindings::seq_write(self.0, text.as_ptr().cast(), text.len()) };
        Ok(())
    }
}

/// What a file shows.
pub trait Show: Sync {
    /// Writes the file's content.
    fn show(&self, out: &mut SeqOut);
}

/// A file `name` in a [`Dir`] that shows `*data`; removed when dropped.
///
/// # Invariants
///
/// `dentry` is what creating the file for `_entry` returned (a dentry or an
/// error pointer, both of which `debugfs_remove` accepts); `_entry`, the
/// inode's private data, stays pinned and its `data` valid (`new`'s
/// contract) until `drop` has removed the file.
pub struct File<T: Show> {
    dentry: *mut bindings::dentry,
    _entry: Pin<KBox<Entry>>,
    _data: core::marker::PhantomData<*const T>,
}

struct Entry {
    raw: Opaque<bindings::srnic_debugfs_show>,
    _pin: PhantomPinned,
}

// SAFETY: the file only reads `T`, which is `Sync`.
unsafe impl<T: Show> Send for File<T> {}
// SAFETY: as above.
unsafe impl<T: Show> Sync for File<T> {}

impl<T: Show> File<T> {
    /// Creates the file.
    ///
    /// # Safety
    ///
    /// `data` stays valid until the file is dropped.
    pub unsafe fn new(name: &CStr, dir: &Dir, data: *const T) -> Result<Self> {
        let entry = KBox::pin(
            Entry {
                raw: Opaque::new(bindings::srnic_debugfs_show {
                    show: Some(Self::show),
                    data: data.cast_mut().cast(),
                }),
                _pin: PhantomPinned,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: the entry is pinned until after `debugfs_remove` (drop),
        // which waits for running reads.
        let dentry = unsafe {
            bindings::srnic_debugfs_create_show(name.as_char_ptr(), dir.0, entry.raw.get())
        };
        Ok(Self {
            dentry,
            _entry: entry,
            _data: core::marker::PhantomData,
        })
    }

    /// The seq_file callback. Its second argument is the iterator's
    /// position (`SEQ_START_TOKEN` under `single_open`), not the file's
    /// data, which `single_open` keeps in the seq_file's `private`.
    ///
    /// # Safety
    ///
    /// Called only by seq_file for a debugfs file this module created, with
    /// the private data it was created with.
    unsafe extern "C" fn show(seq: *mut bindings::seq_file, _position: *mut c_void) -> c_int {
        // SAFETY: `seq` is the seq_file of the read in progress, which
        // `single_open` created with the entry's data as `private`.
        let private = unsafe { (*seq).private };
        // SAFETY: `private` is the `T` given to `new`, valid while the file
        // exists (type invariant of `File`), which it does during a read.
        let Some(data) = (unsafe { private.cast::<T>().as_ref() }) else {
            return 0;
        };
        data.show(&mut SeqOut(seq));
        0
    }
}

impl<T: Show> Drop for File<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, `new`'s result; waits for running
        // reads.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}
