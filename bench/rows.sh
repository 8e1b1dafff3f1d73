#!/usr/bin/env bash
# The cold/warm rows of bench/mount.sh without the rest (no pack, no fio), for quick
# alternating comparisons: bench/rows.sh BUILD ARCHIVE SQFS KIND... with KIND rw (tadocfs, the
# default read-write mount), ro (tadocfs -o ro) or sq (squashfuse_ll on SQFS). Per KIND, one
# line: mount time, mount to the first byte of a file, cold `tar cf - . | wc -c` (fresh mount,
# caches dropped) and the daemon's CPU over it, the warm tar, a cold `grep -r -c static .` (fresh
# mount again, started after the first byte) and the daemon's CPU. Needs root.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
build=$(cd "$1" && pwd) archive=$2 sqfs=$3
shift 3
m=$(mktemp -d "${BENCH_TMP:-/tmp}/rows.XXXXXX")
trap 'fusermount3 -u "$m" 2>/dev/null || true; rmdir "$m"' EXIT
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
mnt() {
    case $1 in
    rw) "$build/tadocfs" "$archive" "$m" ;;
    ro) "$build/tadocfs" -o ro "$archive" "$m" ;;
    sq) squashfuse_ll "$sqfs" "$m" ;;
    *) echo "bench/rows.sh: unknown kind $1" >&2 && exit 2 ;;
    esac
    pid=$(pgrep -f -- "$m\$" | head -1)
}
for k in "$@"; do
    drop_caches
    t=$(now) && mnt "$k" && ms=$(since "$t")
    t=$(now) && (cd "$m" && tar cf - . | wc -c) >/dev/null && cold=$(since "$t") c1=$(cpu "$pid")
    t=$(now) && (cd "$m" && tar cf - . | wc -c) >/dev/null && warm=$(since "$t")
    fusermount3 -u "$m" && drop_caches && mnt "$k"
    t=$(now) && head -c1 "$(find "$m" -type f -size +0 -print -quit)" >/dev/null && fb=$(since "$t")
    t=$(now) && (cd "$m" && grep -r -c static . | wc -l) >/dev/null && g=$(since "$t") c2=$(cpu "$pid")
    fusermount3 -u "$m"
    echo "$k: mount ${ms}s first-byte ${fb}s tar-cold ${cold}s (daemon cpu ${c1}s)" \
        "tar-warm ${warm}s grep-cold ${g}s (daemon cpu ${c2}s) load $(cut -d' ' -f1 /proc/loadavg)"
done
