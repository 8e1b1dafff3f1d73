#!/usr/bin/env bash
# The main job on the bundled sample: pack it, show what the archive holds, read files out of
# the grammar, and check the round trip. usage: tools/demo.sh BUILD_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/${1:-build/rel}"
tadoc="$build/tadoc"
work=$(mktemp -d /tmp/tadoc-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
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
step tadoc verify sample.tdc
"$tadoc" verify "$work/sample.tdc"
step "tadoc unpack sample.tdc out && diff -r tests/data/sample out"
"$tadoc" unpack "$work/sample.tdc" "$work/out"
diff -r "$sample" "$work/out" && echo "identical"
