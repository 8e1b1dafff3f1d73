/* ana_merge: the parts' output texts parsed back into keys and counts, summed, and printed in
 * the analytic's order (ana_merge.h). Keys (words, sequences) are interned once; the per-file
 * analytics keep (key, file, count) records, sorted and summed at the end. */
#include "ana_merge.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ana.h"
#include "ana_int.h"
#include "analytics.h"
#include "../base/err.h"

/* ---- interned byte strings: dense ids in first-seen order ---- */

typedef struct strtab {
    buf bytes;      /* the strings, one after another */
    vec64 at;       /* string i is bytes [at[i], at[i + 1]) */
    uint32_t *slot; /* open addressing: id + 1, 0 empty */
    size_t cap;     /* slots, a power of two */
} strtab;

static const unsigned char *st_get(const strtab *t, uint32_t id, size_t *n)
{
    *n = (size_t)(t->at.p[id + 1] - t->at.p[id]);
    return t->bytes.p + t->at.p[id];
}

static uint32_t st_count(const strtab *t)
{
    return t->at.n ? (uint32_t)t->at.n - 1 : 0;
}

static size_t st_home(const unsigned char *p, size_t n, size_t cap)
{
    return (size_t)XXH3_64bits(p, n) & (cap - 1);
}

static int st_grow(strtab *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s) return -ENOMEM;
    for (uint32_t id = 0; id < st_count(t); id++) {
        size_t n;
        const unsigned char *p = st_get(t, id, &n);
        size_t h = st_home(p, n, cap);
        while (s[h])
            h = (h + 1) & (cap - 1);
        s[h] = id + 1;
    }
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 0;
}

/* The id of string (p, n), added when new. 0 or -ENOMEM. */
static int st_intern(strtab *t, const unsigned char *p, size_t n, uint32_t *id)
{
    if (!t->at.n && vec64_push(&t->at, 0)) return -ENOMEM;
    if ((st_count(t) + 1) * 2 > t->cap && st_grow(t)) return -ENOMEM;
    size_t h = st_home(p, n, t->cap);
    for (; t->slot[h]; h = (h + 1) & (t->cap - 1)) {
        size_t m;
        const unsigned char *q = st_get(t, t->slot[h] - 1, &m);
        if (m == n && !memcmp(p, q, n)) {
            *id = t->slot[h] - 1;
            return 0;
        }
    }
    if (st_count(t) == UINT32_MAX - 1 || buf_put(&t->bytes, p, n) ||
        vec64_push(&t->at, t->bytes.n))
        return -ENOMEM;
    *id = st_count(t) - 1;
    t->slot[h] = *id + 1;
    return 0;
}

/* The id of (p, n) if present, else -1. */
static int64_t st_find(const strtab *t, const unsigned char *p, size_t n)
{
    if (!t->cap) return -1;
    for (size_t h = st_home(p, n, t->cap); t->slot[h]; h = (h + 1) & (t->cap - 1)) {
        size_t m;
        const unsigned char *q = st_get(t, t->slot[h] - 1, &m);
        if (m == n && !memcmp(p, q, n)) return t->slot[h] - 1;
    }
    return -1;
}

static void st_free(strtab *t)
{
    buf_free(&t->bytes);
    vec64_free(&t->at);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

/* ---- the merge ---- */

typedef struct rec {
    uint32_t key, file; /* key: the word or sequence (invindex, termvector, rankedinvindex) */
    uint64_t n;         /* count (termvector, rankedinvindex) */
} rec;

struct ana_merge {
    int kind;
    strtab keys;  /* words or sequences */
    vec64 cnt;    /* per key: its count (wordcount, sort, seqcount) */
    strtab paths; /* the scope's files, escaped and relative as printed: id = rank */
    rec *r;       /* the per-file analytics' records */
    size_t nr, capr;
    ana_edge *e; /* edges of pieces of files that span parts */
    size_t ne, cape;
    const arc *a;
    vec32 files; /* the scope's files by rank */
};

int ana_merge_new(int kind, const arc *a, uint32_t first, uint32_t end, const unsigned char *vis,
                  ana_merge **out)
{
    ana_merge *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return tdc_error(-ENOMEM, "analytics: out of memory");
    m->kind = kind;
    m->a = a;
    size_t plen = ana_scope_prefix(a, first);
    buf p = {0};
    int rc = ana_scope_files(a, first, end, vis, &m->files);
    for (size_t i = 0; !rc && i < m->files.n; i++) {
        uint32_t id;
        p.n = 0;
        rc = ana_put_path(&p, a->ents[m->files.p[i]].path + plen) ||
                     st_intern(&m->paths, p.p, p.n, &id)
                 ? -ENOMEM
                 : 0;
    }
    buf_free(&p);
    if (rc) {
        ana_merge_free(m);
        return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    *out = m;
    return 0;
}

void ana_merge_free(ana_merge *m)
{
    if (!m) return;
    st_free(&m->keys);
    st_free(&m->paths);
    vec64_free(&m->cnt);
    free(m->r);
    for (size_t i = 0; i < m->ne; i++)
        buf_free(&m->e[i].words);
    free(m->e);
    vec32_free(&m->files);
    free(m);
}

/* Add n to key (p, len)'s count. */
static int add_count(ana_merge *m, const unsigned char *p, size_t len, uint64_t n)
{
    uint32_t id;
    if (st_intern(&m->keys, p, len, &id)) return -ENOMEM;
    while (m->cnt.n <= id)
        if (vec64_push(&m->cnt, 0)) return -ENOMEM;
    m->cnt.p[id] += n;
    return 0;
}

static int add_rec(ana_merge *m, uint32_t key, uint32_t file, uint64_t n)
{
    if (m->nr == m->capr) {
        size_t cap = m->capr ? m->capr * 2 : 1024;
        rec *r = realloc(m->r, cap * sizeof *r);
        if (!r) return -ENOMEM;
        m->r = r;
        m->capr = cap;
    }
    m->r[m->nr++] = (rec){key, file, n};
    return 0;
}

/* A line's fields: the text up to the next tab (or the line's end). */
typedef struct fld {
    const unsigned char *p, *end; /* the rest of the line */
} fld;

static int next_field(fld *f, const unsigned char **s, size_t *n)
{
    if (f->p > f->end) return 0;
    const unsigned char *t = memchr(f->p, '\t', (size_t)(f->end - f->p));
    if (!t) t = f->end;
    *s = f->p;
    *n = (size_t)(t - f->p);
    f->p = t + 1;
    return 1;
}

static int parse_num(const unsigned char *s, size_t n, uint64_t *v)
{
    *v = 0;
    if (!n || n > 20) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

static int file_rank(const ana_merge *m, const unsigned char *p, size_t n, uint32_t *rank)
{
    int64_t r = st_find(&m->paths, p, n);
    if (r < 0) return -1;
    *rank = (uint32_t)r;
    return 0;
}

/* One line of a part's output (without its newline): 0, -1 when malformed, -ENOMEM. */
static int parse_line(ana_merge *m, fld *f)
{
    const unsigned char *a, *b, *c;
    size_t an, bn, cn;
    uint64_t v;
    uint32_t key, file;
    if (!next_field(f, &a, &an)) return -1;
    switch (m->kind) {
    case ANA_WORDCOUNT:
    case ANA_SEQCOUNT: /* count, key */
        if (!next_field(f, &b, &bn) || next_field(f, &c, &cn) || parse_num(a, an, &v)) return -1;
        return add_count(m, b, bn, v);
    case ANA_SORT: /* key, count */
        if (!next_field(f, &b, &bn) || next_field(f, &c, &cn) || parse_num(b, bn, &v)) return -1;
        return add_count(m, a, an, v);
    case ANA_TERMVECTOR: /* path, count, word */
        if (!next_field(f, &b, &bn) || !next_field(f, &c, &cn) || next_field(f, &c, &cn) ||
            file_rank(m, a, an, &file) || parse_num(b, bn, &v))
            return -1;
        return st_intern(&m->keys, c, cn, &key) || add_rec(m, key, file, v) ? -ENOMEM : 0;
    case ANA_INVINDEX: /* word, path... */
    case ANA_RANKEDINVINDEX: /* sequence, path:count... */
        if (st_intern(&m->keys, a, an, &key)) return -ENOMEM;
        int any = 0;
        while (next_field(f, &b, &bn)) {
            v = 0;
            if (m->kind == ANA_RANKEDINVINDEX) {
                size_t k = bn;
                while (k && b[k - 1] != ':')
                    k--;
                if (!k || parse_num(b + k, bn - k, &v)) return -1;
                bn = k - 1;
            }
            if (file_rank(m, b, bn, &file)) return -1;
            if (add_rec(m, key, file, v)) return -ENOMEM;
            any = 1;
        }
        return any ? 0 : -1;
    }
    return -1;
}

int ana_merge_text(ana_merge *m, const unsigned char *text, size_t n)
{
    const unsigned char *p = text, *end = text + n;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return tdc_error(-EBADMSG, "analytics: a part's output ends inside a line");
        fld f = {p, nl};
        int rc = parse_line(m, &f);
        if (rc == -ENOMEM) return tdc_error(rc, "analytics: out of memory");
        if (rc)
            return tdc_error(-EBADMSG, "analytics: a part's %s output has a line it cannot hold: "
                             "%.*s", ana_table[m->kind].name, (int)(nl - p < 200 ? nl - p : 200), p);
        p = nl + 1;
    }
    return 0;
}

int ana_merge_edge(ana_merge *m, ana_edge *e)
{
    if (m->ne == m->cape) {
        size_t cap = m->cape ? m->cape * 2 : 64;
        ana_edge *x = realloc(m->e, cap * sizeof *x);
        if (!x) return tdc_error(-ENOMEM, "analytics: out of memory");
        m->e = x;
        m->cape = cap;
    }
    m->e[m->ne++] = *e;
    memset(&e->words, 0, sizeof e->words);
    return 0;
}

/* ---- sequences across the cuts ---- */

static int by_file_part(const void *x, const void *y)
{
    const ana_edge *a = x, *b = y;
    if (a->file != b->file) return a->file < b->file ? -1 : 1;
    return (a->part > b->part) - (a->part < b->part);
}

/* One word of a file's edges: its bytes and its piece, or a gap (words left out). */
typedef struct eword {
    const unsigned char *p;
    size_t n;
    size_t piece; /* SIZE_MAX: the gap inside a piece of five words or more */
} eword;

/* The sequences of file e[0].file that cross its cuts, pieces e[0..n) in part order: every
 * three consecutive words of the edges with no gap between them and not all of one piece
 * (those the piece's own part counted). */
static int crossing(ana_merge *m, const ana_edge *e, size_t n)
{
    eword *w = malloc(n * 5 * sizeof *w);
    buf key = {0};
    size_t nw = 0;
    int rc = w ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        if (i && e[i - 1].word_last && e[i].word_first) {
            rc = tdc_error(-ENOTSUP, "analytics: '%s' is cut inside a word between shards %u "
                           "and %u", m->a->ents[m->files.p[e[i].file]].path, e[i - 1].part,
                           e[i].part);
            break;
        }
        const unsigned char *p = e[i].words.p;
        for (uint32_t k = 0; k < e[i].nw; k++) {
            const unsigned char *sp = memchr(p, ' ', (size_t)(e[i].words.p + e[i].words.n - p));
            if (!e[i].whole && k == 2) w[nw++] = (eword){NULL, 0, SIZE_MAX};
            w[nw++] = (eword){p, (size_t)(sp - p), i};
            p = sp + 1;
        }
    }
    int seq = ana_table[m->kind].seq;
    for (size_t i = 0; !rc && seq && i + 2 < nw; i++) {
        const eword *t = &w[i];
        if (t[0].piece == SIZE_MAX || t[1].piece == SIZE_MAX || t[2].piece == SIZE_MAX ||
            (t[0].piece == t[2].piece))
            continue;
        key.n = 0;
        if (buf_put(&key, t[0].p, t[0].n) || buf_put(&key, " ", 1) ||
            buf_put(&key, t[1].p, t[1].n) || buf_put(&key, " ", 1) ||
            buf_put(&key, t[2].p, t[2].n)) {
            rc = -ENOMEM;
            break;
        }
        uint32_t id;
        if (m->kind == ANA_SEQCOUNT)
            rc = add_count(m, key.p, key.n, 1);
        else
            rc = st_intern(&m->keys, key.p, key.n, &id) || add_rec(m, id, e[0].file, 1) ? -ENOMEM
                                                                                        : 0;
    }
    free(w);
    buf_free(&key);
    return rc == -ENOMEM ? tdc_error(rc, "analytics: out of memory") : rc;
}

static int add_crossing(ana_merge *m)
{
    sort_n(m->e, m->ne, sizeof *m->e, by_file_part);
    for (size_t i = 0, j; i < m->ne; i = j) {
        for (j = i + 1; j < m->ne && m->e[j].file == m->e[i].file; j++)
            ;
        int rc = crossing(m, m->e + i, j - i);
        if (rc) return rc;
    }
    return 0;
}

/* ---- output ---- */

/* ord[id]: the rank of key id in byte order of the keys. */
static int key_order(const strtab *t, uint32_t **ord)
{
    uint32_t n = st_count(t);
    ana_wrec *w = malloc((n ? n : 1) * sizeof *w);
    *ord = malloc((n ? n : 1) * sizeof **ord);
    if (!w || !*ord) {
        free(w);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len;
        const unsigned char *p = st_get(t, i, &len);
        w[i] = (ana_wrec){ana_prefix_key(p, len), p, (uint32_t)len, i};
    }
    int rc = ana_sort_words(w, n, 1);
    for (uint32_t i = 0; !rc && i < n; i++)
        (*ord)[w[i].id] = i;
    free(w);
    return rc;
}

/* wordcount, sort, seqcount: the keys with their counts, in byte order, then (count_first)
 * by count descending. */
static int print_counts(ana_merge *m, int count_first, buf *out)
{
    uint32_t n = st_count(&m->keys);
    ana_wrec *w = malloc((n ? n : 1) * sizeof *w);
    ana_crec *c = malloc((n ? n : 1) * sizeof *c);
    int rc = w && c ? 0 : -ENOMEM;
    for (uint32_t i = 0; !rc && i < n; i++) {
        size_t len;
        const unsigned char *p = st_get(&m->keys, i, &len);
        w[i] = (ana_wrec){ana_prefix_key(p, len), p, (uint32_t)len, i};
    }
    if (!rc) rc = ana_sort_words(w, n, 1);
    size_t k = 0;
    for (uint32_t i = 0; !rc && i < n; i++)
        if (m->cnt.p[w[i].id]) c[k++] = (ana_crec){w[i].w, w[i].n, m->cnt.p[w[i].id]};
    if (!rc && count_first) rc = ana_by_count(c, k);
    if (!rc) rc = ana_print_counts(c, k, count_first, out, 1);
    free(w);
    free(c);
    return rc;
}

typedef struct rctx {
    const uint32_t *ord;
    int by_file; /* termvector: file first */
} rctx;

/* (key, file) or (file, key) ascending, then by count descending: applied after summing,
 * where each pair is there once. */
static int rec_cmp(const void *x, const void *y, void *ctx)
{
    const rctx *c = ctx;
    const rec *a = x, *b = y;
    uint32_t ka = c->ord[a->key], kb = c->ord[b->key];
    if (c->by_file && a->file != b->file) return a->file < b->file ? -1 : 1;
    if (ka != kb) return ka < kb ? -1 : 1;
    if (!c->by_file && a->file != b->file) return a->file < b->file ? -1 : 1;
    return 0;
}

/* Within a group (same file for termvector, same key otherwise): count descending, then the
 * other field ascending. */
static int rank_cmp(const void *x, const void *y, void *ctx)
{
    const rctx *c = ctx;
    const rec *a = x, *b = y;
    uint32_t ka = c->ord[a->key], kb = c->ord[b->key];
    uint32_t ga = c->by_file ? a->file : ka, gb = c->by_file ? b->file : kb;
    if (ga != gb) return ga < gb ? -1 : 1;
    if (a->n != b->n) return a->n > b->n ? -1 : 1;
    uint32_t oa = c->by_file ? ka : a->file, ob = c->by_file ? kb : b->file;
    return (oa > ob) - (oa < ob);
}

static int put_key(buf *out, const ana_merge *m, uint32_t id)
{
    size_t n;
    const unsigned char *p = st_get(&m->keys, id, &n);
    return buf_put(out, p, n);
}

static int put_file(buf *out, const ana_merge *m, uint32_t f)
{
    size_t n;
    const unsigned char *p = st_get(&m->paths, f, &n);
    return buf_put(out, p, n);
}

/* invindex, termvector, rankedinvindex: the records summed by (key, file) and printed. */
static int print_recs(ana_merge *m, buf *out)
{
    uint32_t *ord;
    if (key_order(&m->keys, &ord)) return -ENOMEM;
    rctx c = {ord, m->kind == ANA_TERMVECTOR};
    sort_r(m->r, m->nr, sizeof *m->r, rec_cmp, &c);
    size_t k = 0;
    for (size_t i = 0; i < m->nr; i++) { /* sum each (key, file) */
        if (k && !rec_cmp(&m->r[k - 1], &m->r[i], &c))
            m->r[k - 1].n += m->r[i].n;
        else
            m->r[k++] = m->r[i];
    }
    m->nr = k;
    if (m->kind != ANA_INVINDEX) sort_r(m->r, m->nr, sizeof *m->r, rank_cmp, &c);
    int rc = 0;
    for (size_t i = 0; !rc && i < m->nr; i++) {
        const rec *r = &m->r[i];
        if (m->kind == ANA_TERMVECTOR) {
            rc = put_file(out, m, r->file) || buf_put(out, "\t", 1) || ana_put_num(out, r->n) ||
                 buf_put(out, "\t", 1) || put_key(out, m, r->key) || buf_put(out, "\n", 1);
            continue;
        }
        int head = !i || r->key != m->r[i - 1].key;
        if (head && i) rc = buf_put(out, "\n", 1);
        if (!rc && head) rc = put_key(out, m, r->key);
        if (!rc) rc = buf_put(out, "\t", 1) || put_file(out, m, r->file);
        if (!rc && m->kind == ANA_RANKEDINVINDEX)
            rc = buf_put(out, ":", 1) || ana_put_num(out, r->n);
    }
    if (!rc && m->nr && m->kind != ANA_TERMVECTOR) rc = buf_put(out, "\n", 1);
    free(ord);
    return rc ? -ENOMEM : 0;
}

int ana_merge_finish(ana_merge *m, buf *out)
{
    int rc = add_crossing(m);
    if (rc) return rc;
    switch (m->kind) {
    case ANA_WORDCOUNT:
    case ANA_SEQCOUNT: rc = print_counts(m, 1, out); break;
    case ANA_SORT: rc = print_counts(m, 0, out); break;
    default: rc = print_recs(m, out);
    }
    return rc ? tdc_error(-ENOMEM, "analytics: out of memory") : 0;
}
