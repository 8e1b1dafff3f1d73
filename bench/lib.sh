# Helpers the bench drivers share (sourced, not run): wall-clock stamps and intervals,
# megabytes, dropping the page cache (root) before a cold run, and the MPI drivers' set-up.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; } # seconds since stamp $1
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; }

# The MPI drivers' set-up: tadoc and tadoc-mpi of build directory $1 (exit 1 when tadoc-mpi was
# not built), a scratch directory $w removed on exit, the CPU count and the rank counts to try
# (RANKS, or 1, 2, 4, ... up to the CPU count).
mpi_setup() {
    tadoc="$1/tadoc" mpi="$1/tadoc-mpi"
    [ -x "$mpi" ] || { echo "$0: $mpi: not built (Open MPI missing)" >&2; exit 1; }
    w=$(mktemp -d "${BENCH_TMP:-/tmp}/mpibench.XXXXXX")
    trap 'rm -rf "$w"' EXIT
    cpus=$(nproc)
    ranks=${RANKS:-$(n=1; while [ "$n" -lt "$cpus" ]; do printf '%s ' "$n"; n=$((n * 2)); done; echo "$cpus")}
}
# tadoc-mpi on N ranks of this machine, unbound, so that each rank's threads may use every core.
mpi_run() {
    local n=$1
    shift
    mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" "$mpi" "$@"
}
# wall CMD...: CMD's wall seconds (two decimals), its output in $w/out.
wall() {
    local t0
    t0=$(now)
    "$@" >"$w/out"
    awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'
}
