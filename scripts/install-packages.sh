#!/usr/bin/env bash
# Install the Debian packages named as arguments, only those missing (one
# apt-get update and install for all of them). Used by scripts/setup.sh and
# scripts/bench-setup.sh.
set -euo pipefail

missing=()
for pkg in "$@"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "$(basename "$0"): installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
