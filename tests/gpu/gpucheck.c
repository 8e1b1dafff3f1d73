/* gpucheck: check every CUDA kernel against the CPU on one archive, and time both.
 * usage: gpucheck ARCHIVE [SEED]
 *
 * Index build: every rule's expanded length and the depth, against idx_build. Word count: the
 * whole archive plus random subtrees and files, output text against ana_wordcount. Extract:
 * 100,000 random 64-byte requests and a batch of edge cases (last byte, past EOF, empty, many
 * slices, whole files, a directory), against idx_extract byte for byte. Requests and scopes
 * come from a fresh seed each run unless SEED is given. Exit 1 on any difference.
 * Ends with CPU (one thread) and GPU times, each the median of REPS runs after a warm-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../engine/ana.h"
#include "../../engine/backend.h"
#include "../../engine/err.h"
#include "../../index/idx.h"
#include "../../kernels/gpu.h"

#define NREQ 100000
#define REQLEN 64
#define NEDGE 4000
#define NSCOPE 30
#define REPS 5

static int fails;
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
    for (int r = -1; r < REPS; r++) { /* r = -1 warms up the CUDA context */
        gpu_free(g);
        double t0 = now_ms();
        if (gpu_upload(a, &g)) DIE("gpu_upload");
        if (gpu_index_build(g)) DIE("gpu_index_build");
        if (r < 0) continue;
        e[r] = now_ms() - t0;
        k[r] = gpu_kernel_ms(g);
    }
    *t = (row){"index build", median(c), median(k), median(e)};
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
    *xout = x;
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
        if (ana_wordcount(a, 0, a->nents, &want)) DIE("ana_wordcount");
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
        if (backend_wordcount(a, g, 0, a->nents, &got)) DIE("backend_wordcount");
        if (r < 0) continue;
        e[r] = now_ms() - t0;
        k[r] = rc ? 0 : gpu_kernel_ms(g);
        if (!same(&got, &want)) FAIL("wordcount of the whole archive differs (run %d)", r);
    }
    *t = (row){rc ? "wordcount (CPU fallback)" : "wordcount, whole archive", median(c), median(k),
               median(e)};
    int gpu_scopes = 0, bad = 0;
    for (int s = 0; s < NSCOPE; s++) {
        uint32_t first = (uint32_t)(rnd(seed) % a->nents), end = ana_subtree_end(a, first);
        want.n = got.n = 0;
        if (ana_wordcount(a, first, end, &want)) DIE("ana_wordcount");
        if (backend_wordcount(a, g, first, end, &got)) DIE("backend_wordcount");
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

/* Run a batch on both sides and compare; returns the bytes extracted. With times, fill them. */
static uint64_t run_extract(const idx *x, gpu_gram *g, const gpu_req *rq, size_t n, double *c,
                            double *k, double *e)
{
    uint64_t cap = 0;
    for (size_t i = 0; i < n; i++)
        cap += rq[i].len;
    unsigned char *want = xmalloc(cap), *got = xmalloc(cap);
    uint32_t *wn = xmalloc(n * sizeof *wn), *gn = xmalloc(n * sizeof *gn);
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
    for (int r = -1; r < (c ? REPS : 0); r++) {
        double t0 = now_ms();
        int64_t m = gpu_extract(g, rq, n, got, cap, gn);
        if (m < 0) DIE("gpu_extract");
        if (e && r >= 0) {
            e[r] = now_ms() - t0;
            k[r] = gpu_kernel_ms(g);
        }
        if ((uint64_t)m != pos)
            FAIL("extract: gpu %lld bytes, cpu %llu", (long long)m, (unsigned long long)pos);
        uint64_t at = 0;
        for (size_t i = 0; i < n; i++) {
            if (gn[i] != wn[i] || memcmp(got + at, want + at, wn[i])) {
                FAIL("extract (entry %u, offset %llu, length %u): gpu %u bytes, cpu %u, or "
                     "different bytes",
                     rq[i].ent, (unsigned long long)rq[i].off, rq[i].len, gn[i], wn[i]);
                break;
            }
            at += wn[i];
        }
    }
    free(want);
    free(got);
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
        *t = (row){"extract: no regular files", 0, 0, 0};
        free(files);
        return;
    }
    gpu_req *rq = xmalloc(NREQ * sizeof *rq);
    for (size_t i = 0; i < NREQ; i++) {
        uint32_t e = files[rnd(seed) % nf];
        uint64_t size = a->ents[e].size;
        rq[i] = (gpu_req){e, REQLEN, size ? rnd(seed) % size : 0};
    }
    double c[REPS], k[REPS], e[REPS];
    uint64_t bytes = run_extract(x, g, rq, NREQ, c, k, e);
    static char name[64];
    snprintf(name, sizeof name, "extract %d x %d B", NREQ, REQLEN);
    *t = (row){name, median(c), median(k), median(e)};
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
    uint64_t edge = run_extract(x, g, rq, NEDGE, NULL, NULL, NULL);
    unsigned char one;
    uint32_t n1;
    if (dir != UINT32_MAX &&
        gpu_extract(g, &(gpu_req){dir, 1, 0}, 1, &one, 1, &n1) != idx_extract(x, dir, 0, &one, 1))
        FAIL("extract from a directory: gpu and cpu disagree");
    printf("extract: %d requests (%llu bytes) and %d edge cases (%llu bytes) %s\n", NREQ,
           (unsigned long long)bytes, NEDGE, (unsigned long long)edge,
           fails > before ? "DIFFER" : "agree");
    free(rq);
    free(files);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: gpucheck ARCHIVE [SEED]\n");
        return 2;
    }
    char gpu[256];
    if (gpu_probe(gpu, sizeof gpu)) {
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
    row t[3];
    idx *x;
    gpu_gram *g = check_index(a, &x, &t[0]);
    check_wordcount(a, g, &s, &t[1]);
    check_extract(a, x, g, &s, &t[2]);
    printf("%-28s %14s %14s %16s\n", "operation (median ms)", "cpu, 1 thread", "gpu kernels",
           "gpu end-to-end");
    for (int i = 0; i < 3; i++)
        printf("%-28s %14.3f %14.3f %16.3f\n", t[i].name, t[i].cpu, t[i].kern, t[i].e2e);
    printf("(end-to-end: index = upload + build; wordcount = counts back + sorted text;\n"
           " extract = requests up + bytes back. cpu index = idx_build, which also samples and\n"
           " caches short rules; gpu index kernels include one host sync per level)\n");
    gpu_free(g);
    idx_free(x);
    arc_free(a);
    if (fails) {
        fprintf(stderr, "gpucheck: %s: %d mismatches (seed %llu)\n", argv[1], fails,
                (unsigned long long)seed);
        return 1;
    }
    printf("gpucheck: %s: every kernel agrees with the CPU\n", argv[1]);
    return 0;
}
