/* ana_sort: words in byte order without comparison sorting, and the output of word counts.
 *
 * Word records are sorted by an MSD radix sort: one counting pass on the first two bytes
 * (taken from the records' 8-byte prefix keys, no pointer chasing), then each of those
 * buckets, independently (two threads take about half the records each), byte by byte, with
 * an insertion sort for groups of 32 or fewer. The 8-byte keys are reloaded from the words
 * every 8 bytes of depth, so a group is read from the words once per 8 bytes, not per byte.
 * Words hold no NUL byte, so the zero padding of the keys marks a word's end and sorts it
 * before its extensions. */
#include <stdlib.h>
#include <string.h>

#include "ana_int.h"
#include "../base/err.h"

uint64_t ana_prefix_key(const unsigned char *w, size_t n)
{
    uint64_t k = 0;
    for (size_t i = 0; i < 8; i++)
        k = k << 8 | (i < n ? w[i] : 0);
    return k;
}

int ana_wrec_cmp(const ana_wrec *a, const ana_wrec *b)
{
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    /* equal keys: the first 8 bytes agree, and a word of 8 bytes or fewer is a prefix */
    if (a->n > 8 && b->n > 8) {
        int c = memcmp(a->w + 8, b->w + 8, (a->n < b->n ? a->n : b->n) - 8);
        if (c) return c;
    }
    return (a->n > b->n) - (a->n < b->n);
}

/* Byte order of a and b, which share their first `from` bytes (a multiple of 8) and whose keys
 * hold their next 8. */
static int cmp_from(const ana_wrec *a, const ana_wrec *b, size_t from)
{
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    size_t m = (a->n < b->n ? a->n : b->n);
    if (m > from + 8) {
        int c = memcmp(a->w + from + 8, b->w + from + 8, m - from - 8);
        if (c) return c;
    }
    return (a->n > b->n) - (a->n < b->n);
}

/* r[0..n) share their first d bytes, and their keys hold bytes [d & ~7, (d & ~7) + 8) (zero
 * past the end); tmp is scratch of the same size. Keys are left changed. */
static void msd(ana_wrec *r, ana_wrec *tmp, size_t n, size_t d)
{
    for (;;) {
        if (d && d % 8 == 0) /* the keys are used up: load the next 8 bytes */
            for (size_t i = 0; i < n; i++)
                r[i].key = r[i].n > d ? ana_prefix_key(r[i].w + d, r[i].n - d) : 0;
        if (n <= 32) break;
        unsigned sh = 56 - 8 * (unsigned)(d % 8);
        size_t cnt[256] = {0};
        for (size_t i = 0; i < n; i++)
            cnt[r[i].key >> sh & 255]++;
        if (cnt[0] == n) return; /* only equal words left (never, for distinct words) */
        if (cnt[r[0].key >> sh & 255] == n) {
            d++;
            continue;
        }
        size_t at[256], s = 0;
        for (unsigned b = 0; b < 256; b++) {
            at[b] = s;
            s += cnt[b];
        }
        for (size_t i = 0; i < n; i++)
            tmp[at[r[i].key >> sh & 255]++] = r[i];
        memcpy(r, tmp, n * sizeof *r);
        /* bucket 0 holds at most the one word that ends here */
        s = cnt[0];
        for (unsigned b = 1; b < 256; b++) {
            if (cnt[b] > 1) msd(r + s, tmp + s, cnt[b], d + 1);
            s += cnt[b];
        }
        return;
    }
    size_t from = d & ~(size_t)7;
    for (size_t i = 1; i < n; i++) {
        ana_wrec x = r[i];
        size_t j = i;
        while (j > 0 && cmp_from(&x, &r[j - 1], from) < 0) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = x;
    }
}

typedef struct sjob {
    ana_wrec *r, *tmp;
    const uint32_t *at; /* 65537 bucket starts */
    unsigned split;     /* thread 0 sorts buckets [0, split), thread 1 the rest */
} sjob;

static int sort_task(void *x, const ana_team *t)
{
    const sjob *j = x;
    unsigned lo = t->n == 1 || t->tid == 0 ? 0 : j->split;
    unsigned hi = t->n == 1 || t->tid == 1 ? 65536 : j->split;
    for (unsigned b = lo; b < hi; b++) {
        size_t s = j->at[b], n = j->at[b + 1] - s;
        if (n > 1) msd(j->r + s, j->tmp + s, n, 2);
    }
    return 0;
}

int ana_sort_words(ana_wrec *r, size_t n, int threads)
{
    if (n <= 32) {
        msd(r, NULL, n, 0);
        return 0;
    }
    ana_wrec *tmp = malloc(n * sizeof *tmp);
    uint32_t *at = calloc(65537, sizeof *at);
    if (!tmp || !at) {
        free(tmp);
        free(at);
        return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        at[(r[i].key >> 48) + 1]++;
    unsigned split = 0;
    for (unsigned b = 0; b < 65536; b++) {
        at[b + 1] += at[b];
        if (at[b + 1] <= n / 2) split = b + 1;
    }
    for (size_t i = 0; i < n; i++)
        tmp[at[r[i].key >> 48]++] = r[i];
    /* the scatter moved each start to the next bucket's: shift them back */
    memmove(at + 1, at, 65536 * sizeof *at);
    at[0] = 0;
    memcpy(r, tmp, n * sizeof *r);
    sjob j = {r, tmp, at, split};
    ana_par(threads > 1 && n >= 65536 ? 2 : 1, sort_task, &j);
    free(tmp);
    free(at);
    return 0;
}

/* ---- word count output ---- */

static int by_count_word(const void *x, const void *y, void *ctx)
{
    const ana_crec *a = x, *b = y;
    (void)ctx;
    if (a->cnt != b->cnt) return a->cnt < b->cnt ? 1 : -1;
    int c = memcmp(a->w, b->w, a->n < b->n ? a->n : b->n);
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

#define SMALL 65536 /* counts below this are placed by a counting sort */

int ana_by_count(ana_crec *r, size_t n)
{
    /* the counting sort's table spans the small counts present, not all of them: most
     * tables (a bucket of a merge, a small scope's) hold few records of low counts */
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].cnt < SMALL && r[i].cnt > top) top = r[i].cnt;
    ana_crec *o = malloc((n ? n : 1) * sizeof *o);
    size_t *at = calloc(top + 1, sizeof *at);
    if (!o || !at) {
        free(o);
        free(at);
        return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    size_t big = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].cnt < SMALL)
            at[r[i].cnt]++;
        else
            o[big++] = r[i];
    }
    /* the few large counts by comparison, first; then the small ones, stably, from the
     * largest count down */
    sort_r(o, big, sizeof *o, by_count_word, NULL);
    size_t s = big;
    for (size_t c = top + 1; c-- > 0;) {
        size_t k = at[c];
        at[c] = s;
        s += k;
    }
    for (size_t i = 0; i < n; i++)
        if (r[i].cnt < SMALL) o[at[r[i].cnt]++] = r[i];
    memcpy(r, o, n * sizeof *r);
    free(o);
    free(at);
    return 0;
}

static char *put_dec(char *o, uint64_t v, size_t d)
{
    char *e = o + d;
    do {
        *--e = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return o + d;
}

typedef struct pjob {
    const ana_crec *r;
    size_t n, mid;
    int count_first;
    unsigned char *dst[2]; /* where records [0, mid) and [mid, n) go */
} pjob;

static int print_task(void *x, const ana_team *t)
{
    const pjob *j = x;
    size_t lo = t->n == 1 || t->tid == 0 ? 0 : j->mid;
    size_t hi = t->n == 1 || t->tid == 1 ? j->n : j->mid;
    char *o = (char *)j->dst[t->n == 1 ? 0 : t->tid];
    for (size_t i = lo; i < hi; i++) {
        const ana_crec *e = &j->r[i];
        if (i + 16 < hi) __builtin_prefetch(j->r[i + 16].w); /* words lie all over the dictionary */
        size_t d = ana_num_len(e->cnt);
        if (j->count_first) {
            o = put_dec(o, e->cnt, d);
            *o++ = '\t';
            memcpy(o, e->w, e->n);
            o += e->n;
        } else {
            memcpy(o, e->w, e->n);
            o += e->n;
            *o++ = '\t';
            o = put_dec(o, e->cnt, d);
        }
        *o++ = '\n';
    }
    return 0;
}

int ana_print_counts(const ana_crec *r, size_t n, int count_first, buf *out, int threads)
{
    size_t mid = n / 2, total = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == mid) first = total;
        total += ana_num_len(r[i].cnt) + r[i].n + 2;
    }
    if (buf_reserve(out, total)) return tdc_error(-ENOMEM, "analytics: out of memory");
    unsigned char *o = out->p + out->n;
    pjob j = {r, n, mid, count_first, {o, o + first}};
    ana_par(threads > 1 && n >= 65536 ? 2 : 1, print_task, &j);
    out->n += total;
    return 0;
}
