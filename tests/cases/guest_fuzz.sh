# The guest-side fuzzer (tests/lib/roce_fuzz.py): a raw RoCEv2 peer in a
# network namespace, joined to srnic0's veth by its pair, sends mutated
# WRITE, READ, atomic, ATOMIC WRITE and SEND requests with a valid ICRC at
# the PSN the responder expects, to live RC QPs of tests/progs/fuzz_target.c
# whose regions sit between unregistered guard pages, next to a read-only,
# a local-only and another PD's region. No READ response may carry a byte
# the model of the region does not hold, nothing the keys do not grant may
# be acknowledged, and every byte outside the writable region stays as it
# was filled. Then a flood of forged answers (ACKs and NAKs for PSNs never
# sent or long done, READ responses and atomic acknowledgements nobody
# asked for) hits a live QP: each is counted in rejected_answers, none
# starts the requester (requester_runs) or makes the device send, and the
# QP then answers a READ of the whole region. Last, a READ longer than a
# message may be (2^31 + 1 bytes) is NAKed as an invalid request. The
# kernel stays clean.
# It runs SRNIC_CASE_FUZZ_SECONDS (default 60) seconds; `make fuzz-guest
# FUZZ_SECONDS=N` runs it longer, SRNIC_CASE_FUZZ_SEED replays a seed.
# timeout: 300
seconds=${SRNIC_CASE_FUZZ_SECONDS:-60}
load_srnic
must ip netns add fz
must ip link add fz0 type veth peer name fz1
must ip link set fz1 netns fz
must ip addr add 10.9.0.1/24 dev fz0
must ip link set fz0 up
must ip netns exec fz ip addr add 10.9.0.2/24 dev fz1
must ip netns exec fz ip link set fz1 up
must ip netns exec fz ip link set lo up
must rdma link add srnic0 type srnic netdev fz0
gid=$(gid_index srnic0 10.9.0.1)
step "fuzzing for $seconds s (GID index $gid)"
timeout $((seconds + 120)) python3 -S "$SRNIC_TOP/tests/lib/roce_fuzz.py" "$SRNIC_TOP/out/progs/fuzz_target" \
	srnic0 "$gid" fz 10.9.0.2 10.9.0.1 "$seconds" ${SRNIC_CASE_FUZZ_SEED:-} > /tmp/fuzz.out 2>&1
status=$?
cat /tmp/fuzz.out
rdma statistic show link srnic0/1
[ $status -eq 0 ] || fail "the fuzzer failed (status $status): $(grep -m1 '^FAIL' /tmp/fuzz.out)"
grep -q '^counts:' /tmp/fuzz.out || fail "the fuzzer printed no counts"
# A run that barely sent anything proves nothing: at least 5 requests a
# second (a 60 s run sends 1400 to 2000 here), a tenth of them mutated.
count_of() { awk -v n="$1" '/^counts:/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == n) print kv[2] } }' /tmp/fuzz.out; }
# (The forged answers of the last stage are counted in sent too.)
sent=$(($(count_of sent) - $(count_of forged_answers))) mutated=$(count_of mutated)
[ "$sent" -ge $((seconds * 5)) ] ||
	fail "the fuzzer sent $sent requests in $seconds s; expected at least $((seconds * 5))"
[ $((${mutated:-0} * 10)) -ge "$sent" ] ||
	fail "the fuzzer mutated ${mutated:-0} of $sent requests; expected at least a tenth"
echo "ok: $sent requests sent, $mutated mutated"
must rdma link delete srnic0
must ip netns delete fz
unload_srnic
