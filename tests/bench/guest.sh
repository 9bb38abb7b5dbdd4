#!/usr/bin/env bash
# The guest side of `make bench` (scripts/bench): runs inside one benchmark
# VM, started by qemu/guest-init through the job's `script` stub, and works
# through the plan the host wrote into the job directory:
#
#   /mnt/job/params   BENCH_MODE=loopback|wire|fastwire, BENCH_KO, BENCH_KO_B
#                     (the other build of an A/B run), BENCH_PROGS, BENCH_QUICK
#   /mnt/job/plan     one measurement a line: ID DEVICE TEST SIZE QPS
#
# DEVICE is srnic, srnic_b (BENCH_KO_B), rxe or siw (loaded one at a time
# on eth0: rxe and srnic cannot share UDP port 4791), iblan (iblan0 over srnic0, 10.1.0.N/24, for
# iperf3 over the emulated LAN; on the fast wire LAN 5 children of srnic0's
# and srnic1's ports, the latter in "far"), or "limit" for the limits measured in the
# same VM (memcpy, and on the wire iperf3 over UDP and TCP). TEST is
# write_bw, read_bw, send_bw, atomic_bw, write_lat, send_lat, send_bw_2proc,
# memcpy, iperf3_udp or iperf3_tcp.
#
# In loopback mode one VM runs both ends of every test against its own
# address. In wire mode both VMs run the same plan in step: VM a runs the
# servers, VM b the clients, meeting at files in /mnt/shared. In fastwire
# mode one VM runs the servers on one end of a veth pair (vnear,
# 10.2.0.1) and the clients in the network namespace "far" on the other
# (vfar, 10.2.0.2), each end with its own device: no emulated wire in
# between, so the CPU each packet costs sets the pace. rxe (Linux 6.12)
# opens its UDP sockets and looks up its routes in the initial namespace
# only, so it cannot serve "far": its rows pair rxe's server with srnic's
# client. Bandwidth rows of this mode note the kernel CPU time (system,
# irq and softirq of /proc/stat, both vCPUs) per GiB moved.
#
# The recording VM (the only one, or b) appends one CSV line per
# measurement to /mnt/job/results.csv:
#   device,test,mode,size,qps,value,unit,status,note
# with status ok, FAILED or unsupported; a failure never has a value, and
# its note says why and names the raw log in raw/. Every command is bounded
# by `timeout`; a failure is recorded and the plan goes on.
set -u

. "$SRNIC_TOP/tests/lib/guest.sh"
. /mnt/job/params

job=/mnt/job
raw=$job/raw
# Logs as notes name them: relative to the session directory on the host.
rel=$SRNIC_VM/raw
results=$job/results.csv
mkdir -p "$raw"
shared=/mnt/shared
mode=$BENCH_MODE
quick=${BENCH_QUICK:-0}
my_ip=${SRNIC_IP%/*}
server_ip=10.0.0.1
# The carrier netdev of each end, the client's address, and what runs a
# client command (in fastwire mode: in the far namespace).
near_if=eth0 far_if=eth0 client_ip=$my_ip client_ns=()
if [ "$mode" = fastwire ]; then
	near_if=vnear far_if=vfar server_ip=10.2.0.1 client_ip=10.2.0.2 client_ns=(ip netns exec far)
fi
if [ "$mode" != wire ] || [ "$SRNIC_VM" = b ]; then recorder=1; else recorder=0; fi

# Bounds: seconds for one perftest or iperf3 command, and the transfer
# sizes behind the iteration counts.
if [ "$quick" = 1 ]; then
	bw_bytes=$((32 << 20)) max_iters=2000 lat_iters=1000 cmd_timeout=60 iperf_secs=4
else
	# Loopback moves up to 1.5 GiB/s: 128 MiB took a tenth of a second
	# there, mostly the ramp of posting and the drain of the last
	# completions, and one build's rows scattered by a third between runs
	# (srnic WRITE 4 MiB 762 to 1362 MiB/s). A GiB measures the steady
	# state: about a second for srnic and siw, 25 s for rxe.
	bw_bytes=$((1 << 30)) max_iters=20000 lat_iters=5000 cmd_timeout=300 iperf_secs=10
	# The wire under TCG moves a few MiB/s: keep a test well inside the
	# timeout there.
	[ "$mode" = loopback ] || bw_bytes=$((64 << 20))
fi
min_iters=20
# perftest busy-polls its CQ, and in loopback there are as many pollers as
# vCPUs (one on the wire): the devices' deferred work (rxe's and srnic's
# work items, siw's threads) then waits for the scheduler tick, 4 ms, and
# that tick becomes every latency figure. perftest runs at the lowest
# priority so that the kernel's work preempts it at once, as a NIC's own
# engine would not wait for the application either.
bench_nice=(nice -n 19)
[ "${BENCH_NICE:-1}" = 1 ] || bench_nice=()
# For trying the harness itself on a slow kernel, or for steadier figures:
# smaller or larger runs.
max_iters=${BENCH_MAX_ITERS:-$max_iters} lat_iters=${BENCH_LAT_ITERS:-$lat_iters}
bw_bytes=${BENCH_BW_BYTES:-$bw_bytes}

log() { echo "bench[$SRNIC_VM]: $*"; }

# record DEVICE TEST SIZE QPS VALUE UNIT STATUS NOTE
record() {
	[ "$recorder" = 1 ] || return 0
	local note=${8//,/;}
	note=${note//$'\n'/ }
	echo "$1,$2,$mode,$3,$4,$5,$6,$7,$note" >> "$results"
}

# A descriptor that never has data, for nap_for: reading it with a
# timeout waits without starting a process, so that waiting and watching
# cost the VM nothing measurable (a `date` and a `sleep` five times a
# second took a fifth of a one-vCPU VM under TCG while it served a
# measurement).
nap_fifo=$(mktemp -u /tmp/bench-nap.XXXXXX)
mkfifo "$nap_fifo" && exec {nap}<> "$nap_fifo" && rm -f "$nap_fifo"

# nap_for SECONDS: sleeps, starting no process.
nap_for() {
	read -r -t "$1" -u "$nap" _ || :
}

# await SECONDS FILE...: wait until one of the FILEs exists; prints it.
await() {
	local deadline=$((EPOCHSECONDS + $1)) f
	shift
	while :; do
		for f in "$@"; do
			[ -e "$f" ] && { echo "$f"; return 0; }
		done
		[ "$EPOCHSECONDS" -lt "$deadline" ] || return 1
		nap_for 0.2
	done
}

# wait_listen PORT PID: until a TCP socket listens on PORT, or PID ended.
wait_listen() {
	local deadline=$((EPOCHSECONDS + 60))
	while [ "$EPOCHSECONDS" -lt "$deadline" ]; do
		listening "$1" && return 0
		kill -0 "$2" 2>/dev/null || return 1
		nap_for 0.2
	done
	return 1
}

# client_state LOG: sets $client to "gave-up" if perftest wrote that its
# connection or its exchange with the server failed (it measures nothing
# after that), "started" if it printed its test's banner (which it does
# once connected), else "connecting". A function, not a command
# substitution, so that watching a client starts no process.
client_state() {
	local line
	client=connecting
	while IFS= read -r line; do
		case $line in
		*'Failed to exchange data'* | *'Failed to connect RDMA CM events'* | *'Unable to perform rdma_client'*)
			client=gave-up
			return
			;;
		*' BW Test'* | *' Latency Test'*) client=started ;;
		esac
	done < "$1"
}

# The longest a client may take to connect: siw's RDMA CM on the wire now
# and then never completes perftest's exchange, and the client then hangs
# until its timeout.
connect_secs=60

# run_client LOG COMMAND...: runs a perftest client with its output in LOG
# and returns its exit status. A client still connecting after
# $connect_secs seconds, or still there 5 s after it wrote that it gave
# up, is stopped rather than left to cost its whole timeout; the line
# "bench: stopped ..." it leaves in LOG makes try_again run it again.
run_client() {
	local log=$1 pid secs=0 gave_up=0 rc
	shift
	"$@" > "$log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		nap_for 1
		secs=$((secs + 1))
		client_state "$log"
		case $client in
		started) break ;;
		gave-up) gave_up=$((gave_up + 1)) && [ "$gave_up" -lt 5 ] && continue ;;
		connecting) [ "$secs" -le "$connect_secs" ] && continue ;;
		esac
		kill "$pid" 2>/dev/null
		wait "$pid"
		rc=$?
		echo "bench: stopped, $client after $secs s" >> "$log"
		return "$rc"
	done
	wait "$pid"
}

# stop PID: end a background command (already bounded by timeout).
stop() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# reap PID: let a server that finished its test end on its own (10 s at
# most), then stop it.
reap() {
	local i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$1" 2>/dev/null || break
		nap_for 0.2
	done
	stop "$1"
}

# last_line FILE: the last non-empty line of a log, for a failure note.
last_line() {
	grep -v '^[[:space:]-]*$' "$1" 2>/dev/null | tail -n 1 | cut -c1-160
}

# --- devices -------------------------------------------------------------

ibdev= gid_args=() atomic_cap= comp_vectors=1
# The client's device and GID when it is not the server's (fastwire).
client_ibdev= client_gid_args=()

# fastwire_setup: the veth pair between this namespace and "far".
fastwire_setup() {
	ip netns add far &&
		ip link add vnear type veth peer name vfar netns far &&
		ip addr add 10.2.0.1/24 dev vnear && ip link set vnear up &&
		ip -n far addr add 10.2.0.2/24 dev vfar && ip -n far link set vfar up &&
		ip -n far link set lo up
}

# far_device DEV TYPE: the client's device DEV of TYPE on vfar, in "far".
far_device() {
	local gid
	client_ibdev=$1
	ip netns exec far rdma link add "$1" type "$2" netdev vfar || return 1
	if [ "$2" = siw ]; then
		client_gid_args=(-R)
		wait_until 60 grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" ||
			{ echo "$1 did not become ACTIVE"; return 1; }
	else
		wait_until 60 find_gid "$1" "$client_ip" || { echo "$1 has no RoCEv2 GID for $client_ip"; return 1; }
		gid=$(find_gid "$1" "$client_ip")
		client_gid_args=(-x "$gid")
	fi
}

setup_device() {
	local dev=$1 release
	release=$(uname -r)
	case $dev in
	srnic | srnic_b)
		ibdev=srnic0
		# Ours, built against this kernel, where modprobe finds it
		# (guest-init installed the test kernel's build of it);
		# srnic_b is the other build of an A/B run (scripts/bench --ab).
		local ko=$BENCH_KO
		[ "$dev" = srnic ] || ko=$BENCH_KO_B
		cp "$ko" "/lib/modules/$release/extra/srnic.ko" || return 1
		depmod -a && modprobe srnic &&
			rdma link add srnic0 type srnic netdev "$near_if" || return 1
		[ "$mode" != fastwire ] || far_device srnic1 srnic || return 1
		;;
	rxe)
		ibdev=rxe0
		modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$near_if" || return 1
		if [ "$mode" = fastwire ]; then
			# rxe cannot reach "far" (see the top): srnic's client.
			cp "$BENCH_KO" "/lib/modules/$release/extra/srnic.ko" && depmod -a &&
				modprobe srnic && far_device srnic1 srnic || return 1
		fi
		;;
	siw)
		ibdev=siw0
		modprobe siw && rdma link add siw0 type siw netdev "$near_if" || return 1
		[ "$mode" != fastwire ] || far_device siw1 siw || return 1
		;;
	iblan | iblan_cm)
		# Ethernet over srnic0's UD QPs (iblan_cm: unicast over an RC
		# connection per peer): iperf3 runs on iblan0.
		setup_device srnic || return 1
		wait_until 60 sh -c "ip -6 addr show dev $near_if scope link | grep -q inet6" || return 1
		[ "$mode" != fastwire ] ||
			wait_until 60 sh -c "ip -n far -6 addr show dev vfar scope link | grep -q inet6" || return 1
		insmod "$(dirname "$BENCH_KO")/iblan.ko" || return 1
		wait_until 30 ip link show iblan0 || { echo "no iblan0"; return 1; }
		local near_lan=iblan0 lan_ip="10.1.0.${my_ip##*.}"
		if [ "$mode" = fastwire ]; then
			# The two ends are LAN 5 children of the ports of srnic0 and
			# srnic1 (LIDs 1 and 2 in their MACs), the one on srnic1
			# made straight into "far" (a port's own iblanN stays in
			# the initial namespace). Names differ: the core checks a
			# new link's name in the requester's namespace too.
			wait_until 30 ip link show iblan1 || { echo "no iblan1"; return 1; }
			local near_port far_port lan
			for lan in iblan0 iblan1; do
				case $(ethtool -i "$lan" | awk '$1 == "bus-info:" { print $2 }') in
				srnic1:*) far_port=$lan ;;
				*) near_port=$lan ;;
				esac
			done
			[ -n "${far_port:-}" ] && [ -n "${near_port:-}" ] ||
				{ ethtool -i iblan0; ethtool -i iblan1; echo "no LAN port on srnic1"; return 1; }
			ip link set "$near_port" up && ip link set "$far_port" up || return 1
			ip link add link "$near_port" name nlan address 02:00:00:05:00:01 type iblan &&
				ip link add link "$far_port" name flan address 02:00:00:05:00:02 netns far type iblan &&
				ip -n far link set flan up && ip -n far addr add 10.1.0.2/24 dev flan || return 1
			near_lan=nlan lan_ip=10.1.0.1
		fi
		if [ "$dev" = iblan_cm ]; then
			# Connected mode (MTU 65520, scatter-gather) on both ends.
			echo connected > "/sys/class/net/$near_lan/mode" || return 1
			[ "$mode" != fastwire ] ||
				ip netns exec far sh -c 'echo connected > /sys/class/net/flan/mode' || return 1
		fi
		ip link set "$near_lan" up && ip addr add "$lan_ip/24" dev "$near_lan" || return 1
		wait_until 30 sh -c "ethtool -S $near_lan | grep -q 'ns_peers: [1-9]'" ||
			{ ethtool -S "$near_lan"; echo "$near_lan found no peer"; return 1; }
		log "iblan: $near_lan up over srnic0"
		return 0
		;;
	*) echo "unknown device $dev"; return 1 ;;
	esac
	if [ "$dev" = siw ]; then
		# iWARP connects through the RDMA CM (a TCP connection).
		gid_args=(-R)
		wait_until 60 grep -q ACTIVE "/sys/class/infiniband/$ibdev/ports/1/state" ||
			{ echo "$ibdev did not become ACTIVE"; return 1; }
	else
		local gid
		local near_ip=$my_ip
		[ "$mode" != fastwire ] || near_ip=$server_ip
		wait_until 60 find_gid "$ibdev" "$near_ip" || { echo "$ibdev has no RoCEv2 GID for $near_ip"; return 1; }
		gid=$(find_gid "$ibdev" "$near_ip")
		gid_args=(-x "$gid")
	fi
	ibv_devinfo -v -d "$ibdev" > "$raw/devinfo-$dev.$SRNIC_VM.txt" 2>&1
	atomic_cap=$(awk '$1 == "atomic_cap:" { print $2; exit }' "$raw/devinfo-$dev.$SRNIC_VM.txt")
	comp_vectors=$(python3 -c 'import sys; from pyverbs.device import Context
print(Context(name=sys.argv[1]).num_comp_vectors)' "$ibdev" 2>/dev/null) || comp_vectors=1
	log "$dev: $ibdev up (${gid_args[*]}, atomics $atomic_cap, $comp_vectors completion vectors)"
}

# teardown_device DEV: delete the link and unload, also after a setup that
# failed half way (the next device must find UDP port 4791 free).
teardown_device() {
	local dev=$1
	[ -z "$ibdev" ] || rdma statistic show link "$ibdev/1" 2>&1
	[ -z "$ibdev" ] || [ ! -e "/sys/class/infiniband/$ibdev" ] || rdma link delete "$ibdev" 2>&1
	if [ -n "$client_ibdev" ] && [ -e "/sys/class/infiniband/$client_ibdev" ]; then
		rdma statistic show link "$client_ibdev/1" 2>&1
		ip netns exec far rdma link delete "$client_ibdev" 2>&1
	fi
	client_ibdev= client_gid_args=()
	case $dev in
	iblan | iblan_cm)
		[ ! -e /sys/module/iblan ] || rmmod iblan
		[ ! -e /sys/class/infiniband/srnic0 ] || rdma link delete srnic0
		[ ! -e /sys/module/srnic ] || rmmod srnic
		;;
	srnic | srnic_b) [ ! -e /sys/module/srnic ] || rmmod srnic ;;
	rxe)
		[ ! -e /sys/module/rdma_rxe ] || rmmod rdma_rxe
		[ ! -e /sys/module/srnic ] || rmmod srnic
		;;
	siw) [ ! -e /sys/module/siw ] || rmmod siw ;;
	esac
	ibdev=
}

# --- one measurement -----------------------------------------------------

# iters TEST SIZE QPS: the iteration count for a perftest run.
iters() {
	local n
	case $1 in
	*_lat) echo "$lat_iters"; return ;;
	esac
	n=$((bw_bytes / ($2 > 0 ? $2 : 8) / $3))
	[ "$n" -ge "$min_iters" ] || n=$min_iters
	[ "$n" -le "$max_iters" ] || n=$max_iters
	echo "$n"
}

# perftest_args TEST SIZE QPS PORT [client]: the arguments of one end (the
# server's, or with "client" the client's: they differ in fastwire mode).
perftest_args() {
	local test=$1 size=$2 qps=$3 port=$4
	if [ "${5:-}" = client ] && [ -n "$client_ibdev" ]; then
		args=(-d "$client_ibdev" "${client_gid_args[@]}")
	else
		args=(-d "$ibdev" "${gid_args[@]}")
	fi
	args+=(-F -p "$port" -n "$(iters "$test" "$size" "$qps")")
	[ "$test" = atomic_bw ] || args+=(-s "$size")
	[ "$qps" -le 1 ] || args+=(-q "$qps")
	# The table takes perftest's average, never its peak, which perftest
	# works out after the run (up to 20000 iterations) in time quadratic
	# in them: seconds of a TCG vCPU per row, in the profile's window too.
	case $test in *_bw*) args+=(-N) ;; esac
}

# parse TEST SIZE FILE: the figure of perftest's result line. Latency:
# its "t_typical" (the median) in usec. Bandwidth: its "BW average" in
# MiB/s (perftest's MB/sec are MiB/s), except below 10 MiB/s, where its two
# decimals lose the figure (2 B messages): there the message rate (Mpps,
# six decimals) times the size, the same measurement in more digits.
parse() {
	case $1 in
	*_lat) awk '/#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ && NF >= 5 { print $5; exit }' "$3" ;;
	*) awk '/#bytes/ { h = 1; next }
		h && $1 ~ /^[0-9]+$/ && NF >= 5 {
			if ($4 >= 10) print $4; else printf "%.4g\n", $5 * 1e6 * $1 / 1048576; exit
		}' "$3" ;;
	esac
}

# judge DEVICE TEST SIZE QPS RC CLIENT-LOG [SERVER-LOG]: record a perftest run.
judge() {
	local dev=$1 test=$2 size=$3 qps=$4 rc=$5 log=$6 unit=MiB/s value why
	case $test in *_lat) unit=usec ;; esac
	value=$(parse "$test" "$size" "$log")
	if [ "$rc" = 124 ]; then
		why="timed out after ${cmd_timeout}s"
		timed_out=1
	elif [ "$rc" != 0 ]; then
		why="exit $rc: $(last_line "$log")"
	elif clock_failed "$log"; then
		why="perftest could not calibrate the TSC in $attempts tries (r^2 < 0.9)"
	elif [ -z "$value" ]; then
		why="no result line in the output"
	elif ! positive "$value"; then
		why="perftest reported $value"
	fi
	local note="$rel/${log##*/}"
	[ -z "${extra_note:-}" ] || note="$extra_note; $note"
	[ "${tries:-1}" -le 1 ] || note+="; try $tries of $attempts, earlier tries beside it"
	if [ -n "${why:-}" ]; then
		record "$dev" "$test" "$size" "$qps" "" "$unit" FAILED "$why ($note)"
	else
		record "$dev" "$test" "$size" "$qps" "$value" "$unit" ok "$note"
	fi
}

# perftest measures time with the TSC, whose rate it samples against
# gettimeofday() at start; when the vCPU is descheduled during that (a busy
# host under TCG), the fit fails ("Correlation coefficient r^2 < 0.9") and
# perftest reports 0. Such a run measured nothing: run it again, up to
# $attempts times, and say so if it never calibrates.
#
# The same goes for a run whose connection setup failed before anything
# was measured (siw on the wire, now and then: refused by the RDMA CM, or
# the exchange over it flushed): the test never started. A failure after
# the result header (a device error while measuring) is never retried. A
# figure that took more than one try says so in its note.
attempts=3
clock_failed() {
	grep -q 'Correlation coefficient' "$1" 2>/dev/null
}
# try_again LOG: whether a client run measured nothing and may be rerun.
try_again() {
	clock_failed "$1" && return 0
	! grep -q '#bytes' "$1" 2>/dev/null &&
		grep -Eq 'Connection refused|Failed to exchange data|Unable to perform rdma_client|^bench: stopped' "$1" 2>/dev/null
}

# positive VALUE: a finite number above zero.
positive() {
	printf '%s\n' "$1" | grep -Eq '^[0-9]+(\.[0-9]+)?$' && awk -v v="$1" 'BEGIN { exit !(v > 0) }'
}

perftest_bin() {
	case $1 in
	send_bw_2proc) echo ib_send_bw ;;
	*) echo "ib_$1" ;;
	esac
}

# profile_start TEST: with BENCH_PROFILE=1, samples every CPU (perf's
# cpu-clock: TCG has no PMU) while a bandwidth client runs: perftest's,
# or iperf3's over TCP (iblan's bulk rows and the carriers they divide).
profiler=
profile_start() {
	profiler=
	case $1 in *_bw* | iperf3_tcp) ;; *) return 0 ;; esac
	if [ "${BENCH_TRACE:-0}" = 1 ]; then
		perf record -q -a -o /tmp/bench.perf.data "${trace_events[@]}" > /tmp/bench.perf.log 2>&1 &
	elif [ "${BENCH_PROFILE:-0}" = 1 ]; then
		perf record -q -e cpu-clock -F 2000 -a -g -o /tmp/bench.perf.data > /tmp/bench.perf.log 2>&1 &
	else
		return 0
	fi
	profiler=$!
	sleep 1
}

# With BENCH_TRACE=1: who ran, who waited for whom and what each CPU's
# idle time followed (the scheduler's switches and wake-ups, the
# workqueue's items, interrupts), where a profile shows only idle.
trace_events=(-e sched:sched_switch -e sched:sched_wakeup -e sched:sched_waking
	-e sched:sched_migrate_task -e workqueue:workqueue_queue_work
	-e workqueue:workqueue_execute_start -e workqueue:workqueue_execute_end
	-e irq:irq_handler_entry -e irq_vectors:call_function_single_entry
	-e irq_vectors:reschedule_entry)

# trace_stop FILE: the trace's summary to FILE (over the measurement:
# each CPU's idle time by what ended it, each task's busy time, the
# workqueue's items; then perf's per-task summary of the whole trace),
# and every event to FILE's .events.gz beside it.
trace_stop() {
	local events=${1%.txt}.events.gz
	timeout 300 perf script -i /tmp/bench.perf.data -F comm,pid,cpu,time,event,trace 2>/dev/null |
		gzip -1 > "$events"
	{
		echo "# idle by cause, busy time by task, work items (tests/bench/trace_idle.py)"
		timeout 300 python3 -S "$SRNIC_TOP/tests/bench/trace_idle.py" "$events" 2>&1
		echo "# perf sched timehist -s: each task's time over the whole trace"
		timeout 120 perf sched timehist -i /tmp/bench.perf.data -s 2>&1 | tail -n 60
	} > "$1"
	rm -f /tmp/bench.perf.data
}

# profile_stop FILE: ends the sampling and writes its top symbols to FILE.
profile_stop() {
	[ -n "$profiler" ] || return 0
	kill -INT "$profiler" 2>/dev/null
	wait "$profiler" 2>/dev/null
	profiler=
	if [ "${BENCH_TRACE:-0}" = 1 ]; then
		trace_stop "${1%.profile.txt}.trace.txt"
		return 0
	fi
	{
		echo "# perf record -e cpu-clock -a (all CPUs), self time by symbol"
		timeout 120 perf report -i /tmp/bench.perf.data --no-children --sort dso,sym --stdio -g none 2>&1 |
			grep -v '^#' | grep -v '^$' | head -n 40
		echo "# by CPU and task"
		timeout 120 perf report -i /tmp/bench.perf.data --no-children --sort cpu,comm --stdio -g none 2>&1 |
			grep -v '^#' | grep -v '^$' | head -n 20
		echo "# by task and symbol"
		timeout 120 perf report -i /tmp/bench.perf.data --no-children --sort comm,sym --stdio -g none 2>&1 |
			grep -v '^#' | grep -v '^$' | head -n 40
		echo "# inclusive time by symbol (the symbol and everything it called)"
		timeout 120 perf report -i /tmp/bench.perf.data --children --sort sym --stdio -g none 2>&1 |
			grep -v '^#' | grep -v '^$' | head -n 80
		echo "# srnic's own functions, inclusive time (the function and everything it called)"
		timeout 120 perf report -i /tmp/bench.perf.data --children --dsos '[srnic]' --sort sym --stdio -g none 2>&1 |
			grep -v '^#' | grep -v '^$' | head -n 60
		echo "# srnic's own functions, self time (where srnic's share goes)"
		timeout 120 perf report -i /tmp/bench.perf.data --no-children --dsos '[srnic]' --sort sym --stdio -g none 2>&1 |
			grep -v '^#' | grep -v '^$' | head -n 40
		echo "# callers of the top kernel symbols"
		timeout 120 perf report -i /tmp/bench.perf.data --no-children --sort sym --stdio -G 2>&1 |
			grep -v '^$' | head -n 600
	} > "$1"
	rm -f /tmp/bench.perf.data
}

# kernel_ticks: the system, irq and softirq time of all CPUs so far, in
# USER_HZ ticks (/proc/stat).
kernel_ticks() {
	awk '$1 == "cpu" { print $4 + $7 + $8; exit }' /proc/stat
}

# cpu_note TEST SIZE QPS TICKS: "cpu X s/GiB", the kernel CPU time of a
# bandwidth run per GiB it moved (perftest's -n iterations of SIZE bytes
# on each QP); its busy-polling client and server are user time and not
# counted.
cpu_note() {
	local bytes=$(($(iters "$1" "$2" "$3") * $2 * $3))
	[ "$bytes" -gt 0 ] || return 0
	awk -v t="$4" -v hz="$(getconf CLK_TCK)" -v b="$bytes" \
		'BEGIN { printf "cpu %.3g s/GiB", t / hz / (b / 1073741824) }'
}

# Loopback (and fastwire): both ends in this VM.
loopback_perftest() {
	local id=$1 dev=$2 test=$3 size=$4 qps=$5 tag=$6 port=$((18000 + $1)) bin spid rc att ticks cpu=
	local extra_note=
	bin=$(perftest_bin "$test")
	for att in $(seq "$attempts"); do
		tries=$att
		perftest_args "$test" "$size" "$qps" "$port"
		timeout "$cmd_timeout" "${bench_nice[@]}" stdbuf -oL "$bin" "${args[@]}" > "$raw/$tag.server.txt" 2>&1 &
		spid=$!
		if ! wait_listen "$port" "$spid"; then
			stop "$spid"
			record "$dev" "$test" "$size" "$qps" "" "" FAILED \
				"the server never listened: $(last_line "$raw/$tag.server.txt") ($rel/$tag.server.txt)"
			return
		fi
		profile_start "$test"
		perftest_args "$test" "$size" "$qps" "$port" client
		ticks=$(kernel_ticks)
		run_client "$raw/$tag.client.txt" \
			timeout "$cmd_timeout" "${client_ns[@]}" "${bench_nice[@]}" stdbuf -oL "$bin" "${args[@]}" "$server_ip"
		rc=$?
		ticks=$(($(kernel_ticks) - ticks))
		profile_stop "$raw/$tag.profile.txt"
		[ "$rc" = 0 ] || stop "$spid"
		wait "$spid" 2>/dev/null
		try_again "$raw/$tag.client.txt" && [ "$att" -lt "$attempts" ] || break
		cp "$raw/$tag.client.txt" "$raw/$tag.client.try$att.txt"
		cp "$raw/$tag.server.txt" "$raw/$tag.server.try$att.txt"
		port=$((port + 20000))
	done
	case $mode/$test in fastwire/*_bw) extra_note=$(cpu_note "$test" "$size" "$qps" "$ticks") ;; esac
	judge "$dev" "$test" "$size" "$qps" "$rc" "$raw/$tag.client.txt"
}

# Two ib_send_bw pairs at once, pair k pinned to CPU k, waiting for
# completions through CQ events (-e) on completion vector k when the device
# has two (perftest takes a vector only with events, and events only for
# SEND): the sum of both.
loopback_2proc() {
	local id=$1 dev=$2 test=$3 size=$4 qps=$5 tag=$6 k port spids cpids rc total why v att vec
	for att in $(seq "$attempts"); do
		spids=() cpids=() total=0 why= v=
		for k in 0 1; do
			port=$((18000 + id * 2 + k + 5000 + (att - 1) * 20000))
			perftest_args send_bw "$size" "$qps" "$port"
			vec=$((k < comp_vectors ? k : 0))
			timeout "$cmd_timeout" taskset -c $k "${bench_nice[@]}" stdbuf -oL ib_send_bw "${args[@]}" -e -X $vec \
				> "$raw/$tag.$k.server.txt" 2>&1 &
			spids+=($!)
			wait_listen "$port" $! || why="server $k never listened ($rel/$tag.$k.server.txt)"
		done
		if [ -z "$why" ]; then
			profile_start "$test"
			for k in 0 1; do
				port=$((18000 + id * 2 + k + 5000 + (att - 1) * 20000))
				perftest_args send_bw "$size" "$qps" "$port"
				vec=$((k < comp_vectors ? k : 0))
				timeout "$cmd_timeout" taskset -c $k "${bench_nice[@]}" stdbuf -oL ib_send_bw "${args[@]}" -e -X $vec "$server_ip" \
					> "$raw/$tag.$k.client.txt" 2>&1 &
				cpids+=($!)
			done
			for k in 0 1; do
				wait "${cpids[$k]}"
				rc=$?
				v=$(parse send_bw "$size" "$raw/$tag.$k.client.txt")
				if clock_failed "$raw/$tag.$k.client.txt"; then
					why="perftest could not calibrate the TSC in $attempts tries (r^2 < 0.9)"
				elif [ "$rc" = 124 ]; then
					why="client $k timed out after ${cmd_timeout}s ($rel/$tag.$k.client.txt)"
					timed_out=1
				elif [ "$rc" != 0 ] || ! positive "$v"; then
					why="client $k: exit $rc: $(last_line "$raw/$tag.$k.client.txt") ($rel/$tag.$k.client.txt)"
				else
					total=$(awk -v a="$total" -v b="$v" 'BEGIN { printf "%.2f", a + b }')
				fi
			done
			profile_stop "$raw/$tag.profile.txt"
		fi
		for k in "${spids[@]}"; do stop "$k"; done
		case $why in *calibrate*) continue ;; esac
		break
	done
	if [ -n "$why" ]; then
		record "$dev" "$test" "$size" "$qps" "" MiB/s FAILED "$why"
	else
		record "$dev" "$test" "$size" "$qps" "$total" MiB/s ok \
			"$rel/$tag.0.client.txt + $rel/$tag.1.client.txt (vectors: $comp_vectors)"
	fi
}

memcpy_limit() {
	local id=$1 size=$2 tag=$3 rc value mib=$(($2 >> 20)) secs=2
	[ "$quick" = 1 ] || secs=5
	timeout 120 "$BENCH_PROGS/memcpy_bw" $mib $secs > "$raw/$tag.txt" 2>&1
	rc=$?
	value=$(sed -n 's/.*: \([0-9.]*\) MiB\/s$/\1/p' "$raw/$tag.txt")
	if [ "$rc" != 0 ] || [ -z "$value" ]; then
		record limit memcpy "$size" 1 "" MiB/s FAILED "exit $rc: $(last_line "$raw/$tag.txt") ($rel/$tag.txt)"
	else
		record limit memcpy "$size" 1 "$value" MiB/s ok "$rel/$tag.txt"
	fi
}

# iperf3 client side (VM b): the receiver's goodput in MiB/s, recorded for
# DEVICE (limit: over eth0; iblan: over iblan0).
iperf_client() {
	local test=$1 port=$2 tag=$3 dev=${4:-limit} rc value extra=() to=$server_ip
	[ "$test" = iperf3_tcp ] || extra=(-u -b 0)
	case $dev in iblan*) to=10.1.0.1 ;; esac
	timeout 60 "${client_ns[@]}" iperf3 -c "$to" -p "$port" -t "$iperf_secs" -J "${extra[@]}" > "$raw/$tag.client.json" 2>&1
	rc=$?
	value=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8 / 2**20))' "$raw/$tag.client.json" 2>/dev/null)
	if [ "$rc" != 0 ] || [ -z "$value" ]; then
		record "$dev" "$test" 0 1 "" MiB/s FAILED "exit $rc: $(last_line "$raw/$tag.client.json") ($rel/$tag.client.json)"
	else
		record "$dev" "$test" 0 1 "$value" MiB/s ok "$rel/$tag.client.json"
	fi
}

# Fastwire: iperf3's server here, its client in "far" (over the veth, or
# with DEVICE iblan over the LAN ports of srnic0 and srnic1).
fastwire_iperf() {
	local id=$1 dev=$2 test=$3 tag=$4 port=$((18000 + $1)) spid
	timeout 120 stdbuf -oL iperf3 -s -1 -p "$port" > "$raw/$tag.server.txt" 2>&1 &
	spid=$!
	if ! wait_listen "$port" "$spid"; then
		stop "$spid"
		record "$dev" "$test" 0 1 "" MiB/s FAILED \
			"the server never listened: $(last_line "$raw/$tag.server.txt") ($rel/$tag.server.txt)"
		return
	fi
	profile_start "$test"
	iperf_client "$test" "$port" "$tag" "$dev"
	profile_stop "$raw/$tag.profile.txt"
	reap "$spid"
}

# Wire: VM a serves, VM b measures; they meet at files named after the ID
# and the attempt: b ends each attempt with ID.retry.N (the clock did not
# calibrate, see clock_failed) or ID.done.N.
wire_measure() {
	local id=$1 dev=$2 test=$3 size=$4 qps=$5 tag=$6 port bin spid rc got att
	for att in $(seq "$attempts"); do
		local ready=$shared/$id.ready.$att noserver=$shared/$id.noserver.$att
		local done=$shared/$id.done.$att retry=$shared/$id.retry.$att
		port=$((18000 + id + (att - 1) * 20000)) spid=
		case $SRNIC_VM in
		a)
			case $test in
			memcpy) ;;
			iperf3_*)
				timeout 120 stdbuf -oL iperf3 -s -1 -p "$port" > "$raw/$tag.server.txt" 2>&1 &
				spid=$!
				;;
			*)
				bin=$(perftest_bin "$test")
				perftest_args "$test" "$size" "$qps" "$port"
				timeout "$cmd_timeout" "${bench_nice[@]}" stdbuf -oL "$bin" "${args[@]}" > "$raw/$tag.server.txt" 2>&1 &
				spid=$!
				;;
			esac
			if [ -n "$spid" ] && ! wait_listen "$port" "$spid"; then
				last_line "$raw/$tag.server.txt" > "$noserver"
			else
				touch "$ready"
				profile_start "$test"
			fi
			got=$(await $((cmd_timeout + 60)) "$done" "$retry") || log "$id: b never finished"
			profile_stop "$raw/$tag.profile.txt"
			[ -z "$spid" ] || reap "$spid"
			[ "$got" = "$retry" ] || return 0
			cp "$raw/$tag.server.txt" "$raw/$tag.server.try$att.txt"
			;;
		b)
			if [ "$test" = memcpy ]; then
				memcpy_limit "$id" "$size" "$tag"
			elif ! got=$(await 90 "$ready" "$noserver"); then
				record "$dev" "$test" "$size" "$qps" "" "" FAILED "VM a's server did not start within 90 s"
			elif [ "$got" = "$noserver" ]; then
				record "$dev" "$test" "$size" "$qps" "" "" FAILED \
					"the server on VM a never listened: $(cat "$noserver") (a/raw/$tag.server.txt)"
			elif [ "$dev" = limit ] || [ "$dev" = iblan ] || [ "$dev" = iblan_cm ]; then
				profile_start "$test"
				iperf_client "$test" "$port" "$tag" "$dev"
				profile_stop "$raw/$tag.profile.txt"
			else
				bin=$(perftest_bin "$test")
				perftest_args "$test" "$size" "$qps" "$port"
				profile_start "$test"
				run_client "$raw/$tag.client.txt" \
					timeout "$cmd_timeout" "${bench_nice[@]}" stdbuf -oL "$bin" "${args[@]}" "$server_ip"
				rc=$?
				profile_stop "$raw/$tag.profile.txt"
				tries=$att
				if try_again "$raw/$tag.client.txt" && [ "$att" -lt "$attempts" ]; then
					cp "$raw/$tag.client.txt" "$raw/$tag.client.try$att.txt"
					touch "$retry"
					continue
				fi
				judge "$dev" "$test" "$size" "$qps" "$rc" "$raw/$tag.client.txt"
			fi
			count_timeout "$dev"
			touch "$done"
			return 0
			;;
		esac
	done
}

# A device that hangs costs a whole timeout per measurement: after
# $max_timeouts timeouts in a row, the rest of its plan in this session is
# recorded as not run (the VMs agree through $shared/DEVICE.given-up).
max_timeouts=3
timeouts_in_row=0

# count_timeout DEVICE: after a measurement, on the recording VM (on the
# wire before it lets VM a go on).
count_timeout() {
	[ "$recorder" = 1 ] && [ "$1" != limit ] || return 0
	if [ "$timed_out" = 1 ]; then
		timeouts_in_row=$((timeouts_in_row + 1))
		[ "$timeouts_in_row" -lt "$max_timeouts" ] ||
			echo "$1 timed out $max_timeouts times in a row before this" > "$shared/$1.given-up"
	else
		timeouts_in_row=0
	fi
}

measure() {
	local id=$1 dev=$2 test=$3 size=$4 qps=$5 tag
	tag=$(printf '%03d-%s-%s-%s-q%s' "$id" "$dev" "$test" "$size" "$qps")
	if [ -e "$shared/$dev.given-up" ]; then
		record "$dev" "$test" "$size" "$qps" "" "" FAILED "not run: $(cat "$shared/$dev.given-up")"
		return
	fi
	if [ "$test" = atomic_bw ] && [ "$atomic_cap" = ATOMIC_NONE ]; then
		# Keep the two VMs in step; nothing to run.
		[ "$mode" = loopback ] || [ "$SRNIC_VM" = a ] || touch "$shared/$id.done.1"
		record "$dev" "$test" "$size" "$qps" "" MiB/s unsupported "$ibdev has atomic_cap ATOMIC_NONE"
		return
	fi
	timed_out=0 tries=1
	if [ "$mode" = wire ]; then
		wire_measure "$id" "$dev" "$test" "$size" "$qps" "$tag"
	elif [ "$test" = memcpy ]; then
		memcpy_limit "$id" "$size" "$tag"
	elif [[ $test = iperf3_* ]]; then
		fastwire_iperf "$id" "$dev" "$test" "$tag"
	elif [ "$test" = send_bw_2proc ]; then
		loopback_2proc "$id" "$dev" "$test" "$size" "$qps" "$tag"
	else
		loopback_perftest "$id" "$dev" "$test" "$size" "$qps" "$tag"
	fi
	# srnic's port counters after each of its measurements, on each VM.
	[[ $dev != srnic* ]] || rdma statistic show link "$ibdev/1" > "$raw/$tag.counters.$SRNIC_VM.txt" 2>&1
	# And the fast wire's client device, in "far".
	[[ $dev != srnic* ]] || [ -z "$client_ibdev" ] ||
		ip netns exec far rdma statistic show link "$client_ibdev/1" > "$raw/$tag.counters.far.txt" 2>&1
	[ "$mode" = wire ] || count_timeout "$dev"
}

# --- the plan ------------------------------------------------------------

current= device_error=
if [ "$mode" = fastwire ]; then
	fastwire_setup > "$raw/fastwire-setup.txt" 2>&1 ||
		log "the veth pair failed: $(last_line "$raw/fastwire-setup.txt")"
fi
# The plan comes in on fd 3, so that no command of a measurement reads it.
while read -r -u 3 id dev test size qps; do
	[ -n "$id" ] || continue
	case $id in \#*) continue ;; esac
	if [ "$dev" != "$current" ]; then
		if [ -n "$current" ] && [ "$current" != limit ]; then
			teardown_device "$current" >> "$raw/teardown-$current.$SRNIC_VM.txt" 2>&1
		fi
		current=$dev device_error= timeouts_in_row=0
		if [ "$dev" != limit ]; then
			log "setting up $dev"
			setup_device "$dev" > "$raw/setup-$dev.$SRNIC_VM.txt" 2>&1 ||
				device_error="setting up $dev failed: $(last_line "$raw/setup-$dev.$SRNIC_VM.txt")"
			if [ "$mode" = wire ]; then
				echo "${device_error:-ok}" > "$shared/setup.$dev.$SRNIC_VM"
				peer=$([ "$SRNIC_VM" = a ] && echo b || echo a)
				if ! await 180 "$shared/setup.$dev.$peer" > /dev/null; then
					device_error=${device_error:-"VM $peer did not set up $dev within 180 s"}
				elif [ "$(cat "$shared/setup.$dev.$peer")" != ok ]; then
					device_error=${device_error:-"VM $peer: $(cat "$shared/setup.$dev.$peer")"}
				fi
			fi
			[ -z "$device_error" ] || log "$device_error"
		fi
	fi
	if [ -n "$device_error" ]; then
		record "$dev" "$test" "$size" "$qps" "" "" FAILED "$device_error ($rel/setup-$dev.$SRNIC_VM.txt)"
		continue
	fi
	log "$id: $dev $test size $size qps $qps"
	measure "$id" "$dev" "$test" "$size" "$qps"
done 3< "$job/plan"
if [ -n "$current" ] && [ "$current" != limit ]; then
	teardown_device "$current" >> "$raw/teardown-$current.$SRNIC_VM.txt" 2>&1
fi
dmesg > "$raw/dmesg.$SRNIC_VM.txt"
log "plan done"
exit 0
