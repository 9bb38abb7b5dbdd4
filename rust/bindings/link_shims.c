// SPDX-License-Identifier: GPL-2.0
/*
 * Shims for link types (rust/kapi/rtnl_link.rs): netlink attribute
 * accessors, extack messages and netdev fields behind macros.
 */
#include "srnic_helper.h"

/* The parent's ifindex (IFLA_LINK), 0 if none was given. */
int srnic_link_attr_link(struct nlattr **tb)
{
	return tb[IFLA_LINK] ? nla_get_u32(tb[IFLA_LINK]) : 0;
}

/*
 * Copies IFLA_ADDRESS into @out (ETH_ALEN bytes): 0 if absent, ETH_ALEN if
 * copied, -EINVAL if it has another length.
 */
int srnic_link_attr_address(struct nlattr **tb, u8 *out)
{
	if (!tb[IFLA_ADDRESS])
		return 0;
	if (nla_len(tb[IFLA_ADDRESS]) != ETH_ALEN)
		return -EINVAL;
	memcpy(out, nla_data(tb[IFLA_ADDRESS]), ETH_ALEN);
	return ETH_ALEN;
}

/*
 * Copies the u8 attribute @type of IFLA_INFO_DATA into @out: 1 if it was
 * there, 0 if not (or no IFLA_INFO_DATA came). The policy checked its
 * type and length before the driver runs.
 */
int srnic_link_data_u8(struct nlattr **data, int type, u8 *out)
{
	if (!data || !data[type])
		return 0;
	*out = nla_get_u8(data[type]);
	return 1;
}

/*
 * iblan's IFLA_INFO_DATA policy: the mode may be set, the rest is what
 * the port is (device, port, LAN, LID, peers) and refused in a request.
 * A table of designated initialisers: built in C, where the macros are.
 */
static const struct nla_policy iblan_link_policy[IFLA_IBLAN_MAX + 1] = {
	[IFLA_IBLAN_RDMA_DEV] = { .type = NLA_REJECT,
				  .reject_message = "iblan: the RDMA device is read-only" },
	[IFLA_IBLAN_PORT] = { .type = NLA_REJECT,
			      .reject_message = "iblan: the port is read-only" },
	[IFLA_IBLAN_LAN] = { .type = NLA_REJECT,
			     .reject_message = "iblan: the LAN is set by the address (byte 3)" },
	[IFLA_IBLAN_LID] = { .type = NLA_REJECT,
			     .reject_message = "iblan: the LID is set by the address (bytes 4-5)" },
	[IFLA_IBLAN_PEERS] = { .type = NLA_REJECT,
			       .reject_message = "iblan: the peer count is read-only" },
	[IFLA_IBLAN_MODE] = NLA_POLICY_MAX(NLA_U8, IBLAN_MODE_CONNECTED),
};

const struct nla_policy *srnic_iblan_link_policy(void)
{
	return iblan_link_policy;
}

/* The extack keeps a copy: @text may be gone when the reply is built. */
void srnic_extack_msg(struct netlink_ext_ack *extack, const char *text)
{
	NL_SET_ERR_MSG_FMT(extack, "%s", text);
}

size_t srnic_nla_total_size(int payload)
{
	return nla_total_size(payload);
}

int srnic_nla_put_u8(struct sk_buff *skb, int type, u8 value)
{
	return nla_put_u8(skb, type, value);
}

int srnic_nla_put_u16(struct sk_buff *skb, int type, u16 value)
{
	return nla_put_u16(skb, type, value);
}

int srnic_nla_put_u32(struct sk_buff *skb, int type, u32 value)
{
	return nla_put_u32(skb, type, value);
}

int srnic_nla_put_string(struct sk_buff *skb, int type, const char *value)
{
	return nla_put_string(skb, type, value);
}

/*
 * The kind `ip -d link` shows and the ops `ip link del` reaches. A netdev
 * that is not @movable stays in its namespace (`ip link set ... netns` is
 * refused); a movable one goes with its namespace through the ops'
 * dellink, as the core deletes virtual netdevs there.
 */
void srnic_netdev_set_link_ops(struct net_device *dev,
			       const struct rtnl_link_ops *ops, bool movable)
{
	dev->rtnl_link_ops = ops;
	dev->netns_immutable = !movable;
}

/*
 * The netdev at @dev if it is registered, with @ops, in any namespace;
 * NULL otherwise. @dev is only compared, never read. RTNL held (netdevs
 * are listed and unlisted under it); net_rwsem, which nests inside RTNL,
 * keeps the list of namespaces.
 */
struct net_device *srnic_link_find(const void *dev,
				   const struct rtnl_link_ops *ops)
{
	struct net_device *found = NULL, *d;
	struct net *net;

	ASSERT_RTNL();
	down_read(&net_rwsem);
	for_each_net(net) {
		for_each_netdev(net, d) {
			if (d == dev && d->rtnl_link_ops == ops) {
				found = d;
				goto out;
			}
		}
	}
out:
	up_read(&net_rwsem);
	return found;
}

/* A netdev the core frees after unregistering it, @destructor first. */
void srnic_netdev_set_destructor(struct net_device *dev,
				 void (*destructor)(struct net_device *dev))
{
	dev->priv_destructor = destructor;
	dev->needs_free_netdev = true;
}

/* SET_NETDEV_DEV and dev_port, before registration. */
void srnic_netdev_set_parent(struct net_device *dev, struct device *parent,
			     u16 dev_port)
{
	SET_NETDEV_DEV(dev, parent);
	dev->dev_port = dev_port;
}

/*
 * Lock classes of its own for a netdev the core allocated: its queues did
 * not exist yet when `setup` ran, so they have the classes of every
 * Ethernet netdev, the carrier's below included, which iblan's transmit
 * nests in.
 */
void srnic_netdev_link_lock_classes(struct net_device *dev)
{
	netdev_lockdep_set_classes(dev);
}

bool srnic_netdev_has_parent(const struct net_device *dev)
{
	return dev->dev.parent;
}

struct device *srnic_ib_device_parent(struct ib_device *ibdev)
{
	return ibdev->dev.parent;
}

/* A driver's own sysfs group (rust/kapi/sysfs.rs): the slot the core
 * leaves for it, before registration. */
void srnic_netdev_set_sysfs_group(struct net_device *dev,
				  const struct attribute_group *group)
{
	dev->sysfs_groups[0] = group;
}

/* The netdev of a sysfs attribute's device (container_of). */
struct net_device *srnic_to_net_dev(struct device *dev)
{
	return to_net_dev(dev);
}

/* A write that must not wait for RTNL is retried by the syscall layer. */
int srnic_restart_syscall(void)
{
	return restart_syscall();
}
