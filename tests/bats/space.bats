#!/usr/bin/env bats
# Space follows live content: after a long history of edits (overwrites, inserts, appends,
# truncates, deletes of most files) folded in by many compactions, the archive is close to a
# fresh `tadoc pack` of the same tree, holds exactly the edited content, and an archive whose
# files were all deleted shrinks to about an empty pack. The edits come from `bench/ops.pl
# history:D` (a random-operation tester) through `tadoc apply`; `bench/opscheck.pl` checks the
# result against a Perl model of them.

load helpers

setup() {
    scratch
    T=$S/tree
    mkdir -p "$T"
    cp -a "$CORPORA/linux-slice/kernel/sched" "$CORPORA/linux-slice/Documentation/filesystems/ext4" "$T/"
    packed
}

# The archive under test, a.tdc, packed from T, with its listing and words for ops.pl. As
# grammars (TADOC_NO_BARE=1, exported: near_pack's fresh pack too), whose compaction is what
# these tests measure: pack would store this text bare, and compaction moves a bare shard's
# edited files to grammars (textshards.bats).
export TADOC_NO_BARE=1
packed() {
    "$TADOC" pack -q "$T" -o "$S/a.tdc"
    "$TADOC" ls -l "$S/a.tdc" >"$S/ls"
    "$TADOC" wordcount "$S/a.tdc" | cut -f2 >"$S/words"
}

teardown() {
    rm -rf "$S"
}

size() { stat -c %s "$1"; }

# Apply OPS in CHUNKS pieces, each folded in by `tadoc compact`; prints compact's lines.
apply_compacting() { # OPS CHUNKS
    local n per c
    n=$(wc -l <"$1")
    per=$(((n + $2 - 1) / $2))
    split -l "$per" -d -a 3 "$1" "$S/chunk."
    for c in "$S"/chunk.*; do
        "$TADOC" apply -q "$S/a.tdc" "$c"
        "$TADOC" compact "$S/a.tdc"
    done
}

# The archive against `tadoc pack` of its own unpacked tree: both at pack's default zstd level
# (the last compaction rewrites at it; compaction's own default level is lower, for speed).
# Prints "archive pack ratio"; fails unless within 10 %.
near_pack() {
    "$TADOC" compact --force --level 19 "$S/a.tdc" >/dev/null
    "$TADOC" verify "$S/a.tdc" >/dev/null
    rm -rf "$S/un"
    "$TADOC" unpack "$S/a.tdc" "$S/un"
    "$TADOC" pack -q "$S/un" -o "$S/p.tdc"
    local a p
    a=$(size "$S/a.tdc") p=$(size "$S/p.tdc")
    echo "# archive $a bytes, fresh pack of the same tree $p bytes" >&3
    [ $((a * 10)) -le $((p * 11)) ]
}

@test "a long random edit history, compacted again and again: within 10% of a fresh pack, content exact" {
    perl "$BATS_TEST_DIRNAME/../../bench/ops.pl" history:75 1500 64 7 "$S/ls" "$S/words" >"$S/ops"
    for k in write insert append truncate delete; do grep -q "^$k" "$S/ops"; done
    before=$(size "$S/a.tdc")
    apply_compacting "$S/ops" 40 >"$S/log"
    [ "$(wc -l <"$S/log")" -eq 40 ]
    echo "# pack $before bytes; after 40 compactions $(size "$S/a.tdc") bytes" >&3
    near_pack
    # Every file as the model says, the deleted ones gone, nothing else there.
    perl "$BATS_TEST_DIRNAME/../../bench/opscheck.pl" sequence "$T" "$S/ops" "$S/un"
    live=$(($(find "$T" -type f | wc -l) - $(grep -c '^delete' "$S/ops")))
    [ "$(find "$S/un" -type f | wc -l)" -eq "$live" ]
    # ... and a further compaction (incremental or not) changes no byte of it.
    printf 'append\t%s\t%s\n' "$(cd "$S/un" && find . -type f -printf '%P\n' | head -1)" 'one more line\n' >"$S/ops2"
    "$TADOC" apply -q "$S/a.tdc" "$S/ops2"
    "$TADOC" compact "$S/a.tdc" >/dev/null
    "$TADOC" verify "$S/a.tdc" >/dev/null
    "$TADOC" unpack "$S/a.tdc" "$S/un2"
    perl "$BATS_TEST_DIRNAME/../../bench/opscheck.pl" sequence "$S/un" "$S/ops2" "$S/un2"
}

@test "many small compactions of a few edits each: still within 10% of a fresh pack" {
    # Each compaction rewrites a few files of many: compressed alone, their new rules repeat
    # phrases the kept rules hold, until the grammar is rebuilt.
    T=$CORPORA/linux-slice
    packed
    perl "$BATS_TEST_DIRNAME/../../bench/ops.pl" history:10 200 64 5 "$S/ls" "$S/words" >"$S/ops"
    apply_compacting "$S/ops" 20 >"$S/log"
    # Most of them kept the old rules (few new ones)...
    incremental=$(perl -ne 'print "$1\n" if /rules \d+ -> (\d+) \((\d+) new\)/ && $2 < $1 / 2' "$S/log" | wc -l)
    echo "# $incremental of 20 compactions kept most rules" >&3
    [ "$incremental" -ge 10 ]
    # ... yet the archive stays near a fresh pack.
    near_pack
    perl "$BATS_TEST_DIRNAME/../../bench/opscheck.pl" sequence "$T" "$S/ops" "$S/un"
}

@test "one file rewritten many times: the dictionary keeps only the tokens of its last text" {
    f=sched/core.c
    for i in $(seq 30); do
        # Each round overwrites the start with made-up words (new tokens) and cuts the end.
        perl -e 'srand($ARGV[0]); my @c = ("a".."z");
            print "write\t$ARGV[1]\t0\t", join(" ", map { join "", map { $c[rand @c] } 1..8 } 1..2000), "\n";
            print "truncate\t$ARGV[1]\t", 100000 - $ARGV[0] * 100, "\n"' "$i" "$f" >"$S/ops"
        "$TADOC" apply -q "$S/a.tdc" "$S/ops"
        "$TADOC" compact "$S/a.tdc" >/dev/null
    done
    near_pack
    [ "$(stat -c %s "$S/un/$f")" -eq $((100000 - 3000)) ]
    tokens() { "$TADOC" stat "$1" | awk '/^dictionary +[0-9]+ tokens/ { print $2 }'; }
    [ "$(tokens "$S/a.tdc")" -eq "$(tokens "$S/p.tdc")" ]
}

@test "every file deleted: the archive compacts to about the size of an empty pack" {
    # Some edits folded in first, so the old grammar has new rules and tokens too.
    perl "$BATS_TEST_DIRNAME/../../bench/ops.pl" history:0 200 64 3 "$S/ls" "$S/words" >"$S/ops"
    apply_compacting "$S/ops" 2 >/dev/null
    (cd "$T" && find . -type f -printf 'delete\t%P\n') >"$S/del"
    "$TADOC" apply -q "$S/a.tdc" "$S/del"
    "$TADOC" compact "$S/a.tdc" >/dev/null
    "$TADOC" unpack "$S/a.tdc" "$S/un"
    [ -z "$(find "$S/un" -type f)" ]
    diff <(cd "$T" && find . -type d | sort) <(cd "$S/un" && find . -type d | sort)
    "$TADOC" pack -q "$S/un" -o "$S/p.tdc"
    a=$(size "$S/a.tdc") p=$(size "$S/p.tdc")
    echo "# archive $a bytes, pack of the empty tree $p bytes" >&3
    [ "$a" -le $((p + p / 10 + 64)) ]
    "$TADOC" stat "$S/a.tdc" | grep -Eq '^dictionary +0 tokens'
}

@test "a small edit stays incremental: the kept rules are reused, few new ones made" {
    printf 'append\tsched/rt.c\t%s\n' '/* one line */\n' >"$S/ops"
    "$TADOC" apply -q "$S/a.tdc" "$S/ops"
    out=$("$TADOC" compact "$S/a.tdc")
    echo "# $out" >&3
    # "rules BEFORE -> AFTER (NEW new)": most rules kept, few new.
    [[ "$out" =~ rules\ ([0-9]+)\ -\>\ ([0-9]+)\ \(([0-9]+)\ new\) ]]
    [ "${BASH_REMATCH[3]}" -lt $((BASH_REMATCH[2] / 4)) ]
    "$TADOC" unpack "$S/a.tdc" "$S/un"
    perl "$BATS_TEST_DIRNAME/../../bench/opscheck.pl" sequence "$T" "$S/ops" "$S/un"
}
