/* Batched insert/append offsets on the device (TPDS'23 IV-D, "double parsing"): the positions
 * the piece-table edits of a batch take, in either meaning of an insert's offset.
 *
 * The operations are sorted by file (stable, so batch order holds inside a file) and one scan
 * of their lengths gives every operation the size of its file just before it (sequence: where
 * an append lands, and the bound an insert's offset must keep). Then one thread per operation:
 *   sequence: its text starts at `at` and each later operation of its file landing at or
 *     before where it stands pushes it on by that operation's length: the thread walks the
 *     later operations, 256 at a time through shared memory (work: the operations after it in
 *     its file);
 *   batch: an insert's final position adds the inserts of its file at lower offsets and those
 *     at the same offset earlier in the batch; its offset when applied in batch order adds the
 *     earlier inserts at the same or lower offsets. The sorted array is cut into chunks of 256,
 *     each sorted by offset with prefix sums of the lengths (one block each); a thread adds a
 *     whole chunk of its file by one binary search and compares one by one only in its own
 *     chunk and the partial chunks at its file's ends (work: 256 to 768 comparisons plus
 *     log 256 per chunk of its file). An append follows every insert and the earlier appends.
 */
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "gpu_dev.h"

#define TILE 256

struct gpu_edits {
    cudaStream_t st;
    cudaEvent_t ev0, ev1;
    float kms;
};

extern "C" int gpu_edits_new(gpu_edits **out)
{
    gpu_edits *e = (gpu_edits *)calloc(1, sizeof *e);
    if (!e) return tdc_error(-ENOMEM, "gpu: out of memory");
    cudaError_t c = cudaStreamCreateWithFlags(&e->st, cudaStreamNonBlocking);
    if (c == cudaSuccess) c = cudaEventCreate(&e->ev0);
    if (c == cudaSuccess) c = cudaEventCreate(&e->ev1);
    int rc = c == cudaSuccess ? gpu_keep_pool() : gpu_fail(c, "gpu_edits_new");
    if (rc) {
        gpu_edits_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

extern "C" void gpu_edits_free(gpu_edits *e)
{
    if (!e) return;
    if (e->ev0) cudaEventDestroy(e->ev0);
    if (e->ev1) cudaEventDestroy(e->ev1);
    if (e->st) cudaStreamDestroy(e->st);
    free(e);
}

extern "C" double gpu_edits_kernel_ms(const gpu_edits *e)
{
    return e->kms;
}

__global__ void k_prep(tdc_edit *ops, uint32_t n, uint32_t nf, uint32_t *file, uint32_t *idx,
                       u64 *hist, u64 *bad)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t f = ops[i].file;
        if (f >= nf || ops[i].kind > TDC_EDIT_APPEND) {
            /* The batch fails; file 0 keeps the passes that follow inside their arrays. */
            atomicMin(bad, (u64)i);
            ops[i].file = f = 0;
        }
        file[i] = f;
        idx[i] = i;
        atomicAdd(&hist[f], 1ull);
    }
}

/* Gather the sorted operations: key (the offset that the pairwise pass compares), lengths for
 * the scans (all operations; inserts only). */
__global__ void k_gather(const tdc_edit *ops, const uint32_t *perm, uint32_t n, u64 *slen,
                         u64 *sins)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k <= n; k += gridDim.x * blockDim.x) {
        if (k == n) {
            slen[n] = sins[n] = 0;
            continue;
        }
        const tdc_edit o = ops[perm[k]];
        slen[k] = o.len;
        sins[k] = o.kind == TDC_EDIT_INSERT ? o.len : 0;
    }
}

/* Per sorted operation: its file's segment, the size of the file before it, the edit offset
 * in sequence meaning (skey, compared by the pairwise pass) and everything that needs no
 * pairwise pass: appends' positions in batch meaning, each file's final size. */
__global__ void k_derive(int mode, const tdc_edit *ops, const uint32_t *perm, uint32_t n,
                         const u64 *size, const u64 *seg, const u64 *S, const u64 *Si, u64 *skey,
                         u64 *slen_ins, u64 *at, u64 *pos, u64 *final_size, u64 *bad)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        uint32_t i = perm[k];
        const tdc_edit o = ops[i];
        u64 b = seg[o.file], e = seg[o.file + 1], cur = size[o.file] + S[k] - S[b];
        bool ins = o.kind == TDC_EDIT_INSERT;
        if (k + 1 == e) final_size[o.file] = size[o.file] + S[e] - S[b];
        if (ins && o.off > (mode == TDC_OFFSETS_SEQUENCE ? cur : size[o.file]))
            atomicMin(bad, (u64)i);
        if (mode == TDC_OFFSETS_SEQUENCE) {
            skey[k] = ins ? o.off : cur;
            slen_ins[k] = o.len;
            at[i] = skey[k];
        } else {
            skey[k] = ins ? o.off : ~0ull;
            slen_ins[k] = ins ? o.len : 0;
            if (!ins) {
                at[i] = cur;
                pos[i] = size[o.file] + (Si[e] - Si[b]) + (S[k] - S[b]) - (Si[k] - Si[b]);
            }
        }
    }
}

/* Sequence meaning; see the top of the file. A block takes TILE consecutive sorted
 * operations; the later ones of their files come through shared memory a tile at a time. */
__global__ void k_seq(const tdc_edit *ops, const uint32_t *perm, uint32_t n, const u64 *seg,
                      const u64 *skey, const u64 *slen, u64 *pos)
{
    __shared__ u64 tk[TILE], tl[TILE];
    uint32_t k0 = blockIdx.x * TILE, k = k0 + threadIdx.x;
    bool act = k < n;
    uint32_t i = act ? perm[k] : 0;
    u64 e = act ? seg[ops[i].file + 1] : 0, cur = act ? skey[k] : 0;
    uint32_t klast = (k0 + TILE < n ? k0 + TILE : n) - 1;
    u64 hi = seg[ops[perm[klast]].file + 1];
    for (u64 t0 = (u64)k0 + 1; t0 < hi; t0 += TILE) {
        __syncthreads();
        if (t0 + threadIdx.x < hi) {
            tk[threadIdx.x] = skey[t0 + threadIdx.x];
            tl[threadIdx.x] = slen[t0 + threadIdx.x];
        }
        __syncthreads();
        if (!act) continue;
        u64 from = t0 > k ? t0 : (u64)k + 1, to = t0 + TILE < e ? t0 + TILE : e;
        for (u64 m = from; m < to; m++)
            if (tk[m - t0] <= cur) cur += tl[m - t0];
    }
    if (act) pos[i] = cur;
}

/* Batch meaning: chunk c of the sorted operations, sorted by offset (appends carry ~0 and
 * length 0), with inclusive prefix sums of the insert lengths. */
__global__ void k_chunks(uint32_t n, const u64 *skey, const u64 *slen, u64 *ck, u64 *cp)
{
    typedef cub::BlockRadixSort<u64, TILE, 1, u64> Sort;
    typedef cub::BlockScan<u64, TILE> Scan;
    __shared__ union {
        typename Sort::TempStorage s;
        typename Scan::TempStorage c;
    } tmp;
    u64 m = (u64)blockIdx.x * TILE + threadIdx.x;
    u64 key[1] = {m < n ? skey[m] : ~0ull}, len[1] = {m < n ? slen[m] : 0}, inc;
    Sort(tmp.s).Sort(key, len);
    __syncthreads();
    Scan(tmp.c).InclusiveSum(len[0], inc);
    ck[m] = key[0];
    cp[m] = inc;
}

/* Lengths in chunk c (sorted keys ck, prefix sums cp) of keys <= key (le) or < key. */
static __device__ __forceinline__ u64 chunk_sum(const u64 *ck, const u64 *cp, u64 c, u64 key,
                                                bool le)
{
    const u64 *k = ck + c * TILE;
    uint32_t lo = 0, hi = TILE;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (k[mid] < key || (le && k[mid] == key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? cp[c * TILE + lo - 1] : 0;
}

__global__ void k_batch(const tdc_edit *ops, const uint32_t *perm, uint32_t n, const u64 *seg,
                        const u64 *skey, const u64 *slen, const u64 *ck, const u64 *cp, u64 *at,
                        u64 *pos)
{
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        uint32_t i = perm[k];
        const tdc_edit o = ops[i];
        if (o.kind != TDC_EDIT_INSERT) continue;
        u64 b = seg[o.file], e = seg[o.file + 1], key = skey[k], acc_at = 0, acc_pos = 0;
        /* One by one: earlier at or below the offset count for both, later below it for pos. */
        auto pairs = [&](u64 from, u64 to) {
            for (u64 m = from; m < to; m++) {
                u64 km = skey[m], lm = slen[m];
                if (m < k) {
                    if (km <= key) acc_at += lm, acc_pos += lm;
                } else if (m > k && km < key) {
                    acc_pos += lm;
                }
            }
        };
        u64 cf = (b + TILE - 1) / TILE, cl = e / TILE, own = k / TILE; /* whole chunks [cf, cl) */
        if (cf >= cl) {
            pairs(b, e);
        } else {
            pairs(b, cf * TILE);
            pairs(cl * TILE, e);
            for (u64 c = cf; c < cl; c++) {
                if (c == own) {
                    pairs(c * TILE, (c + 1) * TILE);
                } else if (c < own) {
                    u64 s = chunk_sum(ck, cp, c, key, true);
                    acc_at += s;
                    acc_pos += s;
                } else {
                    acc_pos += chunk_sum(ck, cp, c, key, false);
                }
            }
        }
        at[i] = key + acc_at;
        pos[i] = key + acc_pos;
    }
}

static int run(gpu_edits *E, int mode, const uint64_t *size, uint32_t nfiles, const tdc_edit *ops,
               uint32_t n, uint64_t *at, uint64_t *pos, uint64_t *final_size, u64 *badp)
{
    cudaStream_t st = E->st;
    int rc = 0;
    /* One allocation, carved: ops, sizes, seg (nfiles + 1), file keys and perm (in, out),
     * lengths and scans, at, pos, final sizes, bad. */
    size_t nch = (n + TILE - 1) / TILE; /* chunks (batch) or blocks (sequence) of TILE */
    size_t nf = nfiles, sz = n * sizeof(tdc_edit) + nf * 8 + (nf + 1) * 8 + 4 * (size_t)n * 4 +
                             4 * ((size_t)n + 1) * 8 + 2 * (size_t)n * 8 + nf * 8 + 16 +
                             2 * nch * TILE * 8 + 16 * 18;
    char *mem = NULL;
    CK(cudaMallocAsync((void **)&mem, sz, st));
    char *p = mem;
    auto carve = [&](size_t bytes) {
        char *r = p;
        p += (bytes + 15) & ~(size_t)15;
        return (void *)r;
    };
    tdc_edit *ops_d = (tdc_edit *)carve(n * sizeof(tdc_edit));
    u64 *size_d = (u64 *)carve(nf * 8), *seg = (u64 *)carve((nf + 1) * 8);
    uint32_t *fk = (uint32_t *)carve(n * 4), *fk2 = (uint32_t *)carve(n * 4);
    uint32_t *idx = (uint32_t *)carve(n * 4), *perm = (uint32_t *)carve(n * 4);
    u64 *slen = (u64 *)carve((n + 1) * 8), *S = (u64 *)carve((n + 1) * 8);
    u64 *Si = (u64 *)carve((n + 1) * 8), *skey = (u64 *)carve((n + 1) * 8);
    u64 *at_d = (u64 *)carve(n * 8), *pos_d = (u64 *)carve(n * 8);
    u64 *fs_d = (u64 *)carve(nf * 8), *bad_d = (u64 *)carve(16);
    u64 *ck = (u64 *)carve(nch * TILE * 8), *cp = (u64 *)carve(nch * TILE * 8);
    int nb = 1;
    while (nb < 32 && ((u64)1 << nb) < nf)
        nb++;
    CK_OUT(cudaMemcpyAsync(ops_d, ops, n * sizeof *ops, cudaMemcpyHostToDevice, st));
    CK_OUT(cudaMemcpyAsync(size_d, size, nf * 8, cudaMemcpyHostToDevice, st));
    CK_OUT(cudaEventRecord(E->ev0, st));
    CK_OUT(cudaMemsetAsync(seg, 0, (nf + 1) * 8, st));
    CK_OUT(cudaMemsetAsync(bad_d, 0xff, 16, st));
    CK_OUT(cudaMemcpyAsync(fs_d, size_d, nf * 8, cudaMemcpyDeviceToDevice, st));
    k_prep<<<blocks(n, 256), 256, 0, st>>>(ops_d, n, nfiles, fk, idx, seg, bad_d + 1);
    CK_OUT(cudaGetLastError());
    if ((rc = cub_run(st,
                      [&](void *t, size_t &b) {
                          return cub::DeviceScan::ExclusiveSum(t, b, seg, seg, nf + 1, st);
                      })) ||
        (rc = cub_run(st, [&](void *t, size_t &b) {
             return cub::DeviceRadixSort::SortPairs(t, b, fk, fk2, idx, perm, n, 0, nb, st);
         })))
        goto out;
    k_gather<<<blocks(n + 1, 256), 256, 0, st>>>(ops_d, perm, n, slen, Si);
    CK_OUT(cudaGetLastError());
    if ((rc = cub_run(st,
                      [&](void *t, size_t &b) {
                          return cub::DeviceScan::ExclusiveSum(t, b, slen, S, n + 1, st);
                      })) ||
        (rc = cub_run(st, [&](void *t, size_t &b) {
             return cub::DeviceScan::ExclusiveSum(t, b, Si, Si, n + 1, st);
         })))
        goto out;
    /* slen is free again: it takes the lengths the pairwise pass adds. */
    k_derive<<<blocks(n, 256), 256, 0, st>>>(mode, ops_d, perm, n, size_d, seg, S, Si, skey, slen,
                                             at_d, pos_d, fs_d, bad_d);
    CK_OUT(cudaGetLastError());
    if (mode == TDC_OFFSETS_SEQUENCE) {
        k_seq<<<nch, TILE, 0, st>>>(ops_d, perm, n, seg, skey, slen, pos_d);
    } else {
        k_chunks<<<nch, TILE, 0, st>>>(n, skey, slen, ck, cp);
        CK_OUT(cudaGetLastError());
        k_batch<<<blocks(n, 256), 256, 0, st>>>(ops_d, perm, n, seg, skey, slen, ck, cp, at_d,
                                                pos_d);
    }
    CK_OUT(cudaGetLastError());
    CK_OUT(cudaEventRecord(E->ev1, st));
    CK_OUT(cudaMemcpyAsync(at, at_d, (size_t)n * 8, cudaMemcpyDeviceToHost, st));
    CK_OUT(cudaMemcpyAsync(pos, pos_d, (size_t)n * 8, cudaMemcpyDeviceToHost, st));
    CK_OUT(cudaMemcpyAsync(final_size, fs_d, nf * 8, cudaMemcpyDeviceToHost, st));
    CK_OUT(cudaMemcpyAsync(badp, bad_d, 16, cudaMemcpyDeviceToHost, st));
    CK_OUT(cudaStreamSynchronize(st));
    CK_OUT(cudaEventElapsedTime(&E->kms, E->ev0, E->ev1));
out:
    cudaFreeAsync(mem, st);
    cudaStreamSynchronize(st);
    return rc;
}

extern "C" int gpu_edit_offsets(gpu_edits *e, int mode, const uint64_t *size, uint32_t nfiles,
                                const tdc_edit *ops, size_t n, uint64_t *at, uint64_t *pos,
                                uint64_t *final_size, size_t *bad)
{
    *bad = 0;
    if (mode != TDC_OFFSETS_SEQUENCE && mode != TDC_OFFSETS_BATCH)
        return tdc_error(-EINVAL, "gpu: edit offsets: bad mode %d", mode);
    if (n >= UINT32_MAX) return tdc_error(-EINVAL, "gpu: edit offsets: batch too large");
    if (n && !nfiles) return tdc_error(-EINVAL, "edit 0: no file %u", ops[0].file);
    if (!n) {
        for (uint32_t f = 0; f < nfiles; f++)
            final_size[f] = size[f];
        e->kms = 0;
        return 0;
    }
    u64 b[2] = {~0ull, ~0ull}; /* first insert past the end; first bad file or kind */
    int rc = run(e, mode, size, nfiles, ops, (uint32_t)n, at, pos, final_size, b);
    if (rc) return rc;
    if (b[1] != ~0ull) {
        *bad = (size_t)b[1];
        return tdc_error(-EINVAL, "edit %zu: no file %u or bad kind", *bad, ops[*bad].file);
    }
    if (b[0] != ~0ull) {
        *bad = (size_t)b[0];
        return tdc_error(-EINVAL, "edit %zu: insert past the end of the file", *bad);
    }
    return 0;
}
