/* Visibility masks (engine/analytics/ana.h): every analytic over an archive with a mask prints
 * exactly what it prints, unmasked, over an archive of only the visible files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "../../engine/analytics/ana.h"
#include "../../engine/format/arc.h"
#include "../../engine/build/pack.h"
#include "testutil.h"
#include "testpack.h"

#define NF 14
static const char *paths[NF] = {"a.txt",   "d/b.txt",    "d/c.txt",   "d/e/f.txt", "d/e/g.txt",
                                "d/empty", "d/long.txt", "d.c",       "dx/h.txt",  "dx/i.txt",
                                "z/j.txt", "z/k.txt",    "z/y/l.txt", "z/y/m.txt"};
static const char *dirs[] = {"d", "d/e", "dx", "z", "z/y"};
#define ND 5

/* Word soup with words shared between files (so files share rules), one file with a word
 * longer than TOK_CAP (cut into pieces), one empty file. */
static void write_tree(const char *root, const unsigned char *keep, uint64_t seed)
{
    char p[4096];
    mkdir(root, 0755);
    for (int d = 0; d < ND; d++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[d]);
        mkdir(p, 0755);
    }
    const char *w[] = {"alpha", "beta", "gamma", "delta", "the", "cat", "sat", "on", "mat"};
    for (int f = 0; f < NF; f++) {
        uint64_t s = seed + (uint64_t)f * 7919 + 1; /* a file's text does not depend on keep */
        if (!keep[f]) continue;
        snprintf(p, sizeof p, "%s/%s", root, paths[f]);
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        if (!strcmp(paths[f], "d/long.txt")) {
            for (int i = 0; i < 3000; i++)
                fputc('x', fp);
            fputs(" and a few words the cat\n", fp);
        } else if (strcmp(paths[f], "d/empty")) {
            int n = 200 + (int)(tu_rand(&s) % 400);
            for (int i = 0; i < n; i++)
                fprintf(fp, "%s%s", w[tu_rand(&s) % 9], tu_rand(&s) % 8 ? " " : ".\n");
        }
        fclose(fp);
    }
}

static arc *pack_tree(const char *name, const unsigned char *keep, uint64_t seed)
{
    char *dir = tu_tmppath(name);
    write_tree(dir, keep, seed);
    pack_opts o = {.seg_tokens = 512};
    arc *a = tu_pack_open(dir, &o, NULL);
    free(dir);
    return a;
}

typedef int (*ana_fn)(ana_ctx *, const arc *, uint32_t, uint32_t, const unsigned char *, buf *);
static const ana_fn fns[6] = {ana_wordcount,  ana_sort,     ana_invindex,
                              ana_termvector, ana_seqcount, ana_rankedinvindex};

/* Every analytic of scope `scope` ("" for the root) of `all` under vis equals the unmasked
 * analytic of the same scope of `part`, both with c's options. */
static void compare_scope(ana_ctx *c, const arc *all, const unsigned char *vis, const arc *part,
                          const char *scope)
{
    int64_t fa = *scope ? arc_lookup(all, scope) : 0, fp = *scope ? arc_lookup(part, scope) : 0;
    assert_true(fa >= 0 && fp >= 0);
    for (int k = 0; k < 6; k++) {
        buf got = {0}, want = {0};
        assert_int_equal(
            fns[k](c, all, (uint32_t)fa, ana_subtree_end(all, (uint32_t)fa), vis, &got), 0);
        assert_int_equal(
            fns[k](c, part, (uint32_t)fp, ana_subtree_end(part, (uint32_t)fp), NULL, &want), 0);
        if (got.n != want.n || (got.n && memcmp(got.p, want.p, got.n)))
            fail_msg("analytic %d of '%s' differs under the mask (%zu vs %zu bytes)", k, scope,
                     got.n, want.n);
        buf_free(&got);
        buf_free(&want);
    }
}

static void test_mask_equals_subset(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    unsigned char every[NF];
    memset(every, 1, sizeof every);
    arc *all = pack_tree("vis-all", every, 99);
    for (int round = 0; round < 6; round++) {
        unsigned char keep[NF];
        unsigned char *vis = calloc(all->nents, 1);
        assert_non_null(vis);
        for (int f = 0; f < NF; f++) {
            keep[f] = round == 0 ? 1 : round == 1 ? 0 : (unsigned char)(tu_rand(&seed) % 2);
            int64_t e = arc_lookup(all, paths[f]);
            assert_true(e > 0);
            vis[e] = keep[f];
        }
        /* directories' bytes do not matter: give them random ones */
        for (uint32_t e = 0; e < all->nents; e++)
            if (all->ents[e].type == ARC_DIR) vis[e] = (unsigned char)(tu_rand(&seed) % 2);
        arc *part = pack_tree("vis-part", keep, 99);
        for (int t = 0; t < 4; t++) {
            ana_opts o = {t % 2 ? ANA_BOTTOMUP : ANA_TOPDOWN,
                          t < 2 ? 1 : 2,
                          1,
                          0,
                          0,
                          NULL,
                          NULL,
                          0,
                          NULL,
                          NULL,
                          0,
                          0,
                          0,
                          NULL};
            ana_ctx *c = ana_ctx_new(&o);
            assert_non_null(c);
            compare_scope(c, all, vis, part, "");
            for (int d = 0; d < ND; d++)
                compare_scope(c, all, vis, part, dirs[d]);
            ana_ctx_free(c);
        }
        /* NULL and a mask showing every file print the same */
        if (round == 0) compare_scope(NULL, all, NULL, part, "");
        arc_free(part);
        free(vis);
    }
    arc_free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mask_equals_subset)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
