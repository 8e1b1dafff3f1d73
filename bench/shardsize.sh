#!/usr/bin/env bash
# The shard size against what it trades: archive size, pack time, the first byte after a cold
# mount (one shard decoded), a read from another shard, and whole-archive word count (more
# shards, more parts to merge). Each size packs the tree afresh; reads follow
# `echo 3 > /proc/sys/vm/drop_caches` (root) and a fresh mount with -o mem=256M (so the
# daemon loads spans only); first byte = the first byte of FILE1 after mount returns, other
# shard = then the first byte of FILE2, both timed by bench/firstbyte (open and a one-byte
# read in one process, so no process start is counted). Median of five mounts.
# usage: bench/shardsize.sh BUILD_DIR TREE NAME FILE1 FILE2 [SIZE...]   (default 8M 16M 32M)
set -euo pipefail
[ $# -ge 5 ] || { echo "usage: $0 BUILD_DIR TREE NAME FILE1 FILE2 [SIZE...]" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
build=$1 tree=$2 name=$3 f1=$4 f2=$5
shift 5
sizes=${*:-8M 16M 32M}
w=$(mktemp -d "${BENCH_TMP:-/tmp}/shardsize.XXXXXX")
trap 'mountpoint -q "$w/m" && fusermount3 -u "$w/m"; rm -rf "$w"' EXIT
mkdir "$w/m"
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
wait_gone() { while pgrep -f "tadocfs $1" >/dev/null; do sleep 0.1; done; }

echo "### $name: $(mb "$(du -sb "$tree" | cut -f1)") MB, $(nproc) CPUs"
echo
echo "| shard size | shards | archive MB | pack s | first byte after mount ms | another shard ms | wordcount s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for s in $sizes; do
    a=$w/a-$s.tdc
    t0=$(now)
    "$build/tadoc" pack -q "$tree" -o "$a" --shard-size "$s"
    pk=$(since "$t0")
    n=$("$build/tadoc" stat "$a" | awk '/^shards/ {print $2}')
    : >"$w/fb"
    : >"$w/ob"
    for _ in 1 2 3 4 5; do
        drop_caches
        "$build/tadocfs" "$a" "$w/m" -o ro,mem=256M
        "$build/bench/firstbyte" "$w/m/$f1" "$w/m/$f2" >"$w/t"
        awk 'NR == 1 { print $1 }' "$w/t" >>"$w/fb"
        awk 'NR == 2 { print $1 }' "$w/t" >>"$w/ob"
        fusermount3 -u "$w/m"
        wait_gone "$a"
    done
    t0=$(now)
    "$build/tadoc" wordcount "$a" >/dev/null
    wc=$(since "$t0")
    echo "| $s | $n | $(mb "$(stat -c %s "$a")") | $pk | $(median <"$w/fb") | $(median <"$w/ob") | $wc |"
    rm -f "$a"
done
echo
echo "Command: \`$0 $build $tree $name $f1 $f2 $sizes\`."
