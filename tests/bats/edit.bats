#!/usr/bin/env bats
# The writable mount: ordinary tools (shell redirections, dd, truncate, sed -i, ex/vim, cp, mv,
# rm, ln, chmod, touch, git, tar) edit a real mount of a real archive, and the same edits
# are made to a copy of the tree on local disk (the model). The mount must equal the model
# while the edits are pending, after a remount (journal replay), after `tadoc compact`
# (recompressed) and as `tadoc unpack` of the compacted archive. Also: online and
# background compaction, `tadoc apply` in both offset modes, analytics over pending edits,
# concurrent writers and readers, permissions and durability.

load helpers
load ../oracles
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

# Archives are packed once per file; each test edits a copy.
setup_file() {
    local f=$BATS_FILE_TMPDIR
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$f/l.tdc"
    # A small tree with a symlink: kernel/sched and the ext4 documentation.
    mkdir -p "$f/small"
    cp -a "$CORPORA/linux-slice/kernel/sched" "$CORPORA/linux-slice/Documentation/filesystems/ext4" "$f/small/"
    ln -s sched/core.c "$f/small/core-link"
    "$TADOC" pack -q "$f/small" -o "$f/s.tdc"
    # A tarball with what tar restores: modes, owners, mtimes, a symlink, a hard link, an
    # empty file, an empty directory and binary data.
    local t=$f/tarsrc
    mkdir -p "$t/src/empty-dir" "$t/bin"
    cp -a "$CORPORA/linux-slice/fs/fuse" "$t/src/fuse"
    head -c 70000 /dev/urandom >"$t/bin/random.bin"
    : >"$t/src/empty"
    printf '#!/bin/sh\necho hi\n' >"$t/bin/prog"
    chmod 4755 "$t/bin/prog"
    chmod 0640 "$t/src/fuse/dev.c"
    chown 1234:5678 "$t/src/fuse/file.c"
    ln -s ../src/fuse/dir.c "$t/bin/dir-link"
    ln "$t/src/fuse/inode.c" "$t/bin/inode-hard.c"
    touch -d '2003-04-05 06:07:08.25' "$t/src/fuse/Kconfig" "$t/src/empty-dir"
    tar -C "$t" -cf "$f/src.tar" .
}

setup() {
    scratch
    chmod 755 "$S" # other users (the permission tests) must reach the mountpoint
    L=$CORPORA/linux-slice
    M=$S/m   # the mountpoint
    A=$S/a.tdc # the archive under test (a copy)
    X=$S/model
    mkdir "$M"
}

teardown() {
    fusermount3 -u "$M" 2>/dev/null || true
    if is_mounted "$M"; then fusermount3 -uz "$M" 2>/dev/null || umount -l "$M" || true; fi
    flock -w 10 "$A.lock" true 2>/dev/null || true
    rm -rf "$S"
}

# Mount the archive under test (extra options after it).
mount_a() {
    mnt "$A" "$M" "$@"
    is_mounted "$M"
}

# Unmount and wait until the daemon has let go of the archive (it holds ARCHIVE.lock until
# it has written out its journal and exited; fusermount3 -u returns before that).
umount_a() {
    fusermount3 -u "$M"
    wait_unmounted "$M"
    flock -w 10 "$A.lock" true
}

# A fresh copy of an archive packed in setup_file (l: the Linux slice, s: the small tree)
# and of its tree as the model.
fresh() {
    local which=${1:-l}
    cp "$BATS_FILE_TMPDIR/$which.tdc" "$A"
    if [ "$which" = l ]; then cp -a "$L" "$X"; else cp -a "$BATS_FILE_TMPDIR/small" "$X"; fi
}

root_attr() { getfattr --only-values -n "user.tadoc.$1" "$M"; }

# path, type, mode, size (not of directories: the host filesystem's), link target, owner,
# group, link count.
meta() {
    (cd "$1" && find . -printf '%P\t%y\t%m\t%s\t%l\t%U\t%G\t%n\n' | LC_ALL=C sort) |
        awk -F'\t' 'BEGIN { OFS = "\t" } $2 == "d" { $4 = "-" } 1'
}

mtimes() { (cd "$1" && find . -printf '%P\t%T@\n' | LC_ALL=C sort); }

# One line per file with several names: its names, space-separated.
hardlinks() {
    (cd "$1" && find . -type f -links +1 -printf '%i %P\n' | LC_ALL=C sort -k1,1n -k2) |
        awk '$1 != i { if (NR > 1) print s; i = $1; s = $2; next } { s = s " " $2 }
             END { if (NR) print s }' | LC_ALL=C sort
}

# Tree DIR equals the model: bytes, metadata, hard links. DIFF_X: names diff -r ignores.
same_tree() { # MODEL DIR
    local x=()
    [ -z "${DIFF_X:-}" ] || x=(-x "$DIFF_X")
    diff -r --no-dereference "${x[@]}" "$1" "$2"
    diff <(meta "$1") <(meta "$2")
    diff <(hardlinks "$1") <(hardlinks "$2")
}

# The mounted archive equals the model now (edits pending in the journal), after a remount
# (journal replay), after `tadoc compact` and a remount (recompressed, journal empty), and
# `tadoc unpack` of the compacted archive equals it too. The mtimes the mount shows now stay
# the same through all of them. Leaves the archive unmounted.
check_all() {
    same_tree "$X" "$M"
    mtimes "$M" >"$S/mtimes"
    [ "$(root_attr journal_records)" -gt 0 ]
    umount_a
    mount_a
    same_tree "$X" "$M"
    diff "$S/mtimes" <(mtimes "$M")
    umount_a
    run "$TADOC" compact "$A"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == "compacted "* ]]
    "$TADOC" verify "$A" >/dev/null
    mount_a
    [ "$(root_attr journal_records)" -eq 0 ]
    [ "$(root_attr dirty_files)" -eq 0 ]
    same_tree "$X" "$M"
    diff "$S/mtimes" <(mtimes "$M")
    umount_a
    rm -rf "$S/un"
    "$TADOC" unpack "$A" "$S/un"
    same_tree "$X" "$S/un"
    diff "$S/mtimes" <(mtimes "$S/un")
}

# Paths changed (mtime) since the stamp, without the root (its mtime is the mountpoint's).
changed_since() { (cd "$1" && find . -newer "$S/stamp" -printf '%P\n' | grep -v '^$' | LC_ALL=C sort || true); }

stamp() {
    touch "$S/stamp"
    sleep 0.05 # past the coarse clock tick of the stamp
}

# ---------------------------------------------------------------------------------------

content_edits() { # DIR
    local d=$1 s
    echo 'appended line' >>"$d/kernel/sched/Makefile"
    echo >>"$d/fs/fuse/file.c"
    printf 'replaced by >\n' >"$d/kernel/sched/stop_task.c" # O_TRUNC
    printf 'OVERWRITTEN' | dd of="$d/kernel/sched/core.c" bs=1 seek=100000 conv=notrunc status=none
    # Across the end: the file grows.
    s=$(stat -c %s "$d/kernel/sched/pelt.h")
    printf 'extends the end' | dd of="$d/kernel/sched/pelt.h" bs=1 seek=$((s - 4)) conv=notrunc status=none
    # Many overlapping overwrites of one file, then an append and a cut: a busy piece table.
    for i in $(seq 0 24); do
        printf '<%02d:%s>' "$i" "$(printf '%*s' $((i % 7)) '' | tr ' ' x)" |
            dd of="$d/fs/fuse/dir.c" bs=1 seek=$(((i * 7919) % 20000)) conv=notrunc status=none
    done
    echo 'end of dir.c' >>"$d/fs/fuse/dir.c"
    # 200 KB overwritten in the middle of a large file (several FUSE writes).
    dd if="$CORPORA/brown/ca01" of="$d/kernel/sched/fair.c" bs=64k oflag=seek_bytes seek=12345 \
        conv=notrunc status=none
    head -c 200000 "$CORPORA/brown/ca02" |
        dd of="$d/kernel/sched/fair.c" bs=64k oflag=seek_bytes seek=50001 conv=notrunc status=none
    # Past the end: a hole of zeros, then the bytes.
    s=$(stat -c %s "$d/fs/fuse/dev.c")
    printf 'after a hole' | dd of="$d/fs/fuse/dev.c" bs=1 seek=$((s + 5000)) conv=notrunc status=none
    # A new 1.5 MB file: more than one journal batch.
    cat "$CORPORA"/brown/c[a-f]* | head -c 1500000 >"$d/kernel/big.txt"
    truncate -s 1000 "$d/kernel/sched/wait.c"
    truncate -s 100000 "$d/kernel/sched/swait.c" # grows with a hole of zeros
    truncate -s 0 "$d/kernel/sched/cpupri.h"
    truncate -s 300 "$d/fs/fuse/dir.c"
    echo 'after the cut' >>"$d/fs/fuse/dir.c"
    sed -i 's/static/STATIC/g; 3d' "$d/kernel/sched/idle.c"
    ex -sc '%s/int/INT/g|x' "$d/kernel/sched/clock.c"
    vim -u NONE -es -c 'g/^#include/d' -c 'call append(line("$"), "/* added by vim */")' -c 'wq' \
        "$d/kernel/sched/loadavg.c"
}

@test "append, overwrite, truncate, sed -i, ex and vim -es edits agree with the model, live, remounted, compacted and unpacked" {
    fresh
    mount_a
    stamp
    content_edits "$X"
    content_edits "$M"
    # the edits did something
    ! cmp -s "$X/kernel/sched/idle.c" "$L/kernel/sched/idle.c"
    ! cmp -s "$X/kernel/sched/loadavg.c" "$L/kernel/sched/loadavg.c"
    grep -q 'added by vim' "$M/kernel/sched/loadavg.c"
    [ "$(stat -c %s "$M/kernel/sched/swait.c")" -eq 100000 ]
    [ "$(tail -c 100 "$M/kernel/sched/swait.c" | tr -d '\0' | wc -c)" -eq 0 ]
    # writes updated exactly the mtimes they update on a local filesystem
    diff <(changed_since "$X") <(changed_since "$M")
    [ "$(changed_since "$M" | wc -l)" -ge 12 ]
    [ "$(getfattr --only-values -n user.tadoc.pending "$M/kernel/sched/core.c")" = 1 ]
    [ "$(getfattr --only-values -n user.tadoc.pending "$M/kernel/sched/rt.c")" = 0 ]
    check_all
}

namespace_edits() { # DIR
    local d=$1
    cp "$d/kernel/sched/core.c" "$d/kernel/core-copy.c"
    cp -a "$d/scripts/kconfig/lxdialog" "$d/lxdialog-copy"
    mv "$d/kernel/sched/rt.c" "$d/kernel/rt-moved.c"
    mv "$d/kernel/sched/fair.c" "$d/kernel/sched/deadline.c" # over an existing file
    mv "$d/include" "$d/include-renamed"
    mkdir "$d/empty-target"
    mv -T "$d/scripts/kconfig/lxdialog" "$d/empty-target" # a directory over an empty one
    mv "$d/Documentation/filesystems/ext4" "$d/kernel/ext4-docs" # a directory elsewhere
    rm -r "$d/lib/zstd"
    rm "$d/kernel/sched/Makefile"
    mkdir -p "$d/new/a/b/c"
    echo 'a new file' >"$d/new/a/b/c/file"
    ln -s ../kernel/sched/core.c "$d/new/link-to-core"
    ln -s /nonexistent/target "$d/new/dangling"
    ln "$d/kernel/sched/pelt.h" "$d/new/hard-pelt.h"
    ln "$d/new/a/b/c/file" "$d/new/a/file-again"
    chmod 600 "$d/kernel/sched/stats.c"
    chmod 4755 "$d/kernel/sched/cpufreq.c"
    chmod 700 "$d/new/a"
    chmod 1777 "$d/new/a/b"
    touch -d '2001-02-03 04:05:06.5' "$d/kernel/sched/stats.h"
    touch -h -d '2002-03-04 05:06:07' "$d/new/dangling"
    touch -d '1999-12-31 23:59:59.123456789' "$d/new/a/b/c"
    setfattr -n user.color -v blue "$d/kernel/sched/idle.c"
    setfattr -n user.note -v 'a directory' "$d/new"
    touch "$d/new/$(printf '%0255d' 7)" # the longest name
}

@test "cp, mv (over a file too), rm -r, mkdir -p, ln -s, ln, chmod, touch -d and xattrs agree with the model everywhere" {
    fresh
    mount_a
    stamp
    namespace_edits "$X"
    namespace_edits "$M"
    [ ! -e "$M/lib/zstd" ]
    [ ! -e "$M/scripts/kconfig/lxdialog" ]
    [ -f "$M/empty-target/checklist.c" ]
    run rmdir "$M/kernel"
    [ "$status" -ne 0 ]
    [[ "$output" == *"not empty"* ]]
    run touch "$M/new/$(printf '%0256d' 7)"
    [ "$status" -ne 0 ]
    [[ "$output" == *"too long"* ]]
    run mv "$M/kernel" "$M/kernel/sched/inside"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Invalid argument"* || "$output" == *"itself"* ]]
    [ "$(readlink "$M/new/link-to-core")" = ../kernel/sched/core.c ]
    cmp "$M/new/link-to-core" "$L/kernel/sched/core.c"
    cmp "$M/kernel/sched/deadline.c" "$L/kernel/sched/fair.c"
    # a hard link: one inode, two names, link count 2
    [ "$(stat -c '%i %h' "$M/new/hard-pelt.h")" = "$(stat -c '%i %h' "$M/kernel/sched/pelt.h")" ]
    [ "$(stat -c %h "$M/new/hard-pelt.h")" -eq 2 ]
    echo 'through the other name' >>"$M/new/hard-pelt.h"
    echo 'through the other name' >>"$X/new/hard-pelt.h"
    tail -n1 "$M/kernel/sched/pelt.h" | grep -qx 'through the other name'
    # mtimes set by touch -d and cp -a are the model's
    [ "$(TZ=UTC stat -c %y "$M/kernel/sched/stats.h")" = "2001-02-03 04:05:06.500000000 +0000" ]
    re=$'^(kernel/sched/stats.h|new/dangling|new/a/b/c|lxdialog-copy/.*)\t'
    [ "$(mtimes "$M" | grep -cE "$re")" -ge 4 ]
    diff <(mtimes "$X" | grep -E "$re") <(mtimes "$M" | grep -E "$re")
    [ "$(stat -c %a "$M/new/a/b")" = 1777 ]
    diff <(changed_since "$X") <(changed_since "$M")
    [ "$(changed_since "$M" | wc -l)" -ge 12 ]
    check_all
    # hard links come back as hard links from unpack, xattrs too
    [ "$(stat -c %i "$S/un/new/hard-pelt.h")" = "$(stat -c %i "$S/un/kernel/sched/pelt.h")" ]
    [ "$(stat -c %h "$S/un/new/a/file-again")" -eq 2 ]
    [ "$(getfattr --only-values -n user.color "$S/un/kernel/sched/idle.c")" = blue ]
    mount_a
    [ "$(getfattr --only-values -n user.color "$M/kernel/sched/idle.c")" = blue ]
    [ "$(getfattr --only-values -n user.note "$M/new")" = 'a directory' ]
    [ "$(stat -c '%i %h' "$M/new/hard-pelt.h")" = "$(stat -c '%i %h' "$M/kernel/sched/pelt.h")" ]
}

@test "a file's inode number stays the same through remount and compaction" {
    fresh
    mount_a
    echo x >>"$M/kernel/sched/core.c"
    echo new >"$M/new-file"
    ln "$M/new-file" "$M/new-file-2"
    before=$(stat -c '%n %i' "$M/kernel/sched/core.c" "$M/new-file" "$M/new-file-2" "$M/kernel/sched/rt.c" | sed "s|$M/||")
    umount_a
    mount_a
    diff <(echo "$before") <(stat -c '%n %i' "$M/kernel/sched/core.c" "$M/new-file" "$M/new-file-2" "$M/kernel/sched/rt.c" | sed "s|$M/||")
    setfattr -n user.tadoc.compact -v 1 "$M"
    diff <(echo "$before") <(stat -c '%n %i' "$M/kernel/sched/core.c" "$M/new-file" "$M/new-file-2" "$M/kernel/sched/rt.c" | sed "s|$M/||")
    umount_a
    mount_a
    diff <(echo "$before") <(stat -c '%n %i' "$M/kernel/sched/core.c" "$M/new-file" "$M/new-file-2" "$M/kernel/sched/rt.c" | sed "s|$M/||")
}

git_work() { # DIR
    (
        cd "$1/kernel/sched"
        g() { git -c user.name='Test User' -c user.email=test@example.org -c init.defaultBranch=main \
            -c pack.threads=1 "$@"; }
        g init -q
        g add .
        g commit -qm 'import kernel/sched'
        sed -i 's/^/ /' cpupri.c
        git rm -q Makefile
        echo 'new file' >new.c
        g add .
        g commit -qm 'second'
        g tag v1
        g gc -q
    )
}

@test "git init, add, commit and gc inside the mount give the model's commits; the repository survives remount and compaction" {
    fresh
    export GIT_AUTHOR_DATE='2020-01-02T03:04:05Z' GIT_COMMITTER_DATE='2020-01-02T03:04:05Z'
    mount_a
    git_work "$X"
    git_work "$M"
    head=$(git -C "$X/kernel/sched" rev-parse HEAD)
    [ "$(git -C "$M/kernel/sched" rev-parse HEAD)" = "$head" ]
    git -C "$M/kernel/sched" fsck --full --strict
    [ -z "$(git -C "$M/kernel/sched" status --porcelain)" ]
    # .git/index holds stat data (inode numbers, ctimes) of the host filesystem
    DIFF_X=index check_all
    mount_a
    [ "$(git -C "$M/kernel/sched" rev-parse v1)" = "$head" ]
    git -C "$M/kernel/sched" fsck --full --strict
    [ -z "$(git -C "$M/kernel/sched" status --porcelain)" ]
    [ "$(git -C "$M/kernel/sched" log --oneline | wc -l)" -eq 2 ]
    git -C "$M/kernel/sched" show HEAD~1:Makefile | cmp - "$L/kernel/sched/Makefile"
}

@test "tar x into the mount restores contents, modes, owners, mtimes, links like tar x into the model" {
    fresh
    mount_a
    for d in "$X" "$M"; do
        mkdir "$d/untar"
        tar -C "$d/untar" -xf "$BATS_FILE_TMPDIR/src.tar"
    done
    # tar sets every mtime, so here they compare with the model directly
    diff <(mtimes "$X/untar") <(mtimes "$M/untar")
    [ "$(stat -c '%u:%g %a' "$M/untar/src/fuse/file.c")" = "1234:5678 644" ]
    [ "$(stat -c %a "$M/untar/bin/prog")" = 4755 ]
    [ "$(stat -c %h "$M/untar/bin/inode-hard.c")" -eq 2 ]
    cmp "$M/untar/bin/random.bin" "$BATS_FILE_TMPDIR/tarsrc/bin/random.bin"
    diff <(cd "$X/untar" && tar --sort=name -cf - . | tar tvf -) \
        <(cd "$M/untar" && tar --sort=name -cf - . | tar tvf -)
    check_all
    diff <(mtimes "$X/untar") <(mtimes "$S/un/untar")
}

# ---------------------------------------------------------------------------------------

# Checksums of every file under the mount plus its metadata.
snapshot() { (cd "$M" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum; meta .); }

@test "a file written back to its archived bytes and compacted while read in order is not taken for damage" {
    fresh
    mount_a
    # The reader's in-order hash check sees bytes of the edit; the file is then clean again,
    # with its archived hash. O_DIRECT: each read reaches the daemon, in order.
    python3 - "$M/kernel/sched/core.c" "$L/kernel/sched/core.c" <<'PY'
import mmap, os, sys
p, orig = sys.argv[1], open(sys.argv[2], 'rb').read()
buf = mmap.mmap(-1, 1 << 20)
r = os.open(p, os.O_RDONLY | os.O_DIRECT)
w = os.open(p, os.O_WRONLY)
def rd(off, n):
    return bytes(buf[:os.preadv(r, [memoryview(buf)[:n]], off)])
rd(0, 4096)
os.pwrite(w, b'X' * 4096, 4096)
rd(4096, 4096)
os.pwrite(w, orig[4096:8192], 4096)
os.setxattr(os.path.dirname(os.path.dirname(os.path.dirname(p))), 'user.tadoc.compact', b'1')
off = 8192
while off < len(orig):
    n = len(rd(off, 1 << 20))
    assert n > 0, off
    off += n
PY
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
    [ "$(root_attr compactions)" -eq 1 ]
}

@test "online compaction (setfattr user.tadoc.compact): reads identical before and after, counters move, open files go on" {
    fresh
    mount_a
    for d in "$X" "$M"; do
        echo 'zebra quokka' >>"$d/kernel/sched/Makefile"
        printf 'MIDDLE' | dd of="$d/kernel/sched/core.c" bs=1 seek=5000 conv=notrunc status=none
        mkdir "$d/fresh-dir"
        cp "$d/fs/fuse/dev.c" "$d/fresh-dir/dev.c"
        rm "$d/lib/zstd/Makefile"
        ln -s ../kernel "$d/fresh-dir/k"
    done
    [ "$(root_attr compactions)" -eq 0 ]
    [ "$(root_attr journal_records)" -gt 0 ]
    [ "$(root_attr dirty_files)" -ge 2 ]
    # A reader and a writer hold files open across the compaction.
    exec 5<"$M/kernel/sched/core.c"
    dd bs=4096 count=1 status=none <&5 >"$S/part1"
    [ "$(stat -c %s "$S/part1")" -eq 4096 ]
    exec 6>>"$M/kernel/sched/rt.c"
    echo 'written before the compaction' >&6
    echo 'written before the compaction' >>"$X/kernel/sched/rt.c"
    snapshot >"$S/before"
    setfattr -n user.tadoc.compact -v 1 "$M"
    [ "$(root_attr compactions)" -eq 1 ]
    [ "$(root_attr journal_records)" -eq 0 ]
    [ "$(root_attr dirty_files)" -eq 0 ]
    diff "$S/before" <(snapshot)
    cat <&5 >"$S/part2"
    exec 5<&-
    cat "$S/part1" "$S/part2" | cmp - "$X/kernel/sched/core.c"
    echo 'written after it' >&6
    exec 6>&-
    echo 'written after it' >>"$X/kernel/sched/rt.c"
    [ "$(root_attr journal_records)" -gt 0 ]
    same_tree "$X" "$M"
    setfattr -n user.tadoc.compact -v 1 "$M"
    [ "$(root_attr compactions)" -eq 2 ]
    [ "$(root_attr journal_records)" -eq 0 ]
    [ "$(root_attr dirty_files)" -eq 0 ]
    same_tree "$X" "$M"
    # only the root takes the compaction attribute; tadoc.* attributes are computed
    run setfattr -n user.tadoc.compact -v 1 "$M/kernel"
    [ "$status" -ne 0 ]
    run setfattr -n user.tadoc.files -v 1 "$M"
    [ "$status" -ne 0 ]
    umount_a
    # the archive itself now holds everything
    rm -rf "$S/un"
    "$TADOC" unpack "$A" "$S/un"
    same_tree "$X" "$S/un"
    run "$TADOC" compact "$A"
    [[ "$output" == "nothing to compact"* ]]
}

@test "background compaction starts once the journal passes compact_threshold=64K, and the mount keeps serving" {
    fresh
    mount_a -o compact_threshold=64K
    [ "$(root_attr compactions)" -eq 0 ]
    echo small >>"$M/kernel/sched/Makefile"
    echo small >>"$X/kernel/sched/Makefile"
    sleep 0.3
    [ "$(root_attr compactions)" -eq 0 ] # under the threshold: nothing yet
    for d in "$X" "$M"; do
        cat "$CORPORA"/brown/ca0[1-9] >"$d/brown.txt" # about 200 KB
    done
    for _ in $(seq 100); do
        [ "$(root_attr compactions)" -ge 1 ] && break
        # reads go on meanwhile
        cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
        sleep 0.1
    done
    [ "$(root_attr compactions)" -ge 1 ]
    # What was written while it ran stays in the journal; past the threshold it starts one
    # more compaction (which takes a while on a loaded machine): wait for it.
    for _ in $(seq 100); do
        [ "$(root_attr journal_bytes)" -lt 65536 ] && break
        sleep 0.1
    done
    [ "$(root_attr journal_bytes)" -lt 65536 ]
    same_tree "$X" "$M"
    umount_a
    mount_a
    [ "$(root_attr journal_bytes)" -lt 65536 ]
    same_tree "$X" "$M"
}

# The daemon without a sanitizer (TADOCFS_PLAIN), since what is measured is how long a change
# waits, not how fast the sanitizer runs; tagged `alone`, so tests/run.sh runs it with nothing
# else on the machine.
# bats test_tags=alone
@test "changes go on while background compactions run: no call waits 100 ms, the tree equals the model, also remounted" {
    fresh
    TADOCFS=$TADOCFS_PLAIN mount_a -o compact_threshold=256K
    mkdir "$M/w" "$X/w"
    run "$TESTBIN/writelat" "$M/w" "$X/w" 8 1
    echo "$output"
    [ "$status" -eq 0 ]
    local max fs mfs compactions
    max=$(awk '{ print $4 }' <<<"$output")
    fs=$(awk '{ print $16 }' <<<"$output")
    mfs=$(awk '{ print $14 }' <<<"$output")
    compactions=$(root_attr compactions)
    echo "compactions during the run: $compactions"
    # Each compaction recompresses megabytes of new text, which takes far longer than 100 ms
    # here: a change that waited for one would show.
    [ "$compactions" -ge 3 ]
    awk -v m="$max" 'BEGIN { exit !(m < 100) }'
    # An fsync waits for the disk, which the compaction's writes and the model's share, and
    # may wait for the syncs of a compaction's switch to the new archive (made with changes
    # held): two of the model's longest fsyncs, plus the same 100 ms. Bounded at the 99th
    # percentile of the mount's fsyncs: one may meet the disk busy flushing a compaction's
    # archive (296 ms against the model's 15 once, on the 2-core VM), while fsyncs that
    # waited for compactions, which run for most of the time, would be many.
    awk -v f="$fs" -v g="$mfs" 'BEGIN { exit !(f < 2 * g + 100) }'
    same_tree "$X" "$M"
    umount_a
    TADOCFS=$TADOCFS_PLAIN mount_a
    same_tree "$X" "$M"
    umount_a
    "$TADOC" verify "$A" >/dev/null
}

# ---------------------------------------------------------------------------------------

# Expected effect of a `tadoc apply` ops file, computed independently over the files of
# DIR (changed in place); prints the expected extract lines.
expect_apply() { # sequence|batch OPS DIR
    perl -e '
        use strict; use warnings;
        my ($mode, $ops, $dir) = @ARGV;
        my %e = (n => "\n", t => "\t", r => "\r", "0" => "\0", "\\" => "\\");
        sub unesc { my $s = shift; $s =~ s/\\(x([0-9A-Fa-f]{2})|[ntr0\\])/defined $2 ? chr(hex $2) : $e{$1}/ge; $s }
        sub esc { my $s = shift;
            $s =~ s/([\\\n\t\x00-\x1f\x7f])/$1 eq "\\" ? "\\\\" : $1 eq "\n" ? "\\n" : $1 eq "\t" ? "\\t" : sprintf("\\x%02x", ord $1)/ge; $s }
        my %text;
        sub load { my $p = shift; return if exists $text{$p};
            open my $f, "<:raw", "$dir/$p" or die "$p: $!"; local $/; $text{$p} = <$f>; }
        my @ops;
        open my $in, "<:raw", $ops or die;
        while (my $l = <$in>) {
            chomp $l; next if $l eq "" or $l =~ /^#/;
            my @f = split /\t/, $l, -1; $f[1] = unesc($f[1]); load($f[1]); push @ops, \@f;
        }
        if ($mode eq "sequence") {
            for my $o (@ops) {
                my ($k, $p) = @$o;
                if ($k eq "insert") { substr($text{$p}, $o->[2], 0) = unesc($o->[3]) }
                elsif ($k eq "append") { $text{$p} .= unesc($o->[2]) }
                else { print esc(substr($text{$p}, $o->[2], $o->[3])), "\n" }
            }
        } else {
            my %ins;
            for my $o (@ops) {
                my ($k, $p) = @$o;
                if ($k eq "extract") { print esc(substr($text{$p}, $o->[2], $o->[3])), "\n" }
                if ($k eq "insert") { push @{$ins{$p}{$o->[2]}}, unesc($o->[3]) }
            }
            for my $p (keys %ins) {
                my ($t, $prev, $out) = ($text{$p}, 0, "");
                for my $off (sort { $a <=> $b } keys %{$ins{$p}}) {
                    $out .= substr($t, $prev, $off - $prev) . join("", @{$ins{$p}{$off}});
                    $prev = $off;
                }
                $text{$p} = $out . substr($t, $prev);
            }
            for my $o (@ops) { $text{$o->[1]} .= unesc($o->[2]) if $o->[0] eq "append" }
        }
        for my $p (keys %text) {
            open my $f, ">:raw", "$dir/$p" or die "$p: $!"; print $f $text{$p}; close $f or die;
        }' "$@"
}

# An ops file over files of the Linux slice: inserts at offset 0, in the middle, at equal
# offsets and at the end, appends, extracts (one of 250 KB), escapes and raw UTF-8.
write_ops() { # OPS
    local mk=kernel/sched/Makefile core=kernel/sched/core.c doc=Documentation/filesystems/ext4/about.rst
    local nmk ncore
    nmk=$(stat -c %s "$L/$mk")
    ncore=$(stat -c %s "$L/$core")
    {
        printf '# a comment, then an empty line\n\n'
        printf 'insert\t%s\t%d\t%s\n' "$core" "$ncore" '\n/* at the end */\n'
        printf 'insert\t%s\t0\t%s\n' "$mk" 'HEAD\n'
        printf 'insert\t%s\t10\t%s\n' "$mk" '[a]'
        printf 'insert\t%s\t10\t%s\n' "$mk" '[b]'
        printf 'insert\t%s\t10\t%s\n' "$mk" '[c]'
        printf 'extract\t%s\t0\t40\n' "$mk"
        printf 'insert\t%s\t%d\t%s\n' "$mk" 30 'tab\there'
        printf 'append\t%s\t%s\n' "$mk" 'appended\n'
        printf 'insert\t%s\t%d\t%s\n' "$mk" "$nmk" '<at original end>'
        printf 'extract\t%s\t%d\t30\n' "$mk" $((nmk - 10))
        printf 'insert\t%s\t150000\t%s\n' "$core" 'MID\x00\xff\\'
        printf 'extract\t%s\t149990\t40\n' "$core"
        printf 'insert\t%s\t0\t%s\n' "$core" '/* first */ '
        printf 'extract\t%s\t%d\t5\n' "$core" $((ncore - 5))
        printf 'extract\t%s\t1000\t250000\n' "$core"
        printf 'append\t%s\t%s\n' "$doc" 'zebra quokka caf\xc3\xa9\n'
        printf 'insert\t%s\t3\t%s\n' "$doc" 'é'
        printf 'extract\t%s\t0\t12\n' "$doc"
        printf 'append\t%s\t%s\n' "$doc" 'second append\n'
    } >"$1"
}

apply_case() { # sequence|batch
    fresh
    write_ops "$S/ops"
    expect_apply "$1" "$S/ops" "$X" >"$S/extracts.expected"
    ! cmp -s "$X/kernel/sched/Makefile" "$L/kernel/sched/Makefile"
    [ "$(wc -l <"$S/extracts.expected")" -eq 6 ]
    "$TADOC" apply --offsets="$1" "$A" "$S/ops" >"$S/extracts" 2>"$S/summary"
    cat "$S/summary"
    grep -q "10 inserts, 3 appends .* 6 extracts .*offsets=$1" "$S/summary"
    diff "$S/extracts.expected" "$S/extracts"
    # pending: the mount shows the result
    mount_a
    [ "$(root_attr journal_records)" -gt 0 ]
    same_tree "$X" "$M"
    umount_a
    # folded in: the archive alone holds it
    "$TADOC" compact "$A" >/dev/null
    for p in kernel/sched/Makefile kernel/sched/core.c Documentation/filesystems/ext4/about.rst kernel/sched/rt.c; do
        "$TADOC" cat "$A" "$p" | cmp - "$X/$p"
    done
    "$TADOC" unpack "$A" "$S/un"
    diff -r "$X" "$S/un"
}

@test "tadoc apply --offsets=sequence: extracts, the mount and the compacted archive match a perl model" {
    apply_case sequence
}

@test "tadoc apply --offsets=batch: extracts, the mount and the compacted archive match a perl model" {
    apply_case batch
}

@test "tadoc apply over pending records, then a bad ops file changes nothing" {
    fresh
    printf 'insert\tkernel/sched/rt.c\t0\tone\\n\nappend\tkernel/sched/rt.c\tend\\n\n' >"$S/ops1"
    printf 'insert\tkernel/sched/rt.c\t2\t[x]\ninsert\tkernel/sched/rt.c\t2\t[y]\nextract\tkernel/sched/rt.c\t0\t10\n' >"$S/ops2"
    expect_apply sequence "$S/ops1" "$X" >/dev/null
    expect_apply batch "$S/ops2" "$X" >"$S/ex2"
    "$TADOC" apply -q "$A" "$S/ops1"
    "$TADOC" apply -q --offsets=batch "$A" "$S/ops2" >"$S/got2"
    diff "$S/ex2" "$S/got2"
    [ "$(cat "$S/got2")" = 'one\n// SPD' ]
    cp "$A.journal" "$S/journal.before"
    # parse errors: nothing applied, exit 2
    printf 'append\tkernel/sched/rt.c\tok\ninsert\tkernel/sched/rt.c\tminus\tx\n' >"$S/bad"
    run "$TADOC" apply -q "$A" "$S/bad"
    [ "$status" -eq 2 ]
    [[ "$output" == *"line 2"* ]]
    printf 'append\tno/such/file\tx\n' >"$S/bad"
    run "$TADOC" apply -q "$A" "$S/bad"
    [ "$status" -ne 0 ]
    [[ "$output" == *"no/such/file"* ]]
    # a path that is not a regular file, or that an escaped NUL would cut short (another
    # file's name), is refused by name before anything changes
    for l in 'truncate\tkernel\t0' 'append\tkernel/sched\tx' 'extract\tkernel\t0\t1'; do
        printf "$l\n" >"$S/bad"
        run "$TADOC" apply -q "$A" "$S/bad"
        [ "$status" -eq 1 ]
        [[ "$output" == *"line 1: kernel"*": not a regular file"* ]]
    done
    # an ops file that cannot be read is no empty batch
    for src in "$S" "-"; do
        "$TADOC" apply -q "$A" "$src" <&- 2>"$S/err" && st=0 || st=$?
        [ "$st" -eq 1 ] && grep -q "line 1: read: " "$S/err"
    done
    printf 'append\tkernel/sched/rt.c\\x00junk\tx\n' >"$S/bad"
    run "$TADOC" apply -q "$A" "$S/bad"
    [ "$status" -eq 2 ]
    [[ "$output" == *"line 1: bad escape in path"* ]]
    cmp "$A.journal" "$S/journal.before"
    # batch offsets are all checked before anything changes: one past the end, nothing applied
    size=$(stat -c %s "$X/kernel/sched/rt.c")
    printf 'insert\tkernel/sched/rt.c\t0\tfine\nappend\tkernel/sched/rt.c\tx\ninsert\tkernel/sched/rt.c\t%s\tlate\n' \
        $((size + 1)) >"$S/bad"
    run "$TADOC" apply -q --offsets=batch "$A" "$S/bad"
    [ "$status" -ne 0 ]
    [[ "$output" == *"line 3: offset $((size + 1)) is past the end ($size bytes)"* ]]
    cmp "$A.journal" "$S/journal.before"
    # in sequence, a line that fails when it runs undoes the lines before it: the journal is
    # cut back to where the batch began
    printf 'append\tkernel/sched/rt.c\tx\ndelete\tkernel/sched/rt.c\ninsert\tkernel/sched/rt.c\t0\ty\n' >"$S/bad"
    run "$TADOC" apply -q "$A" "$S/bad"
    [ "$status" -ne 0 ]
    [[ "$output" == *"line 3: No such file or directory"* ]]
    [[ "$output" == *"nothing of the batch was applied"* ]]
    cmp "$A.journal" "$S/journal.before"
    mount_a
    same_tree "$X" "$M"
}

# ---------------------------------------------------------------------------------------

@test "analytics virtual files agree with the oracles over pending edits, after rm, and after compaction" {
    fresh
    mount_a
    for d in "$X" "$M"; do echo 'zebra quokka' >>"$d/kernel/sched/Makefile"; done
    [ "$(root_attr journal_records)" -gt 0 ]
    [ "$(root_attr compactions)" -eq 0 ]
    cat "$M/.wordcount" >"$S/wc"
    diff <(oracle_wordcount "$X") "$S/wc"
    grep -qx $'1\tzebra' "$S/wc"
    diff <(oracle_wordcount "$X/kernel/sched") <(cat "$M/kernel/sched/.wordcount")
    diff <(oracle_invindex "$X/kernel/sched") <(cat "$M/kernel/sched/.invindex")
    diff <(oracle_termvector "$X/kernel/sched") <(cat "$M/kernel/sched/.termvector")
    # the file's words go with it
    rm "$X/kernel/sched/Makefile" "$M/kernel/sched/Makefile"
    cat "$M/.wordcount" >"$S/wc"
    diff <(oracle_wordcount "$X") "$S/wc"
    ! grep -q $'\tzebra$' "$S/wc"
    cat "$M/kernel/sched/.wordcount" >"$S/wcs"
    diff <(oracle_wordcount "$X/kernel/sched") "$S/wcs"
    cat "$M/kernel/sched/.invindex" >"$S/ii"
    # compaction changes nothing the analytics say
    setfattr -n user.tadoc.compact -v 1 "$M"
    [ "$(root_attr journal_records)" -eq 0 ]
    cmp "$S/wc" <(cat "$M/.wordcount")
    cmp "$S/wcs" <(cat "$M/kernel/sched/.wordcount")
    cmp "$S/ii" <(cat "$M/kernel/sched/.invindex")
    umount_a
    cmp "$S/wc" <("$TADOC" wordcount "$A")
}

@test "analytics over pending edits in an archive holding a symlink: repeated reads agree, the daemon stays up" {
    fresh s
    mount_a
    for d in "$X" "$M"; do echo 'zebra quokka' >>"$d/sched/Makefile"; done
    oracle_wordcount "$X" >"$S/wc.expected"
    oracle_wordcount "$X/sched" >"$S/wcs.expected"
    for _ in 1 2 3; do
        cat "$M/.wordcount" >"$S/wc"
        cmp "$S/wc.expected" "$S/wc"
        cat "$M/sched/.wordcount" >"$S/wcs"
        cmp "$S/wcs.expected" "$S/wcs"
    done
    is_mounted "$M"
    cmp "$M/core-link" "$X/sched/core.c"
    same_tree "$X" "$M"
}

@test "analytics over pending edits in an archive holding user xattrs: repeated reads agree, the daemon stays up" {
    fresh s
    mount_a
    setfattr -n user.color -v blue "$M/sched/idle.c"
    setfattr -n user.tadoc.compact -v 1 "$M" # the xattr is now in the archive
    for d in "$X" "$M"; do echo 'zebra quokka' >>"$d/sched/Makefile"; done
    oracle_wordcount "$X" >"$S/wc.expected"
    for _ in 1 2 3; do
        cat "$M/.wordcount" >"$S/wc"
        cmp "$S/wc.expected" "$S/wc"
    done
    is_mounted "$M"
    [ "$(getfattr --only-values -n user.color "$M/sched/idle.c")" = blue ]
}

# ---------------------------------------------------------------------------------------

@test "4 writers appending to different files while 4 readers read other files: nothing lost, nothing mixed" {
    fresh
    mount_a
    local wf=(kernel/sched/core.c fs/fuse/dev.c lib/zstd/Makefile scripts/kconfig/conf.c)
    local rf=(kernel/sched/fair.c fs/fuse/file.c include/linux/mm.h scripts/kconfig/confdata.c)
    local pids=() i
    for i in 0 1 2 3; do
        (for n in $(seq 300); do echo "writer $i line $n with some padding text"; done |
            while IFS= read -r line; do printf '%s\n' "$line" >>"$M/${wf[$i]}"; done) &
        pids+=($!)
    done
    for i in 0 1 2 3; do
        (for _ in $(seq 15); do
            cmp "$M/${rf[$i]}" "$L/${rf[$i]}" || exit 1
            head -c "$(stat -c %s "$L/${wf[$i]}")" "$M/${wf[$i]}" | cmp - "$L/${wf[$i]}" || exit 1
        done) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    for i in 0 1 2 3; do
        for n in $(seq 300); do echo "writer $i line $n with some padding text"; done >>"$X/${wf[$i]}"
    done
    same_tree "$X" "$M"
    # 4 writers appending (O_APPEND) to one file: every line whole, each writer's in order
    : >"$M/shared.log"
    pids=()
    for i in 1 2 3 4; do
        (for n in $(seq 400); do echo "writer $i line $n padding padding"; done |
            while IFS= read -r line; do printf '%s\n' "$line" >>"$M/shared.log"; done) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    [ "$(wc -l <"$M/shared.log")" -eq 1600 ]
    for i in 1 2 3 4; do
        diff <(grep "^writer $i " "$M/shared.log") <(for n in $(seq 400); do echo "writer $i line $n padding padding"; done)
    done
    cp "$M/shared.log" "$X/shared.log"
    same_tree "$X" "$M"
    umount_a
    mount_a
    same_tree "$X" "$M"
}

# ---------------------------------------------------------------------------------------

nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

@test "permissions: modes are enforced for other users, owners are kept, allow_other is needed to see the mount" {
    fresh
    mount_a -o allow_other
    mkdir "$M/locked" "$M/open"
    chmod 0777 "$M/open"
    [ "$(stat -c '%U %a' "$M/locked")" = "root 755" ]
    run nobody sh -c "echo x >'$M/locked/f'"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Permission denied"* ]]
    [ ! -e "$M/locked/f" ]
    run nobody rm -f "$M/kernel/sched/core.c"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Permission denied"* ]]
    [ -f "$M/kernel/sched/core.c" ]
    run nobody sh -c "echo x >>'$M/kernel/sched/core.c'"
    [[ "$output" == *"Permission denied"* ]]
    nobody sh -c "echo theirs >'$M/open/theirs'"
    [ "$(stat -c '%u:%g' "$M/open/theirs")" = 65534:65534 ]
    nobody chmod 600 "$M/open/theirs"
    echo root >"$M/open/rootfile"
    chmod 600 "$M/open/rootfile"
    [ "$(stat -c '%u:%g %a' "$M/open/rootfile")" = "0:0 600" ]
    run nobody cat "$M/open/rootfile"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Permission denied"* ]]
    run nobody chmod 666 "$M/open/rootfile"
    [ "$status" -ne 0 ]
    [[ "$output" == *"not permitted"* ]]
    [ "$(nobody cat "$M/kernel/sched/Makefile" | md5sum)" = "$(md5sum <"$L/kernel/sched/Makefile")" ]
    umount_a
    # without allow_other only the mounting user sees the mount
    mount_a
    run nobody ls "$M"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Permission denied"* ]]
    ls "$M/open" >/dev/null
    # owners and modes survived the replay
    [ "$(stat -c '%u:%g %a' "$M/open/theirs")" = "65534:65534 600" ]
    [ "$(stat -c '%u:%g %a' "$M/open/rootfile")" = "0:0 600" ]
    [ "$(cat "$M/open/theirs")" = theirs ]
}

# ---------------------------------------------------------------------------------------

@test "an unlinked or replaced file stays readable while open and is gone after close; compaction waits for it" {
    fresh
    mount_a
    exec 5<"$M/kernel/sched/core.c"
    exec 7<"$M/kernel/sched/fair.c"
    rm "$M/kernel/sched/core.c" "$X/kernel/sched/core.c"
    mv "$M/kernel/sched/rt.c" "$M/kernel/sched/fair.c"
    mv "$X/kernel/sched/rt.c" "$X/kernel/sched/fair.c"
    [ ! -e "$M/kernel/sched/core.c" ]
    # online compaction refuses while a removed file is open (EBUSY) ...
    run setfattr -n user.tadoc.compact -v 1 "$M"
    [ "$status" -ne 0 ]
    [[ "$output" == *"busy"* ]]
    [ "$(root_attr compactions)" -eq 0 ]
    cmp - "$L/kernel/sched/core.c" <&5
    cmp - "$L/kernel/sched/fair.c" <&7
    same_tree "$X" "$M"
    exec 5<&- 7<&-
    # ... and works once it is closed
    for _ in $(seq 20); do setfattr -n user.tadoc.compact -v 1 "$M" 2>/dev/null && break; sleep 0.1; done
    [ "$(root_attr compactions)" -eq 1 ]
    same_tree "$X" "$M"
    umount_a
    mount_a
    same_tree "$X" "$M"
}

@test "after fsync and a killed daemon (SIGKILL), a remount shows every fsynced change" {
    fresh
    "$TADOCFS" -f "$A" "$M" 3>&- 2>"$S/fg.log" &
    pid=$!
    wait_mounted "$M"
    for d in "$X" "$M"; do
        echo 'durable line' >>"$d/kernel/sched/Makefile"
        mkdir "$d/newdir"
        cp "$d/fs/fuse/dev.c" "$d/newdir/dev.c"
    done
    sync "$M/kernel/sched/Makefile" "$M/newdir/dev.c"
    kill -9 "$pid"
    wait "$pid" || true
    fusermount3 -u "$M" 2>/dev/null || fusermount3 -uz "$M"
    wait_unmounted "$M"
    mount_a
    same_tree "$X" "$M"
}

@test "right after fusermount3 -u returns, the archive is free: tadoc compact and a new mount succeed" {
    fresh
    for i in 1 2 3 4 5; do
        mount_a
        echo "round $i" >>"$M/kernel/sched/Makefile"
        echo "round $i" >>"$X/kernel/sched/Makefile"
        fusermount3 -u "$M"
        run "$TADOC" compact "$A"
        echo "$output"
        [ "$status" -eq 0 ]
    done
    mount_a
    same_tree "$X" "$M"
}

@test "pack over a written archive: refused while its journal holds edits or a mount holds it; after compaction the new archive replaces it and takes writes" {
    fresh s
    mount_a
    echo new >"$M/added"
    run "$TADOC" pack -q "$X" -o "$A"
    [ "$status" -ne 0 ] && [[ "$output" == *"in use by another writer"* ]]
    umount_a
    cp "$A" "$S/before"
    run "$TADOC" pack -q "$X" -o "$A"
    [ "$status" -ne 0 ] && [[ "$output" == *"holds edits not yet folded"* ]]
    cmp "$A" "$S/before" # nothing replaced, the edit still there to fold in
    "$TADOC" compact "$A" >/dev/null
    [ "$("$TADOC" cat "$A" added)" = new ]
    [ -e "$A.journal" ] # an empty journal bound to the old archive
    echo again >"$X/later"
    "$TADOC" pack -q "$X" -o "$A"
    [ ! -e "$A.journal" ]
    [ "$("$TADOC" cat "$A" later)" = again ]
    mount_a
    echo more >>"$M/later"
    umount_a
    "$TADOC" compact "$A" >/dev/null
    [ "$("$TADOC" cat "$A" later)" = "$(printf 'again\nmore')" ]
}
