#!/usr/bin/env bats
# docs/FORMAT.md is complete: tests/format/readfmt.py, a reader written from that document
# alone (Python's standard library, `zstd -d` and `xxhsum -H3`), reads archives of every
# inode type and a journal holding every record type, and what it prints equals what the C
# code shows: `tadoc ls -l`, `tadoc cat`, and tests/tools/fmtdump (the tree through the
# engine's own reader and journal replay, and the records that replay). A reader that gets one
# detail of the format wrong disagrees, so the comparison can fail.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

READFMT="$BATS_TEST_DIRNAME/../format/readfmt.py"
# The interpreter itself, not a version manager's shim (the corrupt-file test starts it often).
python3() { command "${PYTHON3:=$(command python3 -c 'import sys; print(sys.executable)')}" "$@"; }

umnt() { # ARCHIVE MOUNTPOINT: unmount and wait for the daemon to exit
    fusermount3 -u "$2"
    for _ in $(seq 100); do is_mounted "$2" || break; sleep 0.05; done
    for _ in $(seq 100); do pgrep -f -- "$1 $2" >/dev/null || return 0; sleep 0.05; done
    return 1
}

# j.tdc: a packed tree plus a journal with every record type; c.tdc: the same compacted
# (version 4, every inode type, hard links, xattrs, devices); tiny.tdc: sections kept raw.
setup_file() {
    local d=$BATS_FILE_TMPDIR t=$BATS_FILE_TMPDIR/tree M=$BATS_FILE_TMPDIR/m
    mkdir -p "$t/dir/sub" "$M" "$d/tiny"
    printf 'hello world\n' >"$t/dir/hello.txt"
    cp "$CORPORA/brown/ca01" "$t/ca01"
    cp "$CORPORA/brown/ca02" "$t/dir/sub/ca02"
    printf 'to be cut short, then grown\n' >"$t/cut.txt"
    ln "$t/dir/hello.txt" "$t/hardlink"
    ln -s dir/hello.txt "$t/sym"
    "$TADOC" pack -q "$t" -o "$d/j.tdc"
    "$TADOCFS" "$d/j.tdc" "$M" 3>&-
    (
        cd "$M"
        printf 'appended line\n' >>ca01                      # write
        printf 'XY' | dd of=dir/sub/ca02 bs=1 seek=10 conv=notrunc status=none
        truncate -s 6 cut.txt                                # truncate
        truncate -s 20 cut.txt                               # truncate (grows with zeros)
        printf 'new file\n' >dir/new.txt                     # create, write
        mkdir newdir                                         # create (directory)
        ln -s ../ca01 newdir/up                              # create (symlink)
        ln dir/new.txt newdir/new-link                       # link
        ln -P sym sym2                                       # link of a symlink
        mkfifo newdir/fifo                                   # create (FIFO)
        ln newdir/fifo fifo2
        mknod cdev c 1 3                                     # create (devices, with rdev)
        mknod bdev b 7 0
        python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
        setfattr -n user.note -v kept dir/new.txt            # setxattr
        setfattr -n user.gone -v x ca01
        setfattr -x user.gone ca01                           # rmxattr
        chmod 600 dir/hello.txt                              # setattr
        touch -m -d '2001-02-03 04:05:06' ca01               # setattr (mtime)
        mv dir/sub/ca02 ca02                                 # rename
        printf 'doomed\n' >dir/doomed
        rm dir/doomed                                        # unlink
        rmdir dir/sub                                        # unlink (directory)
    )
    umnt "$d/j.tdc" "$M"
    printf 'insert\tdir/hello.txt\t6\tbig \n' >"$d/ops"
    "$TADOC" apply "$d/j.tdc" "$d/ops" >/dev/null               # insert
    cp "$d/j.tdc" "$d/c.tdc"
    cp "$d/j.tdc.journal" "$d/c.tdc.journal"
    "$TADOC" compact "$d/c.tdc"
    printf 'tiny\n' >"$d/tiny/t"
    "$TADOC" pack -q "$d/tiny" -o "$d/tiny.tdc"
}

setup() {
    scratch
}

teardown() {
    rm -rf "$S"
}

# The tree readfmt.py reads equals the one the engine shows, and ls -l and cat agree too.
agree() { # ARCHIVE
    python3 "$READFMT" tree "$1" >"$S/py" || return 1
    "$TESTBIN/fmtdump" "$1" >"$S/c" || return 1
    diff "$S/c" "$S/py" || return 1
    python3 "$READFMT" ls "$1" >"$S/py.ls" || return 1
    "$TADOC" ls -l "$1" >"$S/c.ls" 2>/dev/null || return 1
    diff "$S/c.ls" "$S/py.ls" || return 1
    local p
    for p in $(awk '$1 ~ /^-/ { print $NF }' "$S/c.ls"); do
        cmp <("$TADOC" cat "$1" "$p" 2>/dev/null) <(python3 "$READFMT" cat "$1" "$p") || return 1
    done
}

@test "format: a compacted version 5 archive of every inode type reads the same from FORMAT.md" {
    [ "$(od -An -tu4 -j8 -N4 "$BATS_FILE_TMPDIR/c.tdc" | tr -d ' ')" = 5 ]
    [ ! -s "$BATS_FILE_TMPDIR/c.tdc.journal" ] || [ "$(stat -c %s "$BATS_FILE_TMPDIR/c.tdc.journal")" = 32 ]
    agree "$BATS_FILE_TMPDIR/c.tdc"
    # the listing holds what it should: devices with rdev, hard links, xattrs, a FIFO
    grep -qP '^cdev\tc\t.*\t259\t-\t-\t-$' "$S/py"
    grep -qP '^bdev\tb\t.*\t1792\t-\t-\t-$' "$S/py"
    grep -qP '^newdir/fifo\tp\t' "$S/py"
    grep -qP '^sock\ts\t' "$S/py"
    grep -qP '^dir/new.txt\t.*\tnote=6b657074\t' "$S/py"
    [ "$(awk -F'\t' '$1 == "hardlink" { print $8, $9 }' "$S/py")" = \
      "$(awk -F'\t' '$1 == "dir/hello.txt" { print $8, $9 }' "$S/py")" ]
    [ "$(awk -F'\t' '$1 == "sym2" { print $2, $9 }' "$S/py")" = "l 2" ]
}

@test "format: raw sections, the plain and kind layouts of rules and root, the file table in rows and in columns, and a version 2 archive read the same" {
    d=$BATS_FILE_TMPDIR
    "$TADOC" stat "$d/tiny.tdc" | grep -qE '^ +dictionary +raw '
    "$TADOC" stat "$d/tiny.tdc" | grep -qE '^ +rules +kind '
    "$TADOC" stat "$d/tiny.tdc" | grep -qE '^ +root +kind '
    # c.tdc (test 1) holds zstd sections, rules and root in the kind layout; its dictionary is
    # zstd or zstd-front, whichever was smaller
    "$TADOC" stat "$d/c.tdc" | grep -qE '^ +rules +zstd-kind '
    "$TADOC" stat "$d/c.tdc" | grep -qE '^ +root +zstd-kind '
    "$TADOC" stat "$d/c.tdc" | grep -qE '^ +dictionary +zstd(-front)? '
    agree "$d/tiny.tdc"
    agree "$BATS_TEST_DIRNAME/../data/v2.tdc"
    # the same trees with rules and root in the plain layout
    TADOC_NO_KIND=1 "$TADOC" pack -q "$d/tiny" -o "$S/tiny-plain.tdc"
    "$TADOC" stat "$S/tiny-plain.tdc" | grep -qE '^ +rules +raw '
    agree "$S/tiny-plain.tdc"
    TADOC_NO_KIND=1 "$TADOC" pack -q "$d/tree" -o "$S/plain.tdc"
    "$TADOC" stat "$S/plain.tdc" | grep -qE '^ +root +zstd '
    agree "$S/plain.tdc"
    # the file table in columns (the default) and in rows
    "$TADOC" stat "$d/c.tdc" | grep -qE '^ +file table +zstd-cols '
    TADOC_NO_COLS=1 "$TADOC" pack -q "$d/tree" -o "$S/rows.tdc"
    "$TADOC" stat "$S/rows.tdc" | grep -qE '^ +file table +zstd '
    agree "$S/rows.tdc"
}

# test_shard assembles a version 4 archive of three shards (each with its own dictionary and
# rule numbering) whose file "big" starts in shard 0 and runs on through shards 1 and 2.
@test "format: shards stored as their text, with token references (zstd-text) and bare (zstd-bare), read the same" {
    mkdir -p "$S/t/bin"
    rand 5 30000 >"$S/t/bin/r1"
    rand 6 30000 >"$S/t/bin/r2"
    cp "$S/t/bin/r1" "$S/t/again"
    printf 'words and words\n' >"$S/t/w.txt"
    "$TADOC" pack -q "$S/t" -o "$S/text.tdc"
    "$TADOC" stat "$S/text.tdc" | grep -qE '^ +dictionary +zstd-text '
    agree "$S/text.tdc"
    # a shard of text zstd stores smaller than a grammar (agree's cat per file is too slow
    # in Python for its 223 files: the tree listing holds every file's bytes)
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/bare.tdc"
    "$TADOC" stat "$S/bare.tdc" | grep -qE '^ +dictionary +zstd-bare '
    python3 "$READFMT" tree "$S/bare.tdc" >"$S/py"
    "$TESTBIN/fmtdump" "$S/bare.tdc" >"$S/c"
    diff "$S/c" "$S/py"
}

@test "format: a version 5 archive of three shards, a file running across both cuts, reads the same" {
    TDC_SHARD_KEEP="$S/sh.tdc" "$TESTBIN/test_shard" >/dev/null 2>&1
    [ "$(od -An -tu4 -j8 -N4 "$S/sh.tdc" | tr -d ' ')" = 5 ]
    [ "$(od -An -tu4 -j24 -N4 "$S/sh.tdc" | tr -d ' ')" = 11 ] # 3 * 3 + 2 sections
    "$TADOC" stat "$S/sh.tdc" | grep -qE '^shards +3$'
    agree "$S/sh.tdc"
    [ "$(awk -F'\t' '$1 == "big" { print $6 }' "$S/py")" = 30004 ]
    # the comparison can fail here too
    run env READFMT_MISTAKE=planes python3 "$READFMT" tree "$S/sh.tdc"
    [ "$status" -eq 3 ] || ! diff -q "$S/c" <(printf '%s\n' "$output")
}

# ARCHIVE FLAGS COPY: COPY is ARCHIVE with the header's flags set to FLAGS, its hash resealed.
set_flags() {
    python3 - "$@" "$READFMT" <<'EOF'
import os, struct, sys
sys.path.insert(0, os.path.dirname(sys.argv[4]))
import readfmt
d = bytearray(open(sys.argv[1], "rb").read())
d[12:16] = struct.pack("<I", int(sys.argv[2]))
d[32:40] = struct.pack("<Q", readfmt.xxh3(bytes(d[:32])))
open(sys.argv[3], "wb").write(d)
EOF
}

@test "format: the header records whether a shard holds a word of 1024 bytes or more; compaction keeps it, and learns it for an archive without" {
    local t=$S/lw
    mkdir -p "$t/w" "$t/b"
    cp "$CORPORA"/brown/ca0* "$t/w/"
    # the long word in a shard stored as its text (the file starts as random bytes)
    { rand 1 100000; head -c 2000 /dev/zero | tr '\0' x; rand 2 1000; } >"$t/b/bin"
    "$TADOC" pack -q -S 64K "$t" -o "$S/some.tdc"
    "$TADOC" pack -q -S 64K "$t/w" -o "$S/none.tdc"
    "$TADOC" stat "$S/some.tdc" | grep -q zstd-text
    "$TADOC" stat "$S/none.tdc" | grep -qE '^shards +[2-9]'
    [ "$(python3 "$READFMT" long "$S/some.tdc")" = "header yes, shards yes" ]
    [ "$(python3 "$READFMT" long "$S/none.tdc")" = "header no, shards no" ]
    "$TADOC" stat "$S/some.tdc" | grep -q '^long words   some of 1024 bytes or more (as the header says)$'
    # compactions copy the shards of unchanged files as stored and keep what the header said
    printf 'append\tw/ca01\tmore words\n' | "$TADOC" apply "$S/some.tdc" -
    printf 'append\tca01\tmore words\n' | "$TADOC" apply "$S/none.tdc" -
    for a in some none; do
        "$TADOC" compact "$S/$a.tdc" >/dev/null
        "$TADOC" verify "$S/$a.tdc"
    done
    [ "$(python3 "$READFMT" long "$S/some.tdc")" = "header yes, shards yes" ]
    [ "$(python3 "$READFMT" long "$S/none.tdc")" = "header no, shards no" ]
    # an archive whose writer did not record it (flags 0, as written before the flag) reads
    # and verifies as before, and its first compaction decodes the dictionaries of the shards
    # it copies (the text shard's text) to record it
    set_flags "$S/some.tdc" 0 "$S/old.tdc"
    [ "$(python3 "$READFMT" long "$S/old.tdc")" = "header unrecorded, shards yes" ]
    "$TADOC" stat "$S/old.tdc" | grep -q '^long words   some .*(not recorded in the header)$'
    "$TADOC" verify "$S/old.tdc"
    printf 'append\tw/ca02\tmore\n' | "$TADOC" apply "$S/old.tdc" -
    "$TADOC" compact "$S/old.tdc" >/dev/null
    [ "$(python3 "$READFMT" long "$S/old.tdc")" = "header yes, shards yes" ]
    # a header that says otherwise: verify says so; the analytics do not depend on it
    set_flags "$S/some.tdc" 1 "$S/lie.tdc"
    run "$TADOC" verify "$S/lie.tdc"
    [ "$status" -eq 3 ]
    [[ "$output" == *"the header says no word of 1024 bytes or more, the shards hold one"* ]]
    "$TADOC" stat "$S/lie.tdc" | grep -q '(the header says otherwise)$'
    for an in wordcount seqcount; do
        cmp <("$TADOC" $an "$S/lie.tdc") <("$TADOC" $an "$S/some.tdc")
    done
}

# "path<TAB>atime<TAB>mtime<TAB>ctime" of every name under DIR (the root as "."), sorted.
stat_times() {
    python3 -c '
import os, sys
m = sys.argv[1]
def line(p, rel):
    st = os.lstat(p)
    print("\t".join([rel] + ["%d.%09d" % divmod(t, 10**9)
                             for t in (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)]))
line(m, ".")
for d, dirs, names in os.walk(m):
    for f in dirs + names:
        line(os.path.join(d, f), os.path.relpath(os.path.join(d, f), m))' "$1" | LC_ALL=C sort
}

@test "format: access and change times (version 5) survive a compaction and a new mount, as FORMAT.md lays them out" {
    local t=$S/tm M=$S/tm.m
    mkdir -p "$t/d" "$M"
    printf 'a\n' >"$t/f"
    printf 'b\n' >"$t/d/g"
    ln -s f "$t/l"
    mkfifo "$t/p"
    touch -h -d 2001-01-01 "$t/f" "$t/d/g" "$t/l" "$t/p" "$t/d" "$t"
    "$TADOC" pack -q "$t" -o "$S/tm.tdc"
    [ "$(od -An -tu4 -j8 -N4 "$S/tm.tdc" | tr -d ' ')" = 5 ]
    # pack writes the modification time as all three
    python3 "$READFMT" times "$S/tm.tdc" | awk -F'\t' '$2 != $3 || $3 != $4 { print; bad = 1 } END { exit bad }'
    "$TADOCFS" "$S/tm.tdc" "$M" 3>&-
    printf 'more\n' >>"$M/f"                   # mtime and ctime
    touch -a -d 2010-05-05T01:02:03.123456789 "$M/d/g" # atime (and ctime)
    chmod 600 "$M/p"                           # ctime alone
    touch -h -m -d 2002-02-02 "$M/l"           # a symlink's mtime
    stat_times "$M" >"$S/before"
    setfattr -n user.tadoc.compact -v 1 "$M"
    umnt "$S/tm.tdc" "$M"
    # the archive holds them (read from FORMAT.md alone), and a new mount shows them
    diff "$S/before" <(python3 "$READFMT" times "$S/tm.tdc" | LC_ALL=C sort)
    "$TADOCFS" -o ro "$S/tm.tdc" "$M" 3>&-
    diff "$S/before" <(stat_times "$M")
    umnt "$S/tm.tdc" "$M"
    [ "$(awk -F'\t' '$1 == "d/g" { print $2 }' "$S/before")" = 1273021323.123456789 ]
    "$TADOC" unpack "$S/tm.tdc" "$S/tm.out"
    [ "$(stat -c %X "$S/tm.out/d/g")" = 1273021323 ]
}

@test "format: the journal's records replay to the same tree, every record type present" {
    local a=$BATS_FILE_TMPDIR/j.tdc
    python3 "$READFMT" records "$a" >"$S/recs"
    "$TESTBIN/fmtdump" -j "$a" >"$S/c.recs"
    diff "$S/c.recs" <(cut -f1-3 "$S/recs")
    local t
    for t in create link unlink rename setattr truncate write insert setxattr rmxattr; do
        grep -qP "^\d+\t$t\t" "$S/recs" || { echo "no $t record"; false; }
    done
    # a device's create carries its rdev as the optional last field
    grep -qP '\tcreate\t.*name=63646576 .*rdev=259$' "$S/recs"
    agree "$a"
    # the archive alone (journal ignored) differs: the records matter
    python3 "$READFMT" archive "$a" >"$S/alone"
    ! diff -q "$S/alone" "$S/py"
}

@test "format: a torn or damaged tail is dropped, a journal of another archive refused" {
    cp "$BATS_FILE_TMPDIR/j.tdc" "$BATS_FILE_TMPDIR/j.tdc.journal" "$S/"
    local size
    size=$(stat -c %s "$S/j.tdc.journal")
    truncate -s $((size - 3)) "$S/j.tdc.journal"
    python3 "$READFMT" records "$S/j.tdc" >"$S/recs"
    "$TESTBIN/fmtdump" -j "$S/j.tdc" >"$S/c.recs"
    diff "$S/c.recs" <(cut -f1-3 "$S/recs")
    [ "$(wc -l <"$S/recs")" -eq $(($(python3 "$READFMT" records "$BATS_FILE_TMPDIR/j.tdc" | wc -l) - 1)) ]
    agree "$S/j.tdc"
    # bound to another archive: both refuse it
    cp "$BATS_FILE_TMPDIR/tiny.tdc" "$S/other.tdc"
    cp "$BATS_FILE_TMPDIR/j.tdc.journal" "$S/other.tdc.journal"
    run python3 "$READFMT" tree "$S/other.tdc"
    [ "$status" -eq 3 ]
    run "$TESTBIN/fmtdump" "$S/other.tdc"
    [ "$status" -eq 3 ]
}

@test "format: the comparison can fail: a reader that gets one detail wrong disagrees" {
    local a=$BATS_FILE_TMPDIR/c.tdc m
    "$TESTBIN/fmtdump" "$a" >"$S/c"
    for m in planes varint order; do
        run env READFMT_MISTAKE=$m python3 "$READFMT" tree "$a"
        [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || { echo "mistake $m: $output"; false; }
        if [ "$status" -eq 0 ]; then
            ! diff -q "$S/c" <(printf '%s\n' "$output") || { echo "mistake $m went unnoticed"; false; }
        fi
    done
    # and a damaged byte inside a section fails its checksum
    cp "$a" "$S/bad.tdc"
    flip_byte "$S/bad.tdc" 50
    run python3 "$READFMT" archive "$S/bad.tdc"
    [ "$status" -eq 3 ]
    [[ "$output" == *"checksum mismatch"* ]]
}

# Every damaged archive and journal of tests/corrupt/ (MANIFEST: FILE, exit status, message,
# K:OFFSET for a journal whose tail is dropped) is judged alike by the rules of FORMAT.md and
# by the C reader: refused (3) or accepted with the same tree, with the same records replayed.
@test "format: the validation rules of FORMAT.md refuse exactly what the C reader refuses (tests/corrupt)" {
    local C=$BATS_TEST_DIRNAME/../corrupt f code rec k prc crc x miss=0
    # Each case gets its own folder, the journals beside a copy of base.tdc; readfmt checks
    # them in one process per command (`each`), which writes its output beside them (what
    # its helper tools print on stderr, such as xxhsum's progress, goes to tools.err).
    mkdir "$S/a" "$S/j"
    while IFS=$'\t' read -r f code _ rec; do
        case "$f" in
        *.tdc) ln -s "$C/$f" "$S/a/$f" ;;
        *.journal) mkdir "$S/j/$f" && cp "$C/base.tdc" "$S/j/$f/x.tdc" &&
            cp "$C/$f" "$S/j/$f/x.tdc.journal" ;;
        esac
    done < <(grep -v '^#' "$C/MANIFEST")
    python3 "$READFMT" each archive "$S"/a/*.tdc >"$S/a.status" 2>>"$S/tools.err"
    python3 "$READFMT" each tree "$S"/j/*/x.tdc >"$S/j.status" 2>>"$S/tools.err"
    python3 "$READFMT" each records "$S"/j/*/x.tdc >/dev/null 2>>"$S/tools.err"
    while IFS=$'\t' read -r f code _ rec; do
        case "$f" in
        \#*) continue ;;
        *.tdc)
            prc=$(awk -F'\t' -v p="$S/a/$f" '$2 == p { print $1 }' "$S/a.status")
            [ "$prc" = "$code" ] ||
                { echo "$f: readfmt ${prc:-no status}, want $code: $(cat "$S/a/$f.archive.err")"; miss=1; }
            ;;
        *.journal)
            x=$S/j/$f/x.tdc
            prc=$(awk -F'\t' -v p="$x" '$2 == p { print $1 }' "$S/j.status")
            crc=0
            "$TESTBIN/fmtdump" "$x" >"$x.c" 2>/dev/null || crc=$?
            if [ "$rec" = "-" ]; then
                [ "$prc" = "$code" ] && [ "$crc" -eq "$code" ] ||
                    { echo "$f: readfmt ${prc:-no status}, fmtdump $crc, want $code: $(cat "$x.tree.err")"; miss=1; }
            else
                k=${rec%%:*}
                [ "$(wc -l <"$x.records")" -eq "$k" ] &&
                    [ "$("$TESTBIN/fmtdump" -j "$x" | wc -l)" -eq "$k" ] ||
                    { echo "$f: not $k records replayed"; miss=1; }
            fi
            if [ "$prc" = 0 ] && ! cmp -s "$x.tree" "$x.c"; then echo "$f: trees differ"; miss=1; fi
            ;;
        esac
    done <"$C/MANIFEST"
    [ "$miss" -eq 0 ]
}
