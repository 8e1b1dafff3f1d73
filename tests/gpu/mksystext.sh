#!/usr/bin/env bash
# Make an archive of a real tree of many small files for tests/gpu/run.sh's mounted reads
# (READS_ARCHIVE): the machine's own system text, copied to a scratch tree and packed. The
# headers (system and CUDA), Python and Perl libraries, /usr/share/doc (with its gzip files),
# /usr/src and the manual pages; on the device image, some 300 MB in 25,000 files.
# usage: tests/gpu/mksystext.sh [OUT.tdc] (default tests/tmp/gpubig/systext.tdc)
set -euo pipefail
out=${1:-tests/tmp/gpubig/systext.tdc}
st=$(dirname "$out")/systext
rm -rf "$st"
mkdir -p "$st"
for d in /usr/include /usr/local/cuda/include /usr/lib/python3* /usr/share/perl* /usr/share/doc \
    /usr/src /usr/share/man; do
    [ -e "$d" ] && cp -a "$d" "$st/$(echo "$d" | tr / _)" 2>/dev/null || true
done
"$(dirname "$0")/../../build/rel/tadoc" pack -q "$st" -o "$out"
echo "$out: $(du -sb "$st" | cut -f1) bytes in $(find "$st" -type f | wc -l) files"
