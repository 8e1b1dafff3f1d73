#!/usr/bin/env bash
# The six analytics on the grammar (tadoc ANALYTIC ARCHIVE [SCOPE]) in every traversal
# (TADOC_TRAVERSAL=topdown, bottomup and auto, each with TADOC_THREADS=1 and 2) against the
# oracle pipelines of tests/oracles.bash over the raw files, and against "decompress then
# pipeline" (tadoc unpack, then the same pipeline over the unpacked copy), all in this one
# run. Every tadoc output is compared byte for byte (cmp) with the pipeline outputs (or, for
# analytics whose pipeline is not run, with the first mode's output); a difference prints
# MISMATCH in its row and makes the script exit 1 after the tables.
# Then word queries: bench/querylat (built with the tools) times `count` and `search` for
# QUERIES random words inside one process, with the word index's build time and memory, and a
# few `tadoc count` process launches for comparison.
# Rows: the whole archive, then SCOPE (default: the largest immediate subdirectory of TREE by
# file bytes, when TREE has one), then FILE_SCOPE (default: the largest file of SCOPE, or of
# TREE without one). The sort pipeline is the word count pipeline plus a tail (awk + sort of
# its output, tests/oracles.bash): where both run in one scope, the word count pipeline runs
# once and sort's time is its time plus the tail's, timed on its output.
# Then, with MOUNT (default on where tadocfs and /dev/fuse are), the archive (a copy) is
# mounted read-only and `cat MNT[/SCOPE]/.ANALYTIC` timed: the first call after mounting and
# the fastest of 3 repeated ones (the daemon keeps the archive and the analytics' per-grammar
# preparation between calls).
# usage: bench/analytics.sh BUILD_DIR TREE NAME   (prints markdown tables on stdout)
#   BENCH_TMP: where the archive, the unpacked copy and the outputs go (default /tmp)
#   ARCHIVE=FILE: use this archive of TREE instead of packing it (no pack line then)
#   ANALYTICS="wordcount sort ...": the analytics of the whole-archive rows (default all six;
#            ANALYTICS= for none)
#   PIPELINES="wordcount ...": the analytics whose pipelines run there (default: all of
#            ANALYTICS); the others get "-" in the pipeline columns (hours on large trees)
#   MODES="topdown:1 bottomup:2 ...": traversal:threads pairs (default all six)
#   SCOPE=DIR, or SCOPE= for no directory rows; FILE_SCOPE=PATH, or FILE_SCOPE= for no file
#            rows; SCOPE_ANALYTICS, SCOPE_PIPELINES: as ANALYTICS and PIPELINES for both
#            (default: the same)
#   RERUN=0: do not rerun each pipeline over the unpacked copy; (3) is then the unpack time plus
#            the (2) pipeline time (halves the run; the pipelines dominate on large trees)
#   UNPACK=0: no unpack at all (no (3) column values)
#   MOUNT=0: no mounted rows; MOUNT_ANALYTICS (default "wordcount"): the analytics timed there
#   QUERIES=N (default 10000; 0 skips the query table), LAUNCHES=N `tadoc count` launches (5)
#   REPEAT=N: runs of each tadoc mode, the fastest reported (default 3; the pipelines run once)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR TREE NAME" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/bench/lib.sh"
cmdline=$(printf "%q " "$0" "$@") cmdline=${cmdline% }
for v in ARCHIVE ANALYTICS PIPELINES MODES SCOPE FILE_SCOPE SCOPE_ANALYTICS SCOPE_PIPELINES RERUN \
    UNPACK MOUNT MOUNT_ANALYTICS QUERIES LAUNCHES REPEAT; do
    if [ -n "${!v+x}" ]; then cmdline="$v=$(printf %q "${!v}") $cmdline"; fi
done
build=$1 tree=${2%/} name=$3
tadoc="$build/tadoc" querylat="$build/bench/querylat"
[ -x "$tadoc" ] || { echo "$0: $tadoc: not executable" >&2; exit 1; }
[ -d "$tree" ] || { echo "$0: $tree: not a directory" >&2; exit 1; }
# shellcheck source=tests/oracles.bash
source "$top/tests/oracles.bash"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/anabench.XXXXXX")
trap 'fusermount3 -u "$w/mnt" 2>/dev/null || true; rm -rf "$w"' EXIT

analytics=${ANALYTICS-wordcount sort invindex termvector seqcount rankedinvindex}
pipelines=${PIPELINES-$analytics}
modes=${MODES:-topdown:1 topdown:2 bottomup:1 bottomup:2 auto:1 auto:2}
queries=${QUERIES:-10000} launches=${LAUNCHES:-5} repeat=${REPEAT:-3}

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
bytes_of() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; } # LIST WORD
label() { # topdown:1 -> TD 1t
    local t=${1%:*} n=${1#*:}
    case $t in topdown) t=TD ;; bottomup) t=BU ;; auto) t=auto ;; esac
    echo "$t ${n}t"
}

bytes=$(bytes_of "$tree")
files=$(find "$tree" -type f | wc -l)

# Scope: the largest immediate subdirectory (ties: first in byte order), unless SCOPE is set.
if [ -n "${SCOPE+x}" ]; then
    scope=$SCOPE scope_bytes=0
    [ -z "$scope" ] || scope_bytes=$(bytes_of "$tree/$scope")
else
    scope="" scope_bytes=0
    while IFS= read -r -d '' d; do
        b=$(bytes_of "$tree/$d")
        if [ "$b" -gt "$scope_bytes" ]; then scope=$d scope_bytes=$b; fi
    done < <(find "$tree" -mindepth 1 -maxdepth 1 -type d -printf '%P\0' | LC_ALL=C sort -z)
fi
# File scope: the largest regular file of the directory scope (or of TREE), unless set.
if [ -n "${FILE_SCOPE+x}" ]; then
    fscope=$FILE_SCOPE
else
    fscope=$(find "$tree${scope:+/$scope}" -type f -printf '%s %P\n' | LC_ALL=C sort -k1,1nr -k2 |
        awk 'NR == 1 { print $2 }')
    fscope=${scope:+$scope/}$fscope
fi
scope_analytics=${SCOPE_ANALYTICS-$analytics}
scope_pipelines=${SCOPE_PIPELINES-$pipelines}

# Warm the page cache for the raw files, then pack (or take ARCHIVE) and unpack once.
find "$tree" -type f -exec cat {} + >/dev/null
if [ -n "${ARCHIVE:-}" ]; then
    arcf=$ARCHIVE
    cat "$arcf" >/dev/null
    packline="Archive: \`$ARCHIVE\`, $(mb "$(stat -L -c %s "$arcf")") MB (prebuilt)"
else
    arcf=$w/a.tdc
    t0=$(now)
    /usr/bin/time -f %M -o "$w/rss" "$tadoc" pack -q "$tree" -o "$arcf"
    t1=$(now)
    pack_rss=$(tail -n1 "$w/rss")
    packline="Archive: $(mb "$(stat -c %s "$arcf")") MB, packed in $(elapsed "$t0" "$t1") s (peak RSS $(awk -v r="$pack_rss" 'BEGIN { printf "%.0f", r / 1024 }') MB)"
fi
unpack_s=""
if [ "${UNPACK:-1}" != 0 ]; then
    t0=$(now)
    "$tadoc" unpack "$arcf" "$w/u"
    t1=$(now)
    unpack_s=$(elapsed "$t0" "$t1")
    packline="$packline; \`tadoc unpack\` of the whole archive: ${unpack_s} s."
else
    packline="$packline; UNPACK=0: no unpacked copy, no (3) column."
fi

echo "### $name: $files files, $(mb "$bytes") MB"
echo
echo "Command: \`$cmdline\`, $(date -u '+%Y-%m-%d %H:%M UTC'). Machine: $(nproc) cores," \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg) at the start."
echo "$packline"
if [ -n "$scope" ]; then
    echo "Directory scope rows: \`$scope\` ($(find "$tree/$scope" -type f | wc -l) files, $(mb "$scope_bytes") MB)."
else
    echo "No directory scope rows."
fi
if [ -n "$fscope" ]; then
    echo "File scope rows: \`$fscope\` ($(mb "$(stat -c %s "$tree/$fscope")") MB)."
else
    echo "No file scope rows."
fi
[ -z "$scope$fscope" ] ||
    echo "tadoc unpack has no scope, so a scope row's decompress time is the whole archive's unpack."
echo "Each tadoc cell: wall seconds (CPU seconds, user + system) of the fastest of $repeat run(s), the"
echo "process from start to exit (opening the archive included). TD = TADOC_TRAVERSAL=topdown, BU = bottomup,"
echo "auto = the selector; 1t/2t = TADOC_THREADS. \"chose\": what auto picked (TADOC_ANA_VERBOSE)."
echo "(2) oracle pipeline over the raw files; (3) tadoc unpack + the same pipeline over the"
if [ "${RERUN:-1}" != 0 ]; then
    echo "unpacked copy. Ratios: pipeline time over auto 2t's wall time."
else
    echo "unpacked copy, taken as unpack + the (2) time (RERUN=0). Ratios: over auto 2t's wall time."
fi
[ "$pipelines" = "$analytics" ] || echo "Pipelines run only for: ${pipelines:-none} (whole archive)."
[ -z "$scope$fscope" ] || [ "$scope_pipelines" = "$scope_analytics" ] ||
    echo "Pipelines run only for: ${scope_pipelines:-none} (scope rows)."
echo "sort's pipeline: the word count pipeline's time plus its tail's (awk + sort of its output),"
echo "where both run in a scope (marked +)."
echo
hdr="| analytic | scope | chose |" sep="|---|---|---|"
for m in $modes; do hdr="$hdr $(label "$m") |" sep="$sep---|"; done
echo "$hdr peak RSS MB (last mode) | (2) pipeline s | (3) unpack + pipeline s | (2)/auto | (3)/auto | output |"
echo "$sep---|---|---|---|---|---|"

bad=0
# "SCOPE ANALYTIC" -> a saved tadoc output, its auto time, its pipeline time (mounted rows)
declare -A cli_out=() cli_t=() cli_p=()
kinds=(all ${scope:+dir} ${fscope:+file}) k=0
for sc in "" ${scope:+"$scope"} ${fscope:+"$fscope"}; do
    kind=${kinds[k++]}
    list=$analytics pipes=$pipelines
    [ -z "$sc" ] || list=$scope_analytics pipes=$scope_pipelines
    wc_t2="" wc_t3p="" # the word count pipeline of this scope: times; outputs in $w/wc[23].out
    for a in $list; do
        row="| $a | ${sc:-(all)} |" cells="" chose="" ref="" out="" auto_wall="" st_all=0
        for m in $modes; do
            wall="" cpu="" st=0
            for _ in $(seq "$repeat"); do
                t0=$(now)
                TADOC_TRAVERSAL=${m%:*} TADOC_THREADS=${m#*:} TADOC_ANA_VERBOSE=1 \
                    /usr/bin/time -f "%U %S %M" -o "$w/time" "$tadoc" "$a" "$arcf" ${sc:+"$sc"} \
                    >"$w/m.out" 2>"$w/m.err" || st=$?
                t1=$(now)
                read -r u s rss < <(tail -n1 "$w/time")
                t=$(elapsed "$t0" "$t1")
                if [ -z "$wall" ] || awk -v a="$t" -v b="$wall" 'BEGIN { exit !(a < b) }'; then
                    wall=$t cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
                fi
                [ "$st" -eq 0 ] || break
            done
            cells="$cells $wall ($cpu) |"
            if [ "${m%:*}" = auto ]; then
                auto_wall=$wall
                chose=$(sed -n 's/^tadoc: [a-z]*: \([a-z-]*\) (auto).*/\1/p' "$w/m.err" | head -n1)
            fi
            if [ "$st" -ne 0 ]; then
                out="MISMATCH (tadoc exit $st, $m)" bad=1 st_all=1
            elif [ -z "$ref" ]; then
                mv "$w/m.out" "$w/1.out"
                ref=$m
            elif ! cmp -s "$w/m.out" "$w/1.out"; then
                out="MISMATCH ($m vs $ref)" bad=1 st_all=1
            fi
            last_rss=$rss
        done
        t_2="-" t_3="-" r2="-" r3="-"
        if has "$pipes" "$a"; then
            plus=""
            if [ "$a" = sort ] && [ -n "$wc_t2" ]; then
                # the word count pipeline of this scope plus the sort tail on its output
                t0=$(now)
                wordcount_to_sort <"$w/wc2.out" >"$w/2.out"
                t1=$(now)
                t_2=$(awk -v a="$wc_t2" -v b="$(elapsed "$t0" "$t1")" 'BEGIN { printf "%.3f", a + b }')
                plus="+"
            else
                t0=$(now)
                "oracle_$a" "$tree${sc:+/$sc}" >"$w/2.out"
                t1=$(now)
                t_2=$(elapsed "$t0" "$t1")
            fi
            if [ -n "$unpack_s" ]; then
                if [ "${RERUN:-1}" != 0 ]; then
                    t0=$(now)
                    if [ -n "$plus" ]; then
                        wordcount_to_sort <"$w/wc3.out" >"$w/3.out"
                    else
                        "oracle_$a" "$w/u${sc:+/$sc}" >"$w/3.out"
                    fi
                    t1=$(now)
                    t_3p=$(elapsed "$t0" "$t1")
                    [ -z "$plus" ] || t_3p=$(awk -v a="$wc_t3p" -v b="$t_3p" 'BEGIN { printf "%.3f", a + b }')
                else
                    t_3p=$t_2
                    cp "$w/2.out" "$w/3.out"
                fi
                t_3=$(awk -v u="$unpack_s" -v p="$t_3p" 'BEGIN { printf "%.3f + %.3f = %.3f", u, p, u + p }')
            fi
            if [ "$a" = wordcount ]; then
                wc_t2=$t_2 wc_t3p=${t_3p:-}
                cp "$w/2.out" "$w/wc2.out"
                [ ! -f "$w/3.out" ] || cp "$w/3.out" "$w/wc3.out"
            fi
            t_2="$t_2$plus"
            if [ "$st_all" -eq 0 ]; then
                if ! cmp -s "$w/1.out" "$w/2.out"; then
                    out="MISMATCH vs (2)" bad=1
                elif [ -n "$unpack_s" ] && ! cmp -s "$w/1.out" "$w/3.out"; then
                    out="MISMATCH vs (3)" bad=1
                fi
            fi
            if [ -n "$auto_wall" ]; then
                r2=$(awk -v p="${t_2%+}" -v t="$auto_wall" 'BEGIN { printf "%.1f×", p / t }')
                [ -z "$unpack_s" ] ||
                    r3=$(awk -v p="${t_3##* }" -v t="$auto_wall" 'BEGIN { printf "%.1f×", p / t }')
            fi
        fi
        if [ -z "$out" ]; then
            lines=$(wc -l <"$w/1.out") size=$(mb "$(stat -c %s "$w/1.out")")
            if has "$pipes" "$a"; then
                out="all modes identical to the pipelines, $lines lines, $size MB"
            else
                out="all modes identical (no pipeline run), $lines lines, $size MB"
            fi
        fi
        echo "$row ${chose:--} |$cells $(awk -v r="$last_rss" 'BEGIN { printf "%.0f", r / 1024 }') | $t_2 | $t_3 | $r2 | $r3 | $out |"
        if [ -f "$w/1.out" ] && [ "$kind" != file ] && has "${MOUNT_ANALYTICS:-wordcount}" "$a"; then
            mv "$w/1.out" "$w/cli.$a.${#cli_out[@]}"
            cli_out["$sc $a"]=$w/cli.$a.${#cli_out[@]}
            cli_t["$sc $a"]=$auto_wall
            cli_p["$sc $a"]=$t_2
        fi
        rm -f "$w"/[123].out "$w/m.out"
    done
    rm -f "$w"/wc[23].out
done

# Mounted: cat MNT/.ANALYTIC, the first call after mounting, then repeated calls.
if [ "${MOUNT:-1}" != 0 ] && [ -x "$build/tadocfs" ] && [ -e /dev/fuse ]; then
    cp "$arcf" "$w/m.tdc"
    mkdir "$w/mnt"
    t0=$(now)
    "$build/tadocfs" -o ro "$w/m.tdc" "$w/mnt"
    t1=$(now)
    echo
    echo "Mounted (\`tadocfs -o ro\` of a copy of the archive, mounted in $(elapsed "$t0" "$t1") s):"
    echo "\`cat MNT[/SCOPE]/.ANALYTIC > file\`, wall seconds: the first call after mounting (the daemon"
    echo "prepares the grammar's levels and word order then), and the fastest of 3 repeated calls"
    echo "(each recomputes the analytic on open; only the per-grammar preparation is kept). The"
    echo "daemon runs analytics with its default threads (2 on this machine for large scopes)."
    echo "Outputs compared byte for byte with tadoc's."
    echo
    echo "| analytic | scope | mount first s | mount repeated s | tadoc auto 2t s | (2) pipeline s | (2)/first | (2)/repeated | output |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for sc in "" ${scope:+"$scope"}; do
        for a in ${MOUNT_ANALYTICS:-wordcount}; do
            f="$w/mnt${sc:+/$sc}/.$a"
            t0=$(now)
            cat "$f" >"$w/mo.out"
            t1=$(now)
            first=$(elapsed "$t0" "$t1") rep=""
            for _ in 1 2 3; do
                t0=$(now)
                cat "$f" >"$w/mo2.out"
                t1=$(now)
                t=$(elapsed "$t0" "$t1")
                if [ -z "$rep" ] || awk -v a="$t" -v b="$rep" 'BEGIN { exit !(a < b) }'; then rep=$t; fi
            done
            ref=${cli_out["$sc $a"]:-} out="identical to tadoc's, $(wc -l <"$w/mo.out") lines"
            if [ -z "$ref" ]; then
                out="not compared (no tadoc row)"
            elif ! cmp -s "$w/mo.out" "$ref" || ! cmp -s "$w/mo2.out" "$ref"; then
                out="MISMATCH" bad=1
            fi
            p=${cli_p["$sc $a"]:--} r1="-" r2="-"
            if [ "$p" != - ]; then
                r1=$(awk -v p="${p%+}" -v t="$first" 'BEGIN { printf "%.1f×", p / t }')
                r2=$(awk -v p="${p%+}" -v t="$rep" 'BEGIN { printf "%.1f×", p / t }')
            fi
            echo "| $a | ${sc:-(all)} | $first | $rep | ${cli_t["$sc $a"]:--} | $p | $r1 | $r2 | $out |"
        done
    done
    fusermount3 -u "$w/mnt"
    rm -f "$w/m.tdc" "$w"/mo*.out
fi

if [ "$queries" -gt 0 ] && [ -x "$querylat" ]; then
    echo
    echo "Word queries: \`$querylat ARCHIVE $queries 1\` (one process: open, random-access index,"
    echo "word index, then $queries random (file, word) pairs, each word taken at a random offset"
    echo "of a file picked by size, so it occurs there; every tenth query asks for a word that"
    echo "occurs nowhere (count 0) and every tenth plus one for the word in another random file;"
    echo "every count is checked against the number of search results). Wall times, and for all"
    echo "queries also the querying thread's CPU time (wall minus the waits for a core on a busy"
    echo "machine). Then $launches \`tadoc count\`"
    echo "launches of one such query, each opening the archive and building both indexes, as a"
    echo "process loop would."
    echo
    q=$("$querylat" "$arcf" "$queries" 1)
    echo "querylat: $q" >&2
    get() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<<"$q"; }
    # (awk reads all its input: no early exit, so no SIGPIPE upstream under pipefail)
    f=$(find "$tree" -type f -size +1k -printf '%P\n' | LC_ALL=C sort | awk 'NR == 1')
    wd=$(head -c 65536 "$tree/$f" | LC_ALL=C tr -cs 'A-Za-z0-9_\200-\377' '\n' |
        awk 'NF && !p { print; p = 1 }')
    t0=$(now)
    for _ in $(seq "$launches"); do "$tadoc" count "$arcf" "$f" "$wd" >/dev/null; done
    t1=$(now)
    per=$(awk -v a="$t0" -v b="$t1" -v n="$launches" 'BEGIN { printf "%.1f", (b - a) / n * 1000 }')
    echo "| open s | random-access index s | word index build s | word index memory (RSS growth) MB | peak RSS MB | \`tadoc count\` process ms |"
    echo "|---|---|---|---|---|---|"
    echo "| $(get open_s) | $(get index_s) | $(get words_index_s) | $(get words_index_rss_mb) | $(get peak_rss_mb) | $per |"
    echo
    echo "| queries | count p50 µs | count p99 µs | count mean µs | search p50 µs | search p99 µs | search mean µs |"
    echo "|---|---|---|---|---|---|---|"
    echo "| all $(get queries) | $(get count_median_us) | $(get count_p99_us) | $(get count_mean_us) | $(get search_median_us) | $(get search_p99_us) | $(get search_mean_us) |"
    echo "| absent words, $(get absent) of them | $(get count_absent_median_us) | $(get count_absent_p99_us) | $(get count_absent_mean_us) | $(get search_absent_median_us) | $(get search_absent_p99_us) | $(get search_absent_mean_us) |"
    echo "| all, the thread's CPU time | $(get count_cpu_median_us) | $(get count_cpu_p99_us) | $(get count_cpu_mean_us) | $(get search_cpu_median_us) | $(get search_cpu_p99_us) | $(get search_cpu_mean_us) |"
fi
[ "$bad" -eq 0 ] || { echo "$0: some outputs differ (MISMATCH rows above)" >&2; exit 1; }
