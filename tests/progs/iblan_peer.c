// SPDX-License-Identifier: GPL-2.0
/*
 * iblan_peer DEVICE PEER_GID PEER_QPN QKEY LAN offer
 * iblan_peer DEVICE PEER_GID PEER_QPN QKEY LAN announce COUNT FIRST_LID
 *
 * Speaks to a LAN port's QP from a UD QP of its own, as another iblan node
 * would. The sending port's GID is its first valid link-local RoCEv2 GID,
 * the one iblan itself sends from, so the receiver knows the sender as its
 * node's iblan peer.
 *
 * offer: sends a connected mode OFFER (rust/pure/connect.rs) again every
 * 250 ms, four at most (datagrams may be lost), and waits up to 3 s in
 * all for the answer. Prints "refused" and the offers sent, and exits 0,
 * when a REFUSE naming this QP comes back; fails otherwise.
 *
 * announce: sends the announcements (rust/pure/lan.rs) of COUNT nodes
 * that do not exist, LIDs FIRST_LID on, each with a link-local GID and a
 * node GUID of its own, 20 ms apart, and prints "announced COUNT" once
 * all are sent.
 * Sends to such a GID go nowhere: they are for the receiver's peer table.
 */
#include <arpa/inet.h>
#include "progs.h"

#define CONNECT_LEN 24
#define ANNOUNCE_LEN 48
#define GRH_LEN 40

static void put32(uint8_t *at, uint32_t value)
{
	value = htonl(value);
	memcpy(at, &value, 4);
}

static void put16(uint8_t *at, uint16_t value)
{
	value = htons(value);
	memcpy(at, &value, 2);
}

static uint32_t get32(const uint8_t *at)
{
	uint32_t value;

	memcpy(&value, at, 4);
	return ntohl(value);
}

/* The first valid link-local RoCEv2 GID of port 1. */
static int link_local_gid(struct ibv_context *ctx)
{
	struct ibv_gid_entry entry;
	int index;

	for (index = 0; index < 256; index++) {
		if (ibv_query_gid_ex(ctx, 1, index, &entry, 0))
			continue;
		if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && entry.gid.raw[0] == 0xfe &&
		    (entry.gid.raw[1] & 0xc0) == 0x80)
			return index;
	}
	FAIL("no link-local RoCEv2 GID on port 1");
}

/* WR: a signalled SEND of SGE through AH to QPN with QKEY. */
static void ud_send(struct ibv_send_wr *wr, struct ibv_sge *sge, struct ibv_ah *ah, uint32_t qpn,
		    uint32_t qkey)
{
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = qpn;
	wr->wr.ud.remote_qkey = qkey;
}

/*
 * Announces COUNT made-up nodes to PEER_QPN, one at a time through MSG (a
 * registered buffer of ANNOUNCE_LEN bytes): node i has LID FIRST_LID + i,
 * QP 0x100 + i, node GUID 0x02990000000000XX and the link-local GID of
 * MAC 02:99:00:00:XX:XX.
 */
static int send_announcements(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
			      struct ibv_ah *ah, uint32_t peer_qpn, uint32_t qkey, int lan,
			      int count, unsigned long first_lid, uint8_t *msg)
{
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = ANNOUNCE_LEN, .lkey = mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad_wr;
	struct ibv_wc wc;
	double deadline;
	int i, n;

	if (first_lid < 1 || first_lid + count - 1 > 0xbfff)
		FAIL("LIDs %#lx to %#lx are not all unicast LIDs", first_lid, first_lid + count - 1);
	ud_send(&wr, &sge, ah, peer_qpn, qkey);
	for (i = 0; i < count; i++) {
		memset(msg, 0, ANNOUNCE_LEN);
		memcpy(msg, "IBLN", 4);
		msg[4] = 1; /* version; no flags */
		msg[6] = lan;
		put16(msg + 8, first_lid + i);
		put32(msg + 10, 0x100 + i);
		put32(msg + 14, qkey);
		put32(msg + 18, 0x02990000);
		put32(msg + 22, i);
		/* fe80::0099:00ff:fe00:XXXX, from MAC 02:99:00:00:XX:XX. */
		msg[26] = 0xfe;
		msg[27] = 0x80;
		msg[35] = 0x99;
		msg[37] = 0xff;
		msg[38] = 0xfe;
		msg[40] = i >> 8;
		msg[41] = i;
		put32(msg + 42, 1);
		if (ibv_post_send(qp, &wr, &bad_wr))
			FAIL("ibv_post_send");
		/* The send queue has one entry: wait for it (3 s at most). */
		deadline = now() + 3;
		while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && now() < deadline)
			usleep(1000);
		if (n <= 0 || wc.status != IBV_WC_SUCCESS)
			FAIL("announcement %d: %s", i,
			     n < 0 ? "ibv_poll_cq" : n == 0 ? "no completion within 3 s" :
			     ibv_wc_status_str(wc.status));
		/* The receiver's name service takes 16 at a time. */
		usleep(20000);
	}
	printf("announced %d\n", count);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_qp_init_attr init = { 0 };
	struct ibv_qp_attr attr = { 0 };
	struct ibv_ah_attr ah_attr = { 0 };
	struct ibv_sge sge;
	struct ibv_send_wr swr = { 0 }, *bad_swr;
	struct ibv_recv_wr rwr = { 0 }, *bad_rwr;
	struct ibv_wc wc;
	static uint8_t buf[GRH_LEN + 64 + ANNOUNCE_LEN];
	uint8_t *offer = buf + GRH_LEN + 64;
	uint32_t peer_qpn, qkey;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	double deadline, next_offer;
	int i, n, offers = 0, in_flight = 0, lan, announce;

	if (argc == 7 && !strcmp(argv[6], "offer"))
		announce = 0;
	else if (argc == 9 && !strcmp(argv[6], "announce") && atoi(argv[7]) > 0)
		announce = atoi(argv[7]);
	else
		FAIL("usage: iblan_peer DEVICE PEER_GID PEER_QPN QKEY LAN offer|announce COUNT FIRST_LID");
	peer_qpn = strtoul(argv[3], NULL, 0);
	qkey = strtoul(argv[4], NULL, 0);
	lan = atoi(argv[5]);
	if (inet_pton(AF_INET6, argv[2], ah_attr.grh.dgid.raw) != 1)
		FAIL("bad GID %s", argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		FAIL("no device %s", argv[1]);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!pd || !cq || !mr)
		FAIL("PD, CQ or MR: %s", strerror(errno));
	init.send_cq = cq;
	init.recv_cq = cq;
	init.qp_type = IBV_QPT_UD;
	init.cap.max_send_wr = 1;
	init.cap.max_recv_wr = 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &init);
	if (!qp)
		FAIL("ibv_create_qp: %s", strerror(errno));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qkey = qkey;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		FAIL("INIT: %s", strerror(errno));
	attr.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE))
		FAIL("RTR: %s", strerror(errno));
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN))
		FAIL("RTS: %s", strerror(errno));
	ah_attr.is_global = 1;
	ah_attr.grh.sgid_index = link_local_gid(ctx);
	ah_attr.grh.hop_limit = 1;
	ah_attr.port_num = 1;
	ah = ibv_create_ah(pd, &ah_attr);
	if (!ah)
		FAIL("ibv_create_ah: %s", strerror(errno));

	if (announce > 0)
		return send_announcements(qp, cq, mr, ah, peer_qpn, qkey, lan, announce,
					  strtoul(argv[8], NULL, 0), offer);

	/* The answer lands after the GRH area. */
	sge.addr = (uintptr_t)buf;
	sge.length = GRH_LEN + 64;
	sge.lkey = mr->lkey;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(qp, &rwr, &bad_rwr))
		FAIL("ibv_post_recv");

	/* OFFER: kind 2, version 1, op 1; this QP, PSN, no QP answered, the
	 * largest frame (65520 + 18), the LAN. */
	memset(offer, 0, CONNECT_LEN);
	offer[0] = 2;
	offer[1] = 1;
	offer[2] = 1;
	put32(offer + 4, qp->qp_num);
	put32(offer + 8, 0x123456);
	put32(offer + 16, 65538);
	offer[20] = lan;
	struct ibv_sge send_sge = {
		.addr = (uintptr_t)offer, .length = CONNECT_LEN, .lkey = mr->lkey,
	};
	ud_send(&swr, &send_sge, ah, peer_qpn, qkey);
	deadline = now() + 3;
	next_offer = now();
	while (now() < deadline) {
		/* One offer in flight at a time (the send queue has one entry). */
		if (offers < 4 && !in_flight && now() >= next_offer) {
			if (ibv_post_send(qp, &swr, &bad_swr))
				FAIL("ibv_post_send");
			offers++;
			in_flight = 1;
			next_offer = now() + 0.25;
		}
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			FAIL("ibv_poll_cq");
		if (n == 0) {
			usleep(1000);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			FAIL("completion status %s", ibv_wc_status_str(wc.status));
		if (wc.opcode == IBV_WC_SEND) {
			in_flight = 0;
			continue;
		}
		const uint8_t *answer = buf + GRH_LEN;

		if (wc.byte_len != GRH_LEN + CONNECT_LEN)
			FAIL("an answer of %u bytes", wc.byte_len - GRH_LEN);
		if (answer[0] != 2 || answer[1] != 1 || answer[2] != 4)
			FAIL("not a REFUSE: kind %u version %u op %u", answer[0], answer[1], answer[2]);
		if (get32(answer + 12) != qp->qp_num)
			FAIL("a REFUSE of QP %#x, not of this QP %#x", get32(answer + 12), qp->qp_num);
		if (answer[20] != lan)
			FAIL("a REFUSE from LAN %u", answer[20]);
		printf("refused (offers sent: %d)\n", offers);
		return 0;
	}
	FAIL("no answer to %d offers within 3 s", offers);
}
