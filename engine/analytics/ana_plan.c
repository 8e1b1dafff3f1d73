/* ana_plan: what every analytic needs before it traverses: the grammar's topological levels,
 * head and tail buffers, the traversal selector and the two-thread helpers (ana.h tells the
 * rules; ana_int.h the interfaces). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ana.h"
#include "ana_int.h"
#include "../base/err.h"
#include "../grammar/headtail.h"

#define NONE UINT32_MAX

/* ---- the context: options and the preparation kept between calls ---- */

struct ana_ctx {
    ana_opts o;
    pthread_mutex_t lock;         /* guards kept and every kept data's refs */
    struct ana_prep_data *kept;   /* the last grammar's preparation (o.cache) */
};

static const ana_opts defaults = ANA_OPTS_INIT;

ana_ctx *ana_ctx_new(const ana_opts *o)
{
    ana_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->o = o ? *o : defaults;
    if (c->o.traversal < 0 || c->o.traversal > ANA_BOTTOMUP) c->o.traversal = ANA_AUTO;
    if (c->o.threads > 2) c->o.threads = 2;
    if (c->o.threads < 0) c->o.threads = 0;
    if (c->o.verbose < 0) c->o.verbose = 0;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

const ana_opts *ana_ctx_opts(const ana_ctx *c)
{
    return c ? &c->o : &defaults;
}

int ana_threads(const ana_ctx *c)
{
    int n = ana_ctx_opts(c)->threads;
    if (n > 0) return n;
    return sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 2 : 1;
}

/* ---- per-grammar preparation ---- */

/* Head and tail of rule r from its children's (they come first in g->topo). */
static void head_tail(const ana_prep *p, uint32_t r)
{
    const gram *g = p->g;
    uint64_t n;
    const uint32_t *b = gram_body(g, r, &n);
    uint32_t *h = p->ht[r];
    ht_init(h);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t s = b[i];
        if (s >= g->ntokens)
            ht_add(h, p->ht[s - g->ntokens]);
        else if (dict_is_word(p->a->dict, s))
            ht_push(h, s);
    }
    ht_finish(h);
}

/* The arrays of one grammar's preparation, shared by every call that uses that grammar. */
typedef struct ana_prep_data {
    uint64_t *hx;
    uint32_t nlevels, *lvl_at, *lvl, *order, norder, ncut;
    unsigned char *cls;
    uint32_t (*ht)[5];
    XXH128_hash_t fp; /* fingerprint of the grammar it was computed from */
    int flags;        /* the ANA_PREP_* parts it holds */
    int refs;         /* calls using it, plus one while kept; under owner->lock */
    ana_ctx *owner;   /* the context that may keep it (NULL: used by one call only) */
} ana_prep_data;

static void data_free(ana_prep_data *d)
{
    if (!d) return;
    free(d->hx);
    free(d->lvl_at);
    free(d->lvl);
    free(d->cls);
    free(d->ht);
    free(d->order);
    free(d);
}

static void data_put(ana_prep_data *d)
{
    if (!d) return;
    ana_ctx *c = d->owner;
    if (c) pthread_mutex_lock(&c->lock);
    int last = --d->refs == 0;
    if (c) pthread_mutex_unlock(&c->lock);
    if (last) data_free(d);
}

void ana_ctx_free(ana_ctx *c)
{
    if (!c) return;
    data_put(c->kept);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void ana_prep_free(ana_prep *p)
{
    data_put(p->data);
    memset(p, 0, sizeof *p);
}

/* Everything the preparation depends on: the rules, the root, which tokens are words and
 * their lengths (cut pieces are the TOK_CAP-byte word tokens). */
static int fingerprint(const arc *a, XXH128_hash_t *h)
{
    const gram *g = &a->g;
    const dict *d = a->dict;
    XXH3_state_t *st = XXH3_createState();
    if (!st) return -ENOMEM;
    uint64_t sizes[4] = {g->ntokens, g->nrules, g->syms.n, g->root.n};
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, sizes, sizeof sizes);
    XXH3_128bits_update(st, g->rule_start.p, g->rule_start.n * sizeof *g->rule_start.p);
    XXH3_128bits_update(st, g->syms.p, g->syms.n * sizeof *g->syms.p);
    XXH3_128bits_update(st, g->root.p, g->root.n * sizeof *g->root.p);
    XXH3_128bits_update(st, d->word.p, d->word.n);
    XXH3_128bits_update(st, d->offs.p, d->offs.n * sizeof *d->offs.p);
    *h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    return 0;
}

static void prep_view(ana_prep *p, const arc *a, ana_prep_data *d)
{
    p->a = a;
    p->g = &a->g;
    p->data = d;
    p->hx = d->hx;
    p->nlevels = d->nlevels;
    p->lvl_at = d->lvl_at;
    p->lvl = d->lvl;
    p->cls = d->cls;
    p->ncut = d->ncut;
    p->ht = d->ht;
    p->order = d->order;
    p->norder = d->norder;
}

/* The dictionary's word tokens in byte order. */
static int order_build(ana_prep_data *d, const dict *dc, uint32_t ntokens, int threads)
{
    uint32_t n = 0;
    for (uint32_t t = 0; t < ntokens; t++)
        n += dict_is_word(dc, t) != 0;
    ana_wrec *r = malloc((n ? n : 1) * sizeof *r);
    if (!r || !(d->order = malloc((n ? n : 1) * sizeof *d->order))) {
        free(r);
        return -ENOMEM;
    }
    uint32_t k = 0;
    for (uint32_t t = 0; t < ntokens; t++)
        if (dict_is_word(dc, t)) {
            size_t l;
            const unsigned char *w = dict_bytes(dc, t, &l);
            r[k++] = (ana_wrec){ana_prefix_key(w, l), w, (uint32_t)l, t};
        }
    int rc = ana_sort_words(r, n, threads);
    for (uint32_t i = 0; i < n && !rc; i++)
        d->order[i] = r[i].id;
    free(r);
    d->norder = n;
    return rc;
}

/* Token classes: word, cut piece. */
static void classes(const dict *dc, uint32_t nt, ana_prep_data *d)
{
    uint32_t ncut = 0;
    for (uint32_t t = 0; t < nt; t++) {
        size_t l;
        dict_bytes(dc, t, &l);
        d->cls[t] = dict_is_word(dc, t) ? ANA_WORD : 0;
        if (d->cls[t] && l == TOK_CAP) { /* a piece of a cut long word */
            d->cls[t] |= ANA_CUT;
            ncut++;
        }
    }
    d->ncut = ncut;
}

/* Heights, cut flags, words per rule and head/tail, children first. */
static void levels_pass(ana_prep *p, ana_prep_data *d)
{
    const gram *g = p->g;
    const uint32_t nt = g->ntokens;
    const unsigned char *cls = d->cls;
    uint64_t *hx = d->hx;
    uint32_t top = 0;
    hx[0] = 0;
    for (uint32_t k = 0; k < g->nrules; k++) {
        uint32_t r = g->topo.p[k], hgt = 0;
        uint64_t n, ew = 0, cut = 0;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s = b[i];
            if (s >= nt) {
                uint64_t x = hx[s - nt];
                uint32_t h = (uint32_t)x & 0x7fffffffu;
                if (h >= hgt) hgt = h + 1;
                cut |= x;
                ew += x >> 32;
            } else {
                ew += cls[s] & ANA_WORD;
                cut |= (uint64_t)(cls[s] & ANA_CUT) << 30;
            }
        }
        hx[r] = (ew < UINT32_MAX ? ew : UINT32_MAX) << 32 | (cut & 1u << 31) | hgt;
        if (hgt > top) top = hgt;
        if (d->ht) head_tail(p, r);
    }
    d->nlevels = g->nrules ? top + 1 : 0;
}

typedef struct prepjob {
    ana_prep *p;
    ana_prep_data *d;
} prepjob;

/* The levels, and with ANA_PREP_ORDER the word order: by the second thread when there is one. */
static int prep_task(void *x, const ana_team *t)
{
    const prepjob *j = x;
    int order = (j->d->flags & ANA_PREP_ORDER) != 0;
    if (t->tid == 1) return order_build(j->d, j->p->a->dict, j->p->g->ntokens, 1);
    if (j->d->flags & ANA_PREP_LEVELS) levels_pass(j->p, j->d);
    return order && t->n == 1 ? order_build(j->d, j->p->a->dict, j->p->g->ntokens, 1) : 0;
}

int ana_prep_init(ana_prep *p, ana_ctx *c, const arc *a, int flags)
{
    const gram *g = &a->g;
    size_t nr = (size_t)g->nrules + 1;
    int cache = c && c->o.cache;
    XXH128_hash_t fp = {0, 0};
    memset(p, 0, sizeof *p);
    p->ctx = c;
    p->clock.verbose = ana_ctx_opts(c)->verbose;
    ana_mark(&p->clock, NULL);
    if (cache && fingerprint(a, &fp)) cache = 0;
    if (cache) {
        pthread_mutex_lock(&c->lock);
        ana_prep_data *k = c->kept;
        if (k && XXH128_isEqual(k->fp, fp)) {
            if ((k->flags & flags) == flags) {
                k->refs++;
                pthread_mutex_unlock(&c->lock);
                prep_view(p, a, k);
                return 0;
            }
            flags |= k->flags; /* its replacement keeps what it had */
        }
        pthread_mutex_unlock(&c->lock);
    }
    int threads = ana_threads(c);
    ana_prep_data *d = calloc(1, sizeof *d);
    if (!d || !(d->cls = malloc(g->ntokens + nr))) goto nomem;
    d->refs = 1;
    d->owner = cache ? c : NULL;
    d->fp = fp;
    classes(a->dict, g->ntokens, d);
    /* the levels pass finds the rules that hold cut pieces */
    if (flags & ANA_PREP_HT || d->ncut) flags |= ANA_PREP_LEVELS;
    d->flags = flags;
    if (flags & ANA_PREP_LEVELS) {
        d->hx = malloc(nr * sizeof *d->hx);
        d->lvl = malloc(nr * sizeof *d->lvl);
        if (flags & ANA_PREP_HT) d->ht = malloc(nr * sizeof *d->ht);
        if (!d->hx || !d->lvl || ((flags & ANA_PREP_HT) && !d->ht)) goto nomem;
    }
    /* ht is filled through a view of d (head_tail reads p->a, p->g, p->ht) */
    prep_view(p, a, d);
    prepjob j = {p, d};
    if (!(flags & ANA_PREP_LEVELS)) { /* the order alone: both threads sort it */
        if ((flags & ANA_PREP_ORDER) && order_build(d, a->dict, g->ntokens, threads))
            goto nomem;
    } else if (ana_par((flags & ANA_PREP_ORDER) && threads > 1 ? 2 : 1, prep_task, &j)) {
        goto nomem;
    }
    memset(d->cls + g->ntokens, 0, nr);
    if (flags & ANA_PREP_LEVELS) {
        for (uint32_t r = 1; r <= g->nrules; r++)
            d->cls[g->ntokens + r] = d->hx[r] >> 31 & 1 ? ANA_CUT : 0;
        d->lvl_at = calloc((size_t)d->nlevels + 2, sizeof *d->lvl_at);
        if (!d->lvl_at) goto nomem;
        /* Counting sort by height: lvl_at[h + 1] counts, then prefix sums, then placement. */
        for (uint32_t r = 1; r <= g->nrules; r++)
            d->lvl_at[ana_height(p, r) + 1]++;
        for (uint32_t h = 0; h < d->nlevels; h++)
            d->lvl_at[h + 1] += d->lvl_at[h];
        uint32_t *fill = malloc(((size_t)d->nlevels + 1) * sizeof *fill);
        if (!fill) goto nomem;
        memcpy(fill, d->lvl_at, ((size_t)d->nlevels + 1) * sizeof *fill);
        for (uint32_t r = 1; r <= g->nrules; r++)
            d->lvl[fill[ana_height(p, r)]++] = r;
        free(fill);
    }
    prep_view(p, a, d);
    if (cache) {
        /* keep it for the next call, in place of the previous grammar's */
        pthread_mutex_lock(&c->lock);
        ana_prep_data *old = c->kept;
        c->kept = d;
        d->refs++;
        int last = old && --old->refs == 0;
        pthread_mutex_unlock(&c->lock);
        if (last) data_free(old);
    }
    return 0;
nomem:
    data_free(d);
    memset(p, 0, sizeof *p);
    return tdc_error(-ENOMEM, "analytics: out of memory");
}

/* ---- scope helpers ---- */

int ana_plain_files(const ana_prep *p, uint32_t first, uint32_t end, const unsigned char *vis,
                    vec32 *out)
{
    for (uint32_t e = first; e < end; e++)
        if (p->a->ents[e].type == ARC_REG && ana_visible(vis, e) && !ana_file_has_cut(p, e) &&
            vec32_push(out, e))
            return -ENOMEM;
    return 0;
}

void ana_split_files(const arc *a, const uint32_t *files, size_t n, int parts, size_t *at)
{
    uint64_t total = 0, acc = 0;
    for (size_t i = 0; i < n; i++)
        total += a->ents[files[i]].root_len + 1;
    at[0] = 0;
    size_t i = 0;
    for (int t = 1; t < parts; t++) {
        uint64_t want = total * (uint64_t)t / (uint64_t)parts;
        while (i < n && acc + a->ents[files[i]].root_len + 1 <= want)
            acc += a->ents[files[i++]].root_len + 1;
        at[t] = i;
    }
    at[parts] = n;
}

int ana_mark_reach(const ana_prep *p, const uint32_t *files, size_t n, unsigned char **out)
{
    const gram *g = p->g;
    unsigned char *need = calloc((size_t)g->nrules + 1, 1);
    if (!need) return tdc_error(-ENOMEM, "analytics: out of memory");
    for (size_t i = 0; i < n; i++) {
        const arc_entry *f = &p->a->ents[files[i]];
        const uint32_t *run = g->root.p + f->root_start;
        for (uint64_t j = 0; j < f->root_len; j++)
            if (run[j] >= g->ntokens) need[run[j] - g->ntokens] = 1;
    }
    for (uint32_t h = p->nlevels; h-- > 0;)
        for (uint32_t k = p->lvl_at[h]; k < p->lvl_at[h + 1]; k++) {
            uint32_t r = p->lvl[k];
            if (!need[r]) continue;
            uint64_t m;
            const uint32_t *b = gram_body(g, r, &m);
            for (uint64_t j = 0; j < m; j++)
                if (b[j] >= g->ntokens) need[b[j] - g->ntokens] = 1;
        }
    *out = need;
    return 0;
}

/* ---- the selector ---- */

static inline void add_w(uint64_t *x, uint64_t v, int shared);

static int per_file(int kind)
{
    return ana_table[kind].per_file;
}

static int is_seq(int kind)
{
    return ana_table[kind].seq;
}

/* Bound on the size of rule c's table. */
static double table_bound(const ana_prep *p, uint32_t c, int seq)
{
    double w = ana_ew(p, c);
    return seq ? (w > 2 ? w - 2 : 0) : w;
}

/* The two cost estimates of ana.h for the per-file analytics, on the team: files split for
 * the root runs, then each level split as in ana_weights. */
typedef struct estjob {
    const ana_prep *p;
    int seq;
    const vec32 *files;
    uint64_t *F;
    uint32_t *stamp[2];
    double td[2], bu[2];
} estjob;

static int est_task(void *x, const ana_team *tm)
{
    estjob *j = x;
    const ana_prep *p = j->p;
    const gram *g = p->g;
    const uint32_t nt = g->ntokens;
    uint64_t *F = j->F, nf = j->files->n;
    uint32_t *stamp = j->stamp[tm->tid];
    int sh = tm->n > 1;
    double t = 0, b = 0;
    size_t at[3];
    ana_split_files(p->a, j->files->p, j->files->n, tm->n, at);
    for (size_t i = at[tm->tid]; i < at[tm->tid + 1]; i++) {
        const arc_entry *f = &p->a->ents[j->files->p[i]];
        const uint32_t *run = g->root.p + f->root_start;
        for (uint64_t k = 0; k < f->root_len; k++) {
            if (run[k] < nt) continue;
            uint32_t c = run[k] - nt;
            if (stamp[c] == (uint32_t)i + 1) continue;
            stamp[c] = (uint32_t)i + 1;
            add_w(&F[c], 1, sh);
            b += table_bound(p, c, j->seq);
        }
    }
    ana_sync(tm);
    for (uint32_t h = p->nlevels; h-- > 0;) {
        size_t lo, hi, base = p->lvl_at[h];
        ana_share(tm, p->lvl_at[h + 1] - base, &lo, &hi);
        for (size_t k = base + lo; k < base + hi; k++) {
            uint32_t r = p->lvl[k];
            if (!F[r]) continue;
            uint64_t fr = F[r] < nf ? F[r] : nf, m;
            const uint32_t *body = gram_body(g, r, &m);
            t += (double)fr * (double)(m + 2);
            for (uint64_t i = 0; i < m; i++) {
                uint32_t s = body[i];
                if (s >= nt) {
                    add_w(&F[s - nt], fr, sh);
                    b += table_bound(p, s - nt, j->seq) + (j->seq ? 2 : 0);
                } else if (dict_is_word(p->a->dict, s)) {
                    b += 1;
                }
            }
        }
        ana_sync(tm);
    }
    j->td[tm->tid] = t;
    j->bu[tm->tid] = b;
    return 0;
}

static int estimate(const ana_prep *p, int seq, const vec32 *files, int threads, double *td,
                    double *bu)
{
    size_t nr = (size_t)p->g->nrules + 1;
    estjob j = {p, seq, files, calloc(nr, sizeof *j.F), {NULL, NULL}, {0, 0}, {0, 0}};
    j.stamp[0] = calloc(nr, sizeof *j.stamp[0]);
    if (threads > 1) j.stamp[1] = calloc(nr, sizeof *j.stamp[1]);
    int rc = j.F && j.stamp[0] && (threads < 2 || j.stamp[1]) ? 0 : -ENOMEM;
    if (!rc) rc = ana_par(threads, est_task, &j);
    free(j.F);
    free(j.stamp[0]);
    free(j.stamp[1]);
    *td = j.td[0] + j.td[1];
    *bu = j.bu[0] + j.bu[1];
    return rc;
}

int ana_plan_threads(const ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                     const unsigned char *vis, uint64_t *syms, uint32_t *nfiles)
{
    *syms = 0;
    *nfiles = 0;
    for (uint32_t e = first; e < end; e++)
        if (a->ents[e].type == ARC_REG && ana_visible(vis, e)) {
            ++*nfiles;
            *syms += a->ents[e].root_len;
        }
    if (!ana_ctx_opts(c)->threads && *syms < 65536) return 1;
    return ana_threads(c);
}

void ana_plan_make(const ana_prep *p, int kind, uint32_t first, uint32_t end,
                   const unsigned char *vis, ana_plan *o)
{
    memset(o, 0, sizeof *o);
    o->threads = ana_plan_threads(p->ctx, p->a, first, end, vis, &o->scope_syms, &o->nfiles);
    int t = ana_ctx_opts(p->ctx)->traversal;
    const char *why = "";
    if (t != ANA_AUTO) {
        o->forced = 1;
        o->bottomup = t == ANA_BOTTOMUP;
    } else if (per_file(kind)) {
        vec32 files = {0};
        if (!ana_plain_files(p, first, end, vis, &files) &&
            !estimate(p, is_seq(kind), &files, o->threads, &o->est_td, &o->est_bu))
            o->bottomup = o->est_bu < o->est_td;
        else
            why = " (no memory for the estimate)";
        vec32_free(&files);
    }
    if (o->bottomup) {
        /* 32-bit table counts: no rule may expand to 2^32 words or more */
        for (uint32_t r = 1; r <= p->g->nrules && o->bottomup; r++)
            if (ana_ew(p, r) == UINT32_MAX) {
                o->bottomup = 0;
                why = " (a rule expands to 2^32 words or more)";
            }
    }
    if (ana_ctx_opts(p->ctx)->verbose)
        fprintf(stderr,
                "tadoc: %s: %s%s, %d thread%s, %u file%s, %llu root symbols; estimates: "
                "top-down %.3g, bottom-up %.3g%s\n",
                ana_table[kind].name, o->bottomup ? "bottom-up" : "top-down",
                o->forced ? " (forced)" : " (auto)", o->threads, o->threads > 1 ? "s" : "",
                o->nfiles, o->nfiles == 1 ? "" : "s", (unsigned long long)o->scope_syms, o->est_td,
                o->est_bu, why);
}

void ana_mark(ana_clock *k, const char *what)
{
    if (k->verbose < 2) return;
    struct timespec t, c;
    clock_gettime(CLOCK_MONOTONIC, &t);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
    if (what)
        fprintf(stderr, "tadoc:   %-28s %8.3f s (this thread's CPU %.3f s)\n", what,
                (double)(t.tv_sec - k->wall.tv_sec) + (double)(t.tv_nsec - k->wall.tv_nsec) / 1e9,
                (double)(c.tv_sec - k->cpu.tv_sec) + (double)(c.tv_nsec - k->cpu.tv_nsec) / 1e9);
    k->wall = t;
    k->cpu = c;
}

/* ---- two threads ---- */

typedef struct par_arg {
    ana_task_fn fn;
    void *ctx;
    ana_team t;
    int rc;
} par_arg;

static void *par_main(void *x)
{
    par_arg *a = x;
    a->rc = a->fn(a->ctx, &a->t);
    return NULL;
}

int ana_par(int n, ana_task_fn fn, void *ctx)
{
    ana_team solo = {0, 1, NULL};
    if (n < 2) return fn(ctx, &solo);
    pthread_barrier_t bar;
    if (pthread_barrier_init(&bar, NULL, 2)) return fn(ctx, &solo);
    par_arg other = {fn, ctx, {1, 2, &bar}, 0};
    pthread_t th;
    if (pthread_create(&th, NULL, par_main, &other)) {
        pthread_barrier_destroy(&bar);
        return fn(ctx, &solo);
    }
    ana_team me = {0, 2, &bar};
    int rc = fn(ctx, &me);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    return rc ? rc : other.rc;
}

void ana_sync(const ana_team *t)
{
    if (t->n > 1) pthread_barrier_wait(t->bar);
}

typedef struct psort_arg {
    unsigned char *base;
    size_t n, size, mid;
    int (*cmp)(const void *, const void *, void *);
    void *ctx;
    int halves; /* both halves were sorted separately */
} psort_arg;

static int psort_task(void *x, const ana_team *t)
{
    psort_arg *a = x;
    if (t->n == 1) {
        sort_r(a->base, a->n, a->size, a->cmp, a->ctx);
        return 0;
    }
    if (t->tid == 1) a->halves = 1; /* read after the join */
    if (t->tid == 0)
        sort_r(a->base, a->mid, a->size, a->cmp, a->ctx);
    else
        sort_r(a->base + a->mid * a->size, a->n - a->mid, a->size, a->cmp, a->ctx);
    return 0;
}

void ana_psort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *),
               void *ctx, int threads)
{
    unsigned char *tmp = threads > 1 && n >= 32768 ? malloc(n * size) : NULL;
    if (!tmp) {
        sort_r(base, n, size, cmp, ctx);
        return;
    }
    psort_arg a = {base, n, size, n / 2, cmp, ctx, 0};
    ana_par(2, psort_task, &a);
    if (a.halves) {
        unsigned char *x = a.base, *xe = a.base + a.mid * size, *y = xe, *ye = a.base + n * size,
                      *o = tmp;
        while (x < xe && y < ye) {
            if (cmp(y, x, ctx) < 0) {
                memcpy(o, y, size);
                y += size;
            } else {
                memcpy(o, x, size);
                x += size;
            }
            o += size;
        }
        memcpy(o, x, (size_t)(xe - x));
        o += xe - x;
        memcpy(o, y, (size_t)(ye - y));
        memcpy(base, tmp, n * size);
    }
    free(tmp);
}

typedef struct ppjob {
    ana_print_fn fn;
    void *ctx;
    size_t n, mid;
    buf *out0, out1;
} ppjob;

static int pp_task(void *x, const ana_team *t)
{
    ppjob *j = x;
    if (t->n == 1) return j->fn(j->ctx, 0, j->n, j->out0);
    return t->tid ? j->fn(j->ctx, j->mid, j->n, &j->out1) : j->fn(j->ctx, 0, j->mid, j->out0);
}

int ana_par_print(ana_print_fn fn, void *ctx, size_t n, size_t mid, buf *out, int threads)
{
    if (threads < 2 || n < 65536 || mid == 0 || mid >= n) return fn(ctx, 0, n, out);
    ppjob j = {fn, ctx, n, mid, out, {0}};
    int rc = ana_par(2, pp_task, &j);
    if (!rc && j.out1.n && buf_put(out, j.out1.p, j.out1.n)) rc = -ENOMEM;
    buf_free(&j.out1);
    return rc;
}

/* ---- arenas ---- */

#define CHUNK (1u << 20)

void *ana_arena_alloc(ana_arena *ar, size_t bytes)
{
    if (!ar->nchunks || ar->used + bytes > ar->size) {
        if (ar->nchunks == ar->capchunks) {
            size_t cap = ar->capchunks ? ar->capchunks * 2 : 16;
            unsigned char **c = realloc(ar->chunks, cap * sizeof *c);
            if (!c) return NULL;
            ar->chunks = c;
            ar->capchunks = cap;
        }
        size_t size = bytes > CHUNK ? bytes : CHUNK;
        unsigned char *c = malloc(size ? size : 8);
        if (!c) return NULL;
        ar->chunks[ar->nchunks++] = c;
        ar->used = 0;
        ar->size = size;
    }
    void *r = ar->chunks[ar->nchunks - 1] + ar->used;
    ar->used += bytes;
    ar->total += bytes;
    return r;
}

void ana_arena_free(ana_arena *ar)
{
    for (size_t i = 0; i < ar->nchunks; i++)
        free(ar->chunks[i]);
    free(ar->chunks);
    memset(ar, 0, sizeof *ar);
}

/* ---- top-down weights ---- */

typedef struct wjob {
    const ana_prep *p;
    const uint32_t *files;
    size_t n, at[3];         /* thread t takes files [at[t], at[t + 1]) */
    uint64_t *w[2], *tok[2]; /* thread 1's are its own, added into thread 0's (the caller's) */
    int down;
} wjob;

static inline void add_w(uint64_t *x, uint64_t v, int shared)
{
    if (shared)
        __atomic_fetch_add(x, v, __ATOMIC_RELAXED);
    else
        *x += v;
}

/* Where symbol s of a body adds its weight: w of a rule, tok of a token (NULL without tok). */
static inline const void *target(const uint64_t *w, const uint64_t *tok, uint32_t nt, uint32_t s)
{
    return s >= nt ? (const void *)&w[s - nt] : tok ? (const void *)&tok[s] : NULL;
}

/* Push the weights of every rule to its children and words, parents first: g->topo backwards
 * (its depth-first order keeps children near their parents). The loads are random, so they
 * are prefetched in stages: a rule's weight and body offset 16 rules ahead, its body 8
 * ahead, the targets of its first symbols 4 ahead. */
static void push_rules(const ana_prep *p, uint64_t *w, uint64_t *tok)
{
    const gram *g = p->g;
    const unsigned char *cls = p->cls;
    const uint32_t nt = g->ntokens, *syms = g->syms.p, *topo = g->topo.p;
    const uint64_t *rs = g->rule_start.p;
    const size_t n = g->nrules;
#define AT(k) topo[n - 1 - (k)]
    for (size_t k = 0; k < n; k++) {
        if (k + 16 < n) {
            uint32_t q = AT(k + 16);
            __builtin_prefetch(&w[q]);
            __builtin_prefetch(&rs[q - 1]);
        }
        if (k + 8 < n) __builtin_prefetch(syms + rs[AT(k + 8) - 1]);
        if (k + 4 < n) {
            uint32_t q = AT(k + 4);
            if (w[q]) {
                const uint32_t *b = syms + rs[q - 1];
                uint64_t m = rs[q] - rs[q - 1];
                for (uint64_t i = 0; i < m && i < 4; i++) {
                    const void *x = target(w, tok, nt, b[i]);
                    if (x) __builtin_prefetch(x, 1);
                }
            }
        }
        uint32_t r = AT(k);
        uint64_t wr = w[r];
        if (!wr) continue;
        const uint32_t *b = syms + rs[r - 1], *e = syms + rs[r];
        for (; b < e; b++) {
            uint32_t s = *b;
            if (s >= nt)
                w[s - nt] += wr;
            else if (tok && (cls[s] & ANA_WORD))
                tok[s] += wr;
        }
    }
#undef AT
}

/* Each thread counts its files (about half the root symbols each) into its own arrays: root
 * runs, then with `down` the push over every rule its files use. Rules both halves use are
 * pushed by both, but nothing is shared until the end (no atomic adds, one barrier), where
 * each thread adds half of thread 1's arrays into thread 0's. */
static int weights_task(void *x, const ana_team *t)
{
    const wjob *j = x;
    const ana_prep *p = j->p;
    const gram *g = p->g;
    const unsigned char *cls = p->cls;
    const uint32_t nt = g->ntokens;
    uint64_t *w = j->w[t->tid], *tok = j->tok[t->tid];
    size_t lo = t->n == 1 ? 0 : j->at[t->tid], hi = t->n == 1 ? j->n : j->at[t->tid + 1];
    for (size_t i = lo; i < hi; i++) {
        const arc_entry *f = &p->a->ents[j->files[i]];
        const uint32_t *run = g->root.p + f->root_start;
        for (uint64_t k = 0, len = f->root_len; k < len; k++) {
            if (k + 16 < len) {
                const void *y = target(w, tok, nt, run[k + 16]);
                if (y) __builtin_prefetch(y, 1);
            }
            uint32_t s = run[k];
            if (s >= nt)
                w[s - nt]++;
            else if (tok && (cls[s] & ANA_WORD))
                tok[s]++;
        }
    }
    if (j->down) push_rules(p, w, tok);
    if (t->n == 1) return 0;
    ana_sync(t);
    size_t a, b;
    ana_share(t, (size_t)g->nrules + 1, &a, &b);
    for (size_t r = a; r < b; r++)
        j->w[0][r] += j->w[1][r];
    if (tok) {
        ana_share(t, nt, &a, &b);
        for (size_t s = a; s < b; s++)
            j->tok[0][s] += j->tok[1][s];
    }
    return 0;
}

int ana_weights(const ana_prep *p, const uint32_t *files, size_t n, uint64_t *w, uint64_t *tok,
                int down, int threads)
{
    wjob j = {p, files, n, {0}, {w, NULL}, {tok, NULL}, down};
    if (threads > 1) {
        /* thread 1's arrays; without memory for them, one thread */
        j.w[1] = calloc((size_t)p->g->nrules + 1, sizeof *j.w[1]);
        if (tok) j.tok[1] = calloc((size_t)p->g->ntokens + 1, sizeof *j.tok[1]);
        if (!j.w[1] || (tok && !j.tok[1])) threads = 1;
        ana_split_files(p->a, files, n, 2, j.at);
    }
    int rc = ana_par(threads, weights_task, &j);
    free(j.w[1]);
    free(j.tok[1]);
    return rc;
}

/* ---- bottom-up word tables ---- */

typedef struct wtjob {
    ana_wtab *wt;
    const ana_prep *p;
    const unsigned char *need;
} wtjob;

/* Rule r's table from its body: children's tables plus its own words. */
static int wtab_rule(ana_wtab *wt, const ana_prep *p, uint32_t r, ana_arena *ar, uint32_t *acc,
                     vec32 *touched)
{
    const gram *g = p->g;
    const dict *d = p->a->dict;
    const uint32_t nt = g->ntokens;
    uint64_t m, total = 0;
    const uint32_t *b = gram_body(g, r, &m);
    for (uint64_t i = 0; i < m; i++)
        total += b[i] >= nt ? wt->n[b[i] - nt] : (uint32_t)dict_is_word(d, b[i]);
    ana_wpair small[16], *out;
    size_t k = 0;
    if (total <= 16) {
        /* most rules: a few words, merged by a linear scan */
        for (uint64_t i = 0; i < m; i++) {
            const ana_wpair *e, one = {b[i], 1};
            size_t ne;
            if (b[i] >= nt) {
                e = wt->tab[b[i] - nt];
                ne = wt->n[b[i] - nt];
            } else if (dict_is_word(d, b[i])) {
                e = &one;
                ne = 1;
            } else {
                continue;
            }
            for (size_t x = 0; x < ne; x++) {
                size_t y = 0;
                while (y < k && small[y].w != e[x].w)
                    y++;
                if (y == k) small[k++] = (ana_wpair){e[x].w, 0};
                small[y].n += e[x].n;
            }
        }
        out = small;
    } else {
        touched->n = 0;
        for (uint64_t i = 0; i < m; i++) {
            uint32_t s = b[i];
            if (s >= nt) {
                const ana_wpair *e = wt->tab[s - nt];
                for (uint32_t x = 0; x < wt->n[s - nt]; x++) {
                    if (!acc[e[x].w] && vec32_push(touched, e[x].w)) return -ENOMEM;
                    acc[e[x].w] += e[x].n;
                }
            } else if (dict_is_word(d, s)) {
                if (!acc[s] && vec32_push(touched, s)) return -ENOMEM;
                acc[s]++;
            }
        }
        k = touched->n;
        out = NULL;
    }
    if (!k) return 0;
    ana_wpair *t = ana_arena_alloc(ar, k * sizeof *t);
    if (!t) return -ENOMEM;
    if (out) {
        memcpy(t, out, k * sizeof *t);
    } else {
        for (size_t x = 0; x < k; x++) {
            uint32_t w = touched->p[x];
            t[x] = (ana_wpair){w, acc[w]};
            acc[w] = 0;
        }
    }
    wt->tab[r] = t;
    wt->n[r] = (uint32_t)k;
    return 0;
}

static int wtab_task(void *x, const ana_team *t)
{
    const wtjob *j = x;
    const ana_prep *p = j->p;
    uint32_t *acc = calloc((size_t)p->g->ntokens + 1, sizeof *acc);
    vec32 touched = {0};
    int rc = acc ? 0 : -ENOMEM;
    /* Children first: level h only reads tables of lower levels, finished at the barrier. A
     * thread that failed keeps meeting the barriers (its tables stay empty). */
    for (uint32_t h = 0; h < p->nlevels; h++) {
        size_t lo, hi, base = p->lvl_at[h];
        ana_share(t, p->lvl_at[h + 1] - base, &lo, &hi);
        for (size_t k = base + lo; k < base + hi && !rc; k++) {
            uint32_t r = p->lvl[k];
            if (j->need[r]) rc = wtab_rule(j->wt, p, r, &j->wt->ar[t->tid], acc, &touched);
        }
        ana_sync(t);
    }
    free(acc);
    vec32_free(&touched);
    return rc;
}

int ana_wtab_build(ana_wtab *wt, const ana_prep *p, const unsigned char *need, int threads)
{
    memset(wt, 0, sizeof *wt);
    size_t nr = (size_t)p->g->nrules + 1;
    wt->tab = calloc(nr, sizeof *wt->tab);
    wt->n = calloc(nr, sizeof *wt->n);
    wtjob j = {wt, p, need};
    int rc = wt->tab && wt->n ? ana_par(threads, wtab_task, &j) : -ENOMEM;
    if (rc) {
        ana_wtab_free(wt);
        return tdc_error(rc, "analytics: out of memory");
    }
    return 0;
}

void ana_wtab_free(ana_wtab *wt)
{
    free(wt->tab);
    free(wt->n);
    ana_arena_free(&wt->ar[0]);
    ana_arena_free(&wt->ar[1]);
    memset(wt, 0, sizeof *wt);
}
