// SPDX-License-Identifier: GPL-2.0

//! Rate-limited printing, for messages that user space can trigger at will.

/// Whether a rate-limited message may be printed now (the kernel-wide
/// `printk_ratelimit` budget).
pub fn ratelimit() -> bool {
    // SAFETY: no preconditions; callable from any context.
    unsafe { crate::bindings::srnic_printk_ratelimit() }
}

/// `pr_warn!` unless the kernel-wide printk rate limit is exhausted.
#[allow(unused_macros)]
macro_rules! pr_warn_ratelimited {
    ($($arg:tt)*) => {
        if $crate::kapi::print::ratelimit() {
            kernel::pr_warn!($($arg)*);
        }
    };
}
