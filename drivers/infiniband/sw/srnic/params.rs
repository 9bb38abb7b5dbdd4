// SPDX-License-Identifier: GPL-2.0

//! srnic's module parameters, defined in `params.c` (`module_param` is a C
//! macro): `modprobe srnic comp_vectors=N` or `srnic.comp_vectors=N`.

/// The most completion vectors a device has.
const MAX_COMP_VECTORS: u32 = 256;

module_param_reader!(
    /// The `comp_vectors` parameter as set.
    fn requested_comp_vectors() -> u32 = srnic::comp_vectors
);

/// Completion vectors for a new device: the `comp_vectors` parameter, or
/// one per online CPU when it is 0 (the default); at most 256.
pub(crate) fn comp_vectors() -> u32 {
    match requested_comp_vectors() {
        0 => crate::kapi::cpu::online_count(),
        count => count,
    }
    .clamp(1, MAX_COMP_VECTORS)
}
