/* mbud: one memory budget shared by the parts of a process that load on demand (the daemon's
 * spans for reads, and its analytics shard by shard). Each part takes an estimate of what it
 * will hold before it loads, corrects it once the true size is known, and gives it back when
 * it frees what it loaded, so that the sum stays within the budget whatever the mix of work.
 *
 * A taker that may wait is served in arrival order, once its bytes fit or once nothing at all
 * is taken (a part larger than the whole budget still runs, alone). A taker that must not wait
 * (it holds something a waiter may need, or a lock a writer waits on) is granted at once, over
 * the budget if need be. Before waiting, and when over the budget, the budget asks its
 * reclaimer to drop what no one uses (a cache's unused entries), which gives bytes back. */
#ifndef TDC_MBUD_H
#define TDC_MBUD_H

#include <stdint.h>

typedef struct mbud mbud;

/* Drop what no one uses, up to `bytes` of it or more, each dropped part giving its bytes back
 * (mbud_give) before it returns. Called without the budget's lock, from any taker's thread. */
typedef void (*mbud_reclaim_fn)(void *arg, uint64_t bytes);

/* A budget of `limit` bytes (nonzero), or NULL when out of memory. */
mbud *mbud_new(uint64_t limit);
void mbud_free(mbud *b); /* NULL is allowed */

/* The reclaimer (one; set before the budget is shared). */
void mbud_set_reclaim(mbud *b, mbud_reclaim_fn fn, void *arg);

/* Take `bytes`: with `wait`, once they fit (after earlier waiters) or nothing is taken; else at
 * once. */
void mbud_take(mbud *b, uint64_t bytes, int wait);

/* Take `bytes` only if they fit now, after the reclaimer had its chance, and no one waits
 * (work that can be skipped, such as reading ahead): 1 if taken, else 0. */
int mbud_try(mbud *b, uint64_t bytes);

/* Give back `bytes` taken earlier; waiters whose bytes now fit go on. */
void mbud_give(mbud *b, uint64_t bytes);

/* Something became reclaimable (a cached part no one uses now): waiters look again. Takes no
 * lock while no one waits, so that callers on a hot path pay an atomic load. */
void mbud_wake(mbud *b);

/* Correct a taking of `was` bytes to `now` (never waits; asks the reclaimer for the excess
 * when that puts the budget over). */
void mbud_resize(mbud *b, uint64_t was, uint64_t now);

typedef struct mbud_stats {
    uint64_t limit, used, peak; /* bytes: the budget, taken now, the most ever taken */
    uint64_t waits;             /* takings that had to wait */
    uint64_t over;              /* takings granted over the budget (not waiting, or alone) */
    uint64_t waiting;           /* takers waiting now */
} mbud_stats;

void mbud_get_stats(mbud *b, mbud_stats *s);

#endif
