#!/usr/bin/env bats
# The Debian packages (make deb): built once (tools/mkdeb.sh reuses build/deb-out while the
# sources are unchanged), checked by lintian, installed with dpkg -i, then used as a user
# would: an /etc/fstab line of type fuse.tadocfs mounted with `mount DIR`, `mount -t tadocfs`
# through mount.tadocfs, the man pages, the bash completion, and docs/example.c built against
# the installed library with pkg-config. Finally dpkg -r removes every file it installed.
#
# Needs root. It changes the system while it runs: the packages are installed and one line
# is added to /etc/fstab; teardown_file removes both and checks that /etc/fstab is restored
# byte for byte. When a tadoc package is already installed the file is skipped, so nothing
# of the machine's own installation is touched.

load helpers

PKGS=(tadoc libtadoc0 libtadoc-dev)

installed() { # PKG: whether dpkg has it installed (or half-installed)
    dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qv '^not-installed$'
}

setup_file() {
    export TOP="$BATS_TEST_DIRNAME/../.."
    export OUT="$TOP/build/deb-out"
    export DS
    DS=$(mktemp -d /tmp/tadoc-deb.XXXXXX)
    export SKIP_ALL=""
    [ "$(id -u)" -eq 0 ] || { SKIP_ALL="needs root (dpkg -i, mount, /etc/fstab)"; return 0; }
    for p in "${PKGS[@]}"; do
        installed "$p" && { SKIP_ALL="package $p is already installed on this machine"; return 0; }
    done
    # A container may have no /etc/fstab: then the test makes one and removes it after.
    if [ -e /etc/fstab ]; then cp -p /etc/fstab "$DS/fstab.orig"; else touch "$DS/no-fstab"; fi
    "$TOP/tools/mkdeb.sh" >"$DS/mkdeb.log" 2>&1 || { cat "$DS/mkdeb.log" >&3; return 1; }
}

teardown_file() {
    local line
    [ -f "$DS/fstab.line" ] && line=$(cat "$DS/fstab.line")
    if [ -n "${line:-}" ]; then
        mountpoint -q "$DS/mnt" && umount "$DS/mnt"
        # Drop exactly the line this file added, writing in place (same inode and mode).
        grep -vxF -- "$line" /etc/fstab >"$DS/fstab.new" || true
        cat "$DS/fstab.new" >/etc/fstab
    fi
    for p in "${PKGS[@]}"; do
        installed "$p" && dpkg -r "${PKGS[@]}" >/dev/null 2>&1 && break
    done
    local ok=0
    if [ -f "$DS/no-fstab" ]; then
        [ -s /etc/fstab ] && ok=1 || rm -f /etc/fstab
    elif [ -f "$DS/fstab.orig" ]; then
        cmp -s "$DS/fstab.orig" /etc/fstab || ok=1
    fi
    rm -rf "$DS"
    [ "$ok" -eq 0 ] || { echo "/etc/fstab differs from before the test" >&3; return 1; }
}

setup() {
    [ -z "$SKIP_ALL" ] || skip "$SKIP_ALL"
}

@test "make deb: tadoc, libtadoc0 and libtadoc-dev built, lintian reports no errors" {
    for p in "${PKGS[@]}"; do
        ls "$OUT/${p}_"*.deb
    done
    [ -f "$OUT/lintian.txt" ]
    run grep '^E: ' "$OUT/lintian.txt"
    [ "$status" -ne 0 ]
    # Built without CUDA, whatever this machine has.
    run dpkg-deb -f "$OUT"/tadoc_*.deb Depends
    [[ "$output" != *cuda* ]]
    [[ "$output" == *fuse3* ]]
}

@test "dpkg -i installs the tools, helper, man pages, completion, library and header" {
    run dpkg -i "$OUT"/tadoc_*.deb "$OUT"/libtadoc0_*.deb "$OUT"/libtadoc-dev_*.deb
    echo "$output"
    [ "$status" -eq 0 ]
    for p in "${PKGS[@]}"; do
        dpkg-query -L "$p" >>"$DS/files"
    done
    for f in /usr/bin/tadoc /usr/bin/tadocfs /sbin/mount.tadocfs /usr/include/tadoc.h \
        /usr/share/man/man1/tadoc.1.gz /usr/share/man/man8/tadocfs.8.gz \
        /usr/share/man/man8/mount.tadocfs.8.gz /usr/share/bash-completion/completions/tadoc \
        /usr/share/doc/libtadoc-dev/examples/example.c; do
        [ -e "$f" ] || { echo "missing $f"; false; }
    done
    ls /usr/lib/*/libtadoc.so.0 /usr/lib/*/libtadoc.so /usr/lib/*/libtadoc.a /usr/lib/*/pkgconfig/tadoc.pc
    run /usr/bin/tadoc --version
    [ "$status" -eq 0 ]
    [[ "$output" == "tadoc 0.1.0"* ]]
    [[ "$(man -w tadoc)" == /usr/share/man/man1/tadoc.1.gz ]]
    [[ "$(man -w 8 tadocfs)" == /usr/share/man/man8/tadocfs.8.gz ]]
    man -P cat 8 mount.tadocfs | grep -q "mount.tadocfs"
    # The installed completion offers the commands.
    run bash -c 'source /usr/share/bash-completion/completions/tadoc
        COMP_WORDS=(tadoc com); COMP_CWORD=1; _tadoc; echo "${COMPREPLY[*]}"'
    [ "$output" = "compact" ]
}

@test "an /etc/fstab line of type fuse.tadocfs mounts with 'mount DIR'; umount unmounts" {
    /usr/bin/tadoc pack "$TOP/tests/data/sample" -o "$DS/sample.tdc" -q
    mkdir "$DS/mnt"
    echo "$DS/sample.tdc $DS/mnt fuse.tadocfs ro,noauto 0 0" >"$DS/fstab.line"
    cat "$DS/fstab.line" >>/etc/fstab
    mount "$DS/mnt" 3>&-
    cmp "$DS/mnt/text/README.txt" "$TOP/tests/data/sample/text/README.txt"
    run awk -v m="$DS/mnt" '$2 == m { print $1, $3, $4 }' /proc/mounts
    [[ "$output" == "$DS/sample.tdc fuse.tadocfs ro,"* ]]
    head -3 "$DS/mnt/.wordcount"
    umount "$DS/mnt"
    for _ in $(seq 50); do mountpoint -q "$DS/mnt" || break; sleep 0.1; done
    ! mountpoint -q "$DS/mnt"
}

@test "mount -t tadocfs runs /sbin/mount.tadocfs; writable by default, defaults accepted" {
    [ -f "$DS/sample.tdc" ] || /usr/bin/tadoc pack "$TOP/tests/data/sample" -o "$DS/sample.tdc" -q
    mkdir -p "$DS/mnt"
    mount -t tadocfs -o defaults "$DS/sample.tdc" "$DS/mnt" 3>&-
    diff -r "$TOP/tests/data/sample" "$DS/mnt"
    echo "one more line" >>"$DS/mnt/text/README.txt"
    # The edit went to the journal; compacting through the mount folds it into the archive.
    setfattr -n user.tadoc.compact -v 1 "$DS/mnt"
    umount "$DS/mnt"
    for _ in $(seq 50); do mountpoint -q "$DS/mnt" || break; sleep 0.1; done
    run /usr/bin/tadoc cat "$DS/sample.tdc" text/README.txt
    [[ "$output" == *"one more line" ]]
    # mount -f (fake) goes through the helper without mounting.
    mount -f -t tadocfs "$DS/sample.tdc" "$DS/mnt"
    ! mountpoint -q "$DS/mnt"
}

@test "docs/example.c builds against the installed library with pkg-config and runs" {
    [ -f "$DS/sample.tdc" ] || /usr/bin/tadoc pack "$TOP/tests/data/sample" -o "$DS/sample.tdc" -q
    cp /usr/share/doc/libtadoc-dev/examples/example.c "$DS/"
    cc -Wall -Wextra -Werror -o "$DS/example" "$DS/example.c" $(pkg-config --cflags --libs tadoc)
    ldd "$DS/example" | grep -Eq 'libtadoc\.so\.0 => (/usr)?/lib/'
    run "$DS/example" "$DS/sample.tdc" logs/syslog.1 sshd
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"text/README.txt"* ]]
    [[ "$output" == *"first line of logs/syslog.1: $(head -1 "$TOP/tests/data/sample/logs/syslog.1")"* ]]
    [[ "$output" == *"sshd occurs $(/usr/bin/tadoc count "$DS/sample.tdc" logs/syslog.1 sshd) times"* ]]
    # The same program linked statically with the archive library.
    cc -o "$DS/example-static" "$DS/example.c" $(pkg-config --cflags tadoc) \
        /usr/lib/*/libtadoc.a $(pkg-config --static --libs tadoc | sed -E 's/-L[^ ]*|-ltadoc//g')
    ! ldd "$DS/example-static" | grep -q libtadoc
    diff <("$DS/example" "$DS/sample.tdc") <("$DS/example-static" "$DS/sample.tdc")
    # Only the API of tadoc.h is exported by the shared library.
    run bash -c "nm -D --defined-only /usr/lib/*/libtadoc.so.0 | awk '\$2 == \"T\" {print \$3}' | grep -v '^tadoc_'"
    [ -z "$output" ]
}

@test "dpkg -r removes the packages and every file they installed" {
    [ -s "$DS/files" ]
    run dpkg -r "${PKGS[@]}"
    echo "$output"
    [ "$status" -eq 0 ]
    for p in "${PKGS[@]}"; do
        ! installed "$p"
    done
    # Every file and link is gone. Directories (and links to them, such as /sbin on a
    # merged-/usr system) are shared with other packages and stay.
    local left=()
    while read -r f; do
        [ -d "$f" ] && continue
        [ -e "$f" ] || [ -L "$f" ] && left+=("$f")
    done <"$DS/files"
    [ ${#left[@]} -eq 0 ] || { echo "left behind: ${left[*]}"; false; }
    for d in /usr/share/doc/tadoc /usr/share/doc/libtadoc0 /usr/share/doc/libtadoc-dev; do
        [ ! -e "$d" ]
    done
    ! command -v tadocfs >/dev/null || [ "$(command -v tadocfs)" != /usr/bin/tadocfs ]
}
