#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../engine/grammar/dict.h"
#include "../../engine/base/err.h"
#include "../../engine/base/tok.h"
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

static int intern_tok(void *ctx, const unsigned char *p, size_t n)
{
    uint32_t id;
    return dict_intern(ctx, p, n, &id);
}

/* A word longer than TOK_CAP leaves a word token of TOK_CAP bytes; a separator run of that
 * length, or shorter words, none (the GPU's whole-archive analytics rely on it). */
static void test_has_word_of(void **state)
{
    (void)state;
    static unsigned char t[3 * TOK_CAP];
    struct {
        size_t word, sep; /* a run of word bytes, then of separators */
        int want;
    } c[] = {{TOK_CAP - 1, TOK_CAP, 0}, {TOK_CAP, 1, 1}, {2 * TOK_CAP + 7, 3, 1}, {5, 2, 0}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        dict *d = dict_new();
        memset(t, 'x', c[i].word);
        memset(t + c[i].word, '-', c[i].sep);
        assert_int_equal(tok_split(t, c[i].word + c[i].sep, intern_tok, d), 0);
        assert_int_equal(dict_has_word_of(d, TOK_CAP), c[i].want);
        dict_free(d);
    }
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

/* Front code `enc` (dict_encode's layout), decode it back and compare. */
static void front_roundtrip(const buf *enc)
{
    buf fc = {0}, back = {0};
    assert_int_equal(dict_front_encode(enc->p, enc->n, &fc), 0);
    assert_int_equal(dict_front_decode(fc.p, fc.n, enc->n, &back), 0);
    assert_int_equal(back.n, enc->n);
    assert_memory_equal(back.p, enc->p, enc->n);
    /* straight into a dictionary: the one dict_decode gives */
    dict *d, *e;
    assert_int_equal(dict_front_load(fc.p, fc.n, enc->n, &d), 0);
    assert_int_equal(dict_decode(enc->p, enc->n, &e), 0);
    assert_int_equal(dict_count(d), dict_count(e));
    assert_int_equal(dict_blob_size(d), dict_blob_size(e));
    for (uint32_t i = 0; i < dict_count(d); i++) {
        size_t dl, el;
        const unsigned char *dp = dict_bytes(d, i, &dl), *ep = dict_bytes(e, i, &el);
        assert_int_equal(dl, el);
        assert_memory_equal(dp, ep, dl);
        assert_int_equal(dict_is_word(d, i), dict_is_word(e, i));
    }
    /* the kinds alone, from the lengths: the same as the decoded dictionary's */
    unsigned char *words;
    uint32_t nw;
    assert_int_equal(dict_front_words(fc.p, fc.n, &words, &nw), 0);
    assert_int_equal(nw, dict_count(d));
    for (uint32_t i = 0; i < nw; i++)
        assert_int_equal(words[i], dict_is_word(d, i));
    free(words);
    dict_free(d);
    dict_free(e);
    /* the declared size must match exactly */
    back.n = 0;
    assert_int_equal(dict_front_decode(fc.p, fc.n, enc->n + 1, &back), -EBADMSG);
    back.n = 0;
    if (enc->n > 1) assert_int_equal(dict_front_decode(fc.p, fc.n, enc->n - 1, &back), -EBADMSG);
    buf_free(&fc);
    buf_free(&back);
}

/* Random dictionaries (words and separators of random lengths up to TOK_CAP, in random
 * order), sorted ones, and the empty one survive the front coding. */
static void test_front_roundtrip(void **state)
{
    (void)state;
    uint64_t seed = 18;
    for (int round = 0; round < 20; round++) {
        dict *d = dict_new();
        int n = round == 0 ? 0 : (int)(tu_rand(&seed) % 3000);
        unsigned char w[TOK_CAP];
        for (int i = 0; i < n; i++) {
            size_t len = 1 + (size_t)(tu_rand(&seed) % (round % 4 == 3 ? TOK_CAP : 12));
            int word = (int)(tu_rand(&seed) & 1);
            for (size_t k = 0; k < len; k++)
                w[k] = word ? (unsigned char)('a' + tu_rand(&seed) % (round % 2 ? 3 : 26))
                            : (unsigned char)" \n\t"[tu_rand(&seed) % 3];
            uint32_t id;
            assert_int_equal(dict_intern(d, w, len, &id), 0);
        }
        buf enc = {0};
        assert_int_equal(dict_encode(d, &enc), 0);
        front_roundtrip(&enc);
        buf_free(&enc);
        dict_free(d);
    }
}

/* Damaged front codings fail with a message and never read or write out of bounds:
 * every truncation, every flipped byte, a prefix longer than the previous token. */
static void test_front_rejects(void **state)
{
    (void)state;
    dict *d = dict_new();
    const char *words[] = {"alpha", "alphabet", "alphabets", " ", "beta", "bet", "\n\n"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        uint32_t id;
        assert_int_equal(dict_intern(d, (const unsigned char *)words[i], strlen(words[i]), &id), 0);
    }
    buf enc = {0}, fc = {0}, out = {0};
    assert_int_equal(dict_encode(d, &enc), 0);
    assert_int_equal(dict_front_encode(enc.p, enc.n, &fc), 0);
    unsigned char *kinds = NULL;
    uint32_t nw;
    for (size_t n = 0; n < fc.n; n++) {
        out.n = 0;
        assert_int_equal(dict_front_decode(fc.p, n, enc.n, &out), -EBADMSG);
        assert_non_null(strstr(tdc_errmsg(), "dictionary:"));
        assert_int_equal(dict_front_words(fc.p, n, &kinds, &nw), -EBADMSG);
        assert_null(kinds);
    }
    for (size_t i = 0; i < fc.n; i++)
        for (int bit = 0; bit < 8; bit++) {
            fc.p[i] ^= (unsigned char)(1 << bit);
            out.n = 0;
            int rc = dict_front_decode(fc.p, fc.n, enc.n, &out);
            assert_true(rc == 0 || rc == -EBADMSG);
            if (!rc) assert_int_equal(out.n, enc.n);
            /* what the whole decoding takes, the kinds alone take too */
            int wrc = dict_front_words(fc.p, fc.n, &kinds, &nw);
            assert_true(wrc == 0 || wrc == -EBADMSG);
            if (!rc) assert_int_equal(wrc, 0);
            free(kinds);
            kinds = NULL;
            fc.p[i] ^= (unsigned char)(1 << bit);
        }
    /* token 1 claims 9 shared bytes; token 0 has 5 */
    const unsigned char longpre[] = {2, 0, 5, 9, 1, 'a', 'l', 'p', 'h', 'a', 's'};
    out.n = 0;
    assert_int_equal(dict_front_decode(longpre, sizeof longpre, 100, &out), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "bad front coding of token 1"));
    /* an empty token */
    const unsigned char empty[] = {1, 0, 0};
    out.n = 0;
    assert_int_equal(dict_front_decode(empty, sizeof empty, 2, &out), -EBADMSG);
    /* a token mixing word and separator bytes, whole or after a shared prefix: refused as
     * dict_decode refuses it */
    const unsigned char mix[] = {1, 0, 2, 'a', ' '}, mixpre[] = {2, 0, 1, 1, 1, 'a', ' '};
    out.n = 0;
    assert_int_equal(dict_front_decode(mix, sizeof mix, 4, &out), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "token 0 mixes"));
    dict *m = NULL;
    assert_int_equal(dict_front_load(mixpre, sizeof mixpre, 6, &m), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "token 1 mixes"));
    assert_null(m);
    /* dict_encode's layout is checked when front coding it, too */
    const unsigned char shortblob[] = {1, 3, 'a', 'b'};
    assert_int_equal(dict_front_encode(shortblob, sizeof shortblob, &out), -EBADMSG);
    buf_free(&enc);
    buf_free(&fc);
    buf_free(&out);
    dict_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern_find),    cmocka_unit_test(test_many_roundtrip),
        cmocka_unit_test(test_decode_rejects), cmocka_unit_test(test_front_roundtrip),
        cmocka_unit_test(test_front_rejects),  cmocka_unit_test(test_has_word_of),
    };
    return cmocka_run_group_tests_name("dict", tests, NULL, NULL);
}
