#!/usr/bin/env bash
# Run libFuzzer builds of the fuzz targets, each for SECONDS, from its seeds.
#   tests/fuzz/run.sh BUILD SECONDS TARGET...      (make fuzz runs it)
# The growing corpus is kept in BUILD/corpus/TARGET (reused by the next run), crash and
# timeout inputs land in BUILD/crashes/TARGET/, libFuzzer's log in BUILD/logs/TARGET.log.
# Prints one summary line per target (executions, corpus size, crashes); exits 1 if any
# target left a crash. A crash input belongs in tests/fuzz/regress/TARGET/ once fixed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=$1 secs=$2
shift 2
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "$@"; do
    mkdir -p "$build/corpus/$t" "$build/crashes/$t" "$build/logs"
    log="$build/logs/$t.log"
    maxlen=65536
    [ "$t" = tok ] && maxlen=8192
    [ "$t" = apply ] && maxlen=4096
    # libFuzzer stops at the first crash: start it again (from the grown corpus) until the
    # time is used up, so one bug does not hide the others.
    : >"$log"
    end=$((SECONDS + secs)) execs=0 rc=0 runs=0
    while [ $SECONDS -lt $end ] && [ $runs -lt 50 ]; do
        runs=$((runs + 1))
        "$build/tests/fuzz_$t" -max_total_time=$((end - SECONDS)) -timeout=20 -rss_limit_mb=2048 \
            -max_len="$maxlen" -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" \
            "$build/corpus/$t" "tests/fuzz/seeds/$t" >"$log.run" 2>&1
        r=$?
        [ $r -ne 0 ] && rc=$r
        cat "$log.run" >>"$log"
        n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log.run" | grep -o '[0-9]*$' |
            awk '{ s += $1 } END { print s + 0 }')
        execs=$((execs + n))
    done
    rm -f "$log.run"
    crashes=$(find "$build/crashes/$t" -type f | wc -l)
    echo "fuzz $t: ${secs}s, ${execs:-?} executions, corpus $(ls "$build/corpus/$t" | wc -l)," \
         "$crashes crash inputs in $build/crashes/$t (exit $rc)"
    [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ] && status=1
done
exit $status
