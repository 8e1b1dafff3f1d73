#!/usr/bin/env bash
# Compaction cost against the dirty fraction: for each percentage P of FRACTIONS (default
# "0 1 10 100"), a fresh copy of the archive gets one LEN-byte append (bench/ops.pl dirty:P)
# in each of P% of its regular files through `tadoc apply`, then `tadoc compact` folds the
# journal in (P = 0: `tadoc compact --force`, a rewrite with nothing dirty). Reports compact's
# own build / write / switch times, its wall time and peak RSS, and the archive before and
# after; then checks, with one `tadoc apply` of extract operations, that every appended file
# ends with its string in the compacted archive.
#
# Then space against live content: a fresh copy gets a history of HISTORY edits of a
# random-operation tester (`perl bench/ops.pl history:DELETE`: overwrites, inserts, appends,
# truncates, and deletes of DELETE% of the files) through `tadoc apply`, in COMPACTIONS equal
# parts, each folded in by `tadoc compact`; the result is checked against a Perl model
# (bench/opscheck.pl) and its size compared with `tadoc pack` of the same tree at compaction's
# zstd level and at pack's, the latter after `tadoc compact --force --level 19`.
#
# usage: [BUILD=build/rel] [ARCHIVE=a.tdc] [FRACTIONS="0 1 10 100"] [LEN=64] [SEED=1]
#        [HISTORY=1000] [COMPACTIONS=10] [DELETE=20] bench/compact.sh TREE NAME
# FRACTIONS="" skips the dirty-fraction rows, HISTORY=0 the history.
# ARCHIVE: a prebuilt archive of TREE (copied, never modified); otherwise TREE is packed.
# Markdown on stdout. Works under ${BENCH_TMP:-bench/tmp}.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/bench/lib.sh"
build=${BUILD:-build/rel}
case $build in /*) ;; *) build="$top/$build" ;; esac
[ $# -eq 2 ] || { echo "usage: bench/compact.sh TREE NAME" >&2; exit 2; }
tree=$(cd "$1" && pwd) name=$2
FRACTIONS=${FRACTIONS-0 1 10 100} LEN=${LEN:-64} SEED=${SEED:-1}
HISTORY=${HISTORY:-1000} COMPACTIONS=${COMPACTIONS:-10} DELETE=${DELETE:-20}
[ -x "$build/tadoc" ] || { echo "bench/compact.sh: $build/tadoc is missing (make BUILD=...)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/compact.sh: /usr/bin/time is not installed" >&2; exit 1; }
tmpbase=${BENCH_TMP:-$top/bench/tmp}
mkdir -p "$tmpbase"
w=$(mktemp -d "$tmpbase/compactbench.XXXXXX")
trap 'rm -rf "$w"' EXIT
tadoc=$build/tadoc
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }


files=$(find "$tree" -type f | wc -l)
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
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

rows=()
total0=$(now)
for p in $FRACTIONS; do
    a=$w/a.tdc
    rm -f "$a" "$a.journal" "$a.lock"
    cp "$w/base.tdc" "$a"
    force=()
    if [ "$p" = 0 ]; then
        : >"$w/ops"
        force=(--force)
    else
        perl "$top/bench/ops.pl" "dirty:$p" 0 "$LEN" "$SEED" "$w/ls" "$w/words" >"$w/ops"
    fi
    n=$(wc -l <"$w/ops")
    t0=$(now)
    [ "$n" -eq 0 ] || "$tadoc" apply -q "$a" "$w/ops"
    apply_s=$(since "$t0")
    j=$(stat -c %s "$a.journal" 2>/dev/null || echo 0)
    /usr/bin/time -f '%e %M' -o "$w/time" "$tadoc" compact "${force[@]}" "$a" >"$w/compact" 2>&1 ||
        { cat "$w/compact" >&2; exit 1; }
    read -r cwall crss <"$w/time"
    r=$(perl -ne 'if (/(\d+) files rewritten \((\d+) bytes\).*rules (\d+) -> (\d+) \((\d+) new\); archive (\d+) -> (\d+) bytes; build ([\d.]+) s on \d+ threads, write ([\d.]+) s, switch ([\d.]+) s/) {
        printf "%d (%.1f MB) | %s | %s | %s | %s | %.0f | %.2f → %.2f | %d → %d (%d new) |", $1, $2 / 1e6, '"$cwall"', $8, $9, $10, '"$crss"' / 1024, $6 / 1e6, $7 / 1e6, $3, $4, $5 }' "$w/compact")
    [ -n "$r" ] || { echo "bench/compact.sh: unexpected tadoc compact output:" >&2; cat "$w/compact" >&2; exit 1; }
    # Every appended file must end with its string: one extract per file, in one apply.
    if [ "$n" -gt 0 ]; then
        "$tadoc" ls -l "$a" >"$w/ls.after"
        perl -e '
            my ($ls, $ops, $len) = @ARGV;
            my %size;
            open(my $fh, "<", $ls) or die; while (<$fh>) { $size{$2} = $1 if /^-\S+\s+\d+\s+\d+\s+(\d+)\s+\S+\s+\S+\s(.*)$/ }
            open($fh, "<", $ops) or die;
            open(my $x, ">", "$ops.x") or die; open(my $e, ">", "$ops.want") or die;
            while (<$fh>) { chomp; my (undef, $p, $t) = split /\t/; print $x "extract\t$p\t", $size{$p} - $len, "\t$len\n"; print $e "$t\n" }
        ' "$w/ls.after" "$w/ops" "$LEN"
        "$tadoc" apply -q "$a" "$w/ops.x" >"$w/got"
        cmp -s "$w/got" "$w/ops.want" || { echo "bench/compact.sh: $p%: appended strings missing after compaction" >&2; exit 1; }
    fi
    label="$p%"
    [ "$p" = 0 ] && label="0% (\`--force\`)"
    rows+=("| $label | $n | $apply_s | $(awk -v j="$j" 'BEGIN { printf "%.2f", j / 1e6 }') | $r")
done
total_s=$(since "$total0")

# The history: a copy of the archive edited and compacted again and again, then weighed
# against a fresh pack of what it holds. One table row per compaction.
hrows=()
if [ "$HISTORY" -gt 0 ]; then
    a=$w/h.tdc
    cp "$w/base.tdc" "$a"
    perl "$top/bench/ops.pl" "history:$DELETE" "$HISTORY" "$LEN" "$SEED" "$w/ls" "$w/words" >"$w/hops"
    per=$(((HISTORY + COMPACTIONS - 1) / COMPACTIONS))
    split -l "$per" -d -a 4 "$w/hops" "$w/hchunk."
    k=0 done_ops=0 full=0
    hist0=$(now)
    for c in "$w"/hchunk.*; do
        k=$((k + 1))
        done_ops=$((done_ops + $(wc -l <"$c")))
        "$tadoc" apply -q "$a" "$c"
        t0=$(now)
        "$tadoc" compact "$a" >"$w/compact" 2>&1 || { cat "$w/compact" >&2; exit 1; }
        cwall=$(since "$t0")
        # A compaction that compressed everything again has no rule it did not make anew.
        r=$(perl -ne 'if (/(\d+) files rewritten \((\d+) bytes\).*rules (\d+) -> (\d+) \((\d+) new\); archive (\d+) -> (\d+) bytes/) {
            printf "%d (%.2f MB) | %s | %d → %d (%d new) | %s | %.3f", $1, $2 / 1e6, '"$cwall"', $3, $4, $5, $4 == $5 ? "all" : "new text", $7 / 1e6 }' "$w/compact")
        [ -n "$r" ] || { echo "bench/compact.sh: unexpected tadoc compact output:" >&2; cat "$w/compact" >&2; exit 1; }
        [[ $r == *"| all |"* ]] && full=$((full + 1))
        hrows+=("| $k | $done_ops | $r |")
    done
    hist_s=$(since "$hist0")
    "$tadoc" unpack "$a" "$w/hun"
    hcheck=$(perl "$top/bench/opscheck.pl" sequence "$tree" "$w/hops" "$w/hun")
    hlive=$(find "$w/hun" -type f | wc -l)
    hbytes=$(find "$w/hun" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    level=$(sed -n 's/.*zstd level of the rewritten sections (default \([0-9]*\)).*/\1/p' <("$tadoc" compact --help))
    hsize=$(stat -c %s "$a")
    "$tadoc" pack -q --level "$level" "$w/hun" -o "$w/hp.tdc"
    "$tadoc" pack -q "$w/hun" -o "$w/hp19.tdc"
    "$tadoc" compact --force --level 19 "$a" >/dev/null
    h19=$(stat -c %s "$a")
    "$tadoc" verify "$a" >/dev/null
fi

machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo),"
machine+=" $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
machine+="; load average at the end $(cut -d" " -f1-3 /proc/loadavg)"
echo "### $name: $files files, $(mb "$bytes") MB"
echo
if [ -n "$FRACTIONS" ]; then
echo "Machine: $machine; kernel $(uname -r). Archive $(mb "$asize") MB, $origin,"
echo "on $(findmnt -n -o FSTYPE,SOURCE --target "$w" | awk '{ print $1 " on " $2 }'); $nreg regular files."
echo "Each row: a fresh copy, one $LEN-byte append in each of P% of the regular files (chosen by"
echo "\`perl bench/ops.pl dirty:P 0 $LEN $SEED\`) through \`tadoc apply\` (wall time, with opening the"
echo "archive), then \`tadoc compact\` (default zstd level 9; \`tadoc pack\` writes level 19). Appended"
echo "strings were read back from each compacted archive and checked. All rows: $total_s s."
echo
echo "| dirty | files appended to | apply wall s | journal MB | files rewritten (bytes) | compact wall s | build s | write s | switch s | compact peak RSS MB | archive MB before → after | rules before → after |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
fi
if [ "$HISTORY" -gt 0 ]; then
    echo
    echo "#### A history of $HISTORY random edits in $COMPACTIONS compactions"
    echo
    echo "Machine: $machine. A copy of the archive ($(mb "$asize") MB) got"
    echo "\`perl bench/ops.pl history:$DELETE $HISTORY $LEN $SEED\` (overwrites, inserts, appends and truncates"
    echo "of texts up to $LEN bytes, now and then 16 times that, half made-up words; deletes of $DELETE% of the"
    echo "files) through \`tadoc apply\`, each $per edits folded in by \`tadoc compact\` (level $level);"
    echo "$full of them compressed everything again (all rules new). All: $hist_s s. Content after: $hlive"
    echo "files, $(mb "$hbytes") MB; against the model: $hcheck."
    echo
    echo "| compaction | edits so far | files rewritten (bytes) | compact wall s | rules before → after (new) | compressed | archive MB after |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${hrows[@]}"
    echo
    echo "| archive | bytes | against a fresh \`tadoc pack\` of the same tree at the same level |"
    echo "|---|---|---|"
    echo "| before the edits (\`tadoc pack\`, level 19) | $asize | |"
    echo "| after the history (level $level) | $hsize | $(ratio "$hsize" "$(stat -c %s "$w/hp.tdc")") ($(stat -c %s "$w/hp.tdc") bytes at level $level) |"
    echo "| the same, \`tadoc compact --force --level 19\` | $h19 | $(ratio "$h19" "$(stat -c %s "$w/hp19.tdc")") ($(stat -c %s "$w/hp19.tdc") bytes at level 19) |"
fi
