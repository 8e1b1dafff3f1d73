/* vol_span: reads served from the shards of their file alone, without the whole archive in
 * memory: while a lazy open's loader is still decoding everything, and for good under a
 * memory budget (vol_opts.mem). A span is shards [first, last] loaded on their own with only
 * the entries whose content they hold (arc_open_span) and an index of their own. Loaded spans
 * are kept, most recently used first, for the reads that follow: at most VOL_EARLY_SPANS while
 * a loader runs (no budget), and under a budget as long as the budget (v->bud, shared with the
 * analytics shard by shard) has room. There, every span alive holds its bytes in the budget
 * from the start of its decoding (an estimate from the shard table until its size is known)
 * until it is freed, whether kept or only serving reads, so the reads in flight count too; a
 * read that needs room waits for it where it holds nothing (vol_span_hold), and the least
 * recently used spans no read holds are dropped to make it. Once the whole archive is loaded
 * the spans are dropped, each freed by its last reader. Each span keeps its short rules
 * expanded, so reads copy them whole. Under a budget, a reader going through the shards in
 * order has the spans of the next files decoded ahead, each by a thread of its own (one per
 * CPU but the reader's, at most VOL_AHEAD_MAX), where the budget has room for them now.
 *
 * A file that pack cut over shards of its own (arc_entry_parts: a file larger than a shard)
 * is read part by part: a read loads the shard holding its bytes alone (arc_open_part), so
 * its first byte costs one shard and the memory it holds stays one shard's, whatever the
 * file's size; a reader going through it has the next parts decoded ahead.
 *
 * A shard stored as its text is read from a span of its bytes (arc_open_text): a read copies
 * them, and the shard is never tokenized for it; `.search` takes the grammar's span. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vol_int.h"
#include "../base/err.h"
#include "../base/tok.h"
#include "../base/mbud.h"
#include "../index/words.h"

/* Spans kept while a loader runs (no budget): enough for the first files a reader opens. */
#define VOL_EARLY_SPANS 4

/* Under a budget, memory freed spans may leave in the allocator before malloc_trim returns
 * it: at most a quarter of the budget, and at most this. A trim returns every free page, and
 * the next span's decoding faults all of them in again, a large part of a span load; between
 * trims the next spans decode into what is kept, so the daemon's resident memory may exceed
 * the budget by this much. The count is of bytes freed, whether or not later spans reused
 * them: a span's large blocks often fit no hole another left (a shard stored as text is one
 * block of its size), and counting loads as reuse let the held memory grow unbounded. */
#define VOL_TRIM_SLACK (64ull << 20)

/* What a span holds: shards [first, last], with every file inside them (part < 0) or the
 * part of file table entry `part` in shard first == last, which begins at byte `off` of
 * that file and ends before `end` (whole spans: 0 and UINT64_MAX). `text`: for reads of a
 * shard stored as its text, its files' bytes without their tokens (arc_open_text). */
typedef struct span_key {
    uint32_t first, last;
    int64_t part;
    uint64_t off, end;
    int text;
} span_key;

static int same_key(const span_key *a, const span_key *b)
{
    return a->first == b->first && a->last == b->last && a->part == b->part &&
           a->text == b->text;
}

struct vol_span {
    span_key k;
    arc *a;    /* the grammar and its index, or NULL where t holds the bytes */
    idx *x;
    arc_text t;
    uint32_t *ids; /* a's entries as entries of v->a (ascending) */
    uint32_t nids;
    uint64_t bytes; /* what it occupies */
    uint64_t taken; /* what it holds of the budget */
    uint64_t gen;   /* v->span_gen when it was loaded: spans of an archive compacted since
                       are never matched or kept */
    int refs;       /* readers using it, plus one while listed */
    int ahead;      /* read ahead and not used by a read yet */
    int flat_due;   /* kept after a read's load: its short rules expand at its next read */
    uint64_t flat;  /* bytes for its short rules expanded */
    struct vol_span *prev, *next;
};

static void span_free(vol *v, vol_span *s)
{
    uint64_t taken = s->taken;
    idx_free(s->x);
    arc_free(s->a);
    arc_text_free(&s->t);
    free(s->ids);
    free(s);
    /* Give the freed pages back: without a budget at once, under one once spans freed more
     * than the slack since the last trim (the budget no longer counts them). */
    if (!v->bud || __atomic_add_fetch(&v->untrimmed, taken, __ATOMIC_RELAXED) > v->trim_slack) {
        __atomic_store_n(&v->untrimmed, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&v->span_trims, 1, __ATOMIC_RELAXED);
        malloc_trim(0);
    }
    if (taken) mbud_give(v->bud, taken);
}

/* Whether s is on the list of kept spans. v->splock held. */
static int listed(const vol *v, const vol_span *s)
{
    return s->prev || v->spans == s;
}

static void span_put(vol *v, vol_span *s)
{
    pthread_mutex_lock(&v->splock);
    int last = --s->refs == 0;
    /* A kept span no read holds any more can be dropped for a read waiting for room. */
    int idle = s->refs == 1 && listed(v, s);
    pthread_mutex_unlock(&v->splock);
    if (last) span_free(v, s);
    else if (idle && v->bud) mbud_wake(v->bud);
}

/* List order: most recently used first. v->splock held. */
static void unlink_span(vol *v, vol_span *s)
{
    *(s->prev ? &s->prev->next : &v->spans) = s->next;
    *(s->next ? &s->next->prev : &v->spans_tail) = s->prev;
    s->prev = s->next = NULL;
}

static void push_front(vol *v, vol_span *s)
{
    s->prev = NULL;
    s->next = v->spans;
    *(v->spans ? &v->spans->prev : &v->spans_tail) = s;
    v->spans = s;
}

/* Drop the least recently used spans no reader holds, onto *gone (to free without the lock):
 * under a budget until they held `need` bytes of it, else until fewer than VOL_EARLY_SPANS
 * are kept. v->splock held. */
static void drop_unused(vol *v, uint64_t need, vol_span **gone)
{
    uint64_t freed = 0;
    for (vol_span *s = v->spans_tail, *prev; s && (v->bud ? freed < need : v->nspans >= VOL_EARLY_SPANS);
         s = prev) {
        prev = s->prev;
        if (s->refs != 1) continue;
        unlink_span(v, s);
        v->nspans--;
        v->span_bytes -= s->bytes;
        v->span_evictions++;
        freed += s->taken;
        s->next = *gone;
        *gone = s;
    }
}

static void put_all(vol *v, vol_span *gone)
{
    while (gone) {
        vol_span *t = gone->next;
        span_put(v, gone);
        gone = t;
    }
}

/* The budget's reclaimer: drop kept spans no read holds, `need` bytes of them. */
static void reclaim_spans(void *arg, uint64_t need)
{
    vol *v = arg;
    vol_span *gone = NULL;
    pthread_mutex_lock(&v->splock);
    drop_unused(v, need, &gone);
    pthread_mutex_unlock(&v->splock);
    put_all(v, gone);
}

int vol_spans_budget(vol *v)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    v->ahead_max = cpus > VOL_AHEAD_MAX ? VOL_AHEAD_MAX : cpus > 2 ? (int)cpus - 1 : 1;
    if (!(v->bud = mbud_new(v->o.mem))) return -ENOMEM;
    v->trim_slack = v->o.mem / 4 < VOL_TRIM_SLACK ? v->o.mem / 4 : VOL_TRIM_SLACK;
    mbud_set_reclaim(v->bud, reclaim_spans, v);
    return 0;
}

/* The bytes of short rules a span of `content` bytes keeps expanded (span_load). */
static uint64_t flat_bound(const vol *v, uint64_t content)
{
    uint64_t cap = v->o.cache_bytes ? v->o.cache_bytes : IDX_CACHE_DEFAULT;
    return content / 8 < cap ? content / 8 : cap;
}

/* What span [first, last] is expected to occupy, from the shard table, its short rules
 * expanded included (a shard holding copies has more content than its grammar suggests); a
 * text shard read as its bytes, its payload and (while it decodes) its stored section. */
static uint64_t span_estimate(const vol *v, const arc *meta, const span_key *key)
{
    if (key->text) {
        const arc_secinfo *d = &meta->secs[meta->shards[key->first].sec];
        return d->raw + d->stored + (16 << 10);
    }
    uint64_t n = 0, content = 0;
    for (uint32_t k = key->first; k <= key->last; k++) {
        n += arc_shard_mem_estimate(meta, k);
        content += meta->shards[k].bytes;
    }
    return n + flat_bound(v, content);
}

/* What span s occupies. */
static uint64_t span_bytes(const vol_span *s)
{
    if (!s->a) return sizeof *s + s->t.bytes;
    return sizeof *s + arc_mem(s->a) + idx_mem(s->x) + (uint64_t)s->nids * sizeof *s->ids;
}

/* The span of `key` loaded from the file table `meta`: its arc, index and size; with
 * `flat`, its short rules expanded too (else flat_later does it at the next read that finds
 * it kept). */
static int span_load(vol *v, const arc *meta, const span_key *key, int flat, vol_span **out)
{
    vol_span *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    s->k = *key;
    int rc;
    /* A text shard's reads copy its bytes. Where its pieces are not its files' (or it is
     * damaged) the grammar's load below judges it and says why. */
    if (key->text && !arc_open_text(meta, key->first, key->part, !flat, &s->t)) {
        s->ids = s->t.ids;
        s->nids = s->t.nids;
        s->t.ids = NULL;
        s->bytes = span_bytes(s);
        *out = s;
        return 0;
    }
    if (key->part < 0) {
        rc = arc_open_span(meta, key->first, key->last, &s->a, &s->ids, &s->nids);
    } else if (!(s->ids = malloc(sizeof *s->ids))) {
        rc = -ENOMEM;
    } else {
        s->ids[0] = (uint32_t)key->part;
        s->nids = 1;
        rc = arc_open_part(meta, (uint32_t)key->part, key->first, &s->a);
    }
    if (!rc) rc = idx_build_base(s->a, &s->x);
    if (rc) {
        span_free(v, s);
        return rc;
    }
    /* Short rules kept expanded, in an eighth of the span's content: reads then copy them
     * whole instead of descending token by token, about three times faster, for a build that
     * costs a fifth of the decoding. Without memory for it (-ENOMEM), reads descend. */
    uint64_t content = 0;
    for (uint32_t k = key->first; k <= key->last; k++)
        content += meta->shards[k].bytes;
    s->flat = flat_bound(v, content);
    if (flat) (void)idx_build_flat(s->x, s->flat, NULL);
    s->bytes = span_bytes(s);
    *out = s;
    return 0;
}

static vol_span *find_span(vol *v, const span_key *key)
{
    for (vol_span *s = v->spans; s; s = s->next)
        if (same_key(&s->k, key) && s->gen == v->span_gen) return s;
    return NULL;
}

/* The copy of the archive's file table that spans are loaded from: the one the loader
 * thread makes (waited for), else opened here on first use. v->splock held. */
static int open_smeta(vol *v)
{
    while (v->smeta_pending)
        pthread_cond_wait(&v->spcond, &v->splock);
    if (v->smeta) return 0;
    int rc = arc_open_meta(v->path, &v->smeta);
    if (!rc && v->smeta->id != v->a->id) rc = -EAGAIN; /* replaced since the mount */
    if (rc) {
        arc_free(v->smeta);
        v->smeta = NULL;
    }
    return rc;
}

const arc *vol_span_meta(vol *v)
{
    pthread_mutex_lock(&v->splock);
    const arc *m = !v->spans_done && !open_smeta(v) && v->smeta->id == v->a->id ? v->smeta : NULL;
    pthread_mutex_unlock(&v->splock);
    return m;
}

/* The span holding byte `off` of a file's content: the shard of its part there for a file
 * read part by part, else every shard its run touches; for a shard stored as its text, its
 * bytes, unless `grammar` asks for its grammar. */
static void key_of(const arc *m, uint32_t c, uint64_t off, int grammar, span_key *key)
{
    *key = (span_key){.part = -1, .end = UINT64_MAX};
    if (!arc_entry_parts(m, c, &key->first, &key->last)) {
        arc_entry_shards(m, c, &key->first, &key->last);
    } else {
        uint32_t k = key->first;
        while (k < key->last && off >= key->off + m->shards[k].bytes)
            key->off += m->shards[k++].bytes;
        *key = (span_key){k, k, c, key->off, key->off + m->shards[k].bytes, 0};
    }
    key->text = !grammar && key->first == key->last && arc_shard_text(m, key->first);
}

/* The entry of file table m holding ent's content, and the key of the span holding its byte
 * `off` (key_of); -EAGAIN where m has no such entry. */
static int content_key(const arc *m, int64_t ent, uint64_t off, int grammar, uint32_t *content,
                       span_key *key)
{
    if ((uint64_t)ent >= m->nents) return -EAGAIN;
    const arc_entry *e = &m->ents[ent];
    int64_t c = e->root_len ? ent : arc_ino_entry(m, e->ino);
    if (c < 0) return -EAGAIN;
    *content = (uint32_t)c;
    key_of(m, (uint32_t)c, off, grammar, key);
    return 0;
}

/* content_key from the file table's copy. v->splock held. */
static int span_of(vol *v, int64_t ent, uint64_t off, int grammar, uint32_t *content, span_key *key)
{
    int rc = open_smeta(v);
    return rc ? rc : content_key(v->smeta, ent, off, grammar, content, key);
}

/* Whether the span of `key` of the current file table is being decoded. v->splock held. */
static int being_loaded(const vol *v, const span_key *key)
{
    for (int i = 0; i < VOL_SPAN_LOADS + VOL_AHEAD_MAX; i++) {
        const struct vol_loading *l = &v->loading[i];
        if (l->busy && l->first == key->first && l->last == key->last && l->part == key->part &&
            l->text == key->text && l->gen == v->span_gen)
            return 1;
    }
    return 0;
}

/* How span_range gets a span: for a read, decoding it if need be (waiting for room under a
 * budget, or taking it at once), or reading ahead (only if a slot and the room are free
 * now, and without a reference: it is kept for the reads to come). */
enum { GET_NOW, GET_WAIT, GET_AHEAD };

static void read_ahead(vol *v, const vol_span *s, uint32_t c);
static void flat_later(vol *v, vol_span *s);

/* The span of `key` in file table generation `gen`, found kept or loaded now, with a
 * reference for the caller (none when reading ahead). At most VOL_SPAN_LOADS spans are
 * decoded at once for reads and v->ahead_max ahead, and a span being decoded is waited for
 * rather than decoded twice. Under a budget a load takes its estimate first. A reader's load
 * that follows on the shard of its last one, or its first use of a span read ahead, starts
 * reading the next spans ahead. Called with v->splock held; returns without it. NULL when
 * the spans are dropped, the generation changed, the load failed, or when reading ahead. */
static vol_span *span_range(vol *v, const span_key *key, uint64_t gen, int how, uint32_t c)
{
    vol_span *s = NULL;
    uint64_t took = 0; /* of the budget, for the load */
    int slot = -1, chain = 0;
    for (;;) {
        if (v->spans_done || v->span_gen != gen) break;
        if ((s = find_span(v, key))) {
            if (how == GET_AHEAD) { /* kept already */
                s = NULL;
                break;
            }
            s->refs++;
            v->span_hits++;
            unlink_span(v, s);
            push_front(v, s);
            chain = s->ahead;
            s->ahead = 0;
            if (chain) v->seq_next = key->last + 1;
            break;
        }
        int same = being_loaded(v, key), busy[2] = {0, 0}; /* for reads, ahead */
        for (int i = 0; i < VOL_SPAN_LOADS + VOL_AHEAD_MAX; i++) {
            if (!v->loading[i].busy) slot = i;
            busy[v->loading[i].ahead] += v->loading[i].busy;
        }
        if (busy[how == GET_AHEAD] >= (how == GET_AHEAD ? v->ahead_max : VOL_SPAN_LOADS))
            slot = -1; /* as many of its kind as may run */
        if (how == GET_AHEAD && (same || slot < 0)) { /* being decoded, or no slot free */
            slot = -1;
            break;
        }
        if (!same && slot >= 0 && (!v->bud || took)) break;
        if (!same && slot >= 0) { /* room first; then look again, as others went on meanwhile */
            took = span_estimate(v, v->smeta, key);
            pthread_mutex_unlock(&v->splock);
            if (how != GET_AHEAD)
                mbud_take(v->bud, took, how == GET_WAIT);
            else if (!mbud_try(v->bud, took))
                took = 0;
            pthread_mutex_lock(&v->splock);
            if (!took) { /* no room to read ahead */
                slot = -1;
                break;
            }
        } else {
            pthread_cond_wait(&v->spcond, &v->splock);
        }
        slot = -1;
    }
    if (s || slot < 0 || v->spans_done || v->span_gen != gen) {
        int flat = s && s->flat_due;
        if (flat) s->flat_due = 0;
        pthread_mutex_unlock(&v->splock);
        if (took) mbud_give(v->bud, took);
        if (flat) flat_later(v, s);
        if (chain) read_ahead(v, s, c);
        return s;
    }
    /* The file table stays while the slot is busy (vol_spans_reset waits for it). */
    const arc *meta = v->smeta;
    v->loading[slot] = (struct vol_loading){key->first, key->last, key->part, key->text, gen,
                                            1, how == GET_AHEAD};
    if (how != GET_AHEAD) { /* reading in shard order */
        chain = v->bud && key->first == v->seq_next;
        v->seq_next = key->last + 1;
    }
    pthread_mutex_unlock(&v->splock);
    int rc = span_load(v, meta, key, how == GET_AHEAD, &s);
    if (!rc) s->gen = gen;
    if (v->bud) {
        /* The estimate, the larger, allows for the allocator's share: the decoding's freed
         * buffers stay in the loading thread's arena, so a span adds to the resident memory
         * about its estimate, not its measured size. */
        uint64_t keep = rc ? 0 : took > s->bytes ? took : s->bytes;
        if (!rc) s->taken = keep;
        mbud_resize(v->bud, took, keep);
    }
    vol_span *gone = NULL;
    pthread_mutex_lock(&v->splock);
    v->loading[slot].busy = 0;
    pthread_cond_broadcast(&v->spcond);
    if (rc) {
        pthread_mutex_unlock(&v->splock);
        return NULL;
    }
    v->span_loads++; /* no other reader loads it meanwhile, so none is listed */
    v->span_ahead += how == GET_AHEAD;
    v->span_text += !s->a;
    s->refs = 1;
    s->ahead = how == GET_AHEAD;
    if (!v->spans_done && gen == v->span_gen) {
        drop_unused(v, 0, &gone);
        if (v->bud || v->nspans < VOL_EARLY_SPANS) { /* else it serves this read only */
            s->refs = 2;
            push_front(v, s);
            v->nspans++;
            v->span_bytes += s->bytes;
        }
    }
    /* Its short rules expand once a second read finds it kept: expanding them costs a fifth of
     * the decoding, which random reads over more spans than the budget keeps would spend on
     * spans dropped before their next read. */
    s->flat_due = how != GET_AHEAD && listed(v, s) && s->x; /* read ahead: expanded already */
    pthread_mutex_unlock(&v->splock);
    put_all(v, gone);
    if (how == GET_AHEAD) {
        span_put(v, s); /* kept (listed) for the reads to come, or freed */
        return NULL;
    }
    if (chain) read_ahead(v, s, c);
    return s;
}

/* The span holding entry ent's content (its byte `off` for a file read part by part; its
 * grammar with `grammar`: key_of), with a reference for the caller (*content: that content's entry
 * in v->a; *key: the span's): `held` when it is that span, a kept one, or one loaded now (kept
 * under a budget, and without one while fewer than VOL_EARLY_SPANS are); NULL when the spans
 * are dropped or cannot serve ent (read the whole archive instead). Under a budget a load
 * takes its estimate first: waiting for room with `wait`, else at once (the caller holds a
 * span or the model lock, which a waiter could need). NULL too when a compaction put a new
 * archive in place meanwhile (only a caller without the model lock sees that: ent may be the
 * old archive's; its read, under the lock, looks again). */
static vol_span *span_get(vol *v, vol_span *held, int64_t ent, uint64_t off, int grammar,
                          uint32_t *content, int wait)
{
    span_key key;
    pthread_mutex_lock(&v->splock);
    if (v->spans_done || span_of(v, ent, off, grammar, content, &key)) {
        pthread_mutex_unlock(&v->splock);
        return NULL;
    }
    if (held && same_key(&held->k, &key) && held->gen == v->span_gen) {
        held->refs++;
        pthread_mutex_unlock(&v->splock);
        return held;
    }
    return span_range(v, &key, v->span_gen, wait ? GET_WAIT : GET_NOW, *content);
}

/* ---------------- in the background: reading ahead, expanding short rules ------------- */

/* Start a detached thread running fn(arg), counted in v->span_jobs. v->splock held. */
static int job_start(vol *v, void *(*fn)(void *), void *arg)
{
    pthread_t th;
    pthread_attr_t at;
    if (pthread_attr_init(&at)) return -1;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, fn, arg);
    pthread_attr_destroy(&at);
    if (!rc) v->span_jobs++;
    return rc ? -1 : 0;
}

/* The end of a job job_start started (`ahead`: a read-ahead). */
static void job_end(vol *v, int ahead)
{
    pthread_mutex_lock(&v->splock);
    v->span_jobs--;
    v->reading_ahead -= ahead;
    pthread_cond_broadcast(&v->spcond);
    pthread_mutex_unlock(&v->splock);
}

typedef struct ahead_job {
    vol *v;
    span_key key;
    uint64_t gen;
} ahead_job;

static void *ahead_main(void *arg)
{
    ahead_job *j = arg;
    vol *v = j->v;
    pthread_mutex_lock(&v->splock);
    span_range(v, &j->key, j->gen, GET_AHEAD, 0);
    free(j);
    job_end(v, 1);
    return NULL;
}

typedef struct flat_job {
    vol *v;
    vol_span *s; /* a reference held until done */
} flat_job;

/* Expand span s's short rules while reads go on (they take the cache once published), then
 * count what it occupies now, in the budget too. */
static void *flat_main(void *arg)
{
    flat_job *j = arg;
    vol *v = j->v;
    vol_span *s = j->s;
    free(j);
    (void)idx_build_flat(s->x, s->flat, &v->closing);
    pthread_mutex_lock(&v->splock);
    uint64_t now = span_bytes(s), was = s->taken;
    if (listed(v, s)) v->span_bytes += now - s->bytes;
    s->bytes = now;
    if (v->bud && now > was) s->taken = now;
    pthread_mutex_unlock(&v->splock);
    if (v->bud && now > was) mbud_resize(v->bud, was, now);
    span_put(v, s);
    job_end(v, 0);
    return NULL;
}

/* Expand the short rules of span s, which a read just loaded, in the background: the first
 * byte does not wait for it. */
static void flat_later(vol *v, vol_span *s)
{
    flat_job *j = malloc(sizeof *j);
    if (!j) return;
    *j = (flat_job){v, s};
    pthread_mutex_lock(&v->splock);
    s->refs++;
    int rc = v->spans_done ? -1 : job_start(v, flat_main, j);
    if (rc) s->refs--;
    pthread_mutex_unlock(&v->splock);
    if (rc) free(j);
}

/* Start a thread reading the span of `key` ahead. v->splock held. */
static void ahead_start(vol *v, const span_key *key, uint64_t gen)
{
    ahead_job *j = malloc(sizeof *j);
    if (!j) return;
    *j = (ahead_job){v, *key, gen};
    if (job_start(v, ahead_main, j))
        free(j);
    else
        v->reading_ahead++;
}

/* Read the span of `key` ahead unless it is kept or being decoded, or v->ahead_max are read
 * ahead already. v->splock held. */
static void ahead_one(vol *v, const span_key *key, uint64_t gen)
{
    if (v->reading_ahead < v->ahead_max && !find_span(v, key) && !being_loaded(v, key))
        ahead_start(v, key, gen);
}

/* For a reader going through the shards in order, which has just loaded or first used span
 * s for entry c: decode in the background the spans that follow, the next v->ahead_max of
 * them, each in a thread of its own, under a budget only: the next parts of c when s is one
 * of its parts, then the spans of the files after c that lie elsewhere (entry order is shard
 * order; a file read part by part counts with its first part). */
static void read_ahead(vol *v, const vol_span *s, uint32_t c)
{
    pthread_mutex_lock(&v->splock);
    const arc *m = v->smeta;
    span_key prev = s->k, key;
    uint32_t seen = 0, h;
    int go = v->bud && !v->spans_done && s->gen == v->span_gen && m;
    for (uint64_t off = s->k.end; go && s->k.part >= 0 && seen < (uint32_t)v->ahead_max;
         off = key.end, seen++) {
        key_of(m, c, off, 0, &key);
        if (key.first == prev.first) break; /* c's last part */
        ahead_one(v, &key, s->gen);
        prev = key;
    }
    for (uint32_t e = c + 1; go && seen < (uint32_t)v->ahead_max && e < m->nents; e++) {
        if (m->ents[e].type != ARC_REG || !m->ents[e].root_len || span_of(v, e, 0, 0, &h, &key) ||
            same_key(&key, &prev) || same_key(&key, &s->k))
            continue;
        prev = key;
        seen++;
        ahead_one(v, &key, s->gen);
    }
    pthread_mutex_unlock(&v->splock);
}

/* The span's entry of v->a's entry c, or -1. */
static int64_t local_entry(const vol_span *s, uint32_t c)
{
    return find_u32(s->ids, s->nids, c);
}

vol_span *vol_span_hold(vol *v, int64_t ent, uint64_t off)
{
    uint32_t c;
    return span_get(v, NULL, ent, off, 0, &c, 1);
}

int vol_span_kept(vol *v, int64_t ent, uint64_t off)
{
    uint32_t c;
    span_key key;
    pthread_mutex_lock(&v->splock);
    /* Without the file table's copy yet, opening it is work too. */
    int kept = !v->spans_done && v->smeta && !span_of(v, ent, off, 0, &c, &key) &&
               find_span(v, &key);
    pthread_mutex_unlock(&v->splock);
    return kept;
}

void vol_span_release(vol *v, vol_span *s)
{
    if (s) span_put(v, s);
}

ssize_t vol_span_read(vol *v, vol_span *held, int64_t ent, uint64_t off, void *dst, size_t n)
{
    size_t done = 0;
    while (done < n) { /* more than once where the bytes lie in several parts of a file */
        uint32_t c;
        vol_span *s = span_get(v, held, ent, off + done, 0, &c, 0);
        if (!s) return -EAGAIN;
        uint64_t at = off + done - s->k.off;
        uint64_t left = s->k.end > off + done ? s->k.end - (off + done) : 0;
        size_t want = n - done < left ? n - done : (size_t)left;
        if (!want) { /* past the file's end */
            span_put(v, s);
            break;
        }
        int64_t l = local_entry(s, c);
        ssize_t k = l < 0 ? -EAGAIN : s->a ? arc_entry_damaged(s->a, (uint32_t)l) : 0;
        if (!k && s->a) {
            k = idx_extract(s->x, (uint32_t)l, at, (char *)dst + done, want);
        } else if (!k) { /* a text shard's bytes */
            const unsigned char *p;
            if ((k = arc_text_bytes(&s->t, (uint32_t)l, at, want, &p)) > 0)
                memcpy((char *)dst + done, p, (size_t)k);
        }
        int whole = s->k.part < 0;
        span_put(v, s);
        if (k < 0) return k;
        done += (size_t)k;
        if ((size_t)k < want || whole) break; /* the file's end */
    }
    __atomic_fetch_add(&v->early_reads, 1, __ATOMIC_RELAXED);
    return (ssize_t)done;
}

/* A search's state between the parts of a file read part by part. Pack and compaction cut a
 * file only where no word continues, so each part's occurrences are the file's; a word that
 * another writer cut between two parts must still be found whole, and neither piece of it
 * alone. */
typedef struct part_search {
    const char *word;
    size_t wn;
    uint64_t pend; /* an occurrence ending where the last part ended, held until the next
                      part's first byte says whether the word goes on there */
    int has_pend;
    int open;            /* a cut word's run covered the last part whole: it goes on */
    unsigned char *run;  /* the word bytes ending the text so far, at most wn + 1 of them */
    size_t run_n;        /* (wn + 1: a run too long to be the word) */
    uint64_t run_at;     /* where that run starts in the file */
    unsigned char *edge; /* a part's first or last bytes, wn + 1 of them */
} part_search;

/* The run of word bytes that crosses into the part, completed by the part's first h of them
 * (wn + 1: more than the word). */
static void run_add(part_search *ps, size_t h)
{
    size_t add = h < ps->wn + 1 - ps->run_n ? h : ps->wn + 1 - ps->run_n;
    memcpy(ps->run + ps->run_n, ps->edge, add);
    ps->run_n += add;
}

/* A run of word bytes that crossed a cut ended: where it is the word, its offset to offs. */
static int run_end(part_search *ps, vec64 *offs)
{
    int is = ps->open && ps->run_n == ps->wn && !memcmp(ps->run, ps->word, ps->wn);
    ps->open = 0;
    return is ? vec64_push(offs, ps->run_at) : 0;
}

/* The occurrences in one part of a file (span s, its entry l; the part is bytes [base, base
 * + len) of the file), as offsets in the file appended to offs: the part's own, less those
 * at a cut, plus a cut word that ends in it; one ending at the part's end held in ps. */
static int search_part(part_search *ps, const vol_span *s, uint32_t l, idx_words *words,
                       uint64_t base, uint64_t len, vec64 *offs)
{
    size_t cap = ps->wn + 1, n = len < cap ? (size_t)len : cap, h = 0;
    ssize_t k = 0;
    if (ps->run_n && (k = idx_extract(s->x, l, 0, ps->edge, n)) < 0) return (int)k;
    while (h < (size_t)k && tok_is_word_byte(ps->edge[h])) /* only a run can cross in */
        h++;
    int cut = ps->run_n && h; /* a word goes on across the cut */
    if (ps->has_pend && !cut && vec64_push(offs, ps->pend)) return -ENOMEM;
    ps->has_pend = 0;
    if (cut) {
        run_add(ps, h);
        ps->open = 1;
        if (h == len) return 0; /* the part is that word's middle */
    }
    if (run_end(ps, offs)) return -ENOMEM;
    size_t from = offs->n, to = from;
    int rc = idx_search(words, l, ps->word, ps->wn, offs);
    for (size_t j = from; j < offs->n && !rc; j++) {
        uint64_t o = offs->p[j];
        if (cut && o == 0) continue; /* the cut word's last piece */
        if (o + ps->wn == len) {     /* the word may go on in the next part */
            ps->pend = base + o;
            ps->has_pend = 1;
            continue;
        }
        offs->p[to++] = base + o;
    }
    offs->n = to;
    if (rc) return rc;
    /* the run of word bytes the part ends with, for the next part */
    n = len < cap ? (size_t)len : cap;
    if ((k = idx_extract(s->x, l, len - n, ps->edge, n)) != (ssize_t)n)
        return k < 0 ? (int)k : -EBADMSG;
    size_t t = 0;
    while (t < n && tok_is_word_byte(ps->edge[n - 1 - t]))
        t++;
    memcpy(ps->run, ps->edge + n - t, t);
    ps->run_n = t;
    ps->run_at = base + len - t;
    return 0;
}

/* Put back a span view_span gave for view w. */
static void search_put(const vol_view *w, vol_span *s)
{
    if (s && w->own)
        span_free(w->v, s);
    else if (s)
        span_put(w->v, s);
}

/* The span of entry ent's byte `off` for view w (span_get's with its grammar) in *s: the one
 * held when it is that, else one got after putting the held one back (and freeing its word
 * index *words, where words is given), so that waiting for room holds nothing a reader could
 * need: from the cache of reads, or for a view that owns its file table (a temporary archive)
 * loaded from that alone, its estimate held in the budget while it lives. 0, or -EAGAIN where
 * the spans cannot serve it, or the load's error. */
static int view_span(const vol_view *w, vol_span **s, idx_words **words, int64_t ent, uint64_t off,
                     uint32_t *c)
{
    vol *v = w->v;
    span_key key;
    int rc = 0, same;
    if (w->own) {
        rc = content_key(w->a, ent, off, 1, c, &key);
        same = !rc && *s && same_key(&(*s)->k, &key);
    } else {
        pthread_mutex_lock(&v->splock);
        rc = v->spans_done || span_of(v, ent, off, 1, c, &key) ? -EAGAIN : 0;
        same = !rc && *s && same_key(&(*s)->k, &key) && (*s)->gen == v->span_gen;
        pthread_mutex_unlock(&v->splock);
    }
    if (rc || same) return rc;
    if (words) {
        idx_words_free(*words);
        *words = NULL;
    }
    search_put(w, *s);
    *s = NULL;
    if (w->own) {
        uint64_t est = v->bud ? span_estimate(v, w->a, &key) : 0;
        if (est) mbud_take(v->bud, est, 1);
        if ((rc = span_load(v, w->a, &key, 0, s))) {
            if (est) mbud_give(v->bud, est);
            return rc;
        }
        (*s)->taken = est; /* given back when it is freed */
    } else if (!(*s = span_get(v, NULL, ent, off, 1, c, 1))) {
        return -EAGAIN;
    }
    return 0;
}

/* view_span with the span's word index in *words, built where the span is new. */
static int search_span(const vol_view *w, vol_span **s, idx_words **words, int64_t ent,
                       uint64_t off, uint32_t *c)
{
    int rc = view_span(w, s, words, ent, off, c);
    return rc || *words ? rc : idx_words_build((*s)->x, words);
}

int vol_view_search(const vol_view *w, const uint32_t *files, size_t n, const char *word, size_t wn,
                    int (*emit)(void *ctx, size_t i, const vec64 *offs), void *ctx)
{
    vol_span *s = NULL;
    idx_words *words = NULL; /* s's word index */
    vec64 offs = {0};
    part_search ps = {word, wn, 0, 0, 0, malloc(wn + 1), 0, 0, malloc(wn + 1)};
    int rc = ps.run && ps.edge ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t size = w->a->ents[files[i]].size, off = 0;
        ps.has_pend = ps.open = 0;
        ps.run_n = 0;
        while (off < size && !rc) { /* the file's span, or each of its parts in turn */
            uint32_t c;
            rc = search_span(w, &s, &words, files[i], off, &c);
            int64_t l = rc ? -1 : local_entry(s, c);
            if (!rc && l < 0) rc = -EAGAIN;
            if (!rc) rc = arc_entry_damaged(s->a, (uint32_t)l);
            if (rc) break;
            offs.n = 0;
            if (s->k.part < 0) {
                rc = idx_search(words, (uint32_t)l, word, wn, &offs);
                off = size;
            } else {
                rc = search_part(&ps, s, (uint32_t)l, words, s->k.off, s->k.end - s->k.off, &offs);
                off = s->k.end;
            }
            if (!rc && offs.n) rc = emit(ctx, i, &offs);
        }
        offs.n = 0; /* what the file's last part left open */
        if (!rc && ps.has_pend) rc = vec64_push(&offs, ps.pend);
        if (!rc) rc = run_end(&ps, &offs);
        if (!rc && offs.n) rc = emit(ctx, i, &offs);
    }
    idx_words_free(words);
    search_put(w, s);
    vec64_free(&offs);
    free(ps.run);
    free(ps.edge);
    return rc;
}

/* The symbols of every shard of the view's file table (roots and rule bodies), counted once
 * per file table (v->syms; span_gen is stable while the view holds the archive lock). A
 * damaged shard counts none, as the archive loaded whole leaves it out. */
static int view_syms(const vol_view *w, uint64_t *total)
{
    vol *v = w->v;
    pthread_mutex_lock(&v->splock);
    uint64_t gen = v->span_gen + 1;
    int counted = v->syms_gen == gen;
    *total = v->syms;
    pthread_mutex_unlock(&v->splock);
    if (counted) return 0;
    uint64_t n = 0;
    for (uint32_t k = 0; k < w->a->nshards; k++) {
        uint64_t r;
        int rc = arc_shard_rule_syms(w->a, k, &r);
        if (rc && rc != -EBADMSG) return rc;
        n += rc ? 0 : r + w->a->shards[k].root_syms;
    }
    pthread_mutex_lock(&v->splock);
    v->syms = n;
    v->syms_gen = gen;
    pthread_mutex_unlock(&v->splock);
    *total = n;
    return 0;
}

/* vol_file_footprint for a view of the file table alone: each span of the file in turn
 * gives its rules and its part of the span's symbols (a span holds every file of its
 * shards, or a part of the file alone in shards of its own, so its occurrence counts are
 * those of the whole grammar). */
static int view_footprint(const vol_view *w, uint64_t *rules, double *share)
{
    uint64_t size = w->a->ents[w->ent].size, off = 0, total;
    double part = 0;
    vol_span *s = NULL;
    int rc = view_syms(w, &total);
    while (!rc && off < size) {
        uint32_t c;
        uint64_t r;
        double sh;
        rc = view_span(w, &s, NULL, w->ent, off, &c);
        int64_t l = rc ? -1 : local_entry(s, c);
        if (!rc && l < 0) rc = -EAGAIN;
        if (!rc) rc = idx_file_footprint(s->x, (uint32_t)l, &r, &sh);
        if (rc) break;
        const gram *g = &s->a->g;
        *rules += r;
        part += sh * (double)(g->root.n + g->syms.n);
        off = s->k.part < 0 ? size : s->k.end;
    }
    search_put(w, s);
    *share = !rc && total ? part / (double)total : 0;
    return rc;
}

int vol_file_footprint(vol *v, uint64_t ino, uint64_t *rules, double *share)
{
    *rules = 0;
    *share = 0;
    vol_view w;
    int rc = vol_view_open(v, ino, 0, &w);
    if (!rc && !w.x && !(w.a->pending && w.a->version >= 4 && !w.own)) {
        vol_view_close(&w); /* one grammar (versions 1 to 3): loaded whole */
        rc = vol_view_open(v, ino, 1, &w);
    }
    if (rc) return rc;
    if (w.own || w.ent < 0)
        rc = -ENODATA;
    else if (w.x)
        rc = idx_file_footprint(w.x, (uint32_t)w.ent, rules, share);
    else
        rc = view_footprint(&w, rules, share);
    vol_view_close(&w);
    return rc;
}

/* The kept spans taken off the list, to put without the lock (put_all). v->splock held. */
static vol_span *unlist_all(vol *v)
{
    vol_span *s = v->spans;
    v->spans = v->spans_tail = NULL;
    v->nspans = 0;
    v->span_bytes = 0;
    return s;
}

void vol_spans_reset(vol *v, arc *smeta)
{
    pthread_mutex_lock(&v->splock);
    vol_span *s = unlist_all(v);
    arc *old = v->smeta;
    v->smeta = smeta;
    v->span_gen++;
    v->spans_done = 0;
    for (int i = 0; i < VOL_SPAN_LOADS + VOL_AHEAD_MAX; i++) /* loads of the old table end */
        while (v->loading[i].busy && v->loading[i].gen != v->span_gen)
            pthread_cond_wait(&v->spcond, &v->splock);
    pthread_mutex_unlock(&v->splock);
    arc_free(old);
    put_all(v, s);
}

void vol_spans_drop(vol *v)
{
    pthread_mutex_lock(&v->splock);
    v->spans_done = 1;
    while (v->span_jobs) /* they use v */
        pthread_cond_wait(&v->spcond, &v->splock);
    vol_span *s = unlist_all(v);
    pthread_mutex_unlock(&v->splock);
    put_all(v, s);
}
