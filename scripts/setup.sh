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
	# the VM harness
	qemu-system-x86 busybox-static
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
