#!/usr/bin/env bats
# The dependency rule of docs/DESIGN.md section 1: tests/layers.py checks every #include of
# the source folders (one TAP line per folder, known debts as comments).

TOP="$BATS_TEST_DIRNAME/../.."

@test "layers: every #include follows the dependency rule" {
    run python3 "$TOP/tests/layers.py"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
}

@test "layers: the check fails on an include against the rule" {
    S=$(mktemp -d)
    for d in engine kernels fs tools lib include; do cp -r "$TOP/$d" "$S/"; done
    printf '#include "../../kernels/gpu_dev.h"\n' >>"$S/engine/backend/backend.h"
    printf '#include "../engine/analytics/ana.h"\n' >>"$S/kernels/ana.cu"
    printf '#include <fuse3/fuse.h>\n' >>"$S/engine/volume/vol.c"
    printf '#include "../volume/vol.h"\n' >>"$S/engine/base/buf.h" # upward inside engine/
    run python3 "$TOP/tests/layers.py" "$S"
    echo "$output"
    rm -rf "$S"
    [ "$status" -eq 1 ]
    [[ "$output" == *"not ok 1 - layers: engine/"* ]]
    [[ "$output" == *'engine/backend/backend.h:'*'#include "../../kernels/gpu_dev.h"'* ]]
    [[ "$output" == *'engine/volume/vol.c:'*'#include <fuse3/fuse.h>'* ]]
    [[ "$output" == *'engine/base/buf.h:'*'#include "../volume/vol.h"'* ]]
    [[ "$output" == *"not ok 2 - layers: kernels/"* ]]
    [[ "$output" == *'kernels/ana.cu:'*'#include "../engine/analytics/ana.h"'* ]]
}
