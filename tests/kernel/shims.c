// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line consumer verbs for the in-kernel verbs test module: posting
 * work is a static inline in the core's header.
 */
#include "../../rust/bindings/srnic_helper.h"

int srnic_test_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr)
{
	return ib_post_send(qp, wr, bad_wr);
}

int srnic_test_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	return ib_post_recv(qp, wr, bad_wr);
}
