#!/usr/bin/env bats
# The corpus of damaged archives and journals (tests/corrupt/, made by tests/corrupt/gen.sh):
# each must be refused (or, for a journal's damaged tail, cut) with the message and exit
# status its MANIFEST line names, by `tadoc verify`, `tadoc ls`, `tadoc cat` and the mount;
# never a crash, a hang or wrong bytes. Under `make test` this runs on the ASan/UBSan build.
load helpers

C="$BATS_TEST_DIRNAME/../corrupt"

setup() {
    scratch_mnt
}

teardown() {
    scratch_mnt_free
}

# A sanitizer report or a signal is a crash whatever the test expected.
no_crash() { # STATUS WHAT
    if [ "$1" -ge 86 ] || [[ "$output" == *"Sanitizer"* ]] || [[ "$output" == *"runtime error"* ]]; then
        echo "$2: crashed (status $1): $output"
        return 1
    fi
}

cases() { grep -v '^#' "$C/MANIFEST" | awk -F'\t' -v k="$1" '$1 ~ k'; }

# in_two_slots PATTERN FN: FN FILE CODE MSG KEEP DIR for each case of the corpus whose file
# matches PATTERN, two at a time (each process here is slow to start under ASan), DIR being
# its slot's directory (a slot's last job is waited for before reuse). Sets n to the cases
# run; fails after showing the output of each failed one.
in_two_slots() {
    local fn=$2 f code msg keep k bad=0 pid=()
    n=0
    while IFS=$'\t' read -r f code msg keep; do
        k=$((n % 2))
        if [ -n "${pid[k]:-}" ]; then
            wait "${pid[k]}" || { cat "$S/log$k"; bad=1; }
        fi
        ("$fn" "$f" "$code" "$msg" "$keep" "$S/slot$k") >"$S/log$k" 2>&1 &
        pid[k]=$!
        n=$((n + 1))
    done < <(cases "$1")
    for k in 0 1; do
        if [ -n "${pid[k]:-}" ]; then
            wait "${pid[k]}" || { cat "$S/log$k"; bad=1; }
        fi
    done
    [ "$bad" -eq 0 ]
}

# check_archive FILE CODE MSG KEEP DIR: verify, ls and cat of one damaged archive of the
# corpus, copied into the directory DIR. Fails with a message.
check_archive() {
    local f=$1 code=$2 msg=$3 d=$5 p good st
    mkdir -p "$d"
    cp "$C/$f" "$d/x.tdc"
    rm -f "$d/x.tdc.journal"
    run timeout 20 "$TADOC" verify "$d/x.tdc"
    no_crash "$status" "$f verify"
    [ "$status" -eq "$code" ] || { echo "$f: verify status $status, want $code: $output"; false; }
    [[ "$output" == *"$msg"* ]] || { echo "$f: verify says: $output; want: $msg"; false; }
    run timeout 20 "$TADOC" ls -l "$d/x.tdc"
    no_crash "$status" "$f ls"
    # ls reads only the archive's global part (header, section table, file and shard
    # tables), as a mount does: it lists, or refuses with exit 3 naming the archive. The
    # lazy mount's test below holds it to the mount's verdict and listing.
    if [ "$status" -ne 0 ]; then
        [ "$status" -eq 3 ] || { echo "$f: ls status $status: $output"; false; }
        [[ "$output" == *"x.tdc"* ]]
    fi
    for p in a.txt d/b.c; do
        good="$S/a.good"
        [ "$p" = d/b.c ] && good="$S/b.good"
        st=0
        timeout 20 "$TADOC" cat "$d/x.tdc" "$p" >"$d/out" 2>"$d/err" || st=$?
        output=$(cat "$d/err")
        no_crash "$st" "$f cat $p"
        if [ "$st" -eq 0 ]; then
            cmp -s "$d/out" "$good" || { echo "$f: cat $p gave wrong bytes"; false; }
        else
            [ "$st" -eq 3 ] || { echo "$f: cat $p status $st: $output"; false; }
            [ -s "$d/err" ]
        fi
    done
}

@test "damaged archives: verify, ls and cat refuse each with its message and never print wrong bytes" {
    "$TADOC" cat "$C/base.tdc" a.txt >"$S/a.good"
    "$TADOC" cat "$C/base.tdc" d/b.c >"$S/b.good"
    in_two_slots '\.tdc$' check_archive
    echo "# $n damaged archives checked" >&3
    [ "$n" -gt 100 ]
}

@test "damaged archives: the mount with -o preload refuses each with exit 3 and the same message" {
    n=0
    while IFS=$'\t' read -r f code msg _; do
        [ "$code" -eq 3 ] && [ "$f" != ent-hash.tdc ] || continue
        cp "$C/$f" "$S/x.tdc"
        rm -f "$S/x.tdc.journal"
        run timeout 20 "$TADOCFS" -o ro,preload "$S/x.tdc" "$M" 3>&-
        no_crash "$status" "$f mount"
        [ "$status" -eq 3 ] || { echo "$f: mount status $status: $output"; false; }
        [[ "$output" == *"$msg"* ]] || { echo "$f: mount says: $output; want: $msg"; false; }
        ! awk -v m="$M" '$2 == m { f = 1 } END { exit !f }' /proc/mounts
        n=$((n + 1))
    done < <(cases '\.tdc$')
    echo "# $n refused mounts" >&3
}

@test "damaged archives, default lazy mount: refused at mount (exit 3, same message) or every content read fails with EIO" {
    n=0 late=0
    while IFS=$'\t' read -r f code msg _; do
        [ "$code" -eq 3 ] && [ "$f" != ent-hash.tdc ] || continue
        cp "$C/$f" "$S/x.tdc"
        rm -f "$S/x.tdc.journal"
        run timeout 20 "$TADOCFS" -o ro "$S/x.tdc" "$M" 3>&-
        no_crash "$status" "$f mount"
        n=$((n + 1))
        # tadoc ls reads what the mount reads first: it refuses the same archives with the
        # same message, and lists the others as the mount shows them.
        local lst lstatus
        lst=$("$TADOC" ls "$S/x.tdc" 2>&1) && lstatus=0 || lstatus=$?
        if [ "$status" -ne 0 ]; then # damage in the header, section table or file table
            [ "$status" -eq 3 ] || { echo "$f: mount status $status: $output"; false; }
            [[ "$output" == *"$msg"* ]] || { echo "$f: mount says: $output; want: $msg"; false; }
            [ "$lstatus" -eq 3 ] || { echo "$f: ls status $lstatus where the mount refused"; false; }
            [[ "$lst" == *"$msg"* ]] || { echo "$f: ls says: $lst; want: $msg"; false; }
            continue
        fi
        [ "$lstatus" -eq 0 ] || { echo "$f: ls status $lstatus where the mount listed: $lst"; false; }
        diff <(echo "$lst" | LC_ALL=C sort) <(cd "$M" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort)
        # Damage in the grammar: found by the background load; no read returns bytes.
        late=$((late + 1))
        while IFS= read -r -d '' p; do
            run cat "$p"
            [ "$status" -ne 0 ] || { echo "$f: read of $p succeeded"; false; }
            [[ "$output" == *"Input/output error"* ]] || { echo "$f: $p: $output"; false; }
        done < <(find "$M" -type f -size +0 -print0)
        fusermount3 -u "$M"
    done < <(cases '\.tdc$')
    echo "# $n damaged archives mounted lazily, $late of them refused only at the first read" >&3
    [ "$late" -gt 0 ] && [ "$late" -lt "$n" ]
}

@test "an archive whose content does not match its hash: verify and cat exit 3, mounted read fails with EIO" {
    cp "$C/ent-hash.tdc" "$S/x.tdc"
    run "$TADOC" cat "$S/x.tdc" d/b.c
    [ "$status" -eq 3 ]
    [[ "$output" == *"d/b.c: content does not match its hash"* ]]
    "$TADOC" cat "$S/x.tdc" a.txt | cmp - <("$TADOC" cat "$C/base.tdc" a.txt)
    "$TADOCFS" -o ro "$S/x.tdc" "$M" 3>&-
    run cat "$M/d/b.c"
    [ "$status" -ne 0 ]
    [[ "$output" == *"Input/output error"* ]]
    cmp "$M/a.txt" <("$TADOC" cat "$C/base.tdc" a.txt)
}

# Journal cases: base.tdc with the damaged journal beside it.
# check_journal FILE CODE MSG KEEP DIR: verify, replay, ls and cat of base.tdc with one
# damaged journal of the corpus, both copied into the directory DIR; KEEP is "-" or
# RECORDS:BYTES, the good records that replay. Fails with a message.
check_journal() {
    local f=$1 code=$2 msg=$3 keep=$4 d=$5 st
    mkdir -p "$d"
    cp "$C/base.tdc" "$d/x.tdc"
    cp "$C/$f" "$d/x.tdc.journal"
    run timeout 20 "$TADOC" verify "$d/x.tdc"
    no_crash "$status" "$f verify"
    [ "$status" -eq "$code" ] || { echo "$f: verify status $status, want $code: $output"; false; }
    [[ "$output" == *"$msg"* ]] || { echo "$f: verify says: $output; want: $msg"; false; }
    st=0
    timeout 20 "$TESTBIN/voldump" "$d/x.tdc" >"$d/got" 2>"$d/err" || st=$?
    output=$(cat "$d/err")
    no_crash "$st" "$f voldump"
    if [ "$keep" != - ]; then
        [ "$st" -eq 0 ] || { echo "$f: replay failed: $output"; false; }
        cp "$C/base.tdc" "$d/y.tdc"
        head -c "${keep#*:}" "$C/base.journal" >"$d/y.tdc.journal"
        "$TESTBIN/voldump" "$d/y.tdc" >"$d/want" 2>/dev/null
        cmp -s "$d/got" "$d/want" || { echo "$f: tree differs from the first ${keep%%:*} records"; false; }
        [[ "$output" == *"${keep%%:*} records replayed"* ]] || { echo "$f: $output"; false; }
    elif [ "$code" -eq 3 ]; then
        [ "$st" -eq 3 ] || { echo "$f: voldump status $st: $output"; false; }
    fi
    # ls and cat show the archive as written: they must not trip over the journal.
    run timeout 20 "$TADOC" ls "$d/x.tdc"
    no_crash "$status" "$f ls"
    [ "$status" -eq 0 ] || { echo "$f: ls: $output"; false; }
    run timeout 20 "$TADOC" cat "$d/x.tdc" a.txt
    no_crash "$status" "$f cat"
    [ "$status" -eq 0 ] || { echo "$f: cat: $output"; false; }
}

@test "damaged journals: verify names the damage; the tree is exactly that of the good records" {
    in_two_slots '\.journal$' check_journal
    echo "# $n damaged journals checked" >&3
    [ "$n" -gt 40 ]
}

@test "damaged journals: a mount shows the good records (tail dropped), refuses the journal, or (read-only) leaves an unreadable one unread" {
    n=0
    while IFS=$'\t' read -r f code msg keep; do
        cp "$C/base.tdc" "$S/x.tdc"
        cp "$C/$f" "$S/x.tdc.journal"
        run timeout 20 "$TADOCFS" -o ro "$S/x.tdc" "$M" 3>&-
        no_crash "$status" "$f mount"
        # one whose header cannot be read (or names another archive): left unread by a
        # read-only mount, which shows the archive as written and says so (a writable one
        # refuses it, below)
        local unread=0
        [[ "$msg" == "journal header is damaged" || "$msg" == "journal belongs to another"* ]] &&
            unread=1
        if [ "$unread" = 1 ]; then
            [ "$status" -eq 0 ] && [[ "$output" == *"$msg: left unread"* ]] ||
                { echo "$f: ro mount status $status: $output"; false; }
            cmp "$S/x.tdc.journal" "$C/$f"
            fusermount3 -u "$M"
            run timeout 20 "$TADOCFS" "$S/x.tdc" "$M" 3>&-
            [ "$status" -eq 3 ] && [[ "$output" == *"$msg"* ]] ||
                { echo "$f: writable mount status $status: $output"; false; }
            cmp "$S/x.tdc.journal" "$C/$f"
            "$TADOCFS" -o ro "$S/x.tdc" "$M" 3>&-
            (cd "$M" && find . -printf '%P %y %m\n' | LC_ALL=C sort &&
                find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum) >"$S/got"
            fusermount3 -u "$M"
            "$TADOC" unpack "$S/x.tdc" "$S/asw.$n"
            (cd "$S/asw.$n" && find . -printf '%P %y %m\n' | LC_ALL=C sort &&
                find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum) >"$S/want"
            diff "$S/want" "$S/got"
            n=$((n + 1))
            continue
        fi
        if [ "$keep" = - ] && [ "$code" -eq 3 ]; then
            [ "$status" -eq 3 ] || { echo "$f: mount status $status: $output"; false; }
            [[ "$output" == *"$msg"* ]] || { echo "$f: mount says: $output; want: $msg"; false; }
            continue
        fi
        [ "$status" -eq 0 ] || { echo "$f: mount failed: $output"; false; }
        (cd "$M" && find . -printf '%P %y %m %s %l\n' | LC_ALL=C sort &&
            find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum) >"$S/got" 2>&1
        fusermount3 -u "$M"
        if [ "$keep" != - ]; then
            cp "$C/base.tdc" "$S/y.tdc"
            head -c "${keep#*:}" "$C/base.journal" >"$S/y.tdc.journal"
        else
            cp "$C/base.tdc" "$S/y.tdc"
            cp "$C/$f" "$S/y.tdc.journal"
        fi
        "$TADOCFS" -o ro "$S/y.tdc" "$M" 3>&-
        (cd "$M" && find . -printf '%P %y %m %s %l\n' | LC_ALL=C sort &&
            find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum) >"$S/want" 2>&1
        fusermount3 -u "$M"
        diff "$S/want" "$S/got" || { echo "$f: mounted tree differs"; false; }
        n=$((n + 1))
    done < <(cases '\.journal$')
    echo "# $n journals mounted" >&3
}

@test "a journal damaged before intact records is refused by writable opens and left as it is; cut as told, it opens" {
    cp "$C/base.tdc" "$S/x.tdc"
    cp "$C/j-flip-05.journal" "$S/x.tdc.journal"
    local keep cut
    keep=$(awk -F'\t' '$1 == "j-flip-05.journal" { print $4 }' "$C/MANIFEST") # RECORDS:BYTES
    cut=${keep#*:}
    printf 'append\ta.txt\tmore\n' >"$S/ops"
    for cmd in "$TADOC compact $S/x.tdc" "$TADOC apply $S/x.tdc $S/ops" "$TADOCFS $S/x.tdc $M"; do
        run $cmd 3>&-
        [ "$status" -eq 3 ] || { echo "$cmd: status $status: $output"; false; }
        [[ "$output" == *"damaged, not torn: checksum mismatch at offset $cut after record ${keep%%:*}, and an intact record follows"* ]]
        [[ "$output" == *"truncate -s $cut "* ]]
        cmp "$S/x.tdc.journal" "$C/j-flip-05.journal"
        cmp "$S/x.tdc" "$C/base.tdc"
        not_mounted "$M"
    done
    run "$TADOC" verify "$S/x.tdc"
    [ "$status" -eq 3 ]
    [[ "$output" == *"an intact record follows at offset"* ]]
    # the five records before the damage, read-only
    mnt -o ro "$S/x.tdc" "$M"
    find "$M" | LC_ALL=C sort >"$S/ro"
    fusermount3 -u "$M"
    wait_unmounted "$M"
    truncate -s "$cut" "$S/x.tdc.journal"
    mnt "$S/x.tdc" "$M"
    [ "$(find "$M" | LC_ALL=C sort)" = "$(cat "$S/ro")" ]
    fusermount3 -u "$M"
    wait_unmounted "$M"
    flock -w 10 "$S/x.tdc.lock" true # the daemon is gone
    # damage in the last record (nothing intact after it) is a torn tail: cut, as before
    cp "$C/j-flip-11.journal" "$S/x.tdc.journal"
    "$TADOC" compact "$S/x.tdc" 2>&1 | grep -q "dropped"
}
