#!/usr/bin/env bash
# `tadoc ANALYTIC` on one archive in three modes, on a machine with an NVIDIA GPU: the CPU on
# every core (shard by shard, TADOC_GPU=off), one GPU with the whole archive uploaded
# (TADOC_GPU=on; it fits), and the GPU shard by shard (TADOC_GPU=on TADOC_GPU_MEM=1, so no
# whole upload fits: each shard goes through the GPUs alone, parts merged on the host; with
# several GPUs also on the first alone, CUDA_VISIBLE_DEVICES=0, and the speedup of all of them
# over it); then the default, auto, against the fastest of the three. Wall seconds and peak resident memory
# of the whole process (CUDA start and the archive's load included), every output compared
# byte for byte with the CPU's (MISMATCH, exit 1).
# usage: bench/gpumodes.sh BUILD_DIR ARCHIVE NAME   (prints a markdown table on stdout)
#   ANALYTICS="wordcount ..." (default all six); SCOPE=PATH (default the whole archive);
#   REPS=N runs of each, the median taken (default 1)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR ARCHIVE NAME" >&2; exit 2; }
build=$1 a=$2 name=$3
tadoc="$build/tadoc"
w=$(mktemp -d "${BENCH_TMP:-/tmp}/gpumodes.XXXXXX")
trap 'rm -rf "$w"' EXIT
analytics=${ANALYTICS:-wordcount sort invindex termvector seqcount rankedinvindex}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
gpus=$(nvidia-smi -L | wc -l)
bytes=$("$tadoc" stat "$a" | awk '/^content/ {print $2}')
shards=$("$tadoc" stat "$a" | awk '/^shards/ {print $2}')

run() { # OUT ENV...: "seconds peak_MB" of tadoc ANALYTIC with the environment ENV (medians)
    local out=$1 i
    shift
    : >"$w/times"
    for ((i = 0; i < ${REPS:-1}; i++)); do
        env -u TADOC_GPU "$@" /usr/bin/time -f "%e %M" -o "$w/time" "$tadoc" "$an" "$a" ${SCOPE:+"$SCOPE"} >"$out"
        cat "$w/time" >>"$w/times"
    done
    sort -n "$w/times" | awk '{ t[NR] = $1; m[NR] = $2 } END { i = int((NR + 1) / 2); printf "%.2f %.0f\n", t[i], m[i] / 1024 }'
}

echo "### $name${SCOPE:+, scope $SCOPE}: $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB of content, $shards shards; $gpus x $card, $(nproc) CPUs"
echo
multi=$([ "$gpus" -gt 1 ] && echo "| 1 GPU, shard by shard s | speedup of $gpus GPUs " || true)
echo "| analytic | CPU, every core s | MB | GPU, whole archive s | MB | GPU, shard by shard s | MB ${multi}| auto s | auto / fastest | output MB |"
echo "|---|---|---|---|---|---|---|$([ -n "$multi" ] && echo "---|---|")---|---|---|"
bad=0
for an in $analytics; do
    read -r cs cm < <(run "$w/cpu" TADOC_GPU=off)
    read -r ws wm < <(run "$w/out" TADOC_GPU=on)
    cmp -s "$w/cpu" "$w/out" || { ws="$ws MISMATCH"; bad=1; }
    read -r ss sm < <(run "$w/out" TADOC_GPU=on TADOC_GPU_MEM=1)
    cmp -s "$w/cpu" "$w/out" || { ss="$ss MISMATCH"; bad=1; }
    one=
    if [ -n "$multi" ]; then
        read -r s1 _ < <(run "$w/out" TADOC_GPU=on TADOC_GPU_MEM=1 CUDA_VISIBLE_DEVICES=0)
        cmp -s "$w/cpu" "$w/out" || { s1="$s1 MISMATCH"; bad=1; }
        one="| $s1 | $(awk -v a="${ss%% *}" -v b="${s1%% *}" 'BEGIN { printf "%.2f", b / a }') "
    fi
    read -r as _ < <(run "$w/out")
    cmp -s "$w/cpu" "$w/out" || { as="$as MISMATCH"; bad=1; }
    ratio=$(awk -v a="${as%% *}" -v x="$cs" -v y="${ws%% *}" -v z="${ss%% *}" \
        'BEGIN { m = x; if (y < m) m = y; if (z < m) m = z; printf "%.2f", a / m }')
    echo "| $an | $cs | $cm | $ws | $wm | $ss | $sm ${one}| $as | $ratio | $(stat -c %s "$w/cpu" | awk '{printf "%.0f", $1 / 1e6}') |"
    rm -f "$w/cpu" "$w/out"
done
echo
echo "Command: \`$0 $*\`${SCOPE:+ (SCOPE=$SCOPE)}. Median of ${REPS:-1} run(s) each; wall time and peak RSS of the whole tadoc process."
exit "$bad"
