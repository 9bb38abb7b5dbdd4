// SPDX-License-Identifier: GPL-2.0

//! srnic's module parameters, defined in `params.c` (`module_param` is a C
//! macro): `modprobe srnic comp_vectors=N` or `srnic.comp_vectors=N`.

/// The most completion vectors a device has.
const MAX_COMP_VECTORS: u32 = 256;

/// Completion vectors for a new device: the `comp_vectors` parameter, or
/// one per online CPU when it is 0 (the default); at most 256.
pub(crate) fn comp_vectors() -> u32 {
    // SAFETY: reads a parameter word; no preconditions.
    let requested = unsafe { crate::bindings::srnic_param_comp_vectors() };
    match requested {
        0 => crate::kapi::irq::online_cpus(),
        count => count,
    }
    .clamp(1, MAX_COMP_VECTORS)
}
