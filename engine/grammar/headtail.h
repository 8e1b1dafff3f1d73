/* headtail: a rule's head and tail (its first two and last two words), built from its symbols
 * in order. The CPU analytics (engine/analytics/ana_plan.c) and the GPU kernels (kernels/ana.cu) both
 * summarise every rule this way, so the two share these functions and agree by construction;
 * they compile for the device too under nvcc.
 *
 * A summary is uint32_t h[HT_N]: h[0], h[1] the first two words, h[2], h[3] the last two,
 * h[4] how many words were seen, counted up to 3 (with one word, h[2] is HT_NONE). Words are
 * whatever ids the caller uses (token ids on the CPU, word ranks on the GPU); HT_NONE is none.
 * Plain data and pure functions: no state, thread-safe. */
#ifndef TDC_HEADTAIL_H
#define TDC_HEADTAIL_H

#include <stdint.h>

#ifdef __CUDACC__
#define HT_FN static inline __host__ __device__
#else
#define HT_FN static inline
#endif

#define HT_N 5
#define HT_NONE UINT32_MAX

/* An empty summary. */
HT_FN void ht_init(uint32_t *h)
{
    h[0] = h[1] = h[2] = h[3] = HT_NONE;
    h[4] = 0;
}

/* Add one word after those seen. */
HT_FN void ht_push(uint32_t *h, uint32_t w)
{
    if (h[4] < 2) h[h[4]] = w;
    h[2] = h[3];
    h[3] = w;
    if (h[4] < 3) h[4]++;
}

/* Add a child rule's words (its summary c) after those seen. Past three words only the
 * child's head (while h's head is not full) and its tail matter. */
HT_FN void ht_add(uint32_t *h, const uint32_t *c)
{
    if (c[4] >= 3) {
        for (uint32_t j = 0; j < 2 && h[4] < 2; j++)
            h[h[4]++] = c[j];
        h[2] = c[2];
        h[3] = c[3];
        h[4] = 3;
        return;
    }
    for (uint32_t j = 0; j < c[4]; j++)
        ht_push(h, c[j]);
}

/* Close a summary after the last symbol: with one word there is no second-to-last. */
HT_FN void ht_finish(uint32_t *h)
{
    if (h[4] == 1) h[2] = HT_NONE;
}

#endif
