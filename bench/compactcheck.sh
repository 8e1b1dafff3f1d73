#!/usr/bin/env bash
# The cost of a small edit's compaction in an archive of many shards, and the share of it
# spent checking the new archive before it replaces the old one: TREE is packed with
# --shard-size SHARD_SIZE (or ARCHIVE, a prebuilt archive of it, is copied), then ROUNDS times
# a fresh copy gets one line appended to one file (the regular file in the middle of `tadoc
# ls`) through `tadoc apply` and `tadoc compact --shard-size SHARD_SIZE` folds it in (an
# empty SHARD_SIZE: pack's and compaction's default shard size). Reports
# compact's wall time and its own build / write / check / switch times, the check split into
# reopening and indexing the new archive and reading files back (those whose content it
# extracted and hashed, counted); the last copy is then checked
# whole with `tadoc verify` and the appended line read back.
#
# usage: [BUILD=build/rel] [ARCHIVE=a.tdc] [SHARD_SIZE=8M] [ROUNDS=3]
#        bench/compactcheck.sh TREE NAME
# Markdown on stdout. Works under ${BENCH_TMP:-bench/tmp}.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/bench/lib.sh"
build=${BUILD:-build/rel}
case $build in /*) ;; *) build="$top/$build" ;; esac
[ $# -eq 2 ] || { echo "usage: bench/compactcheck.sh TREE NAME" >&2; exit 2; }
tree=$(cd "$1" && pwd) name=$2
SHARD_SIZE=${SHARD_SIZE-8M} ROUNDS=${ROUNDS:-3}
shard=(${SHARD_SIZE:+--shard-size "$SHARD_SIZE"})
tadoc=$build/tadoc
[ -x "$tadoc" ] || { echo "bench/compactcheck.sh: $tadoc is missing" >&2; exit 1; }
tmpbase=${BENCH_TMP:-$top/bench/tmp}
mkdir -p "$tmpbase"
w=$(mktemp -d "$tmpbase/compactcheck.XXXXXX")
trap 'rm -rf "$w"' EXIT

bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
if [ -n "${ARCHIVE:-}" ]; then
    cp "$ARCHIVE" "$w/base.tdc"
else
    "$tadoc" pack -q "${shard[@]}" "$tree" -o "$w/base.tdc"
fi
shards=$("$tadoc" stat "$w/base.tdc" | awk '/^shards/ { print $2 }')
"$tadoc" ls -l "$w/base.tdc" | perl -ne 'print "$1\n" if /^-\S+\s+\d+\s+\d+\s+\d+\s+\S+\s+\S+\s(.*)$/' >"$w/files"
file=$(sed -n "$(( ($(wc -l <"$w/files") + 1) / 2 ))p" "$w/files")
line="one more line, appended for the benchmark"
printf 'append\t%s\t%s\\n\n' "$file" "$line" >"$w/ops"

rows=()
for r in $(seq "$ROUNDS"); do
    a=$w/a.tdc
    rm -f "$a" "$a.journal" "$a.lock"
    cp "$w/base.tdc" "$a"
    "$tadoc" apply -q "$a" "$w/ops"
    t0=$(now)
    "$tadoc" compact "${shard[@]}" "$a" >"$w/out"
    wall=$(since "$t0")
    read -r b wr c sw nf nb rs < <(perl -ne 'print "$1 $2 $4 $3 $5 $6 $7\n" if /build ([\d.]+) s on \d+ threads, write ([\d.]+) s, switch ([\d.]+) s; check ([\d.]+) s: (\d+) files \((\d+) bytes\) read back in ([\d.]+) s/' "$w/out") ||
        { echo "bench/compactcheck.sh: unexpected tadoc compact output:" >&2; cat "$w/out" >&2; exit 1; }
    after=$("$tadoc" stat "$a" | awk '/^shards/ { print $2 }')
    rows+=("$(awk -v r="$r" -v t="$wall" -v b="$b" -v wr="$wr" -v c="$c" -v sw="$sw" -v n="$after" -v nf="$nf" -v nb="$nb" -v rs="$rs" 'BEGIN {
        printf "| %d | %.3f | %s | %s | %s | %.3f | %s | %s | %.0f%% | %d | %d (%.1f MB) |", r, t, b, wr, c, c - rs, rs, sw, 100 * c / t, n, nf, nb / 1e6 }')")
done
"$tadoc" verify "$a" >/dev/null
size=$("$tadoc" ls -l "$a" | perl -ne 'BEGIN { $f = shift } print "$1\n" if /^-\S+\s+\d+\s+\d+\s+(\d+)\s+\S+\s+\S+\s\Q$f\E$/' "$file")
printf 'extract\t%s\t%d\t%d\n' "$file" $((size - ${#line} - 1)) "${#line}" | "$tadoc" apply -q "$a" - >"$w/got"
[ "$(cat "$w/got")" = "$line" ] || { echo "bench/compactcheck.sh: the appended line is missing" >&2; exit 1; }

machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo),"
machine+=" $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
machine+="; load average at the end $(cut -d" " -f1-3 /proc/loadavg)"
echo "### $name: $(mb "$bytes") MB, $shards shards (shard size ${SHARD_SIZE:-default})"
echo
echo "Machine: $machine. Archive $(mb "$(stat -c %s "$w/base.tdc")") MB. Each round: a fresh copy,"
echo "one line appended to \`$file\` through \`tadoc apply\`, then"
echo "\`tadoc compact ${shard[*]}\` (wall time, with opening the archive). The last"
echo "result passed \`tadoc verify\` and reads the line back."
echo
echo "| round | compact wall s | build s | write s | check s | of it: reopen and index s | of it: read back s | switch s | check share | shards after | files read back by the check |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
