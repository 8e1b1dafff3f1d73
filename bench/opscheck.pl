#!/usr/bin/perl
# opscheck.pl: check what `tadoc apply` did against a model of its operations.
#
# usage: perl bench/opscheck.pl sequence|batch TREE OPS RESULT [EXTRACTS]
# Applies the operations of OPS (see ops.pl) to the files of TREE in memory, with the offset
# semantics of `tadoc apply --offsets=MODE`, and compares every regular file of TREE with the
# same path under RESULT (e.g. `tadoc unpack` of the edited archive); with EXTRACTS, also the
# printed extracts (C-escaped lines, in operation order). In sequence mode OPS may also hold
# writes, truncates and deletes (ops.pl history:D); a deleted file must be absent from RESULT.
# Prints "ok: ..." or the first differences, and exits non-zero on any.
use strict;
use warnings;
use File::Find;

die "usage: opscheck.pl sequence|batch TREE OPS RESULT [EXTRACTS]\n" unless @ARGV >= 4;
my ($mode, $tree, $opsf, $result, $exf) = @ARGV;

sub unesc {
    my $s = shift;
    $s =~ s/\\(x([0-9a-fA-F]{2})|.)/defined $2 ? chr(hex $2) : $1 eq 'n' ? "\n" : $1 eq 't' ? "\t"
        : $1 eq 'r' ? "\r" : $1 eq '0' ? "\0" : $1/ge;
    return $s;
}

sub esc { # as tadoc apply prints extracts
    my $s = shift;
    $s =~ s/\\/\\\\/g;
    $s =~ s/\t/\\t/g;
    $s =~ s/\n/\\n/g;
    $s =~ s/([\x00-\x1f\x7f])/sprintf('\\x%02x', ord $1)/ge;
    return $s;
}

sub slurp {
    my $p = shift;
    open(my $fh, '<:raw', $p) or return undef;
    local $/;
    my $s = <$fh>;
    close $fh;
    return defined $s ? $s : '';
}

my %c;    # path -> content (touched files)
my %gone; # deleted paths
my @ops;
open(my $fh, '<', $opsf) or die "opscheck.pl: $opsf: $!\n";
while (<$fh>) {
    chomp;
    next if !length || /^#/;
    my @f = split /\t/, $_, -1;
    my $p = unesc($f[1]);
    $c{$p} = slurp("$tree/$p") unless exists $c{$p};
    die "opscheck.pl: $tree/$p: $!\n" unless defined $c{$p};
    push @ops, [$f[0], $p, @f[2 .. $#f]];
}
close $fh;

# Write $t at byte $off of $$s, zero-filling a gap past the end, as pwrite does.
sub overwrite {
    my ($s, $off, $t) = @_;
    $$s .= "\0" x ($off - length $$s) if $off > length $$s;
    substr($$s, $off, length $t) = $t;
}

sub resize {
    my ($s, $n) = @_;
    if ($n < length $$s) { substr($$s, $n) = '' }
    else { $$s .= "\0" x ($n - length $$s) }
}

my @want; # expected extract lines
if ($mode eq 'sequence') {
    for my $o (@ops) {
        my ($k, $p) = @$o;
        if ($k eq 'insert') { substr($c{$p}, $o->[2], 0) = unesc($o->[3]) }
        elsif ($k eq 'append') { $c{$p} .= unesc($o->[2]) }
        elsif ($k eq 'write') { overwrite(\$c{$p}, $o->[2], unesc($o->[3])) }
        elsif ($k eq 'truncate') { resize(\$c{$p}, $o->[2]) }
        elsif ($k eq 'delete') { $gone{$p} = 1 }
        else { push @want, esc(substr($c{$p}, $o->[2], $o->[3])) }
    }
} elsif ($mode eq 'batch') {
    for my $o (grep { $_->[0] eq 'extract' } @ops) {
        push @want, esc(substr($c{$o->[1]}, $o->[2], $o->[3]));
    }
    my @ins = map { [$ops[$_], $_] } grep { $ops[$_][0] eq 'insert' } 0 .. $#ops;
    # Highest offset first and, at one offset, the last in batch order first: each insert then
    # lands where its offset points in the text before the batch, equal offsets in batch order.
    for my $x (sort { $b->[0][2] <=> $a->[0][2] || $b->[1] <=> $a->[1] } @ins) {
        substr($c{$x->[0][1]}, $x->[0][2], 0) = unesc($x->[0][3]);
    }
    $c{$_->[1]} .= unesc($_->[2]) for grep { $_->[0] eq 'append' } @ops;
} else {
    die "opscheck.pl: mode is sequence or batch\n";
}

my ($files, $bad) = (0, 0);
find({no_chdir => 1, wanted => sub {
    return if -l $_ || !-f _;
    (my $rel = $File::Find::name) =~ s/^\Q$tree\E\/?//;
    $files++;
    if (exists $gone{$rel}) {
        if (-e "$result/$rel") {
            print STDERR "opscheck.pl: $rel was deleted but is in $result\n" if $bad < 10;
            $bad++;
        }
        return;
    }
    my $want = exists $c{$rel} ? $c{$rel} : slurp($File::Find::name);
    my $got = slurp("$result/$rel");
    if (!defined $got || $got ne $want) {
        print STDERR "opscheck.pl: $rel differs", (exists $c{$rel} ? " (edited)" : ""), "\n" if $bad < 10;
        $bad++;
    }
}}, $tree);

my $exbad = 0;
if (defined $exf) {
    open($fh, '<', $exf) or die "opscheck.pl: $exf: $!\n";
    chomp(my @got = <$fh>);
    close $fh;
    if (@got != @want) {
        print STDERR "opscheck.pl: ", scalar(@got), " extracts printed, ", scalar(@want), " expected\n";
        $exbad++;
    }
    for my $i (0 .. $#want) {
        next if defined $got[$i] && $got[$i] eq $want[$i];
        print STDERR "opscheck.pl: extract ", $i + 1, " differs\n" if $exbad < 10;
        $exbad++;
    }
}
die "opscheck.pl: $bad of $files files differ, $exbad extracts differ\n" if $bad || $exbad;
printf "ok: %d files (%d touched by the operations)%s\n", $files, scalar(keys %c),
    defined $exf ? sprintf(", %d extracts", scalar @want) : "";
