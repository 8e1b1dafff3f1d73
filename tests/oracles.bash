# Oracle pipelines for the six analytics (docs/DESIGN.md, "Analytics"): plain tr, sort,
# uniq -c and awk over the original files, byte-identical to `tadoc ANALYTIC ARCHIVE [SCOPE]`
# for the tree DIR. Shared by tests/bats/analytics.bats (load ../oracles) and bench/analytics.sh (source).
# Usage: oracle_wordcount|oracle_sort|oracle_invindex|oracle_termvector|oracle_seqcount|
#        oracle_rankedinvindex DIR

# The tokenizer's words are the maximal runs of bytes in [A-Za-z0-9_\x80-\xff]; files never
# share a word. One perl process reads every file, in byte order of their paths.
# tokens MODE DIR|FILE: per word, one line of MODE
#   words: WORD     pathwords: PATH<TAB>WORD
#   seqs: W1 W2 W3 (every three consecutive words of a file)     pathseqs: PATH<TAB>W1 W2 W3
# PATH is relative to DIR; for a FILE, its name.
tokens() {
    local prog='
        my $mode = shift; $/ = "\0";
        while (my $p = <STDIN>) {
            chomp $p;
            open(my $fh, "<:raw", $p) or die "$p: $!\n";
            my $t = do { local $/; <$fh> } // "";
            my @w = $t =~ /[A-Za-z0-9_\x80-\xff]+/g;
            my $pre = $mode =~ /^path/ ? "$p\t" : "";
            if ($mode =~ /words$/) { print "$pre$_\n" for @w; next }
            print "$pre$w[$_ - 2] $w[$_ - 1] $w[$_]\n" for 2 .. $#w;
        }'
    if [ -f "$2" ]; then
        (cd "$(dirname "$2")" && printf '%s\0' "$(basename "$2")" | perl -e "$prog" "$1")
    else
        (cd "$2" && find . -type f -printf '%P\0' | LC_ALL=C sort -z | perl -e "$prog" "$1")
    fi
}
# Lines "PATH<TAB>KEY" counted: "COUNT<TAB>PATH<TAB>KEY" (keys hold no tab, paths no newline).
count_per_path() {
    LC_ALL=C sort | LC_ALL=C uniq -c |
        LC_ALL=C awk -F'\t' '{ match($1, /^ *[0-9]+ /); c = substr($1, 1, RLENGTH - 1)
            sub(/^ +/, "", c); print c "\t" substr($1, RLENGTH + 1) "\t" $2 }'
}
oracle_wordcount() {
    tokens words "$1" | LC_ALL=C sort | LC_ALL=C uniq -c | LC_ALL=C awk '{print $1 "\t" $2}' |
        LC_ALL=C sort -t$'\t' -k1,1nr -k2,2
}
# Join "key<TAB>value" lines (sorted by key) into "key<TAB>value<TAB>value...".
group() { LC_ALL=C awk -F'\t' 'NR == 1 || $1 "" != k { if (NR > 1) print line; k = $1 ""; line = $1 }
    { line = line "\t" $2 } END { if (NR) print line }'; }
# Per file in path order, its words by count (most first), then by word.
oracle_termvector() {
    tokens pathwords "$1" | count_per_path | LC_ALL=C awk -F'\t' '{ print $2 "\t" $1 "\t" $3 }' |
        LC_ALL=C sort -t$'\t' -k1,1 -k2,2nr -k3,3
}
oracle_invindex() {
    tokens pathwords "$1" | LC_ALL=C sort -u | LC_ALL=C awk -F'\t' '{ print $2 "\t" $1 }' |
        LC_ALL=C sort -t$'\t' -k1,1 -k2,2 | group
}
oracle_seqcount() {
    tokens seqs "$1" | LC_ALL=C sort | LC_ALL=C uniq -c |
        LC_ALL=C awk '{ print $1 "\t" $2 " " $3 " " $4 }' | LC_ALL=C sort -t$'\t' -k1,1nr -k2,2
}
oracle_rankedinvindex() {
    tokens pathseqs "$1" | count_per_path | LC_ALL=C sort -t$'\t' -k3,3 -k1,1nr -k2,2 |
        LC_ALL=C awk -F'\t' '{ print $3 "\t" $2 ":" $1 }' | group
}
oracle_sort() { oracle_wordcount "$1" | wordcount_to_sort; }
# The sort pipeline's tail: word count lines in, sort lines out.
wordcount_to_sort() { LC_ALL=C awk -F'\t' '{print $2 "\t" $1}' | LC_ALL=C sort -t$'\t' -k1,1; }

# Byte offsets of whole-word occurrences of WORD in FILE (the tokenizer's word bytes).
oracle_search() { # FILE WORD
    perl -0777 -ne 'BEGIN { $w = shift }
        while (/(?<![A-Za-z0-9_\x80-\xff])\Q$w\E(?![A-Za-z0-9_\x80-\xff])/g) { print "$-[0]\n" }' "$2" "$1"
}
# PATH:OFFSET of each of them in every file of DIR, in byte order of the paths (relative to DIR).
oracle_search_tree() { # DIR WORD
    (cd "$1" && find . -type f -printf '%P\0' | LC_ALL=C sort -z | perl -e '
        my $w = shift; $/ = "\0";
        while (my $p = <STDIN>) {
            chomp $p;
            open(my $fh, "<:raw", $p) or die "$p: $!\n";
            my $t = do { local $/; <$fh> } // "";
            while ($t =~ /(?<![A-Za-z0-9_\x80-\xff])\Q$w\E(?![A-Za-z0-9_\x80-\xff])/g) { print "$p:$-[0]\n" }
        }' "$2")
}
