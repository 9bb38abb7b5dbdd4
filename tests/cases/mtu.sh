# The port's active MTU follows the netdev MTU: the largest IB MTU whose
# RoCEv2 packets fit.
# vms: 1
# timeout: 240
load_srnic
must rdma link add srnic0 type srnic netdev eth0
active_mtu() { ibv_devinfo -d srnic0 | sed -n 's/^[[:space:]]*active_mtu:[[:space:]]*//p'; }
# Each IB MTU needs 92 bytes of headers around it (rust/pure/mtu.rs):
# 4188 is the least netdev MTU for 4096, 1116 for 1024.
for pair in "9000:4096 (5)" "4188:4096 (5)" "4187:2048 (4)" "1500:1024 (3)" "1116:1024 (3)" "1115:512 (2)" "576:256 (1)"; do
	mtu=${pair%%:*}
	want=${pair#*:}
	step "netdev MTU $mtu"
	must ip link set eth0 mtu "$mtu"
	expect_eq "$(active_mtu)" "$want" "active MTU at netdev MTU $mtu"
	expect_eq "$(link_field srnic0 state)" ACTIVE "port state at netdev MTU $mtu"
done
step "a netdev MTU too small for any IB MTU takes the port down, with events"
start_asyncwatch srnic0 /tmp/events
must ip link set eth0 mtu 340
expect_eq "$(link_field srnic0 state)" DOWN "port state at netdev MTU 340"
must ip link set eth0 mtu 1500
expect_eq "$(link_field srnic0 state)" ACTIVE "port state back at 1500"
expect_eq "$(active_mtu)" "1024 (3)" "active MTU back at 1500"
wait_until 10 grep -q IBV_EVENT_PORT_ACTIVE /tmp/events
kill $watcher
wait $watcher 2>/dev/null
cat /tmp/events
expect_eq "$(grep -c 'IBV_EVENT_PORT_ERR' /tmp/events)" 1 "one PORT_ERR for the too-small MTU"
expect_eq "$(grep -c 'IBV_EVENT_PORT_ACTIVE' /tmp/events)" 1 "one PORT_ACTIVE when it is large enough again"
must rdma link delete srnic0
unload_srnic
