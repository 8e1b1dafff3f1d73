/* ana_int: what the analytics modules share internally (not a public interface). */
#ifndef TDC_ANA_INT_H
#define TDC_ANA_INT_H

#include "arc.h"

/* Called for each word of a file in order: a single-token word as its token id (w = NULL),
 * or a word longer than TOK_CAP, cut into several tokens, as tok = UINT32_MAX and its joined
 * bytes. A non-zero return stops the walk and is passed back. */
typedef int (*ana_word_fn)(void *ctx, uint32_t tok, const unsigned char *w, size_t n);

/* Walk every token of regular entry e depth-first and report its words, joining cut ones.
 * For the few files that hold cut words; others are counted on the grammar. */
int ana_file_words(const arc *a, uint32_t e, ana_word_fn fn, void *ctx);

/* Per rule (1..nrules): 1 when its expansion holds a cut long word (a TOK_CAP-byte word
 * token). calloc'ed; the caller frees. 0 or -ENOMEM. */
int ana_find_cuts(const arc *a, unsigned char **cut);

/* 1 when regular entry e holds a cut long word, given ana_find_cuts's table. */
int ana_file_has_cut(const arc *a, const unsigned char *cut, uint32_t e);

#endif
