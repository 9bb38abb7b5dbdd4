# The RC transport between QPs of one srnic device (loopback, no wire):
# every opcode with its data checked and every error path (verbs_user rc),
# one 256 MiB READ with a WRITE behind it and a READ too long for the PSN
# space at a 256-byte MTU refused (verbs_user bigread), regions
# paged on demand across munmap/mmap, fork and an unmapped range
# (verbs_user odp),
# the port counters moving, ibv_rc_pingpong with sizes below, at and far above the path MTU, with
# and without CQ events, validating the data (--chk); perftest's write,
# read, send and atomic bandwidth and write/send latency.
# cpus: 2
# timeout: 1200
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1

step "verbs_user memory (re-registration and windows, as an unprivileged user)"
# What rdma-core's udev rule gives every user.
must chmod 666 /dev/infiniband/uverbs*
must timeout 120 "$SRNIC_TOP/out/progs/verbs_user" srnic0 memory

step "verbs_user rc"
sent_before=$(counter_of srnic0 sent_packets)
[ -n "$sent_before" ] || fail "rdma statistic shows no sent_packets counter for srnic0/1"
must timeout 300 "$SRNIC_TOP/out/progs/verbs_user" srnic0 rc
rdma statistic show link srnic0/1
for name in sent_packets received_packets rnr_naks_sent rnr_naks_received access_naks_sent \
	access_naks_received invalid_request_naks_sent rnr_retry_exceeded resends; do
	value=$(counter_of srnic0 $name)
	[ -n "$value" ] && [ "$value" -gt 0 ] ||
		fail "counter $name is '$value' after the rc checks; expected it to have counted"
done

# One READ of 256 MiB: handed over a bounded number of 64 KiB pieces per
# run (no run, RCU read section or softirq copies all of it), the rest from
# the responder's own work; a WRITE posted behind it completes after it.
step "verbs_user bigread"
# The long READ's peer: eth0's link-local address with its last byte
# XORed with 0x5a (as verbs_user makes it from the GID), a permanent
# neighbour that nothing answers for.
link_local=$(ip -6 addr show dev eth0 scope link | awk '/inet6/ { sub("/.*", "", $2); print $2; exit }')
peer=$(python3 -S -c 'import ipaddress, sys
a = bytearray(ipaddress.IPv6Address(sys.argv[1]).packed)
a[15] ^= 0x5a
print(ipaddress.IPv6Address(bytes(a)))' "$link_local")
must ip -6 neigh replace "$peer" lladdr 52:54:00:00:00:99 dev eth0 nud permanent
must timeout 300 "$SRNIC_TOP/out/progs/verbs_user" srnic0 bigread

# Memory paged on demand: a WRITE lands in the pages mapped at the time,
# never in pages the process gave up; after fork the parent's WRITE lands
# in the parent's copy; a range with nothing mapped is an access error,
# not an endless wait. Pages are faulted in by the QP's work.
step "verbs_user odp"
faults_before=$(counter_of srnic0 odp_faults) errors_before=$(counter_of srnic0 odp_fault_errors)
must timeout 120 "$SRNIC_TOP/out/progs/verbs_user" srnic0 odp
faults=$(( $(counter_of srnic0 odp_faults) - faults_before ))
errors=$(( $(counter_of srnic0 odp_fault_errors) - errors_before ))
echo "verbs_user odp: odp_faults $faults, odp_fault_errors $errors"
[ "$faults" -ge 5 ] || fail "odp_faults counted $faults; expected at least one fault per WRITE to fresh pages (5)"
[ "$errors" -ge 1 ] || fail "odp_fault_errors counted $errors; expected the unmapped range's failed fault"

port=18600
# pingpong SIZE ITERATIONS [EXTRA...]: a checked loopback_pingpong that
# must count every iteration.
pingpong() {
	size=$1 iters=$2
	shift 2
	step "ibv_rc_pingpong -s $size -n $iters $*"
	loopback_pingpong -s "$size" -n "$iters" -c "$@"
	cat /tmp/pair_client.out
	expect_match "$(cat /tmp/pair_client.out)" "$iters iters in" "the client counted $iters iterations"
}

pingpong 1 100
pingpong 4096 100
pingpong 4097 50 -e
pingpong 65536 50
# Between QPs of one device a packet carries up to 64 KiB whatever the
# path MTU (1024 here): 10 round trips of 1 MiB are 20 MiB, which would be
# 20480 packets of the path MTU and are 320 of 64 KiB (plus ACKs).
sent_before=$(counter_of srnic0 sent_packets)
pingpong 1048576 10 -e
sent=$(( $(counter_of srnic0 sent_packets) - sent_before ))
[ "$sent" -lt 2000 ] ||
	fail "20 MiB in loopback took $sent packets; expected 64 KiB packets (about 360), not path-MTU ones"

# perftest NAME ARGS...: loopback_perftest as a step of its own.
perftest() {
	step "$*"
	loopback_perftest "$@"
	cat /tmp/pair_client.out
}

perftest ib_write_bw -s 65536 -n 200
perftest ib_write_bw -s 100 -n 200
perftest ib_read_bw -s 65536 -n 200
perftest ib_read_bw -s 1000000 -n 20
perftest ib_send_bw -s 65536 -n 200
perftest ib_send_bw -s 8192 -n 200 -e
perftest ib_atomic_bw -n 200
perftest ib_atomic_bw -A CMP_AND_SWAP -n 200
perftest ib_write_lat -s 64 -n 200
perftest ib_send_lat -s 10000 -n 100

must rdma link delete srnic0
unload_srnic
