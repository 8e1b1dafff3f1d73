#!/usr/bin/env bats
# A damaged shard costs only its own files: an archive of several 4K shards with a byte
# flipped in the second shard's root (or rules) opens; verify names the shard and exits 3;
# `tadoc cat` and the mount read every other file exactly, while a file with any part of its
# content in that shard (one inside it, and the ones cut across its edges) fails with exit 3
# or EIO and no bytes, through every name of a hard-linked file; whole-tree analytics fail
# instead of counting wrong; a compaction is refused and leaves the archive and its journal
# as they were.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

setup() {
    scratch_mnt
    T=$S/tree
    mkdir -p "$T/a" "$T/b"
    # With 4K shards: a/big fills shard 0 and runs on into shard 1; then the nine files of
    # 1500 bytes, two to a shard (shards 2 to 6).
    for f in "$CORPORA"/brown/cb0*; do cat "$f"; done | head -c 6000 >"$T/a/big"
    i=0
    for f in "$CORPORA"/brown/ca0*; do
        i=$((i + 1))
        head -c 1500 "$f" >"$T/b/f$i"
    done
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 4K
    cp "$S/a.tdc" "$S/x.tdc"
}

teardown() {
    scratch_mnt_free
}

# Flip the byte in the middle of shard K's section NAME (dictionary, rules or root) of x.tdc.
damage() { # K NAME
    local off stored
    read -r off stored < <(sections "$S/x.tdc" | awk -v k="$1" -v s="$2" '$1 == s && n++ == k {print $2, $3}')
    flip_byte "$S/x.tdc" $((off + stored / 2))
}

# The regular files with content in shard K, from the content column of `tadoc stat` and
# the sizes of `tadoc ls -l` (content lies in the shards in file table order).
files_in_shard() { # ARCHIVE K
    local span
    span=$("$TADOC" stat "$1" | awk -v k="$2" '/^shards/ {on = 1; next} /^sections/ {on = 0}
        on && $1 ~ /^[0-9]+$/ { if ($1 == k) print s + 0, s + $2; s += $2 }')
    "$TADOC" ls -l "$1" | awk -v span="$span" 'BEGIN { split(span, r, " ") }
        /^-/ { if ($4 > 0 && o < r[2] && o + $4 > r[1]) print $NF; o += $4 }'
}

# Every regular file of the tree, as a path relative to it.
tree_files() { (cd "$T" && find . -type f -printf '%P\n' | LC_ALL=C sort); }

# cat and the mount read each file of the tree not listed in $S/bad exactly; each listed
# one fails (cat: exit 3, a message naming the file and shard MSG, no bytes; mount: EIO).
check_reads() { # ARCHIVE MSG
    while read -r p; do
        if grep -qxF "$p" "$S/bad"; then
            st=0
            "$TADOC" cat "$1" "$p" >"$S/out" 2>"$S/err" || st=$?
            [ "$st" -eq 3 ] || { echo "$p: cat status $st"; false; }
            [ ! -s "$S/out" ] || { echo "$p: cat printed bytes"; false; }
            grep -q "'$p' cannot be read: .*$2" "$S/err" || { cat "$S/err"; false; }
        else
            "$TADOC" cat "$1" "$p" | cmp - "$T/$p"
        fi
    done < <(tree_files)
}

@test "shard damage: verify names the shard; cat reads other files exactly, its files (one cut across shards) fail" {
    [ "$(shards_of "$S/a.tdc")" -eq 7 ]
    # Shard 1 holds the end of a/big, which starts in shard 0; shard 3 two whole files.
    [ "$(files_in_shard "$S/a.tdc" 0)" = a/big ]
    [ "$(files_in_shard "$S/a.tdc" 1)" = a/big ]
    [ "$(files_in_shard "$S/a.tdc" 3 | wc -l)" -eq 2 ]
    for c in "1 root" "3 rules" "3 dictionary"; do
        set -- $c
        cp "$S/a.tdc" "$S/x.tdc"
        damage "$1" "$2"
        files_in_shard "$S/a.tdc" "$1" >"$S/bad"
        run "$TADOC" verify "$S/x.tdc"
        [ "$status" -eq 3 ]
        [[ "$output" == *"damaged: shard $1: section $2: checksum mismatch"* ]]
        # verify lists exactly the files with content in the shard
        diff "$S/bad" <(echo "$output" | sed -n "s/^tadoc: \(.*\): content lies in damaged shard $1\$/\1/p")
        "$TADOC" ls -l "$S/x.tdc" | cmp - <("$TADOC" ls -l "$S/a.tdc")
        check_reads "$S/x.tdc" "shard $1: section $2"
    done
    # Two damaged shards at once: both named, each costs its own files.
    damage 1 root
    (files_in_shard "$S/a.tdc" 1; files_in_shard "$S/a.tdc" 3) >"$S/bad"
    run "$TADOC" verify "$S/x.tdc"
    [ "$status" -eq 3 ]
    [[ "$output" == *"shard 1: section root"*"shard 3: section dictionary"* ]]
    [[ "$output" == *"3 of 10 files damaged; damaged shards: 2"* ]]
    check_reads "$S/x.tdc" "shard [13]: section"
}

@test "shard damage: unpack restores the other files and exits 3" {
    damage 1 root
    damage 3 root
    (files_in_shard "$S/a.tdc" 1; files_in_shard "$S/a.tdc" 3) >"$S/bad"
    for j in 1 3; do # one thread, and threads that each meet damage
        run "$TADOC" unpack -j $j "$S/x.tdc" "$S/out$j"
        [ "$status" -eq 3 ]
        [[ "$output" == *"$(wc -l <"$S/bad") files not restored: their content lies in damaged shards"* ]]
        while read -r p; do
            if grep -qxF "$p" "$S/bad"; then
                [ ! -e "$S/out$j/$p" ]
            else
                cmp "$S/out$j/$p" "$T/$p"
            fi
        done < <(tree_files)
    done
}

@test "shard damage: analytics over a damaged file fail, naming the shard; over others they are exact" {
    damage 1 root
    damage 3 root
    (files_in_shard "$S/a.tdc" 1; files_in_shard "$S/a.tdc" 3) >"$S/bad"
    for an in wordcount sort termvector; do
        run "$TADOC" "$an" "$S/x.tdc"
        [ "$status" -eq 3 ]
        [[ "$output" == *"$an: "*"shard 1: section root"* ]]
        run "$TADOC" "$an" "$S/x.tdc" "$(head -1 "$S/bad")"
        [ "$status" -eq 3 ]
    done
    good=$(tree_files | grep -vxFf "$S/bad" | head -1)
    diff <("$TADOC" wordcount "$S/a.tdc" "$good") <("$TADOC" wordcount "$S/x.tdc" "$good")
}

@test "shard damage: the mount gives EIO for the shard's files only; .wordcount fails" {
    damage 1 root
    damage 3 root
    (files_in_shard "$S/a.tdc" 1; files_in_shard "$S/a.tdc" 3) >"$S/bad"
    for opt in ro ro,preload; do
        run mnt -o "$opt" "$S/x.tdc" "$M"
        [ "$status" -eq 0 ] || { echo "mount -o $opt: $output"; false; }
        diff <(cd "$T" && find . -printf '%P %y %s\n' | LC_ALL=C sort) \
            <(cd "$M" && find . -printf '%P %y %s\n' | LC_ALL=C sort)
        while read -r p; do
            if grep -qxF "$p" "$S/bad"; then
                run cat "$M/$p"
                [ "$status" -ne 0 ] && [[ "$output" == *"Input/output error"* ]] ||
                    { echo "$p: $output"; false; }
            else
                cmp "$M/$p" "$T/$p"
            fi
        done < <(tree_files)
        run cat "$M/.wordcount"
        [ "$status" -ne 0 ] && [[ "$output" == *"Input/output error"* ]]
        fusermount3 -u "$M"
        wait_unmounted "$M"
    done
}

@test "shard damage: compaction is refused; the archive and its journal stay as they were" {
    damage 3 rules
    cp "$S/x.tdc" "$S/before.tdc"
    mnt "$S/x.tdc" "$M"
    good=$(tree_files | grep -vxFf <(files_in_shard "$S/a.tdc" 3) | head -1)
    printf 'one more line\n' >>"$M/$good"
    fusermount3 -u "$M"
    wait_unmounted "$M"
    [ -s "$S/x.tdc.journal" ]
    cp "$S/x.tdc.journal" "$S/before.journal"
    # Opened as the daemon opens it (the file table alone), compaction finds the damage when
    # it copies the shard, and names it.
    run "$TADOC" compact "$S/x.tdc"
    [ "$status" -eq 3 ]
    [[ "$output" == *"shard 3: section rules: checksum mismatch"* ]]
    [[ "$output" == *"the archive and its journal are unchanged"* ]]
    cmp "$S/x.tdc" "$S/before.tdc"
    cmp "$S/x.tdc.journal" "$S/before.journal"
    run "$TADOC" compact --force "$S/x.tdc"
    [ "$status" -eq 3 ]
    cmp "$S/x.tdc" "$S/before.tdc"
    # The edit is still there, over the archived bytes.
    mnt -o ro "$S/x.tdc" "$M"
    cmp "$M/$good" <(cat "$T/$good"; printf 'one more line\n')
}

@test "shard damage: stat marks the shard, leaves it out of the grammar's figures and names it" {
    damage 1 root
    run "$TADOC" stat "$S/x.tdc"
    [ "$status" -eq 0 ]
    [[ "$output" == *"1 damaged shards left out"* ]]
    [[ "$output" == *"shard 1"* ]]
    [ "$(grep -c '  damaged$' <<<"$output")" -eq 1 ]
    # The figures of the other shards: the undamaged archive's, less the damaged shard's.
    rules() { awk '/^rules/ {print $2}'; }
    shard1_rules=$("$TADOC" stat "$S/a.tdc" | awk '/^shards/ {on = 1; next} on && $1 == 1 {print $5; exit}')
    [ "$(rules <<<"$output")" -eq $(($("$TADOC" stat "$S/a.tdc" | rules) - shard1_rules)) ]
}

@test "shard damage: every name of a hard-linked file shares its damage, in cat and the mount" {
    H=$S/h
    mkdir -p "$H/d"
    for i in 1 2 3 4 5 6; do head -c 1500 "$CORPORA/brown/ca0$i" >"$H/f$i"; done
    ln "$H/f3" "$H/d/link"
    "$TADOC" pack -q "$H" -o "$S/h.tdc" --shard-size 4K
    n=$(shards_of "$S/h.tdc")
    [ "$n" -ge 3 ]
    hit=0
    # Each shard damaged in turn: the two names of f3 fail or read together, in cat and mount.
    for k in $(seq 0 $((n - 1))); do
        cp "$S/h.tdc" "$S/x.tdc"
        damage "$k" root
        st=()
        for p in f3 d/link; do
            s=0
            "$TADOC" cat "$S/x.tdc" "$p" >"$S/out" 2>"$S/err" || s=$?
            if [ "$s" -eq 0 ]; then cmp "$S/out" "$H/f3"; else [ "$s" -eq 3 ] && [ ! -s "$S/out" ]; fi
            st+=("$s")
        done
        [ "${st[0]}" = "${st[1]}" ] || { echo "shard $k: cat f3 ${st[0]}, d/link ${st[1]}"; false; }
        [ "${st[0]}" -eq 0 ] || hit=$((hit + 1))
        mnt -o ro "$S/x.tdc" "$M"
        for p in f3 d/link; do
            if [ "${st[0]}" -eq 0 ]; then
                cmp "$M/$p" "$H/f3"
            else
                run cat "$M/$p"
                [ "$status" -ne 0 ] && [[ "$output" == *"Input/output error"* ]] ||
                    { echo "shard $k, $p: $output"; false; }
            fi
        done
        fusermount3 -u "$M"
        wait_unmounted "$M"
    done
    [ "$hit" -ge 1 ]
}
