# rdma-core's own test suite (Debian's python3-pyverbs ships it), against
# srnic0 in VM a and against the kernel's rxe0 in VM b, a fresh VM of the
# same kernel. Both tallies are printed per test file; the verdict is that
# every test that passes on rxe also passes on srnic, except those listed in
# tests/lib/pyverbs_excluded.txt with their reason, and that srnic passes
# the resize-CQ test rxe fails. The suite is adapted to find a soft
# device's netdev (tests/lib/pyverbs_netdev.py), so that its rdma_cm tests
# run instead of skipping. The 8 on-demand paging tests srnic can run
# (rxe of 6.12 has no ODP) must pass on srnic.
# vms: 2
# timeout: 2400
suite=/usr/share/doc/rdma-core/tests
[ -f "$suite/run_tests.py" ] || fail "rdma-core's test suite is not installed ($suite; package python3-pyverbs)"
case $SRNIC_VM in
a) dev=srnic0; load_srnic; must rdma link add srnic0 type srnic netdev eth0 ;;
b) dev=rxe0; must modprobe rdma_rxe; must rdma link add rxe0 type rxe netdev eth0 ;;
esac
# The suite runs over GID 1, the port's RoCEv2 GID of the IPv4 address
# on both devices.
wait_roce_gid "$dev" 1
rm -rf /tmp/rdma-tests && mkdir -p /tmp/rdma-tests && cp -r "$suite" /tmp/rdma-tests/ &&
	gunzip -f /tmp/rdma-tests/tests/*.gz || fail "cannot unpack the suite"
cd /tmp/rdma-tests || fail "no /tmp/rdma-tests"
# The suite finds a netdev only through the device's PCI function, which
# soft devices lack: without our adaptation its rdma_cm tests skip on rxe
# and srnic alike.
python3 "$SRNIC_TOP/tests/lib/pyverbs_netdev.py" tests/base.py || fail "cannot adapt the suite's netdev lookup"
# A test waits 10 s for completions that do not come: until the transport
# lands, most traffic tests on srnic would spend the run waiting. 3 s is
# still ages for a completion under TCG.
sed -i 's/^POLL_CQ_TIMEOUT = 10 /POLL_CQ_TIMEOUT = 3 /' tests/utils.py
grep -q '^POLL_CQ_TIMEOUT = 3 ' tests/utils.py || fail "cannot shorten the suite's poll timeout"
step "rdma-core tests on $dev"
# One run of the whole suite: python and pyverbs take seconds to start under
# TCG, too many to pay once per test file. A test that blocks for good ends
# the run at the time limit; the output then ends with its name.
: > /tmp/suite.out
timeout 1500 python3 tests/run_tests.py --dev "$dev" --gid 1 -v > /tmp/suite.out 2>&1
[ $? -ne 124 ] || fail "the suite did not finish in 1500 s on $dev; it was running: $(tail -n 3 /tmp/suite.out | tr '\n' ' ')"
grep -c ' \.\.\. ' /tmp/suite.out | sed "s/^/test verdict lines on $dev: /"
python3 "$SRNIC_TOP/tests/lib/pyverbs_tally.py" parse /tmp/suite.out > "/mnt/shared/$dev.verdicts" ||
	fail "cannot parse the suite's output"
cp /tmp/suite.out "/mnt/shared/$dev.out"
[ -s "/mnt/shared/$dev.verdicts" ] || fail "no test verdicts from $dev: $(tail -20 /tmp/suite.out)"
# The two suites take different times: wait for the other VM's verdicts.
touch "/mnt/shared/done.$SRNIC_VM"
wait_until 1500 arrived done 2 ||
	fail "the other VM did not finish its suite"
if [ "$SRNIC_VM" = a ]; then
	# The suite's on-demand paging tests that a device can run without XRC,
	# hugetlbfs (not in this kernel) or librxe's advise_mr (it has none):
	# all 8 pass. rxe of this kernel has no ODP and skips them.
	odp=0
	for t in test_odp_rc_traffic test_odp_rc_atomic_cmp_and_swp test_odp_rc_atomic_fetch_and_add \
		test_odp_rc_rdma_read test_odp_rc_rdma_write test_odp_rc_srq_traffic test_odp_ud_traffic \
		test_odp_implicit_rc_traffic; do
		grep -Eq "^$t \(.*\) \.\.\. ok\$" /tmp/suite.out ||
			fail "rdma-core's $t did not pass on srnic0: $(grep "^$t " /tmp/suite.out)"
		odp=$((odp + 1))
	done
	echo "on-demand paging: $odp of rdma-core's ODP tests passed on srnic0"
	python3 "$SRNIC_TOP/tests/lib/pyverbs_tally.py" compare /mnt/shared/srnic0.verdicts \
		/mnt/shared/rxe0.verdicts "$SRNIC_TOP/tests/lib/pyverbs_excluded.txt" ||
		fail "a counted test passes on rxe but not on srnic (see above)"
fi
case $SRNIC_VM in
a) must rdma link delete srnic0; unload_srnic ;;
b) must rdma link delete rxe0; must rmmod rdma_rxe ;;
esac
