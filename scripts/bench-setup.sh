#!/usr/bin/env bash
# Install what `make bench` needs beyond scripts/setup.sh, each piece only
# when missing: iperf3 (the wire's own throughput, run in the guests, which
# share the host's userland), gnuplot (the PNG plots) and linux-perf (the
# profiles of `--profile`).
set -euo pipefail

"$(dirname "$0")/install-packages.sh" iperf3 gnuplot-nox linux-perf
