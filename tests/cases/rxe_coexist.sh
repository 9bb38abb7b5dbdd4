# srnic and the kernel's rxe share the rxe user ABI (and so a driver id) but
# must never take each other's devices: netdev events on srnic's netdev go
# to srnic only, and each module's link type creates its own kind.
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
step "unloading srnic leaves rxe's device"
unload_srnic
expect_eq "$(rdma_devices | tr '\n' ' ')" "rxe0 " "only rxe0 left"
step "unloading rxe removes every device of the rxe driver id, srnic's too"
load_srnic
must rdma link add srnic0 type srnic netdev eth0
must rmmod rdma_rxe
expect_eq "$(rdma_devices | wc -l)" 0 "no devices after rmmod rdma_rxe"
unload_srnic
