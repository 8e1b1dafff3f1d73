#!/usr/bin/env bats
# Files that do not compress (gzip files, random bytes) are stored as their text, in shards of
# their own (codec zstd-text): the archive is smaller than with every file in a grammar and
# its text shards no larger than their bytes; unpack, cat at the cuts, verify, the six
# analytics (against the plain pipelines) and the mount, with -o mem= too, read them exactly;
# writes and compaction keep them stored as text (a shard copied with removed files' pieces
# still reads as text; an archive of one text shard stays text); damage to one costs only
# its files.

load helpers
load ../oracles
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

setup() {
    scratch_mnt
    T=$S/tree
    mkdir -p "$T/gz" "$T/bin" "$T/text"
    for f in "$CORPORA"/brown/ca0*; do gzip -9 -n -c "$f" >"$T/gz/$(basename "$f").gz"; done
    cp "$T/gz/ca01.gz" "$T/gz/again.gz"
    rand 1 200000 >"$T/bin/random" # cut over several 64K text shards
    rand 2 400 >"$T/bin/small"     # too short to judge: in a grammar
    cp "$CORPORA"/brown/cb0* "$T/text/"
    { cat "$CORPORA/brown/cb01"; rand 3 3000; } >"$T/text/mixed" # judged by its start: text
}

teardown() {
    scratch_mnt_free
}

# Stored and content bytes of the shards stored as text of archive $1, one line each.
text_shards() {
    "$TADOC" stat "$1" | awk 'BEGIN {k = 0} /^shards/ {on = 1; next} /^sections/ {on = 0; sec = 1}
        on && $1 ~ /^[0-9]+$/ { content[$1] = $2; stored[$1] = $3 }
        sec && $1 == "dictionary" { if ($2 == "zstd-text") print stored[k], content[k]; k++ }'
}

# The shard loads of mount $1 that serve reads from a text shard's bytes.
text_loads() {
    getfattr -n user.tadoc.shard_cache --only-values "$1" | tr ';,' '\n\n' | awk '$2 == "text" { print $1 }'
}

# Which files went to text shards is checked through the sizes: the text shards' content
# adds up to the incompressible files' bytes.
@test "text shards: incompressible files stored as text, smaller, read back exactly" {
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 64K
    TADOC_NO_TEXT=1 "$TADOC" pack -q "$T" -o "$S/plain.tdc" --shard-size 64K
    text_shards "$S/a.tdc" >"$S/ts"
    [ "$(wc -l <"$S/ts")" -ge 4 ]
    [ -z "$(text_shards "$S/plain.tdc")" ]
    # exactly the gzip files and bin/random went to text shards
    want=$(cat "$T"/gz/* "$T/bin/random" | wc -c)
    [ "$(awk '{ s += $2 } END { print s }' "$S/ts")" -eq "$want" ]
    # each stored in at most its bytes and a frame's overhead; the archive smaller than plain
    awk '{ if ($1 > $2 + $2 / 100 + 64) { print "shard stored in", $1, "for", $2; exit 1 } }' "$S/ts"
    [ "$(stat -c %s "$S/a.tdc")" -lt "$(stat -c %s "$S/plain.tdc")" ]
    "$TADOC" verify "$S/a.tdc"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r "$T" "$S/out"
    [ "$(tree_meta "$T")" = "$(tree_meta "$S/out")" ]
    for off in 0 65535 65536 131071 131072 199990; do
        cmp <("$TADOC" extract "$S/a.tdc" bin/random "$off" 100) \
            <(tail -c +$((off + 1)) "$T/bin/random" | head -c 100)
    done
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        cmp <("$TADOC" "$an" "$S/a.tdc") <("oracle_$an" "$T") || { echo "$an differs"; false; }
        cmp <("$TADOC" "$an" "$S/a.tdc" gz) <("oracle_$an" "$T/gz") || { echo "$an gz differs"; false; }
    done
}

@test "text shards: the mount reads them (also under mem=), writes and compaction keep them as text" {
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 64K
    mnt -o ro,mem=64K "$S/a.tdc" "$M"
    diff -r "$T" "$M"
    # Reads of text shards copy their bytes (the loads "as text"), at the cuts too; the word
    # counts need their tokens.
    [ "$(text_loads "$M")" -ge 4 ]
    for off in 0 65535 65536 131071 131072 199990; do
        cmp <(dd if="$M/bin/random" iflag=skip_bytes,count_bytes skip="$off" count=100 status=none) \
            <(tail -c +$((off + 1)) "$T/bin/random" | head -c 100)
    done
    cmp "$M/.wordcount" <(oracle_wordcount "$T")
    fusermount3 -u "$M"
    mnt -o compact_threshold=0 "$S/a.tdc" "$M"
    cb01=$(stat -c %s "$T/text/cb01")
    rand 4 5000 >"$S/new"
    for d in "$M" "$T"; do
        printf XYZ | dd of="$d/bin/random" bs=1 seek=100000 conv=notrunc status=none
        cp "$S/new" "$d/bin/new"
        echo more >>"$d/text/cb01"
        cat "$d/gz/ca02.gz" >>"$d/gz/ca03.gz"
        rm "$d/gz/again.gz"
    done
    diff -r "$T" "$M"
    fusermount3 -u "$M"
    "$TADOC" compact "$S/a.tdc"
    "$TADOC" verify "$S/a.tdc"
    rm -rf "$S/out"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r "$T" "$S/out"
    # The incompressible files, kept and new, are all in text shards again: the other shards
    # hold no more than the other files and the old text/cb01 (dead bytes a shard keeps
    # until it is worth rebuilding).
    all=$("$TADOC" stat "$S/a.tdc" | awk '/^shards/ {on = 1; next} /^sections/ {on = 0}
        on && $1 ~ /^[0-9]+$/ { s += $2 } END { print s }')
    text=$(text_shards "$S/a.tdc" | awk '{ s += $2 } END { print s }')
    [ "$text" -ge "$(cat "$T"/gz/* "$T/bin/random" "$T/bin/new" | wc -c)" ]
    [ $((all - text)) -le $(($(cat "$T"/text/* "$T/bin/small" | wc -c) + cb01)) ]
}

@test "text shards: a damaged one costs only its files" {
    "$TADOC" pack -q "$T" -o "$S/a.tdc" --shard-size 64K
    # the first text shard: its dictionary section holds the text
    k=$("$TADOC" stat "$S/a.tdc" | awk '/^sections/ {on = 1} on && $1 == "dictionary" {
        if ($2 == "zstd-text") { print n + 0; exit } n++ }')
    read -r off stored < <("$TADOC" stat "$S/a.tdc" | awk -v k="$k" '/^sections/ {on = 1}
        on && $1 == "dictionary" && n++ == k { print $3, $4 }')
    cp "$S/a.tdc" "$S/x.tdc"
    flip_byte "$S/x.tdc" $((off + stored / 2))
    run "$TADOC" verify "$S/x.tdc"
    [ "$status" -eq 3 ]
    [[ "$output" == *"damaged: shard $k: section dictionary: checksum mismatch"* ]]
    # every text file reads and every file the damage names fails
    for f in text/cb01 text/mixed bin/small; do
        "$TADOC" cat "$S/x.tdc" "$f" | cmp - "$T/$f"
    done
    bad=$(echo "$output" | sed -n "s/^tadoc: \(.*\): content lies in damaged shard $k\$/\1/p")
    [ -n "$bad" ]
    for f in $bad; do
        run "$TADOC" cat "$S/x.tdc" "$f"
        [ "$status" -eq 3 ]
    done
    # unpack restores every other file, names each damaged one and leaves it out
    run "$TADOC" unpack "$S/x.tdc" "$S/un"
    [ "$status" -eq 3 ]
    [[ "$output" == *"files not restored: their content lies in damaged shards"* ]]
    for f in $bad; do
        [ ! -e "$S/un/$f" ]
        [[ "$output" == *"'$f' cannot be read: its content lies in a damaged shard (shard $k"* ]]
    done
    diff -r "$T" "$S/un" >"$S/d" || true
    [ "$(grep -vc '^Only in' "$S/d")" -eq 0 ]
    [ "$(wc -l <"$S/d")" -eq "$(echo "$bad" | wc -w)" ]
    # The mount under a budget, where reads of text shards copy their bytes: the same.
    mnt -o ro,mem=64K "$S/x.tdc" "$M"
    for f in text/cb01 text/mixed bin/small; do
        cmp "$M/$f" "$T/$f"
    done
    for f in $bad; do
        run cat "$M/$f"
        [ "$status" -ne 0 ] && [[ "$output" == *"Input/output error"* ]]
    done
    fusermount3 -u "$M"
}

@test "text shards: one that lost a file and was copied by compaction still reads as text" {
    mkdir "$S/few"
    rand 10 96000 | split -b 6000 -d - "$S/few/r" # r00 to r15
    "$TADOC" pack -q "$S/few" -o "$S/f.tdc" --shard-size 64K
    [ "$(text_shards "$S/f.tdc" | wc -l)" -eq 2 ]
    # r02, a tenth of its shard, is removed: too little for compaction to rebuild the shard,
    # which it copies as it is, r02's piece in it.
    mnt "$S/f.tdc" "$M"
    rm "$M/r02" "$S/few/r02"
    fusermount3 -u "$M"
    before=$(text_shards "$S/f.tdc")
    "$TADOC" compact "$S/f.tdc"
    [ "$(text_shards "$S/f.tdc")" = "$before" ]
    "$TADOC" verify "$S/f.tdc"
    "$TADOC" cat "$S/f.tdc" r01 | cmp - "$S/few/r01"
    # the mount reads both shards as text (the grammar of the copied one is never made)
    mnt -o ro,mem=64K "$S/f.tdc" "$M"
    diff -r "$S/few" "$M"
    [ "$(text_loads "$M")" -ge 2 ]
    fusermount3 -u "$M"
}

@test "text shards: an archive of one text shard stays text through compaction, new files beside" {
    mkdir "$S/one"
    rand 11 48000 | split -b 6000 -d - "$S/one/r" # r00 to r07
    "$TADOC" pack -q "$S/one" -o "$S/o.tdc"
    [ "$(text_shards "$S/o.tdc" | wc -l)" -eq 1 ]
    [ "$("$TADOC" stat "$S/o.tdc" | awk '$1 == "shards" { print $2 }')" -eq 1 ]
    mnt "$S/o.tdc" "$M"
    for d in "$M" "$S/one"; do
        rm "$d/r03"
        printf 'plain words for a grammar\n' >"$d/notes.txt"
    done
    fusermount3 -u "$M"
    "$TADOC" compact "$S/o.tdc"
    "$TADOC" verify "$S/o.tdc"
    # the seven random files in a text shard no larger than their bytes, the new text beside
    read -r stored content < <(text_shards "$S/o.tdc")
    [ "$content" -eq 42000 ] && [ "$stored" -le 42100 ]
    rm -rf "$S/out"
    "$TADOC" unpack "$S/o.tdc" "$S/out"
    diff -r "$S/one" "$S/out"
}

# Codec of the dictionary section of each shard of archive $1, one line each.
shard_codecs() {
    "$TADOC" stat "$1" | awk '/^sections/ {on = 1} on && $1 == "dictionary" { print $2 }'
}

@test "bare text: a shard of text smaller under zstd than as a grammar is stored so, and reads, analyses and compacts as one" {
    L=$CORPORA/linux-slice
    "$TADOC" pack -q "$L" -o "$S/a.tdc"
    TADOC_NO_BARE=1 "$TADOC" pack -q "$L" -o "$S/g.tdc"
    [ "$(shard_codecs "$S/a.tdc")" = zstd-bare ]
    [ "$(shard_codecs "$S/g.tdc")" != zstd-bare ]
    a=$(stat -c %s "$S/a.tdc") g=$(stat -c %s "$S/g.tdc")
    [ "$a" -lt $((g - g / 100)) ] || { echo "bare $a, grammar $g"; false; }
    "$TADOC" verify "$S/a.tdc"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r "$L" "$S/out"
    [ "$(tree_meta "$L")" = "$(tree_meta "$S/out")" ]
    # its tokens are the grammar's: every analytic, whole and of a scope, is the grammar's
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        cmp <("$TADOC" "$an" "$S/a.tdc") <("$TADOC" "$an" "$S/g.tdc") || { echo "$an"; false; }
        cmp <("$TADOC" "$an" "$S/a.tdc" fs) <("$TADOC" "$an" "$S/g.tdc" fs) || { echo "$an fs"; false; }
    done
    f=kernel/sched/core.c
    cmp <("$TADOC" search "$S/a.tdc" "$f" rq) <("$TADOC" search "$S/g.tdc" "$f" rq)
    # the mount reads its files as text under a small budget; the word count needs its tokens
    mnt -o ro,mem=64K "$S/a.tdc" "$M"
    diff -r "$L" "$M"
    [ "$(text_loads "$M")" -ge 1 ]
    cmp "$M/.wordcount" <("$TADOC" wordcount "$S/g.tdc")
    fusermount3 -u "$M"
    # edits, then compaction: the shard a compaction builds of the files it moves is stored
    # bare again, smaller so than as a grammar (at compaction's zstd level, 9, against the
    # grammar's pack at 19), none as text with references
    cp -r "$L" "$S/model"
    mnt -o compact_threshold=0 "$S/a.tdc" "$M"
    for d in "$M" "$S/model"; do
        echo "/* appended */" >>"$d/$f"
        cp "$L/fs/fuse/dev.c" "$d/fs/dev-copy.c"
        rm "$d/lib/zstd/compress/zstd_lazy.c"
    done
    fusermount3 -u "$M"
    "$TADOC" compact "$S/a.tdc"
    "$TADOC" verify "$S/a.tdc"
    ! shard_codecs "$S/a.tdc" | grep -qx zstd-text
    shard_codecs "$S/a.tdc" | grep -qx zstd-bare
    a=$(stat -c %s "$S/a.tdc")
    [ "$a" -le "$g" ] || { echo "compacted $a, grammar $g"; false; }
    rm -rf "$S/out"
    "$TADOC" unpack "$S/a.tdc" "$S/out"
    diff -r "$S/model" "$S/out"
    cmp <("$TADOC" wordcount "$S/a.tdc") <(oracle_wordcount "$S/model")
}
