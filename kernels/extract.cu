/* Batched extract on the device (TPDS'23 IV-D, with CODAG's warp-per-slice output): requests
 * are cut into slices of at most SLICE bytes and each warp serves one slice. Lane 0 descends
 * from the root to the first byte by binary search over the prefix offsets the index build
 * made, then walks the grammar with a stack in shared memory, queueing up to 32 token pieces at
 * a time; all 32 lanes then copy the queued bytes, consecutive lanes on consecutive bytes, so
 * reads and writes coalesce. */
#include "gpu_dev.h"

#define SLICE 1024 /* bytes per warp: bounds each warp's serial walk */
#define WARPS 8    /* warps per block, fewer when a deep grammar needs a larger stack */

typedef struct slice {
    u64 off, out; /* offset in the file; offset in the packed output */
    uint32_t ent, len;
} slice;

/* Shared memory per warp, in u64: the stack (symbol index, body end) per level, the queued
 * source offsets, and the queued output positions (33 u32). */
static __host__ __device__ inline uint32_t warp_words(uint32_t depth)
{
    return 2 * depth + 32 + 17;
}

__global__ void k_extract(const slice *sl, uint32_t nsl, uint32_t depth, const uint32_t *root,
                          const uint32_t *syms, const u64 *rule_start, const u64 *root_pre,
                          const u64 *syms_pre, const u64 *ent_rs, const u64 *ent_rl, uint32_t nt,
                          const u64 *toff, const unsigned char *blob, unsigned char *out)
{
    extern __shared__ u64 sh[];
    uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint32_t k = blockIdx.x * (blockDim.x / 32) + warp;
    if (k >= nsl) return; /* whole warps leave together */
    u64 *fi = sh + (size_t)warp * warp_words(depth), *fe = fi + depth, *qsrc = fe + depth;
    uint32_t *qpos = (uint32_t *)(qsrc + 32);
    const slice x = sl[k];
    uint32_t top = 0, cur = 0; /* lane 0: stack top and the token at the next byte */
    u64 tokoff = 0;            /* lane 0: bytes of that token already emitted */
    if (lane == 0) {
        u64 rs = ent_rs[x.ent], lo = rs, hi = rs + ent_rl[x.ent], base = root_pre[rs];
        /* Differences of prefix offsets are exact even if the global sums wrapped. */
        while (hi - lo > 1) {
            u64 mid = lo + (hi - lo) / 2;
            if (root_pre[mid] - base <= x.off)
                lo = mid;
            else
                hi = mid;
        }
        fi[0] = lo;
        fe[0] = rs + ent_rl[x.ent];
        u64 rem = x.off - (root_pre[lo] - base);
        cur = root[lo];
        while (cur >= nt) {
            uint32_t r = cur - nt;
            u64 b = rule_start[r - 1], e = rule_start[r], bp = syms_pre[b];
            lo = b;
            hi = e;
            while (hi - lo > 1) {
                u64 mid = lo + (hi - lo) / 2;
                if (syms_pre[mid] - bp <= rem)
                    lo = mid;
                else
                    hi = mid;
            }
            rem -= syms_pre[lo] - bp;
            fi[++top] = lo;
            fe[top] = e;
            cur = syms[lo];
        }
        tokoff = rem;
    }
    for (uint32_t done = 0; done < x.len;) {
        uint32_t nq = 0;
        if (lane == 0) {
            uint32_t p = 0;
            while (nq < 32 && done + p < x.len) {
                if (tokoff == toff[cur + 1] - toff[cur]) {
                    /* Next token: pop finished bodies, then descend to a first symbol. The
                     * slice ends inside the file, so the root frame never runs out. */
                    while (++fi[top] == fe[top])
                        top--;
                    cur = top ? syms[fi[top]] : root[fi[top]];
                    while (cur >= nt) {
                        fi[++top] = rule_start[cur - nt - 1];
                        fe[top] = rule_start[cur - nt];
                        cur = syms[fi[top]];
                    }
                    tokoff = 0;
                }
                u64 l = toff[cur + 1] - toff[cur] - tokoff;
                if (l > x.len - done - p) l = x.len - done - p;
                qsrc[nq] = toff[cur] + tokoff;
                qpos[nq++] = p;
                p += (uint32_t)l;
                tokoff += l;
            }
            qpos[nq] = p;
        }
        __syncwarp();
        nq = __shfl_sync(0xffffffffu, nq, 0);
        uint32_t total = qpos[nq];
        for (uint32_t b = lane; b < total; b += 32) {
            uint32_t lo = 0, hi = nq; /* the queued piece holding byte b */
            while (hi - lo > 1) {
                uint32_t mid = (lo + hi) / 2;
                if (qpos[mid] <= b)
                    lo = mid;
                else
                    hi = mid;
            }
            out[x.out + done + b] = blob[qsrc[lo] + b - qpos[lo]];
        }
        done += total;
        __syncwarp(); /* the queue is refilled next round */
    }
}

/* Room for n slices (pinned on the host, where they are written) and `bytes` of output. */
static int reserve(gpu_gram *g, size_t n, size_t bytes)
{
    if (n > g->sl_cap) {
        size_t cap = n > 2 * g->sl_cap ? n : 2 * g->sl_cap;
        cudaFreeHost(g->sl_h);
        cudaFree(g->sl_d);
        g->sl_h = g->sl_d = NULL;
        g->sl_cap = 0;
        CK(cudaHostAlloc(&g->sl_h, cap * sizeof(slice), cudaHostAllocDefault));
        CK(cudaMalloc(&g->sl_d, cap * sizeof(slice)));
        g->sl_cap = cap;
    }
    if (bytes > g->out_cap) {
        size_t cap = bytes > 2 * g->out_cap ? bytes : 2 * g->out_cap;
        cudaFree(g->out_d);
        g->out_d = NULL;
        g->out_cap = 0;
        CK(cudaMalloc(&g->out_d, cap));
        g->out_cap = cap;
    }
    return 0;
}

extern "C" int64_t gpu_extract(gpu_gram *g, const gpu_req *req, size_t n, void *out, size_t cap,
                               uint32_t *got)
{
    const arc *a = g->a;
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    u64 total = 0, nsl = 0;
    for (size_t i = 0; i < n; i++) {
        const gpu_req *q = &req[i];
        if (q->ent >= a->nents || a->ents[q->ent].type != ARC_REG)
            return tdc_error(-EINVAL, "entry %u is not a regular file", q->ent);
        u64 size = a->ents[q->ent].size;
        got[i] = q->off >= size ? 0 : size - q->off < q->len ? (uint32_t)(size - q->off) : q->len;
        total += got[i];
        nsl += (got[i] + SLICE - 1) / SLICE;
    }
    if (total > cap)
        return tdc_error(-EINVAL, "gpu: extract: %llu bytes do not fit a %zu-byte buffer", total,
                         cap);
    if (nsl > UINT32_MAX) return tdc_error(-EINVAL, "gpu: extract: batch too large");
    uint32_t wpb = 48 * 1024 / (warp_words(g->depth) * 8);
    if (wpb > WARPS) wpb = WARPS;
    if (!wpb) return tdc_error(-ENOTSUP, "gpu: extract: grammar too deep (%u levels)", g->depth);
    int rc = reserve(g, nsl, total);
    if (rc) return rc;
    slice *s = (slice *)g->sl_h;
    u64 pos = 0;
    for (size_t i = 0; i < n; pos += got[i++]) {
        /* A hard link other than the first has no root run: read the one that holds it. */
        uint32_t e = req[i].ent;
        if (got[i] && !a->ents[e].root_len) {
            int64_t c = arc_ino_entry(a, a->ents[e].ino);
            if (c < 0) return tdc_error(-EBADMSG, "entry %u: no entry holds its content", e);
            e = (uint32_t)c;
        }
        for (u64 k = 0; k < got[i]; k += SLICE)
            *s++ = slice{req[i].off + k, pos + k, e,
                         (uint32_t)(got[i] - k < SLICE ? got[i] - k : SLICE)};
    }
    CK(cudaMemcpyAsync(g->sl_d, g->sl_h, nsl * sizeof(slice), cudaMemcpyHostToDevice, g->st));
    if ((rc = gpu_time_begin(g))) return rc;
    if (nsl) {
        k_extract<<<(unsigned)((nsl + wpb - 1) / wpb), wpb * 32, wpb * warp_words(g->depth) * 8,
                    g->st>>>((const slice *)g->sl_d, (uint32_t)nsl, g->depth, g->root, g->syms,
                             g->rule_start, g->root_pre, g->syms_pre, g->ent_rs, g->ent_rl,
                             g->ntokens, g->toff, g->blob, g->out_d);
        CK_LAUNCH("k_extract");
    }
    if ((rc = gpu_time_end(g))) return rc;
    CK(cudaMemcpyAsync(out, g->out_d, total, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st));
    return (int64_t)total;
}
