#!/usr/bin/env bats
# The FUSE daemon: real read-only mounts of packed trees, read back with ordinary tools and
# compared with the originals; corrupt archives, stale mounts, signals, mount(8), options.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

# A small tree with what the corpora lack: symlinks of every kind, odd modes and owners,
# empty files and directories, binary data, nanosecond mtimes.
make_link_tree() {
    local t=$1
    mkdir -p "$t/sub/deeper" "$t/empty-dir" "$t/private" "$t/with space"
    chmod 0700 "$t/private"
    chmod 2755 "$t/sub"
    printf 'hello world\n' >"$t/hello.txt"
    : >"$t/zero"
    head -c 200000 /dev/urandom >"$t/random.bin"
    printf 'caf\xe9 \x00\x01 tail' >"$t/with space/latin1"
    cp "$CORPORA/brown/ca01" "$t/sub/deeper/ca01"
    printf '#!/bin/sh\necho hi\n' >"$t/private/prog"
    chmod 4755 "$t/private/prog"
    chmod 0444 "$t/sub/deeper/ca01"
    chown 1234:5678 "$t/sub/deeper/ca01"
    ln -s hello.txt "$t/link-rel"
    ln -s ../hello.txt "$t/sub/link-up"
    ln -s sub/deeper "$t/dirlink"
    ln -s /nonexistent/target "$t/dangling"
    ln -s /etc/os-release "$t/abs-link"
    touch -h -d '2001-02-03 04:05:06.789' "$t/dangling"
    touch -d '1999-12-31 23:59:59.123456789' "$t/zero" "$t/empty-dir"
}

# Archives are packed once per file: packing takes seconds, mounting milliseconds.
setup_file() {
    # as a grammar (rules, shares): pack would store this text bare (textshards.bats mounts that)
    TADOC_NO_BARE=1 "$TADOC" pack -q "$CORPORA/linux-slice" -o "$BATS_FILE_TMPDIR/l.tdc"
    "$TADOC" pack -q "$CORPORA/brown" -o "$BATS_FILE_TMPDIR/b.tdc"
    make_link_tree "$BATS_FILE_TMPDIR/links"
    "$TADOC" pack -q "$BATS_FILE_TMPDIR/links" -o "$BATS_FILE_TMPDIR/k.tdc"
}

setup() {
    scratch
    A=$BATS_FILE_TMPDIR L=$CORPORA/linux-slice B=$CORPORA/brown K=$BATS_FILE_TMPDIR/links
    M=$S/m
    mkdir "$M"
}

teardown() {
    fusermount3 -u "$M" 2>/dev/null || true
    # A mount that would not go away (stale, busy): detach it so rm cannot walk into it.
    if is_mounted "$M"; then fusermount3 -uz "$M" 2>/dev/null || umount -l "$M" || true; fi
    rm -rf "$S"
}

# The process has exited (a zombie waiting for init to reap it counts as gone).
gone() {
    local st
    st=$(ps -o stat= -p "$1") || return 0
    [[ $st == Z* ]]
}

# tree_meta without directory sizes (the archive does not keep them: they belong to the host
# filesystem) and with link counts (a directory has 2 + its subdirectories).
mount_meta() {
    tree_meta "$1" | awk -F'\t' 'BEGIN { OFS = "\t" } $2 == "d" { $4 = "-" } 1'
    (cd "$1" && find . -printf '%P\t%n\n' | LC_ALL=C sort)
}

@test "the Linux slice reads back through the mount: diff -r and metadata agree" {
    mnt "$A/l.tdc" "$M"
    diff -r --no-dereference "$L" "$M"
    diff <(mount_meta "$L") <(mount_meta "$M")
}

@test "the Brown corpus (505 files in one directory) reads back through the mount" {
    mnt "$A/b.tdc" "$M"
    diff -r "$B" "$M"
    diff <(mount_meta "$B") <(mount_meta "$M")
}

@test "symlinks, modes, owners, empty files and binary data read back through the mount" {
    mnt "$A/k.tdc" "$M"
    diff -r --no-dereference "$K" "$M"
    diff <(mount_meta "$K") <(mount_meta "$M")
    [ "$(readlink "$M/link-rel")" = hello.txt ]
    [ "$(readlink "$M/sub/link-up")" = ../hello.txt ]
    [ "$(readlink "$M/dangling")" = /nonexistent/target ]
    [ "$(cat "$M/link-rel")" = "hello world" ]
    [ "$(cat "$M/sub/link-up")" = "hello world" ]
    cmp "$M/dirlink/ca01" "$B/ca01"
    cmp "$M/abs-link" /etc/os-release
    [ "$(stat -c '%u:%g %a' "$M/sub/deeper/ca01")" = "1234:5678 444" ]
    [ "$(stat -c %a "$M/private/prog")" = 4755 ]
    run cat "$M/dangling"
    [ "$status" -ne 0 ]
    [[ "$output" == *"No such file"* ]]
    run cat "$M/no-such-file"
    [ "$status" -ne 0 ]
    [[ "$output" == *"No such file"* ]]
}

@test "tar of the mount is byte-identical to tar of the original (contents, modes, owners, mtimes)" {
    for pair in "$L l.tdc" "$K k.tdc"; do
        set -- $pair
        mnt "$A/$2" "$M"
        diff <(cd "$1" && tar --sort=name -cf - . | tar tvf -) \
            <(cd "$M" && tar --sort=name -cf - . | tar tvf -)
        cmp <(cd "$1" && tar --sort=name -cf - .) <(cd "$M" && tar --sort=name -cf - .)
        fusermount3 -u "$M"
    done
}

@test "grep -r and find give the same results on the mount as on the original" {
    mnt "$A/l.tdc" "$M"
    diff <(cd "$L" && grep -rn static . | LC_ALL=C sort) <(cd "$M" && grep -rn static . | LC_ALL=C sort)
    diff <(cd "$L" && grep -rc -w int . | LC_ALL=C sort) <(cd "$M" && grep -rc -w int . | LC_ALL=C sort)
    diff <(cd "$L" && find . -type f -printf '%P %y %m %s %T@ %l\n' | LC_ALL=C sort) \
        <(cd "$M" && find . -type f -printf '%P %y %m %s %T@ %l\n' | LC_ALL=C sort)
    diff <(cd "$L" && find . -name '*.h' -size +2k | LC_ALL=C sort) \
        <(cd "$M" && find . -name '*.h' -size +2k | LC_ALL=C sort)
}

@test "concurrent random preads agree with the original (8 threads, shared and private files)" {
    mnt "$A/l.tdc" "$M"
    run "$TESTBIN/preadcheck" "$L" "$M" 3000 "$RANDOM" 8
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == "24000 preads agree (8 threads)" ]]
    fusermount3 -u "$M"
    mnt "$A/b.tdc" "$M"
    "$TESTBIN/preadcheck" "$B" "$M" 500 "$RANDOM" 4 4096
    "$TESTBIN/preadcheck" "$B" "$M" 200 "$RANDOM" 2 131072
}

@test "lookups are answered while an analytic computes on a worker; -s serves the same tree" {
    mnt "$A/b.tdc" "$M"
    # The virtual file is computed at its lookup (at its open with -o open), on one of the
    # workers; each stat of a file not seen before is a LOOKUP of the same directory (the
    # kernel sends them beside each other: parallel dirops), answered by the thread reading
    # the requests.
    cat "$M/.seqcount" >"$S/seq" &
    local job=$! n=0 most=0 t0 t1 f
    for f in $(ls "$B" | head -300); do
        t0=$(date +%s%N)
        stat -c %s "$M/$f" >/dev/null
        t1=$(date +%s%N)
        gone "$job" && break # it ended meanwhile: this stat may have waited for it
        n=$((n + 1))
        if [ $((t1 - t0)) -gt "$most" ]; then most=$((t1 - t0)); fi
    done
    wait "$job"
    echo "stats answered during the analytic: $n, the slowest in $((most / 1000000)) ms"
    # A stat that waited for the analytic would end with it and not be counted: n tells. The
    # bound on the slowest leaves room for a 2-core machine under a sanitizer build, where
    # the analytic's worker and the stat's thread share the cores.
    [ "$n" -ge 3 ]
    [ "$most" -lt 1000000000 ]
    cmp "$S/seq" <("$TADOC" seqcount "$A/b.tdc")
    fusermount3 -u "$M"
    mnt "$A/b.tdc" "$M" -s
    diff -r "$B" "$M"
    cmp "$M/.seqcount" "$S/seq"
}

@test "with one or two workers, bursts of parallel requests the workers answer are all answered" {
    # 24 threads each sending ioctls and getxattrs (requests the reading thread hands to the
    # workers) for 50 ms, again and again: a worker called to read the device beside the
    # reading thread could block there while the requests it should answer waited queued
    for w in 1 2; do
        mnt "$A/l.tdc" "$M" -o ro,max_threads=$w
        run timeout 120 python3 - "$M/kernel/sched/rt.c" <<'EOF'
import fcntl, os, sys, termios, threading, time
f, stop = sys.argv[1], False
os.close(os.open(f, os.O_RDONLY))  # there to open
def burst():
    fd = os.open(f, os.O_RDONLY)
    while not stop:
        try: fcntl.ioctl(fd, termios.TCGETS, bytes(64))
        except OSError: pass
        try: os.getxattr(f, "user.none")
        except OSError: pass
    os.close(fd)
for r in range(80):
    stop = False
    ts = [threading.Thread(target=burst, daemon=True) for _ in range(24)]
    [t.start() for t in ts]
    time.sleep(0.05)
    stop = True
    end = time.time() + 20
    for t in ts: t.join(max(0, end - time.time()))
    if any(t.is_alive() for t in ts):
        print("round %d: callers waited 20 s" % r)
        os._exit(1)
print("80 rounds answered")
os._exit(0)
EOF
        echo "max_threads=$w: $output"
        [ "$status" -eq 0 ]
        fusermount3 -u "$M"
    done
}

@test "stat -f works and the mount is listed as fuse.tadocfs, rw by default and ro with -o ro" {
    mnt "$A/l.tdc" "$M"
    run stat -f -c %T "$M"
    [ "$status" -eq 0 ]
    [[ "$output" == *fuse* ]]
    # the daemon raised the mount's readahead from the kernel's 128 KiB to 1 MiB
    [ "$(cat "/sys/class/bdi/$(mountpoint -d "$M")/read_ahead_kb")" -eq 1024 ]
    run awk -v m="$M" '$2 == m { print $3, $4 }' /proc/mounts
    [[ "$output" == "fuse.tadocfs rw,"* ]]
    fusermount3 -u "$M"
    mnt -o ro "$A/l.tdc" "$M"
    run awk -v m="$M" '$2 == m { print $3, $4 }' /proc/mounts
    [[ "$output" == "fuse.tadocfs ro,"* ]]
}

@test "cp -a out of the mount reproduces the tree" {
    mnt "$A/k.tdc" "$M"
    cp -a "$M" "$S/copy"
    diff -r --no-dereference "$K" "$S/copy"
    diff <(mount_meta "$K") <(mount_meta "$S/copy")
    fusermount3 -u "$M"
    mnt "$A/l.tdc" "$M"
    cp -a "$M" "$S/copy2"
    diff -r --no-dereference "$L" "$S/copy2"
    diff <(mount_meta "$L") <(mount_meta "$S/copy2")
}

@test "rsync -aX into and out of the mount: every file and attribute, no computed one" {
    mkdir -p "$S/src/sub"
    cp "$B"/ca0[1-3] "$S/src/"
    printf 'x\n' >"$S/src/sub/f"
    setfattr -n user.note -v hello "$S/src/ca01"
    setfattr -n user.d -v dir "$S/src/sub"
    cp "$A/k.tdc" "$S/r.tdc" # written to: a copy
    mnt "$S/r.tdc" "$M"
    rsync -aX "$S/src/" "$M/in/" # a new directory
    rsync -aX "$S/src/" "$M/"    # the mount's root
    echo edited >>"$M/in/ca02"   # a file with unsaved edits
    rsync -aX "$M/" "$S/out/"
    diff -r --no-dereference "$M" "$S/out"
    xattrs() { # DIR: "path name value" of every listed attribute below DIR, sorted
        python3 -c '
import os, sys
m = sys.argv[1]
for d, dirs, names in os.walk(m):
    for f in dirs + names:
        p = os.path.join(d, f)
        for n in os.listxattr(p, follow_symlinks=False):
            print(os.path.relpath(p, m), n, os.getxattr(p, n, follow_symlinks=False))' "$1" |
            LC_ALL=C sort
    }
    diff <(xattrs "$M") <(xattrs "$S/out")
    [ "$(xattrs "$S/out" | grep -c '^in/ca01 user.note ')" = 1 ]
    [ -z "$(xattrs "$S/out" | grep tadoc)" ]
    # a name more than listxattr(2) could return is refused as a full ext4 inode refuses it
    python3 -c '
import errno, os, sys
p = sys.argv[1]
for i in range(400):
    try:
        os.setxattr(p, "user.%03d%s" % (i, "n" * 240), b"v")
    except OSError as e:
        assert e.errno == errno.ENOSPC and i > 200, (i, e)
        break
else:
    sys.exit("no limit")
names = os.listxattr(p)
assert sum(len(n) + 1 for n in names) <= 65536, len(names)
' "$M/in/sub/f"
}

@test "fallocate moves a file's times as ext4 does, whether or not the size grows" {
    cp "$A/k.tdc" "$S/f.tdc" # written to: a copy
    mnt "$S/f.tdc" "$M"
    printf 'some text\n' >"$M/f"
    python3 -c '
import os, sys, time
p = sys.argv[1]
for mode, length in ((0, 5), (1, 4096), (0, 100)): # within the size, KEEP_SIZE, growing
    os.utime(p, (1e9, 1e9))
    fd = os.open(p, os.O_WRONLY)
    t = time.time()
    if mode: os.system("fallocate -n -l %d %s" % (length, p))
    else: os.posix_fallocate(fd, 0, length)
    os.close(fd)
    st = os.stat(p)
    assert abs(st.st_mtime - t) < 5 and st.st_ctime >= st.st_mtime - 1, (mode, length, st)
assert os.stat(p).st_size == 100
' "$M/f"
}

@test "open(O_TRUNC) of an empty file and chown to -1, -1 move the times, a removed open directory has size 0, as on ext4 (with and without -o open)" {
    cp "$A/k.tdc" "$S/f.tdc" # written to: a copy
    mkdir -p "$S/ext"
    for opts in "" "-o open"; do
        mnt "$S/f.tdc" "$M" $opts
        for d in "$S/ext" "$M"; do
            : >"$d/empty"
            python3 -c '
import os, sys, time
p = sys.argv[1]
os.utime(p, (1e9, 1e9))
os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))  # already empty
st = os.stat(p)
assert abs(st.st_mtime - time.time()) < 5 and abs(st.st_ctime - time.time()) < 5, st
c = st.st_ctime_ns
time.sleep(0.05)
os.chown(p, -1, -1)
assert os.stat(p).st_ctime_ns > c, (c, os.stat(p))
d = os.path.join(os.path.dirname(p), "gone")  # a removed directory still open
os.mkdir(d)
fd = os.open(d, os.O_RDONLY)
os.rmdir(d)
st = os.fstat(fd)
assert (st.st_size, st.st_nlink) == (0, 0), st
os.close(fd)
' "$d/empty"
        done
        fusermount3 -u "$M"
    done
}

@test "an archive under its own mountpoint is refused for a writable mount (it would write through itself), served with -o ro" {
    mkdir -p "$S/d/sub"
    cp "$A/k.tdc" "$S/d/a.tdc"
    ln -s d/a.tdc "$S/link.tdc"
    for mp in "$S/d" "$S"; do
        run mnt "$S/d/a.tdc" "$mp"
        [ "$status" -eq 1 ]
        [[ "$output" == *"lies under the mountpoint"* ]]
        not_mounted "$mp"
    done
    run mnt "$S/link.tdc" "$S/d" # the file behind the link is there
    [ "$status" -eq 1 ]
    mnt -o ro "$S/d/a.tdc" "$S/d"
    diff -r --no-dereference "$K" "$S/d"
    fusermount3 -u "$S/d"
    mnt "$S/d/a.tdc" "$S/d/sub" # below the archive's directory: nothing goes through it
    fusermount3 -u "$S/d/sub"
}

@test "a journal cut short or replaced under the daemon: writes and fsync fail with EIO, never a hole of zeros or a write to a file no open finds" {
    cp "$A/k.tdc" "$S/j.tdc"
    mnt "$S/j.tdc" "$M"
    echo new >"$M/nf"
    truncate -s 32 "$S/j.tdc.journal"
    run python3 -c 'import sys; open(sys.argv[1], "a").write("more")' "$M/hello.txt"
    [ "$status" -ne 0 ] && [[ "$output" == *"Input/output error"* ]]
    fusermount3 -u "$M"
    wait_unmounted "$M"
    [ "$(stat -c %s "$S/j.tdc.journal")" = 32 ] # not padded back with zeros
    mnt "$S/j.tdc" "$M"
    echo x >>"$M/hello.txt"
    cp "$S/j.tdc.journal" "$S/copy"
    mv "$S/copy" "$S/j.tdc.journal"
    run sh -c "echo y >>'$M/hello.txt'"
    [ "$status" -ne 0 ]
    run sync "$M/hello.txt"
    [ "$status" -ne 0 ]
    fusermount3 -u "$M"
    wait_unmounted "$M"
    mnt "$S/j.tdc" "$M"
    [ "$(tail -c 2 "$M/hello.txt")" = "x" ]
}

# "path size share rules" for every regular file, read by name (they are never listed).
tadoc_xattrs() {
    python3 -c '
import os, sys
m = sys.argv[1]
for d, _, names in os.walk(m):
    for f in names:
        p = os.path.join(d, f)
        if os.path.isfile(p) and not os.path.islink(p):
            v = [os.getxattr(p, "user.tadoc." + k).decode() for k in ("size", "share", "rules")]
            print(os.path.relpath(p, m), *v)' "$1" | LC_ALL=C sort
}

@test "user.tadoc.* extended attributes describe every file and the archive" {
    mnt "$A/l.tdc" "$M"
    # Every regular file has size (equal to st_size), share and rules; a directory none.
    run getfattr -n user.tadoc.size "$M/$(cd "$M" && find . -mindepth 1 -type d | head -1)"
    [ "$status" -ne 0 ]
    diff <(tadoc_xattrs "$M" | awk '{ print $1, $2 }') \
        <(cd "$M" && find . -type f -printf '%P %s\n' | LC_ALL=C sort)
    nrules=$("$TADOC" stat "$A/l.tdc" | awk '/^rules / { print $2 }')
    tadoc_xattrs "$M" | awk -v n="$nrules" '
        $3 !~ /^(0|1)(\.[0-9]+)?([eE]-?[0-9]+)?$/ || $3 > 1 { print "bad share:", $0; bad = 1 }
        $4 !~ /^[0-9]+$/ || $4 + 0 > n + 0 { print "bad rules:", $0; bad = 1 }
        $2 > 5000 && $4 == 0 { print "a large file uses no rules:", $0; bad = 1 }
        { sum += $3 }
        END { if (sum < 0.5 || sum > 1.02) { print "shares sum to", sum; bad = 1 }; exit bad }'
    big=$(cd "$M" && find . -type f -printf '%s %P\n' | sort -n | tail -1 | cut -d' ' -f2)
    [ "$(getfattr -n user.tadoc.size --only-values --absolute-names "$M/$big")" = "$(stat -c %s "$L/$big")" ]
    for k in size share rules pending; do getfattr -n "user.tadoc.$k" "$M/$big" >/dev/null; done
    # read by name, never listed (cp -a, tar --xattrs and rsync -X would copy them)
    [ -z "$(getfattr -d -m - --absolute-names "$M/$big")" ]

    # The root describes the archive.
    root() { getfattr -n "user.tadoc.$1" --only-values --absolute-names "$M"; }
    [ "$(root archive_size)" = "$(stat -c %s "$A/l.tdc")" ]
    [ "$(root files)" = "$(find "$L" -type f | wc -l)" ]
    [ "$(root rules)" = "$nrules" ]
    bytes=$(find "$L" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
    awk -v r="$(root ratio)" -v b="$bytes" -v z="$(stat -c %s "$A/l.tdc")" \
        'BEGIN { e = b / z; exit !(r ~ /^[0-9.]+$/ && r > e * 0.99 && r < e * 1.01) }'

    run getfattr -n user.tadoc.nope --absolute-names "$M/$big"
    [ "$status" -ne 0 ]
    [[ "$output" == *"No such attribute"* ]]
    run setfattr -n user.tadoc.size -v 1 "$M/$big"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Operation not permitted"* ]]

    # An empty file uses no rules and has no share; a tiny one still has sane values.
    fusermount3 -u "$M"
    mnt "$A/k.tdc" "$M"
    attr() { getfattr -n "user.tadoc.$1" --only-values --absolute-names "$M/$2"; }
    [ "$(attr size zero)" = 0 ]
    [ "$(attr rules zero)" = 0 ]
    awk -v s="$(attr share zero)" 'BEGIN { exit !(s ~ /^[0-9.eE-]+$/ && s == 0) }'
    [ "$(attr size hello.txt)" = 12 ]
    [[ "$(attr rules hello.txt)" =~ ^[0-9]+$ ]]
    awk -v s="$(attr share hello.txt)" 'BEGIN { exit !(s ~ /^[0-9.eE-]+$/ && s >= 0 && s < 0.01) }'
}

@test "with -o ro every kind of write fails with EROFS and changes nothing" {
    mnt -o ro "$A/k.tdc" "$M"
    for c in "touch '$M/new'" "touch '$M/hello.txt'" "echo x >'$M/hello.txt'" \
        "echo x >>'$M/hello.txt'" "echo x >'$M/new'" "mkdir '$M/d'" "rm '$M/hello.txt'" \
        "rmdir '$M/empty-dir'" "mv '$M/hello.txt' '$M/h2'" "ln -s x '$M/l2'" \
        "ln '$M/hello.txt' '$M/h3'" "chmod 600 '$M/hello.txt'" "truncate -s 0 '$M/hello.txt'" \
        "rm '$M/link-rel'" "mkfifo '$M/fifo'"; do
        run bash -c "$c"
        [ "$status" -ne 0 ] || { echo "succeeded: $c"; false; }
        [[ "$output" == *"Read-only file system"* ]] || { echo "$c: $output"; false; }
    done
    diff -r --no-dereference "$K" "$M"
    diff <(mount_meta "$K") <(mount_meta "$M")
}

# Damaged archives of every kind in $S, each with the message it must produce in want[]:
# truncated, bad magic, bad header, a flipped byte in each section, and bad content behind
# valid checksums (a rule cycle, a '..' path) named as tadoc names it.
make_corrupt() {
    size=$(stat -c %s "$A/b.tdc")
    head -c $((size / 2)) "$A/b.tdc" >"$S/trunc.tdc"
    printf 'NOTADOC!%.0s' $(seq 1 10) >"$S/magic.tdc"
    cp "$A/b.tdc" "$S/header.tdc"
    flip_byte "$S/header.tdc" 20
    want=([trunc]="truncated" [magic]="bad magic" [header]="header checksum")
    while read -r name off stored; do
        cp "$A/b.tdc" "$S/$name.tdc"
        flip_byte "$S/$name.tdc" $((off + stored / 3))
        want[$name]="section ${name/files/file table}: checksum mismatch"
    done < <(sections "$A/b.tdc")
    for k in cycle dotdot; do
        "$TESTBIN/mkbad" "$k" "$S/$k.tdc"
        run "$TADOC" verify "$S/$k.tdc"
        [ "$status" -eq 3 ]
        want[$k]=${output#*"$k.tdc: "}
    done
    [ "${#want[@]}" -eq 9 ]
}

# The mount failed with exit 3 and the expected message, and left nothing behind.
refused() { # KIND
    [ "$status" -eq 3 ] || { echo "$1: status $status: $output"; false; }
    [[ "$output" == *"${want[$1]}"* ]] || { echo "$1: $output"; false; }
    not_mounted "$M"
    [ -z "$(pgrep -f -- "$S/$1.tdc")" ]
}

@test "with -o preload a corrupt archive fails at mount time with exit 3, a clear message and no mount" {
    declare -A want
    make_corrupt
    for k in "${!want[@]}"; do
        run mnt "$S/$k.tdc" "$M" -o preload
        refused "$k"
    done
}

@test "a corrupt archive: damaged metadata fails at mount time, a damaged grammar fails every read with EIO" {
    declare -A want
    make_corrupt
    # The header, section table and file table are checked before the mount.
    for k in trunc magic header files dotdot; do
        run mnt "$S/$k.tdc" "$M"
        refused "$k"
    done
    # The grammar loads after the mount: the tree is there, content reads fail, and the
    # foreground daemon says why.
    for k in dictionary rules root cycle; do
        "$TADOCFS" -f "$S/$k.tdc" "$M" 3>&- 2>"$S/$k.log" &
        wait_mounted "$M"
        f=$(find "$M" -type f -size +0 | head -1)
        [ -n "$f" ]
        run cat "$f"
        [ "$status" -ne 0 ]
        [[ "$output" == *"Input/output error"* ]] || { echo "$k: $output"; false; }
        run getfattr -n user.tadoc.rules --only-values "$f" # the file's share of the grammar
        [ "$status" -ne 0 ]
        fusermount3 -u "$M"
        wait
        grep -qF "cannot load the archive's data" "$S/$k.log"
        grep -qF "${want[$k]}" "$S/$k.log" || { echo "$k: $(cat "$S/$k.log")"; false; }
    done
}

@test "a file whose bytes do not match its content hash fails with EIO, others still read" {
    "$TESTBIN/mkbad" badhash "$S/bad.tdc"
    mnt "$S/bad.tdc" "$M"
    run cat "$M/a.txt"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Input/output error"* ]]
    [ "$(readlink "$M/d/l")" = a.txt ]
    fusermount3 -u "$M"
    "$TESTBIN/mkbad" good "$S/good.tdc"
    mnt "$S/good.tdc" "$M"
    [ "$(cat "$M/a.txt")" = $'hello world\nhello world' ]
    [ "$(stat -c %s "$M/a.txt")" -eq 23 ]
    [ -d "$M/d" ]
    [ "$(readlink "$M/d/l")" = a.txt ]
}

@test "a listing carries every entry's attributes, in every block: stats after it send no LOOKUP" {
    "$TADOCFS" -d -o ro "$A/b.tdc" "$M" 3>&- 2>"$S/d.log" &
    pid=$!
    wait_mounted "$M"
    [ "$(ls "$M" | wc -l)" -eq "$(ls "$B" | wc -l)" ]
    # 505 entries take several blocks, each a READDIRPLUS (readdirplus "auto" would have sent
    # plain READDIRs after the first, and a LOOKUP per entry at the stats)
    [ "$(grep -c 'opcode: READDIRPLUS ' "$S/d.log")" -gt 1 ]
    [ "$(grep -c 'opcode: READDIR ' "$S/d.log")" -eq 0 ]
    diff <(cd "$B" && stat -c '%n %s %Y' -- *) <(cd "$M" && stat -c '%n %s %Y' -- *)
    [ "$(grep -c 'opcode: LOOKUP ' "$S/d.log")" -eq 0 ]
    fusermount3 -u "$M"
    wait "$pid"
}

@test "no-open mode (default): files opened and closed without a request, their pages kept, read-only ones stored ahead; virtual files per caller and state; a bad hash still fails with EIO" {
    "$TADOCFS" -d -o ro "$A/l.tdc" "$M" 3>&- 2>"$S/d.log" &
    pid=$!
    wait_mounted "$M"
    diff -r "$L" "$M"
    reads=$(grep -c 'opcode: READ ' "$S/d.log")
    [ "$reads" -gt 0 ]
    diff -r "$L" "$M" # from the pages the kernel kept: no READ
    [ "$(grep -c 'opcode: READ ' "$S/d.log")" -eq "$reads" ]
    # a virtual file: computed at its lookup, its size right at the first stat, read twice
    # from the kernel's pages (one inode: no second text, no second READ)
    [ "$(stat -c %s "$M/kernel/.sort")" -eq "$("$TADOC" sort "$A/l.tdc" kernel | wc -c)" ]
    cmp "$M/kernel/.sort" <("$TADOC" sort "$A/l.tdc" kernel)
    reads=$(grep -c 'opcode: READ ' "$S/d.log")
    cmp "$M/kernel/.sort" <("$TADOC" sort "$A/l.tdc" kernel)
    [ "$(grep -c 'opcode: READ ' "$S/d.log")" -eq "$reads" ]
    [ "$(cat "$M/.search/static" | wc -l)" -gt 10 ]
    run sh -c "echo x >'$M/.wordcount'"
    [ "$status" -ne 0 ]
    fusermount3 -u "$M"
    wait "$pid"
    # One OPEN (answered ENOSYS, after which the kernel sends none) and no RELEASE.
    [ "$(grep -c 'opcode: OPEN ' "$S/d.log")" -eq 1 ]
    [ "$(grep -c 'opcode: RELEASE ' "$S/d.log")" -eq 0 ]
    # Read-only: the small files after one read from its start are stored ahead in the
    # kernel's cache (push.h): read next, they come with no READ at all.
    "$TADOCFS" -d -o ro "$A/l.tdc" "$M" 3>&- 2>"$S/d2.log" &
    pid=$!
    wait_mounted "$M"
    ls -l "$M/fs/fuse" >/dev/null # the kernel holds their inodes
    local first rest
    first=$(cd "$L/fs/fuse" && ls | LC_ALL=C sort | head -1)
    rest=$(cd "$L/fs/fuse" && ls | LC_ALL=C sort | sed -n 2,8p)
    cmp "$M/fs/fuse/$first" "$L/fs/fuse/$first"
    sleep 1 # the thread that stores ahead has gone past them
    reads=$(grep -c 'opcode: READ ' "$S/d2.log")
    for f in $rest; do cmp "$M/fs/fuse/$f" "$L/fs/fuse/$f"; done
    [ "$(grep -c 'opcode: READ ' "$S/d2.log")" -eq "$reads" ]
    fusermount3 -u "$M"
    wait "$pid"
    "$TESTBIN/mkbad" badhash "$S/bad.tdc"
    mnt "$S/bad.tdc" "$M" -o ro
    run cat "$M/a.txt"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Input/output error"* ]]
    [ "$(readlink "$M/d/l")" = a.txt ]
    fusermount3 -u "$M"
    # a damaged file right after one read: never stored ahead, its own READ fails
    "$TESTBIN/mkbad" badhash2 "$S/bad2.tdc"
    mnt "$S/bad2.tdc" "$M" -o ro
    ls -l "$M" >/dev/null # the kernel holds b.txt's inode, so a store for it would land
    [ "$(cat "$M/a.txt")" = "$(printf 'hello world\nhello world')" ]
    sleep 0.5 # the thread that stores ahead has come to b.txt
    run cat "$M/b.txt"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Input/output error"* ]]
}

@test "no-open mode: a virtual file follows changes, root cannot write it, and -o open still computes at the open" {
    cp "$A/l.tdc" "$S/w.tdc"
    mnt "$S/w.tdc" "$M"
    cmp "$M/kernel/.wordcount" <("$TADOC" wordcount "$S/w.tdc" kernel)
    exec 5<"$M/kernel/.wordcount" # a text kept open across the change below
    before=$(stat -c %s "$M/kernel/.wordcount")
    echo "zebrafish zebrafish" >"$M/kernel/new.c"
    grep -q $'^2\tzebrafish$' "$M/kernel/.wordcount"
    [ "$(stat -c %s "$M/kernel/.wordcount")" -gt "$before" ]
    [ "$(grep -c . "$M/kernel/.search/zebrafish")" -eq 2 ]
    ! grep -q zebrafish <&5 # the one opened before the change is the text of its state
    exec 5<&-
    # root opens it (the kernel's check passes root), the daemon refuses the write
    run sh -c "echo x >>'$M/kernel/.wordcount'"
    [ "$status" -ne 0 ]
    run truncate -s 0 "$M/kernel/.wordcount"
    [ "$status" -ne 0 ] && [[ "$output" == *"Permission denied"* ]]
    grep -q $'^2\tzebrafish$' "$M/kernel/.wordcount"
    fusermount3 -u "$M"
    mnt "$S/w.tdc" "$M" -o open
    [ "$(stat -c %s "$M/kernel/.wordcount")" -eq 0 ] # 0, as a /proc file's (perm.bats)
    grep -q $'^2\tzebrafish$' "$M/kernel/.wordcount"
    [ "$(wc -c <"$M/kernel/.wordcount")" -gt "$before" ]
}

@test "a stale mount left by a killed daemon is refused with exit 1 and a hint, then cleans up" {
    "$TADOCFS" -f "$A/l.tdc" "$M" 3>&- 2>"$S/fg.log" &
    pid=$!
    wait_mounted "$M"
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
    kill -9 "$pid"
    wait "$pid" || true
    is_mounted "$M"
    run mnt "$A/l.tdc" "$M"
    [ "$status" -eq 1 ]
    [[ "$output" == *stale* ]]
    [[ "$output" == *"fusermount3 -u"* ]]
    fusermount3 -u "$M"
    not_mounted "$M"
    mnt "$A/l.tdc" "$M"
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
}

@test "SIGTERM to the background daemon and SIGINT to a foreground one unmount cleanly" {
    mnt "$A/l.tdc" "$M"
    pids=$(pgrep -f -- "$A/l.tdc $M")
    [ "$(wc -w <<<"$pids")" -eq 1 ]
    kill -TERM "$pids"
    wait_unmounted "$M"
    for _ in $(seq 50); do gone "$pids" && break; sleep 0.1; done
    gone "$pids"
    # Background jobs of a script start with SIGINT ignored; give the daemon the default back.
    env --default-signal=INT "$TADOCFS" -f "$A/l.tdc" "$M" 3>&- &
    pid=$!
    wait_mounted "$M"
    kill -INT "$pid"
    for _ in $(seq 50); do gone "$pid" && break; sleep 0.1; done
    gone "$pid"
    wait "$pid"
    not_mounted "$M"
}

@test "fstab-style mounts through mount(8) and mount.fuse3, and umount unmounts" {
    # mount(8) runs its helper without PATH, so a daemon outside the standard directories is
    # named by path in the `PROG#SOURCE` form of type fuse; mount.fuse3 itself is then run with
    # PATH to check the `fuse.tadocfs` type form that /etc/fstab lines use once it is installed.
    mount -t fuse "$TADOCFS#$A/l.tdc" "$M" -o ro 3>&-
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
    run awk -v m="$M" '$2 == m { print $3, $4 }' /proc/mounts
    [[ "$output" == "fuse.tadocfs ro,"* ]]
    umount "$M"
    wait_unmounted "$M"
    PATH="$(dirname "$TADOCFS"):$PATH" mount.fuse3 "$A/l.tdc" "$M" -t fuse.tadocfs -o ro 3>&-
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
    umount "$M"
    wait_unmounted "$M"
    # the helper of type tadocfs mounts nodev and nosuid unless the options say otherwise
    for o in ro ro,dev,suid; do
        PATH="$(dirname "$TADOCFS"):$PATH" "$BATS_TEST_DIRNAME/../../tools/mount.tadocfs" "$A/l.tdc" "$M" -o "$o" 3>&-
        opts=$(awk -v m="$M" '$2 == m { print $4 }' /proc/mounts)
        umount "$M"
        wait_unmounted "$M"
        echo "$o: $opts"
        if [ "$o" = ro ]; then
            [[ ",$opts," == *,nosuid,* && ",$opts," == *,nodev,* ]]
        else
            [[ ",$opts," != *,nosuid,* && ",$opts," != *,nodev,* ]]
        fi
    done
}

@test "options: uid, gid, gpu and its read options, gpus, gpu_mem, cache_size, journal_max, permissions" {
    mnt "$A/k.tdc" "$M" -o uid=4242,gid=4343,gpu=off,cache_size=1048576,allow_other,default_permissions
    [ "$(cd "$M" && find . -printf '%U:%G\n' | sort -u)" = 4242:4343 ]
    diff -r --no-dereference "$K" "$M"
    fusermount3 -u "$M"
    mnt "$A/l.tdc" "$M" -o gpu=auto,cache_size=4096,gpu_read_min=16K,gpu_read_wait=50,journal_max=0
    diff -r "$L" "$M"
    fusermount3 -u "$M"
    # the GPUs' options (tests/gpu/run.sh sees what they do on a GPU host)
    mnt "$A/l.tdc" "$M" -o gpu=auto,gpus=0:1:GPU-8a2f-03,gpu_mem=64M
    diff -r "$L" "$M"
    diff <("$TADOC" wordcount "$A/l.tdc") "$M/.wordcount"
    fusermount3 -u "$M"
    run "$TADOCFS" -o gpu_read_min=lots "$A/l.tdc" "$M"
    [ "$status" -eq 2 ]
    [[ "$output" == *"gpu_read_min="* ]]
}

@test "-o spin: the thread reading requests polls between close ones, not on an idle mount" {
    cp "$A/b.tdc" "$S/a.tdc"
    mnt "$S/a.tdc" "$M" -o compact_threshold=0
    local pid c0 c1 i
    pid=$(pgrep -f -- "$S/a.tdc $M")
    for i in $(seq 3000); do echo "line $i" >>"$M/app"; done
    [ "$(wc -l <"$M/app")" -eq 3000 ]
    # Idle: the daemon's user and system time (clock ticks, /proc/PID/stat) stays still.
    sleep 0.2
    c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    sleep 1
    c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    echo "daemon CPU over 1 s idle after the appends: $((c1 - c0)) ticks"
    [ $((c1 - c0)) -le 5 ]
    fusermount3 -u "$M"
    mnt "$S/a.tdc" "$M" -o spin=0
    seq 3000 | sed 's/^/line /' | cmp - "$M/app"
    for i in $(seq 1000); do echo "more $i" >>"$M/app"; done
    [ "$(wc -l <"$M/app")" -eq 4000 ]
    cmp "$B/ca01" "$M/ca01"
}

@test "--help and --version exit 0; bad usage exits 2, a bad mountpoint or archive 1" {
    run "$TADOCFS" --help
    [ "$status" -eq 0 ]
    [[ "${output,,}" == *usage* ]]
    [[ "$output" == *cache_size* ]]
    run "$TADOCFS" --version
    [ "$status" -eq 0 ]
    [[ "$output" == *tadocfs* ]]
    for args in "" "$A/l.tdc" "$A/l.tdc $M --frobnicate" "$A/l.tdc $M -o gpu=sometimes" \
        "$A/l.tdc $M -o cache_size=lots" "$A/l.tdc $M -o journal_max=lots" \
        "$A/l.tdc $M -o nosuchoption" "$A/l.tdc $M extra" "$A/l.tdc $M -o max_threads=-1" \
        "$A/l.tdc $M -o max_threads=0" "$A/l.tdc $M -o gpu_read_wait=-5" \
        "$A/l.tdc $M -o max_threads=5x" "$A/l.tdc $M -o max_threads=4294967297" \
        "$A/l.tdc $M -o spin=-1" "$A/l.tdc $M -o spin=20000000" "$A/l.tdc $M -o uid=-1" \
        "$A/l.tdc $M -o gid=1e3" "$A/l.tdc $M -o compact_threshold=+1K" \
        "$A/l.tdc $M -o preload,mem=16M" "$A/l.tdc $M -o gpu_mem=lots" \
        "$A/l.tdc $M -o gpu_mem=0" "$A/l.tdc $M -o gpus=:0" "$A/l.tdc $M -o gpus=0::1" \
        "$A/l.tdc $M -o gpus=0;1" "$A/l.tdc $M -o gpus="; do
        run mnt $args
        [ "$status" -eq 2 ] || { echo "'$args': status $status: $output"; false; }
        not_mounted "$M"
    done
    # a usage error leaves nothing beside the archive (no lock file, no journal)
    cp "$A/l.tdc" "$S/u.tdc"
    for args in "-o nosuchoption" "--frobnicate" "-o gpu=sometimes"; do
        run mnt "$S/u.tdc" "$M" $args
        [ "$status" -eq 2 ]
        [ "$(ls "$S" | grep -c '^u\.tdc')" -eq 1 ] || { echo "$args: $(ls "$S")"; false; }
    done
    # nor is anything made beside what is no archive
    : >"$S/empty.tdc"
    mkdir "$S/dir.tdc"
    for a in empty.tdc dir.tdc; do
        run mnt "$S/$a" "$M"
        [ "$status" -ne 0 ] && [ ! -e "$S/$a.lock" ] && [ ! -e "$S/$a.journal" ]
    done
    run mnt "$A/l.tdc" "$S/nodir"
    [ "$status" -eq 1 ]
    run mnt "$S/missing.tdc" "$M"
    [ "$status" -eq 1 ]
    [[ "$output" == *"No such file"* ]]
    not_mounted "$M"
}

# heap_huge (engine/base/heap.c) grows the heap by its pad and advises huge pages over it,
# also in the daemon forked after the options were parsed (whose heap had a free top that a
# small block fits). The advice is a flag of the mapping, whether or not the kernel then has
# huge pages to give.
@test "the daemon's heap is grown by its pad and advised for huge pages" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    "$TADOCFS_PLAIN" "$S/l.tdc" "$M"
    local pid heap
    pid=$(pgrep -n -f "$(basename "$TADOCFS_PLAIN") $S/l.tdc")
    # KiB of the heap's mappings (the advice splits it), and of those advised (VmFlags hg)
    heap=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { h = / \[heap\]$/ } h && /^Size:/ { s = $2; all += s }
        h && /^VmFlags:.* hg/ { hg += s } END { print all + 0, hg + 0 }' "/proc/$pid/smaps")
    echo "heap, advised: $heap KiB"
    [ "${heap% *}" -ge $((64 * 1024)) ] # the pad of HEAP_HUGE_MIN
    if [ -e /sys/kernel/mm/transparent_hugepage/enabled ]; then
        [ "${heap#* }" -ge $((60 * 1024)) ] # all of it but the ends, to 2 MiB boundaries
    fi
}

# The command waits for the daemon it forked to say it is mounted (fs/daemon.c). One that
# dies first, here blocked opening its archive, which lies in another mount whose daemon is
# stopped, and killed there, leaves the command saying so instead of exiting 0 or silently.
@test "a daemon killed before it mounts: the command says how and exits 1" {
    mkdir -p "$S/t" "$S/outer"
    echo inner >"$S/t/f" && "$TADOC" pack -q "$S/t" -o "$S/t/inner.tdc"
    "$TADOC" pack -q "$S/t" -o "$S/outer.tdc"
    mnt "$S/outer.tdc" "$S/outer" -o ro
    local outer
    outer=$(pgrep -n -f "$(basename "$TADOCFS") $S/outer.tdc")
    kill -STOP "$outer"
    mnt "$S/outer/inner.tdc" "$M" -o ro 2>"$S/err" &
    local cmd=$! pids="" i
    for i in $(seq 200); do # the command and the daemon it forked
        pids=$(pgrep -f "$(basename "$TADOCFS") $S/outer/inner.tdc" || true)
        [ "$(echo "$pids" | wc -w)" -eq 2 ] && break
        sleep 0.05
    done
    local n
    n=$(echo "$pids" | wc -w)
    [ "$n" -eq 2 ] && kill -9 "$(pgrep -n -f "$(basename "$TADOCFS") $S/outer/inner.tdc")"
    local st=0
    wait "$cmd" || st=$?
    kill -CONT "$outer"
    fusermount3 -u "$S/outer"
    cat "$S/err"
    [ "$n" -eq 2 ] && [ "$st" -eq 1 ]
    grep -q "killed by signal 9 .* before it mounted" "$S/err"
    not_mounted "$M"
}

@test "listings read while the directory changes, as on ext4: no name comes back from the dead, no untouched entry is skipped or given twice" {
    cp "$A/l.tdc" "$S/w.tdc"
    mnt "$S/w.tdc" "$M"
    mkdir "$S/ext4"
    # Two handles: A reads a first part, an entry it listed goes, B lists it all, A goes on.
    # Then a listing read across an unlink and renames (of a file, of a directory), after
    # which the old names must be gone.
    cat >"$S/dirs.py" <<'PY'
import collections, ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def getdents(fd):
    buf = ctypes.create_string_buffer(1024)
    n, i, out = libc.syscall(217, fd, buf, 1024), 0, []
    while i < n:
        reclen = int.from_bytes(buf.raw[i + 16:i + 18], "little")
        out.append(buf.raw[i + 19:i + reclen].split(b"\0")[0].decode())
        i += reclen
    return out
def rest(fd):
    got = []
    while True:
        x = getdents(fd)
        if not x:
            return got
        got += x
D = os.path.join(sys.argv[1], "D")
os.mkdir(D)
names = ["s%03d_%s" % (i, "p" * 150) for i in range(100)]
for n in names + ["zz_gone", "zz_old"]:
    open(os.path.join(D, n), "w").write("s")
os.mkdir(os.path.join(D, "zz_dir"))
a = os.open(D, os.O_RDONLY | os.O_DIRECTORY)
la = getdents(a)
os.unlink(os.path.join(D, names[0]))
b = os.open(D, os.O_RDONLY | os.O_DIRECTORY)
rest(b)
la += rest(a)
c = collections.Counter(n for n in la if n in names[1:])
print("twice", sorted(n[:4] for n, k in c.items() if k > 1))
print("skipped", [n[:4] for n in names[1:] if n not in c])
os.lseek(a, 0, os.SEEK_SET)
getdents(a)
os.unlink(os.path.join(D, "zz_gone"))
os.rename(os.path.join(D, "zz_old"), os.path.join(D, "zz_new"))
os.rename(os.path.join(D, "zz_dir"), os.path.join(D, "zz_dir2"))
rest(a)
for n in ("zz_gone", "zz_old", "zz_new", "zz_dir", "zz_dir2"):
    try:
        os.lstat(os.path.join(D, n))
        print(n, "there")
    except OSError as e:
        print(n, errno.errorcode[e.errno])
PY
    python3 "$S/dirs.py" "$S/ext4" >"$S/want"
    python3 "$S/dirs.py" "$M" >"$S/got"
    diff "$S/want" "$S/got"
    grep -qx 'zz_old ENOENT' "$S/got"
    # the old names hold no inode: a compaction goes ahead
    setfattr -n user.tadoc.compact -v 1 "$M"
}
