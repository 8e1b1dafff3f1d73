#!/usr/bin/perl
# ops.pl: operations for `tadoc apply` in the shape of the papers' random-access workload
# (gpu-random-access-tpds23, section VI: 100,000 operations; inserted and appended strings
# made of randomly chosen dictionary words, 64 bytes long; random files and offsets).
#
# usage: perl bench/ops.pl KIND COUNT LEN SEED FILES WORDS > OPS
#   KIND   insert   COUNT inserts into uniformly chosen files at offsets uniform in 0..size
#          append   COUNT appends to uniformly chosen files
#          extract  COUNT extracts of LEN bytes, files of at least LEN bytes, offsets uniform
#          dirty:P  one append to each of P percent of the files (distinct, chosen at random;
#                   COUNT is ignored)
#          history:D  COUNT edits of a random-operation tester, in order (needs --offsets=
#                   sequence): overwrites, inserts, appends and truncates of live files, and
#                   deletes of D percent of the files spread over the history. Texts are LEN
#                   bytes or less, half dictionary words and half made-up words (new tokens), now
#                   and then a burst of up to 16 times as much; offsets and sizes follow each
#                   file's size through the history.
#   FILES  `tadoc ls -l` output of the archive (regular files are used)
#   WORDS  one word a line (e.g. the second column of `tadoc wordcount`)
# Strings are words joined by spaces, cut to exactly LEN bytes. Same SEED, same output.
use strict;
use warnings;

die "usage: ops.pl KIND COUNT LEN SEED FILES WORDS\n" unless @ARGV == 6;
my ($kind, $count, $len, $seed, $files, $words) = @ARGV;
srand($seed);

my (@path, @size);
open(my $fh, '<', $files) or die "ops.pl: $files: $!\n";
while (<$fh>) {
    chomp;
    # -0644     0     0         1735 2026-11-06 18:15 path
    next unless /^-\S+\s+\d+\s+\d+\s+(\d+)\s+\S+\s+\S+\s(.*)$/;
    push @size, $1;
    push @path, $2;
}
close $fh;
die "ops.pl: no regular files in $files\n" unless @path;

my @w;
open($fh, '<', $words) or die "ops.pl: $words: $!\n";
while (<$fh>) {
    chomp;
    push @w, $_ if length;
}
close $fh;
die "ops.pl: no words in $words\n" unless @w;

sub esc {
    my $s = shift;
    $s =~ s/\\/\\\\/g;
    $s =~ s/\t/\\t/g;
    $s =~ s/\n/\\n/g;
    $s =~ s/([\x00-\x1f\x7f])/sprintf('\\x%02x', ord $1)/ge;
    return $s;
}

sub text {
    my $s = $w[int(rand(@w))];
    $s .= ' ' . $w[int(rand(@w))] while length($s) < $len;
    return esc(substr($s, 0, $len));
}

if ($kind eq 'insert') {
    for (1 .. $count) {
        my $i = int(rand(@path));
        printf "insert\t%s\t%d\t%s\n", esc($path[$i]), int(rand($size[$i] + 1)), text();
    }
} elsif ($kind eq 'append') {
    for (1 .. $count) {
        my $i = int(rand(@path));
        printf "append\t%s\t%s\n", esc($path[$i]), text();
    }
} elsif ($kind eq 'extract') {
    my @big = grep { $size[$_] >= $len } 0 .. $#path;
    die "ops.pl: no file holds $len bytes\n" unless @big;
    for (1 .. $count) {
        my $i = $big[int(rand(@big))];
        printf "extract\t%s\t%d\t%d\n", esc($path[$i]), int(rand($size[$i] - $len + 1)), $len;
    }
} elsif ($kind =~ /^dirty:([\d.]+)$/) {
    my $k = int(@path * $1 / 100 + 0.5);
    $k = 1 if $k < 1 && $1 > 0;
    my @idx = 0 .. $#path;
    for (my $i = $#idx; $i > 0; $i--) { # Fisher-Yates
        my $j = int(rand($i + 1));
        @idx[$i, $j] = @idx[$j, $i];
    }
    printf "append\t%s\t%s\n", esc($path[$_]), text() for sort { $a <=> $b } @idx[0 .. $k - 1];
} elsif ($kind =~ /^history:([\d.]+)$/) {
    history($count, $1);
} else {
    die "ops.pl: unknown kind $kind\n";
}

# A made-up word: 3 to 10 random letters and digits, most of them new to the dictionary.
sub noise_word {
    my @c = ('a' .. 'z', 'A' .. 'Z', '0' .. '9');
    return join '', map { $c[int(rand(@c))] } 1 .. 3 + int(rand(8));
}

# Up to $n bytes of text: words from the archive and made-up ones, spaces and newlines.
sub mixed_text {
    my $n = 1 + int(rand(shift));
    my $s = '';
    while (length($s) < $n) {
        $s .= rand() < 0.5 ? $w[int(rand(@w))] : noise_word();
        $s .= rand() < 0.1 ? "\n" : ' ';
    }
    return esc(substr($s, 0, $n));
}

sub history {
    my ($count, $pct) = @_;
    my @live = 0 .. $#path;
    my $deletes = int(@path * $pct / 100 + 0.5);
    $deletes = @path - 1 if $deletes >= @path; # one file stays to edit
    # Each op is a delete with the probability that spreads the deletes over the history.
    my $pdel = $count ? $deletes / $count : 0;
    for (1 .. $count) {
        my $li = int(rand(@live));
        my $i = $live[$li];
        my $p = esc($path[$i]);
        my $r = rand();
        my $len = rand() < 0.05 ? $len * 16 : $len;
        if ($deletes && rand() < $pdel && @live > 1) {
            print "delete\t$p\n";
            splice(@live, $li, 1);
            $deletes--;
        } elsif ($r < 0.3) {
            my $t = mixed_text($len);
            my $off = int(rand($size[$i] + 1));
            printf "write\t%s\t%d\t%s\n", $p, $off, $t;
            my $n = length(unesc($t));
            $size[$i] = $off + $n if $off + $n > $size[$i];
        } elsif ($r < 0.6) {
            my $t = mixed_text($len);
            printf "insert\t%s\t%d\t%s\n", $p, int(rand($size[$i] + 1)), $t;
            $size[$i] += length(unesc($t));
        } elsif ($r < 0.8) {
            my $t = mixed_text($len);
            printf "append\t%s\t%s\n", $p, $t;
            $size[$i] += length(unesc($t));
        } else {
            # Mostly a small cut from the end; now and then down to a random size.
            my $cut = rand() < 0.8 ? int(rand($len * 4)) : int(rand($size[$i] + 1));
            $size[$i] = $cut > $size[$i] ? 0 : $size[$i] - $cut;
            printf "truncate\t%s\t%d\n", $p, $size[$i];
        }
    }
}

sub unesc {
    my $s = shift;
    $s =~ s/\\(x[0-9a-f]{2}|[nt\\])/$1 eq 'n' ? "\n" : $1 eq 't' ? "\t" : $1 eq '\\' ? '\\' : chr(hex(substr($1, 1)))/ge;
    return $s;
}
