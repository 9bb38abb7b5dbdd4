// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA FLUSH and ATOMIC WRITE (IBA 1.5) between two nodes, each side
 * checked. Each node runs
 *
 *   rc_flush DEVICE GID_INDEX ROLE SHARED_DIR
 *
 * with ROLE r (the responder's side) or q (the requester's), where
 * SHARED_DIR is a directory both see (QP numbers, GIDs and keys go
 * through files there).
 *
 * r registers a region with IB_ACCESS_FLUSH_GLOBAL, and with
 * IB_ACCESS_FLUSH_PERSISTENT too where the device lets it (rxe refuses
 * that flag on memory that is not persistent memory; srnic takes it),
 * and a second region with global flush access that re-registration
 * (the REREG_MR command, access only) takes away. q then
 *   - writes 64 KiB unsignalled and FLUSHes that range (global): the
 *     FLUSH completes as IBV_WC_FLUSH (8), and r then finds every byte;
 *   - FLUSHes the whole region (selectivity level MR), and the range
 *     with the persistent placement type if r's region allows it;
 *   - stores eight bytes with ATOMIC WRITE (ibv_wr_atomic_write), which
 *     completes as IBV_WC_ATOMIC_WRITE, and r finds them;
 *   - FLUSHes the region without flush access: IBV_WC_REM_ACCESS_ERR.
 *
 * librxe of rdma-core 44 has no ibv_wr_flush, so q posts each FLUSH by
 * writing an rxe send WQE into the QP's mapped send ring (found in
 * /proc/self/maps by its index mask) and ringing the doorbell, as
 * ibv_wr_flush does in later rdma-core.
 *
 * Prints "ok: ..." lines, or "FAIL: ..." and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

/* IBA 1.5 numbers that rdma-core 44's headers do not have yet (the
 * kernel's enum ib_uverbs_access_flags, ib_uverbs_wr_opcode,
 * ib_uverbs_wc_opcode, ib_placement_type, ib_selectivity_level). */
#define ACCESS_FLUSH_GLOBAL (1 << 8)
#define ACCESS_FLUSH_PERSISTENT (1 << 9)
#define WR_FLUSH 14
#define WC_FLUSH 8
#define FLUSH_GLOBAL 1
#define FLUSH_PERSISTENT 2
#define FLUSH_RANGE 0
#define FLUSH_MR 1

/* The flush view of struct rxe_send_wr's union (uapi rdma_user_rxe.h of
 * Linux 6.2 and later; the installed header predates it). */
struct flush_view {
	uint64_t remote_addr;
	uint32_t length;
	uint32_t rkey;
	uint8_t type;
	uint8_t level;
};
_Static_assert(sizeof(struct flush_view) <= sizeof(((struct rxe_send_wr *)0)->wr),
	       "the flush view fits the WR union");

#define REGION (64 * 1024)
#define SQ_DEPTH 15 /* index mask 15: tells the send ring apart */
#define RQ_DEPTH 7
#define ATOMIC_VALUE 0x1122334455667788ull

struct info {
	uint32_t qpn, psn;
	uint32_t rkey, rkey_noflush;
	uint64_t addr, addr_noflush;
	uint32_t persistent;
	union ibv_gid gid;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_qp_ex *qpx;
static struct rxe_queue_buf *sq;
static unsigned char *buf;
static struct info me, peer;
static char role;
/* Where the two sides meet (set in main). */
static struct rendezvous rdv;

static unsigned char pattern(size_t at)
{
	return (unsigned char)(at * 131 + (at >> 8) * 7 + 1);
}

static struct ibv_wc wait_wc(const char *what)
{
	struct ibv_wc wc;
	double deadline = now() + 60;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			FAIL("%s: poll: %d", what, n);
		if (n == 1)
			return wc;
		if (now() > deadline)
			FAIL("%s: no completion within 60 s", what);
		usleep(1000);
	}
}

/* The send ring of the QP just created: the uverbs mapping whose header
 * has the send queue's index mask. */
static struct rxe_queue_buf *find_send_ring(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	struct rxe_queue_buf *found = NULL;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (strstr(line, "/dev/infiniband/uverbs") && sscanf(line, "%lx-%lx", &a, &b) == 2 &&
		    ((struct rxe_queue_buf *)a)->index_mask == SQ_DEPTH)
			found = (struct rxe_queue_buf *)a;
	}
	if (f)
		fclose(f);
	return found;
}

/* Posts a signalled FLUSH the way librxe's ibv_wr_flush writes it: the
 * flush view of the WR, the range also in iova and dma.length/resid. */
static void post_flush(uint64_t id, uint32_t rkey, uint64_t addr, uint32_t len, uint8_t type,
		       uint8_t level)
{
	uint32_t prod = __atomic_load_n(&sq->producer_index, __ATOMIC_ACQUIRE) & sq->index_mask;
	uint32_t cons = __atomic_load_n(&sq->consumer_index, __ATOMIC_ACQUIRE) & sq->index_mask;

	if (((prod + 1) & sq->index_mask) == cons)
		FAIL("the send ring is full");
	struct rxe_send_wqe *w =
		(struct rxe_send_wqe *)(sq->data + ((size_t)prod << sq->log2_elem_size));
	struct flush_view *f = (struct flush_view *)&w->wr.wr;

	memset(w, 0, sizeof(*w));
	w->wr.wr_id = id;
	w->wr.opcode = WR_FLUSH;
	w->wr.send_flags = IBV_SEND_SIGNALED;
	f->remote_addr = addr;
	f->length = len;
	f->rkey = rkey;
	f->type = type;
	f->level = level;
	w->iova = addr;
	w->dma.length = len;
	w->dma.resid = len;
	__atomic_store_n(&sq->producer_index, (prod + 1) & sq->index_mask, __ATOMIC_RELEASE);
	if (uverbs_doorbell(qp))
		FAIL("doorbell: %s", strerror(errno));
}

static void expect_flush_ok(const char *what)
{
	struct ibv_wc wc = wait_wc(what);

	if (wc.status != IBV_WC_SUCCESS || wc.opcode != WC_FLUSH)
		FAIL("%s: status %s, opcode %d (expected success, IBV_WC_FLUSH = %d)", what,
		     ibv_wc_status_str(wc.status), wc.opcode, WC_FLUSH);
	printf("ok: %s completed as IBV_WC_FLUSH\n", what);
}

static void connect_qp(int gid_index)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    ACCESS_FLUSH_GLOBAL | ACCESS_FLUSH_PERSISTENT };
	struct ibv_port_attr port;

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		FAIL("INIT: %s", strerror(errno));
	if (ibv_query_port(ctx, 1, &port))
		FAIL("query_port: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer.gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me.psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS: %s", strerror(errno));
}

/* The requester's side. */
static void run_q(void)
{
	struct ibv_wc wc;

	for (size_t i = 0; i < REGION / 2; i++)
		buf[i] = pattern(i);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, REGION, IBV_ACCESS_LOCAL_WRITE);

	if (!mr)
		FAIL("reg_mr: %s", strerror(errno));

	/* A WRITE nobody waits for, then a FLUSH of its range: the FLUSH's
	 * completion says the data is placed. */
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = 0;
	ibv_wr_rdma_write(qpx, peer.rkey, peer.addr);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, REGION / 2);
	if (ibv_wr_complete(qpx))
		FAIL("WRITE post: %s", strerror(errno));
	post_flush(2, peer.rkey, peer.addr, REGION / 2, FLUSH_GLOBAL, FLUSH_RANGE);
	expect_flush_ok("unsignalled 32 KiB WRITE, then FLUSH global of its range");
	say_to(&rdv, "flushed", NULL, 0);
	hear_from(&rdv, "checked", NULL, 0);

	post_flush(3, peer.rkey, 0, 0, FLUSH_GLOBAL, FLUSH_MR);
	expect_flush_ok("FLUSH global of the whole region (level MR, no address)");
	if (peer.persistent) {
		post_flush(4, peer.rkey, peer.addr + 4096, 4096, FLUSH_PERSISTENT | FLUSH_GLOBAL,
			   FLUSH_RANGE);
		expect_flush_ok("FLUSH persistent+global of a range");
	} else {
		printf("ok: the peer has no region with IB_ACCESS_FLUSH_PERSISTENT (not pmem)\n");
	}

	/* ATOMIC WRITE through librxe's extended QP verbs. */
	uint64_t value = ATOMIC_VALUE;

	ibv_wr_start(qpx);
	qpx->wr_id = 5;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx, peer.rkey, peer.addr + REGION / 2, &value);
	if (ibv_wr_complete(qpx))
		FAIL("ATOMIC WRITE post: %s", strerror(errno));
	wc = wait_wc("ATOMIC WRITE");
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_ATOMIC_WRITE || wc.wr_id != 5)
		FAIL("ATOMIC WRITE: status %s, opcode %d, wr_id %llu", ibv_wc_status_str(wc.status),
		     wc.opcode, (unsigned long long)wc.wr_id);
	printf("ok: ATOMIC WRITE completed as IBV_WC_ATOMIC_WRITE\n");
	say_to(&rdv, "atomic", NULL, 0);
	hear_from(&rdv, "atomic_checked", NULL, 0);

	/* The region without flush access: a remote access error. */
	post_flush(6, peer.rkey_noflush, peer.addr_noflush, 64, FLUSH_GLOBAL, FLUSH_RANGE);
	wc = wait_wc("FLUSH without access");
	if (wc.status != IBV_WC_REM_ACCESS_ERR || wc.wr_id != 6)
		FAIL("FLUSH of a region without flush access: status %s (wr_id %llu), expected "
		     "remote access error", ibv_wc_status_str(wc.status),
		     (unsigned long long)wc.wr_id);
	printf("ok: FLUSH of a region without flush access failed with %s\n",
	       ibv_wc_status_str(wc.status));
	say_to(&rdv, "finished", NULL, 0);
}

/* The responder's side: check what arrives. */
static void run_r(void)
{
	hear_from(&rdv, "flushed", NULL, 0);
	for (size_t i = 0; i < REGION / 2; i++)
		if (buf[i] != pattern(i))
			FAIL("after the FLUSH, byte %zu is %#x, expected %#x", i, buf[i], pattern(i));
	printf("ok: every byte of the WRITE was placed when its FLUSH completed\n");
	say_to(&rdv, "checked", NULL, 0);
	hear_from(&rdv, "atomic", NULL, 0);
	uint64_t got = __atomic_load_n((uint64_t *)(buf + REGION / 2), __ATOMIC_ACQUIRE);

	if (got != ATOMIC_VALUE)
		FAIL("the ATOMIC WRITE target holds %#llx, expected %#llx",
		     (unsigned long long)got, ATOMIC_VALUE);
	printf("ok: the ATOMIC WRITE target holds %#llx\n", (unsigned long long)got);
	say_to(&rdv, "atomic_checked", NULL, 0);
	hear_from(&rdv, "finished", NULL, 0);
}

int main(int argc, char **argv)
{
	if (argc != 5)
		FAIL("usage: %s DEVICE GID_INDEX r|q SHARED_DIR", argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int gid_index = atoi(argv[2]);
	role = argv[3][0];
	rdv = (struct rendezvous){
		.dir = argv[4],
		.prog = "rc_flush",
		.me = role,
		.other = role == 'r' ? 'q' : 'r',
		.wait_s = 120,
	};
	struct ibv_device **list = ibv_get_device_list(NULL);

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		FAIL("cannot open %s", argv[1]);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	buf = aligned_alloc(4096, 2 * REGION);
	if (!pd || !cq || !buf)
		FAIL("setup: %s", strerror(errno));
	memset(buf, 0, 2 * REGION);
	if (role == 'r') {
		int base = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, REGION,
					       base | ACCESS_FLUSH_GLOBAL | ACCESS_FLUSH_PERSISTENT);

		me.persistent = mr != NULL;
		if (!mr) {
			printf("ok: %s refuses IB_ACCESS_FLUSH_PERSISTENT here (%s)\n", argv[1],
			       strerror(errno));
			mr = ibv_reg_mr(pd, buf, REGION, base | ACCESS_FLUSH_GLOBAL);
		}
		/* The second region loses its flush access by re-registration. */
		struct ibv_mr *noflush = ibv_reg_mr(pd, buf + REGION, REGION,
						    base | ACCESS_FLUSH_GLOBAL);

		if (!mr || !noflush)
			FAIL("reg_mr: %s", strerror(errno));
		int err = uverbs_rereg_mr(noflush, IBV_REREG_MR_CHANGE_ACCESS, NULL, 0, base);

		if (err)
			FAIL("rereg_mr without flush access: %s", strerror(err));
		printf("ok: regions registered with flush access (%s) and without\n",
		       me.persistent ? "global, persistent" : "global");
		me.rkey = mr->rkey;
		me.addr = (uintptr_t)buf;
		me.rkey_noflush = noflush->rkey;
		me.addr_noflush = (uintptr_t)buf + REGION;
	}
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = RQ_DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE,
	};
	qp = ibv_create_qp_ex(ctx, &qa);
	if (!qp)
		FAIL("create_qp_ex: %s", strerror(errno));
	qpx = ibv_qp_to_qp_ex(qp);
	sq = find_send_ring();
	if (!qpx || !sq)
		FAIL("cannot find the send ring of the QP (index mask %d)", SQ_DEPTH);
	if (ibv_query_gid(ctx, 1, gid_index, &me.gid))
		FAIL("query_gid: %s", strerror(errno));
	me.qpn = qp->qp_num;
	me.psn = role == 'r' ? 0x222222 : 0xfffffe; /* q's PSNs wrap */
	say_to(&rdv, "info", &me, sizeof(me));
	hear_from(&rdv, "info", &peer, sizeof(peer));
	connect_qp(gid_index);
	say_to(&rdv, "connected", NULL, 0);
	hear_from(&rdv, "connected", NULL, 0);
	if (role == 'q')
		run_q();
	else
		run_r();
	return 0;
}
