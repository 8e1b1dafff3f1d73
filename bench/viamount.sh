#!/usr/bin/env bash
# `tadoc ANALYTIC` computed in its own process against read from a tadocfs daemon that has the
# archive mounted (TADOC_VIA_MOUNT=1): the tool on the CPU (TADOC_GPU=off) and with the GPU
# (TADOC_GPU=on, where one is usable: CUDA's start and the upload in the process), then
# through a mount made for the run (-o ro,gpu=MODE; GPU_MODE, default auto) the first call
# (the daemon computes, with its resident copy) and a repeated one (its cache of results).
# Wall seconds of the whole tadoc process; every output compared with the CPU's (MISMATCH,
# exit 1). usage: bench/viamount.sh BUILD_DIR ARCHIVE NAME   (a markdown table on stdout)
#   ANALYTICS="wordcount ..." (default all six). Needs root or the user's FUSE.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR ARCHIVE NAME" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
build=$1 a=$2 name=$3
tadoc="$build/tadoc"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/viamount.XXXXXX")
m=$w/mnt
mkdir "$m"
trap 'fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null; rm -rf "$w"' EXIT
analytics=${ANALYTICS:-wordcount sort invindex termvector seqcount rankedinvindex}
gpu=0
"$tadoc" --version 2>/dev/null | grep -q 'gpu backend on' && nvidia-smi >/dev/null 2>&1 && gpu=1
"$build/tadocfs" "$a" "$m" -o "ro,gpu=${GPU_MODE:-auto}"
for _ in $(seq 100); do grep -q " $m " /proc/mounts && break; sleep 0.05; done
bytes=$("$tadoc" stat "$a" | awk '/^content/ {print $2}')

echo "### $name: $(mb "$bytes") MB of content; $(nproc) CPUs$([ $gpu = 1 ] && echo ", $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"); mount -o gpu=${GPU_MODE:-auto}"
echo
echo "| analytic | tadoc, CPU s | tadoc, GPU s | via the mount, first s | via the mount, again s |"
echo "|---|---|---|---|---|"
bad=0
for an in $analytics; do
    cpu=$(TADOC_GPU=off wall "$tadoc" "$an" "$a")
    cp "$w/out" "$w/want"
    g=-
    if [ $gpu = 1 ]; then
        g=$(TADOC_GPU=on wall "$tadoc" "$an" "$a")
        cmp -s "$w/out" "$w/want" || { g="$g MISMATCH"; bad=1; }
    fi
    first=$(TADOC_VIA_MOUNT=1 wall "$tadoc" "$an" "$a")
    cmp -s "$w/out" "$w/want" || { first="$first MISMATCH"; bad=1; }
    again=$(TADOC_VIA_MOUNT=1 wall "$tadoc" "$an" "$a")
    cmp -s "$w/out" "$w/want" || { again="$again MISMATCH"; bad=1; }
    echo "| $an | $cpu | $g | $first | $again |"
done
echo
echo "Command: \`$0 $*\`. One run each; the daemon: \`$(getfattr -n user.tadoc.backend --only-values "$m" 2>/dev/null || python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.tadoc.backend").decode())' "$m")\`."
exit "$bad"
