/* words: word queries on the grammar (the TADOC random-access paper, TPDS 2023, section
 * IV-B): how often a word occurs in a file, and at which byte offsets, without expanding it.
 *
 * Built on first use from an index: word2rule (for every token, the rules whose bodies hold
 * it, with local counts) and the reverse edges of the DAG (the parents of every rule). A
 * query marks the rules whose expansion holds the word (the ancestors of its word2rule list),
 * then walks only those inside the file's root run. A frequent word's ancestors can be most
 * of the grammar: when they outnumber a budget of a few rules per symbol of the file's root
 * run, the query counts the word in the file's own rules instead (a memoized walk of the
 * file's part of the DAG), so no query costs much more than that walk. Memory: about 12
 * bytes per grammar symbol plus 16 bytes per rule.
 *
 * Queries on one idx_words are serialized by an internal mutex; any thread may call them. */
#ifndef TDC_WORDS_H
#define TDC_WORDS_H

#include "idx.h"

typedef struct idx_words idx_words;

int idx_words_build(const idx *x, idx_words **out);
void idx_words_free(idx_words *w);

/* Occurrences of the word (n bytes) in regular entry `ent`. A word that is not in the
 * dictionary occurs 0 times. -EINVAL for a non-file, -EBADMSG for a file in a damaged shard. */
int idx_count(idx_words *w, uint32_t ent, const char *word, size_t n, uint64_t *count);

/* Byte offsets of every occurrence, ascending, appended to `out`. */
int idx_search(idx_words *w, uint32_t ent, const char *word, size_t n, vec64 *out);

#endif
