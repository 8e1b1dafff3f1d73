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
 *     bytes                 the pieces back to back (the sum of the lengths)
 *     varint refs[]         one per token of three bytes or more (a long token), in order: 0
 *                           for a token not seen before in the shard, else how many long
 *                           tokens back it last came (to the end)
 * A piece is one file's run in the shard (a file cut over several shards is cut where a token
 * ends). Each piece is tokenized alone; its tokens, in order, are its run in the root; tokens
 * get their ids in order of first appearance. The references say which long tokens are new,
 * so the reader never hashes a token: tokens of one or two bytes it looks up by their bytes,
 * the others it appends or takes from the long token the reference points back to (checking
 * its bytes). A file repeated in the shard repeats one distance, which zstd codes in next to
 * nothing; ids would differ token by token. The writer derives the shard
 * table's figures and the runs with the reader's own function (textshard_grammar), so the two
 * cannot disagree
 *
 * A *bare* payload (codec zstd-bare) has no references: the reader looks every token up by
 * its bytes (a hash table), which makes a load slower. On text, where most tokens are long
 * and come back, the references cost zstd nearly as much as the text itself; on bytes that do
 * not compress, little. textshard_encode makes both and keeps the references unless the bare
 * payload saves a tenth (judged by a quick zstd pass). */
#ifndef TDC_TEXTSHARD_H
#define TDC_TEXTSHARD_H

#include <stddef.h>
#include <stdint.h>

#include "../base/buf.h"
#include "../grammar/dict.h"
#include "../grammar/gram.h"

/* The payload of pieces lens[0..np) (np >= 1, each >= 1 byte) whose bytes are text[0..sum):
 * appended to out; bare where that saves a tenth with `bare` 1, always with 2, never with 0;
 * *is_bare says which. 0, or -ENOMEM with a message. */
int textshard_encode(const uint64_t *lens, size_t np, const unsigned char *text, int bare,
                     buf *out, int *is_bare);

/* The grammar of a payload of n bytes (`bare`: without references): *d (fresh) and g
 * (zeroed by the caller: ntokens, no rules, the root); with runs not NULL, each piece's
 * number of root symbols appended to it. root_syms and ntokens: what the shard table says
 * the root and dictionary hold, room made for them at once (0 when not known; a figure past
 * what the payload can hold is not believed, and the caller checks the grammar against the
 * table after). 0; -EBADMSG with a message for a payload the writer could not have made (no
 * piece, a piece of 0 bytes, lengths past the end, a reference past the long tokens seen or
 * to other bytes, references missing or left over, bare: bytes after the pieces; more tokens
 * than a shard may have); -ENOMEM. On failure *d is NULL and g is freed. */
int textshard_grammar(const unsigned char *p, size_t n, int bare, uint64_t root_syms,
                      uint64_t ntokens, dict **d, gram *g, vec64 *runs);

/* The root symbols of a piece of n bytes: its tokens, each piece being tokenized alone. */
uint64_t textshard_run(const unsigned char *piece, size_t n);

/* Where the pieces' lengths end in a payload of which only the first `avail` bytes are at
 * hand (textshard_pieces reads them): 0 with that offset in *len, or 1 where more bytes are
 * needed to tell (or the lengths are bad: textshard_pieces over the whole payload says
 * why). */
int textshard_head(const unsigned char *p, size_t avail, size_t *len);

/* The pieces of a payload of n bytes without their tokens (for reads of its files' bytes):
 * *np lengths in *lens (fresh) and the pieces back to back at *text. 0; -EBADMSG with a
 * message (no piece, a piece of 0 bytes, lengths past the end); -ENOMEM. */
int textshard_pieces(const unsigned char *p, size_t n, uint64_t **lens, size_t *np,
                     const unsigned char **text);

#endif
