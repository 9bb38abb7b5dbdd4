# srnic and the kernel's rxe share the rxe user ABI (and so a driver id) but
# must never take each other's devices: netdev events on srnic's netdev go
# to srnic only, each module's link type creates its own kind, deleting an
# rxe device or unloading rxe leaves srnic's devices and their open user
# contexts alone (rdma_rxe stays loaded, "in use", while srnic devices
# exist, whether it was loaded before or after them), and unloading srnic
# leaves rxe's devices.
# vms: 1
# timeout: 300
must modprobe rdma_rxe
load_srnic
veth_pair veth0 veth1
must rdma link add srnic0 type srnic netdev eth0
must rdma link add rxe0 type rxe netdev veth0
step "rxe refuses nothing on eth0 because of srnic, and vice versa"
must rdma link add rxe1 type rxe netdev eth0
must rdma link delete rxe1
must_fail "File exists" rdma link add srnic1 type srnic netdev eth0
step "events on eth0 reach srnic's port, not rxe's code"
must ip link set eth0 down
expect_eq "$(link_field srnic0 state)" DOWN "srnic0 after eth0 down"
expect_eq "$(link_field rxe0 state)" ACTIVE "rxe0 untouched by eth0 down"
must ip link set eth0 mtu 9000
must ip link set eth0 up
expect_eq "$(link_field srnic0 state)" ACTIVE "srnic0 after eth0 up"
step "both work through the rxe provider"
expect_match "$(ibv_devinfo -d srnic0)" "active_mtu:[[:space:]]+4096" "srnic0 via librxe"
expect_match "$(ibv_devinfo -d rxe0)" "hca_id:[[:space:]]+rxe0" "rxe0 via librxe"

step "an open srnic0 context survives rdma link delete rxe0 and rmmod rdma_rxe"
wait_roce_gid srnic0 1
# The server opens srnic0 and creates its QP, then waits for the client;
# the client comes after the rxe side has done its worst.
timeout 200 ibv_rc_pingpong -d srnic0 -g 1 -p 18515 -n 100 -c > /tmp/pp_server.out 2>&1 &
server=$!
wait_until 60 listening 18515 || { cat /tmp/pp_server.out; fail "ibv_rc_pingpong server never listened"; }
must rdma link delete rxe0
expect_eq "$(rdma_devices | tr '\n' ' ')" "srnic0 " "rdma link delete rxe0 removed rxe0 only"
must_fail "in use" rmmod rdma_rxe
[ -e /sys/module/rdma_rxe ] || fail "rdma_rxe unloaded while srnic0 exists"
expect_eq "$(rdma_devices | tr '\n' ' ')" "srnic0 " "srnic0 still registered after the rmmod attempt"
if ! timeout 120 ibv_rc_pingpong -d srnic0 -g 1 -p 18515 -n 100 -c localhost > /tmp/pp_client.out 2>&1; then
	cat /tmp/pp_client.out /tmp/pp_server.out
	fail "ibv_rc_pingpong over srnic0 after rxe's removal attempts: expected 100 iterations"
fi
wait $server || { cat /tmp/pp_server.out; fail "the ibv_rc_pingpong server's context on srnic0 did not survive"; }
expect_match "$(cat /tmp/pp_client.out)" "100 iters in" "the context opened before worked after"

step "unloading srnic leaves rxe's device"
must rdma link add rxe0 type rxe netdev veth0
unload_srnic
expect_eq "$(rdma_devices | tr '\n' ' ')" "rxe0 " "only rxe0 left"
step "with srnic's devices gone, rdma_rxe unloads (and takes its own)"
must rmmod rdma_rxe
expect_eq "$(rdma_devices | wc -l)" 0 "no devices after rmmod rdma_rxe"

step "rdma_rxe loaded after srnic0 is held too"
# rxe binds UDP port 4791 of the initial namespace as it loads, which
# srnic holds while it has a device there: this srnic0 lives in another.
load_srnic
must ip netns add side
must ip link add veth2 type veth peer name veth3 netns side
must ip link set veth2 up
must ip -n side link set veth3 up
must ip netns exec side rdma link add srnic0 type srnic netdev veth3
must modprobe rdma_rxe
must_fail "in use" rmmod rdma_rxe
expect_eq "$(rdma_devices | tr '\n' ' ')" "srnic0 " "srnic0 survives"
expect_match "$(ibv_devinfo -d srnic0)" "hca_id:[[:space:]]+srnic0" "srnic0 still opens"
step "deleting the last srnic device releases rdma_rxe"
must rdma link delete srnic0
wait_until 20 device_absent srnic0 || fail "srnic0 still listed after rdma link delete"
must rmmod rdma_rxe
unload_srnic
must ip netns del side
