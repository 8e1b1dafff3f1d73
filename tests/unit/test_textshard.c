#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "../../engine/format/textshard.h"
#include "../../engine/base/err.h"
#include "../../engine/base/tok.h"
#include "testutil.h"

/* The bytes of a grammar's root from `at` for `n` symbols. */
static void root_bytes(const dict *d, const gram *g, uint64_t at, uint64_t n, buf *out)
{
    out->n = 0;
    for (uint64_t i = at; i < at + n; i++) {
        size_t len;
        const unsigned char *p = dict_bytes(d, g->root.p[i], &len);
        assert_int_equal(buf_put(out, p, len), 0);
    }
}

typedef struct toks {
    size_t n;
} toks;

static int count_tok(void *ctx, const unsigned char *p, size_t n)
{
    (void)p;
    (void)n;
    ((toks *)ctx)->n++;
    return 0;
}

/* Each piece's run spells its bytes, holds the tokens tok_feed makes of the piece alone, and
 * tokens get their ids in order of first appearance. */
static void test_pieces_roundtrip(void **state)
{
    (void)state;
    const char *pieces[] = {"hello, world\n", "world hello", ";;; \xff\xfe bytes \x01\x02"};
    uint64_t lens[3];
    buf text = {0}, pay = {0}, got = {0};
    for (int i = 0; i < 3; i++) {
        lens[i] = strlen(pieces[i]);
        assert_int_equal(buf_put(&text, pieces[i], lens[i]), 0);
    }
    assert_int_equal(textshard_payload(lens, 3, text.p, &pay), 0);
    dict *d;
    gram g = {0};
    vec64 runs = {0};
    assert_int_equal(textshard_grammar(pay.p, pay.n, &d, &g, &runs), 0);
    assert_int_equal(runs.n, 3);
    assert_int_equal(g.nrules, 0);
    assert_int_equal(g.ntokens, dict_count(d));
    uint64_t at = 0;
    for (int i = 0; i < 3; i++) {
        toks t = {0};
        tok_state ts = {.npend = 0};
        assert_int_equal(tok_feed(&ts, pieces[i], lens[i], count_tok, &t), 0);
        assert_int_equal(tok_finish(&ts, count_tok, &t), 0);
        assert_int_equal(runs.p[i], t.n);
        root_bytes(d, &g, at, runs.p[i], &got);
        assert_int_equal(got.n, lens[i]);
        assert_memory_equal(got.p, pieces[i], lens[i]);
        at += runs.p[i];
    }
    assert_int_equal(at, g.root.n);
    /* ids by first appearance: "hello" is 0; "world" and "hello" of piece 1 keep theirs */
    size_t len;
    assert_int_equal(g.root.p[0], 0);
    assert_memory_equal(dict_bytes(d, 0, &len), "hello", 5);
    assert_int_equal(g.root.p[2], g.root.p[4]); /* world */
    assert_int_equal(g.root.p[0], g.root.p[6]); /* hello */
    dict_free(d);
    gram_free(&g);
    vec64_free(&runs);
    buf_free(&text);
    buf_free(&pay);
    buf_free(&got);
}

/* A long word is cut at TOK_CAP as the tokenizer cuts it. */
static void test_long_word(void **state)
{
    (void)state;
    unsigned char w[3000];
    memset(w, 'x', sizeof w);
    uint64_t len = sizeof w;
    buf pay = {0};
    assert_int_equal(textshard_payload(&len, 1, w, &pay), 0);
    dict *d;
    gram g = {0};
    assert_int_equal(textshard_grammar(pay.p, pay.n, &d, &g, NULL), 0);
    assert_int_equal(g.root.n, 3); /* 1024 + 1024 + 952 */
    assert_int_equal(dict_count(d), 2);
    dict_free(d);
    gram_free(&g);
    buf_free(&pay);
}

/* What the writer cannot make is refused with -EBADMSG, and nothing is left allocated. */
static void test_rejects(void **state)
{
    (void)state;
    static const struct {
        const char *why;
        unsigned char p[8];
        size_t n;
    } bad[] = {
        {"empty", {0}, 0},
        {"no piece", {0, 'a'}, 2},
        {"piece of 0 bytes", {2, 0, 1, 'a'}, 4},
        {"bytes missing", {1, 3, 'a', 'b'}, 4},
        {"bytes left over", {1, 1, 'a', 'b'}, 4},
        {"count above the bytes", {9, 1, 'a'}, 3},
        {"truncated length", {1, 0x80}, 2},
        {"huge length", {1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'}, 7},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dict *d = (dict *)1;
        gram g = {0};
        vec64 runs = {0};
        int rc = textshard_grammar(bad[i].p, bad[i].n, &d, &g, &runs);
        if (rc != -EBADMSG) fail_msg("%s: %d", bad[i].why, rc);
        assert_null(d);
        assert_int_equal(g.root.n, 0);
        vec64_free(&runs);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_roundtrip),
        cmocka_unit_test(test_long_word),
        cmocka_unit_test(test_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
