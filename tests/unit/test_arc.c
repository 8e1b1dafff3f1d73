#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "../../engine/format/arc.h"
#include "../../engine/base/err.h"
#include "../../engine/build/pack.h"
#include "../../engine/index/idx.h"
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
    arc_header h;
    arc_secinfo dict; /* section 0: the dictionary */
    assert_int_equal(arc_header_decode(image, &h), 0);
    arc_secent_decode(image + h.table, &dict);
    uint64_t dict_at = dict.offset;
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

/* Rewrite section `i`'s codec and stored bytes in an archive image, recomputing the section
 * and table checksums (the table keeps its place: `n` stored bytes replace as many). */
static void reseal(unsigned char *img, size_t len, uint32_t i, uint32_t codec)
{
    arc_header h;
    arc_secinfo s;
    arc_header_decode(img, &h);
    unsigned char *e = img + h.table + i * ARC_SECENT_SIZE;
    arc_secent_decode(e, &s);
    s.codec = codec;
    s.hash = XXH3_64bits(img + s.offset, s.stored);
    arc_secent_encode(e, &s);
    arc_table_seal(img + h.table, h.nsec);
    assert_true(h.table + h.nsec * ARC_SECENT_SIZE + 8 == len);
}

/* Open an image written to a file: the return code, the message in tdc_errmsg. */
static int open_image(const unsigned char *img, size_t len)
{
    char *p = tu_tmppath("codec.tdc");
    FILE *f = fopen(p, "wb");
    fwrite(img, 1, len, f);
    fclose(f);
    arc *a = NULL;
    int rc = arc_open(p, &a);
    if (!rc) arc_free(a);
    unlink(p);
    free(p);
    return rc;
}

/* A dictionary of many words that share prefixes is stored front coded (codec
 * "zstd-front"), reads back, and extracts; the same archive with the codec id on another
 * section, an unknown codec id, or damage inside the coded dictionary behind valid
 * checksums fails with a message. */
static void test_front_codec(void **state)
{
    (void)state;
    char *tree = tu_tmppath("fronttree"), *out = tu_tmppath("front.tdc"), path[8300];
    mkdir(tree, 0755);
    snprintf(path, sizeof path, "%s/words.txt", tree);
    FILE *f = fopen(path, "w");
    uint64_t seed = 7;
    for (int i = 0; i < 20000; i++)
        fprintf(f, "%s%llu%c", i % 3 ? "interconnection" : "prefix",
                (unsigned long long)(tu_rand(&seed) % 50000), i % 10 ? ' ' : '\n');
    fclose(f);
    pack_stats st;
    assert_int_equal(pack_dir(tree, out, NULL, &st), 0);
    arc *a;
    assert_int_equal(arc_open(out, &a), 0);
    assert_string_equal(arc_codec_name(a->secs[0].codec), "zstd-front");
    assert_string_equal(arc_codec_name(a->secs[1].codec), "zstd");
    idx *x;
    assert_int_equal(idx_build(a, &x), 0);
    size_t len = 0;
    unsigned char *want = tu_slurp(path, &len);
    char *got = malloc(len);
    assert_int_equal(idx_extract(x, 1, 0, got, len), (int64_t)len);
    assert_memory_equal(got, want, len);
    idx_free(x);
    arc_free(a);

    size_t n = 0;
    unsigned char *img = tu_slurp(out, &n);
    assert_int_equal(open_image(img, n), 0);
    reseal(img, n, 1, 2); /* front coding on the rules */
    assert_int_equal(open_image(img, n), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "front coding applies to the dictionary only"));
    reseal(img, n, 1, 1);
    reseal(img, n, 0, 3); /* a codec this reader does not know */
    assert_int_equal(open_image(img, n), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "bad table entry"));
    reseal(img, n, 0, 1); /* the front coding read as the plain encoding */
    assert_int_equal(open_image(img, n), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "section dictionary: compressed frame does not match"));
    /* bytes all through the coded dictionary damaged in turn (about 300), checksums fixed */
    arc_header h;
    arc_secinfo s;
    arc_header_decode(img, &h);
    arc_secent_decode(img + h.table, &s);
    uint64_t at = s.offset, stored = s.stored;
    for (uint64_t k = 0; k < stored; k += 1 + stored / 300) {
        img[at + k] ^= 0x10;
        reseal(img, n, 0, 2);
        int rc = open_image(img, n);
        if (rc) {
            assert_int_equal(rc, -EBADMSG);
            assert_non_null(strstr(tdc_errmsg(), "dictionary"));
        }
        img[at + k] ^= 0x10;
    }
    reseal(img, n, 0, 2);
    assert_int_equal(open_image(img, n), 0);
    free(img);
    free(want);
    free(got);
    snprintf(path, sizeof path, "rm -rf '%s' '%s'", tree, out);
    assert_int_equal(system(path), 0);
    free(tree);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_entries),
        cmocka_unit_test(test_every_flip),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_front_codec),
    };
    return cmocka_run_group_tests_name("arc", tests, setup, teardown);
}
