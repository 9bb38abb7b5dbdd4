#!/usr/bin/env bash
# Install what `make bench` needs beyond scripts/setup.sh, each piece only
# when missing: iperf3 (the wire's own throughput, run in the guests, which
# share the host's userland) and gnuplot (the PNG plots).
set -euo pipefail

apt_packages=(iperf3 gnuplot-nox)

missing=()
for pkg in "${apt_packages[@]}"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bench-setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
