# srnic.ko loads and unloads cleanly, repeatedly, and registers its link type;
# what `make install` installed loads with modprobe, and the boot unit's
# commands create and delete a device.
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

# tests/run installed the modules into this VM's module tree with `make
# install` (modules_install, depmod), as a user installs them.
install_root=$SRNIC_TOP/out/tests/.install
step "make install put srnic and iblan where modprobe finds them, not the test module"
modules=/lib/modules/$(uname -r)
expect_eq "$(modinfo -n srnic)" "$modules/extra/srnic.ko" "srnic's installed path"
expect_eq "$(modinfo -n iblan)" "$modules/extra/iblan.ko" "iblan's installed path"
must_fail 'not found' modinfo srnic_verbs_test
expect_match "$(modinfo srnic)" '^parm:[[:space:]]+comp_vectors:Completion vectors' "modinfo shows srnic's parameter"
params=$(modinfo -F parm iblan)
expect_match "$params" '^lan:LAN index' "modinfo shows iblan's lan parameter"
expect_match "$params" '^vendor:Vendor ID' "modinfo shows iblan's vendor parameter"
for file in usr/local/share/man/man7/srnic.7 usr/local/share/man/man4/iblan.4 \
	usr/local/lib/systemd/system/srnic@.service usr/src/srnic-1.0/dkms.conf; do
	[ -f "$install_root/$file" ] || fail "make install did not install /$file"
done
[ ! -e "$install_root/usr/src/srnic-1.0/tests" ] || fail "the DKMS source tree holds the tests"
plugin=$(ls "$install_root"/usr/lib/*/ip/link_iblan.so 2>/dev/null | head -n 1)
[ -n "$plugin" ] || fail "make install did not install iproute2's link_iblan.so under /usr/lib/<multiarch>/ip"
expect_match "$(IP_LIB_DIR=$(dirname "$plugin") ip link help iblan 2>&1)" 'type iblan' \
	"ip loads the installed plugin for kind iblan"

step "modprobe srnic with a parameter, modprobe -r srnic"
must modprobe srnic comp_vectors=2
expect_eq "$(cat /sys/module/srnic/parameters/comp_vectors)" 2 "comp_vectors set by modprobe"
must modprobe -r srnic
[ ! -e /sys/module/srnic ] || fail "srnic still loaded after modprobe -r"

step "modprobe iblan, modprobe -r iblan"
must modprobe iblan
[ -d /sys/module/iblan ] || fail "/sys/module/iblan missing after modprobe"
expect_eq "$(cat /sys/module/iblan/parameters/lan)" 0 "iblan's default LAN"
must modprobe -r iblan
[ ! -e /sys/module/iblan ] || fail "iblan still loaded after modprobe -r"

step "the installed srnic@eth0.service's commands create srnic_eth0 and delete it"
unit=$install_root/usr/local/lib/systemd/system/srnic@.service
# unit_commands KEY: the unit's KEY= command lines for the instance eth0,
# without the ignore-failure prefix.
unit_commands() { sed -n "s/^$1=-\{0,1\}//p" "$unit" | sed 's/%[iI]/eth0/g'; }
for key in ExecStartPre ExecStart; do
	cmd=$(unit_commands $key)
	[ -n "$cmd" ] || fail "no $key= in $unit"
	must $cmd
done
expect_match "$(rdma_devices)" '^srnic_eth0$' "srnic_eth0 created by the unit's commands"
expect_eq "$(link_field srnic_eth0 netdev)" eth0 "srnic_eth0's netdev"
cmd=$(unit_commands ExecStop)
[ -n "$cmd" ] || fail "no ExecStop= in $unit"
must $cmd
device_absent srnic_eth0 || fail "srnic_eth0 still there after the unit's ExecStop"
must modprobe -r srnic
