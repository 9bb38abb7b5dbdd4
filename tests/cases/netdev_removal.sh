# Removing the netdev removes the srnic device on it, and the netdev is
# released (ip link del does not hang waiting for references).
# vms: 1
# timeout: 300
load_srnic
for round in 1 2; do
	step "round $round"
	veth_pair veth0 veth1
	must rdma link add srnic_v type srnic netdev veth0
	must rdma link add srnic0 type srnic netdev eth0
	must timeout 30 ip link del veth0
	wait_until 20 device_absent srnic_v || fail "srnic_v still registered after its netdev was deleted"
	expect_match "$(rdma_devices)" '^srnic0$' "the device on eth0 is untouched"
	[ ! -e /sys/class/net/veth0 ] || fail "veth0 still present"
	# The name is free again.
	must ip link add veth0 type veth peer name veth1
	must rdma link add srnic_v type srnic netdev veth0
	must rdma link delete srnic_v
	must ip link del veth0
	must rdma link delete srnic0
done
step "netdev removal while a process has the device open"
veth_pair veth0 veth1
must rdma link add srnic_v type srnic netdev veth0
start_asyncwatch srnic_v /tmp/events
must timeout 60 ip link del veth0
wait_until 30 device_absent srnic_v || fail "srnic_v still registered after its netdev was deleted while open"
wait_until 10 grep -q IBV_EVENT_DEVICE_FATAL /tmp/events
kill $watcher 2>/dev/null
wait $watcher 2>/dev/null
cat /tmp/events
expect_match "$(cat /tmp/events)" "IBV_EVENT_DEVICE_FATAL" "the open process is told the device is gone"
unload_srnic
