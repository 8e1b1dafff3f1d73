#!/usr/bin/env bash
# Ablation of the section-size techniques on one tree: the archive with each
# technique alone and together (TADOC_NO_FRONT=1 turns off the front-coded dictionary codec,
# TADOC_FREQ_ORDER=1 the text order within frequency classes, TADOC_NO_PRUNE=1 the inlining
# of rules that do not pay for themselves, TADOC_NO_KIND=1 the kind layout of rules and root,
# TADOC_NO_COLS=1 the file table in columns, TADOC_NO_TEXT=1 the shards stored as their text,
# TADOC_NO_BARE=1 the text without token references, for grammar shards smaller so too,
# TADOC_NO_COPIES=1 the copies of a file packed right after the first, in its shard),
# each with its pack time, its whole-archive decode time (tests/codecs -d: best of five,
# dictionary and root on a second thread) and its rate loading each shard alone on one core
# (as a read or an analytic does; best of five a shard), next to zstd -19 --long=27 and xz -9 of a tar of the
# tree and mksquashfs (zstd level 19, 1 MiB blocks) of the tree, made in the same run.
# NO_PEERS=1 leaves the peers out (their columns '-'): for a tree whose tar takes zstd -19 and
# xz -9 half an hour each, where another table of the same tree has them.
# usage: [NO_PEERS=1] bench/codecs.sh BUILD_DIR NAME TREE   (prints a markdown table on stdout)
set -euo pipefail
build=$1 name=$2 tree=$3
w=$(mktemp -d "${BENCH_TMP:-/tmp}/codecbench.XXXXXX")
trap 'rm -rf "$w"' EXIT
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')

echo "### $name: $(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/1e6}') MB of content"
echo
echo "| archive | bytes | vs zstd -19 --long=27 | vs xz -9 | vs squashfs | pack s | decode ms | decode MB/s of content | shard by shard, MB/s of content a core |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
zs='' xs='' qs=''
if [ -z "${NO_PEERS:-}" ]; then
    tar cf "$w/t.tar" -C "$tree" .
    zs=$(zstd -19 --long=27 -q -c <"$w/t.tar" | wc -c)
    xs=$(xz -9 -c <"$w/t.tar" | wc -c)
    mksquashfs "$tree" "$w/t.sqfs" -comp zstd -Xcompression-level 19 -b 1M -noappend -quiet \
        -no-progress >/dev/null
    qs=$(stat -c %s "$w/t.sqfs")
    rm -f "$w/t.tar" "$w/t.sqfs"
fi
rel() { [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }' || echo -; }
while IFS='|' read -r label envs; do
    p=$(env $envs /usr/bin/time -f '%e' -o "$w/time" "$build/tadoc" pack -q "$tree" -o "$w/a.tdc" && cat "$w/time")
    sz=$(stat -c %s "$w/a.tdc")
    d=$("$build/tests/codecs" -d "$w/a.tdc")
    ms=$(sed -n 's/.*decoded in \([0-9.]*\) ms.*/\1/p' <<<"$d")
    rate=$(sed -n 's/.*: \([0-9]*\) MB\/s of content;.*/\1/p' <<<"$d")
    srate=$(sed -n 's/.*shard by shard.*: \([0-9]*\) MB\/s of content$/\1/p' <<<"$d")
    echo "| $label | $sz | $(rel "$sz" "$zs") | $(rel "$sz" "$xs") | $(rel "$sz" "$qs") | $p | $ms | $rate | $srate |"
done <<'EOF'
none of the eight (zstd only, frequency order, every rule, plain layout, file table in rows, no text shard, no bare text, copies apart)|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_TEXT=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
front-coded dictionary alone|TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_TEXT=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
class text order alone|TADOC_NO_FRONT=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_TEXT=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
rule pruning alone|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_TEXT=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
kind layout alone|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_COLS=1 TADOC_NO_TEXT=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
file table in columns alone|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_TEXT=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
text shards alone (with references)|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_COPIES=1 TADOC_NO_BARE=1
text shards and bare text alone|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_COPIES=1
copies with the first alone|TADOC_NO_FRONT=1 TADOC_FREQ_ORDER=1 TADOC_NO_PRUNE=1 TADOC_NO_KIND=1 TADOC_NO_COLS=1 TADOC_NO_TEXT=1 TADOC_NO_BARE=1
all but the kind layout|TADOC_NO_KIND=1
all but the file table in columns|TADOC_NO_COLS=1
all but text shards|TADOC_NO_TEXT=1
all but copies with the first|TADOC_NO_COPIES=1
all but bare text|TADOC_NO_BARE=1
all eight (the default)|TADOC_DEFAULTS=1
EOF
[ -n "${NO_PEERS:-}" ] && exit 0
echo "| zstd -19 --long=27 of a tar | $zs | | $(rel "$zs" "$xs") | $(rel "$zs" "$qs") | | | | |"
echo "| xz -9 of a tar | $xs | $(rel "$xs" "$zs") | | $(rel "$xs" "$qs") | | | | |"
echo "| mksquashfs, zstd 19, 1 MiB blocks | $qs | $(rel "$qs" "$zs") | $(rel "$qs" "$xs") | | | | | |"
