# A kernel ULP over srnic: NVMe over Fabrics with the kernel's own RDMA
# host (nvme-rdma) and target (nvmet-rdma), connected through rdma_cm.
# VM a exports a 64 MiB file as a namespace on srnic0; VM b connects with
# two I/O queues, writes 8 MiB of random data with O_DIRECT and reads it
# back, and VM a finds the same bytes in its file. The host's queues use
# both completion vectors. Then VM a connects to its own export
# (loopback through the device), and every controller is deleted and every
# module unloaded cleanly (kmemleak and KASAN watch).
# vms: 2
# cpus: 2
# timeout: 900
# pcap: off
load_srnic
must rdma link add srnic0 type srnic netdev eth0
wait_roce_gid srnic0 1
nqn=nqn.2026-11.org.srnic:test
pattern=/mnt/shared/pattern
image=/run/nvme.img

# connect ADDRESS: attach the host to the target at ADDRESS; prints the
# new controller's name.
connect() {
	must modprobe nvme-rdma
	[ -c /dev/nvme-fabrics ] || fail "no /dev/nvme-fabrics after modprobe nvme-rdma"
	before=$(ls /sys/class/nvme 2>/dev/null)
	echo "transport=rdma,traddr=$1,trsvcid=4420,nqn=$nqn,nr_io_queues=2" > /dev/nvme-fabrics ||
		fail "connecting to $nqn at $1 over srnic0 failed: $(dmesg | grep -i nvme | tail -5)"
	for ctrl in $(ls /sys/class/nvme); do
		case " $before " in *" $ctrl "*) ;; *) echo "$ctrl" ;; esac
	done
}

# disconnect CTRL: delete the controller; its block device goes.
disconnect() {
	echo 1 > "/sys/class/nvme/$1/delete_controller" || fail "deleting $1 failed"
	wait_until 30 sh -c "[ ! -e /sys/class/nvme/$1 ]" || fail "$1 still exists after delete_controller"
	echo "ok: $1 deleted"
}

# namespace_of CTRL: the block device of CTRL's namespace, once it shows.
namespace_of() {
	wait_until 30 sh -c "ls /sys/class/nvme/$1/ | grep -q '^nvme.*n1\$'" ||
		fail "controller $1 shows no namespace: $(ls /sys/class/nvme/$1)"
	ls "/sys/class/nvme/$1/" | grep "^nvme.*n1\$" | head -n 1
}

if [ "$SRNIC_VM" = a ]; then
	step "target: a 64 MiB file exported on srnic0 (nvmet-rdma)"
	must modprobe nvmet-rdma
	mountpoint -q /sys/kernel/config || must mount -t configfs none /sys/kernel/config
	must truncate -s 64M $image
	sub=/sys/kernel/config/nvmet/subsystems/$nqn
	must mkdir $sub
	echo 1 > $sub/attr_allow_any_host
	must mkdir $sub/namespaces/1
	echo $image > $sub/namespaces/1/device_path
	echo 1 > $sub/namespaces/1/buffered_io
	echo 1 > $sub/namespaces/1/enable || fail "enabling the namespace failed"
	port=/sys/kernel/config/nvmet/ports/1
	must mkdir $port
	echo rdma > $port/addr_trtype
	echo ipv4 > $port/addr_adrfam
	echo 10.0.0.1 > $port/addr_traddr
	echo 4420 > $port/addr_trsvcid
	must ln -s $sub $port/subsystems/$nqn
	wait_until 30 sh -c 'rdma res show cm_id | grep -q LISTEN' || fail "nvmet-rdma does not listen on srnic0"
	expect_match "$(rdma res show cm_id)" "srnic0.*LISTEN.*nvmet" "nvmet-rdma listens through srnic0"
	head -c 8M /dev/urandom > $pattern
	barrier target 2
	# The host connects and moves 8 MiB meanwhile: under TCG on a busy
	# two-core machine that has taken over a minute.
	barrier written 2 600
	step "target: the host's data is in the file"
	must cmp -n 8388608 $pattern $image
	echo "ok: the 8 MiB the host wrote are in the exported file"
	barrier checked 2

	step "loopback: VM a connects to its own export"
	ctrl=$(connect 10.0.0.1)
	[ -n "$ctrl" ] || fail "no new controller after the loopback connect"
	dev=$(namespace_of "$ctrl")
	must dd if=/dev/$dev of=/run/back bs=1M count=8 iflag=direct
	must cmp /run/back $pattern
	echo "ok: loopback: read the 8 MiB back through nvme-rdma over srnic0"
	disconnect "$ctrl"
	barrier loop.done 2 600
	rm -f $port/subsystems/$nqn
	rmdir $port $sub/namespaces/1 $sub
	must modprobe -r nvme-rdma nvmet-rdma
else
	barrier target 2
	step "host: nvme-rdma connects to VM a over srnic0, two I/O queues"
	ctrl=$(connect 10.0.0.1)
	[ -n "$ctrl" ] || fail "no new controller after connecting"
	dev=$(namespace_of "$ctrl")
	echo "controller $ctrl, namespace $dev, transport $(cat /sys/class/nvme/$ctrl/transport)"
	expect_eq "$(cat /sys/class/nvme/$ctrl/transport)" rdma "the controller's transport"
	# ib_mad's CQ is on vector 0; the core's CQ pool serves nvme-rdma's
	# queues from both vectors.
	cqs=$(rdma -dd res show cq dev srnic0)
	echo "$cqs"
	[ "$(printf '%s\n' "$cqs" | grep -c 'drv_comp_vector 0')" -ge 2 ] ||
		fail "no CQ of nvme-rdma's on vector 0"
	expect_match "$cqs" "drv_comp_vector 1 " "a CQ of nvme-rdma's on vector 1"
	step "host: 8 MiB written and read back with O_DIRECT"
	irqs_before=$(grep srnic0-comp /proc/interrupts | tr -s ' ')
	must dd if=$pattern of=/dev/$dev bs=1M count=8 oflag=direct
	must dd if=/dev/$dev of=/run/back bs=1M count=8 iflag=direct
	must cmp /run/back $pattern
	echo "ok: 8 MiB read back intact"
	irqs_after=$(grep srnic0-comp /proc/interrupts | tr -s ' ')
	echo "$irqs_before"
	echo "$irqs_after"
	[ "$irqs_before" != "$irqs_after" ] || fail "the I/O raised no completion vector"
	barrier written 2 600
	barrier checked 2
	disconnect "$ctrl"
	barrier loop.done 2 600
	must modprobe -r nvme-rdma
fi
must rdma link delete srnic0
unload_srnic
