/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * iblan's link attributes: what `ip link` reads of a netdev of kind
 * "iblan" (IFLA_INFO_KIND) in IFLA_INFO_DATA. A LAN port is created with
 * the standard attributes alone (IFLA_LINK for the parent, IFLA_ADDRESS
 * for the LAN index and LID), so stock iproute2 needs no plugin to create
 * one. IFLA_IBLAN_MODE is the one a request may set (`ip link set DEV type
 * iblan mode ...`); the others are read-only and refused in a request.
 * See Documentation/iblan/iblan.rst.
 */
#ifndef _UAPI_LINUX_IF_IBLAN_H
#define _UAPI_LINUX_IF_IBLAN_H

enum {
	IFLA_IBLAN_UNSPEC,
	IFLA_IBLAN_RDMA_DEV,	/* string: the RDMA device, e.g. "srnic0" */
	IFLA_IBLAN_PORT,	/* u32: its port number (from 1) */
	IFLA_IBLAN_LAN,		/* u8: the LAN index, byte 3 of the MAC */
	IFLA_IBLAN_LID,		/* u16: the node's LID in that LAN */
	IFLA_IBLAN_PEERS,	/* u32: nodes the name service knows */
	IFLA_IBLAN_MODE,	/* u8: enum iblan_mode */
	__IFLA_IBLAN_MAX,
};

#define IFLA_IBLAN_MAX (__IFLA_IBLAN_MAX - 1)

enum iblan_mode {
	IBLAN_MODE_UD,		/* every frame over UD datagrams */
	IBLAN_MODE_CONNECTED,	/* unicast over a connection per peer */
};

#endif /* _UAPI_LINUX_IF_IBLAN_H */
