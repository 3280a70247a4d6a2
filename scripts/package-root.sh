#!/bin/bash
# Installs the Debian packages (make deb) into a fresh root, the way an
# administrator would, for the package VM test (selftests/metaroce/package.sh),
# and purges them from it afterwards:
#
#   scripts/package-root.sh install DEBDIR OUTDIR
#   scripts/package-root.sh purge OUTDIR
#
# The root is this machine's own, seen through overlays in a private mount
# namespace: /usr, /etc and /var are overlays whose upper layers are
# OUTDIR/upper/{usr,etc,var}, so nothing on the host changes and the VM
# can stack the same upper layers over its view of the host root.
#
# install: dpkg -i the three packages (DKMS builds and installs the module
# for the kernels with headers: in a chroot, all of them); then the module
# is removed for the first kernel and rebuilt by /etc/kernel/postinst.d/dkms,
# which is what installing or upgrading a kernel package runs. Output in
# OUTDIR/install.log.
#
# purge: dpkg --purge the packages and check, printing TAP, that nothing
# they installed and nothing DKMS built is left. It runs here rather than in
# the VM because removing the module runs depmod for every kernel, minutes
# under emulation and a second natively.
set -euo pipefail
mode=${1:?install or purge}
PACKAGES="metaroce-tools ibverbs-provider-metaroce metaroce-dkms"

# in_root OUTDIR SCRIPT ARGS...: SCRIPT (bash) with $root set, in a private
# mount namespace where $root is the overlaid root; ARGS are its $1...
in_root() {
	local out=$1 script=$2
	shift 2
	mkdir -p "$out/root" "$out/upper" "$out/work"
	# shellcheck disable=SC2016
	unshare -m --propagation private bash -c '
set -euo pipefail
out=$1 script=$2
shift 2
root=$out/root
mount -t tmpfs -o mode=0755 pkgroot "$root"
for path in /*; do
	name=${path#/}
	if [[ -L $path ]]; then
		ln -s "$(readlink "$path")" "$root/$name"
		continue
	fi
	[[ -d $path ]] || continue
	mkdir "$root/$name"
	case $name in
	usr | etc | var)
		mkdir -p "$out/upper/$name" "$out/work/$name"
		mount -t overlay "pkg-$name" -o "lowerdir=/$name,upperdir=$out/upper/$name,workdir=$out/work/$name" "$root/$name"
		;;
	proc) mount -t proc proc "$root/proc" ;;
	dev) mount --rbind /dev "$root/dev" ;;
	sys) mount --rbind /sys "$root/sys" ;;
	tmp | run) mount -t tmpfs -o mode=1777 "pkg-$name" "$root/$name" ;;
	boot) mount --bind -o ro /boot "$root/boot" ;;
	esac
done
export DEBIAN_FRONTEND=noninteractive root
eval "$script"
' package-root "$out" "$script" "$@"
	rm -rf "$out/root" "$out/work"
}

# shellcheck disable=SC2016
install_script='
# A fresh root has no metaroce.ko of "make install" (CI puts one on the
# host); DKMS would keep it as the original module and put it back.
find "$root/lib/modules/" -path "*/updates/*" -name "metaroce.ko*" -print -delete
mkdir "$root/tmp/debs"
cp "$@" "$root/tmp/debs/"
echo "# dpkg -i ${*##*/}"
chroot "$root" sh -c "dpkg -i /tmp/debs/*.deb"
# A kernel installed or upgraded later: its package runs the kernel
# postinst hooks, that of DKMS among them. Shown on the first kernel with
# headers, its module removed first.
kver=$(ls -v "$root/lib/modules" | while read -r k; do
	[[ -d $root/lib/modules/$k/build ]] && echo "$k"
done | head -n 1)
version=$(chroot "$root" dpkg-query -W -f="\${Version}" metaroce-dkms)
echo "# dkms remove metaroce/$version -k $kver, then /etc/kernel/postinst.d/dkms $kver"
chroot "$root" dkms remove "metaroce/$version" -k "$kver"
chroot "$root" sh -c "! dkms status -k $kver metaroce | grep -q installed"
chroot "$root" /etc/kernel/postinst.d/dkms "$kver"
echo "# dkms status"
chroot "$root" dkms status
'

# shellcheck disable=SC2016
purge_script='
n=0 failed=0
check() {
	local name=$1
	shift
	n=$((n + 1))
	if res=$("$@" 2>&1); then
		echo "ok $n - $name"
	else
		printf "%s\n" "$res" | sed "s/^/# /"
		echo "not ok $n - $name"
		failed=1
	fi
}
files() {
	chroot "$root" dpkg-query -L $PACKAGES | while read -r f; do
		[[ -f $root$f || -L $root$f ]] && echo "$f"
	done | sort -u
}
left_files() {
	local f left=0
	while read -r f; do
		[[ -e $root$f || -L $root$f ]] && { echo "left: $f"; left=1; }
	done <"$out/files.txt"
	return "$left"
}
not_known() {
	local pkg status
	for pkg in $PACKAGES; do
		status=$(chroot "$root" dpkg-query -W -f="\${db:Status-Status}" "$pkg" 2>/dev/null || true)
		[[ -z $status || $status == not-installed ]] || { echo "$pkg: $status"; return 1; }
	done
}
no_dkms_state() {
	chroot "$root" dkms status -m metaroce | grep . && return 1
	[[ ! -e $root/var/lib/dkms/metaroce ]] || { ls -R "$root/var/lib/dkms/metaroce"; return 1; }
	! ls -d "$root"/usr/src/metaroce-* 2>/dev/null
}
no_module() {
	local dir kver bad=0
	for dir in "$root"/lib/modules/*/build; do
		kver=$(basename "$(dirname "$dir")")
		find "$root/lib/modules/$kver" -name "metaroce*.ko*" | grep . && bad=1
		grep -H metaroce "$root/lib/modules/$kver/modules.dep" && bad=1
		chroot "$root" modinfo -k "$kver" metaroce >/dev/null 2>&1 && { echo "modinfo -k $kver finds it"; bad=1; }
	done
	return "$bad"
}
files >"$out/files.txt"
echo "# $(wc -l <"$out/files.txt") files installed by $PACKAGES"
check "dpkg --purge the packages" chroot "$root" dpkg --purge $PACKAGES
check "dpkg knows none of them" not_known
check "none of their files is left" left_files
check "no DKMS state or source left" no_dkms_state
check "no module left for any kernel, none in modules.dep" no_module
exit "$failed"
'

case $mode in
install)
	debdir=$(realpath "${2:?DEBDIR}")
	out=$(realpath -m "${3:?OUTDIR}")
	debs=("$debdir"/metaroce-dkms_*.deb "$debdir"/ibverbs-provider-metaroce_*.deb
		"$debdir"/metaroce-tools_*.deb)
	for deb in "${debs[@]}"; do
		[[ -f $deb ]] || {
			echo "package-root: no $deb (make deb)" >&2
			exit 1
		}
	done
	rm -rf "$out"
	mkdir -p "$out"
	in_root "$out" "$install_script" "${debs[@]}" >"$out/install.log" 2>&1 || {
		tail -n 40 "$out/install.log"
		echo "package-root: installing the packages failed (log: $out/install.log)" >&2
		exit 1
	}
	grep -v "^readelf: Warning" "$out/install.log"
	;;
purge)
	out=$(realpath "${2:?OUTDIR}")
	export PACKAGES
	in_root "$out" "$purge_script"
	;;
*)
	echo "usage: package-root.sh install DEBDIR OUTDIR | purge OUTDIR" >&2
	exit 2
	;;
esac
