#!/usr/bin/env bats
# Model-based random operations (tests/tools/fsx.c) on files of a mounted archive: pwrite,
# append, truncate, fallocate, mmap reads and writes, fsync, reopen; every read is compared
# with an in-memory model, and the final bytes again after remount and after compaction.
# FSX_OPS sets the operation count (make test: 3000; make test-long: 100000).

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"
OPS=${FSX_OPS:-3000}

setup() {
    scratch
    M=$S/m
    mkdir "$M"
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/a.tdc"
}

teardown() {
    fusermount3 -u "$M" 2>/dev/null || true
    rm -rf "$S"
}

@test "fsx on a new file and on archived files: every read matches the model, also after remount and compaction" {
    mnt "$S/a.tdc" "$M"
    big=$(cd "$CORPORA/linux-slice" && find . -type f -size +40k | LC_ALL=C sort | head -1)
    small=$(cd "$CORPORA/linux-slice" && find . -type f -size -2k | LC_ALL=C sort | head -1)
    seed=$RANDOM
    echo "# seed $seed"
    FSX_MODEL=$S/new.model "$TESTBIN/fsx" "$M/new.txt" "$OPS" "$seed"
    FSX_MODEL=$S/big.model "$TESTBIN/fsx" "$M/$big" "$OPS" "$((seed + 1))" 8192 keep
    FSX_MODEL=$S/small.model "$TESTBIN/fsx" "$M/$small" "$OPS" "$((seed + 2))" 300 keep
    check() {
        cmp "$M/new.txt" "$S/new.model"
        cmp "$M/$big" "$S/big.model"
        cmp "$M/$small" "$S/small.model"
    }
    fusermount3 -u "$M"
    mnt "$S/a.tdc" "$M"
    check
    fusermount3 -u "$M"
    "$TADOC" compact "$S/a.tdc"
    "$TADOC" verify "$S/a.tdc"
    mnt "$S/a.tdc" "$M"
    check
    # Online compaction while the files are open for reading.
    exec 4<"$M/$big"
    setfattr -n user.tadoc.compact -v 1 "$M"
    cmp /dev/fd/4 "$S/big.model"
    exec 4<&-
    check
}
