/* piece: the piece table of one edited file.
 *
 * A file's bytes are the concatenation of its pieces, each a range of a source: the file's
 * original content in the archive (PT_BASE, `src` = offset in it), bytes in the journal
 * (PT_JRNL, `src` = journal offset) or zeros (PT_ZERO, a hole). Pieces are kept in file order
 * with their end offsets, so finding the piece at an offset is a binary search; an edit
 * splits at most two pieces and shifts the ones after it.
 *
 * Not thread-safe: the owner serialises edits with reads. */
#ifndef TDC_PIECE_H
#define TDC_PIECE_H

#include <stddef.h>
#include <stdint.h>

enum pt_kind { PT_BASE, PT_JRNL, PT_ZERO };

typedef struct pt_piece {
    uint64_t end; /* file offset just past the piece (its start is the previous end) */
    uint64_t src; /* offset in the source where the piece starts */
    uint32_t kind;
} pt_piece;

typedef struct pt {
    pt_piece *p;
    size_t n, cap;
} pt;

/* A table holding `size` bytes of the original content (no piece when size is 0). */
int pt_init(pt *t, uint64_t size);
void pt_free(pt *t);

/* A copy of t in *out, sharing nothing with it. 0 or -ENOMEM (*out empty). */
int pt_dup(const pt *t, pt *out);

static inline uint64_t pt_size(const pt *t)
{
    return t->n ? t->p[t->n - 1].end : 0;
}

static inline uint64_t pt_start(const pt *t, size_t i)
{
    return i ? t->p[i - 1].end : 0;
}

/* Index of the piece holding byte `off` (off < pt_size). */
size_t pt_find(const pt *t, uint64_t off);

/* Make bytes [off, off + len) come from (kind, src): an overwrite, extending the file (with
 * a zero piece for any gap) when it reaches past the end. 0 or -ENOMEM (table unchanged). */
int pt_write(pt *t, uint64_t off, uint64_t len, uint32_t kind, uint64_t src);

/* Insert len bytes from (kind, src) at off <= pt_size, shifting what follows. 0 or -ENOMEM. */
int pt_insert(pt *t, uint64_t off, uint64_t len, uint32_t kind, uint64_t src);

/* Cut the file to `size` bytes, or extend it with zeros. 0 or -ENOMEM. */
int pt_truncate(pt *t, uint64_t size);

#endif
