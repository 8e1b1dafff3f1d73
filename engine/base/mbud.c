/* mbud: a memory budget shared by on-demand loads (mbud.h). Waiters are served in arrival
 * order by tickets: a waiter goes on when its ticket is the next served and its bytes fit. */
#include "mbud.h"

#include <pthread.h>
#include <stdlib.h>

struct mbud {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t limit, used, peak, waits, over;
    uint64_t next_ticket, serving; /* waiters' order */
    uint32_t waiting;              /* takers in mbud_take's wait (atomic reads in mbud_wake) */
    uint64_t wakes;                /* mbud_wake calls that found a waiter */
    mbud_reclaim_fn reclaim;
    void *arg;
};

mbud *mbud_new(uint64_t limit)
{
    mbud *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    b->limit = limit;
    return b;
}

void mbud_free(mbud *b)
{
    if (!b) return;
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

void mbud_set_reclaim(mbud *b, mbud_reclaim_fn fn, void *arg)
{
    b->reclaim = fn;
    b->arg = arg;
}

/* What must be dropped for `bytes` more to fit, or 0. b->lock held. */
static uint64_t excess(const mbud *b, uint64_t bytes)
{
    return b->used + bytes > b->limit ? b->used + bytes - b->limit : 0;
}

static void grant(mbud *b, uint64_t bytes)
{
    if (excess(b, bytes)) b->over++;
    b->used += bytes;
    if (b->used > b->peak) b->peak = b->used;
}

/* Ask the reclaimer for `need` bytes, without the lock (it gives them back through it). */
static void reclaim(mbud *b, uint64_t need)
{
    if (!need || !b->reclaim) return;
    pthread_mutex_unlock(&b->lock);
    b->reclaim(b->arg, need);
    pthread_mutex_lock(&b->lock);
}

void mbud_take(mbud *b, uint64_t bytes, int wait)
{
    pthread_mutex_lock(&b->lock);
    reclaim(b, excess(b, bytes));
    if (!wait) {
        grant(b, bytes);
        pthread_mutex_unlock(&b->lock);
        return;
    }
    uint64_t ticket = b->next_ticket++;
    int waited = 0;
    /* Counted before the reclaimer looks: a part released after that look sees the waiter
     * in mbud_wake (both sequentially consistent). */
    __atomic_add_fetch(&b->waiting, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        if (ticket == b->serving) {
            /* A wake while the reclaimer ran (the lock is dropped meanwhile) would find no
             * one waiting: its count makes this look again instead. */
            uint64_t seen = b->wakes, need = excess(b, bytes);
            if (need) reclaim(b, need);
            if (!excess(b, bytes) || !b->used) break;
            if (b->wakes != seen) continue;
        }
        waited = 1;
        pthread_cond_wait(&b->cond, &b->lock);
    }
    __atomic_sub_fetch(&b->waiting, 1, __ATOMIC_SEQ_CST);
    b->serving++;
    b->waits += waited;
    grant(b, bytes);
    pthread_cond_broadcast(&b->cond); /* the next ticket may fit too */
    pthread_mutex_unlock(&b->lock);
}

int mbud_try(mbud *b, uint64_t bytes)
{
    pthread_mutex_lock(&b->lock);
    int ok = 0;
    if (b->serving == b->next_ticket) { /* no one waits, so none is passed */
        reclaim(b, excess(b, bytes));
        ok = !excess(b, bytes) && b->serving == b->next_ticket;
        if (ok) grant(b, bytes);
    }
    pthread_mutex_unlock(&b->lock);
    return ok;
}

void mbud_give(mbud *b, uint64_t bytes)
{
    pthread_mutex_lock(&b->lock);
    b->used = bytes < b->used ? b->used - bytes : 0;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

void mbud_wake(mbud *b)
{
    if (!__atomic_load_n(&b->waiting, __ATOMIC_SEQ_CST)) return;
    pthread_mutex_lock(&b->lock);
    b->wakes++;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

void mbud_resize(mbud *b, uint64_t was, uint64_t now)
{
    if (now > was) {
        pthread_mutex_lock(&b->lock);
        b->used += now - was;
        if (b->used > b->peak) b->peak = b->used;
        reclaim(b, excess(b, 0));
        pthread_mutex_unlock(&b->lock);
    } else if (now < was) {
        mbud_give(b, was - now);
    }
}

void mbud_get_stats(mbud *b, mbud_stats *s)
{
    pthread_mutex_lock(&b->lock);
    *s = (mbud_stats){b->limit, b->used, b->peak, b->waits, b->over, b->waiting};
    pthread_mutex_unlock(&b->lock);
}
