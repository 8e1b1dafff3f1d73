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
#include "../base/err.h"
#include "../base/tok.h"

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

int ana_file_has_cut(const ana_prep *p, uint32_t e)
{
    if (!p->ncut) return 0;
    const uint32_t *run = p->g->root.p + p->a->ents[e].root_start;
    for (uint64_t i = 0; i < p->a->ents[e].root_len; i++)
        if (p->cls[run[i]] & ANA_CUT) return 1;
    return 0;
}

/* A frame of ana_run_words' walk: a body and the next symbol to take (forward) or the
 * symbols left (backward). */
typedef struct wframe {
    const uint32_t *body;
    uint64_t n, i;
} wframe;

int ana_run_words(const arc *a, uint64_t start, uint64_t len, int back, ana_word_fn fn,
                  void *ctx)
{
    const gram *g = &a->g;
    wframe *f = malloc(64 * sizeof *f);
    size_t nf = 1, cap = 64;
    vec32 toks = {0}; /* the word tokens of the word in progress, in walk order */
    buf word = {0};
    int rc = f ? 0 : -ENOMEM;
    if (f) f[0] = (wframe){g->root.p + start, len, back ? len : 0};
    while (!rc) {
        /* Next token of the run, depth first; UINT32_MAX at its end. */
        uint32_t s = UINT32_MAX;
        while (nf) {
            wframe *t = &f[nf - 1];
            if (back ? !t->i : t->i == t->n) {
                nf--;
                continue;
            }
            uint32_t x = back ? t->body[--t->i] : t->body[t->i++];
            if (x < g->ntokens) {
                s = x;
                break;
            }
            if (nf == cap) {
                wframe *m = realloc(f, 2 * cap * sizeof *f);
                if (!m) {
                    rc = -ENOMEM;
                    break;
                }
                f = m;
                cap *= 2;
            }
            uint64_t n;
            const uint32_t *b = gram_body(g, x - g->ntokens, &n);
            f[nf++] = (wframe){b, n, back ? n : 0};
        }
        if (rc) break;
        if (s != UINT32_MAX && dict_is_word(a->dict, s)) {
            if (vec32_push(&toks, s)) rc = -ENOMEM;
            continue;
        }
        /* A separator or the end completes the word in progress: one token as itself, a cut
         * word as its pieces joined in the text's order. */
        if (toks.n == 1) {
            rc = fn(ctx, toks.p[0], NULL, 0);
        } else if (toks.n) {
            word.n = 0;
            for (size_t i = 0; i < toks.n && !rc; i++) {
                size_t l;
                const unsigned char *t = dict_bytes(a->dict, toks.p[back ? toks.n - 1 - i : i], &l);
                rc = buf_put(&word, t, l);
            }
            if (!rc) rc = fn(ctx, UINT32_MAX, word.p, word.n);
        }
        toks.n = 0;
        if (rc || s == UINT32_MAX) break;
    }
    free(f);
    vec32_free(&toks);
    buf_free(&word);
    return rc;
}

int ana_file_words(const arc *a, uint32_t e, ana_word_fn fn, void *ctx)
{
    return ana_run_words(a, a->ents[e].root_start, a->ents[e].root_len, 0, fn, ctx);
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

/* Count the words of the files of [first, end) visible in vis into c, with p prepared for the
 * archive. */
static int count_scope(ana_prep *p, uint32_t first, uint32_t end, const unsigned char *vis,
                       int kind, counts *c)
{
    const arc *a = p->a;
    const gram *g = &a->g;
    ana_plan pl;
    ana_wtab wt = {0};
    vec32 files = {0};
    uint64_t *w = NULL, *tok[2] = {NULL, NULL};
    unsigned char *need = NULL;
    int rc = -ENOMEM;
    ana_plan_make(p, kind, first, end, vis, &pl);
    if (!(w = calloc((size_t)g->nrules + 1, sizeof *w)) ||
        !(c->tok = calloc((size_t)g->ntokens + 1, sizeof *c->tok)))
        goto out;
    tok[0] = c->tok;
    /* bottom-up's reduction adds into one count array per thread */
    if (pl.bottomup && pl.threads > 1 && !(tok[1] = calloc((size_t)g->ntokens + 1, sizeof *tok[1])))
        goto out;
    rc = 0;
    /* Files with cut words are read as token streams; the others go through the grammar. */
    for (uint32_t e = first; e < end && !rc; e++) {
        if (a->ents[e].type != ARC_REG || !ana_visible(vis, e)) continue;
        if (ana_file_has_cut(p, e))
            rc = ana_file_words(a, e, count_word, c);
        else if (vec32_push(&files, e))
            rc = -ENOMEM;
    }
    if (rc) goto out;
    ana_mark(&p->clock, "scope files");
    if (!pl.bottomup) {
        rc = ana_weights(p, files.p, files.n, w, c->tok, 1, pl.threads);
    } else if (!(rc = ana_weights(p, files.p, files.n, w, c->tok, 0, pl.threads)) &&
               !(rc = ana_mark_reach(p, files.p, files.n, &need)) &&
               !(rc = ana_wtab_build(&wt, p, need, pl.threads))) {
        ana_mark(&p->clock, "bottom-up tables");
        reduce_job j = {p, w, &wt, tok};
        rc = ana_par(pl.threads, reduce_task, &j);
    }
    ana_mark(&p->clock, "traversal");
    if (!rc && tok[1])
        for (uint32_t t = 0; t < g->ntokens; t++)
            c->tok[t] += tok[1][t];
out:
    vec32_free(&files);
    free(w);
    free(tok[1]);
    free(need);
    ana_wtab_free(&wt);
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

/* The non-zero counts as records in byte order of their words: the dictionary's words taken
 * in `order` (all word tokens in byte order) or, without it, sorted here; the joined long
 * words sorted and merged in. */
static int records(const arc *a, const counts *c, const uint32_t *order, uint32_t norder,
                   int threads, ana_crec **out, size_t *nout)
{
    size_t nt = 0;
    for (uint32_t t = 0; t < a->g.ntokens; t++)
        nt += c->tok[t] != 0;
    size_t nw = order ? c->nlw : nt + c->nlw;
    ana_crec *r = malloc((nt + c->nlw ? nt + c->nlw : 1) * sizeof *r);
    ana_wrec *x = malloc((nw ? nw : 1) * sizeof *x);
    if (!r || !x) goto nomem;
    size_t k = 0;
    if (order) {
        const uint64_t *offs = a->dict->offs.p;
        for (uint32_t i = 0; i < norder; i++) {
            if (i + 16 < norder) { /* random loads: the count and the offsets, ahead */
                __builtin_prefetch(&c->tok[order[i + 16]]);
                __builtin_prefetch(&offs[order[i + 16]]);
            }
            if (c->tok[order[i]]) {
                size_t l;
                const unsigned char *wd = dict_bytes(a->dict, order[i], &l);
                r[k++] = (ana_crec){wd, l, c->tok[order[i]]};
            }
        }
    } else {
        for (uint32_t t = 0; t < a->g.ntokens; t++)
            if (c->tok[t]) {
                size_t l;
                const unsigned char *wd = dict_bytes(a->dict, t, &l);
                x[k++] = (ana_wrec){ana_prefix_key(wd, l), wd, (uint32_t)l, t};
            }
        if (ana_sort_words(x, k, threads)) goto nomem;
        for (size_t i = 0; i < k; i++)
            r[i] = (ana_crec){x[i].w, x[i].n, c->tok[x[i].id]};
    }
    if (c->nlw) {
        /* the joined long words: sorted apart, merged in from the end */
        ana_wrec *l = x + (nw - c->nlw);
        for (size_t i = 0; i < c->nlw; i++) {
            const unsigned char *wd = (const unsigned char *)c->lw[i];
            l[i] =
                (ana_wrec){ana_prefix_key(wd, c->lwlen[i]), wd, (uint32_t)c->lwlen[i], (uint32_t)i};
        }
        if (ana_sort_words(l, c->nlw, 1)) goto nomem;
        for (size_t i = 0; i < c->nlw; i++) /* the sort left keys of later bytes */
            l[i].key = ana_prefix_key(l[i].w, l[i].n);
        size_t i = k, j = c->nlw, o = k + c->nlw;
        while (j) {
            ana_wrec y = {0};
            if (i)
                y = (ana_wrec){ana_prefix_key(r[i - 1].w, r[i - 1].n), r[i - 1].w,
                               (uint32_t)r[i - 1].n, 0};
            if (i && ana_wrec_cmp(&y, &l[j - 1]) > 0) {
                r[--o] = r[--i];
            } else {
                j--;
                r[--o] = (ana_crec){l[j].w, l[j].n, c->lwcnt[l[j].id]};
            }
        }
    }
    free(x);
    *out = r;
    *nout = nt + c->nlw;
    return 0;
nomem:
    free(r);
    free(x);
    return tdc_error(-ENOMEM, "analytics: out of memory");
}

/* Print counts as word count (count_first) or sort records; k times the phases. */
static int print(ana_clock *k, const arc *a, const counts *c, const uint32_t *order,
                 uint32_t norder, buf *out, int count_first, int threads)
{
    ana_crec *r = NULL;
    size_t n = 0;
    int rc = records(a, c, order, norder, threads, &r, &n);
    if (!rc && count_first) rc = ana_by_count(r, n);
    ana_mark(k, "sort");
    if (!rc) rc = ana_print_counts(r, n, count_first, out, threads);
    ana_mark(k, "print");
    free(r);
    return rc;
}

static int emit(ana_ctx *ctx, const arc *a, uint32_t first, uint32_t end,
                const unsigned char *vis, buf *out, int count_first)
{
    counts c;
    ana_prep p;
    memset(&c, 0, sizeof c);
    /* A large scope has (nearly) every word: the prepared word order saves sorting them.
     * Levels only for bottom-up (top-down goes in g->topo's order). */
    uint64_t syms;
    uint32_t nfiles;
    ana_plan_threads(ctx, a, first, end, vis, &syms, &nfiles);
    int flags = ana_ctx_opts(ctx)->traversal == ANA_BOTTOMUP ? ANA_PREP_LEVELS : 0;
    if (syms >= a->g.root.n / 8) flags |= ANA_PREP_ORDER;
    int rc = ana_prep_init(&p, ctx, a, flags);
    if (rc) return rc;
    ana_mark(&p.clock, "levels");
    rc = count_scope(&p, first, end, vis, count_first ? ANA_WORDCOUNT : ANA_SORT, &c);
    if (!rc) rc = print(&p.clock, a, &c, p.order, p.norder, out, count_first, ana_threads(ctx));
    counts_free(&c);
    ana_prep_free(&p);
    return rc;
}

int ana_wordcount(ana_ctx *ctx, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis, buf *out)
{
    return emit(ctx, a, first, end, vis, out, 1);
}

int ana_wordcount_counts(ana_ctx *ctx, const arc *a, const uint64_t *tok, buf *out)
{
    counts c = {.tok = (uint64_t *)tok}; /* only read: print never writes counts */
    ana_clock k = {.verbose = ana_ctx_opts(ctx)->verbose};
    ana_mark(&k, NULL);
    return print(&k, a, &c, NULL, 0, out, 1, ana_threads(ctx));
}

int ana_sort(ana_ctx *ctx, const arc *a, uint32_t first, uint32_t end, const unsigned char *vis,
             buf *out)
{
    return emit(ctx, a, first, end, vis, out, 0);
}
