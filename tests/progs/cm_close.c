// SPDX-License-Identifier: GPL-2.0
/*
 * Connection teardown under traffic, through rdma_cm.
 *
 *   cm_close server ADDR PORT QPS
 *   cm_close client ADDR PORT QPS graceful|abort
 *
 * The client opens QPS connections; each has its own CQ and a thread on
 * CPU (n % CPUs) that keeps its send queue full of signaled SENDs and RDMA
 * WRITEs to the server, which keeps each receive queue full. Then:
 *   graceful  the client disconnects every connection while its threads
 *             are still posting;
 *   abort     the client prints "traffic" and the test kills the server;
 *             the client learns it from rdma_cm (the server's kernel sends
 *             the DREQ for the dead process);
 *   gone      the client prints "traffic" and the server's node leaves the
 *             wire: nothing answers, the retries run out, and the client
 *             closes each connection whose QP failed.
 * Either way both sides must see RDMA_CM_EVENT_DISCONNECTED (the killed
 * server excepted), and on every QP every WR that was accepted must
 * complete exactly once, in posting order: successes, then errors or
 * flushes, none lost, none twice, within a bounded time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define MAX_QPS 16
#define DEPTH 64
#define MSG 256
#define MAX_WRS (1 << 20)

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* What the server tells each client connection: where RDMA WRITEs go. */
struct target {
	uint64_t addr;
	uint32_t rkey;
};

struct conn {
	int index;
	int server;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *buf;
	struct target peer;
	pthread_t thread;
	volatile int established;
	volatile int stop_posting;      /* no new WRs from here on */
	volatile int disconnected;      /* RDMA_CM_EVENT_DISCONNECTED seen */
	volatile int failed;            /* a WR completed in error (not flushed) */
	uint64_t posted;                /* wr_ids 0..posted-1 were accepted */
	uint64_t completed;             /* the next wr_id expected */
	uint64_t succeeded, errors;
	unsigned char *seen;
};

static struct conn conns[MAX_QPS];
static int nconns;

static void setup_conn(struct conn *c, struct rdma_cm_id *id, int server)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	c->id = id;
	c->server = server;
	id->context = c;
	c->pd = ibv_alloc_pd(id->verbs);
	c->cq = ibv_create_cq(id->verbs, 2 * DEPTH, NULL, NULL, 0);
	c->buf = calloc(DEPTH, MSG);
	c->seen = calloc(MAX_WRS, 1);
	if (!c->pd || !c->cq || !c->buf || !c->seen)
		fail("connection %d: resources: %s", c->index, strerror(errno));
	c->mr = ibv_reg_mr(c->pd, c->buf, DEPTH * MSG,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!c->mr)
		fail("connection %d: reg_mr: %s", c->index, strerror(errno));
	attr.send_cq = attr.recv_cq = c->cq;
	if (rdma_create_qp(id, c->pd, &attr))
		fail("connection %d: create_qp: %s", c->index, strerror(errno));
}

/* Posts the next WR (wr_id = c->posted); whether it was accepted. */
static int post_next(struct conn *c)
{
	uint64_t id = c->posted;
	struct ibv_sge sge = { (uintptr_t)c->buf + (id % DEPTH) * MSG, MSG, c->mr->lkey };
	int err;

	if (id >= MAX_WRS)
		return 0;
	if (c->server) {
		struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

		err = ibv_post_recv(c->id->qp, &wr, &bad);
	} else {
		struct ibv_send_wr wr = {
			.wr_id = id, .sg_list = &sge, .num_sge = 1,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		if (id % 2) {
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.wr.rdma.remote_addr = c->peer.addr + (id % DEPTH) * MSG;
			wr.wr.rdma.rkey = c->peer.rkey;
		} else {
			wr.opcode = IBV_WR_SEND;
		}
		err = ibv_post_send(c->id->qp, &wr, &bad);
	}
	if (err)
		return 0;
	__atomic_store_n(&c->posted, id + 1, __ATOMIC_RELEASE);
	return 1;
}

static void take(struct conn *c, const struct ibv_wc *wc)
{
	uint64_t id = wc->wr_id;

	if (id >= MAX_WRS || c->seen[id]++)
		fail("connection %d: wr_id %llu completed twice or is unknown", c->index,
		     (unsigned long long)id);
	if (id != c->completed)
		fail("connection %d: wr_id %llu completed before %llu", c->index,
		     (unsigned long long)id, (unsigned long long)c->completed);
	if (wc->status == IBV_WC_SUCCESS) {
		if (c->errors)
			fail("connection %d: wr_id %llu succeeded after an error completion",
			     c->index, (unsigned long long)id);
		c->succeeded++;
	} else {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			c->failed = 1;
		c->errors++;
	}
	c->completed++;
}

/* Keeps the queue full until told to stop, then takes every completion
 * still due once the QP is in ERR. */
static void *worker(void *arg)
{
	struct conn *c = arg;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	double deadline = 0;

	CPU_ZERO(&set);
	CPU_SET(c->index % (cpus > 0 ? cpus : 1), &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	for (;;) {
		struct ibv_wc wc[16];
		int n;

		while (!c->stop_posting && c->posted - c->completed < DEPTH && post_next(c))
			;
		n = ibv_poll_cq(c->cq, 16, wc);
		if (n < 0)
			fail("connection %d: poll_cq: %d", c->index, n);
		for (int i = 0; i < n; i++)
			take(c, &wc[i]);
		if (c->stop_posting && c->disconnected) {
			if (c->completed == c->posted)
				break;
			if (!deadline)
				deadline = now() + 30;
			if (now() > deadline)
				fail("connection %d: %llu of %llu WRs completed 30 s after the disconnect",
				     c->index, (unsigned long long)c->completed,
				     (unsigned long long)c->posted);
		}
		if (!n)
			usleep(100);
	}
	return NULL;
}

static struct rdma_event_channel *channel;

/* Handles one rdma_cm event; the event's connection, if any. */
static struct conn *handle_event(struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		struct target target;

		if (nconns == MAX_QPS)
			fail("too many connections");
		c = &conns[nconns];
		c->index = nconns++;
		setup_conn(c, ev->id, 1);
		for (int i = 0; i < DEPTH; i++)
			if (!post_next(c))
				fail("connection %d: the first receives", c->index);
		target.addr = (uintptr_t)c->buf;
		target.rkey = c->mr->rkey;
		struct rdma_conn_param param = {
			.private_data = &target, .private_data_len = sizeof(target),
			.responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7,
		};
		if (rdma_accept(ev->id, &param))
			fail("accept: %s", strerror(errno));
		break;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		if (!c->server) {
			if (ev->param.conn.private_data_len < sizeof(c->peer))
				fail("connection %d: no target in the accept", c->index);
			memcpy(&c->peer, ev->param.conn.private_data, sizeof(c->peer));
		}
		c->established = 1;
		if (pthread_create(&c->thread, NULL, worker, c))
			fail("pthread_create");
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* The local QP goes to ERR: what is outstanding flushes. */
		c->stop_posting = 1;
		rdma_disconnect(ev->id);
		c->disconnected = 1;
		break;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ev->id, 2000))
			fail("resolve_route: %s", strerror(errno));
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		struct rdma_conn_param param = {
			.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
			.rnr_retry_count = 7,
		};
		setup_conn(c, ev->id, 0);
		if (rdma_connect(ev->id, &param))
			fail("connect: %s", strerror(errno));
		break;
	}
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		break;
	default:
		fail("unexpected rdma_cm event %s (%d)", rdma_event_str(ev->event), ev->status);
	}
	return c;
}

/* Waits up to `seconds` for the next event and handles it; 0 on timeout. */
static int next_event(double seconds)
{
	struct rdma_cm_event *ev;
	double deadline = now() + seconds;

	while (rdma_get_cm_event(channel, &ev)) {
		if (errno != EAGAIN)
			fail("get_cm_event: %s", strerror(errno));
		if (now() > deadline)
			return 0;
		usleep(10000);
	}
	handle_event(ev);
	rdma_ack_cm_event(ev);
	return 1;
}

static int count(int what)
{
	int n = 0;

	for (int i = 0; i < nconns; i++)
		n += what == 0 ? conns[i].established : conns[i].disconnected;
	return n;
}

/* Closes each connection whose QP failed (its peer is gone): the QP goes
 * to ERR and flushes the rest. How many are closed so. */
static int close_failed(void)
{
	int n = 0;

	for (int i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];

		if (c->failed && !c->disconnected) {
			c->stop_posting = 1;
			rdma_disconnect(c->id);
			c->disconnected = 1;
		}
		n += c->disconnected;
	}
	return n;
}

static void report(const char *side)
{
	for (int i = 0; i < nconns; i++) {
		struct conn *c = &conns[i];

		pthread_join(c->thread, NULL);
		if (c->completed != c->posted)
			fail("%s connection %d: %llu WRs accepted, %llu completed", side, i,
			     (unsigned long long)c->posted, (unsigned long long)c->completed);
		printf("ok: %s connection %d: all %llu WRs completed once, in order "
		       "(%llu succeeded, %llu flushed or failed)\n", side, i,
		       (unsigned long long)c->posted, (unsigned long long)c->succeeded,
		       (unsigned long long)c->errors);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *ai;
	int server, qps, abort_mode = 0, gone_mode = 0;

	if (argc < 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		fail("usage: %s server|client ADDR PORT QPS [graceful|abort|gone]", argv[0]);
	server = !strcmp(argv[1], "server");
	qps = atoi(argv[4]);
	if (qps < 1 || qps > MAX_QPS)
		fail("QPS must be 1 to %d", MAX_QPS);
	if (!server) {
		if (argc < 6)
			fail("the client needs graceful, abort or gone");
		abort_mode = !strcmp(argv[5], "abort");
		gone_mode = !strcmp(argv[5], "gone");
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	channel = rdma_create_event_channel();
	if (!channel)
		fail("event channel: %s", strerror(errno));
	/* Events are polled with a deadline. */
	if (fcntl(channel->fd, F_SETFL, fcntl(channel->fd, F_GETFL) | O_NONBLOCK))
		fail("nonblocking event channel: %s", strerror(errno));
	if (server)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(argv[2], argv[3], &hints, &ai))
		fail("getaddrinfo %s:%s: %s", argv[2], argv[3], strerror(errno));
	if (server) {
		struct rdma_cm_id *listen_id;

		if (rdma_create_id(channel, &listen_id, NULL, RDMA_PS_TCP) ||
		    rdma_bind_addr(listen_id, ai->ai_src_addr) || rdma_listen(listen_id, MAX_QPS))
			fail("listen: %s", strerror(errno));
		printf("listening\n");
		while (count(0) < qps)
			if (!next_event(120))
				fail("only %d of %d connections came", count(0), qps);
		printf("ok: %d connections established\n", qps);
		while (count(1) < qps)
			if (!next_event(120))
				fail("only %d of %d connections were disconnected", count(1), qps);
		printf("ok: RDMA_CM_EVENT_DISCONNECTED on all %d connections\n", qps);
		report("server");
		return 0;
	}
	for (int i = 0; i < qps; i++) {
		struct conn *c = &conns[i];
		struct rdma_cm_id *id;

		c->index = i;
		nconns++;
		if (rdma_create_id(channel, &id, c, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, ai->ai_dst_addr, 2000))
			fail("connection %d: resolve_addr: %s", i, strerror(errno));
	}
	while (count(0) < qps)
		if (!next_event(120))
			fail("only %d of %d connections established", count(0), qps);
	printf("ok: %d connections established\n", qps);
	/* Traffic on every QP for a while. */
	for (double end = now() + 2; now() < end;)
		next_event(0.1);
	if (gone_mode) {
		double deadline;

		printf("traffic\n");
		/* Nothing answers any more: every QP's retries run out. */
		deadline = now() + 120;
		while (close_failed() < qps) {
			if (now() > deadline)
				fail("only %d of %d connections failed within 120 s of the peer's going",
				     close_failed(), qps);
			next_event(0.05);
		}
		printf("ok: all %d connections failed and were closed after the peer's node went\n",
		       qps);
	} else if (abort_mode) {
		printf("traffic\n");
		/* The test kills the server now: rdma_cm tells us. */
		while (count(1) < qps)
			if (!next_event(120))
				fail("only %d of %d connections saw the server go in 120 s", count(1), qps);
		printf("ok: RDMA_CM_EVENT_DISCONNECTED on all %d connections after the server was killed\n",
		       qps);
	} else {
		for (int i = 0; i < qps; i++)
			if (rdma_disconnect(conns[i].id))
				fail("disconnect %d: %s", i, strerror(errno));
		/* The threads go on posting into the dying QPs for a moment. */
		usleep(200000);
		for (int i = 0; i < qps; i++)
			conns[i].stop_posting = 1;
		while (count(1) < qps)
			if (!next_event(120))
				fail("only %d of %d connections saw their disconnect", count(1), qps);
		printf("ok: RDMA_CM_EVENT_DISCONNECTED on all %d connections\n", qps);
	}
	report("client");
	return 0;
}
