#!/usr/bin/env bash
# Install the Debian packages a task needs when they are missing (as root), else say which.
# usage: tools/deps.sh [build] [test] [demo] [deb] [bench] [fuzz]
set -euo pipefail
pkgs=()
for what in "$@"; do
    case "$what" in
    build) pkgs+=(gcc make pkg-config libfuse3-dev fuse3 libzstd-dev libxxhash-dev libhtscodecs-dev liblzma-dev) ;;
    test) pkgs+=(libcmocka-dev bats attr xxhash zstd linux-source-6.1 npm xz-utils vim git perl tar python3 util-linux rsync
                 openmpi-bin libopenmpi-dev # tadoc-mpi and its tests (mpi.bats)
                 debhelper dpkg-dev fakeroot lintian man-db) ;; # the last line: deb.bats, man.bats
    demo) pkgs+=(fuse3 util-linux diffutils) ;;          # tools/demo.sh: fusermount3, mountpoint, diff
    deb) pkgs+=(debhelper dpkg-dev fakeroot lintian) ;; # make deb (dpkg-buildpackage, lintian)
    fuzz) pkgs+=(clang libclang-rt-14-dev) ;; # libFuzzer and the sanitizer runtimes
    bench) pkgs+=(linux-source-6.1 npm wordnet-base zstd xz-utils gzip squashfs-tools squashfuse fio time gnuplot-nox) ;;
    *) echo "deps.sh: unknown group $what" >&2; exit 2 ;;
    esac
done
missing=()
for p in "${pkgs[@]}"; do
    # npm may come with a Node.js that is not Debian's; any working npm will do.
    [ "$p" = npm ] && command -v npm >/dev/null && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
