# Connection close under traffic (tests/progs/cm_close.c): 4 RC connections
# through rdma_cm, each QP kept full of SENDs and RDMA WRITEs from its own
# CPU, then either a graceful rdma_disconnect while the threads still post,
# the server process killed mid-traffic, or (round 1) the server's
# node off the wire. Both sides (the killed or gone one excepted) get
# RDMA_CM_EVENT_DISCONNECTED, or the retries run out where nothing
# answers, and on every QP every accepted WR completes exactly once, in
# order, within a bounded time. Repeated.
# vms: 2
# cpus: 2
# timeout: 1200
prog=$SRNIC_TOP/out/progs/cm_close
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
server=10.0.0.1
port=7400
for round in 1 2 3; do
	modes="graceful abort"
	# The node leaving the wire costs a retransmission timeout per round.
	[ $round -gt 1 ] || modes="$modes gone"
	for mode in $modes; do
		port=$((port + 1))
		name="$mode.$round"
		step "round $round: $mode close"
		case $SRNIC_VM in
		a)
			timeout 200 "$prog" server $server $port 4 > /tmp/close_s.out 2>&1 &
			pid=$!
			wait_until 60 grep -q listening /tmp/close_s.out || { cat /tmp/close_s.out; fail "$name: server not listening"; }
			barrier "$name" 2
			if [ $mode = abort ]; then
				wait_until 120 test -e /mnt/shared/traffic.$name ||
					{ cat /tmp/close_s.out; fail "$name: the client never reported traffic"; }
				# The server itself, not the `timeout` around it.
				pkill -9 -x cm_close
				wait $pid 2>/dev/null
				echo "ok: $name: server killed mid-traffic"
			elif [ $mode = gone ]; then
				wait_until 120 test -e /mnt/shared/traffic.$name ||
					{ cat /tmp/close_s.out; fail "$name: the client never reported traffic"; }
				# This node leaves the wire with its server still running.
				must ip link set eth0 down
				echo "ok: $name: node off the wire mid-traffic"
				wait_until 200 test -e /mnt/shared/client.$name || fail "$name: the client never finished"
				pkill -9 -x cm_close
				wait $pid 2>/dev/null
				must ip link set eth0 up
				wait_roce_gid srnic0 1
			else
				wait $pid || { cat /tmp/close_s.out; fail "$name: server failed"; }
				grep '^ok' /tmp/close_s.out
			fi
			;;
		b)
			barrier "$name" 2
			timeout 200 "$prog" client $server $port 4 $mode > /tmp/close_c.out 2>&1 &
			pid=$!
			if [ $mode != graceful ]; then
				wait_until 120 grep -q traffic /tmp/close_c.out ||
					{ cat /tmp/close_c.out; fail "$name: no traffic"; }
				touch /mnt/shared/traffic.$name
			fi
			wait $pid || { touch /mnt/shared/client.$name; cat /tmp/close_c.out; fail "$name: client failed"; }
			touch /mnt/shared/client.$name
			grep '^ok' /tmp/close_c.out
			;;
		esac
		wait_until 60 sh -c '! rdma res show qp | grep -q cm_close' ||
			fail "$name: QPs left after cm_close exited: $(rdma res show qp)"
		barrier "$name.done" 2
	done
done
must rdma link delete srnic0
unload_srnic
