#!/usr/bin/env bash
# make deb: build the Debian packages (debian/) with dpkg-buildpackage -us -uc -b from a copy
# of the sources, so the build writes nothing into the working tree beyond build/, and run
# lintian on them. Results: build/deb-out/*.deb, *.changes, *.buildinfo, lintian.txt, and
# build.log. The build is skipped when build/deb-out holds packages built from the same
# sources (a digest of every source file is kept in build/deb-out/sources.sha256).
# usage: tools/mkdeb.sh   (DEB_FORCE=1 rebuilds anyway)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out="$top/build/deb-out"
src="$top/build/deb-src"
# What the package build reads: the Makefile, the library and tool sources, headers, man
# pages, completion, docs and debian/ (GPU=0 builds no CUDA: kernels/ is not needed, nor
# tests/ and bench/).
parts=(Makefile README.md engine lib include fs tools man docs debian)
digest=$(find "${parts[@]}" -type f ! -name '*.o' ! -name '*.d' -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ -z "${DEB_FORCE:-}" ] && [ -f "$out/sources.sha256" ] &&
    [ "$(cat "$out/sources.sha256")" = "$digest" ] && ls "$out"/tadoc_*.deb >/dev/null 2>&1; then
    echo "mkdeb: build/deb-out is up to date with the sources"
    exit 0
fi
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
rm -rf "$src" "$out"
mkdir -p "$src/tadoc-$version" "$out"
tar cf - --exclude='*.o' --exclude='*.d' "${parts[@]}" | tar xf - -C "$src/tadoc-$version"
echo "mkdeb: dpkg-buildpackage -us -uc -b in build/deb-src/tadoc-$version (log: build/deb-out/build.log)"
if ! (cd "$src/tadoc-$version" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
    tail -40 "$out/build.log" >&2
    echo "mkdeb: dpkg-buildpackage failed (build/deb-out/build.log)" >&2
    exit 1
fi
mv "$src"/*.deb "$src"/*.changes "$src"/*.buildinfo "$out"/
rm -rf "$src"
# lintian exits nonzero on errors; its report is kept either way.
changes=$(ls "$out"/*.changes)
lint=0
lintian --info --display-info "$changes" >"$out/lintian.txt" 2>&1 || lint=$?
cat "$out/lintian.txt"
if [ "$lint" -ne 0 ] || grep -q '^E: ' "$out/lintian.txt"; then
    echo "mkdeb: lintian reports errors (build/deb-out/lintian.txt)" >&2
    exit 1
fi
echo "$digest" >"$out/sources.sha256"
ls -l "$out"/*.deb
