#!/usr/bin/env bats
# Replay the fuzz seeds and every regression input (crashes the fuzzers found, now fixed)
# through the fuzz targets built without libFuzzer (tests/fuzz/standalone.c).
load helpers

F="$BATS_TEST_DIRNAME/../fuzz"

replay() {
    run "$TESTBIN/fuzz_$1" "$F/seeds/$1" "$F/regress/$1"
    echo "$output" | tail -20
    [ "$status" -eq 0 ]
    [[ "$output" == *"inputs replayed, 0 unreadable"* ]]
}

@test "fuzz regressions: archive reader (arc_open, section decoders, index build)" {
    replay arc
}

@test "fuzz regressions: journal replay, tree walk and compaction" {
    replay jrnl
}

@test "fuzz regressions: tokenizer" {
    replay tok
}

@test "fuzz regressions: tadoc apply operations parser" {
    replay apply
}
