#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>

#include <errno.h>

#include "../../engine/arc.h"
#include "../../engine/pack.h"
#include "../../index/idx.h"
#include "testutil.h"

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

static void test_extract_all(void **state)
{
    (void)state;
    uint64_t seed = 7;
    char *dir = tu_tmppath("idxtree"), *ar = tu_tmppath("idx.tdc"), path[4096];
    mkdir(dir, 0755);
    make(&seed);
    for (int f = 0; f < NF; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        FILE *fp = fopen(path, "wb");
        fwrite(content[f], 1, size[f], fp);
        fclose(fp);
    }
    pack_opts o = {.seg_tokens = 4096}; /* many segments: files span segment boundaries */
    pack_stats st;
    assert_int_equal(pack_dir(dir, ar, &o, &st), 0);
    assert_true(st.segments > 3);
    arc *a;
    idx *x;
    assert_int_equal(arc_open(ar, &a), 0);
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
        if (bi == 0) assert_int_equal(idx_flat_max(x), 0);
        if (bi == 2) assert_true(idx_flat_max(x) > 0);
        idx_free(x);
    }
    free(buf);
    arc_free(a);
    snprintf(path, sizeof path, "rm -rf '%s' '%s'", dir, ar);
    assert_int_equal(system(path), 0);
    for (int f = 0; f < NF; f++)
        free(content[f]);
    free(dir);
    free(ar);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_extract_all)};
    return cmocka_run_group_tests_name("idx", tests, NULL, NULL);
}
