# Malformed RoCEv2 packets at a live QP (tests/lib/roce_hostile.py, from
# the peer VM through a raw socket): bad ICRC, truncated headers, unknown
# and wrong-transport opcodes, PSNs far outside the window, wrong rkeys and
# lengths, unaligned atomics, bad pad counts, forged ACKs, unknown QPs,
# a packet from an address other than the peer's, one of another
# partition (P_Key).
# Each is dropped or NAKed and counted, the kernel stays clean, and the
# QP's real traffic (rc_data, every byte checked) completes.
# vms: 2
# timeout: 900
prog=$SRNIC_TOP/out/progs/rc_data
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
mkdir -p /mnt/shared/hostile
case $SRNIC_VM in
a)
	timeout 600 "$prog" srnic0 1 a /mnt/shared/hostile 16 > /tmp/rc_data.out 2>&1 ||
		{ cat /tmp/rc_data.out; rdma statistic show link srnic0/1; fail "the real traffic failed under hostile packets"; }
	cat /tmp/rc_data.out
	rdma statistic show link srnic0/1
	for name in icrc_errors malformed_packets unknown_qp_packets foreign_packets pkey_violations; do
		value=$(counter_of srnic0 $name)
		[ "${value:-0}" -gt 0 ] || fail "counter $name is '$value': the hostile packets of that kind were not counted"
	done
	seq=$(( $(counter_of srnic0 sequence_naks_sent) + $(counter_of srnic0 out_of_sequence_requests) ))
	[ "$seq" -gt 0 ] || fail "no PSN outside the window was NAKed or counted"
	;;
b)
	timeout 600 "$prog" srnic0 1 b /mnt/shared/hostile 16 > /tmp/rc_data.out 2>&1 &
	pid=$!
	wait_until 60 test -s /mnt/shared/hostile/rc_data.info.a || fail "the peer never published its QP"
	qpn=$(od -An -tu4 -N4 /mnt/shared/hostile/rc_data.info.a | tr -d ' ')
	for i in 1 2 3 4 5; do
		must python3 -S "$SRNIC_TOP/tests/lib/roce_hostile.py" 10.0.0.2 10.0.0.1 "$qpn" 20
		sleep 1
	done
	wait $pid || { cat /tmp/rc_data.out; rdma statistic show link srnic0/1; fail "the real traffic failed under hostile packets"; }
	cat /tmp/rc_data.out
	;;
esac
barrier finished 2
must rdma link delete srnic0
unload_srnic
