#!/usr/bin/env bash
# Install what building and testing srnic needs, each piece only when missing.
# Safe to run repeatedly; the Makefile runs it before every build.
set -euo pipefail

BINDGEN_VERSION=0.69.5

apt_packages=(
	# kernel source and build tools
	linux-source-6.12 xz-utils bc bison flex libelf-dev libssl-dev cpio kmod
	rsync
	# Rust-for-Linux toolchain: a rustc that ships rust-src, and LLVM for
	# the clang build that KASAN together with Rust needs
	rustc-web rust-web-src clang lld llvm libclang-dev
	# clippy for the kernel crates, matching rustc-web
	rust-web-clippy
	# the VM harness (QEMU itself below)
	busybox-static
	# stock RDMA userspace run inside the guest
	rdmacm-utils ibverbs-utils ibverbs-providers perftest iproute2
	infiniband-diags python3-pyverbs ethtool iputils-ping tcpdump python3
	# iblan tests: ARP probes and TCP/UDP over the emulated LAN
	iputils-arping iperf3
	# checking captured RoCEv2 packets on the host
	tshark
	# building the C test programs run in the guest
	gcc libc6-dev libibverbs-dev librdmacm-dev make
	# make lint renders the man pages
	man-db groff-base
)

"$(dirname "$0")/install-packages.sh" "${apt_packages[@]}"

# QEMU from bookworm-backports (10.x) rather than bookworm's 7.2: under TCG
# it ran the rc_data and devinfo cases in 4m28s against 7m27s, and it
# emulates PCLMULQDQ with the host's instruction where 7.2 loops over the
# bits, so the guests' CRC32 (RoCEv2's ICRC) is no longer table-bound.
QEMU_MAJOR=10
# No QEMU yet (a fresh machine) reads as version 0, not as a failed pipe.
qemu_major=$( (qemu-system-x86_64 --version 2>/dev/null || true) | sed -n 's/^QEMU emulator version \([0-9]*\)\..*/\1/p')
if [ "${qemu_major:-0}" -lt "$QEMU_MAJOR" ]; then
	backports=/etc/apt/sources.list.d/srnic-bookworm-backports.sources
	if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
		echo "setup: adding bookworm-backports to apt's sources ($backports)"
		cat > "$backports" <<-SOURCES
			Types: deb
			URIs: http://deb.debian.org/debian
			Suites: bookworm-backports
			Components: main
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		SOURCES
	fi
	echo "setup: installing QEMU $QEMU_MAJOR from bookworm-backports"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86
	qemu_major=$(qemu-system-x86_64 --version | sed -n 's/^QEMU emulator version \([0-9]*\)\..*/\1/p')
	if [ "${qemu_major:-0}" -lt "$QEMU_MAJOR" ]; then
		echo "setup: bookworm-backports gave QEMU $qemu_major, not $QEMU_MAJOR or later" >&2
		exit 1
	fi
fi

export PATH="$HOME/.cargo/bin:$PATH"
# The host toolchain (rustup's) runs the host tests and the lint.
if ! command -v cargo > /dev/null; then
	echo "setup: no cargo on PATH; the host tests need the machine's Rust toolchain" >&2
	exit 1
fi
for component in rustfmt clippy; do
	if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
		echo "setup: adding rustup component $component"
		rustup component add "$component"
	fi
done
if ! bindgen --version 2>/dev/null | grep -q "$BINDGEN_VERSION"; then
	echo "setup: installing bindgen-cli $BINDGEN_VERSION"
	cargo install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION"
fi
