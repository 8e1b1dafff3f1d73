/* shape: the last steps that give a grammar its written form, shared by pack and
 * compaction. Rules that cost more than they save are inlined (the files' root runs move
 * with them); tokens no symbol uses any more are dropped and the rest are numbered by use,
 * most used first (small ids: zero high byte planes on disk), in text order within each
 * frequency class past the most used (dictionary neighbours share prefixes, which the
 * front-coded dictionary turns into a smaller section with no permutation to store); then
 * rules are renumbered children first. */
#ifndef TDC_SHAPE_H
#define TDC_SHAPE_H

#include <stddef.h>

#include "../format/arc.h"

typedef struct shape_opts {
    int keep_rules; /* inline no rule (for the ablation measurements) */
    int freq_order; /* plain frequency order, no text order within classes (likewise) */
} shape_opts;

/* Shape g and its dictionary *d (replaced) for the `n` entries whose root runs lie in g's
 * root (regular files' runs are moved; other entries have none). `o` may be NULL (the
 * defaults). 0 or -ENOMEM; on failure g and *d may be half shaped and must be dropped. */
int shape_grammar(gram *g, dict **d, arc_entry *ents, size_t n, const shape_opts *o);

#endif
