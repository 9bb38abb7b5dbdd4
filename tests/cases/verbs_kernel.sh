# Kernel consumers of srnic: ib_mad sets up QP1 on every device without
# complaint, and the in-kernel verbs test (tests/kernel/verbs_test.rs)
# checks post argument errors with bad_wr, the ERR flush of N sends and
# M receives in order and exactly once, WRs posted in ERR, ib_drain_qp,
# the completion events of kernel CQs, and RDMA FLUSH and ATOMIC WRITE
# from a kernel consumer.
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
verbs_test_module
must rmmod srnic_verbs_test
must rdma link delete srnic0
unload_srnic
