/* Word queries on the device: count and search (TPDS'23 IV-C/IV-D) over a word index built
 * here from the grammar already resident (gpu_upload + gpu_index_build).
 *
 * The index: word2rule as the occurrences of every symbol in rule bodies grouped by symbol (a
 * radix sort of (symbol, position) pairs; with the owner rule of every body position these are
 * also the reverse edges of the DAG), the same for root positions (ascending, so the ones in a
 * file's run are a binary search away), and rule2file: a hash table of (file, rule) -> how often
 * the rule occurs in the file's expansion, seeded from the files' root runs and pushed down one
 * level per launch, highest first (a rule's parents all sit on higher levels, so its count for
 * a file is final when its level runs).
 *
 * count(f, w) = (w's root positions inside f's run) + sum over w's body occurrences of
 * rule2file(f, owner). One warp per query, lanes over the occurrences.
 *
 * search(f, w): one warp per query walks up from w: from a symbol, through each of its body
 * occurrences whose owner occurs in f (rule2file > 0; the warp tests 32 occurrences per step and
 * keeps the ballot), adding the occurrence's offset inside the owner; at each symbol, its root
 * positions inside f's run are complete paths and give offsets. Every path is one occurrence, so
 * each is found once; a segmented sort then orders each query's offsets. The walk's stack (one
 * frame per level) lives in shared memory. */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "gpu_dev.h"

#define SEED_CHUNK 2048 /* root symbols per seeding block */
#define QWARPS 8        /* warps (queries) per block */

static __device__ void h_add(u64 *key, u64 *val, u64 cap, uint32_t f, uint32_t r, u64 v, u64 *ctr)
{
    u64 k = (u64)f << 32 | r, m = cap - 1, h = hmix(k) & m;
    for (u64 p = 0; p < cap; p++, h = (h + 1) & m) {
        u64 x = key[h];
        if (x == EMPTY_KEY) {
            x = atomicCAS(&key[h], EMPTY_KEY, k);
            if (x == EMPTY_KEY) atomicAdd(&ctr[0], 1ull); /* a new pair */
        }
        if (x == EMPTY_KEY || x == k) {
            atomicAdd(&val[h], v);
            return;
        }
    }
    ctr[1] = 1; /* full: the sizing bound below rules this out */
}

__global__ void k_owner(uint32_t nrules, const u64 *rule_start, uint32_t *owner)
{
    for (uint32_t r = 1 + blockIdx.x * blockDim.x + threadIdx.x; r <= nrules;
         r += gridDim.x * blockDim.x)
        for (u64 i = rule_start[r - 1]; i < rule_start[r]; i++)
            owner[i] = r;
}

__global__ void k_hist(const uint32_t *s, u64 n, u64 *cnt)
{
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        atomicAdd(&cnt[s[i]], 1ull);
}

__global__ void k_iota(u64 *v, u64 n)
{
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (u64)gridDim.x * blockDim.x)
        v[i] = i;
}

/* Sizing rule2file: u[r] bounds the files whose expansion holds rule r: at most nf, at most its
 * root occurrences plus the bounds of its parents (a parent counted once per body, as far as a
 * short look back tells; counting it more only loosens the bound). */
__global__ void k_useed(uint32_t nrules, uint32_t nt, const u64 *rocc_at, u64 nf, u64 *u)
{
    for (uint32_t r = 1 + blockIdx.x * blockDim.x + threadIdx.x; r <= nrules;
         r += gridDim.x * blockDim.x) {
        u64 c = rocc_at[nt + r + 1] - rocc_at[nt + r];
        u[r] = c < nf ? c : nf;
    }
}

__global__ void k_upush(const uint32_t *rules, uint32_t n, const uint32_t *syms,
                        const u64 *rule_start, uint32_t nt, u64 nf, u64 *u)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        uint32_t p = rules[k];
        u64 v = u[p] < nf ? u[p] : nf, b = rule_start[p - 1], e = rule_start[p];
        for (u64 i = b; i < e; i++) {
            uint32_t s = syms[i];
            if (s < nt) continue;
            bool dup = false;
            for (u64 j = i > b + 16 ? i - 16 : b; j < i && !dup; j++)
                dup = syms[j] == s;
            if (!dup) atomicAdd(&u[s - nt], v);
        }
    }
}

__global__ void k_usum(uint32_t nrules, const u64 *u, u64 nf, u64 *sum)
{
    u64 t = 0;
    for (uint32_t r = 1 + blockIdx.x * blockDim.x + threadIdx.x; r <= nrules;
         r += gridDim.x * blockDim.x)
        t += u[r] < nf ? u[r] : nf;
    for (int o = 16; o; o >>= 1)
        t += __shfl_down_sync(0xffffffffu, t, o);
    if ((threadIdx.x & 31) == 0 && t) atomicAdd(sum, t);
}

/* Block (x, y) seeds chunks y, y + gridDim.y, ... of the root run of file fents[x]. */
__global__ void k_tseed(const uint32_t *fents, const u64 *ent_rs, const u64 *ent_rl,
                        const uint32_t *root, uint32_t nt, u64 *key, u64 *val, u64 cap, u64 *ctr)
{
    uint32_t f = fents[blockIdx.x];
    u64 rs = ent_rs[f], rl = ent_rl[f];
    for (u64 c = (u64)blockIdx.y * SEED_CHUNK; c < rl; c += (u64)gridDim.y * SEED_CHUNK) {
        u64 end = c + SEED_CHUNK < rl ? c + SEED_CHUNK : rl;
        for (u64 i = c + threadIdx.x; i < end; i += blockDim.x) {
            uint32_t s = root[rs + i];
            if (s >= nt) h_add(key, val, cap, f, s - nt, 1, ctr);
        }
    }
}

/* Pass k: every (file, rule) pair whose rule is on level k pushes its count into the rule's
 * child rules for the same file. Pairs made in this pass are of lower levels and wait. */
__global__ void k_tpush(uint32_t k, const uint32_t *level, const uint32_t *syms,
                        const u64 *rule_start, uint32_t nt, u64 *key, u64 *val, u64 cap, u64 *ctr)
{
    for (u64 h = (u64)blockIdx.x * blockDim.x + threadIdx.x; h < cap;
         h += (u64)gridDim.x * blockDim.x) {
        u64 x = key[h];
        if (x == EMPTY_KEY) continue;
        uint32_t r = (uint32_t)x, f = (uint32_t)(x >> 32);
        if (level[r] != k) continue;
        u64 v = val[h];
        for (u64 i = rule_start[r - 1]; i < rule_start[r]; i++) {
            uint32_t s = syms[i];
            if (s >= nt) h_add(key, val, cap, f, s - nt, v, ctr);
        }
    }
}

static int bits_for(u64 n) /* bits that hold every value below n */
{
    int b = 1;
    while (b < 64 && ((u64)1 << b) < n)
        b++;
    return b;
}

/* Positions of every symbol of s[0..n), grouped by symbol, ascending within each: at (nsym + 1
 * offsets) and pos (n). */
static int occ_index(gpu_gram *g, const uint32_t *s, u64 n, u64 nsym, u64 **at, u64 **pos)
{
    int rc;
    uint32_t *kout = NULL;
    u64 *iota = NULL;
    if ((rc = dalloc(at, nsym + 1)) || (rc = dalloc(pos, n))) return rc;
    CK(cudaMemsetAsync(*at, 0, (nsym + 1) * sizeof **at, g->st));
    if (n) {
        k_hist<<<blocks(n, 256), 256, 0, g->st>>>(s, n, *at);
        CK_LAUNCH("k_hist");
    }
    u64 *a = *at;
    if ((rc = cub_run(g->st, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, a, a, nsym + 1, g->st);
         })))
        return rc;
    if (!n) return 0;
    CK(cudaMallocAsync((void **)&kout, n * sizeof *kout, g->st));
    cudaError_t e = cudaMallocAsync((void **)&iota, n * sizeof *iota, g->st);
    if (e != cudaSuccess) {
        cudaFreeAsync(kout, g->st);
        return gpu_fail(e, "cudaMallocAsync");
    }
    k_iota<<<blocks(n, 256), 256, 0, g->st>>>(iota, n);
    u64 *p = *pos;
    int nb = bits_for(nsym);
    rc = cub_run(g->st, [&](void *t, size_t &b) {
        return cub::DeviceRadixSort::SortPairs(t, b, s, kout, iota, p, n, 0, nb, g->st);
    });
    cudaFreeAsync(kout, g->st);
    cudaFreeAsync(iota, g->st);
    return rc;
}

static int build(gpu_gram *g)
{
    const gpu_ent *ents = g->ents;
    int rc;
    u64 nsym = (u64)g->ntokens + g->nrules + 1, nr = (u64)g->nrules + 1;
    if ((rc = dalloc(&g->owner, g->nsyms))) return rc;
    if (g->nrules) {
        k_owner<<<blocks(g->nrules, 256), 256, 0, g->st>>>(g->nrules, g->rule_start, g->owner);
        CK_LAUNCH("k_owner");
    }
    if ((rc = occ_index(g, g->syms, g->nsyms, nsym, &g->bocc_at, &g->bocc)) ||
        (rc = occ_index(g, g->root, g->nroot, nsym, &g->rocc_at, &g->rocc)))
        return rc;
    /* The files with content (hard links share theirs). */
    uint32_t *fe = (uint32_t *)malloc(((size_t)g->nents + 1) * sizeof *fe), nf = 0;
    if (!fe) return tdc_error(-ENOMEM, "gpu: out of memory");
    u64 longest = 0;
    for (uint32_t e = 0; e < g->nents; e++)
        if (ents[e].reg && ents[e].root_len) {
            fe[nf++] = e;
            if (ents[e].root_len > longest) longest = ents[e].root_len;
        }
    /* Size rule2file from an upper bound on its pairs: no overflow, load at most 3/4. */
    u64 *u = NULL, *ctr = NULL;
    uint32_t *fe_d = NULL;
    u64 ctr_h[3] = {0, 0, 0};
    rc = dalloc(&u, nr);
    if (!rc) rc = dalloc(&ctr, 3);
    if (!rc) rc = dalloc(&fe_d, nf);
    if (rc) goto out;
    CK_OUT(cudaMemsetAsync(ctr, 0, 3 * sizeof *ctr, g->st));
    CK_OUT(cudaMemcpyAsync(fe_d, fe, (size_t)nf * sizeof *fe, cudaMemcpyHostToDevice, g->st));
    if (g->nrules) {
        k_useed<<<blocks(g->nrules, 256), 256, 0, g->st>>>(g->nrules, g->ntokens, g->rocc_at, nf,
                                                           u);
        CK_OUT(cudaGetLastError());
        for (uint32_t k = g->nlevels; k > 1; k--) {
            uint32_t n = g->lvl_off[k] - g->lvl_off[k - 1];
            k_upush<<<blocks(n, 256), 256, 0, g->st>>>(g->lvl_rules + g->lvl_off[k - 1], n, g->syms,
                                                       g->rule_start, g->ntokens, nf, u);
            CK_OUT(cudaGetLastError());
        }
        k_usum<<<blocks(g->nrules, 256), 256, 0, g->st>>>(g->nrules, u, nf, ctr + 2);
        CK_OUT(cudaGetLastError());
    }
    CK_OUT(cudaMemcpyAsync(ctr_h + 2, ctr + 2, sizeof *ctr, cudaMemcpyDeviceToHost, g->st));
    CK_OUT(cudaStreamSynchronize(g->st));
    {
        u64 want = ctr_h[2] + ctr_h[2] / 3 + 1024, cap = 1;
        while (cap < want)
            cap <<= 1;
        size_t fr = 0, tot = 0;
        CK_OUT(cudaMemGetInfo(&fr, &tot));
        if (cap * 16 > fr) {
            rc = tdc_error(-ENOMEM, "gpu: word index: rule2file needs %llu MiB, %zu MiB free",
                           (unsigned long long)(cap * 16 >> 20), fr >> 20);
            goto out;
        }
        g->hcap = cap;
    }
    if ((rc = dalloc(&g->hkey, g->hcap)) || (rc = dalloc(&g->hval, g->hcap))) goto out;
    CK_OUT(cudaMemsetAsync(g->hkey, 0xff, g->hcap * sizeof *g->hkey, g->st));
    CK_OUT(cudaMemsetAsync(g->hval, 0, g->hcap * sizeof *g->hval, g->st));
    if (nf && longest) {
        u64 chunks = (longest + SEED_CHUNK - 1) / SEED_CHUNK;
        dim3 grid(nf, (unsigned)(chunks < 1024 ? chunks : 1024));
        k_tseed<<<grid, 256, 0, g->st>>>(fe_d, g->ent_rs, g->ent_rl, g->root, g->ntokens, g->hkey,
                                         g->hval, g->hcap, ctr);
        CK_OUT(cudaGetLastError());
    }
    for (uint32_t k = g->nlevels; k > 1; k--) {
        k_tpush<<<blocks(g->hcap, 256), 256, 0, g->st>>>(
            k, g->level, g->syms, g->rule_start, g->ntokens, g->hkey, g->hval, g->hcap, ctr);
        CK_OUT(cudaGetLastError());
    }
    CK_OUT(cudaMemcpyAsync(ctr_h, ctr, 2 * sizeof *ctr, cudaMemcpyDeviceToHost, g->st));
    CK_OUT(cudaStreamSynchronize(g->st));
    if (ctr_h[1]) {
        rc = tdc_error(-EIO, "gpu: word index: rule2file overflowed its bound");
        goto out;
    }
    g->hpairs = ctr_h[0];
out:
    cudaFree(u);
    cudaFree(ctr);
    cudaFree(fe_d);
    free(fe);
    return rc;
}

extern "C" int gpu_words_build(gpu_gram *g)
{
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    if (g->wbuilt) return 0;
    void *old[] = {g->bocc_at, g->bocc, g->rocc_at, g->rocc, g->owner, g->hkey, g->hval};
    for (size_t i = 0; i < sizeof old / sizeof *old; i++)
        cudaFree(old[i]);
    g->bocc_at = g->bocc = g->rocc_at = g->rocc = g->hkey = g->hval = NULL;
    g->owner = NULL;
    int rc = gpu_time_begin(g);
    if (!rc) rc = build(g);
    if (!rc) rc = gpu_time_end(g);
    g->wbuilt = rc == 0;
    return rc;
}

extern "C" uint64_t gpu_words_mem(const gpu_gram *g, uint64_t *pairs)
{
    if (pairs) *pairs = g->wbuilt ? g->hpairs : 0;
    if (!g->wbuilt) return 0;
    u64 nsym = (u64)g->ntokens + g->nrules + 1;
    return 2 * (nsym + 1) * 8 + (g->nsyms + g->nroot) * 8 + g->nsyms * 4 + g->hcap * 16;
}

/* First index in pos[lo, hi) holding a value >= x (pos ascending). */
static __device__ __forceinline__ u64 lower(const u64 *pos, u64 lo, u64 hi, u64 x)
{
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        if (pos[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct wq {
    uint32_t f, tok; /* f: the entry holding the content */
} wq;

__global__ void k_count(const wq *q, uint32_t n, const u64 *bocc_at, const u64 *bocc,
                        const uint32_t *owner, const u64 *rocc_at, const u64 *rocc,
                        const u64 *ent_rs, const u64 *ent_rl, const u64 *key, const u64 *val,
                        u64 cap, u64 *cnt)
{
    uint32_t lane = threadIdx.x & 31;
    uint32_t k = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (k >= n) return; /* whole warps leave together */
    wq x = q[k];
    if (x.tok == GPU_NO_WORD) {
        if (lane == 0) cnt[k] = 0;
        return;
    }
    u64 sum = 0;
    for (u64 i = bocc_at[x.tok] + lane; i < bocc_at[x.tok + 1]; i += 32)
        sum += h_get(key, val, cap, x.f, owner[bocc[i]]);
    for (int o = 16; o; o >>= 1)
        sum += __shfl_down_sync(0xffffffffu, sum, o);
    if (lane == 0) {
        u64 rs = ent_rs[x.f], b = rocc_at[x.tok], e = rocc_at[x.tok + 1];
        sum += lower(rocc, b, e, rs + ent_rl[x.f]) - lower(rocc, b, e, rs);
        cnt[k] = sum;
    }
}

/* One frame of the upward walk: the symbol, the byte offset of the occurrence being followed
 * inside it, and where its scan stands (phase 0: body occurrences [it, end), with the ballot of
 * a tested group of 32 in mask/mbase; phase 1: root positions [it, end) to emit). */
typedef struct frame {
    u64 acc, it, end, mbase;
    uint32_t sym, phase, mask, pad;
} frame;

__global__ void k_search(const wq *q, uint32_t n, uint32_t nframes, uint32_t nt, const u64 *bocc_at,
                         const u64 *bocc, const uint32_t *owner, const u64 *rocc_at,
                         const u64 *rocc, const u64 *ent_rs, const u64 *ent_rl, const u64 *key,
                         const u64 *val, u64 cap, const u64 *rule_start, const u64 *syms_pre,
                         const u64 *root_pre, const u64 *want, const u64 *base, u64 *res, u64 *got)
{
    extern __shared__ frame shf[];
    uint32_t lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    uint32_t k = blockIdx.x * (blockDim.x / 32) + warp;
    if (k >= n) return;
    wq x = q[k];
    if (x.tok == GPU_NO_WORD) {
        if (lane == 0) got[k] = 0;
        return;
    }
    frame *st = shf + (size_t)warp * nframes;
    u64 rs = ent_rs[x.f], re = rs + ent_rl[x.f], rbase = root_pre[rs], out = base[k], lim = want[k],
        nout = 0;
    int top = 0;
    if (lane == 0) st[0] = frame{0, bocc_at[x.tok], bocc_at[x.tok + 1], 0, x.tok, 0, 0, 0};
    __syncwarp();
    while (top >= 0) {
        frame fr = st[top];
        __syncwarp(); /* everyone has read the frame before lane 0 changes it */
        if (fr.phase == 1) {
            for (u64 i = fr.it + lane; i < fr.end; i += 32) {
                u64 o = nout + (i - fr.it);
                if (o < lim) res[out + o] = fr.acc + root_pre[rocc[i]] - rbase;
            }
            nout += fr.end - fr.it;
            top--;
            continue;
        }
        if (fr.mask) { /* follow the lowest live occurrence of the tested group */
            uint32_t l = __ffs(fr.mask) - 1;
            u64 j = bocc[fr.mbase + l];
            uint32_t p = owner[j];
            if (lane == 0) {
                st[top].mask = fr.mask & (fr.mask - 1);
                st[top + 1] = frame{fr.acc + syms_pre[j] - syms_pre[rule_start[p - 1]],
                                    bocc_at[nt + p],
                                    bocc_at[nt + p + 1],
                                    0,
                                    nt + p,
                                    0,
                                    0,
                                    0};
            }
            top++;
        } else if (fr.it < fr.end) { /* test the next 32 occurrences */
            u64 i = fr.it + lane;
            bool live = i < fr.end && h_get(key, val, cap, x.f, owner[bocc[i]]) > 0;
            uint32_t m = __ballot_sync(0xffffffffu, live);
            if (lane == 0) {
                st[top].mbase = fr.it;
                st[top].mask = m;
                st[top].it = fr.end - fr.it < 32 ? fr.end : fr.it + 32;
            }
        } else { /* body occurrences done: the root positions inside the file */
            if (lane == 0) {
                u64 b = rocc_at[fr.sym], e = rocc_at[fr.sym + 1];
                st[top].it = lower(rocc, b, e, rs);
                st[top].end = lower(rocc, b, e, re);
                st[top].phase = 1;
            }
        }
        __syncwarp();
    }
    if (lane == 0) got[k] = nout;
}

/* Stage n queries (checked, hard links resolved) on the device and room for their results. */
static int stage(gpu_gram *g, const gpu_query *q, size_t n)
{
    const gpu_ent *ents = g->ents;
    if (n > UINT32_MAX / 2) return tdc_error(-EINVAL, "gpu: too many queries in one batch");
    if (n > g->q_cap) {
        size_t cap = n > 2 * g->q_cap ? n : 2 * g->q_cap;
        void *old[] = {g->q_d, g->qn_d, g->qbase_d, g->qgot_d};
        for (size_t i = 0; i < sizeof old / sizeof *old; i++)
            cudaFree(old[i]);
        cudaFreeHost(g->q_h);
        g->q_h = g->q_d = NULL;
        g->qn_d = g->qbase_d = g->qgot_d = NULL;
        g->q_cap = 0;
        CK(cudaHostAlloc(&g->q_h, cap * sizeof(wq), cudaHostAllocDefault));
        int rc;
        if ((rc = dalloc((wq **)&g->q_d, cap)) || (rc = dalloc(&g->qn_d, cap)) ||
            (rc = dalloc(&g->qbase_d, cap + 1)) || (rc = dalloc(&g->qgot_d, cap)))
            return rc;
        g->q_cap = cap;
    }
    wq *h = (wq *)g->q_h;
    for (size_t i = 0; i < n; i++) {
        uint32_t e = q[i].ent;
        if (e >= g->nents || !ents[e].reg)
            return tdc_error(-EINVAL, "entry %u is not a regular file", e);
        /* A file with a root run holds its content; only links (and empty files) have it in
         * the entry of their inode. */
        uint32_t c = ents[e].content;
        if (c == UINT32_MAX) return tdc_error(-EINVAL, "entry %u: no content entry", e);
        if (q[i].tok != GPU_NO_WORD && q[i].tok >= g->ntokens)
            return tdc_error(-EINVAL, "gpu: query %zu: token %u out of range", i, q[i].tok);
        h[i] = wq{c, q[i].tok};
    }
    CK(cudaMemcpyAsync(g->q_d, h, n * sizeof(wq), cudaMemcpyHostToDevice, g->st));
    return 0;
}

static int count(gpu_gram *g, uint32_t n)
{
    k_count<<<(n + QWARPS - 1) / QWARPS, QWARPS * 32, 0, g->st>>>(
        (const wq *)g->q_d, n, g->bocc_at, g->bocc, g->owner, g->rocc_at, g->rocc, g->ent_rs,
        g->ent_rl, g->hkey, g->hval, g->hcap, g->qn_d);
    CK_LAUNCH("k_count");
    return 0;
}

extern "C" int gpu_count(gpu_gram *g, const gpu_query *q, size_t n, uint64_t *counts)
{
    int rc;
    if (g->has_cut) return -ENOTSUP;
    if (!g->wbuilt && (rc = gpu_words_build(g))) return rc;
    if (!n) return 0;
    if ((rc = stage(g, q, n)) || (rc = gpu_time_begin(g)) || (rc = count(g, (uint32_t)n)) ||
        (rc = gpu_time_end(g)))
        return rc;
    CK(cudaMemcpyAsync(counts, g->qn_d, n * sizeof *counts, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st));
    return 0;
}

extern "C" int gpu_search(gpu_gram *g, const gpu_query *q, size_t n, uint64_t *counts,
                          uint64_t **offs)
{
    int rc;
    *offs = NULL;
    if (g->has_cut) return -ENOTSUP;
    if (!g->wbuilt && (rc = gpu_words_build(g))) return rc;
    if (!n) return 0;
    uint32_t nframes = g->nlevels + 1; /* the word, then at most one rule per level */
    uint32_t wpb = 48 * 1024 / (nframes * (uint32_t)sizeof(frame));
    if (wpb > QWARPS) wpb = QWARPS;
    if (!wpb) return tdc_error(-ENOTSUP, "gpu: search: grammar too deep (%u levels)", g->nlevels);
    if ((rc = stage(g, q, n)) || (rc = gpu_time_begin(g)) || (rc = count(g, (uint32_t)n)))
        return rc;
    CK(cudaMemcpyAsync(counts, g->qn_d, n * sizeof *counts, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st));
    u64 *base = (u64 *)malloc((n + 1) * sizeof *base);
    if (!base) return tdc_error(-ENOMEM, "gpu: out of memory");
    base[0] = 0;
    for (size_t i = 0; i < n; i++)
        base[i + 1] = base[i] + counts[i];
    u64 total = base[n];
    cudaError_t e =
        cudaMemcpyAsync(g->qbase_d, base, (n + 1) * sizeof *base, cudaMemcpyHostToDevice, g->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
    free(base);
    if (e != cudaSuccess) return gpu_fail(e, "cudaMemcpyAsync");
    if (total > g->res_cap) {
        u64 cap = total > 2 * g->res_cap ? total : 2 * g->res_cap;
        cudaFree(g->qres_d);
        cudaFree(g->qsorted_d);
        g->qres_d = g->qsorted_d = NULL;
        g->res_cap = 0;
        if ((rc = dalloc(&g->qres_d, cap)) || (rc = dalloc(&g->qsorted_d, cap))) return rc;
        g->res_cap = cap;
    }
    k_search<<<((uint32_t)n + wpb - 1) / wpb, wpb * 32, wpb * nframes * sizeof(frame), g->st>>>(
        (const wq *)g->q_d, (uint32_t)n, nframes, g->ntokens, g->bocc_at, g->bocc, g->owner,
        g->rocc_at, g->rocc, g->ent_rs, g->ent_rl, g->hkey, g->hval, g->hcap, g->rule_start,
        g->syms_pre, g->root_pre, g->qn_d, g->qbase_d, g->qres_d, g->qgot_d);
    CK_LAUNCH("k_search");
    if (total) {
        u64 *in = g->qres_d, *out = g->qsorted_d, *b = g->qbase_d;
        if ((rc = cub_run(g->st, [&](void *t, size_t &bytes) {
                 return cub::DeviceSegmentedSort::SortKeys(t, bytes, in, out, (int64_t)total,
                                                           (int64_t)n, b, b + 1, g->st);
             })))
            return rc;
    }
    if ((rc = gpu_time_end(g))) return rc;
    u64 *got = (u64 *)malloc(n * sizeof *got);
    if (!got) return tdc_error(-ENOMEM, "gpu: out of memory");
    e = cudaMemcpyAsync(got, g->qgot_d, n * sizeof *got, cudaMemcpyDeviceToHost, g->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
    if (e != cudaSuccess) {
        free(got);
        return gpu_fail(e, "cudaMemcpyAsync");
    }
    for (size_t i = 0; i < n; i++)
        if (got[i] != counts[i]) {
            rc = tdc_error(-EIO, "gpu: search: query %zu found %llu occurrences, count %llu", i,
                           (unsigned long long)got[i], (unsigned long long)counts[i]);
            break;
        }
    free(got);
    if (rc || !total) return rc;
    if (!(*offs = (uint64_t *)malloc(total * sizeof **offs)))
        return tdc_error(-ENOMEM, "gpu: out of memory");
    e = cudaMemcpyAsync(*offs, g->qsorted_d, total * sizeof **offs, cudaMemcpyDeviceToHost, g->st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->st);
    if (e != cudaSuccess) {
        free(*offs);
        *offs = NULL;
        return gpu_fail(e, "cudaMemcpyAsync");
    }
    return 0;
}
