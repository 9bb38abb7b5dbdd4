# Verbs objects from user space through the stock librxe: limits and their
# errnos, the ERR flush of N sends and M receives (RC, UD, and a QP on an
# SRQ), posts and polls racing the move to ERR on two CPUs, and what
# `rdma resource show` lists.
# cpus: 2
# timeout: 600
prog=$SRNIC_TOP/out/progs/verbs_user
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 0
step "limits"
must timeout 300 "$prog" srnic0 limits
step "flush"
must timeout 120 "$prog" srnic0 flush
step "race"
must timeout 120 "$prog" srnic0 race
step "rdma resource show"
"$prog" srnic0 hold > /tmp/hold.out 2>&1 &
holder=$!
wait_until 60 grep -q ready /tmp/hold.out || fail "holder did not start: $(cat /tmp/hold.out)"
for kind in pd cq qp mr srq; do
	out=$(rdma res show $kind)
	printf '%s\n' "$out"
	expect_match "$out" "srnic0.*comm verbs_user|dev srnic0 .*comm verbs_user" "rdma res show $kind lists the process's $kind"
done
qps=$(rdma res show qp link srnic0)
expect_match "$qps" 'type RC state RTS .*sq-psn 0 .*comm verbs_user' "the RC QP with its state and PSNs"
expect_match "$qps" 'type UD state RTS .*comm verbs_user' "the UD QP with its state"
kill $holder
wait $holder 2>/dev/null
wait_until 30 sh -c '! rdma res show qp | grep -q verbs_user' || fail "QPs left after the process exited"
must rdma link delete srnic0
unload_srnic
