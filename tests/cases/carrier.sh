# Link state follows the netdev: admin down/up and carrier loss reach the
# port's state with IB port events.
# vms: 1
# timeout: 300
load_srnic
veth_pair veth0 veth1
must rdma link add srnic0 type srnic netdev eth0
must rdma link add srnic1 type srnic netdev veth0
expect_eq "$(link_field srnic0 state)" ACTIVE "srnic0 initially"
expect_eq "$(link_field srnic1 state)" ACTIVE "srnic1 initially"

start_asyncwatch srnic0 /tmp/events0
watch0=$watcher
start_asyncwatch srnic1 /tmp/events1
watch1=$watcher

port_state() { ibv_devinfo -d "$1" | sed -n 's/^[[:space:]]*state:[[:space:]]*//p'; }

step "admin down on eth0"
must ip link set eth0 down
expect_eq "$(link_field srnic0 state)" DOWN "srnic0 after eth0 down"
expect_eq "$(link_field srnic0 physical_state)" DISABLED "srnic0 physical state after eth0 down"
expect_eq "$(port_state srnic0)" "PORT_DOWN (1)" "ibv_devinfo state after eth0 down"
step "admin up on eth0"
must ip link set eth0 up
expect_eq "$(link_field srnic0 state)" ACTIVE "srnic0 after eth0 up"

step "carrier loss on veth0 (its peer goes down)"
must ip link set veth1 down
wait_until 10 sh -c "[ \"\$(cat /sys/class/net/veth0/carrier)\" = 0 ]" || fail "veth0 kept carrier"
expect_eq "$(link_field srnic1 state)" DOWN "srnic1 without carrier"
must ip link set veth1 up
wait_until 10 sh -c "[ \"\$(cat /sys/class/net/veth0/carrier)\" = 1 ]" || fail "veth0 got no carrier back"
expect_eq "$(link_field srnic1 state)" ACTIVE "srnic1 with carrier back"

# Events reach user space asynchronously.
wait_until 10 grep -q IBV_EVENT_PORT_ACTIVE /tmp/events0
wait_until 10 grep -q IBV_EVENT_PORT_ACTIVE /tmp/events1
kill $watch0 $watch1
wait $watch0 $watch1 2>/dev/null
events0=$(cat /tmp/events0)
events1=$(cat /tmp/events1)
echo "$events0"
echo "$events1"
expect_match "$events0" "IBV_EVENT_PORT_ERR.*port 1" "PORT_ERR event on srnic0"
expect_match "$events0" "IBV_EVENT_PORT_ACTIVE.*port 1" "PORT_ACTIVE event on srnic0"
expect_eq "$(grep -c IBV_EVENT_PORT_ERR /tmp/events0)" 1 "one PORT_ERR per transition on srnic0"
expect_match "$events1" "IBV_EVENT_PORT_ERR.*port 1" "PORT_ERR event on srnic1"
expect_match "$events1" "IBV_EVENT_PORT_ACTIVE.*port 1" "PORT_ACTIVE event on srnic1"

must rdma link delete srnic0
must rdma link delete srnic1
unload_srnic
