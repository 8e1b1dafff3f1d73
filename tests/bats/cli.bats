#!/usr/bin/env bats
# The tadoc command line: round trips on real corpora and odd trees, extract vs dd, bad input.

load helpers

setup() { scratch; }
teardown() { rm -rf "$S"; }

@test "--help works for every subcommand and bad usage exits 2" {
    run "$TADOC" --help
    [ "$status" -eq 0 ] && [[ "$output" == *"exit status"* ]]
    for args in --help --version "pack --help"; do # help that could not be written
        run "$TADOC" $args >/dev/full
        [ "$status" -eq 1 ] && [[ "$output" == *"stdout: write: No space left on device"* ]]
    done
    for c in pack unpack ls cat extract stat verify; do
        run "$TADOC" "$c" --help
        [ "$status" -eq 0 ] && [[ "$output" == "usage: tadoc $c"* ]]
    done
    run "$TADOC" frobnicate
    [ "$status" -eq 2 ]
    run "$TADOC" pack "$S"
    [ "$status" -eq 2 ]
    run "$TADOC" extract a b c
    [ "$status" -eq 2 ]
    run "$TADOC" extract a b -1 5
    [ "$status" -eq 2 ]
    run "$TADOC" extract a b 0x10 5
    [ "$status" -eq 2 ]
    # numbers are digits alone, in range: no wrap of a sign, no trailing junk, no 2^32 + 9
    mkdir -p "$S/in" && echo hi >"$S/in/f" && "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    for args in "pack -l 4294967305" "pack -l 9abc" "pack -s -18446744073709550592" \
        "pack -j -18446744073709551615" "pack -S +1M" "pack -S ' 1M'"; do
        eval "run \"\$TADOC\" $args \"\$S/in\" -o \"\$S/y.tdc\""
        [ "$status" -eq 2 ] || { echo "$args: $status"; false; }
    done
    for args in "compact -l 9abc" "compact -l 4294967305" "compact -j 2x" "compact -j 1e3"; do
        run "$TADOC" $args "$S/a.tdc"
        [ "$status" -eq 2 ] || { echo "$args: $status"; false; }
    done
    run "$TADOC" unpack -j +2 "$S/a.tdc" "$S/out"
    [ "$status" -eq 2 ] && [ ! -e "$S/out" ] && [ ! -e "$S/y.tdc" ]
    # an option a command does not take is a usage error, not the name of an archive
    for c in wordcount stat verify cat; do
        run "$TADOC" "$c" --bogus a
        [ "$status" -eq 2 ] && [[ "$output" == *"--bogus: unknown option"* ]]
    done
}

make_odd_tree() {
    local t=$1
    mkdir -p "$t/empty-dir" "$t/private" "$t/deep/a/b/c" "$t/with space" "$t/sgid"
    chmod 0700 "$t/private"
    chmod 2755 "$t/sgid"
    : >"$t/zero"
    printf 'no trailing newline' >"$t/no-newline"
    printf 'caf\xe9 \xff\xfe\x80 na\xefve\n\x00\x01\x02 tail' >"$t/latin1-and-nul"
    head -c 300000 /dev/urandom >"$t/random.bin"
    head -c 1048576 /dev/zero | tr '\0' 'a' >"$t/one-token-1MB"
    printf 'x%.0s' $(seq 1 5000) >"$t/deep/a/b/c/xs"
    printf 'line\n%.0s' $(seq 1 2000) >"$t/with space/lines.txt"
    printf 'odd name\n' >"$t/with space/tab	and
newline"
    cp "$CORPORA/brown/ca01" "$t/private/ca01"
    chmod 0444 "$t/private/ca01"
    chmod 0755 "$t/no-newline"
    ln -s ../zero "$t/deep/rel-link"
    ln -s /nonexistent/target "$t/dangling"
    ln -s "with space" "$t/dirlink"
    ln "$t/deep/a/b/c/xs" "$t/hard-xs" # a hard link: one inode, two names
    touch -h -d '2001-02-03 04:05:06.789' "$t/dangling"
    touch -d '1999-12-31 23:59:59.123456789' "$t/zero" "$t/empty-dir"
}

@test "pack then unpack reproduces an odd tree: modes, empty files and dirs, symlinks, binary, 1 MB token" {
    make_odd_tree "$S/in"
    run "$TADOC" pack "$S/in" -o "$S/a.tdc"
    [ "$status" -eq 0 ]
    [[ "$output" == *"ratio"* ]] && [[ "$output" == *"peak RSS"* ]]
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r --no-dereference "$S/in" "$S/out"
    diff <(tree_meta "$S/in") <(tree_meta "$S/out")
    [ "$(stat -c %i "$S/out/hard-xs")" = "$(stat -c %i "$S/out/deep/a/b/c/xs")" ]
    [ "$(stat -c %h "$S/out/hard-xs")" = 2 ]
    "$TADOC" verify "$S/a.tdc"
    "$TESTBIN/extractcheck" "$S/a.tdc" "$S/in" 3000 "$RANDOM"
    cmp <("$TADOC" cat "$S/a.tdc" one-token-1MB) "$S/in/one-token-1MB"
}

@test "pack and unpack a tree whose paths run past PATH_MAX (as ext4 and tar allow)" {
    mkdir "$S/in"
    # 24 directories of 250 bytes: a path of 6 KB; built and compared through descriptors
    python3 - "$S/in" <<'EOF'
import os, sys
cur = os.open(sys.argv[1], os.O_RDONLY)
for i in range(24):
    os.mkdir("d" * 249 + str(i % 10), dir_fd=cur)
    nxt = os.open("d" * 249 + str(i % 10), os.O_RDONLY, dir_fd=cur)
    os.close(cur)
    cur = nxt
fd = os.open("f", os.O_WRONLY | os.O_CREAT, 0o640, dir_fd=cur)
os.write(fd, b"deep words here\n")
os.setxattr(fd, "user.k", b"v")
os.close(fd)
os.symlink("f", "l", dir_fd=cur)
os.link("f", "h", src_dir_fd=cur, dst_dir_fd=cur)
os.mkfifo("p", dir_fd=cur)
EOF
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    python3 - "$S/in" "$S/out" <<'EOF'
import os, stat, sys
def listing(top):
    out = []
    for root, dirs, files, rfd in os.fwalk(top):
        for n in sorted(dirs + files):
            st = os.stat(n, dir_fd=rfd, follow_symlinks=False)
            item = [os.path.relpath(root, top), n, st.st_mode, st.st_size, st.st_nlink, st.st_mtime_ns]
            if stat.S_ISREG(st.st_mode):
                fd = os.open(n, os.O_RDONLY, dir_fd=rfd)
                item += [os.read(fd, 1 << 20), sorted((k, os.getxattr(fd, k)) for k in os.listxattr(fd))]
                os.close(fd)
            elif stat.S_ISLNK(st.st_mode):
                item.append(os.readlink(n, dir_fd=rfd))
            out.append(item)
    return sorted(out)
a, b = listing(sys.argv[1]), listing(sys.argv[2])
print(len(a), "entries")
sys.exit(len(a) != 28 or a != b)
EOF
    [ "$("$TADOC" cat "$S/a.tdc" "$("$TADOC" ls "$S/a.tdc" | grep '/f$')")" = "deep words here" ]
}

@test "unpack writes runs of zeros as holes: a sparse file comes back sparse, byte for byte" {
    mkdir -p "$S/in"
    truncate -s 64M "$S/in/sparse"
    printf 'middle' | dd of="$S/in/sparse" bs=1 seek=30000000 conv=notrunc status=none
    printf 'text then zeros' >"$S/in/tail" && truncate -s 1M "$S/in/tail"
    echo plain >"$S/in/plain"
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    for f in sparse tail plain; do cmp "$S/in/$f" "$S/out/$f"; done
    [ "$(stat -c %s "$S/out/tail")" = 1048576 ]
    [ "$(du -k "$S/out/sparse" | cut -f1)" -lt 1024 ]
}

@test "round trip of a slice of the Linux 6.1 tree, random extracts agree" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    "$TADOC" unpack "$S/l.tdc" "$S/out"
    diff -r --no-dereference "$CORPORA/linux-slice" "$S/out"
    diff <(tree_meta "$CORPORA/linux-slice") <(tree_meta "$S/out")
    run "$TADOC" verify "$S/l.tdc"
    [ "$status" -eq 0 ] && [[ "$output" == "ok: "* ]]
    "$TESTBIN/extractcheck" "$S/l.tdc" "$CORPORA/linux-slice" 5000 "$RANDOM"
}

@test "round trip of the Brown corpus with small segments (files span segments)" {
    "$TADOC" pack -q --segment 200000 "$CORPORA/brown" -o "$S/b.tdc"
    "$TADOC" unpack "$S/b.tdc" "$S/out"
    diff -r "$CORPORA/brown" "$S/out"
    diff <(tree_meta "$CORPORA/brown") <(tree_meta "$S/out")
    "$TESTBIN/extractcheck" "$S/b.tdc" "$CORPORA/brown" 5000 "$RANDOM"
}

@test "tadoc extract agrees with dd at random offsets, zero lengths, last byte and past EOF" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    mapfile -t files < <(cd "$CORPORA/linux-slice" && find . -type f -printf '%P\n' | sort)
    for i in $(seq 1 60); do
        f=${files[$((RANDOM % ${#files[@]}))]}
        size=$(stat -c %s "$CORPORA/linux-slice/$f")
        case $((i % 5)) in
        0) off=$((size - 1)); len=1 ;;
        1) off=$((size + RANDOM % 50)); len=10 ;;
        2) off=$((RANDOM % (size + 1))); len=0 ;;
        *) off=$(((RANDOM * 32768 + RANDOM) % (size + 1))); len=$((RANDOM % 5000)) ;;
        esac
        cmp <("$TADOC" extract "$S/l.tdc" "$f" "$off" "$len") \
            <(dd if="$CORPORA/linux-slice/$f" bs=1 skip="$off" count="$len" status=none)
    done
    f=${files[0]} # numbers are decimal: 010 is byte ten
    cmp <("$TADOC" extract "$S/l.tdc" "$f" 010 5) \
        <(dd if="$CORPORA/linux-slice/$f" bs=1 skip=10 count=5 status=none)
    run "$TADOC" extract "$S/l.tdc" no/such/file 0 1
    [ "$status" -eq 1 ] && [[ "$output" == *"no such file"* ]]
}

# The names `tadoc ls` lists, unescaped (printf %b reads its C escapes), NUL-terminated, sorted.
ls_names() {
    "$TADOC" ls "$1" | while IFS= read -r l; do printf '%b\0' "$l"; done | LC_ALL=C sort -z
}

@test "ls and stat describe the archive" {
    make_odd_tree "$S/in"
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    cmp <(ls_names "$S/a.tdc") <(cd "$S/in" && find . -mindepth 1 -printf '%P\0' | LC_ALL=C sort -z)
    run "$TADOC" ls -l "$S/a.tdc"
    [[ "$output" == *"l0777"*"dangling -> /nonexistent/target"* ]]
    run "$TADOC" stat "$S/a.tdc"
    [ "$status" -eq 0 ]
    for w in dictionary rules root "file table" "dag depth" ratio; do [[ "$output" == *"$w"* ]]; done
}

@test "stat and verify of an archive of many shards: a shard or span in memory at a time" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc" --shard-size 64K
    "$TADOC" stat "$S/l.tdc" >"$S/stat"
    # rules and root symbols: the shard table's columns summed
    awk '/^shards/ {on = 1; next} /^sections/ {on = 0} on && $1 ~ /^[0-9]+$/ {r += $5; s += $6}
        END {print r, s}' "$S/stat" >"$S/sums"
    read -r rules roots <"$S/sums"
    [ "$(awk '/^rules/ {print $2}' "$S/stat")" -eq "$rules" ]
    [ "$(awk '/^symbols/ {print $5}' "$S/stat")" -eq "$roots" ]
    [ "$(awk '/^shards/ {print $2}' "$S/stat")" -gt 20 ]
    # Their peak memory is under half that of loading the archive whole (a word count with
    # TADOC_SHARDS=whole loads and merges every shard), measured without a sanitizer (whose
    # shadow memory and quarantine are not tadoc's).
    local plain
    plain=$(dirname "$TADOCFS_PLAIN")/tadoc
    /usr/bin/time -f '%M' -o "$S/rss" "$plain" stat "$S/l.tdc" >/dev/null
    /usr/bin/time -f '%M' -o "$S/rss_verify" "$plain" verify "$S/l.tdc" >/dev/null
    TADOC_SHARDS=whole /usr/bin/time -f '%M' -o "$S/rss_whole" "$plain" wordcount "$S/l.tdc" \
        >/dev/null
    echo "# peak: stat $(cat "$S/rss") KB, verify $(cat "$S/rss_verify") KB," \
        "whole load $(cat "$S/rss_whole") KB" >&3
    [ $(($(cat "$S/rss") * 2)) -lt "$(cat "$S/rss_whole")" ]
    [ $(($(cat "$S/rss_verify") * 2)) -lt "$(cat "$S/rss_whole")" ]
}

@test "a truncated archive fails with a clear message at every section boundary" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    size=$(stat -c %s "$S/l.tdc")
    cuts=(0 7 39 40 $((size / 2)) $((size - 9)) $((size - 1)))
    while read -r name off stored; do cuts+=("$off" $((off + stored / 2))); done < <(sections "$S/l.tdc")
    for n in "${cuts[@]}"; do
        head -c "$n" "$S/l.tdc" >"$S/t.tdc"
        run "$TADOC" cat "$S/t.tdc" kernel/sched/core.c
        [ "$status" -eq 3 ]
        [[ "$output" == *"truncated"* || "$output" == *"too short"* || "$output" == *"checksum"* ]]
    done
}

@test "a flipped byte in each section is caught by that section's checksum" {
    # a part of Brown (one grammar of it all takes 20 s to pack under ASan): every section
    mkdir "$S/part"
    cp "$CORPORA"/brown/c[ab]* "$S/part/"
    "$TADOC" pack -q "$S/part" -o "$S/b.tdc"
    while read -r name off stored; do
        cp "$S/b.tdc" "$S/f.tdc"
        flip_byte "$S/f.tdc" $((off + stored / 3))
        run "$TADOC" verify "$S/f.tdc"
        [ "$status" -eq 3 ]
        [[ "$output" == *"section ${name/files/file table}: checksum mismatch"* ]]
    done < <(sections "$S/b.tdc")
    cp "$S/b.tdc" "$S/f.tdc"
    flip_byte "$S/f.tdc" 20   # the header
    run "$TADOC" ls "$S/f.tdc"
    [ "$status" -eq 3 ] && [[ "$output" == *"header checksum"* ]]
}

@test "wrong magic, bytes appended, not an archive, missing file" {
    mkdir "$S/t" && echo some words >"$S/t/f"
    "$TADOC" pack -q "$S/t" -o "$S/y.tdc"
    echo junk >>"$S/y.tdc"
    run "$TADOC" ls "$S/y.tdc"
    [ "$status" -eq 3 ] && [[ "$output" == *"5 bytes after the section table"* ]]
    printf 'NOTADOC!%.0s' $(seq 1 10) >"$S/x.tdc"
    run "$TADOC" ls "$S/x.tdc"
    [ "$status" -eq 3 ] && [[ "$output" == *"bad magic"* ]]
    run "$TADOC" ls "$S/missing.tdc"
    [ "$status" -eq 1 ] && [[ "$output" == *"No such file"* ]]
    run "$TADOC" ls "$S"
    [ "$status" -eq 1 ] && [[ "$output" == *"not a regular file"* ]]
    mkfifo "$S/fifo.tdc" # refused, not waited on
    run timeout 10 "$TADOC" ls "$S/fifo.tdc"
    [ "$status" -eq 1 ] && [[ "$output" == *"not a regular file"* ]]
    "$TADOC" pack -q "$S/t" -o "$S/z.tdc"
    mkfifo "$S/z.tdc.journal"
    mkdir "$S/mnt"
    run timeout 10 "$TADOCFS" -o ro "$S/z.tdc" "$S/mnt"
    [ "$status" -eq 1 ] && [[ "$output" == *"journal is not a regular file"* ]]
    ! mountpoint -q "$S/mnt"
}

@test "archives with valid checksums but bad content are rejected with a message naming the problem" {
    declare -A want=(
        [dotdot]="'..' component" [absolute]="absolute path" [dup]="duplicated"
        [order]="out of order" [cycle]="cycle through rule" [range]="out of range"
        [root0]="refers to rule 0" [size]="records 24 bytes" [noparent]="no parent directory"
        [rootrange]="bad root range" [linktarget]="bad symlink target"
        [hugelen]="declared size 549755813888"
    )
    for k in "${!want[@]}"; do
        "$TESTBIN/mkbad" "$k" "$S/$k.tdc"
        run "$TADOC" unpack "$S/$k.tdc" "$S/out-$k"
        [ "$status" -eq 3 ] || { echo "$k: status $status"; false; }
        [[ "$output" == *"${want[$k]}"* ]] || { echo "$k: $output"; false; }
        [ ! -e "$S/out-$k" ]
    done
    "$TESTBIN/mkbad" good "$S/good.tdc"
    "$TADOC" verify "$S/good.tdc"
    [ "$("$TADOC" cat "$S/good.tdc" a.txt)" = $'hello world\nhello world' ]
}

@test "two archives a fuzzer made: a file over two shards whose second is refused, and a year past struct tm" {
    D="$BATS_TEST_DIRNAME/../data"
    # part-room.tdc: file adj in two parts, shard 1's root section declaring no room for
    # its symbols (checksums valid): the part's span failed, then freed what it never set
    for args in "verify $D/part-room.tdc" "cat $D/part-room.tdc adj"; do
        run "$TADOC" $args
        [ "$status" -eq 3 ]
        [[ "$output" == *"shard 1: section root: compressed frame does not match declared size"* ]]
    done
    run "$TADOC" unpack "$D/part-room.tdc" "$S/out"
    [ "$status" -eq 3 ]
    [ ! -e "$S/out/adj" ] && [ -s "$S/out/words" ]
    # far-mtime.tdc: a file touched to @90000000000000000 through a mount, then compacted
    run "$TADOC" ls -l "$D/far-mtime.tdc"
    [ "$status" -eq 0 ]
    [[ "$output" == *" @90000000000000000 d/f" ]]
}

@test "unpack of some paths: those files and trees, the directories on the way, and a hard link whose first name is left out" {
    T=$S/t
    mkdir -p "$T/a/b" "$T/c/e" "$T/d"
    cp "$CORPORA/brown/ca01" "$T/a/b/f1"
    cp "$CORPORA/brown/ca02" "$T/c/e/g"
    ln "$T/a/b/f1" "$T/c/link1" # its first name, a/b/f1, comes first in path order
    ln -s ../a "$T/c/sym"
    mkfifo "$T/d/fifo"
    echo top >"$T/top"
    chmod 750 "$T/c"
    touch -d @1000000000 "$T/c"
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 4K
    [ "$(shards_of "$S/a.tdc")" -gt 3 ]
    # c alone: its files, the link's content though a/b/f1 is not asked for, c's own metadata
    "$TADOC" unpack -j 2 "$S/a.tdc" "$S/o1" c/
    [ "$(cd "$S/o1" && find . | LC_ALL=C sort | tr '\n' ' ')" = ". ./c ./c/e ./c/e/g ./c/link1 ./c/sym " ]
    cmp "$S/o1/c/link1" "$T/a/b/f1"
    cmp "$S/o1/c/e/g" "$T/c/e/g"
    [ "$(readlink "$S/o1/c/sym")" = ../a ]
    [ "$(stat -c '%a %Y %h' "$S/o1/c" "$S/o1/c/link1")" = $'750 1000000000 3\n'"$(stat -c '%a %Y' "$T/a/b/f1") 1" ]
    # with a/b too, the two names are one file again; a file and the root take part as well
    "$TADOC" unpack "$S/a.tdc" "$S/o2" /a/b c top
    [ "$(stat -c %i "$S/o2/a/b/f1")" = "$(stat -c %i "$S/o2/c/link1")" ]
    [ "$(stat -c %h "$S/o2/a/b/f1")" -eq 2 ]
    cmp "$S/o2/top" "$T/top"
    [ ! -e "$S/o2/d" ]
    "$TADOC" unpack "$S/a.tdc" "$S/o3" .
    for f in a/b/f1 c/e/g c/link1 top; do cmp "$T/$f" "$S/o3/$f"; done
    [ "$(tree_meta "$T")" = "$(tree_meta "$S/o3")" ]
    # a path the archive does not hold: nothing made
    run "$TADOC" unpack "$S/a.tdc" "$S/o4" c nope
    [ "$status" -eq 1 ]
    [[ "$output" == *"nope: no such path in the archive"* ]]
    [ ! -e "$S/o4" ]
}

@test "pack refuses a missing directory; unpack refuses a non-empty target" {
    run "$TADOC" pack "$S/nope" -o "$S/a.tdc"
    [ "$status" -eq 1 ] && [[ "$output" == *"No such file"* ]]
    [ ! -e "$S/a.tdc" ]
    mkdir -p "$S/in" && echo hi >"$S/in/f"
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    mkdir -p "$S/busy" && echo x >"$S/busy/keep"
    run "$TADOC" unpack "$S/a.tdc" "$S/busy"
    [ "$status" -eq 1 ] && [[ "$output" == *"not empty"* ]]
    [ "$(cat "$S/busy/keep")" = x ]
    run "$TADOC" unpack "$S/a.tdc" "$S/busy/keep"
    [ "$status" -eq 1 ] && [[ "$output" == *"keep: Not a directory"* ]]
    # a path longer than a message holds: the message keeps its reason, the path gives way
    local d200
    d200=$(printf 'd%.0s' $(seq 1 200))
    run "$TADOC" cat "$S/a.tdc" "$(printf "$d200/%.0s" $(seq 1 30))f"
    [ "$status" -eq 1 ] && [[ "$output" == *"[...]"*": no such file in the archive" ]]
}

@test "pack -o writes a new or a regular file: a FIFO, device, directory or dangling link is left as it was; a link's file is replaced, mode and link kept" {
    mkdir -p "$S/in" "$S/dir" && echo hello world >"$S/in/f"
    mkfifo "$S/fifo"
    mknod "$S/null" c 1 3
    ln -s nowhere "$S/dangling"
    for o in fifo null dir dangling; do
        run "$TADOC" pack -q "$S/in" -o "$S/$o"
        [ "$status" -eq 1 ] && [[ "$output" == *"$S/$o: "* ]]
    done
    [ -p "$S/fifo" ] && [ -c "$S/null" ] && [ -d "$S/dir" ] && [ -L "$S/dangling" ]
    [ -z "$(ls "$S/dir")" ] && [ "$(ls "$S" | grep -c tmp)" -eq 0 ]
    [ "$(ls "$S" | grep -c lock)" -eq 0 ] # nor a lock file beside them
    echo old >"$S/target" && chmod 640 "$S/target" && ln -s target "$S/link"
    "$TADOC" pack -q "$S/in" -o "$S/link"
    [ -L "$S/link" ] && [ "$(stat -c %a "$S/target")" = 640 ]
    [ "$("$TADOC" cat "$S/target" f)" = "hello world" ]
    "$TADOC" compact "$S/link"
    [ -L "$S/link" ] && [ "$(stat -c %a "$S/target")" = 640 ]
    [ "$("$TADOC" cat "$S/link" f)" = "hello world" ]
    # through the link, the archive it names is guarded as when named: edits pending in its
    # journal, or a writer holding it, refuse the pack, and the archive stays
    printf 'append\tf\tmore\n\n' | "$TADOC" apply -q "$S/target" -
    run "$TADOC" pack -q "$S/in" -o "$S/link"
    [ "$status" -eq 1 ] && [[ "$output" == *"target.journal holds edits not yet folded"* ]]
    "$TADOC" compact "$S/target"
    mkdir "$S/m" && "$TADOCFS" "$S/target" "$S/m" 3>&-
    run "$TADOC" pack -q "$S/in" -o "$S/link"
    fusermount3 -u "$S/m"
    [ "$status" -eq 1 ] && [[ "$output" == *"in use by another writer"* ]]
    [ "$("$TADOC" cat "$S/link" f)" = "$(printf 'hello world\nmore')" ]
    [ ! -e "$S/link.lock" ]
    # a killed pack's temporary file beside the archive goes with the next pack over it
    : >"$S/target.tmpAbc123"
    "$TADOC" pack -q "$S/in" -o "$S/link"
    [ ! -e "$S/target.tmpAbc123" ]
    (umask 077 && "$TADOC" pack -q "$S/in" -o "$S/private.tdc")
    [ "$(stat -c %a "$S/private.tdc")" = 600 ]
}

# until_there GLOB [MIN]: wait (at most 60 s) until a file matching GLOB holds more than MIN
# bytes (default 0)
until_there() {
    local i f
    for ((i = 0; i < 600; i++)); do
        for f in $1; do
            [ "$(stat -c %s "$f" 2>/dev/null || echo -1)" -gt "${2:-0}" ] && return 0
        done
        sleep 0.1
    done
    return 1
}

@test "SIGTERM or SIGHUP (or SIGINT) stop pack, compact and apply midway: nothing half done is left, and the command dies of the signal" {
    mkdir -p "$S/big" "$S/small"
    for i in 1 2 3 4 5 6; do cp -r "$CORPORA/brown" "$S/big/b$i"; done
    echo small >"$S/small/f"
    "$TADOC" pack -q "$S/small" -o "$S/a.tdc"
    cp "$S/a.tdc" "$S/a.before"
    # pack over an archive, stopped once its temporary file is there
    "$TADOC" pack -q -j 1 "$S/big" -o "$S/a.tdc" 3>&- &
    local p=$!
    until_there "$S/a.tdc.tmp*"
    kill -TERM "$p" # (a background job of a script ignores SIGINT, which is caught alike)
    wait "$p" && st=0 || st=$?
    [ "$st" -eq 143 ]
    cmp "$S/a.tdc" "$S/a.before" && [ -z "$(ls "$S" | grep tmp)" ]
    # a compaction of 3,030 edited files, stopped once its temporary archive is there
    "$TADOC" pack -q "$S/big" -o "$S/c.tdc"
    for f in $(cd "$S/big" && find . -type f -printf '%P\n'); do
        printf 'append\t%s\tmore words\\n\n' "$f"
    done >"$S/ops"
    "$TADOC" apply -q "$S/c.tdc" "$S/ops"
    cp "$S/c.tdc" "$S/c.before" && cp "$S/c.tdc.journal" "$S/j.before"
    "$TADOC" compact -j 1 "$S/c.tdc" >/dev/null 3>&- &
    p=$!
    until_there "$S/c.tdc.tmp*"
    kill -TERM "$p"
    wait "$p" && st=0 || st=$?
    [ "$st" -eq 143 ]
    cmp "$S/c.tdc" "$S/c.before" && cmp "$S/c.tdc.journal" "$S/j.before"
    [ -z "$(ls "$S" | grep tmp)" ]
    # apply, stopped once some of its batch is journaled (its extracts fill a pipe no one reads)
    for i in $(seq 2000); do printf 'append\tb1/ca01\tL%d\\n\nextract\tb1/ca01\t0\t200\n' "$i"; done >"$S/ops2"
    mkfifo "$S/pipe"
    exec 4<>"$S/pipe"
    local j0
    j0=$(stat -c %s "$S/c.tdc.journal")
    # (with SIGHUP's default action, whatever the suite inherited: under nohup it is ignored)
    env --default-signal=HUP "$TADOC" apply -q "$S/c.tdc" "$S/ops2" >"$S/pipe" 3>&- 4>&- &
    p=$!
    until_there "$S/c.tdc.journal" "$j0"
    kill -HUP "$p"
    wait "$p" && st=0 || st=$?
    exec 4>&-
    [ "$st" -eq 129 ]
    cmp "$S/c.tdc.journal" "$S/j.before" # cut back to where the batch began
    "$TADOC" verify "$S/c.tdc"
}

@test "a command whose output cannot be written (a full disk) fails with a message" {
    mkdir -p "$S/in" && echo hello world >"$S/in/f"
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    for c in "ls -l" stat verify wordcount "cat A f" "count A f hello" "extract A f 0 5"; do
        [[ "$c" == *" A "* ]] && c=${c/ A / $S/a.tdc } || c="$c $S/a.tdc"
        run bash -c "'$TADOC' $c >/dev/full"
        [ "$status" -eq 1 ] && [[ "$output" == *"stdout: write: No space left"* ]]
    done
}

@test "ls writes control bytes in names and link targets as the C escapes apply reads back" {
    mkdir -p "$S/in"
    printf 'one\n' >"$S/in/"$'new\nline'
    printf 'two\n' >"$S/in/"$'tab\there'
    printf 'three\n' >"$S/in/back\\slash"
    printf 'four\n' >"$S/in/"$'esc\e[31mred'
    ln -s $'to\nthere' "$S/in/link"
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    run "$TADOC" ls "$S/a.tdc"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 5 ] # one line a name
    [[ "$output" == *'new\nline'* && "$output" == *'tab\there'* ]]
    [[ "$output" == *'back\\slash'* && "$output" == *'esc\x1b[31mred'* ]]
    [[ "$output" != *$'\e'* ]]
    [[ "$("$TADOC" ls -l "$S/a.tdc")" == *'link -> to\nthere'* ]]
    # printf %b reads them back into the names find lists
    cmp <(ls_names "$S/a.tdc") <(cd "$S/in" && find . -mindepth 1 -printf '%P\0' | LC_ALL=C sort -z)
    # and apply takes them as paths
    "$TADOC" ls "$S/a.tdc" | grep -v link | while IFS= read -r l; do printf 'append\t%s\tmore\\n\n' "$l"; done |
        "$TADOC" apply "$S/a.tdc" -
    "$TADOC" compact "$S/a.tdc"
    [ "$("$TADOC" cat "$S/a.tdc" $'new\nline')" = $'one\nmore' ]
    [ "$("$TADOC" cat "$S/a.tdc" 'back\slash')" = $'three\nmore' ]
}

@test "paths are taken as written: slashes at either end or doubled and . components" {
    mkdir -p "$S/in/sub" && echo hello world >"$S/in/sub/f" && echo other >"$S/in/g"
    "$TADOC" pack -q "$S/in" -o "$S/a.tdc"
    for p in sub/f /sub/f ./sub//f sub/./f; do
        [ "$("$TADOC" cat "$S/a.tdc" "$p")" = "hello world" ]
        [ "$("$TADOC" count "$S/a.tdc" "$p" hello)" = 1 ]
    done
    for p in sub/ /sub// ./sub; do
        cmp <("$TADOC" wordcount "$S/a.tdc" "$p") <("$TADOC" wordcount "$S/a.tdc" sub)
    done
    for p in / . ./; do
        cmp <("$TADOC" termvector "$S/a.tdc" "$p") <("$TADOC" termvector "$S/a.tdc")
    done
    run "$TADOC" cat "$S/a.tdc" /
    [ "$status" -eq 1 ] && [[ "$output" == *"/: not a regular file"* ]]
    run "$TADOC" wordcount "$S/a.tdc" sub/../g
    [ "$status" -eq 1 ] && [[ "$output" == *"no such path"* ]]
    # a trailing / or /. names a directory, as for open(2)
    for p in sub/f/ sub/f/. /sub/f//; do
        run "$TADOC" cat "$S/a.tdc" "$p"
        [ "$status" -eq 1 ] && [[ "$output" == *"$p: not a directory"* ]]
        run "$TADOC" wordcount "$S/a.tdc" "$p"
        [ "$status" -eq 1 ] && [[ "$output" == *"$p: not a directory"* ]]
    done
    run "$TADOC" unpack "$S/a.tdc" "$S/u" sub/f/
    [ "$status" -eq 1 ] && [[ "$output" == *"sub/f/: not a directory"* ]]
    # "--" ends the options: a file named -h
    echo dash >"$S/in/-h" && "$TADOC" pack -q "$S/in" -o "$S/d.tdc"
    [ "$("$TADOC" cat "$S/d.tdc" -- -h)" = dash ]
    [ "$("$TADOC" extract "$S/d.tdc" -- -h 1 3)" = ash ]
    [ "$("$TADOC" count "$S/d.tdc" -- -h dash)" = 1 ]
    [ "$("$TADOC" wordcount -- "$S/d.tdc" -h)" = "$(printf '1\tdash')" ]
    [[ "$("$TADOC" cat "$S/d.tdc" -h)" == "usage: tadoc cat"* ]]
}

@test "pack of a file appended to while it is read: a warning naming it, exit 1, a valid archive of what was read" {
    mkdir -p "$S/in"
    cat "$CORPORA"/brown/c* | head -c 3000000 >"$S/in/grow.log"
    echo steady >"$S/in/steady.txt"
    (for i in $(seq 1 5000); do echo "appended line $i" >>"$S/in/grow.log"; sleep 0.002; done) &
    writer=$!
    sleep 0.1
    run "$TADOC" pack "$S/in" -o "$S/a.tdc"
    kill "$writer"
    wait "$writer" || true
    [ "$status" -eq 1 ]
    [[ "$output" == *"warning: $S/in/grow.log: changed as it was read"* ]]
    [[ "${lines[-1]}" == *"a.tdc written, but 1 files changed as they were read"* ]]
    "$TADOC" verify "$S/a.tdc"
    # What was archived is the file as far as the walk saw it: a prefix of it now.
    n=$("$TADOC" ls -l "$S/a.tdc" | awk '$NF == "grow.log" {print $4}')
    [ "$n" -ge 3000000 ] && [ "$n" -lt "$(stat -c %s "$S/in/grow.log")" ]
    cmp <("$TADOC" cat "$S/a.tdc" grow.log) <(head -c "$n" "$S/in/grow.log")
    [ "$("$TADOC" cat "$S/a.tdc" steady.txt)" = steady ]
    # The same tree at rest packs without a word.
    run "$TADOC" pack -q "$S/in" -o "$S/b.tdc"
    [ "$status" -eq 0 ] && [ -z "$output" ]
}

@test "pack of a tree a file is removed from or replaced by a FIFO, link or directory after the walk: archived empty with a warning, exit 1" {
    mkdir -p "$S/in"
    # Packed first (path order), in shards of its own whose compression takes long enough
    # (a second, more under a sanitizer) that the removal falls after the walk and before the
    # next group is read.
    cat "$CORPORA"/brown/c* | head -c 5000000 >"$S/in/a-big.txt"
    local f
    for f in gone fifo link dir; do echo "$f" >"$S/in/z-$f.txt"; done
    (
        sleep 0.2
        cd "$S/in" && rm z-*.txt && mkfifo z-fifo.txt && ln -s a-big.txt z-link.txt && mkdir z-dir.txt
    ) &
    run timeout 120 "$TADOC" pack -j 1 --shard-size 256K "$S/in" -o "$S/a.tdc"
    wait
    [ "$status" -eq 1 ]
    for f in gone fifo link dir; do
        [[ "$output" == *"warning: $S/in/z-$f.txt: removed or no regular file before it was read (archived empty)"* ]]
        [ "$("$TADOC" ls -l "$S/a.tdc" | awk -v f="z-$f.txt" '$NF == f {print $4}')" = 0 ]
    done
    "$TADOC" verify "$S/a.tdc"
    cmp <("$TADOC" cat "$S/a.tdc" a-big.txt) "$S/in/a-big.txt"
}

@test "pack's summary and stat count files and directories as find does, the root included" {
    mkdir -p "$S/t/a/b" "$S/t/c"
    printf 'x\n' >"$S/t/a/f"
    run "$TADOC" pack "$S/t" -o "$S/t.tdc"
    [ "$status" -eq 0 ]
    [[ "$output" == *"packed 1 files, $(find "$S/t" -type d | wc -l) dirs,"* ]]
    "$TADOC" stat "$S/t.tdc" | grep -q "^content .* in 1 files, 4 directories,"
}
