#!/usr/bin/env bash
# tadoc-mpi count and search on one large file cut over many shards (a log or a dump), against
# its rank count: `tadoc count|search` (one process, the file's shards loaded and merged),
# `tadoc-mpi` on N ranks of this machine (each rank's run of the file's shards queried one
# shard at a time on its threads), and `grep -aow WORD FILE | wc -l` on the plain file in the
# page cache, all in this run: wall seconds and the answer; every tadoc-mpi output compared
# byte for byte with tadoc's (MISMATCH, exit 1).
# usage: bench/mpiquery.sh BUILD_DIR FILE NAME   (prints a markdown table on stdout)
#   WORDS="w1 w2 ..." (default: static kthread zzzqqq); RANKS="1 2 ..."; SHARD_SIZE (pack's)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR FILE NAME" >&2; exit 2; }
source "$(dirname "$0")/lib.sh"
build=$1 file=$2 name=$3
mpi_setup "$build"
words=${WORDS:-static kthread zzzqqq}
a=$w/a.tdc base=$(basename "$file")
mkdir "$w/tree"
ln "$file" "$w/tree/$base" 2>/dev/null || cp "$file" "$w/tree/$base"
t0=$(now)
"$tadoc" pack -q "$w/tree" -o "$a" ${SHARD_SIZE:+--shard-size "$SHARD_SIZE"}
packs=$(since "$t0")
bytes=$(stat -c %s "$file")
shards=$("$tadoc" stat "$a" | awk '/^shards/ {print $2}')
cat "$file" >/dev/null # the grep reads from the page cache, as tadoc reads its archive

echo "### $name: one file of $(mb "$bytes") MB, archive $(mb "$(stat -c %s "$a")") MB in $shards shards (pack ${packs} s), $cpus CPUs"
echo
head="| query | answer | grep -aow \\| wc -l | its s | tadoc s |"
sep="|---|---:|---:|---:|---:|"
for r in $ranks; do
    head="$head $r ranks s |"
    sep="$sep---:|"
done
echo "$head"
echo "$sep"
bad=0
for wd in $words; do
    for q in count search; do
        g=$(wall sh -c "grep -aow -- '$wd' '$file' | wc -l")
        ga=$(cat "$w/out")
        t=$(wall "$tadoc" "$q" "$a" "$base" "$wd")
        cp "$w/out" "$w/want"
        answer=$(wc -l <"$w/want")
        [ "$q" = count ] && answer=$(cat "$w/want")
        row="| $q $wd | $answer | $ga | $g | $t"
        for r in $ranks; do
            s=$(wall mpi_run "$r" "$q" "$a" "$base" "$wd" -o "$w/mpi.out")
            if ! cmp -s "$w/mpi.out" "$w/want"; then
                row="$row | MISMATCH"
                bad=1
            fi
            row="$row | $s"
        done
        echo "$row |"
    done
done
echo
echo "Command: \`$0 $*\`. One run each, wall time of the whole process (mpirun's start"
echo "included); search's answer is its number of offsets. grep's answer may differ: in a UTF-8"
echo "locale it takes a non-ASCII letter next to the word for a word boundary, where tadoc's"
echo "tokens count every byte above 127 as part of a word."
exit "$bad"
