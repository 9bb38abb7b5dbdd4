# rdma_cm over srnic: its connection messages are MADs on QP1 (GSI), sent
# and received through the kernel's unmodified ib_mad, ib_cm and rdma_cm.
# In one VM (loopback through the device): rping with its data checked,
# and the rdma_cm tool suite below. Across the wire, srnic to srnic: rping over IPv4
# and IPv6 GIDs, ucmatose (several connections), udaddy (UD with rdma_cm's
# address handles), rdma_server and rdma_client, rstream and riostream
# (rsockets), ibv_ud_pingpong, ibv_srq_pingpong, perftest through rdma_cm
# (-R) and over UD and UC (-c), mckey (multicast); a connect nobody
# listens for is refused at once; a server whose client is killed sees the
# disconnect. Then VM b swaps srnic for the kernel's rxe: rping with
# either as the server, the suite with srnic serving, ucmatose and
# rdma_server/rdma_client with rxe serving. The suite:
# ucmatose, udaddy, rdma_server/rdma_client, rstream, riostream,
# ibv_ud/uc/srq_pingpong, perftest -R, -c UD and -c UC, and mckey.
# ib_mad and ib_cm log no error.
# vms: 2
# timeout: 1500
# pcap: off
case $SRNIC_VM in
a) me=10.0.0.1 peer=10.0.0.2 ;;
b) me=10.0.0.2 peer=10.0.0.1 ;;
esac
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
port=7200

# no_mad_errors WHEN: the kernel's MAD and CM layers logged no error.
no_mad_errors() {
	errors=$(dmesg | grep -iE 'ib_mad|ib_cm|rdma_cm' | grep -iE 'err|fail|warn|timeout' || true)
	[ -z "$errors" ] || fail "$1: ib_mad/ib_cm complain: $errors"
	echo "ok: no ib_mad or ib_cm errors $1"
}
sleep 2
no_mad_errors "after rdma link add"

# expect_pings OUTPUT COUNT WHAT: rping -v printed COUNT echoed payloads.
expect_pings() {
	expect_eq "$(printf '%s\n' "$1" | grep -c 'ping data: rdma-ping-')" "$2" "$3"
}

# rping_pair SERVER_VM NAME COUNT SIZE: an rping server on SERVER_VM and
# its client on the other VM, data validated (-V), both bounded.
rping_pair() {
	vm=$1 name=$2 count=$3 size=$4
	port=$((port + 1))
	if [ "$SRNIC_VM" = "$vm" ]; then
		timeout 200 rping -s -a $me -p $port -C "$count" -S "$size" -V > /tmp/rping_s.out 2>&1 &
		pid=$!
		wait_until 60 listening_cm $port || { cat /tmp/rping_s.out; fail "$name: rping server not listening"; }
		barrier "$name" 2
		wait $pid || { cat /tmp/rping_s.out; fail "$name: rping server failed"; }
		echo "ok: $name: rping server done"
	else
		barrier "$name" 2
		out=$(timeout 200 rping -c -a $peer -p $port -C "$count" -S "$size" -v -V 2>&1) ||
			fail "$name: rping client failed: $out"
		printf '%s\n' "$out" | tail -n 2 | cut -c1-120
		expect_pings "$out" "$count" "$name: payloads echoed"
	fi
	barrier "$name.done" 2
}

# clock_only LOG: perftest moved all its data but, under TCG, could not fit
# its cycle counter to the clock ("Correlation coefficient r^2 < 0.9") and
# so made no report. The report comes after the last iteration.
clock_only() {
	grep -q 'Correlation coefficient' "$1" || return 1
	echo "note: perftest ran but could not time itself under TCG: $(grep -m1 Correlation "$1")"
}

# start_server NAME READY LOG CMD...: CMD in the background (pid in
# $spid), output in LOG, once it is ready: READY is "cm" (an rdma_cm ID
# listens) or the TCP port of its out-of-band exchange.
start_server() {
	_name=$1 _ready=$2 _log=$3
	shift 3
	timeout 240 "$@" > "$_log" 2>&1 &
	spid=$!
	if [ "$_ready" = cm ]; then
		wait_until 60 sh -c 'rdma res show cm_id | grep -q LISTEN'
	else
		wait_until 60 listening "$_ready"
	fi || { cat "$_log"; fail "$_name: server not listening"; }
}

# serve_pair SERVER_VM NAME READY SERVER_CMD CLIENT_CMD: a server on
# SERVER_VM (it must exit 0 once its client is done) and a client on the
# other VM, given the server's address as its last argument. READY is
# "cm" (the server listens through rdma_cm) or the TCP port its
# out-of-band exchange listens on.
serve_pair() {
	vm=$1 name=$2 ready=$3
	if [ "$SRNIC_VM" = "$vm" ]; then
		start_server "$name" "$ready" /tmp/serve_s.out $4
		pid=$spid
		barrier "$name" 2
		wait $pid || clock_only /tmp/serve_s.out || { cat /tmp/serve_s.out; fail "$name: server failed"; }
		tail -n 3 /tmp/serve_s.out | cut -c1-120
		echo "ok: $name: server done"
	else
		barrier "$name" 2
		out=$(timeout 240 $5 $peer 2>&1) || printf '%s\n' "$out" > /tmp/serve_c.out
		[ ! -s /tmp/serve_c.out ] || clock_only /tmp/serve_c.out || fail "$name: client failed: $out"
		rm -f /tmp/serve_c.out
		printf '%s\n' "$out" | tail -n 3 | cut -c1-120
		echo "ok: $name: client done"
	fi
	barrier "$name.done" 2
}

# mckey_pair SENDER_VM NAME GROUP: mckey receives 10 messages to GROUP on
# the other VM (the same one for "loop") from a sender on SENDER_VM. mckey
# posts its sends unsignalled and exits at once, and rxe, which sends
# from a work item, then gets only the first datagram out before the QP
# goes: the sender runs again, one message at a time, until the receiver
# has all ten.
mckey_pair() {
	vm=$1 name=$2 group=$3
	got=/mnt/shared/$name.got
	if [ "$vm" = loop ] || [ "$SRNIC_VM" != "$vm" ]; then
		timeout 120 stdbuf -oL mckey -m $group -b $me -C 10 -S 512 > /tmp/mckey.out 2>&1 &
		mpid=$!
		wait_until 60 grep -q 'joined' /tmp/mckey.out || { cat /tmp/mckey.out; fail "$name: the receiver never joined"; }
	fi
	[ "$vm" = loop ] || barrier "$name" 2
	if [ "$vm" = loop ] || [ "$SRNIC_VM" = "$vm" ]; then
		count=10 tries=0
		while [ ! -e $got ] && [ $tries -lt 30 ]; do
			out=$(timeout 60 mckey -m $group -b $me -s -C $count -S 512 2>&1) ||
				fail "$name: sender failed: $out"
			count=1 tries=$((tries + 1))
			[ "$vm" != loop ] || kill -0 $mpid 2>/dev/null || break
			sleep 0.5
		done
		echo "$name: the sender ran $tries times"
	fi
	if [ "$vm" = loop ] || [ "$SRNIC_VM" != "$vm" ]; then
		wait $mpid || { cat /tmp/mckey.out; fail "$name: the receiver did not get its 10 messages"; }
		touch $got
		echo "ok: $name: 10 multicast messages received"
	fi
	[ "$vm" = loop ] || barrier "$name.done" 2
}

# loop_pair NAME READY SERVER_CMD CLIENT_CMD: serve_pair within this VM.
loop_pair() {
	name=$1 ready=$2
	start_server "$name" "$ready" /tmp/loop_s.out $3
	lpid=$spid
	out=$(timeout 240 $4 $me 2>&1) || printf '%s\n' "$out" > /tmp/loop_c.out
	[ ! -s /tmp/loop_c.out ] || clock_only /tmp/loop_c.out || fail "$name: client failed: $out"
	rm -f /tmp/loop_c.out
	wait $lpid || clock_only /tmp/loop_s.out || { cat /tmp/loop_s.out; fail "$name: server failed"; }
	echo "ok: $name"
}

# suite SERVER_VM TAG DEV: the rdma_cm tool suite with its servers on
# SERVER_VM ("loop": server and client in this VM), DEV being this VM's
# device.
suite() {
	where=$1 tag=$2 dev=$3
	if [ "$where" = loop ]; then run=loop_pair; else run="serve_pair $where"; fi
	n=$((n + 20))
	$run "$tag-ucmatose" cm "ucmatose -c 4 -C 10" "ucmatose -c 4 -C 10 -s"
	$run "$tag-udaddy" cm "udaddy -c 2 -C 10" "udaddy -c 2 -C 10 -s"
	$run "$tag-rdma_server" cm "rdma_server" "rdma_client -s"
	$run "$tag-rstream" cm "rstream -S 65536 -C 25" "rstream -S 65536 -C 25 -s"
	$run "$tag-riostream" cm "riostream -S 65536 -C 25" "riostream -S 65536 -C 25 -s"
	for kind in ud uc srq; do
		n=$((n + 1))
		case $kind in ud) size=512 ;; *) size=4096 ;; esac
		$run "$tag-$kind" $n "ibv_${kind}_pingpong -d $dev -g 1 -p $n -s $size -n 100" \
			"ibv_${kind}_pingpong -d $dev -g 1 -p $n -s $size -n 100"
	done
	n=$((n + 1))
	$run "$tag-send-R" cm "ib_send_bw -R -d $dev -F -p $n -n 100 -s 65536" \
		"ib_send_bw -R -d $dev -F -p $n -n 100 -s 65536"
	for mode in UD UC; do
		n=$((n + 1))
		case $mode in UD) size=1024 ;; UC) size=65536 ;; esac
		$run "$tag-send-$mode" $n "ib_send_bw -c $mode -d $dev -x 1 -F -p $n -n 100 -s $size" \
			"ib_send_bw -c $mode -d $dev -x 1 -F -p $n -n 100 -s $size"
	done
	group_byte=$((group_byte + 1))
	mckey_pair "$where" "$tag-mckey" 239.1.2.$group_byte
}
n=19000
group_byte=10

step "rping in loopback in VM a, through srnic0"
if [ "$SRNIC_VM" = a ]; then
	for size in 64 4096 65000; do
		port=$((port + 1))
		timeout 200 rping -s -a $me -p $port -C 10 -S $size -V > /tmp/rping_s.out 2>&1 &
		pid=$!
		wait_until 60 listening_cm $port || { cat /tmp/rping_s.out; fail "loopback: rping server not listening"; }
		out=$(timeout 200 rping -c -a $me -p $port -C 10 -S $size -v -V 2>&1) ||
			fail "loopback $size B: rping client failed: $out"
		expect_pings "$out" 10 "loopback $size B: payloads echoed"
		wait $pid || { cat /tmp/rping_s.out; fail "loopback $size B: rping server failed"; }
	done
	hops=$(counter_of srnic0 sent_packets)
	echo "srnic0 sent $hops packets"
	step "the rdma_cm tool suite in loopback in VM a"
	suite loop loop srnic0
else
	port=$((port + 3))
fi
# VM a runs the loopback suite alone meanwhile: minutes on a busy machine.
barrier loopback.done 2 600
# The loopback suite ran in VM a only: both VMs count ports alike again.
n=19100 group_byte=20

for vm in a b; do
	for args in "5 64" "20 4096" "4 65000"; do
		set -- $args
		step "rping srnic to srnic, $1 x $2 B, server on $vm"
		rping_pair $vm "rping-$vm-$2" "$1" "$2"
	done
done

step "rping over IPv6 GIDs, server on a"
case $SRNIC_VM in
a) me6=fd00::1 peer6=fd00::2 ;;
b) me6=fd00::2 peer6=fd00::1 ;;
esac
must ip addr add $me6/64 dev eth0 nodad
gid_index srnic0 $me6 > /dev/null
barrier ipv6 2
me4=$me peer4=$peer
me=$me6 peer=$peer6
rping_pair a rping6 10 4096
me=$me4 peer=$peer4

step "ucmatose: 8 connections, server on a"
serve_pair a ucmatose cm "ucmatose -c 8 -C 20" "ucmatose -c 8 -C 20 -s"
step "udaddy: UD through rdma_cm, server on b"
serve_pair b udaddy cm "udaddy -c 4 -C 20" "udaddy -c 4 -C 20 -s"
step "rdma_server and rdma_client (librdmacm's verbs), server on a"
serve_pair a rdma_server cm "rdma_server" "rdma_client -s"
step "rstream and riostream (rsockets), server on b"
serve_pair b rstream cm "rstream -S 65536 -C 50" "rstream -S 65536 -C 50 -s"
serve_pair b riostream cm "riostream -S 65536 -C 50" "riostream -S 65536 -C 50 -s"
pp="-d srnic0 -g 1"
step "ibv_ud_pingpong, ibv_uc_pingpong, ibv_srq_pingpong"
serve_pair a ud_pingpong 18601 "ibv_ud_pingpong $pp -p 18601 -s 512 -n 200" "ibv_ud_pingpong $pp -p 18601 -s 512 -n 200"
serve_pair b uc_pingpong 18603 "ibv_uc_pingpong $pp -p 18603 -s 8192 -n 100" "ibv_uc_pingpong $pp -p 18603 -s 8192 -n 100"
serve_pair b srq_pingpong 18602 "ibv_srq_pingpong $pp -p 18602 -q 4 -s 4096 -n 100" "ibv_srq_pingpong $pp -p 18602 -q 4 -s 4096 -n 100"
step "perftest through rdma_cm (-R), and over UD and UC (-c)"
n=18610
for test in "ib_write_bw -R -s 65536" "ib_read_lat -R -s 64" "ib_send_bw -c UD -s 1024" \
	"ib_send_bw -c UC -s 65536"; do
	n=$((n + 1))
	if [ -n "${test##*-R*}" ]; then ready=$n gid="-x 1"; else ready=cm gid=; fi
	serve_pair a "perftest$n" $ready "$test -d srnic0 $gid -F -p $n -n 100" "$test -d srnic0 $gid -F -p $n -n 100"
done

step "mckey: multicast through rdma_cm, sender on b"
# The receiver joins first and waits for every message; the sender joins
# too (rdma_cm makes the node an IP member of the group) and sends.
if [ "$SRNIC_VM" = a ]; then
	timeout 120 stdbuf -oL mckey -m 239.1.2.3 -b $me -C 20 -S 512 > /tmp/mckey.out 2>&1 &
	pid=$!
	wait_until 60 grep -q 'joined' /tmp/mckey.out || { cat /tmp/mckey.out; fail "mckey: the receiver never joined"; }
	barrier mckey 2
	wait $pid || { cat /tmp/mckey.out; fail "mckey: the receiver did not get its 20 messages"; }
	tail -n 3 /tmp/mckey.out
	echo "ok: mckey: 20 multicast messages received"
else
	barrier mckey 2
	out=$(timeout 120 mckey -m 239.1.2.3 -b $me -s -C 20 -S 512 2>&1) || fail "mckey sender failed: $out"
	printf '%s\n' "$out" | tail -n 3
fi
barrier mckey.done 2

step "a connect nobody listens for is refused"
if [ "$SRNIC_VM" = b ]; then
	start=$(date +%s)
	out=$(timeout 60 rping -c -a $peer -p 7999 -C 1 -S 64 -v 2>&1) &&
		fail "rping to a port with no listener succeeded: $out"
	took=$(($(date +%s) - start))
	echo "$out" | tail -n 2 | cut -c1-120
	[ $took -lt 30 ] || fail "the refusal took $took s (a REJ should come back at once)"
	echo "ok: refused in $took s"
fi
barrier refused.done 2

step "the client is killed: the server sees the disconnect"
port=$((port + 1))
if [ "$SRNIC_VM" = a ]; then
	timeout 200 rping -s -a $me -p $port -S 64 > /tmp/rping_s.out 2>&1 &
	pid=$!
	wait_until 60 listening_cm $port || { cat /tmp/rping_s.out; fail "kill: rping server not listening"; }
	barrier kill 2
	barrier killed 2
	wait_until 60 sh -c "! kill -0 $pid" || { cat /tmp/rping_s.out; fail "the server still runs 60 s after its client was killed"; }
	wait $pid
	echo "ok: the server ended (status $?) after its client was killed"
else
	barrier kill 2
	rping -c -a $peer -p $port -S 64 -C 1000000 > /tmp/rping_c.out 2>&1 &
	pid=$!
	sleep 5
	kill -0 $pid || { cat /tmp/rping_c.out; fail "kill: the rping client ended early"; }
	kill -9 $pid
	wait $pid 2>/dev/null
	barrier killed 2
fi
wait_until 30 sh -c '! rdma res show qp | grep -q rping' || fail "rping QPs left after it exited: $(rdma res show qp)"
barrier kill.done 2

step "VM b swaps srnic for rxe"
if [ "$SRNIC_VM" = b ]; then
	must rdma link delete srnic0
	unload_srnic
	must modprobe rdma_rxe
	must rdma link add rxe0 type rxe netdev eth0
	wait_roce_gid rxe0 1
fi
barrier rxe.ready 2
if [ "$SRNIC_VM" = b ]; then mydev=rxe0; else mydev=srnic0; fi
# The whole suite with srnic serving; rxe serving, the connection
# management both ways (rping, ucmatose, rdma_server): the data paths
# behind the other tools are the ones the suite already crossed.
step "srnic and rxe, server on a: rping and the rdma_cm tool suite"
rping_pair a rxe-a 10 4096
suite a rxe-a $mydev
step "srnic and rxe, server on b: rping, ucmatose, rdma_server"
rping_pair b rxe-b 10 4096
serve_pair b rxe-b-ucmatose cm "ucmatose -c 4 -C 10" "ucmatose -c 4 -C 10 -s"
serve_pair b rxe-b-rdma_server cm "rdma_server" "rdma_client -s"
no_mad_errors "after all the traffic"
if [ "$SRNIC_VM" = b ]; then
	must rdma link delete rxe0
	must rmmod rdma_rxe
else
	must rdma link delete srnic0
	unload_srnic
fi
