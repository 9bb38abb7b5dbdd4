// SPDX-License-Identifier: GPL-2.0
/*
 * `ip -d link show` for netdevs of kind "iblan": an iproute2 link plugin.
 *
 * iproute2 prints the IFLA_INFO_DATA of a kind it does not know only through
 * a plugin: `ip` dlopen()s $IP_LIB_DIR/link_<kind>.so (Debian's default
 * directory is /usr/lib/<multiarch>/ip) and looks up <kind>_link_util.
 * `make install` puts this one there. It prints iblan's attributes
 * (include/uapi/linux/if_iblan.h), as text and, with `ip -j`, as JSON
 * under "info_data", and parses the one a request may set: `ip link set
 * DEV type iblan mode datagram|connected`. A LAN port is created with the
 * standard attributes alone.
 *
 * `ip` exports its printing helpers to plugins; the two structures below
 * are iproute2's plugin interface, unchanged from 6.1 (bookworm) to 6.18.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include "../../include/uapi/linux/if_iblan.h"

/* iproute2's include/json_print.h and include/color.h. */
enum output_type { PRINT_FP = 1, PRINT_JSON = 2, PRINT_ANY = 4 };
enum color_attr {
	COLOR_IFNAME,
	COLOR_MAC,
	COLOR_INET,
	COLOR_INET6,
	COLOR_OPERSTATE_UP,
	COLOR_OPERSTATE_DOWN,
	COLOR_NONE
};
int print_color_string(enum output_type t, enum color_attr color,
		       const char *key, const char *fmt, const char *value);
int print_color_uint(enum output_type t, enum color_attr color,
		     const char *key, const char *fmt, unsigned int value);

/* iproute2's include/libnetlink.h and include/utils.h. */
int addattr8(struct nlmsghdr *n, int maxlen, int type, uint8_t data);

/* iproute2's ip/ip_common.h. */
struct link_util {
	struct link_util *next;
	const char *id;
	int maxattr;
	int (*parse_opt)(struct link_util *, int, char **, struct nlmsghdr *);
	void (*print_opt)(struct link_util *, FILE *, struct rtattr *[]);
	void (*print_xstats)(struct link_util *, FILE *, struct rtattr *);
	void (*print_help)(struct link_util *, int, char **, FILE *);
	int (*parse_ifla_xstats)(struct link_util *, int, char **);
	int (*print_ifla_xstats)(struct nlmsghdr *, void *);
};

/*
 * The attribute's value as an unsigned integer of its own width, or -1 if
 * the kernel sent a width this plugin does not expect.
 */
static long long attr_uint(const struct rtattr *attr, size_t width)
{
	uint32_t u32;
	uint16_t u16;
	uint8_t u8;

	if (RTA_PAYLOAD(attr) < width)
		return -1;
	switch (width) {
	case 1:
		memcpy(&u8, RTA_DATA(attr), 1);
		return u8;
	case 2:
		memcpy(&u16, RTA_DATA(attr), 2);
		return u16;
	case 4:
		memcpy(&u32, RTA_DATA(attr), 4);
		return u32;
	}
	return -1;
}

static void print_uint_attr(struct rtattr *tb[], int type, size_t width,
			    const char *key, const char *fmt)
{
	long long value;

	if (!tb[type])
		return;
	value = attr_uint(tb[type], width);
	if (value >= 0)
		print_color_uint(PRINT_ANY, COLOR_NONE, key, fmt, value);
}

static const char *mode_name(long long mode)
{
	switch (mode) {
	case IBLAN_MODE_UD:
		return "datagram";
	case IBLAN_MODE_CONNECTED:
		return "connected";
	}
	return "unknown";
}

static void iblan_print_help(struct link_util *lu, int argc, char **argv, FILE *f);

/*
 * `ip link set DEV type iblan mode datagram|connected` (also accepted by
 * `ip link add`). ip's request buffer is 1024 bytes past its header; the
 * attribute fits well within it (addattr8 checks).
 */
static int iblan_parse_opt(struct link_util *lu, int argc, char **argv,
			   struct nlmsghdr *n)
{
	while (argc > 0) {
		if (strcmp(*argv, "mode") == 0 && argc > 1) {
			uint8_t mode;

			argc--;
			argv++;
			if (strcmp(*argv, "datagram") == 0) {
				mode = IBLAN_MODE_UD;
			} else if (strcmp(*argv, "connected") == 0) {
				mode = IBLAN_MODE_CONNECTED;
			} else {
				fprintf(stderr,
					"iblan: mode is \"datagram\" or \"connected\", not \"%s\"\n",
					*argv);
				return -1;
			}
			if (addattr8(n, 1024, IFLA_IBLAN_MODE, mode) < 0)
				return -1;
		} else if (strcmp(*argv, "help") == 0) {
			iblan_print_help(lu, argc, argv, stdout);
			return -1;
		} else {
			fprintf(stderr, "iblan: unknown option \"%s\"\n", *argv);
			iblan_print_help(lu, argc, argv, stderr);
			return -1;
		}
		argc--;
		argv++;
	}
	return 0;
}

static void iblan_print_opt(struct link_util *lu, FILE *f, struct rtattr *tb[])
{
	struct rtattr *dev;

	(void)lu;
	(void)f;
	if (!tb)
		return;
	dev = tb[IFLA_IBLAN_RDMA_DEV];
	/* A string attribute carries its NUL; print nothing if it does not. */
	if (dev && RTA_PAYLOAD(dev) > 0 &&
	    memchr(RTA_DATA(dev), 0, RTA_PAYLOAD(dev)))
		print_color_string(PRINT_ANY, COLOR_NONE, "rdma_dev", "rdma_dev %s ",
				   RTA_DATA(dev));
	print_uint_attr(tb, IFLA_IBLAN_PORT, 4, "port", "port %u ");
	print_uint_attr(tb, IFLA_IBLAN_LAN, 1, "lan", "lan %u ");
	print_uint_attr(tb, IFLA_IBLAN_LID, 2, "lid", "lid %u ");
	print_uint_attr(tb, IFLA_IBLAN_PEERS, 4, "peers", "peers %u ");
	if (tb[IFLA_IBLAN_MODE])
		print_color_string(PRINT_ANY, COLOR_NONE, "mode", "mode %s ",
				   mode_name(attr_uint(tb[IFLA_IBLAN_MODE], 1)));
}

static void iblan_print_help(struct link_util *lu, int argc, char **argv, FILE *f)
{
	(void)lu;
	(void)argc;
	(void)argv;
	fprintf(f,
		"Usage: ip link add link IBLAN_NETDEV name NAME [ address MAC ] type iblan\n"
		"       ip link set IBLAN_NETDEV type iblan mode { datagram | connected }\n"
		"\n"
		"MAC: VV:VV:VV:LL:HH:LL, the vendor ID, the LAN index (byte 3) and the LID\n"
		"     (bytes 4-5, 0001 to bfff); without it, the next free LAN and a LID the\n"
		"     name service assigns. See iblan(4).\n");
}

struct link_util iblan_link_util = {
	.id = "iblan",
	.maxattr = IFLA_IBLAN_MAX,
	.parse_opt = iblan_parse_opt,
	.print_opt = iblan_print_opt,
	.print_help = iblan_print_help,
};
