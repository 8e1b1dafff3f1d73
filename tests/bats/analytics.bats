#!/usr/bin/env bats
# The six analytics on the grammar against plain pipelines over the original files
# (docs/DESIGN.md, "Analytics"), through the CLI and through the mounted virtual files. Each
# oracle is computed once and compared with every traversal (top-down, bottom-up and the
# selector's choice) on one and on two threads.

load helpers
load ../oracles

setup() { scratch; }
teardown() {
    mountpoint -q "$S/mnt" 2>/dev/null && fusermount3 -u "$S/mnt"
    rm -rf "$S"
}

# modes_match WANT ANALYTIC ARCHIVE [SCOPE]: tadoc's output equals the file WANT under
# TADOC_TRAVERSAL=topdown, bottomup and auto, each with TADOC_THREADS=1 and 2.
modes_match() {
    local want=$1 t n
    shift
    for t in topdown bottomup auto; do
        for n in 1 2; do
            TADOC_TRAVERSAL=$t TADOC_THREADS=$n "$TADOC" "$@" >"$S/got" ||
                { echo "$* failed (TADOC_TRAVERSAL=$t TADOC_THREADS=$n)"; return 1; }
            cmp -s "$S/got" "$want" ||
                { echo "$* differs from the oracle (TADOC_TRAVERSAL=$t TADOC_THREADS=$n)"; return 1; }
        done
    done
}

@test "wordcount and sort of the Linux slice, whole and per subtree, match the pipeline in every traversal" {
    TADOC_NO_BARE=1 "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc" # a grammar
    oracle_wordcount "$CORPORA/linux-slice" >"$S/want"
    modes_match "$S/want" wordcount "$S/l.tdc"
    oracle_sort "$CORPORA/linux-slice" >"$S/want"
    modes_match "$S/want" sort "$S/l.tdc"
    for scope in kernel/sched fs/fuse lib/zstd/compress include/linux/mm.h; do
        oracle_wordcount "$CORPORA/linux-slice/$scope" >"$S/want"
        modes_match "$S/want" wordcount "$S/l.tdc" "$scope"
    done
}

@test "invindex, termvector, seqcount and rankedinvindex of the Linux slice match the pipelines in every traversal" {
    # a grammar (pack would store this text as its bytes: textshards.bats)
    TADOC_NO_BARE=1 "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    local i=0 a
    for a in invindex termvector seqcount rankedinvindex; do
        "oracle_$a" "$CORPORA/linux-slice" >"$S/want"
        modes_match "$S/want" "$a" "$S/l.tdc"
        "oracle_$a" "$CORPORA/linux-slice/kernel/sched" >"$S/want"
        traversals_match "$S/want" $((i++ % 2)) "$a" "$S/l.tdc" kernel/sched
    done
}

# traversals_match WANT ODD ANALYTIC ARCHIVE: tadoc's output equals WANT under each traversal,
# top-down on 1 thread and bottom-up on 2 (ODD=0) or the other way round (ODD=1), the selector
# on the machine's choice: modes_match's pairs dealt over the analytics of a corpus, since
# each run is as slow as the oracle (seqcount of Brown: 6-14 s under ASan).
traversals_match() {
    local want=$1 odd=$2 t n=$((1 + $2))
    shift 2
    for t in topdown bottomup auto; do
        local how="TADOC_TRAVERSAL=$t TADOC_THREADS=$n"
        [ "$t" = auto ] && how="the selector, threads left to tadoc"
        if [ "$t" = auto ]; then
            env -u TADOC_THREADS "$TADOC" "$@" >"$S/got"
        else
            TADOC_TRAVERSAL=$t TADOC_THREADS=$n "$TADOC" "$@" >"$S/got"
        fi || { echo "$* failed ($how)"; return 1; }
        cmp -s "$S/got" "$want" || { echo "$* differs from the oracle ($how)"; return 1; }
        n=$((3 - n))
    done
}

@test "all six analytics of the Brown corpus match the pipelines in every traversal" {
    "$TADOC" pack -q --segment 400000 "$CORPORA/brown" -o "$S/b.tdc"
    local i=0 a
    for a in wordcount sort invindex termvector seqcount rankedinvindex; do
        "oracle_$a" "$CORPORA/brown" >"$S/want"
        traversals_match "$S/want" $((i++ % 2)) "$a" "$S/b.tdc"
    done
}

@test "a hard link whose first name lies outside the scope counts in it, on several shards, as the pipelines and the mount count it" {
    mkdir -p "$S/t/s"
    cat "$CORPORA"/brown/ca0* >"$S/t/a"
    ln "$S/t/a" "$S/t/s/b"
    echo a zed of its own >"$S/t/s/z"
    "$TADOC" pack -q --shard-size 64K "$S/t" -o "$S/h.tdc"
    [ "$("$TADOC" stat "$S/h.tdc" | awk '$1 == "shards" {print $2}')" -gt 2 ]
    mkdir "$S/mnt"
    "$TADOCFS" -o ro "$S/h.tdc" "$S/mnt"
    local a
    for a in wordcount sort invindex termvector seqcount rankedinvindex; do
        "oracle_$a" "$S/t/s" >"$S/want"
        "$TADOC" "$a" "$S/h.tdc" s >"$S/got"
        cmp "$S/want" "$S/got"
        cmp "$S/want" "$S/mnt/s/.$a"
        "oracle_$a" "$S/t/s/b" >"$S/want"
        "$TADOC" "$a" "$S/h.tdc" s/b >"$S/got"
        cmp "$S/want" "$S/got"
    done
    fusermount3 -u "$S/mnt"
}

@test "the selector: top-down for whole-scope analytics, forced traversals obeyed, estimates reported" {
    TADOC_NO_BARE=1 "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    for a in wordcount sort seqcount; do
        run env TADOC_ANA_VERBOSE=1 TADOC_THREADS=1 "$TADOC" "$a" "$S/l.tdc"
        [ "$status" -eq 0 ] && [[ "${lines[0]}" == "tadoc: $a: top-down (auto), 1 thread,"* ]] ||
            { echo "$a: ${lines[0]}"; false; }
    done
    for a in invindex termvector rankedinvindex; do
        run env TADOC_ANA_VERBOSE=1 TADOC_THREADS=2 "$TADOC" "$a" "$S/l.tdc" kernel
        [[ "${lines[0]}" == "tadoc: $a: "*" (auto), 2 threads, 39 files, "*"; estimates: top-down "[0-9]*", bottom-up "[0-9]* ]] ||
            { echo "$a: ${lines[0]}"; false; }
        run env TADOC_ANA_VERBOSE=1 TADOC_TRAVERSAL=bottomup "$TADOC" "$a" "$S/l.tdc" kernel
        [[ "${lines[0]}" == "tadoc: $a: bottom-up (forced),"* ]] || { echo "$a: ${lines[0]}"; false; }
        run env TADOC_ANA_VERBOSE=1 TADOC_TRAVERSAL=topdown "$TADOC" "$a" "$S/l.tdc" kernel
        [[ "${lines[0]}" == "tadoc: $a: top-down (forced),"* ]] || { echo "$a: ${lines[0]}"; false; }
    done
    # without TADOC_THREADS a small scope stays on one thread
    run env -u TADOC_THREADS TADOC_ANA_VERBOSE=1 "$TADOC" termvector "$S/l.tdc" include/linux/mm.h
    [[ "${lines[0]}" == *" 1 thread, 1 file,"* ]] || { echo "${lines[0]}"; false; }
}

@test "wordcount of the Brown corpus (many segments) matches the pipeline" {
    "$TADOC" pack -q --segment 300000 "$CORPORA/brown" -o "$S/b.tdc"
    cmp <("$TADOC" wordcount "$S/b.tdc") <(oracle_wordcount "$CORPORA/brown")
    cmp <("$TADOC" sort "$S/b.tdc" ca01) <(oracle_sort "$CORPORA/brown/ca01")
}

@test "files with no words, one word, cut long words and binary data count exactly" {
    mkdir -p "$S/in/sub"
    printf ' ,;\n\t' >"$S/in/no-words"
    printf 'lonely' >"$S/in/one-word"
    : >"$S/in/empty"
    { head -c 5000 /dev/zero | tr '\0' 'q'; printf ' q qq\n'; } >"$S/in/long-word"
    { head -c 1048576 /dev/zero | tr '\0' 'a'; printf 'Z tail'; } >"$S/in/sub/megaword"
    head -c 300000 /dev/urandom >"$S/in/sub/random.bin"
    printf 'caf\xe9 na\xefve caf\xe9\n' >"$S/in/latin1"
    cp "$BATS_TEST_DIRNAME/../../engine/analytics/ana_docs.c" "$S/in/sub/code.c" # a file that shares rules
    cp "$S/in/sub/code.c" "$S/in/code-copy.c"
    "$TADOC" pack -q "$S/in" -o "$S/o.tdc"
    for a in wordcount sort invindex termvector seqcount rankedinvindex; do
        "oracle_$a" "$S/in" >"$S/want"
        modes_match "$S/want" "$a" "$S/o.tdc"
    done
    [ -z "$("$TADOC" wordcount "$S/o.tdc" no-words)" ]
    [ "$("$TADOC" wordcount "$S/o.tdc" one-word)" = $'1\tlonely' ]
    run "$TADOC" wordcount "$S/o.tdc" nope
    [ "$status" -eq 1 ] && [[ "$output" == *"no such path"* ]]
}

@test "mounted analytics files equal the pipelines and stay out of listings" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    mkdir "$S/mnt"
    "$TADOCFS" "$S/l.tdc" "$S/mnt"
    cmp "$S/mnt/.wordcount" <(oracle_wordcount "$CORPORA/linux-slice")
    cmp "$S/mnt/kernel/sched/.wordcount" <(oracle_wordcount "$CORPORA/linux-slice/kernel/sched")
    cmp "$S/mnt/fs/.sort" <(oracle_sort "$CORPORA/linux-slice/fs")
    cmp "$S/mnt/fs/fuse/.seqcount" <(oracle_seqcount "$CORPORA/linux-slice/fs/fuse")
    cmp "$S/mnt/lib/.invindex" <(oracle_invindex "$CORPORA/linux-slice/lib")
    cmp "$S/mnt/lib/zstd/.termvector" <(oracle_termvector "$CORPORA/linux-slice/lib/zstd")
    cmp "$S/mnt/kernel/.rankedinvindex" <(oracle_rankedinvindex "$CORPORA/linux-slice/kernel")
    # after open the size is right
    [ "$(stat -c %s "$S/mnt/.wordcount")" -eq "$(oracle_wordcount "$CORPORA/linux-slice" | wc -c)" ]
    ! ls -a "$S/mnt" | grep -q wordcount
    [ -z "$(find "$S/mnt" -name '.wordcount' -o -name '.sort' -o -name '.seqcount')" ]
    run grep -rl 'sched_class' "$S/mnt/kernel/sched"
    [[ "$output" != *".wordcount"* ]]
    run sh -c "echo x > '$S/mnt/.wordcount'"
    [ "$status" -ne 0 ]
    # nor can a rename put a file or a directory in a virtual file's place
    echo spoof >"$S/mnt/lib/t" && mkdir "$S/mnt/lib/d"
    run mv "$S/mnt/lib/t" "$S/mnt/lib/.wordcount"
    [ "$status" -ne 0 ] && [[ "$output" == *"Permission denied"* ]]
    run mv -T "$S/mnt/lib/d" "$S/mnt/lib/.search"
    [ "$status" -ne 0 ] && [[ "$output" == *"Permission denied"* ]]
    cmp "$S/mnt/lib/.wordcount" <(oracle_wordcount "$S/mnt/lib")
    rm "$S/mnt/lib/t" && rmdir "$S/mnt/lib/d"
}

@test "-o novirtual: a tree with files named as the virtual ones copies in; mounted again without it, those files win" {
    mkdir -p "$S/t" "$S/in/d/.search" "$S/mnt"
    echo seed >"$S/t/seed"
    "$TADOC" pack -q "$S/t" -o "$S/v.tdc"
    echo real sort >"$S/in/.sort"
    echo real count >"$S/in/d/.wordcount"
    echo word list >"$S/in/d/.search/words"
    mkdir "$S/in/.seqcount"
    "$TADOCFS" -o novirtual "$S/v.tdc" "$S/mnt"
    [ ! -e "$S/mnt/.wordcount" ] && [ ! -e "$S/mnt/.search" ]
    cp -a "$S/in/." "$S/mnt/"
    for f in .sort d/.wordcount d/.search/words; do cmp "$S/in/$f" "$S/mnt/$f"; done
    [ -d "$S/mnt/.seqcount" ] && [ "$(ls -a "$S/mnt" | grep -c '^\.sort$')" = 1 ]
    fusermount3 -u "$S/mnt"
    wait_unmounted "$S/mnt"
    "$TADOCFS" "$S/v.tdc" "$S/mnt"
    for f in .sort d/.wordcount d/.search/words; do cmp "$S/in/$f" "$S/mnt/$f"; done
    [ -d "$S/mnt/.seqcount" ]
    [ "$(head -1 "$S/mnt/d/.sort")" = "$(printf 'count\t1')" ] # the virtual files of the rest
    fusermount3 -u "$S/mnt"
}

@test "large virtual files go to a spill file in TMPDIR: unlinked, read exactly at any offset, shared by later opens" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    "$TADOC" seqcount "$S/l.tdc" >"$S/want"
    local size
    size=$(stat -c %s "$S/want")
    [ "$size" -gt $((2 << 20)) ] # past the 1 MiB from which a text is spilled
    mkdir "$S/mnt" "$S/spill"
    TMPDIR=$S/spill "$TADOCFS" "$S/l.tdc" "$S/mnt"
    local pid
    pid=$(pgrep -n -f "$(basename "$TADOCFS") $S/l.tdc")
    cmp "$S/mnt/.seqcount" "$S/want"
    # Unlinked: no name in TMPDIR, but the daemon holds the file.
    [ -z "$(ls -A "$S/spill")" ]
    ls -l "/proc/$pid/fd" | grep -q "$S/spill/.*(deleted)"
    local vt
    vt=$(getfattr -n user.tadoc.virtual_texts --only-values "$S/mnt")
    [[ "$vt" == "1 texts; 0 bytes in memory"*"; $size bytes spilled" ]]
    # Later opens, at once and at offsets, read the kept text without computing it again.
    local n0
    n0=$(getfattr -n user.tadoc.backend --only-values "$S/mnt")
    for off in 0 1 4095 $((size / 2)) $((size - 10)); do
        cmp <(tail -c +$((off + 1)) "$S/mnt/.seqcount" | head -c 9000) \
            <(tail -c +$((off + 1)) "$S/want" | head -c 9000)
    done
    dd if="$S/mnt/.seqcount" bs=4096 skip=100 count=3 status=none | cmp - \
        <(dd if="$S/want" bs=4096 skip=100 count=3 status=none)
    cmp "$S/mnt/.seqcount" "$S/want" &
    cmp "$S/mnt/.seqcount" "$S/want"
    wait $!
    [ "$(getfattr -n user.tadoc.backend --only-values "$S/mnt")" = "$n0" ]
    # A small text stays in memory.
    cmp "$S/mnt/fs/fuse/.wordcount" <(oracle_wordcount "$CORPORA/linux-slice/fs/fuse")
    vt=$(getfattr -n user.tadoc.virtual_texts --only-values "$S/mnt")
    [[ "$vt" == "2 texts; "[1-9]*" bytes in memory"*"; $size bytes spilled" ]]
    fusermount3 -u "$S/mnt"
    # Where no file can be made, the text stays in memory and is still exact.
    TMPDIR=$S/nosuch "$TADOCFS" "$S/l.tdc" "$S/mnt"
    cmp "$S/mnt/.seqcount" "$S/want"
    vt=$(getfattr -n user.tadoc.virtual_texts --only-values "$S/mnt")
    [[ "$vt" == "1 texts; $size bytes in memory"*"; 0 bytes spilled" ]]
}

@test "count and search agree with a whole-word oracle on random words, absent words too" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    mapfile -t files < <(cd "$CORPORA/linux-slice" && find . -type f -size +1k -printf '%P\n' | LC_ALL=C sort)
    for i in $(seq 1 12); do
        f=${files[$((RANDOM % ${#files[@]}))]}
        mapfile -t ws < <(LC_ALL=C tr -cs 'A-Za-z0-9_\200-\377' '\n' <"$CORPORA/linux-slice/$f" | grep -av '^$' | shuf -n 3 --random-source=<(yes $i))
        for w in "${ws[@]}" zz_not_a_word_$i; do
            cmp <("$TADOC" search "$S/l.tdc" "$f" "$w") <(oracle_search "$CORPORA/linux-slice/$f" "$w") ||
                { echo "search $f $w"; false; }
            [ "$("$TADOC" count "$S/l.tdc" "$f" "$w")" -eq "$(oracle_search "$CORPORA/linux-slice/$f" "$w" | wc -l)" ] ||
                { echo "count $f $w"; false; }
        done
    done
    run "$TADOC" count "$S/l.tdc" kernel "static"
    [ "$status" -eq 1 ] && [[ "$output" == *"not a regular file"* ]]
    # words of 1024 bytes or more, which the tokenizer cuts into pieces: a piece alone, the
    # word of exactly one piece and longer words are each counted apart, on several shards
    mkdir "$S/long"
    local w1 w2 w3
    w1=$(head -c 1024 /dev/zero | tr '\0' c) w2=$(head -c 2048 /dev/zero | tr '\0' c)
    w3=$(head -c 3000 /dev/zero | tr '\0' c)
    for i in $(seq 1 40); do printf '%s x %s %s.%s y\n' "$w1" "$w3" "$w2" "$w1"; done >"$S/long/f"
    "$TADOC" pack -q --shard-size 64K "$S/long" -o "$S/long.tdc"
    # (the last piece of w3, 952 bytes, is a token of its own, and no whole word)
    for w in "$w1" "$w2" "$w3" "${w3}c" "${w1:0:1023}" "${w3:0:952}" x; do
        cmp <("$TADOC" search "$S/long.tdc" f "$w") <(oracle_search "$S/long/f" "$w")
        [ "$("$TADOC" count "$S/long.tdc" f "$w")" -eq "$(oracle_search "$S/long/f" "$w" | wc -l)" ]
    done
    # more than 32 distinct long words (sorted apart, then merged in) keep byte order
    mkdir "$S/long2"
    python3 -c 'import sys; sys.stdout.write(" ".join("k" * n for n in [1000] + list(range(1025, 1060))) + "\n")' >"$S/long2/f"
    "$TADOC" pack -q "$S/long2" -o "$S/long2.tdc"
    diff <(oracle_sort "$S/long2") <("$TADOC" sort "$S/long2.tdc")
    diff <(oracle_wordcount "$S/long2") <("$TADOC" wordcount "$S/long2.tdc")
}

@test "mounted .search/WORD lists path:offset of every occurrence in the subtree" {
    "$TADOC" pack -q "$CORPORA/linux-slice" -o "$S/l.tdc"
    mkdir "$S/mnt"
    "$TADOCFS" "$S/l.tdc" "$S/mnt"
    for d in . kernel/sched lib; do
        for w in static sched_class u32 zz_absent; do
            want=$(oracle_search_tree "$CORPORA/linux-slice/$d" "$w")
            [ "$(cat "$S/mnt/$d/.search/$w")" = "$want" ] || { echo "$d $w"; false; }
        done
    done
    [ -d "$S/mnt/.search" ] && [ -z "$(ls -A "$S/mnt/.search")" ]
    ! ls -a "$S/mnt" | grep -q search
    fusermount3 -u "$S/mnt"
    # paths escaped as the analytics write them: one line an occurrence
    mkdir "$S/odd"
    echo 'hello there' >"$S/odd/"$'new\nline'
    echo 'say hello' >"$S/odd/"$'tab\there'
    echo 'hello' >"$S/odd/back\\slash"
    "$TADOC" pack -q "$S/odd" -o "$S/o.tdc"
    "$TADOCFS" "$S/o.tdc" "$S/mnt"
    [ "$(cat "$S/mnt/.search/hello")" = "$(printf '%s\n' 'back\\slash:0' 'new\nline:0' 'tab\there:4')" ]
    grep -F 'new\nline' "$S/mnt/.invindex"
}
