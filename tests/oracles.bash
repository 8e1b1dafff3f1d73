# Oracle pipelines for the six analytics (docs/DESIGN.md, "Analytics"): plain tr, sort,
# uniq -c and awk over the original files, byte-identical to `tadoc ANALYTIC ARCHIVE [SCOPE]`
# for the tree DIR. Shared by tests/bats/analytics.bats (load ../oracles) and bench/analytics.sh (source).
# Usage: oracle_wordcount|oracle_sort|oracle_invindex|oracle_termvector|oracle_seqcount|
#        oracle_rankedinvindex DIR

# The words of each file (files never share a word), one per line.
words_of() { # DIR
    find "$1" -type f -print0 | LC_ALL=C sort -z | while IFS= read -r -d '' f; do
        LC_ALL=C tr -cs 'A-Za-z0-9_\200-\377' '\n' <"$f" | grep -av '^$' || true
    done
}
oracle_wordcount() {
    words_of "$1" | LC_ALL=C sort | LC_ALL=C uniq -c | LC_ALL=C awk '{print $1 "\t" $2}' |
        LC_ALL=C sort -t$'\t' -k1,1nr -k2,2
}
# Per file, in path order: FUNCTION PATH reads the file's words on stdin. For a FILE, the
# file alone, PATH its name (paths are relative to a file scope's directory).
each_file() { # DIR|FILE FUNCTION
    if [ -f "$1" ]; then
        (cd "$(dirname "$1")" && f=$(basename "$1") &&
            LC_ALL=C tr -cs 'A-Za-z0-9_\200-\377' '\n' <"$f" | { grep -av '^$' || true; } | "$2" "$f")
        return
    fi
    (cd "$1" && find . -type f -printf '%P\0' | LC_ALL=C sort -z | while IFS= read -r -d '' f; do
        LC_ALL=C tr -cs 'A-Za-z0-9_\200-\377' '\n' <"$f" | { grep -av '^$' || true; } | "$2" "$f"
    done)
}
trigrams() { awk 'NR > 2 { print a " " b " " $0 } { a = b; b = $0 }'; }
tv_file() { LC_ALL=C sort | LC_ALL=C uniq -c | LC_ALL=C awk -v p="$1" '{ print p "\t" $1 "\t" $2 }' |
    LC_ALL=C sort -t$'\t' -k2,2nr -k3,3; }
ii_file() { LC_ALL=C sort -u | LC_ALL=C awk -v p="$1" '{ print $0 "\t" p }'; }
ri_file() { trigrams | LC_ALL=C sort | LC_ALL=C uniq -c |
    LC_ALL=C awk -v p="$1" '{ print $2 " " $3 " " $4 "\t" $1 "\t" p }'; }
sq_file() { trigrams; }
# Join "key<TAB>value" lines (sorted by key) into "key<TAB>value<TAB>value...".
group() { LC_ALL=C awk -F'\t' 'NR == 1 || $1 "" != k { if (NR > 1) print line; k = $1 ""; line = $1 }
    { line = line "\t" $2 } END { if (NR) print line }'; }
oracle_termvector() { each_file "$1" tv_file; }
oracle_invindex() { each_file "$1" ii_file | LC_ALL=C sort -t$'\t' -k1,1 -k2,2 | group; }
oracle_seqcount() {
    each_file "$1" sq_file | LC_ALL=C sort | LC_ALL=C uniq -c |
        LC_ALL=C awk '{ print $1 "\t" $2 " " $3 " " $4 }' | LC_ALL=C sort -t$'\t' -k1,1nr -k2,2
}
oracle_rankedinvindex() {
    each_file "$1" ri_file | LC_ALL=C sort -t$'\t' -k1,1 -k2,2nr -k3,3 |
        LC_ALL=C awk -F'\t' '{ print $1 "\t" $3 ":" $2 }' | group
}
oracle_sort() { oracle_wordcount "$1" | wordcount_to_sort; }
# The sort pipeline's tail: word count lines in, sort lines out.
wordcount_to_sort() { LC_ALL=C awk -F'\t' '{print $2 "\t" $1}' | LC_ALL=C sort -t$'\t' -k1,1; }

# Byte offsets of whole-word occurrences of WORD in FILE (the tokenizer's word bytes).
oracle_search() { # FILE WORD
    perl -0777 -ne 'BEGIN { $w = shift }
        while (/(?<![A-Za-z0-9_\x80-\xff])\Q$w\E(?![A-Za-z0-9_\x80-\xff])/g) { print "$-[0]\n" }' "$2" "$1"
}
