/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shims for the consumer verbs (rust/kapi/rdma/consumer.rs): the core's
 * consumer API is partly static inlines and macros that name the caller.
 */
#ifndef SRNIC_CONSUMER_SHIMS_H
#define SRNIC_CONSUMER_SHIMS_H

struct ib_pd *srnic_ulp_alloc_pd(struct ib_device *dev, const char *caller);
struct ib_cq *srnic_ulp_create_cq(struct ib_device *dev, ib_comp_handler handler,
				  void *context, int entries, int vector,
				  const char *caller);
struct ib_qp *srnic_ulp_create_ud_qp(struct ib_pd *pd, struct ib_cq *cq,
				     u32 send_depth, u32 recv_depth, u32 send_sge,
				     const char *caller);
struct ib_qp *srnic_ulp_create_rc_qp(struct ib_pd *pd, struct ib_cq *cq,
				     u32 send_depth, u32 recv_depth, u32 *send_sge,
				     u32 *recv_sge, const char *caller);
int srnic_ulp_ud_qp_ready(struct ib_qp *qp, u32 port, u32 qkey);
int srnic_ulp_qp_to_error(struct ib_qp *qp);
int srnic_ulp_rc_qp_init(struct ib_qp *qp, u32 port);
/* How an RC connection retries and what it allows (srnic_ulp_rc_qp_connect()). */
struct srnic_ulp_rc_policy {
	u8 timeout;
	u8 retry_cnt;
	u8 rnr_retry;
	u8 min_rnr_timer;
	u8 max_rd_atomic;
	u8 max_dest_rd_atomic;
};
int srnic_ulp_rc_qp_connect(struct ib_qp *qp, u32 port, u8 sgid_index,
			    const u8 *dgid, u8 hop_limit, u32 dest_qpn,
			    u32 dest_psn, u32 sq_psn, u32 path_mtu,
			    const struct srnic_ulp_rc_policy *policy);
struct ib_ah *srnic_ulp_create_ah(struct ib_pd *pd, u32 port, u8 sgid_index,
				  const u8 *dgid, u8 hop_limit, u8 traffic_class);
int srnic_ulp_post_ud_send(struct ib_qp *qp, u64 wr_id, const struct ib_sge *sges,
			   int num_sge, struct ib_ah *ah, u32 remote_qpn,
			   u32 remote_qkey);
int srnic_ulp_post_send_sges(struct ib_qp *qp, u64 wr_id, const struct ib_sge *sges,
			     int num_sge);
int srnic_ulp_post_recv_sges(struct ib_qp *qp, u64 wr_id, const struct ib_sge *sges,
			     int num_sge);
int srnic_ulp_poll_cq(struct ib_cq *cq, int num, struct ib_wc *wc);
int srnic_ulp_arm_cq(struct ib_cq *cq);
u64 srnic_ulp_dma_map(struct ib_device *dev, void *addr, size_t len, bool to_device);
void srnic_ulp_dma_unmap(struct ib_device *dev, u64 addr, size_t len, bool to_device);
u64 srnic_ulp_dma_map_page(struct ib_device *dev, struct page *page, size_t offset,
			   size_t len, bool to_device);
void srnic_ulp_dma_unmap_page(struct ib_device *dev, u64 addr, size_t len, bool to_device);
u64 srnic_ulp_dma_map_skb_frag(struct ib_device *dev, const struct sk_buff *skb,
			       unsigned int i, u32 *len);
void srnic_ulp_dma_sync_for_cpu(struct ib_device *dev, u64 addr, size_t len, bool to_device);
void srnic_ulp_dma_sync_for_device(struct ib_device *dev, u64 addr, size_t len, bool to_device);
int srnic_ulp_port_mtu_bytes(struct ib_device *dev, u32 port);
bool srnic_ulp_port_is_roce(struct ib_device *dev, u32 port);
u32 srnic_ulp_phys_port_count(struct ib_device *dev);
void srnic_ulp_init_event_handler(struct ib_event_handler *handler,
				  struct ib_device *dev,
				  void (*fn)(struct ib_event_handler *, struct ib_event *));
int srnic_ulp_gid_entry(struct ib_device *dev, u32 port, u32 index, u8 *gid,
			bool *roce_v2);
struct net_device *srnic_ulp_port_netdev(struct ib_device *dev, u32 port);
int srnic_ulp_ipv6_mc_join(struct net_device *ndev, const u8 *group);
int srnic_ulp_ipv6_mc_leave(struct net_device *ndev, const u8 *group);

/* Delayed work on the system workqueue (rust/kapi/work.rs). */
bool srnic_mod_delayed_work(struct delayed_work *work, unsigned long delay_ms);
bool srnic_queue_delayed_work(struct delayed_work *work, unsigned long delay_ms);
u64 srnic_jiffies_ms(void);

/* skbs a ULP transmits (rust/kapi/skb.rs). */
int srnic_skb_cow_head(struct sk_buff *skb, unsigned int headroom);
void srnic_consume_skb(struct sk_buff *skb);
void *srnic_skb_cb(struct sk_buff *skb);
bool srnic_ulp_port_active(struct ib_device *dev, u32 port);

/* A read-only debugfs file that a show callback fills (rust/kapi/debugfs.rs). */
struct srnic_debugfs_show {
	int (*show)(struct seq_file *seq, void *data);
	void *data;
};
struct dentry *srnic_debugfs_create_show(const char *name, struct dentry *parent,
					 struct srnic_debugfs_show *entry);

#endif
