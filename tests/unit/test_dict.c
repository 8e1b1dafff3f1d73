#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../engine/dict.h"
#include "../../engine/err.h"
#include "testutil.h"

static void test_intern_find(void **state)
{
    (void)state;
    dict *d = dict_new();
    uint32_t a, b, c, f;
    assert_int_equal(dict_intern(d, (const unsigned char *)"hello", 5, &a), 0);
    assert_int_equal(dict_intern(d, (const unsigned char *)" ", 1, &b), 0);
    assert_int_equal(dict_intern(d, (const unsigned char *)"hello", 5, &c), 0);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(c, a);
    assert_int_equal(dict_count(d), 2);
    assert_int_equal(dict_find(d, (const unsigned char *)" ", 1, &f), 0);
    assert_int_equal(f, b);
    assert_int_equal(dict_find(d, (const unsigned char *)"nope", 4, &f), -ENOENT);
    assert_true(dict_is_word(d, a));
    assert_false(dict_is_word(d, b));
    dict_free(d);
}

/* Many tokens force rehashing; every id must survive it and the encoding round trip. */
static void test_many_roundtrip(void **state)
{
    (void)state;
    dict *d = dict_new();
    char w[32];
    for (int i = 0; i < 100000; i++) {
        uint32_t id;
        int n = snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(dict_intern(d, (const unsigned char *)w, (size_t)n, &id), 0);
        assert_int_equal(id, (uint32_t)i);
    }
    buf b = {0};
    assert_int_equal(dict_encode(d, &b), 0);
    dict *e;
    assert_int_equal(dict_decode(b.p, b.n, &e), 0);
    assert_int_equal(dict_count(e), 100000);
    for (int i = 0; i < 100000; i += 997) {
        uint32_t id;
        int n = snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(dict_find(e, (const unsigned char *)w, (size_t)n, &id), 0);
        assert_int_equal(id, (uint32_t)i);
    }
    buf_free(&b);
    dict_free(d);
    dict_free(e);
}

static void test_decode_rejects(void **state)
{
    (void)state;
    dict *e = NULL;
    /* count larger than the input */
    const unsigned char big[] = {0xff, 0xff, 0x03};
    assert_int_equal(dict_decode(big, sizeof big, &e), -EBADMSG);
    /* one token of length 3 but only 2 blob bytes */
    const unsigned char shortblob[] = {1, 3, 'a', 'b'};
    assert_int_equal(dict_decode(shortblob, sizeof shortblob, &e), -EBADMSG);
    /* a token mixing word and separator bytes */
    const unsigned char mixed[] = {1, 2, 'a', ' '};
    assert_int_equal(dict_decode(mixed, sizeof mixed, &e), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "mixes"));
    /* zero-length token */
    const unsigned char zero[] = {1, 0};
    assert_int_equal(dict_decode(zero, sizeof zero, &e), -EBADMSG);
    assert_null(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern_find),
        cmocka_unit_test(test_many_roundtrip),
        cmocka_unit_test(test_decode_rejects),
    };
    return cmocka_run_group_tests_name("dict", tests, NULL, NULL);
}
