// SPDX-License-Identifier: GPL-2.0
/*
 * iblan's module parameters. module_param() is a macro the Rust side
 * cannot use; each parameter is read through a one-line accessor and
 * checked in params.rs.
 */
#include <linux/moduleparam.h>

static unsigned int lan;
module_param(lan, uint, 0444);
MODULE_PARM_DESC(lan, "LAN index, 0-255 (byte 3 of every MAC): separate LANs share a fabric");

static unsigned int vendor = 0x020000;
module_param(vendor, uint, 0444);
MODULE_PARM_DESC(vendor,
		 "Vendor ID, the MACs' first 3 bytes (default 0x020000, locally administered); must be unicast");

unsigned int iblan_param_lan(void);
unsigned int iblan_param_vendor(void);

unsigned int iblan_param_lan(void)
{
	return READ_ONCE(lan);
}

unsigned int iblan_param_vendor(void)
{
	return READ_ONCE(vendor);
}
