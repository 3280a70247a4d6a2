#!/bin/bash
# make deb: builds the Debian packages (debian/) from a clean copy of the
# tree, so nothing the package build writes lands in the checkout.
#
#   scripts/build-deb.sh [OUTDIR]      default OUTDIR: build/deb
#
# OUTDIR gets metaroce-dkms_*.deb, ibverbs-provider-metaroce_*.deb,
# metaroce-tools_*.deb and the lintian report (lintian.txt); the script
# fails if lintian reports an error or a warning.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$TOP/build/deb}")
version=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)
src=$out/metaroce-$version

rm -rf "$out"
mkdir -p "$src"
# The files git knows of (tracked, or new and not ignored); a tree that is
# not a git checkout is copied without its build directory.
if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$TOP" ls-files -z --cached --others --exclude-standard |
		(cd "$TOP" && xargs -0 tar --no-recursion -cf - --) | tar -xf - -C "$src"
else
	tar -C "$TOP" --exclude=./build -cf - . | tar -xf - -C "$src"
fi

(cd "$src" && dpkg-buildpackage -b -us -uc -j"$(nproc)") >"$out/build.log" 2>&1 || {
	tail -n 40 "$out/build.log"
	echo "build-deb: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
}
rm -rf "$src"
ls "$out"/*.deb

lintian --allow-root --info --display-info --pedantic "$out"/*.changes >"$out/lintian.txt" 2>&1 || true
cat "$out/lintian.txt"
if grep -qE '^[EW]: ' "$out/lintian.txt"; then
	echo "build-deb: lintian reports errors or warnings ($out/lintian.txt)" >&2
	exit 1
fi
