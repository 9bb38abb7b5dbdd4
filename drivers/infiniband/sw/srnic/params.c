// SPDX-License-Identifier: GPL-2.0
/*
 * srnic's module parameters. module_param() is a macro the Rust side
 * cannot use; each parameter is read through a one-line accessor.
 */
#include <linux/moduleparam.h>

static unsigned int comp_vectors;
module_param(comp_vectors, uint, 0444);
MODULE_PARM_DESC(comp_vectors,
		 "Completion vectors (IRQs) per device; 0 (default): one per online CPU");

unsigned int srnic_param_comp_vectors(void);

unsigned int srnic_param_comp_vectors(void)
{
	return READ_ONCE(comp_vectors);
}
