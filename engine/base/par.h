/* par: one function run on several threads at once, the calling thread being one of them. */
#ifndef TDC_PAR_H
#define TDC_PAR_H

#include <pthread.h>
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

/* Items 0..n made out of order by several threads and handed on in their order (to a file
 * written as they come): the thread that finishes an item marks it (par_order_done) and,
 * unless another thread is handing on already, hands on every finished item from the first
 * not handed on (`next`), one after another, without the caller's lock while it does; the
 * threads start no item `window` or more past `next` (par_order_room), so that no more than
 * the window waits for its turn. */
typedef struct par_order {
    unsigned char *done; /* per item: finished */
    size_t n, next, window;
    int busy; /* a thread is handing on */
    /* Optional (NULL: every item weighs 1): cum[i] = the weights of items 0..i-1, n + 1 of
     * them, set by the caller; the window then bounds the weight from `next` on, so that
     * items that hold nothing while they wait (weight 0) never hold the others back. */
    const uint64_t *cum;
} par_order;

/* 0 or -ENOMEM. */
int par_order_init(par_order *q, size_t n, size_t window);
void par_order_free(par_order *q);

/* Whether item i may be started now: what lies from `next` up to it weighs less than the
 * window. */
static inline int par_order_room(const par_order *q, size_t i)
{
    return q->cum ? q->cum[i] - q->cum[q->next] < q->window : i < q->next + q->window;
}

/* Item i finished; called with `lock` held, returns with it held. Hands on (put(ctx, item),
 * called without the lock) each finished item from `next` on while *stop stays 0, waking
 * every waiter on `cv` after each; returns put's failure (not 0), with `next` past the item
 * that failed, for the caller to record in *stop before it lets go of the lock; 0 otherwise
 * (also when another thread is handing on: that one takes item i in its turn). */
int par_order_done(par_order *q, size_t i, pthread_mutex_t *lock, pthread_cond_t *cv,
                   const int *stop, int (*put)(void *ctx, size_t i), void *ctx);

#endif
