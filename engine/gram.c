#include "gram.h"

#include <string.h>

#include "err.h"

void gram_free(gram *g)
{
    vec32_free(&g->root);
    vec64_free(&g->rule_start);
    vec32_free(&g->syms);
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
