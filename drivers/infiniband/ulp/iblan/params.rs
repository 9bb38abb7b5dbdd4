// SPDX-License-Identifier: GPL-2.0

//! iblan's module parameters, defined in `params.c` (`module_param` is a C
//! macro): `modprobe iblan lan=N vendor=0xXXXXXX`.

use kernel::prelude::*;

kapi_params! {
    /// `lan=`, unchecked.
    fn lan_param() -> u32 = iblan_param_lan;
    /// `vendor=`, unchecked.
    fn vendor_param() -> u32 = iblan_param_vendor;
}

/// Which emulated LAN this node's ports join, and how their MACs begin.
#[derive(Clone, Copy)]
pub(crate) struct LanConfig {
    /// The MACs' first three bytes.
    pub(crate) vendor: [u8; 3],
    /// The LAN index: byte 3 of every MAC, and part of the Q_Key and the
    /// name service's group.
    pub(crate) lan: u8,
}

impl LanConfig {
    /// The parameters, checked: a LAN index above 255, a vendor ID wider
    /// than 24 bits or one with the multicast bit set is `EINVAL`.
    pub(crate) fn from_params() -> Result<Self> {
        let lan = lan_param();
        let vendor = vendor_param();
        let Ok(lan) = u8::try_from(lan) else {
            pr_err!("iblan: lan={} is not a LAN index (0-255)\n", lan);
            return Err(EINVAL);
        };
        let [zero, v0, v1, v2] = vendor.to_be_bytes();
        if zero != 0 || v0 & 1 != 0 {
            pr_err!(
                "iblan: vendor={:#x} is not a unicast 24-bit vendor ID\n",
                vendor
            );
            return Err(EINVAL);
        }
        Ok(Self {
            vendor: [v0, v1, v2],
            lan,
        })
    }

    /// The Q_Key of the LAN's QPs.
    pub(crate) fn qkey(&self) -> u32 {
        0x1b1a_0000 | u32::from(self.lan)
    }

    /// The name service's group: link-scoped, transient (`ff12`), iblan's
    /// prefix, the LAN index.
    pub(crate) fn group(&self) -> [u8; 16] {
        [
            0xff, 0x12, 0x40, 0x1b, 0, self.lan, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ]
    }
}
