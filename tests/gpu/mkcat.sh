#!/usr/bin/env bash
# Make the archive of large files that tests/gpu/run.sh times mounted reads on: the Linux 6.1
# *.c and *.h files in path order, concatenated into 48 files of 4 to 8 MB (a file is closed
# once it holds 4 MiB; 242,019,165 bytes, 30.6 MB packed), so that reads are large.
# usage: tests/gpu/mkcat.sh LINUX_TREE [OUT.tdc] (default tests/tmp/gpubig/linux-cat.tdc; the
# tree comes from Debian's linux-source-6.1, as tests/corpus.sh and bench/README.md describe).
set -euo pipefail
src=${1:?usage: mkcat.sh LINUX_TREE [OUT.tdc]}
out=${2:-tests/tmp/gpubig/linux-cat.tdc}
dir=$(dirname "$out")/linux-cat
rm -rf "$dir"
mkdir -p "$dir"
n=0 size=0 limit=$((4 << 20))
while IFS= read -r -d '' f; do
    if [ $n -eq 0 ] || [ $size -ge $limit ]; then
        [ $n -eq 48 ] && break
        part=$(printf '%s/part%02d.txt' "$dir" $n)
        : >"$part"
        n=$((n + 1)) size=0
    fi
    cat "$src/$f" >>"$part"
    size=$((size + $(stat -c %s "$src/$f")))
done < <(cd "$src" && find . -type f -name '*.[ch]' -print0 | LC_ALL=C sort -z)
"$(dirname "$0")/../../build/rel/tadoc" pack -q "$dir" -o "$out"
echo "$out: $(cat "$dir"/* | wc -c) bytes in $n files"
