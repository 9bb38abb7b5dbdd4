# Helpers for test scripts, sourced inside a test VM before the script.
# A script fails by exiting non-zero; `fail` says why in one line that the
# runner reports.

srnic_ko=$SRNIC_TOP/srnic.ko

fail() {
	echo "FAIL: $*"
	exit 1
}

step() {
	echo "--- $*"
}

# must CMD...: run CMD, failing the test with its output if it fails.
must() {
	out=$("$@" 2>&1) || fail "'$*' failed: $out"
	[ -z "$out" ] || echo "$out"
}

# must_fail PATTERN CMD...: CMD must fail with an error matching PATTERN.
must_fail() {
	pattern=$1
	shift
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded but should have failed ($pattern): $out"
	fi
	echo "$out" | grep -Eq -- "$pattern" ||
		fail "'$*' failed, but not with '$pattern': $out"
	echo "expected failure: $*: $out"
}

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
	[ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
	echo "ok: $3 = $1"
}

# expect_match TEXT PATTERN WHAT: TEXT must contain a line matching PATTERN.
expect_match() {
	echo "$1" | grep -Eq -- "$2" || fail "$3: no line matches '$2' in: $1"
	echo "ok: $3"
}

# expect_no_match TEXT PATTERN WHAT
expect_no_match() {
	! echo "$1" | grep -Eq -- "$2" || fail "$3: unexpected line matching '$2' in: $1"
	echo "ok: $3"
}

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_until() {
	deadline=$(($(date +%s) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.2
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

# The RDMA devices the core knows, one name per line.
rdma_devices() {
	rdma -j dev show | python3 -c 'import json,sys; [print(d["ifname"]) for d in json.load(sys.stdin)]'
}

# link_field DEV FIELD: a field of `rdma link show DEV/1` (state, physical_state, netdev).
link_field() {
	rdma -j link show "$1/1" | python3 -c "import json,sys; print(json.load(sys.stdin)[0].get('$2', ''))"
}

# barrier NAME COUNT: wait until COUNT VMs of this test reached NAME.
barrier() {
	touch "/mnt/shared/$1.$SRNIC_VM"
	wait_until 120 sh -c "[ \$(ls /mnt/shared/ | grep -c '^$1\\.') -ge $2 ]" ||
		fail "barrier $1: peers did not arrive within 120 s"
}

# veth_pair NAME PEER: a veth pair with both ends up. NAME's carrier follows
# PEER's admin state, which makes carrier changes testable.
veth_pair() {
	must ip link add "$1" type veth peer name "$2"
	must ip link set "$1" up
	must ip link set "$2" up
}
