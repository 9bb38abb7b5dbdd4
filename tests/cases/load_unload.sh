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
# modprobe finds srnic by its alias only if installed; insmod-only setups
# rely on the module being loaded first, so check the alias is declared.
expect_eq "$(modinfo -F alias "$srnic_ko")" rdma-link-srnic "module alias"
