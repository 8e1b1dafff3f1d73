/* readcost: the cost model auto mode's reads are sent by (readcost.h). */
#include "readcost.h"

/* Priors: on one H100 and one H200, one read on a CPU core took about 1.5-2 ns a byte for
 * reads of 128 KiB and more; a batch on the GPU about 75 us plus 0.3 ns a byte. */
#define PRIOR_CPU_NS_B 1.8
#define PRIOR_FIXED_NS 75e3
#define PRIOR_GPU_NS_B 0.3
/* The GPU's line is a weighted least-squares fit. A batch's time varies by a share of itself,
 * so each batch weighs 1/time^2 (relative errors; in units of REF_NS so the sums stay near 1),
 * else the large batches' spread would swamp the fixed cost the small ones show. Two prior
 * points of weight PRIOR_W stay in the sums for good, so the line stays defined when every
 * batch has the same size (it then takes the priors' slope through what it saw); each new
 * batch weighs 1 (times its 1/time^2), the older ones DECAY times less each time. PRIOR_W is
 * tiny: with relative weights, a prior point far below the batches' times counts as many
 * batches, and at 0.5 the priors held the line of a GPU 60 times slower a byte than they say
 * (large batches one in eight; test_readcost) at 0.2 ns a byte against 20. */
#define REF_NS 1e5
#define PRIOR_W 1e-6
#define DECAY 0.95
/* The CPU's cost per byte is its reads' time over their bytes, each sum decaying by CPU_DECAY
 * a read: a mean of each read's own ns per byte would count a 64 KiB read that descended a
 * deep grammar (or decoded a shard) as much as a 1 MiB one, and on a real tree of small
 * files it said several times what the reads took in all (bench/results/gpu.md). The prior
 * starts the sums as PRIOR_CPU_B bytes read at its cost, soon outweighed. */
#define CPU_DECAY (15.0 / 16)
#define PRIOR_CPU_B (256.0 * 1024)

static void add(double *s, double w, double x, double y)
{
    s[0] += w;
    s[1] += w * x;
    s[2] += w * y;
    s[3] += w * x * x;
    s[4] += w * x * y;
}

static void fit(readcost *c)
{
    double s[5];
    for (int i = 0; i < 5; i++)
        s[i] = c->sum[i];
    for (double x = 64 << 10; x <= 16 << 20; x *= 256) {
        double y = PRIOR_FIXED_NS + PRIOR_GPU_NS_B * x;
        add(s, PRIOR_W * (REF_NS / y) * (REF_NS / y), x, y);
    }
    double det = s[0] * s[3] - s[1] * s[1], b = (s[0] * s[4] - s[1] * s[2]) / det;
    if (b < 0) b = 0; /* noise among batches of near one size */
    double a = (s[2] - b * s[1]) / s[0];
    c->gpu_ns_b = b;
    c->gpu_fixed_ns = a < 0 ? 0 : a;
}

void readcost_init(readcost *c)
{
    *c = (readcost){.cpu_ns_b = PRIOR_CPU_NS_B,
                    .cpu_ns = PRIOR_CPU_NS_B * PRIOR_CPU_B,
                    .cpu_b = PRIOR_CPU_B};
    fit(c);
}

void readcost_cpu(readcost *c, size_t bytes, double ns)
{
    if (!bytes) return;
    c->cpu_ns = c->cpu_ns * CPU_DECAY + ns;
    c->cpu_b = c->cpu_b * CPU_DECAY + (double)bytes;
    c->cpu_ns_b = c->cpu_ns / c->cpu_b;
}

void readcost_gpu(readcost *c, size_t bytes, double ns)
{
    if (ns <= 0) return;
    for (int i = 0; i < 5; i++)
        c->sum[i] *= DECAY;
    add(c->sum, (REF_NS / ns) * (REF_NS / ns), (double)bytes, ns);
    fit(c);
}

double readcost_batch_ns(const readcost *c, size_t bytes)
{
    return c->gpu_fixed_ns + c->gpu_ns_b * (double)bytes;
}

int readcost_to_gpu(readcost *c, size_t n, size_t queued, double left_ns)
{
    int idle = left_ns <= 0 && !queued;
    if (left_ns < 0) left_ns = 0;
    int gpu = left_ns + readcost_batch_ns(c, queued + n) <= c->cpu_ns_b * (double)n;
    if (gpu && ++c->since_cpu >= READCOST_PROBE)
        gpu = 0;
    else if (!gpu && ++c->since_gpu >= READCOST_PROBE && idle)
        gpu = 1;
    if (gpu)
        c->since_gpu = 0;
    else
        c->since_cpu = 0;
    return gpu;
}
