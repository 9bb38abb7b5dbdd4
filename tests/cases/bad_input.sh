# Bad requests fail with a clear error and leave nothing behind.
# vms: 1
# timeout: 300
load_srnic
veth_pair veth0 veth1

step "missing netdev"
must_fail "No such device" rdma link add srnic0 type srnic netdev nosuch0
step "loopback cannot carry RoCE"
must_fail "Invalid argument" rdma link add srnic0 type srnic netdev lo
step "a non-Ethernet netdev (a tun device) cannot carry RoCE"
must modprobe tun
must ip tuntap add dev tun0 mode tun
must_fail "Invalid argument" rdma link add srnic0 type srnic netdev tun0
must ip link del tun0
step "unknown link type"
must_fail "Invalid argument|Operation not supported" rdma link add srnic0 type nosuchtype netdev eth0
expect_eq "$(rdma_devices | wc -l)" 0 "no devices after refused requests"

step "duplicate device name"
must rdma link add srnic0 type srnic netdev eth0
must_fail "File exists" rdma link add srnic0 type srnic netdev veth0
step "second device on the same netdev"
must_fail "File exists" rdma link add srnic1 type srnic netdev eth0
expect_eq "$(rdma_devices | tr '\n' ' ')" "srnic0 " "only the first device exists"

step "delete twice, delete unknown"
must rdma link delete srnic0
must_fail "Wrong device name" rdma link delete srnic0
must_fail "Wrong device name" rdma link delete nosuch9

step "a name that is too long or has a format character"
must_fail "Invalid argument|Numerical result out of range|too long" rdma link add srnic%d type srnic netdev eth0
expect_eq "$(rdma_devices | wc -l)" 0 "no devices left"

step "rmmod while devices exist removes them"
must rdma link add srnic0 type srnic netdev eth0
must rdma link add srnic1 type srnic netdev veth0
unload_srnic
expect_eq "$(rdma_devices | wc -l)" 0 "no devices after rmmod"
load_srnic
must rdma link add srnic0 type srnic netdev eth0

step "rmmod while a process has the device open removes it and tells the process"
start_asyncwatch srnic0 /tmp/events
unload_srnic
expect_eq "$(rdma_devices | wc -l)" 0 "no devices after rmmod with the device open"
wait_until 10 grep -q IBV_EVENT_DEVICE_FATAL /tmp/events
kill $watcher 2>/dev/null
wait $watcher 2>/dev/null
expect_match "$(cat /tmp/events)" "IBV_EVENT_DEVICE_FATAL" "the process saw the device go"
must ip link del veth0
