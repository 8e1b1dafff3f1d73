/* Per-file and sequence analytics on the grammar: inverted index, term vector, sequence
 * count and ranked inverted index (G-TADOC IV-B..IV-D), top-down or bottom-up as the selector
 * says (ana.h).
 *
 * Words are identified by dictionary token id; a word longer than TOK_CAP bytes (stored as
 * several adjacent tokens) gets an id past the dictionary from a side table, filled before
 * the traversal so threads only read it. Files containing such cut words are read as a token
 * stream; all others are computed on the grammar:
 * - top-down, per-file counts use a pass restricted to the rules the file uses, ordered
 *   parents first by their topological level (a counting sort, no comparisons);
 * - bottom-up, every rule the scope uses gets a table (words or 3-word sequences with
 *   counts) built from its children's tables level by level; a file's result is its root
 *   run's own words and crossing sequences plus the tables of the rules in its root run;
 * - sequences of three words use, for every rule, its first and last two words (head and
 *   tail) so a parent counts the sequences that cross its children's boundaries without
 *   descending; sequences inside a child are the child's, multiplied by its weight (top-down)
 *   or merged from its table (bottom-up). */
#include <stdlib.h>
#include <string.h>

#include "ana.h"
#include "ana_int.h"
#include "../base/err.h"

#define NONE UINT32_MAX

/* One entry of a bottom-up sequence table. */
typedef struct sent {
    uint32_t q[3], n;
} sent;

typedef struct stab {
    const sent **tab; /* per rule; NULL when empty or not needed */
    uint32_t *n;
    ana_arena ar[2];
} stab;

/* What an analytic shares between its threads; read-only once the traversal starts. */
typedef struct docs {
    const arc *a;
    const gram *g;
    ana_prep p;  /* levels, cut flags, head/tail */
    ana_plan pl; /* traversal and threads */
    dict *longw; /* joined long words; id = ntokens + index */
    vec32 files; /* the scope's regular files, by path */
    vec32 plain; /* those without cut words */
    vec32 cutf;  /* those with cut words */
    ana_wtab wt; /* bottom-up word tables */
    stab st;     /* bottom-up sequence tables */
    uint64_t *w; /* seqcount: rule weights in the scope */
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

static int put_word(buf *b, const docs *d, uint32_t w)
{
    size_t n;
    const unsigned char *p = word_bytes(d, w, &n);
    return buf_put(b, p, n);
}

/* Words w[0..2] as "w1 w2 w3". */
static int put_words3(buf *b, const docs *d, const uint32_t w[3])
{
    return put_word(b, d, w[0]) || buf_put(b, " ", 1) || put_word(b, d, w[1]) ||
           buf_put(b, " ", 1) || put_word(b, d, w[2]);
}

static int word_cmp(const docs *d, uint32_t x, uint32_t y)
{
    size_t nx, ny;
    const unsigned char *p = word_bytes(d, x, &nx), *q = word_bytes(d, y, &ny);
    int c = memcmp(p, q, nx < ny ? nx : ny);
    return c ? c : (nx > ny) - (nx < ny);
}

/* ---- byte-order ranks ---- */

/* The output sorts compare words over and over; ranking the distinct words of a result once
 * (one sort of those words by their bytes) turns every later comparison into an integer one.
 * Mark the words (ranks_mark), then ranks_make: its work grows with the words marked, not
 * with the dictionary, as the analytics that hand their records on in parts make ranks for
 * each part. */
typedef struct ranks {
    uint32_t *rank; /* per word id (dictionary, then long words) */
    uint32_t *ids;  /* rank -> word id */
    vec32 marked;   /* the word ids marked, each once */
} ranks;

static int ranks_init(const docs *d, ranks *r)
{
    *r = (ranks){0};
    r->rank = calloc((size_t)d->g->ntokens + dict_count(d->longw) + 1, sizeof *r->rank);
    return r->rank ? 0 : -ENOMEM;
}

static int ranks_mark(ranks *r, uint32_t w)
{
    if (r->rank[w]) return 0;
    r->rank[w] = 1;
    return vec32_push(&r->marked, w) ? -ENOMEM : 0;
}

/* A word to rank: its first 8 bytes big-endian (zero-padded; words hold no zero byte), so
 * most comparisons end without touching the dictionary. */
typedef struct rkey {
    uint64_t key;
    uint32_t id;
} rkey;

static int by_rkey(const void *x, const void *y, void *ctx)
{
    const rkey *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    int c = word_cmp(ctx, a->id, b->id);
    return c ? c : (a->id > b->id) - (a->id < b->id);
}

static int ranks_make(const docs *d, ranks *r)
{
    size_t n = r->marked.n;
    rkey *k = malloc((n ? n : 1) * sizeof *k);
    if (!k || !(r->ids = malloc((n ? n : 1) * sizeof *r->ids))) {
        free(k);
        return -ENOMEM;
    }
    n = 0;
    for (size_t m = 0; m < r->marked.n; m++) {
        uint32_t w = r->marked.p[m];
        size_t len;
        const unsigned char *b = word_bytes(d, w, &len);
        uint64_t key = 0;
        for (size_t i = 0; i < 8; i++)
            key = key << 8 | (i < len ? b[i] : 0);
        k[n++] = (rkey){key, (uint32_t)w};
    }
    ana_psort(k, n, sizeof *k, by_rkey, (void *)d, d->pl.threads);
    for (size_t i = 0; i < n; i++) {
        r->ids[i] = k[i].id;
        r->rank[k[i].id] = (uint32_t)i;
    }
    free(k);
    return 0;
}

static void ranks_free(ranks *r)
{
    free(r->rank);
    free(r->ids);
    vec32_free(&r->marked);
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

/* Walk one body (a rule's, or a file's root run) at weight `wt`: its own words and the
 * sequences crossing its children go to the sink; the children's own content is not visited
 * (it comes from their weights or their tables). */
static int walk_body(const docs *d, sink *k, const uint32_t *b, uint64_t n, uint64_t wt)
{
    const uint32_t nt = d->g->ntokens;
    int rc = 0;
    if (!k->seq) {
        for (uint64_t i = 0; i < n && !rc; i++)
            if (b[i] < nt && is_word(d, b[i])) rc = k->word(k, b[i], wt);
        return rc;
    }
    uint32_t win[2] = {0}, wl = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        uint32_t s = b[i];
        if (s >= nt) {
            rc = cross(k, win, &wl, d->p.ht[s - nt], 0, wt);
        } else if (is_word(d, s)) {
            if (k->word) rc = k->word(k, s, wt);
            if (!rc) rc = cross(k, win, &wl, NULL, s, wt);
        }
    }
    return rc;
}

/* A file with cut words: its words in order from the token stream, long words joined. */
typedef struct stream_ctx {
    const docs *d;
    sink *k;
    uint32_t win[2], wl;
} stream_ctx;

static int stream_word(void *ctx, uint32_t tok, const unsigned char *w, size_t n)
{
    stream_ctx *c = ctx;
    int rc = 0;
    if (tok == UINT32_MAX) {
        uint32_t id;
        /* interned before the traversal (intern_long): a read-only lookup */
        if (dict_find(c->d->longw, w, n, &id)) return -EIO;
        tok = c->d->g->ntokens + id;
    }
    if (c->k->word) rc = c->k->word(c->k, tok, 1);
    return rc || !c->k->seq ? rc : cross(c->k, c->win, &c->wl, NULL, tok, 1);
}

static int walk_stream(const docs *d, sink *k, uint32_t e)
{
    stream_ctx c = {.d = d, .k = k};
    return ana_file_words(d->a, e, stream_word, &c);
}

static int intern_long(void *ctx, uint32_t tok, const unsigned char *w, size_t n)
{
    uint32_t id;
    return tok == UINT32_MAX ? dict_intern(ctx, w, n, &id) : 0;
}

/* ---- per-file traversals ---- */

/* A thread's working memory for per-file passes. */
typedef struct scratch {
    uint32_t *stamp, gen; /* per rule: used by the current file when stamp == gen */
    uint64_t *w;          /* per rule: occurrences in the current file */
    vec32 used, order;    /* rules of the current file; the same, parents first */
    uint32_t *hcnt;       /* per level */
} scratch;

static void scratch_free(scratch *x)
{
    free(x->stamp);
    free(x->w);
    free(x->hcnt);
    vec32_free(&x->used);
    vec32_free(&x->order);
    memset(x, 0, sizeof *x);
}

static int scratch_init(scratch *x, const docs *d)
{
    memset(x, 0, sizeof *x);
    size_t nr = (size_t)d->g->nrules + 1;
    x->stamp = calloc(nr, sizeof *x->stamp);
    x->w = malloc(nr * sizeof *x->w);
    x->hcnt = malloc(((size_t)d->p.nlevels + 1) * sizeof *x->hcnt);
    if (x->stamp && x->w && x->hcnt) return 0;
    scratch_free(x);
    return -ENOMEM;
}

/* The distinct rules of file e's root run into x->used, with their occurrences in x->w. */
static int root_rules(const docs *d, scratch *x, const uint32_t *run, uint64_t len)
{
    const uint32_t nt = d->g->ntokens;
    x->gen++;
    x->used.n = 0;
    for (uint64_t i = 0; i < len; i++) {
        if (run[i] < nt) continue;
        uint32_t r = run[i] - nt;
        if (x->stamp[r] != x->gen) {
            x->stamp[r] = x->gen;
            x->w[r] = 0;
            if (vec32_push(&x->used, r)) return -ENOMEM;
        }
        x->w[r]++;
    }
    return 0;
}

/* Top-down over the rules file e uses (Algorithm 1 restricted to one file). */
static int walk_file_td(const docs *d, scratch *x, sink *k, const uint32_t *run, uint64_t len)
{
    const gram *g = d->g;
    const uint32_t nt = g->ntokens;
    int rc = root_rules(d, x, run, len);
    if (rc) return rc;
    for (size_t j = 0; j < x->used.n; j++) { /* grows while we scan it */
        uint64_t n;
        const uint32_t *b = gram_body(g, x->used.p[j], &n);
        for (uint64_t i = 0; i < n; i++) {
            if (b[i] < nt) continue;
            uint32_t r = b[i] - nt;
            if (x->stamp[r] == x->gen) continue;
            x->stamp[r] = x->gen;
            x->w[r] = 0;
            if (vec32_push(&x->used, r)) return -ENOMEM;
        }
    }
    /* Parents first: by level, highest first (counting sort on the precomputed levels). */
    if (vec32_reserve(&x->order, x->used.n)) return -ENOMEM;
    uint32_t nl = d->p.nlevels;
    memset(x->hcnt, 0, ((size_t)nl + 1) * sizeof *x->hcnt);
    for (size_t j = 0; j < x->used.n; j++)
        x->hcnt[nl - 1 - ana_height(&d->p, x->used.p[j])]++;
    for (uint32_t h = 0, acc = 0; h < nl; h++) {
        uint32_t c = x->hcnt[h];
        x->hcnt[h] = acc;
        acc += c;
    }
    for (size_t j = 0; j < x->used.n; j++) {
        uint32_t r = x->used.p[j];
        x->order.p[x->hcnt[nl - 1 - ana_height(&d->p, r)]++] = r;
    }
    rc = walk_body(d, k, run, len, 1);
    for (size_t j = 0; j < x->used.n && !rc; j++) {
        uint32_t r = x->order.p[j];
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            if (b[i] >= nt) x->w[b[i] - nt] += x->w[r];
        rc = walk_body(d, k, b, n, x->w[r]);
    }
    return rc;
}

/* Bottom-up: the root run's own words and crossings, then its rules' tables (level 2). */
static int walk_file_bu(const docs *d, scratch *x, sink *k, const uint32_t *run, uint64_t len)
{
    int rc = root_rules(d, x, run, len);
    if (!rc) rc = walk_body(d, k, run, len, 1);
    for (size_t j = 0; j < x->used.n && !rc; j++) {
        uint32_t r = x->used.p[j];
        uint64_t m = x->w[r];
        if (k->word) {
            const ana_wpair *e = d->wt.tab[r];
            for (uint32_t i = 0; i < d->wt.n[r] && !rc; i++)
                rc = k->word(k, e[i].w, e[i].n * m);
        } else {
            const sent *e = d->st.tab[r];
            for (uint32_t i = 0; i < d->st.n[r] && !rc; i++)
                rc = k->seq(k, e[i].q, e[i].n * m);
        }
    }
    return rc;
}

/* Everything of file e into the sink. */
static int walk_file(const docs *d, scratch *x, sink *k, uint32_t e)
{
    const arc_entry *f = &d->a->ents[e];
    if (ana_file_has_cut(&d->p, e)) return walk_stream(d, k, e);
    const uint32_t *run = d->g->root.p + f->root_start;
    return d->pl.bottomup ? walk_file_bu(d, x, k, run, f->root_len)
                          : walk_file_td(d, x, k, run, f->root_len);
}

/* The options of c when they hand a part's lines on early (ana_opts.early), else NULL. */
static const ana_opts *early_of(const ana_ctx *c)
{
    const ana_opts *o = ana_ctx_opts(c);
    return o->early ? o : NULL;
}

/* Hand text, the lines made of what a part's analysis held (rc: whether making them failed),
 * to the merge before the part is done (o->early); text is left empty. */
static int emit_early(const ana_opts *o, int rc, buf *text)
{
    if (!rc) rc = o->early(o->early_arg, text);
    text->n = 0;
    return rc;
}

/* Records per slice of emit_lines: small against early_at, large against a call. */
#define SLICE_RECORDS 1024

/* Record i goes on record i - 1's line (a record group's lines are printed whole). */
typedef int (*joined_fn)(const void *ctx, size_t i);

/* The first record at or after i that starts a line. */
static size_t line_start(joined_fn joined, const void *ctx, size_t i, size_t n)
{
    while (i > 0 && i < n && joined(ctx, i))
        i++;
    return i;
}

/* Lines of records [0, n) printed by fn into text. With `early`, a slice at a time, text
 * handed to the merge (emit_early) each time it passes early->early_at, so that the text held
 * stays near early_at whatever the records' lines weigh (a path per record: several times the
 * record), the rest left in text; else on `threads` threads (ana_par_print). Slices and the
 * threads' halves start only where a line does, so a part's lines stay whole and in order. */
static int emit_lines(const ana_opts *early, ana_print_fn fn, void *ctx, size_t n,
                      joined_fn joined, int threads, buf *text)
{
    if (!early) return ana_par_print(fn, ctx, n, line_start(joined, ctx, n / 2, n), text, threads);
    int rc = 0;
    for (size_t lo = 0, hi; lo < n && !rc; lo = hi) {
        hi = line_start(joined, ctx, n - lo > SLICE_RECORDS ? lo + SLICE_RECORDS : n, n);
        rc = fn(ctx, lo, hi, text);
        if (!rc && text->n > early->early_at) rc = emit_early(early, 0, text);
    }
    return rc;
}

/* ---- three-word sequence table ---- */

/* Open addressing with the key and count in one slot (one cache line per probe), plus the
 * used slots in insertion order so a table is listed and emptied in O(entries). */
typedef struct sslot {
    uint64_t v; /* 0 = empty */
    uint32_t q[3];
} sslot;

typedef struct seqtab {
    sslot *s;
    size_t cap, n;
    uint32_t *used; /* n slot indices */
} seqtab;

static uint64_t seq_mix(const uint32_t q[3])
{
    uint64_t h = (q[0] * 0x9e3779b97f4a7c15ull) ^ (q[1] * 0xc2b2ae3d27d4eb4full) ^
                 (q[2] * 0x165667b19e3779f9ull);
    return h ^ (h >> 29);
}

/* Add n to sequence q, whose seq_mix is h. */
static int seq_add_h(seqtab *t, const uint32_t q[3], uint64_t n, uint64_t h)
{
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        if (cap / 2 > UINT32_MAX) return -ENOMEM;
        sslot *s = calloc(cap, sizeof *s);
        uint32_t *used = s ? malloc(cap / 2 * sizeof *used) : NULL;
        if (!used) {
            free(s);
            return -ENOMEM;
        }
        for (size_t i = 0; i < t->n; i++) {
            const sslot *o = &t->s[t->used[i]];
            size_t x = seq_mix(o->q) & (cap - 1);
            while (s[x].v)
                x = (x + 1) & (cap - 1);
            s[x] = *o;
            used[i] = (uint32_t)x;
        }
        free(t->s);
        free(t->used);
        t->s = s;
        t->used = used;
        t->cap = cap;
    }
    size_t x = h & (t->cap - 1);
    sslot *e;
    while ((e = &t->s[x])->v && (e->q[0] != q[0] || e->q[1] != q[1] || e->q[2] != q[2]))
        x = (x + 1) & (t->cap - 1);
    if (!e->v) {
        memcpy(e->q, q, sizeof e->q);
        t->used[t->n++] = (uint32_t)x;
    }
    e->v += n;
    return 0;
}

static int seq_add(seqtab *t, const uint32_t q[3], uint64_t n)
{
    return seq_add_h(t, q, n, seq_mix(q));
}

/* Entry i (insertion order). */
static const sslot *seq_at(const seqtab *t, size_t i)
{
    return &t->s[t->used[i]];
}

static void seq_clear(seqtab *t)
{
    for (size_t i = 0; i < t->n; i++)
        t->s[t->used[i]].v = 0;
    t->n = 0;
}

static void seqtab_free(seqtab *t)
{
    free(t->s);
    free(t->used);
    memset(t, 0, sizeof *t);
}

/* ---- sinks ---- */

typedef struct wsink {
    sink s;
    vec64 cnt;     /* per word id */
    vec32 touched; /* ids with a non-zero count */
    const docs *d;
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

static void wsink_free(wsink *k)
{
    vec64_free(&k->cnt);
    vec32_free(&k->touched);
}

/* Sequences into a table; with nparts 2, only those whose hash's top bit is `part` (two
 * threads each keep one half of the sequences, so their tables never overlap). */
typedef struct ssink {
    sink s;
    seqtab t;
    int part, nparts;
    const docs *d;        /* with early: the words' bytes */
    const ana_opts *early; /* or NULL: the table grows (ana_opts.early) */
    /* With early: hands on what the table holds and empties it, where its growing would take
     * it past full_at bytes. */
    int (*full)(struct ssink *k);
    uint64_t full_at;
} ssink;

/* Bytes of a sequence table of cap slots. */
static uint64_t seq_bytes(size_t cap)
{
    return (uint64_t)cap * sizeof(sslot) + (uint64_t)cap / 2 * sizeof(uint32_t);
}

/* What k's table holds, handed on as output lines (ana_opts.early); the table is emptied. */
static int ss_early(ssink *k)
{
    buf text = {0};
    int rc = 0;
    for (size_t i = 0; i < k->t.n && !rc; i++) {
        const sslot *e = seq_at(&k->t, i);
        if (ana_put_num(&text, e->v) || buf_put(&text, "\t", 1) || put_words3(&text, k->d, e->q) ||
            buf_put(&text, "\n", 1))
            rc = -ENOMEM;
    }
    seq_clear(&k->t);
    rc = emit_early(k->early, rc, &text);
    buf_free(&text);
    return rc;
}

static int ss_seq(sink *s, const uint32_t q[3], uint64_t n)
{
    ssink *k = (ssink *)s;
    uint64_t h = seq_mix(q);
    if (k->nparts > 1 && (int)(h >> 63) != k->part) return 0;
    if (k->early && k->t.cap && (k->t.n + 1) * 2 > k->t.cap &&
        seq_bytes(k->t.cap * 2) > k->full_at) {
        int rc = k->full(k);
        if (rc) return rc;
    }
    return seq_add_h(&k->t, q, n, h);
}

/* ---- bottom-up sequence tables ---- */

typedef struct stjob {
    docs *d;
    const unsigned char *need;
} stjob;

/* Rule r's sequences: its children's tables plus the sequences crossing their boundaries. */
static int stab_rule(docs *d, uint32_t r, ana_arena *ar, ssink *tmp)
{
    const uint32_t nt = d->g->ntokens;
    uint64_t m;
    const uint32_t *b = gram_body(d->g, r, &m);
    int rc = 0;
    seq_clear(&tmp->t);
    for (uint64_t i = 0; i < m && !rc; i++) {
        if (b[i] < nt) continue;
        const sent *e = d->st.tab[b[i] - nt];
        for (uint32_t j = 0; j < d->st.n[b[i] - nt] && !rc; j++)
            rc = seq_add(&tmp->t, e[j].q, e[j].n);
    }
    if (!rc) rc = walk_body(d, &tmp->s, b, m, 1);
    if (rc || !tmp->t.n) return rc;
    sent *t = ana_arena_alloc(ar, tmp->t.n * sizeof *t);
    if (!t) return -ENOMEM;
    for (size_t j = 0; j < tmp->t.n; j++) {
        const sslot *e = seq_at(&tmp->t, j);
        memcpy(t[j].q, e->q, sizeof t[j].q);
        t[j].n = (uint32_t)e->v; /* below 2^32: so are the rule's words (ana_plan_make) */
    }
    d->st.tab[r] = t;
    d->st.n[r] = (uint32_t)tmp->t.n;
    return 0;
}

static int stab_task(void *x, const ana_team *t)
{
    const stjob *j = x;
    docs *d = j->d;
    ssink tmp = {.s = {.seq = ss_seq}};
    int rc = 0;
    for (uint32_t h = 0; h < d->p.nlevels; h++) {
        size_t lo, hi, base = d->p.lvl_at[h];
        ana_share(t, d->p.lvl_at[h + 1] - base, &lo, &hi);
        for (size_t k = base + lo; k < base + hi && !rc; k++) {
            uint32_t r = d->p.lvl[k];
            if (j->need[r]) rc = stab_rule(d, r, &d->st.ar[t->tid], &tmp);
        }
        ana_sync(t);
    }
    seqtab_free(&tmp.t);
    return rc;
}

static int stab_build(docs *d, const unsigned char *need)
{
    size_t nr = (size_t)d->g->nrules + 1;
    d->st.tab = calloc(nr, sizeof *d->st.tab);
    d->st.n = calloc(nr, sizeof *d->st.n);
    if (!d->st.tab || !d->st.n) return -ENOMEM;
    stjob j = {d, need};
    return ana_par(d->pl.threads, stab_task, &j);
}

static void stab_free(stab *s)
{
    free(s->tab);
    free(s->n);
    ana_arena_free(&s->ar[0]);
    ana_arena_free(&s->ar[1]);
}

/* ---- setup ---- */

static int fail_msg(int rc)
{
    if (rc == -ENOMEM) return tdc_error(rc, "analytics: out of memory");
    return tdc_error(rc, "analytics: %s", strerror(-rc));
}

static void docs_free(docs *d)
{
    ana_prep_free(&d->p);
    dict_free(d->longw);
    vec32_free(&d->files);
    vec32_free(&d->plain);
    vec32_free(&d->cutf);
    ana_wtab_free(&d->wt);
    stab_free(&d->st);
    free(d->w);
}

/* Levels, plan, the scope's visible files, long words, and for bottom-up the tables. */
static int docs_init(docs *d, ana_ctx *c, const arc *a, int kind, uint32_t first, uint32_t end,
                     const unsigned char *vis)
{
    int seq = kind == ANA_SEQCOUNT || kind == ANA_RANKEDINVINDEX;
    memset(d, 0, sizeof *d);
    d->a = a;
    d->g = &a->g;
    int rc = ana_prep_init(&d->p, c, a, ANA_PREP_LEVELS | (seq ? ANA_PREP_HT : 0));
    if (rc) return rc;
    ana_mark(&d->p.clock, "levels, head/tail");
    ana_plan_make(&d->p, kind, first, end, vis, &d->pl);
    ana_mark(&d->p.clock, "selector");
    unsigned char *need = NULL;
    if (!(d->longw = dict_new()) || ana_scope_files(a, first, end, vis, &d->files)) goto nomem;
    for (size_t i = 0; i < d->files.n; i++) {
        uint32_t e = d->files.p[i];
        if (!ana_file_has_cut(&d->p, e)) {
            if (vec32_push(&d->plain, e)) goto nomem;
        } else if (vec32_push(&d->cutf, e)) {
            goto nomem;
        } else if ((rc = ana_file_words(a, e, intern_long, d->longw))) {
            goto fail;
        }
    }
    ana_mark(&d->p.clock, "scope files, long words");
    if (d->pl.bottomup) {
        if ((rc = ana_mark_reach(&d->p, d->plain.p, d->plain.n, &need))) goto fail;
        if (seq)
            rc = stab_build(d, need);
        else
            rc = ana_wtab_build(&d->wt, &d->p, need, d->pl.threads);
        free(need);
        if (rc) goto fail;
        ana_mark(&d->p.clock, "bottom-up tables");
    }
    return 0;
nomem:
    rc = -ENOMEM;
fail:
    docs_free(d);
    return fail_msg(rc);
}

/* ---- output helpers ---- */

int ana_put_num(buf *b, uint64_t v)
{
    char t[24];
    size_t i = sizeof t;
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return buf_put(b, t + i, sizeof t - i);
}

size_t ana_num_len(uint64_t v)
{
    size_t d = 1;
    for (; v >= 10; v /= 10)
        d++;
    return d;
}

int ana_put_path(buf *b, const char *p)
{
    size_t plain = strcspn(p, "\t\n\\");
    if (!p[plain]) return buf_put(b, p, plain);
    for (; *p; p++) {
        const char *esc = *p == '\t' ? "\\t" : *p == '\n' ? "\\n" : *p == '\\' ? "\\\\" : NULL;
        if (esc ? buf_put(b, esc, 2) : buf_put(b, p, 1)) return -ENOMEM;
    }
    return 0;
}

/* "\t" + the escaped path of every scope file (by rank), built once for outputs that repeat
 * paths on every line. */
typedef struct paths {
    buf text;
    uint64_t *at; /* files + 1 offsets into text */
} paths;

static int paths_make(const docs *d, size_t plen, paths *p)
{
    memset(p, 0, sizeof *p);
    if (!(p->at = malloc((d->files.n + 1) * sizeof *p->at))) return -ENOMEM;
    for (size_t i = 0; i < d->files.n; i++) {
        p->at[i] = p->text.n;
        if (buf_put(&p->text, "\t", 1) || ana_put_path(&p->text, d->a->ents[d->files.p[i]].path + plen))
            return -ENOMEM;
    }
    p->at[d->files.n] = p->text.n;
    return 0;
}

static int put_tab_path(buf *b, const paths *p, uint32_t f)
{
    return buf_put(b, p->text.p + p->at[f], (size_t)(p->at[f + 1] - p->at[f]));
}

static void paths_free(paths *p)
{
    buf_free(&p->text);
    free(p->at);
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

int ana_orphan_link(const arc *a, const unsigned char *vis, uint32_t first, uint32_t end,
                    uint32_t e)
{
    const arc_entry *x = &a->ents[e];
    if (x->type != ARC_REG || x->root_len || !x->size || !ana_visible(vis, e)) return 0;
    int64_t h = arc_ino_entry(a, x->ino);
    return h >= 0 && (uint32_t)h != e &&
           ((uint32_t)h < first || (uint32_t)h >= end || !ana_visible(vis, (uint32_t)h));
}

int ana_relink(const arc *a, const unsigned char *vis, uint32_t first, uint32_t end,
               arc_entry *ents)
{
    uint64_t *done = NULL; /* inodes already given a name here (few: a linear search) */
    size_t ndone = 0;
    for (uint32_t e = first; e < end; e++) {
        if (!ana_orphan_link(a, vis, first, end, e)) continue;
        uint64_t ino = a->ents[e].ino;
        size_t k = 0;
        while (k < ndone && done[k] != ino)
            k++;
        if (k < ndone) continue; /* an earlier visible name holds it */
        uint64_t *d = realloc(done, (ndone + 1) * sizeof *d);
        if (!d) {
            free(done);
            return -ENOMEM;
        }
        done = d;
        done[ndone++] = ino;
        const arc_entry *h = &a->ents[arc_ino_entry(a, ino)];
        ents[e].root_start = h->root_start;
        ents[e].root_len = h->root_len;
    }
    free(done);
    return 0;
}

int ana_scope_files(const arc *a, uint32_t first, uint32_t end, const unsigned char *vis,
                    vec32 *out)
{
    for (uint32_t e = first; e < end; e++)
        if (a->ents[e].type == ARC_REG && ana_visible(vis, e) && vec32_push(out, e))
            return -ENOMEM;
    sort_r(out->p, out->n, sizeof *out->p, by_path, (void *)a);
    return 0;
}

/* Word ids by their count in k (descending), then by word: by rank when every word is
 * ranked (large scopes), else by bytes. */
typedef struct cwctx {
    const wsink *k;
    const uint32_t *rank;
} cwctx;

static int by_count_word(const void *x, const void *y, void *ctx)
{
    const cwctx *c = ctx;
    const uint64_t *cnt = c->k->cnt.p;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    if (cnt[a] != cnt[b]) return cnt[a] < cnt[b] ? 1 : -1;
    if (c->rank) return c->rank[a] < c->rank[b] ? -1 : c->rank[a] > c->rank[b];
    return word_cmp(c->k->d, a, b);
}

/* ---- the analytics ---- */

/* Record of the ranked inverted index: a sequence, a file rank and its count there. */
typedef struct rankrec {
    uint32_t q[3];
    uint32_t file;
    uint64_t n;
} rankrec;

/* A per-file analytic's job: the files split in two ranges of equal root symbols, each
 * thread's results kept apart, then joined in file order. */
typedef struct pfjob {
    const docs *d;
    size_t plen;
    const ana_opts *early; /* or NULL (ana_opts.early) */
    paths paths;          /* invindex, rankedinvindex: made once for every output made */
    const uint32_t *rank; /* termvector: every word's rank, or NULL */
    buf *out0, out1;      /* termvector text: thread 0 appends to the caller's buffer */
    vec32 pairs[2];       /* invindex: (word, file rank) */
    rankrec *recs[2];
    size_t nrec[2], caprec[2];
} pfjob;

static void pfjob_free(pfjob *j)
{
    paths_free(&j->paths);
    buf_free(&j->out1);
    for (int t = 0; t < 2; t++) {
        vec32_free(&j->pairs[t]);
        free(j->recs[t]);
    }
}

static int tv_task(void *x, const ana_team *t)
{
    pfjob *j = x;
    const docs *d = j->d;
    const arc *a = d->a;
    scratch s;
    wsink k = {.s = {.word = ws_word}, .d = d};
    buf *out = t->tid ? &j->out1 : j->out0, path = {0};
    size_t at[3];
    ana_split_files(a, d->files.p, d->files.n, t->n, at);
    int rc = scratch_init(&s, d);
    for (size_t i = at[t->tid]; i < at[t->tid + 1] && !rc; i++) {
        uint32_t e = d->files.p[i];
        k.touched.n = 0;
        if ((rc = walk_file(d, &s, &k.s, e))) break;
        cwctx c = {&k, j->rank};
        sort_r(k.touched.p, k.touched.n, sizeof *k.touched.p, by_count_word, &c);
        path.n = 0; /* the file's escaped path and a tab, once for all its lines */
        if (ana_put_path(&path, a->ents[e].path + j->plen) || buf_put(&path, "\t", 1)) rc = -ENOMEM;
        for (size_t m = 0; m < k.touched.n && !rc; m++) {
            uint32_t w = k.touched.p[m];
            rc = buf_put(out, path.p, path.n) || ana_put_num(out, k.cnt.p[w]) ||
                         buf_put(out, "\t", 1) || put_word(out, d, w) || buf_put(out, "\n", 1)
                     ? -ENOMEM
                     : 0;
            k.cnt.p[w] = 0;
        }
        /* in path order, so what this thread printed so far can go to the merge alone */
        if (!rc && j->early && out->n > j->early->early_at)
            rc = emit_early(j->early, 0, out);
    }
    scratch_free(&s);
    wsink_free(&k);
    buf_free(&path);
    return rc;
}

int ana_termvector(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                   const unsigned char *vis,
                   buf *out)
{
    docs d;
    int rc = docs_init(&d, c, a, ANA_TERMVECTOR, first, end, vis);
    if (rc) return rc;
    pfjob j = {.d = &d, .plen = ana_scope_prefix(a, first), .out0 = out, .early = early_of(c)};
    ranks rk = {0};
    if (d.pl.scope_syms >= d.g->ntokens) {
        /* a scope this large sorts many words per file: rank the whole dictionary once */
        size_t nid = (size_t)d.g->ntokens + dict_count(d.longw);
        rc = ranks_init(&d, &rk);
        for (size_t w = 0; w < nid && !rc; w++)
            if (w >= d.g->ntokens || is_word(&d, (uint32_t)w)) rc = ranks_mark(&rk, (uint32_t)w);
        if (!rc) rc = ranks_make(&d, &rk);
        j.rank = rk.rank;
    }
    ana_mark(&d.p.clock, "ranks");
    if (!rc) rc = ana_par(d.pl.threads, tv_task, &j);
    ana_mark(&d.p.clock, "traversal, sort, print");
    if (!rc && j.out1.n && buf_put(out, j.out1.p, j.out1.n)) rc = -ENOMEM;
    ranks_free(&rk);
    pfjob_free(&j);
    docs_free(&d);
    return rc ? fail_msg(rc) : 0;
}

static int ii_emit(const docs *d, const paths *paths, vec32 *pairs, int threads,
                   const ana_opts *early, buf *out);

static int ii_task(void *x, const ana_team *t)
{
    pfjob *j = x;
    const docs *d = j->d;
    scratch s;
    wsink k = {.s = {.word = ws_word}, .d = d};
    vec32 *pairs = &j->pairs[t->tid];
    buf text = {0};
    size_t at[3];
    ana_split_files(d->a, d->files.p, d->files.n, t->n, at);
    int rc = scratch_init(&s, d);
    for (size_t i = at[t->tid]; i < at[t->tid + 1] && !rc; i++) {
        k.touched.n = 0;
        if ((rc = walk_file(d, &s, &k.s, d->files.p[i]))) break;
        if (vec32_reserve(pairs, 2 * k.touched.n)) rc = -ENOMEM;
        for (size_t m = 0; m < k.touched.n && !rc; m++) {
            k.cnt.p[k.touched.p[m]] = 0;
            pairs->p[pairs->n++] = k.touched.p[m];
            pairs->p[pairs->n++] = (uint32_t)i;
        }
        if (!rc && j->early && pairs->n * sizeof *pairs->p > j->early->early_at) {
            rc = emit_early(j->early, ii_emit(d, &j->paths, pairs, 1, j->early, &text), &text);
            pairs->n = 0;
        }
    }
    scratch_free(&s);
    wsink_free(&k);
    buf_free(&text);
    return rc;
}

/* Keys (word rank << 32 | file rank), read through memcpy from the pairs' memory. */
static int by_key(const void *x, const void *y, void *ctx)
{
    (void)ctx;
    uint64_t a, b;
    memcpy(&a, x, sizeof a);
    memcpy(&b, y, sizeof b);
    return (a > b) - (a < b);
}

static uint32_t key_word(const uint32_t *pairs, size_t i)
{
    uint64_t k;
    memcpy(&k, pairs + 2 * i, sizeof k);
    return (uint32_t)(k >> 32);
}

typedef struct ii_print {
    const docs *d;
    const ranks *rk;
    const uint32_t *pairs;
    const paths *paths;
} ii_print;

/* Lines for keys [lo, hi), which start and end at a word's first and last key. */
static int ii_range(void *ctx, size_t lo, size_t hi, buf *out)
{
    const ii_print *p = ctx;
    uint32_t prev = 0;
    for (size_t i = lo; i < hi; i++) {
        uint64_t k;
        memcpy(&k, p->pairs + 2 * i, sizeof k);
        uint32_t w = (uint32_t)(k >> 32), f = (uint32_t)k;
        if (i == lo || w != prev) {
            if (i != lo && buf_put(out, "\n", 1)) return -ENOMEM;
            if (put_word(out, p->d, p->rk->ids[w])) return -ENOMEM;
            prev = w;
        }
        if (put_tab_path(out, p->paths, f)) return -ENOMEM;
    }
    return hi > lo && buf_put(out, "\n", 1) ? -ENOMEM : 0;
}

/* Whether key i of an ii_print's pairs has key i - 1's word (emit_lines). */
static int ii_joined(const void *ctx, size_t i)
{
    const ii_print *p = ctx;
    return key_word(p->pairs, i) == key_word(p->pairs, i - 1);
}

/* The lines of (word, file rank) pairs, appended to out: the pairs become 64-bit keys (words
 * by byte order, then files by path), sorted and printed on `threads` threads, or with
 * `early` handed to the merge as they are made (emit_lines). */
static int ii_emit(const docs *d, const paths *paths, vec32 *pairs, int threads,
                   const ana_opts *early, buf *out)
{
    ranks rk = {0};
    int rc = ranks_init(d, &rk);
    for (size_t m = 0; m < pairs->n && !rc; m += 2)
        rc = ranks_mark(&rk, pairs->p[m]);
    if (!rc) rc = ranks_make(d, &rk);
    for (size_t m = 0; m < pairs->n && !rc; m += 2) {
        uint64_t k = (uint64_t)rk.rank[pairs->p[m]] << 32 | pairs->p[m + 1];
        memcpy(pairs->p + m, &k, sizeof k);
    }
    if (!rc) ana_psort(pairs->p, pairs->n / 2, 2 * sizeof *pairs->p, by_key, NULL, threads);
    ii_print pr = {d, &rk, pairs->p, paths};
    if (!rc) rc = emit_lines(early, ii_range, &pr, pairs->n / 2, ii_joined, threads, out);
    ranks_free(&rk);
    return rc;
}

int ana_invindex(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                 const unsigned char *vis,
                 buf *out)
{
    docs d;
    int rc = docs_init(&d, c, a, ANA_INVINDEX, first, end, vis);
    if (rc) return rc;
    pfjob j = {.d = &d, .early = early_of(c)};
    rc = paths_make(&d, ana_scope_prefix(a, first), &j.paths);
    if (!rc) rc = ana_par(d.pl.threads, ii_task, &j);
    ana_mark(&d.p.clock, "traversal");
    vec32 *pairs = &j.pairs[0];
    if (!rc && j.pairs[1].n) {
        if (vec32_reserve(pairs, j.pairs[1].n))
            rc = -ENOMEM;
        else {
            memcpy(pairs->p + pairs->n, j.pairs[1].p, j.pairs[1].n * sizeof *pairs->p);
            pairs->n += j.pairs[1].n;
        }
    }
    if (!rc) rc = ii_emit(&d, &j.paths, pairs, d.pl.threads, j.early, out);
    ana_mark(&d.p.clock, "ranks, sort, print");
    pfjob_free(&j);
    docs_free(&d);
    return rc ? fail_msg(rc < 0 ? rc : -ENOMEM) : 0;
}

/* Compare sequences of word ranks: the same order as their "w1 w2 w3" text in byte order,
 * since the space sorts below every word byte. */
static int seq_cmp(const uint32_t *x, const uint32_t *y)
{
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* A sequence of word ranks, as text. */
static int put_seq(buf *b, const docs *d, const ranks *rk, const uint32_t *q)
{
    const uint32_t w[3] = {rk->ids[q[0]], rk->ids[q[1]], rk->ids[q[2]]};
    return put_words3(b, d, w);
}

/* Word ids in sequences q (stride `size` bytes, n of them) replaced by their ranks. */
static int rank_seqs(const docs *d, ranks *rk, void *base, size_t n, size_t size)
{
    int rc = ranks_init(d, rk);
    unsigned char *p = base;
    for (size_t i = 0; i < n && !rc; i++)
        for (int k = 0; k < 3 && !rc; k++)
            rc = ranks_mark(rk, ((uint32_t *)(p + i * size))[k]);
    if (!rc) rc = ranks_make(d, rk);
    for (size_t i = 0; i < n && !rc; i++)
        for (int k = 0; k < 3; k++) {
            uint32_t *q = (uint32_t *)(p + i * size);
            q[k] = rk->rank[q[k]];
        }
    return rc;
}

/* Records of seqcount: a sequence and its count. */
typedef struct seqrec {
    uint32_t q[3];
    uint64_t n;
} seqrec;

static int by_seq_count(const void *x, const void *y, void *ctx)
{
    const seqrec *a = x, *b = y;
    (void)ctx;
    if (a->n != b->n) return a->n < b->n ? 1 : -1;
    return seq_cmp(a->q, b->q);
}

typedef struct sc_print {
    const docs *d;
    const ranks *rk;
    const seqrec *r;
} sc_print;

static int sc_range(void *ctx, size_t lo, size_t hi, buf *out)
{
    const sc_print *p = ctx;
    for (size_t i = lo; i < hi; i++)
        if (ana_put_num(out, p->r[i].n) || buf_put(out, "\t", 1) ||
            put_seq(out, p->d, p->rk, p->r[i].q) || buf_put(out, "\n", 1))
            return -ENOMEM;
    return 0;
}

typedef struct scjob {
    const docs *d;
    const ana_opts *early; /* or NULL (ana_opts.early) */
    ssink k[2];
} scjob;

/* Each thread walks everything and keeps its half of the sequences (by hash). */
static int sc_task(void *x, const ana_team *t)
{
    scjob *j = x;
    const docs *d = j->d;
    const gram *g = d->g;
    ssink *k = &j->k[t->tid];
    k->s.seq = ss_seq;
    k->part = t->tid;
    k->nparts = t->n;
    k->d = d;
    k->early = j->early;
    k->full = ss_early;
    k->full_at = j->early ? j->early->early_at : 0;
    int rc = 0;
    for (size_t i = 0; i < d->cutf.n && !rc; i++)
        rc = walk_stream(d, &k->s, d->cutf.p[i]);
    for (size_t i = 0; i < d->plain.n && !rc; i++) {
        const arc_entry *f = &d->a->ents[d->plain.p[i]];
        rc = walk_body(d, &k->s, g->root.p + f->root_start, f->root_len, 1);
    }
    for (uint32_t r = 1; r <= g->nrules && !rc; r++) {
        uint64_t wr = d->w[r], m;
        if (!wr) continue;
        if (!d->pl.bottomup) {
            /* top-down: every used rule's crossing sequences times its weight */
            const uint32_t *b = gram_body(g, r, &m);
            rc = walk_body(d, &k->s, b, m, wr);
        } else {
            /* bottom-up: the root runs' rules' tables times their occurrences */
            const sent *e = d->st.tab[r];
            for (uint32_t i = 0; i < d->st.n[r] && !rc; i++)
                rc = ss_seq(&k->s, e[i].q, e[i].n * wr);
        }
    }
    return rc;
}

int ana_seqcount(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                 const unsigned char *vis,
                 buf *out)
{
    docs d;
    int rc = docs_init(&d, c, a, ANA_SEQCOUNT, first, end, vis);
    if (rc) return rc;
    scjob j = {.d = &d, .early = early_of(c)};
    seqrec *recs = NULL;
    size_t nr = 0;
    /* Weights of the rules in the scope: top-down through every level, bottom-up only the
     * root runs' occurrences (the rules below are in the tables). */
    if (!(d.w = calloc((size_t)d.g->nrules + 1, sizeof *d.w)))
        rc = -ENOMEM;
    else
        rc = ana_weights(&d.p, d.plain.p, d.plain.n, d.w, NULL, !d.pl.bottomup, d.pl.threads);
    if (!rc) rc = ana_par(d.pl.threads, sc_task, &j);
    ana_mark(&d.p.clock, "traversal");
    if (!rc) {
        size_t total = j.k[0].t.n + j.k[1].t.n;
        if (!(recs = malloc((total ? total : 1) * sizeof *recs))) rc = -ENOMEM;
        for (int t = 0; t < 2 && !rc; t++)
            for (size_t i = 0; i < j.k[t].t.n; i++) {
                const sslot *e = seq_at(&j.k[t].t, i);
                memcpy(recs[nr].q, e->q, sizeof recs[nr].q);
                recs[nr++].n = e->v;
            }
        for (int t = 0; t < 2; t++)
            seqtab_free(&j.k[t].t);
    }
    ranks rk = {0};
    if (!rc) rc = rank_seqs(&d, &rk, recs, nr, sizeof *recs);
    ana_mark(&d.p.clock, "ranks");
    if (!rc) ana_psort(recs, nr, sizeof *recs, by_seq_count, NULL, d.pl.threads);
    ana_mark(&d.p.clock, "sort");
    sc_print pr = {&d, &rk, recs};
    if (!rc) rc = ana_par_print(sc_range, &pr, nr, nr / 2, out, d.pl.threads);
    ana_mark(&d.p.clock, "print");
    ranks_free(&rk);
    free(recs);
    for (int t = 0; t < 2; t++)
        seqtab_free(&j.k[t].t);
    docs_free(&d);
    return rc ? fail_msg(rc) : 0;
}

static int by_seq_then_rank(const void *x, const void *y, void *ctx)
{
    const rankrec *a = x, *b = y;
    (void)ctx;
    int c = seq_cmp(a->q, b->q);
    if (c) return c;
    if (a->n != b->n) return a->n < b->n ? 1 : -1;
    return (a->file > b->file) - (a->file < b->file); /* file ranks follow path order */
}

static int ri_emit(const docs *d, const paths *paths, rankrec *recs, size_t nr, int threads,
                   const ana_opts *early, buf *out);

/* One thread's sequences of the file it walks, and where their records go. */
typedef struct ri_sink {
    ssink k;
    pfjob *j;
    int tid;
    size_t file; /* the file's index in the scope's files */
    buf text;    /* with early: the lines handed on */
} ri_sink;

/* The table's sequences as records of the file, appended to the thread's records. */
static int ri_take(ri_sink *r)
{
    pfjob *j = r->j;
    size_t *nrec = &j->nrec[r->tid], *cap = &j->caprec[r->tid];
    if (*nrec + r->k.t.n > *cap) {
        size_t nc = *cap ? *cap : 1024;
        while (nc < *nrec + r->k.t.n)
            nc *= 2;
        rankrec *p = realloc(j->recs[r->tid], nc * sizeof *p);
        if (!p) return -ENOMEM;
        j->recs[r->tid] = p;
        *cap = nc;
    }
    for (size_t m = 0; m < r->k.t.n; m++) {
        const sslot *e = seq_at(&r->k.t, m);
        rankrec *q = &j->recs[r->tid][(*nrec)++];
        memcpy(q->q, e->q, sizeof q->q);
        q->file = (uint32_t)r->file;
        q->n = e->v;
    }
    seq_clear(&r->k.t);
    return 0;
}

/* The thread's records handed on as lines (ana_opts.early), and dropped. */
static int ri_early(ri_sink *r)
{
    pfjob *j = r->j;
    int rc = ri_emit(j->d, &j->paths, j->recs[r->tid], j->nrec[r->tid], 1, j->early, &r->text);
    j->nrec[r->tid] = 0;
    return emit_early(j->early, rc, &r->text);
}

/* A file with more sequences than its table may hold: those so far go on as records of a
 * part of their own, so that none holds one file's sequence twice (the merge sums the
 * parts). The table may hold eight times what a part holds, the merge's share of one thread:
 * each part costs the merge a lookup per range of keys. */
static int ri_full(ssink *k)
{
    ri_sink *r = (ri_sink *)k;
    int rc = ri_take(r);
    return rc ? rc : ri_early(r);
}

static int ri_task(void *x, const ana_team *t)
{
    pfjob *j = x;
    const docs *d = j->d;
    scratch s;
    ri_sink r = {.k = {.s = {.seq = ss_seq},
                       .d = d,
                       .early = j->early,
                       .full = ri_full,
                       .full_at = j->early ? j->early->early_at * 8 : 0},
                 .j = j,
                 .tid = t->tid};
    size_t at[3];
    ana_split_files(d->a, d->files.p, d->files.n, t->n, at);
    int rc = scratch_init(&s, d);
    for (size_t i = at[t->tid]; i < at[t->tid + 1] && !rc; i++) {
        seq_clear(&r.k.t);
        r.file = i;
        if ((rc = walk_file(d, &s, &r.k.s, d->files.p[i])) || (rc = ri_take(&r))) break;
        if (j->early && j->nrec[t->tid] * sizeof(rankrec) > j->early->early_at) rc = ri_early(&r);
    }
    scratch_free(&s);
    seqtab_free(&r.k.t);
    buf_free(&r.text);
    return rc;
}

typedef struct ri_print {
    const docs *d;
    const ranks *rk;
    const rankrec *r;
    const paths *paths;
} ri_print;

static int ri_range(void *ctx, size_t lo, size_t hi, buf *out)
{
    const ri_print *p = ctx;
    const rankrec *r = p->r;
    for (size_t i = lo; i < hi; i++) {
        if (i == lo || seq_cmp(r[i].q, r[i - 1].q)) {
            if (i != lo && buf_put(out, "\n", 1)) return -ENOMEM;
            if (put_seq(out, p->d, p->rk, r[i].q)) return -ENOMEM;
        }
        if (put_tab_path(out, p->paths, r[i].file) || buf_put(out, ":", 1) || ana_put_num(out, r[i].n))
            return -ENOMEM;
    }
    return hi > lo && buf_put(out, "\n", 1) ? -ENOMEM : 0;
}

/* Whether record i of an ri_print has record i - 1's sequence (emit_lines). */
static int ri_joined(const void *ctx, size_t i)
{
    const ri_print *p = ctx;
    return !seq_cmp(p->r[i].q, p->r[i - 1].q);
}

/* The lines of records recs[0, nr) (their words replaced by ranks on the way), appended to
 * out: sorted by sequence, then count, then file, and printed on `threads` threads, or with
 * `early` handed to the merge as they are made (emit_lines). */
static int ri_emit(const docs *d, const paths *paths, rankrec *recs, size_t nr, int threads,
                   const ana_opts *early, buf *out)
{
    ranks rk = {0};
    int rc = rank_seqs(d, &rk, recs, nr, sizeof *recs);
    if (!rc) ana_psort(recs, nr, sizeof *recs, by_seq_then_rank, NULL, threads);
    ri_print pr = {d, &rk, recs, paths};
    if (!rc) rc = emit_lines(early, ri_range, &pr, nr, ri_joined, threads, out);
    ranks_free(&rk);
    return rc;
}

int ana_rankedinvindex(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                       const unsigned char *vis,
                       buf *out)
{
    docs d;
    int rc = docs_init(&d, c, a, ANA_RANKEDINVINDEX, first, end, vis);
    if (rc) return rc;
    pfjob j = {.d = &d, .early = early_of(c)};
    rc = paths_make(&d, ana_scope_prefix(a, first), &j.paths);
    if (!rc) rc = ana_par(d.pl.threads, ri_task, &j);
    ana_mark(&d.p.clock, "traversal");
    if (!rc && j.nrec[1]) {
        rankrec *r = realloc(j.recs[0], (j.nrec[0] + j.nrec[1]) * sizeof *r);
        if (!r)
            rc = -ENOMEM;
        else {
            memcpy(r + j.nrec[0], j.recs[1], j.nrec[1] * sizeof *r);
            j.recs[0] = r;
            j.nrec[0] += j.nrec[1];
        }
    }
    if (!rc) rc = ri_emit(&d, &j.paths, j.recs[0], j.nrec[0], d.pl.threads, j.early, out);
    ana_mark(&d.p.clock, "ranks, sort, print");
    pfjob_free(&j);
    docs_free(&d);
    return rc ? fail_msg(rc < 0 ? rc : -ENOMEM) : 0;
}
