#!/bin/sh
# Prints the kernel version to build and test for (make, selftests/vm/vmrun;
# KVER=... chooses another):
# 1. the running kernel, when its headers are installed;
# 2. else the kernel Debian's linux-image-amd64 meta package installs (on
#    Debian 12: 6.1), when it and its headers are installed: installing a
#    second kernel (Debian 12 also ships 6.12) does not change the default;
# 3. else the newest installed kernel (one with /boot/vmlinuz-*) with
#    headers under /lib/modules. The VM suites' debug kernel
#    (scripts/debug-kernel.sh) has headers there but no /boot image, so it
#    is never the default.
installed() {
	[ -d "/lib/modules/$1/build" ] && [ -f "/boot/vmlinuz-$1" ]
}

if [ -d "/lib/modules/$(uname -r)/build" ]; then
	uname -r
	exit 0
fi
v=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
	sed -n 's/^linux-image-\([^ ,]*\).*/\1/p')
if [ -n "$v" ] && installed "$v"; then
	echo "$v"
	exit 0
fi
for dir in /lib/modules/*/build; do
	v=$(basename "$(dirname "$dir")")
	installed "$v" && echo "$v"
done | sort -V | tail -n 1
