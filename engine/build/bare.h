/* bare: a grammar shard stored as its bare text instead (textshard.h, codec zstd-bare), for
 * the shards pack and compaction build alike.
 *
 * On text whose words do not repeat in long runs (prose in many languages, code) zstd's long
 * matches over the bytes beat the grammar's symbols. Coding the text at the archive's level
 * (slow) is worth trying only where a quick pass (level BARE_TRY_LEVEL, long window) shrunk
 * by BARE_HOPE (what level 19 makes of the quick pass's size on text, with a margin) comes
 * under the grammar's bytes; the text is kept where it saves more than 1/BARE_MARGIN of them,
 * for a shard stored so loads its tokens by hashing them (analytics take longer to load it,
 * and traverse a root without rules; reads are a copy). Shards of less than BARE_MIN bytes
 * keep their grammar: zstd often wins there by the grammar's fixed costs, a few hundred
 * bytes, not worth the analytics' rules. */
#ifndef TDC_BARE_H
#define TDC_BARE_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "../base/buf.h"
#include "../format/arc.h"

#define BARE_MIN (1u << 20)

/* Whether the shard's text (its files' or parts' bytes back to back, n of them) may be
 * smaller as bare text than the grammar coded in gc; the quick pass runs in cc (NULL: a
 * context of its own). */
int bare_worth(ZSTD_CCtx *cc, const unsigned char *text, size_t n, const arc_coded *gc);

/* The np pieces lens[] (each one file's run or part, of one byte or more) back to back in
 * text, coded as bare text at `level` into *tc, their runs (the reader's tokens of each)
 * in *runs: 1 where that holds the same bytes in fewer than gc's bytes less 1/BARE_MARGIN
 * (tc and runs then the caller's), 0 where not (nothing kept), or -ENOMEM. */
int bare_code(const unsigned char *text, const uint64_t *lens, size_t np, int level,
              const arc_coded *gc, arc_coded *tc, vec64 *runs);

#endif
