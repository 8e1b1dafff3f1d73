#!/usr/bin/env bash
# tadoc-mpi against its rank count: each analytic over the whole archive on N ranks of this
# machine (N = 1, 2, 4, ... up to the CPU count, or RANKS="1 2"), each rank working on one
# shard at a time (TADOC_SHARDS=1, so the ranks are the parallelism), against `tadoc` on one
# shard at a time and on every core, all in this run: wall seconds, content MB/s, speedup over
# one rank; every output compared byte for byte with tadoc's (MISMATCH, exit 1).
# usage: bench/mpi.sh BUILD_DIR ARCHIVE NAME   (prints a markdown table on stdout)
#   ANALYTICS="wordcount ..." (default all six); RANKS="1 2 ..."
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR ARCHIVE NAME" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
build=$1 a=$2 name=$3
mpi_setup "$build"
analytics=${ANALYTICS:-wordcount sort invindex termvector seqcount rankedinvindex}
bytes=$("$tadoc" stat "$a" | awk '/^content/ {print $2}')
shards=$("$tadoc" stat "$a" | awk '/^shards/ {print $2}')

rate() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }

echo "### $name: $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB of content, $shards shards, $cpus CPUs"
echo
head="| analytic | tadoc, 1 shard at once s | tadoc, $cpus at once s |"
sep="|---|---|---|"
for r in $ranks; do
    head="$head $r ranks s | MB/s | speedup |"
    sep="$sep---|---|---|"
done
echo "$head"
echo "$sep"
bad=0
for an in $analytics; do
    one=$(TADOC_SHARDS=1 wall "$tadoc" "$an" "$a")
    cp "$w/out" "$w/want"
    all=$(wall "$tadoc" "$an" "$a")
    row="| $an | $one | $all"
    base=""
    for r in $ranks; do
        # the output into a file (-o): through mpirun's forwarded stdout it would cost more
        # than the analytic; ranks unbound, so that each rank's threads may use every core
        s=$(TADOC_SHARDS=1 wall mpi_run "$r" "$an" "$a" -o "$w/mpi.out")
        mv "$w/mpi.out" "$w/out"
        if ! cmp -s "$w/out" "$w/want"; then
            row="$row | MISMATCH"
            bad=1
        fi
        [ -z "$base" ] && base=$s
        row="$row | $s | $(rate "$s") | $(awk -v a="$base" -v b="$s" 'BEGIN { printf "%.2f", a / b }')"
    done
    echo "$row |"
done
echo
echo "Command: \`$0 $*\`. One run each, wall time of the whole process (mpirun's start included)."
exit "$bad"
