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

void srnic_netif_napi_add_tx(struct net_device *dev, struct napi_struct *napi,
			     int (*poll)(struct napi_struct *, int))
{
	netif_napi_add_tx(dev, napi, poll);
}

void srnic_netif_tx_stop_all(struct net_device *dev)
{
	netif_tx_stop_all_queues(dev);
}

void srnic_netif_tx_wake_all(struct net_device *dev)
{
	netif_tx_wake_all_queues(dev);
}

/* Queue @q of @dev; the callers check it against num_tx_queues. */
void srnic_netif_tx_stop(struct net_device *dev, unsigned int q)
{
	netif_tx_stop_queue(netdev_get_tx_queue(dev, q));
}

void srnic_netif_tx_wake(struct net_device *dev, unsigned int q)
{
	netif_tx_wake_queue(netdev_get_tx_queue(dev, q));
}

bool srnic_netif_tx_stopped(struct net_device *dev, unsigned int q)
{
	return netif_tx_queue_stopped(netdev_get_tx_queue(dev, q));
}

unsigned int srnic_netdev_num_tx_queues(const struct net_device *dev)
{
	return dev->num_tx_queues;
}

unsigned int srnic_netdev_real_num_tx_queues(const struct net_device *dev)
{
	return READ_ONCE(dev->real_num_tx_queues);
}

u16 srnic_skb_queue_mapping(const struct sk_buff *skb)
{
	return skb_get_queue_mapping(skb);
}

/* @count queues in use (RTNL held once registered). */
int srnic_netif_set_tx_queues(struct net_device *dev, unsigned int count)
{
	return netif_set_real_num_tx_queues(dev, count);
}

/*
 * Transmit packet steering: CPU c sends on queue c % @count, so that each
 * queue, whose completions come on the vector of its number, is fed by
 * the same CPUs. Best effort: without XPS, or without memory, the stack
 * hashes flows over the queues instead.
 */
void srnic_netif_spread_xps(struct net_device *dev, unsigned int count)
{
#ifdef CONFIG_XPS
	cpumask_var_t mask;
	unsigned int q, cpu;

	if (!count || !zalloc_cpumask_var(&mask, GFP_KERNEL))
		return;
	for (q = 0; q < count; q++) {
		cpumask_clear(mask);
		for_each_possible_cpu(cpu)
			if (cpu % count == q)
				cpumask_set_cpu(cpu, mask);
		netif_set_xps_queue(dev, mask, q);
	}
	free_cpumask_var(mask);
#endif
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

int srnic_dev_set_mtu(struct net_device *dev, unsigned int mtu)
{
	return dev_set_mtu(dev, mtu);
}

/* Offers scatter-gather to the stack, or stops offering it: frames then
 * come linear. Under RTNL; the notifier tells upper devices. */
void srnic_netdev_set_sg(struct net_device *dev, bool on)
{
	if (on) {
		dev->hw_features |= NETIF_F_SG;
		dev->wanted_features |= NETIF_F_SG;
		dev->features |= NETIF_F_SG;
	} else {
		dev->hw_features &= ~NETIF_F_SG;
		dev->wanted_features &= ~NETIF_F_SG;
		dev->features &= ~NETIF_F_SG;
	}
	netdev_features_change(dev);
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
