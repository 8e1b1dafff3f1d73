#!/usr/bin/env bash
# Draw the benchmark tables of bench/results/*.md as PNG charts (gnuplot), next to them:
#   pack-ratio.png       compression ratio of tadoc and its peers, per corpus (pack.md)
#   mount-rows.png       mounted-read rows of tadocfs (rw, -o ro) and squashfuse_ll (mount.md)
#   mount-fio.png        fio random reads: tadocfs, squashfuse_ll, raw tree, FUSE ceiling
#   analytics-linux.png  analytics on the grammar vs the raw-file pipelines (analytics.md)
#   analytics-brown.png  the same on the Brown corpus
#   gpu-analytics.png    the six analytics, CPU (1 and 2 threads) vs GPU (gpu.md)
# Each chart takes the first table of its kind in its results file (each file holds the
# current tables of one benchmark). A table that is missing is skipped with a note.
# usage: bench/charts.sh [RESULTS_DIR]   (make bench runs it at the end)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
res=${1:-$top/bench/results}
command -v gnuplot >/dev/null || { echo "charts.sh: gnuplot missing (tools/deps.sh bench)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# table FILE HEADER_REGEX [SECTION_REGEX] [LAST]: the rows of the first markdown table whose
# header line matches HEADER_REGEX (after the first heading matching SECTION_REGEX, if
# given), as TAB-separated cells without the header and separator lines. With LAST=1, the
# last such table of the first "## " section that has one (the final measurement of a run).
table() {
    awk -v hdr="$2" -v sec="${3:-}" -v last="${4:-0}" '
        BEGIN { insec = (sec == "") }
        !insec && /^#/ && $0 ~ sec { insec = 1; next }
        !insec { next }
        /^## / && found && last { exit }
        !intab && /^\|/ && $0 ~ hdr { intab = 1; found = 1; out = ""; next }
        intab && /^\|---/ { next }
        intab && /^\|/ {
            line = $0
            gsub(/\\\|/, "\001", line)          # an escaped pipe inside a cell
            sub(/^\| */, "", line); sub(/ *\| *$/, "", line)
            gsub(/ *\| */, "\t", line)
            gsub(/\001/, "|", line)
            out = out line "\n"; next }
        intab { intab = 0; if (!last) exit }
        END { printf "%s", out }' "$1"
}

# The first number of a cell ("23.923 (8.64)" -> 23.923, "1533.931+" -> 1533.931).
num() { sed -E 's/^[^0-9]*([0-9]+(\.[0-9]+)?).*/\1/'; }

common='set terminal pngcairo size 1000,560 font "DejaVu Sans,11" noenhanced
set style data histogram
set style histogram clustered gap 1.5
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left
set grid ytics
set xtics nomirror rotate by -25
set ytics nomirror
set border 3'

made=()

# ---- pack.md: ratio per corpus ----
pack_dat="$tmp/pack.dat"
{
    printf 'corpus\ttadoc\tgzip -9\tzstd -19 --long=27\txz -9\n'
    for corpus in "Brown corpus" "Linux 6.1 source tree"; do
        rows=$(table "$res/pack.md" '^\| tool \| archive MB \| ratio' "^### $corpus")
        [ -n "$rows" ] || continue
        printf '%s' "$corpus"
        for tool in "tadoc" "gzip -9" "zstd -19 --long=27" "xz -9"; do
            printf '\t%s' "$(awk -F'\t' -v t="$tool" '$1 == t {print $3}' <<<"$rows" | num)"
        done
        printf '\n'
    done
} >"$pack_dat"
if [ "$(wc -l <"$pack_dat")" -gt 1 ]; then
    gnuplot <<EOF
$common
set output "$res/pack-ratio.png"
set title "Compression ratio (original bytes / archive bytes), higher is better\nbench/results/pack.md"
set ylabel "ratio"
set yrange [0:*]
set xtics norotate
set datafile separator "\t"
set ytics 1
plot "$pack_dat" using 2:xtic(1) title columnhead, '' using 3 title columnhead, \
     '' using 4 title columnhead, '' using 5 title columnhead
EOF
    made+=(pack-ratio.png)
else
    echo "charts.sh: no pack table in $res/pack.md" >&2
fi

# ---- mount.md: rows.sh rows (two rounds per cell: their mean) ----
rows=$(table "$res/mount.md" '^\| \| tadocfs rw \| tadocfs -o ro \| squashfuse_ll' '' 1)
if [ -n "$rows" ]; then
    {
        printf 'row\ttadocfs rw\ttadocfs -o ro\tsquashfuse_ll\n'
        awk -F'\t' '{
            label = $1; gsub(/`/, "", label); sub(/ \(s\)$/, "", label)
            printf "%s", label
            for (i = 2; i <= 4; i++) {
                n = split($i, v, /, */); s = 0
                for (k = 1; k <= n; k++) s += v[k]
                printf "\t%.3f", s / n
            }
            printf "\n" }' <<<"$rows"
    } >"$tmp/mount.dat"
    gnuplot <<EOF
$common
set output "$res/mount-rows.png"
set title "Mounted reads of the whole Linux 6.1 tree, seconds (mean of two rounds), lower is better\nbench/rows.sh, the last table of bench/results/mount.md"
set ylabel "seconds (log scale)"
set logscale y
set yrange [0.005:*]
set bmargin 7
set datafile separator "\t"
plot "$tmp/mount.dat" using 2:xtic(1) title columnhead, '' using 3 title columnhead, '' using 4 title columnhead
EOF
    made+=(mount-rows.png)
else
    echo "charts.sh: no rows.sh table in $res/mount.md" >&2
fi

# ---- mount.md: fio random reads (IOPS) of the newest full mount.sh table ----
rows=$(table "$res/mount.md" '^\| block, jobs \| \| IOPS')
if [ -n "$rows" ]; then
    {
        printf 'block, jobs\tFUSE ceiling\ttadocfs\tsquashfuse_ll\traw tree\n'
        awk -F'\t' '{ key = $1; v[key, $2] = $3; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
            END { for (i = 1; i <= n; i++) { k = order[i]
                printf "%s\t%s\t%s\t%s\t%s\n", k, v[k, "FUSE ceiling"], v[k, "tadocfs"],
                    v[k, "squashfuse_ll"], v[k, "raw tree"] } }' <<<"$rows"
    } >"$tmp/fio.dat"
    gnuplot <<EOF
$common
set output "$res/mount-fio.png"
set title "fio random reads on the Linux tree (block size, jobs), IOPS, higher is better\nbench/mount.sh, newest table of bench/results/mount.md"
set ylabel "IOPS (log scale)"
set logscale y
set xtics norotate
set key top right
set datafile separator "\t"
plot "$tmp/fio.dat" using 2:xtic(1) title columnhead, '' using 3 title columnhead, \
     '' using 4 title columnhead, '' using 5 title columnhead
EOF
    made+=(mount-fio.png)
fi

# ---- analytics.md: tadoc (auto, 2 threads) vs the pipelines, per corpus ----
for corpus in "Linux 6.1 source tree:linux" "Brown corpus:brown"; do
    name=${corpus%%:*} tag=${corpus##*:}
    rows=$(table "$res/analytics.md" '^\| analytic \| scope \| chose' "^### $name")
    if [ -z "$rows" ]; then
        echo "charts.sh: no analytics table for $name in $res/analytics.md" >&2
        continue
    fi
    {
        printf 'analytic\ttadoc on the grammar (auto, 2 threads)\traw-file pipeline\ttadoc unpack + pipeline\n'
        while IFS=$'\t' read -r an scope _ _ _ _ _ _ auto2 _ pipe unpack _; do
            printf '%s %s\t%s\t%s\t%s\n' "$an" "$scope" "$(num <<<"$auto2")" "$(num <<<"$pipe")" \
                "$(sed -E 's/.*= *//' <<<"$unpack" | num)"
        done <<<"$rows"
    } >"$tmp/ana-$tag.dat"
    gnuplot <<EOF
$common
set terminal pngcairo size 1200,600 font "DejaVu Sans,11" noenhanced
set output "$res/analytics-$tag.png"
set title "Analytics, $name: wall seconds from start to exit, lower is better\nbench/analytics.sh, bench/results/analytics.md"
set ylabel "seconds (log scale)"
set logscale y
set bmargin 10
set rmargin 14
set key top right
set datafile separator "\t"
plot "$tmp/ana-$tag.dat" using 2:xtic(1) title columnhead, '' using 3 title columnhead, '' using 4 title columnhead
EOF
    made+=("analytics-$tag.png")
done

# ---- gpu.md: the six analytics, CPU vs GPU ----
rows=$(table "$res/gpu.md" '^\| analytic \| CPU 1 thread \(ms\) \| CPU 2 threads \(ms\) \| GPU end to end')
if [ -n "$rows" ]; then
    {
        printf 'analytic\tCPU, 1 thread\tCPU, 2 threads\tGPU (H100), end to end\n'
        awk -F'\t' '$2 != "" { printf "%s\t%s\t%s\t%s\n", $1, $2, $3, $4 }' <<<"$rows"
    } >"$tmp/gpu.dat"
    gnuplot <<EOF
$common
set output "$res/gpu-analytics.png"
set title "The six analytics on the whole Linux archive, milliseconds, lower is better\nbench/results/gpu.md (gpucheck --analytics; GPU: NVIDIA H100)"
set ylabel "milliseconds (log scale)"
set logscale y
set xtics norotate
set key top left
set datafile separator "\t"
plot "$tmp/gpu.dat" using 2:xtic(1) title columnhead, '' using 3 title columnhead, '' using 4 title columnhead
EOF
    made+=(gpu-analytics.png)
else
    echo "charts.sh: no CPU vs GPU analytics table in $res/gpu.md" >&2
fi

echo "charts.sh: wrote ${made[*]/#/$res/}"
