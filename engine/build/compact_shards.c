#include "compact_shards.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "../base/err.h"
#include "../base/par.h"
#include "../base/tok.h"
#include "bare.h"
#include "pack.h"

/* The shard holding the last symbol of e's run (e's own shard for an empty run). */
static uint32_t last_shard(const arc *a, const arc_entry *e)
{
    if (!e->root_len) return e->shard;
    uint64_t end = e->root_start + e->root_len - 1;
    uint32_t lo = e->shard, hi = a->nshards - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (a->shards[mid].root_off <= end)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

typedef struct plan {
    const arc *old;
    uint64_t shard_size;
    uint8_t *kept;    /* per old entry: its content is kept by a new entry */
    uint8_t *rebuild; /* per old shard */
    uint8_t *cut;     /* per old shard: holds part of a file cut over several shards */
    uint64_t *dead;   /* per old shard: bytes of content no new entry keeps */
    uint64_t *live;   /* per old shard: bytes of content staying in place */
    int64_t *newidx;  /* per old shard: its index in the new archive, -1 when not copied */
    uint8_t *reused;  /* per old shard: a part kept by the new version of its file */
} plan;

static void plan_free(plan *p)
{
    free(p->kept);
    free(p->rebuild);
    free(p->cut);
    free(p->dead);
    free(p->live);
    free(p->newidx);
    free(p->reused);
}

/* 1 if old entry o keeps its place: its content is kept and none of its shards is rebuilt. */
static int in_place(const plan *p, int64_t o)
{
    if (o < 0) return 0;
    const arc_entry *e = &p->old->ents[o];
    for (uint32_t s = e->shard, t = last_shard(p->old, e); s <= t; s++)
        if (p->rebuild[s]) return 0;
    return 1;
}

/* Content moving into new shards: new bytes, or kept content of a rebuilt shard. */
static int moves(const plan *p, const arc *nw, const int64_t *src, uint32_t i)
{
    return nw->ents[i].type == ARC_REG && src[i] != -2 && !in_place(p, src[i]);
}

/* Decide which old shards are rebuilt, which copied, and count what stays. */
static int make_plan(plan *p, const arc *nw, const int64_t *src)
{
    const arc *old = p->old;
    uint32_t ns = old->nshards;
    p->kept = calloc(old->nents ? old->nents : 1, 1);
    p->rebuild = calloc(ns, 1);
    p->cut = calloc(ns, 1);
    p->dead = calloc(ns, sizeof *p->dead);
    p->live = calloc(ns, sizeof *p->live);
    p->newidx = calloc(ns, sizeof *p->newidx);
    p->reused = calloc(ns, 1);
    if (!p->kept || !p->rebuild || !p->cut || !p->dead || !p->live || !p->newidx || !p->reused)
        return -ENOMEM;
    int fresh = 0;
    for (uint32_t i = 0; i < nw->nents; i++) {
        if (src[i] >= 0) p->kept[src[i]] = 1;
        fresh |= src[i] == -1 && nw->ents[i].type == ARC_REG && nw->ents[i].size;
    }
    for (uint32_t o = 0; o < old->nents; o++) {
        const arc_entry *e = &old->ents[o];
        if (e->type != ARC_REG || !e->root_len) continue;
        for (uint32_t s = e->shard, t = last_shard(old, e); s < t; s++)
            p->cut[s] = p->cut[s + 1] = 1;
        if (p->kept[o]) continue;
        uint64_t left = e->size;
        for (uint32_t s = e->shard, t = last_shard(old, e); s <= t && left; s++) {
            uint64_t here = s == t || left < old->shards[s].bytes ? left : old->shards[s].bytes;
            p->dead[s] += here;
            left -= here;
        }
    }
    for (uint32_t s = 0; s < ns; s++) {
        uint64_t b = old->shards[s].bytes;
        p->rebuild[s] = (p->dead[s] && (p->dead[s] * 4 >= b || b < p->shard_size / 2)) ||
                        (fresh && b < p->shard_size / 4 && !p->cut[s]);
    }
    for (uint32_t i = 0; i < nw->nents; i++) {
        if (nw->ents[i].type != ARC_REG || src[i] < 0 || !in_place(p, src[i])) continue;
        const arc_entry *e = &old->ents[src[i]];
        for (uint32_t s = e->shard, t = last_shard(old, e); s <= t; s++)
            p->live[s] += 1 + nw->ents[i].size; /* kept, with every shard its run crosses */
    }
    return 0;
}

/* Reads of one group's entry k go to the caller's entry map[k]. */
typedef struct group_rd {
    compact_read_fn fn;
    void *ctx;
    const uint32_t *map;
} group_rd;

static int group_read(void *ctx, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    group_rd *g = ctx;
    return g->fn(g->ctx, g->map[ent], off, dst, n);
}

static void add_stats(compact_stats *st, const compact_stats *g)
{
    st->new_files += g->new_files;
    st->new_bytes += g->new_bytes;
    st->rules_new += g->rules_new;
    st->rules_after += g->rules_after;
    st->full |= g->full;
}

/* Bytes [at, at + len) of new entry `ent` appended to b, and to the file's hash (hs, unless
 * NULL). */
static int read_text(compact_read_fn fn, void *ctx, uint32_t ent, uint64_t at, uint64_t len, buf *b,
                     XXH3_state_t *hs)
{
    if (len > SIZE_MAX || buf_reserve(b, (size_t)len)) return tdc_error(-ENOMEM, "out of memory");
    for (uint64_t off = 0; off < len;) {
        size_t k = len - off < ((size_t)1 << 20) ? (size_t)(len - off) : (size_t)1 << 20;
        int rc = fn(ctx, ent, at + off, b->p + b->n, k);
        if (rc) return rc;
        if (hs) XXH3_64bits_update(hs, b->p + b->n, k);
        b->n += k;
        off += k;
    }
    return 0;
}

/* The shard of group entries ge[0..n) (new entries map[0..n), `bytes` of content), coded as
 * a grammar in *out, stored as its bare text instead where that is smaller (bare.h), as pack
 * stores it: the entries' runs are then the text's. Its text is read again through fn. */
static int group_bare(const uint32_t *map, uint32_t n, uint64_t bytes, compact_read_fn fn,
                      void *ctx, int level, arc_entry *ge, arc_coded *out)
{
    if (bytes < BARE_MIN || bytes > SIZE_MAX) return 0;
    buf text = {0};
    vec64 lens = {0}, runs = {0};
    arc_coded tc;
    int rc = buf_reserve(&text, (size_t)bytes) ? -ENOMEM : 0;
    for (uint32_t k = 0; k < n && !rc; k++) {
        if (!ge[k].size) continue;
        rc = read_text(fn, ctx, map[k], 0, ge[k].size, &text, NULL);
        if (!rc && vec64_push(&lens, ge[k].size)) rc = -ENOMEM;
    }
    if (!rc && bare_worth(NULL, text.p, text.n, out) &&
        (rc = bare_code(text.p, lens.p, lens.n, level, out, &tc, &runs)) == 1) {
        arc_coded_free(out);
        *out = tc;
        uint64_t start = 0;
        for (uint32_t k = 0, r = 0; k < n; k++) {
            ge[k].root_start = start;
            ge[k].root_len = ge[k].size ? runs.p[r++] : 0;
            start += ge[k].root_len;
        }
        rc = 0;
    }
    buf_free(&text);
    vec64_free(&lens);
    vec64_free(&runs);
    return rc == -ENOMEM ? tdc_error(rc, "out of memory storing a shard as its text") : rc;
}

/* Build entries map[0..n) of nw (content that moves) into one new shard, index `shard`. */
static int build_group(const arc *old, arc *nw, const int64_t *src, const uint32_t *map, uint32_t n,
                       uint32_t shard, compact_read_fn fn, void *ctx, int level, compact_stats *st,
                       arc_coded *out)
{
    arc g = {0};
    int64_t *gsrc = malloc((n ? n : 1) * sizeof *gsrc);
    g.ents = malloc((n ? n : 1) * sizeof *g.ents);
    int rc = gsrc && g.ents ? 0 : -ENOMEM;
    uint64_t bytes = 0;
    for (uint32_t k = 0; !rc && k < n; k++) {
        g.ents[k] = nw->ents[map[k]]; /* borrowed strings: the copies are freed, not cleared */
        gsrc[k] = src[map[k]];
        bytes += nw->ents[map[k]].size;
    }
    g.nents = n;
    group_rd rd = {fn, ctx, map};
    compact_stats gs;
    if (!rc) rc = compact_build(old, &g, gsrc, group_read, &rd, COMPACT_MAY_REBUILD, &gs);
    if (!rc) rc = arc_shard_encode(g.dict, &g.g, bytes, level, 0, out);
    dict_free(g.dict); /* before the trial as text, which needs as much again */
    gram_free(&g.g);
    g.dict = NULL;
    if (!rc && (rc = group_bare(map, n, bytes, fn, ctx, level, g.ents, out))) arc_coded_free(out);
    if (!rc) gs.rules_after = out->info.nrules; /* none where it went bare */
    for (uint32_t k = 0; !rc && k < n; k++) {
        arc_entry *e = &nw->ents[map[k]];
        e->shard = shard;
        e->root_start = g.ents[k].root_start;
        e->root_len = g.ents[k].root_len;
        e->hash = g.ents[k].hash;
    }
    if (!rc) add_stats(st, &gs);
    free(g.byino);
    free(g.ents);
    free(gsrc);
    return rc;
}

/* Reads of a part of file `ent` that begins at byte `at` of it, by a build of that part
 * alone (its one entry). */
typedef struct part_rd {
    compact_read_fn fn;
    void *ctx;
    uint32_t ent;
    uint64_t at;
} part_rd;

static int part_read(void *ctx, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    part_rd *r = ctx;
    (void)ent;
    return r->fn(r->ctx, r->ent, r->at + off, dst, n);
}

/* Where a part of file `ent` that should end near `want` ends: the first change between word
 * and separator bytes at or after it (a token boundary wherever the file is tokenized from,
 * so each part tokenizes as the whole file would there), or `size` when none comes within
 * PART_SEEK bytes. 0 or a negative errno. */
#define PART_SEEK ((uint64_t)1 << 20)
static int part_end(compact_read_fn fn, void *ctx, uint32_t ent, uint64_t want, uint64_t size,
                    uint64_t *end)
{
    unsigned char b[4096];
    *end = size;
    for (uint64_t at = want - 1; at + 1 < size && at < want + PART_SEEK; at += sizeof b - 1) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        int rc = fn(ctx, ent, at, b, n);
        if (rc) return rc;
        for (size_t i = 1; i < n; i++)
            if (tok_is_word_byte(b[i]) != tok_is_word_byte(b[i - 1])) {
                *end = at + i;
                return 0;
            }
    }
    return 0;
}

/* Whether moving file i is stored as its text: its content comes from a shard stored so with
 * token references (incompressible bytes), or it is new or from a bare shard and its first
 * bytes (read into blk, PACK_TEXT_SAMPLE bytes) do not compress (the trial in cc, NULL: a
 * context of its own). A bare shard's files join the grammar groups like any text: kept as
 * text shards of their own, the few files a compaction moves would pile up in small shards
 * that zstd codes apart; a group as large as BARE_MIN is stored bare where that is smaller
 * (group_bare), as pack stores it. 0 or a negative errno. */
static int text_file(const arc *old, const arc *nw, const int64_t *src, uint32_t i,
                     compact_read_fn fn, void *ctx, unsigned char *blk, ZSTD_CCtx *cc,
                     uint8_t *text)
{
    const arc_entry *e = &nw->ents[i];
    *text = 0;
    int from = src[i] >= 0 ? arc_shard_text(old, old->ents[src[i]].shard) : 2;
    if (from != 2) {
        *text = e->size && from;
        return 0;
    }
    if (e->size < PACK_TEXT_MIN) return 0;
    size_t n = e->size < PACK_TEXT_SAMPLE ? (size_t)e->size : PACK_TEXT_SAMPLE;
    int rc = fn(ctx, i, 0, blk, n);
    if (!rc) *text = (uint8_t)pack_incompressible(cc, blk, n);
    return rc;
}

/* The shards of a compaction as jobs, in the order of the shards they make, which
 * compact_shards runs on its workers: an old shard copied as it is stored (JOB_COPY), a group
 * of files built as a grammar (stored bare where that is smaller), a part of a file larger
 * than the shard size built so, a group of files stored as their text, a part of such a
 * file, a part of a file's old version that its new version begins with (kept as stored,
 * JOB_KEEP), and the hash of a file cut into parts (made apart, as its parts are built
 * apart; no shard). */
enum { JOB_COPY, JOB_GROUP, JOB_PART, JOB_TEXT, JOB_TEXT_PART, JOB_HASH, JOB_KEEP };

/* Whether a job of this kind builds a shard (and holds COMPACT_BUILD_MEM while it runs). */
static int builds(uint8_t kind)
{
    return kind != JOB_COPY && kind != JOB_HASH && kind != JOB_KEEP;
}

typedef struct job {
    uint8_t kind;
    uint32_t first, k; /* JOB_GROUP, JOB_TEXT: entries map[first, first + k) of nw */
    arc_entry e;       /* parts: the file's entry as it was before the jobs ran */
    uint32_t ent;      /* parts, JOB_HASH: that entry's index */
    uint32_t from;     /* JOB_COPY, JOB_KEEP: the old shard kept */
    uint64_t at, end;  /* parts: the file's bytes [at, end) */
    uint32_t shard;    /* the shard made (not JOB_HASH) */
    /* what the job made, read once it is done */
    int rc;
    char *err;     /* rc's message */
    uint64_t runs; /* parts: the part's run */
    uint64_t hash; /* JOB_HASH: made, or known before (archived content moving) */
    uint8_t known;
    compact_stats st;
} job;

typedef struct joblist {
    job *p;
    uint32_t n, cap;
} joblist;

typedef struct runner {
    const arc *old;
    arc *nw;
    const int64_t *src;
    const uint32_t *map;
    compact_read_fn fn;
    int level;
    arc_coded *sh; /* a slot for every shard a job makes */
    arc_sink *sink;
    compact_stats *st;
    joblist jobs;
    uint32_t next;   /* the next job to take */
    par_order order; /* the jobs collected in order (collect) */
    uint64_t *cum;   /* the order's weights: builds before each job */
    int rc;
    char *err;
    pthread_mutex_t lock;
    pthread_cond_t cv; /* a job collected, or the jobs failed */
} runner;

typedef struct worker {
    runner *r;
    void *ctx; /* the worker's reading context (compact_workers' ctx) */
    mbud *bud; /* NULL, or the budget each build of this worker takes `each` bytes of */
    uint64_t each;
    uint32_t builds; /* run so far */
} worker;

/* Files map[0..k) (each of at least one byte) stored as their text in shard *out, index
 * `shard`, each entry's shard, run and hash set, the new ones counted in st. */
static int text_group(arc *nw, const int64_t *src, const uint32_t *map, uint32_t k, uint32_t shard,
                      compact_read_fn fn, void *ctx, int level, compact_stats *st, arc_coded *out)
{
    buf text = {0};
    vec64 lens = {0}, runs = {0};
    XXH3_state_t *hs = XXH3_createState();
    int rc = hs ? 0 : -ENOMEM;
    for (uint32_t j = 0; j < k && !rc; j++) {
        arc_entry *e = &nw->ents[map[j]];
        XXH3_64bits_reset(hs);
        rc = read_text(fn, ctx, map[j], 0, e->size, &text, hs);
        if (!rc && vec64_push(&lens, e->size)) rc = -ENOMEM;
        if (!rc) e->hash = XXH3_64bits_digest(hs);
        if (!rc && src[map[j]] == -1) {
            st->new_files++;
            st->new_bytes += e->size;
        }
    }
    if (!rc) rc = arc_text_shard_encode(lens.p, lens.n, text.p, level, 1, out, &runs);
    uint64_t start = 0;
    for (uint32_t j = 0; !rc && j < k; j++) {
        arc_entry *e = &nw->ents[map[j]];
        e->shard = shard;
        e->root_start = start;
        e->root_len = runs.p[j];
        start += runs.p[j];
    }
    XXH3_freeState(hs);
    buf_free(&text);
    vec64_free(&lens);
    vec64_free(&runs);
    if (rc == -ENOMEM) tdc_error(rc, "out of memory storing files as their text");
    return rc;
}

/* A part of a file (job j) built into shard *out: as a grammar, or stored as its text. */
static int build_part(runner *r, job *j, void *ctx, arc_coded *out)
{
    part_rd rd = {r->fn, ctx, j->ent, j->at};
    uint64_t n = j->end - j->at;
    if (j->kind == JOB_TEXT_PART) {
        buf text = {0};
        vec64 runs = {0};
        int rc = read_text(part_read, &rd, 0, 0, n, &text, NULL);
        if (!rc) rc = arc_text_shard_encode(&n, 1, text.p, r->level, 1, out, &runs);
        if (!rc) j->runs = runs.p[0];
        buf_free(&text);
        vec64_free(&runs);
        return rc == -ENOMEM ? tdc_error(rc, "out of memory storing a file as its text") : rc;
    }
    arc g = {0};
    int64_t gsrc = -1;
    if (!(g.ents = malloc(sizeof *g.ents))) return tdc_error(-ENOMEM, "out of memory");
    g.ents[0] = j->e; /* borrowed strings, as build_group's */
    g.ents[0].size = n;
    g.nents = 1;
    int rc = compact_build(r->old, &g, &gsrc, part_read, &rd, COMPACT_MAY_REBUILD, &j->st);
    if (!rc) rc = arc_shard_encode(g.dict, &g.g, n, r->level, 0, out);
    if (!rc) j->runs = g.ents[0].root_len;
    dict_free(g.dict);
    gram_free(&g.g);
    free(g.byino);
    free(g.ents);
    return rc;
}

/* The content hash of file j->ent, read whole unless known. */
static int hash_file(runner *r, job *j, void *ctx)
{
    if (j->known) return 0;
    enum { PIECE = 1 << 20 };
    unsigned char *b = malloc(PIECE);
    XXH3_state_t *hs = XXH3_createState();
    int rc = b && hs && XXH3_64bits_reset(hs) == XXH_OK ? 0 : tdc_error(-ENOMEM, "out of memory");
    for (uint64_t off = 0; !rc && off < j->e.size; off += PIECE) {
        size_t k = j->e.size - off < PIECE ? (size_t)(j->e.size - off) : PIECE;
        if (!(rc = r->fn(ctx, j->ent, off, b, k))) XXH3_64bits_update(hs, b, k);
    }
    if (!rc) j->hash = XXH3_64bits_digest(hs);
    XXH3_freeState(hs);
    free(b);
    return rc;
}

static int run_job(runner *r, job *j, void *ctx)
{
    arc_coded *out = &r->sh[j->shard];
    switch (j->kind) {
    case JOB_GROUP:
        return build_group(r->old, r->nw, r->src, r->map + j->first, j->k, j->shard, r->fn, ctx,
                           r->level, &j->st, out);
    case JOB_TEXT:
        return text_group(r->nw, r->src, r->map + j->first, j->k, j->shard, r->fn, ctx, r->level,
                          &j->st, out);
    case JOB_HASH:
        return hash_file(r, j, ctx);
    case JOB_COPY:
    case JOB_KEEP:
        j->runs = r->old->shards[j->from].root_syms;
        j->st.rules_after = r->old->shards[j->from].nrules;
        return arc_shard_ref(r->old, j->from, out); /* copied by the writer */
    default:
        return build_part(r, j, ctx, out);
    }
}

/* Job k, done, taken in its turn (par_order's put): its shard put into the sink, its
 * figures added, a cut file's entry given its shard, run and hash as its parts and hash come. */
static int collect(void *ctx, size_t k)
{
    runner *r = ctx;
    job *j = &r->jobs.p[k];
    if (j->rc) return tdc_error(j->rc, "%s", j->err ? j->err : "compaction failed");
    add_stats(r->st, &j->st);
    if (j->kind == JOB_HASH) {
        r->nw->ents[j->ent].hash = j->hash;
        return 0;
    }
    if (j->kind == JOB_PART || j->kind == JOB_TEXT_PART || j->kind == JOB_KEEP) {
        arc_entry *e = &r->nw->ents[j->ent];
        if (!j->at) {
            e->shard = j->shard;
            e->root_start = e->root_len = 0;
        }
        e->root_len += j->runs;
    }
    return r->sink ? arc_sink_put(r->sink, &r->sh[j->shard]) : 0;
}

/* A worker: takes the next job while it is within the window of the first not collected,
 * and a build only while the budget has room for it; runs it; collects every job done in
 * order (par_order_done), so that shards reach the sink in order. */
static void *work(void *p)
{
    worker *w = p;
    runner *r = w->r;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->rc && r->next < r->jobs.n && !par_order_room(&r->order, r->next))
            pthread_cond_wait(&r->cv, &r->lock);
        if (r->rc || r->next >= r->jobs.n) break;
        int took = w->bud && builds(r->jobs.p[r->next].kind);
        if (took) { /* the budget's room for a build, asked without the lock */
            pthread_mutex_unlock(&r->lock);
            int room = mbud_try(w->bud, w->each);
            pthread_mutex_lock(&r->lock);
            if (!room) { /* again once a job is collected: the budget may have room then */
                if (!r->rc && r->next < r->jobs.n) pthread_cond_wait(&r->cv, &r->lock);
                continue;
            }
            if (r->rc || r->next >= r->jobs.n || !par_order_room(&r->order, r->next)) {
                mbud_give(w->bud, w->each); /* others took jobs meanwhile: look again */
                if (r->rc || r->next >= r->jobs.n) break;
                continue;
            }
        }
        job *j = &r->jobs.p[r->next++];
        w->builds += builds(j->kind);
        pthread_mutex_unlock(&r->lock);
        j->rc = run_job(r, j, w->ctx);
        if (j->rc) j->err = strdup(tdc_errmsg());
        if (took) mbud_give(w->bud, w->each);
        pthread_mutex_lock(&r->lock);
        int rc = par_order_done(&r->order, (size_t)(j - r->jobs.p), &r->lock, &r->cv, &r->rc,
                                collect, r);
        if (rc && !r->rc) {
            r->rc = rc;
            r->err = strdup(tdc_errmsg());
        }
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* A job added to the list; NULL without memory. */
static job *add_job(joblist *l, uint8_t kind)
{
    if (l->n == l->cap) {
        uint32_t c = l->cap ? 2 * l->cap : 16;
        job *t = realloc(l->p, c * sizeof *t);
        if (!t) return NULL;
        l->p = t;
        l->cap = c;
    }
    job *j = &l->p[l->n++];
    memset(j, 0, sizeof *j);
    j->kind = kind;
    return j;
}

/* Whether new entry `ent` has a token boundary at byte `at` (0 < at < its size): a change
 * between word and separator bytes there, as part_end cuts. 1, 0 or a negative errno. */
static int boundary_at(compact_read_fn fn, void *ctx, uint32_t ent, uint64_t at)
{
    unsigned char b[2];
    int rc = fn(ctx, ent, at - 1, b, 2);
    return rc ? rc : tok_is_word_byte(b[0]) != tok_is_word_byte(b[1]);
}

/* The parts of file i's old version that its new version still begins with (cw->prefix),
 * as jobs keeping them as stored from shard *shard on, *at set to where the rest begins.
 * A part is kept when it lies within the unchanged bytes, holds at least half the shard size
 * (a short last part is built again with what follows it, so that appends do not leave a
 * trail of small parts), is stored as the rest will be (as text with token references, or
 * not: `text`) and still ends where a token ends (looked at only where the unchanged bytes
 * end: before that, both bytes around its end are as they were). */
static int keep_jobs(const plan *p, const arc *nw, const int64_t *src, uint32_t i, int text,
                     const compact_workers *cw, compact_read_fn fn, joblist *jobs, uint32_t *shard,
                     uint64_t *at)
{
    const arc *old = p->old;
    const arc_entry *e = &nw->ents[i];
    int64_t o = -1;
    uint32_t first, last;
    uint64_t same = src[i] == -1 && cw->prefix ? cw->prefix(cw->ctx, i, &o) : 0;
    if (!same || o < 0 || (uint64_t)o >= old->nents || p->kept[o] ||
        !arc_entry_parts(old, (uint32_t)o, &first, &last))
        return 0;
    for (uint32_t s = first; s <= last && !p->reused[s]; s++) {
        uint64_t end = *at + old->shards[s].bytes;
        if (end > same || old->shards[s].bytes < p->shard_size / 2) break;
        if ((arc_shard_text(old, s) == 1) != text) break; /* stored as the rest will be */
        /* inside the unchanged bytes a part still ends as it did; at their end, look */
        int rc = end == same && end < e->size ? boundary_at(fn, cw->ctx, i, end) : 1;
        if (rc < 0) return rc;
        if (!rc) break;
        job *j = add_job(jobs, JOB_KEEP);
        if (!j) return tdc_error(-ENOMEM, "out of memory");
        j->e = *e;
        j->ent = i;
        j->at = *at;
        j->end = end;
        j->from = s;
        j->shard = (*shard)++;
        p->reused[s] = 1;
        *at = end;
    }
    return 0;
}

/* File i of nw, larger than the shard size, as jobs: its parts of about that size from shard
 * *shard on, each cut where a token ends (part_end), as pack cuts such a file, so that reads
 * load the part of their bytes alone (arc_entry_parts) and no build holds more than a
 * shard's content; then its hash. */
static int cut_jobs(const plan *p, const arc *nw, const int64_t *src, uint32_t i, int text,
                    const compact_workers *cw, compact_read_fn fn, joblist *jobs, uint32_t *shard)
{
    const arc *old = p->old;
    const arc_entry *e = &nw->ents[i];
    uint64_t shard_size = p->shard_size, at = 0;
    void *ctx = cw->ctx;
    int rc = keep_jobs(p, nw, src, i, text, cw, fn, jobs, shard, &at);
    if (rc) return rc;
    for (uint64_t end; at < e->size; at = end) {
        end = e->size;
        rc = e->size - at > shard_size ? part_end(fn, ctx, i, at + shard_size, e->size, &end) : 0;
        job *j = rc ? NULL : add_job(jobs, text ? JOB_TEXT_PART : JOB_PART);
        if (rc) return rc;
        if (!j) return tdc_error(-ENOMEM, "out of memory");
        j->e = *e;
        j->ent = i;
        j->at = at;
        j->end = end;
        j->shard = (*shard)++;
    }
    job *j = add_job(jobs, JOB_HASH);
    if (!j) return tdc_error(-ENOMEM, "out of memory");
    j->e = *e;
    j->ent = i;
    if (src[i] >= 0) { /* its archived content, moving: the hash it has */
        j->hash = old->ents[src[i]].hash;
        j->known = 1;
    }
    if (text && src[i] == -1) { /* a grammar part's build counts what it adds */
        j->st.new_files = 1;
        j->st.new_bytes = e->size;
    }
    return 0;
}

/* The jobs making the new shards from shard *shard on: moving content in path order, in
 * groups of about the shard size, first the grammar shards, then those stored as their text
 * (text[i], as pack decides). */
static int make_jobs(const plan *p, const arc *nw, const int64_t *src, const uint8_t *text,
                     uint32_t ntext, compact_read_fn fn, const compact_workers *cw, uint32_t *map,
                     joblist *jobs, uint32_t *shard)
{
    uint32_t used = 0;
    int rc = 0;
    for (uint8_t pass = 0; pass < 2 && !rc; pass++) {
        uint32_t first = 0;
        while (!rc) {
            uint32_t k = 0;
            uint64_t bytes = 0;
            for (; first < nw->nents; first++) {
                if (!moves(p, nw, src, first) || text[first] != pass) continue;
                if (k && bytes + nw->ents[first].size > p->shard_size) break;
                map[used + k++] = first;
                bytes += nw->ents[first].size;
            }
            if (pass ? !k : !k && (*shard || ntext)) break;
            if (k == 1 && nw->ents[map[used]].size > p->shard_size) { /* a file of its own, cut */
                rc = cut_jobs(p, nw, src, map[used], pass, cw, fn, jobs, shard);
                continue;
            }
            job *j = add_job(jobs, pass ? JOB_TEXT : JOB_GROUP);
            if (!j) return tdc_error(-ENOMEM, "out of memory");
            j->first = used;
            j->k = k;
            j->shard = (*shard)++;
            used += k;
            if (!k) break; /* nothing at all: one empty shard */
        }
    }
    return rc;
}

/* Run the jobs on the workers cw describes (the calling thread the first). */
static int run_jobs(runner *r, const compact_workers *cw)
{
    unsigned nw = cw->n < r->jobs.n ? cw->n : r->jobs.n ? r->jobs.n : 1;
    worker *w = calloc(nw, sizeof *w);
    r->cum = malloc((r->jobs.n + 1) * sizeof *r->cum);
    if (!w || !r->cum || par_order_init(&r->order, r->jobs.n, 2 * nw)) {
        free(w);
        return tdc_error(-ENOMEM, "out of memory");
    }
    /* The window counts the builds alone: a copied or kept shard, or a hash, holds nothing
     * while it waits for its turn, and the copies before the first build must not hold the
     * builds back. */
    r->cum[0] = 0;
    for (uint32_t k = 0; k < r->jobs.n; k++)
        r->cum[k + 1] = r->cum[k] + builds(r->jobs.p[k].kind);
    r->order.cum = r->cum;
    for (unsigned t = 0; t < nw; t++)
        w[t] = (worker){r, (char *)cw->ctx + t * cw->stride, t ? cw->bud : NULL, cw->each, 0};
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cv, NULL);
    par_run(nw, work, w, sizeof *w);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->lock);
    for (unsigned t = 0; t < nw; t++)
        r->st->workers += w[t].builds > 0;
    free(w);
    if (!r->rc && r->order.next < r->jobs.n) r->rc = tdc_error(-EAGAIN, "internal: jobs left");
    if (r->rc) tdc_error(r->rc, "%s", r->err ? r->err : "compaction failed");
    return r->rc;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint64_t compact_shard_size(const arc *old, uint64_t asked)
{
    if (asked) return asked;
    uint64_t total = 0;
    for (uint32_t s = 0; s < old->nshards; s++)
        total += old->shards[s].bytes;
    uint64_t *b = old->nshards > 1 ? malloc(old->nshards * sizeof *b) : NULL;
    if (b) { /* the median: a shard holding one large file, or the last, does not move it */
        for (uint32_t s = 0; s < old->nshards; s++)
            b[s] = old->shards[s].bytes;
        qsort(b, old->nshards, sizeof *b, by_u64);
        uint64_t mid = b[old->nshards / 2];
        free(b);
        return mid > COMPACT_SHARD_MIN ? mid : COMPACT_SHARD_MIN;
    }
    return total <= PACK_ONE_SHARD_MAX ? PACK_ONE_SHARD_MAX : pack_shard_size(total);
}

int compact_by_shards(const arc *old, uint64_t shard_size)
{
    shard_size = compact_shard_size(old, shard_size);
    return old->nshards > 1 || (old->nshards == 1 &&
                                (old->shards[0].bytes >= shard_size / 2 || arc_shard_text(old, 0)));
}

int compact_shards(const arc *old, arc *nw, const int64_t *src, compact_read_fn fn,
                   const compact_workers *cw, uint64_t shard_size, int level, arc_sink *sink,
                   compact_stats *st, arc_coded **out, uint32_t *nout)
{
    plan p = {.old = old, .shard_size = compact_shard_size(old, shard_size)};
    runner r = {.old = old, .nw = nw, .src = src, .fn = fn, .level = level, .sink = sink, .st = st};
    uint32_t *map = malloc((nw->nents ? nw->nents : 1) * sizeof *map), nsh = 0;
    int rc = map ? make_plan(&p, nw, src) : -ENOMEM;
    memset(st, 0, sizeof *st);
    /* Old shards copied, in their order. */
    for (uint32_t s = 0; !rc && s < old->nshards; s++) {
        p.newidx[s] = -1;
        if (p.rebuild[s] || !p.live[s]) continue;
        job *j = add_job(&r.jobs, JOB_COPY);
        if (!j) {
            rc = tdc_error(-ENOMEM, "out of memory");
            break;
        }
        j->from = s;
        j->shard = nsh;
        p.newidx[s] = nsh++;
    }
    /* Files in place: their run within the same shard, now numbered newidx. */
    for (uint32_t i = 0; !rc && i < nw->nents; i++) {
        arc_entry *e = &nw->ents[i];
        if (e->type != ARC_REG || src[i] < 0 || !in_place(&p, src[i])) continue;
        const arc_entry *oe = &old->ents[src[i]];
        e->shard = (uint32_t)p.newidx[oe->shard];
        e->root_start = oe->root_start - old->shards[oe->shard].root_off;
        e->root_len = oe->root_len;
        e->hash = oe->hash;
    }
    /* Which moving files are stored as their text (as pack decides). */
    uint8_t *text = calloc(nw->nents ? nw->nents : 1, 1);
    unsigned char *blk = malloc(PACK_TEXT_SAMPLE);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    uint32_t ntext = 0;
    if (!rc && (!text || !blk)) rc = tdc_error(-ENOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < nw->nents; i++)
        if (moves(&p, nw, src, i) &&
            !(rc = text_file(old, nw, src, i, fn, cw->ctx, blk, cc, &text[i])))
            ntext += text[i];
    ZSTD_freeCCtx(cc);
    if (!rc) rc = make_jobs(&p, nw, src, text, ntext, fn, cw, map, &r.jobs, &nsh);
    /* A slot for each shard the jobs make, then the jobs on the workers. */
    if (!rc && !(r.sh = calloc(nsh ? nsh : 1, sizeof *r.sh)))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) {
        r.map = map;
        rc = run_jobs(&r, cw);
    }
    for (uint32_t j = 0; j < r.jobs.n; j++)
        free(r.jobs.p[j].err);
    free(r.jobs.p);
    par_order_free(&r.order);
    free(r.cum);
    free(r.err);
    plan_free(&p);
    free(map);
    free(text);
    free(blk);
    if (rc) {
        for (uint32_t k = 0; r.sh && k < nsh; k++)
            arc_coded_free(&r.sh[k]);
        free(r.sh);
        return rc;
    }
    *out = r.sh;
    *nout = nsh;
    return 0;
}
