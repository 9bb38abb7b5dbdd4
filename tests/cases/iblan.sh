# iblan: three nodes on one segment, an emulated Ethernet LAN over RDMA UD,
# first over srnic, then over rxe. Each node's iblan0 has a MAC that embeds
# its LID; the name service finds the two others; ping and ping -6 reach
# every other node; arping; a VLAN on top; a raw frame of an unregistered
# ethertype arrives at both other nodes when broadcast (exactly once, one
# post per peer from one buffer) and at one when unicast; jumbo frames
# (MTU 9000) with ping and iperf3 TCP and UDP; a LID taken by another node
# is refused; a LID taken by hand while down is resolved the same way on
# every node (the lower GUID keeps it); a peer table full of made-up
# nodes (tests/progs/iblan_peer) turns newcomers away; a node that vanishes loses its
# carrier and ages out of the others' tables, while a node whose
# announcements the hub drops stays known to a node it sends to; rmmod
# iblan, and deleting the RDMA device, under traffic. A second LAN made with `ip link add ... type
# iblan` (see second_lan), which rmmod and the device's deletion remove;
# LAN ports in another namespace, made there or moved, deleted with it
# (see lan_in_netns).
# A bridge, a macvlan and a namespace's TCP flow over foreign MACs, learned
# so that they stop flooding (see bridged_lan); an active-backup bond over
# two LANs that fails over under ping (see bonded_lans); ethtool -C sets
# the receive CQ's and every transmit queue's CQ's moderation, a value
# beyond the device's limit or tx-frames without tx-usecs is refused, and
# traffic (multiqueue, the bridge, the bond, jumbo frames, iperf3) passes
# with the transmit moderation on; a
# transmit queue per CPU on iblan0 and lan5, which ethtool -l shows and
# ethtool -L changes under traffic, with pings pinned to each CPU leaving on
# that CPU's queue (see multiqueue). Over rxe only what depends
# on the device:
# the name service, ping, arping, raw frames, jumbo pings and the device
# going away.
# Node a has two vCPUs, for the queue-per-CPU checks that run in full only
# there (see multiqueue); b and c have one each, so that the three VMs'
# four vCPUs contend less for the host's two cores.
# vms: 3
# cpus: 2 1 1
# timeout: 1800
# pcap: off
iblan_ko=$SRNIC_TOP/iblan.ko
case $SRNIC_VM in a) me=1 ;; b) me=2 ;; c) me=3 ;; esac
others=$(for n in 1 2 3; do [ "$n" = "$me" ] || echo $n; done)
shared=/mnt/shared

# stat NAME: an `ethtool -S iblan0` counter.
stat() {
	ethtool -S iblan0 | awk -v n="$1:" '$1 == n { print $2 }'
}

# fanout_counts: "FRAMES POSTS" of iblan0's fan-out counters, one snapshot.
fanout_counts() {
	ethtool -S iblan0 | awk '$1 == "tx_fanout_frames:" { f = $2 } $1 == "tx_fanout_posts:" { p = $2 } END { print f, p }'
}

# settled_fanout_counts: fanout_counts once two snapshots half a second
# apart agree (at most 10 s), so that no frame is counted half.
settled_fanout_counts() {
	local last now tries=0
	last=$(fanout_counts)
	while [ $tries -lt 20 ]; do
		nap; nap
		now=$(fanout_counts)
		[ "$now" = "$last" ] && break
		last=$now tries=$((tries + 1))
	done
	echo "$last"
}

# raw_frames TYPE SECONDS: print "listening" once bound, then "<dest MAC>
# <payload>" for each frame of ethertype TYPE iblan0 receives within SECONDS.
raw_frames() {
	python3 -S - "$1" "$2" <<'EOF'
import socket, sys, time
kind, seconds = int(sys.argv[1], 16), float(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(kind))
s.bind(("iblan0", 0))
s.settimeout(0.2)
print("listening", flush=True)
end = time.time() + seconds
while time.time() < end:
    try:
        frame = s.recv(65535)
    except socket.timeout:
        continue
    print(frame[:6].hex(":"), frame[14:].decode(errors="replace").strip("\0"), flush=True)
EOF
}

# send_raw DEST-MAC TYPE TEXT [DEV]: one frame of ethertype TYPE out of DEV
# (iblan0).
send_raw() {
	python3 -S - "$1" "$2" "$3" "${4:-iblan0}" <<'EOF'
import socket, sys
dest, kind, text = bytes.fromhex(sys.argv[1].replace(":", "")), int(sys.argv[2], 16), sys.argv[3]
dev = sys.argv[4]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((dev, 0))
me = open(f"/sys/class/net/{dev}/address").read().strip()
frame = dest + bytes.fromhex(me.replace(":", "")) + kind.to_bytes(2, "big") + text.encode()
s.send(frame.ljust(60, b"\0"))
EOF
}

# hub_mute_multicast SECONDS: the hub joining the VMs drops this node's
# multicast for SECONDS (tests/lib/hub.py).
hub_mute_multicast() {
	send_raw ff:ff:ff:ff:ff:ff 88b6 "srnic-hub mute-multicast $1" eth0
}

# iblan_info NETDEV: "kind=..." and "name=value" for each IFLA_IBLAN_*
# attribute of NETDEV (include/uapi/linux/if_iblan.h), read with
# RTM_GETLINK: iproute2 prints the kind but not its attributes.
iblan_info() {
	python3 -S - "$1" <<'EOF'
import socket, struct, sys
index = socket.if_nametoindex(sys.argv[1])
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
ifinfo = struct.pack("=BxHiII", 0, 0, index, 0, 0)
s.send(struct.pack("=IHHII", 16 + len(ifinfo), 18, 1, 1, 0) + ifinfo)  # RTM_GETLINK
msg = s.recv(65536)
length, kind = struct.unpack("=IH", msg[:6])
if kind != 16:  # RTM_NEWLINK
    sys.exit(f"no RTM_NEWLINK but {kind}")
def attrs(b):
    while len(b) >= 4:
        n, t = struct.unpack("=HH", b[:4])
        if n < 4:
            return
        yield t & 0x3FFF, b[4:n]
        b = b[(n + 3) & ~3:]
names = {1: "rdma_dev", 2: "port", 3: "lan", 4: "lid", 5: "peers", 6: "mode"}
for t, v in attrs(msg[32:length]):
    if t != 18:  # IFLA_LINKINFO
        continue
    for t2, v2 in attrs(v):
        if t2 == 1:  # IFLA_INFO_KIND
            print("kind=" + v2.rstrip(b"\0").decode())
        elif t2 == 2:  # IFLA_INFO_DATA
            for t3, v3 in attrs(v2):
                value = v3.rstrip(b"\0").decode() if t3 == 1 else int.from_bytes(v3, "little")
                print(f"{names.get(t3, t3)}={value}")
EOF
}

# iblan_set NETDEV TYPE BYTES...: an RTM_NEWLINK request that sets the
# IFLA_IBLAN_* attribute TYPE of NETDEV to BYTES (hex, as sent), without
# iproute2's plugin; prints the kernel's error and its extack message
# and fails as the request did.
iblan_set() {
	python3 -S - "$@" <<'EOF'
import socket, struct, sys
index = socket.if_nametoindex(sys.argv[1])
def attr(t, payload):
    return struct.pack("=HH", 4 + len(payload), t) + payload + b"\0" * (-len(payload) % 4)
data = attr(int(sys.argv[2]), bytes(int(b, 16) for b in sys.argv[3:]))
info = attr(1, b"iblan\0") + attr(2, data)  # IFLA_INFO_KIND, IFLA_INFO_DATA
body = struct.pack("=BxHiII", 0, 0, index, 0, 0) + attr(18, info)  # IFLA_LINKINFO
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
s.setsockopt(270, 11, 1)  # SOL_NETLINK, NETLINK_EXT_ACK
s.send(struct.pack("=IHHII", 16 + len(body), 16, 0x5, 1, 0) + body)  # RTM_NEWLINK, REQUEST|ACK
msg = s.recv(65536)
length, kind, flags = struct.unpack("=IHH", msg[:8])
error = struct.unpack("=i", msg[16:20])[0] if kind == 2 else -1
text = ""
if flags & 0x200:  # NLM_F_ACK_TLVS: after the echoed request (its header alone if capped)
    at = 20 + (16 if flags & 0x100 else struct.unpack("=I", msg[20:24])[0])
    while at + 4 <= length:
        n, t = struct.unpack("=HH", msg[at:at + 4])
        if n < 4:
            break
        if t == 1:  # NLMSGERR_ATTR_MSG
            text = msg[at + 4:at + n].rstrip(b"\0").decode()
        at += (n + 3) & ~3
print(f"error {error}: {text}")
sys.exit(error != 0)
EOF
}

# queue_packets DEV: the tx_queue_N_packets counters of DEV, in queue order.
queue_packets() {
	ethtool -S "$1" | awk '$1 ~ /^tx_queue_[0-9]+_packets:$/ { printf "%s ", $2 }'
}

# pinned_pings DEV ADDR MIN0 MIN1...: pings ADDR 10 times from each CPU at
# once (taskset), then checks that transmit queue N of DEV sent at least
# MINn more frames ("0" as MINn: none at all).
pinned_pings() {
	local dev=$1 addr=$2 cpu pids= before after q=0 min d
	shift 2
	before=$(queue_packets "$dev")
	for cpu in $(seq 0 $(($(nproc) - 1))); do
		taskset -c "$cpu" ping -c 10 -i 0.1 -W 5 "$addr" > "/tmp/pinned.$cpu" 2>&1 &
		pids="$pids $!"
	done
	for pid in $pids; do wait "$pid" || fail "$kind: a ping pinned to a CPU failed: $(cat /tmp/pinned.*)"; done
	after=$(queue_packets "$dev")
	echo "$dev: tx_queue_N_packets $before -> $after"
	for min in "$@"; do
		d=$(( $(echo "$after" | cut -d' ' -f$((q + 1))) - $(echo "$before" | cut -d' ' -f$((q + 1))) ))
		if [ "$min" = 0 ]; then
			expect_eq "$d" 0 "$kind: frames on $dev's queue $q, not in use"
		else
			[ "$d" -ge "$min" ] || fail "$kind: $dev's queue $q sent $d frames, fewer than $min ($before -> $after)"
		fi
		q=$((q + 1))
	done
}

# vector_irqs N: the interrupts of srnic0's completion vector N so far, on
# every CPU.
vector_irqs() {
	awk -v n="srnic0-comp$1" -v cpus="$(nproc)" '$NF == n { for (i = 2; i < cpus + 2; i++) s += $i; print s }' /proc/interrupts
}

# multiqueue DEV NET [short]: DEV has a transmit queue per CPU (srnic a
# completion vector per CPU, each queue's sends complete on its own):
# ethtool -l shows them, and one RX queue; pings pinned to each CPU leave on
# that CPU's queue. Unless short: ethtool -L refuses counts DEV does not
# have, and changes the queues in use while a ping runs, which loses
# (almost) nothing; with one queue in use every CPU's pings leave on queue
# 0. NET.N is node N's address on DEV.
multiqueue() {
	local dev=$1 net=$2 short=${3:-} cpus peer channels ones= all= pinger irqs
	step "$kind: $dev's transmit queues: ethtool -l/-L, one per CPU"
	cpus=$(nproc)
	peer=$(echo $others | cut -d' ' -f1)
	channels=$(ethtool -l "$dev")
	echo "$channels"
	expect_eq "$(echo "$channels" | awk '$1 == "TX:" { printf "%s ", $2 }')" "$cpus $cpus " "$kind: $dev's TX queues in ethtool -l (maximum, in use)"
	expect_eq "$(echo "$channels" | awk '$1 == "RX:" { printf "%s ", $2 }')" "1 1 " "$kind: $dev's RX queues in ethtool -l"
	for q in $(seq 1 "$cpus"); do all="$all 10" ones="$ones 0"; done
	# Each CPU's pings on its own queue, whose completions come on the
	# vector of its number (the port's own CQ is on vector 0, and there
	# are no connections yet).
	irqs=$(vector_irqs 1)
	pinned_pings "$dev" "$net.$peer" $all
	[ "$cpus" -lt 2 ] || [ "$(vector_irqs 1)" -gt "${irqs:-0}" ] ||
		fail "$kind: no interrupt of srnic0-comp1 while $dev's queue 1 sent ($irqs)"
	[ -z "$short" ] || return 0
	# The core's messages; the driver refuses the rest with EINVAL.
	must_fail 'Invalid argument|exceeds maximum' ethtool -L "$dev" tx $((cpus + 1))
	must_fail 'Invalid argument|exceeds maximum' ethtool -L "$dev" rx 2
	must_fail 'Invalid argument|no RX or TX' ethtool -L "$dev" tx 0
	if [ "$cpus" -gt 1 ]; then
		ping -c 40 -i 0.05 -W 5 "$net.$peer" > /tmp/mq.ping 2>&1 &
		pinger=$!
		busybox sleep 0.5
		must ethtool -L "$dev" tx 1
		expect_eq "$(ethtool -l "$dev" | awk '$1 == "TX:" { printf "%s ", $2 }')" "$cpus 1 " "$kind: $dev's TX queues after ethtool -L tx 1"
		wait "$pinger"
		received=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/mq.ping)
		[ "${received:-0}" -ge 36 ] || fail "$kind: ping across ethtool -L tx 1 got ${received:-0} of 40 replies"
		# Every CPU on queue 0: "$((10 * cpus)) 0 0 ...".
		pinned_pings "$dev" "$net.$peer" $((10 * cpus)) ${ones# 0}
		ping -c 40 -i 0.05 -W 5 "$net.$peer" > /tmp/mq.ping 2>&1 &
		pinger=$!
		busybox sleep 0.5
		must ethtool -L "$dev" tx "$cpus"
		wait "$pinger"
		received=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/mq.ping)
		[ "${received:-0}" -ge 36 ] || fail "$kind: ping across ethtool -L tx $cpus got ${received:-0} of 40 replies"
		expect_eq "$(ethtool -l "$dev" | awk '$1 == "TX:" { printf "%s ", $2 }')" "$cpus $cpus " "$kind: $dev's TX queues after ethtool -L tx $cpus"
		pinned_pings "$dev" "$net.$peer" $all
	fi
}

# rx NETDEV: frames NETDEV handed to the stack (ip -s link).
rx() {
	cat "/sys/class/net/$1/statistics/rx_packets"
}

# bridged_lan: Ethernet semantics for MACs that are not iblan's. Node a
# bridges iblan0 with a veth whose far end sits in namespace ns1 (10.9.0.10,
# fd09::10); node b has 10.9.0.2 and fd09::2 on iblan0 and a macvlan in
# namespace ns2 (10.9.0.21, fd09::21). ns1 pings all four addresses and
# sends 4 MiB over TCP to the macvlan, checked byte for byte. The nodes
# learn which node each foreign MAC sits behind (debugfs lists it), so once
# learned that flow goes to node b alone: a floods none of it and c drops
# none of it as not for it.
bridged_lan() {
	step "$kind: a bridge on a and a macvlan on b: foreign MACs cross the LAN"
	debug_dir=/sys/kernel/debug/iblan/iblan0
	case $me in
	1)
		must ip netns add ns1
		must ip link add vh type veth peer name vn netns ns1
		must ip link add br0 type bridge
		must ip link set iblan0 master br0
		must ip link set vh master br0
		must ip link set vh up
		must ip link set br0 up
		must ip -n ns1 addr add 10.9.0.10/24 dev vn
		must ip -n ns1 addr add fd09::10/64 dev vn nodad
		must ip -n ns1 link set vn up
		ip netns exec ns1 cat /sys/class/net/vn/address > "$shared/vn.mac"
		;;
	2)
		must ip addr add 10.9.0.2/24 dev iblan0
		must ip addr add fd09::2/64 dev iblan0 nodad
		must ip netns add ns2
		must ip link add link iblan0 name mv0 type macvlan mode bridge
		must ip link set mv0 netns ns2
		must ip -n ns2 addr add 10.9.0.21/24 dev mv0
		must ip -n ns2 addr add fd09::21/64 dev mv0 nodad
		must ip -n ns2 link set mv0 up
		ip netns exec ns2 cat /sys/class/net/mv0/address > "$shared/mv0.mac"
		ip netns exec ns2 timeout 120 python3 -S - > /tmp/bridged.rx 2>&1 <<'PY' &
import hashlib, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.9.0.21", 5301))
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(65536)
    if not b:
        break
    h.update(b)
    n += len(b)
print(n, h.hexdigest(), flush=True)
PY
		receiver=$!
		wait_until 30 grep -q '^listening' /tmp/bridged.rx || fail "$kind: the TCP receiver in ns2 did not start"
		;;
	esac
	barrier "$kind.bridged-ready" 3
	if [ "$me" = 1 ]; then
		for addr in 10.9.0.2 10.9.0.21 fd09::2 fd09::21; do
			must ip netns exec ns1 ping -c 2 -W 5 "$addr"
		done
	fi
	barrier "$kind.bridged-learned" 3
	drops_before=$(stat rx_not_for_us_drops) floods_before=$(stat tx_foreign_floods) direct_before=$(stat tx_foreign_direct)
	unknown_before=$(stat tx_unknown_lid_floods) lost_before=$(($(stat ns_peers_aged_out) + $(stat ns_peers_left)))
	barrier "$kind.bridged-counted" 3
	if [ "$me" = 1 ]; then
		must ip netns exec ns1 timeout 120 python3 -S -c '
import random, socket
data = random.Random(7).randbytes(4 << 20)
s = socket.create_connection(("10.9.0.21", 5301), timeout=60)
s.sendall(data)
s.close()'
	fi
	barrier "$kind.bridged-sent" 3
	# Every node's share of the flow's floods, for node c's verdict: a
	# frame that reaches c was flooded by a or b (to a foreign MAC not
	# learned or forgotten with a peer that aged out, or to an iblan MAC
	# whose node is not known).
	echo "$(($(stat tx_foreign_floods) - floods_before)) $(($(stat tx_unknown_lid_floods) - unknown_before))" \
		"$(($(stat ns_peers_aged_out) + $(stat ns_peers_left) - lost_before))" > "$shared/floods.$kind.$me"
	barrier "$kind.bridged-floods" 3
	case $me in
	1)
		cat $debug_dir/peers
		mv_mac=$(cat "$shared/mv0.mac")
		grep -q "^fdb .* $mv_mac " $debug_dir/peers || fail "$kind: node a did not learn the macvlan's MAC $mv_mac"
		expect_eq $(($(stat tx_foreign_floods) - floods_before)) 0 "$kind: frames of the learned flow flooded by a"
		[ $(($(stat tx_foreign_direct) - direct_before)) -ge 500 ] ||
			fail "$kind: fewer than 500 frames of 4 MiB went to one node ($(($(stat tx_foreign_direct) - direct_before)))"
		must ip link del br0
		must ip -n ns1 link del vn
		must ip netns del ns1
		;;
	2)
		wait $receiver || { cat /tmp/bridged.rx; fail "$kind: the TCP receiver in ns2 failed"; }
		expected=$(python3 -S -c 'import hashlib, random; print(4 << 20, hashlib.sha256(random.Random(7).randbytes(4 << 20)).hexdigest())')
		expect_eq "$(tail -n 1 /tmp/bridged.rx)" "$expected" "$kind: 4 MiB over TCP from behind a's bridge to b's macvlan"
		cat $debug_dir/peers
		vn_mac=$(cat "$shared/vn.mac")
		grep -q "^fdb .* $vn_mac " $debug_dir/peers || fail "$kind: node b did not learn the bridged MAC $vn_mac"
		# The macvlan goes first: a namespace is cleaned up later, in
		# the background, and its macvlan would keep iblan0 busy for the
		# bond that comes next.
		must ip -n ns2 link del mv0
		must ip netns del ns2
		must ip addr del 10.9.0.2/24 dev iblan0
		must ip addr del fd09::2/64 dev iblan0
		;;
	3)
		read -r a_foreign a_unknown a_lost < "$shared/floods.$kind.1"
		read -r b_foreign b_unknown b_lost < "$shared/floods.$kind.2"
		expect_eq $(($(stat rx_not_for_us_drops) - drops_before)) 0 \
			"$kind: frames of the learned flow that reached node c (floods to foreign MACs: a $a_foreign, b $b_foreign; to unknown LIDs: a $a_unknown, b $b_unknown; peers lost: a $a_lost, b $b_lost)"
		;;
	esac
	barrier "$kind.bridged-done" 3
}

# bonded_lans: an active-backup bond over lan5 (active) and iblan0 on nodes
# a and b (fail_over_mac active: each slave keeps its own address, so the
# bond takes the active one's; gratuitous ARPs for a second after a change
# tell the other node). a pings b's bond while both take lan5 down: the
# bonds fail over to iblan0 and at most 5 of 40 pings are lost.
bonded_lans() {
	step "$kind: an active-backup bond over lan5 and iblan0 fails over under ping"
	if [ "$me" != 3 ]; then
		must modprobe bonding max_bonds=0
		must ip link add bond9 type bond mode active-backup miimon 100 fail_over_mac active num_grat_arp 10
		for slave in lan5 iblan0; do
			must ip link set "$slave" down
			must ip link set "$slave" master bond9
		done
		must ip link set bond9 type bond primary lan5
		must ip addr add "10.11.0.$me/24" dev bond9
		must ip link set bond9 up
		wait_until 20 grep -q 'Currently Active Slave: lan5' /proc/net/bonding/bond9 ||
			{ cat /proc/net/bonding/bond9; fail "$kind: lan5 is not the bond's active slave"; }
	fi
	barrier "$kind.bonded" 3
	if [ "$me" = 1 ]; then
		wait_until 30 ping -c 1 -W 1 10.11.0.2 || fail "$kind: the bonds do not reach each other"
		ping -i 0.2 -c 40 -W 1 10.11.0.2 > /tmp/bond_ping 2>&1 &
		pinger=$!
		busybox sleep 2
	fi
	barrier "$kind.bond-pinging" 3
	if [ "$me" != 3 ]; then
		must ip link set lan5 down
		wait_until 20 grep -q 'Currently Active Slave: iblan0' /proc/net/bonding/bond9 ||
			{ cat /proc/net/bonding/bond9; fail "$kind: the bond did not fail over to iblan0"; }
	fi
	if [ "$me" = 1 ]; then
		kill -0 $pinger 2> /dev/null || fail "$kind: the ping ended before the bond failed over (nothing measured)"
	fi
	if [ "$me" = 1 ]; then
		wait $pinger
		cat /tmp/bond_ping
		received=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/bond_ping)
		[ "${received:-0}" -ge 35 ] || fail "$kind: ${received:-0} of 40 pings across the bond's failover arrived (at least 35 expected)"
		echo "ok: $received of 40 pings across the failover"
	fi
	barrier "$kind.bond-failed-over" 3
	if [ "$me" != 3 ]; then
		must ip link del bond9
		must ip link set lan5 up
		must ip link set iblan0 up
		must ip addr replace "10.5.0.$me/24" dev lan5
		must ip addr replace "10.1.0.$me/24" dev iblan0
		wait_until 30 sh -c "[ \"\$(ethtool -S iblan0 | awk '\$1 == \"ns_peers:\" { print \$2 }')\" = 2 ]" ||
			fail "$kind: iblan0 did not find both other nodes again after the bond"
	fi
	barrier "$kind.unbonded" 3
}

# second_lan: a second LAN on the same fabric, `lan5` on every node made
# with `ip link add ... type iblan` (LAN 5, LID = node number): bad
# addresses and an MTU above datagram mode's are refused with the reason
# and leave nothing behind; a LAN added with `mode connected` starts in
# it; `ip -d
# link` shows the kind and the parent; the default is the next free LAN;
# pings work within LAN 5; LAN 5's broadcasts never reach LAN 0; b
# deletes its lan5 under traffic both ways, then is refused a LID a holds
# in LAN 5 and makes lan5 again with its own (every node's lan5 stays
# until rmmod removes it).
second_lan() {
	step "$kind: a second LAN, lan5, made with ip link add"
	v=${prefix%:*}
	# What ip link add, set and del take or refuse is each node's own
	# business, the same code on every node: node a checks it while b
	# and c only make lan5 (the debug VMs share two host cores).
	if [ "$me" = 1 ]; then
		must_fail 'must begin with the vendor ID' ip link add link iblan0 name bad0 address 04:00:00:05:00:07 type iblan
		must_fail 'multicast' ip link add link iblan0 name bad0 address 03:00:00:05:00:07 type iblan
		must_fail 'are the LID, 0001 to bfff' ip link add link iblan0 name bad0 address "$v:05:00:00" type iblan
		must_fail 'are the LID, 0001 to bfff' ip link add link iblan0 name bad0 address "$v:05:c0:00" type iblan
		must_fail 'LAN 0 .*has a netdev on this port already' ip link add link iblan0 name bad0 address "$v:00:00:07" type iblan
		must_fail 'is not an iblan netdev' ip link add link eth0 name bad0 type iblan
		must_fail 'give the parent' ip link add name bad0 type iblan
		! ip link show bad0 > /dev/null 2>&1 || fail "$kind: a refused ip link add left bad0 behind"
		must_fail 'an MTU of 9001 is more than this link carries' ip link add link iblan0 name bad0 mtu 9001 type iblan
		! ip link show bad0 > /dev/null 2>&1 || fail "$kind: a refused ip link add left bad0 behind"
		# The mode at ip link add, as IPoIB takes it: connected from the
		# start, with its MTU.
		must env IP_LIB_DIR="$SRNIC_TOP/out/progs" ip link add link iblan0 name lan9 type iblan mode connected
		expect_eq "$(cat /sys/class/net/lan9/mode) $(cat /sys/class/net/lan9/mtu)" "connected 65520" \
			"$kind: the mode and MTU of a LAN added in connected mode"
		must ip link del lan9
	fi
	must ip link add link iblan0 name lan5 address "$v:05:00:0$me" type iblan
	if [ "$me" = 1 ]; then
		must_fail 'LAN 5 .*has a netdev on this port already' ip link add link iblan0 name bad0 address "$v:05:00:09" type iblan
		! ip link show bad0 > /dev/null 2>&1 || fail "$kind: a refused ip link add left bad0 behind"
		details=$(IP_LIB_DIR=$SRNIC_TOP/out/progs ip -d link show lan5)
		echo "$details"
		# iproute2's plugin (tools/iproute2) prints iblan's IFLA_INFO_DATA.
		echo "$details" | grep -Eq "^ +iblan rdma_dev ${kind}0 port 1 lan 5 lid $me peers [0-9]+ mode datagram" ||
			fail "$kind: ip -d link (with link_iblan.so) does not show rdma_dev ${kind}0 port 1 lan 5 lid $me, peers and mode"
		expect_eq "$(IP_LIB_DIR=$SRNIC_TOP/out/progs ip -j -d link show lan5 |
			python3 -S -c 'import json, sys; d = json.load(sys.stdin)[0]["linkinfo"]["info_data"]; print(d["lan"], d["lid"], d["mode"])')" \
			"5 $me datagram" "$kind: ip -j -d link's info_data of lan5"
		# The mode is the one attribute a request may set, by the plugin or a
		# bare request; the read-only attributes are refused with the policy's
		# message. Connected mode raises the MTU to 65520 and offers
		# scatter-gather; datagram mode brings it down to 9000 (connected_mode
		# below runs traffic over it).
		must env IP_LIB_DIR="$SRNIC_TOP/out/progs" ip link set lan5 type iblan mode datagram
		must iblan_set iblan0 6 00
		must env IP_LIB_DIR="$SRNIC_TOP/out/progs" ip link set lan5 type iblan mode connected
		expect_eq "$(iblan_info lan5 | grep -E '^(lid|mode)=' | tr '\n' ' ')" "lid=$me mode=1 " \
			"$kind: lan5's LID and mode in connected mode"
		expect_eq "$(cat /sys/class/net/lan5/mtu)" 65520 "$kind: lan5's MTU in connected mode"
		must_fail 'mtu greater than device maximum' ip link set lan5 mtu 65521
		must iblan_set lan5 6 00
		expect_eq "$(cat /sys/class/net/lan5/mtu)" 9000 "$kind: lan5's MTU back in datagram mode"
		must_fail 'Invalid argument' ip link set lan5 mtu 9001
		must ip link set lan5 mtu 1500
		must_fail 'is "datagram" or "connected"' \
			env IP_LIB_DIR="$SRNIC_TOP/out/progs" ip link set iblan0 type iblan mode fast
		must_fail 'error -22: .*LID is set by the address' iblan_set lan5 4 07 00
		must_fail 'error -34' iblan_set lan5 6 02
		expect_eq "$(iblan_info lan5 | grep -E '^(lid|mode)=' | tr '\n' ' ')" "lid=$me mode=0 " \
			"$kind: lan5's LID and mode after the refused requests"
		# sysfs's mode, as IPoIB's: the same choice through a file
		# (coreutils' echo: dash's builtin says "I/O error" for any errno).
		expect_eq "$(cat /sys/class/net/lan5/mode)" datagram "$kind: lan5's sysfs mode"
		must sh -c "echo connected > /sys/class/net/lan5/mode"
		expect_eq "$(cat /sys/class/net/lan5/mode)" connected "$kind: lan5's sysfs mode after a write"
		must sh -c "echo datagram > /sys/class/net/lan5/mode"
		must_fail "Invalid argument" sh -c "/bin/echo fast > /sys/class/net/lan5/mode"
		expect_eq "$(cat /sys/class/net/lan5/mode)" datagram "$kind: lan5's sysfs mode after the writes"
		must ip link set lan5 mtu 1500
		echo "$details" | grep -q '^[0-9]*: lan5@iblan0:' || fail "$kind: ip -d link does not show lan5's parent"
		echo "$details" | grep -Eq '^ +iblan( |$)' || fail "$kind: ip -d link does not show kind iblan"
		ip -d link show iblan0 | grep -Eq '^ +iblan( |$)' || fail "$kind: ip -d link does not show iblan0's kind"
		ethtool -i lan5 | grep -q '^driver: iblan' || fail "$kind: ethtool -i does not name iblan for lan5"
		# Without an address: the next free LAN (1), a LID of the name service.
		must ip link add link iblan0 name lanx type iblan
		expect_eq "$(cut -d: -f1-4 /sys/class/net/lanx/address)" "$v:01" "$kind: the default LAN of a new child"
		# ip link del on the port's own netdev leaves it (it goes with the port).
		ip link del iblan0 2>/dev/null
		ip link show iblan0 > /dev/null || fail "$kind: ip link del removed iblan0"
		must ip link del lanx
	fi
	must ip link set lan5 up
	must ip addr add "10.5.0.$me/24" dev lan5
	barrier "$kind.lan5" 3
	lan5_peers() { [ "$(ethtool -S lan5 | awk '$1 == "ns_peers:" { print $2 }')" = "$1" ]; }
	wait_until 30 lan5_peers 2 ||
		{ ethtool -S lan5; fail "$kind: lan5's name service did not find both other nodes"; }
	expect_eq "$(ethtool -S lan5 | awk '$1 == "ns_lid:" { print $2 }')" "$me" "$kind: lan5 keeps the LID of its address"
	expect_eq "$(iblan_info lan5 | tr '\n' ' ')" "kind=iblan rdma_dev=${kind}0 port=1 lan=5 lid=$me peers=2 mode=0 " "$kind: lan5's link attributes"
	expect_eq "$(iblan_info iblan0 | grep -E '^(kind|lan)=' | tr '\n' ' ')" "kind=iblan lan=0 " "$kind: iblan0's kind and LAN"
	for n in $others; do
		must ping -c 2 -W 5 "10.5.0.$n"
		ip neigh show dev lan5 | grep -q "10.5.0.$n lladdr $v:05:00:0$n" ||
			{ ip neigh show dev lan5; fail "$kind: 10.5.0.$n is not at LAN 5's MAC of node $n"; }
	done
	barrier "$kind.lan5-pinged" 3
	# iblan0's transmit queues moderated from here to the jumbo frames
	# (see run_over): multiqueue's ethtool -L adds queue 1 back under it,
	# and its pings, the bridge's TCP flow and the bond pass with it.
	must ethtool -C iblan0 tx-usecs 200 tx-frames 8
	# ethtool -L's checks, node a's alone (see above); every node's
	# pings leave on their CPU's queues.
	if [ "$me" = 1 ]; then
		multiqueue iblan0 10.1.0
	else
		multiqueue iblan0 10.1.0 short
	fi
	multiqueue lan5 10.5.0 short
	barrier "$kind.multiqueue" 3

	step "$kind: LAN 5's broadcasts stay in LAN 5"
	lan0_before=$(rx iblan0) lan5_before=$(rx lan5)
	barrier "$kind.lan5-counted" 3
	if [ "$me" = 1 ]; then
		ping -b -c 100 -i 0.01 -W 1 10.5.0.255 > /dev/null 2>&1
	fi
	barrier "$kind.lan5-burst" 3
	if [ "$me" != 1 ]; then
		got_burst() { [ "$(rx lan5)" -ge $((lan5_before + 100)) ]; }
		wait_until 10 got_burst ||
			fail "$kind: lan5 received $(($(rx lan5) - lan5_before)) of the 100 broadcasts"
		lan0_delta=$(($(rx iblan0) - lan0_before))
		# LAN 0 is idle but for the stack's own rare multicast.
		[ "$lan0_delta" -lt 5 ] || fail "$kind: iblan0 received $lan0_delta frames during LAN 5's burst of 100"
		echo "ok: lan5 +$(($(rx lan5) - lan5_before)), iblan0 +$lan0_delta frames during LAN 5's burst"
	fi
	barrier "$kind.lan5-isolated" 3

	step "$kind: b deletes lan5 under traffic"
	case $me in
	1) ping -f -w 4 10.5.0.2 > /dev/null 2>&1 & ;;
	2)
		ping -f -w 4 10.5.0.1 > /dev/null 2>&1 &
		sleep 1
		must ip link del lan5
		! ip link show lan5 > /dev/null 2>&1 || fail "$kind: lan5 still there after ip link del"
		;;
	esac
	wait
	barrier "$kind.lan5-deleted" 3
	# LAN 0 is unharmed.
	for n in $others; do must ping -c 1 -W 5 "10.1.0.$n"; done
	if [ "$me" != 2 ]; then
		wait_until 15 lan5_peers 1 ||
			{ ethtool -S lan5; fail "$kind: b's lan5 did not leave LAN 5"; }
	fi
	barrier "$kind.lan5-left" 3
	if [ "$me" = 2 ]; then
		step "$kind: a LID another node holds in LAN 5 is refused"
		must_fail 'LID 0x0001 is in use in LAN 5' ip link add link iblan0 name lan5 address "$v:05:00:01" type iblan
		! ip link show lan5 > /dev/null 2>&1 || fail "$kind: a refused ip link add left lan5 behind"
		must ip link add link iblan0 name lan5 address "$v:05:00:02" type iblan
	fi
	barrier "$kind.lan5-done" 3
}

# connected_mode: a and b put iblan0 in connected mode (a with ip link,
# b through sysfs), c stays in datagram mode. b goes first, and a, still
# in datagram mode, refuses b's offer. a's first unicast to b then asks
# for a connection, which comes up once on both sides; 60000-byte pings and a
# file over TCP cross it whole (checked by its SHA-256); a's unicast to c
# gets c's refusal and goes over UD; a's connection completes on the
# vector b's GID picks; b going back to datagram mode tells a,
# whose connection closes, and ping still reaches b over UD.
connected_mode() {
	step "$kind: connected mode between a and b, b first; c in datagram mode"
	refused_before=$(stat cm_offers_refused)
	closed_before=$(stat cm_connections_closed)
	# b switches first and pings a, still in datagram mode: a refuses b's
	# offer, and the ping goes over UD. Once b has let its offer go, a
	# switches: one connection comes up, not a second after a working
	# first was torn down (a late copy of an offer and a postponed tick
	# once did that here). b's refusal is its first failure, which holds
	# its own offers back but not a's.
	barrier "$kind.cm-switch" 3
	if [ "$me" = 2 ]; then
		must sh -c "echo connected > /sys/class/net/iblan0/mode"
		must ping -c 1 -W 5 10.1.0.1
		wait_until 20 sh -c "[ \$(ethtool -S iblan0 | awk '\$1 == \"cm_connections_closed:\" { print \$2 }') -gt $closed_before ]" ||
			{ ethtool -S iblan0; fail "$kind: b did not let its refused offer go"; }
	fi
	if [ "$me" = 1 ]; then
		wait_until 20 sh -c "[ \$(ethtool -S iblan0 | awk '\$1 == \"cm_offers_refused:\" { print \$2 }') -gt $refused_before ]" ||
			{ ethtool -S iblan0; fail "$kind: a, in datagram mode, did not refuse b's offer"; }
	fi
	barrier "$kind.cm-b-refused" 3
	[ "$me" != 1 ] || must env IP_LIB_DIR="$SRNIC_TOP/out/progs" ip link set iblan0 type iblan mode connected
	if [ "$me" != 3 ]; then
		expect_eq "$(cat /sys/class/net/iblan0/mode)" connected "$kind: iblan0's sysfs mode"
		expect_eq "$(cat /sys/class/net/iblan0/mtu)" 65520 "$kind: iblan0's MTU in connected mode"
		ethtool -k iblan0 | grep -q '^scatter-gather: on' ||
			{ ethtool -k iblan0; fail "$kind: no scatter-gather in connected mode"; }
		expect_eq "$(iblan_info iblan0 | grep '^mode=')" mode=1 "$kind: IFLA_IBLAN_MODE in connected mode"
	fi
	barrier "$kind.cm-on" 3
	case $me in
	1)
		# The first unicast goes over UD and asks for the connection.
		must ping -c 1 -W 5 10.1.0.2
		# Each try pings again: a unicast is what asks for a connection.
		wait_until 20 sh -c 'ping -c 1 -W 1 10.1.0.2 > /dev/null; [ "$(ethtool -S iblan0 | awk "\$1 == \"cm_connections_up:\" { print \$2 }")" -ge 1 ]' ||
			{ ethtool -S iblan0; fail "$kind: no connection to b came up"; }
		must ping -c 3 -W 5 -s 60000 -M do 10.1.0.2
		[ "$(stat tx_connected_frames)" -ge 3 ] || fail "$kind: the big pings did not go over the connection"
		# The connection's CQ (iblan's only one under 256 entries) is on
		# the vector b's GID picks (link_vector in rust/pure/connect.rs),
		# of a's two: connections do not all complete on vector 0.
		if [ "$kind" = srnic ]; then
			vectors=$(grep -c 'srnic0-comp' /proc/interrupts)
			want=$(python3 -S -c 'import ipaddress, sys
print(sum(ipaddress.IPv6Address(sys.argv[1]).packed) % int(sys.argv[2]))' "$(cat "$shared/ll.$kind.2")" "$vectors")
			cqs=$(rdma -dd res show cq dev srnic0)
			echo "$cqs"
			got=$(echo "$cqs" | awk '/\[iblan\]/ {
				for (i = 1; i < NF; i++) { if ($i == "cqe") c = $(i + 1); if ($i == "drv_comp_vector") v = $(i + 1) }
				if (c < 256) print v }')
			expect_eq "$got" "$want" "$kind: the completion vector of a's connection to b, of $vectors"
		fi
		# c refuses: a keeps UD to it (and its MTU, 1500, makes TCP's MSS).
		must ping -c 2 -W 5 10.1.0.3
		;;
	3)
		wait_until 20 sh -c "[ \$(ethtool -S iblan0 | awk '\$1 == \"cm_offers_refused:\" { print \$2 }') -gt $refused_before ]" ||
			{ ethtool -S iblan0; fail "$kind: c did not refuse a's offer"; }
		expect_eq "$(stat cm_connections_up)" 0 "$kind: connections on c, in datagram mode"
		;;
	esac
	if [ "$scope" = full ]; then
		# A file over TCP across the connection, checked whole. It takes
		# about 30 s on a quiet host and took over 60 s on a slow one:
		# its bounds leave room for that.
		if [ "$me" = 2 ]; then
			timeout 150 python3 -S -c '
import hashlib, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.1.0.2", 5301)); s.listen(1)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest())' > /tmp/cm_rx.out 2>&1 &
			receiver=$!
			wait_until 20 listening 5301 || fail "$kind: the TCP receiver did not listen"
		fi
		barrier "$kind.cm-tcp" 3
		if [ "$me" = 1 ]; then
			head -c 8000000 /dev/urandom > /tmp/cm.bin
			echo "8000000 $(sha256sum < /tmp/cm.bin | cut -d' ' -f1)" > "$shared/cm.sum"
			timeout 120 python3 -S -c '
import socket, sys
s = socket.create_connection(("10.1.0.2", 5301))
s.sendall(open("/tmp/cm.bin", "rb").read()); s.close()' || fail "$kind: sending the file over iblan0 failed"
		fi
		barrier "$kind.cm-sent" 3 180
		if [ "$me" = 2 ]; then
			wait $receiver || { cat /tmp/cm_rx.out; fail "$kind: the TCP receiver failed"; }
			expect_eq "$(cat /tmp/cm_rx.out)" "$(cat "$shared/cm.sum")" "$kind: the file over the connection (bytes, SHA-256)"
			[ "$(stat rx_connected_frames)" -gt 100 ] || fail "$kind: the file did not come over the connection"
			# Its frames went up in the pages they arrived in: 8 MB is
			# about 1950 pages past the frames' first 256 bytes.
			[ "$(stat rx_pages_handed_up)" -gt 1000 ] ||
				fail "$kind: the frames were not handed up in their receive pages (rx_pages_handed_up $(stat rx_pages_handed_up), rx_pages_copied $(stat rx_pages_copied))"
		fi
	fi
	barrier "$kind.cm-data" 3
	if [ "$me" != 3 ]; then
		# A second one would mean a working first was torn down: the
		# handshake's counters say which way.
		up=$(stat cm_connections_up)
		[ "$up" = 1 ] || ethtool -S iblan0 | grep '^ *cm_'
		expect_eq "$up" 1 "$kind: connections that came up on node $me"
	fi
	if [ "$me" = 2 ]; then
		must sh -c "echo datagram > /sys/class/net/iblan0/mode"
		expect_eq "$(cat /sys/class/net/iblan0/mtu)" 9000 "$kind: b's MTU back in datagram mode"
		ethtool -k iblan0 | grep -q '^scatter-gather: off' || fail "$kind: scatter-gather stays on in datagram mode"
	fi
	barrier "$kind.cm-b-off" 3
	if [ "$me" = 1 ]; then
		# b's refusal closes a's side at once.
		wait_until 10 sh -c '[ "$(ethtool -S iblan0 | awk "\$1 == \"cm_connections_closed:\" { print \$2 }")" -ge 1 ]' ||
			{ ethtool -S iblan0; fail "$kind: a's connection to b did not close"; }
		must ping -c 2 -W 5 10.1.0.2
		must env IP_LIB_DIR="$SRNIC_TOP/out/progs" ip link set iblan0 type iblan mode datagram
	fi
	expect_eq "$(stat cm_connections_failed)" 0 "$kind: failed connections"
	[ "$me" = 3 ] || must ip link set iblan0 mtu 1500
	barrier "$kind.cm-done" 3
}

# lan_in_netns: LAN 6 children in another namespace. a makes its lan6
# straight into a new namespace "lanns" (ip link add ... netns), b from
# inside lanns with the parent named in the initial namespace (link-netns,
# the parent by ifindex), c in the initial namespace. A port's own netdev
# cannot move; a child can (a moves it out and back); the parent keeps a
# child in another namespace (a second LAN 6 child is refused); ip -d
# link names the parent's namespace. Pings across LAN 6 from inside lanns.
# Then a deletes lanns with lan6 inside: it goes, and LAN 6 is free again
# on the port. b's lan6 stays in lanns for rmmod, and b makes lan5 in
# lanns for the RDMA device's deletion (see run_over).
lan_in_netns() {
	step "$kind: LAN 6 children in another namespace"
	v=${prefix%:*}
	at=
	if [ "$me" != 3 ]; then
		must ip netns add lanns
		must ip -n lanns link set lo up
		at="ip netns exec lanns"
		must_fail 'netns is immutable' ip link set iblan0 netns lanns
	fi
	case $me in
	1) must ip link add link iblan0 name lan6 address "$v:06:00:01" netns lanns type iblan ;;
	2)
		must ip netns attach init 1
		must ip -n lanns link add link "if$(cat /sys/class/net/iblan0/ifindex)" link-netns init \
			name lan6 address "$v:06:00:02" type iblan
		;;
	3) must ip link add link iblan0 name lan6 address "$v:06:00:03" type iblan ;;
	esac
	if [ "$me" != 3 ]; then
		! ip link show lan6 > /dev/null 2>&1 || fail "$kind: lan6 is in the initial namespace, not in lanns"
		details=$(ip -n lanns -d link show lan6)
		echo "$details"
		echo "$details" | grep -q "^[0-9]*: lan6@if$(cat /sys/class/net/iblan0/ifindex):" ||
			fail "$kind: ip -n lanns -d link does not show lan6's parent by its ifindex"
		echo "$details" | grep -Eq 'link-netns(id [0-9]+| init) ' || fail "$kind: ip -d link does not name the parent's namespace"
	fi
	if [ "$me" = 1 ]; then
		must ip -n lanns link set lan6 netns 1
		ip link show lan6 > /dev/null || fail "$kind: lan6 did not move to the initial namespace"
		must ip link set lan6 netns lanns
		ip -n lanns link show lan6 > /dev/null || fail "$kind: lan6 did not move back to lanns"
	fi
	must_fail 'LAN 6 .*has a netdev on this port already' ip link add link iblan0 name bad0 address "$v:06:00:09" type iblan
	must $at ip link set lan6 up
	must $at ip addr add "10.6.0.$me/24" dev lan6
	barrier "$kind.lan6" 3
	lan6_peers() { [ "$($at ethtool -S lan6 | awk '$1 == "ns_peers:" { print $2 }')" = "$1" ]; }
	wait_until 30 lan6_peers 2 ||
		{ $at ethtool -S lan6; fail "$kind: lan6's name service did not find both other nodes"; }
	for n in $others; do must $at ping -c 2 -W 5 "10.6.0.$n"; done
	barrier "$kind.lan6-pinged" 3
	if [ "$me" = 1 ]; then
		step "$kind: ip netns del with lan6 inside"
		must ip netns del lanns
		# The namespace's exit runs in a work item: LAN 6 frees then.
		wait_until 20 ip link add link iblan0 name lan6 address "$v:06:00:01" type iblan ||
			fail "$kind: LAN 6 still taken on the port after lanns was deleted"
		must ip link del lan6
	fi
	barrier "$kind.lan6-done" 3
}

# run_over KIND SCOPE: the LAN over KIND's device; SCOPE "full" runs every
# check, "core" those that depend on the device under iblan (the name
# service, unicast and broadcast, reassembly, the device going away).
run_over() {
	kind=$1 scope=$2
	wait_until 30 sh -c "ip -6 addr show dev eth0 scope link | grep -q inet6 && ! ip -6 addr show dev eth0 | grep -q tentative" ||
		fail "eth0 has no IPv6 link-local address"
	case $kind in
	srnic)
		load_srnic
		must rdma link add srnic0 type srnic netdev eth0
		;;
	rxe)
		must modprobe rdma_rxe
		must rdma link add rxe0 type rxe netdev eth0
		;;
	esac
	# iblan speaks from the port's link-local RoCEv2 GID.
	eth0_ll=$(ip -6 addr show dev eth0 scope link | awk '/inet6/ { sub("/.*", "", $2); print $2; exit }')
	gid_index "${kind}0" "$eth0_ll" > /dev/null
	echo "$eth0_ll" > "$shared/ll.$kind.$me"
	# Over rxe, a LAN and vendor ID of our choosing (module parameters).
	case $kind in
	srnic) iblan_args= prefix=02:00:00:00 ;;
	rxe) iblan_args="lan=7 vendor=0x06aabb" prefix=06:aa:bb:07 ;;
	esac
	must_fail 'Invalid (argument|parameters)' insmod "$iblan_ko" lan=256
	must_fail 'Invalid (argument|parameters)' insmod "$iblan_ko" vendor=0x010203
	must insmod "$iblan_ko" $iblan_args
	wait_until 30 ip link show iblan0 || fail "$kind: no iblan0 after insmod"
	must ip link set iblan0 up
	must ip addr add "10.1.0.$me/24" dev iblan0
	mac=$(cat /sys/class/net/iblan0/address)
	step "$kind: iblan0 has MAC $mac"
	lid=$(stat ns_lid)
	expect_eq "$mac" "$(printf '%s:%02x:%02x' "$prefix" $((lid >> 8)) $((lid & 255)))" "$kind: MAC carries the LID"
	ethtool -i iblan0 | grep -q '^driver: iblan' || fail "$kind: ethtool -i does not name iblan"
	echo "$mac" > "$shared/mac.$kind.$me"
	barrier "$kind.up" 3
	wait_until 30 sh -c "[ \"\$(ethtool -S iblan0 | awk '\$1 == \"ns_peers:\" { print \$2 }')\" = 2 ]" ||
		{ ethtool -S iblan0; fail "$kind: the name service did not find both other nodes"; }
	wait_until 30 sh -c "ip -6 addr show dev iblan0 scope link | grep -q 'inet6' && ! ip -6 addr show dev iblan0 | grep -q tentative" ||
		fail "$kind: no IPv6 link-local address on iblan0"
	barrier "$kind.named" 3

	for n in $others; do
		peer_mac=$(cat "$shared/mac.$kind.$n")
		must ping -c 3 -W 5 "10.1.0.$n"
		ip neigh show dev iblan0 | grep -q "10.1.0.$n lladdr $peer_mac" ||
			{ ip neigh show dev iblan0; fail "$kind: ip neigh lacks 10.1.0.$n at $peer_mac"; }
		ll=$(python3 -S -c "import ipaddress,sys; m=bytes.fromhex(sys.argv[1].replace(':','')); e=bytes([m[0]^2])+m[1:3]+b'\xff\xfe'+m[3:]; print(ipaddress.IPv6Address(b'\xfe\x80'+bytes(6)+e))" "$peer_mac")
		must ping -6 -c 3 -W 5 "$ll%iblan0"
		# Every node probes at once, so requests count as answers too:
		# judge by the replies' source.
		out=$(arping -c 2 -w 10 -I iblan0 "10.1.0.$n" 2>&1)
		echo "$out"
		echo "$out" | grep -qi "reply from 10.1.0.$n \[$peer_mac\]" ||
			fail "$kind: arping 10.1.0.$n got no reply from $peer_mac"
	done
	barrier "$kind.pinged" 3

	if [ "$scope" = full ]; then
		second_lan
		lan_in_netns
	fi

	if [ "$scope" = full ]; then
		bridged_lan
		bonded_lans
		step "$kind: interrupt coalescing with ethtool -C"
		# tx-usecs and tx-frames were set before multiqueue (second_lan).
		must ethtool -C iblan0 rx-usecs 64 rx-frames 16
		coalesce=$(ethtool -c iblan0)
		echo "$coalesce"
		expect_match "$coalesce" '^rx-usecs:[[:space:]]+64$' "$kind: ethtool -c shows rx-usecs 64"
		expect_match "$coalesce" '^rx-frames:[[:space:]]+16$' "$kind: ethtool -c shows rx-frames 16"
		expect_match "$coalesce" '^tx-usecs:[[:space:]]+200$' "$kind: ethtool -c shows tx-usecs 200"
		expect_match "$coalesce" '^tx-frames:[[:space:]]+8$' "$kind: ethtool -c shows tx-frames 8"
		# Beyond the CQ's moderation period (4095 us), a send CQ's count
		# without a period (a stopped queue could wait for it), and a
		# parameter iblan does not have: node a's checks (see second_lan).
		if [ "$me" = 1 ]; then
			must_fail 'Invalid argument' ethtool -C iblan0 rx-usecs 5000
			must_fail 'Invalid argument' ethtool -C iblan0 tx-usecs 5000
			must_fail 'Invalid argument' ethtool -C iblan0 tx-usecs 0
			must_fail 'unsupported parameter|Operation not supported' ethtool -C iblan0 rx-usecs-irq 10
			coalesce=$(ethtool -c iblan0)
			expect_match "$coalesce" '^rx-usecs:[[:space:]]+64$' "$kind: refused changes keep rx-usecs"
			expect_match "$coalesce" '^tx-usecs:[[:space:]]+200$' "$kind: refused changes keep tx-usecs"
		fi
		barrier "$kind.coalesced" 3
		for n in $others; do must ping -c 3 -W 5 "10.1.0.$n"; done
		# The receive side goes back; the transmit queues stay moderated
		# through the VLAN, raw frames, jumbo pings and iperf3 below.
		must ethtool -C iblan0 rx-usecs 0 rx-frames 0
		barrier "$kind.coalesce-done" 3
		step "$kind: a VLAN on top"
		must modprobe 8021q
		must ip link add link iblan0 name iblan0.7 type vlan id 7
		must ip addr add "10.7.0.$me/24" dev iblan0.7
		must ip link set iblan0.7 up
		barrier "$kind.vlan" 3
		for n in $others; do must ping -c 2 -W 5 "10.7.0.$n"; done
		barrier "$kind.vlan-done" 3
		must ip link del iblan0.7
	fi

	step "$kind: a connected-mode OFFER is refused at once"
	# Node b offers a connection to node a's QP from a UD QP of its own
	# (as a node in connected mode would); a is in datagram mode and
	# answers REFUSE to that QP.
	if [ "$me" = 1 ]; then
		awk '$1 == "self" { print $3, $4, $5 }' /sys/kernel/debug/iblan/iblan0/peers > "$shared/self.$kind.1"
		refused_before=$(stat cm_offers_refused)
	fi
	barrier "$kind.offer-ready" 3
	if [ "$me" = 2 ]; then
		read -r a_gid a_qpn a_qkey < "$shared/self.$kind.1"
		offer_out=$("$SRNIC_TOP/out/progs/iblan_peer" "${kind}0" "$a_gid" "$a_qpn" "$a_qkey" \
			$((0x${prefix##*:})) offer 2>&1) || fail "$kind: iblan_peer offer: $offer_out"
		echo "$offer_out"
		echo "$offer_out" | sed -n 's/^refused (offers sent: \([0-9]*\))$/\1/p' > "$shared/offers.$kind"
	fi
	barrier "$kind.offer-done" 3
	if [ "$me" = 1 ]; then
		# One refusal per offer that arrived: at least one, at most as
		# many as were sent (a lost datagram is retried).
		refused=$(($(stat cm_offers_refused) - refused_before)) offers=$(cat "$shared/offers.$kind")
		[ "$refused" -ge 1 ] && [ "$refused" -le "$offers" ] ||
			fail "$kind: $refused offers refused of $offers sent"
		echo "ok: $kind: $refused of $offers offers refused"
		expect_eq "$(stat cm_malformed_drops)" 0 "$kind: malformed handshake datagrams"
	fi

	connected_mode

	step "$kind: raw frames of ethertype 0x88b5"
	b_mac=$(cat "$shared/mac.$kind.2")
	if [ "$me" = 1 ]; then
		barrier "$kind.raw-listening" 3
		# The stack's own multicast (IPv6 router solicitations, MLD) goes
		# out as fan-out posts too: measure once it has been quiet for 3 s.
		# (At most 20 s: the listeners give up after 60.)
		started=$(uptime_s) quiet_since=$(uptime_s) before=$(fanout_counts)
		while [ $(($(uptime_s) - quiet_since)) -lt 3 ] && [ $(($(uptime_s) - started)) -lt 20 ]; do
			nap; nap
			now=$(fanout_counts)
			if [ "$now" != "$before" ]; then
				quiet_since=$(uptime_s) before=$now
			fi
		done
		must send_raw ff:ff:ff:ff:ff:ff 88b5 "broadcast-$kind"
		# A frame's counters move one after the other: compare snapshots
		# taken while nothing is in flight.
		after=$(settled_fanout_counts)
		# A multicast of the stack's own may still slip in: each fanned-out
		# frame, ours among them, must have cost one post per peer.
		frames=$((${after% *} - ${before% *}))
		posts=$((${after#* } - ${before#* }))
		[ "$frames" -ge 1 ] || fail "$kind: the broadcast was not fanned out"
		expect_eq "$posts" $((2 * frames)) "$kind: one post per peer for each of $frames fanned-out frames"
		expect_eq "$(stat tx_copies)" 0 "$kind: no payload copies on send"
		must send_raw "$b_mac" 88b5 "unicast-$kind"
		# To a MAC nobody has: flooded, and dropped by every node's
		# receive filter (no netdev is promiscuous now).
		must send_raw 52:54:00:99:99:99 88b5 "stranger-$kind"
		barrier "$kind.raw-sent" 3
	else
		not_for_us_before=$(stat rx_not_for_us_drops)
		raw_frames 88b5 60 > /tmp/raw.$kind &
		listener=$!
		wait_until 60 grep -q '^listening' /tmp/raw.$kind || fail "$kind: the raw frame listener did not start"
		barrier "$kind.raw-listening" 3
		barrier "$kind.raw-sent" 3
		# Frames are printed as they come; give the last one a moment.
		sleep 2
		kill $listener 2>/dev/null
		wait $listener
		cat /tmp/raw.$kind
		expect_eq "$(grep -c "broadcast-$kind" /tmp/raw.$kind)" 1 "$kind: the broadcast arrived exactly once"
		if [ "$me" = 2 ]; then
			expect_eq "$(grep -c "unicast-$kind" /tmp/raw.$kind)" 1 "$kind: the unicast frame arrived at its node"
		else
			expect_eq "$(grep -c "unicast-$kind" /tmp/raw.$kind)" 0 "$kind: the unicast frame stayed away from other nodes"
		fi
		expect_eq "$(grep -c "stranger-$kind" /tmp/raw.$kind)" 0 "$kind: a frame to another MAC reached a packet socket"
		[ "$(stat rx_not_for_us_drops)" -gt "$not_for_us_before" ] ||
			fail "$kind: the frame to another MAC was not dropped by the receive filter (rx_not_for_us_drops)"
	fi

	if [ "$scope" = full ] && [ "$me" = 1 ]; then
		step "$kind: a LID another node uses is refused"
		for n in $others; do
			must_fail 'Cannot assign requested address' ip link set iblan0 address "$(cat "$shared/mac.$kind.$n")"
		done
		must_fail 'Cannot assign requested address' ip link set iblan0 address "$prefix:c0:01"
		must_fail 'Invalid argument' ip link set iblan0 address 04:00:00:00:00:09
		must_fail 'Invalid argument' ip link set iblan0 address "${prefix%:*}:08:00:09"
		expect_eq "$(cat /sys/class/net/iblan0/address)" "$mac" "$kind: the MAC is unchanged"
	fi

	step "$kind: jumbo frames"
	must ip link set iblan0 mtu 9000
	barrier "$kind.jumbo" 3
	for n in $others; do must ping -c 3 -W 5 -s 8900 -M do "10.1.0.$n"; done
	[ "$(stat rx_reassembled_frames)" -gt 0 ] || fail "$kind: no frame was reassembled"
	if [ "$scope" = full ] && [ "$me" = 1 ]; then
		timeout 60 iperf3 -s -1 -p 5201 > /tmp/iperf_tcp.out 2>&1 &
		server=$!
		wait_until 20 listening 5201 || fail "$kind: iperf3 server did not listen"
		barrier "$kind.iperf-tcp" 3
		wait $server || { cat /tmp/iperf_tcp.out; fail "$kind: iperf3 TCP server failed"; }
		timeout 60 iperf3 -s -1 -p 5202 > /tmp/iperf_udp.out 2>&1 &
		server=$!
		wait_until 20 listening 5202 || fail "$kind: iperf3 server did not listen"
		barrier "$kind.iperf-udp" 3
		wait $server || { cat /tmp/iperf_udp.out; fail "$kind: iperf3 UDP server failed"; }
	elif [ "$scope" = full ]; then
		barrier "$kind.iperf-tcp" 3
		if [ "$me" = 2 ]; then
			timeout 50 iperf3 -c 10.1.0.1 -p 5201 -t 5 > /tmp/iperf.out 2>&1 ||
				{ cat /tmp/iperf.out; fail "$kind: iperf3 TCP over iblan0 failed"; }
			grep receiver /tmp/iperf.out
		fi
		barrier "$kind.iperf-udp" 3
		if [ "$me" = 2 ]; then
			timeout 50 iperf3 -c 10.1.0.1 -p 5202 -u -b 20M -l 8000 -t 5 > /tmp/iperf.out 2>&1 ||
				{ cat /tmp/iperf.out; fail "$kind: iperf3 UDP over iblan0 failed"; }
			grep receiver /tmp/iperf.out
		fi
	fi
	barrier "$kind.iperf-done" 3
	[ "$scope" != full ] || must ethtool -C iblan0 tx-usecs 0 tx-frames 0
	ip -s link show iblan0
	ethtool -S iblan0 | tee /tmp/iblan_stats
	# Every received datagram was synced for the CPU before it was read,
	# and every receive buffer for the device before each post (256 at
	# creation, then one repost per datagram). One snapshot, in counter
	# order: a datagram may be counted and not yet synced, or synced and
	# not yet reposted. (No-op syncs on soft devices: see iblan.rst.)
	snap() { awk -v n="$1:" '$1 == n { print $2 }' /tmp/iblan_stats; }
	datagrams=$(snap rx_datagrams) cpu_syncs=$(snap rx_dma_syncs_for_cpu) dev_syncs=$(snap dma_syncs_for_device)
	# The name service took every announcement (a full inbox drops them,
	# and peers age out when it does for long).
	expect_eq "$(snap ns_inbox_drops)" 0 "$kind: announcements dropped for a full name-service inbox"
	[ -n "$cpu_syncs" ] && [ "$datagrams" -gt 0 ] && [ $((cpu_syncs + 1)) -ge "$datagrams" ] ||
		fail "$kind: $datagrams datagrams received but $cpu_syncs receive buffers synced for the CPU"
	[ -n "$dev_syncs" ] && [ $((dev_syncs + 1)) -ge $((cpu_syncs + 256)) ] ||
		fail "$kind: $dev_syncs syncs for the device; expected at least 256 + $cpu_syncs (initial posts and reposts)"

	if [ "$scope" = full ]; then
		step "$kind: a LID conflict is resolved the same way on every node"
		peers_file=/sys/kernel/debug/iblan/iblan0/peers
		cat "$peers_file"
		[ "$(grep -c '^peer ' "$peers_file")" = 2 ] || fail "$kind: debugfs does not list both peers"
		awk '$1 == "self" { print $6 }' "$peers_file" > "$shared/guid.$kind.$me"
		barrier "$kind.guids" 3
		guid_a=$(cat "$shared/guid.$kind.1") guid_b=$(cat "$shared/guid.$kind.2")
		lid_a=$(( 0x$(cut -d: -f5,6 "$shared/mac.$kind.1" | tr -d :) ))
		# The lower node GUID keeps the LID (fixed-width hex compares as text).
		if [ "$(printf '%s\n' "$guid_a" "$guid_b" | sort | head -n 1)" = "$guid_a" ]; then
			keeper=$guid_a mover=$guid_b
		else
			keeper=$guid_b mover=$guid_a
		fi
		if [ "$me" = 2 ]; then
			# Down, b forgets its peers, so nothing stops it taking a's LID.
			must ip link set iblan0 down
			must ip link set iblan0 address "$(cat "$shared/mac.$kind.1")"
			must ip link set iblan0 up
		fi
		# The others judge only after b is back: a table read while b
		# was leaving would miss it, one read before would show its old LID.
		barrier "$kind.moved" 3
		# lids_by_guid: "GUID LID" for this node and every peer it knows.
		lids_by_guid() { awk '$1 == "self" || $1 == "peer" { print $6, $2 }' "$peers_file" | sort; }
		resolved() {
			local table keeper_lid mover_lid
			table=$(lids_by_guid)
			[ "$(echo "$table" | wc -l)" = 3 ] || return 1
			[ "$(echo "$table" | awk '{ print $2 }' | sort -u | wc -l)" = 3 ] || return 1
			keeper_lid=$(echo "$table" | awk -v g="$keeper" '$1 "" == g { print $2 }')
			mover_lid=$(echo "$table" | awk -v g="$mover" '$1 "" == g { print $2 }')
			[ -n "$keeper_lid" ] && [ -n "$mover_lid" ] && [ "$(( $keeper_lid ))" = "$lid_a" ]
		}
		wait_until 30 resolved || { cat "$peers_file"; fail "$kind: expected node $keeper to keep LID $lid_a and every node to see three distinct LIDs"; }
		lids_by_guid > "$shared/lids.$kind.$me"
		barrier "$kind.resolved" 3
		for n in $others; do
			cmp -s "$shared/lids.$kind.$me" "$shared/lids.$kind.$n" ||
				fail "$kind: node $n resolved the conflict differently: $(cat "$shared/lids.$kind.$n")"
		done
		my_lid=$(stat ns_lid)
		expect_eq "$(cat /sys/class/net/iblan0/address)" "$(printf '%s:%02x:%02x' "$prefix" $((my_lid >> 8)) $((my_lid & 255)))" "$kind: the MAC follows the LID after the conflict"
		if [ "$(awk '$1 == "self" { print $6 }' "$peers_file")" = "$mover" ]; then
			[ "$(stat ns_lid_changes)" -ge 1 ] || fail "$kind: the node that gave the LID up counted no LID change"
		fi
		# The old MAC now names another node: relearn the neighbours.
		must ip neigh flush dev iblan0
		barrier "$kind.flushed" 3
		for n in $others; do
			must ping -c 2 -W 5 "10.1.0.$n"
		done
		barrier "$kind.readdressed" 3

		step "$kind: a full peer table turns newcomers away"
		# b announces 80 nodes that do not exist to a, which has room
		# for 62 more peers (64 in all): judged by the counters, since
		# the made-up nodes age out 6 s after their one announcement (in
		# the next step, with c). Their LIDs avoid the real ones.
		if [ "$me" = 1 ]; then
			added_before=$(stat ns_peers_added) full_before=$(stat ns_table_full_drops)
			real_lids=$(awk '$1 == "self" || $1 == "peer" { print $2 }' "$peers_file")
			for first in $((0xb000)) $((0x5000)) $((0x100)); do
				clear=yes
				for real in $real_lids; do
					[ $((real)) -lt "$first" ] || [ $((real)) -ge $((first + 80)) ] || clear=
				done
				[ -z "$clear" ] || break
			done
			echo "$first" > "$shared/fake_lids.$kind"
		fi
		barrier "$kind.fakes-ready" 3
		if [ "$me" = 2 ]; then
			read -r a_gid a_qpn a_qkey < "$shared/self.$kind.1"
			must "$SRNIC_TOP/out/progs/iblan_peer" "${kind}0" "$a_gid" "$a_qpn" "$a_qkey" \
				$((0x${prefix##*:})) announce 80 "$(cat "$shared/fake_lids.$kind")"
		fi
		barrier "$kind.fakes-sent" 3
		if [ "$me" = 1 ]; then
			table_filled() {
				[ $(($(stat ns_peers_added) - added_before)) = 62 ] &&
					[ "$(stat ns_table_full_drops)" -gt "$full_before" ]
			}
			wait_until 10 table_filled ||
				fail "$kind: of 80 made-up nodes $(($(stat ns_peers_added) - added_before)) were added" \
					"(expected 62, the table's room) and $(($(stat ns_table_full_drops) - full_before))" \
					"turned away (expected some; $(stat ns_inbox_drops) dropped for a full inbox)"
			echo "ok: 62 made-up nodes added, $(($(stat ns_table_full_drops) - full_before)) turned away"
			# The real peers stay, and are still reached.
			for n in $others; do
				awk -v g="$(cat "$shared/guid.$kind.$n")" '$1 == "peer" && $6 "" == g' "$peers_file" | grep -q . ||
					{ cat "$peers_file"; fail "$kind: node $n left a's table when it filled"; }
				must ping -c 1 -W 5 "10.1.0.$n"
			done
		fi
		# c leaves the wire next: not before a has looked for it.
		barrier "$kind.fakes-checked" 3

		step "$kind: node c vanishes and ages out; a, whose announcements are lost, stays while it sends"
		# Meanwhile the hub drops a's multicast (its announcements), as a
		# wire congested by a bulk flow may, while a pings b: b hears
		# from a and must keep it (forgetting it would flood what sits
		# behind it), and ages out c alone.
		if [ "$me" = 3 ]; then
			# No leaving announcement can get out: the others must age it out.
			must ip link set eth0 down
			# The carrier follows the RDMA port, which follows eth0.
			wait_until 15 sh -c '[ "$(cat /sys/class/net/iblan0/carrier)" = 0 ]' ||
				fail "$kind: iblan0 kept its carrier after eth0 went down"
			barrier "$kind.c-gone" 3
			barrier "$kind.muted" 3
			barrier "$kind.aged" 3
			must ip link set eth0 up
			wait_until 15 sh -c '[ "$(cat /sys/class/net/iblan0/carrier)" = 1 ]' ||
				fail "$kind: iblan0 did not regain its carrier after eth0 came back"
		else
			barrier "$kind.c-gone" 3
			if [ "$me" = 1 ]; then
				hub_mute_multicast 12
				ping -i 0.2 -c 55 -W 2 10.1.0.2 > /tmp/kept.ping 2>&1 &
				pinger=$!
			fi
			barrier "$kind.muted" 3
			muted_at=$(uptime_s)
			if [ "$me" = 2 ]; then
				# What a sent before the mute has arrived by now.
				sleep 1
				heard_before=$(stat ns_announcements_received)
			fi
			wait_until 15 sh -c "[ \"\$(ethtool -S iblan0 | awk '\$1 == \"ns_peers:\" { print \$2 }')\" = 1 ]" ||
				{ ethtool -S iblan0; fail "$kind: node c did not age out"; }
			[ "$(stat ns_peers_aged_out)" -ge 1 ] || fail "$kind: no peer counted as aged out"
			if [ "$me" = 2 ]; then
				# Judged once a's last announcement is older than a
				# peer's lifetime (6 s), with a tick to spare.
				while [ $(($(uptime_s) - muted_at)) -lt 9 ]; do nap; done
				expect_eq $(($(stat ns_announcements_received) - heard_before)) 0 \
					"$kind: announcements b took in while the hub dropped a's multicast"
				cat "$peers_file"
				awk -v g="$guid_a" '$1 == "peer" && $6 "" == g' "$peers_file" | grep -q . ||
					fail "$kind: b forgot a (node GUID $guid_a), which pinged it while its announcements were lost"
			else
				wait $pinger
				# b answers only peers it knows: had it forgotten a, the
				# pings after that would have gone unanswered.
				replies=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/kept.ping)
				[ "${replies:-0}" -ge 50 ] ||
					{ cat /tmp/kept.ping; fail "$kind: ${replies:-0} of a's 55 pings to b answered while a's announcements were lost (expected at least 50)"; }
			fi
			barrier "$kind.aged" 3
		fi

		step "$kind: rmmod iblan under traffic"
		if [ "$me" != 3 ]; then
			ping -f -w 5 "10.1.0.$(( me == 1 ? 2 : 1 ))" > /dev/null 2>&1 &
			sleep 1
		fi
		must rmmod iblan
		! ip link show iblan0 > /dev/null 2>&1 || fail "$kind: iblan0 still there after rmmod"
		! ip link show lan5 > /dev/null 2>&1 || fail "$kind: lan5 still there after rmmod"
		! ip link show lan6 > /dev/null 2>&1 || fail "$kind: lan6 still there after rmmod"
		[ "$me" != 2 ] || ! ip -n lanns link show lan6 > /dev/null 2>&1 ||
			fail "$kind: lan6 still in lanns after rmmod"
		wait
		barrier "$kind.removed" 3
	fi

	step "$kind: the RDMA device goes under traffic"
	if [ "$scope" = full ]; then
		must insmod "$iblan_ko" $iblan_args
		wait_until 30 ip link show iblan0 || fail "$kind: no iblan0 after the second insmod"
		must ip link set iblan0 up
		must ip addr add "10.1.0.$me/24" dev iblan0
		# A child goes with its RDMA device too, wherever it is: b's
		# in lanns.
		if [ "$me" = 2 ]; then
			must ip link add link iblan0 name lan5 netns lanns type iblan
		else
			must ip link add link iblan0 name lan5 type iblan
		fi
	fi
	barrier "$kind.back" 3
	if [ "$me" != 3 ]; then
		ping -f -w 5 "10.1.0.$(( me == 1 ? 2 : 1 ))" > /dev/null 2>&1 &
		sleep 1
	fi
	must rdma link delete "${kind}0"
	wait_until 10 sh -c '! ip link show iblan0 > /dev/null 2>&1' ||
		fail "$kind: iblan0 still there after its RDMA device was deleted"
	! ip link show lan5 > /dev/null 2>&1 || fail "$kind: lan5 still there after its RDMA device was deleted"
	if [ "$scope" = full ] && [ "$me" = 2 ]; then
		! ip -n lanns link show lan5 > /dev/null 2>&1 ||
			fail "$kind: lan5 still in lanns after its RDMA device was deleted"
		must ip netns del lanns
	fi
	wait
	must rmmod iblan
	[ "$kind" != srnic ] || unload_srnic
	barrier "$kind.device-gone" 3
}

run_over srnic full
run_over rxe core
echo "iblan: all checks passed"
