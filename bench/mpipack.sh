#!/usr/bin/env bash
# tadoc-mpi pack against its rank count: the tree DIR packed by `tadoc pack` on one thread and
# on every core, and by tadoc-mpi on N ranks of this machine (N = 1, 2, 4, ... up to the CPU
# count, or RANKS="1 2"), each rank packing with CPUs/N threads; wall seconds, content MB/s
# and speedup over one rank, all in this run. Every archive must hold the same shards as
# tadoc's (tadoc stat's shard and section figures; MISMATCH and exit 1 otherwise).
# usage: bench/mpipack.sh BUILD_DIR DIR NAME   (prints a markdown table on stdout)
#   SHARD_SIZE=SIZE (default: tadoc pack's); RANKS="1 2 ..."
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR DIR NAME" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
build=$1 dir=$2 name=$3
mpi_setup "$build"
size=(${SHARD_SIZE:+--shard-size "$SHARD_SIZE"})
# the archive's shard and section figures, without what its random id changes
figures() { "$tadoc" stat "$1" | grep -v -e '^archive' -e '^size' -e 'file table' -e 'shard table'; }

one=$(wall "$tadoc" pack -q "$dir" -o "$w/want.tdc" "${size[@]}" -j 1)
all=$(wall "$tadoc" pack -q "$dir" -o "$w/want.tdc" "${size[@]}")
figures "$w/want.tdc" >"$w/want"
bytes=$("$tadoc" stat "$w/want.tdc" | awk '/^content/ {print $2}')
shards=$("$tadoc" stat "$w/want.tdc" | awk '/^shards/ {print $2}')
rate() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.1f", b / 1e6 / s }'; }

echo "### $name: $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB of content, $shards shards, $cpus CPUs"
echo
echo "| packer | threads per rank | s | MB/s | speedup over 1 rank | same shards as tadoc |"
echo "|---|---|---|---|---|---|"
echo "| tadoc pack -j 1 | 1 | $one | $(rate "$one") | | |"
echo "| tadoc pack | $cpus | $all | $(rate "$all") | | |"
bad=0 base=""
for r in $ranks; do
    j=$((cpus / r > 0 ? cpus / r : 1))
    s=$(wall mpi_run "$r" pack -q "$dir" -o "$w/got.tdc" "${size[@]}" -j "$j")
    same=yes
    if ! figures "$w/got.tdc" | cmp -s - "$w/want"; then
        same=MISMATCH
        bad=1
    fi
    [ -z "$base" ] && base=$s
    echo "| tadoc-mpi, $r ranks | $j | $s | $(rate "$s") | $(awk -v a="$base" -v b="$s" 'BEGIN { printf "%.2f", a / b }') | $same |"
done
echo
echo "Command: \`$0 $*\`. One run each, wall time of the whole process (mpirun's start included)."
exit "$bad"
