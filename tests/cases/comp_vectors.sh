# Completion vectors are real IRQs: one srnic0-comp<N> line per vector in
# /proc/interrupts, spread one per CPU, moved by smp_affinity and by CPU
# hotplug (and back), their counts rising only on the CPU they are aimed
# at while perftest and ibv_rc_pingpong sleep on CQ events; the vector of
# each CQ in `rdma resource show cq`; per-vector counts in `rdma
# statistic`; the arming and moderation rules for kernel CQs
# (srnic_verbs_test events) and user CQs (verbs_user events); and, on
# these two vCPUs where time may be kept by jiffies, that the ICRC
# timing at load reads nonzero times.
# cpus: 2
# timeout: 900
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1

# irq_of VECTOR: the Linux IRQ number of srnic0-comp<VECTOR>.
irq_of() {
	awk -v n="srnic0-comp$1" '$NF == n { sub(":", "", $1); print $1 }' /proc/interrupts
}

# count_on VECTOR CPU: the vector's interrupts handled on CPU so far.
count_on() {
	awk -v n="srnic0-comp$1" -v c="$2" '$NF == n { print $(c + 2) }' /proc/interrupts
}

step "the ICRC timing at load reads real times"
# Two vCPUs under TCG: the kernel may mark the TSC unstable and keep time
# by jiffies, where a timing by the timekeeping clock read 0 ns for both.
icrc=$(dmesg | grep 'srnic: ICRC computed by' | tail -n 1)
echo "$icrc"
echo "$icrc" | grep -Eq '\([1-9][0-9]* ns for [0-9]+ bytes, [^)]* [1-9][0-9]* ns\)' ||
	fail "the ICRC line does not give both timings in nonzero ns: $icrc"

step "one vector per CPU in /proc/interrupts"
cat /proc/interrupts
expect_eq "$(grep -c 'srnic0-comp' /proc/interrupts)" 2 "srnic0-comp lines (2 CPUs)"
irq0=$(irq_of 0)
irq1=$(irq_of 1)
[ -n "$irq0" ] && [ -n "$irq1" ] || fail "no IRQ numbers for srnic0-comp0/1 in /proc/interrupts"
expect_eq "$(cat /proc/irq/$irq0/effective_affinity_list)" 0 "comp0 serves CPU 0"
expect_eq "$(cat /proc/irq/$irq1/effective_affinity_list)" 1 "comp1 serves CPU 1"
expect_eq "$(cat /proc/irq/$irq1/affinity_hint | tr -d 0,)" 2 "comp1's affinity hint is CPU 1"

port=18700
# rises_only VECTOR CPU OTHER COMMAND...: COMMAND raises the vector's count
# on CPU and leaves it alone on OTHER.
rises_only() {
	vector=$1 cpu=$2 other=$3
	shift 3
	on_before=$(count_on "$vector" "$cpu")
	off_before=$(count_on "$vector" "$other")
	"$@"
	on_after=$(count_on "$vector" "$cpu")
	off_after=$(count_on "$vector" "$other")
	echo "comp$vector: CPU$cpu $on_before -> $on_after, CPU$other $off_before -> $off_after"
	[ "$on_after" -gt "$on_before" ] || fail "$*: comp$vector did not count on CPU $cpu"
	expect_eq "$off_after" "$off_before" "comp$vector's count on CPU $other during $*"
}

step "events on the vector's CPU"
rises_only 0 0 1 loopback_pingpong -e -n 200
rises_only 1 1 0 loopback_perftest ib_send_bw -e -X 1 -n 300
rises_only 1 1 0 loopback_perftest ib_read_bw -e -X 1 -n 300

step "smp_affinity moves a vector"
echo 2 > /proc/irq/$irq0/smp_affinity || fail "writing smp_affinity of comp0 failed"
expect_eq "$(cat /proc/irq/$irq0/effective_affinity_list)" 1 "comp0 serves CPU 1 after the write"
rises_only 0 1 0 loopback_pingpong -e -n 200
echo 1 > /proc/irq/$irq0/smp_affinity || fail "writing smp_affinity of comp0 back failed"
expect_eq "$(cat /proc/irq/$irq0/effective_affinity_list)" 0 "comp0 serves CPU 0 again"

step "a move in the middle of a run"
port=$((port + 1))
timeout 300 ib_send_lat -d srnic0 -x 1 -p $port -F -e -X 1 -n 4000 > /tmp/lat_server.out 2>&1 &
server=$!
wait_until 60 listening $port || { cat /tmp/lat_server.out; fail "ib_send_lat server never listened"; }
cpu0_start=$(count_on 1 0)
timeout 300 ib_send_lat -d srnic0 -x 1 -p $port -F -e -X 1 -n 4000 localhost > /tmp/lat_client.out 2>&1 &
client=$!
cpu1_start=$(count_on 1 1)
wait_until 60 sh -c "[ \$(awk -v n=srnic0-comp1 '\$NF == n { print \$3 }' /proc/interrupts) -gt $((cpu1_start + 200)) ]" ||
	fail "comp1 did not count 200 interrupts on CPU 1 within 60 s of ib_send_lat starting"
echo 1 > /proc/irq/$irq1/smp_affinity || fail "moving comp1 to CPU 0 failed"
cpu1_moved=$(count_on 1 1)
wait "$client" || { cat /tmp/lat_client.out /tmp/lat_server.out; fail "ib_send_lat -e -X 1 did not complete after the move"; }
wait "$server" || { cat /tmp/lat_server.out; fail "ib_send_lat server"; }
cpu0_end=$(count_on 1 0)
cpu1_end=$(count_on 1 1)
echo "comp1: CPU0 $cpu0_start -> $cpu0_end, CPU1 $cpu1_start -> $cpu1_moved (moved) -> $cpu1_end"
[ "$cpu0_end" -gt "$cpu0_start" ] || fail "after the move comp1 never counted on CPU 0"
# An interrupt already raised when the affinity changed may still land.
[ "$cpu1_end" -le $((cpu1_moved + 2)) ] || fail "comp1 kept counting on CPU 1 after the move ($cpu1_moved -> $cpu1_end)"
echo 2 > /proc/irq/$irq1/smp_affinity || fail "moving comp1 back failed"

step "CPU hotplug moves a vector off and back"
[ -w /sys/devices/system/cpu/cpu1/online ] || fail "CPU 1 cannot go offline (no hotplug)"
port=$((port + 1))
timeout 300 ib_send_lat -d srnic0 -x 1 -p $port -F -e -X 1 -n 3000 > /tmp/lat_server.out 2>&1 &
server=$!
wait_until 60 listening $port || { cat /tmp/lat_server.out; fail "ib_send_lat server never listened"; }
timeout 300 ib_send_lat -d srnic0 -x 1 -p $port -F -e -X 1 -n 3000 localhost > /tmp/lat_client.out 2>&1 &
client=$!
sleep 2
echo 0 > /sys/devices/system/cpu/cpu1/online || fail "taking CPU 1 offline failed"
expect_eq "$(cat /proc/irq/$irq1/effective_affinity_list)" 0 "comp1 serves CPU 0 while CPU 1 is offline"
sleep 2
echo 1 > /sys/devices/system/cpu/cpu1/online || fail "bringing CPU 1 online failed"
expect_eq "$(cat /proc/irq/$irq1/effective_affinity_list)" 1 "comp1 back on CPU 1"
wait "$client" || { cat /tmp/lat_client.out /tmp/lat_server.out; fail "ib_send_lat -e across CPU hotplug lost an event (did not complete)"; }
wait "$server" || { cat /tmp/lat_server.out; fail "ib_send_lat server across CPU hotplug"; }
rises_only 1 1 0 loopback_perftest ib_send_bw -e -X 1 -n 100

step "the vector of each CQ, and the counts per vector"
timeout 120 ibv_rc_pingpong -d srnic0 -g 1 -p 18799 -e -n 100000 > /dev/null 2>&1 &
holder=$!
wait_until 60 listening 18799 || fail "ibv_rc_pingpong server never listened"
cqs=$(rdma -dd resource show cq dev srnic0)
echo "$cqs"
expect_match "$cqs" "comm ibv_rc_pingpong drv_comp_vector 0 drv_irq $irq0" "rdma resource show cq names the CQ's vector and IRQ"
kill $holder
wait $holder
stats=$(rdma statistic show link srnic0/1)
expect_match "$stats" "comp_vector0_events [1-9]" "rdma statistic counts comp0's events"
expect_match "$stats" "comp_vector1_events [1-9]" "rdma statistic counts comp1's events"

step "arming rules and moderation of kernel CQs (srnic_verbs_test)"
verbs_test_module
expect_match "$ktap" '^ok [0-9]* CQs on two vectors have their events on two CPUs' "two vectors, two CPUs"
must rmmod srnic_verbs_test

step "arming rules of user CQs (verbs_user events)"
must timeout 120 "$SRNIC_TOP/out/progs/verbs_user" srnic0 events

step "removal"
must rdma link delete srnic0
expect_eq "$(grep -c 'srnic0-comp' /proc/interrupts)" 0 "srnic0-comp lines after rdma link delete"
must rdma link add srnic0 type srnic netdev eth0
expect_eq "$(grep -c 'srnic0-comp' /proc/interrupts)" 2 "srnic0-comp lines after adding again"
unload_srnic
expect_eq "$(grep -c 'srnic0-comp' /proc/interrupts)" 0 "srnic0-comp lines after rmmod"

step "the comp_vectors module parameter"
must insmod "$srnic_ko" comp_vectors=3
must rdma link add srnic0 type srnic netdev eth0
expect_eq "$(grep -c 'srnic0-comp' /proc/interrupts)" 3 "srnic0-comp lines with comp_vectors=3 on 2 CPUs"
irq2=$(irq_of 2)
expect_eq "$(cat /proc/irq/$irq2/effective_affinity_list)" 0 "the third vector wraps around to CPU 0"
must rdma link delete srnic0
unload_srnic
