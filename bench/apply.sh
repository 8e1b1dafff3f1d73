#!/usr/bin/env bash
# `tadoc apply` throughput for the papers' random-access workload (gpu-random-access-tpds23,
# section VI): OPS operations (default 100,000) with LEN-byte strings (default 64) made of
# words of the archive's dictionary, at random files and offsets (bench/ops.pl, fixed SEED).
# Variants: inserts with --offsets=sequence and with --offsets=batch (the same operations),
# appends, and LEN-byte extracts; each on a fresh copy of the archive, followed by
# `tadoc compact` of what it journaled. With CHECK=1 (default when the tree holds less than
# 100 MB) the compacted archive is unpacked and compared with a model of the operations
# applied to TREE (bench/opscheck.pl), and the extracts with the model's bytes.
#
# usage: [BUILD=build/rel] [ARCHIVE=a.tdc] [OPS=100000] [LEN=64] [SEED=1] [CHECK=0|1]
#        bench/apply.sh TREE NAME
# ARCHIVE: a prebuilt archive of TREE (copied, never modified); otherwise TREE is packed.
# Markdown on stdout. Works under ${BENCH_TMP:-bench/tmp}.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/bench/lib.sh"
build=${BUILD:-build/rel}
case $build in /*) ;; *) build="$top/$build" ;; esac
[ $# -eq 2 ] || { echo "usage: bench/apply.sh TREE NAME" >&2; exit 2; }
tree=$(cd "$1" && pwd) name=$2
OPS=${OPS:-100000} LEN=${LEN:-64} SEED=${SEED:-1}
for b in tadoc; do
    [ -x "$build/$b" ] || { echo "bench/apply.sh: $build/$b is missing (make BUILD=...)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "bench/apply.sh: /usr/bin/time is not installed" >&2; exit 1; }
tmpbase=${BENCH_TMP:-$top/bench/tmp}
mkdir -p "$tmpbase"
w=$(mktemp -d "$tmpbase/applybench.XXXXXX")
trap 'rm -rf "$w"' EXIT
tadoc=$build/tadoc


files=$(find "$tree" -type f | wc -l)
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
CHECK=${CHECK:-$([ "$bytes" -lt 100000000 ] && echo 1 || echo 0)}
t0=$(now)
if [ -n "${ARCHIVE:-}" ]; then
    cp "$ARCHIVE" "$w/base.tdc"
    origin="\`${ARCHIVE#"$top"/}\` (prebuilt from the tree, copied)"
else
    "$tadoc" pack -q "$tree" -o "$w/base.tdc"
    origin="\`tadoc pack\` of the tree, $(since "$t0") s"
fi
asize=$(stat -c %s "$w/base.tdc")
"$tadoc" ls -l "$w/base.tdc" >"$w/ls"
"$tadoc" wordcount "$w/base.tdc" | cut -f2 >"$w/words"
nreg=$(grep -c '^-' "$w/ls")
nwords=$(wc -l <"$w/words")

# One variant: LABEL KIND MODE. Sets row.
variant() {
    local label=$1 kind=$2 mode=$3 a=$w/a.tdc out err j t
    rm -f "$a" "$a.journal" "$a.lock"
    cp "$w/base.tdc" "$a"
    perl "$top/bench/ops.pl" "$kind" "$OPS" "$LEN" "$SEED" "$w/ls" "$w/words" >"$w/ops.$kind"
    out=$w/out.$kind.$mode err=$w/err
    /usr/bin/time -f '%e %M' -o "$w/time" "$tadoc" apply --offsets="$mode" "$a" "$w/ops.$kind" \
        >"$out" 2>"$err" || { cat "$err" >&2; exit 1; }
    read -r wall rss <"$w/time"
    # "tadoc: N inserts, ... in X s (R ops/s, offsets=...)"
    local in_s ops_s
    in_s=$(sed -n 's/.* in \([0-9.]*\) s (\([0-9]*\) ops\/s.*/\1/p' "$err")
    ops_s=$(sed -n 's/.* in \([0-9.]*\) s (\([0-9]*\) ops\/s.*/\2/p' "$err")
    [ -n "$in_s" ] || { echo "bench/apply.sh: no summary from tadoc apply:" >&2; cat "$err" >&2; exit 1; }
    j=$(stat -c %s "$a.journal")
    /usr/bin/time -f '%e %M' -o "$w/time" "$tadoc" compact "$a" >"$w/compact" 2>&1 ||
        { cat "$w/compact" >&2; exit 1; }
    read -r cwall crss <"$w/time"
    local comp
    if grep -q '^nothing to compact' "$w/compact"; then
        comp="nothing to compact | - | - | $(mb "$asize") |"
    else
        comp=$(perl -ne 'if (/(\d+) files rewritten \((\d+) bytes\).*archive (\d+) -> (\d+) bytes; build ([\d.]+) s on \d+ threads, write ([\d.]+) s, switch ([\d.]+) s/) {
            printf "%.1f s: %d files (%.1f MB) | %s / %s / %s | %.0f | %.1f → %.1f |", '"$cwall"', $1, $2 / 1e6, $5, $6, $7, '"$crss"' / 1024, $3 / 1e6, $4 / 1e6 }' "$w/compact")
        [ -n "$comp" ] || { echo "bench/apply.sh: unexpected tadoc compact output:" >&2; cat "$w/compact" >&2; exit 1; }
    fi
    t=$(awk -v w="$wall" -v n="$OPS" 'BEGIN { printf "%.0f", n / w }')
    row="| $label | $OPS | $in_s | $ops_s | $wall | $t | $(awk -v r="$rss" 'BEGIN { printf "%.0f", r / 1024 }') | $(mb "$j") | $comp"
    if [ "$CHECK" = 1 ]; then
        rm -rf "$w/unp"
        "$tadoc" unpack "$a" "$w/unp"
        if [ "$kind" = extract ]; then
            perl "$top/bench/opscheck.pl" "$mode" "$tree" "$w/ops.$kind" "$w/unp" "$out" >"$w/check" ||
                { echo "bench/apply.sh: $label: results differ from the model" >&2; exit 1; }
        else
            perl "$top/bench/opscheck.pl" "$mode" "$tree" "$w/ops.$kind" "$w/unp" >"$w/check" ||
                { echo "bench/apply.sh: $label: results differ from the model" >&2; exit 1; }
        fi
        checks+=("$label: $(cat "$w/check")")
        rm -rf "$w/unp"
    fi
}

checks=()
rows=()
variant "insert, --offsets=sequence" insert sequence; rows+=("$row")
variant "insert, --offsets=batch" insert batch; rows+=("$row")
variant "append" append sequence; rows+=("$row")
variant "extract ($LEN B)" extract sequence; rows+=("$row")

machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo),"
machine+=" $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
machine+="; load average at the end $(cut -d" " -f1-3 /proc/loadavg)"
echo "### $name: $files files, $(mb "$bytes") MB"
echo
echo "Machine: $machine; kernel $(uname -r). Archive $(mb "$asize") MB, $origin,"
echo "on $(findmnt -n -o FSTYPE,SOURCE --target "$w" | awk '{ print $1 " on " $2 }'); $nreg regular files,"
echo "$nwords dictionary words (\`tadoc wordcount\`). Operations: \`perl bench/ops.pl KIND $OPS $LEN $SEED\`,"
echo "one file per operation chosen uniformly among the regular files, offsets uniform in the"
echo "file (inserts: 0..size; extracts: files of at least $LEN bytes), strings of random words cut"
echo "to $LEN bytes. Each variant starts from a fresh copy of the archive."
echo
echo "\"apply\" is the time \`tadoc apply\` reports for the operations themselves (journaled and"
echo "fdatasynced at the end); \"wall\" is the whole command, with opening the archive and parsing"
echo "the operations. Compact: wall time of \`tadoc compact\` afterwards: files rewritten, its own"
echo "build / write / switch times, peak RSS, archive size before → after."
echo
echo "| operations | count | apply s | ops/s (apply) | wall s | ops/s (wall) | apply peak RSS MB | journal MB | compact | build / write / switch s | compact peak RSS MB | archive MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
if [ "$CHECK" = 1 ]; then
    echo
    echo "Checked (\`bench/opscheck.pl\`: each compacted archive unpacked and compared with the"
    echo "operations applied to the tree by a Perl model; extracts compared with the model's bytes):"
    printf -- '- %s\n' "${checks[@]}"
fi
