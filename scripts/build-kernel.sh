#!/usr/bin/env bash
# Build the test kernel from Debian's linux-source-6.12 and the fragments in
# qemu/config/, cached outside the repository. The cache key covers everything
# that goes into the kernel: the source package version, the fragments, this
# script and the toolchain versions. Prints the kernel's cache directory.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${SRNIC_CACHE:-$HOME/.cache/srnic}
jobs=${JOBS:-$(nproc)}
source_tar=/usr/src/linux-source-6.12.tar.xz
export PATH="$HOME/.cargo/bin:$PATH"

toolchain=(LLVM=1 RUSTC=/usr/bin/rustc HOSTRUSTC=/usr/bin/rustc BINDGEN=bindgen)

key=$( {
	dpkg-query -W -f='${Version}\n' linux-source-6.12
	cat "$top"/qemu/config/*.config "$0"
	clang --version | head -n1
	/usr/bin/rustc --version
	bindgen --version
} | sha256sum | cut -c1-16)

kernel_dir=$cache_root/kernel-$key
if [ -f "$kernel_dir/.complete" ]; then
	echo "$kernel_dir"
	exit 0
fi

echo "build-kernel: building test kernel $key (about 25 minutes on 2 cores)" >&2
# Build in place: the build tree records absolute paths, so it cannot be
# moved afterwards. A directory without .complete is a failed or interrupted
# build and starts over.
work=$kernel_dir
rm -rf "$work"
mkdir -p "$work"

tar -C "$work" -xf "$source_tar"
mv "$work"/linux-source-6.12 "$work/src"
kmake() { make -C "$work/src" O="$work/build" "${toolchain[@]}" "$@"; }

kmake -s allnoconfig >&2
"$work/src/scripts/kconfig/merge_config.sh" -m -O "$work/build" \
	"$work/build/.config" "$top"/qemu/config/*.config >&2
kmake -s olddefconfig >&2

# A fragment option that Kconfig dropped (an unmet dependency) would silently
# weaken the tests; refuse to build such a kernel.
dropped=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n) want="# ${line%%=*} is not set" ;;
	CONFIG_*) want=$line ;;
	*) continue ;;
	esac
	if ! grep -qxF "$want" "$work/build/.config"; then
		echo "build-kernel: requested '$line' but .config has:" \
			"$(grep -E "^(# )?${line%%=*}[= ]" "$work/build/.config" || echo nothing)" >&2
		dropped=1
	fi
done < <(cat "$top"/qemu/config/*.config)
[ "$dropped" -eq 0 ] || exit 1

kmake -j"$jobs" bzImage modules >&2
kmake -s INSTALL_MOD_PATH="$work/modroot" INSTALL_MOD_STRIP=1 modules_install >&2

touch "$work/.complete"
# Keep only the newest few kernels.
ls -1dt "$cache_root"/kernel-* | tail -n +4 | xargs -r rm -rf
echo "$kernel_dir"
