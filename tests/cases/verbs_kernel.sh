# Kernel consumers of srnic: ib_mad sets up QP1 on every device without
# complaint, and the in-kernel verbs test (tests/kernel/verbs_test.rs)
# checks post argument errors with bad_wr, the ERR flush of N sends and
# M receives in order and exactly once, WRs posted in ERR, and ib_drain_qp.
# cpus: 1
# timeout: 300
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_until 30 sh -c "ibv_devinfo -d srnic0 | grep -q PORT_ACTIVE" || fail "srnic0 port not active"
# The core adds the port's GIDs as the netdev's addresses appear.
wait_roce_gid srnic0 0
expect_match "$(rdma res show qp)" 'srnic0/1 .*lqpn 1 .*type GSI' "ib_mad's QP1 exists on srnic0"
if dmesg | grep -q "Couldn't create ib_mad"; then
	fail "ib_mad could not set up srnic0: $(dmesg | grep ib_mad)"
fi
echo "ok: ib_mad set up srnic0 without errors"

step "in-kernel verbs test (KTAP)"
insmod_out=$(insmod "$SRNIC_TOP/srnic_verbs_test.ko" 2>&1)
insmod_status=$?
ktap=$(dmesg | sed -n 's/^.*srnic_verbs_test: //p')
printf '%s\n' "$ktap"
[ "$insmod_status" -eq 0 ] || fail "srnic_verbs_test failed ($insmod_out): $(printf '%s\n' "$ktap" | grep '^not ok')"
expect_eq "$(printf '%s\n' "$ktap" | head -n1)" "KTAP version 1" "the report starts with the KTAP header"
points=$(printf '%s\n' "$ktap" | grep -c '^ok [0-9]')
plan=$(printf '%s\n' "$ktap" | sed -n 's/^1\.\.\([0-9]*\)$/\1/p')
expect_eq "$plan" "$points" "the KTAP plan counts every test point"
[ "$points" -ge 20 ] || fail "only $points KTAP test points; expected the full run"
printf '%s\n' "$ktap" | grep -q '^not ok' && fail "a KTAP test point failed"
echo "ok: $points in-kernel checks passed"
must rmmod srnic_verbs_test
must rdma link delete srnic0
unload_srnic
