/* vol_span: reads that arrive while a lazy open's loader is still decoding the whole archive.
 * Such a read need not wait for every shard: the shards its file spans are loaded on their
 * own (arc_load_span) with an index of their own, and the read is served from them. A few
 * spans are kept for the reads that follow; once the loader is done they are dropped (the
 * last reader of each frees it) and every read goes to the whole archive. */
#include <errno.h>
#include <stdlib.h>

#include "vol_int.h"
#include "../base/err.h"

/* Spans kept at once: enough for the first files a reader opens, bounded so that the early
 * reads never hold more than a few shards beside the load. */
#define VOL_SPANS_MAX 4

struct vol_span {
    uint32_t first, last; /* shards [first, last] */
    arc *a;
    idx *x;
    int refs; /* readers using it, plus one while listed */
    struct vol_span *next;
};

static void span_free(vol_span *s)
{
    idx_free(s->x);
    arc_free(s->a);
    free(s);
}

static void span_put(vol *v, vol_span *s)
{
    pthread_mutex_lock(&v->splock);
    int last = --s->refs == 0;
    pthread_mutex_unlock(&v->splock);
    if (last) span_free(s);
}

/* A new span of shards [first, last] of the archive v opened (checked by its identity). */
static int span_load(vol *v, uint64_t id, uint32_t first, uint32_t last, vol_span **out)
{
    vol_span *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->first = first;
    s->last = last;
    int rc = arc_open_meta(v->path, &s->a);
    if (!rc && s->a->id != id) rc = tdc_error(-ESTALE, "%s: replaced while opening", v->path);
    if (!rc) rc = arc_load_span(s->a, first, last);
    if (!rc) rc = idx_build_base(s->a, &s->x);
    if (rc) {
        span_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* The listed span of shards [first, last], with a reference for the caller, loaded when
 * there is room for it; NULL when there is none or the spans are dropped (wait for the load). */
static vol_span *span_get(vol *v, uint64_t id, uint32_t first, uint32_t last)
{
    pthread_mutex_lock(&v->splock);
    int n = 0;
    for (vol_span *s = v->spans; s && !v->spans_done; s = s->next, n++)
        if (s->first == first && s->last == last) {
            s->refs++;
            pthread_mutex_unlock(&v->splock);
            return s;
        }
    int room = !v->spans_done && n < VOL_SPANS_MAX;
    pthread_mutex_unlock(&v->splock);
    vol_span *s = NULL;
    if (!room || span_load(v, id, first, last, &s)) return NULL;
    pthread_mutex_lock(&v->splock);
    n = 0;
    for (vol_span *t = v->spans; t; t = t->next, n++)
        if (t->first == first && t->last == last) { /* another reader listed it meanwhile */
            t->refs++;
            pthread_mutex_unlock(&v->splock);
            span_free(s);
            return t;
        }
    if (v->spans_done || n >= VOL_SPANS_MAX) {
        pthread_mutex_unlock(&v->splock);
        span_free(s);
        return NULL;
    }
    s->refs = 2;
    s->next = v->spans;
    v->spans = s;
    v->early_spans++;
    pthread_mutex_unlock(&v->splock);
    return s;
}

/* The entry holding ent's content and the shards it spans, from the archive's file table (a
 * copy opened for this: the loader rewrites the runs of v->a's entries as it merges). */
static int span_of(vol *v, int64_t ent, uint32_t *content, uint32_t *first, uint32_t *last,
                   uint64_t *id)
{
    pthread_mutex_lock(&v->splock);
    int rc = v->spans_done ? -EAGAIN : 0;
    if (!rc && !v->smeta) rc = arc_open_meta(v->path, &v->smeta);
    if (!rc && (uint64_t)ent >= v->smeta->nents) rc = -EAGAIN; /* not this archive's entry */
    if (!rc) {
        const arc_entry *e = &v->smeta->ents[ent];
        int64_t c = e->root_len ? ent : arc_ino_entry(v->smeta, e->ino);
        if (c < 0) rc = -EAGAIN;
        else {
            *content = (uint32_t)c;
            *id = v->smeta->id;
            rc = arc_entry_shards(v->smeta, (uint32_t)c, first, last);
        }
    }
    pthread_mutex_unlock(&v->splock);
    return rc;
}

ssize_t vol_span_read(vol *v, int64_t ent, uint64_t off, void *dst, size_t n)
{
    uint32_t c, first, last;
    uint64_t id;
    if (span_of(v, ent, &c, &first, &last, &id) || id != v->a->id) return -EAGAIN;
    vol_span *s = span_get(v, id, first, last);
    if (!s) return -EAGAIN;
    ssize_t k = arc_entry_damaged(s->a, c);
    if (!k) k = idx_extract(s->x, c, off, dst, n);
    if (k >= 0) __atomic_fetch_add(&v->early_reads, 1, __ATOMIC_RELAXED);
    span_put(v, s);
    return k;
}

void vol_spans_drop(vol *v)
{
    pthread_mutex_lock(&v->splock);
    v->spans_done = 1;
    vol_span *s = v->spans;
    v->spans = NULL;
    arc_free(v->smeta);
    v->smeta = NULL;
    pthread_mutex_unlock(&v->splock);
    while (s) {
        vol_span *next = s->next;
        span_put(v, s);
        s = next;
    }
}
