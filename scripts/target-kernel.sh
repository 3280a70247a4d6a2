#!/bin/sh
# Prints the kernel version to build for: the running kernel when its headers
# are installed, else the newest installed kernel (one with /boot/vmlinuz-*)
# with headers under /lib/modules. The VM suites' debug kernel
# (scripts/debug-kernel.sh) has headers there but no /boot image, so it is
# never the default.
if [ -d "/lib/modules/$(uname -r)/build" ]; then
	uname -r
	exit 0
fi
for dir in /lib/modules/*/build; do
	v=$(basename "$(dirname "$dir")")
	[ -d "$dir" ] && [ -f "/boot/vmlinuz-$v" ] && echo "$v"
done | sort -V | tail -n 1
