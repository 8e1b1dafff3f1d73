/* pick: what the latency benchmarks share: a clock, a xorshift generator, and random bytes of
 * an archive's regular files (every byte equally likely, so files weighted by size), and the
 * order to sort latencies. */
#ifndef TDC_BENCH_PICK_H
#define TDC_BENCH_PICK_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "../engine/format/arc.h"

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* qsort order of doubles, ascending (latencies). */
static inline int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* cum[i] = bytes of the regular files before entry i, cum[nents] = *total (malloc'ed). */
static inline uint64_t *pick_table(const arc *a, uint64_t *total)
{
    uint64_t *cum = malloc(((size_t)a->nents + 1) * sizeof *cum), t = 0;
    for (uint32_t i = 0; cum && i < a->nents; i++) {
        cum[i] = t;
        if (a->ents[i].type == ARC_REG) t += a->ents[i].size;
    }
    if (cum) cum[a->nents] = t;
    *total = t;
    return cum;
}

/* A random byte of the regular files (total > 0): its entry, and its offset there in *off. */
static inline uint32_t pick(const arc *a, const uint64_t *cum, uint64_t total, uint64_t *seed,
                            uint64_t *off)
{
    uint64_t g = rnd(seed) % total;
    uint32_t lo = 0, hi = a->nents; /* entry whose byte range holds g */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (cum[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    while (a->ents[lo].type != ARC_REG || a->ents[lo].size == 0)
        lo++;
    *off = g - cum[lo];
    return lo;
}

#endif
