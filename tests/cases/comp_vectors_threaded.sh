# Priorities between completion vectors (booted with threadirqs): each
# vector's handler runs in its own IRQ thread on the vector's CPU, and chrt
# gives one vector's thread precedence over another's.
# cpus: 2
# cmdline: threadirqs
# timeout: 300
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1

# thread_of VECTOR: the pid of srnic0-comp<VECTOR>'s IRQ thread.
thread_of() {
	_irq=$(awk -v n="srnic0-comp$1" '$NF == n { sub(":", "", $1); print $1 }' /proc/interrupts)
	[ -n "$_irq" ] || fail "no srnic0-comp$1 in /proc/interrupts"
	pgrep "^irq/$_irq-"
}

# wakeups PID: how often the thread went to sleep and was woken again.
wakeups() {
	awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$1/status"
}

# last_cpu PID: the CPU the thread last ran on (field 39 of stat).
last_cpu() {
	awk '{ print $39 }' "/proc/$1/stat"
}

thread0=$(thread_of 0)
thread1=$(thread_of 1)
[ -n "$thread0" ] && [ -n "$thread1" ] || fail "no IRQ threads for the vectors: $(ps -e -o pid,comm | grep irq/)"
ps -o pid,psr,cls,rtprio,comm -p "$thread0,$thread1"

step "chrt sets a vector's priority"
must chrt -f -p 80 "$thread0"
must chrt -f -p 40 "$thread1"
expect_match "$(chrt -p "$thread0")" "current scheduling priority: 80" "comp0's thread at SCHED_FIFO 80"
expect_match "$(chrt -p "$thread1")" "current scheduling priority: 40" "comp1's thread at SCHED_FIFO 40"

step "each vector's events wake its own thread, on its CPU"
before0=$(wakeups "$thread0")
before1=$(wakeups "$thread1")
pair ibv_rc_pingpong -d srnic0 -g 1 -p 18801 -e -n 200
after0=$(wakeups "$thread0")
echo "comp0's thread: $before0 -> $after0 wakeups, last on CPU $(last_cpu "$thread0")"
[ "$after0" -gt $((before0 + 100)) ] || fail "ibv_rc_pingpong -e (vector 0) woke comp0's thread only $((after0 - before0)) times"
expect_eq "$(last_cpu "$thread0")" 0 "comp0's thread runs on CPU 0"
pair ib_send_bw -d srnic0 -x 1 -p 18802 -F -e -X 1 -n 300
after1=$(wakeups "$thread1")
echo "comp1's thread: $before1 -> $after1 wakeups, last on CPU $(last_cpu "$thread1")"
[ "$after1" -gt "$before1" ] || fail "ib_send_bw -e -X 1 never woke comp1's thread"
expect_eq "$(last_cpu "$thread1")" 1 "comp1's thread runs on CPU 1"
expect_match "$(chrt -p "$thread0")" "current scheduling priority: 80" "comp0 keeps its priority"

must rdma link delete srnic0
unload_srnic
