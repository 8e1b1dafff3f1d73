# Helpers the bench drivers share (sourced, not run): wall-clock stamps and intervals,
# megabytes, and dropping the page cache (root) before a cold run.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; } # seconds since stamp $1
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; }
