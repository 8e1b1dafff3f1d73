/* seq: Sequitur (Nevill-Manning & Witten) over token ids: digram uniqueness and rule utility.
 *
 * One seq instance compresses one segment of the token stream. Barriers mark file
 * boundaries: no digram spans a barrier, so no rule crosses files. Memory is about 40 bytes
 * per input symbol while building. Not thread-safe; separate instances may run in parallel. */
#ifndef TDC_SEQ_H
#define TDC_SEQ_H

#include <stdint.h>

#include "../base/buf.h"

/* In seq_out, a symbol with this bit set is rule (sym & ~SEQ_RULE), numbered from 1. */
#define SEQ_RULE 0x80000000u
/* In seq_out.root, a file boundary. */
#define SEQ_BARRIER 0xffffffffu

typedef struct seq seq;

/* A new builder sized for about `hint` symbols (it grows as needed); NULL when out of memory. */
seq *seq_new(uint64_t hint);
void seq_free(seq *s);

/* Append a token id (< 2^31). Returns 0, -ENOMEM, or -EOVERFLOW past 2^30 rules. */
int seq_push(seq *s, uint32_t tok);

/* Append a file boundary. */
int seq_barrier(seq *s);

/* The finished grammar of a segment. Rules are numbered 1..nrules so that a rule refers only
 * to rules with smaller numbers (children first). */
typedef struct seq_out {
    vec32 root;       /* root symbols, with SEQ_BARRIER where seq_barrier was called */
    vec64 rule_start; /* nrules + 1 offsets into syms; rule i is [rule_start[i-1], rule_start[i]) */
    vec32 syms;
    uint32_t nrules;
} seq_out;

/* Produce the grammar; `s` may only be freed afterwards. Returns 0 or -ENOMEM. */
int seq_finish(seq *s, seq_out *out);
void seq_out_free(seq_out *o);

#endif
