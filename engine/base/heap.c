#include "heap.h"

#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void heap_huge(size_t bytes)
{
    const uintptr_t huge = (uintptr_t)2 << 20;
    /* The allocator grows the heap by this much beyond each request, and keeps as much when
     * it gives memory back: the heap then grows once, into the range advised below. */
    if (mallopt(M_TOP_PAD, (int)bytes) != 1) return;
    /* Setting an option stops glibc from raising the mmap threshold as large blocks are
     * freed; set it where that would end (its maximum), so that large blocks freed are
     * reused rather than mapped and faulted in again at each use. */
    mallopt(M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD);
    /* A block larger than the free top of the heap (keepcost) and under the mmap threshold:
     * the heap grows by it and the pad. One that fit the top would not grow it (the heap
     * of a process that allocated a little first, or of a child after fork). */
    size_t n = mallinfo2().keepcost + (64 << 10);
    void *p = n < HEAP_MMAP_THRESHOLD ? malloc(n) : NULL;
    if (!p) return;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    free(p); /* the heap keeps the pad */
    uintptr_t hi = (uintptr_t)sbrk(0) & ~(huge - 1);
    /* A range that is not heap (sbrk failed, or the heap is elsewhere) fails the call. */
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}
