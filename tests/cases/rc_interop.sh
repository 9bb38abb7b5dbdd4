# Interoperation on the wire: srnic on VM a, the kernel's rxe on VM b.
# ibv_rc_pingpong with data checked (--chk), each side serving in turn, over
# IPv4 and IPv6 GIDs, ibv_uc_pingpong, and perftest write, read, send and
# atomic bandwidth with rxe as the client and as the server: every packet
# srnic sends must be one rxe accepts (rxe drops a packet with a bad ICRC
# or header), and the reverse. Then a VLAN on eth0 of both VMs: an RC
# pingpong on the VLAN's GIDs and rping (rdma_cm) over its addresses, each
# side serving once; the host checks that these packets, CM MADs included,
# carry the VLAN's 802.1Q tag both ways (rc_interop.host).
# vms: 2
# timeout: 900
case $SRNIC_VM in
a) dev=srnic0; load_srnic; must rdma link add srnic0 type srnic netdev eth0 ;;
b) dev=rxe0; must modprobe rdma_rxe; must rdma link add rxe0 type rxe netdev eth0 ;;
esac
wait_roce_gid "$dev" 1
case $SRNIC_VM in
a) must ip addr add fd00::1/64 dev eth0 nodad; gid6=$(gid_index "$dev" fd00::1) ;;
b) must ip addr add fd00::2/64 dev eth0 nodad; gid6=$(gid_index "$dev" fd00::2) ;;
esac
port=18800
subnet=10.0.0

# serve_on VM NAME COMMAND...: COMMAND serves on VM, and the other VM runs
# it as the client against VM's address; both bounded.
serve_on() {
	vm=$1 name=$2
	shift 2
	port=$((port + 1))
	if [ "$SRNIC_VM" = "$vm" ]; then
		"$@" -d "$dev" -p $port > /tmp/server.out 2>&1 &
		pid=$!
		wait_until 60 listening $port || { cat /tmp/server.out; fail "$name: $dev never listened"; }
		barrier "$name.$port" 2
		wait $pid || { cat /tmp/server.out; fail "$name: $dev serving failed"; }
		cat /tmp/server.out
	else
		barrier "$name.$port" 2
		peer=$subnet.1
		[ "$vm" = b ] && peer=$subnet.2
		"$@" -d "$dev" -p $port $peer > /tmp/client.out 2>&1 ||
			{ cat /tmp/client.out; fail "$name: $dev as client failed"; }
		cat /tmp/client.out
	fi
	barrier "$name.$port.done" 2
}

for vm in a b; do
	# Each run costs tens of seconds of process starts and connection
	# set-up under TCG: one per size class and opcode, not more.
	for args in "-s 100 -n 100" "-s 65536 -n 20 -e" "-s 1048576 -n 3"; do
		step "ibv_rc_pingpong $args, server on $vm"
		serve_on $vm pingpong timeout 120 ibv_rc_pingpong -g 1 -c $args
	done
	step "ibv_rc_pingpong -s 65536 -n 20 -e over IPv6, server on $vm"
	serve_on $vm pingpong6 timeout 120 ibv_rc_pingpong -g "$gid6" -c -s 65536 -n 20 -e
	step "ibv_uc_pingpong -s 4000 -n 50 -e, server on $vm"
	serve_on $vm ucpingpong timeout 120 ibv_uc_pingpong -g 1 -c -s 4000 -n 50 -e
	for test in "ib_write_bw -s 65536 -n 100" "ib_read_bw -s 65536 -n 100" \
		"ib_send_bw -s 65536 -n 100" "ib_atomic_bw -n 100" "ib_atomic_bw -A CMP_AND_SWAP -n 100" \
		"ib_send_lat -s 4000 -n 100"; do
		step "$test, server on $vm"
		serve_on $vm perftest timeout 300 $test -x 1 -F
	done
done

# IBA 1.5 memory placement (tests/progs/rc_flush.c): both devices
# advertise FLUSH (global, persistent) and ATOMIC WRITE, as rxe does; then
# each side in turn requests: a WRITE followed by a FLUSH of its range
# (every byte placed when the FLUSH completes), FLUSHes of the whole
# region and of a persistent range (where the responder's device lets a
# region have persistent flush access: srnic does, rxe only on pmem), an
# ATOMIC WRITE, and a FLUSH of a region without flush access, which fails
# with a remote access error.
step "$dev advertises FLUSH and ATOMIC WRITE"
caps=$(ibv_devinfo -v -d "$dev" | awk '/device_cap_flags_ex:/ { print $2; exit }')
echo "$dev: device_cap_flags_ex $caps"
[ -n "$caps" ] && [ $(((caps >> 38) & 7)) -eq 7 ] ||
	fail "$dev: device_cap_flags_ex '$caps' lacks FLUSH_GLOBAL, FLUSH_PERSISTENT or ATOMIC_WRITE (bits 38-40)"
for requester in a b; do
	step "FLUSH and ATOMIC WRITE, requester on $requester"
	mkdir -p /mnt/shared/flush.$requester
	flush_role=r
	[ "$SRNIC_VM" = $requester ] && flush_role=q
	timeout 180 "$SRNIC_TOP/out/progs/rc_flush" "$dev" 1 $flush_role /mnt/shared/flush.$requester \
		> /tmp/flush.out 2>&1 || { cat /tmp/flush.out; fail "FLUSH and ATOMIC WRITE with the requester on $requester failed on $dev"; }
	cat /tmp/flush.out
	barrier "flush.$requester.done" 2
done

# RoCE over a VLAN (PFC needs the tag): the core lists the VLAN's
# addresses as GIDs of the port; a QP on such a GID sends through the VLAN
# interface, tagged, and what comes back arrives on the VLAN interface.
step "VLAN 42 on eth0"
must ip link add link eth0 name eth0.42 type vlan id 42
must ip link set eth0.42 up
subnet=10.0.42
case $SRNIC_VM in
a) vlan_me=$subnet.1 vlan_peer=$subnet.2 ;;
b) vlan_me=$subnet.2 vlan_peer=$subnet.1 ;;
esac
must ip addr add $vlan_me/24 dev eth0.42
vlan_gid=$(gid_index "$dev" $vlan_me)
echo "$dev: GID $vlan_gid is $vlan_me on eth0.42"
# 64 KiB messages: lists of packets through the VLAN interface.
step "ibv_rc_pingpong -s 65536 -n 20 on the VLAN's GIDs, server on a"
serve_on a vlanpingpong timeout 120 ibv_rc_pingpong -g "$vlan_gid" -c -s 65536 -n 20

# The passive side finds the GID a connection request came to by its
# address and VLAN, the active side resolves its route through eth0.42.
for vm in a b; do
	step "rping over VLAN 42, server on $vm"
	port=$((port + 1))
	if [ "$SRNIC_VM" = "$vm" ]; then
		timeout 120 rping -s -a $vlan_me -p $port -C 5 -S 1000 -V > /tmp/rping_s.out 2>&1 &
		pid=$!
		wait_until 60 listening_cm $port || { cat /tmp/rping_s.out; fail "rping over the VLAN: $dev never listened"; }
		barrier "vlanrping.$vm" 2
		wait $pid || { cat /tmp/rping_s.out; fail "rping over the VLAN: $dev serving failed"; }
		echo "ok: rping server on $dev done"
	else
		barrier "vlanrping.$vm" 2
		out=$(timeout 120 rping -c -a $vlan_peer -p $port -C 5 -S 1000 -v -V 2>&1) ||
			fail "rping over the VLAN: $dev as client failed: $out"
		expect_eq "$(printf '%s\n' "$out" | grep -c 'ping data: rdma-ping-')" 5 "rping over the VLAN: payloads echoed to $dev"
	fi
	barrier "vlanrping.$vm.done" 2
done

if [ "$SRNIC_VM" = a ]; then
	rdma statistic show link srnic0/1
	for name in icrc_errors malformed_packets; do
		value=$(rdma statistic show link srnic0/1 | tr ' ' '\n' | awk -v n=$name 'f { print; exit } $0 == n { f = 1 }')
		expect_eq "$value" 0 "srnic0 counter $name (every packet rxe sent was well formed)"
	done
fi
barrier finished 2
case $SRNIC_VM in
a) must rdma link delete srnic0; unload_srnic ;;
b) must rdma link delete rxe0; must rmmod rdma_rxe ;;
esac
