#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../engine/base/buf.h"
#include "../../engine/base/tok.h"
#include "testutil.h"

typedef struct {
    buf all;   /* concatenation of tokens */
    vec64 len; /* token lengths */
} sink;

static int collect(void *ctx, const unsigned char *p, size_t n)
{
    sink *s = ctx;
    assert_true(n >= 1 && n <= TOK_CAP);
    for (size_t i = 1; i < n; i++)
        assert_int_equal(tok_is_word_byte(p[i]), tok_is_word_byte(p[0]));
    buf_put(&s->all, p, n);
    vec64_push(&s->len, n);
    return 0;
}

static void run(const unsigned char *in, size_t n, size_t chunk, sink *s)
{
    tok_state st = {.npend = 0};
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n; i += chunk)
        assert_int_equal(tok_feed(&st, in + i, n - i < chunk ? n - i : chunk, collect, s), 0);
    assert_int_equal(tok_finish(&st, collect, s), 0);
}

static void test_classes(void **state)
{
    (void)state;
    const char *in = "Hello, wörld_42!\n\tx";
    sink s;
    run((const unsigned char *)in, strlen(in), 1000, &s);
    /* Hello | ", " | wörld_42 | "!\n\t" | x */
    assert_int_equal(s.len.n, 5);
    assert_int_equal(s.len.p[0], 5);
    assert_int_equal(s.len.p[1], 2);
    assert_int_equal(s.len.p[2], 9);
    assert_int_equal(s.len.p[3], 3);
    assert_int_equal(s.len.p[4], 1);
    assert_memory_equal(s.all.p, in, strlen(in));
    buf_free(&s.all);
    vec64_free(&s.len);
}

static void test_cap_split(void **state)
{
    (void)state;
    size_t n = 3 * TOK_CAP + 7;
    unsigned char *in = malloc(n);
    memset(in, 'a', n);
    sink s;
    run(in, n, 333, &s);
    assert_int_equal(s.len.n, 4);
    assert_int_equal(s.len.p[0], TOK_CAP);
    assert_int_equal(s.len.p[3], 7);
    buf_free(&s.all);
    vec64_free(&s.len);
    free(in);
}

/* Any bytes, any chunking: the same tokens, and their concatenation is the input. */
static void test_random_chunking(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    for (int round = 0; round < 200; round++) {
        size_t n = tu_rand(&seed) % 5000;
        unsigned char *in = malloc(n + 1);
        int bias = (int)(tu_rand(&seed) % 4); /* 3: runs past TOK_CAP of both classes */
        for (size_t i = 0; i < n; i++) {
            uint64_t r = tu_rand(&seed);
            in[i] = bias == 0   ? (unsigned char)r
                    : bias == 1 ? "ab \n\xff"[r % 5]
                    : bias == 2 ? (r % 50 ? 'z' : ' ')
                                : (r % 2000 ? (i / 1500 % 2 ? '.' : '\x90') : 'Q');
        }
        sink a, b, c = {0};
        run(in, n, n + 1, &a);
        run(in, n, 1 + tu_rand(&seed) % 17, &b);
        assert_int_equal(a.all.n, n);
        if (n) assert_memory_equal(a.all.p, in, n);
        assert_int_equal(a.len.n, b.len.n);
        if (a.len.n) assert_memory_equal(a.len.p, b.len.p, a.len.n * 8);
        /* tok_split of the whole: the same tokens */
        assert_int_equal(tok_split(in, n, collect, &c), 0);
        assert_int_equal(a.len.n, c.len.n);
        if (a.len.n) assert_memory_equal(a.len.p, c.len.p, a.len.n * 8);
        buf_free(&a.all);
        vec64_free(&a.len);
        buf_free(&b.all);
        vec64_free(&b.len);
        buf_free(&c.all);
        vec64_free(&c.len);
        free(in);
    }
}

static void test_empty(void **state)
{
    (void)state;
    sink s;
    run((const unsigned char *)"", 0, 1, &s);
    assert_int_equal(s.len.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_cap_split),
        cmocka_unit_test(test_random_chunking),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests_name("tok", tests, NULL, NULL);
}
