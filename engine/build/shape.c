#include "shape.h"

#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "../base/buf.h"

#define CLASS_MIN 256 /* the most used tokens keep their frequency order */

/* Inline the rules that do not pay for themselves (gram_inline_cheap) and move the regular
 * files' runs to the new root positions. */
static int prune_rules(gram *g, arc_entry *ents, size_t n)
{
    uint64_t *pos;
    int rc = gram_inline_cheap(g, &pos);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        if (ents[i].type != ARC_REG) continue;
        uint64_t s = ents[i].root_start, end = s + ents[i].root_len;
        ents[i].root_start = pos[s];
        ents[i].root_len = pos[end] - pos[s];
    }
    free(pos);
    return 0;
}

/* Token bytes in dictionary order, for sorting token ids by their text. */
static int by_bytes_r(const void *a, const void *b, void *ctx)
{
    const dict *d = ctx;
    size_t m, n;
    const unsigned char *p = dict_bytes(d, *(const uint32_t *)a, &m);
    const unsigned char *q = dict_bytes(d, *(const uint32_t *)b, &n);
    int c = memcmp(p, q, m < n ? m : n);
    return c ? c : (m > n) - (m < n);
}

/* Within each frequency class (ranks [2^k, 2^(k+1)) past the first CLASS_MIN), order the
 * tokens by their text. The symbol streams pay a little: the class fixes the high bits of
 * an id, but the order of first use that ties kept (ids used together are close) is lost
 * within a class. */
static void sort_classes(uint32_t *order, uint32_t n, const dict *d)
{
    for (uint64_t lo = CLASS_MIN; lo < n; lo *= 2) {
        uint64_t hi = lo * 2 < n ? lo * 2 : n;
        sort_r(order + lo, hi - lo, sizeof *order, by_bytes_r, (void *)d);
    }
}

/* Rewrite every symbol of g: token t becomes tid[t], rule r keeps its number above the new
 * token count nt. */
static void remap_symbols(gram *g, const uint32_t *tid, uint32_t nt)
{
    uint32_t ot = g->ntokens;
    for (size_t i = 0; i < g->syms.n; i++) {
        uint32_t s = g->syms.p[i];
        g->syms.p[i] = s < ot ? tid[s] : s - ot + nt;
    }
    for (size_t i = 0; i < g->root.n; i++) {
        uint32_t s = g->root.p[i];
        g->root.p[i] = s < ot ? tid[s] : s - ot + nt;
    }
    g->ntokens = nt;
}

/* Drop the tokens nothing uses and number the rest by use (see the header). */
static int renumber_tokens(gram *g, dict **d, int freq_order)
{
    uint32_t ot = g->ntokens, nt = 0;
    uint64_t *cnt = calloc(ot ? ot : 1, sizeof *cnt);
    uint32_t *order = malloc((ot ? ot : 1) * sizeof *order);
    uint32_t *tid = malloc((ot ? ot : 1) * sizeof *tid);
    dict *nd = dict_new();
    int rc = -ENOMEM;
    if (!cnt || !order || !tid || !nd) goto out;
    for (size_t i = 0; i < g->syms.n; i++)
        if (g->syms.p[i] < ot) cnt[g->syms.p[i]]++;
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] < ot) cnt[g->root.p[i]]++;
    for (uint32_t t = 0; t < ot; t++)
        if (cnt[t]) order[nt++] = t;
    gram_by_count(order, nt, cnt);
    if (!freq_order) sort_classes(order, nt, *d);
    for (uint32_t k = 0; k < nt; k++) {
        size_t len;
        const unsigned char *b = dict_bytes(*d, order[k], &len);
        if ((rc = dict_intern(nd, b, len, &tid[order[k]]))) goto out;
    }
    /* Distinct bytes give distinct ids, so the count is nt; a decoded dictionary with a
     * repeated token would fold the two into one id, which reads back the same. */
    remap_symbols(g, tid, dict_count(nd));
    dict_free(*d);
    *d = nd;
    nd = NULL;
    rc = 0;
out:
    dict_free(nd);
    free(cnt);
    free(order);
    free(tid);
    return rc;
}

int shape_grammar(gram *g, dict **d, arc_entry *ents, size_t n, const shape_opts *o)
{
    static const shape_opts dflt = {0};
    if (!o) o = &dflt;
    int rc = o->keep_rules ? 0 : prune_rules(g, ents, n);
    if (!rc) rc = renumber_tokens(g, d, o->freq_order);
    if (!rc) rc = gram_renumber_rules(g);
    return rc == -ENOMEM ? tdc_error(rc, "out of memory shaping the grammar") : rc;
}
