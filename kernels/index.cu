/* Index build on the device, level-synchronous and children first (G-TADOC IV-B; the first
 * phase of the TPDS'23 two-phase traversal): pass k settles every rule of level k, then one
 * scan per symbol array gives the prefix byte offsets that extract descends with. */
#include <cub/device/device_scan.cuh>

#include "gpu_dev.h"

/* Pass k: each rule whose child rules all have a level below k takes level k, its expanded
 * length and cut flag, and appends itself to lvl_rules (so the list comes out sorted by
 * level). A child settled in this same pass still reads as level k, or 0: not ready, so the
 * levels are exact whatever order the threads run in. */
__global__ void k_level(uint32_t k, uint32_t nrules, uint32_t nt, const uint32_t *syms,
                        const u64 *rule_start, const u64 *toff, const uint8_t *tflag,
                        uint32_t *level, u64 *len, uint8_t *cut, uint32_t *lvl_rules,
                        uint32_t *ndone)
{
    for (uint32_t r = 1 + blockIdx.x * blockDim.x + threadIdx.x; r <= nrules;
         r += gridDim.x * blockDim.x) {
        if (level[r]) continue;
        u64 i = rule_start[r - 1], e = rule_start[r], total = 0;
        uint8_t c = 0;
        for (; i < e; i++) {
            uint32_t s = syms[i];
            if (s < nt) {
                total += toff[s + 1] - toff[s];
                c |= tflag[s] & TF_CUT;
                continue;
            }
            uint32_t l = level[s - nt];
            if (!l || l >= k) break;
            total += len[s - nt];
            c |= cut[s - nt];
        }
        if (i < e) continue;
        len[r] = total;
        cut[r] = c != 0;
        level[r] = k;
        lvl_rules[atomicAdd(ndone, 1u)] = r;
    }
}

/* out[i] = expanded length of s[i] for i < n and out[n] = 0, ready for an exclusive scan that
 * leaves the total in out[n]. With maxlev, also the highest level among s. */
__global__ void k_lens(const uint32_t *s, u64 n, uint32_t nt, const u64 *toff, const u64 *len,
                       const uint32_t *level, u64 *out, uint32_t *maxlev)
{
    uint32_t m = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i <= n;
         i += (u64)gridDim.x * blockDim.x) {
        if (i == n) {
            out[n] = 0;
            continue;
        }
        uint32_t x = s[i];
        out[i] = sym_len(x, nt, toff, len);
        if (x >= nt && level[x - nt] > m) m = level[x - nt];
    }
    if (!maxlev) return;
    m = __reduce_max_sync(0xffffffffu, m); /* every lane gets here: blocks are whole warps */
    if ((threadIdx.x & 31) == 0 && m) atomicMax(maxlev, m);
}

static int scan(gpu_gram *g, u64 *p, u64 n)
{
    size_t bytes = 0;
    void *tmp = NULL;
    CK(cub::DeviceScan::ExclusiveSum(NULL, bytes, p, n, g->st));
    CK(cudaMallocAsync(&tmp, bytes, g->st));
    cudaError_t e = cub::DeviceScan::ExclusiveSum(tmp, bytes, p, n, g->st);
    CK(cudaFreeAsync(tmp, g->st));
    CK(e);
    return 0;
}

extern "C" int gpu_index_build(gpu_gram *g)
{
    int rc;
    g->built = 0;
    CK(cudaMemsetAsync(g->level, 0, ((size_t)g->nrules + 1) * sizeof *g->level, g->st));
    CK(cudaMemsetAsync(g->ctr, 0, 4 * sizeof *g->ctr, g->st));
    if ((rc = gpu_time_begin(g))) return rc;
    /* One launch per level; the host learns from the settled count when all are done. */
    uint32_t k = 0;
    g->lvl_off[0] = 0;
    while (g->lvl_off[k] < g->nrules) {
        k_level<<<blocks(g->nrules, 256), 256, 0, g->st>>>(
            k + 1, g->nrules, g->ntokens, g->syms, g->rule_start, g->toff, g->tflag, g->level,
            g->len, g->cut, g->lvl_rules, g->ctr);
        CK_LAUNCH("k_level");
        CK(cudaMemcpyAsync(g->ctr_h, g->ctr, sizeof *g->ctr, cudaMemcpyDeviceToHost, g->st));
        CK(cudaStreamSynchronize(g->st));
        if (g->ctr_h[0] == g->lvl_off[k]) /* gram_topo rules this out */
            return tdc_error(-EBADMSG, "gpu: rules: no progress at level %u (a cycle?)", k + 1);
        g->lvl_off[++k] = g->ctr_h[0];
    }
    g->nlevels = k;
    k_lens<<<blocks(g->nroot + 1, 256), 256, 0, g->st>>>(g->root, g->nroot, g->ntokens, g->toff,
                                                         g->len, g->level, g->root_pre, g->ctr + 1);
    CK_LAUNCH("k_lens");
    k_lens<<<blocks(g->nsyms + 1, 256), 256, 0, g->st>>>(g->syms, g->nsyms, g->ntokens, g->toff,
                                                         g->len, g->level, g->syms_pre, NULL);
    CK_LAUNCH("k_lens");
    if ((rc = scan(g, g->root_pre, g->nroot + 1)) || (rc = scan(g, g->syms_pre, g->nsyms + 1)))
        return rc;
    /* The root's length is the total of its prefix offsets. */
    CK(cudaMemcpyAsync(g->len, g->root_pre + g->nroot, sizeof *g->len, cudaMemcpyDeviceToDevice,
                       g->st));
    CK(cudaMemcpyAsync(g->ctr_h + 1, g->ctr + 1, sizeof *g->ctr, cudaMemcpyDeviceToHost, g->st));
    if ((rc = gpu_time_end(g))) return rc;
    g->depth = g->ctr_h[1] + 1;
    g->built = 1;
    return 0;
}

extern "C" int gpu_rule_lens(gpu_gram *g, uint64_t *len, uint32_t *depth)
{
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    CK(cudaMemcpyAsync(len, g->len, ((size_t)g->nrules + 1) * sizeof *len, cudaMemcpyDeviceToHost,
                       g->st));
    CK(cudaStreamSynchronize(g->st));
    *depth = g->depth;
    return 0;
}
