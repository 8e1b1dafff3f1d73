#!/usr/bin/env bats
# 8 writers and 8 readers on one writable mount for STRESS_SECONDS (default 20), with
# compactions forced by a small compact_threshold and by user.tadoc.compact requests; readers
# check every read that no change overlapped against the writers' model (tests/tools/stress.c).
# Then unmount, remount and compare the whole tree with the model.
load helpers

setup() {
    scratch_mnt
}

teardown() {
    scratch_mnt_free
}

@test "stress: 8 writers, 8 readers, background compactions; the model matches, also after a remount" {
    "$TADOC" pack "$BATS_TEST_DIRNAME/../data/sample" -o "$S/a.tdc" -q
    "$TADOCFS" -o compact_threshold=1048576 "$S/a.tdc" "$M" 3>&-
    run "$TESTBIN/stress" "$M" "${STRESS_SECONDS:-20}" "$S/model"
    echo "$output"
    echo "$output" | sed 's/^/# /' >&3
    [ "$status" -eq 0 ]
    [[ "$output" == *" 0 mismatches, 0 in the final check"* ]]
    getfattr -d "$M" >&3 2>/dev/null || true
    fusermount3 -u "$M"
    for _ in $(seq 100); do awk -v m="$M" '$2 == m { f = 1 } END { exit !f }' /proc/mounts || break; sleep 0.1; done
    "$TADOC" verify "$S/a.tdc"
    "$TADOCFS" -o ro "$S/a.tdc" "$M" 3>&-
    diff -r "$S/model" "$M/stress"
    # Everything that was in the archive before is still there.
    for f in $(cd "$BATS_TEST_DIRNAME/../data/sample" && find . -type f | head -50); do
        cmp "$BATS_TEST_DIRNAME/../data/sample/$f" "$M/$f"
    done
}
