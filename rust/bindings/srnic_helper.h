/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel API srnic and iblan use, as one header for bindgen. Static
 * inlines and macros cannot be called from Rust; each one we need has a
 * thin out-of-line shim declared at the bottom and defined in shims.c.
 */
#ifndef SRNIC_HELPER_H
#define SRNIC_HELPER_H

#include <linux/cpuhotplug.h>
#include <linux/crc32.h>
#include <crypto/hash.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/etherdevice.h>
#include <linux/hrtimer.h>
#include <linux/if_ether.h>
#include <linux/if_vlan.h>
#include <linux/interrupt.h>
#include <linux/irq.h>
#include <linux/irq_work.h>
#include <linux/irqdomain.h>
#include <linux/llist.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/rtnetlink.h>
#include <linux/rcupdate.h>
#include <linux/sched/clock.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/percpu_counter.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/xarray.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_pack.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <linux/mmu_notifier.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <uapi/rdma/rdma_user_rxe.h>
#include <uapi/rdma/ib_user_verbs.h>

/* Constants bindgen cannot see through macros. */
static const u32 SRNIC_CORE_PORT_IBA_ROCE_UDP_ENCAP =
	RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
static const u32 SRNIC_IB_MGMT_MAD_SIZE = IB_MGMT_MAD_SIZE;
static const u16 SRNIC_DEFAULT_PKEY_FULL = 0xffff;
static const u32 SRNIC_PAGE_SHIFT = PAGE_SHIFT;
static const unsigned long SRNIC_PAGE_SIZE = PAGE_SIZE;
static const unsigned long SRNIC_HW_STATS_LIFESPAN_MS = RDMA_HW_STATS_DEFAULT_LIFESPAN;
static const int SRNIC_MODULE_STATE_LIVE = MODULE_STATE_LIVE;
static const int SRNIC_MODULE_STATE_GOING = MODULE_STATE_GOING;

/* Shims for static inlines and macros (shims.c). */
struct ib_device *srnic_ib_alloc_device(size_t size);
bool srnic_ib_device_try_get(struct ib_device *ibdev);
struct net_device *srnic_netdev_notifier_info_to_dev(void *info);
bool srnic_netif_running(const struct net_device *dev);
bool srnic_netif_carrier_ok(const struct net_device *dev);
bool srnic_netdev_is_registered(const struct net_device *dev);
struct net *srnic_netdev_net(const struct net_device *dev);
struct net *srnic_netdev_net_rcu(const struct net_device *dev);
struct net *srnic_maybe_get_net(struct net *net);
void srnic_put_net(struct net *net);
void srnic_dev_hold(struct net_device *dev);
void srnic_dev_put(struct net_device *dev);
void srnic_ib_device_get(struct ib_device *ibdev);
void srnic_ib_device_put_ref(struct ib_device *ibdev);
void srnic_ib_device_get_again(struct ib_device *ibdev);
bool srnic_printk_ratelimit(void);

/* Module references (rust/kapi/rdma/shared_id.rs). */
struct kobject *srnic_module_kobject_find(const char *name);
struct module *srnic_module_of_kobject(struct kobject *kobj);
int srnic_module_state(const struct module *mod);
bool srnic_module_name_is(const struct module *mod, const char *name);

/* Locks that may be taken from any context, interrupts included. */
unsigned long srnic_spin_lock_irqsave(spinlock_t *lock);
void srnic_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
void srnic_spin_lock_bh(spinlock_t *lock);
void srnic_spin_unlock_bh(spinlock_t *lock);

/* Driver data of a verb called from user space. */
struct ib_udata *srnic_attrs_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *srnic_udata_ucontext(struct ib_udata *udata);
int srnic_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
int srnic_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
unsigned long srnic_copy_to_user(u64 dst, const void *src, unsigned long len);

/* Queue memory that can be mapped into a process. */
void *srnic_vmalloc_user(unsigned long size);

/* Object tables, read under RCU. */
void srnic_rcu_read_lock(void);
void srnic_rcu_read_unlock(void);
void srnic_xa_init_alloc_irq(struct xarray *xa);
int srnic_xa_insert(struct xarray *xa, unsigned long index, void *entry);
int srnic_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry, u32 min,
			  u32 max, u32 *next);
void *srnic_xa_erase(struct xarray *xa, unsigned long index);
unsigned long srnic_xa_lock_irqsave(struct xarray *xa);
void srnic_xa_unlock_irqrestore(struct xarray *xa, unsigned long flags);

/* Pages of scatterlists and user memory. */
struct page *srnic_sg_page(struct scatterlist *sg);
struct page *srnic_nth_page(struct page *page, unsigned long n);
void *srnic_page_address(struct page *page);
u64 srnic_shared_cmpxchg64(u64 *word, u64 expected, u64 desired);
u64 srnic_shared_fetch_add64(u64 *word, u64 addend);
void srnic_shared_store64(u64 *word, u64 value);
u64 *srnic_percpu_counters_alloc(unsigned int count);
void srnic_percpu_counters_free(u64 *counters);
void srnic_percpu_counter_add(u64 *counters, unsigned int index, u64 value);
u64 srnic_percpu_counter_sum(u64 *counters, unsigned int index);
struct percpu_counter *srnic_approximate_count_new(void);
void srnic_approximate_count_free(struct percpu_counter *count);
void srnic_approximate_count_add(struct percpu_counter *count, s64 amount, s32 batch);
s64 srnic_approximate_count_read(struct percpu_counter *count);
void srnic_wmb(void);
struct scatterlist *srnic_umem_sgl(struct ib_umem *umem, unsigned int *nents);
bool srnic_uses_virt_dma(struct ib_device *dev);
struct mm_struct *srnic_mmgrab_current(void);
void srnic_mmdrop(struct mm_struct *mm);
bool srnic_mm_maps_range(struct mm_struct *mm, unsigned long start, unsigned long end);
struct ib_umem_odp *srnic_odp_of_notifier(struct mmu_interval_notifier *mni);
void srnic_odp_lock(struct ib_umem_odp *odp);
bool srnic_odp_trylock(struct ib_umem_odp *odp);
void srnic_odp_unlock(struct ib_umem_odp *odp);
void srnic_odp_set_owner(struct ib_umem_odp *odp, void *owner);
void *srnic_odp_owner(struct ib_umem_odp *odp);
void srnic_odp_bounds(struct ib_umem_odp *odp, u64 *start, u64 *end, u32 *page_shift);
u64 srnic_odp_dma_entry(struct ib_umem_odp *odp, u64 index);
void srnic_odp_set_seq(struct mmu_interval_notifier *mni, unsigned long seq);
bool srnic_mmu_range_blockable(const struct mmu_notifier_range *range);
void srnic_mmu_range_bounds(const struct mmu_notifier_range *range, u64 *start, u64 *end);
static const u64 SRNIC_ODP_READ_ALLOWED = ODP_READ_ALLOWED_BIT;
static const u64 SRNIC_ODP_WRITE_ALLOWED = ODP_WRITE_ALLOWED_BIT;
struct scatterlist *srnic_sg_next(struct scatterlist *sg);


/* Completion and event upcalls into the consumer of a CQ. */
void srnic_cq_comp_handler(struct ib_cq *cq);
void srnic_cq_event(struct ib_cq *cq, enum ib_event_type type);
void srnic_qp_event(struct ib_qp *qp, enum ib_event_type type);
void srnic_srq_event(struct ib_srq *srq, enum ib_event_type type);

/* Consumer verbs, for the in-kernel verbs test (tests/kernel/shims.c). */
int srnic_test_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr);
int srnic_test_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);
int srnic_test_poll_cq(struct ib_cq *cq, int num, struct ib_wc *wc);
int srnic_test_req_notify_cq(struct ib_cq *cq, enum ib_cq_notify_flags flags);
u64 srnic_test_vector_cpus(struct ib_device *dev, int vector);
int srnic_test_this_cpu(void);
u64 srnic_test_now_ns(void);
unsigned int srnic_test_online_cpus(void);
struct ib_mr *srnic_test_fastreg_mr(struct ib_pd *pd, void *buf, unsigned int len);

/* A device's maintenance work, run later in process context. */
void srnic_init_delayed_work(struct delayed_work *dwork, work_func_t fn);
bool srnic_schedule_delayed_work(struct delayed_work *dwork, unsigned int msecs);
struct delayed_work *srnic_to_delayed_work(struct work_struct *work);
void srnic_mod_delayed_work_on(int cpu, struct delayed_work *dwork);
bool srnic_queue_delayed_work_on(int cpu, struct delayed_work *dwork, unsigned int msecs);
bool srnic_queue_highpri_work_on(int cpu, struct work_struct *work);
int srnic_work_cpu_unbound(void);
bool srnic_cpu_online(unsigned int cpu);
unsigned int srnic_next_online_cpu_after(unsigned int cpu);
unsigned int srnic_first_online_cpu(void);
bool srnic_in_process(void);
int srnic_qp_work_enter(void);
void srnic_qp_work_exit(int cpu);
int srnic_qp_works_running_on(unsigned int cpu);
void srnic_init_work(struct work_struct *work, work_func_t fn);
void srnic_cancel_work_sync(struct work_struct *work);
bool srnic_irqs_disabled(void);
bool srnic_in_softirq(void);
unsigned long srnic_local_irq_save(void);
void srnic_local_irq_restore(unsigned long flags);
void srnic_cpu_relax(void);
void srnic_cond_resched(void);
void *srnic_xa_next(struct xarray *xa, unsigned long *index, bool first);

/*
 * The RoCEv2 wire: a UDP tunnel socket whose receive callback gets each
 * datagram, IPv4 and IPv6 transmission of packets whose headers srnic
 * writes, and the end of a network namespace.
 */
struct socket *srnic_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
				     int (*rcv)(struct sock *sk, struct sk_buff *skb),
				     void *user_data, int *err);
void *srnic_sk_user_data(struct sock *sk);
void srnic_udp_tunnel_close(struct socket *sock);
struct net *srnic_init_net(void);
int srnic_register_pernet(struct pernet_operations *ops);
void srnic_unregister_pernet(struct pernet_operations *ops);
struct sk_buff *srnic_alloc_skb(unsigned int headroom, unsigned int len);
void srnic_kfree_skb(struct sk_buff *skb);
unsigned int srnic_skb_nr_frags(const struct sk_buff *skb);
bool srnic_skb_frags_full(const struct sk_buff *skb);
int srnic_skb_give_page(struct sk_buff *skb, struct page *page, unsigned int offset,
			unsigned int len);
struct crypto_shash *srnic_crc32_engine_alloc(void);
void srnic_crc32_engine_free(struct crypto_shash *tfm);
const char *srnic_crc32_engine_driver(struct crypto_shash *tfm);
u32 srnic_crc32_update(struct crypto_shash *tfm, u32 crc, const void *bytes, size_t len);
const void *srnic_skb_frag(const struct sk_buff *skb, unsigned int i, unsigned int *len);
int srnic_skb_append_page_bytes(struct sk_buff *skb, const void *addr, unsigned int len);
int srnic_skb_append_copy(struct sk_buff *skb, const void *bytes, unsigned int len);
int srnic_skb_linearize(struct sk_buff *skb);
int srnic_skb_pull_linear(struct sk_buff *skb, unsigned int len);
bool srnic_skb_frags_readable(const struct sk_buff *skb);
unsigned char *srnic_skb_network_header(const struct sk_buff *skb);
struct net_device *srnic_skb_dev(const struct sk_buff *skb);
void srnic_skb_leave_receive_path(struct sk_buff *skb);
void srnic_skb_queue_init(struct sk_buff_head *queue);
void srnic_skb_queue_push(struct sk_buff_head *queue, struct sk_buff *skb);
struct sk_buff *srnic_skb_queue_pop(struct sk_buff_head *queue);
u32 srnic_skb_queue_len(const struct sk_buff_head *queue);
void srnic_skb_queue_purge(struct sk_buff_head *queue);
struct dst_entry *srnic_route4(struct net *net, __be32 daddr, __be32 saddr, u8 tos,
				int oif, int *err);
struct dst_entry *srnic_route6(struct net *net, const struct in6_addr *daddr,
			       const struct in6_addr *saddr, u8 tclass, u32 flow_label,
			       int oif, int *err);
bool srnic_dst_current(struct dst_entry *dst);
bool srnic_dst_outlives_namespace(const struct dst_entry *dst);
void srnic_dst_release(struct dst_entry *dst);
int srnic_dst_dev_ifindex(const struct dst_entry *dst);
bool srnic_dst_dev_is_loopback(const struct dst_entry *dst);
bool srnic_dst_dev_gathers(const struct dst_entry *dst);
struct dst_entry *srnic_dst_clone(struct dst_entry *dst);
void srnic_ip4_select_idents(struct net *net, struct iphdr *iph, unsigned int count);
void srnic_skb_chain_datagram(struct sk_buff *head, struct sk_buff *last, struct sk_buff *skb,
			      unsigned int network_len);
void srnic_skb_set_datagram_list(struct sk_buff *head, unsigned int gso_size, unsigned int segs);
int srnic_ip4_xmit(struct net *net, struct sock *sk, struct sk_buff *skb, struct dst_entry *dst);
int srnic_ip6_xmit(struct net *net, struct sock *sk, struct sk_buff *skb, struct dst_entry *dst);
int srnic_netdev_ifindex(const struct net_device *dev);
int srnic_netdev_vlan_id(const struct net_device *dev);

/*
 * Completion vectors: IRQs of a private domain whose software chip raises
 * them on the CPU of their affinity through irq_work.
 */
void srnic_irq_set_soft_chip(unsigned int irq, const struct irq_chip *chip);
void srnic_irq_update_effective_cpu(struct irq_data *data, unsigned int cpu);
int srnic_irq_effective_cpu(unsigned int irq);
const struct cpumask *srnic_irq_effective_affinity(unsigned int irq);
const struct cpumask *srnic_irq_affinity(unsigned int irq);
unsigned int srnic_cpumask_first_online(const struct cpumask *mask);
unsigned int srnic_cpumask_first(const struct cpumask *mask);
unsigned int srnic_nr_cpu_ids(void);
unsigned int srnic_num_online_cpus(void);
const struct cpumask *srnic_cpumask_of(unsigned int cpu);
void srnic_init_csd(call_single_data_t *csd, void (*fn)(void *), void *info);
int srnic_this_cpu(void);
int srnic_raw_this_cpu(void);
void *srnic_task_here(void);
void srnic_preempt_disable(void);
void srnic_preempt_enable(void);
u64 srnic_local_clock(void);
void srnic_init_irq_work_hard(struct irq_work *work, void (*fn)(struct irq_work *));
bool srnic_llist_add(struct llist_node *node, struct llist_head *head);
struct llist_node *srnic_llist_del_all(struct llist_head *head);
struct irq_domain *srnic_irq_domain_create_linear(struct fwnode_handle *fwnode,
						  unsigned int size,
						  const struct irq_domain_ops *ops);
struct fwnode_handle *srnic_irq_domain_alloc_named_fwnode(const char *name);
int srnic_cpuhp_setup_state_multi(const char *name,
				  int (*online)(unsigned int cpu, struct hlist_node *node),
				  int (*offline)(unsigned int cpu, struct hlist_node *node));
void srnic_cpuhp_remove_multi_state(int state);
int srnic_cpuhp_add_instance(int state, struct hlist_node *node);
void srnic_cpuhp_remove_instance(int state, struct hlist_node *node);
static const u32 SRNIC_CPUHP_AP_ONLINE_DYN = CPUHP_AP_ONLINE_DYN;
static const u32 SRNIC_IRQ_SET_MASK_OK = IRQ_SET_MASK_OK;
static const u32 SRNIC_HRTIMER_MODE_REL_HARD = HRTIMER_MODE_REL_HARD;
static const u32 SRNIC_CLOCK_MONOTONIC = CLOCK_MONOTONIC;

/* Driver attributes of an `rdma resource` entry, in their nest. */
struct nlattr *srnic_nla_nest_start_driver(struct sk_buff *msg);
void srnic_nla_nest_end(struct sk_buff *msg, struct nlattr *nest);
void srnic_nla_nest_cancel(struct sk_buff *msg, struct nlattr *nest);

/*
 * srnic's module parameters (drivers/infiniband/sw/srnic/params.c).
 * <module>_param_<name> names parameter accessors alone (no arguments, a
 * READ_ONCE of the parameter): kapi's module_param_reader! calls them
 * without a contract.
 */
unsigned int srnic_param_comp_vectors(void);

/* iblan's module parameters (drivers/infiniband/ulp/iblan/params.c). */
unsigned int iblan_param_lan(void);
unsigned int iblan_param_vendor(void);

/* Mapping offset of an mmap entry. */
u64 srnic_mmap_offset(struct rdma_user_mmap_entry *entry);

/* iblan's Ethernet netdev, NAPI and ethtool (rust/kapi/ether.rs). */
#include "ether_shims.h"

/* Consumer verbs: iblan as a client of the RDMA core (rust/kapi/rdma/consumer.rs). */
#include "consumer_shims.h"

/* iblan's link type: `ip link add ... type iblan` (rust/kapi/rtnl_link.rs). */
#include <net/rtnetlink.h>
#include <net/netlink.h>
#include "../../include/uapi/linux/if_iblan.h"
#include "link_shims.h"

#endif
