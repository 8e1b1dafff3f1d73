/* par: one function run on several threads at once, the calling thread being one of them. */
#ifndef TDC_PAR_H
#define TDC_PAR_H

#include <stddef.h>
#include <stdint.h>

/* Run fn on n threads (the caller is thread 0, so n = 1 starts none): thread t gets
 * (char *)arg + t * stride, or with stride 0 every thread the same arg (workers that take
 * items from a queue they share). A thread that cannot start has its call made by the
 * caller after its own. Returns when every call has returned. */
void par_run(unsigned n, void *(*fn)(void *), void *arg, size_t stride);

/* Deal the items ids[0, n) among `parts` workers by size: the largest first (ties by id), each
 * to the worker with the fewest bytes so far; owner[id] = its worker (entries of owner for
 * other ids are left alone). ids is reordered. The same deal wherever it is made, so that
 * processes can each compute it. 0 or -ENOMEM. */
int par_deal(uint32_t *ids, size_t n, const uint64_t *size, int parts, int *owner);

#endif
