// SPDX-License-Identifier: GPL-2.0

//! Module parameters. `module_param` is a C macro, so a driver defines its
//! parameters in a C file with one accessor each, `unsigned int
//! NAME(void)` returning the parameter's word (`READ_ONCE`); this macro
//! gives those accessors safe Rust names.

/// Declares safe readers of a driver's C parameter accessors:
///
/// ```ignore
/// kapi_params! {
///     /// The LAN index.
///     pub(crate) fn lan() -> u32 = iblan_param_lan;
/// }
/// ```
///
/// Only for accessors of the shape above: no arguments, no preconditions,
/// a read of a parameter word that `module_param` keeps for the module's
/// life. The compiler checks the accessor's signature.
macro_rules! kapi_params {
    ($($(#[$meta:meta])* $vis:vis fn $name:ident() -> u32 = $shim:ident;)*) => {
        $(
            $(#[$meta])*
            $vis fn $name() -> u32 {
                // SAFETY: a parameter accessor, as the macro requires: it
                // takes nothing and reads a word that lives as long as the
                // module.
                unsafe { crate::bindings::$shim() }
            }
        )*
    };
}
