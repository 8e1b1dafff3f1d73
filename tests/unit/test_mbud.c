/* mbud: the shared memory budget. Waiting takers never hold more together than the budget
 * (checked by the takers themselves at every moment, with many threads), a taker larger than
 * the budget runs alone, takers that may not wait go over and are counted, and the reclaimer
 * is asked for exactly what a taker lacks and lets it go on without any other giver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>

#include "../../engine/base/mbud.h"
#include "testutil.h"

#define LIMIT 1000

typedef struct shared {
    mbud *b;
    uint64_t held;   /* what the takers hold now, by their own count (atomic) */
    uint64_t most;   /* the most they held at once (atomic max) */
    uint64_t seed;
    int alone_seen;  /* a taker larger than the budget found another holding (atomic) */
} shared;

static void *taker(void *arg)
{
    shared *sh = arg;
    uint64_t seed = __atomic_add_fetch(&sh->seed, 7919, __ATOMIC_RELAXED);
    for (int i = 0; i < 300; i++) {
        uint64_t n = 1 + tu_rand(&seed) % (i % 50 == 0 ? 2 * LIMIT : LIMIT / 3);
        mbud_take(sh->b, n, 1);
        uint64_t now = __atomic_add_fetch(&sh->held, n, __ATOMIC_SEQ_CST);
        if (n > LIMIT && now != n) __atomic_store_n(&sh->alone_seen, 1, __ATOMIC_SEQ_CST);
        uint64_t m = __atomic_load_n(&sh->most, __ATOMIC_RELAXED);
        while (now > m && !__atomic_compare_exchange_n(&sh->most, &m, now, 0, __ATOMIC_SEQ_CST,
                                                       __ATOMIC_RELAXED)) {
        }
        for (unsigned k = tu_rand(&seed) % 3; k; k--)
            sched_yield();
        __atomic_sub_fetch(&sh->held, n, __ATOMIC_SEQ_CST);
        mbud_give(sh->b, n);
    }
    return NULL;
}

static void test_waiters_within(void **state)
{
    (void)state;
    shared sh = {mbud_new(LIMIT), 0, 0, 1, 0};
    assert_non_null(sh.b);
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&th[i], NULL, taker, &sh), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    mbud_stats st;
    mbud_get_stats(sh.b, &st);
    assert_int_equal(st.used, 0);
    assert_true(sh.most <= 2 * LIMIT);      /* the larger takers, alone */
    assert_int_equal(sh.alone_seen, 0);     /* nobody beside a taker larger than the budget */
    assert_true(st.peak <= 2 * LIMIT);
    assert_true(st.waits > 0);
    mbud_free(sh.b);
}

static void test_no_wait_goes_over(void **state)
{
    (void)state;
    mbud *b = mbud_new(100);
    mbud_take(b, 80, 0);
    mbud_take(b, 80, 0); /* over, at once */
    mbud_stats st;
    mbud_get_stats(b, &st);
    assert_int_equal(st.used, 160);
    assert_int_equal(st.over, 1);
    assert_int_equal(st.waits, 0);
    mbud_resize(b, 80, 10);
    mbud_get_stats(b, &st);
    assert_int_equal(st.used, 90);
    assert_int_equal(st.peak, 160);
    mbud_give(b, 80);
    mbud_give(b, 10);
    mbud_take(b, 500, 1); /* larger than the budget, nothing taken: granted alone */
    mbud_get_stats(b, &st);
    assert_int_equal(st.used, 500);
    assert_int_equal(st.over, 2);
    mbud_give(b, 500);
    mbud_free(b);
}

/* A cache of kept bytes the reclaimer drops, one unit at a time. */
typedef struct cache {
    mbud *b;
    uint64_t kept, unit, asked;
} cache;

static void drop(void *arg, uint64_t need)
{
    cache *c = arg;
    c->asked = need;
    uint64_t freed = 0;
    while (c->kept && freed < need) {
        c->kept -= c->unit;
        freed += c->unit;
        mbud_give(c->b, c->unit);
    }
}

static void test_reclaim(void **state)
{
    (void)state;
    cache c = {mbud_new(100), 0, 20, 0};
    mbud_set_reclaim(c.b, drop, &c);
    for (int i = 0; i < 4; i++) { /* 80 kept */
        mbud_take(c.b, c.unit, 1);
        c.kept += c.unit;
    }
    assert_int_equal(c.asked, 0);
    mbud_take(c.b, 50, 1); /* lacks 30: two units go, and nobody else gives */
    assert_int_equal(c.asked, 30);
    assert_int_equal(c.kept, 40);
    mbud_stats st;
    mbud_get_stats(c.b, &st);
    assert_int_equal(st.used, 90);
    assert_int_equal(st.waits, 0);
    mbud_resize(c.b, 50, 100); /* over by 50: the reclaimer drops what it can */
    mbud_get_stats(c.b, &st);
    assert_int_equal(c.kept, 0);
    assert_int_equal(st.used, 100);
    mbud_give(c.b, 100);
    /* A try takes only what fits once the reclaimer dropped what it could, and never waits:
     * with 50 held by a user and 40 kept, 10 fit as they are, 30 once the kept units go, and
     * 20 more do not fit at all. */
    mbud_take(c.b, 50, 1);
    for (int i = 0; i < 2; i++) {
        mbud_take(c.b, c.unit, 1);
        c.kept += c.unit;
    }
    assert_int_equal(mbud_try(c.b, 10), 1);
    assert_int_equal(c.kept, 40);
    assert_int_equal(mbud_try(c.b, 30), 1);
    assert_int_equal(c.kept, 0);
    assert_int_equal(mbud_try(c.b, 20), 0);
    mbud_get_stats(c.b, &st);
    assert_int_equal(st.used, 90);
    mbud_give(c.b, 90);
    mbud_get_stats(c.b, &st);
    assert_int_equal(st.used, 0);
    mbud_free(c.b);
}

/* A kept part held by a user cannot be dropped; once the user lets it go, mbud_wake lets a
 * waiter reclaim it without anyone giving bytes back, even when the wake comes while the
 * waiter's reclaimer runs (a lost wake hangs this test). */
typedef struct held {
    mbud *b;
    int busy; /* atomic */
    uint64_t kept;
} held;

static void drop_idle(void *arg, uint64_t need)
{
    held *h = arg;
    (void)need;
    if (h->kept && !__atomic_load_n(&h->busy, __ATOMIC_SEQ_CST)) {
        h->kept = 0;
        mbud_give(h->b, 80);
    }
}

static void *take_80(void *arg)
{
    mbud_take(arg, 80, 1);
    return NULL;
}

static void test_wake(void **state)
{
    (void)state;
    held h = {mbud_new(100), 1, 80};
    mbud_set_reclaim(h.b, drop_idle, &h);
    mbud_take(h.b, 80, 1);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take_80, h.b), 0);
    mbud_stats st;
    do { /* until the taker waits */
        sched_yield();
        mbud_get_stats(h.b, &st);
    } while (!st.waiting);
    __atomic_store_n(&h.busy, 0, __ATOMIC_SEQ_CST);
    mbud_wake(h.b);
    pthread_join(th, NULL);
    mbud_get_stats(h.b, &st);
    assert_int_equal(st.used, 80);
    assert_true(st.waits <= 1); /* the wake may come before its wait: then it looks again */
    assert_int_equal(h.kept, 0);
    mbud_give(h.b, 80);
    mbud_free(h.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiters_within),
        cmocka_unit_test(test_no_wait_goes_over),
        cmocka_unit_test(test_reclaim),
        cmocka_unit_test(test_wake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
