#!/usr/bin/env bats
# tadoc-mpi: the analytics with the shards dealt among 1 to 4 MPI ranks (oversubscribed on
# this machine) print byte for byte what tadoc prints, for every analytic, over the whole
# archive and a scope, on stdout and atomically into a file; a rank that cannot read its
# shard fails the run with a message naming the rank and the shard and leaves no output
# file; a rank that dies fails the run and leaves none either. Packing on 1 to 4 ranks
# writes the archive tadoc pack writes (the same shards, section for section; only the
# archive's random id differs) and unpacks to the tree; a failed or killed pack leaves the
# old archive and no temporary file.

load helpers

setup() {
    scratch
    MPI="$(dirname "$TADOC")/tadoc-mpi"
    [ -x "$MPI" ] || { echo "tadoc-mpi was not built: Open MPI is missing (tools/deps.sh test installs it)"; false; }
    T=$S/tree
    mkdir -p "$T/a" "$T/b"
    cp "$CORPORA"/brown/ca0* "$T/a/"
    cp "$CORPORA"/brown/cb0* "$T/b/"
    for f in "$CORPORA"/brown/cc0*; do cat "$f"; done | head -c 100000 >"$T/big" # cut over shards
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 32K
    # Open MPI's own allocations are not the tool's: leaks are not checked under ASan.
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

teardown() {
    rm -rf "$S"
}

# mpi N ARGS...: tadoc-mpi on N ranks of this machine.
mpi() {
    local n=$1
    shift
    mpirun --allow-run-as-root --oversubscribe -n "$n" "$MPI" "$@"
}

@test "tadoc-mpi: 1 to 4 ranks print what tadoc prints, every analytic, whole and a scope" {
    [ "$(shards_of "$S/a.tdc")" -gt 10 ]
    # Each analytic runs whole on two rank counts and on the scope on a third; the counts
    # turn from one analytic to the next, so that each meets every count from 1 to 4 once
    # per two analytics.
    local i=0 n
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        "$TADOC" "$an" "$S/a.tdc" >"$S/want"
        "$TADOC" "$an" "$S/a.tdc" b >"$S/want-b"
        for n in $((i % 4 + 1)) $(((i + 2) % 4 + 1)); do
            mpi "$n" "$an" "$S/a.tdc" >"$S/got"
            cmp "$S/want" "$S/got" || { echo "$an on $n ranks differs"; false; }
        done
        n=$(((i + 1) % 4 + 1))
        mpi "$n" "$an" "$S/a.tdc" b -o "$S/got-b"
        cmp "$S/want-b" "$S/got-b" || { echo "$an of b on $n ranks differs"; false; }
        i=$((i + 1))
    done
}

@test "tadoc-mpi: a rank that cannot read its shard fails the run, naming the rank and the shard" {
    cp "$S/a.tdc" "$S/x.tdc"
    local off stored
    read -r off stored < <(sections "$S/x.tdc" | awk '$1 == "root" && n++ == 3 {print $2, $3}')
    flip_byte "$S/x.tdc" $((off + stored / 2))
    run mpi 4 wordcount "$S/x.tdc" -o "$S/out"
    echo "$output"
    [ "$status" -eq 3 ]
    [[ "$output" =~ tadoc-mpi:\ rank\ [0-3]:\ .*shard\ 3 ]]
    [ ! -e "$S/out" ]
    [ -z "$(find "$S" -name 'out.tmp*')" ]
    # The same where the ranks merge key ranges among themselves (invindex).
    run mpi 4 invindex "$S/x.tdc" -o "$S/out"
    [ "$status" -eq 3 ]
    [[ "$output" =~ tadoc-mpi:\ rank\ [0-3]:\ .*shard\ 3 ]]
    [ ! -e "$S/out" ]
    [ -z "$(find "$S" -name 'out.tmp*')" ]
    # A scope whose files lie in other shards still works.
    "$TADOC" wordcount "$S/x.tdc" a/ca01 >"$S/want"
    mpi 4 wordcount "$S/x.tdc" a/ca01 >"$S/got"
    cmp "$S/want" "$S/got"
}

@test "tadoc-mpi: more ranks than shards, and a one-shard archive, merge their ranges exactly" {
    "$TADOC" pack -q "$T/a" -o "$S/one.tdc"
    [ "$(shards_of "$S/one.tdc")" -eq 1 ]
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        for a in one a; do
            "$TADOC" "$an" "$S/$a.tdc" >"$S/want"
            (umask 022 && mpi 4 "$an" "$S/$a.tdc" -o "$S/got")
            cmp "$S/want" "$S/got"
            [ "$(stat -c %a "$S/got")" = 644 ] # a new file's mode, as a redirection gives
        done
    done
}

@test "tadoc-mpi -v: each rank says where its parts ran, and TADOC_GPU=off keeps them on the CPU" {
    "$TADOC" wordcount "$S/a.tdc" >"$S/want"
    TADOC_GPU=off mpi 3 wordcount "$S/a.tdc" -v -o "$S/got" 2>"$S/err"
    cmp "$S/want" "$S/got"
    for r in 0 1 2; do
        grep -q "^tadoc-mpi: rank $r of 3 ([0-9] of 3 on its host; cpu backend.*): every part on the CPU; its merges with the other ranks spilled 0 bytes; its range of the output: [0-9]* bytes in a file$" "$S/err"
    done
    [ "$(grep -c '^tadoc-mpi: rank' "$S/err")" -eq 3 ]
    # the ranges, kept in files (in $TMPDIR), add up to the output
    [ "$(grep -o 'output: [0-9]*' "$S/err" | awk '{ s += $2 } END { print s }')" -eq "$(stat -c %s "$S/got")" ]
    mpi 2 wordcount "$S/a.tdc" -o "$S/got" 2>"$S/err" # no -v: nothing said
    ! grep -q "^tadoc-mpi: rank" "$S/err"
}

@test "tadoc-mpi: merges past TADOC_MERGE_MEM go on in a file, on every rank, and stay exact" {
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        "$TADOC" "$an" "$S/a.tdc" >"$S/want"
        n=$((2 + ${#an} % 2)) # 2 or 3 ranks, by analytic: three of each
        # 1 KiB, so that lines longer than the memory go alone; seqcount, whose merges hold
        # about 2 MB of sequences here (and spill nearly all of it at either size), in 32 KiB
        # batches, which take 5 s under ASan where 1 KiB ones take 9
        mem=1K
        [ "$an" != seqcount ] || mem=32K
        TADOC_MERGE_MEM=$mem mpi "$n" "$an" "$S/a.tdc" -v -o "$S/got" 2>"$S/err"
        cmp "$S/want" "$S/got" || { echo "$an on $n ranks differs"; false; }
        # the merges over the ranks spilled (the shards' own merges too, unseen here)
        grep -q "spilled [1-9][0-9]* bytes;" "$S/err"
    done
}

@test "tadoc-mpi: exchanges larger than a round go in rounds and merge exactly" {
    # TADOC_MPI_ROUND shrinks a round from 1 GiB to 50 bytes, so that every exchange of the
    # merges takes many rounds of whole lines (a longer line goes alone), some pairs sending
    # nothing in a round (the ranges and shuffled counts), each round's pieces merged as they
    # arrive; every gather goes rank by rank in pieces (the samples, the edges of the file cut
    # over shards), and each rank's range of the output, kept in a file, is written to the
    # output file or sent to rank 0 for stdout in pieces of a round: the paths of large runs.
    # A smaller archive than the others' (the rounds of 50 bytes are many): still several
    # shards and the file cut over them.
    mkdir "$S/small"
    cp "$T/a/ca01" "$T/b/cb01" "$T/big" "$S/small/"
    "$TADOC" pack -q "$S/small" -o "$S/s.tdc" --shard-size 32K
    # seqcount's exchanges, the largest, in rounds of 200 bytes (still thousands of rounds,
    # of several lines each): at 50 it takes 14 s a run under ASan.
    local n=2 round
    for an in wordcount invindex seqcount rankedinvindex; do
        "$TADOC" "$an" "$S/s.tdc" >"$S/want"
        round=50
        [ "$an" != seqcount ] || round=200
        # 2 ranks to the file and 3 to stdout, swapped from one analytic to the next
        TADOC_MPI_ROUND=$round mpi "$n" "$an" "$S/s.tdc" -o "$S/got"
        cmp "$S/want" "$S/got" || { echo "$an on $n ranks, rounds of $round bytes, differs"; false; }
        n=$((5 - n))
        TADOC_MPI_ROUND=$round mpi "$n" "$an" "$S/s.tdc" >"$S/got"
        cmp "$S/want" "$S/got" || { echo "$an on $n ranks to stdout, rounds of $round, differs"; false; }
    done
}

@test "tadoc-mpi count and search: 1 to 4 ranks print what tadoc prints, on a file cut over shards" {
    ln "$T/big" "$T/b/biglink"
    "$TADOC" pack -q "$T" -o "$S/q.tdc" --shard-size 16K
    cp "$BATS_TEST_DIRNAME/../data/v3.tdc" "$S/v3.tdc"
    local w f n cmd ns k=0
    for f in big b/biglink /a/ca01; do
        for w in the zzzz; do
            for cmd in count search; do
                "$TADOC" "$cmd" "$S/q.tdc" "$f" "$w" >"$S/want"
                # the big file on two rank counts, turning over 1 to 4; the others on 3
                ns=3
                [ "$f" != big ] || ns="$((k % 4 + 1)) $(((k + 1) % 4 + 1))"
                k=$((k + 2))
                for n in $ns; do
                    mpi "$n" "$cmd" "$S/q.tdc" "$f" "$w" >"$S/got"
                    cmp "$S/want" "$S/got" || { echo "$cmd $f $w on $n ranks differs"; false; }
                done
            done
        done
    done
    # The big file spans several shards, and the word is found in more than one of them.
    "$TADOC" search "$S/q.tdc" big the >"$S/want"
    [ "$(wc -l <"$S/want")" -gt 100 ]
    [ "$(tail -1 "$S/want")" -gt 50000 ]
    mpi 3 search "$S/q.tdc" big the -o "$S/got"
    cmp "$S/want" "$S/got"
    # A version 3 archive (one grammar) is queried whole on rank 0.
    for cmd in count search; do
        "$TADOC" "$cmd" "$S/v3.tdc" d/a.txt one >"$S/want"
        mpi 3 "$cmd" "$S/v3.tdc" d/a.txt one >"$S/got"
        cmp "$S/want" "$S/got"
    done
    # Errors as tadoc's, once, from rank 0.
    run mpi 2 count "$S/q.tdc" nosuch the
    [ "$status" -eq 1 ]
    [[ "$output" == *"rank 0: nosuch: no such file in the archive"* ]]
    run mpi 2 search "$S/q.tdc" b the
    [ "$status" -eq 1 ]
    [[ "$output" == *"b: not a regular file"* ]]
    run mpi 2 count "$S/q.tdc" big
    [ "$status" -eq 2 ]
    [[ "$output" == *"usage: mpirun -n N tadoc-mpi count|search"* ]]
}

@test "tadoc-mpi count and search: a rank that cannot read its shard of the file fails the run, naming it" {
    "$TADOC" pack -q "$T" -o "$S/q.tdc" --shard-size 16K
    local off stored
    read -r off stored < <(sections "$S/q.tdc" | awk '$1 == "root" {o = $2; n = $3} END {print o, n}')
    flip_byte "$S/q.tdc" $((off + stored / 2))
    run "$TADOC" count "$S/q.tdc" big the
    [ "$status" -eq 3 ]
    local shards
    shards=$(shards_of "$S/q.tdc")
    run mpi 4 search "$S/q.tdc" big the -o "$S/out"
    echo "$output"
    [ "$status" -eq 3 ]
    [[ "$output" =~ tadoc-mpi:\ rank\ [0-3]:\ .*shard\ $((shards - 1)) ]]
    [ ! -e "$S/out" ]
    [ -z "$(find "$S" -name 'out.tmp*')" ]
    # A file in the other shards is still answered.
    "$TADOC" count "$S/q.tdc" a/ca01 the >"$S/want"
    mpi 4 count "$S/q.tdc" a/ca01 the >"$S/got"
    cmp "$S/want" "$S/got"
}

@test "tadoc-mpi: a rank that dies fails the run and leaves no output" {
    run env TADOC_MPI_TEST_DIE=2 mpirun --allow-run-as-root --oversubscribe -n 3 "$MPI" wordcount "$S/a.tdc" -o "$S/out"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"rank 2"* ]]
    [ ! -e "$S/out" ]
    [ -z "$(find "$S" -name 'out.tmp*')" ]
}

@test "tadoc-mpi: usage errors and an unknown analytic" {
    run mpi 2 nosuch "$S/a.tdc"
    [ "$status" -eq 2 ]
    [[ "$output" == *"unknown analytic"* ]]
    run mpi 1 --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"usage: mpirun -n N tadoc-mpi"* ]]
    run mpi 2 wordcount "$S/nosuch.tdc"
    [ "$status" -ne 0 ]
    [[ "$output" == *"rank 0"*"nosuch.tdc"* ]]
}

# The figures of ARCHIVE's shards and sections as tadoc stat prints them, without the lines
# that the archive's random id changes (its name, its size and so its ratio, which moved in
# the third decimal in one run, the file table's stored size).
shard_figures() {
    "$TADOC" stat "$1" |
        grep -v -e '^archive' -e '^size' -e '^ratio' -e 'file table' -e 'shard table'
}

@test "tadoc-mpi pack: 1 to 4 ranks write the archive tadoc pack writes, every inode type" {
    ln -s a/ca01 "$T/link"
    ln "$T/a/ca02" "$T/hard"
    : >"$T/empty"
    mkfifo "$T/fifo"
    mkdir "$T/emptydir"
    setfattr -n user.note -v hi "$T/a/ca03" 2>/dev/null || true
    cp "$T/a/ca04" "$T/b/copy" # packed after a/ca04, in its shard (the plan carries it)
    "$TADOC" pack -q "$T" -o "$S/want.tdc" --shard-size 20K
    [ "$(shards_of "$S/want.tdc")" -gt 10 ]
    for n in 1 2 3 4; do
        mpi "$n" pack "$T" -o "$S/got.tdc" --shard-size 20K -q -j 1
        diff <(shard_figures "$S/want.tdc") <(shard_figures "$S/got.tdc")
        rm -rf "$S/out"
        "$TADOC" unpack "$S/got.tdc" "$S/out"
        diff -r --no-dereference -x fifo "$T" "$S/out"
        diff <(tree_meta "$T") <(tree_meta "$S/out")
        [ "$(stat -c %h "$S/out/hard")" -eq 2 ]
        [ -p "$S/out/fifo" ]
        [ -z "$(find "$S" -name 'got.tdc.tmp*')" ]
        "$TADOC" wordcount "$S/want.tdc" >"$S/w1"
        mpi "$n" wordcount "$S/got.tdc" >"$S/w2"
        cmp "$S/w1" "$S/w2"
    done
}

@test "tadoc-mpi pack: a failed or killed pack leaves the old archive and no temporary file" {
    cp "$S/a.tdc" "$S/old.tdc"
    run mpi 2 pack "$T" -o "$S/nodir/x.tdc" -q
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" == *"rank 0: "*"nodir/x.tdc"* ]]
    run mpi 2 pack "$S/nosuch" -o "$S/x.tdc" -q
    [ "$status" -ne 0 ]
    [[ "$output" == *"rank 0: "*"nosuch"* ]]
    [ ! -e "$S/x.tdc" ]
    run env TADOC_MPI_TEST_DIE=1 mpirun --allow-run-as-root --oversubscribe -n 3 "$MPI" pack "$T" -o "$S/a.tdc" --shard-size 20K -q
    echo "$output"
    [ "$status" -ne 0 ]
    cmp "$S/a.tdc" "$S/old.tdc"
    [ -z "$(find "$S" -name '*.tmp*')" ]
    run mpi 2 pack "$T" -o "$S/a.tdc" --shard-size 0
    [ "$status" -eq 2 ]
    cmp "$S/a.tdc" "$S/old.tdc"
}
