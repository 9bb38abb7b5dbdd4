# Harness check for interop tests: the kernel's rxe on two VMs on one wire
# runs rping across it (RoCEv2 over the emulated Ethernet).
# vms: 2
# timeout: 400
must modprobe rdma_rxe
must rdma link add rxe0 type rxe netdev eth0
wait_until 30 sh -c "ibv_devinfo -v -d rxe0 | grep -q '::ffff:$(echo $SRNIC_IP | cut -d/ -f1), RoCE v2'" ||
	fail "rxe0 has no RoCEv2 GID for $SRNIC_IP"
server=10.0.0.1
case $SRNIC_VM in
a)
	step "rping server on $server"
	timeout 240 rping -s -a $server -C 5 -S 64 -v > /tmp/rping.out 2>&1 &
	server_pid=$!
	wait_until 60 sh -c 'rdma res show cm_id | grep -q LISTEN' ||
		fail "rping server is not listening: $(cat /tmp/rping.out)"
	barrier listening 2
	wait $server_pid
	rc=$?
	cat /tmp/rping.out
	[ $rc -eq 0 ] || fail "rping server exited $rc"
	;;
b)
	barrier listening 2
	step "rping client to $server"
	out=$(timeout 200 rping -c -a $server -C 5 -S 64 -v 2>&1) || fail "rping client failed: $out"
	printf '%s\n' "$out"
	expect_eq "$(printf '%s\n' "$out" | grep -c 'ping data: rdma-ping-')" 5 "rping payloads echoed"
	;;
esac
barrier done 2
must rdma link delete rxe0
must rmmod rdma_rxe
