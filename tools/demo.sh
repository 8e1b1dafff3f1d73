#!/usr/bin/env bash
# The main job on the bundled sample: pack it, mount it, read files out of the grammar with
# cat and grep, read word counts computed on the grammar, unmount, and check the round trip.
# usage: tools/demo.sh BUILD_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/${1:-build/rel}"
tadoc="$build/tadoc"
tadocfs="$build/tadocfs"
work=$(mktemp -d /tmp/tadoc-demo.XXXXXX)
mnt="$work/mnt"
trap 'mountpoint -q "$mnt" && fusermount3 -u "$mnt"; rm -rf "$work"' EXIT
sample="$top/tests/data/sample"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step tadoc pack tests/data/sample -o sample.tdc
"$tadoc" pack "$sample" -o "$work/sample.tdc"
step tadoc stat sample.tdc
"$tadoc" stat "$work/sample.tdc"
step tadoc ls -l sample.tdc
"$tadoc" ls -l "$work/sample.tdc"
step tadoc cat sample.tdc text/README.txt
"$tadoc" cat "$work/sample.tdc" text/README.txt
step "tadoc cat sample.tdc logs/syslog.2 | grep -c sshd"
"$tadoc" cat "$work/sample.tdc" logs/syslog.2 | grep -c sshd
step tadoc extract sample.tdc logs/syslog.1 1000 160
"$tadoc" extract "$work/sample.tdc" logs/syslog.1 1000 160
echo
mkdir "$mnt"
step tadocfs sample.tdc mnt
"$tadocfs" "$work/sample.tdc" "$mnt"
step ls -l mnt mnt/logs
ls -l "$mnt" "$mnt/logs"
step cat mnt/text/README.txt
cat "$mnt/text/README.txt"
step "grep -r -c 'Accepted publickey' mnt"
(cd "$mnt" && grep -r -c 'Accepted publickey' . | sort)
step "head -8 mnt/.wordcount        # word counts of the whole archive, from the grammar"
head -8 "$mnt/.wordcount"
step "head -5 mnt/logs/.wordcount   # scoped to one directory"
head -5 "$mnt/logs/.wordcount"
step "diff -r tests/data/sample mnt"
diff -r "$sample" "$mnt" && echo identical
step fusermount3 -u mnt
fusermount3 -u "$mnt"
step tadoc verify sample.tdc
"$tadoc" verify "$work/sample.tdc"
step "tadoc unpack sample.tdc out && diff -r tests/data/sample out"
"$tadoc" unpack "$work/sample.tdc" "$work/out"
diff -r "$sample" "$work/out" && echo "identical"
