// SPDX-License-Identifier: GPL-2.0
/*
 * Shims for iblan's Ethernet netdev, NAPI and ethtool (rust/kapi/ether.rs):
 * static inlines and macros of the netdev API.
 */
#include "srnic_helper.h"

void *srnic_netdev_priv(struct net_device *dev)
{
	return netdev_priv(dev);
}

struct net_device *srnic_napi_dev(struct napi_struct *napi)
{
	return napi->dev;
}

void srnic_netif_napi_add(struct net_device *dev, struct napi_struct *napi,
			  int (*poll)(struct napi_struct *, int))
{
	netif_napi_add(dev, napi, poll);
}

void srnic_netif_napi_del(struct napi_struct *napi)
{
	netif_napi_del(napi);
}

void srnic_napi_schedule(struct napi_struct *napi)
{
	napi_schedule(napi);
}

void srnic_netif_stop_queue(struct net_device *dev)
{
	netif_stop_queue(dev);
}

void srnic_netif_wake_queue(struct net_device *dev)
{
	netif_wake_queue(dev);
}

bool srnic_netif_queue_stopped(struct net_device *dev)
{
	return netif_queue_stopped(dev);
}

void srnic_eth_hw_addr_set(struct net_device *dev, const u8 *addr)
{
	eth_hw_addr_set(dev, addr);
}

/* Fields of a fresh Ethernet netdev, before registration. */
void srnic_netdev_setup_ether(struct net_device *dev, const char *name_format,
			      const struct net_device_ops *ops,
			      const struct ethtool_ops *ethtool_ops,
			      unsigned int min_mtu, unsigned int max_mtu,
			      unsigned int mtu)
{
	strscpy(dev->name, name_format, sizeof(dev->name));
	srnic_netdev_setup_ops(dev, ops, ethtool_ops, min_mtu, max_mtu, mtu);
}

/* As above for a netdev the core allocated and named (rtnl_link_ops). */
void srnic_netdev_setup_ops(struct net_device *dev,
			    const struct net_device_ops *ops,
			    const struct ethtool_ops *ethtool_ops,
			    unsigned int min_mtu, unsigned int max_mtu,
			    unsigned int mtu)
{
	dev->netdev_ops = ops;
	dev->ethtool_ops = ethtool_ops;
	dev->min_mtu = min_mtu;
	dev->max_mtu = max_mtu;
	dev->mtu = mtu;
	dev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	/* Transmit takes bottom-half locks: netpoll's interrupts-off
	 * transmit must not reach it. */
	dev->priv_flags |= IFF_DISABLE_NETPOLL;
	/* Its own lock classes: its transmit nests in the carrier netdev's. */
	netdev_lockdep_set_classes(dev);
}

void srnic_netdev_set_mtu(struct net_device *dev, unsigned int mtu)
{
	WRITE_ONCE(dev->mtu, mtu);
}

const u8 *srnic_netdev_addr(struct net_device *dev)
{
	return dev->dev_addr;
}

/* Sets @addr through ndo_set_mac_address and the notifiers; RTNL held. */
int srnic_dev_set_mac(struct net_device *dev, const u8 *addr)
{
	struct sockaddr sa = { .sa_family = dev->type };

	memcpy(sa.sa_data, addr, ETH_ALEN);
	return dev_set_mac_address(dev, &sa, NULL);
}

void srnic_ethtool_drvinfo(struct ethtool_drvinfo *info, const char *driver,
			   const char *version, const char *bus)
{
	strscpy(info->driver, driver, sizeof(info->driver));
	strscpy(info->version, version, sizeof(info->version));
	strscpy(info->bus_info, bus, sizeof(info->bus_info));
}

/* Sets the protocol from the Ethernet header and passes the frame to GRO. */
void srnic_napi_receive_ether(struct napi_struct *napi, struct sk_buff *skb)
{
	skb->protocol = eth_type_trans(skb, napi->dev);
	napi_gro_receive(napi, skb);
}

const u8 *srnic_sockaddr_data(const void *addr)
{
	return (const u8 *)((const struct sockaddr *)addr)->sa_data;
}
