# srnic.ko loads and unloads cleanly, repeatedly, and registers its link type.
# vms: 1
# timeout: 240
for round in 1 2 3; do
	step "round $round: insmod"
	load_srnic
	[ -d /sys/module/srnic ] || fail "/sys/module/srnic missing after insmod"
	expect_eq "$(cat /sys/module/srnic/refcnt)" 0 "module refcount with no devices"
	step "round $round: rmmod"
	unload_srnic
done
step "the core loads srnic on demand for 'rdma link add ... type srnic'"
expect_eq "$(modinfo -F alias "$srnic_ko")" rdma-link-srnic "module alias"
[ ! -e /sys/module/srnic ] || fail "srnic loaded before the on-demand test"
must rdma link add srnic0 type srnic netdev eth0
[ -d /sys/module/srnic ] || fail "srnic was not loaded on demand"
expect_match "$(rdma_devices)" '^srnic0$' "srnic0 created by the on-demand module"
must rdma link delete srnic0
unload_srnic
