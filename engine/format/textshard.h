/* textshard: shards stored as their text (section codec zstd-text, docs/FORMAT.md).
 *
 * Bytes that do not compress (gzip files, images, random data) cost a grammar more than
 * themselves: every short token of them is a dictionary entry used once and a root symbol.
 * Pack puts the files whose bytes a quick zstd trial cannot shrink into shards of their own,
 * stored as the files' bytes under zstd; the reader tokenizes those bytes when the shard is
 * loaded, so the in-memory grammar (a dictionary and a root, no rules), the reads, the
 * analytics and the GPU see the very tokens a grammar shard of the same files would hold.
 *
 * The payload (the dictionary section's bytes once expanded):
 *     varint P              number of pieces, >= 1
 *     varint len[P]         each piece's length in bytes, >= 1
 *     bytes                 the pieces back to back (exactly the sum of the lengths)
 * A piece is one file's run in the shard (a file cut over several shards is cut where a token
 * ends). Each piece is tokenized alone; its tokens, in order, are its run in the root; tokens
 * get their ids in order of first appearance. The writer derives the shard table's figures and
 * the runs with the same function the reader uses (textshard_grammar), so the two cannot
 * disagree. */
#ifndef TDC_TEXTSHARD_H
#define TDC_TEXTSHARD_H

#include <stddef.h>
#include <stdint.h>

#include "../base/buf.h"
#include "../grammar/dict.h"
#include "../grammar/gram.h"

/* The payload of pieces lens[0..np) (np >= 1, each >= 1 byte) whose bytes are text[0..sum):
 * appended to out. 0 or -ENOMEM. */
int textshard_payload(const uint64_t *lens, size_t np, const unsigned char *text, buf *out);

/* The grammar of a payload of n bytes: *d (fresh) and g (zeroed by the caller: ntokens, no
 * rules, the root); with runs not NULL, each piece's number of root symbols appended to it.
 * 0; -EBADMSG with a message for a payload the writer could not have made (no piece, a piece
 * of 0 bytes, lengths that do not add up to the bytes after them, more tokens than a shard may
 * have); -ENOMEM. On failure *d is NULL and g is freed. */
int textshard_grammar(const unsigned char *p, size_t n, dict **d, gram *g, vec64 *runs);

#endif
