#include "par.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "buf.h"

void par_run(unsigned n, void *(*fn)(void *), void *arg, size_t stride)
{
    pthread_t *th = n > 1 ? calloc(n, sizeof *th) : NULL;
    unsigned char *started = n > 1 ? calloc(n, 1) : NULL;
    for (unsigned t = 1; th && started && t < n; t++)
        started[t] = !pthread_create(&th[t], NULL, fn, (char *)arg + t * stride);
    fn(arg);
    for (unsigned t = 1; t < n; t++) {
        if (started && started[t])
            pthread_join(th[t], NULL);
        else
            fn((char *)arg + t * stride);
    }
    free(th);
    free(started);
}

static int by_size_desc(const void *x, const void *y, void *ctx)
{
    const uint64_t *size = ctx;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    if (size[a] != size[b]) return size[a] > size[b] ? -1 : 1;
    return (a > b) - (a < b);
}

int par_deal(uint32_t *ids, size_t n, const uint64_t *size, int parts, int *owner)
{
    uint64_t *load = calloc((size_t)(parts > 0 ? parts : 1), sizeof *load);
    if (!load) return -ENOMEM;
    sort_r(ids, n, sizeof *ids, by_size_desc, (void *)size);
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        for (int r = 1; r < parts; r++)
            if (load[r] < load[best]) best = r;
        owner[ids[i]] = best;
        load[best] += size[ids[i]];
    }
    free(load);
    return 0;
}

int par_order_init(par_order *q, size_t n, size_t window)
{
    *q = (par_order){.n = n, .window = window ? window : 1};
    return (q->done = calloc(n ? n : 1, 1)) ? 0 : -ENOMEM;
}

void par_order_free(par_order *q)
{
    free(q->done);
    q->done = NULL;
}

int par_order_done(par_order *q, size_t i, pthread_mutex_t *lock, pthread_cond_t *cv,
                   const int *stop, int (*put)(void *ctx, size_t i), void *ctx)
{
    q->done[i] = 1;
    if (q->busy) return 0;
    q->busy = 1;
    int rc = 0;
    while (!rc && !*stop && q->next < q->n && q->done[q->next]) {
        size_t k = q->next;
        pthread_mutex_unlock(lock);
        rc = put(ctx, k);
        pthread_mutex_lock(lock);
        q->next++;
        pthread_cond_broadcast(cv);
    }
    q->busy = 0;
    return rc;
}
