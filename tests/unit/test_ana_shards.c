/* Analytics shard by shard (engine/analytics/ana_shards.h): on random trees packed into many
 * small shards (files cut over several, long words, files of separators only, empty files,
 * hard links), ana_by_shard prints exactly what each analytic prints on the archive loaded
 * whole, for every scope tried, under visibility masks, one shard at a time or several; and the
 * merge refuses a file cut inside a word. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../engine/analytics/ana.h"
#include "../../engine/analytics/ana_shards.h"
#include "../../engine/analytics/analytics.h"
#include "../../engine/base/err.h"
#include "../../engine/build/pack.h"
#include "../../engine/format/arc.h"
#include "testutil.h"

/* A random tree under root: a few directories of files of words (some shared, some long
 * enough to be cut into several tokens), punctuation-only files, empty files, and hard links
 * to some files. */
static void write_tree(const char *root, uint64_t seed)
{
    static const char *w[] = {"alpha",
                              "beta",
                              "gamma",
                              "delta",
                              "the",
                              "cat",
                              "sat",
                              "on",
                              "mat",
                              "x",
                              "\xc3\xa9t\xc3\xa9"};
    static const char *sep[] = {" ", " ", " ", ", ", ".\n", "\n\n", " -- ", "\t"};
    char p[4096], q[4096];
    mkdir(root, 0755);
    int ndirs = 1 + (int)(tu_rand(&seed) % 4);
    for (int d = 0; d < ndirs; d++) {
        snprintf(p, sizeof p, "%s/d%d", root, d);
        mkdir(p, 0755);
        int nfiles = 1 + (int)(tu_rand(&seed) % 6);
        for (int f = 0; f < nfiles; f++) {
            snprintf(p, sizeof p, "%s/d%d/f%d.txt", root, d, f);
            FILE *fp = fopen(p, "w");
            assert_non_null(fp);
            int kind = (int)(tu_rand(&seed) % 10);
            if (kind == 0) {        /* empty */
            } else if (kind == 1) { /* separators only */
                for (int i = 0, n = (int)(tu_rand(&seed) % 3000); i < n; i++)
                    fputs(sep[tu_rand(&seed) % 8], fp);
            } else {
                int n = (int)(tu_rand(&seed) % 2500);
                if (tu_rand(&seed) % 3 == 0) fputs(sep[tu_rand(&seed) % 8], fp);
                for (int i = 0; i < n; i++) {
                    if (tu_rand(&seed) % 400 == 0) /* a word cut into TOK_CAP tokens */
                        for (int k = 0, m = 1000 + (int)(tu_rand(&seed) % 2500); k < m; k++)
                            fputc('a' + (int)(tu_rand(&seed) % 3), fp);
                    else
                        fputs(w[tu_rand(&seed) % 11], fp);
                    fputs(sep[tu_rand(&seed) % 8], fp);
                }
                if (tu_rand(&seed) % 2) fputs("end", fp); /* ends inside a word */
            }
            fclose(fp);
            if (tu_rand(&seed) % 5 == 0) {
                snprintf(q, sizeof q, "%s/d%d/link%d", root,
                         (int)(tu_rand(&seed) % (uint64_t)(d + 1)), f);
                if (access(q, F_OK)) assert_int_equal(link(p, q), 0);
            }
        }
    }
}

/* Pack root into ar with shards of about `shard` bytes (0: pack's default). */
static void pack(const char *root, const char *ar, uint64_t shard)
{
    pack_opts o = {.seg_tokens = 512, .shard_size = shard};
    pack_stats st;
    if (pack_dir(root, ar, &o, &st)) fail_msg("%s", tdc_errmsg());
}

/* A part function that takes only parts of one shard (the CPU's analytic on them) and has
 * parts of several go shard by shard, as the GPU's does for a part with a long word; ctx
 * counts the parts it split. */
static int split_parts(void *ctx, int kind, const arc *p, uint32_t first, uint32_t end,
                       const unsigned char *vis, buf *out)
{
    if (p->piece > 1) {
        ++*(int *)ctx;
        return ANA_PART_SPLIT;
    }
    return ana_table[kind].cpu(NULL, p, first, end, vis, out);
}

static int splits;    /* parts split_parts split */
static int use_split; /* compare goes through split_parts */

/* Analytic k of [first, end) under vis, shard by shard on meta and on the whole archive w
 * loaded, with c's options: the same bytes. */
static void compare(ana_ctx *c, const arc *meta, const arc *w, int k, uint32_t first,
                    const unsigned char *vis)
{
    uint32_t end = ana_subtree_end(w, first);
    buf got = {0}, want = {0};
    int rc =
        ana_by_shard(c, use_split ? split_parts : NULL, &splits, k, meta, first, end, vis, &got);
    if (rc) fail_msg("%s by shard: %s", ana_table[k].name, tdc_errmsg());
    assert_int_equal(ana_table[k].cpu(c, w, first, end, vis, &want), 0);
    if (got.n != want.n || (got.n && memcmp(got.p, want.p, got.n)))
        fail_msg("%s of '%s' (%d at once): %zu bytes by shard, %zu whole", ana_table[k].name,
                 w->ents[first].path, ana_ctx_opts(c)->shards, got.n, want.n);
    buf_free(&got);
    buf_free(&want);
}

/* A part's need, for the rounds that gather shards: the shard's content and a byte. */
static uint64_t shard_need(const arc *meta, uint32_t k)
{
    return meta->shards[k].bytes + 1;
}

static void test_by_shard_equals_whole(void **state)
{
    (void)state;
    uint64_t seed = 2026;
    char *root = tu_tmppath("anash"), ar[4200], one[4200], cmd[9000];
    snprintf(ar, sizeof ar, "%s.tdc", root);
    snprintf(one, sizeof one, "%s.one.tdc", root);
    for (int round = 0; round < 8; round++) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);
        write_tree(root, seed + (uint64_t)round * 1000003);
        pack(root, ar, 300 + tu_rand(&seed) % 4000);
        pack(root, one, 0);
        arc *meta, *w, *o;
        assert_int_equal(arc_open_meta(ar, &meta), 0);
        assert_int_equal(arc_open(ar, &w), 0);
        assert_int_equal(arc_open(one, &o), 0);
        assert_true(meta->nshards > 2);
        assert_int_equal(o->nshards, 1);
        unsigned char *vis = malloc(w->nents);
        assert_non_null(vis);
        for (uint32_t e = 0; e < w->nents; e++)
            vis[e] = (unsigned char)(tu_rand(&seed) % 3 != 0);
        /* Odd rounds under a memory budget: one shard's estimate, or a byte (one at a time). */
        uint64_t big = 0;
        for (uint32_t k = 0; k < meta->nshards; k++)
            if (ana_shard_mem(meta, k) > big) big = ana_shard_mem(meta, k);
        mbud *bud = round % 2 ? mbud_new(round % 4 == 1 ? big : 1) : NULL;
        /* Rounds 2 and 6 keep the list merges' parts in a file: every part (past 1 byte held),
         * or those past 2000 bytes held, merged in batches of that size. */
        ana_opts op = {round % 3,
                       1 + round % 2,
                       1,
                       0,
                       round % 4,
                       bud,
                       round % 4 == 2 ? "/tmp" : NULL,
                       round == 2 ? 1 : 2000,
                       NULL,
                       NULL,
                       0,
                       0,
                       0,
                       NULL};
        /* Most rounds gather consecutive shards into parts of one grammar each: a room of a
         * fraction of the content, at least 1 to 3 parts; under the tiny budget of rounds 3
         * and 7 every part stays one shard (half the budget). */
        if (round % 4 != 1) {
            uint64_t all = 0;
            for (uint32_t k = 0; k < meta->nshards; k++)
                all += shard_need(meta, k);
            op.group_need = shard_need;
            uint64_t gs = 77 + (uint64_t)round; /* its own draws: the trees stay as they were */
            op.group_room = all * (1 + tu_rand(&gs) % 3) / (2 + tu_rand(&gs) % 6);
            op.group_min = 1 + round % 3;
        }
        use_split = round == 4; /* its parts of several shards go shard by shard */
        ana_ctx *c = ana_ctx_new(&op);
        assert_non_null(c);
        for (int k = 0; k < ANA_NIDS; k++) {
            /* the whole tree, every directory and some files, with and without the mask */
            for (uint32_t e = 0; e < w->nents; e++) {
                if (e && w->ents[e].type != ARC_DIR && tu_rand(&seed) % 4) continue;
                compare(c, meta, w, k, e, NULL);
                if (e == 0 || tu_rand(&seed) % 2) compare(c, meta, w, k, e, vis);
            }
            /* and the same content in one grammar */
            buf x = {0}, y = {0};
            assert_int_equal(ana_by_shard(c, NULL, NULL, k, meta, 0, meta->nents, NULL, &x), 0);
            assert_int_equal(ana_table[k].cpu(c, o, 0, o->nents, NULL, &y), 0);
            assert_int_equal(x.n, y.n);
            if (x.n) assert_memory_equal(x.p, y.p, x.n);
            buf_free(&x);
            buf_free(&y);
        }
        ana_ctx_free(c);
        if (round == 4) assert_true(splits > 0);
        if (bud) { /* every shard gave back what it took, and none went over but alone */
            mbud_stats st;
            mbud_get_stats(bud, &st);
            assert_int_equal(st.used, 0);
            assert_true(st.peak <= (st.limit > big ? st.limit : big));
            assert_true(st.peak > 0);
            mbud_free(bud);
        }
        free(vis);
        arc_free(meta);
        arc_free(w);
        arc_free(o);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", root, ar, one);
    assert_int_equal(system(cmd), 0);
    free(root);
}

/* A part's text into the merge (ana_merge_part takes a buffer over). */
static int part(ana_merge *m, const char *text)
{
    buf b = {0};
    assert_int_equal(buf_put(&b, text, strlen(text)), 0);
    int rc = ana_merge_part(m, &b);
    buf_free(&b);
    return rc;
}

/* Edges of one file's pieces, as ana_by_shard makes them. */
static ana_edge edge(uint32_t part, const char *words, uint32_t nw, int whole, int wf, int wl)
{
    ana_edge e = {
        .file = 0, .part = part, .nw = nw, .whole = whole, .word_first = wf, .word_last = wl};
    assert_int_equal(buf_put(&e.words, words, strlen(words)), 0);
    return e;
}

/* The sequences across cuts come from the edge words only: three pieces "a b ... c d",
 * "e" and "f g h" give the file's crossing sequences c d e, d e f, e f g, which are added to
 * the parts' own counts; a piece that ends inside a word followed by one that starts inside
 * one is refused (-ENOTSUP) rather than counted as two words. */
static void test_merge_edges(void **state)
{
    (void)state;
    arc a = {0};
    arc_entry ents[2] = {{.path = "", .type = ARC_DIR}, {.path = "f", .type = ARC_REG}};
    a.ents = ents;
    a.nents = 2;
    ana_merge *m;
    assert_int_equal(ana_merge_new(ANA_SEQCOUNT, &a, 0, 2, NULL, &m), 0);
    assert_int_equal(part(m, "2\tc d e\n1\ta b c\n"), 0);
    ana_edge e[3] = {edge(0, "a b c d ", 4, 0, 1, 0), edge(1, "e ", 1, 1, 0, 0),
                     edge(2, "f g h ", 3, 1, 1, 1)};
    for (int i = 2; i >= 0; i--) /* any order */
        assert_int_equal(ana_merge_edge(m, &e[i]), 0);
    buf out = {0};
    assert_int_equal(ana_merge_finish(m, &out), 0);
    const char *want = "3\tc d e\n1\ta b c\n1\td e f\n1\te f g\n";
    assert_int_equal(out.n, strlen(want));
    assert_memory_equal(out.p, want, out.n);
    ana_merge_free(m);

    assert_int_equal(ana_merge_new(ANA_WORDCOUNT, &a, 0, 2, NULL, &m), 0);
    ana_edge cut[2] = {edge(0, "a b ", 2, 1, 1, 1), edge(1, "c ", 1, 1, 1, 0)};
    assert_int_equal(ana_merge_edge(m, &cut[0]), 0);
    assert_int_equal(ana_merge_edge(m, &cut[1]), 0);
    out.n = 0;
    assert_int_equal(ana_merge_finish(m, &out), -ENOTSUP);
    assert_non_null(strstr(tdc_errmsg(), "'f' is cut inside a word"));
    ana_merge_free(m);
    /* a part's text that is not the analytic's */
    assert_int_equal(ana_merge_new(ANA_TERMVECTOR, &a, 0, 2, NULL, &m), 0);
    assert_int_equal(part(m, "f 1 x\n"), -EBADMSG);
    ana_merge_free(m);
    assert_int_equal(ana_merge_new(ANA_WORDCOUNT, &a, 0, 2, NULL, &m), 0);
    assert_int_equal(part(m, "x\tword\n"), -EBADMSG);
    ana_merge_free(m);
    buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_by_shard_equals_whole),
                                       cmocka_unit_test(test_merge_edges)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
