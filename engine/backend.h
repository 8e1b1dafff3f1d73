/* backend: which compute backend serves heavy operations (CPU always; CUDA when built with
 * nvcc and a usable GPU is present). Later operations dispatch through here. */
#ifndef TDC_BACKEND_H
#define TDC_BACKEND_H

#include <stdint.h>

#include "arc.h"
#include "buf.h"

typedef struct gpu_gram gpu_gram; /* an archive resident on the GPU (kernels/gpu.h) */

/* 1 if a CUDA device is usable in this process, else 0. Probes once; thread-safe. */
int backend_gpu_available(void);

/* A one-line description such as "cpu backend; no CUDA support compiled in" or
 * "cpu backend; gpu backend on NVIDIA H100 80GB HBM3 (sm_90)". Static storage. */
const char *backend_describe(void);

/* ana_wordcount over entries [first, end), on the GPU when `g` (gpu_upload + gpu_index_build
 * of the same archive) is given and the scope has no word longer than TOK_CAP, else on the
 * CPU; the output is the same either way. Other GPU failures are returned, not hidden. */
int backend_wordcount(const arc *a, gpu_gram *g, uint32_t first, uint32_t end, buf *out);

#endif
