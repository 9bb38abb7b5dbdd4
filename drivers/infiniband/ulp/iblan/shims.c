// SPDX-License-Identifier: GPL-2.0
/*
 * iblan's copy of the shared shims: an object may belong to one module
 * only, so each module compiles the shim sources itself.
 */
#include "../../../../rust/bindings/shims.c"
#include "../../../../rust/bindings/ether_shims.c"
#include "../../../../rust/bindings/consumer_shims.c"
#include "../../../../rust/bindings/link_shims.c"
