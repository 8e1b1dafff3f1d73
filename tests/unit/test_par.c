/* par: threads that each get their own argument, and par_order, the in-order hand-off that
 * pack and compaction write their shards through: items finished out of order by several
 * threads are handed on exactly once each, in order, by one thread at a time, none started a
 * window or more past the first not handed on; a failed hand-off stops the rest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "../../engine/base/par.h"
#include "testutil.h"

typedef struct slot {
    unsigned t;
    unsigned ran;
} slot;

static void *mark(void *p)
{
    slot *s = p;
    s->ran++;
    return NULL;
}

static void test_run(void **state)
{
    (void)state;
    slot s[5] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}};
    par_run(5, mark, s, sizeof *s);
    for (unsigned t = 0; t < 5; t++) {
        assert_int_equal(s[t].t, t);
        assert_int_equal(s[t].ran, 1);
    }
}

#define NITEMS 3000
#define NTHREADS 6
#define WINDOW 5

typedef struct order_run {
    par_order q;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    size_t taken;   /* the next item to start */
    int rc;         /* the first failure, under lock */
    size_t fail_at; /* put fails for this item (NITEMS: never) */
    size_t log[NITEMS], nlog;
    int putting;     /* a put is running (atomic): two at once is a failure */
    int overlap;     /* two puts ran at once */
    int past_window; /* an item was started a window or more past the first not handed on */
    size_t ahead;    /* the most items from the first not handed on to one started */
    uint64_t cum[NITEMS + 1]; /* weights, when the run has them */
    uint64_t seed;
} order_run;

static int put(void *ctx, size_t i)
{
    order_run *r = ctx;
    if (__atomic_exchange_n(&r->putting, 1, __ATOMIC_SEQ_CST)) r->overlap = 1;
    r->log[r->nlog++] = i;
    if (i % 7 == 0) sched_yield();
    __atomic_store_n(&r->putting, 0, __ATOMIC_SEQ_CST);
    return i == r->fail_at ? -EIO : 0;
}

static void *worker(void *p)
{
    order_run *r = p;
    pthread_mutex_lock(&r->lock);
    uint64_t seed = (r->seed += 7919);
    for (;;) {
        while (!r->rc && r->taken < NITEMS && !par_order_room(&r->q, r->taken))
            pthread_cond_wait(&r->cv, &r->lock);
        if (r->rc || r->taken >= NITEMS) break;
        size_t i = r->taken++;
        uint64_t w = r->q.cum ? r->q.cum[i] - r->q.cum[r->q.next] : i - r->q.next;
        if (w >= WINDOW) r->past_window = 1;
        if (i - r->q.next > r->ahead) r->ahead = i - r->q.next;
        pthread_mutex_unlock(&r->lock);
        for (unsigned k = tu_rand(&seed) % 4; k; k--) /* items finish out of order */
            sched_yield();
        pthread_mutex_lock(&r->lock);
        int rc = par_order_done(&r->q, i, &r->lock, &r->cv, &r->rc, put, r);
        if (rc && !r->rc) {
            r->rc = rc;
            pthread_cond_broadcast(&r->cv);
        }
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* With `every` > 0, one item in `every` weighs 1 and the others nothing. */
static order_run *order_threads(size_t fail_at, unsigned every)
{
    order_run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(par_order_init(&r->q, NITEMS, WINDOW), 0);
    if (every) {
        for (size_t i = 0; i < NITEMS; i++)
            r->cum[i + 1] = r->cum[i] + (i % every == 0);
        r->q.cum = r->cum;
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->fail_at = fail_at;
    r->seed = 1;
    par_run(NTHREADS, worker, r, 0);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->lock);
    assert_false(r->overlap);
    assert_false(r->past_window);
    return r;
}

static void order_free(order_run *r)
{
    par_order_free(&r->q);
    free(r);
}

/* The run ended with `rc`, items 0..n-1 handed on, each once, in order, and no other. */
static void handed_on(const order_run *r, int rc, size_t n)
{
    assert_int_equal(r->rc, rc);
    assert_int_equal(r->nlog, n);
    assert_int_equal(r->q.next, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(r->log[i], i);
}

static void test_order(void **state)
{
    (void)state;
    order_run *r = order_threads(NITEMS, 0);
    handed_on(r, 0, NITEMS);
    order_free(r);
}

static void test_order_fails(void **state)
{
    (void)state;
    order_run *r = order_threads(1000, 0);
    handed_on(r, -EIO, 1001); /* up to the failed one, nothing after it */
    assert_true(r->taken <= 1001 + WINDOW);
    order_free(r);
}

/* Items that weigh nothing do not count against the window: more of them are in flight. */
static void test_order_weights(void **state)
{
    (void)state;
    order_run *r = order_threads(NITEMS, 8);
    handed_on(r, 0, NITEMS);
    assert_true(r->ahead >= WINDOW); /* past what unit weights allow */
    order_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_order_fails),
        cmocka_unit_test(test_order_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
