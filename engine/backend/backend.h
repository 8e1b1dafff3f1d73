/* backend: which compute backend serves heavy operations (CPU always; CUDA when built with
 * nvcc and a usable GPU is present), and the CPU side of what the CUDA backend computes, so the
 * two can be compared (tests/gpu/gpucheck). */
#ifndef TDC_BACKEND_H
#define TDC_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../format/arc.h"
#include "../base/buf.h"
#include "../analytics/ana.h" /* ana_opts, ana_ctx */
#include "../analytics/ana_merge.h" /* ana_sink */
#include "../analytics/ana_shards.h" /* ana_part_fn */
#include "gpu_api.h" /* plain C: gpu_gram, tdc_edit (usable without CUDA) */

/* 1 if a CUDA device is usable in this process, else 0. Probes once; thread-safe. */
int backend_gpu_available(void);

/* A one-line description such as "cpu backend; no CUDA support compiled in" or
 * "cpu backend; gpu backend on NVIDIA H100 80GB HBM3 (sm_90)". Static storage. */
const char *backend_describe(void);

enum { BACKEND_OFF = 0, BACKEND_AUTO = 1, BACKEND_ON = 2 };

/* The mode named by s: "off", "auto" or "on"; NULL or "" is auto. -1 for any other name. */
int backend_mode_parse(const char *s);

/* From measurement (bench/results/gpu.md, "Word count by scope size"): the resident GPU word
 * count beats the CPU from scopes of a few KB up on the test corpora (the CPU's cost has a part
 * that grows with the archive, not the scope), and loses on archives of a few KB, where the
 * GPU's fixed cost per call dominates. */
#define BACKEND_AUTO_MIN_BYTES ((uint64_t)16 << 10)

/* For the tadoc tool, one analytic per process: auto takes the GPU from
 * BACKEND_CLI_AUTO_MIN_BYTES of scope, since a fresh process also pays for starting CUDA and
 * uploading and indexing the archive (hundreds of ms). */
#define BACKEND_CLI_AUTO_MIN_BYTES ((uint64_t)64 << 20)

/* For the tadoc tool, past that threshold, on an archive of several shards: whether auto gives
 * analytic `kind` of a scope of scope_bytes to the GPU rather than to the CPU shard by shard
 * on `cores` cores. The GPU takes the whole archive of archive_bytes (loaded, uploaded and
 * prepared in this process) when it fits (`fits`), else the scope's shards one at a time.
 * Each side's time is a cost per GB of content measured for each analytic on an H100 host
 * (bench/results/gpu.md, "One process per analytic": the CPU in core-seconds, shard by shard
 * on all 16 cores and the merge; the GPU end to end, the process's start included). */
int backend_cli_gpu_wins(int kind, uint64_t scope_bytes, uint64_t archive_bytes, unsigned cores,
                         int fits);

/* Content bytes of the regular files of entries [first, end) of a (*scope) and of all of a
 * (*all): what backend_cli_gpu_wins weighs. */
void backend_scope_bytes(const arc *a, uint32_t first, uint32_t end, uint64_t *scope,
                         uint64_t *all);

/* The CPUs online (at least 1). */
unsigned backend_cpus(void);

/* From measurement (bench/results/gpu.md, "One read: CPU vs GPU"; gpucheck --reads): one read
 * on the GPU (requests up, extract, bytes back into pinned memory, copied out) costs nearly the
 * same whatever its size up to about 128 KiB, while a read on a CPU core grows with its bytes;
 * the GPU wins from about 32-64 KiB. So auto considers reads of 64 KiB and more for the GPU,
 * and sends each where it is expected to be done first (readcost.h: costs measured as reads
 * run); no window: batches form from the reads that arrive while one runs. */
#define BACKEND_READ_MIN_BYTES ((size_t)64 << 10)
#define BACKEND_READ_WAIT_US 0
#define BACKEND_READ_FULL ((size_t)16 << 20)

/* What the caller (the daemon's options, the tool's environment) chooses. */
typedef struct backend_opts {
    /* BACKEND_OFF: the CPU serves everything. BACKEND_AUTO: the GPU serves what it is faster
     * at: an analytic of a scope of at least auto_min bytes of an archive the caller keeps
     * (gen != 0), when no other request holds the GPU at that moment; reads of at least
     * read_min bytes. BACKEND_ON: the GPU serves every analytic and read it can (uploading a
     * gen-0 archive for the one request), waiting for the GPU when busy. Without a usable GPU
     * every mode is the CPU. */
    int mode;
    uint64_t auto_min;     /* BACKEND_AUTO_MIN_BYTES */
    int reads;             /* let backend_read use the GPU (the daemon does; the tools, which
                              read a few files once, neither start CUDA nor upload to read) */
    size_t read_min;       /* BACKEND_READ_MIN_BYTES */
    unsigned read_wait_us; /* the batch window (BACKEND_READ_WAIT_US) */
    int wide_seq;          /* let the GPU's sequence analytics take their wide keys for any
                              dictionary rather than from 2^21 words: to test that path */
    uint64_t gpu_mem;      /* device bytes a whole archive may take (backend_gpu_fits); 0:
                              half of what the device has free */
    /* The devices backend_by_shard spreads shards over: every visible one (gpu_shares 0), or,
     * where gpu_shares processes of one host share its n GPUs, the devices d with
     * d % m == gpu_share % m, m = min(gpu_shares, n): one GPU each while they are as many as
     * the GPUs or more, several each while fewer (tadoc-mpi: the ranks of a host). */
    int gpu_share, gpu_shares;
    ana_opts ana;          /* the analytics' options, for the CPU and the GPU alike */
} backend_opts;

/* The defaults: mode auto, the thresholds above, reads on the CPU, ANA_OPTS_INIT. */
void backend_opts_init(backend_opts *o);

/* A backend: its options, the analytics' context, the archives resident on the GPU (the least
 * recently used of BACKEND_GPU_CACHE is dropped for a new one), the read batcher and the
 * counters of backend_stats. Every function taking one is thread-safe. */
typedef struct backend backend;

/* The device room of a part of consecutive shards (backend_by_shard) where gpu_mem does not
 * set it: on one H100, the system text's 38 shards in parts of 300M-600M took the sequence
 * analytics 7.0-9.5 s against 8.6 and 15.0 on 16 cores, and in one part of all (half the
 * free memory) 15.5 and 18.3: that part's host-side load and merge is one thread's, and a
 * shard with a word the GPU refuses sends it back shard by shard after it loaded. */
#define BACKEND_PART_ROOM ((uint64_t)512 << 20)

#define BACKEND_GPU_CACHE 2
#define BACKEND_MAX_GPUS 16 /* devices backend_by_shard spreads shards over */

/* A new backend with options o (NULL: backend_opts_init's); -ENOMEM. Creating one starts
 * nothing: CUDA starts on the first request the GPU takes. */
int backend_new(const backend_opts *o, backend **out);

/* Stop the read batcher, drop every GPU copy and free b. No call on b may be running. */
void backend_free(backend *b);

/* b's options; and its analytics' context, for CPU analytics called directly. */
const backend_opts *backend_options(const backend *b);
ana_ctx *backend_ana(backend *b);

/* Change b's mode (for tests that compare modes on one backend and its counters). */
void backend_set_mode(backend *b, int mode);

/* ana_wordcount over entries [first, end), on the GPU when `g` (gpu_upload + gpu_index_build
 * of the same archive) is given and the scope has no word longer than TOK_CAP, else on the
 * CPU with c's options; the output is the same either way. Other GPU failures are returned,
 * not hidden. */
int backend_wordcount(ana_ctx *c, const arc *a, gpu_gram *g, uint32_t first, uint32_t end,
                      buf *out);

/* Analytic `kind` (enum ana_id; analytics.h has the table) over the files of entries
 * [first, end) of `a` visible in `vis` (ana.h: NULL for all), appended to out: exactly what
 * its CPU function (ana_table[kind].cpu) prints with b's analytics options. It may run on the
 * GPU (the mode): the archive is uploaded and indexed once per (a, gen) and stays resident.
 * `gen` names the archive's contents for the resident copies: give a new value whenever `a`
 * may be another archive or changed (after a compaction, or a pointer reused), or 0 for a
 * short-lived archive (such as an in-memory snapshot) that must not stay. Files of the scope
 * that hold words longer than TOK_CAP (which the GPU does not join) go to the CPU and the rest
 * to the GPU, the two outputs merged as the shards' parts are. Any GPU failure falls back to
 * the CPU (counted in backend_stats). Returns 0, -EINVAL for an unknown kind,
 * -EBADMSG when a visible file of the scope lies in a damaged shard (arc_range_damaged: no
 * numbers rather than wrong ones), or the ana_* error. */
int backend_analytic(backend *b, int kind, const arc *a, uint64_t gen, uint32_t first,
                     uint32_t end, const unsigned char *vis, buf *out);

/* backend_analytic's GPU half: 0 where the GPU served it (appended to out), 1 where it did
 * not (the mode, the size, a scope it leaves to the CPU, or a failure, counted as a
 * fallback; out is left as it was), or backend_analytic's errors for a bad kind, scope or
 * damaged shard. For a caller with a better CPU path than one whole grammar (tadoc's
 * analytics go shard by shard on every core). */
int backend_gpu_analytic(backend *b, int kind, const arc *a, uint64_t gen, uint32_t first,
                         uint32_t end, const unsigned char *vis, buf *out);

/* backend_analytic for `meta`, an archive of several shards opened by arc_open_meta and not
 * loaded: shard by shard (ana_by_shard with the analytics context c, or b's own when NULL:
 * c's options say how many shards at once), each shard loaded alone. With b's mode on and a
 * usable GPU, or in auto mode where backend_cli_gpu_wins gives the scope's shards to the GPU
 * (a scope of at least auto_min bytes), the parts are computed on the GPU: consecutive shards
 * gathered into parts of one grammar each, as large as a whole upload may be (gpu_mem) and at
 * least one per device (ana_opts.group_*), each uploaded for its analytic alone and dropped
 * after, so an archive of any size streams through the GPU's memory a part at a time while
 * worker threads decode the next parts, spread over every visible device
 * (CUDA_VISIBLE_DEVICES; up to BACKEND_MAX_GPUS, one part at a time on each); else, or when
 * the GPU fails on a part (counted as a fallback), on the CPU. The output is the same either
 * way; errors as ana_by_shard. */
int backend_by_shard(backend *b, ana_ctx *c, int kind, const arc *meta, uint32_t first,
                     uint32_t end, const unsigned char *vis, buf *out);

/* The part function backend_by_shard hands ana_by_shard for analytic `kind` over entries
 * [first, end) of meta (its argument: b): the GPUs' where b's mode, a usable GPU and, in auto
 * mode, backend_cli_gpu_wins give them the scope; NULL for the CPU alone. */
ana_part_fn backend_part_fn(backend *b, int kind, const arc *meta, uint32_t first, uint32_t end);

/* The GPUs b uses (backend_pick_devices of the visible ones); 0 without a usable GPU. The
 * first call starts CUDA. */
int backend_gpu_devices(backend *b);

/* The devices a backend with gpu_share and gpu_shares (backend_opts) uses of n visible ones
 * (at most BACKEND_MAX_GPUS counted): their numbers into dev, in order; their count. */
int backend_pick_devices(int n, int share, int shares, int *dev);

/* backend_by_shard with the output handed to sink as the merge makes it (ana_by_shard_to). */
int backend_by_shard_to(backend *b, ana_ctx *c, int kind, const arc *meta, uint32_t first,
                        uint32_t end, const unsigned char *vis, ana_sink sink, void *sctx);

/* 1 when archive a (opened, loaded or not) is estimated to fit on the GPU whole, uploaded,
 * indexed and analysed: within b's gpu_mem, or half of the device's free memory; 0 when not,
 * or without a usable GPU. The estimate comes from the shard table, a rough upper bound: 64
 * bytes per root symbol and per rule symbol (three per rule taken), twice the dictionary's
 * bytes and 128 bytes per entry. A whole archive on one GPU beats the same analytic shard
 * by shard (bench/results/anashards.md), so callers upload it whole when it fits. */
int backend_gpu_fits(backend *b, const arc *a);

/* The token of a whole word as idx_count looks it up (n in 1..TOK_CAP-1, word bytes only, in
 * the dictionary), for gpu_count and gpu_search; else GPU_NO_WORD. The first call on an
 * archive builds the dictionary's lookup table, so make it once before calling from several
 * threads. */
uint32_t backend_word_token(const arc *a, const char *word, size_t n);

#ifdef TDC_HAVE_CUDA
/* gpu_upload of archive a: its grammar, dictionary and file table as the kernels' plain view
 * (gpu_src). `a` must outlive the handle. */
int backend_gpu_upload(const arc *a, gpu_gram **out);
#endif

/* The settings gpu_analytic gets from options o for a scope starting at entry `first` of `a`. */
void backend_gpu_args(const backend_opts *o, const arc *a, uint32_t first, gpu_ana_args *out);

/* Drop b's GPU copies of archive `a` (every generation). Call before arc_free(a); waits for a
 * request using it to finish. NULL b: nothing to drop. */
void backend_release(backend *b, const arc *a);

/* One line, no newline: "gpu: 3 requests 1234 bytes; cpu: 10 requests 5678 bytes" (analytics
 * served by each backend since b was made and the output bytes they produced; an analytic
 * shard by shard is one request, the GPU's when its parts went to the GPUs), the read
 * batcher's counters and auto's read costs (readcost.h), "; shard parts by gpu: D: N, ..."
 * (the parts each device computed), plus "; gpu fallbacks: N (the last: WHY)" when GPU
 * attempts failed and the CPU served them, WHY the last one's error. Returns what snprintf
 * returns. */
int backend_stats(backend *b, char *out, size_t n);

/* ---- File reads for the daemon: a batcher that sends reads to the GPU ---- */

/* How the CPU serves one read: `n` bytes of entry `ent` from `off` into dst; returns n or a
 * negative error (as vol's archived-bytes reader). */
typedef ssize_t (*backend_cpu_read)(void *arg, uint32_t ent, uint64_t off, void *dst, size_t n);

/* One read of archived bytes: `n` bytes of regular entry `ent` of archive (a, gen) from `off`,
 * all inside the file, into dst. A NULL b, mode off, reads not on (backend_opts.reads), gen 0
 * (an archive not kept), no usable GPU, or in auto mode a read of fewer than read_min bytes,
 * or one the GPU is not expected to finish before the CPU would (readcost_to_gpu, with what is
 * queued and running): cpu(arg, ...) serves it in the calling thread, so the CPU and the GPU
 * work at once. Otherwise the read joins the queue of b's batcher thread, which sends what is
 * queued to the GPU as one gpu_extract (a batch closes when it holds BACKEND_READ_FULL bytes,
 * or read_wait_us after its first read, or at once with 0; reads arriving while a batch runs
 * form the next), and the caller copies its bytes out when the batch is done. A batch the GPU
 * does not take (an analytic holds it, in auto mode) or fails on (counted as a fallback) is
 * served by cpu() in each caller's thread. Returns n or cpu()'s error. `a` must stay valid
 * until the call returns (the daemon holds its model lock for reading). */
ssize_t backend_read(backend *b, const arc *a, uint64_t gen, uint32_t ent, uint64_t off,
                     void *dst, size_t n, backend_cpu_read cpu, void *arg);

/* Whether backend_read may queue a read of n bytes for the GPU (and its caller then wait for a
 * batch): 0 for a NULL b, mode off, reads not on, no usable GPU, and in auto mode a read of
 * fewer than read_min bytes, which the calling thread serves at once. Thread-safe. */
int backend_read_may_queue(const backend *b, size_t n);

/* Upload and index archive (a, gen) on the GPU now, in the calling thread, so the first reads
 * and analytics need not wait for it: when b is not NULL, its mode is not off and a GPU is
 * usable. */
void backend_prepare(backend *b, const arc *a, uint64_t gen);

/* ---- Batched insert/append offsets, the CPU side of gpu_edit_offsets (gpu_api.h has
 * the definitions: modes, tdc_edit, at/pos/final_size). Sequence: every file is a treap of
 * pieces that each insert splits, O(n log n); batch: a sort by (file, offset) and a Fenwick
 * tree over it, O(n log n). Same results and errors as the GPU. ---- */
int backend_edit_offsets(int mode, const uint64_t *size, uint32_t nfiles, const tdc_edit *ops,
                         size_t n, uint64_t *at, uint64_t *pos, uint64_t *final_size, size_t *bad);

/* backend_edit_offsets on the GPU (gpu_edit_offsets) when b (NULL: the CPU) has mode on, or auto and the
 * batch has at least BACKEND_EDIT_AUTO_MIN operations, and a GPU is usable; else, or when the
 * GPU fails (counted as a fallback), on the CPU. Same results and errors either way; *on_gpu
 * says which computed them. */
int backend_edits(backend *b, int mode, const uint64_t *size, uint32_t nfiles,
                  const tdc_edit *ops, size_t n,
                  uint64_t *at, uint64_t *pos, uint64_t *final_size, size_t *bad, int *on_gpu);

/* The GPU computes a batch of offsets far faster than a CPU core (bench/results/gpu.md), but a
 * tadoc process first pays for starting CUDA, which costs more than the CPU's whole batch
 * unless the batch is very large: an estimate, not measured as a crossover. */
#define BACKEND_EDIT_AUTO_MIN ((size_t)2000000)

/* Apply the batch to small texts byte by byte, the reference for both: text[f] holds file f
 * and becomes its final text; optext[i] holds op i's bytes (ops[i].len of them). Sequence: in
 * batch order; batch: as `tadoc apply --offsets=batch` does (inserts from the highest offset
 * down, equal offsets in batch order, then appends in order). With owner (one vec32 per file),
 * owner[f] becomes the op index of every final byte, UINT32_MAX for original bytes. -EINVAL for
 * an insert past the end (*bad = its index), -ENOMEM. */
int backend_edit_apply(int mode, uint32_t nfiles, buf *text, vec32 *owner, const tdc_edit *ops,
                       size_t n, const unsigned char *const *optext, size_t *bad);

#endif
