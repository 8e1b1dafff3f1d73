#!/usr/bin/env bats
# The manual pages (man/tadoc.1, man/tadocfs.8) against the tools' --help, and the bash
# completion (tools/tadoc.bash-completion) against the tool.

load helpers
: "${TADOCFS:?set TADOCFS (tests/run.sh does)}"

TOP="$BATS_TEST_DIRNAME/../.."

@test "every option of tadoc --help, tadoc CMD --help and tadocfs --help is in the man pages, and the reverse" {
    run python3 "$TOP/tests/mancheck.py" "$TADOC" "$TADOCFS" "$TOP/man"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *" tadoc commands, 0 differences"* ]]
}

@test "mancheck notices an option missing from a man page or from --help" {
    scratch
    mkdir "$S/man"
    # tadocfs(8) without -o preload: --help has an option the page lacks.
    grep -v '^\.B \\-o preload$' "$TOP/man/tadocfs.8" >"$S/man/tadocfs.8"
    # tadoc(1) with an extra option under ls: the page has one --help lacks.
    sed 's/^List the archived paths/Use \\fB\\-\\-color\\fR to colour. &/' "$TOP/man/tadoc.1" >"$S/man/tadoc.1"
    run python3 "$TOP/tests/mancheck.py" "$TADOC" "$TADOCFS" "$S/man"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" == *"tadocfs: -o preload is in --help but not in the man page"* ]]
    [[ "$output" == *"tadoc ls: --color is in the man page but not in --help"* ]]
    rm -rf "$S"
}

@test "the man pages render without warnings and name every virtual file, xattr and exit status" {
    for page in tadoc.1 tadocfs.8; do
        run bash -c "LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l '$TOP/man/$page' 2>&1 >/dev/null"
        [ -z "$output" ] || { echo "$page: $output"; false; }
    done
    local text
    text=$(MANWIDTH=200 man -l "$TOP/man/tadocfs.8" 2>/dev/null)
    for name in .wordcount .sort .invindex .termvector .seqcount .rankedinvindex .search/ \
        user.tadoc.archive_size user.tadoc.files user.tadoc.ratio user.tadoc.rules \
        user.tadoc.journal_bytes user.tadoc.journal_records user.tadoc.dirty_files \
        user.tadoc.compactions user.tadoc.backend user.tadoc.compact_error user.tadoc.compact \
        user.tadoc.size user.tadoc.pending user.tadoc.share "EXIT STATUS" EXAMPLES fuse.tadocfs; do
        [[ "$text" == *"$name"* ]] || { echo "tadocfs(8) lacks $name"; false; }
    done
    text=$(MANWIDTH=200 man -l "$TOP/man/tadoc.1" 2>/dev/null)
    for name in "EXIT STATUS" EXAMPLES TADOC_GPU TADOC_TRAVERSAL TADOC_THREADS; do
        [[ "$text" == *"$name"* ]] || { echo "tadoc(1) lacks $name"; false; }
    done
}

# Completions offered for the words of a command line, the last being completed.
complete_words() {
    PATH="$(dirname "$TADOC"):$PATH" bash -c 'source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _tadoc
        printf "%s\n" "${COMPREPLY[@]}"' _ "$TOP/tools/tadoc.bash-completion" "$@"
}

@test "bash completion: commands, each command's options, archives, paths inside an archive" {
    [ "$(basename "$TADOC")" = tadoc ] || skip "the completion runs the tool as 'tadoc'"
    scratch
    cd "$S"
    "$TADOC" pack "$TOP/tests/data/sample" -o s.tdc -q
    mkdir d
    run complete_words tadoc ''
    # Every command of tadoc --help is offered.
    for c in $("$TADOC" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'); do
        [[ "$output" == *"$c"* ]] || { echo "missing command $c"; false; }
    done
    [ "$(complete_words tadoc rank)" = rankedinvindex ]
    [ "$(complete_words tadoc pack --se)" = --segment ]
    [ "$(complete_words tadoc pack --sh)" = --shard-size ]
    [ "$(complete_words tadoc apply --o)" = --offsets= ]
    [ "$(complete_words tadoc compact --f)" = --force ]
    [ "$(complete_words tadoc cat s.)" = s.tdc ]
    [ "$(complete_words tadoc cat s.tdc text/R)" = text/README.txt ]
    # A scope may be a directory or a file: both are offered.
    [ "$(complete_words tadoc wordcount s.tdc lo | head -2)" = $'logs\nlogs/syslog.1' ]
    [ "$(complete_words tadoc pack d -o s.t)" = s.tdc ]
    cd /
    rm -rf "$S"
}

@test "bash completion: names inside an archive are offered quoted and never run" {
    [ "$(basename "$TADOC")" = tadoc ] || skip "the completion runs the tool as 'tadoc'"
    scratch
    cd "$S"
    mkdir t
    echo x >'t/$(touch ran)'
    echo x >'t/`touch ran`'
    echo x >'t/has space'
    echo x >'t/${HOME}'
    echo x >$'t/new\nline'
    "$TADOC" pack t -o n.tdc -q
    run complete_words tadoc cat n.tdc ''
    echo "$output"
    [ ! -e ran ]
    [[ "$output" == *'\$\(touch\ ran\)'* ]]
    [[ "$output" == *'has\ space'* ]]
    [[ "$output" == *'\$\{HOME\}'* ]]
    [[ "$output" == *"\$'new\\nline'"* ]]
    [ "$(complete_words tadoc cat n.tdc has)" = 'has\ space' ]
    cd /
    rm -rf "$S"
}
