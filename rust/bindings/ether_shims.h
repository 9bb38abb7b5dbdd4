/* SPDX-License-Identifier: GPL-2.0 */
/* Shims for iblan's Ethernet netdev, NAPI and ethtool (rust/kapi/ether.rs): static inlines and macros. */
#ifndef SRNIC_ETHER_SHIMS_H
#define SRNIC_ETHER_SHIMS_H

#endif
