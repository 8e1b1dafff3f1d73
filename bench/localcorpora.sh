#!/usr/bin/env bash
# Two more corpora of other kinds, made from what a Debian machine itself holds (no network):
#   changelogs: the Debian changelogs of installed packages (/usr/share/doc/*/changelog*.gz),
#               uncompressed, packages in name order up to about 40 MB: dated records with
#               names, mail addresses and versions, much like logs;
#   man-l10n:   every translated manual page (/usr/share/man/LANG/, not the English man*),
#               uncompressed: roff markup around prose in some 25 languages and scripts;
#   doc-gz:     /usr/share/doc as installed, packages in name order up to about 40 MB: the
#               gzip files as they are (changelogs, READMEs), copyright texts, some HTML and
#               images: a tree of text and incompressible files, like a log directory with
#               its rotated logs gzipped.
# usage: bench/localcorpora.sh DIR   (makes DIR/changelogs, DIR/man-l10n and DIR/doc-gz when
# missing)
set -euo pipefail
dir=$1
mkdir -p "$dir"
if [ ! -d "$dir/changelogs" ]; then
    rm -rf "$dir/changelogs.tmp" && mkdir "$dir/changelogs.tmp"
    total=0
    for d in $(ls -d /usr/share/doc/*/ | LC_ALL=C sort); do
        [ "$total" -lt 40000000 ] || break
        for f in "$d"changelog*.gz; do
            [ -f "$f" ] || continue
            p=$(basename "$d")
            mkdir -p "$dir/changelogs.tmp/$p"
            gzip -dc "$f" >"$dir/changelogs.tmp/$p/$(basename "${f%.gz}")"
            total=$((total + $(stat -c %s "$dir/changelogs.tmp/$p/$(basename "${f%.gz}")")))
        done
    done
    mv "$dir/changelogs.tmp" "$dir/changelogs"
fi
if [ ! -d "$dir/man-l10n" ]; then
    rm -rf "$dir/man-l10n.tmp" && mkdir "$dir/man-l10n.tmp"
    for l in /usr/share/man/*/; do
        case $(basename "$l") in man*) continue ;; esac
        find "$l" -type f -name '*.gz' | LC_ALL=C sort | while read -r f; do
            rel=${f#/usr/share/man/}
            mkdir -p "$dir/man-l10n.tmp/$(dirname "$rel")"
            gzip -dc "$f" >"$dir/man-l10n.tmp/${rel%.gz}"
        done
    done
    mv "$dir/man-l10n.tmp" "$dir/man-l10n"
fi
if [ ! -d "$dir/doc-gz" ]; then
    rm -rf "$dir/doc-gz.tmp" && mkdir "$dir/doc-gz.tmp"
    total=0
    for d in $(ls -d /usr/share/doc/*/ | LC_ALL=C sort); do
        [ "$total" -lt 40000000 ] || break
        cp -a "$d" "$dir/doc-gz.tmp/"
        total=$((total + $(du -sb "$d" | cut -f1)))
    done
    mv "$dir/doc-gz.tmp" "$dir/doc-gz"
fi
