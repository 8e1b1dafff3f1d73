#!/usr/bin/env bash
# Run the whole suite against one build tree and end with "N passed, N failed".
#   BUILD=build/san tests/run.sh      (what `make test` does)
# Unit tests (cmocka) and BATS tests both report TAP; this script counts their results.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
BUILD=${BUILD:-build/rel}
export TADOC="$top/$BUILD/tadoc" TADOCFS="$top/$BUILD/tadocfs" TESTBIN="$top/$BUILD/tests"
export CORPORA="$top/tests/tmp/corpora"
# The daemon without a sanitizer, for tests that measure its memory (a sanitizer's shadow
# memory and quarantine are not the daemon's): make test builds build/rel first.
export TADOCFS_PLAIN="$TADOCFS"
[ -x "$top/build/rel/tadocfs" ] && TADOCFS_PLAIN="$top/build/rel/tadocfs"
export CMOCKA_MESSAGE_OUTPUT=TAP
# The sanitizers' reports go to files, each of which counts as a failure below: the daemon's
# stderr is gone once it daemonizes, so a leak or an error in it would otherwise pass unseen.
# A tool's report still fails its test through the exit status too.
san_dir=$(mktemp -d)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=86:log_path=$san_dir/asan}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$san_dir/ubsan}
export TSAN_OPTIONS=${TSAN_OPTIONS:-log_path=$san_dir/tsan:second_deadlock_stack=1}

tests/corpus.sh || { echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp)
work=$(mktemp -d)

# run_item ITEM: one unit test binary, one BATS file, or "tsan" (stress.bats on the
# ThreadSanitizer build TSAN_BUILD), its TAP on stdout. A BATS file runs without its tests
# tagged `alone` (they run after, on an idle machine).
run_item() {
    case "$1" in
    tsan)
        echo "# stress.bats on the ThreadSanitizer build $TSAN_BUILD"
        TADOC="$top/$TSAN_BUILD/tadoc" TADOCFS="$top/$TSAN_BUILD/tadocfs" \
            TESTBIN="$top/$TSAN_BUILD/tests" bats --tap tests/bats/stress.bats 2>&1 |
            sed -E 's/^(not )?ok [0-9]+/& [tsan]/'
        ;;
    *.bats) bats --tap --filter-tags '!alone' "$1" 2>&1 ;;
    *)
        echo "# unit: $(basename "$1")"
        "$1" 2>&1 || echo "not ok - $(basename "$1") exited with status $?"
        ;;
    esac
}

# lane: take the next item off the queue until it is empty; each item's output goes to the
# log and to stdout whole, as the item ends.
lane() {
    local item out
    while :; do
        item=$(flock "$work/lock" sh -c 'head -1 "$1" && sed -i 1d "$1"' _ "$work/queue")
        [ -n "$item" ] || return 0
        out=$(mktemp -p "$work")
        run_item "$item" >"$out"
        flock "$work/lock" sh -c 'cat "$1" >>"$2"; cat "$1"' _ "$out" "$log"
        rm -f "$out"
    done
}

if [ -n "${BATS_ONLY:-}" ]; then # one file alone (make test-long, make tsan)
    bats --tap "tests/bats/$BATS_ONLY" 2>&1 | tee -a "$log"
else
    # Every item runs in one of TEST_LANES lanes at once (default: one per CPU, at most 4), the
    # files that take longest first so that the lanes end together; then the tests tagged
    # `alone` (they time their own calls), one at a time.
    lanes=${TEST_LANES:-$(nproc)}
    [ "$lanes" -le 4 ] || lanes=4
    long="crash analytics mpi corrupt shards edit space"
    {
        printf 'tests/bats/%s.bats\n' $long
        ls -d tests/bats/*.bats
        [ -z "${TSAN_BUILD:-}" ] || echo tsan
        ls -d "$BUILD"/tests/test_*
    } | awk '!seen[$0]++' >"$work/queue" # the long ones first, each item once
    : >"$work/lock"
    for _ in $(seq "$lanes"); do lane & done
    wait
    alone=$(grep -l '^# bats test_tags=.*\balone\b' tests/bats/*.bats)
    [ -z "$alone" ] || bats --tap --filter-tags alone $alone 2>&1 | tee -a "$log"
fi
if [ -x tests/gpu/run.sh ] && ! nvidia-smi >/dev/null 2>&1; then
    echo "# tests/gpu/run.sh skipped: no NVIDIA GPU on this machine (run it on a GPU host)"
fi
# Each report whole, then its first lines again and its summary next to its verdict: a CI log
# that keeps only its tail still shows what failed where.
for r in "$san_dir"/*; do
    [ -e "$r" ] || continue
    sed 's/^/# /' "$r" | tee -a "$log"
    { grep -m1 -A12 -E '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|.*runtime error)' "$r"
      grep -m1 '^SUMMARY' "$r"; } | sed 's/^/# again: /' | tee -a "$log"
    echo "not ok - sanitizer report $(basename "$r")" | tee -a "$log"
done
rm -rf "$san_dir" "$work"
pass=$(grep -c '^ok ' "$log")
fail=$(grep -c '^not ok ' "$log")
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
