# Every RC opcode across the wire with every byte checked by our own
# program (tests/progs/rc_data.c): srnic to srnic, then srnic to rxe in
# both roles, then srnic to srnic on a lossy wire (tc netem on both ends:
# loss, duplication, reordering), where 64 MiB each of SEND, WRITE and READ
# must still arrive intact with no error completion, and the retransmission
# counters must have moved.
# vms: 2
# timeout: 1500
prog=$SRNIC_TOP/out/progs/rc_data
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
counter() {
	rdma statistic show link srnic0/1 | tr ' ' '\n' | awk -v n="$1" 'f { print; exit } $0 == n { f = 1 }'
}

# exchange DEV TAG MIB [ROLE]: both VMs run rc_data over DEV; the one in
# role a answers, the one in role b asks (by default VM a answers).
exchange() {
	mkdir -p "/mnt/shared/$2"
	must timeout 900 "$prog" "$1" 1 "${4:-$SRNIC_VM}" "/mnt/shared/$2" "$3"
}

step "srnic to srnic"
exchange srnic0 plain 8

step "srnic and rxe"
# rxe takes UDP port 4791 while loaded: the VM that runs rxe has no srnic
# device meanwhile.
if [ "$SRNIC_VM" = a ]; then
	exchange srnic0 rxe_asks 8
	barrier rxe_turn 2
	exchange srnic0 srnic_asks 8 b
else
	must rdma link delete srnic0
	unload_srnic
	must modprobe rdma_rxe
	must rdma link add rxe0 type rxe netdev eth0
	wait_roce_gid rxe0 1
	exchange rxe0 rxe_asks 8
	barrier rxe_turn 2
	exchange rxe0 srnic_asks 8 a
	must rdma link delete rxe0
	must rmmod rdma_rxe
	load_srnic
	must rdma link add srnic0 type srnic netdev eth0
	wait_roce_gid srnic0 1
fi
barrier back_to_srnic 2

step "srnic to srnic on a lossy wire"
must modprobe sch_netem
must tc qdisc add dev eth0 root netem loss 5% duplicate 1% delay 1ms reorder 10% 50%
before=$(counter resends)
exchange srnic0 lossy 64
after=$(counter resends)
rdma statistic show link srnic0/1
tc -s qdisc show dev eth0
if [ "$SRNIC_VM" = b ]; then
	[ "$after" -gt "$before" ] || fail "resends went from $before to $after on a lossy wire; expected retransmissions"
fi
must tc qdisc del dev eth0 root
barrier finished 2
must rdma link delete srnic0
unload_srnic
