# rdma link add/delete creates and removes srnic devices, repeatedly.
# vms: 1
# timeout: 300
load_srnic
for round in 1 2 3; do
	step "round $round: add srnic0 on eth0"
	must rdma link add srnic0 type srnic netdev eth0
	expect_match "$(rdma_devices)" '^srnic0$' "srnic0 listed by 'rdma dev'"
	expect_eq "$(link_field srnic0 netdev)" eth0 "srnic0 netdev"
	expect_match "$(ibv_devices)" 'srnic0' "srnic0 listed by ibv_devices"
	[ -c "$(ls /dev/infiniband/uverbs* | head -n1)" ] || fail "no uverbs device node"
	step "round $round: delete srnic0"
	must rdma link delete srnic0
	device_absent srnic0 || fail "srnic0 still listed after delete: $(rdma_devices)"
done
step "a name with a counter and a second name on another netdev"
veth_pair veth0 veth1
must rdma link add srnic7 type srnic netdev eth0
must rdma link add roce_b type srnic netdev veth0
expect_eq "$(rdma_devices | sort | tr '\n' ' ')" "roce_b srnic7 " "both devices listed"
must rdma link delete srnic7
must rdma link delete roce_b
expect_eq "$(rdma_devices | wc -l)" 0 "no devices left"
unload_srnic
