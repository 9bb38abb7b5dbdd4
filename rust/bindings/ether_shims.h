/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shims for iblan's Ethernet netdev, NAPI and ethtool (rust/kapi/ether.rs):
 * static inlines and macros of the netdev API.
 */
#ifndef SRNIC_ETHER_SHIMS_H
#define SRNIC_ETHER_SHIMS_H

void *srnic_netdev_priv(struct net_device *dev);
struct net_device *srnic_napi_dev(struct napi_struct *napi);
void srnic_netif_napi_add(struct net_device *dev, struct napi_struct *napi,
			  int (*poll)(struct napi_struct *, int));
void srnic_netif_napi_del(struct napi_struct *napi);
void srnic_napi_schedule(struct napi_struct *napi);
void srnic_netif_stop_queue(struct net_device *dev);
void srnic_netif_wake_queue(struct net_device *dev);
bool srnic_netif_queue_stopped(struct net_device *dev);
void srnic_netif_napi_add_tx(struct net_device *dev, struct napi_struct *napi,
			     int (*poll)(struct napi_struct *, int));
void srnic_netif_tx_stop_all(struct net_device *dev);
void srnic_netif_tx_wake_all(struct net_device *dev);
void srnic_netif_tx_stop(struct net_device *dev, unsigned int q);
void srnic_netif_tx_wake(struct net_device *dev, unsigned int q);
bool srnic_netif_tx_stopped(struct net_device *dev, unsigned int q);
unsigned int srnic_netdev_num_tx_queues(const struct net_device *dev);
unsigned int srnic_netdev_real_num_tx_queues(const struct net_device *dev);
u16 srnic_skb_queue_mapping(const struct sk_buff *skb);
int srnic_netif_set_tx_queues(struct net_device *dev, unsigned int count);
void srnic_netif_spread_xps(struct net_device *dev, unsigned int count);
void srnic_eth_hw_addr_set(struct net_device *dev, const u8 *addr);
void srnic_netdev_setup_ether(struct net_device *dev, const char *name_format,
			      const struct net_device_ops *ops,
			      const struct ethtool_ops *ethtool_ops,
			      unsigned int min_mtu, unsigned int max_mtu,
			      unsigned int mtu);
void srnic_netdev_setup_ops(struct net_device *dev,
			    const struct net_device_ops *ops,
			    const struct ethtool_ops *ethtool_ops,
			    unsigned int min_mtu, unsigned int max_mtu,
			    unsigned int mtu);
void srnic_netdev_set_mtu(struct net_device *dev, unsigned int mtu);
int srnic_dev_set_mtu(struct net_device *dev, unsigned int mtu);
void srnic_netdev_set_sg(struct net_device *dev, bool on);
const u8 *srnic_netdev_addr(struct net_device *dev);
int srnic_dev_set_mac(struct net_device *dev, const u8 *addr);
void srnic_ethtool_drvinfo(struct ethtool_drvinfo *info, const char *driver,
			   const char *version, const char *bus);

static const int SRNIC_NETDEV_TX_OK = NETDEV_TX_OK;
static const int SRNIC_NETDEV_TX_BUSY = NETDEV_TX_BUSY;
static const int SRNIC_ETH_SS_STATS = ETH_SS_STATS;
static const unsigned int SRNIC_ETH_GSTRING_LEN = ETH_GSTRING_LEN;
static const u32 SRNIC_ETHTOOL_COALESCE_RX =
	ETHTOOL_COALESCE_RX_USECS | ETHTOOL_COALESCE_RX_MAX_FRAMES;
static const u32 SRNIC_ETHTOOL_COALESCE_TX =
	ETHTOOL_COALESCE_TX_USECS | ETHTOOL_COALESCE_TX_MAX_FRAMES;
void srnic_napi_receive_ether(struct napi_struct *napi, struct sk_buff *skb);
const u8 *srnic_sockaddr_data(const void *addr);

#endif
