/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel API srnic and iblan use, as one header for bindgen. Static
 * inlines and macros cannot be called from Rust; each one we need has a
 * thin out-of-line shim declared at the bottom and defined in shims.c.
 */
#ifndef SRNIC_HELPER_H
#define SRNIC_HELPER_H

#include <linux/device.h>
#include <linux/etherdevice.h>
#include <linux/if_ether.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/rtnetlink.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <rdma/ib_mad.h>
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

/* Shims for static inlines and macros (shims.c). */
struct ib_device *srnic_ib_alloc_device(size_t size);
bool srnic_ib_device_try_get(struct ib_device *ibdev);
struct net_device *srnic_netdev_notifier_info_to_dev(void *info);
bool srnic_netif_running(const struct net_device *dev);
bool srnic_netif_carrier_ok(const struct net_device *dev);
bool srnic_netdev_is_registered(const struct net_device *dev);
const void *srnic_netdev_net(const struct net_device *dev);
void srnic_dev_hold(struct net_device *dev);
void srnic_dev_put(struct net_device *dev);
void srnic_ib_device_get(struct ib_device *ibdev);
void srnic_ib_device_put_ref(struct ib_device *ibdev);
const char *srnic_ib_device_name(const struct ib_device *ibdev);
bool srnic_printk_ratelimit(void);

#endif
