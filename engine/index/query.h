/* query: tadoc's word queries (count, search) on one file of an archive opened by
 * arc_open_meta and not loaded, shard by shard.
 *
 * A file larger than a shard spans consecutive shards, cut between tokens (pack never cuts a
 * word), so each of its parts answers for itself: the occurrences in the file are those of
 * its parts, and an offset in part k is one in the file plus the bytes of the parts before k.
 * Each shard is loaded alone (arc_open_piece) and indexed for the query, several at once on
 * worker threads, so that memory follows the shards being queried, not the file, and the
 * work spreads over the cores. */
#ifndef TDC_QUERY_H
#define TDC_QUERY_H

#include <stdint.h>

#include "../base/buf.h"
#include "../format/arc.h"

/* One shard's part of the file and its answer. */
typedef struct idx_part {
    uint32_t k;     /* the shard */
    uint64_t bytes; /* the part's size */
    uint64_t count; /* count: its occurrences */
    vec64 offs;     /* search: their offsets in the part, ascending */
} idx_part;

/* The query for `word` (n bytes) on the parts of regular entry `ent` (the one holding its
 * inode's content) in shards [lo, hi) of `meta` (arc_open_meta, only read; an archive of
 * version 1 to 3 is one grammar, shard 0, loaded whole), on up to `threads` threads (0: one per CPU): parts[i] (hi - lo of them, the caller's)
 * gets shard lo + i's answer, with offsets when `search`, else the count. 0, or the error of a
 * shard that failed (the others stop at their next shard; a damaged shard's message names
 * it); the parts' offsets are the caller's to free (idx_parts_free) either way. */
int idx_query_parts(const arc *meta, uint32_t ent, uint32_t lo, uint32_t hi, const char *word,
                    size_t n, int search, unsigned threads, idx_part *parts);

/* Free the offsets of n parts. */
void idx_parts_free(idx_part *parts, size_t n);

#endif
