#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "../../engine/format/arc.h"
#include "../../engine/format/syms.h"
#include "../../engine/base/err.h"
#include "../../engine/build/pack.h"
#include "../../engine/index/idx.h"
#include "testutil.h"

static char *dir, *archive;
static unsigned char *image;
static size_t image_n;

static void put(const char *name, const void *p, size_t n)
{
    assert_int_equal(tu_put(dir, name, p, n), 0);
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
    uint32_t parent[5];
    assert_int_equal(arc_parents(a, parent), 0);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(parent[i], i == 4 ? 3 : 0);
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
    assert_string_equal(arc_codec_name(a->secs[1].codec), "zstd-kind");
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
    assert_non_null(strstr(tdc_errmsg(), "bad table entry"));
    reseal(img, n, 1, 4);
    reseal(img, n, 0, 4); /* the kind layout on the dictionary */
    assert_int_equal(open_image(img, n), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "bad table entry"));
    reseal(img, n, 0, 5); /* a codec this reader does not know */
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

/* Decode raw rules and root sections into a fresh grammar of `nt` tokens over d: the return
 * code (the grammar is freed). */
static int decode_raw(const dict *d, uint32_t nt, const buf *rules, const buf *root)
{
    gram g = {.ntokens = nt};
    syms_kinds *k = NULL;
    int rc = syms_dec_rules(&g, d->word.p, rules->p, rules->n, &k, NULL, NULL);
    if (!rc) rc = syms_dec_root(&g, k, root->p, root->n);
    syms_kinds_free(k);
    gram_free(&g);
    return rc;
}

/* Write a's one shard again with the given raw rules and root sections stored as they are, in
 * the kind layout (codec 3, "kind"), checksums valid. */
static void write_raw_kind(arc *a, const buf *rules, const buf *root, const char *path)
{
    arc_coded c;
    assert_int_equal(arc_shard_encode(a->dict, &a->g, a->shards[0].bytes, 3, 0, &c), 0);
    const buf *b[3] = {NULL, rules, root};
    for (int i = 1; i < 3; i++) {
        free(c.data[i]);
        c.data[i] = malloc(b[i]->n);
        memcpy(c.data[i], b[i]->p, b[i]->n);
        c.secs[i].codec = 3;
        c.secs[i].stored = c.secs[i].raw = b[i]->n;
        c.secs[i].hash = XXH3_64bits(c.data[i], b[i]->n);
    }
    assert_int_equal(arc_write_coded(path, a, &c, 1, 3), 0);
    arc_coded_free(&c);
}

/* The kind layout: where the alternation of words and separators breaks (words and
 * separator runs longer than a token, files that start with a separator, one-token files),
 * every file still reads back byte for byte; rules and root in different layouts are refused
 * at open; the raw kind layout, damaged byte by byte, decodes or fails with -EBADMSG, directly
 * and through a whole archive's load. */
static void test_kind_layout(void **state)
{
    (void)state;
    char *tree = tu_tmppath("kindtree"), *out = tu_tmppath("kind.tdc"), path[8300];
    mkdir(tree, 0755);
    buf t[6] = {{0}};
    uint64_t seed = 11;
    for (int i = 0; i < 3000; i++) { /* words and runs of up to 3 tokens, some cut */
        size_t n = tu_rand(&seed) % 40 == 0 ? 1000 + tu_rand(&seed) % 2200 : 1 + tu_rand(&seed) % 6;
        int word = i % 2;
        for (size_t j = 0; j < n; j++)
            buf_put(&t[0], word ? "abcxyz" + tu_rand(&seed) % 3 : " .,\n" + tu_rand(&seed) % 3, 1);
    }
    buf_put(&t[1], "  leading separators, then words\n", 33);
    buf_put(&t[2], "x", 1);
    buf_put(&t[3], "-", 1);
    for (int i = 0; i < 2500; i++)
        buf_put(&t[4], "w", 1); /* one word of 2500 bytes: three tokens in a row */
    buf_put(&t[5], "the end of the test\n", 20);
    for (int f = 0; f < 6; f++) {
        snprintf(path, sizeof path, "%s/f%d", tree, f);
        FILE *fp = fopen(path, "wb");
        assert_int_equal(fwrite(t[f].p, 1, t[f].n, fp), t[f].n);
        fclose(fp);
    }
    pack_stats st;
    assert_int_equal(pack_dir(tree, out, NULL, &st), 0);
    arc *a;
    assert_int_equal(arc_open(out, &a), 0);
    assert_non_null(strstr(arc_codec_name(a->secs[1].codec), "kind"));
    assert_non_null(strstr(arc_codec_name(a->secs[2].codec), "kind"));
    idx *x;
    assert_int_equal(idx_build(a, &x), 0);
    for (int f = 0; f < 6; f++) {
        snprintf(path, sizeof path, "f%d", f);
        int64_t e = arc_lookup(a, path);
        assert_true(e >= 0);
        char *got = malloc(t[f].n);
        assert_int_equal(idx_extract(x, (uint32_t)e, 0, got, t[f].n), (ssize_t)t[f].n);
        assert_memory_equal(got, t[f].p, t[f].n);
        free(got);
    }
    idx_free(x);

    /* the raw kind layout round trips, and every damaged byte (about 600 of them) decodes to
     * some grammar or fails with -EBADMSG */
    buf rules = {0}, root = {0};
    syms_kinds *k;
    assert_int_equal(syms_enc_rules(&a->g, a->dict, 1, &rules, &k), 0);
    assert_int_equal(syms_enc_root(&a->g, k, &root), 0);
    syms_kinds_free(k);
    gram g = {.ntokens = a->g.ntokens};
    assert_int_equal(syms_dec_rules(&g, a->dict->word.p, rules.p, rules.n, &k, NULL, NULL), 0);
    assert_int_equal(syms_dec_root(&g, k, root.p, root.n), 0);
    syms_kinds_free(k);
    assert_int_equal(g.syms.n, a->g.syms.n);
    assert_memory_equal(g.syms.p, a->g.syms.p, 4 * g.syms.n);
    assert_int_equal(g.root.n, a->g.root.n);
    assert_memory_equal(g.root.p, a->g.root.p, 4 * g.root.n);
    gram_free(&g);
    buf *secs[2] = {&rules, &root};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < secs[s]->n; i += 1 + secs[s]->n / 300) {
            secs[s]->p[i] ^= 0x21;
            int rc = decode_raw(a->dict, a->g.ntokens, &rules, &root);
            assert_true(rc == 0 || rc == -EBADMSG);
            secs[s]->p[i] ^= 0x21;
        }
    assert_int_equal(decode_raw(a->dict, a->g.ntokens, &rules, &root), 0);

    /* stored raw (codec "kind") the archive loads, its root decoded on the load's second
     * thread while the rules are; damaged rules fail the load whether they fail before
     * their kinds are known (the root then never starts) or after */
    char *rp = tu_tmppath("rawkind.tdc");
    write_raw_kind(a, &rules, &root, rp);
    arc *b;
    assert_int_equal(arc_open(rp, &b), 0);
    assert_string_equal(arc_codec_name(b->secs[1].codec), "kind");
    assert_int_equal(b->g.root.n, a->g.root.n);
    assert_memory_equal(b->g.root.p, a->g.root.p, 4 * a->g.root.n);
    arc_free(b);
    for (size_t i = 0; i < rules.n; i += 1 + rules.n / 40) {
        rules.p[i] ^= 0x21;
        write_raw_kind(a, &rules, &root, rp);
        int rc = arc_open(rp, &b);
        assert_true(rc == 0 || rc == -EBADMSG);
        if (!rc) arc_free(b);
        rules.p[i] ^= 0x21;
    }
    unlink(rp);
    free(rp);
    buf_free(&rules);
    buf_free(&root);
    arc_free(a);

    /* rules and root of one shard in different layouts */
    size_t n = 0;
    unsigned char *img = tu_slurp(out, &n);
    arc_header h;
    arc_secinfo s;
    arc_header_decode(img, &h);
    arc_secent_decode(img + h.table + ARC_SECENT_SIZE, &s);
    reseal(img, n, 1, s.codec == 4 ? 1 : 0);
    assert_int_equal(open_image(img, n), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "rules in the plain layout but root in the kind one"));
    free(img);
    for (int f = 0; f < 6; f++)
        buf_free(&t[f]);
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
        cmocka_unit_test(test_kind_layout),
    };
    return cmocka_run_group_tests_name("arc", tests, setup, teardown);
}
