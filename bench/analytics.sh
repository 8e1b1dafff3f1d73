#!/usr/bin/env bash
# The six analytics on the grammar (tadoc ANALYTIC ARCHIVE [SCOPE]) against the oracle pipelines
# of tests/oracles.bash over the raw files, and against "decompress then pipeline" (tadoc unpack,
# then the same pipeline over the unpacked copy), all in this one run. Every tadoc output is
# compared byte for byte (cmp) with both pipeline outputs; a difference prints MISMATCH in its
# row and makes the script exit 1 after the table.
# Rows: the whole archive, then the largest immediate subdirectory of TREE (by file bytes) as
# the scope, when TREE has one.
# usage: bench/analytics.sh BUILD_DIR TREE NAME   (prints a markdown table on stdout)
#   BENCH_TMP: where the archive, the unpacked copy and the outputs go (default /tmp)
#   RERUN=0: do not rerun each pipeline over the unpacked copy; (3) is then the unpack time plus
#            the (2) pipeline time (halves the run; the pipelines dominate on large trees)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR TREE NAME" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
cmdline=$(printf "%q " "$0" "$@") cmdline=${cmdline% }
build=$1 tree=${2%/} name=$3
tadoc="$build/tadoc"
[ -x "$tadoc" ] || { echo "$0: $tadoc: not executable" >&2; exit 1; }
[ -d "$tree" ] || { echo "$0: $tree: not a directory" >&2; exit 1; }
# shellcheck source=tests/oracles.bash
source "$top/tests/oracles.bash"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/anabench.XXXXXX")
trap 'rm -rf "$w"' EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
bytes_of() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }

bytes=$(bytes_of "$tree")
files=$(find "$tree" -type f | wc -l)

# Scope: the largest immediate subdirectory (ties: first in byte order).
scope="" scope_bytes=0
while IFS= read -r -d '' d; do
    b=$(bytes_of "$tree/$d")
    if [ "$b" -gt "$scope_bytes" ]; then scope=$d scope_bytes=$b; fi
done < <(find "$tree" -mindepth 1 -maxdepth 1 -type d -printf '%P\0' | LC_ALL=C sort -z)

# Warm the page cache for the raw files, then pack and unpack once.
find "$tree" -type f -exec cat {} + >/dev/null
t0=$(now)
/usr/bin/time -f %M -o "$w/rss" "$tadoc" pack -q "$tree" -o "$w/a.tdc"
t1=$(now)
pack_s=$(elapsed "$t0" "$t1") pack_rss=$(tail -n1 "$w/rss")
t0=$(now)
"$tadoc" unpack "$w/a.tdc" "$w/u"
t1=$(now)
unpack_s=$(elapsed "$t0" "$t1")

echo "### $name: $files files, $(mb "$bytes") MB"
echo
echo "Command: \`$cmdline\`, $(date -u '+%Y-%m-%d %H:%M UTC'). Machine: $(nproc) cores," \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')."
echo "Archive: $(mb "$(stat -c %s "$w/a.tdc")") MB, packed in ${pack_s} s (peak RSS" \
    "$(awk -v r="$pack_rss" 'BEGIN { printf "%.0f", r / 1024 }') MB); \`tadoc unpack\` of the" \
    "whole archive: ${unpack_s} s."
if [ -n "$scope" ]; then
    echo "Scope rows: \`$scope\` ($(find "$tree/$scope" -type f | wc -l) files, $(mb "$scope_bytes") MB)."
    echo "tadoc unpack has no scope, so their decompress time is the whole archive's unpack."
else
    echo "No subdirectory in TREE: no scope rows."
fi
echo "Wall times, one run each. (1) tadoc on the grammar; (2) oracle pipeline over the raw"
if [ "${RERUN:-1}" != 0 ]; then
    echo "files; (3) tadoc unpack + the same pipeline over the unpacked copy."
else
    echo "files; (3) tadoc unpack + the (2) pipeline time (RERUN=0: not rerun on the unpacked copy)."
fi
echo
echo "| analytic | scope | (1) tadoc s | tadoc peak RSS MB | (2) pipeline s | (3) unpack + pipeline s | (2)/(1) | (3)/(1) | output |"
echo "|---|---|---|---|---|---|---|---|---|"

bad=0
for sc in "" ${scope:+"$scope"}; do
    for a in wordcount sort invindex termvector seqcount rankedinvindex; do
        t0=$(now)
        st=0
        /usr/bin/time -f %M -o "$w/rss" "$tadoc" "$a" "$w/a.tdc" ${sc:+"$sc"} >"$w/1.out" || st=$?
        t1=$(now)
        t_1=$(elapsed "$t0" "$t1") rss=$(tail -n1 "$w/rss")
        t0=$(now)
        "oracle_$a" "$tree${sc:+/$sc}" >"$w/2.out"
        t1=$(now)
        t_2=$(elapsed "$t0" "$t1")
        if [ "${RERUN:-1}" != 0 ]; then
            t0=$(now)
            "oracle_$a" "$w/u${sc:+/$sc}" >"$w/3.out"
            t1=$(now)
            t_3p=$(elapsed "$t0" "$t1")
        else
            t_3p=$t_2
            cp "$w/2.out" "$w/3.out"
        fi
        if [ "$st" -ne 0 ]; then
            out="MISMATCH (tadoc exit $st)" bad=1
        elif ! cmp -s "$w/1.out" "$w/2.out"; then
            out="MISMATCH vs (2)" bad=1
        elif ! cmp -s "$w/1.out" "$w/3.out"; then
            out="MISMATCH vs (3)" bad=1
        else
            out="identical, $(wc -l <"$w/1.out") lines, $(mb "$(stat -c %s "$w/1.out")") MB"
        fi
        awk -v a="$a" -v s="${sc:-(all)}" -v t1="$t_1" -v r="$rss" -v t2="$t_2" -v u="$unpack_s" \
            -v p="$t_3p" -v o="$out" 'BEGIN {
            t3 = u + p
            printf "| %s | %s | %.3f | %.0f | %.3f | %.3f + %.3f = %.3f | %.1f× | %.1f× | %s |\n",
                a, s, t1, r / 1024, t2, u, p, t3, t2 / t1, t3 / t1, o }'
        rm -f "$w"/[123].out
    done
done
[ "$bad" -eq 0 ] || { echo "$0: some outputs differ (MISMATCH rows above)" >&2; exit 1; }
