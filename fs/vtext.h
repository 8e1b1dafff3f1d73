/* vtext: the text of a virtual file (an analytic or a .search answer), made once and then only
 * read, shared by reference among the opens that read it and the cache of texts (vcache).
 *
 * A text that grows past a threshold while it is written goes to an unlinked temporary file
 * (it is spilled): an inverted index of a whole tree can be larger than the archive, and in a
 * file its bytes live in the page cache, which the kernel writes back and drops under
 * pressure, instead of in the daemon's heap, which -o mem= bounds. Where no file can be
 * made the text stays in memory (the daemon still answers). FUSE-free. */
#ifndef TDC_FS_VTEXT_H
#define TDC_FS_VTEXT_H

#include <stdint.h>
#include <sys/types.h>

#include "../engine/base/buf.h"

typedef struct vtext {
    uint64_t n;       /* its bytes */
    int fd;           /* the spilled text's file, or -1 */
    unsigned char *p; /* the text, when not spilled */
    int refs;
} vtext;

/* A text being written. */
typedef struct vtext_w {
    buf mem;           /* the text so far, until spilled */
    int fd;            /* the file it is spilled to, or -1 */
    uint64_t n;        /* bytes written */
    const char *dir;   /* where to spill (NULL: never) */
    uint64_t spill_at; /* the size from which the text goes to a file */
} vtext_w;

void vtext_w_init(vtext_w *w, const char *dir, uint64_t spill_at);

/* Append n bytes: 0, -ENOMEM or -EIO (a failed write to the spill file, with a message). */
int vtext_w_put(vtext_w *w, const void *p, size_t n);

/* vtext_w_put as an ana_sink (ana_merge.h): ctx is the vtext_w. */
int vtext_w_sink(void *ctx, const unsigned char *p, size_t n);

/* Empty again, as after vtext_w_init (a spill file is kept, truncated). */
void vtext_w_reset(vtext_w *w);

/* The text written, as a new vtext with one reference; w is left empty (init it again to
 * reuse it). 0 or -ENOMEM. */
int vtext_w_finish(vtext_w *w, vtext **out);

/* Free what w holds (a text not finished). */
void vtext_w_free(vtext_w *w);

/* One more reference to t (thread-safe); t is returned. NULL is allowed. */
vtext *vtext_ref(vtext *t);

/* Drop a reference; the last frees t (and closes its file). NULL is allowed. */
void vtext_put(vtext *t);

/* Up to n bytes from offset off into dst: the bytes copied (0 at or past the end), or -EIO
 * when the spill file cannot be read. Thread-safe. */
ssize_t vtext_read(const vtext *t, uint64_t off, void *dst, size_t n);

#endif
