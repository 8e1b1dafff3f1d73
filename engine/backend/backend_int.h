/* backend_int: what backend.c (analytics, resident archives) and backend_read.c (the read
 * batcher) share. Not for use outside engine/backend*.c. */
#ifndef TDC_BACKEND_INT_H
#define TDC_BACKEND_INT_H

#include <pthread.h>
#include <stdint.h>

#include "backend.h"

/* GPU attempts that failed and were served by the CPU instead (analytics and read batches). */
extern uint64_t backend_fallbacks;

/* The read batcher's counters, "reads gpu: ...; reads cpu: ..." (backend_stats). */
void backend_read_stats(char *out, size_t n);

/* Stop the batcher thread and free its buffers (backend_release(NULL)). */
void backend_read_stop(void);

#ifdef TDC_HAVE_CUDA
/* Serializes every use of the GPU and guards the resident archives. */
extern pthread_mutex_t backend_gpu_lock;

/* The resident copy of archive (a, gen) (uploaded and indexed), uploading it on a miss when
 * `upload`; NULL when absent or the upload failed. backend_gpu_lock held. */
gpu_gram *backend_resident(const arc *a, uint64_t gen, int upload);

/* Forget and free resident copy g (after a failure left it unusable). backend_gpu_lock held. */
void backend_drop(const gpu_gram *g);
#endif

#endif
