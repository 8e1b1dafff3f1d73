/* compact: the grammar side of recompression.
 *
 * Builds a new archive's dictionary and grammar from an old archive and a new file table in
 * which some files kept their archived content and others have new bytes. Kept files reuse
 * their root runs (and every rule below them) as they are; new bytes are tokenized against a
 * copy of the old dictionary and compressed by Sequitur into new rules; rules no longer
 * reachable from the root are dropped, then tokens no kept rule or run uses, and the tokens
 * left are numbered by use as pack numbers them. The work is proportional to the new bytes
 * plus linear passes over the grammar and a sort of the dictionary.
 *
 * Separate Sequitur runs over old and new text repeat phrases a single run would share, so
 * when the new bytes are a large share of all, or the kept grammar has decayed (see
 * COMPACT_DECAY_DIV), every file is compressed again from its tokens (kept files are expanded
 * from the old grammar, not read again) and the result is the grammar pack would build. */
#ifndef TDC_COMPACT_H
#define TDC_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "../format/arc.h"

/* Read n bytes of new entry `ent` at `off` into dst: 0 or a negative errno. */
typedef int (*compact_read_fn)(void *ctx, uint32_t ent, uint64_t off, void *dst, size_t n);

typedef struct compact_stats {
    uint64_t new_files, new_bytes;
    uint64_t rules_before, rules_new, rules_after;
    int full; /* every file was compressed again, not only the new ones */
    unsigned workers; /* shard by shard: the workers that built shards (compact_workers) */
} compact_stats;

/* Compress everything again once the new bytes are at least this fraction (1/n) of all, or
 * once rules used only once are this fraction (1/n) of the old grammar's. */
#define COMPACT_FULL_DIV 4
#define COMPACT_DECAY_DIV 20

/* compact_build flags. */
/* Compress everything again when it pays (see above); an in-memory view for analytics wants
 * the cheapest build and leaves this out. */
#define COMPACT_MAY_REBUILD 1u

/* `nw` has its entries (paths, types, metadata, sizes, ino) and nothing else. For each regular
 * entry i, src[i] is the old entry whose content it keeps, -1 to read nw->ents[i].size bytes
 * through `fn`, or -2 for a further name of a hard-linked inode (no content of its own). Fills
 * nw->dict, nw->g, every entry's root run and the hashes of new content. An old archive not
 * loaded (arc_open_meta: only its file table) has every file read through `fn`, kept ones
 * too (checked against their archived hash, -EBADMSG), and compressed as pack would. 0 or a
 * negative errno with a message. */
int compact_build(const arc *old, arc *nw, const int64_t *src, compact_read_fn fn, void *ctx,
                  unsigned flags, compact_stats *st);

#endif
