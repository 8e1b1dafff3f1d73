/* gpucheck: check every CUDA kernel against the CPU on one archive, and time both.
 * usage: gpucheck [--cpu] [--analytics | --reads | --batches] ARCHIVE [SEED]
 *
 * Index build: every rule's expanded length and the depth, against idx_build. Word count: the
 * whole archive plus random subtrees and files, output text against ana_wordcount, directly and
 * through backend_analytic (every mode, the cache, a transient archive, other analytics, four
 * threads at once), plus GPU and CPU times by scope size. Word queries: 100,000 count and
 * search queries (words from the files' own vocabularies, random dictionary words, words the
 * dictionary lacks, and strings that are no word) against idx_count / idx_search. Extract:
 * 100,000 random 64-byte requests and a batch of edge cases (last byte, past EOF, empty, many
 * slices, whole files, a directory), against idx_extract byte for byte. Insert/append offsets:
 * hundreds of small random batches in both offset meanings against the byte-by-byte reference
 * (backend_edit_apply) and the CPU function, bad offsets, then 100,000-operation batches on the
 * archive's file sizes (inserts in sequence and in batch meaning, appends, and all inserts in
 * one file). Reads through the daemon's batcher (backend_read) from 8 threads in each mode
 * against idx_extract, and the CPU/GPU crossover table for reads (--reads: only these).
 * Requests, queries and batches come from a fresh seed each run unless SEED is
 * given. Exit 1 on any difference.
 *
 * Ends with CPU (one thread) and GPU times, each the median of REPS runs after a warm-up.
 * --cpu runs the CPU side alone (no GPU needed): the edit checks against the reference and the
 * CPU times. --analytics runs the index build and the six analytics only; --batches the index
 * build, extract and the edit batches (for large archives, where the CPU side of the word
 * queries takes minutes). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../engine/analytics/ana.h"
#include "../../engine/analytics/analytics.h"
#include "../../engine/backend/backend.h"
#include "../../engine/base/err.h"
#include "../../engine/base/tok.h"
#include "../../engine/index/idx.h"
#include "../../engine/index/words.h"
#include "../../lib/env.h"

#define NREQ 100000
#define REQLEN 64
#define NEDGE 6000 /* over gpu_extract's XDEV_MIN: its device path; the first 1000: the host's */
#define NSCOPE 30
#define REPS 5
#define NQ 100000   /* word queries per batch */
#define NOPS 100000 /* inserts or appends per batch */
#define NSMALL 300  /* small edit batches per offset meaning */

static int cpu_only;
static int fails;
static int ncpu; /* cores of the machine, at most 256: the "all cores" CPU runs */

/* The engine's options from the environment (main), the backend every check goes through, and
 * an analytics context for each traversal and thread count (0: the machine's), made in main
 * with the environment's other options. */
static backend_opts env_opts;
static backend *B;
static ana_ctx *ctxs[3][3];

static ana_ctx *actx(int traversal, int threads)
{
    return ctxs[traversal][threads];
}

/* The context of the environment's own options. */
static ana_ctx *env_ctx(void)
{
    return actx(env_opts.ana.traversal, env_opts.ana.threads);
}
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "gpucheck: MISMATCH: " __VA_ARGS__);                                       \
        fputc('\n', stderr);                                                                       \
        fails++;                                                                                   \
    } while (0)
#define DIE(what)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "gpucheck: %s: %s\n", what, tdc_errmsg());                                 \
        exit(1);                                                                                   \
    } while (0)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int by_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v)
{
    qsort(v, REPS, sizeof *v, by_double);
    return v[REPS / 2];
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "gpucheck: out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct row {
    const char *name;
    double cpu, kern, e2e;
    double pg;   /* end to end with the caller's buffers in pageable memory (0: not measured) */
    double cpun; /* CPU on all cores (ncpu threads; 0: not measured) */
} row;

/* Index build: idx_build against gpu_upload + gpu_index_build; returns the GPU handle. */
static gpu_gram *check_index(const arc *a, idx **xout, row *t)
{
    double c[REPS], k[REPS], e[REPS];
    idx *x = NULL;
    gpu_gram *g = NULL;
    for (int r = 0; r < REPS; r++) {
        idx_free(x);
        double t0 = now_ms();
        if (idx_build(a, &x)) DIE("idx_build");
        c[r] = now_ms() - t0;
    }
    *t = (row){"index build", median(c), 0, 0, 0, 0};
    *xout = x;
    if (cpu_only) return NULL;
    for (int r = -1; r < REPS; r++) { /* r = -1 warms up the CUDA context */
        gpu_free(g);
        double t0 = now_ms();
        if (backend_gpu_upload(a, &g)) DIE("gpu_upload");
        if (gpu_index_build(g)) DIE("gpu_index_build");
        if (r < 0) continue;
        e[r] = now_ms() - t0;
        k[r] = gpu_kernel_ms(g);
    }
    t->kern = median(k);
    t->e2e = median(e);
    uint64_t *len = xmalloc(((size_t)a->g.nrules + 1) * sizeof *len);
    uint32_t depth, bad = 0;
    if (gpu_rule_lens(g, len, &depth)) DIE("gpu_rule_lens");
    for (uint32_t r = 0; r <= a->g.nrules; r++)
        if (len[r] != idx_rule_len(x, r) && !bad++)
            FAIL("rule %u: gpu length %llu, cpu %llu", r, (unsigned long long)len[r],
                 (unsigned long long)idx_rule_len(x, r));
    if (bad) FAIL("%u rule lengths differ", bad);
    if (depth != idx_depth(x)) FAIL("depth: gpu %u, cpu %u", depth, idx_depth(x));
    if (!bad && depth == idx_depth(x))
        printf("index build: %u rule lengths and depth %u agree\n", a->g.nrules + 1, depth);
    free(len);
    return g;
}

/* Length of the line at b->p + i, at most 80. */
static int line(const buf *b, size_t i)
{
    int n = 0;
    while (i + n < b->n && b->p[i + n] != '\n' && n < 80)
        n++;
    return n;
}

/* 1 if equal; else report the first line where got and want part. */
static int same(const buf *got, const buf *want)
{
    size_t i = 0, n = got->n < want->n ? got->n : want->n;
    while (i < n && got->p[i] == want->p[i])
        i++;
    if (i == n && got->n == want->n) return 1;
    while (i > 0 && want->p[i - 1] != '\n')
        i--;
    fprintf(stderr, "gpucheck: at byte %zu: gpu '%.*s', cpu '%.*s'\n", i, line(got, i),
            (const char *)got->p + i, line(want, i), (const char *)want->p + i);
    return 0;
}

static void check_wordcount(const arc *a, gpu_gram *g, uint64_t *seed, row *t)
{
    int before = fails;
    double c[REPS], k[REPS], e[REPS];
    buf want = {0}, got = {0};
    for (int r = 0; r < REPS; r++) {
        want.n = 0;
        double t0 = now_ms();
        if (ana_wordcount(env_ctx(), a, 0, a->nents, NULL, &want)) DIE("ana_wordcount");
        c[r] = now_ms() - t0;
    }
    /* Whether the GPU serves the whole archive or leaves it to the CPU (cut long words). */
    uint64_t *cnt = xmalloc(((size_t)a->g.ntokens + 1) * sizeof *cnt);
    int rc = gpu_wordcount(g, 0, a->nents, cnt);
    if (rc && rc != -ENOTSUP) DIE("gpu_wordcount");
    free(cnt);
    for (int r = -1; r < REPS; r++) {
        got.n = 0;
        double t0 = now_ms();
        if (backend_wordcount(env_ctx(), a, g, 0, a->nents, &got)) DIE("backend_wordcount");
        if (r < 0) continue;
        e[r] = now_ms() - t0;
        k[r] = rc ? 0 : gpu_kernel_ms(g);
        if (!same(&got, &want)) FAIL("wordcount of the whole archive differs (run %d)", r);
    }
    *t = (row){rc ? "wordcount (CPU fallback)" : "wordcount, whole archive",
               median(c),
               median(k),
               median(e),
               0,
               0};
    int gpu_scopes = 0, bad = 0;
    for (int s = 0; s < NSCOPE; s++) {
        uint32_t first = (uint32_t)(rnd(seed) % a->nents), end = ana_subtree_end(a, first);
        want.n = got.n = 0;
        if (ana_wordcount(env_ctx(), a, first, end, NULL, &want)) DIE("ana_wordcount");
        if (backend_wordcount(env_ctx(), a, g, first, end, &got)) DIE("backend_wordcount");
        if (!same(&got, &want) && !bad++)
            FAIL("wordcount of entries [%u, %u) ('%s') differs", first, end, a->ents[first].path);
        cnt = xmalloc(((size_t)a->g.ntokens + 1) * sizeof *cnt);
        gpu_scopes += gpu_wordcount(g, first, end, cnt) == 0;
        free(cnt);
    }
    if (bad) FAIL("%d of %d wordcount scopes differ", bad, NSCOPE);
    printf("wordcount: whole archive (%s) and %d random scopes (%d on the GPU) %s\n",
           rc ? "CPU fallback: words longer than TOK_CAP" : "on the GPU", NSCOPE, gpu_scopes,
           fails > before ? "DIFFER" : "agree");
    buf_free(&want);
    buf_free(&got);
}

/* Compare a GPU batch's output with the CPU's. */
static void same_extract(const gpu_req *rq, size_t n, int64_t m, uint64_t pos,
                         const unsigned char *got, const uint32_t *gn, const unsigned char *want,
                         const uint32_t *wn)
{
    if ((uint64_t)m != pos) {
        FAIL("extract: gpu %lld bytes, cpu %llu", (long long)m, (unsigned long long)pos);
        return;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (gn[i] != wn[i] || memcmp(got + at, want + at, wn[i])) {
            FAIL("extract (entry %u, offset %llu, length %u): gpu %u bytes, cpu %u, or "
                 "different bytes",
                 rq[i].ent, (unsigned long long)rq[i].off, rq[i].len, gn[i], wn[i]);
            return;
        }
        at += wn[i];
    }
}

/* A contiguous share of a batch, extracted by one CPU thread to where the one-thread run put it. */
typedef struct xpart {
    const idx *x;
    const gpu_req *rq;
    size_t lo, hi;
    const uint64_t *at;
    unsigned char *out;
} xpart;

static void *xpart_main(void *p)
{
    const xpart *q = p;
    for (size_t i = q->lo; i < q->hi; i++)
        if (idx_extract(q->x, q->rq[i].ent, q->rq[i].off, q->out + q->at[i], q->rq[i].len) < 0)
            DIE("idx_extract");
    return NULL;
}

/* The batch on every core of the machine (ncpu threads, equal shares); milliseconds. */
static double cpu_extract_all(const idx *x, const gpu_req *rq, size_t n, const uint64_t *at,
                              unsigned char *out)
{
    pthread_t th[256];
    xpart part[256];
    double t0 = now_ms();
    for (int i = 0; i < ncpu; i++) {
        part[i] = (xpart){x, rq, n * i / ncpu, n * (i + 1) / ncpu, at, out};
        if (pthread_create(&th[i], NULL, xpart_main, &part[i])) DIE("pthread_create");
    }
    for (int i = 0; i < ncpu; i++)
        pthread_join(th[i], NULL);
    return now_ms() - t0;
}

/* Run a batch on both sides and compare; returns the bytes extracted. With times, fill them
 * (c: one CPU thread, cn: all cores, checked against c's bytes):
 * e with the requests and output in page-locked memory (gpu_host_alloc, what a batching caller
 * uses), pg with them in ordinary malloc memory. */
static uint64_t run_extract(const idx *x, gpu_gram *g, const gpu_req *rq, size_t n, double *c,
                            double *cn, double *k, double *e, double *pg)
{
    uint64_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += rq[i].len;
    unsigned char *want = xmalloc(cap), *got = xmalloc(cap), *pin = gpu_host_alloc(cap);
    uint32_t *wn = xmalloc(n * sizeof *wn), *gn = xmalloc(n * sizeof *gn);
    gpu_req *prq = gpu_host_alloc(n * sizeof *prq);
    if (!pin || !prq) DIE("gpu_host_alloc");
    memcpy(prq, rq, n * sizeof *rq);
    uint64_t pos = 0;
    for (int r = 0; r < (c ? REPS : 1); r++) {
        double t0 = now_ms();
        pos = 0;
        for (size_t i = 0; i < n; i++) {
            ssize_t m = idx_extract(x, rq[i].ent, rq[i].off, want + pos, rq[i].len);
            if (m < 0) DIE("idx_extract");
            wn[i] = (uint32_t)m;
            pos += (uint64_t)m;
        }
        if (c) c[r] = now_ms() - t0;
    }
    if (cn) {
        uint64_t *at = xmalloc((n + 1) * sizeof *at);
        at[0] = 0;
        for (size_t i = 0; i < n; i++)
            at[i + 1] = at[i] + wn[i];
        for (int r = 0; r < REPS; r++) {
            memset(got, 0, pos);
            cn[r] = cpu_extract_all(x, rq, n, at, got);
            if (memcmp(got, want, pos)) FAIL("extract on %d CPU threads: different bytes", ncpu);
        }
        free(at);
    }
    for (int pinned = 1; pinned >= 0; pinned--)
        for (int r = -1; r < (c ? REPS : 0); r++) {
            unsigned char *out = pinned ? pin : got;
            double t0 = now_ms();
            int64_t m = gpu_extract(g, pinned ? prq : rq, n, out, cap, gn);
            if (m < 0) DIE("gpu_extract");
            if (e && r >= 0) {
                (pinned ? e : pg)[r] = now_ms() - t0;
                if (pinned) k[r] = gpu_kernel_ms(g);
            }
            same_extract(rq, n, m, pos, out, gn, want, wn);
        }
    free(want);
    free(got);
    gpu_host_free(pin);
    gpu_host_free(prq);
    free(wn);
    free(gn);
    return pos;
}

static void check_extract(const arc *a, const idx *x, gpu_gram *g, uint64_t *seed, row *t)
{
    int before = fails;
    uint32_t *files = xmalloc(a->nents * sizeof *files), nf = 0, dir = UINT32_MAX;
    for (uint32_t i = 0; i < a->nents; i++) {
        if (a->ents[i].type == ARC_REG) files[nf++] = i;
        if (a->ents[i].type == ARC_DIR && dir == UINT32_MAX) dir = i;
    }
    if (!nf) {
        *t = (row){"extract: no regular files", 0, 0, 0, 0, 0};
        free(files);
        return;
    }
    gpu_req *rq = xmalloc(NREQ * sizeof *rq);
    for (size_t i = 0; i < NREQ; i++) {
        uint32_t e = files[rnd(seed) % nf];
        uint64_t size = a->ents[e].size;
        rq[i] = (gpu_req){e, REQLEN, size ? rnd(seed) % size : 0};
    }
    double c[REPS], cn[REPS], k[REPS], e[REPS], pg[REPS];
    uint64_t bytes = run_extract(x, g, rq, NREQ, c, cn, k, e, pg);
    static char name[64];
    snprintf(name, sizeof name, "extract %d x %d B", NREQ, REQLEN);
    *t = (row){name, median(c), median(k), median(e), median(pg), median(cn)};
    /* Edge cases, as tests/tools/extractcheck draws them, plus multi-slice and whole files. */
    for (size_t i = 0; i < NEDGE; i++) {
        uint32_t f = files[rnd(seed) % nf];
        uint64_t size = a->ents[f].size, off = size ? rnd(seed) % size : 0, len;
        switch (rnd(seed) % 6) {
        case 0:
            off = size ? size - 1 : 0;
            len = 1 + rnd(seed) % 8;
            break;
        case 1:
            off = size + rnd(seed) % 100;
            len = 1 + rnd(seed) % 100;
            break;
        case 2:
            len = 0;
            break;
        case 3:
            len = rnd(seed) % 20000;
            break;
        case 4:
            off = 0;
            len = size < (1u << 20) ? size : (1u << 20);
            break;
        default:
            len = 1 + rnd(seed) % 300;
        }
        rq[i] = (gpu_req){f, (uint32_t)len, off};
    }
    uint64_t edge = run_extract(x, g, rq, NEDGE, NULL, NULL, NULL, NULL, NULL);
    run_extract(x, g, rq, 1000, NULL, NULL, NULL, NULL, NULL);
    unsigned char one;
    uint32_t n1;
    if (dir != UINT32_MAX &&
        gpu_extract(g, &(gpu_req){dir, 1, 0}, 1, &one, 1, &n1) != idx_extract(x, dir, 0, &one, 1))
        FAIL("extract from a directory: gpu and cpu disagree");
    /* A batch with one request on a directory fails as a whole, on either path. */
    const size_t sizes[] = {NEDGE, 1000};
    for (size_t si = 0; dir != UINT32_MAX && si < 2; si++) {
        size_t m = sizes[si], cap = 0;
        for (size_t i = 0; i < m; i++)
            cap += rq[i].len;
        unsigned char *out = xmalloc(cap + 1);
        uint32_t *gn = xmalloc(m * sizeof *gn), keep = rq[m / 2].ent;
        rq[m / 2].ent = dir;
        if (gpu_extract(g, rq, m, out, cap + 1, gn) != -EINVAL)
            FAIL("extract: a batch of %zu with a directory in it did not fail", m);
        rq[m / 2].ent = keep;
        free(out);
        free(gn);
    }
    printf("extract: %d requests (%llu bytes) and %d edge cases (%llu bytes; the first 1000 again "
           "alone) %s\n",
           NREQ, (unsigned long long)bytes, NEDGE, (unsigned long long)edge,
           fails > before ? "DIFFER" : "agree");
    free(rq);
    free(files);
}

/* ---- The daemon's read batcher (backend_read) and the CPU/GPU crossover for reads ---- */

#define RTHREADS 8
#define RREADS 1500 /* per thread */

typedef struct rthr {
    const arc *a;
    const idx *x;
    const uint32_t *files;
    uint32_t nf;
    uint64_t seed, gen;
    int fails;
    uint64_t bytes;
} rthr;

static ssize_t cpu_extract(void *arg, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    return idx_extract((const idx *)arg, ent, off, dst, n);
}

/* A read as the daemon makes one: inside the file, 1 B to 1 MiB (most small, as FUSE sends). */
static gpu_req random_read(const arc *a, const uint32_t *files, uint32_t nf, uint64_t *seed)
{
    uint32_t e = files[rnd(seed) % nf];
    uint64_t size = a->ents[e].size, off = size ? rnd(seed) % size : 0;
    uint64_t len = 1 + rnd(seed) % ((uint64_t)4 << (rnd(seed) % 19)); /* up to 1 MiB */
    if (len > size - off) len = size - off;
    return (gpu_req){e, (uint32_t)len, off};
}

static void *rthr_main(void *p)
{
    rthr *t = p;
    unsigned char *want = xmalloc(1 << 20), *got = xmalloc(1 << 20);
    for (int i = 0; i < RREADS; i++) {
        gpu_req q = random_read(t->a, t->files, t->nf, &t->seed);
        if (!q.len) continue;
        ssize_t w = idx_extract(t->x, q.ent, q.off, want, q.len);
        ssize_t g =
            backend_read(B, t->a, t->gen, q.ent, q.off, got, q.len, cpu_extract, (void *)t->x);
        if (w != (ssize_t)q.len || g != w || memcmp(want, got, q.len)) t->fails++;
        t->bytes += q.len;
    }
    free(want);
    free(got);
    return NULL;
}

static unsigned long long read_stat(const char *key)
{
    char st[1024];
    backend_stats(B, st, sizeof st);
    const char *p = strstr(st, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* RTHREADS threads read at once through backend_read in each mode; every read must equal
 * idx_extract, and mode on must have served them on the GPU in batches of several. */
static void check_batcher(const arc *a, const idx *x, const uint32_t *files, uint32_t nf,
                          uint64_t *seed)
{
    static const char *names[3] = {"off", "auto", "on"};
    for (int m = 0; m < 3; m++) {
        backend_set_mode(B, m);
        unsigned long long g0 = read_stat("reads gpu: "), bt0 = read_stat("bytes in ");
        rthr t[RTHREADS];
        pthread_t th[RTHREADS];
        for (int i = 0; i < RTHREADS; i++) {
            t[i] = (rthr){a, x, files, nf, rnd(seed), 7, 0, 0};
            if (pthread_create(&th[i], NULL, rthr_main, &t[i])) DIE("pthread_create");
        }
        int bad = 0;
        uint64_t bytes = 0;
        for (int i = 0; i < RTHREADS; i++) {
            pthread_join(th[i], NULL);
            bad += t[i].fails;
            bytes += t[i].bytes;
        }
        unsigned long long greq = read_stat("reads gpu: ") - g0,
                           batches = read_stat("bytes in ") - bt0;
        if (bad) FAIL("backend_read, gpu=%s: %d reads differ from idx_extract", names[m], bad);
        if (m == BACKEND_OFF && greq) FAIL("backend_read, gpu=off: %llu reads on the GPU", greq);
        if (m == BACKEND_ON && (!greq || batches >= greq))
            FAIL("backend_read, gpu=on: %llu reads on the GPU in %llu batches", greq, batches);
        printf("read batcher, gpu=%s: %d threads x %d reads (%llu bytes) agree; %llu on the GPU "
               "in %llu batches\n",
               names[m], RTHREADS, RREADS, (unsigned long long)bytes, greq, batches);
    }
    backend_set_mode(B, env_opts.mode);
    backend_release(B, a);
}

/* Reads of `size` bytes, `count` at once: the CPU's time for one such read (one thread, a
 * fresh cursor, as a random read in the daemon) against the GPU's time for the batch of
 * `count` (requests up, extract, bytes back into pinned memory, copied out to each reader). */
static void crossover(const arc *a, const idx *x, gpu_gram *g, const uint32_t *files, uint32_t nf,
                      uint64_t *seed)
{
    static const uint32_t sizes[] = {4096, 16384, 32768, 65536, 131072, 262144, 1048576};
    static const uint32_t counts[] = {1, 4, 16, 64};
    unsigned char *pin = gpu_host_alloc((size_t)64 << 20), *dst = xmalloc((size_t)64 << 20);
    uint32_t *got = xmalloc(64 * sizeof *got);
    if (!pin) DIE("gpu_host_alloc");
    printf("reads: CPU one read (us, 1 thread) vs GPU one batch of `count` reads (us), medians "
           "of %d\n%9s %6s %12s %12s %10s %12s\n",
           REPS, "size", "count", "cpu per read", "gpu batch", "gpu/cpu", "gpu MB/s");
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        uint32_t big[4096], nb = 0;
        for (uint32_t i = 0; i < nf && nb < 4096; i++)
            if (a->ents[files[i]].size >= sizes[si]) big[nb++] = files[i];
        if (!nb) continue;
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
            uint32_t n = counts[ci];
            gpu_req rq[64];
            double c[REPS], e[REPS];
            for (int r = -1; r < REPS; r++) {
                for (uint32_t i = 0; i < n; i++) {
                    uint32_t f = big[rnd(seed) % nb];
                    rq[i] = (gpu_req){f, sizes[si], rnd(seed) % (a->ents[f].size - sizes[si] + 1)};
                }
                double t0 = now_ms();
                for (uint32_t i = 0; i < n; i++)
                    if (idx_extract(x, rq[i].ent, rq[i].off, dst + (size_t)i * sizes[si],
                                    sizes[si]) != (ssize_t)sizes[si])
                        DIE("idx_extract");
                double t1 = now_ms();
                int64_t m = gpu_extract(g, rq, n, pin, (size_t)64 << 20, got);
                if (m != (int64_t)n * sizes[si]) DIE("gpu_extract");
                if (memcmp(pin, dst, (size_t)m)) FAIL("crossover batch: gpu and cpu differ");
                memcpy(dst, pin, (size_t)m);
                double t2 = now_ms();
                if (r >= 0) {
                    c[r] = (t1 - t0) / n * 1e3;
                    e[r] = (t2 - t1) * 1e3;
                }
            }
            double cm = median(c), em = median(e);
            printf("%9u %6u %12.1f %12.1f %10.2f %12.0f\n", sizes[si], n, cm, em, em / cm,
                   (double)n * sizes[si] / em);
        }
    }
    printf("(gpu/cpu < 1: the batch is done on the GPU before one of its reads on the CPU; the\n"
           " auto threshold BACKEND_READ_MIN_BYTES is %zu bytes)\n",
           (size_t)BACKEND_READ_MIN_BYTES);
    gpu_host_free(pin);
    free(dst);
    free(got);
}

static void check_reads(const arc *a, const idx *x, gpu_gram *g, uint64_t *seed)
{
    uint32_t *files = xmalloc(a->nents * sizeof *files), nf = 0;
    for (uint32_t i = 0; i < a->nents; i++)
        if (a->ents[i].type == ARC_REG && a->ents[i].size) files[nf++] = i;
    if (nf) {
        check_batcher(a, x, files, nf, seed);
        crossover(a, x, g, files, nf, seed);
    }
    free(files);
}

/* ---- backend_analytic: modes, cache, transient archives, other analytics, threads ---- */

typedef struct thr {
    const arc *a;
    uint64_t seed;
    int bad, runs;
} thr;

static void *thr_main(void *p)
{
    thr *t = p;
    buf want = {0}, got = {0};
    for (int i = 0; i < 12; i++) {
        uint32_t first = (uint32_t)(rnd(&t->seed) % t->a->nents);
        uint32_t end = i % 3 ? ana_subtree_end(t->a, first) : t->a->nents;
        want.n = got.n = 0;
        if (ana_wordcount(env_ctx(), t->a, first, end, NULL, &want) ||
            backend_analytic(B, ANA_WORDCOUNT, t->a, 7, first, end, NULL, &got) || !same(&got, &want))
            t->bad++;
        t->runs++;
    }
    buf_free(&want);
    buf_free(&got);
    return NULL;
}

/* Requests served by the GPU so far, from backend_stats. */
static unsigned long long gpu_requests(char *st, size_t n)
{
    unsigned long long r[4] = {0, 0, 0, 0};
    backend_stats(B, st, n);
    if (sscanf(st, "gpu: %llu requests %llu bytes; cpu: %llu requests %llu bytes", &r[0], &r[1],
               &r[2], &r[3]) != 4)
        FAIL("backend_stats: '%s'", st);
    return r[0];
}

/* ---- backend_by_shard: every analytic in parts of shards through the GPU ---- */

/* An archive of several shards (a, loaded whole; path to open it again unloaded): every
 * analytic, over the whole archive and random scopes, in parts of consecutive shards on the
 * GPU (as large as the device room allows, at least one per device) equals the CPU on the
 * archive loaded whole; each part went to the GPU (no fallback), and every visible device
 * took parts. Prints the times of the whole archive's
 * analytics: by shard on the GPUs (a second run, the devices started), by shard on every
 * core, whole on the CPU. --shards runs only this. */
static void check_by_shard(const char *path, const arc *a, uint64_t *seed)
{
    arc *m;
    if (arc_open_meta(path, &m)) DIE(path);
    int before = fails;
    char st[1024];
    buf want = {0}, got = {0};
    printf("backend_by_shard, %u shards, whole archive (ms):\n  %-14s %14s %14s %14s\n",
           m->nshards, "analytic", "gpu in parts", "cpu by shard", "cpu whole");
    for (int k = 0; k < ANA_NIDS; k++) {
        for (int s = 0; s < 4; s++) {
            uint32_t first = s ? (uint32_t)(rnd(seed) % a->nents) : 0,
                     end = ana_subtree_end(a, first);
            double t0 = now_ms();
            want.n = got.n = 0;
            if (ana_table[k].cpu(env_ctx(), a, first, end, NULL, &want)) DIE(ana_table[k].name);
            double t1 = now_ms();
            backend_set_mode(B, BACKEND_ON);
            unsigned long long r0 = gpu_requests(st, sizeof st);
            if (!s && backend_by_shard(B, NULL, k, m, first, end, NULL, &got)) /* warm the devices */
                DIE("backend_by_shard");
            got.n = 0;
            t1 = now_ms();
            if (backend_by_shard(B, NULL, k, m, first, end, NULL, &got)) DIE("backend_by_shard");
            double t2 = now_ms();
            if (!same(&got, &want))
                FAIL("backend_by_shard %s [%u, %u) differs", ana_table[k].name, first, end);
            if (gpu_requests(st, sizeof st) == r0 && want.n) /* parts that printed anything */
                FAIL("backend_by_shard %s [%u, %u): no part on the GPU", ana_table[k].name,
                     first, end);
            if (s) continue;
            backend_set_mode(B, BACKEND_OFF);
            got.n = 0;
            double t3 = now_ms();
            if (backend_by_shard(B, NULL, k, m, 0, a->nents, NULL, &got) || !same(&got, &want))
                FAIL("backend_by_shard %s on the CPU differs", ana_table[k].name);
            double t4 = now_ms();
            printf("  %-14s %14.1f %14.1f %14.1f\n", ana_table[k].name, t2 - t1, t4 - t3, t1 - t0);
        }
    }
    gpu_requests(st, sizeof st);
    if (strstr(st, "fallbacks")) FAIL("backend_by_shard: a part fell back to the CPU: %s", st);
    /* every visible device took parts (CUDA_VISIBLE_DEVICES) */
    const char *by = strstr(st, "shard parts by gpu: ");
    int used = 0;
    for (const char *q = by; q && (q = strchr(q, ':')); q++)
        used++;
    used = by ? used - 1 : 0; /* the label's own colon */
    int ndev = gpu_device_count();
    if (used < (ndev < BACKEND_MAX_GPUS ? ndev : BACKEND_MAX_GPUS) && m->nshards >= (uint32_t)ndev)
        FAIL("backend_by_shard: %d of %d devices took parts: %s", used, ndev, st);
    printf("backend_by_shard: every analytic, whole archive and 3 scopes, each part on the GPU: "
           "%s\n  stats: %s\n", fails > before ? "DIFFER" : "agree", st);
    buf_free(&want);
    buf_free(&got);
    arc_free(m);
}

static void check_backend(const arc *a, uint64_t *seed)
{
    int before = fails;
    buf want = {0}, got = {0};
    char st[1024];
    uint64_t all = 0;
    for (uint32_t e = 0; e < a->nents; e++)
        if (a->ents[e].type == ARC_REG) all += a->ents[e].size;
    /* Every mode, whole archive: same text; the GPU takes it in "on", and in "auto" when it is
     * big enough. Files with a cut long word go to the CPU and the rest to the GPU (one
     * request: every test archive with such a file holds others). */
    for (int m = BACKEND_OFF; m <= BACKEND_ON; m++) {
        backend_set_mode(B, m);
        want.n = got.n = 0;
        unsigned long long r0 = gpu_requests(st, sizeof st);
        if (ana_wordcount(env_ctx(), a, 0, a->nents, NULL, &want)) DIE("ana_wordcount");
        if (backend_analytic(B, ANA_WORDCOUNT, a, 1, 0, a->nents, NULL, &got)) DIE("backend_analytic");
        if (!same(&got, &want)) FAIL("backend_analytic wordcount, mode %d, differs", m);
        int exp = m == BACKEND_ON || (m == BACKEND_AUTO && all >= BACKEND_AUTO_MIN_BYTES);
        if (gpu_requests(st, sizeof st) - r0 != (unsigned long long)exp)
            FAIL("backend_analytic wordcount, mode %d: %s the GPU", m, exp ? "not on" : "on");
    }
    /* Random scopes in "on" mode, a transient archive (gen 0), a second generation. */
    backend_set_mode(B, BACKEND_ON);
    for (int s = 0; s < NSCOPE; s++) {
        uint32_t first = (uint32_t)(rnd(seed) % a->nents), end = ana_subtree_end(a, first);
        uint64_t gen = s % 5 == 0 ? 0 : s % 5 == 1 ? 2 : 1;
        want.n = got.n = 0;
        if (ana_wordcount(env_ctx(), a, first, end, NULL, &want)) DIE("ana_wordcount");
        if (backend_analytic(B, ANA_WORDCOUNT, a, gen, first, end, NULL, &got))
            DIE("backend_analytic");
        if (!same(&got, &want))
            FAIL("backend_analytic wordcount [%u, %u) gen %llu differs", first, end,
                 (unsigned long long)gen);
    }
    /* The other analytics go to the CPU function of their id; unknown ids fail. */
    static const int ids[] = {ANA_SORT, ANA_INVINDEX, ANA_TERMVECTOR, ANA_SEQCOUNT,
                              ANA_RANKEDINVINDEX};
    static int (*fns[])(ana_ctx *, const arc *, uint32_t, uint32_t, const unsigned char *,
                        buf *) = {
        ana_sort, ana_invindex, ana_termvector, ana_seqcount, ana_rankedinvindex};
    for (int i = 0; i < 5; i++) {
        uint32_t first = (uint32_t)(rnd(seed) % a->nents), end = ana_subtree_end(a, first);
        want.n = got.n = 0;
        if (fns[i](env_ctx(), a, first, end, NULL, &want)) DIE(ana_table[ids[i]].name);
        if (backend_analytic(B, ids[i], a, 1, first, end, NULL, &got)) DIE("backend_analytic");
        if (!same(&got, &want)) FAIL("backend_analytic %s differs", ana_table[ids[i]].name);
    }
    if (backend_analytic(B, ANA_NIDS, a, 1, 0, a->nents, NULL, &got) != -EINVAL)
        FAIL("backend_analytic accepted an unknown analytic");
    /* Four threads at once in "auto" mode (the GPU when free and the scope is big). */
    backend_set_mode(B, BACKEND_AUTO);
    pthread_t th[4];
    thr ts[4];
    for (int i = 0; i < 4; i++) {
        ts[i] = (thr){a, rnd(seed) | 1, 0, 0};
        pthread_create(&th[i], NULL, thr_main, &ts[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        if (ts[i].bad)
            FAIL("backend_analytic from 4 threads: %d of %d differ", ts[i].bad, ts[i].runs);
    }
    gpu_requests(st, sizeof st);
    printf("backend_analytic: every mode, %d scopes, gen 0 and 2, 5 other analytics, 4 threads %s\n"
           "  stats: %s\n",
           NSCOPE, fails > before ? "DIFFER" : "agree", st);
    /* GPU against CPU by scope size: the first k entries, k growing until the scope has about
     * 4x the bytes of the last one measured, each timed in "on" (resident, cached) and "off"
     * mode. Sets BACKEND_AUTO_MIN_BYTES. */
    printf("wordcount by scope size (median ms of %d; backend_analytic off, on (resident), auto):\n"
           "  %12s %10s %10s %10s\n",
           REPS, "scope bytes", "cpu", "gpu", "auto");
    uint64_t last = 0, bytes = 0;
    for (uint32_t end = 1; end <= a->nents; end++) {
        if (a->ents[end - 1].type == ARC_REG) bytes += a->ents[end - 1].size;
        if (end < a->nents && (bytes < 4096 || bytes < last * 4)) continue;
        double tm[3][REPS];
        unsigned long long r0 = 0, r1 = 0;
        for (int m = 0; m < 3; m++) {
            backend_set_mode(B, m);
            if (m == BACKEND_AUTO) r0 = gpu_requests(st, sizeof st);
            for (int r = -1; r < REPS; r++) {
                got.n = 0;
                double t0 = now_ms();
                if (backend_analytic(B, ANA_WORDCOUNT, a, 1, 0, end, NULL, &got))
                    DIE("backend_analytic");
                if (r >= 0) tm[m][r] = now_ms() - t0;
            }
            if (m == BACKEND_AUTO) r1 = gpu_requests(st, sizeof st);
        }
        int on_gpu = r1 - r0 == (unsigned long long)REPS + 1;
        printf("  %12llu %10.3f %10.3f %10.3f (%s)\n", (unsigned long long)bytes, median(tm[0]),
               median(tm[2]), median(tm[1]), on_gpu ? "gpu" : "cpu");
        last = bytes;
    }
    backend_set_mode(B, env_opts.mode);
    backend_release(B, a);
    buf_free(&want);
    buf_free(&got);
}

/* ---- The six analytics: gpu_analytic against ana_* ---- */

/* gpu_analytic with c's options, as the backend passes them. */
static int gpu_ana(ana_ctx *c, const arc *a, gpu_gram *g, int k, uint32_t first, uint32_t end,
                   const unsigned char *vis, buf *out)
{
    gpu_ana_args args;
    backend_opts o = env_opts;
    o.ana = *ana_ctx_opts(c);
    backend_gpu_args(&o, a, first, &args);
    return gpu_analytic(g, k, first, end, vis, &args, out);
}

/* With a random visibility mask (about half the entries hidden): gpu_analytic against the ana_*
 * function given the same mask. 1 when they differ (reported), else 0. */
static int masked_check(const arc *a, gpu_gram *g, int k, uint32_t first, uint32_t end,
                        uint64_t *seed)
{
    unsigned char *vis = malloc(a->nents ? a->nents : 1);
    buf want = {0}, got = {0};
    if (!vis) DIE("out of memory");
    for (uint32_t e = 0; e < a->nents; e++)
        vis[e] = rnd(seed) % 2;
    if (ana_table[k].cpu(env_ctx(), a, first, end, vis, &want)) DIE(ana_table[k].name);
    int rc = gpu_ana(env_ctx(), a, g, k, first, end, vis, &got);
    if (rc && rc != -ENOTSUP) DIE("gpu_analytic");
    int differ = !rc && !same(&got, &want);
    if (differ)
        FAIL("%s of entries [%u, %u) with a visibility mask differs", ana_table[k].name, first,
             end);
    free(vis);
    buf_free(&want);
    buf_free(&got);
    return differ;
}

static double median_n(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_double);
    return v[n / 2];
}

typedef struct arow {
    const char *name;
    double cpu1, cpu2, kern, e2e;
    size_t bytes;
    int gpu;  /* 0: the GPU left it to the CPU (-ENOTSUP) */
    int skip; /* not run (GPUCHECK_ONLY) */
} arow;

/* Every analytic on the GPU against the CPU: the whole archive, NSCOPE random subtrees and
 * files, and the same scopes through backend_analytic in "on" mode; then CPU times (one and
 * two threads, the most engine/ana uses) and GPU times (kernels, and end to end: the call
 * with the archive resident, text in `out` included), medians of `reps` (CPU: `creps`). */
static void check_analytics(const arc *a, gpu_gram *g, uint64_t *seed, int reps, int creps,
                            int nscope, arow *t)
{
    int before = fails;
    buf want = {0}, got = {0};
    double t0 = now_ms();
    if (gpu_analytic_prepare(g)) DIE("gpu_analytic_prepare");
    printf("analytics: preparation (word ranks, head/tail, paths; once per archive) %.3f ms\n",
           now_ms() - t0);
    backend_set_mode(B, BACKEND_ON);
    int tr0 = env_opts.ana.traversal, th0 = env_opts.ana.threads;
    /* GPUCHECK_ONLY: the analytics to run, by name (all unless set) */
    const char *only = getenv("GPUCHECK_ONLY");
    for (int k = 0; k < ANA_NIDS; k++) {
        arow *r = &t[k];
        before = fails;
        memset(r, 0, sizeof *r);
        r->name = ana_table[k].name;
        if ((r->skip = only && *only && !strstr(only, ana_table[k].name))) continue;
        want.n = got.n = 0;
        double tc = now_ms();
        if (ana_table[k].cpu(actx(tr0, 1), a, 0, a->nents, NULL, &want)) DIE(ana_table[k].name);
        tc = now_ms() - tc; /* one thread: the first timing when creps is 1 */
        int rc = gpu_ana(env_ctx(), a, g, k, 0, a->nents, NULL, &got);
        if (rc && rc != -ENOTSUP) DIE("gpu_analytic");
        r->gpu = rc == 0;
        if (!rc && !same(&got, &want)) FAIL("%s of the whole archive differs", ana_table[k].name);
        r->bytes = want.n;
        int on_gpu = 0, bad = 0;
        /* The per-file analytics in both traversals, forced (the GPU follows the selector's
         * options as ana_* does), each timed. */
        double tt[2] = {0, 0};
        for (int tr = ANA_TOPDOWN; r->gpu && k != 0 && k != 1 && k != 4 && tr <= ANA_BOTTOMUP;
             tr++) {
            double e[64];
            for (int i = -1; i < reps; i++) {
                got.n = 0;
                double t1 = now_ms();
                int rt = gpu_ana(actx(tr, th0), a, g, k, 0, a->nents, NULL, &got);
                if (rt == -ENOTSUP || rt == -ENOMEM) { /* then tt stays 0: not printed */
                    printf("%s: forced %s left to the CPU: %s\n", ana_table[k].name,
                           tr == ANA_TOPDOWN ? "top-down" : "bottom-up", tdc_errmsg());
                    break;
                }
                if (rt) DIE("gpu_analytic");
                if (i >= 0) e[i] = now_ms() - t1;
                if (!same(&got, &want))
                    FAIL("%s of the whole archive, %s, differs", ana_table[k].name,
                         tr == ANA_TOPDOWN ? "top-down" : "bottom-up");
            }
            if (got.n == want.n) tt[tr - 1] = median_n(e, reps);
        }
        if (tt[0] && tt[1])
            printf("%s: gpu end to end, forced top-down %.3f ms, forced bottom-up %.3f ms\n",
                   ana_table[k].name, tt[0], tt[1]);
        for (int s = 0; s < nscope; s++) {
            uint32_t first = (uint32_t)(rnd(seed) % a->nents);
            for (int i = 0; i < 64 && s % 2 && a->ents[first].type != ARC_DIR; i++)
                first = (uint32_t)(rnd(seed) % a->nents); /* every other scope a directory */
            uint32_t end = ana_subtree_end(a, first);
            want.n = got.n = 0;
            if (ana_table[k].cpu(env_ctx(), a, first, end, NULL, &want)) DIE(ana_table[k].name);
            int tr = s % 3 == 0 ? ANA_AUTO : s % 3 == 1 ? ANA_TOPDOWN : ANA_BOTTOMUP;
            rc = gpu_ana(actx(tr, th0), a, g, k, first, end, NULL, &got);
            if (rc && rc != -ENOTSUP) DIE("gpu_analytic");
            on_gpu += rc == 0;
            if (!rc && !same(&got, &want) && !bad++)
                FAIL("%s of entries [%u, %u) ('%s') differs", ana_table[k].name, first, end,
                     a->ents[first].path);
            got.n = 0;
            if (backend_analytic(B, k, a, 3, first, end, NULL, &got))
                DIE("backend_analytic");
            if (!same(&got, &want) && !bad++)
                FAIL("backend_analytic %s of entries [%u, %u) differs", ana_table[k].name, first,
                     end);
            bad += masked_check(a, g, k, first, end, seed);
        }
        if (bad) FAIL("%s: %d of %d scopes differ", ana_table[k].name, bad, nscope);
        printf("%s: whole archive (%s) and %d random scopes (%d on the GPU) %s\n",
               ana_table[k].name, r->gpu ? "on the GPU" : "CPU: the GPU leaves it", nscope, on_gpu,
               fails > before ? "DIFFER" : "agree");
        double c[64], e[64], kk[64];
        for (int th = 1; th <= 2; th++) {
            c[0] = tc;
            for (int i = th == 1 && creps == 1; i < creps; i++) {
                want.n = 0;
                double t1 = now_ms();
                if (ana_table[k].cpu(actx(tr0, th), a, 0, a->nents, NULL, &want))
                    DIE(ana_table[k].name);
                c[i] = now_ms() - t1;
            }
            *(th == 1 ? &r->cpu1 : &r->cpu2) = median_n(c, creps);
        }
        for (int i = -1; r->gpu && i < reps; i++) {
            got.n = 0;
            double t1 = now_ms();
            if (gpu_ana(env_ctx(), a, g, k, 0, a->nents, NULL, &got)) DIE("gpu_analytic");
            if (i < 0) continue;
            e[i] = now_ms() - t1;
            kk[i] = gpu_kernel_ms(g);
        }
        if (r->gpu) {
            r->e2e = median_n(e, reps);
            r->kern = median_n(kk, reps);
        }
    }
    backend_set_mode(B, env_opts.mode);
    backend_release(B, a);
    buf_free(&want);
    buf_free(&got);
}

static void print_analytics(const arow *t)
{
    double s1 = 0, s2 = 0;
    int n = 0;
    printf("%-16s %12s %12s %12s %12s %10s %10s %12s\n", "analytic (ms)", "cpu 1 thr", "cpu 2 thr",
           "gpu kernels", "gpu e2e", "x 1 thr", "x 2 thr", "output B");
    for (int k = 0; k < ANA_NIDS; k++) {
        const arow *r = &t[k];
        if (r->skip) continue;
        if (!r->gpu) {
            printf("%-16s %12.3f %12.3f %12s %12s %10s %10s %12zu\n", r->name, r->cpu1, r->cpu2,
                   "cpu", "cpu", "-", "-", r->bytes);
            continue;
        }
        printf("%-16s %12.3f %12.3f %12.3f %12.3f %9.1fx %9.1fx %12zu\n", r->name, r->cpu1, r->cpu2,
               r->kern, r->e2e, r->cpu1 / r->e2e, r->cpu2 / r->e2e, r->bytes);
        s1 += r->cpu1 / r->e2e;
        s2 += r->cpu2 / r->e2e;
        n++;
    }
    if (n)
        printf("%-16s %12s %12s %12s %12s %9.1fx %9.1fx   (mean of %d speedups, end to end)\n",
               "mean", "", "", "", "", s1 / n, s2 / n, n);
}

/* ---- Word queries: count and search ---- */

typedef struct wquery {
    uint32_t ent;
    uint32_t n;
    const char *w;
} wquery;

/* Distinct word tokens of a file's expansion (every rule visited once). */
static void file_words(const arc *a, uint32_t ent, uint32_t *stamp, uint32_t *rstamp, uint32_t tag,
                       vec32 *out)
{
    const gram *g = &a->g;
    const arc_entry *f = &a->ents[ent];
    vec32 st = {0};
    out->n = 0;
    for (uint64_t i = f->root_start; i < f->root_start + f->root_len; i++)
        if (vec32_push(&st, g->root.p[i])) DIE("out of memory");
    while (st.n) {
        uint32_t s = st.p[--st.n];
        if (s < g->ntokens) {
            if (stamp[s] != tag && dict_is_word(a->dict, s)) {
                stamp[s] = tag;
                if (vec32_push(out, s)) DIE("out of memory");
            }
            continue;
        }
        if (rstamp[s - g->ntokens] == tag) continue;
        rstamp[s - g->ntokens] = tag;
        uint64_t n;
        const uint32_t *b = gram_body(g, s - g->ntokens, &n);
        for (uint64_t i = 0; i < n; i++)
            if (vec32_push(&st, b[i])) DIE("out of memory");
    }
    vec32_free(&st);
}

/* NQ queries: 4 in 10 a word of the file's own vocabulary (64 sampled files), 4 in 10 a
 * random word of the dictionary, 1 in 10 a word the dictionary lacks, 1 in 10 no word at all
 * (empty, TOK_CAP bytes, a separator, a word with a space). */
static wquery *make_queries(const arc *a, uint64_t *seed, char **pool)
{
    const gram *g = &a->g;
    uint32_t *files = xmalloc(a->nents * sizeof *files), nf = 0, ns = 0, sample[64];
    for (uint32_t e = 0; e < a->nents; e++)
        if (a->ents[e].type == ARC_REG) files[nf++] = e;
    if (!nf) {
        free(files);
        return NULL;
    }
    uint32_t *stamp = calloc(g->ntokens + 1, sizeof *stamp);
    uint32_t *rstamp = calloc((size_t)g->nrules + 1, sizeof *rstamp);
    vec32 voc[64];
    memset(voc, 0, sizeof voc);
    for (int k = 0; k < 64 * 4 && ns < 64; k++) {
        uint32_t e = files[rnd(seed) % nf];
        int64_t c = arc_ino_entry(a, a->ents[e].ino);
        if (c < 0 || !a->ents[c].root_len) continue;
        file_words(a, (uint32_t)c, stamp, rstamp, ns + 1, &voc[ns]);
        if (voc[ns].n) sample[ns++] = e;
    }
    uint32_t *words = xmalloc((g->ntokens + 1) * sizeof *words), nw = 0;
    for (uint32_t t = 0; t < g->ntokens; t++) {
        size_t l;
        dict_bytes(a->dict, t, &l);
        if (dict_is_word(a->dict, t) && l < TOK_CAP) words[nw++] = t;
    }
    /* Synthetic strings: 1,000 absent words, then the non-words. */
    char *p = *pool = xmalloc(1000 * 16 + TOK_CAP + 64);
    for (int i = 0; i < 1000; i++) {
        for (int j = 0; j < 14; j++)
            p[i * 16 + j] = (char)('a' + rnd(seed) % 26);
        p[i * 16 + 14] = 'Q';
    }
    char *cap = p + 16000, *sp = cap + TOK_CAP;
    memset(cap, 'x', TOK_CAP);
    memcpy(sp, " \n", 2);
    memcpy(sp + 2, "the cat", 7);
    wquery *q = xmalloc(NQ * sizeof *q);
    for (size_t i = 0; i < NQ; i++) {
        uint32_t e = files[rnd(seed) % nf], kind = (uint32_t)(i % 10);
        const unsigned char *w;
        size_t l = 0;
        if (kind < 4 && ns) {
            uint32_t k = (uint32_t)(rnd(seed) % ns);
            e = sample[k];
            w = dict_bytes(a->dict, voc[k].p[rnd(seed) % voc[k].n], &l);
            q[i] = (wquery){e, (uint32_t)l, (const char *)w};
        } else if (kind < 8 && nw) {
            w = dict_bytes(a->dict, words[rnd(seed) % nw], &l);
            q[i] = (wquery){e, (uint32_t)l, (const char *)w};
        } else if (kind == 8 || !nw) {
            q[i] = (wquery){e, 15, p + 16 * (rnd(seed) % 1000)};
        } else {
            static const uint32_t lens[] = {0, TOK_CAP, 1, 2, 7};
            uint32_t k = (uint32_t)(rnd(seed) % 5);
            q[i] = (wquery){e, lens[k], k == 1 ? cap : k == 4 ? sp + 2 : sp};
        }
    }
    for (int k = 0; k < 64; k++)
        vec32_free(&voc[k]);
    free(words);
    free(stamp);
    free(rstamp);
    free(files);
    return q;
}

static void check_words(const arc *a, const idx *x, gpu_gram *g, uint64_t *seed, row *t)
{
    int before = fails;
    char *pool = NULL;
    wquery *wq = make_queries(a, seed, &pool);
    if (!wq) {
        t[0] = t[1] = t[2] = (row){"word queries: no regular files", 0, 0, 0, 0, 0};
        return;
    }
    double c[REPS], k[REPS], e[REPS];
    idx_words *w;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ms();
        if (idx_words_build(x, &w)) DIE("idx_words_build");
        c[r] = now_ms() - t0;
        if (r < REPS - 1) idx_words_free(w);
    }
    t[0] = (row){"word index build", median(c), 0, 0, 0, 0};
    /* CPU answers (timed) */
    /* One timed CPU run each: seconds long on the larger corpora (the GPU side takes REPS). */
    uint64_t *want = xmalloc(NQ * sizeof *want), nz = 0, occ = 0;
    double t0 = now_ms();
    for (size_t i = 0; i < NQ; i++)
        if (idx_count(w, wq[i].ent, wq[i].w, wq[i].n, &want[i])) DIE("idx_count");
    double cpu_count = now_ms() - t0;
    for (size_t i = 0; i < NQ; i++)
        nz += want[i] != 0, occ += want[i];
    static char cname[64], sname[64];
    snprintf(cname, sizeof cname, "count %d words (cpu: 1 run)", NQ);
    snprintf(sname, sizeof sname, "search %d words (cpu: 1 run)", NQ);
    t[1] = (row){cname, cpu_count, 0, 0, 0, 0};
    vec64 *so = xmalloc(NQ * sizeof *so);
    memset(so, 0, NQ * sizeof *so);
    t0 = now_ms();
    for (size_t i = 0; i < NQ; i++)
        if (idx_search(w, wq[i].ent, wq[i].w, wq[i].n, &so[i])) DIE("idx_search");
    t[2] = (row){sname, now_ms() - t0, 0, 0, 0, 0};
    for (size_t i = 0; i < NQ; i++)
        if (so[i].n != want[i])
            FAIL("cpu: query %zu: search %zu offsets, count %llu", i, so[i].n,
                 (unsigned long long)want[i]);
    /* A grammar holding a cut word: the CPU answers its words from the text, the GPU refuses */
    int cut = dict_has_word_of(a->dict, TOK_CAP);
    if (!cpu_only && cut) {
        uint64_t one = 0, *none = NULL;
        gpu_query q1 = {wq[0].ent, backend_word_token(a, wq[0].w, wq[0].n)};
        if (gpu_count(g, &q1, 1, &one) != -ENOTSUP ||
            gpu_search(g, &q1, 1, &one, &none) != -ENOTSUP)
            FAIL("word queries on a grammar with a cut word: the GPU answered");
        free(none);
    }
    if (!cpu_only && !cut) {
        /* Build time on fresh handles (the build is kept per handle), then build on g. */
        for (int r = -1; r < REPS; r++) {
            gpu_gram *h = NULL;
            if (backend_gpu_upload(a, &h) || gpu_index_build(h)) DIE("gpu_upload");
            t0 = now_ms();
            if (gpu_words_build(h)) DIE("gpu_words_build");
            if (r >= 0) {
                e[r] = now_ms() - t0;
                k[r] = gpu_kernel_ms(h);
            }
            gpu_free(h);
        }
        t[0].kern = median(k);
        t[0].e2e = median(e);
        if (gpu_words_build(g)) DIE("gpu_words_build");
        uint64_t pairs, mem = gpu_words_mem(g, &pairs);
        printf("word index: %llu (file, rule) pairs, %.1f MiB on the device\n",
               (unsigned long long)pairs, mem / 1048576.0);
        gpu_query *q = xmalloc(NQ * sizeof *q);
        uint64_t *got = xmalloc(NQ * sizeof *got), *offs = NULL;
        for (int r = -1; r < REPS; r++) {
            t0 = now_ms();
            for (size_t i = 0; i < NQ; i++)
                q[i] = (gpu_query){wq[i].ent, backend_word_token(a, wq[i].w, wq[i].n)};
            if (gpu_count(g, q, NQ, got)) DIE("gpu_count");
            if (r >= 0) {
                e[r] = now_ms() - t0;
                k[r] = gpu_kernel_ms(g);
            }
            size_t bad = 0;
            for (size_t i = 0; i < NQ; i++)
                if (got[i] != want[i] && !bad++)
                    FAIL("count (entry %u, '%.*s'): gpu %llu, cpu %llu", wq[i].ent,
                         (int)(wq[i].n < 40 ? wq[i].n : 40), wq[i].w, (unsigned long long)got[i],
                         (unsigned long long)want[i]);
            if (bad) FAIL("count: %zu of %d queries differ (run %d)", bad, NQ, r);
        }
        t[1].kern = median(k);
        t[1].e2e = median(e);
        for (int r = 0; r < REPS; r++) {
            t0 = now_ms();
            for (size_t i = 0; i < NQ; i++)
                q[i] = (gpu_query){wq[i].ent, backend_word_token(a, wq[i].w, wq[i].n)};
            c[r] = now_ms() - t0;
        }
        printf("word queries: of the gpu end-to-end times, %.3f ms go to the host's word lookups\n",
               median(c));
        for (int r = -1; r < REPS; r++) {
            free(offs);
            t0 = now_ms();
            for (size_t i = 0; i < NQ; i++)
                q[i] = (gpu_query){wq[i].ent, backend_word_token(a, wq[i].w, wq[i].n)};
            if (gpu_search(g, q, NQ, got, &offs)) DIE("gpu_search");
            if (r >= 0) {
                e[r] = now_ms() - t0;
                k[r] = gpu_kernel_ms(g);
            }
            size_t bad = 0, at = 0;
            for (size_t i = 0; i < NQ; at += got[i++])
                if (got[i] != so[i].n || memcmp(offs + at, so[i].p, so[i].n * sizeof *offs))
                    if (!bad++)
                        FAIL("search (entry %u, '%.*s'): gpu %llu offsets, cpu %zu, or others",
                             wq[i].ent, (int)(wq[i].n < 40 ? wq[i].n : 40), wq[i].w,
                             (unsigned long long)got[i], so[i].n);
            if (bad) FAIL("search: %zu of %d queries differ (run %d)", bad, NQ, r);
        }
        t[2].kern = median(k);
        t[2].e2e = median(e);
        free(offs);
        free(q);
        free(got);
    }
    printf("word queries: %d (%llu with occurrences, %llu occurrences) count and search %s\n", NQ,
           (unsigned long long)nz, (unsigned long long)occ,
           cpu_only         ? "(cpu only)"
           : fails > before ? "DIFFER"
           : cut            ? "(a cut word: the GPU refuses, the CPU reads the text)"
                            : "agree");
    for (size_t i = 0; i < NQ; i++)
        vec64_free(&so[i]);
    free(so);
    free(want);
    idx_words_free(w);
    free(wq);
    free(pool);
}

/* ---- Insert/append offsets ---- */

/* GPU (unless cpu_only) and CPU on one batch; 1 when both fail alike or agree. With a
 * reference (texts), also check the CPU against it. */
static gpu_edits *ged;

static int edit_compare(int mode, const uint64_t *size, uint32_t nf, const tdc_edit *ops, size_t n,
                        uint64_t *at, uint64_t *pos, uint64_t *fs, size_t *bad, int *rc)
{
    *rc = backend_edit_offsets(mode, size, nf, ops, n, at, pos, fs, bad);
    if (cpu_only) return 1;
    uint64_t *at2 = xmalloc((n + 1) * 8), *pos2 = xmalloc((n + 1) * 8),
             *fs2 = xmalloc((nf + 1) * 8);
    size_t bad2;
    int rc2 = gpu_edit_offsets(ged, mode, size, nf, ops, n, at2, pos2, fs2, &bad2), ok = 1;
    if (rc2 == -EIO || rc2 == -ENOMEM) DIE("gpu_edit_offsets");
    if (rc2 != *rc || (*rc && bad2 != *bad)) {
        FAIL("edit offsets (mode %d, %zu ops): gpu rc %d at op %zu, cpu rc %d at op %zu", mode, n,
             rc2, bad2, *rc, *bad);
        ok = 0;
    } else if (!*rc) {
        for (size_t i = 0; i < n && ok; i++)
            if (at[i] != at2[i] || pos[i] != pos2[i]) {
                FAIL("edit offsets (mode %d, %zu ops): op %zu (file %u, %s at %llu, %llu bytes): "
                     "gpu at %llu pos %llu, cpu at %llu pos %llu",
                     mode, n, i, ops[i].file, ops[i].kind ? "append" : "insert",
                     (unsigned long long)ops[i].off, (unsigned long long)ops[i].len,
                     (unsigned long long)at2[i], (unsigned long long)pos2[i],
                     (unsigned long long)at[i], (unsigned long long)pos[i]);
                ok = 0;
            }
        for (uint32_t f = 0; f < nf && ok; f++)
            if (fs[f] != fs2[f]) {
                FAIL("edit offsets (mode %d): file %u final size gpu %llu, cpu %llu", mode, f,
                     (unsigned long long)fs2[f], (unsigned long long)fs[f]);
                ok = 0;
            }
    }
    free(at2);
    free(pos2);
    free(fs2);
    return ok;
}

/* One small random batch: offsets drawn to pile up (0, the end, a spot used before), some empty
 * texts; with `broken`, one insert lands past the end. Checks CPU against the byte reference and
 * GPU against CPU. */
static void small_edit(int mode, uint64_t *seed, int broken)
{
    uint32_t nf = 1 + (uint32_t)(rnd(seed) % 6);
    size_t n = (size_t)(rnd(seed) % 300);
    uint64_t size[8], cur[8], spot[8][8];
    buf orig[8], text[8], re[8];
    vec32 own[8], own2[8];
    memset(orig, 0, sizeof orig);
    memset(text, 0, sizeof text);
    memset(re, 0, sizeof re);
    memset(own, 0, sizeof own);
    memset(own2, 0, sizeof own2);
    for (uint32_t f = 0; f < nf; f++) {
        size[f] = cur[f] = rnd(seed) % 4 == 0 ? 0 : rnd(seed) % 200;
        for (uint64_t j = 0; j < size[f]; j++) {
            unsigned char ch = (unsigned char)('a' + rnd(seed) % 26);
            buf_put(&orig[f], &ch, 1);
        }
        for (int j = 0; j < 8; j++)
            spot[f][j] = rnd(seed) % (size[f] + 1);
    }
    tdc_edit *ops = xmalloc((n + 1) * sizeof *ops);
    unsigned char **tx = xmalloc((n + 1) * sizeof *tx);
    size_t bad_at = broken && n ? (size_t)(rnd(seed) % n) : SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        uint32_t f = (uint32_t)(rnd(seed) % nf);
        uint64_t lim = mode == TDC_OFFSETS_SEQUENCE ? cur[f] : size[f], off;
        switch (rnd(seed) % 5) {
        case 0:
            off = 0;
            break;
        case 1:
            off = lim;
            break;
        case 2:
            off = spot[f][rnd(seed) % 8];
            break;
        default:
            off = rnd(seed) % (lim + 1);
        }
        if (off > lim) off = lim;
        if (i == bad_at) off = lim + 1 + rnd(seed) % 3;
        uint64_t len = rnd(seed) % 5 == 0 ? 0 : 1 + rnd(seed) % 12;
        uint32_t kind = rnd(seed) % 4 == 0 ? TDC_EDIT_APPEND : TDC_EDIT_INSERT;
        ops[i] = (tdc_edit){f, kind, kind == TDC_EDIT_APPEND ? rnd(seed) : off, len};
        tx[i] = xmalloc(len + 1);
        for (uint64_t j = 0; j < len; j++)
            tx[i][j] = (unsigned char)('A' + rnd(seed) % 26);
        cur[f] += len;
    }
    /* A third of the broken batches name a file that does not exist or a bad kind instead. */
    if (bad_at != SIZE_MAX && rnd(seed) % 3 == 0) {
        ops[bad_at].off = 0;
        if (rnd(seed) % 2)
            ops[bad_at].file = nf + (uint32_t)(rnd(seed) % 3);
        else
            ops[bad_at].kind = 2 + (uint32_t)(rnd(seed) % 5);
    }
    uint64_t *at = xmalloc((n + 1) * 8), *pos = xmalloc((n + 1) * 8), fs[8];
    size_t bad = 0, rbad = 0;
    int rc;
    edit_compare(mode, size, nf, ops, n, at, pos, fs, &bad, &rc);
    for (uint32_t f = 0; f < nf; f++)
        buf_put(&text[f], orig[f].p, orig[f].n), buf_put(&re[f], orig[f].p, orig[f].n);
    int rrc =
        backend_edit_apply(mode, nf, text, own, ops, n, (const unsigned char *const *)tx, &rbad);
    if (rrc == -ENOMEM) DIE("out of memory");
    if ((rrc != 0) != (rc != 0) || (rc && rbad != bad) || (rc && bad != bad_at)) {
        FAIL("small edits (mode %d): reference rc %d at op %zu, cpu rc %d at op %zu, broken op %zu",
             mode, rrc, rbad, rc, bad, bad_at);
    } else if (!rc) {
        /* final sizes; first byte of each non-empty op; the edits at[] in batch order */
        for (uint32_t f = 0; f < nf; f++)
            if (fs[f] != text[f].n)
                FAIL("small edits (mode %d): file %u size %llu, reference %zu", mode, f,
                     (unsigned long long)fs[f], text[f].n);
        uint64_t *first = xmalloc((n + 1) * 8);
        for (size_t i = 0; i < n; i++)
            first[i] = UINT64_MAX;
        for (uint32_t f = 0; f < nf; f++)
            for (size_t j = own[f].n; j-- > 0;)
                if (own[f].p[j] != UINT32_MAX) first[own[f].p[j]] = j;
        for (size_t i = 0; i < n; i++)
            if (ops[i].len && pos[i] != first[i]) {
                FAIL("small edits (mode %d): op %zu at %llu, reference %llu", mode, i,
                     (unsigned long long)pos[i], (unsigned long long)first[i]);
                break;
            }
        free(first);
        tdc_edit *seq = xmalloc((n + 1) * sizeof *seq);
        for (size_t i = 0; i < n; i++)
            seq[i] = ops[i], seq[i].off = at[i];
        if (backend_edit_apply(TDC_OFFSETS_SEQUENCE, nf, re, own2, seq, n,
                               (const unsigned char *const *)tx, &rbad))
            FAIL("small edits (mode %d): the edits at[] do not apply", mode);
        for (uint32_t f = 0; f < nf; f++)
            if (re[f].n != text[f].n || memcmp(re[f].p, text[f].p, re[f].n) ||
                memcmp(own2[f].p, own[f].p, own[f].n * sizeof *own[f].p)) {
                FAIL("small edits (mode %d): applying at[] in batch order gives another text",
                     mode);
                break;
            }
        free(seq);
    }
    for (uint32_t f = 0; f < nf; f++) {
        buf_free(&orig[f]);
        buf_free(&text[f]);
        buf_free(&re[f]);
        vec32_free(&own[f]);
        vec32_free(&own2[f]);
    }
    for (size_t i = 0; i < n; i++)
        free(tx[i]);
    free(tx);
    free(ops);
    free(at);
    free(pos);
}

/* Time one big batch on both sides (median of REPS), comparing every run. */
static row time_edits(const char *name, int mode, const uint64_t *size, uint32_t nf,
                      const tdc_edit *ops, size_t n)
{
    double c[REPS], k[REPS], e[REPS], pg[REPS];
    uint64_t *at = xmalloc(n * 8), *pos = xmalloc(n * 8), *fs = xmalloc(((size_t)nf + 1) * 8);
    size_t bad;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ms();
        if (backend_edit_offsets(mode, size, nf, ops, n, at, pos, fs, &bad))
            DIE("backend_edit_offsets");
        c[r] = now_ms() - t0;
    }
    row t = {name, median(c), 0, 0, 0, 0};
    /* The GPU side twice: the batch, the sizes and the outputs in page-locked memory (what a
     * batching caller keeps them in; e), and in ordinary malloc memory (pg). */
    size_t obytes = 2 * n * 8 + ((size_t)nf + 1) * 8 * 2;
    for (int pinned = 1; !cpu_only && pinned >= 0; pinned--) {
        char *mem =
            pinned ? gpu_host_alloc(n * sizeof *ops + obytes) : xmalloc(n * sizeof *ops + obytes);
        if (!mem) DIE("gpu_host_alloc");
        tdc_edit *ops2 = (tdc_edit *)mem;
        uint64_t *at2 = (uint64_t *)(mem + n * sizeof *ops), *pos2 = at2 + n, *fs2 = pos2 + n;
        uint64_t *size2 = fs2 + nf + 1;
        memcpy(ops2, ops, n * sizeof *ops);
        memcpy(size2, size, (size_t)nf * 8);
        for (int r = -1; r < REPS; r++) {
            double t0 = now_ms();
            if (gpu_edit_offsets(ged, mode, size2, nf, ops2, n, at2, pos2, fs2, &bad))
                DIE("gpu_edit_offsets");
            if (r >= 0) {
                (pinned ? e : pg)[r] = now_ms() - t0;
                if (pinned) k[r] = gpu_edits_kernel_ms(ged);
            }
            if (memcmp(at, at2, n * 8) || memcmp(pos, pos2, n * 8) ||
                memcmp(fs, fs2, (size_t)nf * 8))
                FAIL("%s: gpu and cpu offsets differ (run %d)", name, r);
        }
        if (pinned)
            gpu_host_free(mem);
        else
            free(mem);
    }
    if (!cpu_only) t.kern = median(k), t.e2e = median(e), t.pg = median(pg);
    free(at), free(pos), free(fs);
    return t;
}

static int check_edits(const arc *a, uint64_t *seed, row *t)
{
    int before = fails;
    if (!cpu_only && gpu_edits_new(&ged)) DIE("gpu_edits_new");
    for (int mode = 0; mode < 2; mode++)
        for (int i = 0; i < NSMALL; i++)
            small_edit(mode, seed, i % 10 == 9);
    printf("edit offsets: %d small batches per offset meaning (with bad offsets, files and "
           "kinds) %s the byte "
           "reference%s\n",
           NSMALL, fails > before ? "DIFFER from" : "agree with",
           cpu_only ? " (cpu only)" : " and the gpu");
    /* 100,000-operation batches on the archive's regular files. */
    uint32_t nf = 0, big = 0;
    uint64_t *size = xmalloc(((size_t)a->nents + 1) * sizeof *size);
    for (uint32_t e = 0; e < a->nents; e++)
        if (a->ents[e].type == ARC_REG) {
            if (!nf || a->ents[e].size > size[big]) big = nf;
            size[nf++] = a->ents[e].size;
        }
    if (!nf) {
        free(size);
        gpu_edits_free(ged);
        return 0;
    }
    uint64_t *cur = xmalloc(nf * sizeof *cur);
    tdc_edit *ops = xmalloc(NOPS * sizeof *ops);
    static char names[5][64];
    const char *what[5] = {"insert, in sequence", "insert, in batch", "append",
                           "insert in 1 file, seq", "insert in 1 file, batch"};
    for (int v = 0; v < 5; v++) {
        memcpy(cur, size, nf * sizeof *cur);
        int mode = v == 1 || v == 4 ? TDC_OFFSETS_BATCH : TDC_OFFSETS_SEQUENCE;
        for (size_t i = 0; i < NOPS; i++) {
            uint32_t f = v >= 3 ? big : (uint32_t)(rnd(seed) % nf);
            uint64_t lim = mode == TDC_OFFSETS_SEQUENCE ? cur[f] : size[f],
                     len = 1 + rnd(seed) % 127;
            ops[i] = (tdc_edit){f, v == 2 ? TDC_EDIT_APPEND : TDC_EDIT_INSERT,
                                rnd(seed) % (lim + 1), len};
            cur[f] += len;
        }
        snprintf(names[v], sizeof names[v], "%s %dk", what[v], NOPS / 1000);
        t[v] = time_edits(names[v], mode, size, nf, ops, NOPS);
    }
    printf("edit offsets: 100,000-operation batches (inserts in sequence and batch meaning, "
           "appends, one file) %s\n",
           cpu_only         ? "(cpu only)"
           : fails > before ? "DIFFER"
                            : "agree");
    free(cur);
    free(ops);
    free(size);
    gpu_edits_free(ged);
    return 5;
}

/* A table cell of `width` that may not have been measured (0: "-"). */
static void cell(double v, int width)
{
    if (v)
        printf(" %*.3f", width, v);
    else
        printf(" %*s", width, "-");
}

/* Free everything and report: exit status 1 with the seed on any mismatch, else 0 and `ok`. */
static int finish(const char *path, uint64_t seed, arc *a, idx *x, gpu_gram *g, const char *ok)
{
    gpu_free(g);
    idx_free(x);
    arc_free(a);
    if (fails) {
        fprintf(stderr, "gpucheck: %s: %d mismatches (seed %llu)\n", path, fails,
                (unsigned long long)seed);
        return 1;
    }
    printf("gpucheck: %s: %s\n", path, ok);
    return 0;
}

int main(int argc, char **argv)
{
    backend_opts_init(&env_opts);
    env_opts.reads = 1;        /* check_batcher's reads may go to the GPU */
    tdc_env_settings(&env_opts); /* TADOC_THREADS, TADOC_GPU_WIDE_SEQ, ... (run.sh sets some) */
    if (backend_new(&env_opts, &B)) DIE("backend_new");
    for (int tr = 0; tr < 3; tr++)
        for (int th = 0; th < 3; th++) {
            ana_opts o = env_opts.ana;
            o.traversal = tr;
            o.threads = th;
            if (!(ctxs[tr][th] = ana_ctx_new(&o))) DIE("ana_ctx_new");
        }
    int only_ana = 0, only_reads = 0, only_batches = 0, only_shards = 0;
    for (; argc > 1 && argv[1][0] == '-' && argv[1][1] == '-'; argc--, argv++) {
        if (!strcmp(argv[1], "--cpu"))
            cpu_only = 1;
        else if (!strcmp(argv[1], "--analytics"))
            only_ana = 1;
        else if (!strcmp(argv[1], "--reads"))
            only_reads = 1;
        else if (!strcmp(argv[1], "--batches"))
            only_batches = 1;
        else if (!strcmp(argv[1], "--shards"))
            only_shards = 1;
        else
            break;
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr,
                "usage: gpucheck [--cpu] [--analytics | --reads | --batches | --shards] ARCHIVE "
                "[SEED]\n");
        return 2;
    }
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    ncpu = nc < 1 ? 1 : nc > 256 ? 256 : (int)nc;
    char gpu[256] = "no GPU (--cpu)";
    if (!cpu_only && gpu_probe(gpu, sizeof gpu)) {
        fprintf(stderr, "gpucheck: no usable GPU: %s\n", gpu);
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = argc == 3
                        ? strtoull(argv[2], NULL, 10)
                        : (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^ (uint64_t)getpid();
    printf("gpucheck: %s on %s, seed %llu\n", argv[1], gpu, (unsigned long long)seed);
    uint64_t s = seed * 2654435761u + 0x9e3779b97f4a7c15u; /* xorshift state must not be 0 */
    if (!s) s = 1;
    arc *a;
    if (arc_open(argv[1], &a)) DIE(argv[1]);
    row t[16];
    int nt = 0;
    idx *x;
    gpu_gram *g = check_index(a, &x, &t[nt++]);
    arow at[6];
    if (!cpu_only && only_shards) {
        check_by_shard(argv[1], a, &s);
        return finish(argv[1], seed, a, x, g, "every analytic by shard agrees with the CPU");
    }
    if (!cpu_only && only_reads) {
        check_reads(a, x, g, &s);
        return finish(argv[1], seed, a, x, g, "every read agrees with the CPU");
    }
    if (!cpu_only && !only_batches) {
        /* GPUCHECK_CPU_REPS: CPU runs per analytic time (1 for archives where they take long) */
        const char *cr = getenv("GPUCHECK_CPU_REPS");
        int creps = cr && atoi(cr) > 0 ? atoi(cr) : REPS;
        /* GPUCHECK_SCOPES: random scopes per analytic (NSCOPE unless set) */
        const char *ns = getenv("GPUCHECK_SCOPES");
        int nscope = ns && atoi(ns) >= 0 && *ns ? atoi(ns) : NSCOPE;
        check_analytics(a, g, &s, REPS, creps > 63 ? 63 : creps, nscope, at);
    }
    if (!cpu_only && only_ana) {
        print_analytics(at);
        return finish(argv[1], seed, a, x, g, "every analytic agrees with the CPU");
    }
    if (!cpu_only && !only_batches) {
        check_wordcount(a, g, &s, &t[nt++]);
        check_backend(a, &s);
        if (a->nshards > 1) check_by_shard(argv[1], a, &s);
    }
    if (!only_batches) {
        check_words(a, x, g, &s, &t[nt]);
        nt += 3;
    }
    if (!cpu_only) check_extract(a, x, g, &s, &t[nt++]);
    if (!cpu_only && !only_batches) check_reads(a, x, g, &s);
    nt += check_edits(a, &s, &t[nt]);
    char allc[32];
    snprintf(allc, sizeof allc, "cpu, %d threads", ncpu);
    printf("%-32s %14s %16s %14s %16s %14s\n", "operation (median ms)", "cpu, 1 thread", allc,
           "gpu kernels", "gpu end-to-end", "(pageable)");
    for (int i = 0; i < nt; i++) {
        printf("%-32s %14.3f", t[i].name, t[i].cpu);
        cell(t[i].cpun, 16);
        printf(" %14.3f %16.3f", t[i].kern, t[i].e2e);
        cell(t[i].pg, 14);
        printf("\n");
    }
    if (!cpu_only && !only_batches) print_analytics(at);
    printf("(end-to-end: index = upload + build; wordcount = counts back + sorted text;\n"
           " count/search = word lookups on the host + queries up + results back (search: sorted\n"
           " offsets); extract = requests up + bytes back; edits = operations up + offsets back,\n"
           " the caller's batch and outputs in page-locked memory (pageable: in malloc memory).\n"
           " cpu index = idx_build, which also samples and caches short rules; gpu index kernels\n"
           " include one host sync per level; word index build: kernels and syncs)\n");
    return finish(argv[1], seed, a, x, g,
                  cpu_only ? "every CPU check passed (no GPU run)"
                           : "every kernel agrees with the CPU");
}
