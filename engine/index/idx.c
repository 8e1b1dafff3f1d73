#include "idx.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "../base/err.h"
#include "../base/par.h"
#include "../base/tok.h"

/* The expanded bytes of every rule of at most `max` bytes. Readers take one snapshot of
 * idx.fc per call, so a cache published meanwhile is used from their next call on. */
typedef struct flatc {
    uint32_t max; /* rules expanding to at most this many bytes are flat */
    /* nrules + 1: a flat rule's offset in `bytes` << 16 | its length, FLAT_NONE for the others.
     * One array, so a reader's step onto a rule costs one cache miss, not one for its length
     * and one for its offset. Written by the second stage while readers of the first look
     * (they ignore lengths over their max), hence relaxed atomics. */
    uint64_t *d;
    unsigned char *bytes; /* expanded bytes of the flat rules */
    uint64_t nbytes;
} flatc;

#define FLAT_NONE 0xffffu /* over any max (FLAT_CAP) */

static const flatc no_flat = {0, NULL, NULL, 0};

struct idx {
    const arc *a;
    uint64_t *len;     /* nrules + 1: expanded bytes of each rule, len[0] = root */
    uint32_t *samp_at; /* nrules + 1: first sample of the rule in samp, UINT32_MAX if none */
    uint64_t *samp;    /* prefix offsets at symbols 0, K, 2K, ... of long bodies */
    uint64_t nsamp;
    uint64_t *file_off;       /* per entry: offset of its first byte in the root's expansion */
    uint32_t depth;           /* 0 until idx_depth computes it */
    const flatc *fc;          /* &no_flat until idx_build_flat publishes the cache (atomic) */
    flatc *fc_first;          /* the first stage's descriptor, replaced by fc (arrays shared) */
    pthread_mutex_t occ_lock; /* guards the lazily computed depth, occ and topo_pos */
    uint64_t *occ;            /* nrules + 1: occurrences of each rule in the whole archive */
    uint32_t *topo_pos;       /* nrules + 1: position of each rule in g->topo */
};

static inline uint64_t sym_len(const idx *x, uint32_t s)
{
    const gram *g = &x->a->g;
    if (s < g->ntokens) return x->a->dict->offs.p[s + 1] - x->a->dict->offs.p[s];
    return x->len[s - g->ntokens];
}

const arc *idx_arc(const idx *x)
{
    return x->a;
}

uint64_t idx_rule_len(const idx *x, uint32_t r)
{
    return x->len[r];
}
/* Longest path from each rule down to a token, children first; the root's, or 0 if out of
 * memory. Apart from the build, as only `tadoc stat` asks for it. */
static uint32_t compute_depth(const idx *x)
{
    const gram *g = &x->a->g;
    uint64_t nr = (uint64_t)g->nrules + 1;
    uint32_t *dep = malloc(nr * sizeof *dep);
    if (!dep) return 0;
    for (uint64_t k = 0; k < nr; k++) {
        uint32_t r = k + 1 < nr ? g->topo.p[k] : 0, d = 0;
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            if (b[i] >= g->ntokens && dep[b[i] - g->ntokens] > d) d = dep[b[i] - g->ntokens];
        dep[r] = d + 1;
    }
    uint32_t root = dep[0];
    free(dep);
    return root;
}

uint32_t idx_depth(const idx *cx)
{
    idx *x = (idx *)cx; /* only the lazily computed, mutex-guarded fields change */
    pthread_mutex_lock(&x->occ_lock);
    if (!x->depth) x->depth = compute_depth(x);
    uint32_t d = x->depth;
    pthread_mutex_unlock(&x->occ_lock);
    return d;
}
static inline const flatc *flat_cache(const idx *x)
{
    return __atomic_load_n(&x->fc, __ATOMIC_ACQUIRE);
}

uint32_t idx_flat_max(const idx *x)
{
    return flat_cache(x)->max;
}

uint64_t idx_mem(const idx *x)
{
    uint64_t nr = x->a->g.nrules + 1;
    const flatc *fc = flat_cache(x); /* per rule: len, samp_at, and the cache's entry */
    return nr * (8 + 4 + (fc->d ? 8 : 0)) + x->nsamp * 8 + (uint64_t)x->a->nents * 8 + fc->nbytes;
}

static void flatc_free(const flatc *fc)
{
    if (fc == &no_flat) return;
    free(fc->d);
    free(fc->bytes);
    free((flatc *)fc);
}

void idx_free(idx *x)
{
    if (!x) return;
    free(x->len);
    free(x->samp_at);
    free(x->samp);
    free(x->file_off);
    flatc_free(x->fc);
    free(x->fc_first);
    free(x->occ);
    free(x->topo_pos);
    pthread_mutex_destroy(&x->occ_lock);
    free(x);
}

/* Bytes of leaf symbol s (a token or a rule of fc), or NULL when s is a rule to descend into.
 * Every rule of at most fc->max bytes is in fc. */
static inline const unsigned char *leaf(const idx *x, const flatc *fc, uint32_t s, size_t *len)
{
    const gram *g = &x->a->g;
    if (s < g->ntokens) return dict_bytes(x->a->dict, s, len);
    if (!fc->d) return NULL;
    uint64_t d = __atomic_load_n(&fc->d[s - g->ntokens], __ATOMIC_RELAXED);
    if ((d & 0xffff) > fc->max) return NULL;
    *len = (size_t)(d & 0xffff);
    return fc->bytes + (d >> 16);
}

#define FLAT_CAP 4096 /* longest rule expansion kept flat */

/* The largest length bound whose rules fit the budget (and 32-bit offsets); *bytes gets the
 * bytes they take. */
static uint32_t flat_bound(const idx *x, uint64_t budget, uint64_t *bytes)
{
    const gram *g = &x->a->g;
    uint64_t hist[FLAT_CAP + 1] = {0}, sum = 0;
    uint32_t max = 0;
    for (uint32_t r = 1; r <= g->nrules; r++)
        if (x->len[r] <= FLAT_CAP) hist[x->len[r]] += x->len[r];
    for (uint32_t l = 1; l <= FLAT_CAP; l++) {
        if (sum + hist[l] > budget || sum + hist[l] >= UINT32_MAX) break;
        sum += hist[l];
        if (hist[l]) max = l;
    }
    *bytes = sum;
    return max;
}

/* Copy the k <= 32 bytes of a leaf at s to d, with whole 16-byte moves: s may be read up to
 * 16 bytes past its end (DICT_PAD) and d written up to 16 bytes (which the next leaves
 * overwrite), where a call of memcpy would cost more than the copy of most leaves. Each move
 * goes through a register (t): a leaf just expanded ends less than 16 bytes before d, so the
 * bytes read past its end may be those written. */
static inline void copy_short(unsigned char *d, const unsigned char *s, size_t k)
{
    unsigned char t[16];
    memcpy(t, s, 16);
    memcpy(d, t, 16);
    if (k > 16) {
        memcpy(t, s + k - 16, 16);
        memcpy(d + k - 16, t, 16);
    }
}

#define FLAT_CANCEL_EVERY 65536 /* rules expanded between looks at the cancel flag */

/* Expand into fc every rule longer than `lo` and at most fc->max bytes, children first (a
 * child's bytes are in place before its parents copy them), from byte *at on. Entries of d[]
 * and bytes a reader of an earlier stage may use are not written. */
static int flat_fill(const idx *x, flatc *fc, uint32_t lo, uint64_t *at, const int *cancel)
{
    const gram *g = &x->a->g;
    for (uint32_t k = 0; k < g->nrules; k++) {
        if (cancel && k % FLAT_CANCEL_EVERY == 0 && __atomic_load_n(cancel, __ATOMIC_RELAXED))
            return -ECANCELED;
        uint32_t r = g->topo.p[k];
        if (x->len[r] <= lo || x->len[r] > fc->max) continue;
        uint64_t n, start = *at;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            size_t l = 0;
            const unsigned char *p = leaf(x, fc, b[i], &l);
            if (l <= 32) /* room for the whole moves: the cache ends with DICT_PAD bytes */
                copy_short(fc->bytes + *at, p, l);
            else
                memcpy(fc->bytes + *at, p, l);
            *at += l;
        }
        __atomic_store_n(&fc->d[r], start << 16 | x->len[r], __ATOMIC_RELAXED);
    }
    memset(fc->bytes + *at, 0, DICT_PAD);
    fc->nbytes = *at;
    return 0;
}

int idx_build_flat(idx *x, uint64_t cache_bytes, const int *cancel)
{
    const gram *g = &x->a->g;
    if (__atomic_load_n(&x->fc, __ATOMIC_ACQUIRE) != &no_flat) return 0; /* built before */
    uint64_t sum, first_sum, at = 0;
    uint32_t max = flat_bound(x, cache_bytes, &sum);
    if (!max) return 0;
    /* Two stages: the rules that fit a quarter of the budget are published first (a quarter of
     * the budget already makes reads markedly faster than no cache, in a fraction of the time
     * the whole cache takes to build), then the longer ones go into the same arrays and a second
     * descriptor replaces the first. */
    uint32_t first = flat_bound(x, cache_bytes / 4, &first_sum);
    if (first >= max) first = 0;
    /* The bytes: the rules', DICT_PAD after the first stage's and DICT_PAD at the end. */
    flatc *fc = calloc(1, sizeof *fc), *fc1 = first ? calloc(1, sizeof *fc1) : NULL;
    if (!fc || (first && !fc1) || !(fc->d = malloc(((size_t)g->nrules + 1) * sizeof *fc->d)) ||
        !(fc->bytes = malloc(sum + 2 * DICT_PAD))) {
        if (fc) flatc_free(fc);
        free(fc1);
        return tdc_error(-ENOMEM, "index: out of memory");
    }
    mem_populate(fc->d, ((size_t)g->nrules + 1) * sizeof *fc->d);
    mem_populate(fc->bytes, sum);
    for (uint32_t r = 0; r <= g->nrules; r++)
        fc->d[r] = FLAT_NONE;
    int rc = 0;
    if (first) {
        *fc1 = (flatc){first, fc->d, fc->bytes, 0};
        if ((rc = flat_fill(x, fc1, 0, &at, cancel))) {
            free(fc1);
            flatc_free(fc);
            return rc;
        }
        x->fc_first = fc1;
        __atomic_store_n(&x->fc, fc1, __ATOMIC_RELEASE);
        at += DICT_PAD; /* which readers of the first stage may read: the second writes after */
    }
    fc->max = max;
    if ((rc = flat_fill(x, fc, first, &at, cancel))) {
        if (first) { /* the first stage stays published and owns the arrays now */
            x->fc_first = NULL;
            free(fc);
        } else {
            flatc_free(fc);
        }
        return rc;
    }
    __atomic_store_n(&x->fc, fc, __ATOMIC_RELEASE);
    return 0;
}

int idx_build(const arc *a, idx **out)
{
    return idx_build_cached(a, IDX_CACHE_DEFAULT, out);
}

int idx_build_cached(const arc *a, uint64_t cache_bytes, idx **out)
{
    idx *x;
    int rc = idx_build_base(a, &x);
    if (!rc && (rc = idx_build_flat(x, cache_bytes, NULL))) idx_free(x);
    if (!rc) *out = x;
    return rc;
}

/* Expanded bytes of the first i symbols of the root (i <= root length), from the sample at or
 * before i: at most IDX_SAMPLE - 1 symbols are summed. */
static uint64_t root_prefix(const idx *x, uint64_t i)
{
    const gram *g = &x->a->g;
    if (i == g->root.n) return x->len[0];
    uint64_t acc = 0, from = 0;
    if (x->samp_at[0] != UINT32_MAX) {
        acc = x->samp[x->samp_at[0] + i / IDX_SAMPLE];
        from = i / IDX_SAMPLE * IDX_SAMPLE;
    }
    for (uint64_t j = from; j < i; j++)
        acc += sym_len(x, g->root.p[j]);
    return acc;
}

uint64_t idx_run_bytes(const idx *x, uint32_t ent)
{
    const arc_entry *f = &x->a->ents[ent];
    if (f->type != ARC_REG || arc_ino_entry(x->a, f->ino) != ent) return 0;
    return root_prefix(x, f->root_start + f->root_len) - x->file_off[ent];
}

/* Where sym_len(s) will look, to fetch it ahead of use (the symbols of a body are random
 * positions in arrays far larger than the caches). */
static inline void prefetch_len(const idx *x, uint32_t s)
{
    const gram *g = &x->a->g;
    if (s < g->ntokens)
        __builtin_prefetch(&x->a->dict->offs.p[s]);
    else
        __builtin_prefetch(&x->len[s - g->ntokens]);
}

#define IDX_AHEAD 8 /* symbols between a prefetch and its use */

/* Bytes of every symbol for the length pass, one table for tokens and rules (symbol ids), so
 * that a lookup takes no branch on the kind of symbol: a token's length (1..TOK_CAP), a
 * rule's once the pass has computed it, LEN_LONG for a rule of 2^32 - 1 bytes or more, whose
 * length is in idx.len. Half the size of idx.len, so more of it stays cached under the pass's
 * random lookups. */
#define LEN_LONG UINT32_MAX

static uint32_t *symbol_lengths(const dict *d, uint32_t ntokens, uint32_t nrules)
{
    size_t n = (size_t)ntokens + nrules + 1;
    uint32_t *sl = malloc(n * sizeof *sl);
    if (!sl) return NULL;
    mem_populate(sl, n * sizeof *sl);
    for (uint32_t t = 0; t < ntokens; t++)
        sl[t] = (uint32_t)(d->offs.p[t + 1] - d->offs.p[t]);
    return sl;
}

/* The length pass over one body (or a piece of the root): its total, and its samples as
 * offsets from the start of the piece (s: the piece's first sample, or NULL). */
typedef struct len_piece {
    const idx *x;
    const uint32_t *symlen; /* symbol_lengths */
    const uint32_t *b;
    uint64_t n;
    uint64_t *s;
    uint64_t total;
    int overflow;
} len_piece;

static void *len_pass(void *arg)
{
    len_piece *p = arg;
    const idx *x = p->x;
    const uint32_t *b = p->b, *sl = p->symlen, nt = x->a->g.ntokens;
    uint64_t n = p->n, total = 0, *s = p->s;
    for (uint64_t i = 0; i < n && i < IDX_AHEAD; i++)
        __builtin_prefetch(&sl[b[i]]);
    for (uint64_t i = 0; i < n; i++) {
        if (i + IDX_AHEAD < n) __builtin_prefetch(&sl[b[i + IDX_AHEAD]]);
        if (s && i % IDX_SAMPLE == 0) s[i / IDX_SAMPLE] = total;
        uint64_t l = sl[b[i]];
        if (l == LEN_LONG) l = x->len[b[i] - nt];
        if (total + l < total || total + l > ((uint64_t)1 << 62)) {
            p->overflow = 1;
            return NULL;
        }
        total += l;
    }
    p->total = total;
    return NULL;
}

/* Root symbols per thread of the root's length pass, at least: fewer are summed faster than
 * a thread starts. */
#define ROOT_PIECE ((uint64_t)1 << 16)
#define ROOT_THREADS 16

/* The length pass over the root, the largest body: its pieces summed on up to one thread
 * per CPU, each piece's samples then shifted by the bytes of the pieces before it. */
static int root_lengths(idx *x, const uint32_t *symlen)
{
    const gram *g = &x->a->g;
    uint64_t n = g->root.n, *s = x->samp_at[0] == UINT32_MAX ? NULL : x->samp + x->samp_at[0];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t most = cpus < 1 ? 1 : cpus > ROOT_THREADS ? ROOT_THREADS : (uint64_t)cpus;
    uint64_t np = n / ROOT_PIECE;
    np = np < 1 ? 1 : np > most ? most : np;
    len_piece pc[ROOT_THREADS];
    /* Pieces start on a sample, so each one's samples are its own. */
    uint64_t per = (n / np + IDX_SAMPLE - 1) / IDX_SAMPLE * IDX_SAMPLE;
    for (uint64_t t = 0; t < np; t++) {
        uint64_t from = t * per < n ? t * per : n;
        uint64_t to = t + 1 == np || from + per > n ? n : from + per;
        uint64_t *ps = s ? s + from / IDX_SAMPLE : NULL;
        pc[t] = (len_piece){x, symlen, g->root.p + from, to - from, ps, 0, 0};
    }
    par_run((unsigned)np, len_pass, pc, sizeof pc[0]);
    uint64_t total = 0;
    for (uint64_t t = 0; t < np; t++) {
        uint64_t base = total;
        if (pc[t].overflow || (total += pc[t].total) < base || total > ((uint64_t)1 << 62))
            return tdc_error(-EBADMSG, "root: expansion overflows");
        if (!base || !s) continue;
        uint64_t first = (uint64_t)(pc[t].s - s), cnt = (pc[t].n + IDX_SAMPLE - 1) / IDX_SAMPLE;
        for (uint64_t i = 0; i < cnt; i++)
            s[first + i] += base;
    }
    x->len[0] = total;
    return 0;
}

int idx_build_base(const arc *a, idx **out)
{
    const gram *g = &a->g;
    uint64_t nr = (uint64_t)g->nrules + 1;
    idx *x = calloc(1, sizeof *x);
    int rc = -ENOMEM;
    if (!x) return tdc_error(-ENOMEM, "index: out of memory");
    pthread_mutex_init(&x->occ_lock, NULL);
    x->a = a;
    x->fc = &no_flat;
    x->len = malloc(nr * sizeof *x->len);
    x->samp_at = malloc(nr * sizeof *x->samp_at);
    x->file_off = malloc(((size_t)a->nents + 1) * sizeof *x->file_off);
    uint32_t *symlen = symbol_lengths(a->dict, g->ntokens, g->nrules);
    if (!x->len || !x->samp_at || !x->file_off || !symlen) goto fail;
    mem_populate(x->len, nr * sizeof *x->len);
    mem_populate(x->samp_at, nr * sizeof *x->samp_at);

    /* Sample slots of every body longer than IDX_SAMPLE. */
    uint64_t need = 0;
    for (uint32_t r = 0; r < nr; r++) {
        uint64_t n;
        gram_body(g, r, &n);
        x->samp_at[r] = UINT32_MAX;
        if (n <= IDX_SAMPLE) continue;
        if (need + (n + IDX_SAMPLE - 1) / IDX_SAMPLE >= UINT32_MAX) {
            rc = tdc_error(-EOVERFLOW, "index: too many samples");
            goto fail;
        }
        x->samp_at[r] = (uint32_t)need;
        need += (n + IDX_SAMPLE - 1) / IDX_SAMPLE;
    }
    x->nsamp = need;
    if (!(x->samp = malloc((need ? need : 1) * sizeof *x->samp))) goto fail;
    mem_populate(x->samp, need * sizeof *x->samp);

    /* Children first (g->topo): one pass computes the rules' lengths and samples; then the
     * root's. */
    for (uint64_t k = 0; k + 1 < nr; k++) {
        uint32_t r = g->topo.p[k];
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        len_piece p = {x, symlen, b, n, NULL, 0, 0};
        if (x->samp_at[r] != UINT32_MAX) p.s = x->samp + x->samp_at[r];
        len_pass(&p);
        if (p.overflow) {
            rc = tdc_error(-EBADMSG, "rules: expansion of rule %u overflows", r);
            goto fail;
        }
        x->len[r] = p.total;
        symlen[g->ntokens + r] = p.total < LEN_LONG ? (uint32_t)p.total : LEN_LONG;
    }
    if ((rc = root_lengths(x, symlen))) goto fail;
    free(symlen);
    symlen = NULL;
    /* File offsets, and the check that each run expands to the recorded size. */
    for (uint32_t e = 0; e < a->nents; e++) {
        const arc_entry *f = &a->ents[e];
        x->file_off[e] = 0;
        if (f->type != ARC_REG) continue;
        if (arc_ino_entry(a, f->ino) != e) continue; /* a hard link: the first name holds it */
        x->file_off[e] = root_prefix(x, f->root_start);
        uint64_t size = root_prefix(x, f->root_start + f->root_len) - x->file_off[e];
        /* A file in a damaged shard spans its stand-in's symbols: never read, not checked;
         * nor is a piece's part of a file, whose recorded size is the whole file's. */
        if (size != f->size && !f->damaged && !a->piece) {
            rc = tdc_error(-EBADMSG, "file table: '%s' records %llu bytes but its data has %llu",
                           f->path, (unsigned long long)f->size, (unsigned long long)size);
            goto fail;
        }
    }
    *out = x;
    return 0;
fail:
    if (rc == -ENOMEM) tdc_error(rc, "index: out of memory");
    free(symlen);
    idx_free(x);
    return rc;
}

void idx_cursor_init(idx_cursor *c)
{
    memset(c, 0, sizeof *c);
    c->ent = UINT32_MAX;
}

void idx_cursor_free(idx_cursor *c)
{
    free(c->f);
    idx_cursor_init(c);
}

/* Index of the symbol of rule r that holds byte o (o < len[r]); *rem gets o's offset in it.
 * The answer is known to lie in symbols [from, to), which for the root is the file's run:
 * searching only its samples keeps a lookup inside a few cache lines of a huge root. */
static uint64_t locate(const idx *x, uint32_t r, uint64_t o, uint64_t from, uint64_t to,
                       uint64_t *rem)
{
    uint64_t n, i = 0, acc = 0;
    const uint32_t *b = gram_body(&x->a->g, r, &n);
    if (x->samp_at[r] != UINT32_MAX) {
        const uint64_t *s = x->samp + x->samp_at[r];
        /* the last sample <= o among those covering [from, to) */
        uint64_t lo = from / IDX_SAMPLE, hi = (to + IDX_SAMPLE - 1) / IDX_SAMPLE;
        while (hi - lo > 1) {
            uint64_t mid = (lo + hi) / 2;
            if (s[mid] <= o)
                lo = mid;
            else
                hi = mid;
        }
        i = lo * IDX_SAMPLE;
        acc = s[lo];
    }
    for (;;) {
        uint64_t l = sym_len(x, b[i]);
        if (acc + l > o) break;
        acc += l;
        i++;
    }
    *rem = o - acc;
    return i;
}

static int push(idx_cursor *c, const gram *g, uint32_t r, uint64_t i)
{
    if (c->depth == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 32;
        idx_frame *f = realloc(c->f, cap * sizeof *f);
        if (!f) return -ENOMEM;
        c->f = f;
        c->cap = cap;
    }
    idx_frame *f = &c->f[c->depth++];
    f->body = gram_body(g, r, &f->n);
    f->i = i;
    return 0;
}

/* Position the cursor on the token that holds byte `off` of entry `ent` (off < size). */
static int seek(const idx *x, const flatc *fc, idx_cursor *c, uint32_t ent, uint64_t off)
{
    const gram *g = &x->a->g;
    uint64_t o = x->file_off[ent] + off, rem;
    c->depth = 0;
    c->ent = ent;
    c->pos = off;
    uint32_t r = 0;
    uint64_t from = x->a->ents[ent].root_start, to = from + x->a->ents[ent].root_len;
    for (;;) {
        uint64_t i = locate(x, r, o, from, to, &rem);
        if (push(c, g, r, i)) return -ENOMEM;
        uint32_t s = c->f[c->depth - 1].body[i];
        size_t l;
        if (leaf(x, fc, s, &l)) break;
        r = s - g->ntokens;
        o = rem;
        from = 0;
        gram_body(g, r, &to);
    }
    c->tokoff = (uint32_t)rem;
    return 0;
}

/* Fetch ahead what leaf() will read for symbol s: its entry in the length tables, and (once
 * that entry is likely cached, `deep`) the bytes it points to. Bodies name random positions
 * of tables far larger than the caches, so a read is bound by these misses. */
static inline void prefetch_leaf(const idx *x, const flatc *fc, uint32_t s, int deep)
{
    const gram *g = &x->a->g;
    if (s < g->ntokens) {
        if (deep)
            __builtin_prefetch(x->a->dict->blob.p + x->a->dict->offs.p[s]);
        else
            prefetch_len(x, s);
        return;
    }
    uint32_t r = s - g->ntokens;
    if (!fc->d) {
        if (!deep) prefetch_len(x, s);
    } else if (!deep) {
        __builtin_prefetch(&fc->d[r]);
    } else {
        uint64_t d = __atomic_load_n(&fc->d[r], __ATOMIC_RELAXED);
        if ((d & 0xffff) <= fc->max) __builtin_prefetch(fc->bytes + (d >> 16));
    }
}

#define IDX_NEAR 4 /* symbols ahead whose bytes are fetched */

ssize_t idx_read(const idx *x, idx_cursor *c, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    const arc *a = x->a;
    const uint32_t nt = a->g.ntokens;
    const flatc *fc = flat_cache(x);
    if (ent >= a->nents || a->ents[ent].type != ARC_REG)
        return tdc_error(-EINVAL, "entry %u is not a regular file", ent);
    if (a->ents[ent].damaged) return arc_entry_damaged(a, ent); /* never the stand-in's bytes */
    ent = (uint32_t)arc_ino_entry(a, a->ents[ent].ino); /* hard links: the content holder */
    /* a piece (arc_open_piece) holds one shard's part of the file: its run's bytes are the
     * extent to read, the recorded size is the whole file's */
    uint64_t size = a->piece ? idx_run_bytes(x, ent) : a->ents[ent].size;
    if (off >= size || n == 0) return 0;
    if (n > size - off) n = (size_t)(size - off);
    if (n > SSIZE_MAX) n = SSIZE_MAX;
    if (c->ent != ent || c->pos != off || c->depth == 0) {
        if (seek(x, fc, c, ent, off)) return tdc_error(-ENOMEM, "out of memory");
    }
    unsigned char *out = dst;
    size_t done = 0, tl = 0, tokoff = c->tokoff;
    idx_frame *f = &c->f[c->depth - 1];
    /* The cursor stands on a leaf or on a rule to enter; more bytes follow it (off < size). */
    for (;;) {
        uint32_t s = f->body[f->i];
        const unsigned char *tp = leaf(x, fc, s, &tl);
        if (!tp) {
            if (push(c, &a->g, s - nt, 0)) return tdc_error(-ENOMEM, "out of memory");
            f = &c->f[c->depth - 1];
            for (uint64_t k = 0; k < IDX_AHEAD && k < f->n; k++)
                prefetch_leaf(x, fc, f->body[k], 0);
            continue;
        }
        if (f->i + IDX_AHEAD < f->n) prefetch_leaf(x, fc, f->body[f->i + IDX_AHEAD], 0);
        if (f->i + IDX_NEAR < f->n) prefetch_leaf(x, fc, f->body[f->i + IDX_NEAR], 1);
        size_t k = tl - tokoff;
        if (k > n - done) k = n - done;
        if (k <= 32 && n - done >= 16)
            copy_short(out + done, tp + tokoff, k);
        else
            memcpy(out + done, tp + tokoff, k);
        done += k;
        tokoff += k;
        if (done == n) break;
        /* The next symbol; finished rules are left (bytes remain, so the root is not). */
        tokoff = 0;
        while (++f->i == f->n)
            f = &c->f[--c->depth - 1];
    }
    c->pos = off + done;
    c->tokoff = (uint32_t)tokoff;
    if (c->pos == size) {
        c->depth = 0;
    } else if (tokoff == tl) { /* stand on the next symbol, as the loop expects */
        c->tokoff = 0;
        while (++f->i == f->n)
            f = &c->f[--c->depth - 1];
    }
    return (ssize_t)done;
}

ssize_t idx_extract(const idx *x, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    idx_cursor c;
    idx_cursor_init(&c);
    ssize_t r = idx_read(x, &c, ent, off, dst, n);
    idx_cursor_free(&c);
    return r;
}

/* Total occurrences of every rule (top-down from the root) and each rule's topological
 * position, computed on first use. */
static int need_occ(idx *x)
{
    const gram *g = &x->a->g;
    int rc = 0;
    pthread_mutex_lock(&x->occ_lock);
    if (!x->occ) {
        uint64_t *occ = calloc((size_t)g->nrules + 1, sizeof *occ);
        uint32_t *pos = NULL;
        if (occ && !gram_topo_positions(g, &pos)) {
            for (uint64_t i = 0; i < g->root.n; i++)
                if (g->root.p[i] >= g->ntokens) occ[g->root.p[i] - g->ntokens]++;
            for (uint32_t k = g->nrules; k-- > 0;) {
                uint32_t r = g->topo.p[k];
                uint64_t n;
                const uint32_t *b = gram_body(g, r, &n);
                for (uint64_t i = 0; i < n; i++)
                    if (b[i] >= g->ntokens) occ[b[i] - g->ntokens] += occ[r];
            }
            x->occ = occ;
            x->topo_pos = pos;
        } else {
            free(occ);
            free(pos);
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&x->occ_lock);
    return rc;
}

static int by_id(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Index of rule r in the sorted array ids[0..n). */
static size_t find_id(const uint32_t *ids, size_t n, uint32_t r)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ids[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int idx_file_footprint(const idx *cx, uint32_t ent, uint64_t *rules, double *share)
{
    idx *x = (idx *)cx; /* only the lazily computed, mutex-guarded fields change */
    const arc *a = x->a;
    const gram *g = &a->g;
    if (ent >= a->nents || a->ents[ent].type != ARC_REG)
        return tdc_error(-EINVAL, "entry %u is not a regular file", ent);
    if (a->ents[ent].damaged) return arc_entry_damaged(a, ent);
    ent = (uint32_t)arc_ino_entry(a, a->ents[ent].ino);
    if (need_occ(x)) return tdc_error(-ENOMEM, "out of memory");
    uint64_t *seen = calloc(g->nrules / 64 + 1, sizeof *seen), *w = NULL;
    uint32_t *ids = NULL;
    vec32 stack = {0}, used = {0};
    int rc = seen ? 0 : -ENOMEM;
    const uint32_t *run = g->root.p + a->ents[ent].root_start;
    uint64_t rl = a->ents[ent].root_len;
    /* The rules this file uses. */
    for (uint64_t i = 0; i < rl && !rc; i++) {
        if (run[i] < g->ntokens) continue;
        rc = vec32_push(&stack, run[i] - g->ntokens);
        while (!rc && stack.n) {
            uint32_t r = stack.p[--stack.n];
            if (seen[r / 64] >> (r % 64) & 1) continue;
            seen[r / 64] |= (uint64_t)1 << (r % 64);
            uint64_t n;
            const uint32_t *b = gram_body(g, r, &n);
            rc = vec32_push(&used, r);
            for (uint64_t k = 0; k < n && !rc; k++)
                if (b[k] >= g->ntokens) rc = vec32_push(&stack, b[k] - g->ntokens);
        }
    }
    size_t nu = used.n;
    if (!rc &&
        (!(ids = malloc((nu ? nu : 1) * sizeof *ids)) || !(w = calloc(nu ? nu : 1, sizeof *w))))
        rc = -ENOMEM;
    if (!rc) {
        /* Occurrences inside this file, pushed down parents first. */
        if (nu) memcpy(ids, used.p, nu * sizeof *ids);
        sort_n(ids, nu, sizeof *ids, by_id);
        for (uint64_t i = 0; i < rl; i++)
            if (run[i] >= g->ntokens) w[find_id(ids, nu, run[i] - g->ntokens)]++;
        gram_sort_topo(x->topo_pos, used.p, nu, 1);
        double part = (double)rl;
        for (size_t k = 0; k < nu; k++) {
            uint32_t r = used.p[k];
            uint64_t n, wr = w[find_id(ids, nu, r)];
            const uint32_t *b = gram_body(g, r, &n);
            part += (double)n * (double)wr / (double)x->occ[r];
            for (uint64_t i = 0; i < n; i++)
                if (b[i] >= g->ntokens) w[find_id(ids, nu, b[i] - g->ntokens)] += wr;
        }
        *rules = nu;
        *share = part / (double)(g->root.n + g->syms.n ? g->root.n + g->syms.n : 1);
    }
    free(seen);
    free(ids);
    free(w);
    vec32_free(&stack);
    vec32_free(&used);
    if (rc) return tdc_error(rc, "out of memory");
    return 0;
}

/* Entry `ent`'s bytes into hash state hs, read in blocks through one cursor; *len gets
 * their count. */
static int hash_more(const idx *x, uint32_t ent, XXH3_state_t *hs, unsigned char *blk,
                     size_t bn, uint64_t *len)
{
    idx_cursor c;
    idx_cursor_init(&c);
    uint64_t off = 0;
    ssize_t k;
    while ((k = idx_read(x, &c, ent, off, blk, bn)) > 0) {
        XXH3_64bits_update(hs, blk, (size_t)k);
        off += (uint64_t)k;
    }
    idx_cursor_free(&c);
    *len = off;
    return k < 0 ? (int)k : 0;
}

/* XXH3-64 of entry `ent`'s bytes and their count. */
static int hash_file(const idx *x, uint32_t ent, XXH3_state_t *hs, unsigned char *blk, size_t bn,
                     uint64_t *hash, uint64_t *len)
{
    XXH3_64bits_reset(hs);
    int rc = hash_more(x, ent, hs, blk, bn, len);
    if (!rc) *hash = XXH3_64bits_digest(hs);
    return rc;
}

int idx_check_content(const idx *x, const unsigned char *only,
                      void (*on_bad)(void *ctx, uint32_t ent), void *ctx, uint64_t *files,
                      uint64_t *bytes)
{
    const arc *a = x->a;
    enum { BLK = 1 << 16 };
    unsigned char *blk = malloc(BLK);
    XXH3_state_t *hs = XXH3_createState();
    uint64_t nf = 0, nb = 0, nbad = 0;
    int64_t first_bad = -1;
    int rc = blk && hs ? 0 : -ENOMEM;
    for (uint32_t i = 0; i < a->nents && !rc; i++) {
        const arc_entry *e = &a->ents[i];
        if (e->type != ARC_REG || (only && !only[i]) || arc_ino_entry(a, e->ino) != (int64_t)i)
            continue;
        uint64_t h = 0, n = 0;
        /* A file in a damaged shard is a bad file: counted, its bytes not read. */
        if (!e->damaged && (rc = hash_file(x, i, hs, blk, BLK, &h, &n))) break;
        nf++;
        nb += n;
        if (!e->damaged && h == e->hash && n == e->size) continue;
        if (first_bad < 0) first_bad = i;
        nbad++;
        if (on_bad) on_bad(ctx, i);
    }
    free(blk);
    XXH3_freeState(hs);
    if (files) *files = nf;
    if (bytes) *bytes = nb;
    if (rc) return rc == -ENOMEM ? tdc_error(rc, "out of memory checking content") : rc;
    if (nbad && a->ents[first_bad].damaged) {
        arc_entry_damaged(a, (uint32_t)first_bad);
        return tdc_error_ctx(-EBADMSG, "%llu of %llu files unreadable or damaged",
                             (unsigned long long)nbad, (unsigned long long)nf);
    }
    if (nbad)
        return tdc_error(-EBADMSG, "'%s': content does not match its hash (%llu of %llu files)",
                         a->ents[first_bad].path, (unsigned long long)nbad, (unsigned long long)nf);
    return 0;
}

/* idx_check_spans' relay of a span's bad files to the caller, with the span. */
typedef struct span_bad {
    const arc *s;
    void (*on_bad)(void *ctx, const arc *s, uint32_t ent);
    void *ctx;
    uint64_t n;
} span_bad;

static void relay_bad(void *ctx, uint32_t ent)
{
    span_bad *b = ctx;
    b->n++;
    b->on_bad(b->ctx, b->s, ent);
}

/* Check the files todo[] marks among those of the span of shards [first, last] (each lies
 * wholly inside it), clearing their marks; what was checked is added to *st. */
static int check_span(const arc *meta, uint32_t first, uint32_t last, unsigned char *todo,
                      idx_span_check *st)
{
    arc *s = NULL;
    idx *x = NULL;
    uint32_t *ids = NULL, nids = 0;
    unsigned char *sel = NULL;
    int rc = arc_open_span(meta, first, last, &s, &ids, &nids);
    if (!rc) rc = idx_build_base(s, &x);
    if (!rc) st->long_words |= dict_has_word_of(s->dict, TOK_CAP);
    if (!rc && !(sel = calloc(nids ? nids : 1, 1))) rc = tdc_error(-ENOMEM, "out of memory");
    for (uint32_t l = 0; !rc && l < nids; l++) {
        sel[l] = todo[ids[l]];
        todo[ids[l]] = 0;
    }
    for (uint32_t k = first; !rc && k <= last; k++) {
        if (!st->loaded[k] && s->shards[k].damage) {
            st->damaged++;
            if (st->on_damage) st->on_damage(st->ctx, k, s->shards[k].damage);
        }
        st->loaded[k] = 1;
    }
    span_bad b = {s, st->on_bad, st->ctx, 0};
    uint64_t files = 0, bytes = 0;
    if (!rc)
        rc = idx_check_content(x, sel, st->on_bad ? relay_bad : NULL, &b, &files, &bytes);
    st->files += files;
    st->bytes += bytes;
    st->bad += b.n;
    if (rc == -EBADMSG && b.n) rc = 0; /* heard by on_bad: the check goes on */
    free(sel);
    free(ids);
    idx_free(x);
    arc_free(s);
    return rc;
}

/* Check file `ent`, cut over shards [first, last] of its own (arc_entry_parts), part by
 * part: each shard loaded alone with the file's part (arc_open_part, whose index checks the
 * part's size), the parts' bytes hashed in order against the file's hash. */
static int check_parts(const arc *meta, uint32_t ent, uint32_t first, uint32_t last,
                       idx_span_check *st)
{
    enum { BLK = 1 << 16 };
    unsigned char *blk = malloc(BLK);
    XXH3_state_t *hs = XXH3_createState();
    arc *bad = NULL; /* the part that holds the file's damage, or its last */
    uint64_t bytes = 0;
    int rc = blk && hs ? 0 : tdc_error(-ENOMEM, "out of memory"), damaged = 0;
    if (hs) XXH3_64bits_reset(hs);
    for (uint32_t k = first; !rc && k <= last; k++) {
        arc *s = NULL;
        idx *x = NULL;
        uint64_t n = 0;
        if (!(rc = arc_open_part(meta, ent, k, &s)) && !(rc = idx_build_base(s, &x))) {
            st->long_words |= dict_has_word_of(s->dict, TOK_CAP);
            if (!st->loaded[k] && s->shards[k].damage) {
                st->damaged++;
                if (st->on_damage) st->on_damage(st->ctx, k, s->shards[k].damage);
            }
            st->loaded[k] = 1;
            if (s->ents[0].damaged)
                damaged = 1; /* counted, not read, as idx_check_content does */
            else if (!damaged)
                rc = hash_more(x, 0, hs, blk, BLK, &n);
        }
        bytes += n;
        idx_free(x);
        if (!rc && (damaged || k == last) && !bad)
            bad = s; /* kept for on_bad, which names the file from it */
        else
            arc_free(s);
    }
    if (!rc) {
        st->files++;
        st->bytes += bytes;
        if (damaged || bytes != meta->ents[ent].size ||
            XXH3_64bits_digest(hs) != meta->ents[ent].hash) {
            st->bad++;
            if (st->on_bad)
                st->on_bad(st->ctx, bad, 0);
            else
                rc = tdc_error(-EBADMSG, "'%s': content does not match its hash",
                               meta->ents[ent].path);
        }
    }
    arc_free(bad);
    XXH3_freeState(hs);
    free(blk);
    return rc;
}

int idx_check_spans(const arc *meta, const unsigned char *only, idx_span_check *st)
{
    st->files = st->bytes = st->bad = 0;
    st->damaged = 0;
    st->long_words = 0;
    unsigned char *todo = malloc(meta->nents ? meta->nents : 1);
    st->loaded = calloc(meta->nshards ? meta->nshards : 1, 1);
    int rc = todo && st->loaded ? 0 : tdc_error(-ENOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < meta->nents; i++) {
        const arc_entry *e = &meta->ents[i];
        todo[i] = (!only || only[i]) && e->type == ARC_REG && e->root_len;
        /* A file without content (its inode's first name) is checked here: no span holds it. */
        if ((only && !only[i]) || e->type != ARC_REG || e->root_len ||
            arc_ino_entry(meta, e->ino) != (int64_t)i)
            continue;
        st->files++;
        if (e->size == 0 && e->hash == XXH3_64bits(NULL, 0)) continue;
        if (!st->on_bad)
            rc = tdc_error(-EBADMSG, "'%s': content does not match its hash", e->path);
        else {
            st->bad++;
            st->on_bad(st->ctx, meta, i);
        }
    }
    /* Spans in entry order: the shards of the next file to check. */
    for (uint32_t i = 0; !rc && i < meta->nents; i++) {
        uint32_t first, last;
        if (!todo[i]) continue;
        if (arc_entry_parts(meta, i, &first, &last)) { /* a shard at a time */
            todo[i] = 0;
            rc = check_parts(meta, i, first, last, st);
            continue;
        }
        arc_entry_shards(meta, i, &first, &last);
        rc = check_span(meta, first, last, todo, st);
        if (!rc && todo[i]) /* not the span's own entry (a further name): nothing holds it */
            rc = tdc_error(-EBADMSG, "'%s': its content is in no span of its shards",
                           meta->ents[i].path);
    }
    /* A whole check also decodes the shards no file's content lies in. */
    for (uint32_t k = 0; !rc && !only && k < meta->nshards; k++) {
        arc *p = NULL;
        if (st->loaded[k] || meta->version < 4) continue;
        rc = arc_open_piece(meta, k, &p);
        if (!rc) st->long_words |= dict_has_word_of(p->dict, TOK_CAP);
        arc_piece_free(p);
        if (rc == -EBADMSG && meta->nshards > 1) {
            st->damaged++;
            if (st->on_damage) st->on_damage(st->ctx, k, tdc_errmsg());
            rc = 0;
        }
    }
    free(todo);
    free(st->loaded);
    st->loaded = NULL;
    if (!rc && (st->bad || st->damaged))
        rc = tdc_error(-EBADMSG, "%llu of %llu files damaged or not matching their hash",
                       (unsigned long long)st->bad, (unsigned long long)st->files);
    return rc;
}
