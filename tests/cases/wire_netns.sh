# The wire beyond one namespace and IPv4: two srnic devices in two network
# namespaces joined by a veth pair, each namespace with its own RoCEv2
# socket, talking RC and UC over IPv4 and IPv6 GIDs (ibv_rc_pingpong and
# ibv_uc_pingpong with data checked, perftest over UC; every size class
# over IPv4, one run of each kind over IPv6); 64 KiB RC WRITEs and READs
# whose bulk the receiving side steers to another vCPU, with no overtaking
# (hardly a sequence NAK on a lossless wire), and a 4 KiB WRITE ping-pong
# that it does not steer; two devices of one
# namespace reaching each other through the engine without the wire;
# srnic's requester against rxe's responder through a veth that reorders;
# and a namespace deleted under its device, after which a new one gets a
# socket again.
# cpus: 2
# timeout: 1500
load_srnic
must ip netns add peer
must ip link add va type veth peer name vb
must ip link set vb netns peer
must ip addr add 10.1.0.1/24 dev va
must ip addr add fd01::1/64 dev va nodad
must ip link set va up
must ip netns exec peer ip addr add 10.1.0.2/24 dev vb
must ip netns exec peer ip addr add fd01::2/64 dev vb nodad
must ip netns exec peer ip link set vb up
must ip netns exec peer ip link set lo up
must rdma link add srnic0 type srnic netdev va
must ip netns exec peer rdma link add srnic1 type srnic netdev vb
a4=$(gid_index srnic0 10.1.0.1)
a6=$(gid_index srnic0 fd01::1)
b4=$(gid_index srnic1 10.1.0.2)
b6=$(gid_index srnic1 fd01::2)
echo "GIDs: srnic0 IPv4 $a4 IPv6 $a6, srnic1 IPv4 $b4 IPv6 $b6"
dmesg | grep -q "port 4791.*taken" && fail "a namespace's socket could not be opened: $(dmesg | grep 'taken')"

port=19000
# across TOOL SERVER-GID CLIENT-GID ARGS...: TOOL serves on srnic1 in the
# peer namespace, its client runs on srnic0; both bounded, data checked
# where the tool can.
across() {
	tool=$1 server_gid=$2 client_gid=$3
	shift 3
	port=$((port + 1))
	step "$tool $* (server GID $server_gid, client GID $client_gid)"
	ip netns exec peer timeout 120 $tool -d srnic1 -g "$server_gid" -p $port "$@" \
		> /tmp/server.out 2>&1 &
	server=$!
	wait_until 60 ip netns exec peer sh -c "ss -ltnH 'sport = :$port' | grep -q ." ||
		{ cat /tmp/server.out; fail "$tool server never listened"; }
	if ! timeout 120 $tool -d srnic0 -g "$client_gid" -p $port "$@" 10.1.0.2 > /tmp/client.out 2>&1; then
		cat /tmp/client.out /tmp/server.out
		fail "$tool $*: the client failed"
	fi
	wait $server || { cat /tmp/server.out; fail "$tool $*: the server failed"; }
	cat /tmp/client.out
}

sent6_before=$(counter_of srnic0 sent_packets)
# Every size class over IPv4; over IPv6 one run of each kind (the GID
# family changes the headers, not the segmentation).
for run in "$b4 $a4 rc -s 1 -n 100" "$b4 $a4 rc -s 4097 -n 50 -e" "$b4 $a4 rc -s 1048576 -n 3" \
	"$b4 $a4 uc -s 1024 -n 100 -e" "$b6 $a6 rc -s 4097 -n 50 -e" "$b6 $a6 uc -s 1 -n 100"; do
	set -- $run
	server_gid=$1 client_gid=$2 kind=$3
	shift 3
	across "ibv_${kind}_pingpong" "$server_gid" "$client_gid" -c "$@"
	expect_match "$(cat /tmp/client.out)" "iters in" "the $kind client finished"
done
# The RC runs move 64 KiB messages, whose first and middle packets the
# receiving side steers to the QP's receive work on the other vCPU. A
# ping-pong of 4 KiB WRITEs (four packets each) is not steered: each
# message answers the other side's and is taken whole where it arrives
# (under the rule for streams all 1600 packets were: the first three of
# each message, and the last behind them).
steered_before=$(($(counter_of srnic0 steered_packets) + $(counter_of srnic1 steered_packets)))
naks_before=$(($(counter_of srnic0 sequence_naks_sent) + $(counter_of srnic1 sequence_naks_sent)))
for run in "$b4 $a4 ib_send_bw -c UC -s 4096 -n 200" "$b6 $a6 ib_write_bw -c UC -s 65536 -n 200" \
	"$b4 $a4 ib_write_bw -s 65536 -n 300" "$b4 $a4 ib_read_bw -s 65536 -n 300" \
	"$b4 $a4 ib_write_lat -s 4096 -n 200"; do
	set -- $run
	gid_b=$1 gid_a=$2
	shift 2
	test="$*"
	set -- "$gid_b" "$gid_a"
	# The UC runs come first; see steer_drops below.
	case " $test " in
	*" -c UC "*) ;;
	*)
		if [ -z "${rc_drops_before:-}" ]; then
			rc_drops_before=$(($(counter_of srnic0 steer_drops) + $(counter_of srnic1 steer_drops)))
			rc_steered_before=$(($(counter_of srnic0 steered_packets) + $(counter_of srnic1 steered_packets)))
		fi
		;;
	esac
	port=$((port + 1))
	step "$test over GIDs $1/$2"
	run_steered_before=$(($(counter_of srnic0 steered_packets) + $(counter_of srnic1 steered_packets)))
	ip netns exec peer timeout 120 $test -d srnic1 -x "$1" -p $port -F > /tmp/server.out 2>&1 &
	server=$!
	wait_until 60 ip netns exec peer sh -c "ss -ltnH 'sport = :$port' | grep -q ." ||
		{ cat /tmp/server.out; fail "$test server never listened"; }
	timeout 120 $test -d srnic0 -x "$2" -p $port -F 10.1.0.2 > /tmp/client.out 2>&1 ||
		{ cat /tmp/client.out /tmp/server.out; fail "$test: the client failed"; }
	wait $server || { cat /tmp/server.out; fail "$test: the server failed"; }
	cat /tmp/client.out
	case $test in
	ib_write_lat*)
		# The client writes first, so the server's first incoming
		# message finds no request of its own and is a stream's (its 3
		# first packets, and the last behind them); every later one
		# answers.
		run_steered=$(($(counter_of srnic0 steered_packets) + $(counter_of srnic1 steered_packets) - run_steered_before))
		echo "$test: $run_steered packets steered"
		[ "$run_steered" -lt 100 ] ||
			fail "$test: $run_steered packets steered to a receive work; a ping-pong's answers should stay where they arrive (a few expected)"
		;;
	esac
done
rdma statistic show link srnic0/1
rdma statistic show link srnic1/1
steered=$(($(counter_of srnic0 steered_packets) + $(counter_of srnic1 steered_packets) - steered_before))
naks=$(($(counter_of srnic0 sequence_naks_sent) + $(counter_of srnic1 sequence_naks_sent) - naks_before))
echo "steered to a receive work: $steered packets; sequence NAKs: $naks"
[ "$steered" -gt 0 ] ||
	fail "no received packet went to a QP's receive work (expected the first and middle packets of the 64 KiB messages to)"
# A veth gathers page fragments: RC payloads of 512 bytes and more leave
# as the sender's pages, uncopied.
zero_copy=$(counter_of srnic0 zero_copy_packets)
[ "$zero_copy" -gt 0 ] ||
	fail "srnic0 sent no packet as page fragments over the veth (zero_copy_packets $zero_copy; expected the RC WRITEs' packets)"
# A lossless veth reorders a QP's packets only if they wait in one CPU's
# backlog while another CPU sends newer ones; answers that start a
# requester or outbox run in a softirq leave it to the QP's work for
# that reason. Before they did, 1000 READs of 64 KiB drew over a
# thousand sequence NAKs here and failed with a retry-exceeded completion.
[ "$naks" -le 10 ] || fail "$naks sequence NAKs on a lossless veth (expected at most 10): a QP's packets overtook each other"
for dev in srnic0 srnic1; do
	for name in icrc_errors malformed_packets unroutable_datagrams; do
		expect_eq "$(counter_of $dev $name)" 0 "$dev counter $name"
	done
done
# The device's credits for steered packets (4096) come back after each
# packet. The RC runs come after the UC runs' steered packets: if credits
# had leaked, the RC runs would steer none (all gone) or drop some (a
# part gone), as RC's send window is below the packets one QP may have
# waiting (1024). UC has no window: a receiver that falls behind (on a
# loaded host) drops UC packets, as a full ring does.
rc_drops=$(($(counter_of srnic0 steer_drops) + $(counter_of srnic1 steer_drops) - rc_drops_before))
rc_steered=$(($(counter_of srnic0 steered_packets) + $(counter_of srnic1 steered_packets) - rc_steered_before))
echo "steer_drops: $((rc_drops_before)) in the UC runs (allowed), $rc_drops in the RC runs; RC packets steered: $rc_steered"
expect_eq "$rc_drops" 0 "packets of the RC runs dropped for want of room for the QP's receive work"
[ "$rc_steered" -gt 0 ] || fail "the RC runs steered no packet to a QP's receive work (credits leaked by the UC runs?)"

step "srnic's requester against rxe's responder on a reordering wire"
# Go-back-N against rxe: netem reorders srnic1's packets, so rxe NAKs
# sequence errors while acknowledgements of the packets before them are
# still on their way. A requester completing a message it was sending
# again must go on at the next message's PSN, and a NAK past a message
# must never make it send an empty last packet (rxe answers that with an
# invalid request NAK, and the QP fails).
must rdma link delete srnic0
must modprobe rdma_rxe
must rdma link add rxe0 type rxe netdev va
r4=$(gid_index rxe0 10.1.0.1)
must modprobe sch_netem
must ip netns exec peer tc qdisc add dev vb root netem delay 1ms reorder 25% 50%
naks_before=$(counter_of srnic1 sequence_naks_received)
port=$((port + 1))
timeout 120 ib_write_bw -d rxe0 -x "$r4" -p $port -F -s 4096 -n 2000 > /tmp/server.out 2>&1 &
server=$!
wait_until 60 listening $port || { cat /tmp/server.out; fail "the rxe0 server never listened"; }
ip netns exec peer timeout 120 ib_write_bw -d srnic1 -x "$b4" -p $port -F -s 4096 -n 2000 10.1.0.1 \
	> /tmp/client.out 2>&1 || { cat /tmp/client.out /tmp/server.out; rdma statistic show link srnic1/1;
	fail "ib_write_bw from srnic1 to rxe0 through the reordering veth failed (expected go-back-N to recover)"; }
wait $server || { cat /tmp/server.out; fail "the ib_write_bw server on rxe0 failed"; }
cat /tmp/client.out
rdma statistic show link srnic1/1
rdma statistic show link rxe0/1
expect_eq "$(counter_of srnic1 invalid_request_naks_received)" 0 "srnic1 counter invalid_request_naks_received"
naks=$(($(counter_of srnic1 sequence_naks_received) - naks_before))
[ "$naks" -gt 0 ] || fail "rxe0 sent srnic1 no sequence NAK: the reordering wire did not reorder"
must ip netns exec peer tc qdisc del dev vb root
must rdma link delete rxe0
# srnic holds rdma_rxe while a device of its own exists (see
# rust/kapi/rdma/shared_id.rs): srnic1 steps aside while rxe unloads.
must ip netns exec peer rdma link delete srnic1
must rmmod rdma_rxe
must ip netns exec peer rdma link add srnic1 type srnic netdev vb

step "two devices of one namespace, without the wire"
must ip link add vc type veth peer name vd
must ip addr add 10.2.0.1/24 dev vc
must ip addr add 10.2.0.2/24 dev vd
must ip link set vc up
must ip link set vd up
# The RDMA core resolves the peer's MAC when a QP connects (ARP from vc to
# vd), which between two interfaces of one host needs accept_local; the
# RDMA traffic itself must not touch the veth.
must sysctl -qw net.ipv4.conf.vc.accept_local=1 net.ipv4.conf.vd.accept_local=1
must rdma link add srnic2 type srnic netdev vc
must rdma link add srnic3 type srnic netdev vd
c4=$(gid_index srnic2 10.2.0.1)
d4=$(gid_index srnic3 10.2.0.2)
lo_before=$(cat /sys/class/net/lo/statistics/tx_packets)
vc_before=$(cat /sys/class/net/vc/statistics/tx_packets)
port=$((port + 1))
timeout 120 ibv_rc_pingpong -d srnic2 -g "$c4" -p $port -s 8192 -n 200 -c > /tmp/server.out 2>&1 &
server=$!
wait_until 60 listening $port || { cat /tmp/server.out; fail "the srnic2 server never listened"; }
timeout 120 ibv_rc_pingpong -d srnic3 -g "$d4" -p $port -s 8192 -n 200 -c 10.2.0.1 > /tmp/client.out 2>&1 ||
	{ cat /tmp/client.out /tmp/server.out; fail "ibv_rc_pingpong from srnic3 to srnic2 failed"; }
wait $server || { cat /tmp/server.out; fail "ibv_rc_pingpong server on srnic2 failed"; }
cat /tmp/client.out
lo_sent=$(($(cat /sys/class/net/lo/statistics/tx_packets) - lo_before))
vc_sent=$(($(cat /sys/class/net/vc/statistics/tx_packets) - vc_before))
received=$(counter_of srnic2 received_packets)
echo "srnic2 received $received packets; lo sent $lo_sent, vc sent $vc_sent"
# Between devices of this node a packet carries up to 64 KiB: each 8 KiB
# message is one packet and one ACK (at the path MTU it would be 8).
[ "$received" -ge 400 ] && [ "$received" -lt 1600 ] ||
	fail "srnic2 received $received packets; expected 400 to 1599 (200 round trips of 8 KiB, one packet and one ACK each)"
# The pingpong's own TCP exchange uses lo: a few dozen packets at most.
[ "$lo_sent" -lt 200 ] || fail "lo sent $lo_sent packets: RDMA traffic between srnic3 and srnic2 went through the IP stack"
[ "$vc_sent" -lt 50 ] || fail "vc sent $vc_sent packets: RDMA traffic between srnic3 and srnic2 went on the veth"
must rdma link delete srnic2
must rdma link delete srnic3

step "a namespace deleted under its device"
# Deleting the namespace destroys vb, and with it its peer va.
must ip netns del peer
wait_until 60 device_absent srnic1 || fail "srnic1 is still there after its namespace was deleted"
wait_until 60 device_absent srnic0 || fail "srnic0 is still there after its veth peer was deleted"
must ip netns add again
must ip link add vg type veth peer name vh
must ip link set vh netns again
must ip netns exec again ip addr add 10.3.0.2/24 dev vh
must ip netns exec again ip link set vh up
must ip netns exec again rdma link add srnic4 type srnic netdev vh
gid_index srnic4 10.3.0.2 > /dev/null
dmesg | grep -q "port 4791.*taken" && fail "the new namespace's socket could not be opened: $(dmesg | grep 'taken')"
must ip netns del again
wait_until 60 device_absent srnic4 || fail "srnic4 is still there after its namespace was deleted"
unload_srnic
