#!/usr/bin/env bats
# 8 writers and 8 readers on one writable mount for STRESS_SECONDS (default 20), with
# compactions forced by a small compact_threshold and by user.tadoc.compact requests; readers
# check every read that no change overlapped against the writers' model (tests/tools/stress.c).
# Beside them, two readers of virtual files of directories the writers leave alone (each
# lookup while the tree changes registers a new inode, whose text comes from the cache of texts). Then unmount, remount and compare the whole
# tree with the model.
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
    virtual_reader() { # the number of reads that failed, once $S/stop exists
        local bad=0 n=0
        while [ ! -e "$S/stop" ]; do
            cat "$M/$1" "$M/$2" >/dev/null || bad=$((bad + 1))
            n=$((n + 1))
            sleep 0.05 # a few hundred reads: the writers' pace stays near the run without them
        done
        echo "$n $bad"
    }
    virtual_reader code/.wordcount code/.search/the >"$S/v1" &
    v1=$!
    virtual_reader text/.sort logs/.termvector >"$S/v2" &
    v2=$!
    run "$TESTBIN/stress" "$M" "${STRESS_SECONDS:-20}" "$S/model"
    touch "$S/stop"
    wait "$v1" "$v2"
    echo "# virtual files read during the run (reads, failures): $(cat "$S/v1"), $(cat "$S/v2")" >&3
    [ "$(cut -d' ' -f2 "$S/v1")" -eq 0 ] && [ "$(cut -d' ' -f2 "$S/v2")" -eq 0 ]
    [ "$(cut -d' ' -f1 "$S/v1")" -gt 0 ] && [ "$(cut -d' ' -f1 "$S/v2")" -gt 0 ]
    echo "$output"
    echo "$output" | sed 's/^/# /' >&3
    [ "$status" -eq 0 ]
    [[ "$output" == *" 0 mismatches, 0 in the final check"* ]]
    for a in shard_cache backend; do getfattr -n "user.tadoc.$a" "$M" >&3 2>/dev/null || true; done
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
