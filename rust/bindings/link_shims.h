/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shims for link types (rust/kapi/rtnl_link.rs): netlink attribute
 * accessors, extack messages and netdev fields behind macros.
 */
#ifndef SRNIC_LINK_SHIMS_H
#define SRNIC_LINK_SHIMS_H

int srnic_link_attr_link(struct nlattr **tb);
int srnic_link_attr_address(struct nlattr **tb, u8 *out);
int srnic_link_data_u8(struct nlattr **data, int type, u8 *out);
const struct nla_policy *srnic_iblan_link_policy(void);
void srnic_extack_msg(struct netlink_ext_ack *extack, const char *text);
size_t srnic_nla_total_size(int payload);
int srnic_nla_put_u8(struct sk_buff *skb, int type, u8 value);
int srnic_nla_put_u16(struct sk_buff *skb, int type, u16 value);
int srnic_nla_put_u32(struct sk_buff *skb, int type, u32 value);
int srnic_nla_put_string(struct sk_buff *skb, int type, const char *value);
void srnic_netdev_set_link_ops(struct net_device *dev,
			       const struct rtnl_link_ops *ops, bool movable);
struct net_device *srnic_link_find(const void *dev,
				   const struct rtnl_link_ops *ops);
void srnic_netdev_set_destructor(struct net_device *dev,
				 void (*destructor)(struct net_device *dev));
void srnic_netdev_set_parent(struct net_device *dev, struct device *parent,
			     u16 dev_port);
void srnic_netdev_link_lock_classes(struct net_device *dev);
bool srnic_netdev_has_parent(const struct net_device *dev);
struct device *srnic_ib_device_parent(struct ib_device *ibdev);
void srnic_netdev_set_sysfs_group(struct net_device *dev,
				  const struct attribute_group *group);
struct net_device *srnic_to_net_dev(struct device *dev);
int srnic_restart_syscall(void);

#endif
