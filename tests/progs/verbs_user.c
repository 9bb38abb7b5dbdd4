// SPDX-License-Identifier: GPL-2.0
/*
 * User-space checks of srnic's verbs objects through the stock librxe:
 *
 *   verbs_user DEV limits    device limits are enforced with the right errno
 *   verbs_user DEV flush     ERR flushes N sends and M receives in order, once
 *   verbs_user DEV race      posts, polls and the move to ERR on two CPUs
 *   verbs_user DEV hostile   garbage in the mapped rings errors the QP only;
 *                            the kernel's poll and receive-post commands are
 *                            refused on user objects
 *   verbs_user DEV rc        the RC transport in loopback: data of every
 *                            opcode checked, and each error path: RNR
 *                            retries exhausted and waited out, bad rkey,
 *                            missing access, overlong SEND, bad lkey
 *   verbs_user DEV memory    as an unprivileged user: re-registration never
 *                            makes a read-only pin writable, and WRITEs
 *                            racing re-registrations between writable and
 *                            read-only memory never reach the latter;
 *                            a region with a window bound stays registered
 *   verbs_user DEV bigread   one 256 MiB RDMA READ between two QPs of the
 *                            device, an RDMA WRITE right behind it: both
 *                            complete in order, data intact
 *   verbs_user DEV events    CQ events through a completion channel on the
 *                            last vector: the solicited and next-completion
 *                            arming rules, one event per arming
 *   verbs_user DEV hold      open every object type, print "ready", wait
 *   verbs_user DEV watch     as hold, then report async events until the
 *                            device is gone (IBV_EVENT_DEVICE_FATAL)
 *
 * Each check prints "ok: ..." or exits 1 after "FAIL: ...".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); printf("ok: " __VA_ARGS__); printf("\n"); } while (0)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_index = -1;

/* The port's RoCEv2 link-local GID: its MAC follows from the GID itself, so
 * address handles and connections to it need no neighbour resolution. */
static void find_gid(const char *name)
{
	for (int i = 0; i < 16 && gid_index < 0; i++) {
		char path[256], type[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/types/%d",
			 name, i);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(type, sizeof(type), f))
			type[0] = 0;
		fclose(f);
		if (strncmp(type, "RoCE v2", 7) || ibv_query_gid(ctx, 1, i, &gid))
			continue;
		if (gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80)
			gid_index = i;
	}
	if (gid_index < 0)
		FAIL("%s has no RoCEv2 link-local GID", name);
}

static void open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		FAIL("cannot open %s", name);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	find_gid(name);
}

static struct ibv_cq *make_cq(int cqe)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);

	if (!cq)
		FAIL("ibv_create_cq(%d): %s", cqe, strerror(errno));
	return cq;
}

static struct ibv_qp *make_qp(enum ibv_qp_type type, struct ibv_cq *scq, struct ibv_cq *rcq,
			      struct ibv_srq *srq, int sq, int rq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = type,
		.cap = { .max_send_wr = sq, .max_recv_wr = rq, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &attr);

	if (!qp)
		FAIL("ibv_create_qp: %s", strerror(errno));
	return qp;
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = { .qp_state = state };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* A QP number no QP has (numbers are handed out cyclically from 16). */
#define NOBODY_QPN 0xfffffe

/* RESET -> RTS; an RC QP connects to a QP nobody has, with the longest
 * timeout, so that what it sends stays outstanding. */
static void connect_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	if (ibv_modify_qp(qp, &a, mask))
		FAIL("modify to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (qp->qp_type == IBV_QPT_RC) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = NOBODY_QPN;
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(qp, &a, mask))
		FAIL("modify to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = 31;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (ibv_modify_qp(qp, &a, mask))
		FAIL("modify to RTS: %s", strerror(errno));
}

static char buffer[4096];
static struct ibv_mr *mr;
static struct ibv_ah *ah;

static int post_send(struct ibv_qp *qp, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)buffer, 16, mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (qp->qp_type == IBV_QPT_UD) {
		wr.wr.ud.ah = ah;
		/* Sent at once, to nobody: a datagram waits for no answer. */
		wr.wr.ud.remote_qpn = NOBODY_QPN;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* Posts `count` sends with consecutive wr_ids in one call. */
static int post_send_chain(struct ibv_qp *qp, uint64_t first, int count)
{
	struct ibv_sge sge = { (uintptr_t)buffer, 16, mr->lkey };
	struct ibv_send_wr wrs[8], *bad;

	if (count > 8)
		return EINVAL;
	memset(wrs, 0, sizeof(wrs));
	for (int i = 0; i < count; i++) {
		wrs[i].wr_id = first + i;
		wrs[i].sg_list = &sge;
		wrs[i].num_sge = 1;
		wrs[i].opcode = IBV_WR_SEND;
		wrs[i].send_flags = IBV_SEND_SIGNALED;
		wrs[i].next = i + 1 < count ? &wrs[i + 1] : NULL;
		if (qp->qp_type == IBV_QPT_UD) {
			wrs[i].wr.ud.ah = ah;
			wrs[i].wr.ud.remote_qpn = NOBODY_QPN;
			wrs[i].wr.ud.remote_qkey = 0x11111111;
		}
	}
	return ibv_post_send(qp, wrs, &bad);
}

static int post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)buffer, sizeof(buffer), mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(qp, &wr, &bad);
}

/* Polls until `want` completions arrived (or 5 s passed), then waits 0.5 s
 * for any extra one; returns how many arrived, wr_ids and statuses in order. */
static int drain(struct ibv_cq *cq, int want, uint64_t *ids, int *statuses, int room)
{
	int got = 0;
	double deadline = now() + 5, quiet = 0;

	while (now() < deadline) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(cq, 16, wc);

		if (n < 0)
			FAIL("ibv_poll_cq: %d", n);
		for (int i = 0; i < n; i++, got++)
			if (got < room) {
				ids[got] = wc[i].wr_id;
				statuses[got] = wc[i].status;
			}
		if (got >= want && !quiet)
			quiet = now() + 0.5;
		if (quiet && now() > quiet)
			break;
		if (!n)
			usleep(1000);
	}
	return got;
}

static void expect_status(struct ibv_cq *cq, uint64_t first, int count, enum ibv_wc_status status,
			  const char *what)
{
	uint64_t ids[256];
	int st[256];
	int got = drain(cq, count, ids, st, 256);

	if (got != count) {
		for (int i = 0; i < got && i < 256; i++)
			printf("  completion %d: wr_id %llu status %s\n", i,
			       (unsigned long long)ids[i], ibv_wc_status_str(st[i]));
		FAIL("%s: %d completions, expected %d", what, got, count);
	}
	for (int i = 0; i < count; i++)
		if (ids[i] != first + i || st[i] != (int)status)
			FAIL("%s: completion %d is wr_id %llu status %s, expected %llu %s", what, i,
			     (unsigned long long)ids[i], ibv_wc_status_str(st[i]),
			     (unsigned long long)(first + i), ibv_wc_status_str(status));
	printf("ok: %s: %d %s completions, in order, no more\n", what, count,
	       ibv_wc_status_str(status));
}

static void expect_flushed(struct ibv_cq *cq, uint64_t first, int count, const char *what)
{
	expect_status(cq, first, count, IBV_WC_WR_FLUSH_ERR, what);
}

static void setup_memory(void)
{
	mr = ibv_reg_mr(pd, buffer, sizeof(buffer), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 1 } };
	/* librxe resolves the destination's MAC through the neighbour table
	 * first, and gives up after a second: on a loaded machine a fresh
	 * netdev's address may not answer that fast. */
	for (int attempt = 0; attempt < 10; attempt++) {
		ah = ibv_create_ah(pd, &aa);
		if (ah || errno != ETIMEDOUT)
			break;
		printf("ibv_create_ah: neighbour resolution timed out, trying again\n");
	}
	if (!ah)
		FAIL("ibv_create_ah: %s", strerror(errno));
}

static void flush_test(void)
{
	const int n = 16, m = 24;

	setup_memory();
	for (int round = 0; round < 2; round++) {
		enum ibv_qp_type type = round ? IBV_QPT_UD : IBV_QPT_RC;
		const char *name = round ? "UD" : "RC";
		struct ibv_cq *scq = make_cq(64), *rcq = make_cq(64);
		struct ibv_qp *qp = make_qp(type, scq, rcq, NULL, 32, 32);
		char what[64];

		connect_qp(qp);
		for (int i = 0; i < n; i++)
			if (post_send(qp, 1000 + i))
				FAIL("%s post_send %d", name, i);
		for (int i = 0; i < m; i++)
			if (post_recv(qp, NULL, 2000 + i))
				FAIL("%s post_recv %d", name, i);
		/* RC sends to nobody stay outstanding; UD ones complete once sent. */
		CHECK(to_state(qp, IBV_QPS_ERR) == 0, "%s: modify to ERR", name);
		/* Resizing keeps the completions nobody polled yet, in order. */
		CHECK(ibv_resize_cq(scq, 200) == 0 && scq->cqe >= 200, "%s: resize the send CQ "
		      "holding %d unpolled completions", name, n);
		CHECK(ibv_resize_cq(scq, 2) != 0, "%s: shrinking below the unpolled completions fails",
		      name);
		snprintf(what, sizeof(what), "%s send queue", name);
		if (type == IBV_QPT_UD)
			/* Datagrams complete once sent; the ones below, posted in
			 * ERR, are flushed. */
			expect_status(scq, 1000, n, IBV_WC_SUCCESS, what);
		else
			expect_flushed(scq, 1000, n, what);
		snprintf(what, sizeof(what), "%s receive queue", name);
		expect_flushed(rcq, 2000, m, what);
		/* librxe posts receives without a system call: the kernel finds
		 * those posted in ERR on its own. Sends ring the doorbell. */
		for (int i = 0; i < 3; i++)
			CHECK(post_recv(qp, NULL, 3000 + i) == 0, "%s: post_recv in ERR", name);
		snprintf(what, sizeof(what), "%s receives posted in ERR", name);
		expect_flushed(rcq, 3000, 3, what);
		for (int i = 0; i < 3; i++)
			CHECK(post_send(qp, 4000 + i) == 0, "%s: post_send in ERR", name);
		snprintf(what, sizeof(what), "%s sends posted in ERR", name);
		expect_flushed(scq, 4000, 3, what);
		/* A chain of WRs reaches the kernel with one doorbell. */
		CHECK(post_send_chain(qp, 4100, 4) == 0, "%s: a chain of 4 sends posted in ERR", name);
		snprintf(what, sizeof(what), "%s chain posted in ERR", name);
		expect_flushed(scq, 4100, 4, what);
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR,
		      "%s: query_qp says ERR", name);
		/* Destroying a QP with work outstanding needs no completions. */
		CHECK(to_state(qp, IBV_QPS_RESET) == 0, "%s: ERR -> RESET", name);
		connect_qp(qp);
		for (int i = 0; i < 4; i++)
			post_send(qp, 5000 + i);
		CHECK(ibv_destroy_qp(qp) == 0, "%s: destroy with sends outstanding", name);
		ibv_destroy_cq(scq);
		ibv_destroy_cq(rcq);
	}

	/* A QP on an SRQ: the SRQ's receives are not the QP's to flush, and the
	 * QP reports its last WQE. */
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_cq *cq = make_cq(64);
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, cq, cq, srq, 8, 0);

	if (!srq)
		FAIL("ibv_create_srq: %s", strerror(errno));
	connect_qp(qp);
	for (int i = 0; i < 4; i++)
		post_recv(qp, srq, 6000 + i);
	for (int i = 0; i < 2; i++)
		post_send(qp, 7000 + i);
	CHECK(to_state(qp, IBV_QPS_ERR) == 0, "SRQ QP: modify to ERR");
	expect_flushed(cq, 7000, 2, "SRQ QP sends (the SRQ's receives stay)");
	struct ibv_async_event ev;
	int found = 0;
	for (int tries = 0; tries < 10 && !found; tries++) {
		if (ibv_get_async_event(ctx, &ev))
			break;
		found = ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == qp;
		ibv_ack_async_event(&ev);
	}
	CHECK(found, "SRQ QP: IBV_EVENT_QP_LAST_WQE_REACHED");
	ibv_destroy_qp(qp);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
}

/* ---- posts, polls and the move to ERR racing on two CPUs ---- */

#define RACE_MAX 100000
static struct ibv_qp *race_qp;
static struct ibv_cq *race_cq;
static volatile int race_stop;     /* the poster stops posting */
static volatile int race_drain;    /* the poster has stopped: poll to the end */
static uint64_t race_posted;       /* wr_ids 0..race_posted-1 were accepted */
static unsigned char race_seen[RACE_MAX];

static void *race_poster(void *arg)
{
	(void)arg;
	while (!race_stop && race_posted < RACE_MAX) {
		if (post_send(race_qp, race_posted) == 0)
			__atomic_store_n(&race_posted, race_posted + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *race_poller(void *arg)
{
	uint64_t *next = arg;

	/* Only once the poster has finished is race_posted final: a post can
	 * still be under way when race_stop is seen. */
	while (!race_drain || *next < __atomic_load_n(&race_posted, __ATOMIC_ACQUIRE)) {
		struct ibv_wc wc[32];
		int n = ibv_poll_cq(race_cq, 32, wc);

		for (int i = 0; i < n; i++) {
			uint64_t id = wc[i].wr_id;
			if (id >= RACE_MAX || race_seen[id]++)
				FAIL("race: wr_id %llu completed twice or is unknown", (unsigned long long)id);
			if (id != *next)
				FAIL("race: wr_id %llu completed before %llu", (unsigned long long)id,
				     (unsigned long long)*next);
			(*next)++;
			/* Nobody answers: every send is flushed. */
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
				FAIL("race: wr_id %llu completed with %s", (unsigned long long)id,
				     ibv_wc_status_str(wc[i].status));
		}
		if (race_drain && !n) {
			static double give_up;
			if (!give_up)
				give_up = now() + 5;
			if (now() > give_up)
				break;
		}
	}
	return NULL;
}

static void race_test(void)
{
	pthread_t poster, poller;
	uint64_t next = 0;

	setup_memory();
	race_cq = make_cq(4096);
	race_qp = make_qp(IBV_QPT_RC, race_cq, race_cq, NULL, 64, 1);
	connect_qp(race_qp);
	pthread_create(&poster, NULL, race_poster, NULL);
	pthread_create(&poller, NULL, race_poller, &next);
	usleep(200000);
	CHECK(to_state(race_qp, IBV_QPS_ERR) == 0, "race: modify to ERR while posting and polling");
	usleep(500000);
	race_stop = 1;
	pthread_join(poster, NULL);
	race_drain = 1;
	pthread_join(poller, NULL);
	CHECK(next == race_posted && race_posted > 64,
	      "race: all %llu accepted sends completed exactly once, in order (%llu completed)",
	      (unsigned long long)race_posted, (unsigned long long)next);
}

/* ---- hostile rings ---- */

struct mapping { char *start; size_t len; };

static int uverbs_mappings(struct mapping *out, int room)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	while (f && fgets(line, sizeof(line), f) && n < room) {
		unsigned long a, b;
		if (strstr(line, "/dev/infiniband/uverbs") && sscanf(line, "%lx-%lx", &a, &b) == 2) {
			out[n].start = (char *)a;
			out[n].len = b - a;
			n++;
		}
	}
	if (f)
		fclose(f);
	return n;
}

/* The ring of `qp` (or a CQ) whose header says `mask`, among the mappings
 * that appeared since `before` was taken. */
static struct rxe_queue_buf *find_ring(struct mapping *before, int nb, uint32_t mask)
{
	struct mapping now_m[256];
	int n = uverbs_mappings(now_m, 256);

	for (int i = 0; i < n; i++) {
		int old = 0;
		for (int j = 0; j < nb; j++)
			old |= before[j].start == now_m[i].start;
		struct rxe_queue_buf *q = (struct rxe_queue_buf *)now_m[i].start;
		if (!old && q->index_mask == mask)
			return q;
	}
	return NULL;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		FAIL("ibv_query_qp: %s", strerror(errno));
	return a.qp_state;
}

static void bystander_works(struct ibv_qp *qp, struct ibv_cq *cq, int round)
{
	uint64_t base = 10000 * (round + 1);

	for (int i = 0; i < 3; i++)
		if (post_send(qp, base + i))
			FAIL("bystander post_send");
	CHECK(to_state(qp, IBV_QPS_ERR) == 0, "bystander: modify to ERR");
	expect_flushed(cq, base, 3, "bystander sends");
	to_state(qp, IBV_QPS_RESET);
	connect_qp(qp);
}

/*
 * The kernel's own poll and receive posts, which librxe never uses, written
 * to the uverbs file as an attacker would: POLL_CQ on a user CQ, POST_RECV
 * on a user QP, POST_SRQ_RECV on a user SRQ. Each returns 0 or an errno.
 */
static int raw_poll_cq(struct ibv_cq *cq)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_poll_cq cmd;
	} req;
	struct {
		struct ib_uverbs_poll_cq_resp head;
		struct ib_uverbs_wc wc[1];
	} resp;

	memset(&req, 0, sizeof(req));
	req.cmd.cq_handle = cq->handle;
	req.cmd.ne = 1;
	return uverbs_write(cq->context, IB_USER_VERBS_CMD_POLL_CQ, &req, sizeof(req), &resp,
			    sizeof(resp));
}

static int raw_post_recv(uint32_t command, struct ibv_context *context, uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_recv cmd; /* the same layout as post_srq_recv */
		struct ib_uverbs_recv_wr wr;
		struct ib_uverbs_sge sge;
	} req;
	struct ib_uverbs_post_recv_resp resp;

	memset(&req, 0, sizeof(req));
	req.cmd.qp_handle = handle;
	req.cmd.wr_count = 1;
	req.cmd.sge_count = 1;
	req.cmd.wqe_size = sizeof(req.wr);
	req.wr.wr_id = 99;
	req.wr.num_sge = 1;
	req.sge.addr = (uintptr_t)buffer;
	req.sge.length = sizeof(buffer);
	req.sge.lkey = mr->lkey;
	return uverbs_write(context, command, &req, sizeof(req), &resp, sizeof(resp));
}

/* A user CQ, QP and SRQ are polled and posted in their rings only: the
 * kernel's commands for them are refused (the device does not opt into
 * them, Device::register in rust/kapi/rdma/device.rs) and leave the rings
 * as they were (the one completion in the CQ is still there for librxe).
 * Were POLL_CQ let through, the kernel would read the QP pointer of a
 * completion from the ring the process writes. */
static void kernel_commands_test(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_cq *cq = make_cq(16);
	struct ibv_qp *qp = make_qp(IBV_QPT_RC, cq, cq, NULL, 4, 4);
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	int err;

	if (!srq)
		FAIL("ibv_create_srq: %s", strerror(errno));
	connect_qp(qp);
	if (post_recv(qp, NULL, 1))
		FAIL("post_recv: %s", strerror(errno));
	CHECK(to_state(qp, IBV_QPS_ERR) == 0, "kernel commands: modify to ERR");
	/* The flushed receive is now in the CQ's ring, which the process may
	 * have written anything into. */
	err = raw_poll_cq(cq);
	CHECK(err == EOPNOTSUPP, "POLL_CQ on a user CQ with a completion in it is refused (%s)",
	      strerror(err));
	expect_flushed(cq, 1, 1, "the completion the refused POLL_CQ left");
	err = raw_post_recv(IB_USER_VERBS_CMD_POST_RECV, ctx, qp->handle);
	CHECK(err == EOPNOTSUPP, "POST_RECV on a user QP is refused (%s)", strerror(err));
	err = raw_post_recv(IB_USER_VERBS_CMD_POST_SRQ_RECV, ctx, srq->handle);
	CHECK(err == EOPNOTSUPP, "POST_SRQ_RECV on a user SRQ is refused (%s)", strerror(err));
	expect_status(cq, 0, 0, IBV_WC_SUCCESS, "nothing posted by the refused commands");
	CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_srq(srq) == 0 && ibv_destroy_cq(cq) == 0,
	      "kernel commands: objects destroyed");
}

static void hostile_test(void)
{
	struct ibv_cq *bcq = make_cq(64);
	struct ibv_qp *bystander;
	unsigned int seed = 1;

	setup_memory();
	bystander = make_qp(IBV_QPT_RC, bcq, bcq, NULL, 8, 8);
	connect_qp(bystander);
	for (int round = 0; round < 5; round++) {
		struct mapping before[256];
		int nb = uverbs_mappings(before, 256);
		/* Depths chosen so that the rings tell themselves apart: SQ mask
		 * 15, RQ mask 7, CQ mask 63. */
		struct ibv_cq *cq = make_cq(63);
		struct ibv_qp *victim = make_qp(IBV_QPT_RC, cq, cq, NULL, 15, 7);
		struct rxe_queue_buf *sq = find_ring(before, nb, 15);
		struct rxe_queue_buf *rq = find_ring(before, nb, 7);
		struct rxe_queue_buf *cqr = find_ring(before, nb, 63);

		if (!sq || !rq || !cqr)
			FAIL("cannot find the victim's rings in /proc/self/maps");
		connect_qp(victim);
		switch (round) {
		case 0:
			printf("--- SQ producer index out of range, doorbell\n");
			sq->producer_index = 0xdeadbeef;
			if (uverbs_doorbell(victim))
				printf("doorbell: %s\n", strerror(errno));
			break;
		case 1: {
			printf("--- garbage send WQEs, valid producer, doorbell\n");
			size_t slot = 1u << sq->log2_elem_size;
			for (size_t i = 0; i < 4 * slot; i++)
				sq->data[i] = rand_r(&seed);
			struct rxe_send_wqe *w = (struct rxe_send_wqe *)sq->data;
			w->wr.opcode = IBV_WR_SEND;
			w->dma.num_sge = 0x7fffffff;
			w->wr.send_flags = 0;
			__atomic_store_n(&sq->producer_index, 4, __ATOMIC_RELEASE);
			if (uverbs_doorbell(victim))
				printf("doorbell: %s\n", strerror(errno));
			break;
		}
		case 2:
			printf("--- RQ producer index out of range, then ERR\n");
			post_recv(victim, NULL, 1);
			rq->producer_index = 0xffffffff;
			to_state(victim, IBV_QPS_ERR);
			break;
		case 3:
			printf("--- CQ consumer index out of range, then completions\n");
			post_send(victim, 1);
			post_send(victim, 2);
			cqr->consumer_index = 0x80000000;
			to_state(victim, IBV_QPS_ERR);
			break;
		case 4:
			/* The peer does not exist: the ten sends stay in flight in
			 * slots 0-9. A producer of 5 claims eleven new WQEs, which
			 * would overwrite five of them. */
			printf("--- SQ producer laps the sends in flight, doorbell\n");
			if (post_send_chain(victim, 1, 8) || post_send_chain(victim, 9, 2))
				FAIL("round 4: posting ten sends");
			__atomic_store_n(&sq->producer_index, 5, __ATOMIC_RELEASE);
			if (uverbs_doorbell(victim))
				printf("doorbell: %s\n", strerror(errno));
			break;
		}
		CHECK(qp_state(victim) == IBV_QPS_ERR, "round %d: the victim QP is in ERR", round);
		if (round < 2 || round == 4) {
			struct ibv_async_event ev;
			int fatal = 0;
			for (int tries = 0; tries < 10 && !fatal; tries++) {
				if (ibv_get_async_event(ctx, &ev))
					break;
				fatal = ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == victim;
				ibv_ack_async_event(&ev);
			}
			CHECK(fatal, "round %d: IBV_EVENT_QP_FATAL on the victim", round);
		}
		if (round == 3) {
			struct ibv_async_event ev;
			int overrun = 0;
			for (int tries = 0; tries < 10 && !overrun; tries++) {
				if (ibv_get_async_event(ctx, &ev))
					break;
				overrun = ev.event_type == IBV_EVENT_CQ_ERR;
				ibv_ack_async_event(&ev);
			}
			CHECK(overrun, "round 3: IBV_EVENT_CQ_ERR on the victim's CQ");
		}
		if (round == 4) {
			/* Each send in flight completes once, in order, none lost.
			 * Then the kernel has moved the consumer past them, and the
			 * producer left at 5 now names eleven newly posted slots,
			 * which the ERR state flushes too. */
			uint64_t ids[64];
			int st[64], got = drain(cq, 10, ids, st, 64), in_order = got >= 10;

			for (int i = 0; in_order && i < 10; i++)
				in_order = ids[i] == (uint64_t)i + 1 && st[i] == IBV_WC_WR_FLUSH_ERR;
			CHECK(in_order && got <= 21,
			      "round 4: the ten sends in flight flushed once each, in order (%d completions in all)",
			      got);
		}
		bystander_works(bystander, bcq, round);
		CHECK(ibv_destroy_qp(victim) == 0, "round %d: victim destroyed", round);
		/* A CQ whose ring was corrupted may hold garbage; it still goes. */
		CHECK(ibv_destroy_cq(cq) == 0, "round %d: victim CQ destroyed", round);
	}
	kernel_commands_test();
}

/* ---- limits ---- */

static void limits_test(void)
{
	struct ibv_device_attr d;

	if (ibv_query_device(ctx, &d))
		FAIL("ibv_query_device");
	setup_memory();
	struct ibv_cq *cq = ibv_create_cq(ctx, d.max_cqe, NULL, NULL, 0);
	CHECK(cq && cq->cqe >= d.max_cqe, "CQ of max_cqe (%d) entries", d.max_cqe);
	ibv_destroy_cq(cq);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, d.max_cqe + 1, NULL, NULL, 0) && errno == EINVAL,
	      "CQ of max_cqe + 1 entries fails with EINVAL");
	CHECK(!ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors) && errno == EINVAL,
	      "CQ on comp_vector num_comp_vectors fails with EINVAL");
	cq = make_cq(16);
	CHECK(ibv_resize_cq(cq, 100) == 0 && cq->cqe >= 100, "resize CQ up (%d)", cq->cqe);
	CHECK(ibv_resize_cq(cq, 4) == 0 && cq->cqe >= 4, "resize CQ down (%d)", cq->cqe);

	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = d.max_qp_wr + 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
	CHECK(!ibv_create_qp(pd, &qa) && errno == EINVAL, "QP with max_send_wr > max_qp_wr fails with EINVAL");
	qa.cap.max_send_wr = 1;
	qa.cap.max_send_sge = d.max_sge + 1;
	CHECK(!ibv_create_qp(pd, &qa) && errno == EINVAL, "QP with max_send_sge > max_sge fails with EINVAL");
	qa.cap.max_send_sge = 1;
	qa.cap.max_inline_data = 513;
	CHECK(!ibv_create_qp(pd, &qa) && errno == EINVAL, "QP with 513 bytes inline fails with EINVAL");
	qa.cap.max_inline_data = 100;
	qa.cap.max_send_wr = 10;
	struct ibv_qp *qp = ibv_create_qp(pd, &qa);
	CHECK(qp && qa.cap.max_send_wr >= 10 && qa.cap.max_inline_data >= 100,
	      "QP caps reported as allocated (send_wr %u, inline %u, send_sge %u)",
	      qa.cap.max_send_wr, qa.cap.max_inline_data, qa.cap.max_send_sge);
	CHECK(to_state(qp, IBV_QPS_RTS) && errno == EINVAL, "RESET -> RTS fails with EINVAL");
	ibv_destroy_qp(qp);

	struct ibv_srq_init_attr sa = { .attr = { .max_wr = d.max_srq_wr + 1, .max_sge = 1 } };
	CHECK(!ibv_create_srq(pd, &sa) && errno == EINVAL, "SRQ with max_wr > max_srq_wr fails with EINVAL");
	sa.attr.max_wr = 8;
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	CHECK(srq != NULL, "SRQ created");
	struct ibv_srq_attr s = { .max_wr = 64 };
	CHECK(ibv_modify_srq(srq, &s, IBV_SRQ_MAX_WR) == 0, "SRQ resized to 64");
	s.srq_limit = 4;
	CHECK(ibv_modify_srq(srq, &s, IBV_SRQ_LIMIT) == 0, "SRQ limit armed");
	CHECK(ibv_query_srq(srq, &s) == 0 && s.max_wr >= 64 && s.srq_limit == 4, "SRQ query (max_wr %u)", s.max_wr);
	ibv_destroy_srq(srq);

	CHECK(!ibv_reg_mr(pd, buffer, 64, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "MR with remote write but not local write fails with EINVAL");
	struct ibv_mr *a = ibv_reg_mr(pd, buffer + 3, 1000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(a != NULL, "MR at an odd offset");
	uint32_t key = a->lkey;
	ibv_dereg_mr(a);
	a = ibv_reg_mr(pd, buffer + 3, 1000, IBV_ACCESS_LOCAL_WRITE);
	CHECK(a && a->lkey != key, "a new registration gets a new key (%#x, was %#x)", a->lkey, key);
	ibv_dereg_mr(a);
	struct ibv_mw *mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1), *mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2 && mw1->rkey != mw2->rkey, "memory windows of type 1 and 2");
	ibv_dealloc_mw(mw1);
	ibv_dealloc_mw(mw2);

	/* Count limits: CQs until the device says no, which must be at max_cq. */
	static struct ibv_cq *cqs[1 << 15];
	int n = 0;
	while (n < (int)(sizeof(cqs) / sizeof(cqs[0])) && (cqs[n] = ibv_create_cq(ctx, 1, NULL, NULL, 0)))
		n++;
	int err = errno;
	/* Two CQs are already open here (this test's and ib_mad's). */
	CHECK(n + 2 == d.max_cq && err == ENOMEM, "CQ number %d fails with ENOMEM (max_cq %d)", n + 3, d.max_cq);
	while (n--)
		ibv_destroy_cq(cqs[n]);
	ibv_destroy_cq(cq);
}

/* ---- holding objects for teardown tests ---- */

static void hold(int watch)
{
	setup_memory();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	struct ibv_qp *rc = make_qp(IBV_QPT_RC, cq, cq, NULL, 8, 8);
	struct ibv_qp *ud = make_qp(IBV_QPT_UD, cq, cq, srq, 8, 0);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);

	if (!ch || !cq || !srq || !mw)
		FAIL("creating objects: %s", strerror(errno));
	connect_qp(rc);
	connect_qp(ud);
	post_send(rc, 1);
	post_recv(rc, NULL, 2);
	post_recv(ud, srq, 3);
	ibv_req_notify_cq(cq, 0);
	printf("ready\n");
	fflush(stdout);
	if (!watch)
		for (;;)
			pause();
	for (;;) {
		struct ibv_async_event ev;
		if (ibv_get_async_event(ctx, &ev))
			FAIL("ibv_get_async_event: %s", strerror(errno));
		printf("event: %s\n", ibv_event_type_str(ev.event_type));
		fflush(stdout);
		int fatal = ev.event_type == IBV_EVENT_DEVICE_FATAL;
		ibv_ack_async_event(&ev);
		if (fatal)
			break;
	}
	ibv_destroy_qp(rc);
	ibv_destroy_qp(ud);
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	ibv_destroy_ah(ah);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("ok: released everything after the device went away\n");
}


/* ---- The RC transport between two QPs of the device ---- */

#define RC_BUF (256 * 1024)

struct rc_side {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	unsigned char *buf;
	struct ibv_mr *mr;
};

/* Takes `qp` to RTS, connected to QP `dest` at `dgid` over a path MTU of
 * `mtu`. */
static void rc_modify_to(struct ibv_qp *qp, uint32_t dest, int access, int rnr_retry,
			 enum ibv_mtu mtu, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = access };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		FAIL("modify to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest;
	a.rq_psn = 0x123456;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1; /* 10 us */
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("modify to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123456;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("modify to RTS: %s", strerror(errno));
}

/* Takes `qp` to RTS, connected to QP `dest` of this device. */
static void rc_modify(struct ibv_qp *qp, uint32_t dest, int access, int rnr_retry)
{
	rc_modify_to(qp, dest, access, rnr_retry, IBV_MTU_1024, &gid);
}

/* A side whose receives complete on `recv_cq` (NULL: on its own CQ). */
static void rc_side_init_with(struct rc_side *s, struct ibv_cq *recv_cq)
{
	s->cq = make_cq(256);
	struct ibv_qp_init_attr attr = {
		.send_cq = s->cq, .recv_cq = recv_cq ? recv_cq : s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
	};
	s->qp = ibv_create_qp(pd, &attr);
	if (!s->qp)
		FAIL("ibv_create_qp: %s", strerror(errno));
	s->buf = aligned_alloc(4096, RC_BUF);
	if (!s->buf)
		FAIL("out of memory");
	memset(s->buf, 0, RC_BUF);
	s->mr = ibv_reg_mr(pd, s->buf, RC_BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!s->mr)
		FAIL("ibv_reg_mr: %s", strerror(errno));
}

static void rc_side_init(struct rc_side *s)
{
	rc_side_init_with(s, NULL);
}

/* Two fresh connected QPs; `access` is what each allows its peer,
 * `rnr_retry` how often each retries an RNR NAK. */
static void rc_pair(struct rc_side *a, struct rc_side *b, int access, int rnr_retry)
{
	rc_side_init(a);
	rc_side_init(b);
	rc_modify(a->qp, b->qp->qp_num, access, rnr_retry);
	rc_modify(b->qp, a->qp->qp_num, access, rnr_retry);
}

static void rc_free(struct rc_side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	free(s->buf);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245 + 12345;
		p[i] = seed >> 16;
	}
}

static int rc_post(struct rc_side *s, enum ibv_wr_opcode op, uint64_t wr_id, size_t off, size_t len,
		   struct rc_side *peer, size_t peer_off)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + peer_off;
		wr.wr.rdma.rkey = peer->mr->rkey;
	}
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htonl(0xabcd0000 + wr_id);
	return ibv_post_send(s->qp, &wr, &bad);
}

static int rc_recv(struct rc_side *s, uint64_t wr_id, size_t off, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + off, len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

/* Waits for one completion on `cq` (up to 5 s). */
static struct ibv_wc rc_wait(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	double deadline = now() + 5;

	while (now() < deadline) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			FAIL("%s: ibv_poll_cq: %d", what, n);
		if (n)
			return wc;
		usleep(100);
	}
	FAIL("%s: no completion within 5 s", what);
}

static void rc_expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status,
		      enum ibv_wc_opcode opcode, const char *what)
{
	struct ibv_wc wc = rc_wait(cq, what);

	if (wc.wr_id != wr_id || wc.status != status || (status == IBV_WC_SUCCESS &&
							  wc.opcode != opcode))
		FAIL("%s: completion wr_id %llu status %s opcode %d, expected wr_id %llu status %s opcode %d",
		     what, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode,
		     (unsigned long long)wr_id, ibv_wc_status_str(status), opcode);
	printf("ok: %s: %s\n", what, ibv_wc_status_str(status));
}

static enum ibv_qp_state rc_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		FAIL("ibv_query_qp: %s", strerror(errno));
	return a.qp_state;
}

#define ALL_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static void rc_data_test(void)
{
	struct rc_side a, b;
	const size_t big = 200000; /* far above the 1024-byte path MTU, not a multiple of it */
	uint64_t *word;

	rc_pair(&a, &b, ALL_ACCESS, 7);

	fill(a.buf, big, 1);
	if (rc_recv(&b, 100, 0, big) || rc_post(&a, IBV_WR_SEND_WITH_IMM, 1, 0, big, &b, 0))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_SEND, "SEND_WITH_IMM 200000 B: sender");
	struct ibv_wc wc = rc_wait(b.cq, "SEND_WITH_IMM: receiver");
	CHECK(wc.wr_id == 100 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.byte_len == big && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc.imm_data) == 0xabcd0001,
	      "SEND_WITH_IMM: receive completion with length %u and immediate %#x", wc.byte_len,
	      ntohl(wc.imm_data));
	CHECK(!memcmp(a.buf, b.buf, big), "SEND: %zu bytes arrived intact", big);

	fill(a.buf, big, 2);
	if (rc_post(&a, IBV_WR_RDMA_WRITE, 2, 0, big, &b, 4096))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "RDMA_WRITE 200000 B");
	CHECK(!memcmp(a.buf, b.buf + 4096, big), "RDMA_WRITE: data intact at the target offset");

	if (rc_recv(&b, 101, 0, 16) || rc_post(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 3, 0, 5000, &b, 8192))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "RDMA_WRITE_WITH_IMM: sender");
	wc = rc_wait(b.cq, "RDMA_WRITE_WITH_IMM: receiver");
	CHECK(wc.wr_id == 101 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	      ntohl(wc.imm_data) == 0xabcd0003 && !memcmp(a.buf, b.buf + 8192, 5000),
	      "RDMA_WRITE_WITH_IMM: receive completion with the immediate, data intact");

	fill(b.buf, big, 3);
	memset(a.buf, 0, big);
	if (rc_post(&a, IBV_WR_RDMA_READ, 4, 0, big, &b, 0))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "RDMA_READ 200000 B");
	CHECK(!memcmp(a.buf, b.buf, big), "RDMA_READ: data intact");

	word = (uint64_t *)(b.buf + 64);
	*word = 1000;
	struct ibv_sge sge = { (uintptr_t)a.buf, 8, a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.atomic.remote_addr = (uintptr_t)word;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = 234;
	if (ibv_post_send(a.qp, &wr, &bad))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 5, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, "FETCH_AND_ADD");
	CHECK(*(uint64_t *)a.buf == 1000 && *word == 1234, "FETCH_AND_ADD: returned 1000, target 1234");
	wr.wr_id = 6;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 1234;
	wr.wr.atomic.swap = 77;
	if (ibv_post_send(a.qp, &wr, &bad))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 6, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, "CMP_AND_SWP");
	CHECK(*(uint64_t *)a.buf == 1234 && *word == 77, "CMP_AND_SWP: returned 1234, swapped in 77");
	wr.wr_id = 7;
	wr.wr.atomic.compare_add = 1;
	wr.wr.atomic.swap = 5;
	if (ibv_post_send(a.qp, &wr, &bad))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 7, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, "CMP_AND_SWP, no match");
	CHECK(*(uint64_t *)a.buf == 77 && *word == 77, "CMP_AND_SWP without a match leaves the target");

	/* Inline SEND, then a receive posted only after the send: RNR NAKs
	 * until the receive comes, then delivery (rnr_retry 7). */
	memcpy(a.buf, "inline data!", 12);
	struct ibv_sge isge = { (uintptr_t)a.buf, 12, a.mr->lkey };
	struct ibv_send_wr iwr = { .wr_id = 8, .sg_list = &isge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	if (ibv_post_send(a.qp, &iwr, &bad))
		FAIL("post: %s", strerror(errno));
	memset(a.buf, 0, 12);
	usleep(50000);
	struct ibv_wc none;
	CHECK(ibv_poll_cq(a.cq, 1, &none) == 0, "SEND without a receive posted waits (RNR)");
	if (rc_recv(&b, 102, 100, 64))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 8, IBV_WC_SUCCESS, IBV_WC_SEND, "inline SEND after the receive came");
	wc = rc_wait(b.cq, "inline SEND: receiver");
	CHECK(wc.wr_id == 102 && wc.byte_len == 12 && !memcmp(b.buf + 100, "inline data!", 12),
	      "inline SEND: 12 bytes arrived after the RNR wait");

	/* Both QPs through RESET and back to RTS, as a process reconnects
	 * used QPs: nothing the send queue held before is sent again. */
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(a.qp, &reset, IBV_QP_STATE) || ibv_modify_qp(b.qp, &reset, IBV_QP_STATE))
		FAIL("modify to RESET: %s", strerror(errno));
	rc_modify(b.qp, a.qp->qp_num, ALL_ACCESS, 7);
	if (rc_recv(&b, 103, 200, 64))
		FAIL("post: %s", strerror(errno));
	rc_modify(a.qp, b.qp->qp_num, ALL_ACCESS, 7);
	usleep(100000);
	CHECK(ibv_poll_cq(a.cq, 1, &none) == 0 && ibv_poll_cq(b.cq, 1, &none) == 0,
	      "after RESET and back to RTS no WQE of before is sent again");
	memcpy(a.buf + 300, "after reset", 11);
	if (rc_post(&a, IBV_WR_SEND, 9, 300, 11, &b, 0))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 9, IBV_WC_SUCCESS, IBV_WC_SEND, "SEND after RESET and back to RTS");
	wc = rc_wait(b.cq, "SEND after RESET: receiver");
	CHECK(wc.wr_id == 103 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 11 &&
	      !memcmp(b.buf + 200, "after reset", 11),
	      "SEND after RESET: the new message, and only it, arrived");
	rc_free(&a);
	rc_free(&b);
}

static void rc_error_test(void)
{
	struct rc_side a, b;

	rc_pair(&a, &b, ALL_ACCESS, 0);
	if (rc_post(&a, IBV_WR_SEND, 1, 0, 100, &b, 0))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 1, IBV_WC_RNR_RETRY_EXC_ERR, 0, "SEND without a receive, rnr_retry 0");
	CHECK(rc_state(a.qp) == IBV_QPS_ERR, "the requester is in ERR after RNR retries ran out");
	rc_free(&a);
	rc_free(&b);

	rc_pair(&a, &b, ALL_ACCESS, 7);
	struct ibv_sge sge = { (uintptr_t)a.buf, 100, a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey ^ 0x100;
	if (ibv_post_send(a.qp, &wr, &bad))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 2, IBV_WC_REM_ACCESS_ERR, 0, "RDMA_WRITE with a wrong rkey");
	CHECK(rc_state(a.qp) == IBV_QPS_ERR && rc_state(b.qp) == IBV_QPS_ERR,
	      "both QPs are in ERR after the remote access error");
	rc_free(&a);
	rc_free(&b);

	rc_pair(&a, &b, ALL_ACCESS, 7);
	if (rc_post(&a, IBV_WR_RDMA_WRITE, 3, 0, 100, &b, RC_BUF - 50))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 3, IBV_WC_REM_ACCESS_ERR, 0, "RDMA_WRITE past the end of the region");
	rc_free(&a);
	rc_free(&b);

	rc_pair(&a, &b, IBV_ACCESS_REMOTE_WRITE, 7);
	if (rc_post(&a, IBV_WR_RDMA_READ, 4, 0, 100, &b, 0))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 4, IBV_WC_REM_ACCESS_ERR, 0, "RDMA_READ from a QP without remote read");
	rc_free(&a);
	rc_free(&b);

	rc_pair(&a, &b, ALL_ACCESS, 7);
	if (rc_recv(&b, 50, 0, 10) || rc_post(&a, IBV_WR_SEND, 5, 0, 3000, &b, 0))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 5, IBV_WC_REM_INV_REQ_ERR, 0, "SEND longer than the receive buffer: sender");
	rc_expect(b.cq, 50, IBV_WC_LOC_LEN_ERR, 0, "SEND longer than the receive buffer: receiver");
	rc_free(&a);
	rc_free(&b);

	/* A bad local key fails the sender alone. */
	rc_pair(&a, &b, ALL_ACCESS, 7);
	sge.length = 100;
	sge.lkey = a.mr->lkey ^ 0x100;
	wr.wr_id = 7;
	wr.wr.rdma.rkey = b.mr->rkey;
	if (ibv_post_send(a.qp, &wr, &bad))
		FAIL("post: %s", strerror(errno));
	rc_expect(a.cq, 7, IBV_WC_LOC_PROT_ERR, 0, "RDMA_WRITE from a wrong lkey");
	CHECK(rc_state(b.qp) == IBV_QPS_RTS, "the responder stays in RTS after the sender's local error");
	rc_free(&a);
	rc_free(&b);
}

/* ---- Memory rules: re-registration and memory windows ---- */

#define VICTIM "/tmp/srnic-victim"
#define VICTIM_LEN 4096

static void victim_expect_intact(const char *what)
{
	unsigned char now[VICTIM_LEN], want[VICTIM_LEN];
	int fd = open(VICTIM, O_RDONLY);

	if (fd < 0 || pread(fd, now, sizeof(now), 0) != (ssize_t)sizeof(now))
		FAIL("read %s: %s", VICTIM, strerror(errno));
	close(fd);
	fill(want, sizeof(want), 77);
	CHECK(!memcmp(now, want, sizeof(want)), "%s: the read-only file is unchanged", what);
}

/* One RDMA WRITE of `len` bytes from a's buffer to `addr`/`rkey`; the
 * completion status. The pair is spent if the status is an error. */
static enum ibv_wc_status write_to(struct rc_side *a, uint64_t wr_id, uint64_t addr, uint32_t rkey,
				   size_t len)
{
	struct ibv_sge sge = { (uintptr_t)a->buf, len, a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(a->qp, &wr, &bad))
		FAIL("post WRITE: %s", strerror(errno));
	struct ibv_wc wc = rc_wait(a->cq, "WRITE");
	if (wc.wr_id != wr_id)
		FAIL("WRITE: completion for wr_id %llu, expected %llu", (unsigned long long)wc.wr_id,
		     (unsigned long long)wr_id);
	return wc.status;
}

/* The race of item 2: WRITEs keep coming while the region moves back and
 * forth between writable memory and the read-only file. */
static struct ibv_mr *rereg_region;
static unsigned char *rereg_anon, *rereg_file;
static volatile int rereg_racing;
static unsigned long rereg_writes_ok, rereg_writes_refused;

static void *rereg_writer(void *arg)
{
	uint64_t id = 0;

	(void)arg;
	while (rereg_racing) {
		struct rc_side a, b;

		rc_pair(&a, &b, ALL_ACCESS, 7);
		fill(a.buf, VICTIM_LEN, 5);
		/* The region's iova is the address of the memory it maps, so
		 * every other WRITE aims at the file. */
		while (rereg_racing) {
			unsigned char *target = ++id % 2 ? rereg_anon : rereg_file;

			if (write_to(&a, id, (uintptr_t)target, rereg_region->rkey, VICTIM_LEN) !=
			    IBV_WC_SUCCESS) {
				rereg_writes_refused++;
				break;
			}
			rereg_writes_ok++;
		}
		rc_free(&a);
		rc_free(&b);
	}
	return NULL;
}

/* As root, before the device is opened: a root-owned file, then the
 * process becomes an unprivileged user (nobody) that will attack it. */
static void memory_setup(void)
{
	unsigned char pattern[VICTIM_LEN];
	int fd;

	fill(pattern, sizeof(pattern), 77);
	fd = open(VICTIM, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, pattern, sizeof(pattern)) != (ssize_t)sizeof(pattern) ||
	    fchown(fd, 0, 0) || fchmod(fd, 0644))
		FAIL("create %s: %s", VICTIM, strerror(errno));
	close(fd);
	if (setgid(65534) || setuid(65534))
		FAIL("drop privileges: %s", strerror(errno));
}

static void memory_test(void)
{
	struct rc_side a, b;
	int fd;

	CHECK(getuid() == 65534, "running as an unprivileged user");
	fd = open(VICTIM, O_RDONLY);
	if (fd < 0)
		FAIL("open %s read-only: %s", VICTIM, strerror(errno));
	unsigned char *file = mmap(NULL, VICTIM_LEN, PROT_READ, MAP_SHARED, fd, 0);
	if (file == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));

	/* 1. Access re-registration cannot make a read-only pin writable. */
	struct ibv_mr *mr_ro = ibv_reg_mr(pd, file, VICTIM_LEN, IBV_ACCESS_REMOTE_READ);
	if (!mr_ro)
		FAIL("ibv_reg_mr of the read-only file mapping: %s", strerror(errno));
	int ret = uverbs_rereg_mr(mr_ro, IBV_REREG_MR_CHANGE_ACCESS, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	printf("rereg of the read-only file mapping to REMOTE_WRITE: %s\n",
	       ret ? strerror(ret) : "accepted");
	rc_pair(&a, &b, ALL_ACCESS, 7);
	/* query_qp fills structs the kernel allocates without zeroing and
	 * copies to user space whole: the alternate path srnic does not keep
	 * must read as zeros, never as leftover kernel memory. */
	for (int round = 0; round < 50; round++) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;
		static const struct ibv_ah_attr zero_ah;

		memset(&qa, 0, sizeof(qa)); /* padding stays zero: only fields are copied */
		if (ibv_query_qp(a.qp, &qa, IBV_QP_STATE | IBV_QP_ALT_PATH, &qia))
			FAIL("ibv_query_qp: %s", strerror(errno));
		if (qa.alt_pkey_index || qa.alt_port_num || qa.alt_timeout ||
		    memcmp(&qa.alt_ah_attr, &zero_ah, sizeof(zero_ah)))
			FAIL("ibv_query_qp round %d: the alternate path holds bytes the kernel never set "
			     "(pkey_index %u port %u timeout %u dlid %u)", round, qa.alt_pkey_index,
			     qa.alt_port_num, qa.alt_timeout, qa.alt_ah_attr.dlid);
	}
	printf("ok: ibv_query_qp returns no stale kernel memory (50 queries)\n");
	fill(a.buf, VICTIM_LEN, 9);
	enum ibv_wc_status status = write_to(&a, 1, (uintptr_t)file, mr_ro->rkey, VICTIM_LEN);
	printf("RDMA WRITE into it: %s\n", ibv_wc_status_str(status));
	victim_expect_intact("rereg to write access");
	CHECK(ret == EACCES && status == IBV_WC_REM_ACCESS_ERR,
	      "the rereg is refused with EACCES and a WRITE gets a remote access error");
	rc_free(&a);
	rc_free(&b);
	ibv_dereg_mr(mr_ro);

	/* Writable memory pinned read-only becomes writable by re-pinning. */
	unsigned char *anon = mmap(NULL, VICTIM_LEN, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (anon == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memset(anon, 0, VICTIM_LEN);
	struct ibv_mr *mr_up = ibv_reg_mr(pd, anon, VICTIM_LEN, IBV_ACCESS_REMOTE_READ);
	if (!mr_up)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	ret = uverbs_rereg_mr(mr_up, IBV_REREG_MR_CHANGE_ACCESS, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(!ret, "writable memory registered read-only re-registers to REMOTE_WRITE (%s)",
	      ret ? strerror(ret) : "accepted");
	rc_pair(&a, &b, ALL_ACCESS, 7);
	fill(a.buf, VICTIM_LEN, 10);
	status = write_to(&a, 2, (uintptr_t)anon, mr_up->rkey, VICTIM_LEN);
	CHECK(status == IBV_WC_SUCCESS && !memcmp(anon, a.buf, VICTIM_LEN),
	      "a WRITE through the upgraded region lands in the process's memory (%s)",
	      ibv_wc_status_str(status));
	rc_free(&a);
	rc_free(&b);
	ibv_dereg_mr(mr_up);

	/* 2. Re-registration back and forth between writable memory and the
	 * read-only file while WRITEs come: access and memory change as one. */
	rereg_anon = anon;
	rereg_file = file;
	rereg_region = ibv_reg_mr(pd, anon, VICTIM_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rereg_region)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	pthread_t writer;
	rereg_racing = 1;
	if (pthread_create(&writer, NULL, rereg_writer, NULL))
		FAIL("pthread_create");
	unsigned long rounds = 0;
	for (double end = now() + 6; now() < end; rounds++) {
		const uint32_t both = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS;

		ret = uverbs_rereg_mr(rereg_region, both, file, VICTIM_LEN, IBV_ACCESS_REMOTE_READ);
		if (!ret)
			ret = uverbs_rereg_mr(rereg_region, both, anon, VICTIM_LEN,
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (ret)
			FAIL("re-registration round %lu: %s", rounds, strerror(ret));
	}
	rereg_racing = 0;
	pthread_join(writer, NULL);
	printf("%lu re-registration rounds; %lu WRITEs landed, %lu refused\n", rounds,
	       rereg_writes_ok, rereg_writes_refused);
	victim_expect_intact("WRITEs racing re-registration");
	CHECK(rereg_writes_ok > 0 && rounds > 10, "the race ran (WRITEs landed, rounds re-registered)");
	ibv_dereg_mr(rereg_region);

	/* 3. A region stays registered while a window is bound to it, so the
	 * window never comes to name a region registered after it. */
	rc_pair(&a, &b, ALL_ACCESS, 7);
	struct ibv_mr *bound = ibv_reg_mr(pd, anon, VICTIM_LEN, IBV_ACCESS_LOCAL_WRITE |
					  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	if (!bound || !mw)
		FAIL("ibv_reg_mr/ibv_alloc_mw: %s", strerror(errno));
	struct ibv_mw_bind bind = {
		.wr_id = 30, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = bound, .addr = (uintptr_t)anon, .length = VICTIM_LEN,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE },
	};
	if (ibv_bind_mw(b.qp, mw, &bind))
		FAIL("ibv_bind_mw: %s", strerror(errno));
	rc_expect(b.cq, 30, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "bind a type 1 window");
	ret = ibv_dereg_mr(bound);
	CHECK(ret == EBUSY, "deregistering a region with a window bound fails with EBUSY (%s)",
	      ret ? strerror(ret) : "deregistered");
	fill(a.buf, VICTIM_LEN, 11);
	status = write_to(&a, 31, (uintptr_t)anon, mw->rkey, VICTIM_LEN);
	CHECK(status == IBV_WC_SUCCESS && !memcmp(anon, a.buf, VICTIM_LEN),
	      "the window still writes into its own region (%s)", ibv_wc_status_str(status));
	/* A window's key checked against its PD on every use: a QP of another
	 * PD (a key another process learned, or a stale key whose index a
	 * window of another PD now holds) reaches nothing through it. */
	struct ibv_pd *own_pd = pd;
	struct rc_side c, d;
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	rc_pair(&c, &d, ALL_ACCESS, 7);
	fill(c.buf, VICTIM_LEN, 12);
	status = write_to(&c, 33, (uintptr_t)anon, mw->rkey, VICTIM_LEN);
	CHECK(status == IBV_WC_REM_ACCESS_ERR && !memcmp(anon, a.buf, VICTIM_LEN),
	      "a QP of another PD writes nothing through the window (%s)",
	      ibv_wc_status_str(status));
	rc_free(&c);
	rc_free(&d);
	ibv_dealloc_pd(pd);
	pd = own_pd;
	uint32_t window_rkey = mw->rkey;
	ibv_dealloc_mw(mw);
	status = write_to(&a, 32, (uintptr_t)anon, window_rkey, VICTIM_LEN);
	CHECK(status == IBV_WC_REM_ACCESS_ERR, "a deallocated window's key grants nothing (%s)",
	      ibv_wc_status_str(status));
	ret = ibv_dereg_mr(bound);
	CHECK(!ret, "the region deregisters once its window is gone (%s)",
	      ret ? strerror(ret) : "ok");
	rc_free(&a);
	rc_free(&b);
	munmap(anon, VICTIM_LEN);
	munmap(file, VICTIM_LEN);
	close(fd);
}

/* ---- CQ events through a completion channel ---- */

static struct ibv_comp_channel *channel;
static struct ibv_cq *event_cq;
static unsigned int events_got;

/* Whether an event for `event_cq` arrives within `ms` milliseconds. */
static int got_event(int ms)
{
	struct pollfd pfd = { .fd = channel->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cq_context;

	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	if (ibv_get_cq_event(channel, &cq, &cq_context))
		FAIL("ibv_get_cq_event: %s", strerror(errno));
	if (cq != event_cq || cq_context != &events_got)
		FAIL("an event for another CQ arrived");
	events_got++;
	return 1;
}

/* `count` SENDs from a to b, each received on b's receive CQ (taken). */
static void send_to(struct rc_side *a, struct rc_side *b, int count, int solicited)
{
	for (int i = 0; i < count; i++) {
		struct ibv_sge sge = { (uintptr_t)a->buf, 64, a->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED |
							(solicited ? IBV_SEND_SOLICITED : 0) }, *bad;

		if (rc_recv(b, 1000 + i, 0, 64) || ibv_post_send(a->qp, &wr, &bad))
			FAIL("post: %s", strerror(errno));
		struct ibv_wc sent = rc_wait(a->cq, "SEND (events)");
		struct ibv_wc got = rc_wait(event_cq, "receive (events)");

		if (sent.status != IBV_WC_SUCCESS || got.status != IBV_WC_SUCCESS ||
		    got.wr_id != 1000 + (uint64_t)i)
			FAIL("SEND %d (events): status %s, receive %llu status %s", i,
			     ibv_wc_status_str(sent.status), (unsigned long long)got.wr_id,
			     ibv_wc_status_str(got.status));
	}
}

static void events_test(void)
{
	struct rc_side a, b;
	int vector = ctx->num_comp_vectors - 1;

	channel = ibv_create_comp_channel(ctx);
	if (!channel)
		FAIL("ibv_create_comp_channel: %s", strerror(errno));
	CHECK(!ibv_create_cq(ctx, 4, NULL, channel, ctx->num_comp_vectors) && errno == EINVAL,
	      "a CQ on vector num_comp_vectors (%d) fails with EINVAL", ctx->num_comp_vectors);
	event_cq = ibv_create_cq(ctx, 64, &events_got, channel, vector);
	CHECK(event_cq, "a CQ with a completion channel on vector %d", vector);
	rc_side_init(&a);
	rc_side_init_with(&b, event_cq);
	rc_modify(a.qp, b.qp->qp_num, ALL_ACCESS, 7);
	rc_modify(b.qp, a.qp->qp_num, ALL_ACCESS, 7);

	if (ibv_req_notify_cq(event_cq, 1))
		FAIL("ibv_req_notify_cq(solicited): %s", strerror(errno));
	send_to(&a, &b, 3, 0);
	CHECK(!got_event(300), "unsolicited receives raise no event on a CQ armed for solicited");
	send_to(&a, &b, 1, 1);
	CHECK(got_event(3000), "a solicited receive raises the event");

	if (ibv_req_notify_cq(event_cq, 0))
		FAIL("ibv_req_notify_cq(next): %s", strerror(errno));
	send_to(&a, &b, 10, 0);
	CHECK(got_event(3000), "the CQ armed for the next completion raises the event");
	CHECK(!got_event(300), "ten completions after one arming raise exactly one event");
	send_to(&a, &b, 2, 1);
	CHECK(!got_event(300), "an unarmed CQ raises no event, even for solicited receives");

	if (ibv_req_notify_cq(event_cq, 0))
		FAIL("ibv_req_notify_cq(next): %s", strerror(errno));
	send_to(&a, &b, 1, 0);
	CHECK(got_event(3000), "arming again gives the next event");

	ibv_ack_cq_events(event_cq, events_got);
	rc_free(&a);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(b.mr);
	ibv_destroy_cq(b.cq);
	free(b.buf);
	CHECK(!ibv_destroy_cq(event_cq), "the event CQ is destroyed after acknowledging %u events",
	      events_got);
	ibv_destroy_comp_channel(channel);
}

/* ---- one long READ between two QPs of the device ---- */

#define BIGREAD_LEN (256u << 20)

/* Between QPs of one device the READ response is handed over in 64 KiB
 * pieces, a bounded number per run (the requester's, then the responder's
 * own work): a READ of 256 MiB takes hundreds of runs, and the WRITE
 * posted behind it has its ACK wait behind the last piece. */
/* A READ whose response needs more PSNs than half the PSN space leaves
 * minus the send window (2^31 bytes at a 256-byte path MTU) cannot be
 * told apart from older PSNs: it fails with IBV_WC_LOC_LEN_ERR, the QP
 * goes to ERR and the READ behind it is flushed, with no packet sent. The
 * peer is over the wire: this link-local GID with another last byte, a
 * permanent neighbour the test script makes (a RoCEv2 GID is resolved
 * through the neighbour table; nothing answers there). The READ lands in
 * an implicit on-demand region, so nothing is pinned. */
static long long port_counter(const char *counter);

static void longread_test(void)
{
	struct ibv_cq *cq = make_cq(16);
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);

	if (!qp)
		FAIL("longread: ibv_create_qp: %s", strerror(errno));
	union ibv_gid peer = gid;

	peer.raw[15] ^= 0x5a;
	rc_modify_to(qp, 0x11, 0, 0, IBV_MTU_256, &peer);
	struct ibv_mr *all = ibv_reg_mr(pd, NULL, SIZE_MAX,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);

	if (!all)
		FAIL("longread: ibv_reg_mr(NULL, SIZE_MAX) ON_DEMAND: %s", strerror(errno));
	long long sent = port_counter("sent_packets");
	struct ibv_sge big = { .addr = 1ull << 32, .length = 1u << 31, .lkey = all->lkey };
	struct ibv_sge small = { .addr = 1ull << 32, .length = 8, .lkey = all->lkey };
	struct ibv_send_wr behind = { .wr_id = 2, .sg_list = &small, .num_sge = 1,
				      .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &big, .num_sge = 1, .next = &behind,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = behind.wr.rdma.remote_addr = 0x10000;
	wr.wr.rdma.rkey = behind.wr.rdma.rkey = 0x1234;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("longread: ibv_post_send: %s", strerror(errno));
	rc_expect(cq, 1, IBV_WC_LOC_LEN_ERR, IBV_WC_RDMA_READ,
		  "a READ of 2^31 bytes at a 256-byte MTU over the wire");
	rc_expect(cq, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_READ, "the READ behind it");
	CHECK(port_counter("sent_packets") == sent,
	      "longread: no packet was sent (sent_packets %lld -> %lld)", sent,
	      port_counter("sent_packets"));
	ibv_destroy_qp(qp);
	ibv_dereg_mr(all);
	ibv_destroy_cq(cq);
}

static void bigread_test(void)
{
	struct rc_side a, b;
	unsigned char *src = aligned_alloc(4096, BIGREAD_LEN), *dst = aligned_alloc(4096, BIGREAD_LEN);
	struct ibv_mr *smr, *dmr;
	struct ibv_send_wr rd, wr, *bad;
	struct ibv_sge rsge, wsge;
	uint64_t ids[4];
	int st[4], got = 0;
	double start, deadline;

	if (!src || !dst)
		FAIL("bigread: out of memory");
	rc_pair(&a, &b, ALL_ACCESS, 7);
	fill(src, BIGREAD_LEN, 11);
	memset(dst, 0, BIGREAD_LEN);
	smr = ibv_reg_mr(pd, src, BIGREAD_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	dmr = ibv_reg_mr(pd, dst, BIGREAD_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !dmr)
		FAIL("bigread: ibv_reg_mr: %s", strerror(errno));
	fill(a.buf, 4096, 12);
	rsge = (struct ibv_sge){ (uintptr_t)dst, BIGREAD_LEN, dmr->lkey };
	wsge = (struct ibv_sge){ (uintptr_t)a.buf, 4096, a.mr->lkey };
	memset(&rd, 0, sizeof(rd));
	memset(&wr, 0, sizeof(wr));
	rd.wr_id = 1;
	rd.sg_list = &rsge;
	rd.num_sge = 1;
	rd.opcode = IBV_WR_RDMA_READ;
	rd.send_flags = IBV_SEND_SIGNALED;
	rd.wr.rdma.remote_addr = (uintptr_t)src;
	rd.wr.rdma.rkey = smr->rkey;
	rd.next = &wr;
	wr.wr_id = 2;
	wr.sg_list = &wsge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	start = now();
	deadline = start + 120;
	if (ibv_post_send(a.qp, &rd, &bad))
		FAIL("bigread: ibv_post_send: %s", strerror(errno));
	/* The doorbell runs the requester on the posting CPU only within a
	 * budget; the rest of the copy goes on from the QP's work. */
	double posted = now() - start;
	while (got < 2 && now() < deadline) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(a.cq, 1, &wc);

		if (n < 0)
			FAIL("bigread: ibv_poll_cq: %d", n);
		if (n) {
			ids[got] = wc.wr_id;
			st[got++] = wc.status;
		} else {
			usleep(1000);
		}
	}
	if (got < 2)
		FAIL("bigread: %d of 2 completions within 120 s", got);
	double total = now() - start;
	CHECK(posted < 1.0 && posted < total / 4,
	      "bigread: the doorbell returned after %.3f s of the %.1f s the READ took "
	      "(it copies a budget, not the whole READ)", posted, total);
	CHECK(ids[0] == 1 && st[0] == IBV_WC_SUCCESS && ids[1] == 2 && st[1] == IBV_WC_SUCCESS,
	      "bigread: the %u MiB READ, then the WRITE behind it, completed in order (%.1f s)",
	      BIGREAD_LEN >> 20, now() - start);
	CHECK(!memcmp(src, dst, BIGREAD_LEN), "bigread: %u MiB read intact", BIGREAD_LEN >> 20);
	CHECK(!memcmp(a.buf, b.buf, 4096), "bigread: the WRITE behind it intact");
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	free(src);
	free(dst);
	rc_free(&a);
	rc_free(&b);
}

/* ---- Memory paged on demand (IBV_ACCESS_ON_DEMAND) ---- */

#define ODP_LEN (64 * 1024)

/* A region of `len` bytes at `at` (NULL: anywhere): pages of the memfd
 * `fd` (shared), or anonymous private memory if `fd` < 0. */
static unsigned char *odp_map(void *at, int fd, size_t len)
{
	int flags = (at ? MAP_FIXED : 0) | (fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED);
	void *p = mmap(at, len, PROT_READ | PROT_WRITE, flags, fd, 0);

	if (p == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	return p;
}

static int odp_memfd(const char *name, size_t len)
{
	int fd = memfd_create(name, 0);

	if (fd < 0 || ftruncate(fd, len))
		FAIL("memfd %s: %s", name, strerror(errno));
	return fd;
}

/* libibverbs' command for ibv_advise_mr, which a provider without its own
 * advise_mr (librxe) does not reach (ibv_advise_mr says EOPNOTSUPP). */
int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		      struct ibv_sge *sg_list, uint32_t num_sge);

/* A port counter of the device, from sysfs. */
static long long port_counter(const char *counter)
{
	char path[256];
	long long value = -1;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
		 ibv_get_device_name(ctx->device), counter);
	FILE *f = fopen(path, "r");

	if (!f || fscanf(f, "%lld", &value) != 1)
		FAIL("read %s: %s", path, strerror(errno));
	fclose(f);
	return value;
}

/* An implicit region gets a child per 4 MiB chunk the transport or an
 * advice reaches; the kernel holds page lists and a notifier for each
 * until the region goes. Children are made only where the process maps
 * memory, at most 2048 per region: advice over more unmapped chunks than
 * that fails with EFAULT and leaves nothing behind, so a mapped chunk
 * still prefetches after them; advice over a mapping of more chunks than
 * that ends with ENOMEM. */
#define IMPLICIT_CHUNK ((size_t)4 << 20)
#define IMPLICIT_MAX_CHILDREN 2048

static void implicit_bounds_test(struct ibv_pd *pd, struct ibv_mr *all)
{
	size_t span = (IMPLICIT_MAX_CHILDREN + 2) * IMPLICIT_CHUNK;
	int prot = PROT_NONE, flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
	char *reserved = mmap(NULL, span, prot, flags, -1, 0);

	if (reserved == MAP_FAILED)
		FAIL("mmap %zu bytes: %s", span, strerror(errno));
	uintptr_t base = ((uintptr_t)reserved + IMPLICIT_CHUNK - 1) & ~(IMPLICIT_CHUNK - 1);
	struct ibv_sge sge = { .length = 4096, .lkey = all->lkey };
	int unmapped = 0, ret;

	munmap(reserved, span);
	for (size_t i = 0; i <= IMPLICIT_MAX_CHILDREN; i++) {
		sge.addr = base + i * IMPLICIT_CHUNK;
		ret = ibv_cmd_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
					IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
		unmapped += ret == EFAULT || (ret == -1 && errno == EFAULT);
	}
	CHECK(unmapped == IMPLICIT_MAX_CHILDREN + 1,
	      "ODP: advice over %d unmapped chunks of an implicit region is EFAULT (%d were)",
	      IMPLICIT_MAX_CHILDREN + 1, unmapped);
	unsigned char *mapped = odp_map(NULL, -1, ODP_LEN);

	sge.addr = (uintptr_t)mapped;
	ret = ibv_cmd_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
				&sge, 1);
	CHECK(ret == 0, "ODP: after them, advice over mapped memory still works (%d)", ret);
	munmap(mapped, ODP_LEN);

	reserved = mmap(NULL, span, prot, flags, -1, 0);
	if (reserved == MAP_FAILED)
		FAIL("mmap %zu bytes: %s", span, strerror(errno));
	base = ((uintptr_t)reserved + IMPLICIT_CHUNK - 1) & ~(IMPLICIT_CHUNK - 1);
	size_t refused_at = 0;

	for (size_t i = 0; i <= IMPLICIT_MAX_CHILDREN && !refused_at; i++) {
		sge.addr = base + i * IMPLICIT_CHUNK;
		ret = ibv_cmd_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
					IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
		if (ret == ENOMEM || (ret == -1 && errno == ENOMEM))
			refused_at = i + 1;
	}
	CHECK(refused_at > 0 && refused_at <= IMPLICIT_MAX_CHILDREN + 1,
	      "ODP: advice over a mapping of %d chunks ends with ENOMEM (at chunk %zu)",
	      IMPLICIT_MAX_CHILDREN + 1, refused_at);
	munmap(reserved, span);
}

/* ibv_advise_mr on a fresh region: prefetched pages are there when the
 * WRITE comes (no miss), and a bad key is refused. */
static void odp_advise_test(struct rc_side *a, int access)
{
	unsigned char *region = odp_map(NULL, -1, ODP_LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, region, ODP_LEN, access);

	if (!mr)
		FAIL("ibv_reg_mr ON_DEMAND: %s", strerror(errno));
	struct ibv_sge sge = { (uintptr_t)region, ODP_LEN, mr->lkey };
	int ret = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
				&sge, 1);

	printf("ibv_advise_mr through the provider: %s\n", ret ? strerror(ret) : "done");
	CHECK(ibv_cmd_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH,
				&sge, 1) == 0, "ODP: advise_mr PREFETCH_WRITE of a fresh region");
	long long misses = port_counter("odp_misses");

	fill(a->buf, ODP_LEN, 35);
	CHECK(write_to(a, 7, (uintptr_t)region, mr->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a->buf, ODP_LEN) && port_counter("odp_misses") == misses,
	      "ODP: after the prefetch the WRITE found every page present (odp_misses %lld -> %lld)",
	      misses, port_counter("odp_misses"));
	struct ibv_sge bad = { (uintptr_t)region, ODP_LEN, mr->lkey + 0x100 };

	ret = ibv_cmd_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &bad, 1);
	CHECK(ret == EINVAL || (ret == -1 && errno == EINVAL),
	      "ODP: advise_mr with a key of no region is EINVAL (%d)", ret);
	ibv_dereg_mr(mr);
	munmap(region, ODP_LEN);

	/* NO_FAULT takes in what the process has present, and faults nothing. */
	region = odp_map(NULL, -1, ODP_LEN);
	memset(region, 1, ODP_LEN);
	mr = ibv_reg_mr(pd, region, ODP_LEN, access);
	if (!mr)
		FAIL("ibv_reg_mr ON_DEMAND: %s", strerror(errno));
	sge = (struct ibv_sge){ (uintptr_t)region, ODP_LEN, mr->lkey };
	long long faults = port_counter("odp_faults");

	CHECK(ibv_cmd_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH,
				&sge, 1) == 0, "ODP: advise_mr PREFETCH_NO_FAULT of touched pages");
	misses = port_counter("odp_misses");
	fill(a->buf, ODP_LEN, 36);
	CHECK(write_to(a, 8, (uintptr_t)region, mr->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a->buf, ODP_LEN) && port_counter("odp_misses") == misses &&
	      port_counter("odp_faults") == faults,
	      "ODP: the WRITE found the pages taken in without a fault");
	ibv_dereg_mr(mr);
	munmap(region, ODP_LEN);
}

/* What WRITEs and READs through regions paged on demand do when the
 * process maps other pages, forks, or maps nothing there any more. */
static void odp_test(void)
{
	struct rc_side a, b;
	struct ibv_device_attr_ex ex;

	if (ibv_query_device_ex(ctx, NULL, &ex))
		FAIL("ibv_query_device_ex: %s", strerror(errno));
	CHECK((ex.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
	      (ex.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE) &&
	      (ex.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_READ),
	      "the device advertises on-demand paging for RC WRITE and READ");
	rc_pair(&a, &b, ALL_ACCESS, 7);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_ON_DEMAND;

	odp_advise_test(&a, access);

	/* A region over a memfd's pages, never touched before the WRITE. */
	int old_fd = odp_memfd("odp-old", ODP_LEN), new_fd = odp_memfd("odp-new", ODP_LEN);
	unsigned char *region = odp_map(NULL, old_fd, ODP_LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, region, ODP_LEN, access);

	if (!mr)
		FAIL("ibv_reg_mr ON_DEMAND: %s", strerror(errno));
	fill(a.buf, ODP_LEN, 31);
	CHECK(write_to(&a, 1, (uintptr_t)region, mr->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a.buf, ODP_LEN),
	      "ODP: a WRITE to pages never touched lands");

	/* Other pages at the same address: the next WRITE lands in them. */
	if (munmap(region, ODP_LEN))
		FAIL("munmap: %s", strerror(errno));
	if (odp_map(region, new_fd, ODP_LEN) != region)
		FAIL("mmap did not map the same address");
	fill(a.buf, ODP_LEN, 32);
	CHECK(write_to(&a, 2, (uintptr_t)region, mr->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a.buf, ODP_LEN),
	      "ODP: after munmap and mmap at the same address, the WRITE lands in the new pages");
	unsigned char *old = malloc(ODP_LEN), *want = malloc(ODP_LEN);

	if (!old || !want || pread(old_fd, old, ODP_LEN, 0) != ODP_LEN)
		FAIL("read the old pages: %s", strerror(errno));
	fill(want, ODP_LEN, 31);
	CHECK(!memcmp(old, want, ODP_LEN), "ODP: the old pages kept the first WRITE only");

	/* READ back from the region: the source pages are the new ones. */
	memset(a.buf, 0, ODP_LEN);
	struct ibv_sge sge = { (uintptr_t)a.buf, ODP_LEN, a.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)region;
	wr.wr.rdma.rkey = mr->rkey;
	if (ibv_post_send(a.qp, &wr, &bad))
		FAIL("post READ: %s", strerror(errno));
	rc_expect(a.cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "ODP: READ from the region");
	CHECK(!memcmp(a.buf, region, ODP_LEN), "ODP: the READ returned the new pages' data");
	ibv_dereg_mr(mr);
	munmap(region, ODP_LEN);

	/* An implicit region: the whole address space under one key, paged
	 * in where the transport first goes, here memory mapped after the
	 * registration. */
	CHECK(ex.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT,
	      "the device advertises implicit on-demand paging");
	struct ibv_mr *all = ibv_reg_mr(pd, NULL, SIZE_MAX, access);

	if (!all)
		FAIL("ibv_reg_mr(NULL, SIZE_MAX) ON_DEMAND: %s", strerror(errno));
	region = odp_map(NULL, -1, ODP_LEN);
	fill(a.buf, ODP_LEN, 37);
	CHECK(write_to(&a, 9, (uintptr_t)region, all->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a.buf, ODP_LEN),
	      "ODP: a WRITE through the implicit region lands in memory mapped after it");
	fill(a.buf, 8192, 38);
	CHECK(write_to(&a, 10, (uintptr_t)b.buf + 4096, all->rkey, 8192) == IBV_WC_SUCCESS &&
	      !memcmp(b.buf + 4096, a.buf, 8192),
	      "ODP: and one to other memory of the process (also pinned by another region)");
	implicit_bounds_test(pd, all);
	ibv_dereg_mr(all);
	munmap(region, ODP_LEN);

	/* fork: the parent's WRITEs land in the parent's copy of private
	 * memory, the child keeps what it had. */
	region = odp_map(NULL, -1, ODP_LEN);
	mr = ibv_reg_mr(pd, region, ODP_LEN, access);
	if (!mr)
		FAIL("ibv_reg_mr ON_DEMAND: %s", strerror(errno));
	fill(a.buf, ODP_LEN, 33);
	CHECK(write_to(&a, 4, (uintptr_t)region, mr->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a.buf, ODP_LEN), "ODP: a WRITE to private memory lands");
	int go[2];

	if (pipe(go))
		FAIL("pipe: %s", strerror(errno));
	pid_t child = fork();

	if (child < 0)
		FAIL("fork: %s", strerror(errno));
	if (child == 0) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		fill(want, ODP_LEN, 33);
		_exit(memcmp(region, want, ODP_LEN) ? 1 : 0);
	}
	close(go[0]);
	fill(a.buf, ODP_LEN, 34);
	CHECK(write_to(&a, 5, (uintptr_t)region, mr->rkey, ODP_LEN) == IBV_WC_SUCCESS &&
	      !memcmp(region, a.buf, ODP_LEN),
	      "ODP: after fork, the parent's WRITE lands in the parent's copy");
	int status;

	if (write(go[1], "g", 1) != 1 || waitpid(child, &status, 0) != child)
		FAIL("child: %s", strerror(errno));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "ODP: the child's copy still holds what it had at fork (status %d)", status);
	close(go[1]);

	/* Nothing mapped there any more: the WRITE fails with an access
	 * error, it does not wait for ever (the pair is spent). */
	if (munmap(region, ODP_LEN))
		FAIL("munmap: %s", strerror(errno));
	CHECK(write_to(&a, 6, (uintptr_t)region, mr->rkey, 4096) == IBV_WC_REM_ACCESS_ERR,
	      "ODP: a WRITE to an unmapped range of the region is a remote access error");
	ibv_dereg_mr(mr);
	close(old_fd);
	close(new_fd);
	free(old);
	free(want);
	rc_free(&a);
	rc_free(&b);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		FAIL("usage: %s DEVICE limits|flush|race|hostile|rc|memory|bigread|odp|events|hold|watch",
		     argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[2], "memory"))
		memory_setup();
	open_device(argv[1]);
	if (!strcmp(argv[2], "limits"))
		limits_test();
	else if (!strcmp(argv[2], "flush"))
		flush_test();
	else if (!strcmp(argv[2], "race"))
		race_test();
	else if (!strcmp(argv[2], "hostile"))
		hostile_test();
	else if (!strcmp(argv[2], "rc")) {
		rc_data_test();
		rc_error_test();
	}
	else if (!strcmp(argv[2], "bigread")) {
		bigread_test();
		longread_test();
	}
	else if (!strcmp(argv[2], "odp"))
		odp_test();
	else if (!strcmp(argv[2], "events"))
		events_test();
	else if (!strcmp(argv[2], "memory"))
		memory_test();
	else if (!strcmp(argv[2], "hold"))
		hold(0);
	else if (!strcmp(argv[2], "watch"))
		hold(1);
	else
		FAIL("unknown test %s", argv[2]);
	return 0;
}
