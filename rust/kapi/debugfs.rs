// SPDX-License-Identifier: GPL-2.0

//! Read-only debugfs files whose content a callback writes on each read.

use crate::bindings;
use core::marker::PhantomPinned;
use core::pin::Pin;
use kernel::alloc::KBox;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// A debugfs directory, shared: removed when the last clone, and the last
/// subdirectory and file in it, are gone. Removing a directory removes
/// what is in it, so what is in it holds it rather than outlive it.
#[derive(Clone)]
pub struct Dir(Arc<DirInner>);

/// # Invariants
///
/// `dentry` is what `debugfs_create_dir` returned for this value (a
/// dentry or an error pointer, both of which `debugfs_remove` accepts),
/// removed only by `drop`; `_parent` is the directory it is in, which is
/// removed only after it (the field drops after `drop` ran).
struct DirInner {
    dentry: *mut bindings::dentry,
    _parent: Option<Dir>,
}

// SAFETY: a dentry may be removed from any thread.
unsafe impl Send for DirInner {}
// SAFETY: `&DirInner` exposes nothing mutable.
unsafe impl Sync for DirInner {}

impl Dir {
    /// Creates `name` under `parent` (the debugfs root if `None`). Debugfs
    /// is best effort: a failure of debugfs gives a directory nothing can
    /// be added to; only running out of memory here is an error.
    pub fn new(name: &CStr, parent: Option<&Dir>) -> Result<Self> {
        let raw_parent = parent.map_or(core::ptr::null_mut(), |p| p.0.dentry);
        // SAFETY: a NUL-terminated name and a live (or NULL) parent: a
        // `Dir` is not removed while borrowed.
        let dentry = unsafe { bindings::debugfs_create_dir(name.as_char_ptr(), raw_parent) };
        let inner = DirInner {
            dentry,
            _parent: parent.cloned(),
        };
        // A failed allocation drops `inner`, which removes the directory.
        Ok(Self(Arc::new(inner, GFP_KERNEL)?))
    }
}

impl Drop for DirInner {
    fn drop(&mut self) {
        // SAFETY: created in `new` and not removed yet: its parent is still
        // held (type invariant). Removal waits for running reads and
        // accepts error pointers.
        unsafe { bindings::debugfs_remove(self.dentry) };
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
/// Made by the owner of the data (an [`EtherRegistration`] for its
/// netdev's), which removes it before the data goes.
///
/// [`EtherRegistration`]: crate::kapi::ether::EtherRegistration
///
/// # Invariants
///
/// `dentry` is what creating the file for `_entry` returned (a dentry or an
/// error pointer, both of which `debugfs_remove` accepts) in `_dir`, which
/// is removed only after it; `_entry`, the inode's private data, stays
/// pinned and its `data` valid (`new`'s contract) until `drop` has removed
/// the file.
pub struct File<T> {
    dentry: *mut bindings::dentry,
    _entry: Pin<KBox<Entry>>,
    _dir: Dir,
    _data: core::marker::PhantomData<*const T>,
}

struct Entry {
    raw: Opaque<bindings::srnic_debugfs_show>,
    _pin: PhantomPinned,
}

// SAFETY: the file only reads `T`, which is `Sync`.
unsafe impl<T: Sync> Send for File<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for File<T> {}

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
            bindings::srnic_debugfs_create_show(name.as_char_ptr(), dir.0.dentry, entry.raw.get())
        };
        Ok(Self {
            dentry,
            _entry: entry,
            _dir: dir.clone(),
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

impl<T> Drop for File<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant, `new`'s result; waits for running
        // reads.
        unsafe { bindings::debugfs_remove(self.dentry) };
    }
}
