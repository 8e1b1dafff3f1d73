/* Per-file and sequence analytics on the grammar: inverted index, term vector, sequence
 * count and ranked inverted index (G-TADOC IV-B..IV-D).
 *
 * Words are identified by dictionary token id; a word longer than TOK_CAP bytes (stored as
 * several adjacent tokens) gets an id past the dictionary from a side table. Files containing
 * such cut words are read as a token stream; all others are computed on the grammar:
 * - per-file counts use a top-down pass restricted to the rules the file uses;
 * - sequences of three words use, for every rule, its first and last two words (head and
 *   tail) so a parent counts the sequences that cross its children's boundaries without
 *   descending; sequences inside a child are the child's, multiplied by its weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ana.h"
#include "ana_int.h"
#include "err.h"

#define NONE UINT32_MAX

typedef struct docs {
    const arc *a;
    const gram *g;
    unsigned char *cut;   /* per rule: holds a cut long word */
    uint32_t *pos;        /* per rule: position in g->topo */
    uint32_t *stamp, gen; /* per rule: used by the current file when stamp == gen */
    uint64_t *w;          /* per rule: occurrences in the current file or scope */
    vec32 used;           /* rules of the current file, parents first */
    uint32_t (*ht)[5];    /* per rule: head[2], tail[2], words (capped at 3) */
    dict *longw;          /* joined long words; id = ntokens + index */
} docs;

static int is_word(const docs *d, uint32_t t)
{
    return dict_is_word(d->a->dict, t);
}

/* Bytes of word id w. */
static const unsigned char *word_bytes(const docs *d, uint32_t w, size_t *n)
{
    if (w < d->g->ntokens) return dict_bytes(d->a->dict, w, n);
    return dict_bytes(d->longw, w - d->g->ntokens, n);
}

static int word_cmp(const docs *d, uint32_t x, uint32_t y)
{
    size_t nx, ny;
    const unsigned char *p = word_bytes(d, x, &nx), *q = word_bytes(d, y, &ny);
    int c = memcmp(p, q, nx < ny ? nx : ny);
    return c ? c : (nx > ny) - (nx < ny);
}

static void docs_free(docs *d)
{
    free(d->cut);
    free(d->pos);
    free(d->stamp);
    free(d->w);
    free(d->ht);
    vec32_free(&d->used);
    dict_free(d->longw);
}

/* Per-rule tables: cut flags, topological positions, and head/tail words. */
static int docs_init(docs *d, const arc *a)
{
    memset(d, 0, sizeof *d);
    d->a = a;
    d->g = &a->g;
    size_t nr = (size_t)d->g->nrules + 1;
    d->stamp = calloc(nr, sizeof *d->stamp);
    d->w = calloc(nr, sizeof *d->w);
    d->ht = malloc(nr * sizeof *d->ht);
    d->longw = dict_new();
    if (!d->stamp || !d->w || !d->ht || !d->longw || gram_topo_positions(d->g, &d->pos) ||
        ana_find_cuts(a, &d->cut)) {
        docs_free(d);
        return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    for (uint32_t k = 0; k < d->g->nrules; k++) {
        uint32_t r = d->g->topo.p[k];
        uint64_t n;
        const uint32_t *b = gram_body(d->g, r, &n);
        uint32_t *h = d->ht[r];
        h[0] = h[1] = h[2] = h[3] = NONE;
        h[4] = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s = b[i], words[3], nw = 0;
            if (s >= d->g->ntokens) {
                const uint32_t *c = d->ht[s - d->g->ntokens];
                /* the child's words as far as head/tail need: first two and last two */
                if (c[4] >= 1) words[nw++] = c[0];
                if (c[4] >= 2) words[nw++] = c[1];
                if (c[4] >= 3) {
                    /* only the tail matters after the head is full */
                    if (h[4] < 2) {
                        for (uint32_t j = 0; j < 2 && h[4] < 2; j++)
                            h[h[4]++] = c[j];
                    }
                    h[2] = c[2];
                    h[3] = c[3];
                    h[4] = 3;
                    continue;
                }
            } else {
                if (!is_word(d, s)) continue;
                words[nw++] = s;
            }
            for (uint32_t j = 0; j < nw; j++) {
                if (h[4] < 2) h[h[4]] = words[j];
                h[2] = h[3];
                h[3] = words[j];
                if (h[4] < 3) h[4]++;
            }
        }
        if (h[4] == 1) h[2] = NONE; /* tail[0] is undefined with one word */
    }
    return 0;
}

/* ---- sinks: what a traversal produces ---- */

/* A word occurrence count or a three-word sequence count, delivered to a sink. */
typedef struct sink {
    int (*word)(struct sink *s, uint32_t w, uint64_t n);
    int (*seq)(struct sink *s, const uint32_t q[3], uint64_t n);
} sink;

/* Sequences crossing from window (wl words in win) into a child with head/tail h; updates
 * the window. With h == NULL, a single word `tok`. */
static int cross(sink *k, uint32_t win[2], uint32_t *wl, const uint32_t *h, uint32_t tok,
                 uint64_t weight)
{
    uint32_t head[2] = {NONE, NONE}, nh;
    if (h) {
        nh = h[4] < 2 ? h[4] : 2;
        head[0] = h[0];
        head[1] = h[1];
    } else {
        nh = 1;
        head[0] = tok;
    }
    if (k->seq) {
        uint32_t s[4] = {0}, ns = 0;
        for (uint32_t j = 0; j < *wl; j++)
            s[ns++] = win[j];
        for (uint32_t j = 0; j < nh; j++)
            s[ns++] = head[j];
        for (uint32_t i = 0; i + 2 < ns; i++) {
            /* starts in the window, ends in the child */
            if (i < *wl && i + 2 >= *wl) {
                int rc = k->seq(k, s + i, weight);
                if (rc) return rc;
            }
        }
    }
    uint32_t total = h ? h[4] : 1;
    if (total >= 2) {
        /* the child's last two words (for two words, its tail is its head) */
        win[0] = h[2];
        win[1] = h[3];
        *wl = 2;
    } else if (total == 1) {
        if (*wl == 2) win[0] = win[1];
        win[*wl == 2 ? 1 : *wl] = head[0];
        if (*wl < 2) (*wl)++;
    }
    return 0;
}

/* Walk one body (a rule's, or a file's root run) at weight `wt`: words and crossing sequences
 * go to the sink; child rules' own content is counted through their weights. */
static int walk_body(const docs *d, sink *k, const uint32_t *b, uint64_t n, uint64_t wt)
{
    uint32_t win[2] = {0}, wl = 0;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        uint32_t s = b[i];
        if (s >= d->g->ntokens) {
            rc = cross(k, win, &wl, d->ht[s - d->g->ntokens], 0, wt);
        } else if (is_word(d, s)) {
            if (k->word) rc = k->word(k, s, wt);
            if (!rc) rc = cross(k, win, &wl, NULL, s, wt);
        }
    }
    return rc;
}

/* A file with cut words: its words in order from the token stream, long words joined. */
typedef struct stream_ctx {
    docs *d;
    sink *k;
    uint32_t win[2], wl;
} stream_ctx;

static int stream_word(void *ctx, uint32_t tok, const unsigned char *w, size_t n)
{
    stream_ctx *c = ctx;
    int rc = 0;
    if (tok == UINT32_MAX) {
        uint32_t id;
        if ((rc = dict_intern(c->d->longw, w, n, &id))) return rc;
        tok = c->d->g->ntokens + id;
    }
    if (c->k->word) rc = c->k->word(c->k, tok, 1);
    return rc ? rc : cross(c->k, c->win, &c->wl, NULL, tok, 1);
}

static int walk_stream(docs *d, sink *k, uint32_t e)
{
    stream_ctx c = {.d = d, .k = k};
    return ana_file_words(d->a, e, stream_word, &c);
}

/* Everything of file e into the sink: restricted top-down over the rules it uses. */
static int walk_file(docs *d, sink *k, uint32_t e)
{
    const gram *g = d->g;
    const arc_entry *f = &d->a->ents[e];
    if (ana_file_has_cut(d->a, d->cut, e)) return walk_stream(d, k, e);
    const uint32_t *run = g->root.p + f->root_start;
    d->gen++;
    d->used.n = 0;
    for (uint64_t i = 0; i < f->root_len; i++) {
        if (run[i] < g->ntokens) continue;
        uint32_t r = run[i] - g->ntokens;
        if (d->stamp[r] != d->gen) {
            d->stamp[r] = d->gen;
            d->w[r] = 0;
            if (vec32_push(&d->used, r)) return -ENOMEM;
        }
    }
    for (size_t j = 0; j < d->used.n; j++) { /* grows while we scan it */
        uint64_t n;
        const uint32_t *b = gram_body(g, d->used.p[j], &n);
        for (uint64_t i = 0; i < n; i++) {
            if (b[i] < g->ntokens) continue;
            uint32_t r = b[i] - g->ntokens;
            if (d->stamp[r] == d->gen) continue;
            d->stamp[r] = d->gen;
            d->w[r] = 0;
            if (vec32_push(&d->used, r)) return -ENOMEM;
        }
    }
    gram_sort_topo(d->pos, d->used.p, d->used.n, 1);
    for (uint64_t i = 0; i < f->root_len; i++)
        if (run[i] >= g->ntokens) d->w[run[i] - g->ntokens]++;
    int rc = walk_body(d, k, run, f->root_len, 1);
    for (size_t j = 0; j < d->used.n && !rc; j++) {
        uint32_t r = d->used.p[j];
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            if (b[i] >= g->ntokens) d->w[b[i] - g->ntokens] += d->w[r];
        rc = walk_body(d, k, b, n, d->w[r]);
    }
    return rc;
}

/* ---- three-word sequence table ---- */

typedef struct seqtab {
    uint32_t (*k)[3];
    uint64_t *v; /* 0 = empty slot */
    size_t cap, n;
} seqtab;

static size_t seq_hash(const uint32_t q[3], size_t cap)
{
    uint64_t h = (q[0] * 0x9e3779b97f4a7c15ull) ^ (q[1] * 0xc2b2ae3d27d4eb4full) ^
                 (q[2] * 0x165667b19e3779f9ull);
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static int seq_add(seqtab *t, const uint32_t q[3], uint64_t n)
{
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        uint32_t(*k)[3] = malloc(cap * sizeof *k);
        uint64_t *v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->v[i]) continue;
            size_t h = seq_hash(t->k[i], cap);
            while (v[h])
                h = (h + 1) & (cap - 1);
            memcpy(k[h], t->k[i], sizeof k[h]);
            v[h] = t->v[i];
        }
        free(t->k);
        free(t->v);
        t->k = k;
        t->v = v;
        t->cap = cap;
    }
    size_t h = seq_hash(q, t->cap);
    while (t->v[h] && memcmp(t->k[h], q, sizeof t->k[h]))
        h = (h + 1) & (t->cap - 1);
    if (!t->v[h]) {
        memcpy(t->k[h], q, sizeof t->k[h]);
        t->n++;
    }
    t->v[h] += n;
    return 0;
}

static void seq_clear(seqtab *t)
{
    if (t->v) memset(t->v, 0, t->cap * sizeof *t->v);
    t->n = 0;
}

static void seqtab_free(seqtab *t)
{
    free(t->k);
    free(t->v);
}

/* ---- word counts of one file ---- */

typedef struct wsink {
    sink s;
    vec64 cnt;     /* per word id */
    vec32 touched; /* ids with a non-zero count */
    docs *d;
} wsink;

static int ws_word(sink *s, uint32_t w, uint64_t n)
{
    wsink *k = (wsink *)s;
    if (w >= k->cnt.n) {
        size_t want = (size_t)w + 1 + 64;
        if (vec64_reserve(&k->cnt, want - k->cnt.n)) return -ENOMEM;
        memset(k->cnt.p + k->cnt.n, 0, (want - k->cnt.n) * sizeof *k->cnt.p);
        k->cnt.n = want;
    }
    if (!k->cnt.p[w] && vec32_push(&k->touched, w)) return -ENOMEM;
    k->cnt.p[w] += n;
    return 0;
}

typedef struct ssink {
    sink s;
    seqtab t;
} ssink;

static int ss_seq(sink *s, const uint32_t q[3], uint64_t n)
{
    return seq_add(&((ssink *)s)->t, q, n);
}

/* ---- output helpers ---- */

static int put_num(buf *b, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    return buf_put(b, t, (size_t)n);
}

/* A path with tab, newline or backslash written with C escapes. */
static int put_path(buf *b, const char *p)
{
    for (; *p; p++) {
        const char *esc = *p == '\t' ? "\\t" : *p == '\n' ? "\\n" : *p == '\\' ? "\\\\" : NULL;
        if (esc ? buf_put(b, esc, 2) : buf_put(b, p, 1)) return -ENOMEM;
    }
    return 0;
}

static int put_word(buf *b, const docs *d, uint32_t w)
{
    size_t n;
    const unsigned char *p = word_bytes(d, w, &n);
    return buf_put(b, p, n);
}

static int by_path(const void *x, const void *y, void *ctx)
{
    const arc *a = ctx;
    return strcmp(a->ents[*(const uint32_t *)x].path, a->ents[*(const uint32_t *)y].path);
}

size_t ana_scope_prefix(const arc *a, uint32_t first)
{
    const char *p = a->ents[first].path;
    if (a->ents[first].type == ARC_DIR) return first ? strlen(p) + 1 : 0;
    const char *slash = strrchr(p, '/');
    return slash ? (size_t)(slash - p) + 1 : 0;
}

int ana_scope_files(const arc *a, uint32_t first, uint32_t end, vec32 *out)
{
    for (uint32_t e = first; e < end; e++)
        if (a->ents[e].type == ARC_REG && vec32_push(out, e)) return -ENOMEM;
    sort_r(out->p, out->n, sizeof *out->p, by_path, (void *)a);
    return 0;
}

/* Word ids by their count in k (descending), then by word. */
static int by_count_word(const void *x, const void *y, void *ctx)
{
    const wsink *k = ctx;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    if (k->cnt.p[a] != k->cnt.p[b]) return k->cnt.p[a] < k->cnt.p[b] ? 1 : -1;
    return word_cmp(k->d, a, b);
}

/* ---- the analytics ---- */

int ana_termvector(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    docs d;
    wsink k = {.s = {.word = ws_word}};
    vec32 files = {0};
    size_t plen = ana_scope_prefix(a, first);
    int rc = docs_init(&d, a);
    if (rc) return rc;
    k.d = &d;
    rc = ana_scope_files(a, first, end, &files);
    for (size_t i = 0; i < files.n && !rc; i++) {
        uint32_t e = files.p[i];
        k.touched.n = 0;
        if ((rc = walk_file(&d, &k.s, e))) break;
        sort_r(k.touched.p, k.touched.n, sizeof *k.touched.p, by_count_word, &k);
        for (size_t j = 0; j < k.touched.n && !rc; j++) {
            uint32_t w = k.touched.p[j];
            rc = put_path(out, a->ents[e].path + plen) || buf_put(out, "\t", 1) ||
                 put_num(out, k.cnt.p[w]) || buf_put(out, "\t", 1) || put_word(out, &d, w) ||
                 buf_put(out, "\n", 1);
            k.cnt.p[w] = 0;
        }
    }
    vec32_free(&files);
    vec64_free(&k.cnt);
    vec32_free(&k.touched);
    docs_free(&d);
    return rc ? tdc_error(-ENOMEM, "analytics: out of memory") : 0;
}

/* (word, file rank) pairs sorted by word, then file rank. */
static int by_word_then_file(const void *x, const void *y, void *ctx)
{
    const uint32_t *a = x, *b = y;
    int c = a[0] == b[0] ? 0 : word_cmp(ctx, a[0], b[0]);
    return c ? c : (a[1] > b[1]) - (a[1] < b[1]);
}

int ana_invindex(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    docs d;
    wsink k = {.s = {.word = ws_word}};
    vec32 files = {0}, pairs = {0};
    size_t plen = ana_scope_prefix(a, first);
    int rc = docs_init(&d, a);
    if (rc) return rc;
    k.d = &d;
    rc = ana_scope_files(a, first, end, &files);
    for (size_t i = 0; i < files.n && !rc; i++) {
        k.touched.n = 0;
        if ((rc = walk_file(&d, &k.s, files.p[i]))) break;
        for (size_t j = 0; j < k.touched.n && !rc; j++) {
            k.cnt.p[k.touched.p[j]] = 0;
            rc = vec32_push(&pairs, k.touched.p[j]) || vec32_push(&pairs, (uint32_t)i);
        }
    }
    if (!rc) {
        sort_r(pairs.p, pairs.n / 2, 2 * sizeof *pairs.p, by_word_then_file, &d);
    }
    for (size_t j = 0; j < pairs.n && !rc; j += 2) {
        if (j == 0 || pairs.p[j] != pairs.p[j - 2]) {
            if (j) rc = buf_put(out, "\n", 1);
            if (!rc) rc = put_word(out, &d, pairs.p[j]);
        }
        if (!rc)
            rc = buf_put(out, "\t", 1) ||
                 put_path(out, a->ents[files.p[pairs.p[j + 1]]].path + plen);
    }
    if (!rc && pairs.n) rc = buf_put(out, "\n", 1);
    vec32_free(&files);
    vec32_free(&pairs);
    vec64_free(&k.cnt);
    vec32_free(&k.touched);
    docs_free(&d);
    return rc ? tdc_error(-ENOMEM, "analytics: out of memory") : 0;
}

/* Compare sequences word by word: the same order as their "w1 w2 w3" text in byte order,
 * since the space sorts below every word byte. */
static int seq_cmp(const docs *d, const uint32_t *x, const uint32_t *y)
{
    for (int i = 0; i < 3; i++) {
        int c = x[i] == y[i] ? 0 : word_cmp(d, x[i], y[i]);
        if (c) return c;
    }
    return 0;
}

static int put_seq(buf *b, const docs *d, const uint32_t *q)
{
    return put_word(b, d, q[0]) || buf_put(b, " ", 1) || put_word(b, d, q[1]) ||
           buf_put(b, " ", 1) || put_word(b, d, q[2]);
}

/* Records of seqcount: a sequence and its count. */
typedef struct seqrec {
    uint32_t q[3];
    uint64_t n;
} seqrec;
static int by_seq_count(const void *x, const void *y, void *ctx)
{
    const seqrec *a = x, *b = y;
    if (a->n != b->n) return a->n < b->n ? 1 : -1;
    return seq_cmp(ctx, a->q, b->q);
}

int ana_seqcount(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    docs d;
    ssink k = {.s = {.seq = ss_seq}};
    const gram *g = &a->g;
    int rc = docs_init(&d, a);
    if (rc) return rc;
    /* Weights of every rule in the scope (top-down), then each body's crossing sequences. */
    for (uint32_t e = first; e < end && !rc; e++) {
        const arc_entry *f = &a->ents[e];
        if (f->type != ARC_REG) continue;
        if (ana_file_has_cut(a, d.cut, e)) {
            rc = walk_stream(&d, &k.s, e);
            continue;
        }
        const uint32_t *run = g->root.p + f->root_start;
        for (uint64_t i = 0; i < f->root_len; i++)
            if (run[i] >= g->ntokens) d.w[run[i] - g->ntokens]++;
        rc = walk_body(&d, &k.s, run, f->root_len, 1);
    }
    for (uint32_t j = g->nrules; j-- > 0 && !rc;) {
        uint32_t r = g->topo.p[j];
        if (!d.w[r]) continue;
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            if (b[i] >= g->ntokens) d.w[b[i] - g->ntokens] += d.w[r];
        rc = walk_body(&d, &k.s, b, n, d.w[r]);
    }
    seqrec *recs = rc ? NULL : malloc((k.t.n ? k.t.n : 1) * sizeof *recs);
    if (!rc && !recs) rc = -ENOMEM;
    size_t nr = 0;
    for (size_t i = 0; !rc && i < k.t.cap; i++)
        if (k.t.v[i]) {
            memcpy(recs[nr].q, k.t.k[i], sizeof recs[nr].q);
            recs[nr++].n = k.t.v[i];
        }
    if (!rc) {
        sort_r(recs, nr, sizeof *recs, by_seq_count, &d);
    }
    for (size_t i = 0; i < nr && !rc; i++)
        rc = put_num(out, recs[i].n) || buf_put(out, "\t", 1) || put_seq(out, &d, recs[i].q) ||
             buf_put(out, "\n", 1);
    free(recs);
    seqtab_free(&k.t);
    docs_free(&d);
    return rc ? tdc_error(-ENOMEM, "analytics: out of memory") : 0;
}

/* Records of the ranked inverted index: a sequence, a file rank and its count there. */
typedef struct rankrec {
    uint32_t q[3];
    uint32_t file;
    uint64_t n;
} rankrec;
static int by_seq_then_rank(const void *x, const void *y, void *ctx)
{
    const rankrec *a = x, *b = y;
    int c = seq_cmp(ctx, a->q, b->q);
    if (c) return c;
    if (a->n != b->n) return a->n < b->n ? 1 : -1;
    return (a->file > b->file) - (a->file < b->file); /* file ranks follow path order */
}

int ana_rankedinvindex(const arc *a, uint32_t first, uint32_t end, buf *out)
{
    docs d;
    ssink k = {.s = {.seq = ss_seq}};
    vec32 files = {0};
    rankrec *recs = NULL;
    size_t nr = 0, cap = 0, plen = ana_scope_prefix(a, first);
    int rc = docs_init(&d, a);
    if (rc) return rc;
    rc = ana_scope_files(a, first, end, &files);
    for (size_t i = 0; i < files.n && !rc; i++) {
        seq_clear(&k.t);
        if ((rc = walk_file(&d, &k.s, files.p[i]))) break;
        for (size_t j = 0; j < k.t.cap && !rc; j++) {
            if (!k.t.v[j]) continue;
            if (nr == cap) {
                cap = cap ? cap * 2 : 1024;
                rankrec *nrp = realloc(recs, cap * sizeof *recs);
                if (!nrp) {
                    rc = -ENOMEM;
                    break;
                }
                recs = nrp;
            }
            memcpy(recs[nr].q, k.t.k[j], sizeof recs[nr].q);
            recs[nr].file = (uint32_t)i;
            recs[nr++].n = k.t.v[j];
        }
    }
    if (!rc) {
        sort_r(recs, nr, sizeof *recs, by_seq_then_rank, &d);
    }
    for (size_t i = 0; i < nr && !rc; i++) {
        if (i == 0 || seq_cmp(&d, recs[i].q, recs[i - 1].q)) {
            if (i) rc = buf_put(out, "\n", 1);
            if (!rc) rc = put_seq(out, &d, recs[i].q);
        }
        if (!rc)
            rc = buf_put(out, "\t", 1) ||
                 put_path(out, a->ents[files.p[recs[i].file]].path + plen) ||
                 buf_put(out, ":", 1) || put_num(out, recs[i].n);
    }
    if (!rc && nr) rc = buf_put(out, "\n", 1);
    free(recs);
    vec32_free(&files);
    seqtab_free(&k.t);
    docs_free(&d);
    return rc ? tdc_error(-ENOMEM, "analytics: out of memory") : 0;
}
