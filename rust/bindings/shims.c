// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line versions of the static inlines and macros that the Rust code
 * needs. Each is a one-line wrapper; all logic lives in Rust.
 */
#include "srnic_helper.h"

/* Pinned pages are reached through page_address(): no highmem. */
#ifdef CONFIG_HIGHMEM
#error "srnic needs a kernel without CONFIG_HIGHMEM (a 64-bit kernel)"
#endif

struct ib_device *srnic_ib_alloc_device(size_t size)
{
	return _ib_alloc_device(size);
}

bool srnic_ib_device_try_get(struct ib_device *ibdev)
{
	return ib_device_try_get(ibdev);
}

struct net_device *srnic_netdev_notifier_info_to_dev(void *info)
{
	return netdev_notifier_info_to_dev(info);
}

bool srnic_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

bool srnic_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

bool srnic_netdev_is_registered(const struct net_device *dev)
{
	return READ_ONCE(dev->reg_state) == NETREG_REGISTERED;
}

struct net *srnic_netdev_net(const struct net_device *dev)
{
	return dev_net(dev);
}

/* Under rcu_read_lock(): the namespace stays until the section ends. */
struct net *srnic_netdev_net_rcu(const struct net_device *dev)
{
	return dev_net_rcu(dev);
}

/* A counted reference, or NULL if the namespace is being dismantled. */
struct net *srnic_maybe_get_net(struct net *net)
{
	return maybe_get_net(net);
}

void srnic_put_net(struct net *net)
{
	put_net(net);
}

void srnic_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

void srnic_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

/* A reference on the struct device that keeps the ib_device's memory alive. */
void srnic_ib_device_get(struct ib_device *ibdev)
{
	get_device(&ibdev->dev);
}

void srnic_ib_device_put_ref(struct ib_device *ibdev)
{
	put_device(&ibdev->dev);
}

/* Another registration reference, for a holder of one (never from zero). */
void srnic_ib_device_get_again(struct ib_device *ibdev)
{
	refcount_inc(&ibdev->refcount);
}

/* The kernel-wide printk rate limit, for messages user space can trigger. */
bool srnic_printk_ratelimit(void)
{
	return printk_ratelimit();
}

unsigned long srnic_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void srnic_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

void srnic_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void srnic_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

struct ib_udata *srnic_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *srnic_udata_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

int srnic_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return copy_to_user(udata->outbuf, src, len) ? -EFAULT : 0;
}

int srnic_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

unsigned long srnic_copy_to_user(u64 dst, const void *src, unsigned long len)
{
	return copy_to_user(u64_to_user_ptr(dst), src, len);
}

void srnic_rcu_read_lock(void)
{
	rcu_read_lock();
}

void srnic_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

void srnic_xa_init_alloc_irq(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
}

int srnic_xa_insert(struct xarray *xa, unsigned long index, void *entry)
{
	return xa_insert_irq(xa, index, entry, GFP_KERNEL);
}

int srnic_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry, u32 min,
			  u32 max, u32 *next)
{
	return xa_alloc_cyclic_irq(xa, id, entry, XA_LIMIT(min, max), next,
				   GFP_KERNEL);
}

void *srnic_xa_erase(struct xarray *xa, unsigned long index)
{
	return xa_erase_irq(xa, index);
}

unsigned long srnic_xa_lock_irqsave(struct xarray *xa)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	return flags;
}

void srnic_xa_unlock_irqrestore(struct xarray *xa, unsigned long flags)
{
	xa_unlock_irqrestore(xa, flags);
}

struct page *srnic_sg_page(struct scatterlist *sg)
{
	return sg_page(sg);
}

struct page *srnic_nth_page(struct page *page, unsigned long n)
{
	return nth_page(page, n);
}

void *srnic_page_address(struct page *page)
{
	return page_address(page);
}

/*
 * Atomics on eight aligned bytes that other parties (user space, other
 * CPUs' copies) may access at the same time: marked accesses in the
 * kernel's memory model, as RDMA atomics on registered memory need.
 */
u64 srnic_shared_cmpxchg64(u64 *word, u64 expected, u64 desired)
{
	return cmpxchg64(word, expected, desired);
}

u64 srnic_shared_fetch_add64(u64 *word, u64 addend)
{
	u64 seen = READ_ONCE(*word);
	u64 prior;

	for (;;) {
		prior = cmpxchg64(word, seen, seen + addend);
		if (prior == seen)
			return prior;
		seen = prior;
	}
}

void srnic_shared_store64(u64 *word, u64 value)
{
	smp_store_release(word, value);
}

/*
 * Per-CPU counter arrays, handed to Rust as plain pointers (bindgen has no
 * __percpu); only these shims dereference them.
 */
u64 *srnic_percpu_counters_alloc(unsigned int count)
{
	return (u64 __force *)__alloc_percpu(count * sizeof(u64), sizeof(u64));
}

void srnic_percpu_counters_free(u64 *counters)
{
	free_percpu((u64 __percpu __force *)counters);
}

void srnic_percpu_counter_add(u64 *counters, unsigned int index, u64 value)
{
	this_cpu_add(((u64 __percpu __force *)counters)[index], value);
}

u64 srnic_percpu_counter_sum(u64 *counters, unsigned int index)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu_ptr((u64 __percpu __force *)counters, cpu)[index];
	return sum;
}

/* A struct percpu_counter on the heap: its init is a macro. */
struct percpu_counter *srnic_approximate_count_new(void)
{
	struct percpu_counter *count = kzalloc(sizeof(*count), GFP_KERNEL);

	if (count && percpu_counter_init(count, 0, GFP_KERNEL)) {
		kfree(count);
		count = NULL;
	}
	return count;
}

void srnic_approximate_count_free(struct percpu_counter *count)
{
	percpu_counter_destroy(count);
	kfree(count);
}

void srnic_approximate_count_add(struct percpu_counter *count, s64 amount, s32 batch)
{
	percpu_counter_add_batch(count, amount, batch);
}

s64 srnic_approximate_count_read(struct percpu_counter *count)
{
	return percpu_counter_read(count);
}

struct scatterlist *srnic_umem_sgl(struct ib_umem *umem, unsigned int *nents)
{
	*nents = umem->sgt_append.sgt.nents;
	return umem->sgt_append.sgt.sgl;
}

bool srnic_uses_virt_dma(struct ib_device *dev)
{
	return ib_uses_virt_dma(dev);
}

struct mm_struct *srnic_mmgrab_current(void)
{
	struct mm_struct *mm = current->mm;

	if (mm)
		mmgrab(mm);
	return mm;
}

void srnic_mmdrop(struct mm_struct *mm)
{
	mmdrop(mm);
}

/* Whether [start, end) of a grabbed address space overlaps a mapping;
 * false once its process has exited. May sleep. */
bool srnic_mm_maps_range(struct mm_struct *mm, unsigned long start, unsigned long end)
{
	bool mapped;

	if (!mmget_not_zero(mm))
		return false;
	mmap_read_lock(mm);
	mapped = find_vma_intersection(mm, start, end) != NULL;
	mmap_read_unlock(mm);
	mmput(mm);
	return mapped;
}

struct ib_umem_odp *srnic_odp_of_notifier(struct mmu_interval_notifier *mni)
{
	return container_of(mni, struct ib_umem_odp, notifier);
}

void srnic_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

bool srnic_odp_trylock(struct ib_umem_odp *odp)
{
	return mutex_trylock(&odp->umem_mutex);
}

void srnic_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

void srnic_odp_set_owner(struct ib_umem_odp *odp, void *owner)
{
	mutex_lock(&odp->umem_mutex);
	odp->private = owner;
	mutex_unlock(&odp->umem_mutex);
}

void *srnic_odp_owner(struct ib_umem_odp *odp)
{
	lockdep_assert_held(&odp->umem_mutex);
	return odp->private;
}

void srnic_odp_bounds(struct ib_umem_odp *odp, u64 *start, u64 *end, u32 *page_shift)
{
	*start = ib_umem_start(odp);
	*end = ib_umem_end(odp);
	*page_shift = odp->page_shift;
}

u64 srnic_odp_dma_entry(struct ib_umem_odp *odp, u64 index)
{
	return READ_ONCE(odp->dma_list[index]);
}

void srnic_odp_set_seq(struct mmu_interval_notifier *mni, unsigned long seq)
{
	mmu_interval_set_seq(mni, seq);
}

bool srnic_mmu_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

void srnic_mmu_range_bounds(const struct mmu_notifier_range *range, u64 *start, u64 *end)
{
	*start = range->start;
	*end = range->end;
}

void srnic_cq_comp_handler(struct ib_cq *cq)
{
	if (cq->comp_handler)
		cq->comp_handler(cq, cq->cq_context);
}

void srnic_cq_event(struct ib_cq *cq, enum ib_event_type type)
{
	struct ib_event event = {
		.device = cq->device,
		.event = type,
		.element.cq = cq,
	};

	if (cq->event_handler)
		cq->event_handler(&event, cq->cq_context);
}

void srnic_qp_event(struct ib_qp *qp, enum ib_event_type type)
{
	struct ib_event event = {
		.device = qp->device,
		.event = type,
		.element.qp = qp,
	};

	if (qp->event_handler)
		qp->event_handler(&event, qp->qp_context);
}

void srnic_srq_event(struct ib_srq *srq, enum ib_event_type type)
{
	struct ib_event event = {
		.device = srq->device,
		.event = type,
		.element.srq = srq,
	};

	if (srq->event_handler)
		srq->event_handler(&event, srq->srq_context);
}

u64 srnic_mmap_offset(struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

struct scatterlist *srnic_sg_next(struct scatterlist *sg)
{
	return sg_next(sg);
}

void *srnic_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

void srnic_init_delayed_work(struct delayed_work *dwork, work_func_t fn)
{
	INIT_DELAYED_WORK(dwork, fn);
}

bool srnic_schedule_delayed_work(struct delayed_work *dwork, unsigned int msecs)
{
	return schedule_delayed_work(dwork, msecs_to_jiffies(msecs));
}

struct delayed_work *srnic_to_delayed_work(struct work_struct *work)
{
	return to_delayed_work(work);
}

/* Which CPU takes a QP's work is decided in Rust (pure/placement.rs);
 * these queue it there. cpu is a CPU number or WORK_CPU_UNBOUND. */
void srnic_mod_delayed_work_on(int cpu, struct delayed_work *dwork)
{
	mod_delayed_work_on(cpu, system_wq, dwork, 0);
}

bool srnic_queue_delayed_work_on(int cpu, struct delayed_work *dwork, unsigned int msecs)
{
	return queue_delayed_work_on(cpu, system_wq, dwork, msecs_to_jiffies(msecs));
}

bool srnic_queue_highpri_work_on(int cpu, struct work_struct *work)
{
	return queue_work_on(cpu, system_highpri_wq, work);
}

int srnic_work_cpu_unbound(void)
{
	return WORK_CPU_UNBOUND;
}

bool srnic_cpu_online(unsigned int cpu)
{
	return cpu < nr_cpu_ids && cpu_online(cpu);
}

/* The first online CPU after @cpu, nr_cpu_ids or above if none. */
unsigned int srnic_next_online_cpu_after(unsigned int cpu)
{
	if (cpu >= nr_cpu_ids)
		return nr_cpu_ids;
	return cpumask_next(cpu, cpu_online_mask);
}

unsigned int srnic_first_online_cpu(void)
{
	return cpumask_first(cpu_online_mask);
}

/* A process's own context: task context, and not a workqueue worker. */
bool srnic_in_process(void)
{
	return in_task() && !(current->flags & PF_WQ_WORKER);
}

/* QP works running on each CPU, so that a process about to hand a copy
 * over can see whether the CPU it would go to is copying already. */
static DEFINE_PER_CPU(atomic_t, srnic_qp_works_running);

int srnic_qp_work_enter(void)
{
	int cpu = raw_smp_processor_id();

	atomic_inc(per_cpu_ptr(&srnic_qp_works_running, cpu));
	return cpu;
}

void srnic_qp_work_exit(int cpu)
{
	atomic_dec(per_cpu_ptr(&srnic_qp_works_running, cpu));
}

int srnic_qp_works_running_on(unsigned int cpu)
{
	if (cpu >= nr_cpu_ids || !cpu_possible(cpu))
		return 0;
	return atomic_read(per_cpu_ptr(&srnic_qp_works_running, cpu));
}

void srnic_init_work(struct work_struct *work, work_func_t fn)
{
	INIT_WORK(work, fn);
}

void srnic_cancel_work_sync(struct work_struct *work)
{
	cancel_work_sync(work);
}

bool srnic_irqs_disabled(void)
{
	return irqs_disabled();
}

bool srnic_in_softirq(void)
{
	return in_softirq();
}

unsigned long srnic_local_irq_save(void)
{
	unsigned long flags;

	local_irq_save(flags);
	return flags;
}

void srnic_local_irq_restore(unsigned long flags)
{
	local_irq_restore(flags);
}

void srnic_cpu_relax(void)
{
	cpu_relax();
}

void srnic_cond_resched(void)
{
	cond_resched();
}

/* The first entry at or after *index (first) or after it; NULL at the end. */
void *srnic_xa_next(struct xarray *xa, unsigned long *index, bool first)
{
	if (first)
		return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
	return xa_find_after(xa, index, ULONG_MAX, XA_PRESENT);
}

struct socket *srnic_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
				     int (*rcv)(struct sock *sk, struct sk_buff *skb),
				     void *user_data, int *err)
{
	struct udp_port_cfg port_cfg = {
		.family = ipv6 ? AF_INET6 : AF_INET,
		.local_udp_port = htons(port),
		/* The IPv4 socket takes IPv4; this one only IPv6. */
		.ipv6_v6only = ipv6,
	};
	struct udp_tunnel_sock_cfg tunnel_cfg = {
		.sk_user_data = user_data,
		.encap_type = 1,
		.encap_rcv = rcv,
	};
	struct socket *sock;

	*err = udp_sock_create(net, &port_cfg, &sock);
	if (*err)
		return NULL;
	setup_udp_tunnel_sock(net, sock, &tunnel_cfg);
	return sock;
}

void *srnic_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

void srnic_udp_tunnel_close(struct socket *sock)
{
	udp_tunnel_sock_release(sock);
}

struct net *srnic_init_net(void)
{
	return &init_net;
}

int srnic_register_pernet(struct pernet_operations *ops)
{
	return register_pernet_subsys(ops);
}

void srnic_unregister_pernet(struct pernet_operations *ops)
{
	unregister_pernet_subsys(ops);
}

struct sk_buff *srnic_alloc_skb(unsigned int headroom, unsigned int len)
{
	struct sk_buff *skb = alloc_skb(headroom + len, GFP_ATOMIC);

	if (skb)
		skb_reserve(skb, headroom);
	return skb;
}

int srnic_skb_append_page_bytes(struct sk_buff *skb, const void *addr, unsigned int len)
{
	struct page *page;
	unsigned int offset = offset_in_page(addr);

	if (!virt_addr_valid(addr) || offset + len > PAGE_SIZE)
		return -EINVAL;
	page = virt_to_page(addr);
	/* The skb must be able to hold a plain reference on it. */
	if (!sendpage_ok(page))
		return -EINVAL;
	if (skb_shinfo(skb)->nr_frags >= MAX_SKB_FRAGS)
		return -EMSGSIZE;
	get_page(page);
	skb_fill_page_desc(skb, skb_shinfo(skb)->nr_frags, page, offset, len);
	/* The page is a registration's, pinned perhaps read-only (a file's
	 * page cache): whatever would change the packet in place (ESP's
	 * decryption, say, where the receiving namespace has an xfrm state for
	 * it) must copy it first, as for the kernel's own zero-copy sends. */
	skb_shinfo(skb)->flags |= SKBFL_SHARED_FRAG;
	skb->len += len;
	skb->data_len += len;
	skb->truesize += len;
	return 0;
}

int srnic_skb_append_copy(struct sk_buff *skb, const void *bytes, unsigned int len)
{
	struct page *page;
	void *piece;

	if (len > PAGE_SIZE)
		return -EINVAL;
	if (skb_shinfo(skb)->nr_frags >= MAX_SKB_FRAGS)
		return -EMSGSIZE;
	piece = netdev_alloc_frag(len);
	if (!piece)
		return -ENOMEM;
	memcpy(piece, bytes, len);
	page = virt_to_head_page(piece);
	/* The piece's reference passes to the skb. */
	skb_add_rx_frag(skb, skb_shinfo(skb)->nr_frags, page,
			piece - page_address(page), len, len);
	return 0;
}

unsigned int srnic_skb_nr_frags(const struct sk_buff *skb)
{
	return skb_shinfo(skb)->nr_frags;
}

bool srnic_skb_frags_full(const struct sk_buff *skb)
{
	return skb_shinfo(skb)->nr_frags >= MAX_SKB_FRAGS;
}

/* Gives @page, with its one reference, to @skb as its next fragment:
 * @len bytes at @offset, the whole page charged to the skb's truesize
 * (the skb frees it). -EINVAL or -EMSGSIZE if it cannot: the page is
 * then still the caller's. */
int srnic_skb_give_page(struct sk_buff *skb, struct page *page, unsigned int offset,
			unsigned int len)
{
	if (offset > PAGE_SIZE || len > PAGE_SIZE - offset)
		return -EINVAL;
	if (skb_shinfo(skb)->nr_frags >= MAX_SKB_FRAGS)
		return -EMSGSIZE;
	skb_add_rx_frag(skb, skb_shinfo(skb)->nr_frags, page, offset, len, PAGE_SIZE);
	return 0;
}

/* The kernel address of page fragment @i of @skb and its length, or NULL
 * if @i is past the last or its page has no kernel mapping (highmem). */
const void *srnic_skb_frag(const struct sk_buff *skb, unsigned int i, unsigned int *len)
{
	const skb_frag_t *frag;

	if (i >= skb_shinfo(skb)->nr_frags)
		return NULL;
	frag = &skb_shinfo(skb)->frags[i];
	*len = skb_frag_size(frag);
	return skb_frag_address_safe(frag);
}

/* The crypto API's "crc32" (IEEE 802.3, reflected): its fastest driver
 * (crc32-pclmul where the CPU has carry-less multiply). NULL if there is
 * none, or if its state is not the bare 32-bit register that
 * srnic_crc32_update() moves in and out of it. */
struct crypto_shash *srnic_crc32_engine_alloc(void)
{
	struct crypto_shash *tfm = crypto_alloc_shash("crc32", 0, 0);

	if (IS_ERR(tfm))
		return NULL;
	if (crypto_shash_descsize(tfm) != sizeof(u32) ||
	    crypto_shash_statesize(tfm) != sizeof(u32)) {
		crypto_free_shash(tfm);
		return NULL;
	}
	return tfm;
}

void srnic_crc32_engine_free(struct crypto_shash *tfm)
{
	crypto_free_shash(tfm);
}

const char *srnic_crc32_engine_driver(struct crypto_shash *tfm)
{
	return crypto_shash_driver_name(tfm);
}

#define SRNIC_CRC32_ENGINE_MIN 256

/* Advances the CRC-32 register @crc (not inverted, as crc32_le() keeps
 * it) over @len bytes at @bytes: with @tfm if there is one (its state is
 * that register: imported, updated, exported), else with crc32_le().
 * The bytes may be memory that others write meanwhile (user pages): they
 * are read with plain loads, and a racing write only makes the CRC one of
 * old and new values, which the peer's check then refuses. */
u32 srnic_crc32_update(struct crypto_shash *tfm, u32 crc, const void *bytes, size_t len)
{
	/* Short runs (headers, small payloads) skip the crypto API's calls:
	 * its drivers fold only longer ones, and crc32_le() is what they
	 * would run. */
	if (tfm && len >= SRNIC_CRC32_ENGINE_MIN) {
		SHASH_DESC_ON_STACK(desc, tfm);
		u32 out = crc;

		desc->tfm = tfm;
		if (!crypto_shash_import(desc, &crc) &&
		    !crypto_shash_update(desc, bytes, len) &&
		    !crypto_shash_export(desc, &out))
			return out;
	}
	return crc32_le(crc, bytes, len);
}

void srnic_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

int srnic_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

/* Makes the first @len bytes of @skb's data linear: -EINVAL if it has
 * fewer, -ENOMEM if its head could not take them. */
int srnic_skb_pull_linear(struct sk_buff *skb, unsigned int len)
{
	if (len > skb->len)
		return -EINVAL;
	return pskb_may_pull(skb, len) ? 0 : -ENOMEM;
}

/* Whether the data beyond @skb's linear part is all in its page fragments
 * and the CPU may read them: no list of further skbs (IP reassembly, GRO
 * lists), no device memory (devmem TCP). */
bool srnic_skb_frags_readable(const struct sk_buff *skb)
{
	return !skb_has_frag_list(skb) && skb_frags_readable(skb);
}

unsigned char *srnic_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

struct net_device *srnic_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

/*
 * Readies a received skb to be kept past the receive callback: the route
 * it holds may be one taken without a reference (valid only in the
 * receive's RCU section), and its device may go while it waits.
 */
void srnic_skb_leave_receive_path(struct sk_buff *skb)
{
	skb_dst_drop(skb);
	skb_orphan(skb);
	skb->dev = NULL;
}

void srnic_skb_queue_init(struct sk_buff_head *queue)
{
	skb_queue_head_init(queue);
}

void srnic_skb_queue_push(struct sk_buff_head *queue, struct sk_buff *skb)
{
	skb_queue_tail(queue, skb);
}

struct sk_buff *srnic_skb_queue_pop(struct sk_buff_head *queue)
{
	return skb_dequeue(queue);
}

u32 srnic_skb_queue_len(const struct sk_buff_head *queue)
{
	return skb_queue_len_lockless(queue);
}

void srnic_skb_queue_purge(struct sk_buff_head *queue)
{
	skb_queue_purge(queue);
}

struct dst_entry *srnic_route4(struct net *net, __be32 daddr, __be32 saddr, u8 tos,
				int oif, int *err)
{
	struct flowi4 fl = {
		.flowi4_oif = oif,
		.flowi4_tos = tos & INET_DSCP_MASK,
		.flowi4_proto = IPPROTO_UDP,
		.daddr = daddr,
		.saddr = saddr,
	};
	struct rtable *rt = ip_route_output_key(net, &fl);

	if (IS_ERR(rt)) {
		*err = PTR_ERR(rt);
		return NULL;
	}
	return &rt->dst;
}

struct dst_entry *srnic_route6(struct net *net, const struct in6_addr *daddr,
			       const struct in6_addr *saddr, u8 tclass, u32 flow_label,
			       int oif, int *err)
{
	struct flowi6 fl = {
		.flowi6_oif = oif,
		.flowi6_proto = IPPROTO_UDP,
		.daddr = *daddr,
		.saddr = *saddr,
		.flowlabel = ip6_make_flowinfo(tclass, htonl(flow_label & 0xfffff)),
	};
	struct dst_entry *dst = ip6_dst_lookup_flow(net, NULL, &fl, NULL);

	if (IS_ERR(dst)) {
		*err = PTR_ERR(dst);
		return NULL;
	}
	return dst;
}

/* Whether an IPv4 route looked up earlier still holds: no route change in
 * its namespace since, and its device not gone. Takes and drops no
 * reference. (An IPv6 route would need the cookie ip6_dst_store() keeps.) */
bool srnic_dst_current(struct dst_entry *dst)
{
	return dst_check(dst, 0) == dst;
}

/* Whether a route may be kept past its namespace's exit: a plain IPv4
 * route, whose dst_ops are global (a device that goes moves it to the
 * blackhole device). IPv6 routes and IPsec bundles have per-namespace
 * dst_ops, which the namespace's exit frees before a QP that kept one
 * would give it back. */
bool srnic_dst_outlives_namespace(const struct dst_entry *dst)
{
	return dst->ops->family == AF_INET && !dst_xfrm(dst);
}

void srnic_dst_release(struct dst_entry *dst)
{
	dst_release(dst);
}

int srnic_dst_dev_ifindex(const struct dst_entry *dst)
{
	return dst->dev ? dst->dev->ifindex : 0;
}

bool srnic_dst_dev_is_loopback(const struct dst_entry *dst)
{
	return dst->dev && (dst->dev->flags & IFF_LOOPBACK);
}

/* Whether the device a route leaves through takes an skb's page fragments
 * as they are (NETIF_F_SG); before one that does not, the stack copies
 * every fragmented skb into a linear one. */
bool srnic_dst_dev_gathers(const struct dst_entry *dst)
{
	return dst->dev && (READ_ONCE(dst->dev->features) & NETIF_F_SG);
}

struct dst_entry *srnic_dst_clone(struct dst_entry *dst)
{
	return dst_clone(dst);
}

void srnic_ip4_select_idents(struct net *net, struct iphdr *iph, unsigned int count)
{
	__ip_select_ident(net, iph, count);
}

/* Chains @skb, a complete IP packet of @network_len header bytes followed
 * by a UDP header, to the fragment list of @head after @last (NULL: as the
 * first), the way GRO's list aggregation leaves its packets: data at the
 * UDP payload, headers in front of it. */
void srnic_skb_chain_datagram(struct sk_buff *head, struct sk_buff *last, struct sk_buff *skb,
			      unsigned int network_len)
{
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, network_len);
	__skb_pull(skb, network_len + sizeof(struct udphdr));
	skb->next = NULL;
	if (last)
		last->next = skb;
	else
		skb_shinfo(head)->frag_list = skb;
	head->len += skb->len;
	head->data_len += skb->len;
	head->truesize += skb->truesize;
}

/* Marks @head, which carries @segs - 1 datagrams on its fragment list, as
 * a UDP GSO list of @segs: its own UDP payload is @gso_size bytes. */
void srnic_skb_set_datagram_list(struct sk_buff *head, unsigned int gso_size, unsigned int segs)
{
	struct skb_shared_info *shinfo = skb_shinfo(head);

	shinfo->gso_size = gso_size;
	shinfo->gso_segs = segs;
	shinfo->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
}

/* Sends an skb whose data starts with a complete IPv4 header; takes the
 * route's reference. */
int srnic_ip4_xmit(struct net *net, struct sock *sk, struct sk_buff *skb, struct dst_entry *dst)
{
	int ret;

	skb_reset_network_header(skb);
	skb_set_transport_header(skb, sizeof(struct iphdr));
	skb->protocol = htons(ETH_P_IP);
	skb->ignore_df = 1;
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	skb_dst_set(skb, dst);
	ret = ip_local_out(net, sk, skb);
	/* Congestion notification is not a drop (the macro evaluates its
	 * argument twice: never call it on the send itself). */
	return net_xmit_eval(ret);
}

/* The same for an skb whose data starts with a complete IPv6 header. */
int srnic_ip6_xmit(struct net *net, struct sock *sk, struct sk_buff *skb, struct dst_entry *dst)
{
	int ret;

	skb_reset_network_header(skb);
	skb_set_transport_header(skb, sizeof(struct ipv6hdr));
	skb->protocol = htons(ETH_P_IPV6);
	skb->ignore_df = 1;
	memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
	skb_dst_set(skb, dst);
	ret = ip6_local_out(net, sk, skb);
	return net_xmit_eval(ret);
}

int srnic_netdev_ifindex(const struct net_device *dev)
{
	return dev->ifindex;
}

/* The VLAN id of an 802.1Q interface, -1 for any other. */
int srnic_netdev_vlan_id(const struct net_device *dev)
{
	return is_vlan_dev(dev) ? vlan_dev_vlan_id(dev) : -1;
}

void srnic_irq_set_soft_chip(unsigned int irq, const struct irq_chip *chip)
{
	irq_set_chip_and_handler(irq, chip, handle_edge_irq);
	/* Nothing to reprogram: a move takes effect at the next raise. */
	irq_set_status_flags(irq, IRQ_MOVE_PCNTXT);
}

void srnic_irq_update_effective_cpu(struct irq_data *data, unsigned int cpu)
{
	irq_data_update_effective_affinity(data, cpumask_of(cpu));
}

int srnic_irq_effective_cpu(unsigned int irq)
{
	return cpumask_first(irq_get_effective_affinity_mask(irq));
}

const struct cpumask *srnic_irq_effective_affinity(unsigned int irq)
{
	return irq_get_effective_affinity_mask(irq);
}

const struct cpumask *srnic_irq_affinity(unsigned int irq)
{
	return irq_get_affinity_mask(irq);
}

unsigned int srnic_cpumask_first_online(const struct cpumask *mask)
{
	return cpumask_first_and(mask, cpu_online_mask);
}

unsigned int srnic_cpumask_first(const struct cpumask *mask)
{
	return cpumask_first(mask);
}

unsigned int srnic_nr_cpu_ids(void)
{
	return nr_cpu_ids;
}

unsigned int srnic_num_online_cpus(void)
{
	return num_online_cpus();
}

const struct cpumask *srnic_cpumask_of(unsigned int cpu)
{
	return cpumask_of(cpu);
}

void srnic_init_csd(call_single_data_t *csd, void (*fn)(void *), void *info)
{
	INIT_CSD(csd, fn, info);
}

int srnic_this_cpu(void)
{
	return smp_processor_id();
}

/* This CPU's number, which may be stale at once: for hints and for slots
 * whose owner checks itself. */
int srnic_raw_this_cpu(void)
{
	return raw_smp_processor_id();
}

/* The running task, or NULL when not in task context (an interrupt's
 * `current` is the task it interrupted). */
void *srnic_task_here(void)
{
	return in_task() ? current : NULL;
}

void srnic_preempt_disable(void)
{
	preempt_disable();
}

void srnic_preempt_enable(void)
{
	preempt_enable();
}

u64 srnic_local_clock(void)
{
	return local_clock();
}

void srnic_init_irq_work_hard(struct irq_work *work, void (*fn)(struct irq_work *))
{
	*work = IRQ_WORK_INIT_HARD(fn);
}

bool srnic_llist_add(struct llist_node *node, struct llist_head *head)
{
	return llist_add(node, head);
}

struct llist_node *srnic_llist_del_all(struct llist_head *head)
{
	return llist_del_all(head);
}

struct irq_domain *srnic_irq_domain_create_linear(struct fwnode_handle *fwnode,
						  unsigned int size,
						  const struct irq_domain_ops *ops)
{
	return irq_domain_create_linear(fwnode, size, ops, NULL);
}

struct fwnode_handle *srnic_irq_domain_alloc_named_fwnode(const char *name)
{
	return irq_domain_alloc_named_fwnode(name);
}

int srnic_cpuhp_setup_state_multi(const char *name,
				  int (*online)(unsigned int cpu, struct hlist_node *node),
				  int (*offline)(unsigned int cpu, struct hlist_node *node))
{
	return cpuhp_setup_state_multi(CPUHP_AP_ONLINE_DYN, name, online, offline);
}

void srnic_cpuhp_remove_multi_state(int state)
{
	cpuhp_remove_multi_state(state);
}

int srnic_cpuhp_add_instance(int state, struct hlist_node *node)
{
	return cpuhp_state_add_instance_nocalls(state, node);
}

void srnic_cpuhp_remove_instance(int state, struct hlist_node *node)
{
	cpuhp_state_remove_instance_nocalls(state, node);
}

struct nlattr *srnic_nla_nest_start_driver(struct sk_buff *msg)
{
	return nla_nest_start_noflag(msg, RDMA_NLDEV_ATTR_DRIVER);
}

void srnic_nla_nest_end(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_end(msg, nest);
}

void srnic_nla_nest_cancel(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_cancel(msg, nest);
}

/*
 * Modules by name (rust/kapi/rdma/shared_id.rs): find_module() is not
 * exported, but sysfs's "module" kset, which our own module's kobject
 * belongs to, lists every module. The kobject comes with a reference.
 */
struct kobject *srnic_module_kobject_find(const char *name)
{
	return kset_find_obj(THIS_MODULE->mkobj.kobj.kset, name);
}

/* The module of a "module" kset entry; NULL for a built-in module. */
struct module *srnic_module_of_kobject(struct kobject *kobj)
{
	return container_of(kobj, struct module_kobject, kobj)->mod;
}

/* A module's state, which loading and unloading change concurrently. */
int srnic_module_state(const struct module *mod)
{
	return READ_ONCE(mod->state);
}

bool srnic_module_name_is(const struct module *mod, const char *name)
{
	return !strcmp(mod->name, name);
}

void srnic_wmb(void)
{
	wmb();
}
