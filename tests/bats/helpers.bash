# Shared setup for the BATS suites: paths of the binaries under test and scratch space.
: "${TADOC:?set TADOC (tests/run.sh does)}"
: "${TESTBIN:?set TESTBIN}"
: "${CORPORA:?set CORPORA}"

scratch() {
    S=$(mktemp -d "${BATS_TMPDIR:-/tmp}/tadoc.XXXXXX")
}

# A scratch directory with an empty mountpoint M in it, and its cleanup (setup / teardown).
scratch_mnt() {
    scratch
    M="$S/mnt"
    mkdir "$M"
}

scratch_mnt_free() {
    fusermount3 -u "$M" 2>/dev/null || true
    rm -rf "$S"
}

# Metadata listing used to compare trees: path, type, mode, size, mtime, link target.
tree_meta() {
    (cd "$1" && find . -printf '%P\t%y\t%m\t%s\t%T@\t%l\t%U\t%G\n' | LC_ALL=C sort)
}

# Byte offsets of each section, as "name offset stored" lines from `tadoc stat`.
sections() {
    "$TADOC" stat "$1" | awk '/^ +(dictionary|rules|root|file table) /{
        if ($1 == "file") print "files", $4, $5; else print $1, $3, $4 }'
}

# The number of shards of archive $1 (tadoc stat).
shards_of() { "$TADOC" stat "$1" | awk '/^shards/ {print $2}'; }

rand() { # SEED BYTES: that many pseudo-random bytes on stdout
    python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(int(sys.argv[1])).randbytes(int(sys.argv[2])))' "$1" "$2"
}

flip_byte() { # FILE OFFSET
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $(((b + 1) % 256)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# Mount state of a mountpoint, from /proc/mounts.
is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
not_mounted() { ! is_mounted "$1"; }
wait_mounted() { # MOUNTPOINT: up to 5 s
    for _ in $(seq 100); do is_mounted "$1" && return 0; sleep 0.05; done
    return 1
}
wait_unmounted() { # MOUNTPOINT: up to 5 s
    for _ in $(seq 100); do is_mounted "$1" || return 0; sleep 0.05; done
    return 1
}
# Start the daemon; it must not inherit BATS's fd 3 or the suite waits for it to exit.
mnt() { "$TADOCFS" "$@" 3>&-; }
