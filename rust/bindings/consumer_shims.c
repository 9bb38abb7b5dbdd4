// SPDX-License-Identifier: GPL-2.0
/* Shims for Consumer verbs for iblan (rust/kapi/rdma/consumer.rs): static inlines and macros. */
#include "srnic_helper.h"
