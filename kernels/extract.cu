/* Batched extract on the device (TPDS'23 IV-D, with CODAG's warp-per-slice output): requests
 * are cut into slices of at most SLICE bytes and each warp serves one slice. Every lane takes
 * 1/32 of the slice: it descends from the root to its first byte by binary search over the
 * prefix offsets the index build made, then walks the grammar with its own stack, writing its
 * bytes into the warp's buffer in shared memory; the warp then copies the slice out, consecutive
 * lanes on consecutive bytes, so the writes coalesce. The 32 descents of a warp run at once, so
 * a slice costs about one descent's memory latency instead of one walk over all its tokens. */
#include "gpu_dev.h"

#define SLICE 1024  /* bytes per warp */
#define WARPS 8     /* warps per block */
#define MAXD 64     /* stack frames per lane: grammars deeper than MAXD - 1 go to the CPU */

typedef struct slice {
    u64 off, out; /* offset in the file; offset in the packed output */
    uint32_t ent, len;
} slice;

__global__ void __launch_bounds__(WARPS * 32)
    k_extract(const slice *sl, uint32_t nsl, const uint32_t *root, const uint32_t *syms,
              const u64 *rule_start, const u64 *root_pre, const u64 *syms_pre, const u64 *ent_rs,
              const u64 *ent_rl, uint32_t nt, const u64 *toff, const unsigned char *blob,
              unsigned char *out)
{
    __shared__ unsigned char sbuf[WARPS][SLICE];
    uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint32_t k = blockIdx.x * WARPS + warp;
    if (k >= nsl) return; /* whole warps leave together */
    const slice x = sl[k];
    unsigned char *buf = sbuf[warp];
    uint32_t per = (x.len + 31) / 32, lo = lane * per, hi = lo + per < x.len ? lo + per : x.len;
    if (lo < hi) {
        u64 fi[MAXD], fe[MAXD]; /* per frame: the symbol's index, its body's end */
        uint32_t top = 0, cur;
        u64 rs = ent_rs[x.ent], l = rs, h = rs + ent_rl[x.ent], base = root_pre[rs];
        u64 rem = x.off + lo;
        /* Differences of prefix offsets are exact even if the global sums wrapped. */
        while (h - l > 1) {
            u64 mid = l + (h - l) / 2;
            if (root_pre[mid] - base <= rem)
                l = mid;
            else
                h = mid;
        }
        fi[0] = l;
        fe[0] = rs + ent_rl[x.ent];
        rem -= root_pre[l] - base;
        cur = root[l];
        while (cur >= nt) {
            uint32_t r = cur - nt;
            u64 b = rule_start[r - 1], e = rule_start[r], bp = syms_pre[b];
            l = b;
            h = e;
            while (h - l > 1) {
                u64 mid = l + (h - l) / 2;
                if (syms_pre[mid] - bp <= rem)
                    l = mid;
                else
                    h = mid;
            }
            rem -= syms_pre[l] - bp;
            fi[++top] = l;
            fe[top] = e;
            cur = syms[l];
        }
        /* Walk: copy the rest of this token, then the next ones, until hi. The lane's bytes
         * end inside the file, so the root frame never runs out. */
        for (uint32_t p = lo;;) {
            u64 t0 = toff[cur] + rem, n = toff[cur + 1] - t0;
            if (n > hi - p) n = hi - p;
            for (u64 i = 0; i < n; i++)
                buf[p + i] = blob[t0 + i];
            p += (uint32_t)n;
            if (p == hi) break;
            while (++fi[top] == fe[top])
                top--;
            cur = top ? syms[fi[top]] : root[fi[top]];
            while (cur >= nt) {
                fi[++top] = rule_start[cur - nt - 1];
                fe[top] = rule_start[cur - nt];
                cur = syms[fi[top]];
            }
            rem = 0;
        }
    }
    __syncwarp();
    for (uint32_t b = lane; b < x.len; b += 32)
        out[x.out + b] = buf[b];
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
    if (g->depth >= MAXD)
        return tdc_error(-ENOTSUP, "gpu: extract: grammar too deep (%u levels)", g->depth);
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
    CK(cudaEventRecord(g->ev0, g->st));
    if (nsl) {
        k_extract<<<(unsigned)((nsl + WARPS - 1) / WARPS), WARPS * 32, 0, g->st>>>(
            (const slice *)g->sl_d, (uint32_t)nsl, g->root, g->syms, g->rule_start, g->root_pre,
            g->syms_pre, g->ent_rs, g->ent_rl, g->ntokens, g->toff, g->blob, g->out_d);
        CK_LAUNCH("k_extract");
    }
    CK(cudaEventRecord(g->ev1, g->st));
    CK(cudaMemcpyAsync(out, g->out_d, total, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st)); /* one host wait for the kernel and the copy */
    CK(cudaEventElapsedTime(&g->kms, g->ev0, g->ev1));
    return (int64_t)total;
}
