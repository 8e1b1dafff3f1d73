/* Word count by top-down weight propagation on the device (G-TADOC IV-B, top-down): the
 * scope's root runs seed rule weights and word counts, then one launch per level, highest
 * first, pushes each rule's weight into its children (a rule's parents all sit on higher
 * levels, so its weight is final when its level runs). Integer atomics make the result
 * independent of thread order. */
#include "gpu_dev.h"

#define SEED_CHUNK 2048 /* root symbols per seeding block */

/* Block (x, y) seeds chunks y, y + gridDim.y, ... of the root run of entry first + x, unless
 * the mask dvis (indexed from first; NULL: every entry) hides it. Sets *cut when the run holds
 * a piece of a long word, directly or inside a rule. */
__global__ void k_seed(uint32_t first, const uint8_t *dvis, const u64 *ent_rs, const u64 *ent_rl,
                       const uint32_t *root, uint32_t nt, const uint8_t *tflag, const uint8_t *rcut,
                       u64 *w, u64 *cnt, uint32_t *cut)
{
    if (dvis && !dvis[blockIdx.x]) return;
    u64 rs = ent_rs[first + blockIdx.x], rl = ent_rl[first + blockIdx.x]; /* 0 for non-files */
    for (u64 c = (u64)blockIdx.y * SEED_CHUNK; c < rl; c += (u64)gridDim.y * SEED_CHUNK) {
        u64 end = c + SEED_CHUNK < rl ? c + SEED_CHUNK : rl;
        for (u64 i = c + threadIdx.x; i < end; i += blockDim.x) {
            uint32_t s = root[rs + i];
            if (s >= nt) {
                if (rcut[s - nt]) *cut = 1;
                atomicAdd(&w[s - nt], 1ull);
            } else if (tflag[s] & TF_WORD) {
                if (tflag[s] & TF_CUT) *cut = 1;
                atomicAdd(&cnt[s], 1ull);
            }
        }
    }
}

/* One thread per rule of one level (most rules are a few symbols long). */
__global__ void k_push(const uint32_t *rules, uint32_t n, const uint32_t *syms,
                       const u64 *rule_start, uint32_t nt, const uint8_t *tflag, u64 *w, u64 *cnt)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        uint32_t r = rules[k];
        u64 wr = w[r];
        if (!wr) continue;
        for (u64 i = rule_start[r - 1]; i < rule_start[r]; i++) {
            uint32_t s = syms[i];
            if (s >= nt)
                atomicAdd(&w[s - nt], wr);
            else if (tflag[s] & TF_WORD)
                atomicAdd(&cnt[s], wr);
        }
    }
}

int gpu_wc_pass(gpu_gram *g, uint32_t first, uint32_t end, const uint8_t *dvis)
{
    u64 longest = 0;
    for (uint32_t e = first; e < end; e++)
        if (g->ents[e].root_len > longest) longest = g->ents[e].root_len;
    CK(cudaMemsetAsync(g->w, 0, ((size_t)g->nrules + 1) * sizeof *g->w, g->st));
    CK(cudaMemsetAsync(g->cnt, 0, ((size_t)g->ntokens + 1) * sizeof *g->cnt, g->st));
    CK(cudaMemsetAsync(g->ctr + 2, 0, sizeof *g->ctr, g->st));
    if (end > first && longest) {
        u64 chunks = (longest + SEED_CHUNK - 1) / SEED_CHUNK;
        dim3 grid(end - first, (unsigned)(chunks < 1024 ? chunks : 1024));
        k_seed<<<grid, 256, 0, g->st>>>(first, dvis, g->ent_rs, g->ent_rl, g->root, g->ntokens,
                                        g->tflag, g->cut, g->w, g->cnt, g->ctr + 2);
        CK_LAUNCH("k_seed");
    }
    for (uint32_t k = g->nlevels; k > 0; k--) {
        uint32_t n = g->lvl_off[k] - g->lvl_off[k - 1];
        k_push<<<blocks(n, 256), 256, 0, g->st>>>(g->lvl_rules + g->lvl_off[k - 1], n, g->syms,
                                                  g->rule_start, g->ntokens, g->tflag, g->w,
                                                  g->cnt);
        CK_LAUNCH("k_push");
    }
    return 0;
}

extern "C" int gpu_wordcount(gpu_gram *g, uint32_t first, uint32_t end, uint64_t *cnt)
{
    int rc;
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    if (first > end || end > g->nents) return tdc_error(-EINVAL, "gpu: bad scope");
    if ((rc = gpu_time_begin(g)) || (rc = gpu_wc_pass(g, first, end, NULL))) return rc;
    if ((rc = gpu_time_end(g))) return rc;
    CK(cudaMemcpyAsync(g->ctr_h + 2, g->ctr + 2, sizeof *g->ctr, cudaMemcpyDeviceToHost, g->st));
    CK(cudaMemcpyAsync(cnt, g->cnt, (size_t)g->ntokens * sizeof *cnt, cudaMemcpyDeviceToHost,
                       g->st));
    CK(cudaStreamSynchronize(g->st));
    if (g->ctr_h[2])
        return tdc_error(-ENOTSUP, "gpu: word count: the scope holds words longer than %d bytes",
                         TOK_CAP);
    return 0;
}
