/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the test programs share: failing, the clock, meeting the program on
 * the other VM through files in a directory both mount, and raw uverbs
 * commands (the rxe ABI's doorbell, re-registration). Header-only (static
 * inline), so each program stays one file.
 */
#ifndef SRNIC_TEST_PROGS_H
#define SRNIC_TEST_PROGS_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Prints "FAIL: ..." (the test scripts look for it) and exits 1. */
#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); printf("\n"); fflush(stdout); exit(1); } while (0)

/* Seconds on the monotonic clock. */
static inline double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * Two programs on two VMs meet through files in a directory both see:
 * one says a name (with optional contents), the other hears it. A file is
 * written under a temporary name and renamed, so it is heard whole.
 */
struct rendezvous {
	const char *dir;    /* the shared directory */
	const char *prog;   /* the files' prefix: the program's name */
	char me, other;     /* the two sides' roles */
	int wait_s;         /* how long hearing waits */
};

static inline void rendezvous_path(const struct rendezvous *r, char *out, size_t room,
				   const char *name, char who)
{
	snprintf(out, room, "%s/%s.%s.%c", r->dir, r->prog, name, who);
}

/* Says NAME, with LEN bytes of DATA, to the other side. */
static inline void say_to(const struct rendezvous *r, const char *name, const void *data,
			  size_t len)
{
	char p[512], tmp[520];
	FILE *f;

	rendezvous_path(r, p, sizeof(p), name, r->me);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	f = fopen(tmp, "w");
	if (!f || (len && fwrite(data, len, 1, f) != 1) || fclose(f) || rename(tmp, p))
		FAIL("cannot write %s: %s", p, strerror(errno));
}

/* Waits (up to r->wait_s) for the other side to say NAME; reads its LEN
 * bytes into DATA. */
static inline void hear_from(const struct rendezvous *r, const char *name, void *data,
			     size_t len)
{
	char p[512];
	double deadline = now() + r->wait_s;

	rendezvous_path(r, p, sizeof(p), name, r->other);
	for (;;) {
		FILE *f = fopen(p, "r");

		if (f) {
			size_t got = len ? fread(data, len, 1, f) : 1;

			fclose(f);
			if (got == 1)
				return;
		}
		if (now() > deadline)
			FAIL("the peer did not say '%s' within %d s", name, r->wait_s);
		usleep(20000);
	}
}

/*
 * Writes a legacy uverbs command to CONTEXT's file, as any process may
 * whatever its provider does: REQ is LEN bytes, a struct ib_uverbs_cmd_hdr
 * and then the command, whose first field is its response pointer; the
 * kernel's answer goes to RESP, RESP_LEN bytes. 0 or an errno.
 */
static inline int uverbs_write(struct ibv_context *context, uint32_t command, void *req,
			       size_t len, void *resp, size_t resp_len)
{
	struct ib_uverbs_cmd_hdr *hdr = req;
	uint64_t response = (uintptr_t)resp;
	ssize_t n;

	hdr->command = command;
	hdr->in_words = len / 4;
	hdr->out_words = resp_len / 4;
	memcpy(hdr + 1, &response, sizeof(response));
	n = write(context->cmd_fd, req, len);
	return n == (ssize_t)len ? 0 : n < 0 ? errno : EIO;
}

/*
 * An empty POST_SEND command: the rxe ABI's doorbell, which has the
 * kernel fetch what was written into the QP's send ring. 0 or an errno.
 */
static inline int uverbs_doorbell(struct ibv_qp *qp)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} req;
	struct ib_uverbs_post_send_resp resp;

	memset(&req, 0, sizeof(req));
	req.cmd.qp_handle = qp->handle;
	req.cmd.wqe_size = sizeof(struct ib_uverbs_send_wr);
	return uverbs_write(qp->context, IB_USER_VERBS_CMD_POST_SEND, &req, sizeof(req), &resp,
			    sizeof(resp));
}

/*
 * The kernel's REREG_MR command: librxe has no ibv_rereg_mr (it answers
 * EOPNOTSUPP without asking the kernel), but the command is open to any
 * process that writes it to its uverbs file, as an attacker would. On
 * success MR takes the new keys. 0 or an errno.
 */
static inline int uverbs_rereg_mr(struct ibv_mr *mr, uint32_t flags, void *addr, size_t length,
				  int access)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_rereg_mr cmd;
	} req;
	struct ib_uverbs_rereg_mr_resp resp;
	int err;

	memset(&req, 0, sizeof(req));
	req.cmd.mr_handle = mr->handle;
	req.cmd.flags = flags;
	req.cmd.start = (uintptr_t)addr;
	req.cmd.length = length;
	req.cmd.hca_va = (uintptr_t)addr;
	req.cmd.pd_handle = mr->pd->handle;
	req.cmd.access_flags = access;
	err = uverbs_write(mr->context, IB_USER_VERBS_CMD_REREG_MR, &req, sizeof(req), &resp,
			   sizeof(resp));
	if (err)
		return err;
	mr->lkey = resp.lkey;
	mr->rkey = resp.rkey;
	return 0;
}

#endif
