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

int srnic_test_poll_cq(struct ib_cq *cq, int num, struct ib_wc *wc)
{
	return ib_poll_cq(cq, num, wc);
}

int srnic_test_req_notify_cq(struct ib_cq *cq, enum ib_cq_notify_flags flags)
{
	return ib_req_notify_cq(cq, flags);
}

/* The CPUs (of the first 64) that completion vector @vector serves. */
u64 srnic_test_vector_cpus(struct ib_device *dev, int vector)
{
	const struct cpumask *mask = ib_get_vector_affinity(dev, vector);

	return mask ? cpumask_bits(mask)[0] : 0;
}

int srnic_test_this_cpu(void)
{
	return raw_smp_processor_id();
}

u64 srnic_test_now_ns(void)
{
	return ktime_get_ns();
}

unsigned int srnic_test_online_cpus(void)
{
	return num_online_cpus();
}

/*
 * A fast-registration region of @pd over the @len bytes at @buf (within
 * one page), its page list mapped: it becomes valid with the access an
 * IB_WR_REG_MR gives it. Deregister with ib_dereg_mr().
 */
struct ib_mr *srnic_test_fastreg_mr(struct ib_pd *pd, void *buf, unsigned int len)
{
	struct scatterlist sg;
	struct ib_mr *mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 1);

	if (IS_ERR(mr))
		return mr;
	sg_init_one(&sg, buf, len);
	if (ib_dma_map_sg(pd->device, &sg, 1, DMA_BIDIRECTIONAL) != 1 ||
	    ib_map_mr_sg(mr, &sg, 1, NULL, PAGE_SIZE) != 1) {
		ib_dereg_mr(mr);
		return ERR_PTR(-EINVAL);
	}
	return mr;
}
