#!/bin/bash
# The debug kernel of the VM selftests: Debian's linux-source-6.1 built with
# KASAN, KFENCE, UBSAN, lockdep, kmemleak, object debugging, lockup and hang
# detectors and fault injection (selftests/vm/debug-kernel/debug.config).
#
#   scripts/debug-kernel.sh build    build it unless cached; install it
#   scripts/debug-kernel.sh kver     print its version (builds if needed)
#   scripts/debug-kernel.sh image    print the path of its bzImage
#   scripts/debug-kernel.sh key      print the cache key
#
# The build is cached in $METAROCE_CACHE (default /var/cache/metaroce) under a
# key hashed from every input: the source package's version, the config
# fragment, the build recipe's version (RECIPE) and the compiler. A clean machine builds it once
# (about 25 minutes on 2 cores); later runs reuse it. "Installed" means its
# modules are under /lib/modules/KVER (with the build tree as its "build"
# link, the KDIR for out-of-tree modules), where a vmrun guest, which sees
# the host root, finds them. /boot is not touched: vmrun boots the bzImage
# given with --kernel, and the host's default kernel stays Debian's.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
FRAGMENT=$TOP/selftests/vm/debug-kernel/debug.config
SOURCE_PKG=linux-source-6.1
TARBALL=/usr/src/$SOURCE_PKG.tar.xz
CACHE=${METAROCE_CACHE:-/var/cache/metaroce}

die() {
	echo "debug-kernel: $*" >&2
	exit 1
}

# Bump when build() changes what it produces.
RECIPE=1

cache_key() {
	{
		echo "recipe $RECIPE"
		dpkg-query -W -f='${Version}\n' "$SOURCE_PKG" 2>/dev/null || echo none
		cat "$FRAGMENT"
		gcc --version | head -n 1
	} | sha256sum | cut -c1-16
}

# The packages a kernel build needs, from Debian's archive.
install_build_deps() {
	local pkgs=($SOURCE_PKG bc bison flex libelf-dev libssl-dev cpio xz-utils
		rsync kmod) missing=() p
	for p in "${pkgs[@]}"; do
		[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] ||
			missing+=("$p")
	done
	((${#missing[@]} == 0)) && return
	echo "debug-kernel: installing ${missing[*]}" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >&2 || {
		apt-get update -q >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends "${missing[@]}" >&2
	}
}

# check_config CONFIG: every option of the fragment has the value it asks.
check_config() {
	local line opt want got bad=0
	while IFS= read -r line; do
		if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
			opt=${BASH_REMATCH[1]} want=${BASH_REMATCH[2]}
		elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
			opt=${BASH_REMATCH[1]} want=n
		else
			continue
		fi
		got=$(sed -n "s/^$opt=//p" "$1")
		[[ -n $got ]] || got=n
		if [[ $got != "$want" ]]; then
			echo "debug-kernel: $opt is '$got', the fragment asks '$want'" >&2
			bad=1
		fi
	done <"$FRAGMENT"
	return "$bad"
}

# Unpacks and configures the source in OUT/src (OUT/configured marks it).
configure() {
	local out=$1 src=$1/src
	rm -rf "$out"
	mkdir -p "$out"
	echo "debug-kernel: unpacking $TARBALL" >&2
	tar -C "$out" -xf "$TARBALL"
	mv "$out/$SOURCE_PKG" "$src"
	cp "$FRAGMENT" "$src/kernel/configs/metaroce_debug.config"
	(
		cd "$src"
		make -s x86_64_defconfig
		scripts/kconfig/merge_config.sh -m .config \
			kernel/configs/kvm_guest.config \
			kernel/configs/metaroce_debug.config >/dev/null
		make -s olddefconfig
	) >&2
	check_config "$src/.config" || die "the configuration did not take"
	touch "$out/configured"
}

# A build that was stopped half way (the key names its inputs) goes on
# where it stopped: make is incremental.
build() {
	local out=$1 src=$1/src tmp
	install_build_deps
	[[ -r $TARBALL ]] || die "$TARBALL missing (apt-get install $SOURCE_PKG)"
	[[ -f $out/configured ]] || configure "$out"
	echo "debug-kernel: building (log: $out/build.log)" >&2
	if ! make -C "$src" -j "$(nproc)" bzImage modules \
		>"$out/build.log" 2>&1; then
		tail -n 40 "$out/build.log" >&2
		die "build failed"
	fi
	make -C "$src" -s INSTALL_MOD_PATH="$out/root" modules_install >&2
	cp "$src/arch/x86/boot/bzImage" "$out/bzImage"
	make -C "$src" -s kernelrelease >"$out/kver"
	# Out-of-tree builds need only the prepared tree: drop the objects.
	tmp=$(cat "$out/kver")
	ln -sfn "$src" "$out/root/lib/modules/$tmp/build"
	rm -f "$out/root/lib/modules/$tmp/source"
	touch "$out/done"
}

# Puts the cached kernel's modules under /lib/modules/KVER (a copy: the
# module of the project is installed into it beside them).
install_modules() {
	local out=$1 kver
	kver=$(<"$out/kver")
	if [[ $(cat "/lib/modules/$kver/.metaroce-key" 2>/dev/null) != "$(basename "$out")" ]]; then
		rm -rf "/lib/modules/$kver"
		cp -a "$out/root/lib/modules/$kver" "/lib/modules/$kver"
		basename "$out" >"/lib/modules/$kver/.metaroce-key"
	fi
	depmod -a "$kver"
}

ensure() {
	local out
	out=$CACHE/debug-kernel-$(cache_key)
	if [[ ! -f $out/done ]]; then
		mkdir -p "$CACHE"
		# Drop builds of other configurations: each takes gigabytes.
		find "$CACHE" -maxdepth 1 -name 'debug-kernel-*' ! -path "$out" \
			-exec rm -rf {} +
		build "$out"
	fi
	install_modules "$out"
	echo "$out"
}

# The bzImage: QEMU's PVH entry into the vmlinux triple-faults at once with
# KASAN. (A build cached before the bzImage was kept makes it now.)
image() {
	local out
	out=$(ensure)
	if [[ ! -f $out/bzImage ]]; then
		make -C "$out/src" -s -j "$(nproc)" bzImage >&2
		cp "$out/src/arch/x86/boot/bzImage" "$out/bzImage"
	fi
	echo "$out/bzImage"
}

case ${1:-build} in
build) ensure >/dev/null ;;
kver) cat "$(ensure)/kver" ;;
image) image ;;
key) cache_key ;;
*) die "usage: $0 build|kver|image|key" ;;
esac
