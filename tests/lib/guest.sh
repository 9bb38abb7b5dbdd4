# Helpers for test scripts, sourced inside a test VM before the script.
# A script fails by exiting non-zero; `fail` says why in one line that the
# runner reports.

srnic_ko=$SRNIC_TOP/srnic.ko

fail() {
	printf 'FAIL: %s\n' "$*"
	exit 1
}

step() {
	local up
	read -r up _ < /proc/uptime
	echo "--- [${up%.*} s] $*"
}

# must CMD...: run CMD, failing the test with its output if it fails.
must() {
	_out=$("$@" 2>&1) || fail "'$*' failed: $_out"
	[ -z "$_out" ] || printf '%s\n' "$_out"
}

# must_fail PATTERN CMD...: CMD must fail with an error matching PATTERN.
must_fail() {
	pattern=$1
	shift
	if _out=$("$@" 2>&1); then
		fail "'$*' succeeded but should have failed ($pattern): $_out"
	fi
	printf '%s\n' "$_out" | grep -Eq -- "$pattern" ||
		fail "'$*' failed, but not with '$pattern': $_out"
	printf 'expected failure: %s: %s\n' "$*" "$_out"
}

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
	[ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
	echo "ok: $3 = $1"
}

# expect_match TEXT PATTERN WHAT: TEXT must contain a line matching PATTERN.
expect_match() {
	printf '%s\n' "$1" | grep -Eq -- "$2" || fail "$3: no line matches '$2' in: $1"
	echo "ok: $3"
}

# Starting a process costs a quarter of a second or more in the test VM
# (TCG, debug kernel), so the polling helpers below use shell builtins
# and nap without starting one.

# uptime_s: whole seconds since boot.
uptime_s() {
	read -r _up _ < /proc/uptime
	echo "${_up%.*}"
}

# listening PORT: whether a TCP socket listens on PORT (a test server's
# out-of-band exchange is up, so its client may connect).
listening() {
	_hex=$(printf ':%04X' "$1")
	for _table in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$_table" ] || continue
		while read -r _ _local _ _state _; do
			case "$_local" in
			*"$_hex") [ "$_state" = 0A ] && return 0 ;;
			esac
		done < "$_table"
	done
	return 1
}

# listening_cm PORT: whether an rdma_cm ID listens on PORT (an rping or
# the like is ready for its client).
listening_cm() {
	_ids=$(rdma res show cm_id) || return 1
	while IFS= read -r _id; do
		case "$_id" in
		*LISTEN*)
			case "$_id" in
			*"src-addr-port $1"* | *":$1 "*) return 0 ;;
			esac
			;;
		esac
	done <<IDS
$_ids
IDS
	return 1
}

# nap: sleep 0.2 s without starting a process. A script's napper
# (tests/progs/napper.c) answers each byte on fd 8 with a newline on fd 9
# 0.2 s later: a VM that polls at a barrier then idles instead of
# starting a sleep five times a second on the host cores the other VMs
# work on. Without a napper (fds closed, or it is gone: the read ends
# with EOF) a nap is a busybox sleep.
nap() {
	{ echo >&8 && read -r _ <&9; } 2>/dev/null || {
		exec 8>&- 9<&-
		busybox sleep 0.2
	}
}

# Start this script's napper, in a subshell so that it is not one of the
# script's jobs (a bare `wait` would wait for it for good). ASK is opened
# read-write: with a reader of its own the script's write never raises
# SIGPIPE, and should napper be gone the read of DONE ends with EOF and
# the nap falls back. Its output goes nowhere: guest-init waits for the
# end of the script's.
if [ -x "$SRNIC_TOP/out/progs/napper" ] && busybox mkfifo /run/nap.ask /run/nap.done 2>/dev/null; then
	("$SRNIC_TOP/out/progs/napper" /run/nap.ask /run/nap.done < /dev/null > /dev/null 2>&1 &)
	exec 8<> /run/nap.ask 9< /run/nap.done
fi

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_until() {
	read -r _up _ < /proc/uptime
	_deadline=$((${_up%.*} + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		read -r _up _ < /proc/uptime
		[ "${_up%.*}" -lt "$_deadline" ] || return 1
		nap
	done
}

load_srnic() {
	deps=$(modinfo -F depends "$srnic_ko" | tr , ' ')
	[ -z "$deps" ] || must modprobe -a $deps
	must insmod "$srnic_ko"
}

unload_srnic() {
	must rmmod srnic
	[ ! -e /sys/module/srnic ] || fail "srnic still loaded after rmmod"
}

# json_field JSON KEY: the value of the first "KEY": in JSON (iproute2's
# compact output), without quotes; fails if there is none. With shell
# builtins: a python3 that parsed it took 2 to 4 s to start in the VM.
json_field() {
	case "$1" in *"\"$2\":"*) ;; *) return 1 ;; esac
	_value=${1#*\"$2\":}
	case "$_value" in
	\"*) _value=${_value#\"}; _value=${_value%%\"*} ;;
	*) _value=${_value%%[],\}]*} ;;
	esac
	printf '%s\n' "$_value"
}

# The RDMA devices the core knows, one name per line. If the question cannot
# be answered the output says so, so that no "device absent" check passes.
rdma_devices() {
	_json=$(rdma -j dev show) || { echo "<rdma dev show failed>"; return; }
	case "$_json" in
	\[*\]) ;;
	*) echo "<rdma dev show failed>"; return ;;
	esac
	while json_field "$_json" ifname; do
		_json=${_json#*\"ifname\":}
	done
}

# device_absent NAME: the core answers and has no device NAME.
device_absent() {
	_devices=$(rdma_devices)
	case "$_devices" in *"<rdma dev show failed>"*) return 1 ;; esac
	! printf '%s\n' "$_devices" | grep -qx "$1"
}

# start_asyncwatch DEV FILE: run ibv_asyncwatch on DEV in the background,
# output in FILE, and wait until it listens. Sets $watcher to its pid.
start_asyncwatch() {
	ibv_asyncwatch -d "$1" > "$2" 2>&1 &
	watcher=$!
	wait_until 20 grep -q 'async event FD' "$2" || fail "ibv_asyncwatch on $1 did not start: $(cat "$2")"
}

# link_field DEV FIELD: a field of `rdma link show DEV/1` (state, physical_state, netdev).
# Empty if the port has no such field; fails if rdma does.
link_field() {
	_json=$(rdma -j link show "$1/1") || return 1
	json_field "$_json" "$2" || echo
}

# arrived NAME COUNT: whether COUNT VMs of this test reached barrier NAME.
arrived() {
	set -- "$2" /mnt/shared/"$1".?
	[ -e "$2" ] || return 1
	[ $(($# - 1)) -ge "$1" ]
}

# barrier NAME COUNT [SECONDS]: wait until COUNT VMs of this test reached
# NAME (at most SECONDS, default 120).
barrier() {
	: > "/mnt/shared/$1.$SRNIC_VM"
	wait_until "${3:-120}" arrived "$1" "$2" ||
		fail "barrier $1: peers did not arrive within ${3:-120} s"
}

# veth_pair NAME PEER: a veth pair with both ends up. NAME's carrier follows
# PEER's admin state, which makes carrier changes testable.
veth_pair() {
	must ip link add "$1" type veth peer name "$2"
	must ip link set "$1" up
	must ip link set "$2" up
}

# verbs_test_module: loads the in-kernel verbs test (tests/kernel), which
# runs at load and reports in KTAP; checks the report (header, no failed
# point, the plan counting every point) and prints it. The KTAP lines are
# left in $ktap for further checks; the module stays loaded.
verbs_test_module() {
	local out status points plan
	dmesg -C
	out=$(insmod "$SRNIC_TOP/srnic_verbs_test.ko" 2>&1)
	status=$?
	ktap=$(dmesg | sed -n 's/^.*srnic_verbs_test: //p')
	printf '%s\n' "$ktap"
	[ "$status" -eq 0 ] ||
		fail "srnic_verbs_test failed ($out): $(printf '%s\n' "$ktap" | grep '^not ok')"
	expect_eq "$(printf '%s\n' "$ktap" | head -n1)" "KTAP version 1" "the report starts with the KTAP header"
	points=$(printf '%s\n' "$ktap" | grep -c '^ok [0-9]')
	plan=$(printf '%s\n' "$ktap" | sed -n 's/^1\.\.\([0-9]*\)$/\1/p')
	expect_eq "$plan" "$points" "the KTAP plan counts every test point"
	! printf '%s\n' "$ktap" | grep -q '^not ok' || fail "a KTAP test point failed"
	[ "$points" -ge 20 ] || fail "only $points KTAP test points; expected the full run"
	echo "ok: $points in-kernel checks passed"
}

# wait_roce_gid DEV INDEX: wait until GID INDEX of DEV is a RoCEv2 GID. The
# core fills the table from the netdev's addresses: on eth0, GID 0 is the
# IPv6 link-local address and GID 1 the IPv4 address.
wait_roce_gid() {
	wait_until 60 grep -q 'RoCE v2' "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$2" ||
		fail "$1 has no RoCEv2 GID at index $2"
}

# gid_text ADDRESS: IPv4 or IPv6 ADDRESS as the kernel writes a GID in
# sysfs (an IPv4 address mapped into IPv6; eight groups of four
# lower-case hex digits). Builtins only, as for json_field.
gid_text() {
	case "$1" in
	*:*)
		_head=${1%%::*} _tail=
		case "$1" in *::*) _tail=${1#*::} ;; esac
		_old_ifs=$IFS
		IFS=:
		# Unquoted on purpose: split into the groups.
		set -- $_head -- $_tail
		IFS=$_old_ifs
		# The groups in order, "--" standing for the zeros that "::" left
		# out: as many as make eight. One printf, no subshell per group.
		_zeros=$((9 - $#))
		for _g; do
			shift
			if [ "$_g" = -- ]; then
				while [ "$_zeros" -gt 0 ]; do set -- "$@" 0x0; _zeros=$((_zeros - 1)); done
			else
				set -- "$@" "0x$_g"
			fi
		done
		printf '%04x:%04x:%04x:%04x:%04x:%04x:%04x:%04x\n' "$@"
		;;
	*)
		_old_ifs=$IFS
		IFS=.
		set -- $1
		IFS=$_old_ifs
		printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$1" "$2" "$3" "$4"
		;;
	esac
}

# find_gid DEV ADDRESS: the index of ADDRESS (IPv4 or IPv6) among DEV's
# RoCEv2 GIDs; fails if it is not there.
find_gid() {
	_wanted=$(gid_text "$2")
	_gid_dir=/sys/class/infiniband/$1/ports/1
	_index=0
	while [ -e "$_gid_dir/gids/$_index" ]; do
		if read -r _gid 2>/dev/null < "$_gid_dir/gids/$_index" && [ "$_gid" = "$_wanted" ] &&
			read -r _kind 2>/dev/null < "$_gid_dir/gid_attrs/types/$_index" &&
			[ "$_kind" = "RoCE v2" ]; then
			echo "$_index"
			return 0
		fi
		_index=$((_index + 1))
	done
	return 1
}

# gid_index DEV ADDRESS: wait until ADDRESS is a RoCEv2 GID of DEV and
# print its index.
gid_index() {
	wait_until 60 find_gid "$1" "$2" || fail "$1 has no RoCEv2 GID for $2"
	find_gid "$1" "$2"
}

# counter_of DEV NAME: a port counter of `rdma statistic show link DEV/1`.
counter_of() {
	rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v n="$2" 'f { print; exit } $0 == n { f = 1 }'
}

# loopback_pingpong ARGS...: ibv_rc_pingpong on srnic0 (RoCEv2 GID 1) as
# server and client (see `pair`), on the port after $port.
loopback_pingpong() {
	port=$((port + 1))
	pair ibv_rc_pingpong -d srnic0 -g 1 -p $port "$@"
}

# loopback_perftest NAME ARGS...: perftest's NAME on srnic0 as server and
# client (see `pair`), on the port after $port.
loopback_perftest() {
	_name=$1
	shift
	port=$((port + 1))
	pair "$_name" -d srnic0 -x 1 -p $port -F "$@"
}

# pair CMD ARGS...: a loopback run of a client/server tool (ibv_*_pingpong,
# perftest): CMD ARGS as the server, then, once it listens on the port of
# ARGS' `-p PORT`, CMD ARGS localhost as the client. Both must succeed
# within 300 s; their output is in /tmp/pair_server.out and
# /tmp/pair_client.out.
pair() {
	_port=
	_prev=
	for _arg in "$@"; do
		[ "$_prev" != "-p" ] || _port=$_arg
		_prev=$_arg
	done
	[ -n "$_port" ] || fail "pair $*: no -p PORT"
	timeout 300 "$@" > /tmp/pair_server.out 2>&1 &
	_server=$!
	wait_until 60 listening "$_port" || { cat /tmp/pair_server.out; fail "$1 server never listened"; }
	timeout 300 "$@" localhost > /tmp/pair_client.out 2>&1 ||
		{ cat /tmp/pair_client.out /tmp/pair_server.out; fail "$*: the client failed"; }
	wait "$_server" || { cat /tmp/pair_server.out; fail "$*: the server failed"; }
}
