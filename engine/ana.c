/* Word count and sort (G-TADOC IV-B), top-down or bottom-up as the selector says (ana.h):
 * - top-down: every rule's weight is the number of times it occurs in the scope; walking the
 *   topological levels from the highest down pushes weights to children and adds weight x
 *   occurrences for every word token in a body (Algorithm 1). One pass over the grammar.
 * - bottom-up: each rule the scope uses gets a table of its expansion's words, built from its
 *   children's tables level by level (Algorithm 2); the result is the root runs' own words
 *   plus the tables of the rules in the root runs times their occurrences there.
 *
 * Words longer than TOK_CAP bytes are stored as several adjacent word tokens. Only files that
 * contain such a cut (a TOK_CAP-byte word token) are counted by walking their token stream, so
 * the pieces are joined exactly; all other files go through the grammar. */
#include "ana.h"

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


int ana_file_has_cut(const arc *a, const unsigned char *cut, uint32_t e)
{
    const gram *g = &a->g;
    const uint32_t *run = g->root.p + a->ents[e].root_start;
    for (uint64_t i = 0; i < a->ents[e].root_len; i++)
        if (run[i] >= g->ntokens ? cut[run[i] - g->ntokens] : ana_is_cut_token(a, run[i])) return 1;
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

typedef struct reduce_job {
    const ana_prep *p;
    const uint64_t *w;
    const ana_wtab *wt;
    uint64_t **tok;
} reduce_job;

/* Bottom-up's last step: the tables of the rules in the root runs times their occurrences. */
static int reduce_task(void *x, const ana_team *t)
{
    const reduce_job *j = x;
    uint64_t *tok = j->tok[t->tid];
    size_t lo, hi;
    ana_share(t, j->p->g->nrules, &lo, &hi);
    for (size_t r = lo + 1; r < hi + 1; r++) {
        uint64_t wr = j->w[r];
        if (!wr) continue;
        const ana_wpair *e = j->wt->tab[r];
        for (uint32_t k = 0; k < j->wt->n[r]; k++)
            tok[e[k].w] += e[k].n * wr;
    }
    return 0;
}

static int count_scope(const arc *a, uint32_t first, uint32_t end, int kind, counts *c)
{
    const gram *g = &a->g;
    ana_prep p;
    ana_plan pl;
    ana_wtab wt = {0};
    vec32 files = {0};
    uint64_t *w = NULL, *tok[2] = {NULL, NULL};
    unsigned char *need = NULL;
    memset(c, 0, sizeof *c);
    ana_mark(NULL);
    int rc = ana_prep_init(&p, a, 0);
    if (rc) return rc;
    ana_mark("levels");
    ana_plan_make(&p, kind, first, end, &pl);
    rc = -ENOMEM;
    if (!(w = calloc((size_t)g->nrules + 1, sizeof *w)) ||
        !(c->tok = calloc((size_t)g->ntokens + 1, sizeof *c->tok)))
        goto out;
    if (pl.threads > 1 && !(tok[1] = calloc((size_t)g->ntokens + 1, sizeof *tok[1]))) goto out;
    tok[0] = c->tok;
    rc = 0;
    /* Files with cut words are read as token streams; the others go through the grammar. */
    for (uint32_t e = first; e < end && !rc; e++) {
        if (a->ents[e].type != ARC_REG) continue;
        if (ana_file_has_cut(a, p.cut, e))
            rc = ana_file_words(a, e, count_word, c);
        else if (vec32_push(&files, e))
            rc = -ENOMEM;
    }
    if (rc) goto out;
    ana_mark("scope files");
    if (!pl.bottomup) {
        rc = ana_weights(&p, files.p, files.n, w, tok, 1, pl.threads);
    } else if (!(rc = ana_weights(&p, files.p, files.n, w, tok, 0, pl.threads)) &&
               !(rc = ana_mark_reach(&p, files.p, files.n, &need)) &&
               !(rc = ana_wtab_build(&wt, &p, need, pl.threads))) {
        ana_mark("bottom-up tables");
        reduce_job j = {&p, w, &wt, tok};
        rc = ana_par(pl.threads, reduce_task, &j);
    }
    ana_mark("traversal");
    if (!rc && tok[1])
        for (uint32_t t = 0; t < g->ntokens; t++)
            c->tok[t] += tok[1][t];
out:
    vec32_free(&files);
    free(w);
    free(tok[1]);
    free(need);
    ana_wtab_free(&wt);
    ana_prep_free(&p);
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

static int by_word_r(const void *x, const void *y, void *ctx)
{
    (void)ctx;
    return by_word(x, y);
}

static int by_count_r(const void *x, const void *y, void *ctx)
{
    (void)ctx;
    return by_count(x, y);
}

/* Collect non-zero counts as records sorted by `cmp`. */
static int records(const arc *a, const counts *c, int (*cmp)(const void *, const void *, void *),
                   int threads, rec **out, size_t *nout)
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
    ana_psort(r, n, sizeof *r, cmp, NULL, threads);
    *out = r;
    *nout = n;
    return 0;
}

static int put_u64(buf *b, uint64_t v)
{
    char t[24];
    size_t i = sizeof t;
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return buf_put(b, t + i, sizeof t - i);
}

typedef struct print_ctx {
    const rec *r;
    int count_first;
} print_ctx;

static int print_range(void *ctx, size_t lo, size_t hi, buf *out)
{
    const print_ctx *p = ctx;
    const rec *r = p->r;
    for (size_t i = lo; i < hi; i++) {
        int rc;
        if (p->count_first)
            rc = put_u64(out, r[i].cnt) || buf_put(out, "\t", 1) || buf_put(out, r[i].w, r[i].n) ||
                 buf_put(out, "\n", 1);
        else
            rc = buf_put(out, r[i].w, r[i].n) || buf_put(out, "\t", 1) || put_u64(out, r[i].cnt) ||
                 buf_put(out, "\n", 1);
        if (rc) return -ENOMEM;
    }
    return 0;
}

/* Print counts as word count (count_first) or sort records. */
static int print(const arc *a, const counts *c, buf *out, int count_first, int threads)
{
    rec *r = NULL;
    size_t n = 0;
    int rc = records(a, c, count_first ? by_count_r : by_word_r, threads, &r, &n);
    ana_mark("sort");
    print_ctx p = {r, count_first};
    if (!rc && ana_par_print(print_range, &p, n, n / 2, out, threads))
        rc = tdc_error(-ENOMEM, "analytics: out of memory");
    ana_mark("print");
    free(r);
    return rc;
}

static int emit(const arc *a, uint32_t first, uint32_t end, buf *out, int count_first)
{
    counts c;
    int rc = count_scope(a, first, end, count_first ? ANA_K_WORDCOUNT : ANA_K_SORT, &c);
    if (!rc) rc = print(a, &c, out, count_first, ana_threads());
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
    return print(a, &c, out, 1, ana_threads());
}

int ana_sort(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    return emit(a, first, end, out, 0);
}
