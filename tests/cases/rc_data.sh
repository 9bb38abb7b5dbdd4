# Every RC opcode across the wire with every byte checked by our own
# program (tests/progs/rc_data.c): srnic to srnic, then srnic to rxe in
# both roles; then the peer's device is deleted under outstanding SENDs,
# which must end in RETRY_EXC_ERR and flushes. The lossy wire is rc_lossy.
# vms: 2
# timeout: 900
# pcap: off
prog=$SRNIC_TOP/out/progs/rc_data
[ -x "$prog" ] || fail "$prog is not built (make test-progs)"
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1

# exchange DEV TAG MIB [ROLE [MODE]]: both VMs run rc_data over DEV; the
# one in role a answers, the one in role b asks (by default VM a answers).
exchange() {
	mkdir -p "/mnt/shared/$2"
	must timeout 900 "$prog" "$1" 1 "${4:-$SRNIC_VM}" "/mnt/shared/$2" "$3" $5
}

step "srnic to srnic"
exchange srnic0 plain 8
# rc_data ends with bursts of unsignaled WRITEs, each followed by a
# pause: their ends ask for no ACK, so the quiet tail of a burst is
# acknowledged only once the requester's tail probe asks (without it, the
# retransmission timer would resend them after 17 ms or more).
if [ "$SRNIC_VM" = b ]; then
	probes=$(counter_of srnic0 tail_probes)
	[ "$probes" -gt 0 ] || fail "tail_probes is $probes after rc_data's bursts of unsignaled WRITEs; expected their quiet tails probed"
fi

step "srnic and rxe"
# rxe takes UDP port 4791 while loaded: the VM that runs rxe has no srnic
# device meanwhile.
if [ "$SRNIC_VM" = a ]; then
	exchange srnic0 rxe_asks 8
	barrier rxe_turn 2
	exchange srnic0 srnic_asks 8 b
	# rxe answers the probe, a duplicate asking for an ACK, with one.
	probes=$(counter_of srnic0 tail_probes)
	[ "$probes" -gt 0 ] || fail "tail_probes is $probes after rc_data's bursts of unsignaled WRITEs to rxe; expected their quiet tails probed"
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

step "peer death"
# VM b keeps SENDs outstanding; VM a deletes its device under them.
mkdir -p /mnt/shared/death
if [ "$SRNIC_VM" = a ]; then
	timeout 120 "$prog" srnic0 1 a /mnt/shared/death 0 death > /tmp/death.out 2>&1 &
	pid=$!
	wait_until 60 test -e /mnt/shared/death/rc_data.doomed.a || fail "rc_data never got ready to die"
	sleep 1
	must rdma link delete srnic0
	touch /mnt/shared/death/rc_data.gone.a
	wait $pid || { cat /tmp/death.out; fail "the side whose device was deleted did not end cleanly"; }
else
	must timeout 120 "$prog" srnic0 1 b /mnt/shared/death 0 death
	must rdma link delete srnic0
fi
barrier finished 2
unload_srnic
