#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>

#include <errno.h>
#include <pthread.h>

#include "../../engine/format/arc.h"
#include "../../engine/build/pack.h"
#include "../../engine/index/idx.h"
#include "testutil.h"
#include "testpack.h"

#define NF 5
static unsigned char *content[NF];
static size_t size[NF];
static const char *names[NF] = {"bin", "empty", "long-token", "repeat", "words"};

/* Files chosen to stress descent: random bytes, nothing, one long run cut at TOK_CAP, a
 * highly repetitive text (deep rules) and word soup. */
static void make(uint64_t *seed)
{
    size[0] = 70000;
    size[1] = 0;
    size[2] = 5000;
    size[3] = 60000;
    size[4] = 50000;
    for (int f = 0; f < NF; f++)
        content[f] = malloc(size[f] + 1);
    for (size_t i = 0; i < size[0]; i++)
        content[0][i] = (unsigned char)tu_rand(seed);
    memset(content[2], 'x', size[2]);
    for (size_t i = 0; i < size[3]; i++)
        content[3][i] = "abcab cab\n"[i % 10];
    const char *w[] = {"alpha", "beta", " ", "\n", "gamma", ", ", "delta"};
    for (size_t i = 0; i < size[4];) {
        const char *s = w[tu_rand(seed) % 7];
        for (size_t k = 0; s[k] && i < size[4]; k++)
            content[4][i++] = (unsigned char)s[k];
    }
}

/* Pack the files of make() into a fresh archive and open it. */
static arc *pack_test_files(uint64_t *seed)
{
    make(seed);
    pack_opts o = {.seg_tokens = 4096}; /* many segments: files span segment boundaries */
    pack_stats st;
    arc *a = tu_pack_files("idxtree", NF, names, content, size, &o, &st);
    assert_true(st.segments > 3);
    return a;
}

static void free_test_files(arc *a)
{
    arc_free(a);
    for (int f = 0; f < NF; f++)
        free(content[f]);
}

static void test_extract_all(void **state)
{
    (void)state;
    uint64_t seed = 7;
    arc *a = pack_test_files(&seed);
    idx *x;
    unsigned char *buf = malloc(80000);
    /* No flat rules (every read descends to tokens), a tiny budget, and the default. */
    const uint64_t budgets[] = {0, 300, IDX_CACHE_DEFAULT};
    for (int bi = 0; bi < 3; bi++) {
        assert_int_equal(idx_build_cached(a, budgets[bi], &x), 0);
        idx_cursor c;
        idx_cursor_init(&c);
        for (int f = 0; f < NF; f++) {
            int64_t e = arc_lookup(a, names[f]);
            assert_true(e > 0);
            assert_int_equal(a->ents[e].size, size[f]);
            /* whole file, then every offset with short lengths, then random spans */
            assert_int_equal(idx_extract(x, (uint32_t)e, 0, buf, 80000), size[f]);
            if (size[f]) assert_memory_equal(buf, content[f], size[f]);
            for (size_t off = 0; off <= size[f] + 2; off += 1 + off / 64) {
                size_t len = off % 7;
                ssize_t want =
                    off >= size[f] ? 0 : (ssize_t)(size[f] - off < len ? size[f] - off : len);
                assert_int_equal(idx_extract(x, (uint32_t)e, off, buf, len), want);
                if (want > 0) assert_memory_equal(buf, content[f] + off, (size_t)want);
            }
            /* sequential reads through one cursor in odd-sized steps */
            size_t pos = 0;
            while (pos < size[f]) {
                size_t step = 1 + tu_rand(&seed) % 3000;
                ssize_t k = idx_read(x, &c, (uint32_t)e, pos, buf, step);
                assert_true(k > 0);
                assert_memory_equal(buf, content[f] + pos, (size_t)k);
                pos += (size_t)k;
            }
            assert_int_equal(idx_read(x, &c, (uint32_t)e, pos, buf, 10), 0);
        }
        /* a directory is not readable as a file */
        assert_int_equal(idx_extract(x, 0, 0, buf, 10), -EINVAL);
        idx_cursor_free(&c);
        /* the repetitive file nests rules; computed on demand, the same for every budget */
        static uint32_t depth;
        if (bi == 0) depth = idx_depth(x);
        assert_true(depth > 3);
        assert_int_equal(idx_depth(x), depth);
        if (bi == 0) assert_int_equal(idx_flat_max(x), 0);
        if (bi == 2) assert_true(idx_flat_max(x) > 0);
        idx_free(x);
    }
    free(buf);
    free_test_files(a);
}

typedef struct reader_job {
    const idx *x;
    const arc *a;
    int rounds;
    int bad; /* reads that differed from the content */
} reader_job;

/* Read every file through one cursor in small steps, `rounds` times. */
static void *read_files(void *p)
{
    reader_job *j = p;
    unsigned char buf[777];
    idx_cursor c;
    idx_cursor_init(&c);
    for (int round = 0; round < j->rounds; round++)
        for (int f = 0; f < NF; f++) {
            uint32_t e = (uint32_t)arc_lookup(j->a, names[f]);
            for (size_t pos = 0; pos < size[f];) {
                ssize_t k = idx_read(j->x, &c, e, pos, buf, sizeof buf);
                if (k <= 0 || memcmp(buf, content[f] + pos, (size_t)k)) {
                    j->bad++;
                    break;
                }
                pos += (size_t)k;
            }
        }
    idx_cursor_free(&c);
    return NULL;
}

/* The cache published while a cursor stands inside a file, and while another thread reads:
 * with a budget of `budget` bytes (two stages when a quarter of it holds fewer rules). */
static void cache_published_midway(uint64_t budget, uint64_t seed)
{
    arc *a = pack_test_files(&seed);
    idx *x;
    assert_int_equal(idx_build_base(a, &x), 0);
    assert_int_equal(idx_flat_max(x), 0);
    uint32_t e = (uint32_t)arc_lookup(a, "words");
    unsigned char buf[1000];
    idx_cursor c;
    idx_cursor_init(&c);
    assert_int_equal(idx_read(x, &c, e, 0, buf, 333), 333);
    assert_memory_equal(buf, content[4], 333);
    reader_job j = {x, a, 20, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_files, &j), 0);
    assert_int_equal(idx_build_flat(x, budget, NULL), 0);
    uint32_t max = idx_flat_max(x);
    uint64_t mem = idx_mem(x);
    assert_true(max > 0);
    /* A second build finds the cache published and keeps it (no second cache, no leak). */
    assert_int_equal(idx_build_flat(x, budget, NULL), 0);
    assert_int_equal(idx_flat_max(x), max);
    assert_int_equal(idx_mem(x), mem);
    for (size_t pos = 333; pos < size[4];) {
        ssize_t k = idx_read(x, &c, e, pos, buf, sizeof buf);
        assert_true(k > 0);
        assert_memory_equal(buf, content[4] + pos, (size_t)k);
        pos += (size_t)k;
    }
    pthread_join(th, NULL);
    assert_int_equal(j.bad, 0);
    idx_cursor_free(&c);
    idx_free(x);
    free_test_files(a);
}

static void test_cache_published_midway(void **state)
{
    (void)state;
    cache_published_midway(IDX_CACHE_DEFAULT, 11);
    for (uint64_t budget = 4096; budget <= (1 << 20); budget *= 8)
        cache_published_midway(budget, 17 + budget);
}

static void test_cache_build_cancelled(void **state)
{
    (void)state;
    uint64_t seed = 13;
    arc *a = pack_test_files(&seed);
    idx *x;
    int cancel = 1;
    assert_int_equal(idx_build_base(a, &x), 0);
    assert_int_equal(idx_build_flat(x, IDX_CACHE_DEFAULT, &cancel), -ECANCELED);
    assert_int_equal(idx_flat_max(x), 0);
    reader_job j = {x, a, 1, 0};
    read_files(&j);
    assert_int_equal(j.bad, 0);
    idx_free(x);
    free_test_files(a);
}

/* A root long enough to be summed in pieces on several threads (idx.c's root_lengths): files
 * of distinct numbers, so that the grammar finds few repeats and the root keeps nearly one
 * symbol per token. Every file's offset and size come out of the pieces' sums, and reads at
 * random offsets descend through samples shifted by the pieces before theirs. */
static void test_long_root(void **state)
{
    (void)state;
    enum { LF = 3, LSIZE = 400000 };
    char *dir = tu_tmppath("longroot"), *ar = tu_tmppath("longroot.tdc"), path[4096];
    mkdir(dir, 0755);
    unsigned char *text[LF];
    uint64_t seed = 11, n = 0;
    for (int f = 0; f < LF; f++) {
        text[f] = malloc(LSIZE + 16);
        size_t i = 0;
        while (i < LSIZE) {
            unsigned long long num = n++ * 7919 % 100000000;
            i += (size_t)sprintf((char *)text[f] + i, "%08llu%c", num, " \n,"[tu_rand(&seed) % 3]);
        }
        snprintf(path, sizeof path, "%s/f%d", dir, f);
        FILE *fp = fopen(path, "wb");
        fwrite(text[f], 1, LSIZE, fp);
        fclose(fp);
    }
    pack_opts o = {0};
    pack_stats st;
    arc *a;
    assert_int_equal(pack_dir(dir, ar, &o, &st), 0);
    assert_int_equal(arc_open(ar, &a), 0);
    assert_true(a->g.root.n > 4 * 65536);
    idx *x;
    assert_int_equal(idx_build_base(a, &x), 0);
    unsigned char *buf = malloc(LSIZE);
    for (int f = 0; f < LF; f++) {
        snprintf(path, sizeof path, "f%d", f);
        int64_t e = arc_lookup(a, path);
        assert_true(e > 0);
        assert_int_equal(idx_run_bytes(x, (uint32_t)e), LSIZE);
        assert_int_equal(idx_extract(x, (uint32_t)e, 0, buf, LSIZE), LSIZE);
        assert_memory_equal(buf, text[f], LSIZE);
        for (int k = 0; k < 2000; k++) {
            size_t off = tu_rand(&seed) % LSIZE, len = 1 + tu_rand(&seed) % 100;
            if (len > LSIZE - off) len = LSIZE - off;
            assert_int_equal(idx_extract(x, (uint32_t)e, off, buf, len), len);
            assert_memory_equal(buf, text[f] + off, len);
        }
        free(text[f]);
    }
    free(buf);
    idx_free(x);
    arc_free(a);
    snprintf(path, sizeof path, "rm -rf '%s' '%s'", dir, ar);
    assert_int_equal(system(path), 0);
    free(dir);
    free(ar);
}

/* Rules that expand to 2^32 bytes or more (their lengths do not fit the length pass's table
 * of 32-bit lengths and are looked up in the index's own): a grammar built by hand where rule
 * r doubles rule r - 1, and a file of rule 33 (8 GiB of 'a') then rule 1 and a token. */
static void test_huge_rules(void **state)
{
    (void)state;
    enum { NR = 33 };
    arc *a = calloc(1, sizeof *a);
    uint32_t id;
    assert_non_null(a);
    a->fd = -1;
    assert_non_null(a->dict = dict_new());
    assert_int_equal(dict_intern(a->dict, (const unsigned char *)"a", 1, &id), 0);
    gram *g = &a->g;
    g->ntokens = 1;
    g->nrules = NR;
    assert_int_equal(vec64_push(&g->rule_start, 0), 0);
    for (uint32_t r = 1; r <= NR; r++) {
        uint32_t half = r == 1 ? 0 : g->ntokens + r - 1;
        assert_int_equal(vec32_push(&g->syms, half), 0);
        assert_int_equal(vec32_push(&g->syms, half), 0);
        assert_int_equal(vec64_push(&g->rule_start, g->syms.n), 0);
    }
    const uint32_t root[] = {g->ntokens + NR, g->ntokens + 1, 0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(vec32_push(&g->root, root[i]), 0);
    const uint64_t size = ((uint64_t)1 << NR) + 3;
    a->nents = 2;
    assert_non_null(a->ents = calloc(2, sizeof *a->ents));
    a->ents[0] = (arc_entry){.path = strdup(""), .type = ARC_DIR, .mode = 0755, .ino = 1};
    a->ents[1] = (arc_entry){.path = strdup("f"), .type = ARC_REG, .mode = 0644, .size = size,
                             .root_len = 3, .ino = 2};
    assert_int_equal(arc_finish(a), 0);
    idx *x;
    assert_int_equal(idx_build_base(a, &x), 0);
    assert_true(idx_rule_len(x, 32) == (uint64_t)1 << 32);
    assert_true(idx_rule_len(x, NR) == (uint64_t)1 << NR);
    assert_true(idx_run_bytes(x, 1) == size);
    char b[8];
    assert_int_equal(idx_extract(x, 1, size - 5, b, 8), 5);
    assert_memory_equal(b, "aaaaa", 5);
    idx_free(x);
    arc_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_extract_all),
                                       cmocka_unit_test(test_cache_published_midway),
                                       cmocka_unit_test(test_cache_build_cancelled),
                                       cmocka_unit_test(test_long_root),
                                       cmocka_unit_test(test_huge_rules)};
    return cmocka_run_group_tests_name("idx", tests, NULL, NULL);
}
