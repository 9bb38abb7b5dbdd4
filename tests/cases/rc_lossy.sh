# srnic to srnic on a lossy wire: tc netem on both ends loses 5 % of the
# packets, duplicates 1 % and reorders some. 24 MiB each of SEND, WRITE and
# READ (tests/progs/rc_data.c, every byte checked) must still arrive intact
# with no error completion, and the retransmission counters must have moved.
# The netdevs carry 9000-byte frames, so the QPs run with a 4096-byte path
# MTU: a quarter of the packets (and of the losses) of a 1500-byte wire.
# vms: 2
# timeout: 900
# pcap: off
prog=$SRNIC_TOP/out/progs/rc_data
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
# One and a half turns of rc_data's ring of 16 chunks (so chunks are
# reused), about 6,000 packets a phase and some 300 of them lost; 64 MiB
# took six of the case's twelve minutes on a slow host.
mib=24
load_srnic
must ip link set eth0 mtu 9000
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
expect_match "$(ibv_devinfo -d srnic0)" "active_mtu:.*4096" "srnic0's active MTU on a 9000-byte netdev"
# Learn the peer's MAC while the wire is clean: the core resolves it, with
# a time limit, when rc_data moves its QP to RTR, and a lost ARP exchange
# on a slow machine failed that with ETIMEDOUT.
peer=10.0.0.$([ "$SRNIC_VM" = a ] && echo 2 || echo 1)
wait_until 60 ping -c 1 -W 2 "$peer" || fail "the peer $peer does not answer ping"
must modprobe sch_netem
must tc qdisc add dev eth0 root netem loss 5% duplicate 1% delay 1ms reorder 10% 50%
before=$(counter_of srnic0 resends)
mkdir -p /mnt/shared/lossy
# The counters every 30 s, to tell the phases apart afterwards.
( while sleep 30; do echo "counters at $(date +%s): $(rdma statistic show link srnic0/1)"; done ) &
watcher=$!
must timeout 700 "$prog" srnic0 1 "$SRNIC_VM" /mnt/shared/lossy "$mib" lossy
after=$(counter_of srnic0 resends)
kill "$watcher"
rdma statistic show link srnic0/1
tc -s qdisc show dev eth0
if [ "$SRNIC_VM" = b ]; then
	[ "$after" -gt "$before" ] || fail "resends went from $before to $after on a lossy wire; expected retransmissions"
	probes=$(counter_of srnic0 tail_probes)
	[ "$probes" -gt 0 ] || fail "tail_probes is $probes after a stream of unsignaled WRITEs; expected their quiet tails probed"
fi
must tc qdisc del dev eth0 root
barrier finished 2
unload_srnic
