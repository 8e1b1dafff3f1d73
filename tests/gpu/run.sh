#!/usr/bin/env bash
# Check every CUDA kernel against the CPU, on a machine with an NVIDIA GPU: build the GPU
# targets, pack the test corpora (tests/tmp/corpora, made by tests/corpus.sh) and small trees
# (a word longer than TOK_CAP, hard links, and edge cases for the analytics: escaped paths,
# empty and separator-only files, one- and two-word files, many small files sharing words,
# "dir" next to "dir.c" and "dir-x"), and run gpucheck on each (the six analytics, index build,
# word count and backend_analytic, count and search, extract, insert/append offsets; see
# gpucheck.c); each run ends with tables of CPU and GPU times. Then `tadoc` with TADOC_GPU=on
# against TADOC_GPU=off for every analytic, and the daemon with -o gpu=on. SEED=N fixes the
# seed. ANALYTICS_ONLY=1 runs `gpucheck --analytics` on the small archives and stops there.
# READS_ONLY=1 checks and times only the reads (gpucheck --reads, the read benchmark).
# BIG=ARCHIVE also runs `gpucheck --analytics` on a large archive (CPU timed once).
# Where mpirun and build/rel/tadoc-mpi are there (built where mpicc is), tadoc-mpi's ranks
# with TADOC_GPU=on are checked too, each rank on its own GPU; MPI_ONLY=1 runs only that.
# Exits non-zero on any mismatch or failure.
# A machine without xxhash.h or the libxxhash.so link can take both from shared-dev/include
# and shared-dev/lib (copies from a machine that has them); they are used when present.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/cuda/bin"
export TADOC_THREADS=1 # CPU times are one thread (the analytics may use two by default)
flags=()
[ -d shared-dev ] && flags=(CFLAGS="-I$PWD/shared-dev/include" LDFLAGS="-L$PWD/shared-dev/lib")
make -j"$(nproc)" GPU=1 "${flags[@]}" build/rel/tadoc build/rel/tests/gpucheck >/dev/null || exit 1

tmp=tests/tmp/gpu
rm -rf "$tmp"
mkdir -p "$tmp/cut"
# The GPU word count leaves files with cut long words to the CPU: cover that hand-over (tadoc
# on the one-shard archive: that file on the CPU, the other on the GPU, the outputs merged).
{ head -c 3000 /dev/zero | tr '\0' x; echo " and a few words"; } >"$tmp/cut/long.txt"
printf 'short words only\nwords again\n' >"$tmp/cut/short.txt"
# Hard links: word queries on a link go to the entry that holds the content.
mkdir -p "$tmp/links/d"
for i in 1 2 3; do
    printf 'alpha beta gamma %s alpha\nbeta delta alpha %s\n' "$i" "$i$i" >"$tmp/links/f$i.txt"
done
cat "$tmp"/links/f*.txt "$tmp"/links/f*.txt >"$tmp/links/d/all.txt"
ln "$tmp/links/f2.txt" "$tmp/links/d/link2.txt"
ln "$tmp/links/d/all.txt" "$tmp/links/zz.txt"
: >"$tmp/links/empty.txt"
# Edge cases for the analytics.
e=$tmp/edge
mkdir -p "$e/dir/sub" "$e/dir-x" "$e/many" "$e/odd"
printf 'tab in the name\n' >"$e/odd/a	b.txt"
printf 'back slash name\n' >"$e/odd/back\\slash.txt"
printf 'new line name\n' >"$e/odd/new
line.txt"
: >"$e/odd/empty.txt"
printf '... ,,, ;;; \n\t--\n' >"$e/odd/seps.txt"
printf 'one\n' >"$e/odd/one.txt"
printf 'two words\n' >"$e/odd/two.txt"
printf 'three words here\n' >"$e/odd/three.txt"
printf 'caf\303\251 na\303\257ve r\303\251sum\303\251 caf\303\251 na\303\257ve\n' >"$e/odd/utf8.txt"
for i in $(seq 1 40); do
    printf 'the cat sat on the mat the cat sat %s\n' "$i" >>"$e/dir/sub/cats.txt"
done
cp "$e/dir/sub/cats.txt" "$e/dir/cats2.txt"
# Files that do not compress, stored as their text (a text shard): the GPU must see the tokens
# the reader makes of them.
mkdir -p "$e/bin"
gzip -9 -n -c "$e/dir/sub/cats.txt" >"$e/bin/cats.gz"
LC_ALL=C awk 'BEGIN { srand(7); for (i = 0; i < 6000; i++) printf "%c", int(rand() * 256) }' >"$e/bin/noise"
printf 'dir dot c\n' >"$e/dir.c"
printf 'the cat sat again\n' >"$e/dir-x/x.txt"
w=(alpha beta gamma delta epsilon zeta eta theta)
for i in $(seq 1 300); do
    printf '%s %s %s. %s\n' "${w[i % 8]}" "${w[(i / 8) % 8]}" "${w[(i * 7) % 8]}" "${w[i % 5]}" \
        >"$e/many/f$i.txt"
done

# A grammar deeper than a lane's stack of frames in the extract kernel (MAXD): each line
# repeats the one before it and adds a word, so each line's rule nests the last one's.
mkdir -p "$tmp/deep"
awk 'BEGIN { for (n = 1; n <= 300; n++) { s = "w1"; for (i = 2; i <= n; i++) s = s " w" i; print s } }' \
    >"$tmp/deep/chain.txt"

command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
status=0
# tadoc-mpi with a GPU per rank: 1 and 2 ranks, every analytic shard by shard through the
# GPUs (TADOC_GPU_MEM=64K), byte for byte against tadoc on the CPU; with two ranks and two
# GPUs or more, each rank's parts on its own devices only (its -v line).
mpi_check() {
    local a=$1 an r out ngpu bad=0
    ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        TADOC_GPU=off build/rel/tadoc $an "$a" >"$tmp/mpi-want"
        for r in 1 2; do
            out=$(TADOC_GPU=on TADOC_GPU_MEM=64K mpirun --allow-run-as-root --oversubscribe \
                --bind-to none -n $r build/rel/tadoc-mpi $an "$a" -v -o "$tmp/mpi-got" 2>&1)
            cmp -s "$tmp/mpi-got" "$tmp/mpi-want" ||
                { echo "tadoc-mpi $an on $r ranks with TADOC_GPU=on differs from tadoc"; bad=1; }
            grep -q "shard parts by gpu" <<<"$out" ||
                { echo "tadoc-mpi $an on $r ranks: no part on a GPU: $out"; bad=1; }
            if [ $r = 2 ] && [ "$ngpu" -ge 2 ]; then
                grep "rank 0 of 2" <<<"$out" | grep -q "by gpu: 0: [0-9]*\(;\|$\)" &&
                    grep "rank 1 of 2" <<<"$out" | grep -q "by gpu: 1: [0-9]*\(;\|$\)" ||
                    { echo "tadoc-mpi $an on 2 ranks: not one GPU each: $out"; bad=1; }
            fi
        done
    done
    if [ $bad = 0 ]; then
        echo "tadoc-mpi with TADOC_GPU=on on 1 and 2 ranks ($ngpu GPUs): every analytic checked"
    else
        status=1
    fi
}
if [ -n "${MPI_ONLY:-}" ]; then
    command -v mpirun >/dev/null && [ -x build/rel/tadoc-mpi ] ||
        { echo "tests/gpu/run.sh: MPI_ONLY needs mpirun and build/rel/tadoc-mpi"; exit 1; }
    build/rel/tadoc pack --shard-size 512K tests/tmp/corpora/linux-slice -o "$tmp/shards.tdc" -q &&
        mpi_check "$tmp/shards.tdc"
    exit $status
fi
for src in tests/tmp/corpora/linux-slice tests/tmp/corpora/brown "$tmp/cut" "$tmp/links" "$tmp/edge" \
    "$tmp/deep"; do
    name=$(basename "$src")
    [ -n "${READS_ONLY:-}" ] && ! [[ $name = linux-slice || $name = deep ]] && continue
    if [ ! -d "$src" ]; then
        echo "tests/gpu/run.sh: $src is missing (tests/corpus.sh makes it)"
        status=1
        continue
    fi
    # grammars (pack stores the Linux slice as its text, bare, checked after this loop)
    TADOC_NO_BARE=1 build/rel/tadoc pack "$src" -o "$tmp/$name.tdc" -q &&
        build/rel/tests/gpucheck ${ANALYTICS_ONLY:+--analytics} ${READS_ONLY:+--reads} "$tmp/$name.tdc" ${SEED:-} ||
        status=1
    echo
done
# The Linux slice as pack stores it: one shard of bare text (codec zstd-bare), whose grammar
# is its tokens, found by their bytes.
if [ -z "${READS_ONLY:-}" ]; then
    build/rel/tadoc pack tests/tmp/corpora/linux-slice -o "$tmp/bare.tdc" -q &&
        build/rel/tadoc stat "$tmp/bare.tdc" | grep -q zstd-bare &&
        build/rel/tests/gpucheck ${ANALYTICS_ONLY:+--analytics} "$tmp/bare.tdc" ${SEED:-} ||
        status=1
    echo
fi
# An archive of several shards (merged into one grammar when read): every kernel again. Then
# one whose copies of files were packed in the first one's shard, out of path order.
if [ -z "${READS_ONLY:-}" ]; then
    build/rel/tadoc pack --shard-size 512K tests/tmp/corpora/linux-slice -o "$tmp/shards.tdc" -q &&
        build/rel/tests/gpucheck ${ANALYTICS_ONLY:+--analytics} "$tmp/shards.tdc" ${SEED:-} ||
        status=1
    echo
    mkdir -p "$tmp/copies/a" "$tmp/copies/m" "$tmp/copies/z"
    cp tests/tmp/corpora/brown/ca0* "$tmp/copies/a/"
    cp tests/tmp/corpora/brown/cb0* "$tmp/copies/m/"
    cp "$tmp/copies/a/ca01" "$tmp/copies/a/ca05" "$tmp/copies/z/"
    cp "$tmp/copies/a/ca01" "$tmp/copies/m/0-copy"
    build/rel/tadoc pack --shard-size 64K "$tmp/copies" -o "$tmp/copies.tdc" -q &&
        build/rel/tests/gpucheck ${ANALYTICS_ONLY:+--analytics} "$tmp/copies.tdc" ${SEED:-} ||
        status=1
    echo
fi
# Dictionaries of more than 2^21 words (the whole Linux tree) take the wide sequence keys;
# TADOC_GPU_WIDE_SEQ=1 forces them here so the small archives check that path too.
for name in $([ -z "${READS_ONLY:-}" ] && echo linux-slice brown edge); do
    TADOC_GPU_WIDE_SEQ=1 GPUCHECK_ONLY=seqcount,rankedinvindex \
        build/rel/tests/gpucheck --analytics "$tmp/$name.tdc" ${SEED:-} ||
        status=1
done
if [ -n "${ANALYTICS_ONLY:-}" ]; then
    echo "tests/gpu/run.sh: ANALYTICS_ONLY: $([ $status -eq 0 ] && echo every analytic agrees || echo FAILED)"
    exit $status
fi
# The tool: TADOC_GPU=on against off, every analytic, whole archive and a subtree.
for name in $([ -z "${READS_ONLY:-}" ] && echo linux-slice brown edge shards copies cut); do
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        for scope in "" $([ $name = edge ] && echo dir) $([ $name = copies ] && echo z) \
            $([[ $name = linux-slice || $name = shards ]] && echo kernel); do
            cmp -s <(TADOC_GPU=on build/rel/tadoc $an "$tmp/$name.tdc" $scope) \
                <(TADOC_GPU=off build/rel/tadoc $an "$tmp/$name.tdc" $scope) ||
                { echo "tadoc $an $name ${scope:-(all)}: TADOC_GPU=on differs from off"; status=1; }
        done
    done
done
echo "tadoc with TADOC_GPU=on: every analytic checked against TADOC_GPU=off"
# A device budget smaller than the sharded archive: parts of consecutive shards as large as
# it allows go through the GPU one after another (64K: each shard alone).
for mem in 64K 2M 8M; do
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        cmp -s <(TADOC_GPU=on TADOC_GPU_MEM=$mem build/rel/tadoc $an "$tmp/shards.tdc") \
            <(TADOC_GPU=off build/rel/tadoc $an "$tmp/shards.tdc") ||
            { echo "tadoc $an shards with TADOC_GPU_MEM=$mem: differs from TADOC_GPU=off"; status=1; }
    done
    parts=$(TADOC_GPU=on TADOC_GPU_MEM=$mem TADOC_ANA_VERBOSE=1 build/rel/tadoc wordcount \
        "$tmp/shards.tdc" 2>&1 >/dev/null | grep -o "[0-9]* shards in [0-9]* parts")
    echo "tadoc with TADOC_GPU_MEM=$mem below the archive: every analytic checked (${parts:-each shard a part})"
done
command -v mpirun >/dev/null && [ -x build/rel/tadoc-mpi ] && mpi_check "$tmp/shards.tdc"
# tadoc apply --offsets=batch: the batch's offsets from the GPU (TADOC_GPU=on; its summary must
# say so) give the same extracts and, once compacted, the same files as from the CPU. 20,000 inserts and 5,000
# appends of 64-byte word strings (bench/ops.pl, the papers' workload) and 2,000 extracts.
if [ -z "${READS_ONLY:-}" ]; then
    a=$tmp/linux-slice.tdc
    build/rel/tadoc ls -l "$a" >"$tmp/apply-files"
    build/rel/tadoc wordcount "$a" | cut -f2 | head -5000 >"$tmp/apply-words"
    {
        perl bench/ops.pl insert 20000 64 "${SEED:-$RANDOM}" "$tmp/apply-files" "$tmp/apply-words"
        perl bench/ops.pl append 5000 64 $((${SEED:-$RANDOM} + 1)) "$tmp/apply-files" "$tmp/apply-words"
        perl bench/ops.pl extract 2000 64 $((${SEED:-$RANDOM} + 2)) "$tmp/apply-files" "$tmp/apply-words"
    } >"$tmp/apply-ops"
    for mode in on off; do
        rm -rf "$tmp/apply-$mode" "$tmp/apply-$mode.tdc"*
        cp "$a" "$tmp/apply-$mode.tdc"
        TADOC_GPU=$mode build/rel/tadoc apply --offsets=batch "$tmp/apply-$mode.tdc" \
            "$tmp/apply-ops" >"$tmp/apply-$mode.out" 2>"$tmp/apply-$mode.err" &&
            build/rel/tadoc compact "$tmp/apply-$mode.tdc" >/dev/null &&
            build/rel/tadoc unpack "$tmp/apply-$mode.tdc" "$tmp/apply-$mode" ||
            { echo "tadoc apply with TADOC_GPU=$mode failed"; status=1; }
    done
    grep -q "computed on the GPU" "$tmp/apply-on.err" ||
        { echo "tadoc apply with TADOC_GPU=on: the offsets were not computed on the GPU"; status=1; }
    if cmp -s "$tmp/apply-on.out" "$tmp/apply-off.out" && diff -r "$tmp/apply-on" "$tmp/apply-off" >/dev/null; then
        echo "tadoc apply --offsets=batch with TADOC_GPU=on: $(grep -c . "$tmp/apply-ops") operations, the same extracts and files as TADOC_GPU=off"
    else
        echo "tadoc apply --offsets=batch: TADOC_GPU=on and off DIFFER"
        status=1
    fi
fi
# The daemon with -o gpu=on: the mount equals the tree, its virtual word counts equal the CPU's
# and were served by the GPU, and how long they take with gpu=on vs gpu=off. Needs libfuse3
# (or its headers, library and fusermount3 in shared-dev/include/fuse3, lib, bin).
fuseflags=(CFLAGS="-I$PWD/shared-dev/include -I$PWD/shared-dev/include/fuse3"
    LDFLAGS="-L$PWD/shared-dev/lib")
export LD_LIBRARY_PATH="$PWD/shared-dev/lib:${LD_LIBRARY_PATH:-}" PATH="$PATH:$PWD/shared-dev/bin"
# getfattr (the attr package) may be missing there: python3 reads the attribute instead.
xattr_of() { # NAME PATH: the daemon's user.tadoc.NAME (getfattr is not on every GPU host)
    getfattr --only-values -n "user.tadoc.$1" "$2" 2>/dev/null ||
        python3 -c 'import os, sys; print(os.getxattr(sys.argv[2], "user.tadoc." + sys.argv[1]).decode())' "$1" "$2"
}
backend_of() { xattr_of backend "$1"; }
# Every virtual analytic of mount MNT against `tadoc` on the CPU for ARCHIVE; a difference is
# reported as WHAT .ANALYTIC and fails the run.
virtual_equal() { # MNT ARCHIVE WHAT
    local an
    for an in wordcount sort invindex termvector seqcount rankedinvindex; do
        cmp -s <(cat "$1/.$an") <(TADOC_GPU=off build/rel/tadoc $an "$2") ||
            { echo "$3 .$an differs from the CPU"; status=1; }
    done
}
if make -j"$(nproc)" GPU=1 "${fuseflags[@]}" build/rel/tadocfs >/dev/null 2>&1; then
    m=$tmp/mnt
    mkdir -p "$m"
    for src in $([ -z "${READS_ONLY:-}" ] && echo tests/tmp/corpora/linux-slice tests/tmp/corpora/brown); do
        name=$(basename "$src")
        a=$tmp/$name.tdc
        for mode in on auto off; do
            # mem=whole: the whole archive on the GPU, for reads too (by default reads go by
            # shard, on the CPU).
            if ! build/rel/tadocfs -o gpu=$mode,mem=whole "$a" "$m"; then
                echo "mount -o gpu=$mode of $name FAILED"
                status=1
                continue
            fi
            if [ $mode != off ]; then
                diff -r "$src" "$m" >/dev/null || { echo "gpu=$mode mount of $name differs"; status=1; }
            fi
            if [ $mode = on ]; then
                virtual_equal "$m" "$a" "gpu=on, $name:"
            fi
            t0=$(date +%s.%N)
            for _ in 1 2 3 4 5; do cat "$m/.wordcount" >/dev/null; done
            t1=$(date +%s.%N)
            tar cf - -C "$m" . | wc -c >/dev/null
            t2=$(date +%s.%N)
            echo "mount $name gpu=$mode: .wordcount open+read $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 200 }') ms (mean of 5), tar cf - $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", (b - a) * 1000 }') ms; $(backend_of "$m")"
            if [ $mode = on ] && ! backend_of "$m" | grep -q '^gpu: [1-9].*reads gpu: [1-9]'; then
                echo "gpu=on served no analytic or no read on the GPU"
                status=1
            fi
            umount "$m" 2>/dev/null || fusermount3 -u "$m"
        done
    done
    # Files with words longer than TOK_CAP in the daemon's whole grammar: those files go to the
    # CPU, the rest to the GPU, the outputs merged (backend_analytic); once the archive is
    # loaded every analytic must equal the CPU's and count as served by the GPU.
    if [ -z "${READS_ONLY:-}" ]; then
        if build/rel/tadocfs -o gpu=on,mem=whole "$tmp/cut.tdc" "$m"; then
            for _ in $(seq 1 600); do
                xattr_of shard_cache "$m" | grep -q '; 1 whole-archive' && break
                sleep 0.1
            done
            virtual_equal "$m" "$tmp/cut.tdc" "gpu=on, cut:"
            backend_of "$m" | grep -q '^gpu: [1-9]' ||
                { echo "gpu=on: the cut archive's analytics were not split: $(backend_of "$m")"; status=1; }
            umount "$m" 2>/dev/null || fusermount3 -u "$m"
        else
            echo "mount -o gpu=on of cut FAILED"
            status=1
        fi
    fi
    # Under -o mem= with gpu=on, the virtual files of the sharded archive go shard by shard
    # through the GPU (the whole archive never loaded) and equal the CPU's; with gpu=auto, those
    # the GPU computes faster shard by shard on this host's CPUs (backend_cli_gpu_wins: the
    # sequence counts on a host of many cores) go there too.
    for mode in $([ -z "${READS_ONLY:-}" ] && echo on auto); do
        if ! build/rel/tadocfs -o ro,gpu=$mode,mem=1M "$tmp/shards.tdc" "$m"; then
            echo "mount -o gpu=$mode,mem=1M of shards FAILED"
            status=1
            continue
        fi
        virtual_equal "$m" "$tmp/shards.tdc" "gpu=$mode,mem=1M, shards:"
        backend_of "$m" | grep -q 'shard parts by gpu: 0: [1-9]' ||
            { echo "gpu=$mode,mem=1M: no shard part on the GPU: $(backend_of "$m")"; status=1; }
        echo "mount shards gpu=$mode,mem=1M: every virtual file shard by shard equals the CPU; $(backend_of "$m")"
        umount "$m" 2>/dev/null || fusermount3 -u "$m"
    done
    # -o gpus= and gpu_mem=: on GPU 0 alone, the sharded archive's word count goes up in a part
    # per shard where a part may take 64 KiB of the device, in fewer parts where 512 MiB (under
    # mem=64M: a part is held on the host too, within half the budget).
    if [ -z "${READS_ONLY:-}" ]; then
        declare -A nparts
        for gm in 64K 512M; do
            if build/rel/tadocfs -o ro,gpu=on,mem=64M,gpus=0,gpu_mem=$gm "$tmp/shards.tdc" "$m"; then
                cmp -s <(TADOC_GPU=off build/rel/tadoc wordcount "$tmp/shards.tdc") "$m/.wordcount" ||
                    { echo "gpus=0,gpu_mem=$gm: .wordcount DIFFERS from the CPU's"; status=1; }
                nparts[$gm]=$(backend_of "$m" | sed -n 's/.*shard parts by gpu: 0: \([0-9]*\).*/\1/p')
                umount "$m" 2>/dev/null || fusermount3 -u "$m"
            else
                echo "mount -o gpus=0,gpu_mem=$gm of shards FAILED"
                status=1
            fi
        done
        echo "gpus=0: .wordcount in ${nparts[64K]:-no} parts at gpu_mem=64K, ${nparts[512M]:-no} at 512M"
        [ "${nparts[64K]:-0}" -gt "${nparts[512M]:-0}" ] && [ "${nparts[512M]:-0}" -gt 0 ] ||
            { echo "gpu_mem= did not change the parts"; status=1; }
    fi
    # Mounted read throughput by mode, on an archive of large files (READS_ARCHIVE, default
    # tests/tmp/gpubig/linux-cat.tdc when present; tests/gpu/mkcat.sh makes it): the crossover
    # table first, then each mode on a fresh mount (the FUSE page cache empty; the load and the
    # GPU upload done first): 1, 8 and 16 readers in 1 MiB preads (bench/mreads), and tar cf -,
    # READ_REPS rounds, then a table of medians.
    # The content checksum of every mode must equal the unpacked archive's.
    ra=${READS_ARCHIVE:-tests/tmp/gpubig/linux-cat.tdc}
    if [ -f "$ra" ] && make -j"$(nproc)" GPU=1 "${flags[@]}" build/rel/bench/mreads >/dev/null; then
        build/rel/tests/gpucheck --reads "$ra" ${SEED:-} || status=1
        rm -rf "$tmp/unpacked"
        build/rel/tadoc unpack "$ra" "$tmp/unpacked"
        want=$(build/rel/bench/mreads "$tmp/unpacked" 8 1048576 sum | sed -n 's/content checksum //p')
        fresh() { # mount in mode $1 loaded whole, wait for the data and the GPU copy
            build/rel/tadocfs -o gpu=$1,mem=whole "$ra" "$m" && head -c1 "$(find "$m" -type f | head -1)" >/dev/null &&
                sleep "${READ_WAIT:-2}"
        }
        # Each row reads 242 MB once (0.03-0.4 s), so every mode runs READ_REPS times (default 3),
        # the modes interleaved, and the summary gives the median of each row.
        rows=$tmp/read-rows
        : >"$rows"
        for rep in $(seq "${READ_REPS:-3}"); do
            for mode in ${READ_MODES:-off auto on}; do
                for th in 1 8 16; do
                    fresh $mode || { status=1; continue; }
                    line=$(build/rel/bench/mreads "$m" $th 1048576)
                    echo "reads gpu=$mode: $line"
                    echo "    $(backend_of "$m")"
                    echo "$mode $th $(sed -n 's/.* s, \([0-9.]*\) MB\/s.*/\1/p' <<<"$line")" >>"$rows"
                    umount "$m" 2>/dev/null || fusermount3 -u "$m"
                done
                fresh $mode || { status=1; continue; }
                t0=$(date +%s.%N)
                tar cf - -C "$m" . | wc -c >/dev/null
                t1=$(date +%s.%N)
                got=$(build/rel/bench/mreads "$m" 8 1048576 sum | sed -n 's/content checksum //p')
                tar_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
                echo "reads gpu=$mode: tar cf - $tar_s s; $(backend_of "$m")"
                echo "$mode tar $tar_s" >>"$rows"
                [ "$got" = "$want" ] || { echo "gpu=$mode mount of $ra: content differs"; status=1; }
                umount "$m" 2>/dev/null || fusermount3 -u "$m"
            done
        done
        echo "mounted reads of $ra, median of ${READ_REPS:-3} (MB/s for 1 MiB preads by readers; tar in s):"
        printf '%-8s %10s %10s %10s %10s\n' mode 1 8 16 tar
        for mode in ${READ_MODES:-off auto on}; do
            printf '%-8s' "$mode"
            for col in 1 8 16 tar; do
                printf ' %10s' "$(awk -v m=$mode -v c=$col '$1 == m && $2 == c { print $3 }' "$rows" |
                    sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }')"
            done
            echo
        done
    fi
else
    echo "tests/gpu/run.sh: tadocfs not built (no libfuse3 here): the mount checks were not run"
    status=1
fi

if [ -n "${BIG:-}" ]; then
    GPUCHECK_CPU_REPS=${GPUCHECK_CPU_REPS:-1} build/rel/tests/gpucheck --analytics "$BIG" ${SEED:-} ||
        status=1
fi

if [ $status -eq 0 ]; then
    echo "tests/gpu/run.sh: every kernel agrees with the CPU"
else
    echo "tests/gpu/run.sh: FAILED"
fi
exit $status
