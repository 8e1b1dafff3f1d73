/* The public API of libtadoc (include/tadoc.h) on a small packed tree: entries and stat,
 * reads at offsets, every analytic against the engine's own output, count and search, and
 * the error of each call on bad input. Compiled against the public header only, apart from
 * pack_dir and ana_* (to make the archive and the reference outputs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <sys/stat.h>

#include "../../engine/analytics/ana.h"
#include "../../engine/format/arc.h"
#include "../../engine/build/pack.h"
#include "../../include/tadoc.h"
#include "testutil.h"

static char *dir, *archive;
static const char *text_a = "the quick brown fox jumps over the lazy dog\nthe quick brown fox\n";

static void put(const char *name, const char *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(s, 1, strlen(s), f), strlen(s));
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    dir = tu_tmppath("apitree");
    archive = tu_tmppath("api.tdc");
    mkdir(dir, 0755);
    put("a.txt", text_a);
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0700);
    put("sub/b.txt", "fox and dog, dog and fox");
    char link[4096];
    snprintf(link, sizeof link, "%s/ln", dir);
    if (symlink("a.txt", link)) return -1;
    pack_stats st;
    return pack_dir(dir, archive, NULL, &st) ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, archive);
    if (system(cmd)) return -1;
    free(dir);
    free(archive);
    return 0;
}

static void test_entries(void **state)
{
    (void)state;
    tadoc_archive *a;
    assert_int_equal(tadoc_open(archive, &a), 0);
    assert_string_equal(tadoc_version(), "0.1.0");
    /* "", a.txt, ln, sub, sub/b.txt */
    assert_int_equal(tadoc_entry_count(a), 5);
    tadoc_stat st;
    assert_int_equal(tadoc_entry(a, 0, &st), 0);
    assert_string_equal(st.path, "");
    assert_int_equal(st.type, TADOC_DIR);
    assert_int_equal(tadoc_stat_path(a, "/a.txt", &st), 0);
    assert_int_equal(st.type, TADOC_REG);
    assert_int_equal(st.size, strlen(text_a));
    assert_int_equal(st.nlink, 1);
    assert_null(st.link);
    assert_int_equal(tadoc_stat_path(a, "ln", &st), 0);
    assert_int_equal(st.type, TADOC_LNK);
    assert_string_equal(st.link, "a.txt");
    assert_int_equal(tadoc_stat_path(a, "sub", &st), 0);
    assert_int_equal(st.type, TADOC_DIR);
    assert_int_equal(st.mode, 0700);
    assert_int_equal(tadoc_stat_path(a, "nope", &st), -ENOENT);
    assert_non_null(strstr(tadoc_errmsg(), "nope"));
    assert_int_equal(tadoc_entry(a, 5, &st), -EINVAL);
    tadoc_close(a);
    tadoc_close(NULL);
}

static void test_read(void **state)
{
    (void)state;
    tadoc_archive *a;
    assert_int_equal(tadoc_open(archive, &a), 0);
    char b[128];
    size_t n = strlen(text_a);
    for (size_t off = 0; off <= n + 2; off++) {
        ssize_t r = tadoc_read(a, "a.txt", off, b, 7);
        size_t want = off >= n ? 0 : n - off < 7 ? n - off : 7;
        assert_int_equal(r, (ssize_t)want);
        assert_memory_equal(b, text_a + (off < n ? off : n), want);
    }
    assert_int_equal(tadoc_read(a, "sub", 0, b, 4), -EISDIR);
    assert_int_equal(tadoc_read(a, "missing", 0, b, 4), -ENOENT);
    tadoc_close(a);
}

static void test_analytics(void **state)
{
    (void)state;
    static int (*const fn[])(ana_ctx *, const arc *, uint32_t, uint32_t, const unsigned char *,
                             buf *) = {
        NULL,           ana_wordcount, ana_sort,          ana_invindex,
        ana_termvector, ana_seqcount,  ana_rankedinvindex};
    tadoc_archive *t;
    arc *ref;
    assert_int_equal(tadoc_open(archive, &t), 0);
    assert_int_equal(arc_open(archive, &ref), 0);
    const char *scopes[] = {NULL, "", "sub", "/sub/b.txt"};
    for (int k = TADOC_WORDCOUNT; k <= TADOC_RANKEDINVINDEX; k++)
        for (size_t s = 0; s < 4; s++) {
            char *out;
            size_t len;
            assert_int_equal(tadoc_analytic(t, k, scopes[s], &out, &len), 0);
            int64_t first = s < 2 ? 0 : arc_lookup(ref, scopes[s] + (scopes[s][0] == '/'));
            assert_true(first >= 0);
            buf want = {0};
            assert_int_equal(
                fn[k](NULL, ref, (uint32_t)first, ana_subtree_end(ref, (uint32_t)first), NULL,
                      &want),
                0);
            assert_int_equal(len, want.n);
            assert_memory_equal(out, want.p, len);
            assert_int_equal(out[len], 0);
            buf_free(&want);
            tadoc_free(out);
        }
    char *out;
    size_t len;
    assert_int_equal(tadoc_analytic(t, TADOC_WORDCOUNT, "sub", &out, &len), 0);
    assert_string_equal(out, "2\tand\n2\tdog\n2\tfox\n");
    tadoc_free(out);
    assert_int_equal(tadoc_analytic(t, 99, NULL, &out, &len), -EINVAL);
    assert_null(out);
    assert_int_equal(tadoc_analytic(t, TADOC_SORT, "nope", &out, &len), -ENOENT);
    arc_free(ref);
    tadoc_close(t);
}

static void test_words(void **state)
{
    (void)state;
    tadoc_archive *a;
    assert_int_equal(tadoc_open(archive, &a), 0);
    uint64_t c, *offs;
    size_t n;
    assert_int_equal(tadoc_count(a, "a.txt", "fox", &c), 0);
    assert_int_equal(c, 2);
    assert_int_equal(tadoc_search(a, "a.txt", "fox", &offs, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(offs[0], 16);
    assert_int_equal(offs[1], 60);
    tadoc_free(offs);
    assert_int_equal(tadoc_count(a, "sub/b.txt", "unicorn", &c), 0);
    assert_int_equal(c, 0);
    assert_int_equal(tadoc_search(a, "sub/b.txt", "unicorn", &offs, &n), 0);
    assert_int_equal(n, 0);
    tadoc_free(offs);
    assert_int_equal(tadoc_count(a, "sub", "fox", &c), -EISDIR);
    assert_int_equal(tadoc_search(a, "nope", "fox", &offs, &n), -ENOENT);
    tadoc_close(a);
}

static void test_open_errors(void **state)
{
    (void)state;
    tadoc_archive *a = (tadoc_archive *)1;
    assert_int_equal(tadoc_open("/nonexistent/x.tdc", &a), -ENOENT);
    assert_null(a);
    assert_true(tadoc_open(dir, &a) < 0); /* a directory */
    assert_null(a);
    /* A file that is no archive is reported as corrupt. */
    char *junk = tu_tmppath("junk.tdc");
    FILE *f = fopen(junk, "wb");
    assert_non_null(f);
    fputs("this is not an archive, only some text long enough for a header\n", f);
    fclose(f);
    assert_int_equal(tadoc_open(junk, &a), -EBADMSG);
    assert_null(a);
    assert_true(strlen(tadoc_errmsg()) > 0);
    unlink(junk);
    free(junk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries),     cmocka_unit_test(test_read),
        cmocka_unit_test(test_analytics),   cmocka_unit_test(test_words),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests_name("api", tests, setup, teardown);
}
