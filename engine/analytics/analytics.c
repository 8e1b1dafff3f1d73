#include "analytics.h"

#include <string.h>

#include "ana.h"

const ana_info ana_table[ANA_NIDS] = {
    [ANA_WORDCOUNT] =
        {"wordcount", ".wordcount", ana_wordcount, 0, 0,
         "Count the words of SCOPE (a directory or file path in the archive; the whole archive\n"
         "by default) by traversing the grammar, without expanding the text. Prints\n"
         "count<TAB>word lines, count descending, then word in byte order. Words are maximal runs\n"
         "of ASCII letters, digits, '_' and bytes >= 0x80.\n"},
    [ANA_SORT] = {"sort", ".sort", ana_sort, 0, 0,
                  "Like wordcount, but prints word<TAB>count lines sorted by word (byte order).\n"},
    [ANA_INVINDEX] =
        {"invindex", ".invindex", ana_invindex, 1, 0,
         "Inverted index of SCOPE from the grammar: word<TAB>path<TAB>path... lines, words in\n"
         "byte order, paths in byte order (tab, newline and backslash in paths C-escaped).\n"},
    [ANA_TERMVECTOR] =
        {"termvector", ".termvector", ana_termvector, 1, 0,
         "Term vectors from the grammar: path<TAB>count<TAB>word for every word of every file,\n"
         "files by path, then count descending, then word.\n"},
    [ANA_SEQCOUNT] =
        {"seqcount", ".seqcount", ana_seqcount, 0, 1,
         "Counts of every run of three consecutive words inside one file (separators between\n"
         "them do not matter), from the grammar: count<TAB>w1 w2 w3, count descending, then\n"
         "sequence.\n"},
    [ANA_RANKEDINVINDEX] =
        {"rankedinvindex", ".rankedinvindex", ana_rankedinvindex, 1, 1,
         "Ranked inverted index of three-word sequences from the grammar:\n"
         "w1 w2 w3<TAB>path:count<TAB>..., sequences in byte order, files by count descending,\n"
         "then path.\n"},
};

int ana_find(const char *name)
{
    for (int i = 0; i < ANA_NIDS; i++)
        if (!strcmp(name, ana_table[i].name)) return i;
    return -1;
}
