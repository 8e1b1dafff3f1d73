#!/usr/bin/env bash
# Archive size, pack/unpack time, peak RSS and 64-byte random extract latency of tadoc, next to
# gzip -9, zstd -19 --long=27 and xz -9 over a tar of the same tree, all in this one run.
# usage: bench/pack.sh BUILD_DIR NAME TREE   (prints a markdown table on stdout)
set -euo pipefail
build=$1 name=$2 tree=$3
tadoc="$build/tadoc"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/packbench.XXXXXX")
trap 'rm -rf "$w"' EXIT
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
files=$(find "$tree" -type f | wc -l)

# run LABEL CMD...: wall seconds and peak RSS (KiB) of one command
measure() {
    /usr/bin/time -f '%e %M' -o "$w/time" "$@" >/dev/null
    read -r secs rss <"$w/time"
}

row() { # tool size pack_s rss_kib unpack_s extract
    awk -v t="$1" -v z="$2" -v p="$3" -v r="$4" -v u="$5" -v e="$6" -v b="$bytes" 'BEGIN {
        printf "| %s | %.1f | %.2f | %.1f | %.1f | %.0f | %.1f | %s |\n",
            t, z / 1e6, b / z, p, b / 1e6 / p, r / 1024, u, e }'
}

echo "### $name: $files files, $(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/1e6}') MB"
echo
echo "| tool | archive MB | ratio | pack s | pack MB/s | peak RSS MB | unpack s | 64 B random extract |"
echo "|---|---|---|---|---|---|---|---|"

measure "$tadoc" pack -q "$tree" -o "$w/a.tdc"
pack_s=$secs pack_rss=$rss
measure "$tadoc" unpack "$w/a.tdc" "$w/out"
unpack_s=$secs
diff -r --no-dereference "$tree" "$w/out" >/dev/null || { echo "tadoc round trip differs" >&2; exit 1; }
rm -rf "$w/out"
lat=$("$build/bench/extractlat" "$w/a.tdc" 100000 64 "$RANDOM")
med=$(awk '{print $10}' <<<"$lat") p99=$(awk '{print $12}' <<<"$lat")
row "tadoc" "$(stat -c %s "$w/a.tdc")" "$pack_s" "$pack_rss" "$unpack_s" "median ${med} µs, p99 ${p99} µs"
stat_out=$("$tadoc" stat "$w/a.tdc")
rm -f "$w/a.tdc"

tar cf "$w/t.tar" -C "$tree" .
for peer in "gzip -9" "zstd -19 --long=27" "xz -9"; do
    set -- $peer
    measure sh -c "$peer -c < '$w/t.tar' > '$w/t.z'"
    p_s=$secs p_rss=$rss
    dflag="-dc"
    [ "$1" = zstd ] && dflag="-dc --long=27"
    mkdir "$w/out"
    measure sh -c "$1 $dflag < '$w/t.z' | tar xf - -C '$w/out'"
    u_s=$secs
    rm -rf "$w/out"
    row "$peer" "$(stat -c %s "$w/t.z")" "$p_s" "$p_rss" "$u_s" "no random access: decompress the stream (${u_s} s for all)"
    rm -f "$w/t.z"
done
echo
echo "tadoc stat of the archive:"
echo '```'
echo "$stat_out" | sed -n '2,20p'
echo '```'
echo "extractlat: $lat"
