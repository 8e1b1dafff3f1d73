#!/usr/bin/env bats
# Compaction never loses an archive: stopped (killed, or failing) after each of its steps it
# leaves either the old archive with its journal or the new archive with an empty journal,
# and what the archive shows is the same either way; a damaged new archive is caught before
# it replaces the old one. Every inode type survives pack, unpack, the mount and compaction.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

umnt() { # ARCHIVE: unmount $M and wait for its daemon to exit
    fusermount3 -u "$M"
    wait_unmounted "$M"
    for _ in $(seq 100); do pgrep -f -- "$1 $M" >/dev/null || return 0; sleep 0.05; done
    return 1
}

# An archive whose journal holds every kind of change: content edits, a hard-linked
# symlink, a FIFO, a socket, devices, xattrs, a rename and a removal.
setup_file() {
    local t=$BATS_FILE_TMPDIR/tree M=$BATS_FILE_TMPDIR/m
    mkdir -p "$t/d" "$M"
    printf 'hello world\n' >"$t/d/hello.txt"
    cp "$CORPORA/brown/ca01" "$t/ca01"
    cp "$CORPORA/brown/ca02" "$t/d/ca02"
    "$TADOC" pack -q "$t" -o "$BATS_FILE_TMPDIR/a.tdc"
    mnt "$BATS_FILE_TMPDIR/a.tdc" "$M"
    (
        cd "$M"
        printf 'appended line\n' >>ca01
        printf 'new file\n' >d/new.txt
        ln -s d/hello.txt s1
        ln -P s1 s2
        mkfifo d/fifo
        ln d/fifo fifo2
        mknod cdev c 1 3
        mknod bdev b 7 0
        python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
        setfattr -n user.note -v kept d/new.txt
        mv d/ca02 ca02
        rm d/hello.txt
    )
    M=$BATS_FILE_TMPDIR/m umnt "$BATS_FILE_TMPDIR/a.tdc"
    "$TESTBIN/voldump" "$BATS_FILE_TMPDIR/a.tdc" >"$BATS_FILE_TMPDIR/want" 2>/dev/null
}

setup() {
    scratch
    cp "$BATS_FILE_TMPDIR/a.tdc" "$BATS_FILE_TMPDIR/a.tdc.journal" "$S/"
}

teardown() {
    [ -n "${M:-}" ] && { fusermount3 -u "$M" 2>/dev/null || true; }
    rm -rf "$S"
}

temps() { find "$S" -maxdepth 1 -name 'a.tdc*.tmp*' | wc -l; }

# What the archive shows (archive plus journal) must be what it showed before.
same_view() {
    "$TESTBIN/voldump" "$S/a.tdc" >"$S/got" 2>/dev/null
    diff "$BATS_FILE_TMPDIR/want" "$S/got"
}

@test "killed after each step of a compaction: the old archive with its journal, or the new one; the same tree either way" {
    local step
    for step in 1 2 3 4 5; do
        rm -f "$S"/a.tdc*
        cp "$BATS_FILE_TMPDIR/a.tdc" "$BATS_FILE_TMPDIR/a.tdc.journal" "$S/"
        run "$TESTBIN/compactstep" "$S/a.tdc" "$step" crash
        [ "$status" -eq 42 ] || { echo "step $step: status $status: $output"; false; }
        if [ "$step" -le 3 ]; then
            # Before the rename: the old archive and journal, byte for byte.
            cmp "$S/a.tdc" "$BATS_FILE_TMPDIR/a.tdc"
            cmp "$S/a.tdc.journal" "$BATS_FILE_TMPDIR/a.tdc.journal"
        else
            ! cmp -s "$S/a.tdc" "$BATS_FILE_TMPDIR/a.tdc"
            "$TADOC" verify "$S/a.tdc"
        fi
        same_view || { echo "step $step: the tree changed"; false; }
        # The next writable open removes what the killed compaction left, and compacts.
        run "$TESTBIN/compactstep" "$S/a.tdc" 0 none
        [ "$status" -eq 0 ] || { echo "step $step: recompaction: $output"; false; }
        [ "$(temps)" -eq 0 ]
        same_view
        [ "$("$TADOC" verify "$S/a.tdc" | grep -c 'journal:')" -eq 0 ]
    done
}

@test "killed late in a compaction with a change made meanwhile: the change survives, between the two renames too" {
    local step
    mkdir "$S/w"
    cp "$S/a.tdc" "$S/a.tdc.journal" "$S/w/"
    "$TESTBIN/compactstep" "$S/w/a.tdc" 0 write
    "$TESTBIN/voldump" "$S/w/a.tdc" >"$S/want2" 2>/dev/null
    ! diff -q "$BATS_FILE_TMPDIR/want" "$S/want2"
    for step in 3 4 5; do
        rm -f "$S"/a.tdc*
        cp "$BATS_FILE_TMPDIR/a.tdc" "$BATS_FILE_TMPDIR/a.tdc.journal" "$S/"
        run "$TESTBIN/compactstep" "$S/a.tdc" "$step" write-crash
        [ "$status" -eq 42 ] || { echo "step $step: status $status: $output"; false; }
        if [ "$step" -eq 4 ]; then
            # The archive is renamed, the journal is not: the change is in the next journal,
            # which a read-only open reads where it lies.
            [ -e "$S/a.tdc.journal.next" ]
            ! cmp -s "$S/a.tdc" "$BATS_FILE_TMPDIR/a.tdc"
        fi
        "$TESTBIN/voldump" "$S/a.tdc" >"$S/got" 2>/dev/null
        diff "$S/want2" "$S/got" || { echo "step $step: the tree changed"; false; }
        # A writable open puts the next journal in place, and compacts.
        run "$TESTBIN/compactstep" "$S/a.tdc" 0 none
        [ "$status" -eq 0 ] || { echo "step $step: recompaction: $output"; false; }
        [ ! -e "$S/a.tdc.journal.next" ]
        [ "$(temps)" -eq 0 ]
        "$TESTBIN/voldump" "$S/a.tdc" >"$S/got" 2>/dev/null
        diff "$S/want2" "$S/got"
        [ "$("$TADOC" verify "$S/a.tdc" | grep -c 'journal:')" -eq 0 ]
    done
}

@test "a failure after each step before the rename leaves archive and journal unchanged and no temporary file" {
    local step
    for step in 1 2 3; do
        run "$TESTBIN/compactstep" "$S/a.tdc" "$step" fail
        [ "$status" -eq 1 ] || { echo "step $step: status $status: $output"; false; }
        [[ "$output" == *"the archive and its journal are unchanged"* ]]
        cmp "$S/a.tdc" "$BATS_FILE_TMPDIR/a.tdc"
        cmp "$S/a.tdc.journal" "$BATS_FILE_TMPDIR/a.tdc.journal"
        [ "$(temps)" -eq 0 ]
        same_view
    done
}

@test "a new archive damaged after it was written is caught by the check before the rename" {
    run "$TESTBIN/compactstep" "$S/a.tdc" 2 damage
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"checking the compacted archive before it replaces the old one"* ]]
    [[ "$output" == *"unchanged"* ]]
    cmp "$S/a.tdc" "$BATS_FILE_TMPDIR/a.tdc"
    cmp "$S/a.tdc.journal" "$BATS_FILE_TMPDIR/a.tdc.journal"
    [ "$(temps)" -eq 0 ]
    same_view
    # and a clean compaction after it succeeds
    "$TADOC" compact "$S/a.tdc"
    same_view
}

@test "every inode type: mount, compaction, unpack and pack keep type, mode, owner, rdev, links and xattrs" {
    "$TADOC" compact "$S/a.tdc"
    "$TADOC" verify "$S/a.tdc"
    same_view
    "$TADOC" ls -l "$S/a.tdc" >"$S/ls"
    grep -q '^p0644 .* d/fifo$' "$S/ls"
    grep -q '^c0644 .* cdev$' "$S/ls"
    grep -q '^b0644 .* bdev$' "$S/ls"
    grep -q '^s0755 .* sock$' "$S/ls"
    grep -q '^l0777 .* s2 -> d/hello.txt$' "$S/ls"
    M=$S/m
    mkdir "$M"
    mnt "$S/a.tdc" "$M"
    [ "$(stat -c '%F %h' "$M/s2")" = "symbolic link 2" ]
    [ "$(stat -c '%i' "$M/s1")" = "$(stat -c '%i' "$M/s2")" ]
    [ "$(stat -c '%F %h' "$M/fifo2")" = "fifo 2" ]
    [ "$(stat -c '%F %t %T' "$M/cdev")" = "character special file 1 3" ]
    [ "$(stat -c '%F %t %T' "$M/bdev")" = "block special file 7 0" ]
    [ "$(stat -c '%F' "$M/sock")" = "socket" ]
    # A FIFO of the mount works as one.
    (echo through >"$M/d/fifo" &)
    [ "$(timeout 5 cat "$M/d/fifo")" = through ]
    umnt "$S/a.tdc"
    # unpack recreates them; pack of that tree gives the same tree again.
    "$TADOC" unpack "$S/a.tdc" "$S/u"
    [ "$(stat -c '%F %h %t %T' "$S/u/bdev")" = "block special file 1 7 0" ]
    [ "$(stat -c '%i' "$S/u/s1")" = "$(stat -c '%i' "$S/u/s2")" ]
    [ "$(getfattr -n user.note --only-values "$S/u/d/new.txt")" = kept ]
    run "$TADOC" pack "$S/u" -o "$S/b.tdc"
    [ "$status" -eq 0 ]
    [[ "$output" == *"2 symlinks, 5 special files"* ]]
    "$TADOC" unpack "$S/b.tdc" "$S/u2"
    tree_rdev() { (cd "$1" && find . -printf '%P\t%y\t%m\t%s\t%n\t%U\t%G\t%l\n' -exec stat -c '%t:%T' {} \; | LC_ALL=C sort); }
    diff <(tree_rdev "$S/u") <(tree_rdev "$S/u2")
    diff -r --no-dereference -x fifo -x fifo2 -x sock -x cdev -x bdev "$S/u" "$S/u2"
}

@test "unpack without root: devices are reported, the rest is restored, the exit status says so" {
    "$TADOC" compact "$S/a.tdc"
    chmod 755 "$S"
    mkdir "$S/o"
    chown 65534:65534 "$S/o"
    run setpriv --reuid=65534 --regid=65534 --clear-groups "$TADOC" unpack "$S/a.tdc" "$S/o/u"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"cdev: device not created (needs root)"* ]]
    [[ "$output" == *"bdev: device not created (needs root)"* ]]
    [[ "$output" == *"2 device names not created"* ]]
    [ -p "$S/o/u/d/fifo" ]
    [ -S "$S/o/u/sock" ]
    [ ! -e "$S/o/u/cdev" ]
    cmp "$S/o/u/ca01" <(cat "$CORPORA/brown/ca01"; printf 'appended line\n')
}

version_of() { od -An -tu4 -j8 -N4 "$1" | tr -d ' '; }

# Copy tests/data/vV.tdc (made by an older release), check it, and mount it on $M.
old_mounted() { # V
    A=$S/v$1.tdc
    cp "$BATS_TEST_DIRNAME/../data/v$1.tdc" "$A"
    [ "$(version_of "$A")" = "$1" ]
    "$TADOC" verify "$A"
    "$TESTBIN/voldump" "$A" >"$S/before" 2>/dev/null
    grep -q "old archive, version $1" "$S/before"
    M=$S/m
    mkdir "$M"
    mnt "$A" "$M"
    [ "$(cat "$M/hard")" = "old archive, version $1" ]
    [ "$(getfattr -n user.k --only-values "$M/d/a.txt")" = v ]
}

# Unmount it, compact it to the current version and find the same tree.
old_compacted() {
    umnt "$A"
    "$TADOC" compact --force "$A"
    [ "$(version_of "$A")" = 5 ]
    "$TESTBIN/voldump" "$A" >"$S/after" 2>/dev/null
    diff "$S/before" "$S/after"
}

@test "a version 2 archive (made by the previous release) opens, mounts, and compacts to the current version unchanged" {
    old_mounted 2
    [ "$(stat -c %h "$M/d/a.txt")" = 2 ]
    old_compacted
}

@test "a version 3 archive (made by the release before shards) opens, mounts, and compacts to the current version unchanged" {
    old_mounted 3
    [ "$(stat -c %h "$M/d/hard2")" = 2 ]
    [ "$(stat -c %h "$M/d/s2")" = 2 ]
    [ -p "$M/d/fifo" ]
    old_compacted
}

@test "a version 4 archive (made by the release before access and change times) opens, mounts, and compacts to the current version unchanged" {
    old_mounted 4
    [ "$(stat -c %h "$M/d/hard2")" = 2 ]
    [ -p "$M/d/fifo" ]
    [ "$(readlink "$M/d/sym")" = ../hard ]
    old_compacted
}

@test "tadoc compact -j and --mem: the same shards on one thread and on four; no build past the first where the budget has no room for one" {
    local t=$S/t
    mkdir -p "$t"
    cp -r "$CORPORA/linux-slice" "$t/"
    "$TADOC" pack -q "$t" -o "$S/b.tdc" --shard-size 64K
    mkdir "$S/m"
    mnt "$S/b.tdc" "$S/m"
    (cd "$t/linux-slice" && find . -type f | sort | xargs cat) | head -c 1500000 |
        tee "$t/large" >"$S/m/large"
    printf 'appended\n' | tee -a "$t/linux-slice/Makefile" >>"$S/m/linux-slice/Makefile"
    M=$S/m umnt "$S/b.tdc"
    cp "$S/b.tdc" "$S/c.tdc"
    cp "$S/b.tdc.journal" "$S/c.tdc.journal"
    run "$TADOC" compact -j 1 "$S/b.tdc"
    [ "$status" -eq 0 ] && [[ "$output" == *" on 1 threads,"* ]]
    run "$TADOC" compact -j 4 --mem 1G "$S/c.tdc"
    [ "$status" -eq 0 ] && [[ "$output" == *" threads,"* ]]
    # every section of every shard, as `tadoc stat` lists them, the same
    diff <("$TADOC" stat "$S/b.tdc" | awk '$1 ~ /^[0-9]+$/' ) <("$TADOC" stat "$S/c.tdc" | awk '$1 ~ /^[0-9]+$/')
    [ "$("$TADOC" stat "$S/b.tdc" | awk '/^shards/ {print $2}')" -gt 20 ]
    "$TADOC" unpack "$S/c.tdc" "$S/out"
    diff -r "$t" "$S/out"
    # A budget smaller than one build: the first worker alone.
    "$TADOC" pack -q "$t" -o "$S/d.tdc" --shard-size 64K
    mnt "$S/d.tdc" "$S/m"
    printf 'more\n' >>"$S/m/large"
    M=$S/m umnt "$S/d.tdc"
    run "$TADOC" compact -j 4 --mem 1M "$S/d.tdc"
    [ "$status" -eq 0 ] && [[ "$output" == *" on 1 threads,"* ]]
    run "$TADOC" compact --mem 0 "$S/d.tdc"
    [ "$status" -eq 2 ]
}

@test "user.tadoc.compact=background returns at once and the mount's root stays usable; sizes past the largest file are EFBIG" {
    M=$S/m
    mkdir "$M"
    mnt -o compact_threshold=0 "$S/a.tdc" "$M"
    # a file grown to the largest size a file may have: holes, which a compaction stores as
    # zeros (a few seconds); past it, EFBIG for truncate, write and fallocate alike
    truncate -s 4G "$M/holes"
    run truncate -s $(((1 << 40) + 1)) "$M/holes"
    [ "$status" -ne 0 ] && [[ "$output" == *"File too large"* ]]
    run python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for f in (lambda: os.pwrite(fd, b"x", 1 << 40), lambda: os.posix_fallocate(fd, (1 << 40) - 1, 2)):
    try:
        f()
        print("accepted")
    except OSError as e:
        print(e.strerror)' "$M/holes"
    [ "$output" = "$(printf 'File too large\nFile too large')" ]
    [ "$(stat -c %s "$M/holes")" = $((4 << 30)) ]
    # a write that crosses the largest size writes the part that fits (a short write: the
    # kernel sends the part in the last page alone)
    run python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
print(os.pwrite(fd, b"0123456789", (1 << 40) - 5), os.fstat(fd).st_size == 1 << 40,
      os.pread(fd, 10, (1 << 40) - 5))' "$M/edge"
    [ "$output" = "5 True b'01234'" ]
    rm "$M/edge"
    before=$(getfattr --only-values -n user.tadoc.compactions "$M")
    setfattr -n user.tadoc.compact -v background "$M"
    # returned before the compaction ended (4 GiB of zeros take it seconds), and the root
    # answers lookups and changes meanwhile
    [ "$(getfattr --only-values -n user.tadoc.compactions "$M")" = "$before" ]
    [ ! -e "$M/not-there" ] && echo made >"$M/during" && [ "$(cat "$M/during")" = made ]
    for _ in $(seq 600); do
        [ "$(getfattr --only-values -n user.tadoc.compactions "$M")" -gt "$before" ] && break
        sleep 0.1
    done
    [ "$(getfattr --only-values -n user.tadoc.compactions "$M")" -gt "$before" ]
    ! getfattr -n user.tadoc.compact_error "$M" 2>/dev/null
    [ "$(stat -c %s "$M/holes")" = $((4 << 30)) ] && [ "$(cat "$M/during")" = made ]
    cmp <(head -c 1M "$M/holes") <(head -c 1M /dev/zero)
    run setfattr -n user.tadoc.compact -v background "$M/during"
    [ "$status" -ne 0 ]
    umnt "$S/a.tdc"
}

@test "an unmount stops a compaction in flight: the daemon exits at once, the archive and the journal stay" {
    M=$S/m
    mkdir "$M"
    mnt -o compact_threshold=0 "$S/a.tdc" "$M"
    # 64 GiB of holes: a compaction writing them out as zeros would run for minutes
    truncate -s 64G "$M/holes"
    before=$(sha256sum <"$S/a.tdc")
    setfattr -n user.tadoc.compact -v background "$M"
    sleep 1
    fusermount3 -u "$M"
    local gone=0
    for _ in $(seq 300); do
        pgrep -f -- "$S/a.tdc $M" >/dev/null || { gone=1; break; }
        sleep 0.1
    done
    [ "$gone" = 1 ]
    [ "$(sha256sum <"$S/a.tdc")" = "$before" ] && [ "$(temps)" = 0 ]
    mnt -o ro "$S/a.tdc" "$M"
    [ "$(stat -c %s "$M/holes")" = $((64 << 30)) ]
    umnt "$S/a.tdc"
}

@test "a journal already past compact_threshold at mount is compacted then, not at the next write" {
    M=$S/m
    mkdir "$M"
    local j
    j=$(stat -c %s "$S/a.tdc.journal")
    mnt "$S/a.tdc" "$M" -o compact_threshold=$((j / 2))
    for _ in $(seq 300); do
        [ "$(getfattr --only-values -n user.tadoc.compactions "$M")" -gt 0 ] && break
        sleep 0.1
    done
    [ "$(getfattr --only-values -n user.tadoc.compactions "$M")" -eq 1 ]
    umnt "$S/a.tdc"
    [ "$(stat -c %s "$S/a.tdc.journal")" -lt "$j" ]
    same_view
}

@test "a compaction never overwrites an archive put in the mounted one's place, nor brings back a removed one" {
    M=$S/m
    mkdir "$M" "$S/other"
    printf 'another tree\n' >"$S/other/x.txt"
    "$TADOC" pack -q "$S/other" -o "$S/b.tdc"
    cp "$S/b.tdc" "$S/b.copy"
    mnt -o compact_threshold=0 "$S/a.tdc" "$M"
    mv "$S/b.tdc" "$S/a.tdc" # the user's replacement, beside the mount's journal
    echo w >"$M/w"
    run setfattr -n user.tadoc.compact -v 1 "$M"
    [ "$status" -ne 0 ]
    getfattr --only-values -n user.tadoc.compact_error "$M" | grep -q 'replaced, moved or removed'
    cmp "$S/a.tdc" "$S/b.copy"
    [ "$(cat "$M/w")" = w ] # the mount goes on as it was
    rm "$S/a.tdc"
    run setfattr -n user.tadoc.compact -v 1 "$M"
    [ "$status" -ne 0 ]
    [ ! -e "$S/a.tdc" ]
    [ "$(temps)" -eq 0 ]
}
