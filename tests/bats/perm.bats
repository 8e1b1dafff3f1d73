#!/usr/bin/env bats
# Virtual files and .search/WORD answer for what the caller may read through the mount
# (issue 15): a root mount with -o allow_other, read by unprivileged users (setpriv), each
# virtual file compared with the plain pipeline run as that user over the same mount.

load helpers
load ../oracles
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

GRP=4242 # the group of grp/g.txt; "member" has it as a supplementary group

# A tree with private files and directories, a group-readable file and a hard link with one
# name in a private directory and one in a public one. "priv" sorts before "pub", so the
# archive keeps the linked content under the private name.
make_perm_tree() {
    local t=$1
    mkdir -p "$t/pub/sub" "$t/priv/deep" "$t/grp"
    cp "$CORPORA/brown/ca01" "$t/pub/ca01"
    cp "$CORPORA/brown/ca02" "$t/priv/ca02"
    cp "$CORPORA/brown/ca03" "$t/grp/ca03"
    printf 'hello public world\nthe quick brown fox jumps\n' >"$t/pub/p.txt"
    printf 'secret words stay secret\nthe quick brown secret\n' >"$t/priv/s.txt"
    printf 'deeper secret below\n' >"$t/priv/deep/d.txt"
    printf 'hiddenword in a public directory\n' >"$t/pub/hidden.txt"
    printf 'laterword made private laterword\n' >"$t/pub/sub/later.txt"
    printf 'groupword for members only\nthe quick brown groupword\n' >"$t/grp/g.txt"
    printf 'linkedword shared by two names\n' >"$t/priv/link-a"
    ln "$t/priv/link-a" "$t/pub/link-b"
    chmod 700 "$t/priv"
    chmod 600 "$t/priv/s.txt" "$t/pub/hidden.txt"
    chmod 644 "$t/priv/link-a"
    chown 0:$GRP "$t/grp/g.txt" "$t/grp/ca03"
    chmod 640 "$t/grp/g.txt" "$t/grp/ca03"
    # a directory others may search but not list, and a private file of another user
    mkdir "$t/xonly"
    printf 'xonlyword behind a name nobody can list\n' >"$t/xonly/x.txt"
    chmod 711 "$t/xonly"
    printf 'theirword of somebody else\n' >"$t/pub/theirs.txt"
    chown 23456:23456 "$t/pub/theirs.txt"
    chmod 600 "$t/pub/theirs.txt"
}

setup_file() {
    make_perm_tree "$BATS_FILE_TMPDIR/tree"
    "$TADOC" pack -q "$BATS_FILE_TMPDIR/tree" -o "$BATS_FILE_TMPDIR/p.tdc"
}

setup() {
    scratch
    chmod 755 "$S" # the readers must reach the mountpoint
    M=$S/mnt
    mkdir "$M"
    cp "$BATS_FILE_TMPDIR/p.tdc" "$S/p.tdc"
    "$TADOCFS" "$S/p.tdc" "$M" -o allow_other 3>&-
}

teardown() {
    for m in "$M" "$S/m2"; do
        [ -d "$m" ] || continue
        fusermount3 -u "$m" 2>/dev/null || true
        if mountpoint -q "$m"; then fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" || true; fi
    done
    rm -rf "$S"
}

nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
capless() { setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all "$@"; } # root
member() { setpriv --reuid=65534 --regid=65534 --groups=$GRP "$@"; }
stranger() { setpriv --reuid=12345 --regid=12345 --clear-groups "$@"; }
as_root() { "$@"; }

# The files USER (a function above) can read below DIR of the mount, copied by that user
# into a fresh directory (printed), so the pipelines of tests/oracles.bash run on exactly
# what `find DIR -type f -readable` shows that user.
user_view() { # USER DIR
    local v
    v=$(mktemp -d "$S/view.XXXXXX")
    chmod 777 "$v"
    "$1" bash -c 'cd "$1" && find . -type f -readable -print0 2>/dev/null |
        xargs -0 -r cp --parents -t "$2"' _ "$2" "$v"
    echo "$v"
}

# Every virtual file of DIR read by USER equals the pipeline over USER's view of DIR.
same_as_pipeline() { # USER DIR
    local v a
    v=$(user_view "$1" "$2")
    for a in wordcount sort invindex termvector seqcount rankedinvindex; do
        "$1" cat "$2/.$a" >"$S/got"
        "oracle_$a" "$v" >"$S/want"
        cmp "$S/got" "$S/want" ||
            { echo "$1 $2/.$a differs"; diff "$S/got" "$S/want" | head; return 1; }
    done
}

# "path:offset" of every occurrence of WORD in the files USER can read below DIR.
search_oracle() { # USER DIR WORD
    local v
    v=$(user_view "$1" "$2")
    (cd "$v" && find . -type f -printf '%P\n' | LC_ALL=C sort |
        while IFS= read -r f; do oracle_search "$f" "$3" | sed "s|^|$f:|"; done)
}

backend_cpu_requests() {
    getfattr --only-values -n user.tadoc.backend "$M" 2>/dev/null |
        sed -E 's/^gpu: [0-9]+ requests [0-9]+ bytes; cpu: ([0-9]+) requests.*/\1/'
}

@test "the issue's case: an unprivileged reader sees no word, path or count of a private file" {
    run nobody cat "$M/priv/s.txt"
    [ "$status" -ne 0 ]
    run nobody ls "$M/priv"
    [ "$status" -ne 0 ]
    nobody cat "$M/.wordcount" >"$S/wc"
    ! grep -q secret "$S/wc"
    ! grep -q hiddenword "$S/wc"
    ! grep -q groupword "$S/wc"
    grep -q $'\thello$' "$S/wc"
    [ -z "$(nobody cat "$M/.search/secret")" ]
    [ -z "$(nobody cat "$M/.search/hiddenword")" ]
    for a in invindex termvector seqcount rankedinvindex; do
        nobody cat "$M/.$a" >"$S/o"
        ! grep -q 'priv/\|hidden.txt\|grp/' "$S/o" || { echo "$a leaks a path"; false; }
        ! grep -q secret "$S/o" || { echo "$a leaks a word"; false; }
    done
    # root sees it all
    grep -q $'\tsecret$' "$M/.wordcount"
    [ "$(cat "$M/.search/secret")" = "$(search_oracle as_root "$M" secret)" ]
    [ "$(cat "$M/.search/secret" | wc -l)" -eq 4 ]
}

@test "every virtual file equals the pipeline run as that user: private files and directories" {
    same_as_pipeline nobody "$M"
    same_as_pipeline nobody "$M/pub"
    same_as_pipeline nobody "$M/pub/sub"
    same_as_pipeline nobody "$M/grp"
    run nobody cat "$M/priv/.wordcount"
    [ "$status" -ne 0 ]
}

@test "names below a directory one may search but not list stay hidden, as on ext4" {
    nobody cat "$M/xonly/x.txt" >/dev/null # the name known, the file reads
    run nobody ls "$M/xonly"
    [ "$status" -ne 0 ]
    for a in wordcount invindex termvector seqcount rankedinvindex; do
        ! nobody cat "$M/.$a" | grep -q 'xonly' || { echo "$a shows xonly"; false; }
        nobody cat "$M/xonly/.$a" >"$S/o"
        [ ! -s "$S/o" ] || { echo "xonly/.$a is not empty"; false; }
    done
    [ -z "$(nobody cat "$M/.search/xonlyword")" ]
    same_as_pipeline nobody "$M/xonly"
    [ "$(cat "$M/.search/xonlyword")" = "xonly/x.txt:0" ]
}

@test "root without the capabilities to read every file sees only what its modes allow" {
    capless test ! -r "$M/pub/theirs.txt"
    run capless cat "$M/pub/theirs.txt"
    [ "$status" -ne 0 ]
    same_as_pipeline capless "$M/pub"
    # over the whole tree (both names of the hard link visible, which the copy of the
    # pipeline's view would count twice): root's index without the other user's file
    cat "$M/.invindex" | sed 's#\tpub/theirs\.txt##' | grep -v $'\t' >"$S/left"
    [ "$(cat "$S/left")" = "$(printf 'else\nsomebody\ntheirword')" ] # its words alone
    cat "$M/.invindex" | sed 's#\tpub/theirs\.txt##' | grep $'\t' >"$S/want"
    capless cat "$M/.invindex" | cmp - "$S/want"
    ! capless cat "$M/.wordcount" | grep -q theirword
    [ -z "$(capless cat "$M/.search/theirword")" ]
    grep -q $'\ttheirword$' "$M/.wordcount"
    [ "$(cat "$M/.search/theirword")" = "pub/theirs.txt:0" ]
}

@test "a group-readable file counts for members of the group only" {
    same_as_pipeline member "$M"
    same_as_pipeline member "$M/grp"
    grep -q groupword <(member cat "$M/.wordcount")
    grep -q groupword <(member cat "$M/grp/.invindex")
    ! grep -q groupword <(nobody cat "$M/.wordcount")
    [ -z "$(nobody cat "$M/grp/.termvector")" ]
    [ "$(member cat "$M/.search/groupword")" = "$(search_oracle member "$M" groupword)" ]
    [ -n "$(member cat "$M/.search/groupword")" ]
    [ -z "$(nobody cat "$M/.search/groupword")" ]
}

@test ".search/WORD lists only files the caller can read" {
    for w in the secret linkedword hiddenword quick zz_absent; do
        for d in "$M" "$M/pub"; do
            [ "$(nobody cat "$d/.search/$w")" = "$(search_oracle nobody "$d" "$w")" ] ||
                { echo "nobody $d $w"; false; }
        done
    done
    [ "$(nobody cat "$M/.search/linkedword")" = "pub/link-b:0" ]
    [ "$(cat "$M/.search/linkedword")" = "$(printf 'priv/link-a:0\npub/link-b:0')" ]
}

@test "a hard link reachable through a public and a private name counts under the public one" {
    nobody cat "$M/.termvector" >"$S/tv"
    grep -q $'^pub/link-b\t1\tlinkedword$' "$S/tv"
    ! grep -q link-a "$S/tv"
    [ "$(grep -c linkedword <(nobody cat "$M/.wordcount"))" -eq 1 ]
    grep -q $'^1\tlinkedword$' <(nobody cat "$M/.wordcount")
    # root: the private name holds it in the whole tree, the public one in pub/ (the name
    # holding the content is outside that scope)
    grep -q $'^priv/link-a\t1\tlinkedword$' "$M/.termvector"
    ! grep -q $'^pub/link-b\t' "$M/.termvector"
    grep -q $'^link-b\t1\tlinkedword$' "$M/pub/.termvector"
    same_as_pipeline nobody "$M/pub"
}

@test "chmod, chown and rename through the mount change what the next reader sees" {
    nobody cat "$M/.wordcount" >"$S/before"
    grep -q $'\tlaterword$' "$S/before"
    chmod 600 "$M/pub/sub/later.txt"
    nobody cat "$M/.wordcount" >"$S/after"
    ! grep -q $'\tlaterword$' "$S/after"
    same_as_pipeline nobody "$M"
    same_as_pipeline nobody "$M/pub/sub"
    # the owner's bits count for the owner
    chown 65534 "$M/pub/sub/later.txt"
    grep -q $'\tlaterword$' <(nobody cat "$M/.wordcount")
    [ "$(nobody cat "$M/.search/laterword")" = "$(search_oracle nobody "$M" laterword)" ]
    [ -n "$(nobody cat "$M/.search/laterword")" ]
    chmod 060 "$M/pub/sub/later.txt" # no owner bits: owners do not fall back to group or other
    chgrp 65534 "$M/pub/sub/later.txt"
    ! grep -q $'\tlaterword$' <(nobody cat "$M/.wordcount")
    same_as_pipeline nobody "$M/pub"
    # a private directory made searchable (without the hard link's second name there first:
    # analytics count a file with two visible names once, where the pipeline reads it twice)
    rm "$M/priv/link-a"
    chmod 755 "$M/priv"
    grep -q $'\tsecret$' <(nobody cat "$M/.wordcount") # priv/deep/d.txt is 644
    same_as_pipeline nobody "$M"
    chmod 700 "$M/priv"
    # rename a public file into the private directory
    mv "$M/pub/p.txt" "$M/priv/p.txt"
    ! grep -q $'\thello$' <(nobody cat "$M/.wordcount")
    same_as_pipeline nobody "$M"
    # and after compaction, from the new archive
    setfattr -n user.tadoc.compact -v 1 "$M"
    ! grep -q $'\thello$' <(nobody cat "$M/.wordcount")
    same_as_pipeline nobody "$M"
    same_as_pipeline member "$M"
}

@test "results are shared by callers with the same visible files, and only by them" {
    n0=$(backend_cpu_requests)
    nobody cat "$M/.wordcount" >"$S/a"
    [ "$(backend_cpu_requests)" -eq $((n0 + 1)) ]
    stranger cat "$M/.wordcount" >"$S/b" # another uid, the same visible files
    [ "$(backend_cpu_requests)" -eq $((n0 + 1)) ]
    cmp "$S/a" "$S/b"
    member cat "$M/.wordcount" >"$S/c" # sees grp/ too
    [ "$(backend_cpu_requests)" -eq $((n0 + 2)) ]
    ! cmp -s "$S/a" "$S/c"
    cat "$M/.wordcount" >"$S/d"
    cat "$M/.wordcount" >"$S/d"
    [ "$(backend_cpu_requests)" -eq $((n0 + 3)) ]
    # a change below the scope is never answered from before it
    chmod 644 "$M/pub/hidden.txt"
    grep -q hiddenword <(nobody cat "$M/.wordcount")
    [ "$(backend_cpu_requests)" -eq $((n0 + 4)) ]
}

@test "virtual file sizes are per caller (noopen), 0 under -o open: none shows another caller's size" {
    # The default (the kernel's no-open mode): each caller's lookup computes its own text, so
    # a stat shows that caller's size from the first.
    root_size=$(stat -c %s "$M/.wordcount")
    [ "$root_size" -eq "$(wc -c <"$M/.wordcount")" ]
    [ "$root_size" -gt 0 ]
    nobody cat "$M/.wordcount" >"$S/wc"
    [ "$(wc -c <"$S/wc")" -lt "$root_size" ]
    [ "$(nobody stat -c %s "$M/.wordcount")" -eq "$(wc -c <"$S/wc")" ]
    [ "$(member stat -c %s "$M/.wordcount")" -eq "$(member cat "$M/.wordcount" | wc -c)" ]
    [ "$(member stat -c %s "$M/.wordcount")" -ne "$(wc -c <"$S/wc")" ]
    [ "$(stranger stat -c %s "$M/.wordcount")" -eq "$(wc -c <"$S/wc")" ]
    [ "$(stat -c %s "$M/.wordcount")" -eq "$root_size" ]
    # -o open: computed at the open, one inode for every caller, so its size is 0 for all
    # (as a /proc file's), and no mapping or cached page of it holds another caller's text
    fusermount3 -u "$M"
    "$TADOCFS" "$S/p.tdc" "$M" -o allow_other,open 3>&-
    cat "$M/.wordcount" >"$S/root"
    [ "$(wc -c <"$S/root")" -eq "$root_size" ]
    nobody cat "$M/.wordcount" >"$S/wc2"
    cmp "$S/wc" "$S/wc2"
    for who in as_root nobody member stranger; do
        [ "$("$who" stat -c %s "$M/.wordcount")" -eq 0 ] || { echo "$who sees a size"; false; }
    done
}

@test "archive-wide tadoc attributes are for those who read every file and the mount owner only" {
    for a in files ratio rules archive_size journal_bytes journal_records dirty_files \
        compactions backend; do
        getfattr -n "user.tadoc.$a" "$M" >/dev/null
        for who in nobody capless; do
            run "$who" getfattr -n "user.tadoc.$a" "$M"
            [ "$status" -ne 0 ] || { echo "user.tadoc.$a shown to $who"; false; }
        done
    done
    getfattr -n user.tadoc.files --only-values "$M" | grep -qx '[0-9][0-9]*'
    [ -z "$(nobody getfattr -d -m - "$M" 2>/dev/null)" ]
    # a file's own attributes need read permission on it (the kernel's check)
    nobody getfattr -n user.tadoc.size "$M/pub/p.txt" >/dev/null
    run nobody getfattr -n user.tadoc.size "$M/pub/hidden.txt"
    [ "$status" -ne 0 ]
    # a file's place in the grammar moves with private files' content: archive-wide readers'
    for a in share rules; do
        getfattr -n "user.tadoc.$a" "$M/pub/p.txt" >/dev/null
        run nobody getfattr -n "user.tadoc.$a" "$M/pub/p.txt"
        [ "$status" -ne 0 ] || { echo "user.tadoc.$a shown"; false; }
    done
    [ -z "$(nobody getfattr -d -m - "$M/pub/p.txt" 2>/dev/null)" ]
    run nobody getfattr -d -m - "$M/pub"
    [[ "$output" != *tadoc* ]]
}

@test "owners the mount shows (-o uid=,gid=) are the owners permissions are judged by" {
    mkdir "$S/m2"
    cp "$BATS_FILE_TMPDIR/p.tdc" "$S/p2.tdc"
    "$TADOCFS" "$S/p2.tdc" "$S/m2" -o allow_other,uid=65534,gid=$GRP 3>&-
    [ "$(stat -c %u "$S/m2/priv/s.txt")" -eq 65534 ]
    rm "$S/m2/priv/link-a" # both names are visible to nobody now: analytics count it once
    nobody cat "$S/m2/priv/s.txt" >/dev/null # the kernel agrees: nobody owns it now
    grep -q $'\tsecret$' <(nobody cat "$S/m2/.wordcount")
    same_as_pipeline nobody "$S/m2"
    # a uid that is neither the shown owner nor in the shown group gets the others' bits
    # (priv/ is 700); member's uid is the shown owner
    stranger cat "$S/m2/.wordcount" >"$S/wc"
    ! grep -q $'\tsecret$' "$S/wc"
    same_as_pipeline stranger "$S/m2"
    same_as_pipeline member "$S/m2"
    fusermount3 -u "$S/m2"
}

@test "the journal and the lock take their archive's permissions: its readers see its edits, its owner writes after root did" {
    fusermount3 -u "$M"
    local d=$S/own
    mkdir "$d"
    chmod 755 "$d"
    cp "$BATS_FILE_TMPDIR/p.tdc" "$d/a.tdc"
    chown 65534:65534 "$d" "$d/a.tdc"
    chmod 644 "$d/a.tdc"
    printf 'append\tpub/p.txt\troot was here\\n\n' | "$TADOC" apply -q "$d/a.tdc" -
    [ "$(stat -c '%a %u' "$d/a.tdc.journal")" = "644 65534" ]
    # another user who may read the archive reads its pending edits and verifies the journal
    nobody "$TADOC" cat "$d/a.tdc" pub/p.txt >/dev/null
    run nobody "$TADOC" verify "$d/a.tdc"
    [ "$status" -eq 0 ] && [[ "$output" == *"journal: 1 records apply"* ]]
    # the archive's owner goes on writing and compacts (the lock root left is no obstacle)
    printf 'append\tpub/p.txt\tso was nobody\\n\n' | nobody "$TADOC" apply -q "$d/a.tdc" -
    nobody "$TADOC" compact "$d/a.tdc" >/dev/null
    [ "$(stat -c '%a %u' "$d/a.tdc")" = "644 65534" ]
}

@test "a writer that may not create the lock file beside the archive says so (not ENOENT)" {
    mkdir "$S/ro-dir"
    cp "$S/p.tdc" "$S/ro-dir/a.tdc"
    chown 65534 "$S/ro-dir/a.tdc"
    run nobody "$TADOC" compact "$S/ro-dir/a.tdc"
    [ "$status" -eq 1 ]
    [[ "$output" == *"a.tdc.lock: cannot create the lock file: Permission denied"* ]]
    [ ! -e "$S/ro-dir/a.tdc.lock" ]
}
