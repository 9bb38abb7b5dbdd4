// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line versions of the static inlines and macros that the Rust code
 * needs. Each is a one-line wrapper; all logic lives in Rust.
 */
#include "srnic_helper.h"

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

const void *srnic_netdev_net(const struct net_device *dev)
{
	return dev_net(dev);
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

const char *srnic_ib_device_name(const struct ib_device *ibdev)
{
	return dev_name(&ibdev->dev);
}

/* The kernel-wide printk rate limit, for messages user space can trigger. */
bool srnic_printk_ratelimit(void)
{
	return printk_ratelimit();
}
