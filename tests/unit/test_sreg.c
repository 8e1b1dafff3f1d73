/* sreg: the registry of virtual inodes. One slot per key (directory, kind, word, tag) while
 * the kernel holds it; an entry without a text goes with its last reference and its slot is
 * reused; one with a text lingers (the SREG_LINGER most recent), found again with its text by
 * the same key, and the one idle longest goes first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "../../fs/sreg.h"

/* A text of one reference holding `s`. */
static vtext *text_of(const char *s)
{
    vtext_w w;
    vtext *t = NULL;
    vtext_w_init(&w, NULL, 0);
    assert_int_equal(vtext_w_put(&w, s, strlen(s)), 0);
    assert_int_equal(vtext_w_finish(&w, &t), 0);
    vtext_w_free(&w);
    return t;
}

static sreg_key key(uint64_t dir, uint32_t kind, const char *word, uint64_t tag)
{
    return (sreg_key){.dir = dir, .kind = kind, .word = word, .tag = {tag, 0, 0, tag}};
}

static void test_keys(void **state)
{
    (void)state;
    sreg r;
    sreg_init(&r);
    uint32_t a, b, c, d, e;
    sreg_key k = key(5, 1, "", 0);
    assert_int_equal(sreg_ref(&r, &k, &a, NULL), 0);
    assert_int_equal(sreg_ref(&r, &k, &b, NULL), 0);
    assert_int_equal(a, b);
    sreg_key k2 = key(5, 1, "", 9); /* another caller's */
    sreg_key k3 = key(5, 2, "", 0); /* another kind */
    sreg_key k4 = key(5, 7, "word", 0);
    assert_int_equal(sreg_ref(&r, &k2, &c, NULL), 0);
    assert_int_equal(sreg_ref(&r, &k3, &d, NULL), 0);
    assert_int_equal(sreg_ref(&r, &k4, &e, NULL), 0);
    assert_true(c != a && d != a && e != a && c != d && d != e && c != e);
    uint64_t dir;
    uint32_t kind;
    char *w = NULL;
    vtext *t = (vtext *)&r; /* overwritten */
    assert_int_equal(sreg_get(&r, e, &dir, &kind, &w, &t), 0);
    assert_int_equal(dir, 5);
    assert_int_equal(kind, 7);
    assert_string_equal(w, "word");
    assert_null(t);
    free(w);
    /* two references: the first forget keeps it, the second frees the slot for reuse */
    sreg_forget(&r, a, 1);
    assert_int_equal(sreg_get(&r, a, &dir, &kind, NULL, NULL), 0);
    sreg_forget(&r, a, 1);
    assert_int_equal(sreg_get(&r, a, &dir, &kind, NULL, NULL), -1);
    sreg_key k5 = key(6, 1, "", 0);
    assert_int_equal(sreg_ref(&r, &k5, &b, NULL), 0);
    assert_int_equal(b, a);
    assert_int_equal(r.live, 4);
    sreg_free(&r);
}

static void test_linger(void **state)
{
    (void)state;
    sreg r;
    sreg_init(&r);
    uint32_t slot[SREG_LINGER + 2];
    vtext *t;
    for (uint32_t i = 0; i < SREG_LINGER + 2; i++) {
        sreg_key k = key(i, 0, "", 1);
        assert_int_equal(sreg_ref(&r, &k, &slot[i], &t), 0);
        assert_null(t);
        vtext *made = text_of(i % 2 ? "odd" : "even");
        sreg_set_text(&r, slot[i], made);
        vtext_put(made);
        assert_int_equal(sreg_ref(&r, &k, &slot[i], &t), 0); /* a second lookup finds it */
        assert_non_null(t);
        assert_int_equal(t->n, i % 2 ? 3 : 4);
        vtext_put(t);
        sreg_forget(&r, slot[i], 2);
    }
    /* the first two idled longest and went (a slot freed is reused: the first one's is the
     * last one's); the others linger with their texts */
    assert_int_equal(slot[SREG_LINGER + 1], slot[0]);
    assert_int_equal(r.idle, SREG_LINGER);
    assert_int_equal(r.live, SREG_LINGER);
    uint64_t dir;
    uint32_t kind;
    uint32_t s;
    sreg_key k = key(5, 0, "", 1);
    assert_int_equal(sreg_ref(&r, &k, &s, &t), 0);
    assert_int_equal(s, slot[5]);
    assert_non_null(t);
    vtext_put(t);
    assert_int_equal(r.idle, SREG_LINGER - 1);
    k = key(1, 0, "", 1);
    assert_int_equal(sreg_ref(&r, &k, &s, &t), 0); /* gone: a new entry, no text */
    assert_null(t);
    assert_int_equal(r.live, SREG_LINGER + 1);
    /* a text set twice keeps the first */
    vtext *other = text_of("another text");
    sreg_set_text(&r, slot[5], other);
    vtext_put(other);
    assert_int_equal(sreg_get(&r, slot[5], &dir, &kind, NULL, &t), 0);
    assert_int_equal(t->n, 3);
    vtext_put(t);
    /* taken back from the middle of the list, 5 lingers again as the newest: two more
     * lingering entries push out 2 and 3, the oldest, and not 5 */
    sreg_forget(&r, slot[5], 1);
    for (uint32_t i = 100; i < 102; i++) {
        k = key(i, 0, "", 1);
        assert_int_equal(sreg_ref(&r, &k, &s, NULL), 0);
        vtext *made = text_of("more");
        sreg_set_text(&r, s, made);
        vtext_put(made);
        sreg_forget(&r, s, 1);
    }
    assert_int_equal(r.idle, SREG_LINGER);
    for (uint32_t i = 2; i < 6; i++) {
        k = key(i, 0, "", 1);
        assert_int_equal(sreg_ref(&r, &k, &s, &t), 0);
        if (i < 4) {
            assert_null(t); /* gone: a new entry */
        } else {
            assert_non_null(t);
            assert_int_equal(s, slot[i]);
            vtext_put(t);
        }
    }
    sreg_free(&r); /* frees what lingers and what is held */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_linger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
