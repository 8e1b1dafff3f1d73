#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "../../engine/build/pack.h"
#include "../../engine/format/arc.h"
#include "../../engine/format/textshard.h"
#include "../../engine/format/zlazy.h"
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
 * tokens get their ids in order of first appearance; with references and bare (`bare` 0 or
 * 2, as textshard_encode takes it). */
static void pieces_roundtrip(int bare)
{
    const char *pieces[] = {"hello, world\n", "world hello", ";;; \xff\xfe bytes \x01\x02"};
    uint64_t lens[3];
    buf text = {0}, pay = {0}, got = {0};
    for (int i = 0; i < 3; i++) {
        lens[i] = strlen(pieces[i]);
        assert_int_equal(buf_put(&text, pieces[i], lens[i]), 0);
    }
    int is_bare;
    assert_int_equal(textshard_encode(lens, 3, text.p, bare, &pay, &is_bare), 0);
    assert_int_equal(is_bare, bare == 2);
    dict *d;
    gram g = {0};
    vec64 runs = {0};
    assert_int_equal(textshard_grammar(pay.p, pay.n, is_bare, 0, 0, &d, &g, &runs), 0);
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

static void test_pieces_roundtrip(void **state)
{
    (void)state;
    pieces_roundtrip(0);
    pieces_roundtrip(2);
}

typedef struct lens {
    size_t n, len[8192];
} lens;

static int record_tok(void *ctx, const unsigned char *p, size_t n)
{
    (void)p;
    lens *l = ctx;
    assert_true(l->n < 8192);
    l->len[l->n++] = n;
    return 0;
}

/* Bytes of every kind (random, runs of one class longer than TOK_CAP), in pieces: the runs
 * hold the tokens tok_feed makes of each piece, token for token, and spell the piece; a
 * piece repeating earlier ones gets their ids (through the references back, or bare by the
 * bytes). */
static void tokens_as_tok_feed(int bare)
{
    enum { N = 12000 };
    unsigned char *t = malloc(2 * N);
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245 + 12345;
        t[i] = (unsigned char)(x >> 16);
    }
    memset(t + 3000, 'w', 2500); /* a word longer than TOK_CAP */
    memset(t + 7000, ' ', 1100); /* a separator run longer than it */
    memcpy(t + N, t + 3000, 5100); /* the second piece again */
    uint64_t pl[] = {3000, 5100, N - 8100, 5100};
    buf pay = {0}, got = {0};
    int is_bare;
    assert_int_equal(textshard_encode(pl, 4, t, bare, &pay, &is_bare), 0);
    assert_int_equal(is_bare, bare == 2);
    dict *d;
    gram g = {0};
    vec64 runs = {0};
    /* figures past what the payload can hold (a shard table not to be believed) */
    assert_int_equal(
        textshard_grammar(pay.p, pay.n, is_bare, UINT64_MAX, UINT64_MAX, &d, &g, &runs), 0);
    assert_int_equal(runs.n, 4);
    uint64_t at = 0, off = 0;
    for (int i = 0; i < 4; i++) {
        static lens l;
        l.n = 0;
        tok_state ts = {.npend = 0};
        assert_int_equal(tok_feed(&ts, t + off, pl[i], record_tok, &l), 0);
        assert_int_equal(tok_finish(&ts, record_tok, &l), 0);
        assert_int_equal(runs.p[i], l.n);
        for (size_t k = 0; k < l.n; k++) {
            size_t len;
            dict_bytes(d, g.root.p[at + k], &len);
            assert_int_equal(len, l.len[k]);
        }
        root_bytes(d, &g, at, runs.p[i], &got);
        assert_int_equal(got.n, pl[i]);
        assert_memory_equal(got.p, t + off, pl[i]);
        at += runs.p[i];
        off += pl[i];
    }
    /* the repeated piece has the second one's ids */
    assert_int_equal(runs.p[3], runs.p[1]);
    assert_memory_equal(g.root.p + runs.p[0] + runs.p[1] + runs.p[2], g.root.p + runs.p[0],
                        runs.p[3] * sizeof *g.root.p);
    dict_free(d);
    gram_free(&g);
    vec64_free(&runs);
    buf_free(&pay);
    buf_free(&got);
    free(t);
}

static void test_tokens_as_tok_feed(void **state)
{
    (void)state;
    tokens_as_tok_feed(0);
    tokens_as_tok_feed(2);
}

/* Judged (`bare` 1): text, whose long tokens come back, is bare; random bytes, whose
 * references cost little, keep them. Both decode to the same tokens either way. */
static void test_bare_judged(void **state)
{
    (void)state;
    enum { N = 60000 };
    unsigned char *t = malloc(N);
    const char *words[] = {"alpha ", "beta\n", "gamma, ", "delta; ", "epsilon "};
    size_t n = 0;
    uint32_t x = 7;
    while (n + 10 < N) {
        x = x * 1103515245 + 12345;
        const char *w = words[(x >> 16) % 5];
        memcpy(t + n, w, strlen(w));
        n += strlen(w);
    }
    uint64_t len = n;
    buf pay = {0};
    int is_bare;
    assert_int_equal(textshard_encode(&len, 1, t, 1, &pay, &is_bare), 0);
    assert_int_equal(is_bare, 1);
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245 + 12345;
        t[i] = (unsigned char)(x >> 16);
    }
    len = N;
    pay.n = 0;
    assert_int_equal(textshard_encode(&len, 1, t, 1, &pay, &is_bare), 0);
    assert_int_equal(is_bare, 0);
    buf_free(&pay);
    free(t);
}

/* Bare, words of 3 to 9 letters from a four-letter alphabet, far more of them than the
 * decoder's table of short tokens has slots, so that words sharing their first bytes or their
 * slot replace each other there all the time; the last word ends the text (its bytes are read
 * without reading past them): every word spells its bytes, and two words have one id exactly
 * when their bytes are equal. */
static void test_bare_short_words(void **state)
{
    (void)state;
    enum { WORDS = 150000 };
    buf text = {0}, got = {0};
    uint32_t x = 99;
    for (int i = 0; i < WORDS; i++) {
        x = x * 1103515245 + 12345;
        size_t n = 3 + (x >> 16) % 7;
        for (size_t k = 0; k < n; k++) {
            x = x * 1103515245 + 12345;
            assert_int_equal(buf_put(&text, &"abcd"[(x >> 16) % 4], 1), 0);
        }
        if (i + 1 < WORDS) assert_int_equal(buf_put(&text, " ", 1), 0);
    }
    uint64_t len = text.n;
    buf pay = {0};
    int is_bare;
    assert_int_equal(textshard_encode(&len, 1, text.p, 2, &pay, &is_bare), 0);
    assert_int_equal(is_bare, 1);
    dict *d;
    gram g = {0};
    assert_int_equal(textshard_grammar(pay.p, pay.n, 1, 0, 0, &d, &g, NULL), 0);
    assert_int_equal(g.root.n, 2 * WORDS - 1);
    root_bytes(d, &g, 0, g.root.n, &got);
    assert_int_equal(got.n, text.n);
    assert_memory_equal(got.p, text.p, text.n);
    /* one id per distinct token (a lookup of each id's bytes finds the first id that has
     * them), numbered by first appearance */
    for (uint32_t id = 0; id < dict_count(d); id++) {
        size_t l;
        const unsigned char *a = dict_bytes(d, id, &l);
        uint32_t found;
        assert_int_equal(dict_find(d, a, l, &found), 0);
        assert_int_equal(found, id);
    }
    uint32_t *seen = calloc(dict_count(d), sizeof *seen);
    uint32_t next = 0;
    for (size_t i = 0; i < g.root.n; i++) {
        uint32_t id = g.root.p[i];
        assert_true(id < dict_count(d));
        if (!seen[id]) {
            assert_int_equal(id, next++);
            seen[id] = 1;
        }
    }
    assert_int_equal(next, dict_count(d));
    free(seen);
    dict_free(d);
    gram_free(&g);
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
    int is_bare;
    assert_int_equal(textshard_encode(&len, 1, w, 0, &pay, &is_bare), 0);
    dict *d;
    gram g = {0};
    assert_int_equal(textshard_grammar(pay.p, pay.n, 0, 0, 0, &d, &g, NULL), 0);
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
        unsigned char p[12];
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
        {"reference missing", {1, 3, 'a', 'b', 'c'}, 5},
        {"reference before the first token", {1, 3, 'a', 'b', 'c', 1}, 6},
        {"reference to other bytes", {2, 3, 3, 'a', 'b', 'c', 'a', 'b', 'd', 0, 1}, 11},
        {"references left over", {1, 3, 'a', 'b', 'c', 0, 0}, 7},
    };
    /* bare: the pieces' bytes end the payload */
    static const unsigned char after[] = {1, 3, 'a', 'b', 'c', 0};
    dict *bd = (dict *)1;
    gram bg = {0};
    assert_int_equal(textshard_grammar(after, sizeof after, 1, 0, 0, &bd, &bg, NULL), -EBADMSG);
    assert_null(bd);
    assert_int_equal(textshard_grammar(after, sizeof after - 1, 1, 0, 0, &bd, &bg, NULL), 0);
    assert_int_equal(bg.root.n, 1);
    dict_free(bd);
    gram_free(&bg);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        dict *d = (dict *)1;
        gram g = {0};
        vec64 runs = {0};
        int rc =
            textshard_grammar(bad[i].p, bad[i].n, 0, UINT64_MAX, UINT64_MAX, &d, &g, &runs);
        if (rc != -EBADMSG) fail_msg("%s: %d", bad[i].why, rc);
        assert_null(d);
        assert_int_equal(g.root.n, 0);
        vec64_free(&runs);
    }
}

/* textshard_pieces gives the pieces as written, and refuses the lengths textshard_grammar
 * refuses; the references are not its business. */
static void test_pieces(void **state)
{
    (void)state;
    uint64_t in[2] = {3, 5};
    buf pay = {0};
    int is_bare;
    assert_int_equal(textshard_encode(in, 2, (const unsigned char *)"abc;defg", 0, &pay, &is_bare),
                     0);
    uint64_t *lens = NULL;
    size_t np = 0;
    const unsigned char *text;
    assert_int_equal(textshard_pieces(pay.p, pay.n, &lens, &np, &text), 0);
    assert_int_equal(np, 2);
    assert_int_equal(lens[0], 3);
    assert_int_equal(lens[1], 5);
    assert_memory_equal(text, "abc;defg", 8);
    free(lens);
    buf_free(&pay);
    static const unsigned char bad[][7] = {{0, 'a'}, {2, 0, 1, 'a'}, {1, 3, 'a', 'b'},
                                           {9, 1, 'a'}, {1, 0x80}};
    static const size_t nbad[] = {2, 4, 4, 3, 2};
    for (size_t i = 0; i < sizeof nbad / sizeof *nbad; i++)
        assert_int_equal(textshard_pieces(bad[i], nbad[i], &lens, &np, &text), -EBADMSG);
}

static void put_file(const char *dir, const char *name, const unsigned char *p, size_t n)
{
    assert_int_equal(tu_put(dir, name, p, n), 0);
}

/* A directory of test files removed, and a fresh empty one for a tree to pack (`name` under
 * $TMPDIR; the caller frees the path). */
static void tree_drop(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static char *tree_new(const char *name)
{
    char *dir = tu_tmppath(name);
    tree_drop(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    return dir;
}

/* arc_open_text of each text shard of a packed tree: every file it holds (a part, for a file
 * cut over shards), with exactly that file's bytes; a grammar shard is -ENOTSUP. */
static void test_open_text(void **state)
{
    (void)state;
    char *dir = tree_new("tree"), *ar = tu_tmppath("t.tdc");
    enum { BIG = 150000, SMALL = 3000 };
    unsigned char *big = malloc(BIG), text[SMALL];
    uint64_t seed = 7;
    for (size_t i = 0; i < BIG; i++)
        big[i] = (unsigned char)tu_rand(&seed);
    for (size_t i = 0; i < SMALL; i++)
        text[i] = "the cat sat on a mat\n"[i % 21];
    put_file(dir, "a-rand", big + 1000, 20000);
    put_file(dir, "b-big", big, BIG); /* cut over 64K shards */
    put_file(dir, "c-text", text, SMALL);
    put_file(dir, "d-rand", big + 7, 9000);
    put_file(dir, "e-empty", big, 0);
    pack_opts o = {.shard_size = 64 << 10};
    pack_stats st;
    if (pack_dir(dir, ar, &o, &st)) fail_msg("%s", tdc_errmsg());
    arc *m;
    assert_int_equal(arc_open_meta(ar, &m), 0);
    int texts = 0, parts = 0;
    uint64_t seen = 0;
    for (uint32_t k = 0; k < m->nshards; k++) {
        arc_text t;
        if (!arc_shard_text(m, k)) {
            assert_int_equal(arc_open_text(m, k, -1, 0, &t), -ENOTSUP);
            continue;
        }
        texts++;
        uint32_t big_ent;
        assert_int_equal(arc_find_file(m, "b-big", &big_ent), 0);
        uint32_t f, l;
        int64_t part = arc_entry_parts(m, big_ent, &f, &l) && k >= f && k <= l ? (int64_t)big_ent : -1;
        assert_int_equal(arc_open_text(m, k, part, 0, &t), 0);
        for (uint32_t i = 0; i < t.nids; i++) {
            const arc_entry *e = &m->ents[t.ids[i]];
            const unsigned char *want = !strcmp(e->path, "a-rand") ? big + 1000
                                        : !strcmp(e->path, "d-rand") ? big + 7 : big;
            if (part >= 0) { /* the part: the shards before it hold the file's start */
                uint64_t off = 0;
                for (uint32_t j = f; j < k; j++)
                    off += m->shards[j].bytes;
                assert_int_equal(t.len[i], m->shards[k].bytes);
                want = big + off;
                parts++;
            } else {
                assert_int_equal(t.len[i], e->size);
            }
            assert_memory_equal(t.text + t.at[i], want, t.len[i]);
            seen += t.len[i];
        }
        arc_text_free(&t);
    }
    assert_true(texts >= 3);
    assert_true(parts >= 2);
    assert_int_equal(seen, 20000 + BIG + 9000); /* every incompressible byte, once */
    arc_free(m);
    unlink(ar);
    tree_drop(dir);
    free(big);
    free(dir);
    free(ar);
}

/* A lazily opened text shard (arc_open_text with lazy): open decodes its payload only as far
 * as the pieces' lengths, a read near the start no further than a step past it, reads from
 * four threads at once at random places agree with the files, and the whole is decoded once
 * every byte was read. */
enum { LAZY_A = 600000, LAZY_B = 300000, LAZY_READS = 300 };
typedef struct lazy_reader {
    const arc *m;
    const arc_text *t;
    const unsigned char *big;
    uint64_t seed;
    int bad;
} lazy_reader;

static void *lazy_read(void *arg)
{
    lazy_reader *r = arg;
    for (int k = 0; k < LAZY_READS && !r->bad; k++) {
        uint32_t i = (uint32_t)(tu_rand(&r->seed) % r->t->nids);
        const arc_entry *e = &r->m->ents[r->t->ids[i]];
        const unsigned char *want = !strcmp(e->path, "a-rand") ? r->big : r->big + 77;
        uint64_t off = tu_rand(&r->seed) % (e->size + 10), n = tu_rand(&r->seed) % 70000;
        const unsigned char *p;
        ssize_t got = arc_text_bytes(r->t, i, off, (size_t)n, &p);
        uint64_t expect = off >= e->size ? 0 : n < e->size - off ? n : e->size - off;
        if (got != (ssize_t)expect || (expect && memcmp(p, want + off, (size_t)expect)))
            r->bad = 1;
    }
    return NULL;
}

static void test_open_text_lazy(void **state)
{
    (void)state;
    char *dir = tree_new("lazy"), *ar = tu_tmppath("l.tdc");
    unsigned char *big = malloc(LAZY_A + 100);
    uint64_t seed = 11;
    for (size_t i = 0; i < LAZY_A + 100; i++)
        big[i] = (unsigned char)tu_rand(&seed);
    put_file(dir, "a-rand", big, LAZY_A);
    put_file(dir, "b-rand", big + 77, LAZY_B);
    pack_opts o = {.shard_size = 4 << 20};
    pack_stats st;
    if (pack_dir(dir, ar, &o, &st)) fail_msg("%s", tdc_errmsg());
    arc *m;
    assert_int_equal(arc_open_meta(ar, &m), 0);
    assert_int_equal(m->nshards, 1);
    assert_true(arc_shard_text(m, 0));
    arc_text t;
    assert_int_equal(arc_open_text(m, 0, -1, 1, &t), 0);
    assert_non_null(t.lazy);
    assert_int_equal(t.nids, 2);
    size_t raw = LAZY_A + LAZY_B, first = t.at[0] < t.at[1] ? 0 : 1;
    assert_true(zlazy_done(t.lazy) < raw / 4);
    const unsigned char *p;
    assert_int_equal(arc_text_bytes(&t, (uint32_t)first, 1000, 4096, &p), 4096);
    assert_memory_equal(p, first == 0 ? big + 1000 : big + 77 + 1000, 4096);
    assert_true(zlazy_done(t.lazy) < raw / 2);
    lazy_reader r[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (lazy_reader){m, &t, big, 100 + (uint64_t)i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, lazy_read, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].bad, 0);
    }
    for (uint32_t i = 0; i < 2; i++)
        assert_int_equal(arc_text_bytes(&t, i, 0, SIZE_MAX, &p), (ssize_t)t.len[i]);
    assert_true(zlazy_done(t.lazy) >= raw);
    arc_text_free(&t);
    arc_free(m);
    free(big);
    unlink(ar);
    tree_drop(dir);
    free(dir);
    free(ar);
}

/* zlazy over a frame damaged in its last quarter (its checksum recomputed) or cut short:
 * the bytes before the damage decode, a read past it fails with a message, and so does every
 * later one. */
static void test_zlazy_damaged(void **state)
{
    (void)state;
    enum { RAW = 1 << 20 };
    unsigned char *src = malloc(RAW);
    uint64_t seed = 5;
    for (size_t i = 0; i < RAW; i++)
        src[i] = (unsigned char)("abcdefgh"[(tu_rand(&seed) >> 40) % 8]);
    size_t cap = ZSTD_compressBound(RAW);
    unsigned char *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, src, RAW, 3);
    assert_false(ZSTD_isError(zn));
    assert_true(zn > 256 << 10); /* many steps of zlazy's */
    for (int cut = 0; cut < 2; cut++) {
        unsigned char *st = malloc(zn), *dst = malloc(RAW);
        memcpy(st, z, zn);
        if (!cut) /* the next block header reads as a reserved type */
            memset(st + zn * 3 / 4, 0xff, zn - zn * 3 / 4);
        zlazy *l;
        assert_int_equal(zlazy_new(st, cut ? zn / 2 : zn, dst, RAW, "dictionary", &l), 0);
        assert_int_equal(zlazy_need(l, 1000), 0);
        assert_memory_equal(dst, src, 1000);
        assert_int_equal(zlazy_need(l, RAW), -EBADMSG);
        assert_non_null(strstr(tdc_errmsg(), "section dictionary: decompression failed"));
        assert_int_equal(zlazy_need(l, RAW), -EBADMSG);
        zlazy_free(l);
        free(dst);
    }
    /* a frame declaring another size is refused at once */
    unsigned char *st = malloc(zn), *dst = malloc(RAW);
    memcpy(st, z, zn);
    zlazy *l;
    assert_int_equal(zlazy_new(st, zn, dst, RAW - 1, "dictionary", &l), -EBADMSG);
    free(dst);
    free(z);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_roundtrip),
        cmocka_unit_test(test_long_word),
        cmocka_unit_test(test_tokens_as_tok_feed),
        cmocka_unit_test(test_bare_judged),
        cmocka_unit_test(test_bare_short_words),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_open_text),
        cmocka_unit_test(test_open_text_lazy),
        cmocka_unit_test(test_zlazy_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
