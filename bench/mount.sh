#!/usr/bin/env bash
# Mounted reads: tadocfs next to squashfs (mksquashfs zstd -19, 1 MiB blocks, read through
# squashfuse_ll) and the raw tree, all in this one run, plus the FUSE ceiling of this machine
# (bench/fuseceil: one file served from memory with direct_io) and each mounted read speed as
# a share of it; the cold tars and the grep again in ROUNDS interleaved rounds (default 3).
# usage: [ARCHIVE=a.tdc] [SQFS=img.sqfs] [ROUNDS=N] bench/mount.sh BUILD_DIR TREE NAME
# (markdown on stdout; needs root)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$(cd "$1" && pwd) tree=$(cd "$2" && pwd) name=$3
[ "$(id -u)" -eq 0 ] || { echo "bench/mount.sh: needs root (drop_caches, mounts)" >&2; exit 1; }
for t in fio mksquashfs squashfuse_ll fusermount3 python3; do
    command -v "$t" >/dev/null || { echo "bench/mount.sh: $t is not installed" >&2; exit 1; }
done
w=$(mktemp -d "${BENCH_TMP:-/tmp}/mountbench.XXXXXX")
mounts=()
cleanup() {
    for m in "${mounts[@]}"; do
        fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
    done
    rm -rf "$w"
}
trap cleanup EXIT
CEIL_MB=256 RUNTIME=${FIO_RUNTIME:-5}

rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? b / 1e6 / s : 0) }'; }
pct() { awk -v x="$1" -v c="$2" 'BEGIN { if (c > 0) printf "%.0f%%", 100 * x / c; else print "-" }'; }

# Mount kind tadocfs|squashfs on $w/m-KIND, timed from the command to a usable mount (both
# daemons return only once mounted; tadocfs loads its grammar after that); read-only for the
# kernel too when RO is set. Sets mnt, mount_s, mount_t0 and pid (the daemon).
mount_fs() {
    mnt=$w/m-$1
    mkdir -p "$mnt"
    local t0
    t0=$(now)
    mount_t0=$t0
    local opts=${RO:+ro}
    case $1 in
    tadocfs)
        opts+=${MOUNT_OPTS:+${opts:+,}$MOUNT_OPTS}
        "$build/tadocfs" ${opts:+-o "$opts"} "$w/a.tdc" "$mnt"
        ;;
    squashfs) squashfuse_ll ${opts:+-o "$opts"} "$w/img.sqfs" "$mnt" ;;
    esac
    mount_s=$(since "$t0")
    mounts+=("$mnt")
    pid=$(pgrep -f -- "$mnt\$")
    [ "$(wc -w <<<"$pid")" -eq 1 ] || { echo "bench/mount.sh: daemon of $mnt not found" >&2; exit 1; }
}

# Unmount, and wait for the daemon to end (it holds the archive's lock until it exits, and a
# daemon still loading the grammar in the background ends that load first).
umount_fs() {
    fusermount3 -u "$mnt"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

# Read the first byte of the largest file; sets first_s, the seconds from the mount command's
# start: the mount command's own time and then the read's alone (what mount_fs does after the
# mount, such as finding the daemon's pid with pgrep, is not the file system's).
first_byte() {
    local t0
    t0=$(now)
    head -c1 "$dir/$(head -1 "${fiolist[4096]}")" >/dev/null
    first_s=$(awk -v m="$mount_s" -v r="$(since "$t0")" 'BEGIN { printf "%.3f", m + r }')
}

# `tar cf - . | wc -c` in DIR for kind $k, which must read at least the tree's bytes: its time
# and rate into R[KEY,$k] ("S s, R MB/s") and its rate into R[KEY_mbs,$k].
tar_row() { # KEY DIR
    local t0 tar_bytes tar_s
    t0=$(now)
    tar_bytes=$(cd "$2" && tar cf - . | wc -c)
    tar_s=$(since "$t0")
    [ "$tar_bytes" -gt "$bytes" ] || { echo "bench/mount.sh: $k: $1: tar read too little" >&2; exit 1; }
    R[$1_mbs,$k]=$(rate "$tar_bytes" "$tar_s")
    R[$1,$k]="$tar_s s, ${R[$1_mbs,$k]} MB/s"
}

# Read every regular file under DIR with read(2) of BS bytes into one buffer; prints MB/s.
seq_read() {
    python3 - "$1" "$2" <<'EOF'
import os, sys, time
top, bs = sys.argv[1], int(sys.argv[2])
buf = memoryview(bytearray(bs))
total, t0 = 0, time.perf_counter()
for d, dirs, files in os.walk(top):
    dirs.sort()
    for f in sorted(files):
        p = os.path.join(d, f)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
print(f"{total / 1e6 / (time.perf_counter() - t0):.0f}")
EOF
}

# fio random reads with O_DIRECT (every read reaches the file system, as with fuseceil's
# direct_io; a page cache would soon hold a small tree whole) over the files named in LIST
# (paths relative to DIR, one a line): prints "IOPS MB/s p50_us p99_us". fio gets short
# symlinks to the files, since its filename option is limited to 4096 bytes.
fio_run() { # DIR LIST BS JOBS
    local links="$w/links" i=0 names=()
    rm -rf "$links" && mkdir "$links"
    while IFS= read -r f; do
        ln -s "$1/$f" "$links/f$i"
        names+=("f$i")
        i=$((i + 1))
    done <"$2"
    (cd "$links" && fio --name=r --rw=randread --bs="$3" --filename="$(IFS=:; echo "${names[*]}")" \
        --numjobs="$4" --file_service_type=random --readonly --ioengine=psync --direct=1 \
        --norandommap --randrepeat=0 --time_based --runtime="$RUNTIME" --group_reporting \
        --output-format=json --output="$w/fio.json" >/dev/null)
    python3 - "$w/fio.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["jobs"][0]["read"]
p = r["clat_ns"]["percentile"]
print(f'{r["iops"]:.0f} {r["bw_bytes"] / 1e6:.1f} {p["50.000000"] / 1e3:.0f} {p["99.000000"] / 1e3:.0f}')
EOF
}

# fio's files for block size BS: the largest files of the tree (up to 256) that hold at least
# one block, one a line; none when no file is that large.
fio_files() {
    (cd "$tree" && find . -type f -size +$(($1 - 1))c -printf '%s %P\n') | sort -rn | awk 'NR <= 256' |
        cut -d' ' -f2-
}

# For tadocfs: wait until the daemon has loaded the whole archive in the background, where it
# does (no memory budget: user.tadoc.shard_cache says "1 whole-archive"); under a budget it
# never does, and reads go shard by shard from the first byte on.
settled() {
    [ "$k" = tadocfs ] || return 0
    local sc
    for _ in $(seq 1 6000); do
        sc=$(getfattr -n user.tadoc.shard_cache --only-values "$mnt" 2>/dev/null)
        [[ "$sc" == *"; 1 whole-archive"* || "$sc" != *"; 0 budget,"* ]] && return 0
        sleep 0.1
    done
    echo "bench/mount.sh: the archive was not loaded in 10 minutes" >&2
    exit 1
}

# Before each cold measurement: unmount, drop the page cache, mount again (sets dir) and wait
# for the first byte and the background load, so that what follows measures reads, not the
# loading of the archive.
fresh() {
    [ "$k" = raw ] || umount_fs
    drop_caches
    [ "$k" = raw ] || { mount_fs "$k"; dir=$mnt; first_byte; settled; }
}

files=$(find "$tree" -type f | wc -l)
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
t0=$(now)
if [ -n "${ARCHIVE:-}" ]; then
    # A prebuilt archive of the same tree (packing Linux takes minutes; bench/pack.sh times it).
    ln -s "$(cd "$(dirname "$ARCHIVE")" && pwd)/$(basename "$ARCHIVE")" "$w/a.tdc"
    pack_s="(prebuilt)"
else
    "$build/tadoc" pack -q "$tree" -o "$w/a.tdc"
    pack_s=$(since "$t0")
fi
t0=$(now)
if [ -n "${SQFS:-}" ]; then
    # A prebuilt image of the same tree, made with the options below.
    ln -s "$(cd "$(dirname "$SQFS")" && pwd)/$(basename "$SQFS")" "$w/img.sqfs"
    sq_s="(prebuilt)"
else
    mksquashfs "$tree" "$w/img.sqfs" -comp zstd -Xcompression-level 19 -b 1M -quiet -no-progress \
        -noappend >/dev/null
    sq_s=$(since "$t0")
fi

declare -A R nfio fiolist # results, keyed "metric,kind"; fio's file count and list by size
for bs in 4096 65536; do
    fio_files "$bs" >"$w/fio.$bs"
    nfio[$bs]=$(wc -l <"$w/fio.$bs")
    fiolist[$bs]="$w/fio.$bs"
done
kinds=(tadocfs squashfs raw)
for k in "${kinds[@]}"; do
    drop_caches
    if [ "$k" = raw ]; then
        dir=$tree R[mount,$k]="-" R[first,$k]="-" R[rss,$k]="-" R[loaded,$k]="-"
    else
        mount_fs "$k"
        dir=$mnt R[mount,$k]=$mount_s
        first_byte
        R[first,$k]=$first_s
        settled
        R[loaded,$k]=-
        [ "$k" = tadocfs ] && R[loaded,$k]=$(since "$mount_t0")
        umount_fs
        drop_caches
        mount_fs "$k"
        dir=$mnt
    fi
    # Cold tar starts right after the mount: for tadocfs it includes loading the grammar.
    tar_row tarcold "$dir"
    tar_row tarwarm "$dir"
    [ "$k" = raw ] || R[rss,$k]=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")

    fresh
    t0=$(now)
    (cd "$dir" && { grep -r -c static . >"$w/grep.$k" || true; })
    R[grep,$k]="$(since "$t0") s"
    for bs in 4096 131072 1048576; do
        fresh
        R[seq$bs,$k]=$(seq_read "$dir" "$bs")
    done
    for bs in 4096 65536; do
        for jobs in 1 8; do
            if [ "${nfio[$bs]}" -eq 0 ]; then
                R[fio$bs.$jobs,$k]="- - - -"
                continue
            fi
            fresh
            R[fio$bs.$jobs,$k]=$(fio_run "$dir" "${fiolist[$bs]}" "$bs" "$jobs")
        done
    done
    [ "$k" = raw ] || umount_fs
done
# The cold tar again on read-only mounts: on a mount that is not read-only the kernel marks a
# file's attributes stale after each READ (its atime), so tar's stat after reading is one more
# request per file.
for k in tadocfs squashfs; do
    drop_caches
    RO=1 mount_fs "$k"
    tar_row tarro "$mnt"
    umount_fs
done
R[tarro,raw]=-
# tadocfs in the kernel's usual open mode (-o ro,open): an OPEN and a RELEASE per file, which
# the default (its no-open mode) saves; squashfuse_ll has no other mode (its row: -).
k=tadocfs
drop_caches
RO=1 MOUNT_OPTS=open${MOUNT_OPTS:+,$MOUNT_OPTS} mount_fs tadocfs
tar_row taropen "$mnt"
tar_row tarwarmopen "$mnt"
umount_fs
drop_caches
RO=1 MOUNT_OPTS=open${MOUNT_OPTS:+,$MOUNT_OPTS} mount_fs tadocfs
t0=$(now)
(cd "$mnt" && { grep -r -c static . >"$w/grep.open" || true; })
R[grepopen,tadocfs]="$(since "$t0") s"
umount_fs
for r in taropen tarwarmopen grepopen; do R[$r,squashfs]=- R[$r,raw]=-; done
# Both mounts must have found what grep finds in the tree (readdir orders differ).
for k in tadocfs squashfs open; do
    cmp -s <(sort "$w/grep.raw") <(sort "$w/grep.$k") ||
        { echo "bench/mount.sh: $k: grep results differ from the tree" >&2; exit 1; }
done

# The headline comparisons again in ROUNDS rounds (default 3), the two file systems' runs
# interleaved and their order swapped every round, each after a drop of the page cache and a
# fresh mount: one run of each is a sample on a machine whose runs spread 10-30%, the medians
# of rounds are the measure. Times into T[ROW,KIND] as a space-separated list.
declare -A T
rounds=${ROUNDS:-3}
round_run() { # ROW KIND
    local t0
    drop_caches
    case $1 in
    tarro) RO=1 mount_fs "$2" ;;
    *) mount_fs "$2" ;;
    esac
    t0=$(now)
    case $1 in
    grep) (cd "$mnt" && { grep -r -c static . >/dev/null || true; }) ;;
    *) (cd "$mnt" && tar cf - . | wc -c >/dev/null) ;;
    esac
    T[$1,$2]+="$(since "$t0") "
    umount_fs
}
for ((r = 1; r <= rounds; r++)); do
    order="tadocfs squashfs"
    [ $((r % 2)) -eq 0 ] && order="squashfs tadocfs"
    for row in tarcold tarro grep; do
        for k in $order; do round_run "$row" "$k"; done
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END {
    printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The FUSE ceiling: the same sequential reader and fio runs on fuseceil's one file.
mkdir -p "$w/ceil"
"$build/bench/fuseceil" "$w/ceil" "$CEIL_MB"
mounts+=("$w/ceil")
for bs in 4096 131072 1048576; do R[seq$bs,ceil]=$(seq_read "$w/ceil" "$bs"); done
for bs in 4096 65536; do
    echo data >"$w/fio.ceil"
    for jobs in 1 8; do R[fio$bs.$jobs,ceil]=$(fio_run "$w/ceil" "$w/fio.ceil" "$bs" "$jobs"); done
done
fusermount3 -u "$w/ceil"

machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo),"
machine+=" $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
asize=$(stat -L -c %s "$w/a.tdc") qsize=$(stat -L -c %s "$w/img.sqfs")
echo "### $name: $files files, $(mb "$bytes") MB"
echo
echo "Machine: $machine; kernel $(uname -r); $(fusermount3 --version 2>&1 | head -1)."
ratio() { awk -v b="$bytes" -v z="$1" 'BEGIN { printf "%.2f", b / z }'; }
echo "tadocfs archive $(mb "$asize") MB (ratio $(ratio "$asize"), \`tadoc pack\` $pack_s s);"
echo "squashfs image $(mb "$qsize") MB (ratio $(ratio "$qsize"),"
echo "\`mksquashfs -comp zstd -Xcompression-level 19 -b 1M\` $sq_s s,"
echo "read with squashfuse_ll $(dpkg-query -W -f '${Version}' squashfuse 2>/dev/null || echo '?'))."
echo "Cold runs follow \`echo 3 > /proc/sys/vm/drop_caches\` and a fresh mount. tadocfs mounts"
echo "once its file table is read. By default reads are served from their files' shards within"
echo "the default budget, with the next shards decoded ahead for a reader going in order; with"
echo "\`MOUNT_OPTS=mem=whole\` the daemon loads the whole archive in the background, and the grep,"
echo "sequential and fio runs start once it is done (\"mount to the archive loaded\"). The cold tar"
echo "starts right after the mount command returns."
echo
echo "| | tadocfs | squashfuse_ll | raw tree |"
echo "|---|---|---|---|"
row() { echo "| $1 | ${R[$2,tadocfs]} | ${R[$2,squashfs]} | ${R[$2,raw]} |"; }
row "mount (s)" mount
row "mount to the first byte of a file (s)" first
row "mount to the archive loaded in the background (s)" loaded
row "\`tar cf - . \\| wc -c\`, cold" tarcold
row "\`tar cf - . \\| wc -c\`, warm" tarwarm
row "\`tar cf - . \\| wc -c\`, cold, mounted \`-o ro\`" tarro
row "\`grep -r -c static .\`, cold" grep
row "\`tar cf - . \\| wc -c\`, cold, mounted \`-o ro,open\`" taropen
row "\`tar cf - . \\| wc -c\`, warm, mounted \`-o ro,open\`" tarwarmopen
row "\`grep -r -c static .\`, cold, mounted \`-o ro,open\`" grepopen
row "daemon RSS after the tars (MB)" rss
echo
echo "The same in $rounds rounds, the two file systems interleaved (their order swapped every round),"
echo "each run after a drop of the page cache and a fresh mount; seconds, each round's, then the"
echo "median, and squashfuse_ll's median over tadocfs's:"
echo
echo "| | tadocfs | squashfuse_ll | tadocfs faster by (medians) |"
echo "|---|---|---|---|"
for row in tarcold tarro grep; do
    case $row in
    tarcold) label="\`tar cf - . \\| wc -c\`, cold" ;;
    tarro) label="\`tar cf - . \\| wc -c\`, cold, mounted \`-o ro\`" ;;
    grep) label="\`grep -r -c static .\`, cold" ;;
    esac
    mt=$(median "${T[$row,tadocfs]}") ms=$(median "${T[$row,squashfs]}")
    printf '| %s | %s(median %s) | %s(median %s) | %sx |\n' "$label" "$(sed 's/ /, /g; s/, $/ /' <<<"${T[$row,tadocfs]}")" "$mt" \
        "$(sed 's/ /, /g; s/, $/ /' <<<"${T[$row,squashfs]}")" "$ms" "$(awk -v a="$mt" -v b="$ms" 'BEGIN { printf "%.2f", b / a }')"
done
echo
echo "Sequential reads of every file, read(2) of the given size, cold; the FUSE ceiling reads"
echo "one ${CEIL_MB} MiB file served from memory with direct_io. MB/s, and the share of the ceiling:"
echo
echo "| read size | FUSE ceiling | tadocfs | squashfuse_ll | raw tree |"
echo "|---|---|---|---|---|"
for bs in 4096 131072 1048576; do
    c=${R[seq$bs,ceil]}
    printf '| %s KiB | %s | %s (%s) | %s (%s) | %s (%s) |\n' $((bs / 1024)) "$c" \
        "${R[seq$bs,tadocfs]}" "$(pct "${R[seq$bs,tadocfs]}" "$c")" \
        "${R[seq$bs,squashfs]}" "$(pct "${R[seq$bs,squashfs]}" "$c")" \
        "${R[seq$bs,raw]}" "$(pct "${R[seq$bs,raw]}" "$c")"
done
echo
echo "Cold \`tar\` as a share of the 128 KiB ceiling: tadocfs $(pct "${R[tarcold_mbs,tadocfs]}" "${R[seq131072,ceil]}"),"
echo "squashfuse_ll $(pct "${R[tarcold_mbs,squashfs]}" "${R[seq131072,ceil]}")."
echo
echo "fio random reads (psync, O_DIRECT so that no page cache answers, ${RUNTIME} s each) over the"
echo "largest files holding at least one block: ${nfio[4096]} files for 4 KiB, ${nfio[65536]} for 64 KiB ('-': none);"
echo "the ceiling reads fuseceil's file. The raw tree's O_DIRECT reads go to the disk."
echo
echo "| block, jobs | | IOPS | MB/s | clat p50 µs | clat p99 µs | MB/s share of ceiling |"
echo "|---|---|---|---|---|---|---|"
for bs in 4096 65536; do
    for jobs in 1 8; do
        read -r _ cmbs _ _ <<<"${R[fio$bs.$jobs,ceil]}"
        for k in ceil "${kinds[@]}"; do
            read -r iops mbs p50 p99 <<<"${R[fio$bs.$jobs,$k]}"
            label=$k
            [ "$k" = ceil ] && label="FUSE ceiling"
            [ "$k" = squashfs ] && label=squashfuse_ll
            [ "$k" = raw ] && label="raw tree"
            share=$(pct "$mbs" "$cmbs")
            [ "$mbs" = - ] && share=-
            echo "| $((bs / 1024)) KiB, $jobs | $label | $iops | $mbs | $p50 | $p99 | $share |"
        done
    done
done
