#!/usr/bin/env bash
# Writes through a tadocfs mount (changes go to ARCHIVE.journal) next to the same operations
# on tmpfs and on a plain directory of the local disk, all in this one run: sequential write
# of SIZE_MB MiB (dd, 1 MiB blocks, conv=fsync) and its read-back, fio 4 KiB random
# overwrites into a FIO_MB MiB file, APPENDS `echo line >> file` from a bash loop, the
# latency of FSYNCS fsyncs after a 4 KiB write (bench/fsynclat), and `sed -i` on a 10 MB text
# file; then the journal size and the remount (journal replay) time. The archive, packed
# from TREE, is mounted twice: from the local disk (its journal beside it there) and from
# tmpfs (so the disk is not the only bottleneck). The written data is real text, taken from
# the files of TEXT (default: TREE, repeated as needed).
#
# usage: [BUILD=build/rel] [SIZE_MB=1024] [FIO_MB=64] [FIO_OPS=65536] [APPENDS=10000]
#        [FSYNCS=1000] [DEFAULT_MB=1024] [ROUNDS=3] bench/write.sh TREE NAME [TEXT]
# Markdown on stdout; needs root (drop_caches, a tmpfs mount). Works under ${BENCH_TMP:-bench/tmp}
# (must be on the local disk). The mounts use -o compact_threshold=0, so the numbers are the
# journal path alone; DEFAULT_MB (0 skips) then repeats the dd with the default threshold,
# where background compactions run during the write. Every test runs ROUNDS times, the kinds
# in turn within a round; the tables show medians (the values of every round below them).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/bench/lib.sh"
build=${BUILD:-build/rel}
case $build in /*) ;; *) build="$top/$build" ;; esac
[ $# -ge 2 ] || { echo "usage: bench/write.sh TREE NAME [TEXT]" >&2; exit 2; }
tree=$(cd "$1" && pwd) name=$2 text=$(cd "${3:-$1}" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "bench/write.sh: needs root (drop_caches, tmpfs mount)" >&2; exit 1; }
for t in fio fusermount3 python3 getfattr; do
    command -v "$t" >/dev/null || { echo "bench/write.sh: $t is not installed" >&2; exit 1; }
done
for b in tadoc tadocfs bench/fsynclat; do
    [ -x "$build/$b" ] || { echo "bench/write.sh: $build/$b is missing (make BUILD=...)" >&2; exit 1; }
done
SIZE_MB=${SIZE_MB:-1024} FIO_MB=${FIO_MB:-64} FIO_OPS=${FIO_OPS:-65536}
APPENDS=${APPENDS:-10000} FSYNCS=${FSYNCS:-1000} DEFAULT_MB=${DEFAULT_MB:-1024} ROUNDS=${ROUNDS:-3}
SED_MB=10 # sed -i input, in units of 2^20 bytes
tmpbase=${BENCH_TMP:-$top/bench/tmp}
mkdir -p "$tmpbase"
W=$(mktemp -d "$tmpbase/writebench.XXXXXX") # on the local disk
T=$W/tmpfs                                 # a tmpfs of its own
mkdir "$T"
mounts=()
cleanup() {
    for m in "${mounts[@]}"; do
        fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
    done
    sleep 1
    umount "$T" 2>/dev/null || umount -l "$T" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
mount -t tmpfs tmpfs "$T" # default size: half the memory, used as needed

rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? b / 1e6 / s : 0) }'; }
per_s() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }'; }

# The text the tests write: the files of $text in path order, repeated until BYTES.
text_file() { # OUT BYTES
    local have
    have=$(find "$text" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    [ "$have" -gt 0 ] || { echo "bench/write.sh: no text under $text" >&2; exit 1; }
    (
        set +o pipefail
        while :; do
            find "$text" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
        done 2>/dev/null | head -c "$2" >"$1"
    )
    [ "$(stat -c %s "$1")" -eq "$2" ] || { echo "bench/write.sh: could not make $1" >&2; exit 1; }
}
text_file "$T/src.seq" $((SIZE_MB << 20))
head -c $((SED_MB << 20)) "$T/src.seq" >"$T/src.sed"
head -c $((FIO_MB << 20)) "$T/src.seq" >"$T/src.fio"

t0=$(now)
"$build/tadoc" pack -q "$tree" -o "$W/a.tdc"
pack_s=$(since "$t0")
cp "$W/a.tdc" "$T/a.tdc"
asize=$(stat -c %s "$W/a.tdc")
files=$(find "$tree" -type f | wc -l)
bytes=$(find "$tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')

# tadocfs of ARCHIVE on MOUNTPOINT with OPTIONS; sets pid (the daemon).
tmount() { # ARCHIVE MOUNTPOINT OPTIONS
    mkdir -p "$2"
    "$build/tadocfs" -o "$3" "$1" "$2"
    mounts+=("$2")
    pid=$(pgrep -f -- "$2\$")
    [ "$(wc -w <<<"$pid")" -eq 1 ] || { echo "bench/write.sh: daemon of $2 not found" >&2; exit 1; }
}
# Unmount and wait for the daemon to write out its buffers and exit.
tumount() { # MOUNTPOINT PID
    fusermount3 -u "$1"
    while kill -0 "$2" 2>/dev/null; do sleep 0.1; done
}
xattr() { getfattr --only-values -n "user.tadoc.$2" "$1" 2>/dev/null; }

# The kinds compared, and where each one's files go.
kinds=(tmpfs disk tdisk ttmpfs)
declare -A dir arch R pids
dir[tmpfs]=$T/plain dir[disk]=$W/plain
mkdir -p "${dir[tmpfs]}" "${dir[disk]}"
arch[tdisk]=$W/a.tdc arch[ttmpfs]=$T/a.tdc
for k in tdisk ttmpfs; do
    tmount "${arch[$k]}" "$W/m-$k" compact_threshold=0
    dir[$k]=$W/m-$k/bench
    pids[$k]=$pid
    mkdir "${dir[$k]}"
done

# measure KIND ROUND: every test once on KIND; results in V[metric,KIND,ROUND].
declare -A V
measure() {
    local k=$1 r=$2 d=${dir[$1]} t0 s
    # Sequential write, then its read-back (cold: page cache dropped; then warm), checked.
    sync
    t0=$(now)
    dd if="$T/src.seq" of="$d/seq" bs=1M count="$SIZE_MB" conv=fsync status=none
    s=$(since "$t0")
    V[seqw,$k,$r]=$(rate $((SIZE_MB << 20)) "$s") V[seqw_s,$k,$r]=$s
    [ -z "${arch[$k]:-}" ] || [ "$r" -gt 1 ] || R[jseq,$k]=$(stat -c %s "${arch[$k]}.journal")
    drop_caches
    t0=$(now)
    dd if="$d/seq" of=/dev/null bs=1M status=none
    V[seqr,$k,$r]=$(rate $((SIZE_MB << 20)) "$(since "$t0")")
    t0=$(now)
    dd if="$d/seq" of=/dev/null bs=1M status=none
    V[seqrw,$k,$r]=$(rate $((SIZE_MB << 20)) "$(since "$t0")")
    cmp -s "$T/src.seq" "$d/seq" || { echo "bench/write.sh: $k: the file read back differs" >&2; exit 1; }
    rm "$d/seq"

    # fio 4 KiB random overwrites of an existing file of text (psync, 1 job), then fio's
    # own verification pass (crc32c in every block) over what it wrote.
    cp "$T/src.fio" "$d/rand"
    sync
    (cd "$d" && fio --name=w --filename=rand --rw=randwrite --bs=4k --size="${FIO_MB}m" \
        --io_size=$((2 * FIO_OPS * 4))k --ioengine=psync --randrepeat=1 --randseed=42 \
        --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 --group_reporting \
        --output-format=json --output="$W/fio.json" >/dev/null) ||
        { echo "bench/write.sh: $k: fio failed or its verification found bad data" >&2; exit 1; }
    read -r V[fioiops,$k,$r] V[fio50,$k,$r] V[fio99,$k,$r] R[fioops] < <(python3 - "$W/fio.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
w, p = j["write"], j["write"]["clat_ns"]["percentile"]
assert j["error"] == 0
print(f'{w["iops"]:.0f} {p["50.000000"] / 1e3:.1f} {p["99.000000"] / 1e3:.1f} {w["total_ios"]}')
PY
    )
    # The fragmented file read back (every overwrite is a piece of its own in tadocfs).
    drop_caches
    t0=$(now)
    dd if="$d/rand" of=/dev/null bs=1M status=none
    V[fragr,$k,$r]=$(rate $((FIO_MB << 20)) "$(since "$t0")")
    rm "$d/rand"

    # APPENDS shell appends, each an open, one write and a close.
    sync
    t0=$(now)
    for ((i = 0; i < APPENDS; i++)); do echo "line $i of the appends test" >>"$d/app"; done
    V[app,$k,$r]=$(per_s "$APPENDS" "$(since "$t0")")
    [ "$(wc -l <"$d/app")" -eq "$APPENDS" ] || { echo "bench/write.sh: $k: appends lost" >&2; exit 1; }
    rm "$d/app"

    # fsync latency after 4 KiB writes.
    local f
    f=$("$build/bench/fsynclat" "$d/fsync" "$FSYNCS" 4096)
    V[f50,$k,$r]=$(fld "$f" p50_us) V[f99,$k,$r]=$(fld "$f" p99_us) V[fmax,$k,$r]=$(fld "$f" max_us)
    rm "$d/fsync"

    # sed -i: a new file written next to the old, renamed over it.
    cp "$T/src.sed" "$d/sed.txt"
    sync
    t0=$(now)
    sed -i 's/static/STATIC/g' "$d/sed.txt"
    V[sed,$k,$r]=$(since "$t0")
    R[sedsum,$k]=$(md5sum <"$d/sed.txt" | cut -d' ' -f1)
    rm "$d/sed.txt"
}
fld() { awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }' <<<"$1"; }

# ROUNDS rounds, the kinds in turn within each, so that load from elsewhere spreads over all.
for ((r = 1; r <= ROUNDS; r++)); do
    for k in "${kinds[@]}"; do measure "$k" "$r"; done
    for k in disk tdisk ttmpfs; do
        [ "${R[sedsum,$k]}" = "${R[sedsum,tmpfs]}" ] || { echo "bench/write.sh: $k: sed -i result differs" >&2; exit 1; }
    done
done
metrics=(seqw seqw_s seqr seqrw fioiops fio50 fio99 fragr app f50 f99 fmax sed)
for m in "${metrics[@]}"; do
    for k in "${kinds[@]}"; do
        R[$m,$k]=$(for ((r = 1; r <= ROUNDS; r++)); do echo "${V[$m,$k,$r]}"; done | sort -g |
            awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                a = m < 0 ? -m : m; printf (a >= 100 ? "%.0f\n" : a >= 10 ? "%.1f\n" : "%.2f\n"), m }')
        R[$m,$k,all]=$(for ((r = 1; r <= ROUNDS; r++)); do echo "${V[$m,$k,$r]}"; done | paste -sd/)
    done
done

# Journal state and daemon memory, then a remount (replays the whole journal).
for k in tdisk ttmpfs; do
    m=$W/m-$k
    R[jbytes,$k]=$(xattr "$m" journal_bytes) R[jrec,$k]=$(xattr "$m" journal_records)
    R[comp,$k]=$(xattr "$m" compactions)
    R[rss,$k]=$(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/${pids[$k]}/status")
    tumount "$m" "${pids[$k]}"
    drop_caches
    t0=$(now)
    tmount "${arch[$k]}" "$m" compact_threshold=0
    R[remount,$k]=$(since "$t0")
    [ -z "$(ls -A "$m/bench")" ] || { echo "bench/write.sh: $k: files left after replay:" $(ls -lA "$m/bench") >&2; exit 1; }
    tumount "$m" "$pid"
done

# The same dd with the default compact_threshold (a fresh copy of the archive on disk).
if [ "$DEFAULT_MB" -gt 0 ]; then
    cp "$W/a.tdc" "$W/d.tdc"
    if [ "$DEFAULT_MB" -le "$SIZE_MB" ]; then
        head -c $((DEFAULT_MB << 20)) "$T/src.seq" >"$T/src.def"
    else
        text_file "$T/src.def" $((DEFAULT_MB << 20))
    fi
    tmount "$W/d.tdc" "$W/m-def" rw
    sync
    t0=$(now)
    dd if="$T/src.def" of="$W/m-def/seq" bs=1M count="$DEFAULT_MB" conv=fsync status=none
    R[def_s]=$(since "$t0")
    R[def_comp]=$(xattr "$W/m-def" compactions) R[def_j]=$(xattr "$W/m-def" journal_bytes)
    cmp -s "$T/src.def" "$W/m-def/seq" || { echo "bench/write.sh: default threshold: the file read back differs" >&2; exit 1; }
    R[def_rss]=$(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$pid/status")
    # The unmount waits for a compaction still running.
    t0=$(now)
    tumount "$W/m-def" "$pid"
    R[def_umount]=$(since "$t0")
    R[def_asize]=$(stat -c %s "$W/d.tdc") R[def_jend]=$(stat -c %s "$W/d.tdc.journal")
    rm -f "$T/src.def"
fi

# ---- report ----
machine="$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo),"
machine+=" $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
machine+="; load average at the end $(cut -d" " -f1-3 /proc/loadavg)"
fstype() { findmnt -n -o FSTYPE,SOURCE --target "$1" | awk '{ print $1 " on " $2 }'; }
echo "### $name: $files files, $(mb "$bytes") MB"
echo
echo "Machine: $machine; kernel $(uname -r); $(fusermount3 --version 2>&1 | head -1);"
echo "fio $(fio --version | sed 's/^fio-//'). Archive $(mb "$asize") MB (\`tadoc pack\` $pack_s s)."
echo "Local disk: $(fstype "$W"); tmpfs: a tmpfs mounted for the run. Data written: the files of"
echo "\`${text#"$top"/}\` concatenated (text). Mounts: \`tadocfs -o compact_threshold=0\` (no"
echo "background compaction, so these are the journal path itself), one archive on the local"
echo "disk, one on the tmpfs; each journal lies beside its archive."
echo
echo "Medians of $ROUNDS rounds. Slowdown = how many times longer the operation takes than on tmpfs (tmpfs speed ÷ speed, or"
echo "time ÷ tmpfs time; 1.0 = as fast as tmpfs)."
echo
echo "| operation | tmpfs | local disk | tadocfs, archive on disk | slowdown | tadocfs, archive on tmpfs | slowdown |"
echo "|---|---|---|---|---|---|---|"
# row LABEL KEY higher|lower [FORMAT]: the value of each kind, and tadocfs' slowdowns.
slow() { # VALUE TMPFS_VALUE higher|lower
    awk -v x="$1" -v t="$2" -v h="$3" 'BEGIN { r = (h == "higher") ? (x > 0 ? t / x : 0) : (t > 0 ? x / t : 0)
        if (r >= 100) printf "%.0f", r; else if (r >= 10) printf "%.1f", r; else printf "%.2f", r }'
}
row() { # LABEL then 4 values then higher|lower
    local label=$1 a=$2 b=$3 c=$4 d=$5 h=$6
    echo "| $label | $a | $b | $c | $(slow "${c%% *}" "${a%% *}" "$h") | $d | $(slow "${d%% *}" "${a%% *}" "$h") |"
}
row "sequential write, ${SIZE_MB} MiB (dd bs=1M conv=fsync), MB/s" "${R[seqw,tmpfs]}" "${R[seqw,disk]}" "${R[seqw,tdisk]}" "${R[seqw,ttmpfs]}" higher
row "read back the ${SIZE_MB} MiB file, cold (dd bs=1M), MB/s" "${R[seqr,tmpfs]}" "${R[seqr,disk]}" "${R[seqr,tdisk]}" "${R[seqr,ttmpfs]}" higher
row "read it again, warm, MB/s" "${R[seqrw,tmpfs]}" "${R[seqrw,disk]}" "${R[seqrw,tdisk]}" "${R[seqrw,ttmpfs]}" higher
row "4 KiB random overwrites in a ${FIO_MB} MiB file (fio psync, ${R[fioops]} writes), IOPS" "${R[fioiops,tmpfs]}" "${R[fioiops,disk]}" "${R[fioiops,tdisk]}" "${R[fioiops,ttmpfs]}" higher
row "same, write latency p50 µs" "${R[fio50,tmpfs]}" "${R[fio50,disk]}" "${R[fio50,tdisk]}" "${R[fio50,ttmpfs]}" lower
row "same, write latency p99 µs" "${R[fio99,tmpfs]}" "${R[fio99,disk]}" "${R[fio99,tdisk]}" "${R[fio99,ttmpfs]}" lower
row "read back the overwritten ${FIO_MB} MiB file, cold, MB/s" "${R[fragr,tmpfs]}" "${R[fragr,disk]}" "${R[fragr,tdisk]}" "${R[fragr,ttmpfs]}" higher
row "\`echo line >> file\` × ${APPENDS} (bash loop), appends/s" "${R[app,tmpfs]}" "${R[app,disk]}" "${R[app,tdisk]}" "${R[app,ttmpfs]}" higher
row "fsync after a 4 KiB write (× ${FSYNCS}), p50 µs" "${R[f50,tmpfs]}" "${R[f50,disk]}" "${R[f50,tdisk]}" "${R[f50,ttmpfs]}" lower
row "same, p99 µs" "${R[f99,tmpfs]}" "${R[f99,disk]}" "${R[f99,tdisk]}" "${R[f99,ttmpfs]}" lower
row "same, max µs" "${R[fmax,tmpfs]}" "${R[fmax,disk]}" "${R[fmax,tdisk]}" "${R[fmax,ttmpfs]}" lower
row "\`sed -i s/static/STATIC/g\` on ${SED_MB} MiB of text, s" "${R[sed,tmpfs]}" "${R[sed,disk]}" "${R[sed,tdisk]}" "${R[sed,ttmpfs]}" lower
echo
echo "Every round's value (tmpfs; local disk; tadocfs, archive on disk; tadocfs, archive on tmpfs):"
echo
for m in seqw seqr seqrw fioiops fio50 fio99 fragr app f50 f99 fmax sed; do
    echo "- $m: ${R[$m,tmpfs,all]}; ${R[$m,disk,all]}; ${R[$m,tdisk,all]}; ${R[$m,ttmpfs,all]}"
done
echo
echo "Results were checked: the ${SIZE_MB} MiB file read back equals what was written (cmp), fio"
echo "verified every block it wrote (crc32c), the appends all arrived, and the \`sed -i\` output"
echo "equals tmpfs' byte for byte."
echo
echo "| journal, after all $ROUNDS rounds of the tests above | archive on disk | archive on tmpfs |"
echo "|---|---|---|"
echo "| journal after the first ${SIZE_MB} MiB write (MB) | $(mb "${R[jseq,tdisk]}") | $(mb "${R[jseq,ttmpfs]}") |"
echo "| journal at the end (MB; records) | $(mb "${R[jbytes,tdisk]}"); ${R[jrec,tdisk]} | $(mb "${R[jbytes,ttmpfs]}"); ${R[jrec,ttmpfs]} |"
echo "| compactions | ${R[comp,tdisk]} | ${R[comp,ttmpfs]} |"
echo "| daemon peak RSS (MB) | ${R[rss,tdisk]} | ${R[rss,ttmpfs]} |"
echo "| remount, replaying that journal, cold (s) | ${R[remount,tdisk]} | ${R[remount,ttmpfs]} |"
if [ "$DEFAULT_MB" -gt 0 ]; then
    echo
    def=$("$build/tadocfs" --help | perl -0ne 'print $1 if /compact_threshold=BYTES.*?default ([0-9]+[KMG]?)/s')
    echo "With the default \`compact_threshold\` (${def:-?}, from \`tadocfs --help\`), archive on disk: \`dd bs=1M"
    echo "count=$DEFAULT_MB conv=fsync\` of the same text took ${R[def_s]} s ($(rate $((DEFAULT_MB << 20)) "${R[def_s]}") MB/s; without"
    echo "background compaction: ${R[seqw_s,tdisk]} s for ${SIZE_MB} MiB). ${R[def_comp]} compactions had finished when it returned"
    echo "(each recompresses every edited file whole; writes go on meanwhile), with"
    echo "$(mb "${R[def_j]}") MB left in the journal; the unmount after the read-back then took ${R[def_umount]} s (it waits"
    echo "for a compaction in progress), leaving a $(mb "${R[def_asize]}") MB archive and a $(mb "${R[def_jend]}") MB journal;"
    echo "daemon peak RSS before the unmount ${R[def_rss]} MB."
fi
