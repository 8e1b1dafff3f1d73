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
    for d in engine index kernels fs tools lib include; do cp -r "$TOP/$d" "$S/"; done
    printf '#include "../kernels/gpu_dev.h"\n' >>"$S/engine/backend.h"
    printf '#include "../engine/ana.h"\n' >>"$S/kernels/ana.cu"
    printf '#include <fuse3/fuse.h>\n' >>"$S/engine/vol.c"
    run python3 "$TOP/tests/layers.py" "$S"
    echo "$output"
    rm -rf "$S"
    [ "$status" -eq 1 ]
    [[ "$output" == *"not ok 1 - layers: engine/"* ]]
    [[ "$output" == *'engine/backend.h:'*'#include "../kernels/gpu_dev.h"'* ]]
    [[ "$output" == *'engine/vol.c:'*'#include <fuse3/fuse.h>'* ]]
    [[ "$output" == *"not ok 3 - layers: kernels/"* ]]
    [[ "$output" == *'kernels/ana.cu:'*'#include "../engine/ana.h"'* ]]
}
