#!/usr/bin/env bash
# Pack throughput against threads, and the size shards cost: tadoc pack -j N at the default
# shard size for N = 1, 2, 4, ... up to the CPU count (JOBS="1 16" to choose), the same tree
# as one shard (ONE_SHARD=0 skips it: slow on big trees), and mksquashfs (zstd level 19,
# 1 MiB blocks, all cores) and zstd -19 --long=27 (one thread) of a tar of the tree where
# they are installed (PEERS=0 skips them), all in this run. SHARD_SIZE=SIZE packs the -j rows
# at that shard size instead of the default.
# usage: bench/packscale.sh BUILD_DIR NAME TREE   (prints a markdown table on stdout)
set -euo pipefail
build=$1 name=$2 tree=$3
tadoc="$build/tadoc"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/packscale.XXXXXX")
trap 'rm -rf "$w"' EXIT
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
cpus=$(nproc)
shard=(${SHARD_SIZE:+--shard-size "$SHARD_SIZE"})
label=${SHARD_SIZE:-default}
jobs=${JOBS:-$(n=1; while [ "$n" -lt "$cpus" ]; do printf '%s ' "$n"; n=$((n * 2)); done; echo "$cpus")}

measure() { # CMD...: wall seconds and peak RSS (KiB) into $secs $rss
    /usr/bin/time -f '%e %M' -o "$w/time" "$@" >/dev/null 2>"$w/err" || { cat "$w/err" >&2; return 1; }
    read -r secs rss <"$w/time"
}

echo "### $name: $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB of content, $cpus CPUs"
echo
echo "| packer | threads | shards | archive MB | pack s | MB/s | speedup | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|"
base=""
for j in $jobs; do
    measure "$tadoc" pack -q -j "$j" "${shard[@]}" "$tree" -o "$w/a.tdc"
    shards=$("$tadoc" stat "$w/a.tdc" | awk '/^shards/ {print $2}')
    [ -n "$base" ] || base=$secs
    awk -v j="$j" -v n="$shards" -v z="$(stat -c %s "$w/a.tdc")" -v s="$secs" -v r="$rss" \
        -v b="$bytes" -v t0="$base" -v l="$label" 'BEGIN {
        printf "| tadoc pack (shard size " l ") | %d | %d | %.2f | %.1f | %.1f | %.2f | %.0f |\n",
            j, n, z / 1e6, s, b / 1e6 / s, t0 / s, r / 1024 }'
done
if [ "${ONE_SHARD:-1}" = 1 ]; then
    measure "$tadoc" pack -q -j 1 --shard-size "$((bytes + 1048576))" "$tree" -o "$w/one.tdc"
    awk -v z="$(stat -c %s "$w/one.tdc")" -v s="$secs" -v r="$rss" -v b="$bytes" \
        -v d="$(stat -c %s "$w/a.tdc")" 'BEGIN {
        printf "| tadoc pack, one shard | 1 | 1 | %.2f | %.1f | %.1f | | %.0f |\n",
            z / 1e6, s, b / 1e6 / s, r / 1024 }'
    note=$(awk -v z="$(stat -c %s "$w/one.tdc")" -v d="$(stat -c %s "$w/a.tdc")" -v l="$label" 'BEGIN {
        printf "Shards of size %s: %+.2f%% of size against one shard.", l, (d / z - 1) * 100 }')
fi
if [ "${PEERS:-1}" = 1 ]; then
    if command -v mksquashfs >/dev/null; then
        measure mksquashfs "$tree" "$w/a.sqfs" -comp zstd -Xcompression-level 19 -b 1M \
            -processors "$cpus" -no-progress -quiet
        awk -v z="$(stat -c %s "$w/a.sqfs")" -v s="$secs" -v r="$rss" -v b="$bytes" -v c="$cpus" 'BEGIN {
            printf "| mksquashfs zstd-19 1 MiB | %d | | %.2f | %.1f | %.1f | | %.0f |\n",
                c, z / 1e6, s, b / 1e6 / s, r / 1024 }'
    fi
    if command -v zstd >/dev/null; then
        tar cf "$w/t.tar" -C "$tree" .
        measure zstd -q -19 --long=27 -T1 "$w/t.tar" -o "$w/t.zst"
        awk -v z="$(stat -c %s "$w/t.zst")" -v s="$secs" -v r="$rss" -v b="$bytes" 'BEGIN {
            printf "| zstd -19 --long=27 of a tar | 1 | | %.2f | %.1f | %.1f | | %.0f |\n",
                z / 1e6, s, b / 1e6 / s, r / 1024 }'
    fi
fi
[ -z "${note:-}" ] || printf '\n%s\n' "$note"
