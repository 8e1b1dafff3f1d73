/* gpu: the CUDA backend's C interface. Only kernels/ includes CUDA headers; everything here
 * is plain C callable from the engine.
 *
 * A gpu_gram holds one archive's grammar, dictionary and file table in device memory
 * (cudaMalloc, uploaded once) plus the index the kernels build there. Every call returns 0 (or
 * a count) or a negative errno-style code with a message for tdc_errmsg(); CUDA failures are
 * -EIO (-ENOMEM when the device is out of memory), never an abort. One thread at a time per
 * handle; separate handles may be used concurrently. */
#ifndef TDC_GPU_H
#define TDC_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct arc;
typedef struct gpu_gram gpu_gram;

/* Find a usable CUDA device. Returns 0 and writes "NAME (sm_XY)" into name, or a negative
 * value and writes the CUDA error text into name. Never aborts. */
int gpu_probe(char *name, size_t n);

/* Upload archive `a` (one that idx_build accepted, so every expansion fits in 62 bits). `a`
 * must outlive the handle. */
int gpu_upload(const struct arc *a, gpu_gram **out);
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

/* Batched extract: request i reads what idx_extract(ent, off, len) reads (clamped at EOF,
 * nothing past it); got[i] gets its byte count and its bytes go to out right after those of
 * requests 0..i-1. `cap` bytes must hold them all. Returns the total, or -EINVAL for an entry
 * that is not a regular file or a too small `cap`. */
int64_t gpu_extract(gpu_gram *g, const gpu_req *req, size_t n, void *out, size_t cap,
                    uint32_t *got);

/* Milliseconds the device spent between the first and the last kernel of the last call. */
double gpu_kernel_ms(const gpu_gram *g);

#ifdef __cplusplus
}
#endif

#endif
