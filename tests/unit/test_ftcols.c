/* The file table's column layout (engine/format/ftcols.c): rows of every kind of entry come
 * back exactly, and damaged columns are refused, never read or written out of bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/base/err.h"
#include "../../engine/format/arc.h"
#include "../../engine/format/ftcols.h"
#include "testutil.h"

/* Rows of n random entries (every type, devices with rdev, symlinks, xattrs, runs in order
 * and out of order, negative and huge times, large inode gaps), as the writer lays them out. */
static void random_rows(uint64_t *seed, int n, buf *rows)
{
    rows->n = 0;
    assert_int_equal(buf_put_u64(rows, tu_rand(seed)), 0);
    assert_int_equal(buf_put_u64(rows, tu_rand(seed) % 3 ? 0 : tu_rand(seed)), 0);
    assert_int_equal(buf_put_varint(rows, tu_rand(seed) >> (tu_rand(seed) % 64)), 0);
    assert_int_equal(buf_put_varint(rows, (uint64_t)n), 0);
    char path[64] = "", prev[64] = "", link[16];
    uint64_t start = 0, ino = 0;
    for (int i = 0; i < n; i++) {
        arc_entry e = {0};
        e.type = (uint8_t)(1 + tu_rand(seed) % 7);
        /* paths that share prefixes with the one before */
        size_t keep = strlen(prev) ? tu_rand(seed) % (strlen(prev) + 1) : 0;
        memcpy(path, prev, keep);
        size_t add = tu_rand(seed) % 12;
        for (size_t k = 0; k < add && keep + k < sizeof path - 1; k++)
            path[keep + k] = (char)("ab/c.d"[tu_rand(seed) % 6]);
        path[keep + add < sizeof path - 1 ? keep + add : sizeof path - 1] = 0;
        strcpy(prev, path);
        e.path = path;
        e.mode = (uint32_t)(tu_rand(seed) % 07777);
        e.uid = (uint32_t)(tu_rand(seed) % 4 ? 1000 : tu_rand(seed));
        e.gid = e.uid;
        e.mtime_sec = tu_rand(seed) % 5 ? 1700000000 + (int64_t)(tu_rand(seed) % 1000)
                                        : (int64_t)tu_rand(seed);
        e.mtime_nsec = (uint32_t)(tu_rand(seed) % 1000000000);
        e.size = tu_rand(seed) % 100000;
        if (e.type == ARC_REG && tu_rand(seed) % 4) {
            e.root_len = tu_rand(seed) % 1000;
            e.root_start = tu_rand(seed) % 5 ? start : tu_rand(seed) % 100000;
            start = e.root_start + e.root_len;
        }
        e.shard = (uint32_t)(tu_rand(seed) % 6 ? (uint64_t)i / 10 : tu_rand(seed) % 50);
        e.hash = tu_rand(seed);
        if (e.type == ARC_LNK) {
            snprintf(link, sizeof link, "t%u", (unsigned)(tu_rand(seed) % 1000));
            e.link = link;
        }
        ino += tu_rand(seed) % 8 ? 1u : tu_rand(seed) % 3 ? 0u : tu_rand(seed) >> 4;
        e.ino = ino;
        if (e.type == ARC_CHR || e.type == ARC_BLK) e.rdev = tu_rand(seed) >> (tu_rand(seed) % 64);
        arc_xattr x[2] = {{(char *)"a", (unsigned char *)"v1", 2}, {(char *)"b", NULL, 0}};
        if (tu_rand(seed) % 5 == 0) {
            e.xattrs = x;
            e.nxattrs = 2;
        }
        assert_int_equal(arc_entry_encode(rows, &e, e.shard), 0);
    }
}

static void test_roundtrip(void **state)
{
    (void)state;
    uint64_t seed = 7;
    buf rows = {0}, cols = {0};
    for (int round = 0; round < 200; round++) {
        random_rows(&seed, round == 0 ? 1 : (int)(tu_rand(&seed) % 300) + 1, &rows);
        cols.n = 0;
        assert_int_equal(ftcols_encode(rows.p, rows.n, ARC_VERSION, &cols), 0);
        unsigned char *back;
        assert_int_equal(ftcols_decode(cols.p, cols.n, rows.n, ARC_VERSION, &back), 0);
        assert_memory_equal(back, rows.p, rows.n);
        free(back);
        /* the declared size must match exactly */
        assert_int_equal(ftcols_decode(cols.p, cols.n, rows.n + 1, ARC_VERSION, &back), -EBADMSG);
        assert_null(back);
    }
    buf_free(&rows);
    buf_free(&cols);
}

/* Every truncation and every flipped bit of the columns: refused with a message, or rows of
 * exactly the declared size (a flip inside a path or a hash is still well-formed). Rows
 * that do not parse are refused by the encoder. */
static void test_rejects(void **state)
{
    (void)state;
    uint64_t seed = 11;
    buf rows = {0}, cols = {0};
    random_rows(&seed, 40, &rows);
    assert_int_equal(ftcols_encode(rows.p, rows.n, ARC_VERSION, &cols), 0);
    unsigned char *back;
    for (size_t n = 0; n < cols.n; n++) {
        assert_int_equal(ftcols_decode(cols.p, n, rows.n, ARC_VERSION, &back), -EBADMSG);
        assert_non_null(strstr(tdc_errmsg(), "file table:"));
    }
    for (size_t i = 0; i < cols.n; i++)
        for (int bit = 0; bit < 8; bit++) {
            cols.p[i] ^= (unsigned char)(1 << bit);
            int rc = ftcols_decode(cols.p, cols.n, rows.n, ARC_VERSION, &back);
            assert_true(rc == 0 || rc == -EBADMSG);
            if (!rc) free(back);
            cols.p[i] ^= (unsigned char)(1 << bit);
        }
    buf junk = {0};
    assert_int_equal(ftcols_encode(rows.p, rows.n - 1, ARC_VERSION, &junk), -EBADMSG);
    assert_int_equal(ftcols_encode(rows.p, 10, ARC_VERSION, &junk), -EBADMSG);
    buf_free(&junk);
    buf_free(&rows);
    buf_free(&cols);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
