#include "gram.h"

#include <stdlib.h>
#include <string.h>

#include "dict.h"
#include "../base/err.h"

void gram_free(gram *g)
{
    vec32_free(&g->root);
    vec64_free(&g->rule_start);
    vec32_free(&g->syms);
    vec32_free(&g->topo);
    memset(g, 0, sizeof *g);
}

static inline uint32_t remap(uint32_t s, uint32_t base)
{
    return (s & SEQ_RULE) && s != SEQ_BARRIER ? SEQ_RULE | ((s & ~SEQ_RULE) + base) : s;
}

int gbuild_add(gbuild *b, const seq_out *seg)
{
    gram *g = &b->g;
    uint32_t base = g->nrules;
    if ((uint64_t)base + seg->nrules >= 0x7fffffffu)
        return tdc_error(-EOVERFLOW, "grammar has too many rules");
    if (!g->rule_start.n && vec64_push(&g->rule_start, 0)) return -ENOMEM;
    if (vec32_reserve(&g->syms, seg->syms.n) || vec64_reserve(&g->rule_start, seg->nrules) ||
        vec32_reserve(&g->root, seg->root.n))
        return -ENOMEM;
    for (size_t i = 0; i < seg->syms.n; i++)
        g->syms.p[g->syms.n++] = remap(seg->syms.p[i], base);
    uint64_t off = g->rule_start.p[g->rule_start.n - 1];
    for (uint32_t r = 1; r <= seg->nrules; r++)
        g->rule_start.p[g->rule_start.n++] = off + seg->rule_start.p[r];
    g->nrules += seg->nrules;
    for (size_t i = 0; i < seg->root.n; i++) {
        uint32_t s = seg->root.p[i];
        if (s == SEQ_BARRIER) {
            if (vec64_push(&b->file_end, g->root.n)) return -ENOMEM;
        } else {
            g->root.p[g->root.n++] = remap(s, base);
        }
    }
    return 0;
}

int gbuild_finish(gbuild *b, uint32_t ntokens, gram *out)
{
    gram *g = &b->g;
    if ((uint64_t)ntokens + g->nrules + 1 > 0xffffffffu)
        return tdc_error(-EOVERFLOW, "tokens plus rules exceed 2^32 symbols");
    if (!g->rule_start.n && vec64_push(&g->rule_start, 0)) return -ENOMEM;
    g->ntokens = ntokens;
    for (size_t i = 0; i < g->syms.n; i++)
        if (g->syms.p[i] & SEQ_RULE) g->syms.p[i] = ntokens + (g->syms.p[i] & ~SEQ_RULE);
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] & SEQ_RULE) g->root.p[i] = ntokens + (g->root.p[i] & ~SEQ_RULE);
    *out = *g;
    memset(g, 0, sizeof *g);
    return 0;
}

void gbuild_free(gbuild *b)
{
    gram_free(&b->g);
    vec64_free(&b->file_end);
}

int gram_order(const gram *g, vec32 *order)
{
    uint32_t nt = g->ntokens;
    for (uint32_t r = 1; r <= g->nrules; r++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            if (!gram_sym_ok(g, b[i]))
                return tdc_error(-EBADMSG, "rules: rule %u refers to rule %u (out of range)", r,
                                 b[i] - nt);
    }
    /* Iterative DFS; a rule is emitted after all its children. state, per symbol id: 0 new,
     * 1 open, 2 done; tokens are done from the start, so that skipping what needs no visit
     * is one lookup, not a branch on the kind of symbol as well. */
    unsigned char *state = malloc((size_t)nt + g->nrules + 1);
    vec32 st = {0};
    vec64 pos = {0};
    int rc = 0;
    order->n = 0;
    if (!state || vec32_reserve(order, g->nrules)) rc = -ENOMEM;
    if (state) {
        memset(state, 2, nt);
        memset(state + nt, 0, (size_t)g->nrules + 1);
    }
    for (uint32_t top = 1; top <= g->nrules && !rc; top++) {
        if (state[nt + top]) continue;
        state[nt + top] = 1;
        if (vec32_push(&st, top) || vec64_push(&pos, 0)) rc = -ENOMEM;
        while (!rc && st.n) {
            uint32_t r = st.p[st.n - 1];
            uint64_t n;
            const uint32_t *b = gram_body(g, r, &n);
            uint64_t i = pos.p[pos.n - 1];
            while (i < n && state[b[i]] == 2)
                i++;
            if (i == n) {
                state[nt + r] = 2;
                order->p[order->n++] = r;
                st.n--;
                pos.n--;
                continue;
            }
            pos.p[pos.n - 1] = i + 1;
            uint32_t c = b[i] - nt;
            if (state[b[i]] == 1) {
                rc = tdc_error(-EBADMSG, "rules: cycle through rule %u and rule %u", r, c);
                break;
            }
            state[b[i]] = 1;
            if (vec32_push(&st, c) || vec64_push(&pos, 0)) rc = -ENOMEM;
        }
    }
    free(state);
    vec32_free(&st);
    vec64_free(&pos);
    if (rc == -ENOMEM) tdc_error(rc, "rules: out of memory");
    return rc;
}

int gram_topo(gram *g)
{
    return gram_order(g, &g->topo);
}

int gram_check_root(const gram *g)
{
    for (uint64_t i = 0; i < g->root.n; i++)
        if (!gram_sym_ok(g, g->root.p[i]))
            return tdc_error(-EBADMSG, "root: symbol %llu refers to rule %u (out of range)",
                             (unsigned long long)i, g->root.p[i] - g->ntokens);
    return 0;
}

static int by_count_r(const void *a, const void *b, void *ctx)
{
    const uint64_t *cnt = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (cnt[x] != cnt[y]) return cnt[x] < cnt[y] ? 1 : -1;
    return (x > y) - (x < y);
}

void gram_by_count(uint32_t *ids, size_t n, const uint64_t *cnt)
{
    sort_r(ids, n, sizeof *ids, by_count_r, (void *)cnt);
}

int gram_topo_positions(const gram *g, uint32_t **pos)
{
    uint32_t *p = malloc(((size_t)g->nrules + 1) * sizeof *p);
    if (!p) return -ENOMEM;
    p[0] = 0;
    for (uint32_t k = 0; k < g->nrules; k++)
        p[g->topo.p[k]] = k;
    *pos = p;
    return 0;
}

static int by_pos_r(const void *a, const void *b, void *ctx)
{
    const uint32_t *pos = ctx;
    uint32_t x = pos[*(const uint32_t *)a], y = pos[*(const uint32_t *)b];
    return (x > y) - (x < y);
}

static int by_pos_desc_r(const void *a, const void *b, void *ctx)
{
    return by_pos_r(b, a, ctx);
}

void gram_sort_topo(const uint32_t *pos, uint32_t *rules, size_t n, int parents_first)
{
    sort_r(rules, n, sizeof *rules, parents_first ? by_pos_desc_r : by_pos_r, (void *)pos);
}

int gram_renumber_rules(gram *g)
{
    uint32_t nr = g->nrules, nt = g->ntokens;
    uint64_t *cnt = calloc((size_t)nr + 1, sizeof *cnt);
    uint32_t *order = malloc(((size_t)nr + 1) * sizeof *order);
    uint32_t *pos = malloc(((size_t)nr + 1) * sizeof *pos);
    vec32 syms = {0};
    vec64 start = {0};
    int rc = -ENOMEM;
    if (!cnt || !order || !pos || vec32_reserve(&syms, g->syms.n) ||
        vec64_reserve(&start, (size_t)nr + 1))
        goto out;
    for (size_t i = 0; i < g->syms.n; i++)
        if (g->syms.p[i] >= nt) cnt[g->syms.p[i] - nt]++;
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] >= nt) cnt[g->root.p[i] - nt]++;
    for (uint32_t r = 0; r < nr; r++)
        order[r] = r + 1;
    gram_by_count(order, nr, cnt);
    for (uint32_t k = 0; k < nr; k++)
        pos[order[k]] = k + 1;
    start.p[start.n++] = 0;
    for (uint32_t k = 0; k < nr; k++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, order[k], &n);
        for (uint64_t i = 0; i < n; i++)
            syms.p[syms.n++] = b[i] < nt ? b[i] : nt + pos[b[i] - nt];
        start.p[start.n++] = syms.n;
    }
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] >= nt) g->root.p[i] = nt + pos[g->root.p[i] - nt];
    vec32_free(&g->syms);
    vec64_free(&g->rule_start);
    g->syms = syms;
    g->rule_start = start;
    syms = (vec32){0};
    start = (vec64){0};
    rc = 0;
out:
    free(cnt);
    free(order);
    free(pos);
    vec32_free(&syms);
    vec64_free(&start);
    return rc;
}

/* Inlining state: which rules go, their expansions (children first), the new numbers of
 * the rules that stay. */
typedef struct inliner {
    const gram *g;
    unsigned char *drop; /* drop[r]: rule r is inlined */
    uint64_t *exp_at;    /* expansion of a dropped rule r: exp[exp_at[r] .. + exp_len[r]) */
    uint64_t *exp_len;
    uint32_t *nid; /* new number of a kept rule */
    vec32 exp;
} inliner;

/* Append symbol s as the grammar without dropped rules spells it. */
static int inl_put(const inliner *in, vec32 *out, uint32_t s)
{
    uint32_t nt = in->g->ntokens;
    if (s < nt) return vec32_push(out, s);
    uint32_t r = s - nt;
    if (!in->drop[r]) return vec32_push(out, nt + in->nid[r]);
    if (vec32_reserve(out, in->exp_len[r])) return -ENOMEM;
    memcpy(out->p + out->n, in->exp.p + in->exp_at[r], in->exp_len[r] * sizeof *out->p);
    out->n += in->exp_len[r];
    return 0;
}

/* How often each rule is used (in the root and in rules), into uses[1..nrules]. */
static void inl_count(const gram *g, uint64_t *uses)
{
    uint32_t nt = g->ntokens;
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] >= nt) uses[g->root.p[i] - nt]++;
    for (size_t i = 0; i < g->syms.n; i++)
        if (g->syms.p[i] >= nt) uses[g->syms.p[i] - nt]++;
}

/* Children first (g->topo), which rules cost more than they save, and their expansions. A
 * rule whose body spells `len` symbols once its dropped children are expanded, used `u`
 * times, costs its body, its length and one symbol per use; inlined it costs u*len symbols.
 * Deciding on the expanded length keeps a dropped rule at three symbols at most, so the
 * grammar never grows by more than that factor (a chain of doubling rules, as a repetitive
 * file makes, loses every other level rather than all of them). */
static int inl_expand(inliner *in, const uint64_t *uses)
{
    const gram *g = in->g;
    uint32_t nt = g->ntokens;
    for (uint32_t k = 0; k < g->topo.n; k++) {
        uint32_t r = g->topo.p[k];
        uint64_t n, len = 0;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            len += b[i] >= nt && in->drop[b[i] - nt] ? in->exp_len[b[i] - nt] : 1;
        if (uses[r] * len > uses[r] + len + 1) continue;
        in->drop[r] = 1;
        in->exp_len[r] = len;
    }
    uint32_t kept = 0;
    for (uint32_t r = 1; r <= g->nrules; r++)
        if (!in->drop[r]) in->nid[r] = ++kept;
    /* Now that the kept rules have their numbers, spell the expansions out. */
    for (uint32_t k = 0; k < g->topo.n; k++) {
        uint32_t r = g->topo.p[k];
        if (!in->drop[r]) continue;
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        in->exp_at[r] = in->exp.n;
        for (uint64_t i = 0; i < n; i++)
            if (inl_put(in, &in->exp, b[i])) return -ENOMEM;
    }
    return 0;
}

/* The new root, and where each old root position lands in it (pos[old] for 0..root.n). */
static int inl_root(const inliner *in, vec32 *root, uint64_t *pos)
{
    const gram *g = in->g;
    for (size_t i = 0; i < g->root.n; i++) {
        pos[i] = root->n;
        if (inl_put(in, root, g->root.p[i])) return -ENOMEM;
    }
    pos[g->root.n] = root->n;
    return 0;
}

static int inl_rules(const inliner *in, vec32 *syms, vec64 *start)
{
    const gram *g = in->g;
    if (vec64_push(start, 0)) return -ENOMEM;
    for (uint32_t r = 1; r <= g->nrules; r++) {
        if (in->drop[r]) continue;
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++)
            if (inl_put(in, syms, b[i])) return -ENOMEM;
        if (vec64_push(start, syms->n)) return -ENOMEM;
    }
    return 0;
}

int gram_inline_cheap(gram *g, uint64_t **root_pos)
{
    uint32_t nr = g->nrules;
    inliner in = {.g = g};
    vec32 root = {0}, syms = {0};
    vec64 start = {0};
    uint64_t *pos = malloc((g->root.n + 1) * sizeof *pos);
    uint64_t *uses = calloc((size_t)nr + 1, sizeof *uses);
    in.drop = calloc((size_t)nr + 1, 1);
    in.exp_at = calloc((size_t)nr + 1, sizeof *in.exp_at);
    in.exp_len = calloc((size_t)nr + 1, sizeof *in.exp_len);
    in.nid = calloc((size_t)nr + 1, sizeof *in.nid);
    int rc = -ENOMEM;
    *root_pos = NULL;
    if (!pos || !uses || !in.drop || !in.exp_at || !in.exp_len || !in.nid) goto out;
    if ((rc = gram_topo(g))) goto out;
    inl_count(g, uses);
    if ((rc = inl_expand(&in, uses)) || (rc = inl_root(&in, &root, pos)) ||
        (rc = inl_rules(&in, &syms, &start)))
        goto out;
    vec32_free(&g->root);
    vec32_free(&g->syms);
    vec64_free(&g->rule_start);
    g->root = root;
    g->syms = syms;
    g->rule_start = start;
    g->nrules = (uint32_t)(start.n - 1);
    g->topo.n = 0; /* stale: the caller renumbers, then gram_topo when it needs the order */
    root = (vec32){0};
    syms = (vec32){0};
    start = (vec64){0};
    *root_pos = pos;
    pos = NULL;
out:
    free(pos);
    free(uses);
    free(in.drop);
    free(in.exp_at);
    free(in.exp_len);
    free(in.nid);
    vec32_free(&in.exp);
    vec32_free(&root);
    vec32_free(&syms);
    vec64_free(&start);
    return rc;
}

/* Token ids of each dictionary in the merged one: map[k][id]. */
static int merge_dicts(dict **d, uint32_t n, dict *od, uint32_t **map)
{
    size_t all = 0;
    for (uint32_t k = 0; k < n; k++)
        all += dict_count(d[k]);
    if (dict_reserve(od, all)) return -ENOMEM;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t c = dict_count(d[k]);
        if (!(map[k] = malloc((c ? c : 1) * sizeof **map))) return -ENOMEM;
        for (uint32_t id = 0; id < c; id++) {
            size_t len;
            const unsigned char *p = dict_bytes(d[k], id, &len);
            int rc = dict_intern(od, p, len, &map[k][id]);
            if (rc) return rc;
        }
    }
    return 0;
}

/* Symbol s of grammar k in the merged numbering: tokens through map, rule r to base + r. */
static inline uint32_t merged_sym(const gram *g, const uint32_t *map, uint32_t ntok,
                                  uint32_t base, uint32_t s)
{
    return s < g->ntokens ? map[s] : ntok + base + (s - g->ntokens);
}

int gram_merge(dict **d, gram *g, uint32_t n, dict **od, gram *og)
{
    memset(og, 0, sizeof *og);
    *od = NULL;
    if (n == 1) {
        *od = d[0];
        *og = g[0];
        d[0] = NULL;
        memset(&g[0], 0, sizeof g[0]);
        return 0;
    }
    uint32_t **map = calloc(n ? n : 1, sizeof *map);
    uint64_t rules = 0, syms = 0, root = 0;
    int rc = (*od = dict_new()) && map ? merge_dicts(d, n, *od, map) : -ENOMEM;
    for (uint32_t k = 0; k < n; k++) {
        rules += g[k].nrules;
        syms += g[k].syms.n;
        root += g[k].root.n;
    }
    uint32_t ntok = *od ? dict_count(*od) : 0;
    if (!rc && (uint64_t)ntok + rules + 1 > 0xffffffffu)
        rc = tdc_error(-EOVERFLOW, "merged grammar: too many symbols for 32-bit ids");
    if (!rc && (vec32_reserve(&og->root, root) || vec32_reserve(&og->syms, syms) ||
                vec64_reserve(&og->rule_start, rules + 1) || vec32_reserve(&og->topo, rules)))
        rc = -ENOMEM;
    if (!rc) {
        og->ntokens = ntok;
        og->nrules = (uint32_t)rules;
        og->rule_start.p[og->rule_start.n++] = 0;
        uint32_t base = 0;
        for (uint32_t k = 0; k < n; k++) {
            const gram *s = &g[k];
            for (uint64_t i = 0; i < s->root.n; i++)
                og->root.p[og->root.n++] = merged_sym(s, map[k], ntok, base, s->root.p[i]);
            for (uint64_t i = 0; i < s->syms.n; i++)
                og->syms.p[og->syms.n++] = merged_sym(s, map[k], ntok, base, s->syms.p[i]);
            uint64_t at = og->rule_start.p[og->rule_start.n - 1];
            for (uint32_t r = 1; r <= s->nrules; r++)
                og->rule_start.p[og->rule_start.n++] = at + s->rule_start.p[r];
            for (uint64_t i = 0; i < s->topo.n; i++)
                og->topo.p[og->topo.n++] = base + s->topo.p[i];
            base += s->nrules;
        }
    }
    for (uint32_t k = 0; map && k < n; k++)
        free(map[k]);
    free(map);
    if (rc) {
        dict_free(*od);
        *od = NULL;
        gram_free(og);
        memset(og, 0, sizeof *og);
    }
    return rc;
}
