/* ana_merge: the parts' output texts merged into the whole archive's (ana_merge.h).
 *
 * Keys (words, sequences, paths) are interned in dictionaries (grammar/dict.h), which hold
 * byte strings of any length. Two ways, by the analytic's order:
 * - counts (wordcount, sort, seqcount): each part's lines are dealt, as they arrive, into one
 *   bucket per merging thread by a hash of their key (word or sequence), and the buckets are
 *   summed at once, on as many threads, each into the table of its bucket's keys; so the
 *   merge holds the distinct keys and their counts, never the parts' text. At the end the
 *   keys are sorted once (byte order, then by count for wordcount and seqcount) and printed.
 *   Spilled (ana_merge_spill), the tables go out whenever they pass the bound, their lines
 *   dealt into SPILL_BUCKETS buckets of the file by another hash; at the end each bucket is
 *   summed and printed alone, its output appended to the file, and the buckets' outputs,
 *   each in the analytic's order, are merged with a heap;
 * - lists (invindex, termvector, rankedinvindex): each part's text is already in the
 *   analytic's key order (word, path, sequence), so the parts are merged like sorted runs: the
 *   key space is cut into one range per thread at keys sampled from the parts, and each
 *   thread merges its range of every part with a heap. A key that only one part holds (a file
 *   whole in its shard, a word or sequence of one shard) is copied as it is; one that several
 *   hold has its lists united (invindex), or its records summed and ordered again.
 * Sequences across the cuts of files that span parts come from the edges: counted into the
 * buckets, or printed as one more part for the ranked index. Paths compare as the raw bytes
 * their escapes stand for (the analytics order paths by raw bytes, and an escape's backslash
 * sorts differently from the byte it stands for). */
#include "ana_merge.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ana.h"
#include "ana_int.h"
#include "analytics.h"
#include "../base/err.h"
#include "../base/fio.h"
#include "../base/par.h"

#define MAXT 64 /* merging threads at most */
#define NOT_SPILLED UINT64_MAX
#define PRINT_SLICE ((size_t)1 << 20) /* records of a counts merge printed at once */
#define SPILL_BUCKETS 256              /* a spilled counts merge's buckets, each merged alone */
/* The index of a list part in the spill file: the first line at or after every step bytes
 * (a thousandth of the merge's bound, from 64 bytes to 64 KiB, and at least a
 * SPIDX_ENTRIES-th of the part: the indexes of all parts grow with the output, which a
 * bound's thousandth made many times the bound), its offset in the part and its key (each
 * followed by a tab and a NUL in keys, as line_key expects), so that a search for a key
 * reads one block of the file. */
#define SPIDX_ENTRIES 64
typedef struct spidx {
    vec64 off, kat; /* each entry's line offset, and its key's offset in keys */
    buf keys;
} spidx;

/* ---- lines and keys ---- */

static int parse_num(const unsigned char *s, size_t n, uint64_t *v)
{
    *v = 0;
    if (!n || n > 20) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        *v = *v * 10 + (uint64_t)(s[i] - '0');
    }
    return 0;
}

/* Byte order of two keys (a prefix first). */
static int key_cmp(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

/* The raw byte at *i of escaped path p (n bytes), advancing *i; -1 at the end. */
static int raw_byte(const unsigned char *p, size_t n, size_t *i)
{
    if (*i >= n) return -1;
    unsigned char c = p[(*i)++];
    if (c != '\\' || *i >= n) return c;
    c = p[(*i)++];
    return c == 't' ? '\t' : c == 'n' ? '\n' : c;
}

/* Order of two escaped paths by the raw bytes they stand for. */
static int path_cmp(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    size_t i = 0, j = 0;
    for (;;) {
        int x = raw_byte(a, an, &i), y = raw_byte(b, bn, &j);
        if (x != y) return x < y ? -1 : 1;
        if (x < 0) return 0;
    }
}

/* The field up to the next tab or the end of [p, end), and where the rest starts. */
static size_t field(const unsigned char *p, const unsigned char *end)
{
    const unsigned char *t = memchr(p, '\t', (size_t)(end - p));
    return (size_t)((t ? t : end) - p);
}

/* ---- the merge ---- */

/* A stretch of the spill file: a bucket's run (finish_spilled), or a chunk of a spilled
 * counts merge's bucket (dump_table): its header (CHUNK_HEAD bytes: the bucket's chunk
 * before it, off and n, off NOT_SPILLED for none) at off, its n bytes of lines after. */
typedef struct chunk {
    uint64_t off, n;
} chunk;

#define CHUNK_HEAD 16

/* A spilled counts merge's bucket in the file: its last chunk, which leads back through the
 * others (a list in the file, so that the memory of a bucket does not grow with the times
 * the tables were emptied), and the bytes of lines in all of them. */
typedef struct chunks {
    chunk last;
    uint64_t bytes;
} chunks;

/* counts: the keys of one hash bucket and their sums so far, under its lock. */
typedef struct ctab {
    pthread_mutex_t lock;
    dict *keys;
    vec64 cnt;
} ctab;

struct ana_merge {
    int kind, lists; /* lists: invindex, termvector, rankedinvindex */
    int nt;          /* merging threads */
    const arc *a;
    vec32 files; /* the scope's files by rank */
    dict *paths; /* their paths, escaped and relative as printed: id = rank */
    pthread_mutex_t lock;
    buf *part;      /* lists: each part's text (p NULL when spilled: n bytes at foff) */
    uint64_t *foff; /* lists: each part's offset in the spill file, or NOT_SPILLED */
    spidx *sx;      /* lists: each spilled part's index */
    size_t nparts, cap;
    const char *dir;         /* ana_merge_spill: where parts go past spill_at held, or NULL */
    uint64_t spill_at, held; /* held: bytes of the parts kept in memory */
    size_t step;             /* lists: a spilled part's index step (spidx) */
    int fd;                  /* the spill file (-1 until the first part spilled) */
    uint64_t fsize;          /* its bytes: the spilled parts, each followed by a NUL */
    uint64_t splits;         /* lists: ranges finish_lists split where they held too much */
    uint64_t widest;         /* lists: the most spilled text one of its batches read */
    struct ctab *sum;        /* counts: nt tables, one per hash bucket */
    chunks *sb;              /* counts spilled: SPILL_BUCKETS buckets in the file */
    int spilled, dumping;    /* counts: a chunk is in the file; a thread is writing some */
    ana_edge *e;             /* edges of pieces of files that span parts */
    size_t ne, cape;
    buf lo, hi;         /* ana_merge_range: the keys of the lines it makes itself */
    int has_lo, has_hi; /* (its crossing sequences) within [lo, hi) */
    int parts, mine;    /* ana_merge_share: those whose shuffle bucket is mine (parts > 1) */
};

int ana_merge_new(int kind, const arc *a, uint32_t first, uint32_t end, const unsigned char *vis,
                  ana_merge **out)
{
    ana_merge *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return tdc_error(-ENOMEM, "analytics: out of memory");
    m->kind = kind;
    m->lists = kind == ANA_INVINDEX || kind == ANA_TERMVECTOR || kind == ANA_RANKEDINVINDEX;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    m->nt = cpus < 1 ? 1 : cpus > MAXT ? MAXT : (int)cpus;
    m->a = a;
    m->fd = -1;
    pthread_mutex_init(&m->lock, NULL);
    size_t plen = ana_scope_prefix(a, first);
    buf p = {0};
    int rc = (m->paths = dict_new()) ? ana_scope_files(a, first, end, vis, &m->files) : -ENOMEM;
    if (!rc && !m->lists && !(m->sum = calloc((size_t)m->nt, sizeof *m->sum))) rc = -ENOMEM;
    for (int t = 0; !rc && m->sum && t < m->nt; t++) {
        pthread_mutex_init(&m->sum[t].lock, NULL);
        if (!(m->sum[t].keys = dict_new())) rc = -ENOMEM;
    }
    for (size_t i = 0; !rc && i < m->files.n; i++) {
        uint32_t id;
        p.n = 0;
        rc = ana_put_path(&p, a->ents[m->files.p[i]].path + plen) ||
                     dict_intern(m->paths, p.p, p.n, &id)
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

const vec32 *ana_merge_files(const ana_merge *m)
{
    return &m->files;
}

void ana_merge_free(ana_merge *m)
{
    if (!m) return;
    dict_free(m->paths);
    for (size_t i = 0; i < m->nparts; i++)
        buf_free(&m->part[i]);
    free(m->part);
    free(m->foff);
    for (size_t i = 0; m->sx && i < m->nparts; i++) {
        vec64_free(&m->sx[i].off);
        vec64_free(&m->sx[i].kat);
        buf_free(&m->sx[i].keys);
    }
    free(m->sx);
    free(m->sb);
    if (m->fd >= 0) close(m->fd);
    for (int t = 0; m->sum && t < m->nt; t++) {
        pthread_mutex_destroy(&m->sum[t].lock);
        dict_free(m->sum[t].keys);
        vec64_free(&m->sum[t].cnt);
    }
    free(m->sum);
    for (size_t i = 0; i < m->ne; i++)
        buf_free(&m->e[i].words);
    free(m->e);
    vec32_free(&m->files);
    buf_free(&m->lo);
    buf_free(&m->hi);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* The key of a counts line: the word or sequence, and its count. */
static int count_line(int kind, const unsigned char *p, const unsigned char *nl,
                      const unsigned char **key, size_t *kn, uint64_t *v)
{
    size_t a = field(p, nl);
    if (p + a == nl) return -1;
    const unsigned char *b = p + a + 1;
    size_t bn = field(b, nl);
    if (b + bn != nl) return -1;
    if (kind == ANA_SORT) {
        *key = p;
        *kn = a;
        return parse_num(b, bn, v);
    }
    *key = b;
    *kn = bn;
    return parse_num(p, a, v);
}

static int bad_part(int kind, const unsigned char *p, const unsigned char *nl)
{
    return tdc_error(-EBADMSG, "analytics: a part's %s output has a line it cannot hold: %.*s",
                     ana_table[kind].name, (int)(nl - p < 200 ? nl - p : 200), p);
}

/* The bucket of a key among n: the merge's threads hash with seed 0, ana_merge_shuffle with
 * seed 1, so that the keys one process gets still spread over its threads. */
static size_t bucket(const unsigned char *key, size_t kn, uint64_t seed, size_t n)
{
    return (size_t)(XXH3_64bits_withSeed(key, kn, seed) % (uint64_t)n);
}

/* A counts text dealt into n buckets by its keys' hashes (seed as in bucket). */
static int deal_by(int kind, const unsigned char *t, size_t len, size_t n, uint64_t seed, buf *bk)
{
    for (const unsigned char *p = t, *end = t + len; p < end;) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p)), *key;
        size_t kn;
        uint64_t v;
        if (!nl || count_line(kind, p, nl, &key, &kn, &v)) return bad_part(kind, p, nl ? nl : end);
        if (buf_put(&bk[bucket(key, kn, seed, n)], p, (size_t)(nl + 1 - p)))
            return tdc_error(-ENOMEM, "analytics: out of memory");
        p = nl + 1;
    }
    return 0;
}

/* A counts part dealt into the merge's nt buckets. */
static int deal(const ana_merge *m, const unsigned char *t, size_t n, buf *bk)
{
    return deal_by(m->kind, t, n, (size_t)m->nt, 0, bk);
}

int ana_merge_shuffle(int kind, const unsigned char *t, size_t n, int parts, buf *bk)
{
    return deal_by(kind, t, n, (size_t)parts, 1, bk);
}

void ana_merge_share(ana_merge *m, int parts, int mine)
{
    m->parts = parts;
    m->mine = mine;
}

/* Every line of a lists part holds a tab and ends in a newline. */
static int check_lines(const ana_merge *m, const unsigned char *t, size_t n)
{
    for (const unsigned char *p = t, *end = t + n; p < end;) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || !memchr(p, '\t', (size_t)(nl - p))) return bad_part(m->kind, p, nl ? nl : end);
        p = nl + 1;
    }
    return 0;
}

/* Lines "count<TAB>key" (or "key<TAB>count" for sort) added to a table's sums. */
static int sum_lines(int kind, ctab *c, const buf *b)
{
    for (const unsigned char *p = b->p, *end = b->p + b->n; p < end;) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p)), *key;
        size_t kn;
        uint64_t v;
        uint32_t id;
        count_line(kind == ANA_SORT ? ANA_SORT : ANA_WORDCOUNT, p, nl, &key, &kn, &v);
        if (dict_intern(c->keys, key, kn, &id)) return -ENOMEM;
        while (c->cnt.n <= id)
            if (vec64_push(&c->cnt, 0)) return -ENOMEM;
        c->cnt.p[id] += v;
        p = nl + 1;
    }
    return 0;
}

/* One bucket of a part summed into its table (a thread of add_buckets). */
typedef struct sjob {
    ana_merge *m;
    ctab *c;
    buf *b;
    int rc;
} sjob;

static void *sum_main(void *arg)
{
    sjob *j = arg;
    pthread_mutex_lock(&j->c->lock);
    j->rc = sum_lines(j->m->kind, j->c, j->b);
    pthread_mutex_unlock(&j->c->lock);
    return NULL;
}

/* The nt buckets bk summed into the nt tables, on nt threads. */
static int add_buckets(ana_merge *m, buf *bk)
{
    sjob j[MAXT];
    for (int t = 0; t < m->nt; t++)
        j[t] = (sjob){.m = m, .c = &m->sum[t], .b = &bk[t]};
    par_run((unsigned)m->nt, sum_main, j, sizeof *j);
    for (int t = 0; t < m->nt; t++)
        if (j[t].rc) return tdc_error(j[t].rc, "analytics: out of memory");
    return 0;
}

void ana_merge_spill(ana_merge *m, const char *dir, uint64_t at)
{
    m->dir = dir;
    m->spill_at = at;
    m->step = at / 1024 < 64 ? 64 : at / 1024 > ((size_t)64 << 10) ? (size_t)64 << 10 : at / 1024;
}

uint64_t ana_merge_spilled(const ana_merge *m)
{
    return m->fsize;
}

void ana_merge_batches(const ana_merge *m, uint64_t *splits, uint64_t *widest)
{
    *splits = m->splits;
    *widest = m->widest;
}

/* Append a part's text and a NUL to the spill file (m->lock held): its offset there, or
 * NOT_SPILLED (and no spilling from then on) where the file cannot be made or written. */
static uint64_t spill(ana_merge *m, const buf *text)
{
    uint64_t at = m->fsize;
    if (m->fd < 0) m->fd = fio_tmpfile(m->dir);
    if (m->fd < 0 || fio_pwrite_all(m->fd, text->p, text->n, at, "analytics merge") ||
        fio_pwrite_all(m->fd, "", 1, at + text->n, "analytics merge")) {
        m->dir = NULL;
        return NOT_SPILLED;
    }
    m->fsize = at + text->n + 1;
    return at;
}

/* ---- counts past the budget: the tables emptied into the spill file ----
 * A counts merge given a spill directory empties its tables into the spill file whenever they
 * hold more than spill_at bytes: their lines, dealt by a hash of the key (seed 2) into
 * SPILL_BUCKETS buckets, one chunk of each bucket per table emptied. The tables meanwhile sum
 * what arrives, so a key repeated in many parts is written once per emptying, not per part.
 * finish_spilled then merges bucket by bucket. */

/* What a table holds in memory, about. */
static uint64_t ctab_bytes(const ctab *c)
{
    const dict *d = c->keys;
    return d->blob.cap + d->offs.cap * 8 + (uint64_t)d->tcap * 8 + d->word.cap + c->cnt.cap * 8;
}

/* Table c (its lock held) written to the spill file, one chunk per bucket of bk (which come
 * and go empty), and emptied: 0; 1 where the file cannot be made or written and nothing was
 * spilled before (the table is kept, and the merge stays in memory); else a negative errno. */
static int dump_table(ana_merge *m, ctab *c, buf *bk)
{
    int rc = 0;
    for (uint32_t id = 0; !rc && id < dict_count(c->keys); id++) {
        size_t kn;
        const unsigned char *k = dict_bytes(c->keys, id, &kn);
        if (id >= c->cnt.n || !c->cnt.p[id]) continue;
        buf *b = &bk[bucket(k, kn, 2, SPILL_BUCKETS)];
        static const unsigned char head[CHUNK_HEAD]; /* a chunk's header, filled in below */
        if (!b->n && buf_put(b, head, CHUNK_HEAD)) {
            rc = -ENOMEM;
            break;
        }
        if (m->kind == ANA_SORT)
            rc = buf_put(b, k, kn) || buf_put(b, "\t", 1) || ana_put_num(b, c->cnt.p[id]);
        else
            rc = ana_put_num(b, c->cnt.p[id]) || buf_put(b, "\t", 1) || buf_put(b, k, kn);
        rc = rc || buf_put(b, "\n", 1) ? -ENOMEM : 0;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < SPILL_BUCKETS; i++)
        total += bk[i].n;
    pthread_mutex_lock(&m->lock);
    uint64_t at = m->fsize;
    if (!rc && m->fd < 0) m->fd = fio_tmpfile(m->dir);
    if (!rc && m->fd < 0) rc = 1;
    if (!rc && !m->sb) {
        if (!(m->sb = calloc(SPILL_BUCKETS, sizeof *m->sb))) rc = -ENOMEM;
        for (size_t i = 0; !rc && i < SPILL_BUCKETS; i++)
            m->sb[i].last.off = NOT_SPILLED;
    }
    if (!rc) m->fsize += total;
    for (size_t i = 0; !rc && i < SPILL_BUCKETS; i++) /* each chunk names its bucket's last */
        if (bk[i].n) memcpy(bk[i].p, &m->sb[i].last, CHUNK_HEAD);
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0, off = 0; !rc && i < SPILL_BUCKETS; off += bk[i++].n)
        if (fio_pwrite_all(m->fd, bk[i].p, bk[i].n, at + off, "analytics merge")) rc = 1;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0, off = 0; !rc && i < SPILL_BUCKETS; off += bk[i++].n) {
        if (!bk[i].n) continue;
        m->sb[i].last = (chunk){at + off, bk[i].n - CHUNK_HEAD};
        m->sb[i].bytes += bk[i].n - CHUNK_HEAD;
        m->spilled = 1;
    }
    if (rc == 1) {
        if (m->spilled)
            rc = tdc_error(-EIO, "analytics: cannot write the merge's spill file");
        else
            m->dir = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < SPILL_BUCKETS; i++)
        bk[i].n = 0;
    if (rc) return rc;
    dict_free(c->keys);
    vec64_free(&c->cnt);
    return (c->keys = dict_new()) ? 0 : -ENOMEM;
}

/* The tables emptied into the spill file where they hold more than spill_at bytes (or, with
 * all, where they hold anything), by one thread at a time. 0 or a negative errno. */
static int dump_tables(ana_merge *m, int all)
{
    pthread_mutex_lock(&m->lock);
    int go = m->dir && !m->dumping;
    if (go) m->dumping = 1;
    pthread_mutex_unlock(&m->lock);
    if (!go) return 0;
    uint64_t held = 0;
    for (int t = 0; t < m->nt; t++) {
        pthread_mutex_lock(&m->sum[t].lock);
        held += ctab_bytes(&m->sum[t]);
        pthread_mutex_unlock(&m->sum[t].lock);
    }
    int rc = 0;
    buf *bk = held > m->spill_at || all ? calloc(SPILL_BUCKETS, sizeof *bk) : NULL;
    if ((held > m->spill_at || all) && !bk) rc = -ENOMEM;
    for (int t = 0; !rc && bk && t < m->nt; t++) {
        pthread_mutex_lock(&m->sum[t].lock);
        rc = dump_table(m, &m->sum[t], bk);
        pthread_mutex_unlock(&m->sum[t].lock);
    }
    for (size_t i = 0; bk && i < SPILL_BUCKETS; i++)
        buf_free(&bk[i]);
    free(bk);
    pthread_mutex_lock(&m->lock);
    m->dumping = 0;
    pthread_mutex_unlock(&m->lock);
    return rc == 1 ? 0 : rc == -ENOMEM ? tdc_error(rc, "analytics: out of memory") : rc;
}

static size_t line_key(const unsigned char *p);

/* Index a spilled list part's text (every line holds a tab, check_lines saw to it). */
static int index_part(spidx *x, const buf *text, size_t step)
{
    if (step < text->n / SPIDX_ENTRIES) step = text->n / SPIDX_ENTRIES;
    for (size_t at = 0; at < text->n;) {
        size_t kn = line_key(text->p + at);
        if (vec64_push(&x->off, at) || vec64_push(&x->kat, x->keys.n) ||
            buf_put(&x->keys, text->p + at, kn) || buf_put(&x->keys, "\t", 2))
            return -ENOMEM;
        size_t from = at + step - 1; /* the next entry: the line after the one there */
        if (from >= text->n) break;
        const unsigned char *nl = memchr(text->p + from, '\n', text->n - from);
        if (!nl || (size_t)(nl + 1 - text->p) >= text->n) break;
        at = (size_t)(nl + 1 - text->p);
    }
    return 0;
}

static int merge_held(ana_merge *m, buf *text);

int ana_merge_part(ana_merge *m, buf *text)
{
    if (!m->lists) {
        buf bk[MAXT];
        memset(bk, 0, sizeof bk);
        int rc = deal(m, text->p, text->n, bk);
        if (!rc) rc = add_buckets(m, bk);
        if (!rc) rc = dump_tables(m, 0);
        for (int t = 0; t < m->nt; t++)
            buf_free(&bk[t]);
        buf_free(text);
        return rc;
    }
    int rc = check_lines(m, text->p, text->n);
    pthread_mutex_lock(&m->lock);
    if (!rc && m->nparts == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        buf *x = realloc(m->part, cap * sizeof *x);
        uint64_t *o = x ? realloc(m->foff, cap * sizeof *o) : NULL;
        spidx *sx = o ? realloc(m->sx, cap * sizeof *sx) : NULL;
        if (x) m->part = x;
        if (o) m->foff = o;
        if (sx) {
            m->sx = sx;
            memset(sx + m->cap, 0, (cap - m->cap) * sizeof *sx);
            m->cap = cap;
        } else {
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
        }
    }
    if (!rc) {
        /* Past the bound the parts held and this one go to the file as one part, merged: the
         * parts in the file are then about spill_at bytes each, not each shard's (thousands
         * of tiny parts, each with its index, when the shards are small) */
        int over = m->dir && m->held + text->n > m->spill_at;
        if (over) rc = merge_held(m, text);
        uint64_t at = over && !rc ? spill(m, text) : NOT_SPILLED;
        if (at != NOT_SPILLED && index_part(&m->sx[m->nparts], text, m->step)) {
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
            at = NOT_SPILLED; /* kept in memory: the part in the file is never read */
        }
        m->foff[m->nparts] = at;
        if (at == NOT_SPILLED) {
            /* held at its size plus the NUL finish_lists adds: the slack of a buffer that
             * grew by doubling (up to its size again) would not be counted in held */
            unsigned char *q = text->cap > text->n + 1 ? realloc(text->p, text->n + 1) : NULL;
            if (q) {
                text->p = q;
                text->cap = text->n + 1;
            }
            m->part[m->nparts++] = *text;
            m->held += text->n;
            memset(text, 0, sizeof *text);
        } else {
            m->part[m->nparts++] = (buf){NULL, text->n, 0};
            buf_free(text);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int ana_merge_edge(ana_merge *m, ana_edge *e)
{
    if (e->file >= m->files.n)
        return tdc_error(-EBADMSG, "analytics: an edge of no file of the scope");
    int rc = 0;
    pthread_mutex_lock(&m->lock);
    if (m->ne == m->cape) {
        size_t cap = m->cape ? m->cape * 2 : 64;
        ana_edge *x = realloc(m->e, cap * sizeof *x);
        if (x) {
            m->e = x;
            m->cape = cap;
        } else {
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
        }
    }
    if (!rc) {
        m->e[m->ne++] = *e;
        memset(&e->words, 0, sizeof e->words);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int ana_edges_encode(const ana_edge *e, size_t n, buf *out)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char f = (unsigned char)((e[i].whole ? 1 : 0) | (e[i].word_first ? 2 : 0) |
                                          (e[i].word_last ? 4 : 0));
        if (buf_put_varint(out, e[i].file) || buf_put_varint(out, e[i].part) ||
            buf_put_varint(out, e[i].nw) || buf_put(out, &f, 1) ||
            buf_put_varint(out, e[i].words.n) || buf_put(out, e[i].words.p, e[i].words.n))
            return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    return 0;
}

int ana_edges_decode(const unsigned char *p, size_t len, ana_edge **e, size_t *n)
{
    rd r = {p, p + len};
    size_t cap = *n;
    while (r.p < r.end) {
        uint64_t file, part, nw, wn;
        const unsigned char *f, *w;
        if (rd_varint(&r, &file) || rd_varint(&r, &part) || rd_varint(&r, &nw) ||
            rd_bytes(&r, 1, &f) || rd_varint(&r, &wn) || rd_bytes(&r, wn, &w) ||
            file > UINT32_MAX || part > UINT32_MAX || nw > 4 || *f > 7)
            return tdc_error(-EBADMSG, "analytics: malformed edges");
        size_t spaces = 0;
        for (uint64_t i = 0; i < wn; i++)
            spaces += w[i] == ' ';
        if (spaces != nw || (wn && w[wn - 1] != ' ') || (!(*f & 1) && nw != 4))
            return tdc_error(-EBADMSG, "analytics: malformed edges");
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            ana_edge *x = realloc(*e, cap * sizeof *x);
            if (!x) return tdc_error(-ENOMEM, "analytics: out of memory");
            *e = x;
        }
        ana_edge *d = &(*e)[(*n)++];
        *d = (ana_edge){(uint32_t)file, (uint32_t)part, (uint32_t)nw, *f & 1,
                        *f >> 1 & 1,    *f >> 2 & 1,    {0}};
        if (buf_put(&d->words, w, wn)) return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    return 0;
}

void ana_merge_take_edges(ana_merge *m, ana_edge **e, size_t *n)
{
    *e = m->e;
    *n = m->ne;
    m->e = NULL;
    m->ne = m->cape = 0;
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

/* A crossing sequence of a file: "w1 w2 w3" in key. */
typedef int (*cross_fn)(ana_merge *m, uint32_t file, const buf *key, void *ctx);

/* The sequences of one file that cross its cuts, pieces e[0..n) in part order: every three
 * consecutive words of the edges with no gap between them and not all of one piece (those
 * the piece's own part counted), each given to fn. -ENOTSUP where a piece ends inside a word
 * and the next starts inside one. */
static int crossing(ana_merge *m, const ana_edge *e, size_t n, cross_fn fn, void *ctx)
{
    eword *w = malloc(n * 5 * sizeof *w);
    buf key = {0};
    size_t nw = 0;
    int rc = w ? 0 : tdc_error(-ENOMEM, "analytics: out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        if (i && e[i - 1].word_last && e[i].word_first) {
            rc = tdc_error(-ENOTSUP,
                           "analytics: '%s' is cut inside a word between shards %u "
                           "and %u",
                           m->a->ents[m->files.p[e[i].file]].path, e[i - 1].part, e[i].part);
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
    for (size_t i = 0; !rc && fn && i + 2 < nw; i++) {
        const eword *t = &w[i];
        if (t[0].piece == SIZE_MAX || t[1].piece == SIZE_MAX || t[2].piece == SIZE_MAX ||
            t[0].piece == t[2].piece)
            continue;
        key.n = 0;
        if (buf_put(&key, t[0].p, t[0].n) || buf_put(&key, " ", 1) ||
            buf_put(&key, t[1].p, t[1].n) || buf_put(&key, " ", 1) || buf_put(&key, t[2].p, t[2].n))
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
        else
            rc = fn(m, e[0].file, &key, ctx);
    }
    free(w);
    buf_free(&key);
    return rc;
}

/* Every file's crossing sequences to fn (NULL: only the check for words cut between parts). */
static int each_crossing(ana_merge *m, cross_fn fn, void *ctx)
{
    sort_n(m->e, m->ne, sizeof *m->e, by_file_part);
    for (size_t i = 0, j; i < m->ne; i = j) {
        for (j = i + 1; j < m->ne && m->e[j].file == m->e[i].file; j++)
            ;
        int rc = crossing(m, m->e + i, j - i, fn, ctx);
        if (rc) return rc;
    }
    return 0;
}

/* seqcount: a crossing sequence as a line "1<TAB>w1 w2 w3" of the buckets' extra part. */
static int cross_count(ana_merge *m, uint32_t file, const buf *key, void *ctx)
{
    (void)file;
    buf *bk = ctx;
    if (m->parts > 1 && bucket(key->p, key->n, 1, (size_t)m->parts) != (size_t)m->mine)
        return 0; /* another process's share (ana_merge_share) */
    buf *b = &bk[bucket(key->p, key->n, 0, (size_t)m->nt)];
    return buf_put(b, "1\t", 2) || buf_put(b, key->p, key->n) || buf_put(b, "\n", 1)
               ? tdc_error(-ENOMEM, "analytics: out of memory")
               : 0;
}

/* rankedinvindex: a crossing sequence of a file, collected for the extra part. */
typedef struct xrec {
    uint32_t key, file;
    uint64_t n;
} xrec;

typedef struct xcol {
    dict *keys;
    xrec *r;
    size_t n, cap;
    int by_count; /* xrec_cmp: within a key, by count descending before file */
} xcol;

static int cross_rank(ana_merge *m, uint32_t file, const buf *key, void *ctx)
{
    (void)m;
    xcol *x = ctx;
    uint32_t id;
    if (dict_intern(x->keys, key->p, key->n, &id))
        return tdc_error(-ENOMEM, "analytics: out of memory");
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        xrec *r = realloc(x->r, cap * sizeof *r);
        if (!r) return tdc_error(-ENOMEM, "analytics: out of memory");
        x->r = r;
        x->cap = cap;
    }
    x->r[x->n++] = (xrec){id, file, 1};
    return 0;
}

/* By sequence, then (x->by_count) by count descending, then by file. */
static int xrec_cmp(const void *p, const void *q, void *ctx)
{
    const xcol *x = ctx;
    const xrec *a = p, *b = q;
    size_t an, bn;
    const unsigned char *ka = dict_bytes(x->keys, a->key, &an),
                        *kb = dict_bytes(x->keys, b->key, &bn);
    int c = a->key == b->key ? 0 : key_cmp(ka, an, kb, bn);
    if (c) return c;
    if (x->by_count && a->n != b->n) return a->n > b->n ? -1 : 1;
    return (a->file > b->file) - (a->file < b->file);
}

/* The ranked index's crossing sequences as one more part, in its order. */
static int cross_part(ana_merge *m, buf *out)
{
    xcol x = {.keys = dict_new()};
    int rc =
        x.keys ? each_crossing(m, cross_rank, &x) : tdc_error(-ENOMEM, "analytics: out of memory");
    sort_r(x.r, x.n, sizeof *x.r, xrec_cmp, &x);
    size_t k = 0;
    for (size_t i = 0; i < x.n; i++) {
        if (k && x.r[k - 1].key == x.r[i].key && x.r[k - 1].file == x.r[i].file)
            x.r[k - 1].n += x.r[i].n;
        else
            x.r[k++] = x.r[i];
    }
    x.by_count = 1;
    sort_r(x.r, k, sizeof *x.r, xrec_cmp, &x);
    for (size_t i = 0; !rc && i < k; i++) {
        size_t kn, pn;
        const unsigned char *kp = dict_bytes(x.keys, x.r[i].key, &kn);
        const unsigned char *pp = dict_bytes(m->paths, x.r[i].file, &pn);
        int head = !i || x.r[i].key != x.r[i - 1].key;
        if ((head && i && buf_put(out, "\n", 1)) || (head && buf_put(out, kp, kn)) ||
            buf_put(out, "\t", 1) || buf_put(out, pp, pn) || buf_put(out, ":", 1) ||
            ana_put_num(out, x.r[i].n))
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
    }
    if (!rc && k && buf_put(out, "\n", 1)) rc = tdc_error(-ENOMEM, "analytics: out of memory");
    dict_free(x.keys);
    free(x.r);
    return rc;
}

/* ---- counts: the buckets summed by key on nt threads ---- */

/* The keys of tables t[0..nt) and their counts, printed in the analytic's order to sink: the
 * keys of every table in byte order (w's ids number them table after table, from base[i]),
 * then their records in output order, printed PRINT_SLICE at a time on `threads` threads. The
 * peak is the tables and two arrays of records. 0, -ENOMEM or the sink's error. */
static int print_tables(int kind, const ctab *t, int nt, int threads, ana_sink sink, void *sctx)
{
    size_t n = 0, base[MAXT + 1];
    for (int i = 0; i < nt; i++) {
        base[i] = n;
        n += dict_count(t[i].keys);
    }
    base[nt] = n;
    ana_wrec *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return -ENOMEM;
    size_t k = 0;
    for (int i = 0; i < nt; i++)
        for (uint32_t id = 0; id < dict_count(t[i].keys); id++) {
            size_t len;
            const unsigned char *p = dict_bytes(t[i].keys, id, &len);
            w[k] = (ana_wrec){ana_prefix_key(p, len), p, (uint32_t)len, (uint32_t)k};
            k++;
        }
    int rc = ana_sort_words(w, n, threads);
    ana_crec *o = rc ? NULL : malloc((n ? n : 1) * sizeof *o);
    if (!rc && !o) rc = -ENOMEM;
    size_t kept = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        size_t lo = 0, hi = (size_t)nt; /* the table of id: base[lo] <= id < base[lo + 1] */
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (base[mid] <= w[i].id)
                lo = mid;
            else
                hi = mid;
        }
        uint64_t cnt = t[lo].cnt.p[w[i].id - base[lo]];
        if (cnt) o[kept++] = (ana_crec){w[i].w, w[i].n, cnt};
    }
    free(w);
    if (!rc && kind != ANA_SORT) rc = ana_by_count(o, kept);
    buf out = {0};
    for (size_t i = 0; !rc && i < kept; i += PRINT_SLICE) {
        out.n = 0;
        rc = ana_print_counts(o + i, kept - i < PRINT_SLICE ? kept - i : PRINT_SLICE,
                              kind != ANA_SORT, &out, threads);
        if (!rc && out.n) rc = sink(sctx, out.p, out.n);
    }
    free(o);
    buf_free(&out);
    return rc;
}

/* ---- lists: the sorted parts merged by key range on nt threads ---- */

/* The key of the line at p (ending at its newline): the text before the first tab. */
static size_t line_key(const unsigned char *p)
{
    return (size_t)((const unsigned char *)strchr((const char *)p, '\t') - p);
}

static int kcmp(int paths, const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    return paths ? path_cmp(a, an, b, bn) : key_cmp(a, an, b, bn);
}

/* A line's order key: the key before its tab, or for the analytics ordered by count
 * (wordcount, seqcount) the whole line, "count<TAB>key". */
static size_t order_key(int kind, const unsigned char *p, const unsigned char *nl)
{
    return kind == ANA_WORDCOUNT || kind == ANA_SEQCOUNT ? (size_t)(nl - p) : field(p, nl);
}

int ana_merge_key_cmp(int kind, const unsigned char *a, size_t an, const unsigned char *b,
                      size_t bn)
{
    if (kind == ANA_WORDCOUNT || kind == ANA_SEQCOUNT) { /* count descending, then key */
        size_t x = field(a, a + an), y = field(b, b + bn);
        uint64_t u = 0, v = 0;
        parse_num(a, x, &u);
        parse_num(b, y, &v);
        if (u != v) return u > v ? -1 : 1;
        return x < an && y < bn ? key_cmp(a + x + 1, an - x - 1, b + y + 1, bn - y - 1)
                                : (x < an) - (y < bn);
    }
    return kcmp(kind == ANA_TERMVECTOR, a, an, b, bn);
}

size_t ana_merge_lower(int kind, const unsigned char *t, size_t n, const unsigned char *k,
                       size_t kn)
{
    size_t lo = 0, hi = n; /* line starts (or the end) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        while (mid > lo && t[mid - 1] != '\n') /* back to its line's start */
            mid--;
        const unsigned char *p = t + mid;
        const unsigned char *nl = memchr(p, '\n', n - mid);
        if (!nl) nl = t + n;
        if (ana_merge_key_cmp(kind, p, order_key(kind, p, nl), k, kn) < 0)
            lo = nl < t + n ? (size_t)(nl + 1 - t) : n;
        else
            hi = mid;
    }
    return lo;
}

/* The start of the first line of text t (NUL-terminated) at or after line start a whose key
 * is not below (k, kn), found by steps that double from a, then a binary search in the last:
 * only the text up to about twice as far as the answer is looked at (a spilled part is read
 * through a mapping, whose pages stay resident until dropped). */
static size_t lower_from(int kind, const buf *t, size_t a, const unsigned char *k, size_t kn)
{
    const unsigned char *p = t->p;
    size_t n = t->n - 1;
    for (size_t step = 4096;; step *= 2) {
        if (n - a <= step) return a + ana_merge_lower(kind, p + a, n - a, k, kn);
        size_t s = a + step;
        while (s > a && p[s - 1] != '\n') /* back to its line's start */
            s--;
        const unsigned char *nl = memchr(p + s, '\n', n - s);
        if (!nl) nl = p + n;
        if (ana_merge_key_cmp(kind, p + s, order_key(kind, p + s, nl), k, kn) >= 0)
            return a + ana_merge_lower(kind, p + a, s - a, k, kn);
        a = nl < p + n ? (size_t)(nl + 1 - p) : n; /* that line is below k: past it */
    }
}

int ana_merge_keyed(int kind)
{
    return kind == ANA_SORT || kind == ANA_INVINDEX || kind == ANA_TERMVECTOR ||
           kind == ANA_RANKEDINVINDEX;
}

int ana_merge_sample(int kind, const unsigned char *t, size_t n, size_t k, buf *keys)
{
    for (size_t s = 1; s <= k && n; s++) {
        size_t at = n * s / (k + 1);
        while (at && t[at - 1] != '\n')
            at--;
        const unsigned char *nl = memchr(t + at, '\n', n - at);
        size_t kn = order_key(kind, t + at, nl ? nl : t + n);
        if (buf_put(keys, t + at, kn) || buf_put(keys, "\n", 1))
            return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    return 0;
}

int ana_merge_range(ana_merge *m, const unsigned char *lo, size_t lon, const unsigned char *hi,
                    size_t hin)
{
    m->lo.n = m->hi.n = 0;
    m->has_lo = lo != NULL;
    m->has_hi = hi != NULL;
    if ((lo && buf_put(&m->lo, lo, lon)) || (hi && buf_put(&m->hi, hi, hin)))
        return tdc_error(-ENOMEM, "analytics: out of memory");
    return 0;
}

/* A part's range for one thread: [p, end). */
typedef struct run {
    const unsigned char *p, *end;
} run;

typedef struct ljob {
    const ana_merge *m;
    run *r; /* this thread's range of every part */
    size_t nr;
    buf out;
    int rc;
} ljob;

/* A record of a group that several parts share: a word of termvector (count, word), a file of
 * rankedinvindex (path, count) or of invindex (path). */
typedef struct grec {
    const unsigned char *s; /* the word or escaped path */
    size_t n;
    uint64_t v;
} grec;

static int grec_by_s(const void *x, const void *y, void *ctx)
{
    const grec *a = x, *b = y;
    return kcmp(*(const int *)ctx, a->s, a->n, b->s, b->n);
}

static int grec_by_v(const void *x, const void *y, void *ctx)
{
    const grec *a = x, *b = y;
    if (a->v != b->v) return a->v > b->v ? -1 : 1;
    return kcmp(*(const int *)ctx, a->s, a->n, b->s, b->n);
}

static int grec_push(grec **g, size_t *n, size_t *cap, grec r)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        grec *x = realloc(*g, c * sizeof *x);
        if (!x) return -ENOMEM;
        *g = x;
        *cap = c;
    }
    (*g)[(*n)++] = r;
    return 0;
}

/* The group of key (k, kn) held by several parts (their lines in l[0..nl), each a line or,
 * for termvector, a block of lines of one path): its records summed (or united) and printed
 * in the analytic's order. */
static int merge_group(ljob *j, const unsigned char *k, size_t kn, const run *l, size_t nl)
{
    int kind = j->m->kind, paths = kind != ANA_TERMVECTOR; /* what the records hold */
    grec *g = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; !rc && i < nl; i++)
        for (const unsigned char *p = l[i].p; !rc && p < l[i].end;) {
            const unsigned char *e = memchr(p, '\n', (size_t)(l[i].end - p));
            const unsigned char *f = p + kn + 1; /* the first field after the key */
            if (kind == ANA_TERMVECTOR) {        /* path, count, word */
                size_t cn = field(f, e);
                uint64_t v;
                if (f + cn == e || parse_num(f, cn, &v)) {
                    rc = -EBADMSG;
                    break;
                }
                rc = grec_push(&g, &n, &cap, (grec){f + cn + 1, (size_t)(e - f - cn - 1), v});
                p = e + 1;
                continue;
            }
            while (!rc && f <= e) { /* the files of the line */
                size_t fn = field(f, e), pn = fn;
                uint64_t v = 0;
                if (kind == ANA_RANKEDINVINDEX) {
                    while (pn && f[pn - 1] != ':')
                        pn--;
                    if (!pn || parse_num(f + pn, fn - pn, &v)) {
                        rc = -EBADMSG;
                        break;
                    }
                    pn--;
                }
                rc = grec_push(&g, &n, &cap, (grec){f, pn, v});
                f += fn + 1;
            }
            p = e + 1;
        }
    sort_r(g, n, sizeof *g, grec_by_s, &paths);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) { /* one record per word or file */
        if (m && !kcmp(paths, g[m - 1].s, g[m - 1].n, g[i].s, g[i].n))
            g[m - 1].v += g[i].v;
        else
            g[m++] = g[i];
    }
    if (kind != ANA_INVINDEX) sort_r(g, m, sizeof *g, grec_by_v, &paths);
    buf *o = &j->out;
    /* The group's lines at once, rather than doubling up to them: a large file's termvector
     * group is much of what such a merge holds */
    uint64_t need = kind != ANA_TERMVECTOR ? kn + 1 : 0;
    for (size_t i = 0; i < m; i++)
        need += g[i].n + (kind == ANA_TERMVECTOR       ? kn + ana_num_len(g[i].v) + 3
                          : kind == ANA_RANKEDINVINDEX ? ana_num_len(g[i].v) + 2
                                                       : 1);
    if (!rc && buf_reserve(o, need)) rc = -ENOMEM;
    if (!rc && kind != ANA_TERMVECTOR) rc = buf_put(o, k, kn);
    for (size_t i = 0; !rc && i < m; i++) {
        if (kind == ANA_TERMVECTOR)
            rc = buf_put(o, k, kn) || buf_put(o, "\t", 1) || ana_put_num(o, g[i].v) ||
                 buf_put(o, "\t", 1) || buf_put(o, g[i].s, g[i].n) || buf_put(o, "\n", 1);
        else
            rc = buf_put(o, "\t", 1) || buf_put(o, g[i].s, g[i].n) ||
                 (kind == ANA_RANKEDINVINDEX && (buf_put(o, ":", 1) || ana_put_num(o, g[i].v)));
    }
    if (!rc && kind != ANA_TERMVECTOR) rc = buf_put(o, "\n", 1);
    free(g);
    return rc == -EBADMSG ? rc : rc ? -ENOMEM : 0;
}

/* The end of the group starting at p (termvector: every line of the same path; else the
 * line). */
static const unsigned char *group_end(int kind, const unsigned char *p, const unsigned char *end,
                                      size_t kn)
{
    const unsigned char *e = memchr(p, '\n', (size_t)(end - p)) + 1;
    if (kind != ANA_TERMVECTOR) return e;
    while (e < end && (size_t)(end - e) > kn && !memcmp(e, p, kn) && e[kn] == '\t')
        e = memchr(e, '\n', (size_t)(end - e)) + 1;
    return e;
}

/* A heap of item numbers, in the order of less(ctx, a, b): a comes before b. */
typedef struct heap {
    size_t *h, n;
    int (*less)(const void *ctx, size_t a, size_t b);
    const void *ctx;
} heap;

static int hless(const heap *hp, size_t a, size_t b)
{
    return hp->less(hp->ctx, a, b);
}

/* Runs of a list merge by their current keys (ties: the earlier part first). */
typedef struct runs {
    const run *r;
    int paths;
} runs;

static int run_less(const void *ctx, size_t a, size_t b)
{
    const runs *rs = ctx;
    const unsigned char *x = rs->r[a].p, *y = rs->r[b].p;
    int c = kcmp(rs->paths, x, line_key(x), y, line_key(y));
    return c ? c < 0 : a < b;
}

static void hdown(heap *hp, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, s = i;
        if (l < hp->n && hless(hp, hp->h[l], hp->h[s])) s = l;
        if (l + 1 < hp->n && hless(hp, hp->h[l + 1], hp->h[s])) s = l + 1;
        if (s == i) return;
        size_t t = hp->h[i];
        hp->h[i] = hp->h[s];
        hp->h[s] = t;
        i = s;
    }
}

static void *list_main(void *arg)
{
    ljob *j = arg;
    int kind = j->m->kind;
    runs rs = {j->r, kind == ANA_TERMVECTOR};
    heap hp = {malloc((j->nr ? j->nr : 1) * sizeof *hp.h), 0, run_less, &rs};
    run *grp = malloc((j->nr ? j->nr : 1) * sizeof *grp);
    if (!hp.h || !grp) j->rc = -ENOMEM;
    for (size_t i = 0; !j->rc && i < j->nr; i++)
        if (j->r[i].p < j->r[i].end) hp.h[hp.n++] = i;
    for (size_t i = hp.n; i-- > 0;)
        hdown(&hp, i);
    while (!j->rc && hp.n) {
        size_t top = hp.h[0], ng = 0;
        const unsigned char *k = j->r[top].p;
        size_t kn = line_key(k);
        /* take every run's group of this key */
        while (hp.n) {
            run *r = &j->r[hp.h[0]];
            if (kcmp(rs.paths, r->p, line_key(r->p), k, kn)) break;
            const unsigned char *e = group_end(kind, r->p, r->end, kn);
            grp[ng++] = (run){r->p, e};
            r->p = e;
            if (r->p >= r->end) hp.h[0] = hp.h[--hp.n];
            hdown(&hp, 0);
        }
        if (ng == 1)
            j->rc = buf_put(&j->out, grp[0].p, (size_t)(grp[0].end - grp[0].p)) ? -ENOMEM : 0;
        else
            j->rc = merge_group(j, k, kn, grp, ng);
    }
    free(hp.h);
    free(grp);
    return NULL;
}

/* A list_main job's failure as the merge reports it: 0, -ENOMEM or -EBADMSG. */
static int job_error(const ana_merge *m, int rc)
{
    if (rc == -ENOMEM) return tdc_error(-ENOMEM, "analytics: out of memory");
    return rc ? tdc_error(-EBADMSG, "analytics: a part's %s output has a malformed record",
                          ana_table[m->kind].name)
              : 0;
}

/* The parts held in memory and `text` merged into one part (the records of a key that several
 * hold united, as at the end), left in text; the held parts leave the merge's tables (their
 * order among the parts does not matter: a key's records are ordered when united). m->lock
 * held. 0, -ENOMEM or -EBADMSG. */
static int merge_held(ana_merge *m, buf *text)
{
    size_t nh = 0;
    for (size_t i = 0; i < m->nparts; i++)
        nh += m->foff[i] == NOT_SPILLED;
    if (!nh) return 0;
    run *r = malloc((nh + 1) * sizeof *r);
    if (!r) return tdc_error(-ENOMEM, "analytics: out of memory");
    size_t nr = 0;
    for (size_t i = 0; i < m->nparts; i++)
        if (m->foff[i] == NOT_SPILLED) r[nr++] = (run){m->part[i].p, m->part[i].p + m->part[i].n};
    r[nr++] = (run){text->p, text->p + text->n};
    ljob j = {.m = m, .r = r, .nr = nr};
    list_main(&j);
    free(r);
    if (j.rc) {
        buf_free(&j.out);
        return job_error(m, j.rc);
    }
    size_t w = 0;
    for (size_t i = 0; i < m->nparts; i++) {
        if (m->foff[i] == NOT_SPILLED) {
            buf_free(&m->part[i]);
            continue;
        }
        m->part[w] = m->part[i];
        m->foff[w] = m->foff[i];
        m->sx[w++] = m->sx[i];
    }
    memset(m->sx + w, 0, (m->nparts - w) * sizeof *m->sx);
    m->nparts = w;
    m->held = 0;
    buf_free(text);
    *text = j.out;
    return 0;
}

/* The keys finish_lists samples from part i of m: its share of `want` by its bytes among the
 * parts' `total`, 1 to SPIDX_ENTRIES (and its index's entries, spilled), 0 for an empty one. */
static size_t part_samples(const ana_merge *m, size_t i, size_t total, size_t want)
{
    int held = m->foff[i] == NOT_SPILLED;
    size_t n = m->part[i].n - held; /* a held part ends in the NUL finish_lists added */
    size_t most = held ? SPIDX_ENTRIES : m->sx[i].off.n;
    if (!n || !most) return 0;
    size_t k = total ? (size_t)(((uint64_t)n * want + total - 1) / total) : 1;
    k = k < 1 ? 1 : k;
    return k < most ? k : most;
}

static int by_key(const void *x, const void *y, void *ctx)
{
    const unsigned char *a = *(const unsigned char *const *)x,
                        *b = *(const unsigned char *const *)y;
    return kcmp(*(const int *)ctx, a, line_key(a), b, line_key(b));
}

/* lower_from for spilled part i (its text n bytes long): the offset of its first line at or
 * after a whose key is not below k's. The index names the block that holds it, which is read
 * into *win; a negative errno where it cannot be read. */
static int64_t spilled_lower(const ana_merge *m, size_t i, size_t n, size_t a,
                             const unsigned char *k, size_t kn, buf *win)
{
    const spidx *x = &m->sx[i];
    size_t lo = 0, hi = x->off.n; /* the first entry whose key is not below k */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const unsigned char *e = x->keys.p + x->kat.p[mid];
        if (ana_merge_key_cmp(m->kind, e, line_key(e), k, kn) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo < x->off.n ? x->off.p[lo] : n; /* a line at or past the answer */
    if (a >= end) return (int64_t)(a < n ? a : n);
    size_t from = lo && x->off.p[lo - 1] > a ? x->off.p[lo - 1] : a;
    win->n = 0;
    if (buf_reserve(win, end - from + 1)) return tdc_error(-ENOMEM, "analytics: out of memory");
    int rc = fio_read_at(m->fd, win->p, end - from, m->foff[i] + from, "analytics merge");
    if (rc) return rc;
    win->p[end - from] = 0;
    return (int64_t)(from + ana_merge_lower(m->kind, win->p, end - from, k, kn));
}

/* Where every part's lines with keys below k end, from where lo says each range begins (k
 * NULL: the parts' ends), in hi. 0 or a negative errno. */
static int cut_at(const ana_merge *m, const size_t *lo, size_t *hi, const unsigned char *k,
                  buf *win)
{
    for (size_t i = 0; i < m->nparts; i++) {
        const buf *t = &m->part[i];
        int held = m->foff[i] == NOT_SPILLED;
        size_t len = held ? t->n - 1 : t->n;
        int64_t b = !k     ? (int64_t)len
                    : held ? (int64_t)lower_from(m->kind, t, lo[i], k, line_key(k))
                           : spilled_lower(m, i, len, lo[i], k, line_key(k), win);
        if (b < 0) return (int)b;
        hi[i] = (size_t)b;
    }
    return 0;
}

static uint64_t range_bytes(const ana_merge *m, const size_t *lo, const size_t *hi)
{
    uint64_t n = 0;
    for (size_t i = 0; i < m->nparts; i++)
        n += hi[i] - lo[i];
    return n;
}

/* How far split_key looks past the middle of a part's range for a line's start and key. */
#define SPLIT_WINDOW (64u << 10)

/* A key inside the range [lo, hi) of the parts, in *key (followed by a tab and a NUL, as
 * line_key expects): that of the first line which starts past the middle of the part that
 * holds most of the range. 1 with a key; 0 where there is none within SPLIT_WINDOW (the part's
 * range one line, or a line longer than that); a negative errno where the part cannot be
 * read. The caller checks that the key cuts the range (a termvector group may not be). */
static int split_key(const ana_merge *m, const size_t *lo, const size_t *hi, buf *key, buf *win)
{
    size_t big = 0;
    for (size_t i = 1; i < m->nparts; i++)
        if (hi[i] - lo[i] > hi[big] - lo[big]) big = i;
    if (!m->nparts || hi[big] - lo[big] < 2) return 0;
    size_t mid = lo[big] + (hi[big] - lo[big]) / 2;
    size_t n = hi[big] - mid < SPLIT_WINDOW ? hi[big] - mid : SPLIT_WINDOW;
    const unsigned char *p = m->part[big].p + mid;
    if (m->foff[big] != NOT_SPILLED) {
        win->n = 0;
        if (buf_reserve(win, n + 1)) return tdc_error(-ENOMEM, "analytics: out of memory");
        int rc = fio_read_at(m->fd, win->p, n, m->foff[big] + mid, "analytics merge");
        if (rc) return rc;
        p = win->p;
    }
    const unsigned char *nl = memchr(p, '\n', n), *s = nl ? nl + 1 : NULL;
    const unsigned char *tab = s ? memchr(s, '\t', n - (size_t)(s - p)) : NULL;
    if (!tab) return 0;
    key->n = 0;
    if (buf_put(key, s, (size_t)(tab - s)) || buf_put(key, "\t", 2))
        return tdc_error(-ENOMEM, "analytics: out of memory");
    return 1;
}

static int finish_lists(ana_merge *m, ana_sink sink, void *sctx)
{
    buf extra = {0};
    int rc = m->kind == ANA_RANKEDINVINDEX ? cross_part(m, &extra) : each_crossing(m, NULL, NULL);
    if (!rc && (m->has_lo || m->has_hi)) { /* keep the keys of ana_merge_range (key order) */
        size_t a = m->has_lo ? ana_merge_lower(m->kind, extra.p, extra.n, m->lo.p, m->lo.n) : 0;
        size_t b =
            m->has_hi ? ana_merge_lower(m->kind, extra.p, extra.n, m->hi.p, m->hi.n) : extra.n;
        if (b > a && a) memmove(extra.p, extra.p + a, b - a);
        extra.n = b > a ? b - a : 0;
    }
    if (!rc && extra.n) rc = ana_merge_part(m, &extra);
    buf_free(&extra);
    if (rc) return rc;
    /* NUL-terminate every part held, so that line_key's strchr stops (every line holds a
     * tab); the spilled ones are read from the file, a block or a batch at a time */
    for (size_t i = 0; i < m->nparts; i++)
        if (m->foff[i] == NOT_SPILLED && buf_put(&m->part[i], "", 1))
            return tdc_error(-ENOMEM, "analytics: out of memory");
    size_t total = 0;
    for (size_t i = 0; i < m->nparts; i++)
        total += m->part[i].n - (m->foff[i] == NOT_SPILLED);
    /* about 4 ranges a thread from a sample of keys; with parts spilled, batches of ranges of
     * about an eighth of spill_at, each batch's spilled text read into memory: besides the
     * parts held (up to spill_at), a batch is there about four times over (its text, the
     * records its ranges parse, their output, the output's copy on the way out) */
    int paths = m->kind == ANA_TERMVECTOR;
    size_t nt = total < 65536 ? 1 : (size_t)m->nt, want = nt > 1 ? nt * 4 : 1, ns = 0;
    uint64_t batch = m->spill_at / 8 > ANA_MERGE_BATCH_MIN ? m->spill_at / 8 : ANA_MERGE_BATCH_MIN;
    uint64_t batches = m->fsize ? m->fsize / batch + 1 : 1;
    if (want < nt * batches) want = nt * batches;
    /* the samples' keys are copied, each followed by a tab and a NUL as line_key expects;
     * a spilled part's are its index's. About four a range, spread over the parts by their
     * bytes (1 to SPIDX_ENTRIES a part), so that ranges cut at every so many samples hold
     * about as many bytes: as many samples from every part let the large ones (merge_held's,
     * holding the files of consecutive shards) fall whole into one batch, 9 MB at mem=16M */
    size_t nsmp = 1;
    for (size_t i = 0; i < m->nparts; i++)
        nsmp += part_samples(m, i, total, want * 4);
    const unsigned char **smp = malloc(nsmp * sizeof *smp);
    size_t *soff = malloc(nsmp * sizeof *soff);
    buf keys = {0};
    for (size_t i = 0; smp && soff && !rc && want > 1 && i < m->nparts; i++) {
        const buf *t = &m->part[i];
        const spidx *x = &m->sx[i];
        int held = m->foff[i] == NOT_SPILLED;
        size_t per = part_samples(m, i, total, want * 4);
        for (size_t s = 1; !rc && s <= per; s++) {
            const unsigned char *p;
            if (held) {
                size_t at = (t->n - 1) * s / (per + 1);
                while (at && t->p[at - 1] != '\n')
                    at--;
                p = t->p + at;
            } else {
                p = x->keys.p + x->kat.p[x->off.n * (s - 1) / per];
            }
            soff[ns++] = keys.n;
            if (buf_put(&keys, p, line_key(p)) || buf_put(&keys, "\t", 2)) rc = -ENOMEM;
        }
    }
    if (!smp || !soff || rc) {
        free(smp);
        free(soff);
        buf_free(&keys);
        return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    for (size_t k = 0; k < ns; k++)
        smp[k] = keys.p + soff[k];
    free(soff);
    sort_r(smp, ns, sizeof *smp, by_key, &paths);
    size_t nranges = ns ? (want < ns ? want : ns) : 1, np = m->nparts ? m->nparts : 1;
    /* With parts spilled, a range is split while it holds more than twice its share of a
     * batch: the samples, a few a part, miss the keys that many parts hold a little of each */
    uint64_t most = m->fsize ? 2 * batch / nt : UINT64_MAX;
    /* One batch's tables, whatever the number of batches: its ranges' runs of every part, and
     * where each ends in each part, cut[(h + 1) * np + i] for its range h, after row 0: where
     * the batch before ended; row nt + 1 a split's trial; row nt + 2 where the sample a split
     * range was to end at cuts the parts (the next range ends there, unless split again). */
    ljob *j = calloc(nt, sizeof *j);
    run *r = calloc(nt * np, sizeof *r);
    size_t *cut = calloc((nt + 3) * np, sizeof *cut), *sampled = cut + (nt + 2) * np;
    size_t sampled_q = SIZE_MAX;             /* the q whose sample's cuts `sampled` holds */
    buf slice = {0}, win = {0}, split = {0}; /* the batch's spilled text; a block; a split key */
    if (!j || !r || !cut) rc = tdc_error(-ENOMEM, "analytics: out of memory");
    /* the ranges, nt at a time, each batch's output appended and dropped at once; q ranges of
     * the samples are done: the next ends at the key of sample (q + 1) * ns / nranges (the end
     * for the last), or where a split put it */
    for (size_t q = 0; !rc && q < nranges;) {
        size_t n = 0;
        for (; !rc && n < nt && q < nranges; n++) {
            j[n] = (ljob){.m = m, .r = r + n * m->nparts, .nr = m->nparts};
            const size_t *lo = cut + n * np;
            size_t *hi = cut + (n + 1) * np, *trial = cut + (nt + 1) * np;
            if (sampled_q == q) /* a split key lies below the sample: its cuts stand */
                memcpy(hi, sampled, np * sizeof *hi);
            else
                rc = cut_at(m, lo, hi, q + 1 < nranges ? smp[(q + 1) * ns / nranges] : NULL, &win);
            int was_split = 0;
            uint64_t bytes = rc ? 0 : range_bytes(m, lo, hi), part;
            while (!rc && bytes > most) {
                int found = split_key(m, lo, hi, &split, &win);
                if (found > 0 && !(rc = cut_at(m, lo, trial, split.p, &win)) &&
                    (part = range_bytes(m, lo, trial)) > 0) {
                    if (sampled_q != q) memcpy(sampled, hi, np * sizeof *hi);
                    sampled_q = q;
                    memcpy(hi, trial, np * sizeof *hi);
                    bytes = part;
                    was_split = 1;
                    m->splits++;
                    continue;
                }
                if (found < 0) rc = found;
                break; /* one line, or one key's group: the range as it is */
            }
            q += !was_split; /* a split range's sample ends the next */
        }
        /* each spilled part's text for the batch, read into one buffer */
        size_t need = 0;
        for (size_t i = 0; !rc && i < m->nparts; i++)
            if (m->foff[i] != NOT_SPILLED) need += cut[n * np + i] - cut[i] + 1;
        slice.n = 0;
        if (need > m->widest) m->widest = need;
        if (!rc && need > slice.cap && buf_reserve(&slice, need))
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
        for (size_t i = 0; !rc && i < m->nparts; i++) {
            int held = m->foff[i] == NOT_SPILLED;
            size_t lo = cut[i], hi = cut[n * np + i];
            const unsigned char *base = m->part[i].p; /* where offset 0 of part i lies */
            if (!held) {
                rc = fio_read_at(m->fd, slice.p + slice.n, hi - lo, m->foff[i] + lo,
                                 "analytics merge");
                slice.p[slice.n + hi - lo] = 0;
                base = slice.p + slice.n - lo;
                slice.n += hi - lo + 1;
            }
            for (size_t h = 0; !rc && h < n; h++)
                j[h].r[i] = (run){base + cut[h * np + i], base + cut[(h + 1) * np + i]};
        }
        if (rc) break;
        par_run((unsigned)n, list_main, j, sizeof *j);
        for (size_t h = 0; h < n && !rc; h++) {
            rc = job_error(m, j[h].rc);
            if (!rc && j[h].out.n) rc = sink(sctx, j[h].out.p, j[h].out.n);
            buf_free(&j[h].out);
        }
        memcpy(cut, cut + n * np, np * sizeof *cut);
    }
    buf_free(&split);
    for (size_t h = 0; j && h < nt; h++)
        buf_free(&j[h].out);
    buf_free(&slice);
    buf_free(&win);
    free(cut);
    free(j);
    free(r);
    free(smp);
    buf_free(&keys);
    return rc;
}

/* ---- counts: the end of the merge ---- */

/* A spilled counts merge's work: the next bucket to merge, each bucket's run in the file. */
typedef struct bqueue {
    ana_merge *m;
    chunk *run;
    size_t next;
    int rc;
} bqueue;

/* Bucket b's chunks summed and printed in the analytic's order, appended to the spill file as
 * its run *r: its keys are no other bucket's, so the run holds their final counts. */
static int bucket_run(ana_merge *m, size_t b, chunk *r)
{
    const chunks *cs = &m->sb[b];
    buf text = {0}, out = {0};
    ctab c = {.keys = dict_new()};
    int rc = c.keys && !buf_reserve(&text, CHUNK_HEAD + cs->bytes) ? 0 : -ENOMEM;
    /* The chunks from the last back, the lines of each after those read so far (a sum of
     * counts needs no order), from CHUNK_HEAD on. Each chunk is read with its header over
     * the last CHUNK_HEAD bytes before it, which are put back: no chunk's lines are moved. */
    chunk at = cs->last;
    if (!rc) memset(text.p, 0, CHUNK_HEAD);
    text.n = CHUNK_HEAD;
    while (!rc && at.off != NOT_SPILLED) {
        if (text.n + at.n > CHUNK_HEAD + cs->bytes) {
            rc = tdc_error(-EIO, "analytics merge: a bucket's chunks disagree");
            break;
        }
        unsigned char *q = text.p + text.n - CHUNK_HEAD, kept[CHUNK_HEAD];
        memcpy(kept, q, CHUNK_HEAD);
        rc = fio_read_at(m->fd, q, CHUNK_HEAD + at.n, at.off, "analytics merge");
        text.n += at.n;
        memcpy(&at, q, CHUNK_HEAD); /* the chunk before it */
        memcpy(q, kept, CHUNK_HEAD);
    }
    buf lines = {text.p + CHUNK_HEAD, text.n - CHUNK_HEAD, 0};
    if (!rc) rc = sum_lines(m->kind, &c, &lines);
    buf_free(&text);
    if (!rc) rc = print_tables(m->kind, &c, 1, 1, ana_sink_buf, &out);
    dict_free(c.keys);
    vec64_free(&c.cnt);
    if (!rc) {
        pthread_mutex_lock(&m->lock);
        *r = (chunk){m->fsize, out.n};
        m->fsize += out.n;
        pthread_mutex_unlock(&m->lock);
        rc = fio_pwrite_all(m->fd, out.p, out.n, r->off, "analytics merge");
    }
    buf_free(&out);
    return rc;
}

static void *bucket_main(void *arg)
{
    bqueue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->m->lock);
        size_t b = q->rc ? SPILL_BUCKETS : q->next++;
        pthread_mutex_unlock(&q->m->lock);
        if (b >= SPILL_BUCKETS) return NULL;
        int rc = bucket_run(q->m, b, &q->run[b]);
        pthread_mutex_lock(&q->m->lock);
        if (rc && !q->rc) q->rc = rc;
        pthread_mutex_unlock(&q->m->lock);
    }
}

/* A bucket's run being merged, read through a window of its own (a mapping of the file would
 * keep a large folio per run resident where the kernel reads ahead in them): its current
 * line [p, nl] in buf (n bytes read of cap), and where in the file the rest lies. */
typedef struct crun {
    unsigned char *buf, *p, *nl;
    size_t n, cap;
    uint64_t off, end;
} crun;

/* Move r to its next whole line: 1, 0 at the run's end, or a negative errno. */
static int crun_next(int fd, crun *r)
{
    for (;;) {
        size_t rest = (size_t)(r->buf + r->n - r->p);
        if ((r->nl = memchr(r->p, '\n', rest))) return 1;
        if (r->off == r->end) return rest ? tdc_error(-EIO, "analytics merge: a cut run") : 0;
        memmove(r->buf, r->p, rest);
        if (rest == r->cap) { /* a line longer than the window */
            unsigned char *b = realloc(r->buf, 2 * r->cap);
            if (!b) return tdc_error(-ENOMEM, "analytics: out of memory");
            r->buf = b;
            r->cap *= 2;
        }
        size_t want = r->cap - rest;
        if (want > r->end - r->off) want = (size_t)(r->end - r->off);
        int rc = fio_read_at(fd, r->buf + rest, want, r->off, "analytics merge");
        if (rc) return rc;
        r->off += want;
        r->n = rest + want;
        r->p = r->buf;
    }
}

typedef struct cruns {
    const crun *r;
    int kind;
} cruns;

/* The output order of two runs' current lines: sort by word; the others by count descending
 * (a count has no leading zero, so a longer one is larger), then by key. Runs share no key. */
static int crun_less(const void *ctx, size_t a, size_t b)
{
    const cruns *c = ctx;
    const crun *x = &c->r[a], *y = &c->r[b];
    size_t xn = field(x->p, x->nl), yn = field(y->p, y->nl);
    if (c->kind == ANA_SORT) return key_cmp(x->p, xn, y->p, yn) < 0;
    if (xn != yn) return xn > yn;
    int d = memcmp(x->p, y->p, xn);
    if (d) return d > 0;
    return key_cmp(x->p + xn + 1, (size_t)(x->nl - x->p) - xn - 1, y->p + yn + 1,
                   (size_t)(y->nl - y->p) - yn - 1) < 0;
}

/* Every bucket's run merged into sink in output order, each read through a window of
 * spill_at / SPILL_BUCKETS bytes (1 KiB at least; longer lines widen it). */
static int merge_runs(ana_merge *m, const chunk *run, ana_sink sink, void *sctx)
{
    crun r[SPILL_BUCKETS];
    size_t h[SPILL_BUCKETS];
    cruns cr = {r, m->kind};
    heap hp = {h, 0, crun_less, &cr};
    size_t cap = m->spill_at / SPILL_BUCKETS > 1024 ? (size_t)(m->spill_at / SPILL_BUCKETS) : 1024;
    int rc = 0;
    for (size_t b = 0; b < SPILL_BUCKETS; b++) {
        r[b] = (crun){.buf = rc ? NULL : malloc(cap), .cap = cap, .off = run[b].off,
                      .end = run[b].off + run[b].n};
        r[b].p = r[b].buf;
        if (!rc && !r[b].buf) rc = tdc_error(-ENOMEM, "analytics: out of memory");
        int more = rc ? 0 : crun_next(m->fd, &r[b]);
        if (more < 0) rc = more;
        if (more > 0) h[hp.n++] = b;
    }
    for (size_t i = hp.n; i-- > 0;)
        hdown(&hp, i);
    buf out = {0};
    while (!rc && hp.n) {
        crun *x = &r[hp.h[0]];
        if (buf_put(&out, x->p, (size_t)(x->nl + 1 - x->p))) {
            rc = tdc_error(-ENOMEM, "analytics: out of memory");
            break;
        }
        x->p = x->nl + 1;
        int more = crun_next(m->fd, x);
        if (more < 0) rc = more;
        if (more <= 0) hp.h[0] = hp.h[--hp.n];
        hdown(&hp, 0);
        if (!rc && (out.n >= PRINT_SLICE || !hp.n)) {
            rc = sink(sctx, out.p, out.n);
            out.n = 0;
        }
    }
    buf_free(&out);
    for (size_t b = 0; b < SPILL_BUCKETS; b++)
        free(r[b].buf);
    return rc;
}

/* A counts merge whose tables went to the spill file: the rest of them too, then each bucket
 * summed and printed alone on the merge's threads (a bucket's worth of memory each), then
 * the buckets' runs merged. */
static int finish_spilled(ana_merge *m, ana_sink sink, void *sctx)
{
    int rc = dump_tables(m, 1);
    bqueue q = {m, calloc(SPILL_BUCKETS, sizeof *q.run), 0, 0};
    if (!rc && !q.run) rc = tdc_error(-ENOMEM, "analytics: out of memory");
    if (!rc) par_run((unsigned)m->nt, bucket_main, &q, 0);
    if (!rc) rc = q.rc == -ENOMEM ? tdc_error(q.rc, "analytics: out of memory") : q.rc;
    if (!rc) rc = merge_runs(m, q.run, sink, sctx);
    free(q.run);
    return rc;
}

static int finish_counts(ana_merge *m, ana_sink sink, void *sctx)
{
    buf extra[MAXT];
    memset(extra, 0, sizeof extra);
    int rc = each_crossing(m, m->kind == ANA_SEQCOUNT ? cross_count : NULL, extra);
    if (!rc && m->kind == ANA_SEQCOUNT) rc = add_buckets(m, extra);
    for (int t = 0; t < MAXT; t++)
        buf_free(&extra[t]);
    pthread_mutex_lock(&m->lock);
    int spilled = m->spilled;
    pthread_mutex_unlock(&m->lock);
    if (!rc && spilled) return finish_spilled(m, sink, sctx);
    if (!rc) rc = print_tables(m->kind, m->sum, m->nt, m->nt > 1 ? 2 : 1, sink, sctx);
    return rc == -ENOMEM ? tdc_error(rc, "analytics: out of memory") : rc;
}

int ana_sink_buf(void *ctx, const unsigned char *p, size_t n)
{
    return buf_put(ctx, p, n) ? tdc_error(-ENOMEM, "analytics: out of memory") : 0;
}

int ana_merge_finish_to(ana_merge *m, ana_sink sink, void *ctx)
{
    return m->lists ? finish_lists(m, sink, ctx) : finish_counts(m, sink, ctx);
}

int ana_merge_finish(ana_merge *m, buf *out)
{
    return ana_merge_finish_to(m, ana_sink_buf, out);
}
