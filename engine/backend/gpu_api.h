/* gpu_api: the interface between the engine and the CUDA backend, owned by the engine and
 * implemented by kernels/ (the engine's backend*.c call it; kernels/ include this header and
 * none of the CPU analytics). Only kernels/ includes CUDA headers; everything here is plain C
 * callable from the engine.
 *
 * A gpu_gram holds one archive's grammar, dictionary and file table in device memory
 * (cudaMalloc, uploaded once) plus the index the kernels build there. Every call returns 0 (or
 * a count) or a negative errno-style code with a message for tdc_errmsg(); CUDA failures are
 * -EIO (-ENOMEM when the device is out of memory), never an abort. One thread at a time per
 * handle; separate handles may be used concurrently. */
#ifndef TDC_GPU_API_H
#define TDC_GPU_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpu_gram gpu_gram;

/* Find a usable CUDA device. Returns 0 and writes "NAME (sm_XY)" into name, or a negative
 * value and writes the CUDA error text into name. Never aborts. */
int gpu_probe(char *name, size_t n);

/* The CUDA devices this process may use (CUDA_VISIBLE_DEVICES chooses them), 0 without one. */
int gpu_device_count(void);

/* Make device `dev` (0 .. gpu_device_count() - 1) the calling thread's, *prev (optional)
 * receiving the one it had: the handles it uploads afterwards live there, and every call on
 * such a handle is made while it is the thread's device (threads start on device 0); give
 * the thread its device back after. 0, or -EIO with a message. */
int gpu_use_device(int dev, int *prev);

/* Free and total bytes of the calling thread's device. 0, or -EIO with a message. */
int gpu_mem_info(uint64_t *free_bytes, uint64_t *total_bytes);

/* One file-table entry as the kernels see it. */
typedef struct gpu_ent {
    const char *path;    /* the archive path (output escapes it) */
    uint64_t size;       /* a regular file's bytes */
    uint64_t root_start; /* its run of root symbols: [root_start, root_start + root_len) */
    uint64_t root_len;
    uint32_t content; /* the entry whose root run holds its bytes: itself when it has a run,
                         else its inode's first entry (a hard link); UINT32_MAX: none */
    uint32_t reg;     /* 1 for a regular file */
} gpu_ent;

/* An archive as the kernels see it: plain arrays the engine fills from its grammar, dictionary
 * and file table (backend_gpu_upload), so kernels/ need none of the engine's types. */
typedef struct gpu_src {
    uint32_t ntokens, nrules, nents;
    const uint32_t *root; /* the root sequence, nroot symbols */
    uint64_t nroot;
    const uint32_t *syms; /* every rule body, back to back, nsyms symbols */
    uint64_t nsyms;
    const uint64_t *rule_start;     /* nrules + 1 offsets into syms */
    const uint64_t *tok_off;        /* ntokens + 1 offsets into tok_bytes */
    const unsigned char *tok_bytes; /* every token's bytes */
    const unsigned char *tok_word;  /* per token: 1 for a word token, 0 for a separator */
    const gpu_ent *ents;            /* nents entries, in path order */
} gpu_src;

/* Upload archive s (one that idx_build accepted, so every expansion fits in 62 bits): the
 * handle copies s and its entries; the other arrays and the paths must outlive it. */
int gpu_upload(const gpu_src *s, gpu_gram **out);
void gpu_free(gpu_gram *g);

/* Build the device index, level by level: each rule's level (1 + its highest child's; rules of
 * tokens only are level 1), expanded length and "holds a cut long word" flag, then the prefix
 * byte offsets of every root and rule symbol. Needed by every call below. */
int gpu_index_build(gpu_gram *g);

/* Copy back the expanded length of rules 0..nrules (0 = the root) and the depth (as idx_depth). */
int gpu_rule_lens(gpu_gram *g, uint64_t *len, uint32_t *depth);

/* Occurrences of every word token in the regular files of entries [first, end), by top-down
 * weight propagation; cnt has one slot per token (separators get 0). -ENOTSUP when a file in
 * scope holds a word longer than TOK_CAP: ana_wordcount joins its pieces on the CPU. */
int gpu_wordcount(gpu_gram *g, uint32_t first, uint32_t end, uint64_t *cnt);

typedef struct gpu_req {
    uint32_t ent; /* a regular file's entry */
    uint32_t len;
    uint64_t off;
} gpu_req;

/* Page-locked host memory (cudaHostAlloc), which device copies fill at full speed, for
 * gpu_extract's `out`; NULL when it cannot be had. Free with gpu_host_free (NULL is a no-op). */
void *gpu_host_alloc(size_t n);
void gpu_host_free(void *p);

/* Batched extract: request i reads what idx_extract(ent, off, len) reads (clamped at EOF,
 * nothing past it); got[i] gets its byte count and its bytes go to out right after those of
 * requests 0..i-1. `cap` bytes must hold them all. Returns the total, or -EINVAL for an entry
 * that is not a regular file or a too small `cap`. */
int64_t gpu_extract(gpu_gram *g, const gpu_req *req, size_t n, void *out, size_t cap,
                    uint32_t *got);

/* Word queries (TPDS'23 IV-D count and search), on a word index that gpu_words_build makes
 * on the device from the grammar: word2rule (every occurrence of every symbol in a rule body,
 * grouped by symbol, with its owner rule: the reverse edges of the DAG), the root positions of
 * every symbol (sorted, so a file's are one binary search away), and rule2file (a hash table of
 * (file, rule) -> occurrences of the rule in the file's expansion, built top-down level by
 * level). count(f, w) = w's root occurrences in f plus, over every occurrence of w in a rule
 * body, rule2file(f, owner); search walks up from w through parents that occur in f (rule2file
 * again), which gives each occurrence once, then sorts each query's offsets. Results equal
 * idx_count / idx_search. Built on first use by gpu_count / gpu_search (or ahead of time). */
int gpu_words_build(gpu_gram *g);

/* Bytes of device memory the word index holds, and its (file, rule) pairs (0 before build). */
uint64_t gpu_words_mem(const gpu_gram *g, uint64_t *pairs);

#define GPU_NO_WORD UINT32_MAX /* a word the dictionary does not hold: 0 occurrences */

typedef struct gpu_query {
    uint32_t ent; /* a regular file's entry (a hard link is resolved to the one with content) */
    uint32_t tok; /* the word's token (backend_word_token), or GPU_NO_WORD */
} gpu_query;

/* counts[i] = occurrences of q[i].tok in q[i].ent, as idx_count. -EINVAL for an entry that is
 * not a regular file or a token out of range; -ENOTSUP for a grammar that holds a cut word
 * (a word token of TOK_CAP bytes), whose words idx_count answers from the files' text: the
 * last piece of a cut word is a token a short word's cannot be told from. */
int gpu_count(gpu_gram *g, const gpu_query *q, size_t n, uint64_t *counts);

/* Byte offsets of every occurrence, as idx_search: counts[i] as gpu_count, and *offs (malloc'ed,
 * the caller frees it; NULL when there is none) holds query 0's offsets ascending, then query
 * 1's, and so on. -ENOTSUP as gpu_count. */
int gpu_search(gpu_gram *g, const gpu_query *q, size_t n, uint64_t *counts, uint64_t **offs);

/* The analytics' ids, one for each backend and layer: engine/analytics/analytics.h has their table
 * (names, virtual files, CPU functions), indexed by id; `kind` here is the id. */
enum ana_id {
    ANA_WORDCOUNT,
    ANA_SORT,
    ANA_INVINDEX,
    ANA_TERMVECTOR,
    ANA_SEQCOUNT,
    ANA_RANKEDINVINDEX,
    ANA_NIDS
};

/* The caller's settings for one gpu_analytic (backend.h: backend_gpu_args fills them from the
 * analytics' settings and the scope). */
typedef struct gpu_ana_args {
    int traversal; /* as engine/analytics/ana.h's: 0 auto (top-down on the device), 1 top-down forced,
                      2 bottom-up forced (the per-file analytics) */
    int verbose;   /* print the traversal and the CPU cost model's two estimates on stderr */
    int wide_seq;  /* take the wide sequence keys for any dictionary (to test that path on
                      small archives; they are needed from 2^21 words) */
    size_t prefix; /* bytes the output strips from archive paths: ana_scope_prefix of the
                      scope's first entry (the per-file analytics) */
    unsigned char *cut; /* NULL, or one byte per entry (zeroed by the caller): where the call
                           fails for words longer than TOK_CAP, set to 1 for the scope's files
                           that hold them */
} gpu_ana_args;

/* The six analytics of engine/analytics/ana.h on the device (G-TADOC IV-B..IV-D), over the regular files
 * of entries [first, end), appending to out exactly the text the ana_* function of the same
 * name prints. Top-down and level-synchronous: rule weights pushed from the highest level down
 * (wordcount, sort, seqcount); for the per-file analytics a hash table of (file, rule) ->
 * occurrences of the rule in the file, seeded from the files' root runs and pushed down one
 * level per launch (or, when the caller forces bottom-up (gpu_ana_args), per-rule tables
 * built children first, reduced per file from its root run's rules); head/tail buffers (each
 * rule's first and last two words, built children first) give the 3-word sequences that cross
 * symbol boundaries. Words are identified by their byte-order rank in the dictionary, so radix
 * sorts of packed keys give the output order, and the text is formatted on the device (a length
 * pass, a scan, a write pass) and copied back. -ENOTSUP (and nothing appended) when a file in scope
 * holds a word longer than TOK_CAP, or a count or key does not fit the packed keys: the CPU serves
 * those. The first call on a handle also ranks the dictionary's words (host sort) and builds the
 * head/tail buffers. */
struct buf;
/* `vis` is the visibility mask of engine/analytics/ana.h (NULL: every file; else one byte per entry of
 * the archive, the files whose byte is 0 left out), read on the host. */
int gpu_analytic(gpu_gram *g, int kind, uint32_t first, uint32_t end, const unsigned char *vis,
                 const gpu_ana_args *args, struct buf *out);

/* What the first gpu_analytic does once per handle (ranks, head/tail, paths); to time it or
 * to pay it ahead. */
int gpu_analytic_prepare(gpu_gram *g);

/* Milliseconds the device spent between the first and the last kernel of the last call. */
double gpu_kernel_ms(const gpu_gram *g);

/* Offsets of batched inserts and appends (TPDS'23 IV-D, the "double parsing" design), without
 * any archive: files are numbered 0..nfiles-1 with original sizes, and each operation inserts
 * `len` bytes into one of them at `off` (an insert) or at its end (an append; off ignored).
 *
 * TDC_OFFSETS_SEQUENCE: an insert's offset is in the text left by the earlier operations of the
 *   batch (they apply one after another, like tadoc apply --offsets=sequence).
 * TDC_OFFSETS_BATCH: an insert's offset is in the text before the batch; inserts at one offset
 *   keep their batch order and come before the appends (tadoc apply --offsets=batch).
 *
 * Outputs, per operation i: at[i], the offset at which to make the edit when the operations are
 * applied one after another in batch order (sequence: the offset itself, or the file's size
 * then for an append; batch: the offset translated so), and pos[i], where its first byte stands
 * in the final text; per file, its final size. A bad file number, or an insert past the end of
 * the text it refers to, fails with -EINVAL and *bad = the first such operation (a bad file or
 * kind before any insert past the end); the outputs are then undefined. The operations are
 * checked on the device, so the batch goes up as it is: from page-locked memory
 * (gpu_host_alloc) at full speed. */
enum { TDC_EDIT_INSERT = 0, TDC_EDIT_APPEND = 1 };
enum { TDC_OFFSETS_SEQUENCE = 0, TDC_OFFSETS_BATCH = 1 };

typedef struct tdc_edit {
    uint32_t file;
    uint32_t kind; /* TDC_EDIT_* */
    uint64_t off;  /* inserts only */
    uint64_t len;
} tdc_edit;

/* A device context for edit batches: a stream, timing events and reusable buffers. */
typedef struct gpu_edits gpu_edits;
int gpu_edits_new(gpu_edits **out);
void gpu_edits_free(gpu_edits *e);

/* The function above on the device: per file, each operation's thread looks at the others of
 * the same file (sequence: the later ones, each shifting it when it lands at or before it;
 * batch: inserts at lower offsets, or the same offset earlier in the batch). Same results as
 * backend_edit_offsets. */
int gpu_edit_offsets(gpu_edits *e, int mode, const uint64_t *size, uint32_t nfiles,
                     const tdc_edit *ops, size_t n, uint64_t *at, uint64_t *pos,
                     uint64_t *final_size, size_t *bad);
double gpu_edits_kernel_ms(const gpu_edits *e);

#ifdef __cplusplus
}
#endif

#endif
