# Everything is released however a process or the device goes away: a
# process killed with every object type open, `rdma link delete` and netdev
# removal with user objects open (the process sees IBV_EVENT_DEVICE_FATAL
# and cleans up), then rmmod; kmemleak finds nothing.
# timeout: 400
prog=$SRNIC_TOP/out/progs/verbs_user
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
mountpoint -q /sys/kernel/debug || must mount -t debugfs none /sys/kernel/debug
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 0

step "process killed with objects open"
"$prog" srnic0 hold > /tmp/hold.out 2>&1 &
holder=$!
wait_until 60 grep -q ready /tmp/hold.out || fail "holder did not start: $(cat /tmp/hold.out)"
kill -9 $holder
wait $holder 2>/dev/null
wait_until 30 sh -c '! rdma res show | grep -q verbs_user' || fail "objects left: $(rdma res show)"
expect_match "$(rdma res show)" 'srnic0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 0 srq 0' "only ib_mad's objects remain"

step "rdma link delete with objects open"
"$prog" srnic0 watch > /tmp/watch.out 2>&1 &
watcher=$!
wait_until 60 grep -q ready /tmp/watch.out || fail "watcher did not start: $(cat /tmp/watch.out)"
must timeout 60 rdma link delete srnic0
wait_until 30 sh -c "! kill -0 $watcher 2>/dev/null" || fail "the process did not finish: $(cat /tmp/watch.out)"
wait $watcher || fail "the process failed: $(cat /tmp/watch.out)"
cat /tmp/watch.out
expect_match "$(cat /tmp/watch.out)" 'event: local catastrophic error' "the process is told the device is gone"

step "netdev removal with objects open"
veth_pair veth0 veth1
must rdma link add srnic_v type srnic netdev veth0
wait_roce_gid srnic_v 0
"$prog" srnic_v watch > /tmp/watch2.out 2>&1 &
watcher=$!
wait_until 60 grep -q ready /tmp/watch2.out || fail "watcher did not start: $(cat /tmp/watch2.out)"
must timeout 60 ip link del veth0
wait_until 30 device_absent srnic_v || fail "srnic_v still registered"
wait $watcher || fail "the process failed: $(cat /tmp/watch2.out)"
expect_match "$(cat /tmp/watch2.out)" 'event: local catastrophic error' "the process is told the device is gone"

step "rmmod and kmemleak"
unload_srnic
echo scan > /sys/kernel/debug/kmemleak
sleep 5
echo scan > /sys/kernel/debug/kmemleak
leaks=$(cat /sys/kernel/debug/kmemleak)
[ -z "$leaks" ] || fail "kmemleak reports: $leaks"
echo "ok: kmemleak reports nothing"
