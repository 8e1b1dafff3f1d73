#!/usr/bin/env bats
# Copies of a file (same size and content hash) are packed right after the first one, in its
# shard, wherever they lie in the tree: the archive stores them in next to nothing, whether
# the first is stored as its text (a text shard) or in a grammar; `TADOC_NO_COPIES=1` packs
# them in their own places. Every copy reads back exactly: unpack, cat, verify, the mount
# under a small budget (whose reads of a copy load the first's shard) and the analytics.

load helpers
load ../oracles
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

setup() {
    scratch_mnt
    T=$S/tree
    mkdir -p "$T/a" "$T/m" "$T/z"
    rand 5 20000 >"$T/a/noise"
    cp "$CORPORA/brown/cb01" "$T/a/text"
    # Between them and their copies, more than a shard of other files: other groups.
    cp "$CORPORA"/brown/ca0* "$T/m/"
    cp "$T/a/noise" "$T/z/noise-copy"
    cp "$T/a/text" "$T/z/text-copy"
    cp "$T/a/text" "$T/z/text-copy2"
    # The same size, other bytes: not a copy.
    { printf X; tail -c +2 "$T/a/noise"; } >"$T/z/noise-other"
    ln "$T/a/noise" "$T/m/noise-link" # a hard link: one inode, not a copy
}

teardown() {
    scratch_mnt_free
}

@test "copies: packed with the first, stored in next to nothing, read back exactly" {
    run "$TADOC" pack "$T" -o "$S/a.tdc" --shard-size 32K
    [ "$status" -eq 0 ]
    # noise-copy, text-copy and text-copy2; not noise-other, nor the hard link
    copied=$((20000 + 2 * $(stat -c %s "$T/a/text")))
    [[ "$output" == *"copies     3 files ($copied bytes) packed beside their first"* ]]
    TADOC_NO_COPIES=1 "$TADOC" pack -q "$T" -o "$S/apart.tdc" --shard-size 32K
    [ "$(shards_of "$S/a.tdc")" -ge 4 ]
    a=$(stat -c %s "$S/a.tdc")
    apart=$(stat -c %s "$S/apart.tdc")
    # Apart, the copies cost at least the noise's 20000 bytes and the text's compressed size
    # twice; together, next to nothing. (A copy joins the first's shard where both fit in two
    # shards' worth: a file larger than a shard is not looked at here.)
    text=$(zstd -19 -c "$T/a/text" | wc -c)
    echo "together $a, apart $apart, the text compressed $text"
    [ $((apart - a)) -ge $((20000 + 2 * text - 2000)) ]
    "$TADOC" verify "$S/a.tdc"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r "$T" "$S/out"
    [ "$(tree_meta "$T")" = "$(tree_meta "$S/out")" ]
    [ "$(stat -c %i "$S/out/a/noise")" = "$(stat -c %i "$S/out/m/noise-link")" ]
    [ "$(stat -c %i "$S/out/a/noise")" != "$(stat -c %i "$S/out/z/noise-copy")" ]
    for f in z/noise-copy z/text-copy2 z/noise-other; do
        "$TADOC" cat "$S/a.tdc" "$f" | cmp - "$T/$f"
        cmp <("$TADOC" extract "$S/a.tdc" "$f" 1000 3000) <(tail -c +1001 "$T/$f" | head -c 3000)
    done
    # (the scopes without the hard link's two names, which the pipelines count twice)
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        for d in a z; do
            cmp <("$TADOC" "$an" "$S/a.tdc" $d) <("oracle_$an" "$T/$d") || { echo "$an $d differs"; false; }
        done
    done
}

@test "copies: the mount reads them under a small budget, and compaction keeps them exact" {
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 32K
    mnt -o ro,mem=64K "$S/a.tdc" "$M"
    diff -r "$T" "$M"
    fusermount3 -u "$M"
    mnt -o compact_threshold=0 "$S/a.tdc" "$M"
    for d in "$M" "$T"; do
        echo more >>"$d/z/text-copy" # a copy no longer
        cp "$d/a/noise" "$d/m/noise-new"
    done
    fusermount3 -u "$M"
    "$TADOC" compact "$S/a.tdc"
    "$TADOC" verify "$S/a.tdc"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r "$T" "$S/out"
}
