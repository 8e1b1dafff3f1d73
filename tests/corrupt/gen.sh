#!/usr/bin/env bash
# Regenerate the damaged archives and journals of this directory and their MANIFEST.
#   tests/corrupt/gen.sh [BUILD]      (BUILD defaults to build/rel; run `make` first)
# The base archive gets a new random identity each time, so every file changes; commit them
# together. tests/bats/corrupt.bats checks each against MANIFEST.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build/rel}
cd "$top/tests/corrupt"
find . -maxdepth 1 \( -name '*.tdc' -o -name '*.journal' -o -name MANIFEST \) -delete
"$top/$build/tests/mkcorrupt" .
