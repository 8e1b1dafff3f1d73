/* Device probe, residency (upload and free) and the helpers every kernel file uses. */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu_dev.h"

extern "C" int gpu_probe(char *name, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(name, n, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return -1;
    }
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) {
        snprintf(name, n, "%s", cudaGetErrorString(e));
        return -1;
    }
    snprintf(name, n, "%s (sm_%d%d)", p.name, p.major, p.minor);
    return 0;
}

extern "C" int gpu_device_count(void)
{
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

extern "C" int gpu_use_device(int dev, int *prev)
{
    if (prev) CK(cudaGetDevice(prev));
    CK(cudaSetDevice(dev));
    return 0;
}

extern "C" int gpu_mem_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t));
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

int gpu_fail(cudaError_t e, const char *what)
{
    cudaGetLastError(); /* clear a non-sticky error so the handle stays usable */
    return tdc_error(e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO, "gpu: %s: %s", what,
                     cudaGetErrorString(e));
}

/* The stream-ordered pool (cudaMallocAsync: cub's temporary storage, the edit batches) gives
 * its memory back to the driver at every synchronization by default, so every call paid real
 * allocations again (a small batch through extract's device path took about twice as long).
 * Keep up to POOL_KEEP bytes reserved between calls. */
#define POOL_KEEP ((uint64_t)256 << 20)
int gpu_keep_pool(void)
{
    static uint64_t kept; /* a setting of each device: once per process (bit = device) */
    int dev;
    CK(cudaGetDevice(&dev));
    uint64_t bit = dev < 64 ? (uint64_t)1 << dev : 0;
    if (__atomic_load_n(&kept, __ATOMIC_ACQUIRE) & bit) return 0;
    cudaMemPool_t pool;
    uint64_t keep = POOL_KEEP;
    CK(cudaDeviceGetDefaultMemPool(&pool, dev));
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    __atomic_fetch_or(&kept, bit, __ATOMIC_RELEASE);
    return 0;
}

int gpu_time_begin(gpu_gram *g)
{
    CK(cudaEventRecord(g->ev0, g->st));
    return 0;
}

int gpu_time_end(gpu_gram *g)
{
    CK(cudaEventRecord(g->ev1, g->st));
    CK(cudaStreamSynchronize(g->st));
    CK(cudaEventElapsedTime(&g->kms, g->ev0, g->ev1));
    return 0;
}

extern "C" double gpu_kernel_ms(const gpu_gram *g)
{
    return g->kms;
}

/* Device copy of n elements at h. */
template <class T> static int put(gpu_gram *g, T **d, const void *h, size_t n)
{
    if (int rc = dalloc(d, n)) return rc;
    if (n) CK(cudaMemcpyAsync(*d, h, n * sizeof(T), cudaMemcpyHostToDevice, g->st));
    return 0;
}

static int upload(gpu_gram *g, const gpu_src *s)
{
    g->src = *s;
    g->ntokens = s->ntokens;
    g->nrules = s->nrules;
    g->nents = s->nents;
    g->nroot = s->nroot;
    g->nsyms = s->nsyms;
    g->ents = (gpu_ent *)malloc(((size_t)g->nents + 1) * sizeof *g->ents);
    if (!g->ents) return tdc_error(-ENOMEM, "gpu: out of memory");
    if (g->nents) memcpy(g->ents, s->ents, (size_t)g->nents * sizeof *g->ents);
    g->src.ents = g->ents;
    CK(cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking));
    if (int rc = gpu_keep_pool()) return rc;
    CK(cudaEventCreate(&g->ev0));
    CK(cudaEventCreate(&g->ev1));
    uint8_t *tf = (uint8_t *)malloc(g->ntokens + 1);
    u64 *ent = (u64 *)malloc(2 * ((size_t)g->nents + 1) * sizeof *ent);
    if (!tf || !ent) {
        free(tf);
        free(ent);
        return tdc_error(-ENOMEM, "gpu: out of memory");
    }
    for (uint32_t t = 0; t < g->ntokens; t++) {
        int word = s->tok_word[t];
        uint64_t l = s->tok_off[t + 1] - s->tok_off[t];
        tf[t] = (uint8_t)(word ? TF_WORD : 0) | (uint8_t)(word && l == TOK_CAP ? TF_CUT : 0);
        g->has_cut |= word && l == TOK_CAP;
    }
    for (uint32_t e = 0; e < g->nents; e++) {
        ent[e] = g->ents[e].root_start;
        ent[g->nents + e] = g->ents[e].root_len;
    }
    /* For extract: sizes, and for a hard link other than the first (no root run of its own)
     * the entry that holds its bytes. */
    u64 *esz = g->ent_sz_h = (u64 *)malloc(((size_t)g->nents + 1) * sizeof *esz);
    uint32_t *esrc = g->ent_src_h = (uint32_t *)malloc(((size_t)g->nents + 1) * sizeof *esrc);
    if (!esz || !esrc) {
        free(tf), free(ent);
        return tdc_error(-ENOMEM, "gpu: out of memory"); /* gpu_free frees the rest */
    }
    for (uint32_t e = 0; e < g->nents; e++) {
        const gpu_ent *x = &g->ents[e];
        esz[e] = x->reg ? x->size : ~0ull;
        esrc[e] = x->reg && x->size && !x->root_len ? x->content : e;
    }
    int rc = put(g, &g->root, s->root, g->nroot);
    if (!rc) rc = put(g, &g->syms, s->syms, g->nsyms);
    if (!rc) rc = put(g, &g->rule_start, s->rule_start, (size_t)g->nrules + 1);
    if (!rc) rc = put(g, &g->toff, s->tok_off, (size_t)g->ntokens + 1);
    if (!rc) rc = put(g, &g->blob, s->tok_bytes, s->tok_off[g->ntokens]);
    if (!rc) rc = put(g, &g->tflag, tf, g->ntokens);
    if (!rc) rc = put(g, &g->ent_rs, ent, g->nents);
    if (!rc) rc = put(g, &g->ent_rl, ent + g->nents, g->nents);
    if (!rc) rc = put(g, &g->ent_sz, esz, g->nents);
    if (!rc) rc = put(g, &g->ent_src, esrc, g->nents);
    if (!rc) rc = dalloc(&g->xtot_d, 4);
    /* What the index and word count fill, allocated once here. */
    size_t nr = (size_t)g->nrules + 1;
    if (!rc && !(g->lvl_off = (uint32_t *)malloc((nr + 1) * sizeof *g->lvl_off)))
        rc = tdc_error(-ENOMEM, "gpu: out of memory");
    if (!rc && !(rc = dalloc(&g->level, nr)) && !(rc = dalloc(&g->len, nr)) &&
        !(rc = dalloc(&g->cut, nr)) && !(rc = dalloc(&g->lvl_rules, nr)) &&
        !(rc = dalloc(&g->ctr, 4)) && !(rc = dalloc(&g->root_pre, g->nroot + 1)) &&
        !(rc = dalloc(&g->syms_pre, g->nsyms + 1)) && !(rc = dalloc(&g->w, nr)) &&
        !(rc = dalloc(&g->cnt, (size_t)g->ntokens + 1))) {
        cudaError_t he = cudaHostAlloc((void **)&g->ctr_h, 4 * sizeof *g->ctr_h, 0);
        if (he == cudaSuccess) he = cudaHostAlloc((void **)&g->xtot_h, 4 * sizeof *g->xtot_h, 0);
        if (he != cudaSuccess) rc = gpu_fail(he, "cudaHostAlloc");
    }
    /* The pageable sources must stay alive until the copies finish. */
    cudaError_t e = cudaStreamSynchronize(g->st);
    if (!rc && e != cudaSuccess) rc = gpu_fail(e, "upload");
    free(tf);
    free(ent);
    return rc;
}

extern "C" int gpu_upload(const gpu_src *s, gpu_gram **out)
{
    gpu_gram *g = (gpu_gram *)calloc(1, sizeof *g);
    if (!g) return tdc_error(-ENOMEM, "gpu: out of memory");
    int rc = upload(g, s);
    if (rc) {
        gpu_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

extern "C" void gpu_free(gpu_gram *g)
{
    if (!g) return;
    void *dev[] = {g->root,     g->syms,     g->rule_start, g->toff,   g->blob,   g->tflag,
                   g->ent_rs,   g->ent_rl,   g->level,      g->len,    g->cut,    g->lvl_rules,
                   g->root_pre, g->syms_pre, g->ctr,        g->w,      g->cnt,    g->sl_d,
                   g->ent_sz,   g->ent_src,  g->xreq_d,     g->xtot_d, g->out_d,  g->bocc_at,
                   g->bocc,     g->rocc_at,  g->rocc,       g->owner,  g->hkey,   g->hval,
                   g->q_d,      g->qn_d,     g->qbase_d,    g->qgot_d, g->qres_d, g->qsorted_d,
                   g->arank,    g->aids,     g->aht,        g->aown,   g->anwb,   g->aout,
                   g->apath,    g->apoff,    g->aew};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        cudaFree(dev[i]); /* cudaFree(NULL) is a no-op */
    cudaFreeHost(g->ctr_h);
    cudaFreeHost(g->xtot_h);
    cudaFreeHost(g->sl_h);
    cudaFreeHost(g->q_h);
    if (g->ev0) cudaEventDestroy(g->ev0);
    if (g->ev1) cudaEventDestroy(g->ev1);
    if (g->st) cudaStreamDestroy(g->st);
    free(g->lvl_off);
    free(g->ent_sz_h);
    free(g->ent_src_h);
    free(g->apord_h);
    free(g->aprk_h);
    free(g->ents);
    free(g);
}

extern "C" void *gpu_host_alloc(size_t n)
{
    void *p = NULL;
    return cudaHostAlloc(&p, n ? n : 1, cudaHostAllocDefault) == cudaSuccess ? p : NULL;
}

extern "C" void gpu_host_free(void *p)
{
    if (p) cudaFreeHost(p);
}
