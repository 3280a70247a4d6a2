#!/bin/sh
# Prints the kernel version to build for: the running kernel when its headers
# are installed, else the newest kernel with headers under /lib/modules.
if [ -d "/lib/modules/$(uname -r)/build" ]; then
	uname -r
	exit 0
fi
for dir in /lib/modules/*/build; do
	[ -d "$dir" ] && basename "$(dirname "$dir")"
done | sort -V | tail -n 1
