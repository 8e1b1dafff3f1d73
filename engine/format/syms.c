#include "syms.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"

#define FIRST 1 /* kind bits of a symbol: its first token is a word */
#define LAST 2  /* its last token is a word */

struct syms_kinds {
    uint32_t ntokens, nrules;
    unsigned char *kind; /* per symbol id (tokens, then T + 1 .. T + R): FIRST | LAST bits */
    uint32_t n[2];       /* symbols of each kind (0: separator first, 1: word first) */
    /* decoder: the symbols by place, kind 0's numbers first (place = number), then kind 1's
     * (place = n[0] + number) */
    uint32_t *mem;
    /* decoder: one bit per place: the kind expected after that symbol. Each decoded symbol's
     * kind decides where the next number is read, so this lookup is the decoder's critical
     * path; as bits it stays in the fastest caches. */
    uint64_t *after;
    uint32_t *num;       /* encoder: each symbol's number within its kind */
};

void syms_kinds_free(syms_kinds *k)
{
    if (!k) return;
    free(k->kind);
    free(k->mem);
    free(k->after);
    free(k->num);
    free(k);
}

/* ---------------- planes ---------------- */

/* Symbols as four byte planes (all low bytes, then all second bytes, ...): the high planes
 * are nearly constant and the low ones keep their patterns, which zstd models far better than
 * interleaved integers. */
static int put_planes(buf *b, const uint32_t *s, size_t n)
{
    if (buf_reserve(b, n * 4)) return -ENOMEM;
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < n; i++)
            b->p[b->n++] = (unsigned char)(s[i] >> (8 * k));
    return 0;
}

static int get_planes(rd *r, uint64_t n, vec32 *v, const char *what)
{
    const unsigned char *p;
    if (n > (uint64_t)(r->end - r->p) / 4 || rd_bytes(r, n * 4, &p))
        return tdc_error(-EBADMSG, "%s: symbol count too large", what);
    if (vec32_reserve(v, n)) return tdc_error(-ENOMEM, "%s: out of memory", what);
    for (uint64_t i = 0; i < n; i++)
        v->p[i] = (uint32_t)p[i] | (uint32_t)p[n + i] << 8 | (uint32_t)p[2 * n + i] << 16 |
                  (uint32_t)p[3 * n + i] << 24;
    v->n = n;
    return 0;
}

/* ---------------- kinds ---------------- */

static syms_kinds *kinds_new(uint32_t ntokens, uint32_t nrules)
{
    syms_kinds *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->ntokens = ntokens;
    k->nrules = nrules;
    if (!(k->kind = calloc((size_t)ntokens + nrules + 1, 1))) {
        free(k);
        return NULL;
    }
    return k;
}

static inline int first_kind(const syms_kinds *k, uint32_t s)
{
    return k->kind[s] & FIRST;
}

/* The kind the symbol after s is expected to have: the other one than s's last token's. */
static inline int next_kind(const syms_kinds *k, uint32_t s)
{
    return !(k->kind[s] & LAST);
}

/* Rule r's kinds as its body gives them: its first symbol's first kind, its last symbol's
 * last kind. */
static unsigned char body_kinds(const gram *g, const syms_kinds *k, uint32_t r)
{
    uint64_t n;
    const uint32_t *b = gram_body(g, r, &n);
    return (k->kind[b[0]] & FIRST) | (k->kind[b[n - 1]] & LAST);
}

/* Each token's kinds from its word flag (dict->word's layout): a word's first and last token
 * are itself. */
static void token_kinds(syms_kinds *k, const unsigned char *word)
{
    for (uint32_t t = 0; t < k->ntokens; t++)
        k->kind[t] = word[t] ? FIRST | LAST : 0;
}

/* Number the symbols of each kind: the kind's tokens in id order and its rules in number
 * order, merged so that the more used comes first; `bits` (one per number, 1 for a rule) gets
 * the merge, kind 0's numbers first. */
static int number_kinds(const gram *g, syms_kinds *k, buf *bits)
{
    uint32_t nt = g->ntokens, ns = nt + g->nrules + 1;
    uint64_t *cnt = calloc(ns, sizeof *cnt);
    if (!cnt || !(k->num = malloc((size_t)ns * sizeof *k->num))) {
        free(cnt);
        return -ENOMEM;
    }
    for (size_t i = 0; i < g->root.n; i++)
        cnt[g->root.p[i]]++;
    for (size_t i = 0; i < g->syms.n; i++)
        cnt[g->syms.p[i]]++;
    size_t nbits = 0, nbytes = ((size_t)nt + g->nrules + 7) / 8;
    if (buf_reserve(bits, nbytes)) {
        free(cnt);
        return -ENOMEM;
    }
    memset(bits->p + bits->n, 0, nbytes);
    for (int c = 0; c < 2; c++) {
        uint32_t t = 0, r = nt + 1, id = 0;
        for (;;) {
            while (t < nt && first_kind(k, t) != c)
                t++;
            while (r < ns && first_kind(k, r) != c)
                r++;
            if (t >= nt && r >= ns) break;
            int rule = t >= nt || (r < ns && cnt[r] > cnt[t]);
            if (rule) bits->p[bits->n + nbits / 8] |= (unsigned char)(1u << (nbits % 8));
            nbits++;
            k->num[rule ? r++ : t++] = id++;
        }
        k->n[c] = id;
    }
    bits->n += nbytes;
    free(cnt);
    return 0;
}

/* The coded numbers of a section being encoded, in two streams by the kind they are read in:
 * v[c] holds the numbers read where kind c is expected (an escape's number in the expected
 * kind's, the number after it in the other's). Separator-kind numbers are mostly small and go
 * to disk as varints; word-kind numbers spread wider and go as byte planes. */
typedef struct coded {
    vec32 v[2];
} coded;

static void coded_free(coded *c)
{
    vec32_free(&c->v[0]);
    vec32_free(&c->v[1]);
}

/* What put_coded wrote, read in place by the decoder: the separator-kind numbers as varints,
 * the word-kind ones as byte planes. Nothing is copied out before the kinds are known, so a
 * shard's load spends no pass and no memory on the numbers before decoding them. */
typedef struct streams {
    const unsigned char *p0, *e0; /* the separator-kind varints not read yet */
    uint64_t n0, got0;            /* numbers in that stream; read so far */
    const unsigned char *w;       /* the word-kind planes: n1 low bytes, n1 second bytes, ... */
    uint64_t n1, at1;             /* numbers in that stream; the next one */
} streams;

/* The next separator-kind number: 0, or -1 past the stream's end or for a bad varint. */
static inline int next_sep(const unsigned char **p, const unsigned char *e, uint32_t *x)
{
    if (*p < e && **p < 0x80) { /* most numbers: one byte */
        *x = *(*p)++;
        return 0;
    }
    rd r = {*p, e};
    uint64_t v;
    if (rd_varint(&r, &v) || v > UINT32_MAX) return -1;
    *p = r.p;
    *x = (uint32_t)v;
    return 0;
}

/* Word-kind number i of planes w of n numbers each. */
static inline uint32_t plane_at(const unsigned char *w, uint64_t n, uint64_t i)
{
    return (uint32_t)w[i] | (uint32_t)w[n + i] << 8 | (uint32_t)w[2 * n + i] << 16 |
           (uint32_t)w[3 * n + i] << 24;
}

/* Append the numbers that code body s[0..n) (first expected kind `want`) to c. */
static int code_body(const syms_kinds *k, const uint32_t *s, uint64_t n, int want, coded *c)
{
    if (vec32_reserve(&c->v[0], 2 * n) || vec32_reserve(&c->v[1], 2 * n)) return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        int have = first_kind(k, s[i]);
        if (have != want) c->v[want].p[c->v[want].n++] = k->n[want];
        c->v[have].p[c->v[have].n++] = k->num[s[i]];
        want = next_kind(k, s[i]);
    }
    return 0;
}

/* Decode n symbols of one body from streams c, first expected kind `want`. The hot loop of
 * a shard's load, in two passes: the first follows the chain of expected kinds (touching only
 * the small `after` bits) and leaves each symbol's place in out; the second looks the places
 * up, loads that do not depend on each other. The first pass keeps each stream's position in
 * a register of its own and branches on the kind, so the processor can run ahead on its guess
 * of the next kind instead of waiting for each symbol's bit. */
static int decode_body(const syms_kinds *k, streams *c, uint32_t *out, uint64_t n, int want,
                       const char *what)
{
    const unsigned char *p0 = c->p0, *e0 = c->e0, *w = c->w;
    const uint32_t size0 = k->n[0], size1 = k->n[1];
    const uint64_t *after = k->after, n1 = c->n1;
    uint64_t got0 = c->got0, i1 = c->at1;
    const char *bad = NULL;
    uint64_t j = 0;
    for (; j < n; j++) {
        uint32_t place, x;
        if (!want) {
            if (next_sep(&p0, e0, &x)) goto bad_sep;
            got0++;
            if (x < size0) {
                place = x;
            } else {
                if (x != size0) goto out_of_range;
                if (i1 == n1) goto no_escaped;
                if ((x = plane_at(w, n1, i1++)) >= size1) goto out_of_range;
                place = size0 + x;
            }
        } else {
            if (i1 == n1) goto short_streams;
            x = plane_at(w, n1, i1++);
            if (x < size1) {
                place = size0 + x;
            } else {
                if (x != size1) goto out_of_range;
                if (next_sep(&p0, e0, &x)) goto bad_sep;
                got0++;
                if (x >= size0) goto out_of_range;
                place = x;
            }
        }
        out[j] = place;
        want = (int)(after[place / 64] >> (place % 64) & 1);
    }
    goto done;
bad_sep:
    bad = p0 == e0 ? "fewer coded symbols than symbols" : "bad separator-kind numbers";
    goto done;
short_streams:
    bad = "fewer coded symbols than symbols";
    goto done;
no_escaped:
    bad = "nothing follows an escape";
    goto done;
out_of_range:
    bad = "symbol number out of range";
done:
    c->p0 = p0;
    c->got0 = got0;
    c->at1 = i1;
    if (!bad && got0 > c->n0) bad = "fewer coded symbols than symbols";
    if (bad) return tdc_error(-EBADMSG, "%s: %s", what, bad);
    const uint32_t *mem = k->mem;
    for (j = 0; j < n; j++)
        out[j] = mem[out[j]];
    return 0;
}

/* The members of each kind from the stored bits (kind 0's numbers, then kind 1's; a set bit
 * is the kind's next rule, a clear one its next token); every token and rule must be used
 * exactly once and the padding bits must be clear. */
static int read_members(syms_kinds *k, const unsigned char *bits)
{
    uint32_t nt = k->ntokens, ns = nt + k->nrules + 1;
    size_t nbits = 0, nplaces = (size_t)ns - 1;
    k->n[0] = 0;
    for (uint32_t s = 0; s < ns; s++)
        k->n[0] += s != nt && first_kind(k, s) == 0;
    k->n[1] = (uint32_t)(nplaces - k->n[0]);
    if (!(k->mem = malloc((nplaces ? nplaces : 1) * sizeof *k->mem)) ||
        !(k->after = calloc(nplaces / 64 + 1, sizeof *k->after)))
        return -ENOMEM;
    mem_populate(k->mem, nplaces * sizeof *k->mem);
    for (int c = 0; c < 2; c++) {
        uint32_t cnt = k->n[c], t = 0, r = nt + 1;
        for (uint32_t i = 0; i < cnt; i++, nbits++) {
            int rule = bits[nbits / 8] >> (nbits % 8) & 1;
            uint32_t *cur = rule ? &r : &t, end = rule ? ns : nt;
            while (*cur < end && first_kind(k, *cur) != c)
                (*cur)++;
            if (*cur >= end)
                return tdc_error(-EBADMSG, "rules: kind %d lists more %s than it has", c,
                                 rule ? "rules" : "tokens");
            k->after[nbits / 64] |= (uint64_t)next_kind(k, *cur) << (nbits % 64);
            k->mem[nbits] = (*cur)++;
        }
    }
    for (; nbits % 8; nbits++)
        if (bits[nbits / 8] >> (nbits % 8) & 1)
            return tdc_error(-EBADMSG, "rules: padding bits of the kind lists are set");
    return 0;
}

/* Every rule's stored kinds are those of its body's first and last symbols (so, rule by rule,
 * those of its first and last tokens). */
static int check_kinds(const gram *g, const syms_kinds *k)
{
    for (uint32_t r = 1; r <= g->nrules; r++)
        if (k->kind[g->ntokens + r] != body_kinds(g, k, r))
            return tdc_error(-EBADMSG, "rules: the kinds stored for rule %u are not its body's", r);
    return 0;
}

/* ---------------- encoding ---------------- */

static int put_lengths(const gram *g, buf *b)
{
    if (buf_put_varint(b, g->nrules)) return -ENOMEM;
    for (uint32_t r = 1; r <= g->nrules; r++)
        if (buf_put_varint(b, g->rule_start.p[r] - g->rule_start.p[r - 1])) return -ENOMEM;
    return 0;
}

/* The kinds of g's symbols (each rule's from its body, children first) and their numbers,
 * appended to out as the rules section's kinds and member bits. A grammar with a symbol that
 * is neither a token nor a rule, or with a cycle, has no kind layout: gram_order's and
 * gram_check_root's -EBADMSG. */
static int kinds_build(const gram *g, const dict *d, buf *out, syms_kinds **kp)
{
    vec32 order = {0};
    int rc = gram_check_root(g);
    if (!rc) rc = gram_order(g, &order);
    syms_kinds *k = rc ? NULL : kinds_new(g->ntokens, g->nrules);
    if (!rc && !k) rc = -ENOMEM;
    if (!rc) {
        token_kinds(k, d->word.p);
        for (size_t i = 0; i < order.n; i++) /* children first: their kinds are known */
            k->kind[g->ntokens + order.p[i]] = body_kinds(g, k, order.p[i]);
        rc = buf_put(out, k->kind + g->ntokens + 1, g->nrules);
    }
    if (!rc) rc = number_kinds(g, k, out);
    vec32_free(&order);
    if (rc) {
        syms_kinds_free(k);
        return rc;
    }
    *kp = k;
    return 0;
}

/* The two streams: varint V0, varint B0, the V0 separator-kind numbers as B0 bytes of
 * varints, varint V1, the V1 word-kind numbers as byte planes. */
static int put_coded(buf *out, const coded *c)
{
    buf vb = {0};
    int rc = 0;
    for (size_t i = 0; i < c->v[0].n && !rc; i++)
        rc = buf_put_varint(&vb, c->v[0].p[i]);
    if (!rc) rc = buf_put_varint(out, c->v[0].n);
    if (!rc) rc = buf_put_varint(out, vb.n);
    if (!rc) rc = buf_put(out, vb.p, vb.n);
    if (!rc) rc = buf_put_varint(out, c->v[1].n);
    if (!rc) rc = put_planes(out, c->v[1].p, c->v[1].n);
    buf_free(&vb);
    return rc ? -ENOMEM : 0;
}

int syms_enc_rules(const gram *g, const dict *d, int kinded, buf *out, syms_kinds **kp)
{
    *kp = NULL;
    if (put_lengths(g, out)) return -ENOMEM;
    if (!kinded) return put_planes(out, g->syms.p, g->syms.n);
    syms_kinds *k;
    int rc = kinds_build(g, d, out, &k);
    if (rc) return rc;
    coded c = {0};
    for (uint32_t r = 1; r <= g->nrules && !rc; r++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        rc = code_body(k, b, n, first_kind(k, g->ntokens + r), &c);
    }
    if (!rc) rc = put_coded(out, &c);
    coded_free(&c);
    if (rc) {
        syms_kinds_free(k);
        return rc;
    }
    *kp = k;
    return 0;
}

int syms_enc_root(const gram *g, const syms_kinds *k, buf *out)
{
    if (buf_put_varint(out, g->root.n)) return -ENOMEM;
    if (!k) return put_planes(out, g->root.p, g->root.n);
    coded c = {0};
    int rc = code_body(k, g->root.p, g->root.n, 1, &c);
    if (!rc) rc = put_coded(out, &c);
    coded_free(&c);
    return rc;
}

/* ---------------- decoding ---------------- */

/* The streams put_coded wrote, for bodies of nsyms symbols in all (at least one number per
 * symbol and at most two), left in place at r. */
static int get_streams(rd *r, uint64_t nsyms, streams *c, const char *what)
{
    uint64_t b0;
    const unsigned char *p;
    memset(c, 0, sizeof *c);
    if (rd_varint(r, &c->n0) || rd_varint(r, &b0) || c->n0 > b0 || rd_bytes(r, b0, &p))
        return tdc_error(-EBADMSG, "%s: bad separator-kind numbers", what);
    c->p0 = p;
    c->e0 = p + b0;
    if (rd_varint(r, &c->n1) || c->n1 > (uint64_t)(r->end - r->p) / 4 ||
        rd_bytes(r, c->n1 * 4, &c->w))
        return tdc_error(-EBADMSG, "%s: bad coded symbol count", what);
    if (c->n0 + c->n1 < nsyms || c->n0 + c->n1 - nsyms > nsyms)
        return tdc_error(-EBADMSG, "%s: bad coded symbol count", what);
    return 0;
}

/* Every number of both streams was used. */
static int streams_used(const streams *c, const char *what)
{
    if (c->p0 != c->e0 || c->got0 != c->n0 || c->at1 != c->n1)
        return tdc_error(-EBADMSG, "%s: more coded symbols than symbols", what);
    return 0;
}

static int dec_kinded(gram *g, const unsigned char *words, rd *r, syms_kinds **kp,
                      void (*known)(void *ctx, const syms_kinds *k), void *ctx)
{
    syms_kinds *k = *kp = kinds_new(g->ntokens, g->nrules);
    if (!k) return tdc_error(-ENOMEM, "rules: out of memory");
    const unsigned char *kb, *bits;
    size_t nbytes = ((size_t)g->ntokens + g->nrules + 7) / 8;
    int rc = 0;
    if (rd_bytes(r, g->nrules, &kb) || rd_bytes(r, nbytes, &bits))
        rc = tdc_error(-EBADMSG, "rules: kinds cut short");
    if (!rc) token_kinds(k, words);
    for (uint32_t i = 0; i < g->nrules && !rc; i++) {
        if (kb[i] > (FIRST | LAST)) rc = tdc_error(-EBADMSG, "rules: bad kinds of rule %u", i + 1);
        k->kind[g->ntokens + 1 + i] = kb[i];
    }
    if (!rc) rc = read_members(k, bits);
    if (rc == -ENOMEM) rc = tdc_error(rc, "rules: out of memory");
    if (!rc && known) known(ctx, k);
    streams c;
    if (!rc) rc = get_streams(r, g->rule_start.p[g->nrules], &c, "rules");
    if (!rc && vec32_reserve(&g->syms, g->rule_start.p[g->nrules]))
        rc = tdc_error(-ENOMEM, "rules: out of memory");
    if (!rc) mem_populate(g->syms.p, g->rule_start.p[g->nrules] * sizeof *g->syms.p);
    for (uint32_t i = 1; i <= g->nrules && !rc; i++) {
        uint64_t n = g->rule_start.p[i] - g->rule_start.p[i - 1];
        rc = decode_body(k, &c, g->syms.p + g->rule_start.p[i - 1], n,
                         first_kind(k, g->ntokens + i), "rules");
    }
    if (!rc) g->syms.n = g->rule_start.p[g->nrules];
    if (!rc) rc = streams_used(&c, "rules");
    if (!rc) rc = check_kinds(g, k);
    return rc;
}

int syms_dec_rules(gram *g, const unsigned char *words, const unsigned char *p, size_t n,
                   syms_kinds **kp, void (*known)(void *ctx, const syms_kinds *k), void *ctx)
{
    *kp = NULL;
    rd r = {p, p + n};
    uint64_t nr;
    if (rd_varint(&r, &nr) || nr > n || nr + g->ntokens + 1 > 0xffffffffu)
        return tdc_error(-EBADMSG, "rules: bad rule count");
    g->nrules = (uint32_t)nr;
    if (vec64_reserve(&g->rule_start, nr + 1)) return tdc_error(-ENOMEM, "rules: out of memory");
    mem_populate(g->rule_start.p, (nr + 1) * sizeof *g->rule_start.p);
    g->rule_start.p[g->rule_start.n++] = 0;
    for (uint64_t i = 0; i < nr; i++) {
        uint64_t len;
        if (rd_varint(&r, &len) || len == 0 || len > n)
            return tdc_error(-EBADMSG, "rules: bad length of rule %llu", (unsigned long long)i + 1);
        g->rule_start.p[g->rule_start.n] = g->rule_start.p[g->rule_start.n - 1] + len;
        g->rule_start.n++;
    }
    int rc = words ? dec_kinded(g, words, &r, kp, known, ctx)
               : get_planes(&r, g->rule_start.p[nr], &g->syms, "rules");
    if (!rc && r.p != r.end) rc = tdc_error(-EBADMSG, "rules: trailing bytes");
    if (!rc) rc = gram_topo(g);
    return rc;
}

int syms_dec_root(gram *g, const syms_kinds *k, const unsigned char *p, size_t n)
{
    rd r = {p, p + n};
    uint64_t cnt;
    streams c;
    vec32 plain = {0};
    int rc = rd_varint(&r, &cnt) ? tdc_error(-EBADMSG, "root: bad symbol count")
             : k                 ? get_streams(&r, cnt, &c, "root")
                                 : get_planes(&r, cnt, &plain, "root");
    if (!rc && r.p != r.end) rc = tdc_error(-EBADMSG, "root: trailing bytes");
    if (!rc && !k) {
        vec32_free(&g->root);
        g->root = plain;
        return 0;
    }
    vec32_free(&plain);
    if (!rc && vec32_reserve(&g->root, cnt)) rc = tdc_error(-ENOMEM, "root: out of memory");
    if (rc) return rc;
    mem_populate(g->root.p, cnt * sizeof *g->root.p);
    rc = decode_body(k, &c, g->root.p, cnt, 1, "root");
    if (!rc) g->root.n = cnt;
    return rc ? rc : streams_used(&c, "root");
}
