/* SPDX-License-Identifier: GPL-2.0 */
/* Shims for Consumer verbs for iblan (rust/kapi/rdma/consumer.rs): static inlines and macros. */
#ifndef SRNIC_CONSUMER_SHIMS_H
#define SRNIC_CONSUMER_SHIMS_H

#endif
