/* gpu_dev: what the CUDA sources of kernels/ share (CUDA C++ only; the engine sees
 * engine/backend/gpu_api.h). */
#ifndef TDC_GPU_DEV_H
#define TDC_GPU_DEV_H

#include <cuda_runtime.h>

#include "../engine/backend/gpu_api.h"

extern "C" {
#include "../engine/base/buf.h"
#include "../engine/base/err.h"
#include "../engine/base/tok.h"
}

typedef unsigned long long u64; /* the type CUDA's 64-bit atomics take */

/* Token flags, computed on the host with the engine's own definitions. */
enum { TF_WORD = 1, TF_CUT = 2 /* a TOK_CAP-byte word token: a piece of a longer word */ };

struct gpu_gram {
    gpu_src src;  /* the archive (src.ents is `ents`) */
    gpu_ent *ents; /* the handle's copy of the entries */
    cudaStream_t st;
    cudaEvent_t ev0, ev1;
    float kms;
    uint32_t ntokens, nrules, nents;
    uint64_t nroot, nsyms;
    /* uploaded */
    uint32_t *root, *syms;
    u64 *rule_start; /* nrules + 1, as gram.rule_start */
    u64 *toff;       /* ntokens + 1 token offsets into blob */
    unsigned char *blob;
    uint8_t *tflag;       /* per token, TF_* */
    u64 *ent_rs, *ent_rl; /* per entry: root run start and length */
    /* built by gpu_index_build */
    int built;
    uint32_t *level; /* nrules + 1; 0 = not yet known */
    u64 *len;        /* nrules + 1 expanded lengths; [0] is filled by gpu_rule_lens */
    uint8_t *cut;    /* nrules + 1: the rule's expansion holds a TF_CUT token */
    uint32_t
        *lvl_rules;    /* rules sorted by level: level k is lvl_rules[lvl_off[k-1] .. lvl_off[k]) */
    uint32_t *lvl_off; /* host, nlevels + 1 */
    uint32_t nlevels, depth;
    u64 *root_pre, *syms_pre; /* exclusive prefix byte offsets, nroot + 1 and nsyms + 1 */
    uint32_t *ctr;            /* device counters: [0] rules settled, [1] highest level in the root,
                                 [2] word count met a cut word */
    uint32_t *ctr_h;          /* pinned copy of ctr */
    /* wordcount */
    u64 *w, *cnt;
    /* extract (kernels/extract.cu): requests, slices and output, grown as needed */
    u64 *ent_sz;       /* per entry: its size, ~0 when it is not a regular file */
    uint32_t *ent_src; /* per entry: the entry whose root run holds its bytes, ~0 when none */
    u64 *ent_sz_h;     /* host copies of both, for batches sized on the host */
    uint32_t *ent_src_h;
    void *xreq_d; /* one block holding the four arrays below, xreq_cap of each */
    size_t xreq_cap;
    u64 *xpos_d;          /* n + 1: where a request's bytes go in the output (scan), total last */
    u64 *xsl0_d;          /* n + 1: its first slice (scan), the slice count last */
    gpu_req *xreqs_d;     /* the batch's requests */
    uint32_t *xgot_d;     /* per request: bytes it reads */
    u64 *xtot_d, *xtot_h; /* bytes, slices, first request on no regular file, first on a link
                             whose content no entry holds (device and pinned copies) */
    void *sl_d, *sl_h;    /* slices; staged in pinned memory on the host path */
    size_t sl_cap, slh_cap;
    unsigned char *out_d;
    size_t out_cap;
    /* word index (gpu_words_build); symbols are 0..nsym-1 with nsym = ntokens + nrules + 1 */
    int wbuilt;
    int has_cut; /* a word token of TOK_CAP bytes: a word was cut (the word queries refuse) */
    u64 *bocc_at, *bocc; /* per symbol, its positions in syms (ascending) */
    u64 *rocc_at, *rocc; /* per symbol, its positions in root (ascending) */
    uint32_t *owner;     /* per syms position, the rule whose body holds it */
    u64 *hkey, *hval;    /* rule2file: (file << 32 | rule) -> occurrences; ~0 = empty */
    u64 hcap, hpairs;
    /* word queries: staged in pinned memory, device copies grow as needed */
    void *q_h, *q_d;
    u64 *qn_d, *qbase_d, *qgot_d, *qres_d, *qsorted_d;
    size_t q_cap, res_cap;
    /* analytics (gpu_analytic, kernels/ana.cu), prepared on first use */
    int aprep;
    uint32_t nwords;     /* word tokens in the dictionary */
    uint32_t *arank;     /* per token: byte-order rank among the words; ~0 for separators */
    uint32_t *aids;      /* rank -> token */
    uint32_t *aht;       /* 5 per rule: head[2], tail[2] (as ranks), words capped at 3 */
    uint32_t *aown;      /* per syms position, the rule whose body holds it */
    uint32_t *anwb;      /* per rule: word tokens in its own body */
    uint32_t *aew;       /* per rule: word tokens in its expansion, saturating at 2^32 - 1 */
    unsigned char *aout; /* text output on the device, grows as needed */
    size_t aout_cap;
    unsigned char *apath; /* every entry's path, C-escaped (tab, newline, backslash) */
    u64 *apoff;           /* nents + 1 offsets into apath */
    uint32_t *apord_h;    /* host: entries by path (strcmp order) */
    uint32_t *aprk_h;     /* host: entry -> its place in apord_h */
};

/* Word count's top-down pass on the device, leaving w (rule weights) and cnt (per token)
 * there and ctr[2] set when the scope holds a cut long word; no sync (wordcount.cu). dvis:
 * NULL for every entry, or a device copy of the visibility mask's bytes [first, end) (ana.h):
 * entries whose byte is 0 seed nothing. */
int gpu_wc_pass(gpu_gram *g, uint32_t first, uint32_t end, const uint8_t *dvis);

#define EMPTY_KEY (~0ull)

static __device__ __forceinline__ u64 hmix(u64 k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

/* rule2file lookup: occurrences of rule r in file f's expansion (0 if none). */
static __device__ __forceinline__ u64 h_get(const u64 *key, const u64 *val, u64 cap, uint32_t f,
                                            uint32_t r)
{
    u64 k = (u64)f << 32 | r, m = cap - 1;
    for (u64 h = hmix(k) & m;; h = (h + 1) & m) {
        u64 x = key[h];
        if (x == k) return val[h];
        if (x == EMPTY_KEY) return 0;
    }
}

/* Record a CUDA failure as a tdc_error: -ENOMEM for out-of-memory, else -EIO. */
int gpu_fail(cudaError_t e, const char *what);
#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return gpu_fail(e_, #call);                                         \
    } while (0)
/* As CK, for a function that must clean up: sets the int `rc` and jumps to its label `out`. */
#define CK_OUT(call)                                                                               \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            rc = gpu_fail(e_, #call);                                                              \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
/* After a launch: configuration errors show now, execution errors at the next sync. */
#define CK_LAUNCH(name)                                                                            \
    do {                                                                                           \
        cudaError_t e_ = cudaGetLastError();                                                       \
        if (e_ != cudaSuccess) return gpu_fail(e_, "kernel " name);                                \
    } while (0)

/* Let the device's stream-ordered memory pool keep what it has allocated between calls. */
int gpu_keep_pool(void);

/* Events around one call's kernels; gpu_time_end syncs the stream and stores the time. */
int gpu_time_begin(gpu_gram *g);
int gpu_time_end(gpu_gram *g);

/* cudaMalloc n elements, at least one so that every pointer is valid. */
template <class T> static inline int dalloc(T **p, size_t n)
{
    CK(cudaMalloc((void **)p, (n ? n : 1) * sizeof(T)));
    return 0;
}

/* A cub device-wide call through its two-step temp-storage protocol: f(tmp, bytes) is called
 * once to size the temp storage, then to do the work, on stream st. */
template <class F> static int cub_run(cudaStream_t st, F f)
{
    size_t bytes = 0;
    void *tmp = NULL;
    CK(f(NULL, bytes));
    CK(cudaMallocAsync(&tmp, bytes ? bytes : 1, st));
    cudaError_t e = f(tmp, bytes);
    CK(cudaFreeAsync(tmp, st));
    CK(e);
    return 0;
}

static __device__ __forceinline__ u64 sym_len(uint32_t s, uint32_t nt, const u64 *toff,
                                              const u64 *len)
{
    return s < nt ? toff[s + 1] - toff[s] : len[s - nt];
}

static inline unsigned blocks(u64 n, unsigned threads)
{
    u64 b = (n + threads - 1) / threads;
    return (unsigned)(b ? (b < 65536 * 16 ? b : 65536 * 16) : 1); /* kernels stride past this */
}

#endif
