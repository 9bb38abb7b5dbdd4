# Harness check for interop tests: the kernel's rxe on two VMs on one wire
# runs rping across it (RoCEv2 over the emulated Ethernet).
# vms: 2
# timeout: 400
must modprobe rdma_rxe
must rdma link add rxe0 type rxe netdev eth0
wait_until 30 sh -c "ibv_devinfo -v -d rxe0 | grep -q '::ffff:$(echo $SRNIC_IP | cut -d/ -f1), RoCE v2'" ||
	fail "rxe0 has no RoCEv2 GID for $SRNIC_IP"
server=10.0.0.1
barrier ready 2
case $SRNIC_VM in
a)
	step "rping server on $server"
	out=$(timeout 240 rping -s -a $server -C 5 -S 64 -v 2>&1)
	rc=$?
	echo "$out"
	[ $rc -eq 0 ] || fail "rping server exited $rc"
	;;
b)
	step "rping client to $server"
	# The server may need a moment to listen; retry a refused connect.
	for attempt in 1 2 3 4 5 6 7 8 9 10; do
		out=$(timeout 200 rping -c -a $server -C 5 -S 64 -v 2>&1) && break
		echo "attempt $attempt: $out"
		sleep 2
	done
	echo "$out"
	expect_eq "$(echo "$out" | grep -c 'ping data: rdma-ping-')" 5 "rping payloads echoed"
	;;
esac
barrier done 2
must rdma link delete rxe0
must rmmod rdma_rxe
