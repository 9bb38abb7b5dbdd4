// SPDX-License-Identifier: GPL-2.0
/*
 * Shims for the consumer verbs (rust/kapi/rdma/consumer.rs): the core's
 * consumer API is partly static inlines and macros that name the caller.
 */
#include "srnic_helper.h"

struct ib_pd *srnic_ulp_alloc_pd(struct ib_device *dev, const char *caller)
{
	return __ib_alloc_pd(dev, 0, caller);
}

struct ib_cq *srnic_ulp_create_cq(struct ib_device *dev, ib_comp_handler handler,
				  void *context, int entries, int vector,
				  const char *caller)
{
	struct ib_cq_init_attr attr = { .cqe = entries, .comp_vector = vector };

	return __ib_create_cq(dev, handler, NULL, context, &attr, caller);
}

/*
 * A kernel QP of @type with one CQ for sends and receives and every send
 * signalled. The caps the provider granted (at least those asked for) are
 * written back to @send_sge and @recv_sge.
 */
static struct ib_qp *srnic_ulp_create_qp(struct ib_pd *pd, struct ib_cq *cq,
					 enum ib_qp_type type, u32 send_depth,
					 u32 recv_depth, u32 *send_sge,
					 u32 *recv_sge, const char *caller)
{
	struct ib_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {
			.max_send_wr = send_depth,
			.max_recv_wr = recv_depth,
			.max_send_sge = *send_sge,
			.max_recv_sge = *recv_sge,
		},
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = type,
	};
	struct ib_qp *qp = ib_create_qp_kernel(pd, &init, caller);

	if (!IS_ERR(qp)) {
		*send_sge = init.cap.max_send_sge;
		*recv_sge = init.cap.max_recv_sge;
	}
	return qp;
}

struct ib_qp *srnic_ulp_create_ud_qp(struct ib_pd *pd, struct ib_cq *cq,
				     u32 send_depth, u32 recv_depth, u32 send_sge,
				     const char *caller)
{
	u32 recv_sge = 1;

	return srnic_ulp_create_qp(pd, cq, IB_QPT_UD, send_depth, recv_depth,
				   &send_sge, &recv_sge, caller);
}

struct ib_qp *srnic_ulp_create_rc_qp(struct ib_pd *pd, struct ib_cq *cq,
				     u32 send_depth, u32 recv_depth, u32 *send_sge,
				     u32 *recv_sge, const char *caller)
{
	return srnic_ulp_create_qp(pd, cq, IB_QPT_RC, send_depth, recv_depth,
				   send_sge, recv_sge, caller);
}

/* RESET to RTS for a UD QP: INIT with port, P_Key index 0 and Q_Key, RTR, RTS. */
int srnic_ulp_ud_qp_ready(struct ib_qp *qp, u32 port, u32 qkey)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = port,
		.qkey = qkey,
	};
	int err;

	err = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_QKEY);
	if (err)
		return err;
	attr.qp_state = IB_QPS_RTR;
	err = ib_modify_qp(qp, &attr, IB_QP_STATE);
	if (err)
		return err;
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 0;
	return ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN);
}

int srnic_ulp_qp_to_error(struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	return ib_modify_qp(qp, &attr, IB_QP_STATE);
}

/* RESET to INIT for an RC QP on @port: P_Key index 0, no remote access. */
int srnic_ulp_rc_qp_init(struct ib_qp *qp, u32 port)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = port,
		.qp_access_flags = 0,
	};

	return ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			    IB_QP_PORT | IB_QP_ACCESS_FLAGS);
}

/*
 * INIT to RTR to RTS for an RC QP: to @dest_qpn at @dgid (through GID
 * @sgid_index of @port), expecting @dest_psn first and sending from
 * @sq_psn, with the path MTU (an enum ib_mtu) and @policy the caller chose.
 * The core resolves a RoCE destination's MAC address (it may sleep).
 */
int srnic_ulp_rc_qp_connect(struct ib_qp *qp, u32 port, u8 sgid_index,
			    const u8 *dgid, u8 hop_limit, u32 dest_qpn,
			    u32 dest_psn, u32 sq_psn, u32 path_mtu,
			    const struct srnic_ulp_rc_policy *policy)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_RTR,
		.path_mtu = path_mtu,
		.dest_qp_num = dest_qpn,
		.rq_psn = dest_psn,
		.max_dest_rd_atomic = policy->max_dest_rd_atomic,
		.min_rnr_timer = policy->min_rnr_timer,
	};
	union ib_gid gid;
	int err;

	memcpy(gid.raw, dgid, sizeof(gid.raw));
	attr.ah_attr.type = rdma_ah_find_type(qp->device, port);
	rdma_ah_set_port_num(&attr.ah_attr, port);
	rdma_ah_set_grh(&attr.ah_attr, &gid, 0, sgid_index, hop_limit, 0);
	err = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = sq_psn;
	attr.timeout = policy->timeout;
	attr.retry_cnt = policy->retry_cnt;
	attr.rnr_retry = policy->rnr_retry;
	attr.max_rd_atomic = policy->max_rd_atomic;
	return ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			    IB_QP_MAX_QP_RD_ATOMIC);
}

struct ib_ah *srnic_ulp_create_ah(struct ib_pd *pd, u32 port, u8 sgid_index,
				  const u8 *dgid, u8 hop_limit, u8 traffic_class)
{
	struct rdma_ah_attr attr = {};
	union ib_gid gid;

	memcpy(gid.raw, dgid, sizeof(gid.raw));
	attr.type = rdma_ah_find_type(pd->device, port);
	rdma_ah_set_port_num(&attr, port);
	rdma_ah_set_grh(&attr, &gid, 0, sgid_index, hop_limit, traffic_class);
	return rdma_create_ah(pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

int srnic_ulp_post_ud_send(struct ib_qp *qp, u64 wr_id, const struct ib_sge *sges,
			   int num_sge, struct ib_ah *ah, u32 remote_qpn,
			   u32 remote_qkey)
{
	struct ib_ud_wr wr = {
		.wr = {
			.wr_id = wr_id,
			.sg_list = (struct ib_sge *)sges,
			.num_sge = num_sge,
			.opcode = IB_WR_SEND,
			.send_flags = IB_SEND_SIGNALED,
		},
		.ah = ah,
		.remote_qpn = remote_qpn,
		.remote_qkey = remote_qkey,
	};

	return ib_post_send(qp, &wr.wr, NULL);
}

/* One signalled SEND of @num_sge elements (an RC or UC QP's). */
int srnic_ulp_post_send_sges(struct ib_qp *qp, u64 wr_id, const struct ib_sge *sges,
			     int num_sge)
{
	struct ib_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = (struct ib_sge *)sges,
		.num_sge = num_sge,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};

	return ib_post_send(qp, &wr, NULL);
}

int srnic_ulp_post_recv_sges(struct ib_qp *qp, u64 wr_id, const struct ib_sge *sges,
			     int num_sge)
{
	struct ib_recv_wr wr = {
		.wr_id = wr_id,
		.sg_list = (struct ib_sge *)sges,
		.num_sge = num_sge,
	};

	return ib_post_recv(qp, &wr, NULL);
}

int srnic_ulp_poll_cq(struct ib_cq *cq, int num, struct ib_wc *wc)
{
	return ib_poll_cq(cq, num, wc);
}

/* Arms @cq for the next completion; > 0 if completions came in meanwhile. */
int srnic_ulp_arm_cq(struct ib_cq *cq)
{
	return ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS);
}

u64 srnic_ulp_dma_map(struct ib_device *dev, void *addr, size_t len, bool to_device)
{
	u64 dma = ib_dma_map_single(dev, addr, len,
				    to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);

	/* The address of a failed mapping never reaches a WR: 0 marks it. */
	return ib_dma_mapping_error(dev, dma) ? 0 : dma;
}

void srnic_ulp_dma_unmap(struct ib_device *dev, u64 addr, size_t len, bool to_device)
{
	ib_dma_unmap_single(dev, addr, len, to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
}

/* Maps @len bytes at @offset in @page, as srnic_ulp_dma_map() maps memory. */
u64 srnic_ulp_dma_map_page(struct ib_device *dev, struct page *page, size_t offset,
			   size_t len, bool to_device)
{
	u64 dma = ib_dma_map_page(dev, page, offset, len,
				  to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);

	return ib_dma_mapping_error(dev, dma) ? 0 : dma;
}

void srnic_ulp_dma_unmap_page(struct ib_device *dev, u64 addr, size_t len, bool to_device)
{
	ib_dma_unmap_page(dev, addr, len, to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
}

/*
 * Maps page fragment @i of @skb for @dev to send; its length in @len. 0 if
 * @i is past the last fragment or the mapping failed.
 */
u64 srnic_ulp_dma_map_skb_frag(struct ib_device *dev, const struct sk_buff *skb,
			       unsigned int i, u32 *len)
{
	const skb_frag_t *frag;

	if (i >= skb_shinfo(skb)->nr_frags)
		return 0;
	frag = &skb_shinfo(skb)->frags[i];
	*len = skb_frag_size(frag);
	return srnic_ulp_dma_map_page(dev, skb_frag_page(frag), skb_frag_off(frag),
				      *len, true);
}

/*
 * Ownership of a mapped buffer passes to the CPU (before it reads what the
 * device wrote) or back to the device (before a receive into it or a send
 * of what the CPU wrote). No-ops for devices on virtual DMA (the soft ones)
 * and on coherent platforms without bounce buffering.
 */
void srnic_ulp_dma_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len, bool to_device)
{
	ib_dma_sync_single_for_cpu(dev, addr, len, to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
}

void srnic_ulp_dma_sync_for_device(struct ib_device *dev, u64 addr, size_t len, bool to_device)
{
	ib_dma_sync_single_for_device(dev, addr, len, to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
}

/* The port's active MTU in bytes, or a negative errno. */
int srnic_ulp_port_mtu_bytes(struct ib_device *dev, u32 port)
{
	struct ib_port_attr attr;
	int err = ib_query_port(dev, port, &attr);

	return err ? err : ib_mtu_enum_to_int(attr.active_mtu);
}

bool srnic_ulp_port_is_roce(struct ib_device *dev, u32 port)
{
	return rdma_protocol_roce(dev, port);
}

u32 srnic_ulp_phys_port_count(struct ib_device *dev)
{
	return dev->phys_port_cnt;
}

void srnic_ulp_init_event_handler(struct ib_event_handler *handler,
				  struct ib_device *dev,
				  void (*fn)(struct ib_event_handler *, struct ib_event *))
{
	INIT_IB_EVENT_HANDLER(handler, dev, fn);
}

/*
 * GID @index of @port: its 16 bytes and whether it is a RoCEv2 GID;
 * -ENOENT for an empty entry.
 */
int srnic_ulp_gid_entry(struct ib_device *dev, u32 port, u32 index, u8 *gid,
			bool *roce_v2)
{
	const struct ib_gid_attr *attr = rdma_get_gid_attr(dev, port, index);

	if (IS_ERR(attr))
		return PTR_ERR(attr);
	memcpy(gid, attr->gid.raw, sizeof(attr->gid.raw));
	*roce_v2 = attr->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP;
	rdma_put_gid_attr(attr);
	return 0;
}

/* The netdev under a RoCE port, with a reference the caller puts; or NULL. */
struct net_device *srnic_ulp_port_netdev(struct ib_device *dev, u32 port)
{
	return ib_device_get_netdev(dev, port);
}

/*
 * IP-level membership of an IPv6 multicast group on @ndev: RoCEv2
 * multicast is IP multicast, which the IP layer drops unless the
 * interface joined the group (link-level filters are the driver's).
 */
int srnic_ulp_ipv6_mc_join(struct net_device *ndev, const u8 *group)
{
	return ipv6_dev_mc_inc(ndev, (const struct in6_addr *)group);
}

int srnic_ulp_ipv6_mc_leave(struct net_device *ndev, const u8 *group)
{
	return ipv6_dev_mc_dec(ndev, (const struct in6_addr *)group);
}

bool srnic_mod_delayed_work(struct delayed_work *work, unsigned long delay_ms)
{
	return mod_delayed_work(system_wq, work, msecs_to_jiffies(delay_ms));
}

bool srnic_queue_delayed_work(struct delayed_work *work, unsigned long delay_ms)
{
	return queue_delayed_work(system_wq, work, msecs_to_jiffies(delay_ms));
}

u64 srnic_jiffies_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}

int srnic_skb_cow_head(struct sk_buff *skb, unsigned int headroom)
{
	return skb_cow_head(skb, headroom);
}

void srnic_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

void *srnic_skb_cb(struct sk_buff *skb)
{
	return skb->cb;
}

bool srnic_ulp_port_active(struct ib_device *dev, u32 port)
{
	struct ib_port_attr attr;

	return !ib_query_port(dev, port, &attr) && attr.state == IB_PORT_ACTIVE;
}

static int srnic_debugfs_open(struct inode *inode, struct file *file)
{
	const struct srnic_debugfs_show *entry = inode->i_private;

	return single_open(file, entry->show, entry->data);
}

/* What DEFINE_SHOW_ATTRIBUTE expands to, with the callback in the entry. */
static const struct file_operations srnic_debugfs_fops = {
	.owner = THIS_MODULE,
	.open = srnic_debugfs_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

struct dentry *srnic_debugfs_create_show(const char *name, struct dentry *parent,
					 struct srnic_debugfs_show *entry)
{
	return debugfs_create_file(name, 0444, parent, entry, &srnic_debugfs_fops);
}
