# Interoperation on the wire: srnic on VM a, the kernel's rxe on VM b.
# ibv_rc_pingpong with data checked (--chk), each side serving in turn, over
# IPv4 and IPv6 GIDs, ibv_uc_pingpong, and perftest write, read, send and
# atomic bandwidth with rxe as the client and as the server: every packet
# srnic sends must be one rxe accepts (rxe drops a packet with a bad ICRC
# or header), and the reverse.
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
		peer=10.0.0.1
		[ "$vm" = b ] && peer=10.0.0.2
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
