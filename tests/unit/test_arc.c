#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "../../engine/arc.h"
#include "../../engine/err.h"
#include "../../engine/pack.h"
#include "../../index/idx.h"
#include "testutil.h"

static char *dir, *archive;
static unsigned char *image;
static size_t image_n;

static void put(const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    dir = tu_tmppath("tree");
    archive = tu_tmppath("a.tdc");
    mkdir(dir, 0755);
    const char *t = "the quick brown fox jumps over the lazy dog\nthe quick brown fox\n";
    put("a.txt", t, strlen(t));
    put("empty", "", 0);
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0700);
    put("sub/b.txt", "no newline at end", 17);
    pack_stats st;
    if (pack_dir(dir, archive, NULL, &st)) return -1;
    image = tu_slurp(archive, &image_n);
    return image ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, archive);
    if (system(cmd)) return -1;
    free(image);
    free(dir);
    free(archive);
    return 0;
}

static void test_open_entries(void **state)
{
    (void)state;
    arc *a;
    assert_int_equal(arc_open(archive, &a), 0);
    assert_int_equal(a->nents, 5);
    assert_string_equal(a->ents[0].path, "");
    assert_string_equal(a->ents[1].path, "a.txt");
    assert_string_equal(a->ents[2].path, "empty");
    assert_string_equal(a->ents[3].path, "sub");
    assert_string_equal(a->ents[4].path, "sub/b.txt");
    assert_int_equal(a->ents[3].type, ARC_DIR);
    assert_int_equal(a->ents[3].mode, 0700);
    assert_int_equal(a->ents[2].size, 0);
    assert_int_equal(arc_lookup(a, "sub/b.txt"), 4);
    assert_int_equal(arc_lookup(a, "sub/c"), -ENOENT);
    idx *x;
    assert_int_equal(idx_build(a, &x), 0);
    char out[32] = {0};
    assert_int_equal(idx_extract(x, 4, 3, out, 100), 14);
    assert_string_equal(out, "newline at end");
    idx_free(x);
    arc_free(a);
}

/* Write `n` bytes of the image (with byte `flip` xored, unless SIZE_MAX) and try to open. */
static int try_image(size_t n, size_t flip)
{
    char *p = tu_tmppath("bad.tdc");
    FILE *f = fopen(p, "wb");
    if (flip != SIZE_MAX) image[flip] ^= 0x20;
    fwrite(image, 1, n, f);
    fclose(f);
    if (flip != SIZE_MAX) image[flip] ^= 0x20;
    arc *a = NULL;
    int rc = arc_open(p, &a);
    if (!rc) arc_free(a);
    unlink(p);
    free(p);
    return rc;
}

/* Every byte is covered by a checksum: any single flipped byte is caught. */
static void test_every_flip(void **state)
{
    (void)state;
    for (size_t i = 0; i < image_n; i++) {
        int rc = try_image(image_n, i);
        if (rc != -EBADMSG) fail_msg("flip at %zu: rc %d (%s)", i, rc, tdc_errmsg());
    }
}

static void test_every_truncation(void **state)
{
    (void)state;
    for (size_t n = 0; n < image_n; n++) {
        int rc = try_image(n, SIZE_MAX);
        if (rc != -EBADMSG) fail_msg("truncated to %zu: rc %d", n, rc);
    }
    assert_int_equal(try_image(image_n, SIZE_MAX), 0);
}

static void test_messages(void **state)
{
    (void)state;
    size_t sec_off = le64(image + 16) + 0 * 40 + 8; /* dictionary's offset field */
    uint64_t dict_at = le64(image + sec_off);
    assert_int_equal(try_image(image_n, 0), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "bad magic"));
    assert_int_equal(try_image(image_n, (size_t)dict_at), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "section dictionary: checksum mismatch"));
    assert_int_equal(try_image(10, SIZE_MAX), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "too short"));
}

static void test_paths(void **state)
{
    (void)state;
    assert_int_equal(arc_path_check("a/b"), 0);
    assert_int_equal(arc_path_check("a/../b"), -EINVAL);
    assert_int_equal(arc_path_check("/etc"), -EINVAL);
    assert_int_equal(arc_path_check("a//b"), -EINVAL);
    assert_int_equal(arc_path_check("./a"), -EINVAL);
    assert_int_equal(arc_path_check("..."), 0);
    assert_true(arc_path_cmp("a/b", "a-b") < 0);
    assert_true(arc_path_cmp("a", "a/b") < 0);
    assert_true(arc_path_cmp("a\xff", "ab") > 0);
    assert_int_equal(arc_path_cmp("x", "x"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_entries),
        cmocka_unit_test(test_every_flip),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests_name("arc", tests, setup, teardown);
}
