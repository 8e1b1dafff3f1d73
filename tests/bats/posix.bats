#!/usr/bin/env bats
# Errors as POSIX says (issue 14): tests/tools/errnocmp runs one fixed list of calls (several
# thousand results: creates, removals, renames with every flag over every pair of kinds,
# links, symlinks, attributes, long names, loops, a link count limit, and a pass as an
# unprivileged user in sticky directories) on a local ext4 directory and on a fresh tadocfs
# mount, and prints every result that differs. Its allow-list names the differences by
# design; anything else fails. The state the run leaves must survive a remount and a
# compaction.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

umount_a() {
    fusermount3 -u "$M"
    wait_unmounted "$M"
    flock -w 10 "$A.lock" true
}

# A directory on a local ext4 (or ext2/3) file system for the reference run: under the
# scratch directory when that is one, else on a loop-mounted ext4 image (tmpfs and overlay
# differ from ext4 in places: xattrs, link counts).
reference_dir() {
    R=$S/ref
    mkdir "$R"
    if [ -z "${ERRNOCMP_IMAGE:-}" ] && [ "$(stat -f -c %T "$S")" = ext2/ext3 ]; then return; fi
    truncate -s 256M "$S/ref.img"
    mkfs.ext4 -q -F -N 40000 "$S/ref.img"
    mount -o loop "$S/ref.img" "$R"
    chmod 755 "$R"
}

# One run for the file (it takes a while: 65000 links on each side): the mount stays up for
# the tests, which read its output and the state it left.
setup_file() {
    [ "$(id -u)" = 0 ] || skip "errnocmp needs root (it changes users)"
    S=$BATS_FILE_TMPDIR/s
    mkdir "$S"
    chmod 755 "$BATS_FILE_TMPDIR" "$S" # the unprivileged pass runs inside the mount
    M=$S/m A=$S/a.tdc
    mkdir "$M" "$S/empty"
    reference_dir
    "$TADOC" pack -q "$S/empty" -o "$A"
    mnt -o allow_other "$A" "$M"
    is_mounted "$M"
    "$TESTBIN/errnocmp" --special "$R" "$M" >"$S/out" 2>&1 && echo 0 >"$S/status" || echo $? >"$S/status"
}

teardown_file() {
    S=$BATS_FILE_TMPDIR/s M=$BATS_FILE_TMPDIR/s/m A=$BATS_FILE_TMPDIR/s/a.tdc
    fusermount3 -u "$M" 2>/dev/null || true
    if is_mounted "$M"; then fusermount3 -uz "$M" 2>/dev/null || umount -l "$M" || true; fi
    if is_mounted "$S/ref"; then umount "$S/ref" || umount -l "$S/ref" || true; fi
    flock -w 10 "$A.lock" true 2>/dev/null || true
    rm -rf "$S"
}

setup() {
    [ "$(id -u)" = 0 ] || skip "errnocmp needs root (it changes users)"
    S=$BATS_FILE_TMPDIR/s M=$BATS_FILE_TMPDIR/s/m A=$BATS_FILE_TMPDIR/s/a.tdc R=$BATS_FILE_TMPDIR/s/ref
}

# Type, mode, owners, link count, size (not of directories: ext4's grow in blocks), symlink
# target and user attributes of everything below $1, one line each, sorted. Attributes are
# read everywhere but in the EMLINK case's directory "many" (65000 names of one file, whose
# attributes its other name shows). The attributes errnocmp sets never start with "t": the
# pattern leaves out the computed user.tadoc.* ones without fetching them.
state() {
    (cd "$1" && find . -printf '%P\t%y\t%m\t%U\t%G\t%n\t%s\t%l\n' |
        awk -F'\t' -v OFS='\t' '$2 == "d" { $7 = "-" } 1' | LC_ALL=C sort)
    (cd "$1" && find . -path '*/many/*' -prune -o -print0 |
        xargs -0 getfattr -h -d -m '^user\.[^t]' --absolute-names 2>/dev/null || true)
}

@test "errnocmp: tadocfs answers every call as ext4 does, save the allowed differences" {
    grep -v '^  [AB]: ' "$S/out" | tail -3
    grep -A2 '^DIFF' "$S/out" | head -150
    [ "$(cat "$S/status")" -eq 0 ]
    # The run really happened on both sides (thousands of results, the allowed ones seen).
    [[ "$(tail -1 "$S/out")" =~ ^([0-9]+)\ lines ]] && [ "${BASH_REMATCH[1]}" -gt 5000 ]
    grep -q '^allowed (analytics files' "$S/out"
}

@test "errnocmp: what the run leaves survives a remount and a compaction" {
    state "$M/errnocmp.d" >"$S/before"
    [ "$(wc -l <"$S/before")" -gt 60000 ] # the 65000 links of the EMLINK case among them
    umount_a
    mnt -o allow_other "$A" "$M"
    state "$M/errnocmp.d" >"$S/remounted"
    diff "$S/before" "$S/remounted"
    setfattr -n user.tadoc.compact "$M"
    state "$M/errnocmp.d" >"$S/compacted"
    diff "$S/before" "$S/compacted"
    umount_a
    mnt -o allow_other "$A" "$M"
    state "$M/errnocmp.d" >"$S/reopened"
    diff "$S/before" "$S/reopened"
}
