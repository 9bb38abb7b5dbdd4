# ibv_devinfo -v, through the stock rxe provider, describes srnic0 the way
# its netdev says: state, MTU, node GUID and RoCEv2 GIDs.
# vms: 1
# timeout: 300
# The harness itself: qemu/vm hides ERMS, FSRM and FSRS from the guest,
# since with them the kernel copies with `rep movsb` and zeroes with `rep
# stosb`, one byte per TCG step, and every case and benchmark slows down
# without failing. A QEMU that advertises them some other way must show
# up here.
for flag in erms fsrm; do
	! grep -qw "$flag" /proc/cpuinfo || fail "the guest's CPU advertises $flag (qemu/vm's clearcpuid did not take): kernel copies run rep movsb"
done
# FSRS (fast short rep stosb, bit 12*32+11) has no cpuinfo name; the kernel
# sets it with AMD's FSRM, and memset then runs rep stosb.
dmesg | grep -q 'Clearing CPUID bits:.* 12:11' ||
	fail "the kernel did not clear FSRS (no '12:11' in its 'Clearing CPUID bits' line): memset runs rep stosb"
step "the guest's CPU shows no ERMS, FSRM or FSRS"

load_srnic
must rdma link add srnic0 type srnic netdev eth0

mac=$(cat /sys/class/net/eth0/address)
# The node GUID is the netdev's modified EUI-64.
set -- $(echo "$mac" | tr : ' ')
guid="$(printf %02x $((0x$1 ^ 2)))$2:$3ff:fe$4:$5$6"
echo "$guid" | grep -Eq '^[0-9a-f]{4}(:[0-9a-f]{4}){3}$' || fail "could not derive a GUID from MAC $mac: '$guid'"
step "node GUID from $mac is $guid"

# GIDs appear as the core's GID management sees the addresses.
gid_listed() { ibv_devinfo -v -d srnic0 | grep -q "$1"; }
wait_until 30 gid_listed '::ffff:10.0.0.1, RoCE v2' || fail "no RoCEv2 GID for 10.0.0.1 within 30 s"
wait_until 30 gid_listed 'fe80::.*, RoCE v2' || fail "no RoCEv2 link-local GID within 30 s"

info=$(ibv_devinfo -v -d srnic0) || fail "ibv_devinfo -v -d srnic0 failed: $info"
echo "$info"
expect_match "$info" "hca_id:[[:space:]]+srnic0" "hca_id"
expect_match "$info" "transport:[[:space:]]+InfiniBand \(0\)" "transport"
expect_match "$info" "node_guid:[[:space:]]+${guid}\$" "node GUID from the netdev MAC"
expect_match "$info" "sys_image_guid:[[:space:]]+${guid}\$" "system image GUID"
expect_match "$info" "vendor_id:[[:space:]]+0xffffff" "vendor id"
expect_match "$info" "phys_port_cnt:[[:space:]]+1" "one port"
expect_match "$info" "max_pd:[[:space:]]+65536" "PD limit"
expect_match "$info" "max_qp_rd_atom:[[:space:]]+128\$" "READs and atomics a QP takes at once (outbox::MAX_READS)"
expect_match "$info" "^[[:space:]]+PORT_ACTIVE_EVENT$" "port events advertised"
expect_match "$info" "^[[:space:]]+SYS_IMAGE_GUID$" "system image GUID advertised"
expect_match "$info" "state:[[:space:]]+PORT_ACTIVE \(4\)" "port state"
expect_match "$info" "max_mtu:[[:space:]]+4096 \(5\)" "max MTU"
expect_match "$info" "active_mtu:[[:space:]]+1024 \(3\)" "active MTU for netdev MTU 1500"
expect_match "$info" "link_layer:[[:space:]]+Ethernet" "link layer"
expect_match "$info" "phys_state:[[:space:]]+LINK_UP \(5\)" "physical state"
expect_match "$info" "GID\[ *[0-9]+\]:[[:space:]]+::ffff:10\.0\.0\.1, RoCE v2" "IPv4 GID"

step "GID table follows the netdev's addresses"
must ip addr add 10.9.8.7/24 dev eth0
must ip -6 addr add fd00::7/64 dev eth0 nodad
wait_until 30 gid_listed '::ffff:10.9.8.7, RoCE v2' || fail "no GID for an added IPv4 address"
wait_until 30 gid_listed 'fd00::7, RoCE v2' || fail "no GID for an added IPv6 address"
must ip addr del 10.9.8.7/24 dev eth0
# Gone only if ibv_devinfo answers and lacks it.
gid_gone() { _info=$(ibv_devinfo -v -d srnic0) && ! printf '%s\n' "$_info" | grep -q "$1"; }
wait_until 30 gid_gone '::ffff:10.9.8.7,' || fail "GID of a removed address still listed"

step "sysfs and rdma(8) agree"
expect_eq "$(cat /sys/class/infiniband/srnic0/node_type)" "1: CA" "node type"
expect_eq "$(cat /sys/class/infiniband/srnic0/ports/1/link_layer)" Ethernet "sysfs link layer"
expect_eq "$(link_field srnic0 state)" ACTIVE "rdma link state"
expect_eq "$(link_field srnic0 physical_state)" LINK_UP "rdma link physical state"

step "a kernel ULP's view: the port's P_Key table"
expect_eq "$(cat /sys/class/infiniband/srnic0/ports/1/pkeys/0)" 0xffff "P_Key 0"

must rdma link delete srnic0
unload_srnic
