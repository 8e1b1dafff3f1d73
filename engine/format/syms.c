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
    uint32_t *mem[2];    /* decoder: the symbols of each kind, by number */
    uint32_t *num;       /* encoder: each symbol's number within its kind */
};

void syms_kinds_free(syms_kinds *k)
{
    if (!k) return;
    free(k->kind);
    free(k->mem[0]);
    free(k->mem[1]);
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

/* k->kind of every rule from its body: `bit` FIRST follows each body's first symbol down to a
 * token, LAST its last; a chain of rules not yet known is walked once and then filled in. */
static int rule_kinds(const gram *g, syms_kinds *k, unsigned char bit)
{
    uint32_t nt = g->ntokens;
    unsigned char *known = calloc((size_t)nt + g->nrules + 1, 1);
    vec32 path = {0};
    int rc = known ? 0 : -ENOMEM;
    for (uint32_t t = 0; t < nt && !rc; t++)
        known[t] = 1;
    for (uint32_t r = 1; r <= g->nrules && !rc; r++) {
        uint32_t s = nt + r;
        path.n = 0;
        while (!known[s]) {
            if ((rc = vec32_push(&path, s))) break;
            known[s] = 2; /* on the path: a cycle would come back here */
            uint64_t n;
            const uint32_t *b = gram_body(g, s - nt, &n);
            s = b[bit == FIRST ? 0 : n - 1];
            if (known[s] == 2) rc = tdc_error(-EBADMSG, "rules: cycle through rule %u", s - nt);
        }
        for (size_t i = 0; i < path.n && !rc; i++) {
            k->kind[path.p[i]] |= k->kind[s] & bit;
            known[path.p[i]] = 1;
        }
    }
    free(known);
    vec32_free(&path);
    return rc;
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

/* Append the numbers that code body s[0..n) (first expected kind `want`) to out. */
static int code_body(const syms_kinds *k, const uint32_t *s, uint64_t n, int want, vec32 *out)
{
    if (vec32_reserve(out, 2 * n)) return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        if (first_kind(k, s[i]) != want) out->p[out->n++] = k->n[want];
        out->p[out->n++] = k->num[s[i]];
        want = next_kind(k, s[i]);
    }
    return 0;
}

/* Decode n symbols of one body from the numbers v[*at ..], first expected kind `want`. */
static int decode_body(const syms_kinds *k, const vec32 *v, size_t *at, uint32_t *out, uint64_t n,
                       int want, const char *what)
{
    size_t i = *at;
    for (uint64_t j = 0; j < n; j++) {
        if (i >= v->n) return tdc_error(-EBADMSG, "%s: fewer coded symbols than symbols", what);
        uint32_t x = v->p[i++];
        int c = want;
        if (x == k->n[c]) {
            c = !c;
            if (i >= v->n) return tdc_error(-EBADMSG, "%s: escape at the end", what);
            x = v->p[i++];
        }
        if (x >= k->n[c]) return tdc_error(-EBADMSG, "%s: symbol number out of range", what);
        out[j] = k->mem[c][x];
        want = next_kind(k, out[j]);
    }
    *at = i;
    return 0;
}

/* The members of each kind from the stored bits (kind 0's numbers, then kind 1's; a set bit
 * is the kind's next rule, a clear one its next token); every token and rule must be used
 * exactly once and the padding bits must be clear. */
static int read_members(syms_kinds *k, const unsigned char *bits)
{
    uint32_t nt = k->ntokens, ns = nt + k->nrules + 1;
    size_t nbits = 0;
    for (int c = 0; c < 2; c++) {
        uint32_t cnt = 0;
        for (uint32_t s = 0; s < ns; s++)
            cnt += s != nt && first_kind(k, s) == c;
        k->n[c] = cnt;
        if (!(k->mem[c] = malloc((size_t)(cnt ? cnt : 1) * sizeof *k->mem[c]))) return -ENOMEM;
        uint32_t t = 0, r = nt + 1;
        for (uint32_t i = 0; i < cnt; i++, nbits++) {
            int rule = bits[nbits / 8] >> (nbits % 8) & 1;
            uint32_t *cur = rule ? &r : &t, end = rule ? ns : nt;
            while (*cur < end && first_kind(k, *cur) != c)
                (*cur)++;
            if (*cur >= end)
                return tdc_error(-EBADMSG, "rules: kind %d lists more %s than it has", c,
                                 rule ? "rules" : "tokens");
            k->mem[c][i] = (*cur)++;
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
    for (uint32_t r = 1; r <= g->nrules; r++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        unsigned char want = (k->kind[b[0]] & FIRST) | (k->kind[b[n - 1]] & LAST);
        if (k->kind[g->ntokens + r] != want)
            return tdc_error(-EBADMSG, "rules: the kinds stored for rule %u are not its body's", r);
    }
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

static int kinds_build(const gram *g, const dict *d, buf *out, syms_kinds **kp)
{
    syms_kinds *k = kinds_new(g->ntokens, g->nrules);
    if (!k) return -ENOMEM;
    for (uint32_t t = 0; t < g->ntokens; t++)
        k->kind[t] = dict_is_word(d, t) ? FIRST | LAST : 0;
    int rc = rule_kinds(g, k, FIRST);
    if (!rc) rc = rule_kinds(g, k, LAST);
    if (!rc) rc = buf_put(out, k->kind + g->ntokens + 1, g->nrules);
    if (!rc) rc = number_kinds(g, k, out);
    if (rc) {
        syms_kinds_free(k);
        return rc;
    }
    *kp = k;
    return 0;
}

int syms_enc_rules(const gram *g, const dict *d, int kinded, buf *out, syms_kinds **kp)
{
    *kp = NULL;
    if (put_lengths(g, out)) return -ENOMEM;
    if (!kinded) return put_planes(out, g->syms.p, g->syms.n);
    syms_kinds *k;
    int rc = kinds_build(g, d, out, &k);
    if (rc) return rc;
    vec32 v = {0};
    for (uint32_t r = 1; r <= g->nrules && !rc; r++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        rc = code_body(k, b, n, first_kind(k, g->ntokens + r), &v);
    }
    if (!rc) rc = buf_put_varint(out, v.n);
    if (!rc) rc = put_planes(out, v.p, v.n);
    vec32_free(&v);
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
    vec32 v = {0};
    int rc = code_body(k, g->root.p, g->root.n, 1, &v);
    if (!rc) rc = buf_put_varint(out, v.n);
    if (!rc) rc = put_planes(out, v.p, v.n);
    vec32_free(&v);
    return rc;
}

/* ---------------- decoding ---------------- */

/* The number of coded symbols (at least one per symbol, at most two) and the numbers. */
static int get_coded(rd *r, uint64_t nsyms, vec32 *v, const char *what)
{
    uint64_t nv;
    if (rd_varint(r, &nv) || nv < nsyms || nv - nsyms > nsyms)
        return tdc_error(-EBADMSG, "%s: bad coded symbol count", what);
    return get_planes(r, nv, v, what);
}

static int dec_kinded(gram *g, const dict *d, rd *r, syms_kinds **kp)
{
    syms_kinds *k = kinds_new(g->ntokens, g->nrules);
    if (!k) return tdc_error(-ENOMEM, "rules: out of memory");
    const unsigned char *kb, *bits;
    size_t nbytes = ((size_t)g->ntokens + g->nrules + 7) / 8;
    int rc = 0;
    if (rd_bytes(r, g->nrules, &kb) || rd_bytes(r, nbytes, &bits))
        rc = tdc_error(-EBADMSG, "rules: kinds cut short");
    for (uint32_t t = 0; t < g->ntokens && !rc; t++)
        k->kind[t] = dict_is_word(d, t) ? FIRST | LAST : 0;
    for (uint32_t i = 0; i < g->nrules && !rc; i++) {
        if (kb[i] > (FIRST | LAST)) rc = tdc_error(-EBADMSG, "rules: bad kinds of rule %u", i + 1);
        k->kind[g->ntokens + 1 + i] = kb[i];
    }
    if (!rc) rc = read_members(k, bits);
    if (rc == -ENOMEM) rc = tdc_error(rc, "rules: out of memory");
    vec32 v = {0};
    if (!rc) rc = get_coded(r, g->rule_start.p[g->nrules], &v, "rules");
    if (!rc && vec32_reserve(&g->syms, g->rule_start.p[g->nrules]))
        rc = tdc_error(-ENOMEM, "rules: out of memory");
    size_t at = 0;
    for (uint32_t i = 1; i <= g->nrules && !rc; i++) {
        uint64_t n = g->rule_start.p[i] - g->rule_start.p[i - 1];
        rc = decode_body(k, &v, &at, g->syms.p + g->rule_start.p[i - 1], n,
                         first_kind(k, g->ntokens + i), "rules");
    }
    if (!rc) g->syms.n = g->rule_start.p[g->nrules];
    if (!rc && at != v.n) rc = tdc_error(-EBADMSG, "rules: more coded symbols than symbols");
    if (!rc) rc = check_kinds(g, k);
    vec32_free(&v);
    if (rc) {
        syms_kinds_free(k);
        return rc;
    }
    *kp = k;
    return 0;
}

int syms_dec_rules(gram *g, const dict *d, const unsigned char *p, size_t n, syms_kinds **kp)
{
    *kp = NULL;
    rd r = {p, p + n};
    uint64_t nr;
    if (rd_varint(&r, &nr) || nr > n || nr + g->ntokens + 1 > 0xffffffffu)
        return tdc_error(-EBADMSG, "rules: bad rule count");
    g->nrules = (uint32_t)nr;
    if (vec64_reserve(&g->rule_start, nr + 1)) return tdc_error(-ENOMEM, "rules: out of memory");
    g->rule_start.p[g->rule_start.n++] = 0;
    for (uint64_t i = 0; i < nr; i++) {
        uint64_t len;
        if (rd_varint(&r, &len) || len == 0 || len > n)
            return tdc_error(-EBADMSG, "rules: bad length of rule %llu", (unsigned long long)i + 1);
        g->rule_start.p[g->rule_start.n] = g->rule_start.p[g->rule_start.n - 1] + len;
        g->rule_start.n++;
    }
    int rc = d ? dec_kinded(g, d, &r, kp) : get_planes(&r, g->rule_start.p[nr], &g->syms, "rules");
    if (!rc && r.p != r.end) rc = tdc_error(-EBADMSG, "rules: trailing bytes");
    if (!rc) rc = gram_topo(g);
    if (rc) {
        syms_kinds_free(*kp);
        *kp = NULL;
    }
    return rc;
}

int syms_dec_root(gram *g, const syms_kinds *k, const unsigned char *p, size_t n)
{
    rd r = {p, p + n};
    uint64_t cnt;
    if (rd_varint(&r, &cnt)) return tdc_error(-EBADMSG, "root: bad symbol count");
    int rc;
    if (!k) {
        rc = get_planes(&r, cnt, &g->root, "root");
    } else {
        vec32 v = {0};
        size_t at = 0;
        rc = get_coded(&r, cnt, &v, "root");
        if (!rc && vec32_reserve(&g->root, cnt)) rc = tdc_error(-ENOMEM, "root: out of memory");
        if (!rc) rc = decode_body(k, &v, &at, g->root.p, cnt, 1, "root");
        if (!rc) g->root.n = cnt;
        if (!rc && at != v.n) rc = tdc_error(-EBADMSG, "root: more coded symbols than symbols");
        vec32_free(&v);
    }
    if (!rc && r.p != r.end) rc = tdc_error(-EBADMSG, "root: trailing bytes");
    return rc;
}
