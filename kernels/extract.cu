/* Batched extract on the device (TPDS'23 IV-D, with CODAG's warp-per-slice output): requests
 * are cut into slices of at most SLICE bytes and each warp serves one slice. Every lane takes
 * 1/32 of the slice: it descends from the root to its first byte by binary search over the
 * prefix offsets the index build made, then walks the grammar (walk.h), writing its
 * bytes into the warp's buffer in shared memory; the warp then copies the slice out, consecutive
 * lanes on consecutive bytes, so the writes coalesce. The 32 descents of a warp run at once, so
 * a slice costs about one descent's memory latency instead of one walk over all its tokens.
 * Requests become slices on the host for small batches and on the device for large ones. */
#include <cub/device/device_scan.cuh>

#include "gpu_dev.h"
#include "walk.h"

#define SLICE 1024 /* bytes per warp */
#define WARPS 8    /* warps per block */

typedef struct slice {
    u64 off, out; /* offset in the file; offset in the packed output */
    uint32_t ent, len;
} slice;

/* Each lane copies its share of the warp's slice with walk_copy (walk.h): a descent to its
 * first byte, then token by token, any depth of grammar. */
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
        const walk_gram g = {root, syms, rule_start, root_pre, syms_pre, toff, blob, nt};
        u64 rs = ent_rs[x.ent];
        walk_copy(&g, rs, rs + ent_rl[x.ent], x.off + lo, hi - lo, buf + lo);
    }
    __syncwarp();
    for (uint32_t b = lane; b < x.len; b += 32)
        out[x.out + b] = buf[b];
}

/* The bytes request q reads, clamped at the end of its file, from the per-entry tables that
 * gpu_upload makes (on the host and the device alike); *err: 1 when it names no regular file,
 * 2 when it reads a link whose content no entry holds, else 0. Both paths size with it. */
static __host__ __device__ inline uint32_t req_bytes(gpu_req q, uint32_t nents, const u64 *ent_sz,
                                                     const uint32_t *ent_src, int *err)
{
    u64 size = q.ent < nents ? ent_sz[q.ent] : ~0ull;
    *err = size == ~0ull;
    if (*err) return 0;
    uint32_t g = q.off >= size ? 0 : size - q.off < q.len ? (uint32_t)(size - q.off) : q.len;
    if (g && ent_src[q.ent] == ~0u) *err = 2;
    return g;
}

/* Slice k (from 0) of a request that reads `got` bytes placed at `pos` in the output. */
static __host__ __device__ inline slice req_slice(gpu_req q, uint32_t got, u64 pos,
                                                  const uint32_t *ent_src, u64 k)
{
    u64 at = k * SLICE, left = got - at;
    return slice{q.off + at, pos + at, ent_src[q.ent], (uint32_t)(left < SLICE ? left : SLICE)};
}

/* Per request: the bytes it reads and its slice count; the first request on no regular file
 * and the first on a link whose content no entry holds go to bad[0], bad[1]. */
__global__ void k_requests(const gpu_req *rq, uint32_t n, uint32_t nents, const u64 *ent_sz,
                           const uint32_t *ent_src, uint32_t *got, u64 *bytes, u64 *slices,
                           u64 *bad)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int err;
        uint32_t g = req_bytes(rq[i], nents, ent_sz, ent_src, &err);
        if (err) atomicMin(&bad[err - 1], (u64)i);
        got[i] = g;
        bytes[i] = g;
        slices[i] = (g + SLICE - 1) / SLICE;
    }
}

/* The scans' totals and the error slots, gathered for one copy to the host. */
__global__ void k_totals(const u64 *pos, const u64 *sl0, uint32_t n, u64 *tot)
{
    tot[0] = pos[n];
    tot[1] = sl0[n];
}

/* One thread per slice: the request it belongs to is the last whose first slice is at or
 * before it (requests that read nothing own no slice, so they are never that one). */
__global__ void k_slices(const gpu_req *rq, uint32_t n, const u64 *pos, const u64 *sl0,
                         const uint32_t *got, const uint32_t *ent_src, u64 nsl, slice *sl)
{
    for (u64 k = blockIdx.x * (u64)blockDim.x + threadIdx.x; k < nsl;
         k += (u64)gridDim.x * blockDim.x) {
        uint32_t lo = 0, hi = n; /* sl0[lo] <= k < sl0[hi] */
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (sl0[mid] <= k)
                lo = mid;
            else
                hi = mid;
        }
        sl[k] = req_slice(rq[lo], got[lo], pos[lo], ent_src, k - sl0[lo]);
    }
}

/* Batches of fewer requests are sized and cut into slices on the host, which uploads the
 * slices; larger ones go up as they are and are sized and sliced on the device. The device path
 * costs a small batch more (its extra launches and a second host wait), while the host loop's
 * cost grows with the requests and dominates a large batch's. */
#define XDEV_MIN 4096

/* Keep a buffer of at least `need` elements of `size` bytes, doubling: device memory, or
 * page-locked host memory with `host`. */
static int grow(void **p, size_t *cap, size_t need, size_t size, int host)
{
    if (need <= *cap) return 0;
    size_t c = need > 2 * *cap ? need : 2 * *cap;
    if (host)
        cudaFreeHost(*p);
    else
        cudaFree(*p);
    *p = NULL;
    *cap = 0;
    CK(host ? cudaHostAlloc(p, c * size, cudaHostAllocDefault) : cudaMalloc(p, c * size));
    *cap = c;
    return 0;
}

/* Room for n requests on the device (device path: per request its copy, two scan slots and
 * its byte count, in one block), s slices (staged in pinned memory too on the host path) and
 * `bytes` of output. */
static int reserve(gpu_gram *g, size_t n, size_t s, int host, size_t bytes)
{
    const size_t per = 2 * sizeof(u64) + sizeof(gpu_req) + sizeof(uint32_t);
    int rc;
    if ((rc = grow(&g->xreq_d, &g->xreq_cap, n ? n + 1 : 0, per, 0)) ||
        (rc = grow(&g->sl_d, &g->sl_cap, s, sizeof(slice), 0)) ||
        (host && (rc = grow(&g->sl_h, &g->slh_cap, s, sizeof(slice), 1))) ||
        (rc = grow((void **)&g->out_d, &g->out_cap, bytes, 1, 0)))
        return rc;
    size_t c = g->xreq_cap; /* the block: pos[c], sl0[c], requests[c], got[c] */
    g->xpos_d = (u64 *)g->xreq_d;
    g->xsl0_d = g->xpos_d + c;
    g->xreqs_d = (gpu_req *)(g->xsl0_d + c);
    g->xgot_d = (uint32_t *)(g->xreqs_d + c);
    return 0;
}

/* The batch's totals and first bad requests (bytes, slices, first on no regular file, first
 * on an unheld link; ~0 for none) against the caller's buffer: 0 or the error. */
static int check_batch(const gpu_req *req, const u64 tot[4], size_t cap)
{
    if (tot[2] != ~0ull)
        return tdc_error(-EINVAL, "entry %u is not a regular file", req[tot[2]].ent);
    if (tot[0] > cap)
        return tdc_error(-EINVAL, "gpu: extract: %llu bytes do not fit a %zu-byte buffer", tot[0],
                         cap);
    if (tot[3] != ~0ull)
        return tdc_error(-EBADMSG, "entry %u: no entry holds its content", req[tot[3]].ent);
    if (tot[1] > UINT32_MAX) return tdc_error(-EINVAL, "gpu: extract: batch too large");
    return 0;
}

/* Host path: got[], the totals, and the slices staged in pinned memory and sent up. */
static int host_slices(gpu_gram *g, const gpu_req *req, size_t n, size_t cap, uint32_t *got,
                       u64 *total, u64 *nsl)
{
    u64 tot[4] = {0, 0, ~0ull, ~0ull};
    for (size_t i = 0; i < n; i++) {
        int err;
        got[i] = req_bytes(req[i], g->nents, g->ent_sz_h, g->ent_src_h, &err);
        if (err && tot[err + 1] == ~0ull) tot[err + 1] = i;
        tot[0] += got[i];
        tot[1] += (got[i] + SLICE - 1) / SLICE;
    }
    int rc = check_batch(req, tot, cap);
    if (rc || (rc = reserve(g, 0, tot[1], 1, tot[0]))) return rc;
    slice *s = (slice *)g->sl_h;
    u64 pos = 0;
    for (size_t i = 0; i < n; pos += got[i++])
        for (u64 k = 0; k * SLICE < got[i]; k++)
            *s++ = req_slice(req[i], got[i], pos, g->ent_src_h, k);
    CK(cudaMemcpyAsync(g->sl_d, g->sl_h, tot[1] * sizeof(slice), cudaMemcpyHostToDevice, g->st));
    CK(cudaEventRecord(g->ev0, g->st));
    *total = tot[0];
    *nsl = tot[1];
    return 0;
}

/* Device path: the requests go up as they are (from page-locked memory at full speed) and are
 * sized, laid out and cut into slices there; the host waits once for the totals. */
static int dev_slices(gpu_gram *g, const gpu_req *req, size_t n, size_t cap, u64 *total, u64 *nsl)
{
    int rc = reserve(g, n, 0, 0, 0);
    if (rc) return rc;
    u64 *pos = g->xpos_d, *sl0 = g->xsl0_d;
    CK(cudaMemcpyAsync(g->xreqs_d, req, n * sizeof *req, cudaMemcpyHostToDevice, g->st));
    CK(cudaEventRecord(g->ev0, g->st));
    CK(cudaMemsetAsync(g->xtot_d + 2, 0xff, 2 * sizeof(u64), g->st));
    k_requests<<<blocks(n, 256), 256, 0, g->st>>>(g->xreqs_d, (uint32_t)n, g->nents, g->ent_sz,
                                                  g->ent_src, g->xgot_d, pos, sl0, g->xtot_d + 2);
    CK_LAUNCH("k_requests");
    if ((rc = cub_run(g->st,
                      [&](void *t, size_t &b) {
                          return cub::DeviceScan::ExclusiveSum(t, b, pos, pos, n + 1, g->st);
                      })) ||
        (rc = cub_run(g->st, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, sl0, sl0, n + 1, g->st);
         })))
        return rc;
    k_totals<<<1, 1, 0, g->st>>>(pos, sl0, (uint32_t)n, g->xtot_d);
    CK_LAUNCH("k_totals");
    CK(cudaMemcpyAsync(g->xtot_h, g->xtot_d, 4 * sizeof(u64), cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st));
    u64 ns = g->xtot_h[1];
    if ((rc = check_batch(req, g->xtot_h, cap)) || (rc = reserve(g, n, ns, 0, g->xtot_h[0])))
        return rc;
    if (ns) {
        k_slices<<<blocks(ns, 256), 256, 0, g->st>>>(g->xreqs_d, (uint32_t)n, pos, sl0, g->xgot_d,
                                                     g->ent_src, ns, (slice *)g->sl_d);
        CK_LAUNCH("k_slices");
    }
    *total = g->xtot_h[0];
    *nsl = ns;
    return 0;
}

extern "C" int64_t gpu_extract(gpu_gram *g, const gpu_req *req, size_t n, void *out, size_t cap,
                               uint32_t *got)
{
    if (!g->built) return tdc_error(-EINVAL, "gpu: index not built");
    if (n >= UINT32_MAX) return tdc_error(-EINVAL, "gpu: extract: batch too large");
    u64 total = 0, nsl = 0;
    int dev = n >= XDEV_MIN;
    int rc = dev ? dev_slices(g, req, n, cap, &total, &nsl)
                 : host_slices(g, req, n, cap, got, &total, &nsl);
    if (rc) return rc;
    if (nsl) {
        k_extract<<<(unsigned)((nsl + WARPS - 1) / WARPS), WARPS * 32, 0, g->st>>>(
            (const slice *)g->sl_d, (uint32_t)nsl, g->root, g->syms, g->rule_start, g->root_pre,
            g->syms_pre, g->ent_rs, g->ent_rl, g->ntokens, g->toff, g->blob, g->out_d);
        CK_LAUNCH("k_extract");
    }
    CK(cudaEventRecord(g->ev1, g->st));
    CK(cudaMemcpyAsync(out, g->out_d, total, cudaMemcpyDeviceToHost, g->st));
    if (dev) CK(cudaMemcpyAsync(got, g->xgot_d, n * sizeof *got, cudaMemcpyDeviceToHost, g->st));
    CK(cudaStreamSynchronize(g->st)); /* the host's (last) wait for the kernels and copies */
    CK(cudaEventElapsedTime(&g->kms, g->ev0, g->ev1));
    return (int64_t)total;
}
