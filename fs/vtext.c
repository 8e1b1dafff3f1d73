#include "vtext.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/base/err.h"
#include "../engine/base/fio.h"

void vtext_w_init(vtext_w *w, const char *dir, uint64_t spill_at)
{
    *w = (vtext_w){.fd = -1, .dir = dir, .spill_at = spill_at};
}

int vtext_w_put(vtext_w *w, const void *p, size_t n)
{
    if (w->fd < 0 && w->dir && w->n + n >= w->spill_at) {
        /* past the threshold: what is held so far goes to a file, and the rest follows; where
         * the disk refuses, the text stays in memory */
        w->fd = fio_tmpfile(w->dir);
        if (w->fd >= 0 && fio_pwrite_all(w->fd, w->mem.p, w->mem.n, 0, "virtual file text")) {
            close(w->fd);
            w->fd = -1;
        }
        if (w->fd < 0)
            w->dir = NULL;
        else
            buf_free(&w->mem);
    }
    int rc = w->fd >= 0 ? fio_pwrite_all(w->fd, p, n, w->n, "virtual file text")
                        : buf_put(&w->mem, p, n) ? tdc_error(-ENOMEM, "out of memory") : 0;
    if (!rc) w->n += n;
    return rc;
}

int vtext_w_sink(void *ctx, const unsigned char *p, size_t n)
{
    return vtext_w_put(ctx, p, n);
}

void vtext_w_reset(vtext_w *w)
{
    w->mem.n = 0;
    w->n = 0;
    if (w->fd >= 0 && ftruncate(w->fd, 0)) { /* cannot empty it: start a new one */
        close(w->fd);
        w->fd = -1;
    }
}

int vtext_w_finish(vtext_w *w, vtext **out)
{
    vtext *t = malloc(sizeof *t);
    if (!t) return tdc_error(-ENOMEM, "out of memory");
    *t = (vtext){.n = w->n, .fd = w->fd, .p = w->mem.p, .refs = 1};
    w->fd = -1;
    w->mem = (buf){0};
    w->n = 0;
    *out = t;
    return 0;
}

void vtext_w_free(vtext_w *w)
{
    buf_free(&w->mem);
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    w->n = 0;
}

vtext *vtext_ref(vtext *t)
{
    if (t) __atomic_fetch_add(&t->refs, 1, __ATOMIC_RELAXED);
    return t;
}

void vtext_put(vtext *t)
{
    if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL)) return;
    if (t->fd >= 0) close(t->fd);
    free(t->p);
    free(t);
}

ssize_t vtext_read(const vtext *t, uint64_t off, void *dst, size_t n)
{
    if (off >= t->n) return 0;
    if (n > t->n - off) n = (size_t)(t->n - off);
    if (t->fd < 0) {
        memcpy(dst, t->p + off, n);
        return (ssize_t)n;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(t->fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return tdc_error(-EIO, "virtual file text: cannot read its spill file");
        got += (size_t)k;
    }
    return (ssize_t)got;
}
