// SPDX-License-Identifier: GPL-2.0
/*
 * Every RC opcode between two nodes, with the data checked on the other
 * side. Each node runs
 *
 *   rc_data DEVICE GID_INDEX ROLE SHARED_DIR MIB [death|lossy]
 *
 * with ROLE a (the responder's side) or b (the requester's), where
 * SHARED_DIR is a directory both see: the nodes exchange their QP number,
 * PSN, GID and buffer through files there, then b moves MIB mebibytes each
 * of SEND (with immediate), RDMA WRITE and RDMA READ, and runs both
 * atomics, then DEEP READs and DEEP FETCH_AND_ADDs outstanding at once
 * (the QP's full max_rd_atomic), then a stream of small unsignaled
 * WRITEs, while a checks what arrives. The bytes follow a pattern both sides compute, so every byte is
 * checked without a second transfer.
 *
 * With "death", b keeps SENDs outstanding while a's side deletes its
 * device (the script does, when a says "doomed"): b must see its oldest
 * SEND fail with RETRY_EXC_ERR within the time timeout and retry_cnt
 * give, and every later one flushed.
 *
 * Prints "ok: ..." lines, or "FAIL: ..." and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

#define CHUNK (1024 * 1024)
#define DEPTH 16
/* READs and atomics outstanding at once: max_qp_rd_atom of srnic and rxe. */
#define DEEP 128
#define DEEP_READ_BYTES (CHUNK / DEEP)

struct info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static unsigned char *buf;  /* DEPTH chunks, then a page for atomics */
static struct info me, peer;
static char role;
/* Where the two sides meet (set in main). */
static struct rendezvous rdv;

static unsigned char pattern(uint32_t stream, uint64_t at)
{
	uint64_t x = (stream + 1) * 0x9e3779b97f4a7c15ull ^ (at / 8) * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	return x >> (8 * (at % 8));
}

static void fill(unsigned char *p, uint32_t stream, uint64_t from, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(stream, from + i);
}

static void check(const unsigned char *p, uint32_t stream, uint64_t from, size_t len,
		  const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(stream, from + i))
			FAIL("%s: byte %llu is %#x, expected %#x", what,
			     (unsigned long long)(from + i), p[i], pattern(stream, from + i));
}

static struct ibv_wc wait_wc(const char *what)
{
	struct ibv_wc wc;
	double deadline = now() + 120;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			FAIL("%s: poll: %d", what, n);
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				FAIL("%s: completion status %s (wr_id %llu)", what,
				     ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
			return wc;
		}
		if (now() > deadline)
			FAIL("%s: no completion within 120 s", what);
	}
}

static void post_recv(uint64_t id, unsigned char *at, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)at, len, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		FAIL("post_recv: %s", strerror(errno));
}

static void post_send(enum ibv_wr_opcode op, uint64_t id, unsigned char *at, size_t len,
		      uint64_t remote, uint32_t imm)
{
	struct ibv_sge sge = { (uintptr_t)at, len, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm) }, *bad;

	wr.wr.rdma.remote_addr = remote;
	wr.wr.rdma.rkey = peer.rkey;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("post_send: %s", strerror(errno));
}

/* Small WRITEs in the stream below, and their size. */
#define SMALL_WRITES 2000
#define SMALL_BYTES 64

/* The last writes go in bursts this long, each followed by a pause. */
#define SMALL_BURST 10

/* SMALL_WRITES unsignaled WRITEs but the last, as fast as the send queue
 * takes them (a full queue frees slots only as the peer acknowledges),
 * then the last few in bursts with a pause after each: the ends of
 * unsignaled messages ask for no acknowledgement, so a burst's quiet tail
 * is acknowledged only once the requester's tail probe asks for it. The
 * last WRITE, signaled, comes after a pause, so that it does not draw the
 * acknowledgement for them. */
static void small_writes_b(void)
{
	double t = now(), deadline = t + 120;

	for (unsigned i = 0; i < SMALL_WRITES; i++) {
		unsigned char *at = buf + (size_t)i * SMALL_BYTES;
		int last = i + 1 == SMALL_WRITES;
		struct ibv_sge sge = { (uintptr_t)at, SMALL_BYTES, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = last ? IBV_SEND_SIGNALED : 0 }, *bad;
		unsigned from_end = SMALL_WRITES - 1 - i;
		int err;

		if (from_end <= 3 * SMALL_BURST && from_end % SMALL_BURST == 0)
			usleep(100000);
		fill(at, 4, (uint64_t)i * SMALL_BYTES, SMALL_BYTES);
		wr.wr.rdma.remote_addr = peer.addr + (uint64_t)i * SMALL_BYTES;
		wr.wr.rdma.rkey = peer.rkey;
		while ((err = ibv_post_send(qp, &wr, &bad)) == ENOMEM)
			if (now() > deadline)
				FAIL("small WRITE %u: the send queue stayed full for 120 s", i);
		if (err)
			FAIL("small WRITE %u: %s", i, strerror(err));
	}
	wait_wc("the last small WRITE");
	printf("ok: %u unsignaled %u-byte WRITEs in %.1f s\n", SMALL_WRITES, SMALL_BYTES,
	       now() - t);
	say_to(&rdv, "small", NULL, 0);
}

static void atomic(enum ibv_wr_opcode op, uint64_t add_or_compare, uint64_t swap, uint64_t *result)
{
	struct ibv_sge sge = { (uintptr_t)result, 8, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.atomic.remote_addr = peer.addr + DEPTH * (uint64_t)CHUNK;
	wr.wr.atomic.rkey = peer.rkey;
	wr.wr.atomic.compare_add = add_or_compare;
	wr.wr.atomic.swap = swap;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("atomic post: %s", strerror(errno));
	wait_wc("atomic");
}

static void connect_qp(int gid_index)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		FAIL("INIT: %s", strerror(errno));
	/* The port's active MTU (1024 on a 1500-byte netdev; both ends of our
	 * tests have the same netdev MTU). */
	struct ibv_port_attr port;

	if (ibv_query_port(ctx, 1, &port))
		FAIL("query_port: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = DEEP;
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
	a.max_rd_atomic = DEEP;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS: %s", strerror(errno));
}

/* Rounds of DEEP READs: more on a lossy wire, where a lost response
 * among many outstanding READs is what the rounds are for (one round
 * missed the bug fixed on 2026-11-28 in four runs of five). */
static unsigned deep_rounds = 1;

/* Rounds of DEEP READs of the peer's first chunk, then DEEP
 * FETCH_AND_ADDs, all posted before the first completes: each must
 * complete in order with its own bytes or value. The counter holds 42
 * when they start. */
static void deep_b(void)
{
	uint64_t *results = (uint64_t *)(buf + DEPTH * (size_t)CHUNK + 128);
	struct ibv_wc wc;
	double t = now();

	for (unsigned round = 0; round < deep_rounds; round++) {
		memset(buf, 0, CHUNK);
		for (unsigned i = 0; i < DEEP; i++)
			post_send(IBV_WR_RDMA_READ, i, buf + i * DEEP_READ_BYTES, DEEP_READ_BYTES,
				  peer.addr + i * DEEP_READ_BYTES, 0);
		for (unsigned i = 0; i < DEEP; i++) {
			wc = wait_wc("deep READ");
			if (wc.wr_id != i)
				FAIL("deep READ %u completed as %llu", i,
				     (unsigned long long)wc.wr_id);
		}
		check(buf, 3, 0, CHUNK, "deep READ");
	}
	printf("ok: %u rounds of %u READs of %u bytes outstanding at once, every byte as the "
	       "peer wrote it, in %.1f s\n", deep_rounds, DEEP, DEEP_READ_BYTES, now() - t);

	t = now();
	for (unsigned i = 0; i < DEEP; i++) {
		struct ibv_sge sge = { (uintptr_t)&results[i], 8, mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.wr.atomic.remote_addr = peer.addr + DEPTH * (uint64_t)CHUNK;
		wr.wr.atomic.rkey = peer.rkey;
		wr.wr.atomic.compare_add = 1;
		if (ibv_post_send(qp, &wr, &bad))
			FAIL("deep FETCH_AND_ADD %u: %s", i, strerror(errno));
	}
	for (unsigned i = 0; i < DEEP; i++) {
		wc = wait_wc("deep FETCH_AND_ADD");
		if (wc.wr_id != i || results[i] != 42 + i)
			FAIL("deep FETCH_AND_ADD %u completed as %llu with %llu, expected %u", i,
			     (unsigned long long)wc.wr_id, (unsigned long long)results[i], 42 + i);
	}
	printf("ok: %u FETCH_AND_ADDs outstanding at once returned the right values in %.1f s\n",
	       DEEP, now() - t);
}

/* The requester's side: SEND, WRITE, READ, atomics. */
/* Bytes per RDMA READ: 1 MiB, or 64 KiB on a lossy wire (go-back-N
 * replays the rest of a READ after each gap). */
static size_t read_size = CHUNK;

static void run_b(unsigned mib)
{
	double t = now();

	for (unsigned i = 0; i < mib; i++) {
		unsigned char *at = buf + (i % DEPTH) * (size_t)CHUNK;

		fill(at, 1, (uint64_t)i * CHUNK, CHUNK);
		post_send(IBV_WR_SEND_WITH_IMM, i, at, CHUNK, 0, i);
		wait_wc("SEND");
	}
	printf("ok: %u MiB of SEND_WITH_IMM in %.1f s\n", mib, now() - t);

	t = now();
	for (unsigned i = 0; i < mib; i++) {
		unsigned char *at = buf + (i % DEPTH) * (size_t)CHUNK;

		fill(at, 2, (uint64_t)i * CHUNK, CHUNK);
		post_send(i + 1 == mib ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, i, at, CHUNK,
			  peer.addr + (i % DEPTH) * (uint64_t)CHUNK, i);
		wait_wc("WRITE");
		if (i % DEPTH == DEPTH - 1 || i + 1 == mib) {
			/* The peer checks the round before it is overwritten. */
			char name[32];

			snprintf(name, sizeof(name), "written%u", i / DEPTH);
			say_to(&rdv, name, NULL, 0);
			snprintf(name, sizeof(name), "checked%u", i / DEPTH);
			hear_from(&rdv, name, NULL, 0);
		}
	}
	printf("ok: %u MiB of RDMA_WRITE in %.1f s\n", mib, now() - t);

	hear_from(&rdv, "filled", NULL, 0);
	t = now();
	for (unsigned i = 0; i < mib; i++) {
		unsigned char *at = buf + (i % DEPTH) * (size_t)CHUNK;

		memset(at, 0, CHUNK);
		for (size_t off = 0; off < CHUNK; off += read_size) {
			post_send(IBV_WR_RDMA_READ, i, at + off, read_size,
				  peer.addr + (i % DEPTH) * (uint64_t)CHUNK + off, 0);
			wait_wc("READ");
		}
		check(at, 3, (uint64_t)(i % DEPTH) * CHUNK, CHUNK, "READ");
	}
	printf("ok: %u MiB of RDMA_READ, every byte as the peer wrote it, in %.1f s\n", mib,
	       now() - t);

	uint64_t *result = (uint64_t *)(buf + DEPTH * (size_t)CHUNK + 64);
	for (unsigned i = 0; i < 100; i++) {
		atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 3, 0, result);
		if (*result != 1000 + 3 * (uint64_t)i)
			FAIL("FETCH_AND_ADD %u returned %llu, expected %llu", i,
			     (unsigned long long)*result, 1000 + 3ull * i);
	}
	atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 1300, 42, result);
	if (*result != 1300)
		FAIL("CMP_AND_SWP returned %llu, expected 1300", (unsigned long long)*result);
	atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 1300, 7, result);
	if (*result != 42)
		FAIL("CMP_AND_SWP without a match returned %llu, expected 42",
		     (unsigned long long)*result);
	printf("ok: 100 FETCH_AND_ADD and 2 CMP_AND_SWP returned the right values\n");
	deep_b();
	say_to(&rdv, "atomics", NULL, 0);
	small_writes_b();
}

/* The responder's side: check what arrives. */
static void run_a(unsigned mib)
{
	uint64_t *counter = (uint64_t *)(buf + DEPTH * (size_t)CHUNK);

	*counter = 1000;
	for (unsigned i = 0; i < DEPTH && i < mib; i++)
		post_recv(i, buf + i * (size_t)CHUNK, CHUNK);
	for (unsigned i = 0; i < mib; i++) {
		struct ibv_wc wc = wait_wc("receive");
		unsigned char *at = buf + (wc.wr_id % DEPTH) * (size_t)CHUNK;

		if (wc.wr_id != i || wc.byte_len != CHUNK || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
		    ntohl(wc.imm_data) != i)
			FAIL("receive %u: wr_id %llu, %u bytes, immediate %u", i,
			     (unsigned long long)wc.wr_id, wc.byte_len, ntohl(wc.imm_data));
		check(at, 1, (uint64_t)i * CHUNK, CHUNK, "SEND");
		if (i + DEPTH < mib)
			post_recv(i + DEPTH, at, CHUNK);
	}
	printf("ok: %u MiB received, every byte intact, immediates in order\n", mib);

	post_recv(1000, buf, 0);
	for (unsigned round = 0; round * DEPTH < mib; round++) {
		char name[32];
		unsigned last = (round + 1) * DEPTH < mib ? (round + 1) * DEPTH : mib;

		snprintf(name, sizeof(name), "written%u", round);
		hear_from(&rdv, name, NULL, 0);
		for (unsigned i = round * DEPTH; i < last; i++)
			check(buf + (i % DEPTH) * (size_t)CHUNK, 2, (uint64_t)i * CHUNK, CHUNK,
			      "WRITE");
		snprintf(name, sizeof(name), "checked%u", round);
		say_to(&rdv, name, NULL, 0);
	}
	struct ibv_wc wc = wait_wc("WRITE_WITH_IMM receive");
	if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || ntohl(wc.imm_data) != mib - 1)
		FAIL("WRITE_WITH_IMM: opcode %d immediate %u", wc.opcode, ntohl(wc.imm_data));
	printf("ok: %u MiB written into this node, every byte intact\n", mib);

	fill(buf, 3, 0, (size_t)DEPTH * CHUNK);
	say_to(&rdv, "filled", NULL, 0);
	hear_from(&rdv, "atomics", NULL, 0);
	if (*counter != 42 + DEEP)
		FAIL("the atomic target holds %llu, expected %u", (unsigned long long)*counter,
		     42 + DEEP);
	printf("ok: the atomic target ends at %llu\n", (unsigned long long)*counter);
	hear_from(&rdv, "small", NULL, 0);
	check(buf, 4, 0, (size_t)SMALL_WRITES * SMALL_BYTES, "small WRITE");
	printf("ok: %u small WRITEs, every byte intact\n", SMALL_WRITES);
}

/* b's side of "death": SENDs outstanding while the peer goes away. */
static void death_b(void)
{
	const int count = 16;
	int ok = 0, retry = 0, flushed = 0;

	for (int i = 0; i < count; i++)
		post_send(IBV_WR_SEND, i, buf + (i % DEPTH) * (size_t)CHUNK, 65536, 0, 0);
	hear_from(&rdv, "gone", NULL, 0);
	double t = now(), deadline = t + 60;
	while (ok + retry + flushed < count && now() < deadline) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			FAIL("poll: %d", n);
		if (!n)
			continue;
		if (wc.status == IBV_WC_SUCCESS && !retry && !flushed)
			ok++;
		else if (wc.status == IBV_WC_RETRY_EXC_ERR && !retry && !flushed) {
			retry++;
			printf("ok: SEND %llu failed with RETRY_EXC_ERR %.1f s after the peer went\n",
			       (unsigned long long)wc.wr_id, now() - t);
		} else if (wc.status == IBV_WC_WR_FLUSH_ERR && retry)
			flushed++;
		else
			FAIL("completion %llu: %s after %d ok, %d retry, %d flushed",
			     (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), ok, retry,
			     flushed);
	}
	if (retry != 1 || ok + retry + flushed != count)
		FAIL("%d SENDs completed, %d retry-exceeded, %d flushed of %d within 60 s", ok, retry,
		     flushed, count);
	printf("ok: %d SENDs done before, 1 RETRY_EXC_ERR, %d flushed after\n", ok, flushed);
}

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 7)
		FAIL("usage: %s DEVICE GID_INDEX a|b SHARED_DIR MIB [death|lossy]", argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int gid_index = atoi(argv[2]);
	role = argv[3][0];
	rdv = (struct rendezvous){
		.dir = argv[4],
		.prog = "rc_data",
		.me = role,
		.other = role == 'a' ? 'b' : 'a',
		.wait_s = 300,
	};
	unsigned mib = atoi(argv[5]);
	struct ibv_device **list = ibv_get_device_list(NULL);

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		FAIL("cannot open %s", argv[1]);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 2 * DEEP, NULL, NULL, 0);
	buf = aligned_alloc(4096, DEPTH * (size_t)CHUNK + 4096);
	if (!pd || !cq || !buf)
		FAIL("setup: %s", strerror(errno));
	memset(buf, 0, DEPTH * (size_t)CHUNK + 4096);
	mr = ibv_reg_mr(pd, buf, DEPTH * (size_t)CHUNK + 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = DEEP, .max_recv_wr = 32,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	qp = ibv_create_qp(pd, &qa);
	if (!mr || !qp || ibv_query_gid(ctx, 1, gid_index, &me.gid))
		FAIL("setup: %s", strerror(errno));
	me.qpn = qp->qp_num;
	me.psn = (role == 'a' ? 0x111111 : 0xfffff0);  /* b's PSNs wrap */
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	say_to(&rdv, "info", &me, sizeof(me));
	hear_from(&rdv, "info", &peer, sizeof(peer));
	connect_qp(gid_index);
	say_to(&rdv, "connected", NULL, 0);
	hear_from(&rdv, "connected", NULL, 0);
	if (argc == 7 && !strcmp(argv[6], "lossy")) {
		read_size = 65536;
		deep_rounds = 10;
	}
	else if (argc == 7) {
		if (role == 'a') {
			/* No receives: b's SENDs wait (RNR) until the device goes. */
			say_to(&rdv, "doomed", NULL, 0);
			hear_from(&rdv, "done", NULL, 0);
		} else {
			death_b();
			say_to(&rdv, "done", NULL, 0);
		}
		return 0;
	}
	if (role == 'a')
		run_a(mib);
	else
		run_b(mib);
	say_to(&rdv, "bye", NULL, 0);
	hear_from(&rdv, "bye", NULL, 0);
	return 0;
}
