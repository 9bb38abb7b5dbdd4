# The RC transport over the RoCEv2 wire between srnic on two VMs:
# ibv_rc_pingpong with data checked (--chk) below, at and far above the
# path MTU, with and without CQ events, then perftest write, read, send and
# atomic bandwidth and write/send latency, pingpong and perftest with
# memory paged on demand (--odp); the port counters saw packets.
# 1 MiB READs (1024 response packets each) through a slow 4-skb device
# queue complete without the requester timing out: the responder sends
# them a burst at a time and sends a refused list again. VM b's eth0 runs
# fraglist GRO, so it receives srnic's packets as lists merged by the
# stack. A writer hands the IP stack its packets as lists (one output
# call for many packets). Behind a slow queue, posts leave their messages
# to the run the next acknowledgement starts, and none is left behind.
# vms: 2
# timeout: 900
load_srnic
if [ "$SRNIC_VM" = b ]; then
	must ethtool -K eth0 rx-gro-list on
fi
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
server=10.0.0.1
port=18700

# run_pair NAME SERVER-COMMAND... : the server on VM a, the client on VM b
# (the same command with the server's address), each bounded.
run_pair() {
	name=$1
	shift
	port=$((port + 1))
	case $SRNIC_VM in
	a)
		"$@" -p $port > /tmp/server.out 2>&1 &
		pid=$!
		wait_until 60 listening $port || { cat /tmp/server.out; fail "$name: the server never listened"; }
		barrier "$name.$port" 2
		wait $pid || { cat /tmp/server.out; fail "$name: server failed"; }
		cat /tmp/server.out
		;;
	b)
		barrier "$name.$port" 2
		"$@" -p $port $server > /tmp/client.out 2>&1 ||
			{ cat /tmp/client.out; fail "$name: client failed"; }
		cat /tmp/client.out
		;;
	esac
	barrier "$name.$port.done" 2
}

for args in "-s 1 -n 200" "-s 1024 -n 100" "-s 4097 -n 50 -e" "-s 65536 -n 50" "-s 1048576 -n 5 -e"; do
	step "ibv_rc_pingpong $args"
	run_pair pingpong timeout 120 ibv_rc_pingpong -d srnic0 -g 1 -c $args
	[ "$SRNIC_VM" = b ] && expect_match "$(cat /tmp/client.out)" "iters in" "the client finished its iterations"
done

# The IP stack's count of datagrams handed to it (a UDP GSO list is one).
ip_out_requests() {
	awk '/^Ip:/ { if (!col) { for (i = 1; i <= NF; i++) if ($i == "OutRequests") col = i } else print $col }' /proc/net/snmp
}

for test in "ib_write_bw -s 65536 -n 200" "ib_read_bw -s 65536 -n 200" "ib_send_bw -s 65536 -n 200" \
	"ib_atomic_bw -n 200" "ib_write_lat -s 64 -n 200" "ib_send_lat -s 8192 -n 100"; do
	step "$test"
	requests_before=$(ip_out_requests) sent_before=$(counter_of srnic0 sent_packets)
	run_pair perftest timeout 300 $test -d srnic0 -x 1 -F
	if [ "$SRNIC_VM" = b ] && [ "$test" = "ib_write_bw -s 65536 -n 200" ]; then
		# The writer's 64-packet messages leave as lists of up to 64 KiB:
		# about 30 packets per output call on an idle host. A host busy
		# with other VMs delays the VMs' CPUs unevenly, and the writer
		# then runs for fewer ACKs at a time (5 to 7 packets per call
		# were seen); one packet per call would mean no lists at all.
		requests=$(( $(ip_out_requests) - requests_before ))
		sent=$(( $(counter_of srnic0 sent_packets) - sent_before ))
		echo "ib_write_bw: $sent RoCE packets in $requests IP output calls"
		[ "$sent" -ge $(( 4 * requests )) ] ||
			fail "ib_write_bw sent $sent packets in $requests IP output calls; expected lists of many packets each (at least 4)"
	fi
	if [ "$SRNIC_VM" = b ] && [ "$test" = "ib_write_bw -s 65536 -n 200" ]; then
		# A device without scatter-gather would have the stack copy
		# fragments anyway: srnic copies at once for it, and sends
		# page fragments only through one that gathers.
		zero_copy=$(counter_of srnic0 zero_copy_packets)
		if ethtool -k eth0 | grep -q '^scatter-gather: on'; then
			[ "$zero_copy" -gt 0 ] || fail "eth0 gathers, but no packet left as page fragments (zero_copy_packets 0)"
		else
			[ "$zero_copy" = 0 ] || fail "eth0 has no scatter-gather, but $zero_copy packets left as page fragments (expected copies)"
		fi
		echo "eth0 $(ethtool -k eth0 | grep '^scatter-gather:'); zero_copy_packets $zero_copy"
	fi
done

step "ib_send_bw -s 2048 -n 2000 through a 4 Mbit/s queue: posts left to acknowledgements"
# VM b's packets queue behind netem at 4 Mbit/s, so that more than two
# acknowledgement intervals are in flight: a post then leaves its message
# to the requester run the next acknowledgement starts
# (posts_left_to_answers), and every message must still go out, or
# perftest waits for its completions until it is killed. The QPs'
# timeout is 2 s (-u 19), above the queue's delay (128 messages of 2
# packets, about 0.6 s), so a timeout would mean a message left waiting.
if [ "$SRNIC_VM" = b ]; then
	must modprobe sch_netem
	must tc qdisc replace dev eth0 root netem rate 4mbit
fi
left_before=$(counter_of srnic0 posts_left_to_answers) timeouts_before=$(counter_of srnic0 timeouts)
run_pair perftest timeout 120 ib_send_bw -s 2048 -n 2000 -u 19 -d srnic0 -x 1 -F
if [ "$SRNIC_VM" = b ]; then
	must tc qdisc del dev eth0 root
	left=$(( $(counter_of srnic0 posts_left_to_answers) - left_before ))
	timeouts=$(( $(counter_of srnic0 timeouts) - timeouts_before ))
	echo "posts_left_to_answers $left, timeouts $timeouts"
	[ "$left" -gt 0 ] || fail "no post was left to an acknowledgement with a queue's worth in flight (posts_left_to_answers 0)"
	[ "$timeouts" = 0 ] || fail "$timeouts retransmission timeouts while posts waited for acknowledgements; expected none (a 2 s timeout, a queue of about 0.6 s)"
fi

# Memory paged on demand on both sides (--odp): no page is pinned, the
# transport faults them in as it first needs them (the requester before a
# message, the responder with an RNR NAK), and pingpong checks the data.
faults_before=$(counter_of srnic0 odp_faults)
for args in "-s 65536 -n 50" "-s 8388608 -n 1"; do
	# 8 MiB messages are longer than the 4 MiB the requester faults in
	# before it starts: it meets the rest absent as it sends, and goes on
	# once the QP's work has faulted it in.
	step "ibv_rc_pingpong --odp $args"
	run_pair pingpong timeout 120 ibv_rc_pingpong -d srnic0 -g 1 -c -o $args
	[ "$SRNIC_VM" = b ] && expect_match "$(cat /tmp/client.out)" "iters in" "the ODP client finished its iterations"
done
for test in "ib_write_bw --odp -s 65536 -n 100" "ib_read_bw --odp -s 65536 -n 100" \
	"ib_send_bw --odp -s 65536 -n 100"; do
	step "$test"
	run_pair perftest timeout 300 $test -d srnic0 -x 1 -F
done
faults=$(( $(counter_of srnic0 odp_faults) - faults_before ))
echo "odp_faults during the --odp runs: $faults"
[ "$faults" -gt 0 ] || fail "srnic0 faulted in no page during the --odp runs; expected regions paged on demand"

step "ib_read_bw -s 1048576 -n 5: long READ responses are paced"
# VM a answers the READs through netem limited to 4 Mbit/s with room for
# 4 skbs: srnic hands the stack up to 64 KiB of packets as one skb (a UDP
# GSO list), so the queue refuses most of each 1024-packet response
# (virtio alone drains faster than this VM fills it), and what is refused
# must be sent again, not left to the requester's timeout. A full queue
# holds about half a second of packets at this rate: the requester's
# timeout is 2 s (-u 19) rather than perftest's 67 ms, so that only a lost
# response, not the queue's delay, makes it time out.
if [ "$SRNIC_VM" = a ]; then
	must modprobe sch_netem
	must tc qdisc replace dev eth0 root netem rate 4mbit limit 4
fi
timeouts_before=$(counter_of srnic0 timeouts) retries_before=$(counter_of srnic0 transmit_retries)
run_pair perftest timeout 300 ib_read_bw -s 1048576 -n 5 -u 19 -d srnic0 -x 1 -F
timeouts=$(( $(counter_of srnic0 timeouts) - timeouts_before ))
retries=$(( $(counter_of srnic0 transmit_retries) - retries_before ))
echo "during the 1 MiB READs: timeouts $timeouts, transmit_retries $retries, answers_dropped $(counter_of srnic0 answers_dropped)"
if [ "$SRNIC_VM" = a ]; then
	tc -s qdisc show dev eth0
	must tc qdisc del dev eth0 root
	[ "$retries" -gt 0 ] || fail "the 4-skb netem queue refused no READ response packet; expected transmit_retries"
else
	# A response that broke off at a refused packet would cost the reader
	# a timeout each time, dozens per READ.
	[ "$timeouts" -le 3 ] ||
		fail "the requester timed out $timeouts times in 5 READs of 1 MiB; expected paced responses (at most 3)"
fi

rdma statistic show link srnic0/1
sent=$(rdma statistic show link srnic0/1 | tr ' ' '\n' | awk 'f { print; exit } $0 == "sent_packets" { f = 1 }')
[ "${sent:-0}" -gt 1000 ] || fail "srnic0 sent $sent packets; expected the traffic above on the wire"
barrier finished 2
must rdma link delete srnic0
unload_srnic
