#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../engine/grammar/seq.h"
#include "testutil.h"

/* Expand symbol s of a segment grammar into out. */
static void expand(const seq_out *o, uint32_t s, vec32 *out)
{
    if (!(s & SEQ_RULE) || s == SEQ_BARRIER) {
        vec32_push(out, s);
        return;
    }
    uint32_t r = s & ~SEQ_RULE;
    for (uint64_t i = o->rule_start.p[r - 1]; i < o->rule_start.p[r]; i++)
        expand(o, o->syms.p[i], out);
}

/* Compress `in` (SEQ_BARRIER marks file ends), check the grammar's invariants and that it
 * expands back to `in`. */
static void roundtrip(const uint32_t *in, size_t n)
{
    seq *s = seq_new(n);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(in[i] == SEQ_BARRIER ? seq_barrier(s) : seq_push(s, in[i]), 0);
    seq_out o;
    assert_int_equal(seq_finish(s, &o), 0);
    seq_free(s);

    /* children first, and every rule used at least twice (rule utility) */
    uint32_t *uses = calloc(o.nrules + 1, sizeof *uses);
    for (uint32_t r = 1; r <= o.nrules; r++) {
        assert_true(o.rule_start.p[r] - o.rule_start.p[r - 1] >= 2);
        for (uint64_t i = o.rule_start.p[r - 1]; i < o.rule_start.p[r]; i++) {
            uint32_t x = o.syms.p[i];
            if (x & SEQ_RULE) {
                assert_true((x & ~SEQ_RULE) < r);
                uses[x & ~SEQ_RULE]++;
            }
        }
    }
    for (size_t i = 0; i < o.root.n; i++)
        if (o.root.p[i] != SEQ_BARRIER && (o.root.p[i] & SEQ_RULE)) uses[o.root.p[i] & ~SEQ_RULE]++;
    for (uint32_t r = 1; r <= o.nrules; r++)
        assert_true(uses[r] >= 2);
    free(uses);

    /* expansion, barrier by barrier */
    vec32 out = {0};
    for (size_t i = 0; i < o.root.n; i++)
        expand(&o, o.root.p[i], &out);
    assert_int_equal(out.n, n);
    if (n) assert_memory_equal(out.p, in, n * 4);
    vec32_free(&out);
    seq_out_free(&o);
}

static void test_small(void **state)
{
    (void)state;
    uint32_t abc[] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 4};
    roundtrip(abc, 10);
    uint32_t runs[64];
    for (int i = 0; i < 64; i++)
        runs[i] = 7; /* aaaa...: overlapping digrams */
    roundtrip(runs, 64);
    roundtrip(runs, 3);
    roundtrip(runs, 0);
}

/* No rule may span a barrier: the same text on both sides of one must still expand right. */
static void test_barriers(void **state)
{
    (void)state;
    uint32_t in[] = {1, 2, 3, SEQ_BARRIER, 1, 2, 3, SEQ_BARRIER, SEQ_BARRIER, 2, 3, 1, SEQ_BARRIER};
    roundtrip(in, sizeof in / sizeof in[0]);
}

static void test_random(void **state)
{
    (void)state;
    uint64_t seed = 99;
    for (int round = 0; round < 60; round++) {
        size_t n = tu_rand(&seed) % 20000;
        uint32_t alpha = 1 + (uint32_t)(tu_rand(&seed) % (round % 3 == 0 ? 2 : 300));
        uint32_t *in = malloc((n + 1) * 4);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = tu_rand(&seed);
            /* Zipf-like: small ids much more common; copy earlier stretches to make repeats. */
            if (i > 50 && r % 4 == 0) {
                size_t from = tu_rand(&seed) % (i - 20), len = 1 + tu_rand(&seed) % 20;
                for (size_t k = 0; k < len && i < n; k++, i++)
                    in[i] = in[from + k];
                i--;
                continue;
            }
            in[i] =
                r % 97 == 0 ? SEQ_BARRIER : (uint32_t)((r >> 8) % alpha % (1 + (r >> 40) % alpha));
        }
        roundtrip(in, n);
        free(in);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_barriers),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests_name("seq", tests, NULL, NULL);
}
