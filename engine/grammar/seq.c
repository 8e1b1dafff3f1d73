/* Sequitur on arrays. Node 0 is NIL. Each rule is a circular list through a guard node.
 * Node values: a token (< 2^31), SEQ_RULE | rule (a nonterminal), GUARD | rule (a guard), or
 * BAR (a file barrier). The digram table maps a pair of values to the node starting its
 * indexed occurrence; it uses linear probing with backward-shift deletion (no tombstones).
 * The control flow mirrors the reference implementation (classes.cc), including its handling
 * of overlapping triples, so the grammars are the ones Sequitur is known to produce. */
#include "seq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"

#define GUARD 0xc0000000u
#define BAR SEQ_BARRIER
#define RULE_MAX 0x3ffffffeu

struct slot {
    uint64_t key;
    uint32_t node; /* 0 = empty */
    uint32_t pad;
};

struct seq {
    uint32_t *nx, *pv, *val;
    size_t nnodes, ncap;
    uint32_t freenode;     /* free list through nx */
    uint32_t *guard, *cnt; /* per rule */
    size_t nrules, rcap;
    uint32_t freerule; /* free list through cnt, 0 = none (rule 0 is the root, never freed) */
    struct slot *tab;  /* key and node side by side: one cache miss per probe */
    size_t tcap, tused;
    int tshift;
    int err; /* sticky -ENOMEM / -EOVERFLOW from deep inside the recursion */
};

static inline int is_guard(const seq *s, uint32_t n)
{
    return (s->val[n] & GUARD) == GUARD && s->val[n] != BAR;
}
static inline int is_nt(const seq *s, uint32_t n)
{
    return (s->val[n] & GUARD) == SEQ_RULE;
}
/* Guards and barriers never take part in digrams. */
static inline int no_digram(const seq *s, uint32_t n)
{
    return (s->val[n] & GUARD) == GUARD;
}
static inline uint32_t rule_of(const seq *s, uint32_t n)
{
    return s->val[n] & ~GUARD;
}

/* ---- digram table ---- */

static inline uint64_t dkey(const seq *s, uint32_t n)
{
    return (uint64_t)s->val[n] << 32 | s->val[s->nx[n]];
}
/* Fibonacci hashing: the top bits of a multiplication mix both symbols well. */
static inline size_t dhash(uint64_t k, int shift)
{
    return (size_t)((k * 0x9e3779b97f4a7c15ull) >> shift);
}

static int table_grow(seq *s)
{
    size_t cap = s->tcap ? s->tcap * 2 : 1 << 16;
    int shift = 64 - __builtin_ctzll(cap);
    struct slot *t = calloc(cap, sizeof *t);
    if (!t) return -ENOMEM;
    for (size_t i = 0; i < s->tcap; i++) {
        if (!s->tab[i].node) continue;
        size_t h = dhash(s->tab[i].key, shift);
        while (t[h].node)
            h = (h + 1) & (cap - 1);
        t[h] = s->tab[i];
    }
    free(s->tab);
    s->tab = t;
    s->tcap = cap;
    s->tshift = shift;
    return 0;
}

/* Slot of key k, or the empty slot where it would go. */
static inline size_t tfind(const seq *s, uint64_t k)
{
    size_t h = dhash(k, s->tshift);
    while (s->tab[h].node && s->tab[h].key != k)
        h = (h + 1) & (s->tcap - 1);
    return h;
}

static void tremove(seq *s, size_t h)
{
    size_t mask = s->tcap - 1, j = h;
    s->tab[h].node = 0;
    s->tused--;
    for (;;) {
        j = (j + 1) & mask;
        if (!s->tab[j].node) return;
        size_t home = dhash(s->tab[j].key, s->tshift);
        /* Move j back to h unless its home lies cyclically in (h, j]. */
        if ((j > h && (home <= h || home > j)) || (j < h && home <= h && home > j)) {
            s->tab[h] = s->tab[j];
            s->tab[j].node = 0;
            h = j;
        }
    }
}

/* Point the digram starting at n to n (the reference code's `*find_digram(n) = n`). */
static void digram_set(seq *s, uint32_t n)
{
    if (no_digram(s, n) || no_digram(s, s->nx[n])) return;
    if ((s->tused + 1) * 2 > s->tcap && table_grow(s)) {
        s->err = -ENOMEM;
        return;
    }
    uint64_t k = dkey(s, n);
    size_t h = tfind(s, k);
    if (!s->tab[h].node) {
        s->tused++;
        s->tab[h].key = k;
    }
    s->tab[h].node = n;
}

static void digram_delete(seq *s, uint32_t n)
{
    if (no_digram(s, n) || no_digram(s, s->nx[n])) return;
    size_t h = tfind(s, dkey(s, n));
    if (s->tab[h].node == n) tremove(s, h);
}

/* ---- nodes and rules ---- */

static uint32_t node_new(seq *s, uint32_t v)
{
    uint32_t n = s->freenode;
    if (n) {
        s->freenode = s->nx[n];
    } else {
        if (s->nnodes == s->ncap) {
            size_t cap = s->ncap * 2;
            uint32_t *a = realloc(s->nx, cap * 4), *b = a ? realloc(s->pv, cap * 4) : NULL;
            if (a) s->nx = a;
            if (b) s->pv = b;
            uint32_t *c = b ? realloc(s->val, cap * 4) : NULL;
            if (c) s->val = c;
            if (!a || !b || !c || cap > 0xffffffffu) {
                s->err = -ENOMEM;
                return 0;
            }
            s->ncap = cap;
        }
        n = (uint32_t)s->nnodes++;
    }
    s->nx[n] = s->pv[n] = 0;
    s->val[n] = v;
    if ((v & GUARD) == SEQ_RULE) s->cnt[v & ~GUARD]++;
    return n;
}

static uint32_t rule_new(seq *s)
{
    uint32_t r = s->freerule;
    if (r) {
        s->freerule = s->cnt[r];
    } else {
        if (s->nrules >= RULE_MAX) {
            s->err = tdc_error(-EOVERFLOW, "grammar segment has too many rules");
            return 0;
        }
        if (s->nrules == s->rcap) {
            size_t cap = s->rcap * 2;
            uint32_t *g = realloc(s->guard, cap * 4), *c = g ? realloc(s->cnt, cap * 4) : NULL;
            if (g) s->guard = g;
            if (c) s->cnt = c;
            if (!g || !c) {
                s->err = -ENOMEM;
                return 0;
            }
            s->rcap = cap;
        }
        r = (uint32_t)s->nrules++;
    }
    s->cnt[r] = 0;
    uint32_t g = node_new(s, GUARD | r);
    if (!g) return 0;
    s->nx[g] = s->pv[g] = g;
    s->guard[r] = g;
    return r;
}

static void join(seq *s, uint32_t l, uint32_t r)
{
    if (s->nx[l]) {
        digram_delete(s, l);
        /* Overlapping triples (aaa): re-index the digram the deletion may have orphaned. */
        uint32_t rp = s->pv[r], rn = s->nx[r];
        if (rp && rn && s->val[r] == s->val[rp] && s->val[r] == s->val[rn]) digram_set(s, r);
        uint32_t lp = s->pv[l], ln = s->nx[l];
        if (lp && ln && s->val[l] == s->val[ln] && s->val[l] == s->val[lp]) digram_set(s, lp);
    }
    s->nx[l] = r;
    s->pv[r] = l;
}

static void insert_after(seq *s, uint32_t l, uint32_t y)
{
    join(s, y, s->nx[l]);
    join(s, l, y);
}

/* Unlink and free node n; `deuse` drops the reference a nonterminal holds on its rule. */
static void node_delete(seq *s, uint32_t n, int deuse)
{
    join(s, s->pv[n], s->nx[n]);
    if (!is_guard(s, n)) {
        digram_delete(s, n);
        if (deuse && is_nt(s, n)) s->cnt[rule_of(s, n)]--;
    }
    s->nx[n] = s->freenode;
    s->freenode = n;
}

static int check(seq *s, uint32_t n);

static void substitute(seq *s, uint32_t n, uint32_t r)
{
    uint32_t q = s->pv[n];
    node_delete(s, s->nx[q], 1);
    node_delete(s, s->nx[q], 1);
    uint32_t y = node_new(s, SEQ_RULE | r);
    if (!y) return;
    insert_after(s, q, y);
    if (!check(s, q)) check(s, s->nx[q]);
}

/* Replace nonterminal n by the body of its rule, which n is the only user of. */
static void expand(seq *s, uint32_t n)
{
    uint32_t left = s->pv[n], right = s->nx[n], r = rule_of(s, n);
    uint32_t g = s->guard[r], f = s->nx[g], l = s->pv[g];
    node_delete(s, g, 0);
    s->cnt[r] = s->freerule;
    s->freerule = r;
    digram_delete(s, n);
    node_delete(s, n, 0);
    join(s, left, f);
    join(s, l, right);
    digram_set(s, l);
}

static void match(seq *s, uint32_t ss, uint32_t m)
{
    uint32_t r;
    if (is_guard(s, s->pv[m]) && is_guard(s, s->nx[s->nx[m]])) {
        r = rule_of(s, s->pv[m]);
        substitute(s, ss, r);
    } else {
        r = rule_new(s);
        if (!r) return;
        uint32_t a = node_new(s, s->val[ss]), b = node_new(s, s->val[s->nx[ss]]);
        if (!a || !b) return;
        uint32_t g = s->guard[r];
        insert_after(s, s->pv[g], a);
        insert_after(s, s->pv[g], b);
        substitute(s, m, r);
        substitute(s, ss, r);
        digram_set(s, s->nx[s->guard[r]]);
    }
    if (s->err) return;
    uint32_t f = s->nx[s->guard[r]];
    if (is_nt(s, f) && s->cnt[rule_of(s, f)] == 1) expand(s, f);
}

/* Enforce digram uniqueness for the digram starting at n; 1 if it was already indexed. */
static int check(seq *s, uint32_t n)
{
    if (s->err || no_digram(s, n) || no_digram(s, s->nx[n])) return 0;
    if ((s->tused + 1) * 2 > s->tcap && table_grow(s)) {
        s->err = -ENOMEM;
        return 0;
    }
    uint64_t k = dkey(s, n);
    size_t h = tfind(s, k);
    if (!s->tab[h].node) {
        s->tab[h].key = k;
        s->tab[h].node = n;
        s->tused++;
        return 0;
    }
    uint32_t m = s->tab[h].node;
    if (s->nx[m] != n) match(s, n, m);
    return 1;
}

/* ---- public ---- */

seq *seq_new(uint64_t hint)
{
    seq *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ncap = hint < 1024 ? 1024 : (size_t)(hint + hint / 4);
    s->rcap = 1024;
    s->nx = malloc(s->ncap * 4);
    s->pv = malloc(s->ncap * 4);
    s->val = malloc(s->ncap * 4);
    s->guard = malloc(s->rcap * 4);
    s->cnt = malloc(s->rcap * 4);
    s->nnodes = 1;
    if (!s->nx || !s->pv || !s->val || !s->guard || !s->cnt || table_grow(s) ||
        (rule_new(s), s->err)) {
        seq_free(s);
        return NULL;
    }
    return s;
}

void seq_free(seq *s)
{
    if (!s) return;
    free(s->nx);
    free(s->pv);
    free(s->val);
    free(s->guard);
    free(s->cnt);
    free(s->tab);
    free(s);
}

static int append(seq *s, uint32_t v)
{
    uint32_t g = s->guard[0];
    uint32_t n = node_new(s, v);
    if (!n) return s->err;
    insert_after(s, s->pv[g], n);
    check(s, s->pv[s->pv[g]]);
    return s->err;
}

int seq_push(seq *s, uint32_t tok)
{
    if (tok >= SEQ_RULE) return tdc_error(-EOVERFLOW, "token id out of range");
    return append(s, tok);
}

int seq_barrier(seq *s)
{
    return append(s, BAR);
}

int seq_finish(seq *s, seq_out *out)
{
    memset(out, 0, sizeof *out);
    if (s->err) return s->err;
    /* Number live rules children-first with an iterative post-order walk from the root.
     * num[r]: 0 = unvisited, UINT32_MAX = on the stack, else the final number. */
    uint32_t *num = calloc(s->nrules, sizeof *num);
    vec32 stack = {0}, pos = {0};
    uint32_t next = 1;
    int rc = -ENOMEM;
    if (!num) goto out;
    for (uint32_t n = s->nx[s->guard[0]]; n != s->guard[0]; n = s->nx[n]) {
        uint32_t v = s->val[n];
        if (vec32_push(&out->root, v)) goto out;
        if (!is_nt(s, n) || num[rule_of(s, n)]) continue;
        /* DFS from rule r, emitting rules in post-order. */
        if (vec32_push(&stack, rule_of(s, n)) || vec32_push(&pos, s->nx[s->guard[rule_of(s, n)]]))
            goto out;
        num[rule_of(s, n)] = UINT32_MAX;
        while (stack.n) {
            uint32_t r = stack.p[stack.n - 1], c = pos.p[pos.n - 1];
            if (c == s->guard[r]) {
                num[r] = next++;
                stack.n--;
                pos.n--;
                continue;
            }
            pos.p[pos.n - 1] = s->nx[c];
            if (is_nt(s, c) && !num[rule_of(s, c)]) {
                num[rule_of(s, c)] = UINT32_MAX;
                if (vec32_push(&stack, rule_of(s, c)) ||
                    vec32_push(&pos, s->nx[s->guard[rule_of(s, c)]]))
                    goto out;
            }
        }
    }
    /* Emit rule bodies in number order. */
    out->nrules = next - 1;
    uint32_t *order = malloc((size_t)next * sizeof *order);
    if (!order) goto out;
    for (uint32_t r = 1; r < s->nrules; r++)
        if (num[r] && num[r] != UINT32_MAX) order[num[r]] = r;
    if (vec64_reserve(&out->rule_start, next)) {
        free(order);
        goto out;
    }
    vec64_push(&out->rule_start, 0);
    for (uint32_t i = 1; i < next; i++) {
        uint32_t r = order[i];
        for (uint32_t n = s->nx[s->guard[r]]; n != s->guard[r]; n = s->nx[n])
            if (vec32_push(&out->syms, is_nt(s, n) ? SEQ_RULE | num[rule_of(s, n)] : s->val[n])) {
                free(order);
                goto out;
            }
        vec64_push(&out->rule_start, out->syms.n);
    }
    free(order);
    for (size_t i = 0; i < out->root.n; i++)
        if ((out->root.p[i] & GUARD) == SEQ_RULE)
            out->root.p[i] = SEQ_RULE | num[out->root.p[i] & ~GUARD];
    rc = 0;
out:
    free(num);
    vec32_free(&stack);
    vec32_free(&pos);
    if (rc) seq_out_free(out);
    return rc;
}

void seq_out_free(seq_out *o)
{
    vec32_free(&o->root);
    vec64_free(&o->rule_start);
    vec32_free(&o->syms);
}
