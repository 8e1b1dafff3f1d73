#!/usr/bin/env bash
# One large file's compaction through the mount: a file of SIZE bytes of the tree's text
# written into a copy of ARCHIVE through tadocfs (no background compaction), then one
# compaction (user.tadoc.compact): its time, the daemon's peak resident memory, the shards
# before and after and the largest shard after, and the file read back against what was
# written; then a line appended to the file and a second compaction by a fresh daemon (its
# time and peak), the file read back again. The daemon runs at its
# default memory budget.
# usage: [SIZES="268435456 ..."] bench/compactbig.sh BUILD_DIR ARCHIVE TREE NAME
# (markdown on stdout; needs root for the mount)
set -euo pipefail
build=$(cd "$1" && pwd) archive=$2 tree=$(cd "$3" && pwd) name=$4
sizes=${SIZES:-268435456}
w=$(mktemp -d "${BENCH_TMP:-/tmp}/compactbig.XXXXXX")
trap 'fusermount3 -u "$w/m" 2>/dev/null || true; rm -rf "$w"' EXIT
mkdir "$w/m"
now() { date +%s.%N; }
shards() { "$build/tadoc" stat "$1" | awk '/^shards/ {print $2}'; }
largest() { "$build/tadoc" stat "$1" | awk '$1 ~ /^[0-9]+$/ && NF == 6 && $2 > m {m = $2} END {print m + 0}'; }
echo "### $name: one file of SIZE bytes compacted"
echo
echo "Archive $(basename "$archive"), $(shards "$archive") shards, the largest $(largest "$archive") bytes of content;"
echo "text: the tree's *.c and *.h files concatenated, cut to SIZE."
echo
echo "| size MB | compaction s | daemon peak RSS MB | shards after | largest shard after, MB | read back | a line appended: compaction s | its peak RSS MB | read back |"
echo "|---:|---:|---:|---:|---:|---|---:|---:|---|"
for size in $sizes; do
    (cd "$tree" && find . -type f -name '*.[ch]' -print0 | sort -z | xargs -0 cat) 2>/dev/null |
        head -c "$size" >"$w/text" || true
    [ "$(stat -c %s "$w/text")" -eq "$size" ] || { echo "compactbig.sh: tree too small for $size" >&2; exit 1; }
    rm -f "$w"/a.tdc*
    cp "$archive" "$w/a.tdc"
    "$build/tadocfs" -o compact_threshold=0 "$w/a.tdc" "$w/m"
    pid=$(pgrep -n -f -- "tadocfs -o compact_threshold=0 $w/a.tdc")
    cp "$w/text" "$w/m/big"
    sync
    t0=$(now)
    setfattr -n user.tadoc.compact -v 1 "$w/m"
    t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    peak=$(awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
    [ "$(getfattr --absolute-names -n user.tadoc.compactions --only-values "$w/m")" -eq 1 ]
    ok=$(cmp -s "$w/m/big" "$w/text" && echo equal || echo DIFFERS)
    fusermount3 -u "$w/m"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    nsh=$(shards "$w/a.tdc") big=$(largest "$w/a.tdc")
    # The append: a fresh daemon, so that its peak is the second compaction's.
    "$build/tadocfs" -o compact_threshold=0 "$w/a.tdc" "$w/m"
    pid=$(pgrep -n -f -- "tadocfs -o compact_threshold=0 $w/a.tdc")
    echo "a line appended after the compaction" | tee -a "$w/text" >>"$w/m/big"
    sync
    t0=$(now)
    setfattr -n user.tadoc.compact -v 1 "$w/m"
    t2=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    peak2=$(awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
    ok2=$(cmp -s "$w/m/big" "$w/text" && echo equal || echo DIFFERS)
    fusermount3 -u "$w/m"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    echo "| $((size / 1000000)) | $t | $peak | $nsh | $(awk -v b="$big" 'BEGIN { printf "%.1f", b / 1e6 }') | $ok | $t2 | $peak2 | $ok2 |"
    [ "$ok" = equal ] && [ "$ok2" = equal ] || exit 1
done
