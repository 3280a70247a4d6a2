#!/bin/sh
# Prints the kernel version to build for: the running kernel when its headers
# are installed, else Debian's default kernel (the one the linux-image-amd64
# package depends on) when it is installed with headers, else the newest
# installed kernel (one with /boot/vmlinuz-*) with headers under /lib/modules.
# The VM suites' debug kernel (scripts/debug-kernel.sh) has headers there but
# no /boot image, so it is never the default; nor is Debian's 6.12, whose
# headers package pulls in its image (scripts/install-deps.sh): it is built
# for on the side (make kernel-6.12) and booted only when asked for.
#
#   scripts/target-kernel.sh [--vm]
#
# --vm: the kernel the VMs boot by default (selftests/vm/vmrun): the same
# rule, but one with a /boot image and modules is enough, headers or not.
need=build
[ "${1:-}" = --vm ] && need=
has() {
	[ -f "/boot/vmlinuz-$1" ] && [ -d "/lib/modules/$1/$need" ]
}
if [ -n "$need" ] && [ -d "/lib/modules/$(uname -r)/build" ]; then
	uname -r
	exit 0
fi
v=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
	sed -n 's/^linux-image-\([^ ,|]*\).*/\1/p')
if [ -n "$v" ] && has "$v"; then
	echo "$v"
	exit 0
fi
for dir in /lib/modules/*/; do
	v=$(basename "$dir")
	has "$v" && echo "$v"
done | sort -V | tail -n 1
