#!/usr/bin/env bash
# The daemon's peak memory under -o mem= against the bound it keeps: for each budget and
# workload a fresh mount of TREE packed in small shards, the workload run and checked against
# the tree, and the daemon's VmHWM (from /proc) next to the budget plus the fixed overhead
# the test suite asserts (14 MiB). usage: bench/membound.sh BUILD_DIR TREE TITLE [SHARD [MEMS]]
# (SHARD: pack's --shard-size, default 64K; MEMS: budgets, default "1M 4M 16M"). Needs root.
set -euo pipefail
build=$1 tree=$2 title=$3 shard=${4:-64K} mems=${5:-1M 4M 16M}
. "$(dirname "$0")/lib.sh"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/membound.XXXXXX")
m=$w/mnt
trap 'fusermount3 -u "$m" 2>/dev/null || true; rm -rf "$w"' EXIT
mkdir -p "$m" "$w/edited"
"$build/tadoc" pack -q "$tree" -o "$w/orig.tdc" --shard-size "$shard"
shards=$("$build/tadoc" stat "$w/orig.tdc" | awk '/^shards/ {print $2}')
sub=$(cd "$tree" && find . -mindepth 1 -maxdepth 1 -type d | sort | head -1 | cut -c3-)
files=$(find "$tree" -type f | wc -l)

# The same edits through the mount ($1) and to a copy of the tree ($w/edited): appends to a
# tenth of the files of $sub, a new file, a removal.
edit() {
    local d=$1 f
    (cd "$tree" && find "$sub" -type f | sort | awk 'NR % 10 == 1') | while IFS= read -r f; do
        echo "an edit of $f" >>"$d/$f"
    done
    echo "a new file" >"$d/$sub/new-file"
    rm -f "$d/$(cd "$tree" && find "$sub" -type f | sort | tail -1)"
}
rm -rf "$w/edited"
cp -r "$tree" "$w/edited"
edit "$w/edited"
"$build/tadoc" pack -q "$w/edited" -o "$w/edited.tdc"

# workload NAME: run it on the mount $m; prints "ok" or what differed.
workload() {
    case $1 in
    tar) tar cf - -C "$m" . | tar xf - -C "$w/x" && diff -rq "$tree" "$w/x" >/dev/null ;;
    readers16)
        (cd "$tree" && find . -type f | sort) | split -n r/16 - "$w/part."
        for p in "$w"/part.*; do
            (while IFS= read -r f; do cmp -s "$m/$f" "$tree/$f" || exit 1; done <"$p") &
        done
        local rc=0
        for p in "$w"/part.*; do wait -n || rc=1; done
        rm -f "$w"/part.*
        return $rc
        ;;
    grep) diff -q <(cd "$m" && grep -r -c the . | sort) <(cd "$tree" && grep -r -c the . | sort) >/dev/null ;;
    .wordcount | .invindex | .termvector | .seqcount | .rankedinvindex)
        cmp -s <(cat "$m/$1") <(TADOC_SHARDS=whole "$build/tadoc" "${1#.}" "$w/orig.tdc") ;;
    .search) cmp -s <(cat "$m/.search/the") <(cat "$w/whole/.search/the") ;;
    edited-analytics)
        edit "$m"
        cmp -s <(cat "$m/$sub/.wordcount") <("$build/tadoc" wordcount "$w/edited.tdc" "$sub") &&
            cmp -s <(cat "$m/.invindex") <("$build/tadoc" invindex "$w/edited.tdc") &&
            cat "$m/.search/edit" >/dev/null ;;
    compact) edit "$m" && setfattr -n user.tadoc.compact -v 1 "$m" && diff -rq "$w/edited" "$m" >/dev/null ;;
    esac
}

mkdir -p "$w/whole"
"$build/tadocfs" "$w/orig.tdc" "$w/whole" -o ro,mem=whole
echo "Tree: $title, $files files, packed with \`--shard-size $shard\` into $shards shards. Each row"
echo "a fresh mount with \`-o mem=BUDGET\`; the peak is the daemon's VmHWM after the workload, the"
echo "bound the budget plus 14 MiB (the fixed overhead the test suite asserts: file table,"
echo "libfuse's threads and buffers, allocator slack); over it the merged output of an analytic"
echo "may go (docs/DESIGN.md, section 10). Outputs are checked against the tree, \`tadoc\` on the"
echo "archive loaded whole, or a mount with \`mem=whole\`."
echo
echo "| workload | budget | peak MiB | bound MiB | seconds | cache: loads over / peak MiB | output |"
echo "|---|---|---|---|---|---|---|"
for mem in $mems; do
    for wl in tar readers16 grep .wordcount .invindex .termvector .seqcount .rankedinvindex \
        .search edited-analytics compact; do
        cp "$w/orig.tdc" "$w/a.tdc"
        rm -f "$w/a.tdc.journal"
        "$build/tadocfs" "$w/a.tdc" "$m" -o "mem=$mem"
        pid=$(pgrep -f "^$build/tadocfs $w/a.tdc $m" | head -1)
        rm -rf "$w/x" && mkdir "$w/x"
        t0=$(now)
        out=ok
        workload "$wl" || out=DIFFERS
        secs=$(since "$t0")
        peak=$(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status")
        cache=$(getfattr -n user.tadoc.shard_cache --only-values "$m" 2>/dev/null |
            sed 's/.* \([0-9]*\) peak, [0-9]* waits, \([0-9]*\) over.*/\2 \1/' |
            awk '{ printf "%d / %.1f", $1, $2 / 1048576 }')
        fusermount3 -u "$m"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        bound=$(awk -v m="$mem" 'BEGIN { printf "%d", m + 14 }')
        echo "| $wl | $mem | $peak | $bound | $secs | $cache | $out |"
    done
done
fusermount3 -u "$w/whole"
