// SPDX-License-Identifier: GPL-2.0
/*
 * The live side of the guest fuzzer (tests/lib/roce_fuzz.py starts it):
 *
 *   fuzz_target DEVICE GID_INDEX PEER_IPV4
 *
 * Owns, in one mapping, memory regions separated by pages that are never
 * registered (the guards, 0xA5):
 *
 *   rw     PD A, remote write, read and atomic; starts 48 bytes into its
 *          first page and ends 80 bytes before the end of its last, so the
 *          bytes around it share pinned pages with it
 *   ro     PD A, remote read only
 *   local  PD A, local write only (no remote access)
 *   recv   PD A, local write: the receive buffers, 192 bytes at offset 32
 *          of each 256-byte slot, the rest 0x5A
 *   other  PD B, every remote access
 *
 * and prints "region NAME VA LENGTH KEY" for each, "mtu BYTES" (the
 * port's active MTU, which the QPs use), then "ready". It then
 * reads commands on stdin and answers each with one line on stdout:
 *
 *   qp DEST_QPN PSN   destroys the QP of the last round (reporting the
 *                     state it was in and its receive completions) and
 *                     makes a new RC QP in PD A, in RTS, with PEER_IPV4 and
 *                     DEST_QPN as its remote and PSN as its expected PSN,
 *                     with 8 receives posted: "qp QPN"
 *   check             every guard, ro, local, other and the unreceived
 *                     bytes of recv hold what they were filled with:
 *                     "ok ..." or "FAIL: ..."
 *   quit              "bye", with the totals
 *
 * The rw region's contents are the fuzzer's to check (it models every
 * write and compares every READ response with its model).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); fflush(stdout); exit(1); } while (0)

#define PAGE 4096
#define PAGES 13
#define GUARD 0xA5
#define SLOT 256
#define SLOT_AT 32
#define SLOT_LEN 192
#define SLOTS 16
#define RECVS 8

/* Page layout of the mapping: the even pages outside rw are guards. */
enum { RW_PAGE = 1, RW_PAGES = 3, RO_PAGE = 5, LOCAL_PAGE = 7, RECV_PAGE = 9, OTHER_PAGE = 11 };
#define RW_HEAD 48
#define RW_TAIL 80

static unsigned char *mem;
static struct ibv_context *ctx;
static struct ibv_pd *pd, *pd_other;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr_rw, *mr_ro, *mr_local, *mr_recv, *mr_other;
static union ibv_gid peer_gid;
static int gid_index;
static unsigned qps, recv_ok, recv_err, qp_errors;

/* The fill of each region: distinct per region, so a byte in the wrong
 * place says where it came from. */
static unsigned char fill_of(int page, size_t at)
{
	return (unsigned char)((at * 131 + (size_t)page * 29 + (at >> 8)) ^ 0x3C);
}

static struct ibv_mr *reg(struct ibv_pd *in, void *at, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(in, at, len, access);

	if (!mr)
		FAIL("reg_mr: %s", strerror(errno));
	return mr;
}

static void describe(const char *name, struct ibv_mr *mr, size_t len)
{
	printf("region %s %llu %zu %u\n", name, (unsigned long long)(uintptr_t)mr->addr, len,
	       mr->rkey ? mr->rkey : mr->lkey);
}

static void post_recvs(void)
{
	for (unsigned i = 0; i < RECVS; i++) {
		unsigned slot = (qps * RECVS + i) % SLOTS;
		struct ibv_sge sge = { (uintptr_t)(mem + RECV_PAGE * PAGE + slot * SLOT + SLOT_AT),
				       SLOT_LEN, mr_recv->lkey };
		struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			FAIL("post_recv: %s", strerror(errno));
	}
}

/* Reaps the receive completions of the QP of the last round. */
static void reap(void)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].status == IBV_WC_SUCCESS) {
				recv_ok++;
				/* A WRITE with immediate reports the WRITE's length. */
				if (wc[i].opcode == IBV_WC_RECV && wc[i].byte_len > SLOT_LEN)
					FAIL("a receive completed with %u bytes in a %u-byte buffer",
					     wc[i].byte_len, SLOT_LEN);
			} else {
				recv_err++;
			}
		}
	}
	if (n < 0)
		FAIL("poll_cq: %d", n);
}

static void new_qp(uint32_t dest, uint32_t psn)
{
	const char *state = "none";

	if (qp) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
			FAIL("query_qp: %s", strerror(errno));
		state = a.qp_state == IBV_QPS_RTS ? "RTS" : a.qp_state == IBV_QPS_ERR ? "ERR" : "other";
		if (a.qp_state == IBV_QPS_ERR)
			qp_errors++;
		else if (a.qp_state != IBV_QPS_RTS)
			FAIL("the QP of round %u is in state %d, neither RTS nor ERR", qps, a.qp_state);
		reap();
		if (ibv_destroy_qp(qp))
			FAIL("destroy_qp: %s", strerror(errno));
		reap();
	}
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	qp = ibv_create_qp(pd, &init);
	if (!qp)
		FAIL("create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		FAIL("INIT: %s", strerror(errno));
	post_recvs();
	struct ibv_port_attr port;

	if (ibv_query_port(ctx, 1, &port))
		FAIL("query_port: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = dest;
	a.rq_psn = psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer_gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 14;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS: %s", strerror(errno));
	qps++;
	printf("qp %u (the last one was %s)\n", qp->qp_num, state);
}

/* Bytes of page PAGE from FROM to TO must hold their fill (or GUARD). */
static size_t expect_fill(int page, size_t from, size_t to, int guard, const char *what)
{
	const unsigned char *p = mem + (size_t)page * PAGE;

	for (size_t i = from; i < to; i++) {
		unsigned char want = guard >= 0 ? (unsigned char)guard : fill_of(page, i);

		if (p[i] != want)
			FAIL("%s: byte %zu of page %d is %#x, expected %#x", what, i, page, p[i], want);
	}
	return to - from;
}

static void check(void)
{
	size_t n = 0;

	for (int page = 0; page < PAGES; page += 2)
		if (page < RW_PAGE || page >= RW_PAGE + RW_PAGES)
			n += expect_fill(page, 0, PAGE, GUARD, "an unregistered guard page changed");
	n += expect_fill(RW_PAGE, 0, RW_HEAD, GUARD, "the bytes before rw (same page) changed");
	n += expect_fill(RW_PAGE + RW_PAGES - 1, PAGE - RW_TAIL, PAGE, GUARD,
			 "the bytes after rw (same page) changed");
	n += expect_fill(RO_PAGE, 0, PAGE, -1, "the remote-read-only region changed");
	n += expect_fill(LOCAL_PAGE, 0, PAGE, -1, "the local-only region changed");
	n += expect_fill(OTHER_PAGE, 0, PAGE, -1, "the region of the other PD changed");
	for (int s = 0; s < SLOTS; s++) {
		n += expect_fill(RECV_PAGE, s * SLOT, s * SLOT + SLOT_AT, 0x5A,
				 "bytes before a receive buffer changed");
		n += expect_fill(RECV_PAGE, s * SLOT + SLOT_AT + SLOT_LEN, (s + 1) * SLOT, 0x5A,
				 "bytes after a receive buffer changed");
	}
	printf("ok %zu bytes outside rw as filled\n", n);
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct in_addr peer;
	char line[128];

	if (argc != 4 || inet_pton(AF_INET, argv[3], &peer) != 1)
		FAIL("usage: fuzz_target DEVICE GID_INDEX PEER_IPV4");
	gid_index = atoi(argv[2]);
	memset(&peer_gid, 0, sizeof(peer_gid));
	peer_gid.raw[10] = 0xff;
	peer_gid.raw[11] = 0xff;
	memcpy(&peer_gid.raw[12], &peer, 4);

	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		FAIL("no device %s", argv[1]);
	mem = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memset(mem, GUARD, PAGES * PAGE);
	for (int page = 1; page < PAGES; page++)
		if (page % 2 || (page >= RW_PAGE && page < RW_PAGE + RW_PAGES))
			for (size_t i = 0; i < PAGE; i++)
				mem[(size_t)page * PAGE + i] = fill_of(page, i);
	memset(mem + RW_PAGE * PAGE, GUARD, RW_HEAD);
	memset(mem + (RW_PAGE + RW_PAGES) * PAGE - RW_TAIL, GUARD, RW_TAIL);
	memset(mem + RECV_PAGE * PAGE, 0x5A, PAGE);

	pd = ibv_alloc_pd(ctx);
	pd_other = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !pd_other || !cq)
		FAIL("alloc_pd/create_cq: %s", strerror(errno));
	size_t rw_len = RW_PAGES * PAGE - RW_HEAD - RW_TAIL;

	mr_rw = reg(pd, mem + RW_PAGE * PAGE + RW_HEAD, rw_len,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC);
	mr_ro = reg(pd, mem + RO_PAGE * PAGE, PAGE, IBV_ACCESS_REMOTE_READ);
	mr_local = reg(pd, mem + LOCAL_PAGE * PAGE, PAGE, IBV_ACCESS_LOCAL_WRITE);
	mr_recv = reg(pd, mem + RECV_PAGE * PAGE, PAGE, IBV_ACCESS_LOCAL_WRITE);
	mr_other = reg(pd_other, mem + OTHER_PAGE * PAGE, PAGE,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC);
	describe("rw", mr_rw, rw_len);
	describe("ro", mr_ro, PAGE);
	describe("local", mr_local, PAGE);
	describe("recv", mr_recv, PAGE);
	describe("other", mr_other, PAGE);
	struct ibv_port_attr port;

	if (ibv_query_port(ctx, 1, &port))
		FAIL("query_port: %s", strerror(errno));
	printf("mtu %d\n", 128 << port.active_mtu);
	printf("ready\n");
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin)) {
		unsigned dest, psn;

		if (sscanf(line, "qp %u %u", &dest, &psn) == 2)
			new_qp(dest, psn);
		else if (!strncmp(line, "check", 5))
			check();
		else if (!strncmp(line, "quit", 4)) {
			if (qp) {
				reap();
				ibv_destroy_qp(qp);
				reap();
			}
			check();
			printf("bye: %u QPs (%u ended in ERR), %u receives completed, %u flushed or failed\n",
			       qps, qp_errors, recv_ok, recv_err);
			fflush(stdout);
			return 0;
		} else
			FAIL("unknown command: %s", line);
		fflush(stdout);
	}
	FAIL("stdin closed without quit");
}
