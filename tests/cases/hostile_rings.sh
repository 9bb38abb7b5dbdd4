# A process writes garbage into its mapped rings (SQ producer out of range,
# garbage send WQEs, RQ producer out of range, CQ consumer out of range, SQ
# producer lapping the sends in flight) and rings the doorbell: the QP errors
# out with IBV_EVENT_QP_FATAL (a CQ overrun with IBV_EVENT_CQ_ERR), the sends
# in flight each flush once, another QP of the process goes on, and the
# kernel stays clean (the runner checks the console). The kernel's POLL_CQ,
# POST_RECV and POST_SRQ_RECV commands on the process's own objects are
# refused with EOPNOTSUPP and leave their rings alone.
# timeout: 300
prog=$SRNIC_TOP/out/progs/verbs_user
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 0
must timeout 120 "$prog" srnic0 hostile
dmesg | grep srnic | tail -5
must rdma link delete srnic0
unload_srnic
