#!/usr/bin/env bash
# The analytics of an archive of several shards, shard by shard against the archive loaded
# whole: for each analytic over the whole archive, `tadoc ANALYTIC` with the archive loaded
# whole (TADOC_SHARDS=whole), shard by shard one shard at a time (TADOC_SHARDS=1) and on every
# core (the default), and where a GPU is usable the same two ways on the GPU (TADOC_GPU=on:
# the whole archive uploaded, or each shard uploaded alone), and with several GPUs, shard by
# shard over all of them. Wall seconds (best of REPEAT)
# and peak RSS of each, all outputs compared byte for byte with the first (a difference
# prints MISMATCH and the script exits 1 after the table).
# usage: bench/anashards.sh BUILD_DIR TREE NAME   (prints a markdown table on stdout)
#   ARCHIVE=FILE: this archive of TREE instead of packing it; SHARD_SIZE=SIZE: pack with it
#   ANALYTICS="wordcount ...": the analytics (default all six); REPEAT=N (default 3)
#   GPU=0: no GPU rows even where one is usable
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR TREE NAME" >&2; exit 2; }
build=$1 tree=${2%/} name=$3
tadoc="$build/tadoc"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/anashards.XXXXXX")
trap 'rm -rf "$w"' EXIT
analytics=${ANALYTICS:-wordcount sort invindex termvector seqcount rankedinvindex}
repeat=${REPEAT:-3}
a=${ARCHIVE:-$w/a.tdc}
if [ -z "${ARCHIVE:-}" ]; then
    "$tadoc" pack -q "$tree" -o "$a" ${SHARD_SIZE:+--shard-size "$SHARD_SIZE"}
fi
shards=$("$tadoc" stat "$a" | awk '/^shards/ {print $2}')
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}')
cpus=$(nproc)
gpu=0
if [ "${GPU:-1}" != 0 ] && "$tadoc" --version 2>/dev/null | grep -q 'gpu backend on'; then gpu=1; fi
ngpu=$([ "$gpu" = 1 ] && nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)

# timed CMD...: run it (stdout to $w/out), its wall seconds and peak RSS (KiB) into $w/time
# (GNU time, or where it is missing Python's resource module)
timed() {
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%e %M' -o "$w/time" "$@" >"$w/out" 2>"$w/err"
    else
        python3 -c 'import resource, subprocess, sys, time
t = time.time(); r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "wb"))
open(sys.argv[1] + ".time", "w").write("%.2f %d\n" % (time.time() - t,
    resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(r.returncode)' "$w/out" "$@" 2>"$w/err" && mv "$w/out.time" "$w/time"
    fi
}

# run ENV... : best wall seconds of $repeat and the peak RSS (MB) of `tadoc $an $a`, output
# into $w/out; sets $secs $rss
run() {
    secs="" rss=0
    for _ in $(seq "$repeat"); do
        env "$@" bash -c "$(declare -f timed); w='$w' timed '$tadoc' '$an' '$a'" ||
            { cat "$w/err" >&2; return 1; }
        local s r
        read -r s r <"$w/time"
        secs=$(awk -v a="$secs" -v b="$s" 'BEGIN { print (a == "" || b < a) ? b : a }')
        rss=$(awk -v a="$rss" -v b="$r" 'BEGIN { print (b / 1024 > a) ? b / 1024 : a }')
    done
}

echo "### $name: $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB of content, $shards shards, $cpus CPUs"
echo
cols="| analytic | output MB | whole, CPU s | RSS MB | by shard, 1 at once s | RSS MB | by shard, $cpus at once s | RSS MB |"
sep="|---|---|---|---|---|---|---|---|"
if [ "$gpu" = 1 ]; then
    cols="$cols whole, GPU s | RSS MB | by shard, 1 GPU s | RSS MB |"
    sep="$sep---|---|---|---|"
fi
if [ "$ngpu" -gt 1 ]; then
    cols="$cols by shard, $ngpu GPUs s | RSS MB |"
    sep="$sep---|---|"
fi
echo "$cols"
echo "$sep"
bad=0
for an in $analytics; do
    row="| $an"
    first=1
    modes=("TADOC_GPU=off TADOC_SHARDS=whole" "TADOC_GPU=off TADOC_SHARDS=1" "TADOC_GPU=off")
    [ "$gpu" = 1 ] && modes+=("TADOC_GPU=on TADOC_SHARDS=whole" "TADOC_GPU=on CUDA_VISIBLE_DEVICES=0")
    [ "$ngpu" -gt 1 ] && modes+=("TADOC_GPU=on")
    for m in "${modes[@]}"; do
        # shellcheck disable=SC2086
        run $m
        if [ "$first" = 1 ]; then
            cp "$w/out" "$w/want"
            row="$row | $(awk -v b="$(stat -c %s "$w/want")" 'BEGIN {printf "%.1f", b / 1e6}')"
            first=0
        elif ! cmp -s "$w/out" "$w/want"; then
            row="$row | MISMATCH"
            bad=1
        fi
        row="$row | $secs | $(printf '%.0f' "$rss")"
    done
    echo "$row |"
done
echo
echo "Command: \`$0 $*\`$( [ -n "${SHARD_SIZE:-}" ] && echo " with SHARD_SIZE=$SHARD_SIZE"). Each"
echo "time is the best of $repeat runs of one tadoc process (start, open, analytic, output to a file);"
echo "RSS is the largest peak of those runs. Every output equals the first column's byte for byte."
exit "$bad"
