/* ztrial: what zstd makes of some bytes, for the choices made before a slow final pass (a
 * dictionary's layout, whether a file's bytes compress, whether a shard is smaller as its
 * text), and the long-window setting the archive's sections are coded with. */
#ifndef TDC_ZTRIAL_H
#define TDC_ZTRIAL_H

#include <stddef.h>
#include <zstd.h>

/* The levels from which sections are coded with long-distance matching over a 128 MiB
 * window (symbol streams and texts repeat far apart). */
#define ZTRIAL_FAR_LEVEL 10

/* Set cc to match over that window. */
void ztrial_far(ZSTD_CCtx *cc);

/* The size of p[0..n) compressed at `level`, over the long window where `far`: in cc (its
 * parameters reset first) or, where cc is NULL, a context of its own. 0 where memory runs out
 * or zstd fails. */
size_t ztrial_size(ZSTD_CCtx *cc, const void *p, size_t n, int level, int far);

#endif
