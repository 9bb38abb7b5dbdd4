// SPDX-License-Identifier: GPL-2.0

//! Module parameters. `module_param` is a C macro, so each parameter lives
//! in its driver's `params.c` with a one-line accessor named
//! `<module>_param_<name>` that takes nothing and returns the parameter's
//! current value (`READ_ONCE` of a static word). The helper header keeps
//! that prefix for parameter accessors alone, which is what lets
//! [`module_param_reader!`] call one without a contract on its caller.

/// Defines `fn $fn() -> $ty`, the current value of module parameter
/// `$name` of `$module`, read through the C accessor
/// `$module_param_$name`.
///
/// ```ignore
/// module_param_reader!(
///     /// Completion vectors per device, as set.
///     pub(crate) fn requested_comp_vectors() -> u32 = srnic::comp_vectors
/// );
/// ```
macro_rules! module_param_reader {
    ($(#[$meta:meta])* $vis:vis fn $fn:ident() -> $ty:ty = $module:ident::$name:ident) => {
        $(#[$meta])*
        $vis fn $fn() -> $ty {
            ::kernel::macros::paste! {
                // SAFETY: `<module>_param_<name>` accessors take no
                // arguments and only read their parameter's static word
                // (see `kapi::param`); they have no preconditions.
                unsafe { crate::bindings::[<$module _param_ $name>]() }
            }
        }
    };
}
