/* backend_int: the backend context that backend.c (analytics, resident archives) and
 * backend_read.c (the read batcher) share. Not for use outside engine/backend/. */
#ifndef TDC_BACKEND_INT_H
#define TDC_BACKEND_INT_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "backend.h"
#include "readcost.h"

/* A read queued for the batcher; it lives on its caller's stack until the caller sees its
 * state change. */
typedef struct backend_rreq {
    uint32_t ent;
    uint64_t off;
    size_t n;
    int state;                /* RQ_* of backend_read.c, under the queue's mu */
    const unsigned char *src; /* served by the GPU: its bytes in pin */
    struct backend_rreq *next;
} backend_rreq;

/* The read batcher's queue and counters. */
typedef struct backend_reads {
    pthread_mutex_t mu;
    pthread_cond_t work; /* for the batcher: a read was queued, or stop */
    pthread_cond_t done; /* for callers: a batch ended; for the batcher: copies ended */
    backend_rreq *head, **tail;
    size_t bytes; /* queued */
    const arc *a; /* archive of the queued reads */
    uint64_t gen;
    struct timespec first;   /* when the oldest queued read arrived */
    int started, stop, busy; /* busy: a batch is on the GPU */
    pthread_t th;
    unsigned char *pin; /* pinned: the last batch's bytes */
    size_t copying;     /* callers still copying out of pin */
    gpu_req *req;
    uint32_t *got;
    size_t cap; /* of req and got */
    uint64_t req_n[2], req_bytes[2], batches; /* [0] gpu, [1] cpu */
    uint32_t active, most, largest;           /* reads at once now, at most; largest batch */
    uint64_t e2e_ns[2], e2e_bytes[2]; /* auto's reads either side could serve, timed whole in
                                       * the reading thread (queue and copy included) */
    readcost cost;                /* auto's choice of GPU or CPU per read */
    double run_start;             /* when the running batch began (CLOCK_MONOTONIC, ns) */
    size_t run_bytes;             /* its bytes */
    double turn_from;             /* the last batch: when it could start (its first read's
                                   * arrival at an idle batcher, else its start), ns;
                                   * -1 for a batch not timed (warming up) */
    size_t turn_bytes;            /* its bytes */
} backend_reads;

struct backend {
    backend_opts o; /* o.mode changes only through backend_set_mode (atomically) */
    ana_ctx *ana;
    uint64_t req[2], bytes[2]; /* analytics: [0] gpu, [1] cpu */
    uint64_t fallbacks;        /* GPU attempts the CPU served instead (analytics, reads) */
    pthread_mutex_t why_lock;  /* guards why */
    char why[160];             /* the last fallback's error */
    pthread_mutex_t gpu_lock;  /* serializes b's uses of the GPU; guards `res` and `tick` */
    struct {
        const arc *a;
        uint64_t gen, used;
        gpu_gram *g;
    } res[BACKEND_GPU_CACHE]; /* resident archives */
    uint64_t tick;
    backend_reads rd;
    /* backend_by_shard's parts on the GPUs: one part at a time on each device */
    int ndev;      /* devices it uses, counted on first use (0 before; -1: none) */
    int dev[BACKEND_MAX_GPUS]; /* their numbers (o.gpu_shares picks them) */
    unsigned next; /* where the next part starts looking for a free device */
    pthread_mutex_t dev_lock[BACKEND_MAX_GPUS];
    uint64_t dev_parts[BACKEND_MAX_GPUS]; /* parts each device served */
};

/* A GPU attempt failed and the CPU serves it instead: count it, and keep the calling thread's
 * error message (tdc_errmsg) for backend_stats. */
void backend_fallback(backend *b);

/* b's mode now. */
int backend_mode(const backend *b);

/* Set up and tear down b->rd (backend_new, backend_free: the batcher thread stopped). */
void backend_reads_init(backend_reads *r);
void backend_reads_free(backend_reads *r);

/* The read batcher's counters, "reads gpu: ...; reads cpu: ..." (backend_stats). */
void backend_read_stats(backend *b, char *out, size_t n);

#ifdef TDC_HAVE_CUDA
/* The resident copy of archive (a, gen) (uploaded and indexed), uploading it on a miss when
 * `upload`; NULL when absent or the upload failed. b->gpu_lock held. */
gpu_gram *backend_resident(backend *b, const arc *a, uint64_t gen, int upload);

/* Forget and free resident copy g (after a failure left it unusable). b->gpu_lock held. */
void backend_drop(backend *b, const gpu_gram *g);
#endif

#endif
