/* readcost: where auto mode sends a read of archived bytes, the GPU's batch queue or the
 * caller's own CPU, by which is expected to finish it first. Costs are measured as reads run,
 * so the choice follows the machine and the load (a busy CPU, a GPU shared with analytics)
 * rather than thresholds measured once on one host:
 *   - a read on a CPU thread costs cpu_ns_b per byte (the recent reads the CPU served, their
 *     time over their bytes, older ones weighing less; timed in the thread that served them,
 *     contention included);
 *   - a batch on the GPU costs gpu_fixed_ns + gpu_ns_b per byte (a least-squares line over the
 *     recent batches, their older ones weighing less, anchored to the priors so that batches
 *     of one size alone cannot make it degenerate), each batch timed from the arrival of its
 *     first read to the end of its last read's copy out, as its readers wait for it.
 * A read waits for the GPU when what is left of the running batch plus the next batch, with
 * it, is expected to take no longer than the read alone on the CPU. So that neither cost goes
 * stale while the other side takes every read, one read in READCOST_PROBE goes to the side
 * not chosen (to the GPU only when it is idle, so the probe waits for no queue). Not
 * thread-safe: the read batcher guards it with its queue's mutex. */
#ifndef TDC_READCOST_H
#define TDC_READCOST_H

#include <stddef.h>

#define READCOST_PROBE 64

typedef struct readcost {
    double cpu_ns_b;                   /* CPU: ns per byte of one read */
    double cpu_ns, cpu_b;              /* the CPU's reads: decayed sums of ns and bytes */
    double gpu_fixed_ns, gpu_ns_b;     /* GPU: one batch's fixed cost, ns per byte */
    double sum[5]; /* the batches' weighted sums of 1, x, y, xx, xy (x bytes, y ns) */
    unsigned since_cpu, since_gpu; /* choices since each side last got a read */
} readcost;

/* Priors from bench/results/gpu.md ("One read: CPU vs GPU"), replaced as reads are timed. */
void readcost_init(readcost *c);

/* A read of `bytes` served on a CPU thread in `ns`. */
void readcost_cpu(readcost *c, size_t bytes, double ns);

/* A batch of `bytes` served by the GPU in `ns` (from its first read's arrival to its readers'
 * copies done). */
void readcost_gpu(readcost *c, size_t bytes, double ns);

/* Expected ns for the GPU to serve a batch of `bytes`. */
double readcost_batch_ns(const readcost *c, size_t bytes);

/* Whether a read of n bytes should join the GPU's queue: `queued` bytes wait for the next
 * batch, and the running batch (if any) is expected to need `left_ns` more (0: none runs).
 * Counts the choice for the probes. */
int readcost_to_gpu(readcost *c, size_t n, size_t queued, double left_ns);

#endif
