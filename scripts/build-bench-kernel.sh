#!/usr/bin/env bash
# Build the lean benchmark kernel (or find it in the cache) and print its
# cache directory, like scripts/build-kernel.sh does for the test kernel.
#
# The benchmark kernel is the test kernel without its debug options:
# qemu/config/base.config plus qemu/bench/lean.config, and not
# qemu/config/debug.config. Rather than teach build-kernel.sh a second
# configuration (which would change the test kernel's cache key), this
# stages a small tree holding a copy of build-kernel.sh and those two
# fragments as its qemu/config/, and runs the staged copy. Its cache key
# then covers the same inputs as the test kernel's (source package,
# fragments, script, toolchain) and differs from it.
#
# Kernels live in $SRNIC_CACHE/bench (default ~/.cache/srnic/bench), apart
# from the test kernels, so that neither build prunes the other's.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${SRNIC_CACHE:-$HOME/.cache/srnic}/bench
stage=$cache_root/stage
mkdir -p "$cache_root"

exec 9> "$cache_root/.lock"
flock 9

rm -rf "$stage"
mkdir -p "$stage/scripts" "$stage/qemu/config"
cp "$top/scripts/build-kernel.sh" "$stage/scripts/build-kernel.sh"
cp "$top/qemu/config/base.config" "$stage/qemu/config/base.config"
cp "$top/qemu/bench/lean.config" "$stage/qemu/config/lean.config"

kernel_dir=$(SRNIC_CACHE=$cache_root "$stage/scripts/build-kernel.sh")
# Mark the kernel as used, so that pruning keeps it.
touch "$kernel_dir"
echo "$kernel_dir"
