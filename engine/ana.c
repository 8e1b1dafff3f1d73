/* Word counting by top-down weight propagation (G-TADOC IV-B): every rule's weight is the
 * number of times it occurs in the scope; walking rules parents-first pushes weights down and
 * adds weight x occurrences for every word token in a body. Cost: one pass over the grammar,
 * independent of the text size.
 *
 * Words longer than TOK_CAP bytes are stored as several adjacent word tokens. Only files that
 * contain such a cut (a TOK_CAP-byte word token) are counted by walking their token stream, so
 * the pieces are joined exactly; all other files go through the grammar. */
#include "ana.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ana_int.h"
#include "err.h"
#include "tok.h"

uint32_t ana_subtree_end(const arc *a, uint32_t dir)
{
    if (a->ents[dir].type != ARC_DIR) return dir + 1;
    if (dir == 0) return a->nents;
    const char *p = a->ents[dir].path;
    size_t n = strlen(p);
    uint32_t e = dir + 1;
    while (e < a->nents && !strncmp(a->ents[e].path, p, n) && a->ents[e].path[n] == '/')
        e++;
    return e;
}

/* Counts of dictionary words plus the few joined long words. */
typedef struct counts {
    uint64_t *tok; /* per token id */
    char **lw;     /* joined words longer than TOK_CAP, NUL-free since they are word bytes */
    size_t *lwlen;
    uint64_t *lwcnt;
    size_t nlw, caplw;
} counts;

static int add_long(counts *c, const unsigned char *w, size_t n)
{
    for (size_t i = 0; i < c->nlw; i++)
        if (c->lwlen[i] == n && !memcmp(c->lw[i], w, n)) {
            c->lwcnt[i]++;
            return 0;
        }
    if (c->nlw == c->caplw) {
        size_t cap = c->caplw ? c->caplw * 2 : 8;
        char **a = realloc(c->lw, cap * sizeof *a);
        if (a) c->lw = a;
        size_t *b = a ? realloc(c->lwlen, cap * sizeof *b) : NULL;
        if (b) c->lwlen = b;
        uint64_t *d = b ? realloc(c->lwcnt, cap * sizeof *d) : NULL;
        if (d) c->lwcnt = d;
        if (!d) return -ENOMEM;
        c->caplw = cap;
    }
    if (!(c->lw[c->nlw] = malloc(n))) return -ENOMEM;
    memcpy(c->lw[c->nlw], w, n);
    c->lwlen[c->nlw] = n;
    c->lwcnt[c->nlw++] = 1;
    return 0;
}

/* A TOK_CAP-byte word token: a piece of a cut long word. */
static int is_cut_token(const arc *a, uint32_t t)
{
    size_t l;
    dict_bytes(a->dict, t, &l);
    return l == TOK_CAP && dict_is_word(a->dict, t);
}

int ana_find_cuts(const arc *a, unsigned char **out)
{
    const gram *g = &a->g;
    unsigned char *cut = calloc((size_t)g->nrules + 1, 1);
    if (!cut) return -ENOMEM;
    for (uint32_t k = 0; k < g->nrules; k++) {
        uint32_t r = g->topo.p[k];
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n && !cut[r]; i++)
            cut[r] = b[i] >= g->ntokens ? cut[b[i] - g->ntokens] : is_cut_token(a, b[i]);
    }
    *out = cut;
    return 0;
}

int ana_file_has_cut(const arc *a, const unsigned char *cut, uint32_t e)
{
    const gram *g = &a->g;
    const uint32_t *run = g->root.p + a->ents[e].root_start;
    for (uint64_t i = 0; i < a->ents[e].root_len; i++)
        if (run[i] >= g->ntokens ? cut[run[i] - g->ntokens] : is_cut_token(a, run[i])) return 1;
    return 0;
}

int ana_file_words(const arc *a, uint32_t e, ana_word_fn fn, void *ctx)
{
    const gram *g = &a->g;
    vec32 rs = {0};
    vec64 is = {0};
    buf word = {0};
    uint32_t pending = UINT32_MAX; /* a single word token not yet known to be complete */
    uint64_t end0 = a->ents[e].root_start + a->ents[e].root_len;
    int rc = vec32_push(&rs, 0) || vec64_push(&is, a->ents[e].root_start) ? -ENOMEM : 0;
    for (;;) {
        /* Next token of the file, depth first; UINT32_MAX at the end. */
        uint32_t s = UINT32_MAX;
        while (!rc && rs.n) {
            uint64_t n, i = is.p[is.n - 1];
            const uint32_t *b = gram_body(g, rs.p[rs.n - 1], &n);
            if (rs.n == 1) n = end0;
            if (i == n) {
                rs.n--;
                is.n--;
                continue;
            }
            is.p[is.n - 1] = i + 1;
            if (b[i] < g->ntokens) {
                s = b[i];
                break;
            }
            if (vec32_push(&rs, b[i] - g->ntokens) || vec64_push(&is, 0)) rc = -ENOMEM;
        }
        if (rc) break;
        if (s != UINT32_MAX && dict_is_word(a->dict, s)) {
            if (pending == UINT32_MAX && !word.n) {
                pending = s;
                continue;
            }
            size_t l;
            const unsigned char *t;
            if (pending != UINT32_MAX) {
                t = dict_bytes(a->dict, pending, &l);
                rc = buf_put(&word, t, l);
                pending = UINT32_MAX;
            }
            t = dict_bytes(a->dict, s, &l);
            if (!rc) rc = buf_put(&word, t, l);
            continue;
        }
        /* A separator or the end completes the word in progress. */
        if (pending != UINT32_MAX)
            rc = fn(ctx, pending, NULL, 0);
        else if (word.n)
            rc = fn(ctx, UINT32_MAX, word.p, word.n);
        pending = UINT32_MAX;
        word.n = 0;
        if (rc || s == UINT32_MAX) break;
    }
    vec32_free(&rs);
    vec64_free(&is);
    buf_free(&word);
    return rc;
}

static int count_word(void *ctx, uint32_t tok, const unsigned char *w, size_t n)
{
    counts *c = ctx;
    if (tok != UINT32_MAX) {
        c->tok[tok]++;
        return 0;
    }
    return add_long(c, w, n);
}

static int count_scope(const arc *a, uint32_t first, uint32_t end, counts *c)
{
    const gram *g = &a->g;
    const dict *d = a->dict;
    uint64_t *w = calloc((size_t)g->nrules + 1, sizeof *w);
    unsigned char *cut = NULL;
    int rc = -ENOMEM;
    memset(c, 0, sizeof *c);
    if (!w || !(c->tok = calloc((size_t)g->ntokens + 1, sizeof *c->tok))) goto out;
    if ((rc = ana_find_cuts(a, &cut))) goto out;
    /* Root level: the scope's files seed the weights. */
    for (uint32_t e = first; e < end && !rc; e++) {
        if (a->ents[e].type != ARC_REG) continue;
        if (ana_file_has_cut(a, cut, e)) {
            rc = ana_file_words(a, e, count_word, c);
            continue;
        }
        const uint32_t *run = g->root.p + a->ents[e].root_start;
        for (uint64_t i = 0; i < a->ents[e].root_len; i++) {
            uint32_t s = run[i];
            if (s >= g->ntokens)
                w[s - g->ntokens]++;
            else if (dict_is_word(d, s))
                c->tok[s]++;
        }
    }
    /* Parents before children: reverse topological order. */
    for (uint32_t k = g->nrules; k-- > 0 && !rc;) {
        uint32_t r = g->topo.p[k];
        if (!w[r]) continue;
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s = b[i];
            if (s >= g->ntokens)
                w[s - g->ntokens] += w[r];
            else if (dict_is_word(d, s))
                c->tok[s] += w[r];
        }
    }
out:
    free(w);
    free(cut);
    if (rc == -ENOMEM) tdc_error(rc, "analytics: out of memory");
    return rc;
}

static void counts_free(counts *c)
{
    for (size_t i = 0; i < c->nlw; i++)
        free(c->lw[i]);
    free(c->lw);
    free(c->lwlen);
    free(c->lwcnt);
    free(c->tok);
}

/* One output record: a word and its count, with the bytes borrowed from dict or counts. */
typedef struct rec {
    uint64_t key; /* the first 8 bytes, big-endian and zero-padded: most comparisons end here */
    const unsigned char *w;
    size_t n;
    uint64_t cnt;
} rec;

static uint64_t prefix_key(const unsigned char *w, size_t n)
{
    uint64_t k = 0;
    for (size_t i = 0; i < 8; i++)
        k = k << 8 | (i < n ? w[i] : 0);
    return k;
}

static int by_word(const void *x, const void *y)
{
    const rec *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    int c = memcmp(a->w, b->w, a->n < b->n ? a->n : b->n);
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

static int by_count(const void *x, const void *y)
{
    const rec *a = x, *b = y;
    if (a->cnt != b->cnt) return a->cnt < b->cnt ? 1 : -1;
    return by_word(x, y);
}

/* Collect non-zero counts as records sorted by `cmp`. */
static int records(const arc *a, const counts *c, int (*cmp)(const void *, const void *), rec **out,
                   size_t *nout)
{
    size_t n = c->nlw;
    for (uint32_t t = 0; t < a->g.ntokens; t++)
        n += c->tok[t] != 0;
    rec *r = malloc((n ? n : 1) * sizeof *r);
    if (!r) return tdc_error(-ENOMEM, "analytics: out of memory");
    size_t k = 0;
    for (uint32_t t = 0; t < a->g.ntokens; t++)
        if (c->tok[t]) {
            r[k].w = dict_bytes(a->dict, t, &r[k].n);
            r[k].key = prefix_key(r[k].w, r[k].n);
            r[k++].cnt = c->tok[t];
        }
    for (size_t i = 0; i < c->nlw; i++) {
        const unsigned char *w = (const unsigned char *)c->lw[i];
        r[k++] = (rec){prefix_key(w, c->lwlen[i]), w, c->lwlen[i], c->lwcnt[i]};
    }
    sort_n(r, n, sizeof *r, cmp);
    *out = r;
    *nout = n;
    return 0;
}

static int put_u64(buf *b, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    return buf_put(b, t, (size_t)n);
}

/* Print counts as word count (count_first) or sort records. */
static int print(const arc *a, const counts *c, buf *out, int count_first)
{
    rec *r = NULL;
    size_t n = 0;
    int rc = records(a, c, count_first ? by_count : by_word, &r, &n);
    for (size_t i = 0; i < n && !rc; i++) {
        if (count_first)
            rc = put_u64(out, r[i].cnt) || buf_put(out, "\t", 1) || buf_put(out, r[i].w, r[i].n) ||
                 buf_put(out, "\n", 1);
        else
            rc = buf_put(out, r[i].w, r[i].n) || buf_put(out, "\t", 1) || put_u64(out, r[i].cnt) ||
                 buf_put(out, "\n", 1);
        if (rc) rc = tdc_error(-ENOMEM, "analytics: out of memory");
    }
    free(r);
    return rc;
}

static int emit(const arc *a, uint32_t first, uint32_t end, buf *out, int count_first)
{
    counts c;
    int rc = count_scope(a, first, end, &c);
    if (!rc) rc = print(a, &c, out, count_first);
    counts_free(&c);
    return rc;
}

int ana_wordcount(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    return emit(a, first, end, out, 1);
}

int ana_wordcount_counts(const arc *a, const uint64_t *tok, buf *out)
{
    counts c = {.tok = (uint64_t *)tok}; /* only read: print never writes counts */
    return print(a, &c, out, 1);
}

int ana_sort(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    return emit(a, first, end, out, 0);
}
