/* The six analytics on the device (G-TADOC IV-B..IV-D; engine/backend/gpu_api.h tells the
 * interface), top-down and level-synchronous over the grammar's DAG:
 * - wordcount, sort: rule weights pushed from the highest level down (gpu_wc_pass), word counts
 *   spread over a dense array indexed by word rank (sort needs no sort at all: ranks are byte
 *   order), or radix-sorted by count (wordcount, stable so ties stay in word order);
 * - seqcount: the same weights; every body position of a weighted rule, and every root position
 *   of the scope's files, gives the (at most two) 3-word sequences that end in that symbol's
 *   first two words and start before it, found from the head/tail buffers of the symbols before
 *   it (IV-D); the tuples (sequence, weight) are radix-sorted on packed rank keys and reduced;
 * - invindex, termvector, rankedinvindex: a hash table of (file, rule) -> occurrences of the
 *   rule in the file's expansion (top-down weights for every file at once), seeded from the
 *   files' root runs and pushed down one level per launch, with the pairs of each level listed
 *   as they are made so a launch touches only its level; then the same emission per pair (a
 *   rule's own words, or its crossing sequences, times the pair's count) and per root position,
 *   sorts on packed (word, file), (file, count, word) or (sequence, file) keys and reductions.
 * Output text is made on the device: a length per record, an exclusive scan, a write pass. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/std/functional>

#include "../engine/grammar/headtail.h"
#include "gpu_dev.h"

#define NONE 0xffffffffu
#define TPB 256
#define POOL_KEEP ((size_t)1 << 30) /* bytes of freed temporaries kept between calls */

static int nbits(u64 n) /* bits that hold every value below n, at least 1 */
{
    int b = 1;
    while (b < 64 && ((u64)1 << b) < n)
        b++;
    return b;
}

/* Device buffers of one call, released together (stream-ordered). A bottom-up pass takes a
 * dozen per level of the grammar, so the list grows (a plain type: the call is zeroed). */
struct tmp {
    gpu_gram *g;
    void **p;
    size_t n, cap;
    template <class T> int get(T **out, size_t count)
    {
        if (n == cap) {
            size_t c = cap ? 2 * cap : 256;
            void **q = (void **)realloc(p, c * sizeof *q);
            if (!q) return tdc_error(-ENOMEM, "gpu: out of memory");
            p = q;
            cap = c;
        }
        CK(cudaMallocAsync((void **)out, (count ? count : 1) * sizeof(T), g->st));
        p[n++] = *out;
        return 0;
    }
    void release()
    {
        for (size_t i = 0; i < n; i++)
            cudaFreeAsync(p[i], g->st);
        free(p);
        p = NULL;
        n = cap = 0;
    }
};

/* What the kernels read of the grammar. */
struct dg {
    uint32_t nt;
    const uint32_t *syms, *root;
    const u64 *rule_start;
    const uint32_t *rank, *ht, *level, *nwb;
    const uint8_t *tflag, *cut;
};

/* The scope's files: root runs flattened, file i's positions are [fpre[i], fpre[i + 1]). */
struct dscope {
    uint32_t nf;
    u64 nroot;
    const u64 *fpre, *frs;
};

static __device__ __forceinline__ uint32_t file_of(const dscope &s, u64 i)
{
    uint32_t lo = 0, hi = s.nf; /* fpre[lo] <= i < fpre[hi] */
    while (hi - lo > 1) {
        uint32_t m = (lo + hi) / 2;
        if (s.fpre[m] <= i)
            lo = m;
        else
            hi = m;
    }
    return lo;
}

#define GRID_LOOP(i, n)                                                                            \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                              \
         i += (u64)gridDim.x * blockDim.x)

/* ---- per-archive preparation ---- */

__global__ void k_rinfo(uint32_t nrules, dg d, uint32_t *own, uint32_t *nwb)
{
    GRID_LOOP(k, nrules)
    {
        uint32_t r = (uint32_t)k + 1, c = 0;
        for (u64 i = d.rule_start[r - 1]; i < d.rule_start[r]; i++) {
            own[i] = r;
            uint32_t s = d.syms[i];
            if (s < d.nt && d.rank[s] != NONE) c++;
        }
        nwb[r] = c;
    }
}

/* Head and tail of rule r from its children's, as engine/analytics/ana_plan.c's head_tail (both through
 * engine/grammar/headtail.h), over word ranks. */
__global__ void k_ht(const uint32_t *rules, uint32_t n, dg d, uint32_t *ht, uint32_t *ew)
{
    GRID_LOOP(k, n)
    {
        uint32_t r = rules[k], h[HT_N];
        u64 words_in = 0;
        ht_init(h);
        for (u64 i = d.rule_start[r - 1]; i < d.rule_start[r]; i++) {
            uint32_t s = d.syms[i];
            words_in += s >= d.nt ? ew[s - d.nt] : d.rank[s] != NONE;
            if (s >= d.nt)
                ht_add(h, ht + HT_N * (u64)(s - d.nt));
            else if (d.rank[s] != NONE)
                ht_push(h, d.rank[s]);
        }
        ht_finish(h);
        for (int j = 0; j < HT_N; j++)
            ht[HT_N * (u64)r + j] = h[j];
        ew[r] = words_in < NONE ? (uint32_t)words_in : NONE;
    }
}

struct rkey {
    uint64_t key;
    uint32_t id;
};

/* Token t's bytes in s, and their length. */
static const unsigned char *tok_bytes(const gpu_src *s, uint32_t t, size_t *n)
{
    *n = (size_t)(s->tok_off[t + 1] - s->tok_off[t]);
    return s->tok_bytes + s->tok_off[t];
}

static int by_bytes(const void *x, const void *y, void *ctx)
{
    const rkey *a = (const rkey *)x, *b = (const rkey *)y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    const gpu_src *s = (const gpu_src *)ctx;
    size_t na, nb;
    const unsigned char *p = tok_bytes(s, a->id, &na), *q = tok_bytes(s, b->id, &nb);
    int c = memcmp(p, q, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

static void put_esc(buf *b, const char *p, int *bad)
{
    for (; *p; p++) {
        const char *esc = *p == '\t' ? "\\t" : *p == '\n' ? "\\n" : *p == '\\' ? "\\\\" : NULL;
        if (esc ? buf_put(b, esc, 2) : buf_put(b, p, 1)) *bad = 1;
    }
}

static int by_path(const void *x, const void *y, void *ctx)
{
    const gpu_ent *e = (const gpu_ent *)ctx;
    return strcmp(e[*(const uint32_t *)x].path, e[*(const uint32_t *)y].path);
}

/* Every entry's escaped path on the device, and the entries' path order on the host. */
static int path_order(gpu_gram *g)
{
    size_t ne = g->nents;
    buf text = {};
    int bad = 0, rc = 0;
    u64 *off = (u64 *)malloc((ne + 1) * sizeof *off);
    g->apord_h = (uint32_t *)malloc((ne + 1) * sizeof *g->apord_h);
    g->aprk_h = (uint32_t *)malloc((ne + 1) * sizeof *g->aprk_h);
    if (!off || !g->apord_h || !g->aprk_h) {
        free(off);
        return tdc_error(-ENOMEM, "gpu: out of memory");
    }
    for (size_t e = 0; e < ne; e++) {
        off[e] = text.n;
        put_esc(&text, g->ents[e].path, &bad);
        g->apord_h[e] = (uint32_t)e;
    }
    off[ne] = text.n;
    qsort_r(g->apord_h, ne, sizeof *g->apord_h, by_path, (void *)g->ents);
    for (size_t i = 0; i < ne; i++)
        g->aprk_h[g->apord_h[i]] = (uint32_t)i;
    if (bad)
        rc = tdc_error(-ENOMEM, "gpu: out of memory");
    else if (!(rc = dalloc(&g->apath, text.n)) && !(rc = dalloc(&g->apoff, ne + 1))) {
        cudaError_t e = cudaSuccess;
        if (text.n) e = cudaMemcpyAsync(g->apath, text.p, text.n, cudaMemcpyHostToDevice, g->st);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(g->apoff, off, (ne + 1) * sizeof *off, cudaMemcpyHostToDevice,
                                g->st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
        if (e != cudaSuccess) rc = gpu_fail(e, "path upload");
    }
    free(off);
    buf_free(&text);
    return rc;
}

static int prepare(gpu_gram *g)
{
    const gpu_src *s = &g->src;
    uint32_t nt = g->ntokens, n = 0;
    rkey *k = (rkey *)malloc(((size_t)nt + 1) * sizeof *k);
    uint32_t *rank = (uint32_t *)malloc(((size_t)nt + 1) * sizeof *rank);
    uint32_t *ids = (uint32_t *)malloc(((size_t)nt + 1) * sizeof *ids);
    int rc = 0;
    if (!k || !rank || !ids) {
        rc = tdc_error(-ENOMEM, "gpu: out of memory");
        goto out;
    }
    for (uint32_t t = 0; t < nt; t++) {
        rank[t] = NONE;
        if (!s->tok_word[t]) continue;
        size_t l;
        const unsigned char *b = tok_bytes(s, t, &l);
        uint64_t key = 0;
        for (size_t i = 0; i < 8; i++)
            key = key << 8 | (i < l ? b[i] : 0);
        k[n++] = rkey{key, t};
    }
    qsort_r(k, n, sizeof *k, by_bytes, (void *)s);
    for (uint32_t i = 0; i < n; i++) {
        ids[i] = k[i].id;
        rank[k[i].id] = i;
    }
    g->nwords = n;
    if ((rc = dalloc(&g->arank, (size_t)nt + 1)) || (rc = dalloc(&g->aids, n)) ||
        (rc = dalloc(&g->aht, 5 * ((size_t)g->nrules + 1))) || (rc = dalloc(&g->aown, g->nsyms)) ||
        (rc = dalloc(&g->anwb, (size_t)g->nrules + 1)) ||
        (rc = dalloc(&g->aew, (size_t)g->nrules + 1)))
        goto out;
    {
        cudaError_t e = cudaMemcpyAsync(g->arank, rank, (size_t)nt * sizeof *rank,
                                        cudaMemcpyHostToDevice, g->st);
        if (e == cudaSuccess && n)
            e = cudaMemcpyAsync(g->aids, ids, (size_t)n * sizeof *ids, cudaMemcpyHostToDevice,
                                g->st);
        if (e != cudaSuccess) {
            rc = gpu_fail(e, "cudaMemcpyAsync");
            goto out;
        }
    }
    {
        dg d = {nt,     g->syms,  g->root, g->rule_start, g->arank,
                g->aht, g->level, g->anwb, g->tflag,      g->cut};
        if (g->nrules) {
            k_rinfo<<<blocks(g->nrules, TPB), TPB, 0, g->st>>>(g->nrules, d, g->aown, g->anwb);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) {
                rc = gpu_fail(e, "kernel k_rinfo");
                goto out;
            }
        }
        for (uint32_t lv = 1; lv <= g->nlevels; lv++) {
            uint32_t m = g->lvl_off[lv] - g->lvl_off[lv - 1];
            k_ht<<<blocks(m, TPB), TPB, 0, g->st>>>(g->lvl_rules + g->lvl_off[lv - 1], m, d, g->aht,
                                                    g->aew);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) {
                rc = gpu_fail(e, "kernel k_ht");
                goto out;
            }
        }
    }
    {
        /* the pageable sources must stay until the copies are done */
        cudaError_t e = cudaStreamSynchronize(g->st);
        if (e != cudaSuccess) rc = gpu_fail(e, "analytics preparation");
    }
    if (!rc) rc = path_order(g);
    /* Keep freed stream-ordered memory in the pool within a call (gpu_analytic trims it after
     * each call to POOL_KEEP). */
    if (!rc) {
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        int dev = 0;
        cudaError_t e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, dev);
        if (e == cudaSuccess)
            e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        if (e != cudaSuccess) rc = gpu_fail(e, "memory pool");
    }
out:
    free(k);
    free(rank);
    free(ids);
    if (!rc) g->aprep = 1;
    return rc;
}

/* ---- 3-word sequences ending in the symbol at p of a body starting at b ---- */

/* The (at most two) sequences that start before position p and end in the first one or two
 * words of the symbol there, into q; returns how many. The words before p are the last two of
 * the symbols before it (their tails), looked up backwards: what engine/analytics/ana_docs.c's cross
 * keeps as its window when it walks the body from b. */
static __device__ __forceinline__ int seq_at(const dg &d, const uint32_t *arr, u64 b, u64 p,
                                             uint32_t q[2][3])
{
    uint32_t s = arr[p], h0, h1 = NONE, nh;
    if (s >= d.nt) {
        const uint32_t *c = d.ht + 5 * (u64)(s - d.nt);
        if (!c[4]) return 0;
        nh = c[4] < 2 ? c[4] : 2;
        h0 = c[0];
        h1 = c[1];
    } else {
        h0 = d.rank[s];
        if (h0 == NONE) return 0;
        nh = 1;
    }
    uint32_t w0 = NONE, w1 = NONE, wl = 0; /* window: w0 w1 (two words) or w1 (one) */
    for (u64 j = p; j > b && wl < 2; j--) {
        uint32_t t = arr[j - 1];
        if (t >= d.nt) {
            const uint32_t *c = d.ht + 5 * (u64)(t - d.nt);
            if (!c[4]) continue;
            if (c[4] >= 2) {
                if (wl == 0) {
                    w0 = c[2];
                    w1 = c[3];
                } else {
                    w0 = c[3];
                }
                wl = 2;
                continue;
            }
            t = c[0];
        } else {
            t = d.rank[t];
            if (t == NONE) continue;
        }
        if (wl == 0)
            w1 = t;
        else
            w0 = t;
        wl++;
    }
    int n = 0;
    if (wl == 2) {
        q[n][0] = w0, q[n][1] = w1, q[n][2] = h0, n++;
        if (nh == 2) q[n][0] = w1, q[n][1] = h0, q[n][2] = h1, n++;
    } else if (wl == 1 && nh == 2) {
        q[n][0] = w1, q[n][1] = h0, q[n][2] = h1, n++;
    }
    return n;
}

static __device__ __forceinline__ u64 seq_key(const uint32_t q[3], int rb)
{
    return (u64)q[0] << (2 * rb) | (u64)q[1] << rb | q[2];
}

/* Sequence `at`: the three ranks in key[at], or, with lo (for more than 2^21 words, whose three
 * ranks need more than 64 bits), the first two in key[at] and the third in lo[at]. */
static __device__ __forceinline__ void seq_put(u64 *key, uint32_t *lo, u64 at, const uint32_t q[3],
                                               int rb)
{
    if (lo) {
        key[at] = (u64)q[0] << rb | q[1];
        lo[at] = q[2];
    } else {
        key[at] = seq_key(q, rb);
    }
}

/* ---- scope kernels ---- */

/* flag: set where a root symbol of the scope holds a word cut at TOK_CAP; ecut (or NULL): one
 * byte per entry, set for the entries (fent) of the files that hold one. */
__global__ void k_cutscan(dg d, dscope s, const uint32_t *fent, uint8_t *ecut, uint32_t *flag)
{
    GRID_LOOP(i, s.nroot)
    {
        uint32_t f = file_of(s, i), x = d.root[s.frs[f] + (i - s.fpre[f])];
        if (x >= d.nt ? d.cut[x - d.nt] : (d.tflag[x] & TF_CUT)) {
            *flag = 1;
            if (ecut) ecut[fent[f]] = 1;
        }
    }
}

/* ---- (file, rule) pairs ---- */

struct ptab {
    u64 *key, *val, cap;
    uint32_t *list;  /* slots of each level's pairs: level k at lofs[k] .. + lcnt[k] */
    const u64 *lofs; /* nlevels + 2 */
    unsigned long long *lcnt;
    uint32_t *ovf;
};

static __device__ void p_add(const ptab &t, const dg &d, uint32_t f, uint32_t r, u64 v)
{
    u64 k = (u64)f << 32 | r, m = t.cap - 1, h = hmix(k) & m;
    for (u64 p = 0; p < t.cap; p++, h = (h + 1) & m) {
        u64 x = t.key[h];
        if (x == EMPTY_KEY) {
            x = atomicCAS(&t.key[h], EMPTY_KEY, k);
            if (x == EMPTY_KEY) {
                uint32_t lv = d.level[r];
                u64 at = atomicAdd(&t.lcnt[lv], 1ull);
                if (t.lofs[lv] + at < t.lofs[lv + 1])
                    t.list[t.lofs[lv] + at] = (uint32_t)h;
                else
                    *t.ovf = 1; /* the bound below rules this out */
            }
        }
        if (x == EMPTY_KEY || x == k) {
            atomicAdd(&t.val[h], v);
            return;
        }
    }
    *t.ovf = 1;
}

/* Bounds: u[r] >= the files whose expansion holds rule r (its root occurrences plus its
 * parents' bounds; a parent counted once per body as far as a short look back tells). */
__global__ void k_useed(dg d, dscope s, u64 *u)
{
    GRID_LOOP(i, s.nroot)
    {
        uint32_t f = file_of(s, i), x = d.root[s.frs[f] + (i - s.fpre[f])];
        if (x >= d.nt) atomicAdd(&u[x - d.nt], 1ull);
    }
}

__global__ void k_upush(const uint32_t *rules, uint32_t n, dg d, u64 nf, u64 *u)
{
    GRID_LOOP(k, n)
    {
        uint32_t p = rules[k];
        u64 v = u[p] < nf ? u[p] : nf, b = d.rule_start[p - 1], e = d.rule_start[p];
        if (!v) continue;
        for (u64 i = b; i < e; i++) {
            uint32_t s = d.syms[i];
            if (s < d.nt) continue;
            bool dup = false;
            for (u64 j = i > b + 16 ? i - 16 : b; j < i && !dup; j++)
                dup = d.syms[j] == s;
            if (!dup) atomicAdd(&u[s - d.nt], v);
        }
    }
}

/* Per level, the sum of the bounds (lsum[level]); lsum[0] gets the grand total. */
__global__ void k_usum(uint32_t nrules, dg d, const u64 *u, u64 nf, unsigned long long *lsum)
{
    GRID_LOOP(k, nrules)
    {
        uint32_t r = (uint32_t)k + 1;
        u64 v = u[r] < nf ? u[r] : nf;
        if (v) {
            atomicAdd(&lsum[d.level[r]], (unsigned long long)v);
            atomicAdd(&lsum[0], (unsigned long long)v);
        }
    }
}

__global__ void k_pseed(dg d, dscope s, ptab t)
{
    GRID_LOOP(i, s.nroot)
    {
        uint32_t f = file_of(s, i), x = d.root[s.frs[f] + (i - s.fpre[f])];
        if (x >= d.nt) p_add(t, d, f, x - d.nt, 1);
    }
}

/* Level k's pairs push their counts into their rules' child rules, for the same file. */
__global__ void k_ppush(uint32_t k, dg d, ptab t)
{
    u64 n = t.lcnt[k], base = t.lofs[k];
    GRID_LOOP(j, n)
    {
        u64 h = t.list[base + j], x = t.key[h], v = t.val[h];
        uint32_t r = (uint32_t)x, f = (uint32_t)(x >> 32);
        for (u64 i = d.rule_start[r - 1]; i < d.rule_start[r]; i++) {
            uint32_t s = d.syms[i];
            if (s >= d.nt) p_add(t, d, f, s - d.nt, v);
        }
    }
}

/* ---- word tuples (invindex, termvector) ---- */

/* How many tuples: the pairs' rules' own words, and the root runs' words. */
__global__ void k_wsize(dg d, ptab t, unsigned long long *total)
{
    unsigned long long c = 0;
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x != EMPTY_KEY) c += d.nwb[(uint32_t)x];
    }
    if (c) atomicAdd(total, c);
}

__global__ void k_rwsize(dg d, dscope s, unsigned long long *total)
{
    unsigned long long c = 0;
    GRID_LOOP(i, s.nroot)
    {
        uint32_t f = file_of(s, i), x = d.root[s.frs[f] + (i - s.fpre[f])];
        c += x < d.nt && d.rank[x] != NONE;
    }
    if (c) atomicAdd(total, c);
}

/* Tuples as keys (wordmajor: rank << fb | file, else file << rb | rank) and counts. */
__global__ void k_wfill(dg d, ptab t, int wordmajor, int fb, int rb, u64 *key, u64 *cnt,
                        unsigned long long *cur)
{
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x == EMPTY_KEY) continue;
        uint32_t r = (uint32_t)x, f = (uint32_t)(x >> 32), nw = d.nwb[r];
        if (!nw) continue;
        u64 v = t.val[h], at = atomicAdd(cur, (unsigned long long)nw);
        for (u64 i = d.rule_start[r - 1]; i < d.rule_start[r]; i++) {
            uint32_t s = d.syms[i], w;
            if (s >= d.nt || (w = d.rank[s]) == NONE) continue;
            key[at] = wordmajor ? (u64)w << fb | f : (u64)f << rb | w;
            cnt[at++] = v;
        }
    }
}

__global__ void k_rwfill(dg d, dscope s, int wordmajor, int fb, int rb, u64 *key, u64 *cnt,
                         unsigned long long *cur)
{
    GRID_LOOP(i, s.nroot)
    {
        uint32_t f = file_of(s, i), x = d.root[s.frs[f] + (i - s.fpre[f])], w;
        if (x >= d.nt || (w = d.rank[x]) == NONE) continue;
        u64 at = atomicAdd(cur, 1ull);
        key[at] = wordmajor ? (u64)w << fb | f : (u64)f << rb | w;
        cnt[at] = 1;
    }
}

/* ---- sequence tuples (seqcount, rankedinvindex) ---- */

/* seqcount: every body position of a rule with weight, times the weight. */
__global__ void k_sfill_rules(dg d, u64 nsyms, const uint32_t *own, const u64 *w, int rb, u64 *key,
                              uint32_t *lo, u64 *cnt, unsigned long long *cur)
{
    GRID_LOOP(p, nsyms)
    {
        uint32_t r = own[p], q[2][3];
        u64 wr = w[r];
        if (!wr) continue;
        int n = seq_at(d, d.syms, d.rule_start[r - 1], p, q);
        if (!n) continue;
        u64 at = atomicAdd(cur, (unsigned long long)n);
        for (int j = 0; j < n; j++) {
            seq_put(key, lo, at + j, q[j], rb);
            cnt[at + j] = wr;
        }
    }
}

/* Every root position of the scope, once; with file (rankedinvindex) its file too. */
__global__ void k_sfill_root(dg d, dscope s, int rb, u64 *key, uint32_t *lo, u64 *cnt,
                             uint32_t *file, unsigned long long *cur)
{
    GRID_LOOP(i, s.nroot)
    {
        uint32_t f = file_of(s, i), q[2][3];
        int n = seq_at(d, d.root, s.frs[f], s.frs[f] + (i - s.fpre[f]), q);
        if (!n) continue;
        u64 at = atomicAdd(cur, (unsigned long long)n);
        for (int j = 0; j < n; j++) {
            seq_put(key, lo, at + j, q[j], rb);
            cnt[at + j] = 1;
            if (file) file[at + j] = f;
        }
    }
}

/* rankedinvindex: bound on the tuples of the pairs (two per body position). */
__global__ void k_ssize(dg d, ptab t, unsigned long long *total)
{
    unsigned long long c = 0;
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x != EMPTY_KEY) c += 2 * (d.rule_start[(uint32_t)x] - d.rule_start[(uint32_t)x - 1]);
    }
    if (c) atomicAdd(total, c);
}

__global__ void k_sfill_pairs(dg d, ptab t, int rb, u64 *key, uint32_t *lo, u64 *cnt,
                              uint32_t *file, unsigned long long *cur)
{
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x == EMPTY_KEY) continue;
        uint32_t r = (uint32_t)x, f = (uint32_t)(x >> 32), q[2][3];
        u64 v = t.val[h], b = d.rule_start[r - 1], e = d.rule_start[r];
        for (u64 p = b; p < e; p++) {
            int n = seq_at(d, d.syms, b, p, q);
            if (!n) continue;
            u64 at = atomicAdd(cur, (unsigned long long)n);
            for (int j = 0; j < n; j++) {
                seq_put(key, lo, at + j, q[j], rb);
                cnt[at + j] = v;
                file[at + j] = f;
            }
        }
    }
}

/* ---- bottom-up (Algorithm 2): per-rule tables built children first ---- */

/* Each rule's table: tn[r] entries at tk[r] (word rank, or sequence key) and tv[r] (count). */
struct btab {
    const u64 **tk, **tv;
    uint32_t *tn;
};

/* The selector's two estimates (engine/analytics/ana.h): u[r] bounds the files using r. */
__global__ void k_est(uint32_t nrules, dg d, const u64 *u, u64 nf, const uint32_t *ew, int seq,
                      double *est)
{
    double td = 0, bu = 0;
    GRID_LOOP(k, nrules)
    {
        uint32_t r = (uint32_t)k + 1;
        if (!u[r]) continue;
        u64 b = d.rule_start[r - 1], e = d.rule_start[r], f = u[r] < nf ? u[r] : nf;
        td += (double)f * (double)(e - b + 2);
        for (u64 i = b; i < e; i++) {
            uint32_t s = d.syms[i];
            if (s >= d.nt) {
                double w = ew[s - d.nt];
                bu += (seq ? (w > 2 ? w - 2 : 0) : w) + (seq ? 2 : 0);
            } else {
                bu += d.rank[s] != NONE;
            }
        }
    }
    if (td) atomicAdd(&est[0], td);
    if (bu) atomicAdd(&est[1], bu);
}

/* The level-2 part: each file's distinct root-run rules' tables (the seeded pairs). */
__global__ void k_est_root(ptab t, const uint32_t *ew, int seq, double *est)
{
    double bu = 0;
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x == EMPTY_KEY) continue;
        double w = ew[(uint32_t)x];
        bu += seq ? (w > 2 ? w - 2 : 0) : w;
    }
    if (bu) atomicAdd(&est[1], bu);
}

/* Bound on the entries of each rule of a level: its children's tables, plus its own words (or
 * two crossing sequences per body position); sz[n] = 0 for the scan. */
__global__ void k_bsize(const uint32_t *rules, uint32_t n, dg d, const u64 *u, btab b, int seq,
                        u64 *sz)
{
    GRID_LOOP(j, (u64)n + 1)
    {
        if (j == n) {
            sz[n] = 0;
            continue;
        }
        uint32_t r = rules[j];
        u64 c = 0;
        if (u[r])
            for (u64 i = d.rule_start[r - 1]; i < d.rule_start[r]; i++) {
                uint32_t s = d.syms[i];
                if (s >= d.nt) c += b.tn[s - d.nt];
                c += seq ? 2 : s < d.nt && d.rank[s] != NONE;
            }
        sz[j] = c;
    }
}

__global__ void k_bfill(const uint32_t *rules, uint32_t n, dg d, const u64 *u, btab b, int seq,
                        int rb, const u64 *offs, u64 *K, u64 *V, uint8_t *segflag,
                        unsigned long long *used)
{
    GRID_LOOP(j, n)
    {
        uint32_t r = rules[j];
        if (!u[r]) continue;
        u64 at = offs[j], b0 = d.rule_start[r - 1], e = d.rule_start[r];
        for (u64 i = b0; i < e; i++) {
            uint32_t s = d.syms[i], q[2][3];
            if (s >= d.nt) {
                const u64 *ck = b.tk[s - d.nt], *cv = b.tv[s - d.nt];
                for (uint32_t x = 0; x < b.tn[s - d.nt]; x++)
                    K[at] = ck[x], V[at++] = cv[x];
            }
            if (seq) {
                int m = seq_at(d, d.syms, b0, i, q);
                for (int x = 0; x < m; x++)
                    K[at] = seq_key(q[x], rb), V[at++] = 1;
            } else if (s < d.nt && d.rank[s] != NONE) {
                K[at] = d.rank[s], V[at++] = 1;
            }
        }
        /* the rest of the bound: keys past every real one, dropped after the sort */
        for (u64 x = at; x < offs[j + 1]; x++)
            K[x] = EMPTY_KEY, V[x] = 0;
        if (offs[j] < offs[j + 1]) segflag[offs[j]] = 1;
        if (at > offs[j]) atomicAdd(used, (unsigned long long)(at - offs[j]));
    }
}

/* Runs of equal keys inside each rule's segment (padding keys form runs of their own). */
__global__ void k_bheads(const u64 *K, u64 n, const uint8_t *segflag, uint32_t *head)
{
    GRID_LOOP(i, n) head[i] = i == 0 || segflag[i] || K[i] != K[i - 1];
}

__global__ void k_bkeys(const u64 *K, u64 n, const uint32_t *head, const uint32_t *rid, u64 *RK)
{
    GRID_LOOP(i, n) if (head[i]) RK[rid[i] - 1] = K[i];
}

/* Each rule's table: its runs, less the padding run at the end (key EMPTY_KEY). */
__global__ void k_bset(const uint32_t *rules, uint32_t n, const u64 *offs, const uint32_t *rid,
                       const u64 *RK, const u64 *agg, btab b)
{
    GRID_LOOP(j, n)
    {
        uint32_t r = rules[j];
        if (offs[j] == offs[j + 1]) continue;
        uint32_t a = rid[offs[j]] - 1, z = rid[offs[j + 1] - 1];
        if (RK[z - 1] == EMPTY_KEY) z--;
        b.tk[r] = RK + a;
        b.tv[r] = agg + a;
        b.tn[r] = z - a;
    }
}

/* Level 2: each seeded (file, rule) pair emits its rule's table times its count. */
__global__ void k_btsize(ptab t, btab b, unsigned long long *total)
{
    unsigned long long c = 0;
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x != EMPTY_KEY) c += b.tn[(uint32_t)x];
    }
    if (c) atomicAdd(total, c);
}

/* mode 0: word tuples rank << fb | file (wordmajor) or file << rb | rank; mode 1: sequences
 * with files apart. */
__global__ void k_btfill(ptab t, btab b, int mode, int wordmajor, int fb, int rb, u64 *key,
                         u64 *cnt, uint32_t *file, unsigned long long *cur)
{
    GRID_LOOP(h, t.cap)
    {
        u64 x = t.key[h];
        if (x == EMPTY_KEY) continue;
        uint32_t r = (uint32_t)x, f = (uint32_t)(x >> 32), n = b.tn[r];
        if (!n) continue;
        u64 v = t.val[h], at = atomicAdd(cur, (unsigned long long)n);
        const u64 *tk = b.tk[r], *tv = b.tv[r];
        for (uint32_t j = 0; j < n; j++, at++) {
            if (mode == 0) {
                key[at] = wordmajor ? tk[j] << fb | f : (u64)f << rb | tk[j];
            } else {
                key[at] = tk[j];
                file[at] = f;
            }
            cnt[at] = tv[j] * v;
        }
    }
}

/* ---- small kernels between sorts ---- */

__global__ void k_iota32(uint32_t *v, u64 n)
{
    GRID_LOOP(i, n) v[i] = (uint32_t)i;
}

__global__ void k_dense(uint32_t nt, const uint32_t *rank, const u64 *cnt, u64 *dense)
{
    GRID_LOOP(t, nt)
    {
        uint32_t r = rank[t];
        if (r != NONE) dense[r] = cnt[t];
    }
}

__global__ void k_negate(const u64 *in, u64 n, u64 *out)
{
    GRID_LOOP(i, n) out[i] = ~in[i];
}

/* Keys f << 32 | (2^32 - 1 - count), so a stable sort orders by file, then count descending
 * (ties keep their order); flags counts of 2^32 or more. */
__global__ void k_byfile_count(const u64 *ukey, const u64 *ucnt, u64 n, int rb, u64 *key3,
                               uint32_t *val3, uint32_t *flag)
{
    GRID_LOOP(i, n)
    {
        u64 c = ucnt[i];
        if (c > 0xffffffffull) *flag = 1;
        key3[i] = (ukey[i] >> rb) << 32 | (0xffffffffull - (c & 0xffffffffull));
        val3[i] = (uint32_t)(ukey[i] & (((u64)1 << rb) - 1));
    }
}

/* Sequence ids: head[i] = 1 where a run of equal keys starts. */
__global__ void k_heads(const u64 *k, u64 n, uint32_t *head)
{
    GRID_LOOP(i, n) head[i] = i == 0 || k[i] != k[i - 1];
}

/* After the inclusive scan sid[i] is 1 + the id of tuple i's sequence: key2 = id << fb | file,
 * and useq[id] = the sequence. */
__global__ void k_sidkey(const u64 *skey, const uint32_t *perm, const uint32_t *sid,
                         const uint32_t *file, const u64 *cnt, u64 n, int fb, u64 *key2, u64 *cnt2,
                         u64 *useq)
{
    GRID_LOOP(i, n)
    {
        uint32_t id = sid[i] - 1, j = perm[i];
        key2[i] = (u64)id << fb | file[j];
        cnt2[i] = cnt[j];
        if (i == 0 || sid[i - 1] != sid[i]) useq[id] = skey[i];
    }
}

template <class T> __global__ void k_gather(const T *in, const uint32_t *idx, u64 n, T *out)
{
    GRID_LOOP(i, n) out[i] = in[idx[i]];
}

/* Wide sequences, sorted: head[i] = 1 where a run of equal (hi, lo) starts. */
__global__ void k_runhead(const u64 *hi, const uint32_t *lo, u64 n, u64 *head)
{
    GRID_LOOP(i, n) head[i] = i == 0 || hi[i] != hi[i - 1] || lo[i] != lo[i - 1];
}

/* After the inclusive scan sid[i] is 1 + the id of tuple i's sequence: id[i], and the
 * sequence of each id in rhi, rlo. */
__global__ void k_runrep(const u64 *hi, const uint32_t *lo, const u64 *sid, u64 n, u64 *id,
                         u64 *rhi, uint32_t *rlo)
{
    GRID_LOOP(i, n)
    {
        u64 r = sid[i] - 1;
        id[i] = r;
        if (i == 0 || sid[i - 1] != sid[i]) {
            rhi[r] = hi[i];
            rlo[r] = lo[i];
        }
    }
}

/* ---- text ---- */

static __device__ __forceinline__ int ndig(u64 v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static __device__ __forceinline__ unsigned char *put_num(unsigned char *o, u64 v)
{
    int n = ndig(v);
    for (int i = n - 1; i >= 0; i--) {
        o[i] = (unsigned char)('0' + v % 10);
        v /= 10;
    }
    return o + n;
}

static __device__ __forceinline__ unsigned char *put_bytes(unsigned char *o, const unsigned char *s,
                                                           u64 n)
{
    for (u64 i = 0; i < n; i++)
        o[i] = s[i];
    return o + n;
}

/* Word and path bytes. */
struct dtext {
    const uint32_t *ids;
    const u64 *toff;
    const unsigned char *blob;
    const unsigned char *ptext; /* escaped paths of the archive's entries */
    const u64 *poff;            /* per entry; the scope's part starts plen bytes in */
    const uint32_t *fent;       /* scope file -> entry */
    u64 plen;
    int rb;
    const u64 *rhi;      /* wide sequences: id -> first two ranks (NULL: keys hold all three) */
    const uint32_t *rlo; /* id -> third rank */
    __device__ void ranks(u64 k, uint32_t w[3]) const
    {
        u64 m = ((u64)1 << rb) - 1, h = rhi ? rhi[k] : k >> rb;
        w[0] = (uint32_t)(h >> rb);
        w[1] = (uint32_t)(h & m);
        w[2] = rhi ? rlo[k] : (uint32_t)(k & m);
    }
    __device__ u64 wlen(uint32_t rk) const
    {
        uint32_t t = ids[rk];
        return toff[t + 1] - toff[t];
    }
    __device__ unsigned char *word(unsigned char *o, uint32_t rk) const
    {
        uint32_t t = ids[rk];
        return put_bytes(o, blob + toff[t], toff[t + 1] - toff[t]);
    }
    __device__ u64 plen_of(uint32_t f) const { return poff[fent[f] + 1] - poff[fent[f]] - plen; }
    __device__ unsigned char *path(unsigned char *o, uint32_t f) const
    {
        return put_bytes(o, ptext + poff[fent[f]] + plen, plen_of(f));
    }
    __device__ u64 seqlen(u64 k) const
    {
        uint32_t w[3];
        ranks(k, w);
        return wlen(w[0]) + wlen(w[1]) + wlen(w[2]) + 2;
    }
    __device__ unsigned char *seq(unsigned char *o, u64 k) const
    {
        uint32_t w[3];
        ranks(k, w);
        o = word(o, w[0]);
        *o++ = ' ';
        o = word(o, w[1]);
        *o++ = ' ';
        return word(o, w[2]);
    }
};

/* wordcount (count first; counts negated by the sort) and sort (dense by rank). */
struct wc_rec {
    dtext x;
    const u64 *cnt;
    const uint32_t *rk; /* NULL: record i is rank i */
    int count_first;
    __device__ u64 count(u64 i) const { return count_first ? ~cnt[i] : cnt[i]; }
    __device__ u64 len(u64 i) const
    {
        u64 c = count(i);
        return c ? x.wlen(rk ? rk[i] : (uint32_t)i) + ndig(c) + 2 : 0;
    }
    __device__ void put(u64 i, unsigned char *o) const
    {
        u64 c = count(i);
        if (!c) return;
        uint32_t w = rk ? rk[i] : (uint32_t)i;
        if (count_first) {
            o = put_num(o, c);
            *o++ = '\t';
            o = x.word(o, w);
        } else {
            o = x.word(o, w);
            *o++ = '\t';
            o = put_num(o, c);
        }
        *o = '\n';
    }
};

/* invindex: keys rank << fb | file, unique and sorted. */
struct ii_rec {
    dtext x;
    const u64 *k;
    u64 n;
    int fb;
    __device__ u64 len(u64 i) const
    {
        uint32_t w = (uint32_t)(k[i] >> fb), f = (uint32_t)(k[i] & (((u64)1 << fb) - 1));
        bool first = i == 0 || (uint32_t)(k[i - 1] >> fb) != w,
             last = i + 1 == n || (uint32_t)(k[i + 1] >> fb) != w;
        return (first ? x.wlen(w) : 0) + 1 + x.plen_of(f) + last;
    }
    __device__ void put(u64 i, unsigned char *o) const
    {
        uint32_t w = (uint32_t)(k[i] >> fb), f = (uint32_t)(k[i] & (((u64)1 << fb) - 1));
        if (i == 0 || (uint32_t)(k[i - 1] >> fb) != w) o = x.word(o, w);
        *o++ = '\t';
        o = x.path(o, f);
        if (i + 1 == n || (uint32_t)(k[i + 1] >> fb) != w) *o = '\n';
    }
};

/* termvector: keys file << 32 | ~count, values ranks. */
struct tv_rec {
    dtext x;
    const u64 *k;
    const uint32_t *w;
    __device__ u64 len(u64 i) const
    {
        uint32_t f = (uint32_t)(k[i] >> 32);
        u64 c = 0xffffffffull - (k[i] & 0xffffffffull);
        return x.plen_of(f) + ndig(c) + x.wlen(w[i]) + 3;
    }
    __device__ void put(u64 i, unsigned char *o) const
    {
        uint32_t f = (uint32_t)(k[i] >> 32);
        o = x.path(o, f);
        *o++ = '\t';
        o = put_num(o, 0xffffffffull - (k[i] & 0xffffffffull));
        *o++ = '\t';
        o = x.word(o, w[i]);
        *o = '\n';
    }
};

/* seqcount: keys ~count, values sequence keys. */
struct sc_rec {
    dtext x;
    const u64 *k, *q;
    __device__ u64 len(u64 i) const { return ndig(~k[i]) + x.seqlen(q[i]) + 2; }
    __device__ void put(u64 i, unsigned char *o) const
    {
        o = put_num(o, ~k[i]);
        *o++ = '\t';
        o = x.seq(o, q[i]);
        *o = '\n';
    }
};

/* rankedinvindex: keys id << 32 | ~count, values files, useq[id] the sequence. */
struct ri_rec {
    dtext x;
    const u64 *k, *useq;
    const uint32_t *f;
    u64 n;
    __device__ u64 len(u64 i) const
    {
        uint32_t id = (uint32_t)(k[i] >> 32);
        bool first = i == 0 || (uint32_t)(k[i - 1] >> 32) != id,
             last = i + 1 == n || (uint32_t)(k[i + 1] >> 32) != id;
        u64 c = 0xffffffffull - (k[i] & 0xffffffffull);
        return (first ? x.seqlen(useq[id]) : 0) + 1 + x.plen_of(f[i]) + 1 + ndig(c) + last;
    }
    __device__ void put(u64 i, unsigned char *o) const
    {
        uint32_t id = (uint32_t)(k[i] >> 32);
        if (i == 0 || (uint32_t)(k[i - 1] >> 32) != id) o = x.seq(o, useq[id]);
        *o++ = '\t';
        o = x.path(o, f[i]);
        *o++ = ':';
        o = put_num(o, 0xffffffffull - (k[i] & 0xffffffffull));
        if (i + 1 == n || (uint32_t)(k[i + 1] >> 32) != id) *o = '\n';
    }
};

template <class R> __global__ void k_len(R r, u64 n, u64 *len)
{
    GRID_LOOP(i, n + 1) len[i] = i < n ? r.len(i) : 0;
}

template <class R> __global__ void k_put(R r, u64 n, const u64 *at, unsigned char *o)
{
    GRID_LOOP(i, n) r.put(i, o + at[i]);
}

/* ---- host side ---- */

struct call {
    gpu_gram *g;
    tmp t;
    dg d;
    dscope s;
    dtext x;
    unsigned long long *ctr; /* device counters */
    unsigned long long ctr_h[8];
    gpu_ana_args o; /* the caller's settings */
};

/* Copy the first n counters back (a sync). */
static int counters(call &c, int n)
{
    CK(cudaMemcpyAsync(c.ctr_h, c.ctr, n * sizeof *c.ctr, cudaMemcpyDeviceToHost, c.g->st));
    CK(cudaStreamSynchronize(c.g->st));
    return 0;
}

template <class R> static int emit(call &c, R r, u64 n, buf *out)
{
    gpu_gram *g = c.g;
    int rc;
    if (!n) return 0;
    u64 *len;
    if ((rc = c.t.get(&len, n + 1))) return rc;
    k_len<<<blocks(n + 1, TPB), TPB, 0, g->st>>>(r, n, len);
    CK_LAUNCH("k_len");
    if ((rc = cub_run(g->st, [&](void *tp, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(tp, b, len, len, (int64_t)(n + 1), g->st);
         })))
        return rc;
    u64 total;
    CK(cudaMemcpyAsync(&total, len + n, sizeof total, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st));
    if (total > g->aout_cap) {
        CK(cudaFree(g->aout));
        g->aout = NULL;
        g->aout_cap = 0;
        size_t cap = total + total / 4;
        CK(cudaMalloc((void **)&g->aout, cap));
        g->aout_cap = cap;
    }
    k_put<<<blocks(n, TPB), TPB, 0, g->st>>>(r, n, len, g->aout);
    CK_LAUNCH("k_put");
    if (!total) return 0;
    if (buf_reserve(out, total)) return tdc_error(-ENOMEM, "gpu: out of memory");
    CK(cudaMemcpyAsync(out->p + out->n, g->aout, total, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st));
    out->n += total;
    return 0;
}

/* Stable radix sort of n (key, value) pairs on key bits [0, bits). */
template <class K, class V>
static int sort_pairs(call &c, const K *kin, K *kout, const V *vin, V *vout, u64 n, int bits)
{
    cudaStream_t st = c.g->st;
    return cub_run(st, [&](void *tp, size_t &b) {
        return cub::DeviceRadixSort::SortPairs(tp, b, kin, kout, vin, vout, (int64_t)n, 0, bits,
                                               st);
    });
}

/* Sum the values of runs of equal keys: m runs into uk, uv. */
static int reduce(call &c, const u64 *k, const u64 *v, u64 n, u64 *uk, u64 *uv, u64 *m)
{
    cudaStream_t st = c.g->st;
    int rc = cub_run(st, [&](void *tp, size_t &b) {
        return cub::DeviceReduce::ReduceByKey(tp, b, k, uk, v, uv, c.ctr + 7,
                                              cuda::std::plus<u64>(), (int64_t)n, st);
    });
    if (rc || (rc = counters(c, 8))) return rc;
    *m = c.ctr_h[7];
    return 0;
}

/* Wide sequences (key: first two ranks, lo: the third): sort them by (key, lo) in two stable
 * radix passes, lo first, carrying vin to vout, and write each tuple's sequence id (ids follow
 * the sorted order) to kout; c.x.rhi/rlo then turn ids back into ranks for the text. */
template <class V>
static int seq_sort_wide(call &c, const u64 *key, const uint32_t *lo, const V *vin, u64 *kout,
                         V *vout, u64 n, int rb)
{
    cudaStream_t st = c.g->st;
    if (n >= ((u64)1 << 32)) return tdc_error(-ENOTSUP, "gpu: analytics: too many sequences");
    uint32_t *p0, *p1, *p2, *lo1, *lo2, *rlo;
    u64 *hi1, *hi2, *sid, *rhi;
    int rc;
    if ((rc = c.t.get(&p0, n)) || (rc = c.t.get(&p1, n)) || (rc = c.t.get(&p2, n)) ||
        (rc = c.t.get(&lo1, n)) || (rc = c.t.get(&lo2, n)) || (rc = c.t.get(&rlo, n)) ||
        (rc = c.t.get(&hi1, n)) || (rc = c.t.get(&hi2, n)) || (rc = c.t.get(&sid, n)) ||
        (rc = c.t.get(&rhi, n)))
        return rc;
    k_iota32<<<blocks(n, TPB), TPB, 0, st>>>(p0, n);
    CK_LAUNCH("k_iota32");
    if ((rc = sort_pairs(c, lo, lo1, p0, p1, n, rb))) return rc;
    k_gather<<<blocks(n, TPB), TPB, 0, st>>>(key, p1, n, hi1);
    CK_LAUNCH("k_gather");
    if ((rc = sort_pairs(c, hi1, hi2, p1, p2, n, 2 * rb))) return rc; /* p2: tuples in order */
    k_gather<<<blocks(n, TPB), TPB, 0, st>>>(lo, p2, n, lo2);
    k_gather<<<blocks(n, TPB), TPB, 0, st>>>(vin, p2, n, vout);
    k_runhead<<<blocks(n, TPB), TPB, 0, st>>>(hi2, lo2, n, sid);
    CK_LAUNCH("k_runhead");
    if ((rc = cub_run(st, [&](void *tp, size_t &b) {
             return cub::DeviceScan::InclusiveSum(tp, b, sid, sid, (int64_t)n, st);
         })))
        return rc;
    k_runrep<<<blocks(n, TPB), TPB, 0, st>>>(hi2, lo2, sid, n, kout, rhi, rlo);
    CK_LAUNCH("k_runrep");
    c.x.rhi = rhi;
    c.x.rlo = rlo;
    return 0;
}

/* The scope's regular files visible in vis (engine/analytics/ana.h): by path (per-file analytics: file
 * ranks follow path order) or in entry order; their root runs flattened. */
static int scope_files(call &c, uint32_t first, uint32_t end, const unsigned char *vis, int by_path)
{
    const gpu_ent *ents = c.g->ents;
    vec32 files = {};
    int rc = 0;
    if (by_path) {
        /* a subtree's paths are one range of the path order (with, at most, a few entries of
         * other subtrees whose names sort between, like "dir.c" between "dir" and "dir/a") */
        uint32_t lo = UINT32_MAX, hi = 0;
        for (uint32_t e = first; e < end; e++) {
            uint32_t r = c.g->aprk_h[e];
            if (r < lo) lo = r;
            if (r > hi) hi = r;
        }
        for (uint32_t r = lo; r <= hi && lo != UINT32_MAX && !rc; r++) {
            uint32_t e = c.g->apord_h[r];
            if (e >= first && e < end && ents[e].reg && (!vis || vis[e]) &&
                vec32_push(&files, e))
                rc = -ENOMEM;
        }
    } else {
        for (uint32_t e = first; e < end && !rc; e++)
            if (ents[e].reg && (!vis || vis[e]) && vec32_push(&files, e))
                rc = -ENOMEM;
    }
    if (rc) {
        vec32_free(&files);
        return tdc_error(-ENOMEM, "gpu: out of memory");
    }
    uint32_t nf = (uint32_t)files.n;
    u64 *h = (u64 *)malloc((2 * (size_t)nf + 1) * sizeof *h);
    if (!h) {
        vec32_free(&files);
        return tdc_error(-ENOMEM, "gpu: out of memory");
    }
    u64 tot = 0;
    for (uint32_t i = 0; i < nf; i++) {
        h[i] = tot;
        tot += ents[files.p[i]].root_len;
        h[nf + 1 + i] = ents[files.p[i]].root_start;
    }
    h[nf] = tot;
    u64 *fpre, *frs;
    uint32_t *fent;
    c.s.nf = nf;
    c.s.nroot = tot;
    if (!(rc = c.t.get(&fpre, (size_t)nf + 1)) && !(rc = c.t.get(&frs, nf)) &&
        !(rc = c.t.get(&fent, nf))) {
        cudaError_t e =
            cudaMemcpyAsync(fpre, h, ((size_t)nf + 1) * sizeof *h, cudaMemcpyHostToDevice, c.g->st);
        if (e == cudaSuccess && nf)
            e = cudaMemcpyAsync(frs, h + nf + 1, (size_t)nf * sizeof *h, cudaMemcpyHostToDevice,
                                c.g->st);
        if (e == cudaSuccess && nf)
            e = cudaMemcpyAsync(fent, files.p, (size_t)nf * sizeof *files.p, cudaMemcpyHostToDevice,
                                c.g->st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c.g->st); /* h and files go away */
        if (e != cudaSuccess) rc = gpu_fail(e, "scope upload");
    }
    c.s.fpre = fpre;
    c.s.frs = frs;
    c.x.fent = fent;
    free(h);
    vec32_free(&files);
    return rc;
}

/* The scope's prefix, escaped: its length is what every scope path skips of apath. The
 * prefix (c.o.prefix bytes) is a directory's path and its '/', or the part of a file's path
 * up to its last '/'. */
static int scope_prefix(call &c, uint32_t first)
{
    const char *p = c.g->ents[first].path;
    size_t plen = c.o.prefix, n = strlen(p), k = plen < n ? plen : n;
    buf pre = {};
    int bad = 0;
    char *pp = strndup(p, k);
    if (!pp) return tdc_error(-ENOMEM, "gpu: out of memory");
    put_esc(&pre, pp, &bad);
    free(pp);
    c.x.plen = pre.n + (plen - k); /* the directory's '/' */
    buf_free(&pre);
    return bad ? tdc_error(-ENOMEM, "gpu: out of memory") : 0;
}

/* The (file, rule) table of the scope (c.s by path). */
static int pairs(call &c, ptab &pt, int seq, int *bottomup, const u64 **uout)
{
    gpu_gram *g = c.g;
    int rc;
    size_t nr = (size_t)g->nrules + 1;
    u64 nf = c.s.nf;
    u64 *u;
    unsigned long long *lsum;
    if ((rc = c.t.get(&u, nr)) || (rc = c.t.get(&lsum, (size_t)g->nlevels + 2))) return rc;
    CK(cudaMemsetAsync(u, 0, nr * sizeof *u, g->st));
    CK(cudaMemsetAsync(lsum, 0, ((size_t)g->nlevels + 2) * sizeof *lsum, g->st));
    k_useed<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, u);
    CK_LAUNCH("k_useed");
    for (uint32_t k = g->nlevels; k > 1; k--) {
        uint32_t n = g->lvl_off[k] - g->lvl_off[k - 1];
        k_upush<<<blocks(n, TPB), TPB, 0, g->st>>>(g->lvl_rules + g->lvl_off[k - 1], n, c.d, nf, u);
        CK_LAUNCH("k_upush");
    }
    k_usum<<<blocks(g->nrules, TPB), TPB, 0, g->st>>>(g->nrules, c.d, u, nf, lsum);
    CK_LAUNCH("k_usum");
    unsigned long long *lh = (unsigned long long *)malloc(((size_t)g->nlevels + 2) * sizeof *lh);
    u64 *lofs_h = (u64 *)malloc(((size_t)g->nlevels + 2) * sizeof *lofs_h);
    if (!lh || !lofs_h) {
        free(lh);
        free(lofs_h);
        return tdc_error(-ENOMEM, "gpu: out of memory");
    }
    cudaError_t e = cudaMemcpyAsync(lh, lsum, ((size_t)g->nlevels + 2) * sizeof *lh,
                                    cudaMemcpyDeviceToHost, g->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
    u64 bound = lh[0];
    /* level k's list at lofs[k] (levels 1..nlevels) */
    lofs_h[0] = lofs_h[1] = 0;
    for (uint32_t k = 1; k <= g->nlevels; k++)
        lofs_h[k + 1] = lofs_h[k] + (e == cudaSuccess ? lh[k] : 0);
    free(lh);
    u64 cap = 1024;
    while (cap < 2 * bound)
        cap *= 2;
    u64 *lofs;
    if (e != cudaSuccess)
        rc = gpu_fail(e, "pair bounds");
    else if (bound >= ((u64)1 << 31))
        rc = tdc_error(-ENOTSUP, "gpu: analytics: too many (file, rule) pairs");
    else if (!(rc = c.t.get(&pt.key, cap)) && !(rc = c.t.get(&pt.val, cap)) &&
             !(rc = c.t.get(&pt.list, bound)) && !(rc = c.t.get(&lofs, (size_t)g->nlevels + 2)) &&
             !(rc = c.t.get(&pt.lcnt, (size_t)g->nlevels + 2))) {
        e = cudaMemcpyAsync(lofs, lofs_h, ((size_t)g->nlevels + 2) * sizeof *lofs,
                            cudaMemcpyHostToDevice, g->st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
        if (e != cudaSuccess) rc = gpu_fail(e, "pair offsets");
    }
    if (rc) {
        free(lofs_h);
        return rc;
    }
    pt.cap = cap;
    pt.lofs = lofs;
    pt.ovf = (uint32_t *)(c.ctr + 6);
    e = cudaMemsetAsync(pt.key, 0xff, cap * sizeof *pt.key, g->st);
    if (e == cudaSuccess) e = cudaMemsetAsync(pt.val, 0, cap * sizeof *pt.val, g->st);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(pt.lcnt, 0, ((size_t)g->nlevels + 2) * sizeof *pt.lcnt, g->st);
    if (e == cudaSuccess) {
        k_pseed<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, pt);
        e = cudaGetLastError();
    }
    /* The traversal: bottom-up only when forced (c.o.traversal 2). Auto stays top-down: on
     * the device bottom-up gains little on the largest archives and is slower on small ones,
     * also where engine/ana's cost model prefers it (bench/results/gpu.md has the figures).
     * With c.o.verbose the model's two estimates are computed and printed. */
    int bu = c.o.traversal == 2;
    double est_h[2] = {0, 0};
    if (c.o.verbose && e == cudaSuccess) {
        double *est = NULL;
        if ((rc = c.t.get(&est, 2))) {
            free(lofs_h);
            return rc;
        }
        e = cudaMemsetAsync(est, 0, 2 * sizeof *est, g->st);
        if (e == cudaSuccess) {
            k_est<<<blocks(g->nrules, TPB), TPB, 0, g->st>>>(g->nrules, c.d, u, nf, g->aew, seq,
                                                             est);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess) {
            k_est_root<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(pt, g->aew, seq, est);
            e = cudaGetLastError();
        }
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(est_h, est, sizeof est_h, cudaMemcpyDeviceToHost, g->st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
        fprintf(stderr,
                "tadoc: gpu: %s%s, %u files; the CPU model's estimates: top-down %.3g, "
                "bottom-up %.3g\n",
                bu ? "bottom-up" : "top-down", c.o.traversal ? " (forced)" : " (auto)", c.s.nf,
                est_h[0], est_h[1]);
    }
    *bottomup = bu;
    *uout = u;
    for (uint32_t k = g->nlevels; k > 1 && e == cudaSuccess && !bu; k--) {
        /* as many threads as the level's bound */
        k_ppush<<<blocks(lofs_h[k + 1] - lofs_h[k], TPB), TPB, 0, g->st>>>(k, c.d, pt);
        e = cudaGetLastError();
    }
    free(lofs_h);
    return e == cudaSuccess ? 0 : gpu_fail(e, "pair table");
}

/* Bottom-up tables of every rule the scope uses (u[r] > 0), level by level: each level's
 * rules gather their children's tables and their own words (or crossing sequences) into one
 * segment each, a segmented sort orders every segment, and a reduction over runs of equal keys
 * inside a segment gives the tables. */
static int bu_build(call &c, const u64 *u, int seq, int rb, btab &b)
{
    gpu_gram *g = c.g;
    int rc;
    size_t nr = (size_t)g->nrules + 1;
    if ((rc = c.t.get(&b.tk, nr)) || (rc = c.t.get(&b.tv, nr)) || (rc = c.t.get(&b.tn, nr)))
        return rc;
    CK(cudaMemsetAsync(b.tn, 0, nr * sizeof *b.tn, g->st));
    for (uint32_t lv = 1; lv <= g->nlevels; lv++) {
        uint32_t n = g->lvl_off[lv] - g->lvl_off[lv - 1];
        const uint32_t *rules = g->lvl_rules + g->lvl_off[lv - 1];
        u64 *offs, total = 0;
        if ((rc = c.t.get(&offs, (size_t)n + 1))) return rc;
        k_bsize<<<blocks((u64)n + 1, TPB), TPB, 0, g->st>>>(rules, n, c.d, u, b, seq, offs);
        CK_LAUNCH("k_bsize");
        if ((rc = cub_run(g->st, [&](void *tp, size_t &bytes) {
                 return cub::DeviceScan::ExclusiveSum(tp, bytes, offs, offs, (int64_t)n + 1, g->st);
             })))
            return rc;
        CK(cudaMemcpyAsync(&total, offs + n, sizeof total, cudaMemcpyDeviceToHost, g->st));
        CK(cudaStreamSynchronize(g->st));
        if (!total) continue;
        if (total >= ((u64)1 << 32))
            return tdc_error(-ENOTSUP, "gpu: analytics: bottom-up level too large");
        u64 *K, *V, *K2, *V2, *RK, *agg;
        uint8_t *segflag;
        uint32_t *head, *rid, *urid;
        if ((rc = c.t.get(&K, total)) || (rc = c.t.get(&V, total)) || (rc = c.t.get(&K2, total)) ||
            (rc = c.t.get(&V2, total)) || (rc = c.t.get(&RK, total)) ||
            (rc = c.t.get(&agg, total)) || (rc = c.t.get(&segflag, total)) ||
            (rc = c.t.get(&head, total)) || (rc = c.t.get(&rid, total)) ||
            (rc = c.t.get(&urid, total)))
            return rc;
        CK(cudaMemsetAsync(segflag, 0, total, g->st));
        k_bfill<<<blocks(n, TPB), TPB, 0, g->st>>>(rules, n, c.d, u, b, seq, rb, offs, K, V,
                                                   segflag, c.ctr + 4);
        CK_LAUNCH("k_bfill");
        if ((rc = cub_run(g->st, [&](void *tp, size_t &bytes) {
                 return cub::DeviceSegmentedSort::SortPairs(tp, bytes, K, K2, V, V2, (int64_t)total,
                                                            (int64_t)n, offs, offs + 1, g->st);
             })))
            return rc;
        k_bheads<<<blocks(total, TPB), TPB, 0, g->st>>>(K2, total, segflag, head);
        CK_LAUNCH("k_bheads");
        if ((rc = cub_run(g->st, [&](void *tp, size_t &bytes) {
                 return cub::DeviceScan::InclusiveSum(tp, bytes, head, rid, (int64_t)total, g->st);
             })))
            return rc;
        if ((rc = cub_run(g->st, [&](void *tp, size_t &bytes) {
                 return cub::DeviceReduce::ReduceByKey(tp, bytes, rid, urid, V2, agg, c.ctr + 7,
                                                       cuda::std::plus<u64>(), (int64_t)total,
                                                       g->st);
             })))
            return rc;
        k_bkeys<<<blocks(total, TPB), TPB, 0, g->st>>>(K2, total, head, rid, RK);
        CK_LAUNCH("k_bkeys");
        k_bset<<<blocks(n, TPB), TPB, 0, g->st>>>(rules, n, offs, rid, RK, agg, b);
        CK_LAUNCH("k_bset");
    }
    return 0;
}

/* A device copy of the mask's bytes [first, end) in *dvis (NULL without a mask). */
static int upload_vis(call &c, uint32_t first, uint32_t end, const unsigned char *vis,
                      uint8_t **dvis)
{
    *dvis = NULL;
    if (!vis || end == first) return 0;
    int rc = c.t.get(dvis, (size_t)(end - first));
    if (rc) return rc;
    CK(cudaMemcpyAsync(*dvis, vis + first, end - first, cudaMemcpyHostToDevice, c.g->st));
    return 0;
}

static int run(call &c, int kind, uint32_t first, uint32_t end, const unsigned char *vis, buf *out)
{
    gpu_gram *g = c.g;
    int rc, rb = nbits(g->nwords ? g->nwords : 1);
    c.x.rb = rb;
    int per_file =
        kind == ANA_INVINDEX || kind == ANA_TERMVECTOR || kind == ANA_RANKEDINVINDEX;
    int seq = kind == ANA_SEQCOUNT || kind == ANA_RANKEDINVINDEX;
    /* More than 2^21 words: three ranks do not fit one 64-bit key (c.o.wide_seq takes this
     * path for any dictionary, to test it on small archives). */
    int wide = seq && (3 * rb > 64 || c.o.wide_seq);
    if ((rc = c.t.get(&c.ctr, 8))) return rc;
    CK(cudaMemsetAsync(c.ctr, 0, 8 * sizeof *c.ctr, g->st));
    uint8_t *dvis;
    if ((rc = scope_files(c, first, end, vis, per_file)) ||
        (rc = upload_vis(c, first, end, vis, &dvis)))
        return rc;
    if (per_file && (rc = scope_prefix(c, first))) return rc;
    uint8_t *ecut = NULL;
    if (c.o.cut) {
        if ((rc = c.t.get(&ecut, g->nents))) return rc;
        CK(cudaMemsetAsync(ecut, 0, g->nents, g->st));
    }
    k_cutscan<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, c.x.fent, ecut,
                                                         (uint32_t *)(c.ctr + 5));
    CK_LAUNCH("k_cutscan");
    if ((rc = counters(c, 8))) return rc;
    if (c.ctr_h[5] && ecut) {
        CK(cudaMemcpyAsync(c.o.cut, ecut, g->nents, cudaMemcpyDeviceToHost, g->st));
        CK(cudaStreamSynchronize(g->st));
    }
    if (c.ctr_h[5])
        return tdc_error(-ENOTSUP, "gpu: analytics: the scope holds words longer than %d bytes",
                         TOK_CAP);
    int fb = nbits(c.s.nf ? c.s.nf : 1);

    if (kind == ANA_WORDCOUNT || kind == ANA_SORT) {
        u64 n = g->nwords, *dense;
        if (!n) return 0;
        if ((rc = gpu_wc_pass(g, first, end, dvis)) || (rc = c.t.get(&dense, n))) return rc;
        k_dense<<<blocks(g->ntokens, TPB), TPB, 0, g->st>>>(g->ntokens, g->arank, g->cnt, dense);
        CK_LAUNCH("k_dense");
        if (kind == ANA_SORT) return emit(c, wc_rec{c.x, dense, NULL, 0}, n, out);
        u64 *neg, *ks;
        uint32_t *iota, *vs;
        if ((rc = c.t.get(&neg, n)) || (rc = c.t.get(&ks, n)) || (rc = c.t.get(&iota, n)) ||
            (rc = c.t.get(&vs, n)))
            return rc;
        k_negate<<<blocks(n, TPB), TPB, 0, g->st>>>(dense, n, neg);
        k_iota32<<<blocks(n, TPB), TPB, 0, g->st>>>(iota, n);
        CK_LAUNCH("k_iota32");
        if ((rc = sort_pairs(c, neg, ks, iota, vs, n, 64))) return rc;
        return emit(c, wc_rec{c.x, ks, vs, 1}, n, out);
    }

    if (kind == ANA_SEQCOUNT) {
        if ((rc = gpu_wc_pass(g, first, end, dvis))) return rc;
        u64 cap = 2 * (g->nsyms + c.s.nroot), *k, *v, m;
        uint32_t *lo = NULL;
        if ((rc = c.t.get(&k, cap)) || (rc = c.t.get(&v, cap)) ||
            (wide && (rc = c.t.get(&lo, cap))))
            return rc;
        k_sfill_rules<<<blocks(g->nsyms, TPB), TPB, 0, g->st>>>(c.d, g->nsyms, g->aown, g->w, rb, k,
                                                                lo, v, c.ctr);
        CK_LAUNCH("k_sfill_rules");
        k_sfill_root<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, rb, k, lo, v, NULL,
                                                                c.ctr);
        CK_LAUNCH("k_sfill_root");
        if ((rc = counters(c, 8))) return rc;
        u64 n = c.ctr_h[0], *k2, *v2, *uk, *uv, *neg, *ks, *qs;
        if (!n) return 0;
        if ((rc = c.t.get(&k2, n)) || (rc = c.t.get(&v2, n)) || (rc = c.t.get(&uk, n)) ||
            (rc = c.t.get(&uv, n)))
            return rc;
        if ((rc = wide ? seq_sort_wide(c, k, lo, v, k2, v2, n, rb)
                       : sort_pairs(c, k, k2, v, v2, n, 3 * rb)) ||
            (rc = reduce(c, k2, v2, n, uk, uv, &m)))
            return rc;
        if ((rc = c.t.get(&neg, m)) || (rc = c.t.get(&ks, m)) || (rc = c.t.get(&qs, m))) return rc;
        k_negate<<<blocks(m, TPB), TPB, 0, g->st>>>(uv, m, neg);
        CK_LAUNCH("k_negate");
        if ((rc = sort_pairs(c, neg, ks, uk, qs, m, 64))) return rc;
        return emit(c, sc_rec{c.x, ks, qs}, m, out);
    }

    ptab pt;
    btab b;
    const u64 *u;
    int bu;
    if ((rc = pairs(c, pt, seq, &bu, &u))) return rc;
    if (bu && wide) return tdc_error(-ENOTSUP, "gpu: analytics: bottom-up with wide sequences");
    if (bu && (rc = bu_build(c, u, seq, rb, b))) return rc;

    if (kind == ANA_INVINDEX || kind == ANA_TERMVECTOR) {
        int wm = kind == ANA_INVINDEX;
        if (bu)
            k_btsize<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(pt, b, c.ctr + 1);
        else
            k_wsize<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(c.d, pt, c.ctr + 1);
        CK_LAUNCH("k_wsize");
        k_rwsize<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, c.ctr + 1);
        CK_LAUNCH("k_rwsize");
        if ((rc = counters(c, 8))) return rc;
        if (c.ctr_h[6]) return tdc_error(-EIO, "gpu: analytics: (file, rule) table overflow");
        u64 n = c.ctr_h[1], *k, *v, *k2, *v2, *uk, *uv, m;
        if (!n) return 0;
        if ((rc = c.t.get(&k, n)) || (rc = c.t.get(&v, n)) || (rc = c.t.get(&k2, n)) ||
            (rc = c.t.get(&v2, n)) || (rc = c.t.get(&uk, n)) || (rc = c.t.get(&uv, n)))
            return rc;
        if (bu)
            k_btfill<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(pt, b, 0, wm, fb, rb, k, v, NULL,
                                                             c.ctr + 2);
        else
            k_wfill<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(c.d, pt, wm, fb, rb, k, v, c.ctr + 2);
        CK_LAUNCH("k_wfill");
        k_rwfill<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, wm, fb, rb, k, v, c.ctr + 2);
        CK_LAUNCH("k_rwfill");
        if ((rc = sort_pairs(c, k, k2, v, v2, n, rb + fb)) ||
            (rc = reduce(c, k2, v2, n, uk, uv, &m)))
            return rc;
        if (wm) return emit(c, ii_rec{c.x, uk, m, fb}, m, out);
        u64 *k3, *k4;
        uint32_t *v3, *v4;
        if ((rc = c.t.get(&k3, m)) || (rc = c.t.get(&k4, m)) || (rc = c.t.get(&v3, m)) ||
            (rc = c.t.get(&v4, m)))
            return rc;
        k_byfile_count<<<blocks(m, TPB), TPB, 0, g->st>>>(uk, uv, m, rb, k3, v3,
                                                          (uint32_t *)(c.ctr + 5));
        CK_LAUNCH("k_byfile_count");
        if ((rc = sort_pairs(c, k3, k4, v3, v4, m, 32 + fb)) || (rc = counters(c, 8))) return rc;
        if (c.ctr_h[5]) return tdc_error(-ENOTSUP, "gpu: analytics: a count of 2^32 or more");
        return emit(c, tv_rec{c.x, k4, v4}, m, out);
    }

    /* rankedinvindex */
    if (bu)
        k_btsize<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(pt, b, c.ctr + 1);
    else
        k_ssize<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(c.d, pt, c.ctr + 1);
    CK_LAUNCH("k_ssize");
    if ((rc = counters(c, 8))) return rc;
    if (c.ctr_h[6]) return tdc_error(-EIO, "gpu: analytics: (file, rule) table overflow");
    u64 cap = c.ctr_h[1] + 2 * c.s.nroot, *k, *v, *k2;
    uint32_t *file, *iota, *perm, *sid, *lo = NULL;
    if ((rc = c.t.get(&k, cap)) || (rc = c.t.get(&v, cap)) || (rc = c.t.get(&file, cap)) ||
        (wide && (rc = c.t.get(&lo, cap))))
        return rc;
    if (bu)
        k_btfill<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(pt, b, 1, 0, fb, rb, k, v, file,
                                                         c.ctr + 2);
    else
        k_sfill_pairs<<<blocks(pt.cap, TPB), TPB, 0, g->st>>>(c.d, pt, rb, k, lo, v, file,
                                                              c.ctr + 2);
    CK_LAUNCH("k_sfill_pairs");
    k_sfill_root<<<blocks(c.s.nroot, TPB), TPB, 0, g->st>>>(c.d, c.s, rb, k, lo, v, file,
                                                            c.ctr + 2);
    CK_LAUNCH("k_sfill_root");
    if ((rc = counters(c, 8))) return rc;
    u64 n = c.ctr_h[2];
    if (!n) return 0;
    if (n >= ((u64)1 << 32)) return tdc_error(-ENOTSUP, "gpu: analytics: too many sequences");
    if ((rc = c.t.get(&k2, n)) || (rc = c.t.get(&iota, n)) || (rc = c.t.get(&perm, n)) ||
        (rc = c.t.get(&sid, n)))
        return rc;
    k_iota32<<<blocks(n, TPB), TPB, 0, g->st>>>(iota, n);
    CK_LAUNCH("k_iota32");
    if ((rc = wide ? seq_sort_wide(c, k, lo, iota, k2, perm, n, rb)
                   : sort_pairs(c, k, k2, iota, perm, n, 3 * rb)))
        return rc;
    k_heads<<<blocks(n, TPB), TPB, 0, g->st>>>(k2, n, sid);
    CK_LAUNCH("k_heads");
    if ((rc = cub_run(g->st, [&](void *tp, size_t &b) {
             return cub::DeviceScan::InclusiveSum(tp, b, sid, sid, (int64_t)n, g->st);
         })))
        return rc;
    uint32_t nseq = 0;
    if (n) {
        CK(cudaMemcpyAsync(&nseq, sid + n - 1, sizeof nseq, cudaMemcpyDeviceToHost, g->st));
        CK(cudaStreamSynchronize(g->st));
    }
    int sb = nbits(nseq ? nseq : 1);
    if (sb + fb > 64 || sb > 32) return tdc_error(-ENOTSUP, "gpu: analytics: keys too wide");
    u64 *key2, *cnt2, *useq, *k3, *c3, *uk, *uv, m;
    if ((rc = c.t.get(&key2, n)) || (rc = c.t.get(&cnt2, n)) || (rc = c.t.get(&useq, nseq)) ||
        (rc = c.t.get(&k3, n)) || (rc = c.t.get(&c3, n)) || (rc = c.t.get(&uk, n)) ||
        (rc = c.t.get(&uv, n)))
        return rc;
    k_sidkey<<<blocks(n, TPB), TPB, 0, g->st>>>(k2, perm, sid, file, v, n, fb, key2, cnt2, useq);
    CK_LAUNCH("k_sidkey");
    if ((rc = sort_pairs(c, key2, k3, cnt2, c3, n, sb + fb)) ||
        (rc = reduce(c, k3, c3, n, uk, uv, &m)))
        return rc;
    u64 *k5, *k6;
    uint32_t *f5, *f6;
    if ((rc = c.t.get(&k5, m)) || (rc = c.t.get(&k6, m)) || (rc = c.t.get(&f5, m)) ||
        (rc = c.t.get(&f6, m)))
        return rc;
    /* id << 32 | ~count: the same layout k_byfile_count makes from (id << fb | file) */
    k_byfile_count<<<blocks(m, TPB), TPB, 0, g->st>>>(uk, uv, m, fb, k5, f5,
                                                      (uint32_t *)(c.ctr + 5));
    CK_LAUNCH("k_byfile_count");
    if ((rc = sort_pairs(c, k5, k6, f5, f6, m, 32 + sb)) || (rc = counters(c, 8))) return rc;
    if (c.ctr_h[5]) return tdc_error(-ENOTSUP, "gpu: analytics: a count of 2^32 or more");
    return emit(c, ri_rec{c.x, k6, useq, f6, m}, m, out);
}

extern "C" int gpu_analytic_prepare(gpu_gram *g)
{
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    return g->aprep ? 0 : prepare(g);
}

extern "C" int gpu_analytic(gpu_gram *g, int kind, uint32_t first, uint32_t end,
                            const unsigned char *vis, const gpu_ana_args *args, buf *out)
{
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    if (first > end || end > g->nents) return tdc_error(-EINVAL, "gpu: bad scope");
    if (kind < ANA_WORDCOUNT || kind > ANA_RANKEDINVINDEX)
        return tdc_error(-EINVAL, "gpu: unknown analytic %d", kind);
    int rc;
    if (!g->aprep && (rc = prepare(g))) return rc;
    call c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.t.g = g;
    if (args) c.o = *args;
    c.d = {g->ntokens, g->syms,  g->root, g->rule_start, g->arank,
           g->aht,     g->level, g->anwb, g->tflag,      g->cut};
    c.x.ids = g->aids;
    c.x.toff = g->toff;
    c.x.blob = g->blob;
    c.x.ptext = g->apath;
    c.x.poff = g->apoff;
    size_t n0 = out->n;
    if (!(rc = gpu_time_begin(g))) {
        rc = run(c, kind, first, end, vis, out);
        int rc2 = gpu_time_end(g);
        if (!rc) rc = rc2;
    }
    c.t.release();
    /* What the call took beyond POOL_KEEP goes back to the device once its frees are done. */
    cudaMemPool_t pool;
    int dev = 0;
    cudaError_t e = cudaStreamSynchronize(g->st);
    if (e == cudaSuccess) e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, dev);
    if (e == cudaSuccess) e = cudaMemPoolTrimTo(pool, POOL_KEEP);
    if (e != cudaSuccess && !rc) rc = gpu_fail(e, "memory pool");
    if (rc) {
        out->n = n0;
        cudaStreamSynchronize(g->st);
        cudaGetLastError();
    }
    return rc;
}
