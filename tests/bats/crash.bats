#!/usr/bin/env bats
# Crash safety and bad input of writable mounts, on real mounts: the daemon killed (SIGKILL)
# during write streams, editor-style saves, background and online compactions; `tadoc compact`
# killed at random moments; stale, foreign and damaged journals (flipped bytes, torn tails,
# bogus lengths, damaged headers); a full disk; two writers; archives named through symlinks
# and relative paths. Every test compares with what was acknowledged (tests/tools/fsyncwriter)
# or with a model tree edited the same way on local disk.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

setup_file() {
    # The writer is plain C without the library: built here too, so any build tree will do.
    cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror \
        -o "$BATS_FILE_TMPDIR/fsyncwriter" "$BATS_TEST_DIRNAME/../tools/fsyncwriter.c"
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$BATS_FILE_TMPDIR/l.tdc"
    local t=$BATS_FILE_TMPDIR/small
    mkdir -p "$t/d"
    printf 'start\n' >"$t/log.txt"
    printf 'hello world\n' >"$t/d/hello.txt"
    cp "$CORPORA/brown/ca01" "$t/d/ca01"
    "$TADOC" pack -q "$t" -o "$BATS_FILE_TMPDIR/s.tdc"
}

setup() {
    scratch
    A=$BATS_FILE_TMPDIR L=$CORPORA/linux-slice W=$BATS_FILE_TMPDIR/fsyncwriter
    M=$S/m
    mkdir "$M"
    DPID=
}

teardown() {
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
    for m in "$M" "$S/m2" "$S/full/mnt"; do
        fusermount3 -u "$m" 2>/dev/null || true
        if is_mounted "$m"; then fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" || true; fi
    done
    # Wait for daemons of this test's archives to finish writing before removing them.
    for _ in $(seq 50); do pgrep -f -- "$S/" >/dev/null || break; sleep 0.1; done
    if is_mounted "$S/full"; then umount "$S/full" || umount -l "$S/full"; fi
    rm -rf "$S"
}

# Unmount and wait until the daemon (of archive $1) has written its journal out and exited.
umnt() {
    fusermount3 -u "$M"
    wait_unmounted "$M"
    for _ in $(seq 100); do pgrep -f -- "$1 $M" >/dev/null || return 0; sleep 0.05; done
    echo "daemon of $1 did not exit"
    return 1
}
# A foreground daemon in the background; its pid in DPID, its stderr appended to $3.
start_fg() {
    "$TADOCFS" -f "$1" "$2" 3>&- 2>>"$3" &
    DPID=$!
    wait_mounted "$2" || { echo "no mount:"; cat "$3"; return 1; }
}
kill_fg() {
    kill -9 "$DPID"
    { wait "$DPID"; } 2>/dev/null || true
    DPID=
    fusermount3 -uz "$M"
    wait_unmounted "$M"
}
# A random delay of $1..$2 milliseconds, as a `sleep` argument.
delay() { local ms=$(($1 + RANDOM % ($2 - $1 + 1))); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }
# The delay of kill I of N spread over 0..SPAN milliseconds: a random point in the I-th of N
# equal slices, so that every run covers the whole window instead of bunching by chance on one
# side of a commit.
spread() { local w=$(($3 / $2)); delay $((($1 - 1) * w)) $(($1 * w)); }

# What two trees must agree on, besides content: path, type, mode, size (not of
# directories), link target, link count, user xattrs. Times differ (edits ran at other times).
tree_shape() {
    (cd "$1" && find . -printf '%P\t%y\t%m\t%s\t%l\t%n\n' |
        awk -F'\t' 'BEGIN { OFS = "\t" } $2 == "d" { $4 = "-" } 1' | LC_ALL=C sort)
    (cd "$1" && getfattr -R -d -m '^user\.' --absolute-names . 2>/dev/null |
        awk '/^# file: / { f = substr($0, 9) } /^user\./ && !/^user\.tadoc\./ { print f "\t" $0 }' |
        LC_ALL=C sort)
}

same_tree() { # MODEL MOUNT
    diff -r --no-dereference "$1" "$2"
    diff <(tree_shape "$1") <(tree_shape "$2")
}

# "start length type seq tail" for each record of a journal (structure only, no checksums);
# tail is the last bytes of the body with newlines shown as '|', spaces as '_'.
jrecs() {
    perl -e 'open F, "<", $ARGV[0] or die "$ARGV[0]: $!"; binmode F; local $/; my $d = <F>;
        my $o = 32;
        while ($o + 24 <= length $d) {
            my ($l, $t, $s) = unpack "V V Q<", substr($d, $o, 16);
            last if $o + 24 + $l > length $d;
            my $tail = substr($d, $o + 16 + ($l > 16 ? $l - 16 : 0), $l > 16 ? 16 : $l);
            $tail =~ s/\n/|/g; $tail =~ s/ /_/g; $tail =~ s/[^\x21-\x7e]/./g;
            print "$o $l $t $s $tail\n"; $o += 24 + $l }' "$1"
}

# Overwrite 4 bytes at OFFSET of FILE with the little-endian u32 VALUE.
put_u32() {
    perl -e 'open F, "+<", $ARGV[0] or die; binmode F; seek F, $ARGV[1], 0;
             print F pack("V", $ARGV[2]); close F' "$1" "$2" "$3"
}

# ---------------------------------------------------------------------------------------------

@test "SIGKILL of the daemon during a write stream: every line acknowledged by fsync or close survives (8 trials)" {
    cp "$A/l.tdc" "$S/a.tdc"
    mkdir "$S/model"
    local torn=0 total=0
    for i in $(seq 1 8); do
        start_fg "$S/a.tdc" "$M" "$S/daemon.err"
        timeout 60 "$W" write "$M/t$i" 4 "$S/log$i" "$RANDOM$i" >"$S/out$i" 2>&1 &
        local wpid=$!
        # the kill comes while lines are being acknowledged (a loaded machine may start the
        # writer late)
        for _ in $(seq 200); do grep -q '^S ' "$S/log$i" 2>/dev/null && break; sleep 0.05; done
        sleep "$(delay 100 600)"
        kill_fg
        # The writer notices (it gets an error, it does not hang) and says so.
        local ws=0
        wait "$wpid" || ws=$?
        [ "$ws" -eq 1 ] || { echo "trial $i: writer exit $ws"; cat "$S/out$i"; false; }
        grep -q '^error: ' "$S/out$i"
        grep -q '^S ' "$S/log$i" || { echo "trial $i: nothing was acknowledged"; cat "$S/out$i"; false; }

        run mnt "$S/a.tdc" "$M"
        [ "$status" -eq 0 ] || { echo "trial $i: remount: $output"; false; }
        [[ "$output" != *dropped* ]] || torn=$((torn + 1))
        [[ -z "$output" || "$output" == *"journal: dropped "*" bytes ("*"); cut off"* ]] || {
            echo "trial $i: remount said: $output"; false; }
        run "$W" check "$M/t$i" 4 "$S/log$i" "$S/out$i"
        echo "trial $i: $output"
        [ "$status" -eq 0 ]
        # Earlier trials are exactly as they were checked; the archive's files are untouched.
        for d in "$S"/model/t*; do
            [ -e "$d" ] || continue
            diff -r "$d" "$M/${d##*/}" || { echo "trial $i: ${d##*/} changed"; false; }
        done
        cp -a "$M/t$i" "$S/model/"
        total=$((total + $(cat "$M/t$i"/f* | wc -l)))
        umnt "$S/a.tdc"
    done
    echo "# $total lines kept over 20 kills, $torn remounts cut a torn journal tail" >&3
    mnt "$S/a.tdc" "$M"
    diff -r -x 't[0-9]*' "$L" "$M"
    for d in "$S"/model/t*; do diff -r "$d" "$M/${d##*/}"; done
    umnt "$S/a.tdc"
    # verify checks the archive (grammar, content hashes) and replays the journal.
    run "$TADOC" verify "$S/a.tdc"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ok: $(find "$L" -type f | wc -l) files"* ]]
    [[ "$output" == *"journal: "*" records apply"* ]]
}

@test "SIGKILL of the daemon: every acknowledged write survives without fsync or close" {
    cp "$A/s.tdc" "$S/a.tdc"
    start_fg "$S/a.tdc" "$M" "$S/daemon.err"
    exec 5>>"$M/log.txt"
    for i in $(seq 1 50); do printf 'edit %d\n' "$i" >&5; done
    printf 'new file\n' >"$M/new.txt"
    exec 7>>"$M/d/hello.txt"
    printf 'more\n' >&7
    kill_fg # at once: each record is in the journal file when its write returns
    exec 5>&- 7>&-
    mnt "$S/a.tdc" "$M"
    diff <(printf 'start\n'; printf 'edit %d\n' $(seq 1 50)) "$M/log.txt"
    [ "$(cat "$M/d/hello.txt")" = $'hello world\nmore' ]
    [ "$(cat "$M/new.txt")" = "new file" ]
}

@test "SIGKILL of the daemon during editor-style saves (write a temporary, rename over): always one whole version (10 trials)" {
    cp "$A/s.tdc" "$S/a.tdc"
    for i in $(seq 1 10); do
        start_fg "$S/a.tdc" "$M" "$S/daemon.err"
        timeout 60 "$W" replace "$M/r$i" "$S/log$i" "$RANDOM" >"$S/out$i" 2>&1 &
        local wpid=$!
        sleep "$(delay 50 400)"
        kill_fg
        wait "$wpid" || true
        grep -q '^error: ' "$S/out$i"
        run mnt "$S/a.tdc" "$M"
        [ "$status" -eq 0 ] || { echo "trial $i: remount: $output"; false; }
        run "$W" checkreplace "$M/r$i" "$S/log$i" "$S/out$i"
        echo "trial $i: $output"
        [ "$status" -eq 0 ]
        # Earlier trials still show the version they showed.
        for j in $(seq 1 $((i - 1))); do
            head -c 40 "$M/r$j/target" 2>/dev/null | cmp -s - "$S/first$j" ||
                { echo "trial $i: r$j changed"; false; }
        done
        head -c 40 "$M/r$i/target" >"$S/first$i" 2>/dev/null || : >"$S/first$i"
        umnt "$S/a.tdc"
    done
}

# The compactions the daemon of mountpoint $1 has finished (0 when it does not answer).
compactions_of() {
    getfattr -n user.tadoc.compactions --only-values --absolute-names "$1" 2>/dev/null || echo 0
}

@test "SIGKILL of the daemon while background compactions run: acknowledged lines survive (8 trials)" {
    cp "$A/l.tdc" "$S/a.tdc"
    mkdir "$S/model"
    local compactions=0
    for i in $(seq 1 8); do
        # preload: compactions can start at once, not after the background load, so that
        # the short trials overlap them even on a slow (sanitizer, loaded) machine.
        "$TADOCFS" -f -o compact_threshold=300K,preload "$S/a.tdc" "$M" 3>&- 2>>"$S/daemon.err" &
        DPID=$!
        wait_mounted "$M"
        timeout 60 "$W" write "$M/t$i" 3 "$S/log$i" "$RANDOM$i" >"$S/out$i" 2>&1 &
        local wpid=$!
        sleep "$(delay 300 1500)"
        local done_here
        done_here=$(compactions_of "$M")
        # The last trial, if no kill has come after a finished compaction yet (one under ASan
        # can outlast every window), waits up to 30 s for one to finish first.
        if [ "$i" -eq 8 ] && [ "$compactions" -eq 0 ]; then
            for _ in $(seq 300); do
                [ "$done_here" -eq 0 ] || break
                sleep 0.1
                done_here=$(compactions_of "$M")
            done
        fi
        compactions=$((compactions + done_here))
        kill_fg
        wait "$wpid" || true
        grep -q '^error: ' "$S/out$i"
        run mnt "$S/a.tdc" "$M"
        [ "$status" -eq 0 ] || { echo "trial $i: remount: $output"; false; }
        run "$W" check "$M/t$i" 3 "$S/log$i" "$S/out$i"
        echo "trial $i: $output"
        [ "$status" -eq 0 ]
        for d in "$S"/model/t*; do
            [ -e "$d" ] || continue
            diff -r "$d" "$M/${d##*/}" || { echo "trial $i: ${d##*/} changed"; false; }
        done
        # What the later trials must leave alone: the first 64 KiB of each stream (the
        # compaction below then builds that much, not the megabytes a trial may write, which
        # took it up to 45 s under ASan).
        local f
        for f in "$M/t$i"/*; do truncate -s 64K "$f"; done
        cp -a "$M/t$i" "$S/model/"
        # The next trial starts from an empty journal, as the first: a journal left to grow
        # over the trials makes every compaction outlast the window the kills are drawn from.
        setfattr -n user.tadoc.compact -v 1 "$M"
        umnt "$S/a.tdc"
    done
    echo "# $compactions background compactions seen before the kills" >&3
    [ "$compactions" -gt 0 ]
    mnt "$S/a.tdc" "$M"
    diff -r -x 't[0-9]*' "$L" "$M"
    umnt "$S/a.tdc"
    run "$TADOC" verify "$S/a.tdc"
    [ "$status" -eq 0 ]
}

# The same edits on the model tree and on the mount: every kind of record (writes, editor
# style rename-over, overwrite in the middle, truncate, new files, rename, unlink, mkdir,
# symlink, hard link, chmod, xattr, a sparse file, rm -r) over many files.
edit_tree() {
    local d=$1 i=0 f size
    mkdir -p "$d/newdir/sub"
    cat $(cd "$L" && find . -type f -name '*.c' -printf '%P\n' | LC_ALL=C sort | tail -40 |
        sed "s|^|$d/|") >"$d/newdir/big.c"
    while IFS= read -r f; do
        i=$((i + 1))
        size=$(stat -c %s "$d/$f")
        case $((i % 7)) in
        0) printf 'appended line %d\n' "$i" >>"$d/$f" ;;
        1) sed -i "1i /* edit $i */" "$d/$f" ;;
        2) printf 'XXXX%dXXXX' "$i" | dd of="$d/$f" bs=1 seek=$((i * 37 % size)) conv=notrunc status=none ;;
        3) truncate -s $((size / 2)) "$d/$f" ;;
        4) cat "$d/$f" "$d/$f" >"$d/$f.dup" ;;
        5) mv "$d/$f" "$d/$f.moved" ;;
        6) rm "$d/$f" ;;
        esac
    done < <(cd "$L" && find . -type f -name '*.[ch]' -printf '%P\n' | LC_ALL=C sort | head -150)
    printf 'hello\n' >"$d/newdir/sub/file"
    chmod 600 "$d/newdir/sub/file"
    ln -s ../big.c "$d/newdir/sub/link"
    ln "$d/newdir/sub/file" "$d/newdir/hard"
    setfattr -n user.test -v hello "$d/newdir/sub/file"
    truncate -s 100000 "$d/newdir/sparse"
    rm -r "$d/scripts"
}

@test "SIGKILL of tadoc compact at random moments: the mount shows the edits, from the old or the new archive (8 trials)" {
    cp "$A/l.tdc" "$S/a.tdc"
    cp -a "$L" "$S/model"
    edit_tree "$S/model"
    mnt "$S/a.tdc" "$M"
    edit_tree "$M"
    same_tree "$S/model" "$M"
    umnt "$S/a.tdc"
    local jsize
    jsize=$(stat -c %s "$S/a.tdc.journal")
    [ "$jsize" -gt 1000000 ]
    cp "$S/a.tdc" "$S/old.tdc"
    cp "$S/a.tdc.journal" "$S/old.journal"
    # How long an undisturbed compaction takes, to spread the kills over it.
    local ms t0
    t0=$(date +%s%N)
    "$TADOC" compact "$S/a.tdc" >/dev/null
    ms=$((($(date +%s%N) - t0) / 1000000))
    mnt "$S/a.tdc" "$M"
    same_tree "$S/model" "$M"
    umnt "$S/a.tdc"
    cp "$S/a.tdc" "$S/new.tdc"
    [ "$(stat -c %s "$S/a.tdc.journal")" -eq 32 ]

    local old=0 new=0 left=0
    for i in $(seq 1 8); do
        cp "$S/old.tdc" "$S/a.tdc"
        cp "$S/old.journal" "$S/a.tdc.journal"
        left=$((left + $(find "$S" -maxdepth 1 -name 'a.tdc*.tmp*' | wc -l)))
        rm -f "$S"/a.tdc.tmp* "$S"/a.tdc.journal.tmp*
        "$TADOC" compact "$S/a.tdc" >"$S/compact.out" 2>&1 3>&- &
        local cpid=$!
        # Spread over twice its measured time: about half the kills land before the rename,
        # and a compaction slowed by a busy machine still reaches the new archive in the last.
        sleep "$(spread "$i" 8 $((ms * 2)))"
        kill -9 "$cpid" 2>/dev/null || true
        wait "$cpid" || true
        local state
        if cmp -s "$S/a.tdc" "$S/old.tdc"; then
            state=old
            old=$((old + 1))
            # The journal is only replaced after the new archive is in place.
            cmp "$S/a.tdc.journal" "$S/old.journal"
        else
            state=new
            new=$((new + 1))
            "$TADOC" verify "$S/a.tdc" >/dev/null
        fi
        run mnt "$S/a.tdc" "$M"
        echo "trial $i ($state archive): mount: $output"
        [ "$status" -eq 0 ]
        [[ "$output" != *dropped* ]]
        same_tree "$S/model" "$M"
        umnt "$S/a.tdc"
        # After the mount the journal is consistent with the archive: a second mount agrees
        # and says nothing.
        run mnt -o ro "$S/a.tdc" "$M"
        [ "$status" -eq 0 ]
        [ -z "$output" ]
        diff -r --no-dereference "$S/model" "$M"
        umnt "$S/a.tdc"
    done
    echo "# $old kills left the old archive, $new the new one (compaction ${ms} ms); $left temporary files left behind" >&3
    [ "$old" -gt 0 ] && [ "$new" -gt 0 ]
}

@test "SIGKILL of the daemon during a compaction it runs (user.tadoc.compact): the remount shows every edit (6 trials)" {
    cp "$A/l.tdc" "$S/a.tdc"
    cp -a "$L" "$S/model"
    edit_tree "$S/model"
    mnt "$S/a.tdc" "$M"
    edit_tree "$M"
    sync -f "$M"
    umnt "$S/a.tdc"
    cp "$S/a.tdc" "$S/old.tdc"
    cp "$S/a.tdc.journal" "$S/old.journal"
    local ms t0 old=0 new=0
    start_fg "$S/a.tdc" "$M" "$S/daemon.err"
    t0=$(date +%s%N)
    setfattr -n user.tadoc.compact -v 1 "$M"
    ms=$((($(date +%s%N) - t0) / 1000000))
    same_tree "$S/model" "$M"
    kill_fg
    [ "$(stat -c %s "$S/a.tdc.journal")" -eq 32 ]
    # The kills are spread over three times the measured compaction: a daemon started afresh
    # for each trial (and slowed by a sanitizer or a busy machine) takes longer than the one
    # measured, and the last trials must still see it commit.
    for i in $(seq 1 6); do
        cp "$S/old.tdc" "$S/a.tdc"
        cp "$S/old.journal" "$S/a.tdc.journal"
        start_fg "$S/a.tdc" "$M" "$S/daemon.err"
        setfattr -n user.tadoc.compact -v 1 "$M" 2>/dev/null &
        local spid=$!
        sleep "$(spread "$i" 6 $((ms * 3)))"
        kill_fg
        wait "$spid" || true
        if cmp -s "$S/a.tdc" "$S/old.tdc"; then
            old=$((old + 1))
            cmp "$S/a.tdc.journal" "$S/old.journal"
        else
            new=$((new + 1))
        fi
        run mnt "$S/a.tdc" "$M"
        echo "trial $i: mount: $output"
        [ "$status" -eq 0 ]
        [[ "$output" != *dropped* ]]
        same_tree "$S/model" "$M"
        umnt "$S/a.tdc"
    done
    echo "# $old kills left the old archive, $new the new one (compaction ${ms} ms)" >&3
    [ "$old" -gt 0 ] && [ "$new" -gt 0 ]
}

@test "a journal left by a compaction that did not reset it is stale: discarded, nothing applied twice" {
    # The crash window between renaming the new archive and resetting the journal, made on
    # purpose: the compacted archive with the journal it was built from.
    cp "$A/s.tdc" "$S/a.tdc"
    mnt "$S/a.tdc" "$M"
    for i in $(seq 1 10); do printf 'edit %d\n' "$i" >>"$M/log.txt"; done
    printf 'inserted\n' | dd of="$M/d/hello.txt" bs=1 seek=6 conv=notrunc status=none
    mv "$M/d/ca01" "$M/ca01.moved"
    cp -a "$M" "$S/model"
    umnt "$S/a.tdc"
    cp "$S/a.tdc.journal" "$S/saved.journal"
    "$TADOC" compact "$S/a.tdc"
    cp "$S/saved.journal" "$S/a.tdc.journal"
    run mnt -o ro "$S/a.tdc" "$M"
    [ "$status" -eq 0 ]
    [[ "$output" == *"already folded into the archive; discarded"* ]]
    same_tree "$S/model" "$M"
    umnt "$S/a.tdc"
    cmp "$S/saved.journal" "$S/a.tdc.journal" # read-only: left alone
    run mnt "$S/a.tdc" "$M"
    [ "$status" -eq 0 ]
    [[ "$output" == *"already folded into the archive; discarded"* ]]
    same_tree "$S/model" "$M"
    printf 'after\n' >>"$M/log.txt"
    umnt "$S/a.tdc"
    run mnt "$S/a.tdc" "$M"
    [ -z "$output" ]
    [ "$(tail -n 2 "$M/log.txt")" = $'edit 10\nafter' ]
    umnt "$S/a.tdc"
    # The journal of the archive before the compacted one's predecessor is foreign, not stale.
    "$TADOC" compact "$S/a.tdc"
    cp "$S/saved.journal" "$S/a.tdc.journal"
    run mnt "$S/a.tdc" "$M"
    [ "$status" -eq 3 ]
    [[ "$output" == *"belongs to another archive"* ]]
    not_mounted "$M"
}

# 30 appends to log.txt of the small archive, one record each; prints nothing.
make_edits() {
    cp "$A/s.tdc" "$S/a.tdc"
    mnt "$S/a.tdc" "$M"
    for i in $(seq 1 30); do printf 'edit %d\n' "$i" >>"$M/log.txt"; done
    umnt "$S/a.tdc"
    J=$S/a.tdc.journal
    cp "$J" "$S/good.journal"
    jrecs "$J" >"$S/recs"
    [ "$(wc -l <"$S/recs")" -eq 30 ]
}
# Journal offset where the record of edit N starts.
rec_of() { awk -v t="edit_$1|" 'substr($5, length($5) - length(t) + 1) == t { print $1; exit }' "$S/recs"; }
# log.txt must be "start" and edits 1..N (then optionally more lines given as arguments).
expect_log() {
    local n=$1
    shift
    diff <(printf 'start\n'; [ "$n" -gt 0 ] && printf 'edit %d\n' $(seq 1 "$n"); for l in "$@"; do printf '%s\n' "$l"; done) "$M/log.txt"
}

# Mount a damaged journal: it must mount, say how much it dropped and why, show edits
# 1..GOOD, leave the file untouched with -o ro and cut it at CUT when writable, and take new
# appends after it. With "intact" (damage before intact records, not a crash's tail), a
# writable mount refuses it instead, leaving it as it is, until it is cut at CUT as told.
damaged_mount() { # GOOD CUT WHY [intact]
    local good=$1 cut=$2 why=$3 intact=${4:-} size
    size=$(stat -c %s "$J")
    cp "$J" "$S/damaged.journal"
    # verify: a torn last record is what a crash leaves (not an error); other damage is.
    run "$TADOC" verify "$S/a.tdc"
    echo "verify: $output"
    [[ "$output" == *"journal: $good records apply; $((size - cut)) bytes after them are "* ]]
    if [[ "$why" == torn* ]]; then
        [ "$status" -eq 0 ]
        [[ "$output" == *"a torn last record"* ]]
    else
        [ "$status" -eq 3 ]
        [[ "$output" == *"damaged ($why"* ]]
    fi
    cmp "$J" "$S/damaged.journal"
    run mnt -o ro "$S/a.tdc" "$M"
    echo "ro: $output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"journal: dropped $((size - cut)) bytes ($why"* ]]
    [[ "$output" != *"cut off"* ]]
    expect_log "$good"
    umnt "$S/a.tdc"
    cmp "$J" "$S/damaged.journal"
    run mnt "$S/a.tdc" "$M"
    echo "rw: $output"
    if [ -n "$intact" ]; then
        [ "$status" -eq 3 ]
        [[ "$output" == *"damaged, not torn: $why at offset $cut "*"truncate -s $cut "* ]]
        not_mounted "$M"
        cmp "$J" "$S/damaged.journal"
        truncate -s "$cut" "$J"
        run mnt "$S/a.tdc" "$M"
        [ "$status" -eq 0 ] && [ -z "$output" ]
    else
        [ "$status" -eq 0 ]
        [[ "$output" == *"journal: dropped $((size - cut)) bytes ($why"*"; cut off"* ]]
    fi
    expect_log "$good"
    [ "$(stat -c %s "$J")" -eq "$cut" ]
    printf 'after damage\n' >>"$M/log.txt"
    umnt "$S/a.tdc"
    run mnt "$S/a.tdc" "$M"
    [ -z "$output" ]
    expect_log "$good" "after damage"
    cmp "$M/d/ca01" "$CORPORA/brown/ca01"
    umnt "$S/a.tdc"
}

@test "a journal with a flipped byte in a record: mounts read-only with the records before it; writable once cut there as told, or at once where it is the last" {
    make_edits
    local r20 r21
    r20=$(rec_of 20)
    r21=$(rec_of 21)
    [ -n "$r20" ] && [ "$r21" -gt "$r20" ]
    # A byte of the data, of the header fields, of the checksum.
    for off in $((r21 - 10)) $((r20 + 9)) $((r21 - 3)); do
        cp "$S/good.journal" "$J"
        flip_byte "$J" "$off"
        damaged_mount 19 "$r20" "checksum mismatch" intact
    done
    # The first record, and the very last byte of the last one (a crash's tail).
    cp "$S/good.journal" "$J"
    flip_byte "$J" 40
    damaged_mount 0 32 "checksum mismatch" intact
    cp "$S/good.journal" "$J"
    flip_byte "$J" $(($(stat -c %s "$J") - 1))
    damaged_mount 29 "$(rec_of 30)" "checksum mismatch"
}

@test "a journal with a torn tail: mounts, drops the partial record, keeps everything before" {
    make_edits
    local r25 r26 size
    r25=$(rec_of 25)
    r26=$(rec_of 26)
    size=$(stat -c %s "$J")
    for cut in $((r25 + 10)) $((r25 + 30)) $((r26 - 1)); do
        head -c "$cut" "$S/good.journal" >"$J"
        local why="torn record"
        [ $((cut - r25)) -lt 24 ] && why="torn record header"
        damaged_mount 24 "$r25" "$why"
    done
    head -c $((size - 1)) "$S/good.journal" >"$J"
    damaged_mount 29 "$(rec_of 30)" "torn record"
    # Zeros after the last record (space a crashed writer had reserved and extended): what a
    # crash leaves, so verify reports it as torn and passes.
    cp "$S/good.journal" "$J"
    head -c 4096 /dev/zero >>"$J"
    damaged_mount 30 "$size" "torn record (zero-filled tail)"
}

@test "a journal record with a bogus length: the records after it are found, so it is damage: read-only, or writable once cut" {
    make_edits
    local r10 size
    r10=$(rec_of 10)
    size=$(stat -c %s "$J")
    for len in 4294967280 67108865 $((size - r10)) 1000; do
        cp "$S/good.journal" "$J"
        put_u32 "$J" "$r10" "$len"
        local why="checksum mismatch"
        [ "$len" -gt 67108864 ] && why="impossible record length"
        [ "$len" -le 67108864 ] && [ $((r10 + 24 + len)) -gt "$size" ] && why="damaged record length"
        damaged_mount 9 "$r10" "$why" intact
    done
}

@test "a damaged journal header or another archive's journal: the mount fails with exit 3 and a clear message (read-only: left unread, said so)" {
    make_edits
    for off in 0 7 8 16 20 24 31; do
        cp "$S/good.journal" "$J"
        flip_byte "$J" "$off"
        cp "$J" "$S/want.journal"
        run mnt -o rw "$S/a.tdc" "$M"
        echo "flip $off: $output"
        [ "$status" -eq 3 ]
        [[ "$output" == *"a.tdc.journal: journal header is damaged; move the file aside"* ]]
        not_mounted "$M"
        cmp "$J" "$S/want.journal"
        # read-only (where it could not be moved aside): the archive as written, said so
        run mnt -o ro "$S/a.tdc" "$M"
        [ "$status" -eq 0 ] && [[ "$output" == *"journal header is damaged: left unread"* ]]
        expect_log 0
        fusermount3 -u "$M"
        cmp "$J" "$S/want.journal"
        run "$TADOC" verify "$S/a.tdc"
        [ "$status" -eq 3 ]
        [[ "$output" == *"journal header is damaged"* ]]
    done
    head -c 20 "$S/good.journal" >"$J"
    run mnt "$S/a.tdc" "$M"
    [ "$status" -eq 3 ]
    [[ "$output" == *"journal header is damaged"* ]]
    : >"$J"
    run mnt "$S/a.tdc" "$M"
    [ "$status" -eq 3 ]
    not_mounted "$M"
    # The journal of the Linux slice beside the small archive.
    cp "$A/l.tdc" "$S/l.tdc"
    mnt "$S/l.tdc" "$M"
    printf 'x\n' >>"$M/Makefile" 2>/dev/null || printf 'x\n' >"$M/newfile"
    umnt "$S/l.tdc"
    cp "$S/l.tdc.journal" "$J"
    run mnt "$S/a.tdc" "$M"
    echo "$output"
    [ "$status" -eq 3 ]
    [[ "$output" == *"journal belongs to another archive"* ]]
    not_mounted "$M"
    cmp "$J" "$S/l.tdc.journal"
    # Moving it aside, as the message says, gives the archive without pending edits.
    mv "$J" "$S/aside.journal"
    mnt "$S/a.tdc" "$M"
    expect_log 0
    umnt "$S/a.tdc"
}

@test "tadoc verify notices a journal that the mount would refuse" {
    make_edits
    flip_byte "$J" 20
    run mnt "$S/a.tdc" "$M"
    [ "$status" -eq 3 ]
    run "$TADOC" verify "$S/a.tdc"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *journal* ]]
}

@test "disk full: writes fail with ENOSPC (not EIO), acknowledged data survives, appends work again once space is freed" {
    mkdir -p "$S/full"
    mount -t tmpfs -o size=8m tmpfs "$S/full"
    cp "$A/l.tdc" "$S/full/a.tdc"
    head -c 1500000 /dev/zero >"$S/full/filler"
    mkdir "$S/full/mnt"
    M=$S/full/mnt
    mnt "$S/full/a.tdc" "$M"
    run timeout 120 "$W" fill "$M/big" "$S/log"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"error: write: No space left on device"* ]]
    [[ "$output" == *"fsync: ok"* ]]
    [ "$(df --output=avail -k "$S/full" | tail -1)" -lt 500 ]
    # Still full: a large append fails the same way; reads and small metadata still work.
    run dd if=/dev/zero of="$M/big/f0" bs=1M count=2 oflag=append conv=notrunc status=none
    [ "$status" -ne 0 ]
    [[ "$output" == *"No space left on device"* ]]
    run dd if=/dev/zero of="$M/newfile" bs=1M count=2 status=none
    [ "$status" -ne 0 ]
    [[ "$output" == *"No space left on device"* ]]
    [[ "$output" != *"Input/output error"* ]]
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
    run sync -f "$M/big/f0"
    [ "$status" -eq 0 ]
    # A compaction cannot write its new archive: it fails with ENOSPC, leaves no temporary file
    # and changes nothing.
    cp "$S/full/a.tdc" "$S/before.tdc"
    run setfattr -n user.tadoc.compact -v 1 "$M"
    echo "compact: $output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"No space left on device"* ]]
    cmp "$S/full/a.tdc" "$S/before.tdc"
    [ -z "$(find "$S/full" -maxdepth 1 -name '*.tmp*')" ]
    cmp "$M/kernel/sched/core.c" "$L/kernel/sched/core.c"
    # ... and says why on the root's user.tadoc.compact_error.
    run getfattr -n user.tadoc.compact_error --only-values "$M"
    echo "compact_error: $output"
    [[ "$output" == *"No space left on device"* ]]
    [[ "$output" == *"the archive and its journal are unchanged"* ]]
    # Free space on the disk: the daemon takes appends again.
    rm "$S/full/filler"
    run "$W" more "$M/big" "$S/log" 5000
    echo "$output"
    [ "$status" -eq 0 ]
    printf 'one more file\n' >"$M/after.txt"
    sync -f "$M/after.txt"
    umnt "$S/full/a.tdc"
    mnt "$S/full/a.tdc" "$M"
    run "$W" check "$M/big" 1 "$S/log"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(cat "$M/after.txt")" = "one more file" ]
    diff -r -x big -x after.txt -x newfile "$L" "$M"
    umnt "$S/full/a.tdc"
}

@test "two writers: the lock file removed under a writer, a second writer is still refused, before and after a compaction" {
    cp "$A/s.tdc" "$S/a.tdc"
    mnt "$S/a.tdc" "$M"
    printf 'edit 1\n' >>"$M/log.txt"
    mkdir "$S/m2"
    for round in before after; do
        rm "$S/a.tdc.lock" # a cleaner of old empty files, or a user
        run mnt "$S/a.tdc" "$S/m2"
        [ "$status" -eq 1 ] && [[ "$output" == *"in use by another writer"* ]] ||
            { echo "$round: $output"; false; }
        not_mounted "$S/m2"
        run "$TADOC" compact "$S/a.tdc"
        [ "$status" -eq 1 ] && [[ "$output" == *"in use"* ]]
        printf 'append\tlog.txt\tfrom apply\\n\n' >"$S/ops"
        run "$TADOC" apply "$S/a.tdc" "$S/ops"
        [ "$status" -eq 1 ] && [[ "$output" == *"in use"* ]]
        printf 'edit %s\n' "$round" >>"$M/log.txt"
        # the writer's own compaction replaces the journal: the new one is held as well
        setfattr -n user.tadoc.compact -v 1 "$M"
        printf 'edit %s compacted\n' "$round" >>"$M/log.txt"
    done
    umnt "$S/a.tdc"
    mnt -o ro "$S/a.tdc" "$M"
    [ "$(tail -n 5 "$M/log.txt")" = "$(printf 'edit 1\nedit before\nedit before compacted\nedit after\nedit after compacted')" ]
}

@test "two writers: a second writable mount, tadoc compact and tadoc apply on a mounted archive fail with 'in use' (exit 1)" {
    cp "$A/s.tdc" "$S/a.tdc"
    mnt "$S/a.tdc" "$M"
    printf 'edit 1\n' >>"$M/log.txt"
    sync -f "$M/log.txt"
    cp "$S/a.tdc" "$S/before.tdc"
    cp "$S/a.tdc.journal" "$S/before.journal"
    mkdir "$S/m2"
    run mnt "$S/a.tdc" "$S/m2"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"in use"*"pid "*"(tadocfs)"* ]] # who holds it
    not_mounted "$S/m2"
    # The same archive named another way.
    run mnt "$(cd "$S" && pwd -P)/./a.tdc" "$S/m2"
    [ "$status" -eq 1 ]
    [[ "$output" == *"in use"* ]]
    run "$TADOC" compact "$S/a.tdc"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"in use"* ]]
    printf 'append\tlog.txt\tfrom apply\\n\n' >"$S/ops"
    run "$TADOC" apply "$S/a.tdc" "$S/ops"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"in use"* ]]
    cmp "$S/a.tdc" "$S/before.tdc"
    cmp "$S/a.tdc.journal" "$S/before.journal"
    # A read-only mount beside the writer is fine (it takes no lock and writes nothing).
    run mnt -o ro "$S/a.tdc" "$S/m2"
    [ "$status" -eq 0 ]
    [ "$(tail -n 1 "$S/m2/log.txt")" = "edit 1" ]
    fusermount3 -u "$S/m2"
    umnt "$S/a.tdc"
    # Once the writer is gone, apply and compact work.
    "$TADOC" apply -q "$S/a.tdc" "$S/ops"
    "$TADOC" compact "$S/a.tdc"
    mnt -o ro "$S/a.tdc" "$M"
    [ "$(cat "$M/log.txt")" = $'start\nedit 1\nfrom apply' ]
    umnt "$S/a.tdc"
}

# The journal and the lock are named after the path given, so an archive reached through a
# symlink must still find its own journal and lock (or the archive forks).
@test "an archive mounted through a symlink shows the pending edits of its journal" {
    cp "$A/s.tdc" "$S/a.tdc"
    ln -s a.tdc "$S/link.tdc"
    mnt "$S/a.tdc" "$M"
    printf 'edit 1\n' >>"$M/log.txt"
    umnt "$S/a.tdc"
    mnt -o ro "$S/link.tdc" "$M"
    run cat "$M/log.txt"
    echo "$output"
    [ "$output" = $'start\nedit 1' ]
}

@test "two writers through a symlinked archive path are refused too" {
    cp "$A/s.tdc" "$S/a.tdc"
    ln -s a.tdc "$S/link.tdc"
    mnt "$S/a.tdc" "$M"
    printf 'edit 1\n' >>"$M/log.txt"
    sync -f "$M/log.txt"
    mkdir "$S/m2"
    run mnt "$S/link.tdc" "$S/m2"
    echo "$output"
    fusermount3 -u "$S/m2" 2>/dev/null || true
    [ "$status" -eq 1 ]
    [[ "$output" == *"in use"* ]]
    run "$TADOC" compact "$S/link.tdc"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"in use"* ]]
}

@test "tadoc compact through a symlink compacts the archive it names and keeps the symlink" {
    cp "$A/s.tdc" "$S/a.tdc"
    ln -s a.tdc "$S/link.tdc"
    mnt "$S/a.tdc" "$M"
    printf 'edit 1\n' >>"$M/log.txt"
    umnt "$S/a.tdc"
    "$TADOC" compact "$S/link.tdc"
    [ -L "$S/link.tdc" ]
    [ "$(readlink "$S/link.tdc")" = a.tdc ]
    [ "$(stat -c %s "$S/a.tdc.journal")" -eq 32 ]
    mnt -o ro "$S/a.tdc" "$M"
    [ "$(cat "$M/log.txt")" = $'start\nedit 1' ]
}

# The daemon changes to / once mounted: an archive named by a relative path must still get
# its journal writes and compactions beside it (not beside /).
@test "an archive mounted by a relative path: edits, an online compaction and later edits all survive a remount" {
    local name=crash-rel-$$-$RANDOM.tdc
    cp "$A/s.tdc" "$S/$name"
    cd "$S"
    mnt "$name" m
    printf 'edit 1\n' >>m/log.txt
    setfattr -n user.tadoc.compact -v 1 m
    printf 'edit 2\n' >>m/log.txt
    sync -f m/log.txt
    umnt "$S/$name"
    [ ! -e "/$name" ] && [ ! -e "/$name.journal" ] && [ ! -e "/$name.lock" ]
    [ "$(stat -c %s "$S/$name")" -ne "$(stat -c %s "$A/s.tdc")" ] # compacted in place
    mnt "$name" m
    [ "$(cat m/log.txt)" = $'start\nedit 1\nedit 2' ]
    umnt "$S/$name"
    mnt -o ro "$S/$name" "$M"
    [ "$(cat "$M/log.txt")" = $'start\nedit 1\nedit 2' ]
}
