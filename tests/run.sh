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
# BATS_ONLY=FILE.bats runs just that file (make test-long does), without the unit tests.
if [ -z "${BATS_ONLY:-}" ]; then
    for t in "$BUILD"/tests/test_*; do
        echo "# unit: $(basename "$t")"
        "$t" 2>&1 || echo "not ok - $(basename "$t") exited with status $?"
    done | tee -a "$log"
fi
bats --tap "tests/bats/${BATS_ONLY:-}" 2>&1 | tee -a "$log"
if [ -x tests/gpu/run.sh ] && ! nvidia-smi >/dev/null 2>&1; then
    echo "# tests/gpu/run.sh skipped: no NVIDIA GPU on this machine (run it on a GPU host)"
fi
# make test also runs the stress test on the ThreadSanitizer build (TSAN_BUILD=build/tsan).
if [ -n "${TSAN_BUILD:-}" ] && [ -z "${BATS_ONLY:-}" ]; then
    echo "# stress.bats on the ThreadSanitizer build $TSAN_BUILD"
    TADOC="$top/$TSAN_BUILD/tadoc" TADOCFS="$top/$TSAN_BUILD/tadocfs" TESTBIN="$top/$TSAN_BUILD/tests" \
        bats --tap tests/bats/stress.bats 2>&1 | sed -E 's/^(not )?ok [0-9]+/& [tsan]/' | tee -a "$log"
fi
for r in "$san_dir"/*; do
    [ -e "$r" ] || continue
    head -60 "$r" | sed 's/^/# /' | tee -a "$log"
    echo "not ok - sanitizer report $(basename "$r")" | tee -a "$log"
done
rm -rf "$san_dir"
pass=$(grep -c '^ok ' "$log")
fail=$(grep -c '^not ok ' "$log")
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
