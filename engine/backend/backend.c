#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analytics/ana.h"
#include "../analytics/analytics.h"
#include "../analytics/ana_shards.h"
#include "backend_int.h"
#include "../base/err.h"
#include "../base/tok.h"
#include "../grammar/dict.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_gpu;
static char desc[256];

static void probe(void)
{
#ifdef TDC_HAVE_CUDA
    char name[128];
    have_gpu = gpu_probe(name, sizeof name) == 0;
    if (have_gpu)
        snprintf(desc, sizeof desc, "cpu backend; gpu backend on %s", name);
    else
        snprintf(desc, sizeof desc, "cpu backend; CUDA compiled in, no usable GPU (%s)", name);
#else
    snprintf(desc, sizeof desc, "cpu backend; no CUDA support compiled in");
#endif
}

int backend_gpu_available(void)
{
    pthread_once(&once, probe);
    return have_gpu;
}

const char *backend_describe(void)
{
    pthread_once(&once, probe);
    return desc;
}

int backend_wordcount(ana_ctx *c, const arc *a, gpu_gram *g, uint32_t first, uint32_t end,
                      buf *out)
{
#ifdef TDC_HAVE_CUDA
    if (g) {
        uint64_t *cnt = malloc(((size_t)a->g.ntokens + 1) * sizeof *cnt);
        if (!cnt) return tdc_error(-ENOMEM, "analytics: out of memory");
        int rc = gpu_wordcount(g, first, end, cnt);
        if (!rc) rc = ana_wordcount_counts(c, a, cnt, out);
        free(cnt);
        if (rc != -ENOTSUP) return rc;
    }
#else
    (void)g;
#endif
    return ana_wordcount(c, a, first, end, NULL, out);
}

/* ---- The context ---- */

void backend_opts_init(backend_opts *o)
{
    *o = (backend_opts){.mode = BACKEND_AUTO,
                        .auto_min = BACKEND_AUTO_MIN_BYTES,
                        .read_min = BACKEND_READ_MIN_BYTES,
                        .read_wait_us = BACKEND_READ_WAIT_US,
                        .ana = ANA_OPTS_INIT};
}

int backend_new(const backend_opts *o, backend **out)
{
    *out = NULL;
    backend *b = calloc(1, sizeof *b);
    if (!b) return tdc_error(-ENOMEM, "backend: out of memory");
    if (o)
        b->o = *o;
    else
        backend_opts_init(&b->o);
    if (b->o.mode < BACKEND_OFF || b->o.mode > BACKEND_ON) b->o.mode = BACKEND_AUTO;
    if (!(b->ana = ana_ctx_new(&b->o.ana))) {
        free(b);
        return tdc_error(-ENOMEM, "backend: out of memory");
    }
    pthread_mutex_init(&b->gpu_lock, NULL);
    pthread_mutex_init(&b->why_lock, NULL);
    for (int d = 0; d < BACKEND_MAX_GPUS; d++)
        pthread_mutex_init(&b->dev_lock[d], NULL);
    backend_reads_init(&b->rd);
    *out = b;
    return 0;
}

void backend_free(backend *b)
{
    if (!b) return;
    backend_reads_free(&b->rd);
    backend_release(b, NULL);
    pthread_mutex_destroy(&b->gpu_lock);
    pthread_mutex_destroy(&b->why_lock);
    for (int d = 0; d < BACKEND_MAX_GPUS; d++)
        pthread_mutex_destroy(&b->dev_lock[d]);
    ana_ctx_free(b->ana);
    free(b);
}

const backend_opts *backend_options(const backend *b)
{
    return &b->o;
}

ana_ctx *backend_ana(backend *b)
{
    return b->ana;
}

void backend_set_mode(backend *b, int m)
{
    __atomic_store_n(&b->o.mode, m < BACKEND_OFF || m > BACKEND_ON ? BACKEND_AUTO : m,
                     __ATOMIC_RELAXED);
}

int backend_mode(const backend *b)
{
    return __atomic_load_n(&b->o.mode, __ATOMIC_RELAXED);
}

int backend_mode_parse(const char *s)
{
    if (!s || !*s || !strcmp(s, "auto")) return BACKEND_AUTO;
    if (!strcmp(s, "on")) return BACKEND_ON;
    if (!strcmp(s, "off")) return BACKEND_OFF;
    return -1;
}

void backend_gpu_args(const backend_opts *o, const arc *a, uint32_t first, gpu_ana_args *out)
{
    out->prefix = ana_scope_prefix(a, first);
    out->traversal = o->ana.traversal;
    out->verbose = o->ana.verbose > 0;
    out->wide_seq = o->wide_seq;
    out->cut = NULL;
}

static void account(backend *b, int cpu, size_t bytes)
{
    __atomic_fetch_add(&b->req[cpu], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&b->bytes[cpu], (uint64_t)bytes, __ATOMIC_RELAXED);
}

void backend_fallback(backend *b)
{
    __atomic_fetch_add(&b->fallbacks, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&b->why_lock);
    snprintf(b->why, sizeof b->why, "%s", tdc_errmsg());
    pthread_mutex_unlock(&b->why_lock);
}

int backend_stats(backend *b, char *out, size_t n)
{
    unsigned long long r0 = __atomic_load_n(&b->req[0], __ATOMIC_RELAXED),
                       b0 = __atomic_load_n(&b->bytes[0], __ATOMIC_RELAXED),
                       r1 = __atomic_load_n(&b->req[1], __ATOMIC_RELAXED),
                       b1 = __atomic_load_n(&b->bytes[1], __ATOMIC_RELAXED),
                       fb = __atomic_load_n(&b->fallbacks, __ATOMIC_RELAXED);
    char reads[320], tail[sizeof b->why + 64] = "", devs[160] = "";
    backend_read_stats(b, reads, sizeof reads);
    if (fb) {
        pthread_mutex_lock(&b->why_lock);
        snprintf(tail, sizeof tail, "; gpu fallbacks: %llu (the last: %s)", fb, b->why);
        pthread_mutex_unlock(&b->why_lock);
    }
    for (int d = 0, k = 0; d < BACKEND_MAX_GPUS; d++) { /* backend_by_shard's parts, by device */
        unsigned long long p = __atomic_load_n(&b->dev_parts[d], __ATOMIC_RELAXED);
        if (p && k < (int)sizeof devs - 24)
            k += snprintf(devs + k, sizeof devs - (size_t)k, "%s%d: %llu", k ? ", " : "; shard parts by gpu: ", d, p);
    }
    return snprintf(out, n, "gpu: %llu requests %llu bytes; cpu: %llu requests %llu bytes; %s%s%s",
                    r0, b0, r1, b1, reads, devs, tail);
}


uint32_t backend_word_token(const arc *a, const char *word, size_t n)
{
    if (n >= TOK_CAP || !tok_is_word(word, n)) return GPU_NO_WORD; /* longer: cut in tokens */
    uint32_t t;
    if (dict_find(a->dict, (const unsigned char *)word, n, &t)) return GPU_NO_WORD;
    return t;
}

#ifdef TDC_HAVE_CUDA
int backend_gpu_upload(const arc *a, gpu_gram **out)
{
    gpu_ent *e = malloc(((size_t)a->nents + 1) * sizeof *e);
    if (!e) return tdc_error(-ENOMEM, "gpu: out of memory");
    for (uint32_t i = 0; i < a->nents; i++) {
        const arc_entry *x = &a->ents[i];
        int64_t c = x->root_len ? (int64_t)i : arc_ino_entry(a, x->ino);
        e[i] = (gpu_ent){x->path,         x->size, x->root_start, x->root_len,
                         c < 0 ? UINT32_MAX : (uint32_t)c, x->type == ARC_REG};
    }
    const gram *g = &a->g;
    gpu_src s = {g->ntokens,    g->nrules,         a->nents,         g->root.p,
                 g->root.n,     g->syms.p,         g->syms.n,        g->rule_start.p,
                 a->dict->offs.p, a->dict->blob.p, a->dict->word.p,  e};
    int rc = gpu_upload(&s, out);
    free(e);
    return rc;
}

static int resident(const arc *a, gpu_gram **out)
{
    gpu_gram *g = NULL;
    int rc = backend_gpu_upload(a, &g);
    if (!rc) rc = gpu_index_build(g);
    if (rc) {
        gpu_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

/* The slot of (a, gen) in b->res, uploading on a miss; -1 on failure. b->gpu_lock held. */
static int slot(backend *b, const arc *a, uint64_t gen)
{
    int lru = 0;
    for (int i = 0; i < BACKEND_GPU_CACHE; i++) {
        if (b->res[i].g && b->res[i].a == a && b->res[i].gen == gen) {
            b->res[i].used = ++b->tick;
            return i;
        }
        if (!b->res[i].g || (b->res[lru].g && b->res[i].used < b->res[lru].used)) lru = i;
    }
    gpu_free(b->res[lru].g);
    b->res[lru].g = NULL;
    if (resident(a, &b->res[lru].g)) return -1;
    b->res[lru].a = a;
    b->res[lru].gen = gen;
    b->res[lru].used = ++b->tick;
    return lru;
}

gpu_gram *backend_resident(backend *b, const arc *a, uint64_t gen, int upload)
{
    for (int i = 0; i < BACKEND_GPU_CACHE; i++)
        if (b->res[i].g && b->res[i].a == a && b->res[i].gen == gen) {
            b->res[i].used = ++b->tick;
            return b->res[i].g;
        }
    int s = upload ? slot(b, a, gen) : -1;
    return s < 0 ? NULL : b->res[s].g;
}

void backend_drop(backend *b, const gpu_gram *g)
{
    for (int i = 0; i < BACKEND_GPU_CACHE; i++)
        if (b->res[i].g == g) {
            gpu_free(b->res[i].g);
            b->res[i].g = NULL;
            b->res[i].a = NULL;
        }
}

/* Analytic `kind` of the files of [first, end) visible in vis from the GPU, appended to out:
 * 0, 1 when the GPU does not take it (mode, size, busy, a scope it leaves to the CPU: cut long
 * words, keys too wide), or -1 when it failed (out is left as it was). With cut (one byte
 * per entry, zeroed) where the scope holds words longer than TOK_CAP, the files that hold
 * them are marked there. */
static int gpu_text(backend *b, const arc *a, uint64_t gen, int kind, uint32_t first, uint32_t end,
                    const unsigned char *vis, buf *out, unsigned char *cut)
{
    int m = backend_mode(b);
    if (m == BACKEND_OFF) return 1;
    if (m == BACKEND_AUTO) {
        uint64_t bytes = 0, min = b->o.auto_min;
        for (uint32_t e = first; e < end && bytes < min; e++)
            if (a->ents[e].type == ARC_REG && ana_visible(vis, e)) bytes += a->ents[e].size;
        /* sizes first: probing starts CUDA, which a small scope does not need */
        if (!gen || bytes < min || !backend_gpu_available() ||
            pthread_mutex_trylock(&b->gpu_lock))
            return 1;
    } else {
        if (!backend_gpu_available()) return 1;
        pthread_mutex_lock(&b->gpu_lock);
    }
    int rc, s = -1;
    gpu_gram *g = NULL;
    gpu_ana_args args;
    backend_gpu_args(&b->o, a, first, &args);
    args.cut = cut;
    if (gen) {
        s = slot(b, a, gen);
        rc = s < 0 ? -1 : gpu_analytic(b->res[s].g, kind, first, end, vis, &args, out);
    } else {
        rc = resident(a, &g) ? -1 : gpu_analytic(g, kind, first, end, vis, &args, out);
        gpu_free(g);
    }
    if (rc && rc != -ENOTSUP && s >= 0) backend_drop(b, b->res[s].g); /* may be unusable */
    pthread_mutex_unlock(&b->gpu_lock);
    if (rc && b->o.ana.verbose)
        fprintf(stderr, "tadoc: %s: not on the GPU: %s\n", ana_table[kind].name, tdc_errmsg());
    return rc == 0 ? 0 : rc == -ENOTSUP ? 1 : -1;
}
#endif

/* After a GPU attempt r at analytic `kind` (0: served, appending to out from n0; 1: not taken;
 * -1: failed, counted as a fallback), or none (r = 1): count it (with acct), or serve it on
 * the CPU. */
static int served(backend *b, int r, int kind, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis, buf *out, size_t n0, int acct)
{
    if (r == 0) {
        if (acct) account(b, 0, out->n - n0);
        return 0;
    }
    if (r < 0) backend_fallback(b);
    out->n = n0;
    int rc = ana_table[kind].cpu(b->ana, a, first, end, vis, out);
    if (!rc && acct) account(b, 1, out->n - n0);
    return rc;
}

#ifdef TDC_HAVE_CUDA
/* The GPU left the scope to the CPU because files in it hold words longer than TOK_CAP
 * (marked in cut; the GPU does not join a word's TOK_CAP pieces): those files on the CPU, the
 * others on the GPU, and the two outputs merged as the shards' parts are (ana_merge; no file
 * is in both, so no edges). Nearly always a few files: a whole archive stays on the GPU
 * instead of going to the CPU whole. 0; 1 where the GPU does not take the rest; -1 where
 * either side or the merge failed. */
static int split(backend *b, const arc *a, uint64_t gen, int kind, uint32_t first, uint32_t end,
                 const unsigned char *vis, const unsigned char *cut, buf *out)
{
    unsigned char *rest = malloc(a->nents), *own = malloc(a->nents);
    buf g = {0}, c = {0};
    ana_merge *m = NULL;
    int r = rest && own ? 0 : -1;
    uint32_t nown = 0;
    for (uint32_t e = 0; !r && e < a->nents; e++) {
        rest[e] = ana_visible(vis, e) && !cut[e];
        own[e] = ana_visible(vis, e) && cut[e];
        nown += own[e];
    }
    if (!r && b->o.ana.verbose)
        fprintf(stderr, "tadoc: %s: %u files with such words on the CPU, the rest on the GPU\n",
                ana_table[kind].name, nown);
    if (!r && !(r = gpu_text(b, a, gen, kind, first, end, rest, &g, NULL))) {
        ana_opts o = *ana_ctx_opts(b->ana);
        int rc = ana_table[kind].cpu(b->ana, a, first, end, own, &c);
        if (!rc) rc = ana_merge_new(kind, a, first, end, vis, &m);
        if (!rc && o.spill_dir) ana_merge_spill(m, o.spill_dir, o.spill_at);
        if (!rc) rc = ana_merge_part(m, &g);
        if (!rc) rc = ana_merge_part(m, &c);
        if (!rc) rc = ana_merge_finish(m, out);
        r = rc ? -1 : 0;
    }
    ana_merge_free(m);
    buf_free(&g);
    buf_free(&c);
    free(rest);
    free(own);
    return r;
}
#endif

/* backend_gpu_analytic; with `split`, a scope the GPU refuses for words longer than TOK_CAP
 * goes to split (the files that hold them on the CPU, the rest on the GPU). */
static int gpu_try(backend *b, int kind, const arc *a, uint64_t gen, uint32_t first, uint32_t end,
                   const unsigned char *vis, buf *out, int split_cut)
{
    if (kind < 0 || kind >= ANA_NIDS) return tdc_error(-EINVAL, "unknown analytic %d", kind);
    if (first > end || end > a->nents) return tdc_error(-EINVAL, "analytics: bad scope");
    /* A file of the scope in a damaged shard: no numbers rather than wrong ones. */
    int dmg = arc_range_damaged(a, first, end, vis);
    if (dmg) return tdc_error_ctx(dmg, "%s", ana_table[kind].name);
#ifdef TDC_HAVE_CUDA
    size_t n0 = out->n;
    unsigned char *cut =
        split_cut && backend_mode(b) != BACKEND_OFF ? calloc(a->nents ? a->nents : 1, 1) : NULL;
    int r = gpu_text(b, a, gen, kind, first, end, vis, out, cut), any = 0;
    for (uint32_t e = first; r == 1 && cut && e < end && !any; e++)
        any = cut[e];
    if (any) r = split(b, a, gen, kind, first, end, vis, cut, out);
    free(cut);
    if (r == 0) {
        account(b, 0, out->n - n0);
        return 0;
    }
    if (r < 0) backend_fallback(b);
    out->n = n0;
#else
    (void)b;
    (void)gen;
    (void)out;
    (void)split_cut;
#endif
    return 1;
}

int backend_gpu_analytic(backend *b, int kind, const arc *a, uint64_t gen, uint32_t first,
                         uint32_t end, const unsigned char *vis, buf *out)
{
    return gpu_try(b, kind, a, gen, first, end, vis, out, 0);
}

int backend_analytic(backend *b, int kind, const arc *a, uint64_t gen, uint32_t first, uint32_t end,
                     const unsigned char *vis, buf *out)
{
    size_t n0 = out->n;
    int r = gpu_try(b, kind, a, gen, first, end, vis, out, 1);
    return r <= 0 ? r : served(b, 1, kind, a, first, end, vis, out, n0, 1);
}

#ifdef TDC_HAVE_CUDA
/* One shard's part (piece p) on a GPU: a free device if there is one, else the next in turn,
 * the piece uploaded for it alone and dropped after. 0, 1 when the GPU leaves it to the CPU
 * (gpu_analytic's -ENOTSUP), -1 on failure. */
static int part_gpu(backend *b, int kind, const arc *p, uint32_t first, uint32_t end,
                    const unsigned char *vis, buf *out)
{
    /* A part of several shards with a word of TOK_CAP bytes goes shard by shard at once
     * (part_on_gpu): the GPU would refuse it, where its scope holds the word, only after the
     * upload and its index. */
    if (p->piece > 1 && dict_has_word_of(p->dict, TOK_CAP)) return 1;
    int n = b->ndev, d = -1;
    unsigned at = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < n && d < 0; i++)
        if (!pthread_mutex_trylock(&b->dev_lock[b->dev[(at + (unsigned)i) % (unsigned)n]]))
            d = b->dev[(at + (unsigned)i) % (unsigned)n];
    if (d < 0) pthread_mutex_lock(&b->dev_lock[d = b->dev[at % (unsigned)n]]);
    gpu_gram *g = NULL;
    gpu_ana_args args;
    backend_gpu_args(&b->o, p, first, &args);
    int prev = 0, rc = gpu_use_device(d, &prev);
    if (!rc) rc = resident(p, &g);
    if (!rc) rc = gpu_analytic(g, kind, first, end, vis, &args, out);
    gpu_free(g);
    if (gpu_use_device(prev, NULL) && !rc) rc = -EIO; /* the thread's own device back */
    pthread_mutex_unlock(&b->dev_lock[d]);
    if (!rc) __atomic_fetch_add(&b->dev_parts[d], 1, __ATOMIC_RELAXED);
    return rc == 0 ? 0 : rc == -ENOTSUP ? 1 : -1;
}

/* backend_by_shard's part function on the GPUs, the CPU serving what they do not take: a
 * part of several shards the GPU leaves (a word of TOK_CAP bytes in one of them) goes shard
 * by shard, the shards without such words on the GPU. */
static int part_on_gpu(void *arg, int kind, const arc *p, uint32_t first, uint32_t end,
                       const unsigned char *vis, buf *out)
{
    size_t n0 = out->n;
    int r = part_gpu(arg, kind, p, first, end, vis, out);
    if (r == 1 && p->piece > 1) return ANA_PART_SPLIT;
    return served(arg, r, kind, p, first, end, vis, out, n0, 0); /* counted whole */
}
#endif

int backend_cli_gpu_wins(int kind, uint64_t scope_bytes, uint64_t archive_bytes, unsigned cores,
                         int fits)
{
    /* Seconds per GB of content, from bench/gpumodes.sh on Linux 6.1 (1.3 GB, 41 shards):
     * CPU core-seconds; GPU whole archive; GPU shard by shard. */
    static const double cost[ANA_NIDS][3] = {
        [ANA_WORDCOUNT] = {26.4, 3.83, 4.34},   [ANA_SORT] = {23.0, 3.77, 4.54},
        [ANA_INVINDEX] = {74.8, 4.07, 6.96},    [ANA_TERMVECTOR] = {52.4, 4.37, 5.89},
        [ANA_SEQCOUNT] = {263.3, 4.25, 12.56}, [ANA_RANKEDINVINDEX] = {246.3, 6.17, 14.13},
    };
    if (kind < 0 || kind >= ANA_NIDS || !cores) return 0;
    double cpu = cost[kind][0] * ((double)scope_bytes / 1e9) / cores;
    double gpu = fits ? cost[kind][1] * ((double)archive_bytes / 1e9)
                      : cost[kind][2] * ((double)scope_bytes / 1e9);
    return gpu < cpu;
}

void backend_scope_bytes(const arc *a, uint32_t first, uint32_t end, uint64_t *scope,
                         uint64_t *all)
{
    *scope = *all = 0;
    for (uint32_t e = 0; e < a->nents; e++) {
        uint64_t n = a->ents[e].type == ARC_REG && a->ents[e].root_len ? a->ents[e].size : 0;
        *all += n;
        *scope += e >= first && e < end ? n : 0;
    }
}

unsigned backend_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

#ifdef TDC_HAVE_CUDA
/* Device bytes shard k of a is estimated to take uploaded, indexed and analysed
 * (backend_gpu_fits), without the file table's. */
static uint64_t shard_gpu_need(const arc *a, uint32_t k)
{
    const arc_shard *s = &a->shards[k];
    return 64 * (s->root_syms + 3 * (uint64_t)s->nrules) + 2 * a->secs[s->sec].raw;
}

/* Device bytes the file table of a takes uploaded (every piece carries all of it). */
static uint64_t table_gpu_need(const arc *a)
{
    return 128 * (uint64_t)a->nents;
}

/* Device bytes a whole upload may take: b's gpu_mem, or half of the device's free memory
 * (0 when it cannot say). */
static uint64_t gpu_room(backend *b)
{
    uint64_t free_b = 0, total = 0;
    if (b->o.gpu_mem) return b->o.gpu_mem;
    return gpu_mem_info(&free_b, &total) ? 0 : free_b / 2;
}
#endif

int backend_gpu_fits(backend *b, const arc *a)
{
#ifdef TDC_HAVE_CUDA
    uint64_t need = table_gpu_need(a);
    for (uint32_t k = 0; k < a->nshards; k++)
        need += shard_gpu_need(a, k);
    return backend_gpu_available() && need <= gpu_room(b);
#else
    (void)b;
    (void)a;
    return 0;
#endif
}

int backend_by_shard(backend *b, ana_ctx *c, int kind, const arc *meta, uint32_t first,
                     uint32_t end, const unsigned char *vis, buf *out)
{
    return backend_by_shard_to(b, c, kind, meta, first, end, vis, ana_sink_buf, out);
}

int backend_pick_devices(int n, int share, int shares, int *dev)
{
    if (n > BACKEND_MAX_GPUS) n = BACKEND_MAX_GPUS;
    int m = shares > 0 && shares < n ? shares : n, k = 0;
    int mine = shares > 0 && m > 0 ? (share % m + m) % m : -1;
    for (int d = 0; d < n; d++)
        if (mine < 0 || d % m == mine) dev[k++] = d;
    return k;
}

int backend_gpu_devices(backend *b)
{
#ifdef TDC_HAVE_CUDA
    if (!backend_gpu_available()) return 0;
    pthread_mutex_lock(&b->gpu_lock);
    if (!b->ndev) {
        int n = gpu_device_count();
        b->ndev = n < 1 ? -1 : backend_pick_devices(n, b->o.gpu_share, b->o.gpu_shares, b->dev);
    }
    pthread_mutex_unlock(&b->gpu_lock);
    return b->ndev > 0 ? b->ndev : 0;
#else
    (void)b;
    return 0;
#endif
}

ana_part_fn backend_part_fn(backend *b, int kind, const arc *meta, uint32_t first, uint32_t end)
{
#ifdef TDC_HAVE_CUDA
    int on = b->o.mode == BACKEND_ON;
    if (b->o.mode == BACKEND_AUTO && backend_gpu_available()) { /* where the GPU is faster */
        uint64_t scope, all;
        backend_scope_bytes(meta, first, end, &scope, &all);
        on = scope >= b->o.auto_min && backend_cli_gpu_wins(kind, scope, all, backend_cpus(), 0);
    }
    return on && backend_gpu_devices(b) ? part_on_gpu : NULL;
#else
    (void)b;
    (void)kind;
    (void)meta;
    (void)first;
    (void)end;
    return NULL;
#endif
}

/* The shard parts b's devices have computed. */
static uint64_t dev_parts(backend *b)
{
    uint64_t n = 0;
    for (int d = 0; d < BACKEND_MAX_GPUS; d++)
        n += __atomic_load_n(&b->dev_parts[d], __ATOMIC_RELAXED);
    return n;
}

/* A sink that counts the bytes it passes on. */
typedef struct counted {
    ana_sink sink;
    void *ctx;
    uint64_t bytes;
} counted;

static int count_sink(void *ctx, const unsigned char *p, size_t n)
{
    counted *k = ctx;
    k->bytes += n;
    return k->sink(k->ctx, p, n);
}

int backend_by_shard_to(backend *b, ana_ctx *c, int kind, const arc *meta, uint32_t first,
                        uint32_t end, const unsigned char *vis, ana_sink sink, void *sctx)
{
    ana_part_fn fn = backend_part_fn(b, kind, meta, first, end);
    counted k = {sink, sctx, 0};
    uint64_t parts = dev_parts(b);
    ana_ctx *own = NULL;
    if (!c) c = b->ana;
#ifdef TDC_HAVE_CUDA
    /* On the GPUs, consecutive shards go up as one part while they fit the room a whole
     * upload may take, BACKEND_PART_ROOM at most unless gpu_mem says: fewer uploads,
     * preparations and parts to merge; at least one part per device, so that each has its
     * share. */
    uint64_t room = fn ? gpu_room(b) : 0;
    if (!b->o.gpu_mem && room > BACKEND_PART_ROOM) room = BACKEND_PART_ROOM;
    if (room > table_gpu_need(meta)) {
        ana_opts o = *ana_ctx_opts(c);
        o.group_room = room - table_gpu_need(meta);
        o.group_min = b->ndev;
        o.group_need = shard_gpu_need;
        if (!(c = own = ana_ctx_new(&o))) return tdc_error(-ENOMEM, "out of memory");
    }
#endif
    int rc = ana_by_shard_to(c, fn, b, kind, meta, first, end, vis, count_sink, &k);
    if (!rc) account(b, dev_parts(b) == parts, k.bytes); /* the GPUs' if they took parts */
    ana_ctx_free(own);
    return rc;
}

void backend_release(backend *b, const arc *a)
{
    if (!b) return;
#ifdef TDC_HAVE_CUDA
    pthread_mutex_lock(&b->gpu_lock);
    for (int i = 0; i < BACKEND_GPU_CACHE; i++)
        if (b->res[i].g && (!a || b->res[i].a == a)) {
            gpu_free(b->res[i].g);
            b->res[i].g = NULL;
            b->res[i].a = NULL;
        }
    pthread_mutex_unlock(&b->gpu_lock);
#else
    (void)a;
#endif
}

/* ---- Batched insert/append offsets on the CPU ---- */

static int check_ops(uint32_t nfiles, const tdc_edit *ops, size_t n, size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (ops[i].file >= nfiles || ops[i].kind > TDC_EDIT_APPEND) {
            *bad = i;
            return tdc_error(-EINVAL, "edit %zu: no file %u or bad kind", i, ops[i].file);
        }
    return 0;
}

/* A treap of pieces per file, ordered by position: a piece is `len` bytes; `op` is the
 * operation whose first byte starts it (UINT32_MAX otherwise). Node 0 is the empty tree. */
typedef struct tnode {
    uint64_t len, sum;
    uint32_t l, r, prio, op;
} tnode;

typedef struct treap {
    tnode *t;
    uint32_t n;
    uint64_t rng;
} treap;

static uint32_t tr_new(treap *T, uint64_t len, uint32_t op)
{
    uint32_t u = T->n++;
    T->rng ^= T->rng << 13;
    T->rng ^= T->rng >> 7;
    T->rng ^= T->rng << 17;
    T->t[u] = (tnode){len, len, 0, 0, (uint32_t)T->rng, op};
    return u;
}

static void tr_upd(tnode *t, uint32_t u)
{
    t[u].sum = t[t[u].l].sum + t[u].len + t[t[u].r].sum;
}

static uint32_t tr_merge(tnode *t, uint32_t a, uint32_t b)
{
    if (!a || !b) return a ? a : b;
    if (t[a].prio > t[b].prio) {
        t[a].r = tr_merge(t, t[a].r, b);
        tr_upd(t, a);
        return a;
    }
    t[b].l = tr_merge(t, a, t[b].l);
    tr_upd(t, b);
    return b;
}

/* Pieces starting before p go left, the others right; a piece across p is cut in two. So an
 * insert at p goes after every byte before p and before every piece (even an empty one) that
 * starts at p: "a later insert at or before an operation's start pushes it on". */
static void tr_split(treap *T, uint32_t u, uint64_t p, uint32_t *L, uint32_t *R)
{
    tnode *t = T->t;
    if (!u) {
        *L = *R = 0;
        return;
    }
    uint64_t ls = t[t[u].l].sum;
    if (p <= ls) {
        tr_split(T, t[u].l, p, L, &t[u].l);
        tr_upd(t, u);
        *R = u;
    } else if (p >= ls + t[u].len) {
        tr_split(T, t[u].r, p - ls - t[u].len, &t[u].r, R);
        tr_upd(t, u);
        *L = u;
    } else {
        uint64_t cut = p - ls;
        uint32_t v = tr_new(T, t[u].len - cut, UINT32_MAX), rr = t[u].r;
        t[u].len = cut;
        t[u].r = 0;
        tr_upd(t, u);
        *L = u;
        *R = tr_merge(t, v, rr);
    }
}

/* pos[op] for every piece that starts an operation, by an in-order walk. */
static int tr_walk(const tnode *t, uint32_t root, uint64_t *pos)
{
    vec32 st = {0};
    uint64_t off = 0;
    uint32_t u = root;
    while (u || st.n) {
        while (u) {
            if (vec32_push(&st, u)) {
                vec32_free(&st);
                return -ENOMEM;
            }
            u = t[u].l;
        }
        u = st.p[--st.n];
        if (t[u].op != UINT32_MAX) pos[t[u].op] = off;
        off += t[u].len;
        u = t[u].r;
    }
    vec32_free(&st);
    return 0;
}

/* Operations of each file in batch order: idx[first[f] .. first[f + 1]). */
static int group(uint32_t nfiles, const tdc_edit *ops, size_t n, size_t **first, uint32_t **idx)
{
    size_t *fi = calloc((size_t)nfiles + 2, sizeof *fi);
    uint32_t *ix = malloc((n ? n : 1) * sizeof *ix);
    if (!fi || !ix) {
        free(fi);
        free(ix);
        return tdc_error(-ENOMEM, "edit offsets: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        fi[ops[i].file + 2]++;
    for (uint32_t f = 0; f < nfiles; f++)
        fi[f + 2] += fi[f + 1];
    for (size_t i = 0; i < n; i++)
        ix[fi[ops[i].file + 1]++] = (uint32_t)i;
    *first = fi;
    *idx = ix;
    return 0;
}

#define PAIRWISE_MAX 64 /* files with at most this many operations: the quadratic loop */

/* Sequence meaning: per file, each operation's start moves on by every later operation that
 * lands at or before it; the quadratic loop for few operations, a treap of pieces otherwise. */
static int seq_pos(const uint64_t *size, uint32_t nfiles, const tdc_edit *ops, const uint64_t *at,
                   uint64_t *pos, const size_t *first, const uint32_t *idx)
{
    size_t most = 0;
    for (uint32_t f = 0; f < nfiles; f++)
        if (first[f + 1] - first[f] > most) most = first[f + 1] - first[f];
    treap T = {NULL, 1, 0x9e3779b97f4a7c15ull};
    if (most > PAIRWISE_MAX && !(T.t = calloc(2 * most + 2, sizeof(tnode))))
        return tdc_error(-ENOMEM, "edit offsets: out of memory");
    int rc = 0;
    for (uint32_t f = 0; f < nfiles && !rc; f++) {
        const uint32_t *L = idx + first[f];
        size_t m = first[f + 1] - first[f];
        if (m <= PAIRWISE_MAX) {
            for (size_t k = 0; k < m; k++) {
                uint64_t c = at[L[k]];
                for (size_t j = k + 1; j < m; j++)
                    if (at[L[j]] <= c) c += ops[L[j]].len;
                pos[L[k]] = c;
            }
            continue;
        }
        T.n = 1;
        uint32_t root = tr_new(&T, size[f], UINT32_MAX);
        for (size_t k = 0; k < m; k++) {
            uint32_t l, r;
            tr_split(&T, root, at[L[k]], &l, &r);
            root = tr_merge(T.t, tr_merge(T.t, l, tr_new(&T, ops[L[k]].len, L[k])), r);
        }
        if (tr_walk(T.t, root, pos)) rc = tdc_error(-ENOMEM, "edit offsets: out of memory");
    }
    free(T.t);
    return rc;
}

typedef struct ins_key {
    uint64_t off;
    uint32_t i, rank;
} ins_key;

static int by_off(const void *x, const void *y)
{
    const ins_key *a = x, *b = y;
    if (a->off != b->off) return a->off < b->off ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Batch meaning, per file: an insert's final position adds the inserts sorted before it by
 * (offset, batch order); its offset in batch order adds those of them earlier in the batch (a
 * Fenwick tree over the sorted order, filled in batch order). Appends follow every insert. */
static int batch_pos(const uint64_t *size, uint32_t nfiles, const tdc_edit *ops, uint64_t *at,
                     uint64_t *pos, const size_t *first, const uint32_t *idx)
{
    size_t most = 0;
    for (uint32_t f = 0; f < nfiles; f++)
        if (first[f + 1] - first[f] > most) most = first[f + 1] - first[f];
    ins_key *k = malloc((most + 1) * sizeof *k);
    uint64_t *fen = malloc((most + 1) * sizeof *fen);
    uint32_t *rank = malloc((most + 1) * sizeof *rank);
    if (!k || !fen || !rank) {
        free(k), free(fen), free(rank);
        return tdc_error(-ENOMEM, "edit offsets: out of memory");
    }
    for (uint32_t f = 0; f < nfiles; f++) {
        const uint32_t *L = idx + first[f];
        size_t m = first[f + 1] - first[f], ni = 0;
        for (size_t j = 0; j < m; j++)
            if (ops[L[j]].kind == TDC_EDIT_INSERT) k[ni] = (ins_key){ops[L[j]].off, L[j], 0}, ni++;
        for (size_t j = 0; j < ni; j++)
            k[j].rank = (uint32_t)j; /* position among the file's inserts, batch order */
        qsort(k, ni, sizeof *k, by_off);
        uint64_t ins = 0;
        for (size_t j = 0; j < ni; j++) {
            pos[k[j].i] = k[j].off + ins;
            ins += ops[k[j].i].len;
            rank[k[j].rank] = (uint32_t)j;
        }
        memset(fen, 0, (ni + 1) * sizeof *fen);
        uint64_t app = size[f] + ins;
        for (size_t j = 0, r = 0; j < m; j++) {
            const tdc_edit *o = &ops[L[j]];
            if (o->kind == TDC_EDIT_APPEND) {
                pos[L[j]] = app;
                app += o->len;
                continue;
            }
            uint64_t s = 0;
            size_t x = rank[r++];
            for (size_t y = x; y > 0; y -= y & -y)
                s += fen[y];
            at[L[j]] = o->off + s;
            for (size_t y = x + 1; y <= ni; y += y & -y)
                fen[y] += o->len;
        }
    }
    free(k), free(fen), free(rank);
    return 0;
}

/* Checks in batch order (the first bad operation), each operation's size-of-file before it (an
 * append's edit offset; the bound of a sequence insert), final sizes. */
static int edit_sizes(int mode, const uint64_t *size, uint32_t nfiles, const tdc_edit *ops,
                      size_t n, uint64_t *at, uint64_t *final_size, size_t *bad)
{
    for (uint32_t f = 0; f < nfiles; f++)
        final_size[f] = size[f];
    for (size_t i = 0; i < n; i++) {
        const tdc_edit *o = &ops[i];
        uint64_t cur = final_size[o->file];
        if (o->kind == TDC_EDIT_INSERT &&
            o->off > (mode == TDC_OFFSETS_SEQUENCE ? cur : size[o->file])) {
            *bad = i;
            return tdc_error(-EINVAL, "edit %zu: insert past the end of the file", i);
        }
        at[i] = o->kind == TDC_EDIT_INSERT ? o->off : cur; /* batch inserts: batch_pos */
        final_size[o->file] = cur + o->len;
    }
    return 0;
}

int backend_edit_offsets(int mode, const uint64_t *size, uint32_t nfiles, const tdc_edit *ops,
                         size_t n, uint64_t *at, uint64_t *pos, uint64_t *final_size, size_t *bad)
{
    *bad = 0;
    if (mode != TDC_OFFSETS_SEQUENCE && mode != TDC_OFFSETS_BATCH)
        return tdc_error(-EINVAL, "edit offsets: bad mode %d", mode);
    if (n >= UINT32_MAX) return tdc_error(-EINVAL, "edit offsets: batch too large");
    int rc = check_ops(nfiles, ops, n, bad);
    if (!rc) rc = edit_sizes(mode, size, nfiles, ops, n, at, final_size, bad);
    if (rc) return rc;
    size_t *first = NULL;
    uint32_t *idx = NULL;
    if ((rc = group(nfiles, ops, n, &first, &idx))) return rc;
    rc = mode == TDC_OFFSETS_SEQUENCE ? seq_pos(size, nfiles, ops, at, pos, first, idx)
                                      : batch_pos(size, nfiles, ops, at, pos, first, idx);
    free(first);
    free(idx);
    return rc;
}

int backend_edits(backend *b, int mode, const uint64_t *size, uint32_t nfiles,
                  const tdc_edit *ops, size_t n, uint64_t *at, uint64_t *pos, uint64_t *final_size,
                  size_t *bad, int *on_gpu)
{
    *on_gpu = 0;
#ifdef TDC_HAVE_CUDA
    int m = b ? backend_mode(b) : BACKEND_OFF;
    if ((m == BACKEND_ON || (m == BACKEND_AUTO && n >= BACKEND_EDIT_AUTO_MIN)) &&
        backend_gpu_available()) {
        gpu_edits *e = NULL;
        int rc = gpu_edits_new(&e);
        if (!rc) rc = gpu_edit_offsets(e, mode, size, nfiles, ops, n, at, pos, final_size, bad);
        gpu_edits_free(e);
        *on_gpu = rc == 0;
        if (rc == 0 || rc == -EINVAL) return rc; /* -EINVAL: the batch is wrong, not the GPU */
        backend_fallback(b);
    }
#else
    (void)b;
#endif
    return backend_edit_offsets(mode, size, nfiles, ops, n, at, pos, final_size, bad);
}

/* ---- The byte-by-byte reference ---- */

static int put_at(buf *t, vec32 *ow, uint64_t p, const unsigned char *s, uint64_t len, uint32_t op)
{
    if (buf_reserve(t, len) || (ow && vec32_reserve(ow, len))) return -ENOMEM;
    memmove(t->p + p + len, t->p + p, t->n - p);
    if (len) memcpy(t->p + p, s, len);
    t->n += len;
    if (ow) {
        memmove(ow->p + p + len, ow->p + p, (ow->n - p) * sizeof *ow->p);
        for (uint64_t j = 0; j < len; j++)
            ow->p[p + j] = op;
        ow->n += len;
    }
    return 0;
}

typedef struct ord {
    uint32_t file, i;
    uint64_t off;
} ord;

/* tools/edit.c's batch order: by file, offset descending, batch order descending. */
static int by_reverse_offset(const void *x, const void *y)
{
    const ord *a = x, *b = y;
    if (a->file != b->file) return a->file < b->file ? -1 : 1;
    if (a->off != b->off) return a->off > b->off ? -1 : 1;
    return (a->i < b->i) - (a->i > b->i);
}

int backend_edit_apply(int mode, uint32_t nfiles, buf *text, vec32 *owner, const tdc_edit *ops,
                       size_t n, const unsigned char *const *optext, size_t *bad)
{
    *bad = 0;
    int rc = check_ops(nfiles, ops, n, bad);
    if (rc) return rc;
    if (owner)
        for (uint32_t f = 0; f < nfiles; f++) {
            owner[f].n = 0;
            if (vec32_reserve(&owner[f], text[f].n)) return -ENOMEM;
            for (size_t j = 0; j < text[f].n; j++)
                owner[f].p[j] = UINT32_MAX;
            owner[f].n = text[f].n;
        }
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return -ENOMEM;
    size_t m = 0;
    if (mode == TDC_OFFSETS_SEQUENCE) {
        for (size_t i = 0; i < n; i++)
            order[m++] = i;
    } else {
        ord *o = malloc((n ? n : 1) * sizeof *o);
        size_t k = 0;
        if (!o) {
            free(order);
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            if (ops[i].kind == TDC_EDIT_INSERT) {
                if (ops[i].off > text[ops[i].file].n) { /* nothing applied yet: original size */
                    *bad = i;
                    free(o);
                    free(order);
                    return tdc_error(-EINVAL, "edit %zu: insert past the end of the file", i);
                }
                o[k++] = (ord){ops[i].file, (uint32_t)i, ops[i].off};
            }
        qsort(o, k, sizeof *o, by_reverse_offset);
        for (size_t j = 0; j < k; j++)
            order[m++] = o[j].i;
        for (size_t i = 0; i < n; i++)
            if (ops[i].kind == TDC_EDIT_APPEND) order[m++] = i;
        free(o);
    }
    for (size_t j = 0; j < m && !rc; j++) {
        size_t i = order[j];
        buf *t = &text[ops[i].file];
        uint64_t p = ops[i].kind == TDC_EDIT_APPEND ? t->n : ops[i].off;
        if (p > t->n) {
            *bad = i;
            rc = tdc_error(-EINVAL, "edit %zu: insert past the end of the file", i);
            break;
        }
        if (put_at(t, owner ? &owner[ops[i].file] : NULL, p, optext[i], ops[i].len, (uint32_t)i))
            rc = -ENOMEM;
    }
    free(order);
    return rc;
}
