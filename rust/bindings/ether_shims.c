// SPDX-License-Identifier: GPL-2.0
/* Shims for iblan's Ethernet netdev, NAPI and ethtool (rust/kapi/ether.rs): static inlines and macros. */
#include "srnic_helper.h"
