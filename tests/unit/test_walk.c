/* walk (kernels/walk.h): the extract kernel's way through a grammar, run on the CPU. Over a
 * grammar deeper than the ring of frames (lines that each repeat the one before and add a
 * word nest their rules 150 deep) and over plain text, every file copied whole and at random
 * ranges equals the bytes packed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../kernels/walk.h"
#include "testutil.h"
#include "testpack.h"

#define NF 3
static const char *names[NF] = {"chain", "soup", "runs"};
static unsigned char *content[NF];
static size_t size[NF];

static void make(uint64_t *seed)
{
    buf b[NF];
    for (int f = 0; f < NF; f++)
        b[f] = (buf){0};
    char w[32];
    for (int n = 1; n <= 300; n++) { /* "w1", "w1 w2", "w1 w2 w3", ... */
        for (int i = 1; i <= n; i++) {
            int k = snprintf(w, sizeof w, i == n ? "w%d\n" : "w%d ", i);
            assert_int_equal(buf_put(&b[0], w, (size_t)k), 0);
        }
    }
    const char *soup[] = {"alpha", "beta", " ", "\n", "gamma", ", ", "delta"};
    for (int i = 0; i < 20000; i++) {
        const char *s = soup[tu_rand(seed) % 7];
        assert_int_equal(buf_put(&b[1], s, strlen(s)), 0);
    }
    for (int i = 0; i < 4000; i++) /* runs of one word, of growing and random length */
        for (uint64_t k = tu_rand(seed) % 40; k; k--)
            assert_int_equal(buf_put(&b[2], i % 2 ? "ab " : "cd\n", 3), 0);
    for (int f = 0; f < NF; f++) {
        content[f] = b[f].p;
        size[f] = b[f].n;
    }
}

static arc *pack_files(uint64_t *seed)
{
    make(seed);
    return tu_pack_files("walktree", NF, names, content, size, NULL, NULL);
}

/* Exclusive prefix sums of the expanded sizes of n symbols. */
static walk_u64 *prefix(const uint32_t *s, uint64_t n, const uint64_t *len)
{
    walk_u64 *p = malloc((n + 1) * sizeof *p);
    p[0] = 0;
    for (uint64_t i = 0; i < n; i++)
        p[i + 1] = p[i] + len[s[i]];
    return p;
}

static void test_walk_equals_content(void **state)
{
    (void)state;
    uint64_t seed = 5;
    arc *a = pack_files(&seed);
    const gram *g = &a->g;
    uint32_t nt = g->ntokens, nsym = nt + g->nrules + 1;
    /* Each symbol's expanded size and depth, rules after the rules they use. */
    uint64_t *len = calloc(nsym, sizeof *len);
    uint32_t *depth = calloc(nsym, sizeof *depth), most = 0;
    for (uint32_t t = 0; t < nt; t++)
        len[t] = a->dict->offs.p[t + 1] - a->dict->offs.p[t];
    for (uint64_t k = 0; k < g->topo.n; k++) {
        uint32_t r = g->topo.p[k];
        uint64_t n;
        const uint32_t *body = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            len[nt + r] += len[body[i]];
            if (depth[body[i]] + 1 > depth[nt + r]) depth[nt + r] = depth[body[i]] + 1;
        }
        if (depth[nt + r] > most) most = depth[nt + r];
    }
    assert_true(most > 2 * WALK_MAXD); /* so walks climb past the ring */
    walk_u64 *rs = malloc((g->nrules + 1) * sizeof *rs), *toff = malloc((nt + 1) * sizeof *toff);
    for (uint32_t r = 0; r <= g->nrules; r++)
        rs[r] = g->rule_start.p[r];
    for (uint32_t t = 0; t <= nt; t++)
        toff[t] = a->dict->offs.p[t];
    walk_u64 *root_pre = prefix(g->root.p, g->root.n, len);
    walk_u64 *syms_pre = prefix(g->syms.p, g->syms.n, len);
    walk_gram wg = {g->root.p, g->syms.p, rs, root_pre, syms_pre, toff, a->dict->blob.p, nt};
    int seen = 0;
    for (uint32_t e = 0; e < a->nents; e++) {
        const arc_entry *x = &a->ents[e];
        int f = -1;
        for (int k = 0; k < NF; k++)
            if (!strcmp(x->path, names[k])) f = k;
        if (f < 0) continue;
        seen++;
        assert_int_equal(x->size, size[f]);
        walk_u64 r0 = x->root_start, r1 = r0 + x->root_len;
        unsigned char *out = malloc(size[f]);
        walk_copy(&wg, r0, r1, 0, (uint32_t)size[f], out);
        assert_memory_equal(out, content[f], size[f]);
        for (int i = 0; i < 3000; i++) {
            uint64_t pos = tu_rand(&seed) % size[f];
            uint32_t n = (uint32_t)(1 + tu_rand(&seed) % (i % 10 ? 64 : 8192));
            if (n > size[f] - pos) n = (uint32_t)(size[f] - pos);
            walk_copy(&wg, r0, r1, pos, n, out);
            assert_memory_equal(out, content[f] + pos, n);
        }
        free(out);
    }
    assert_int_equal(seen, NF);
    free(len);
    free(depth);
    free(rs);
    free(toff);
    free(root_pre);
    free(syms_pre);
    for (int f = 0; f < NF; f++)
        free(content[f]);
    arc_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_equals_content),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
