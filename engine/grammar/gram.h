/* gram: a grammar over token ids, in CSR form.
 *
 * Symbols are 32-bit: s < ntokens is a token id, otherwise rule (s - ntokens). Rule 0 is the
 * root and is never referenced. Rules are numbered by how often they are used (most used
 * first: small numbers compress best), so a rule may refer to any other; gram_topo checks the
 * rules form a DAG and records a children-first order for the passes that need one. */
#ifndef TDC_GRAM_H
#define TDC_GRAM_H

#include <stdint.h>

#include "../base/buf.h"
#include "seq.h"

typedef struct gram {
    uint32_t ntokens;
    uint32_t nrules;  /* rules 1..nrules (the root is extra) */
    vec32 root;       /* root symbols: every file's run, concatenated */
    vec64 rule_start; /* nrules + 1 entries; rule r is syms[rule_start[r-1] .. rule_start[r]) */
    vec32 syms;
    vec32 topo; /* rules 1..nrules, each after every rule it uses (from gram_topo) */
} gram;

/* Body of rule r (0 = root): a pointer to its symbols and their count. */
static inline const uint32_t *gram_body(const gram *g, uint32_t r, uint64_t *n)
{
    if (r == 0) {
        *n = g->root.n;
        return g->root.p;
    }
    *n = g->rule_start.p[r] - g->rule_start.p[r - 1];
    return g->syms.p + g->rule_start.p[r - 1];
}

static inline int gram_is_rule(const gram *g, uint32_t sym)
{
    return sym >= g->ntokens;
}

/* 1 when sym is a token or one of rules 1..nrules (not the root, not past the last rule). */
static inline int gram_sym_ok(const gram *g, uint32_t sym)
{
    return sym < g->ntokens || (sym != g->ntokens && sym - g->ntokens <= g->nrules);
}

/* Every root symbol satisfies gram_sym_ok: 0, or -EBADMSG naming the first that does not. */
int gram_check_root(const gram *g);

void gram_free(gram *g);

/* Check that rules 1..nrules use only tokens and rules 1..nrules and contain no cycle, and
 * put them in *order children first (each after every rule it uses). -EBADMSG with a message
 * naming a bad rule, or -ENOMEM. */
int gram_order(const gram *g, vec32 *order);

/* gram_order into g->topo. */
int gram_topo(gram *g);

/* Order ids so the most counted come first (cnt[id]), ties by id. */
void gram_by_count(uint32_t *ids, size_t n, const uint64_t *cnt);

/* pos[r] = position of rule r in g->topo, for rules 1..nrules (malloc'ed; caller frees). */
int gram_topo_positions(const gram *g, uint32_t **pos);

/* Sort rule numbers by topological position: parents first (1) or children first (0). */
void gram_sort_topo(const uint32_t *pos, uint32_t *rules, size_t n, int parents_first);

/* Renumber rules by use count, most used first (ties keep their order), rewriting every
 * reference. Needs a finished gram (after gbuild_finish). 0 or -ENOMEM. */
int gram_renumber_rules(gram *g);

/* Inline the rules that cost more than they save (a rule of len symbols used u times, with
 * u*len <= u + len + 1: most are pairs used twice), rewriting every use with the rule's
 * body and renumbering the rules that stay (keeping their order). *root_pos (malloc'ed,
 * root.n + 1 entries) maps each old root position to the new one, for the files' runs.
 * 0, -EBADMSG (a cycle) or -ENOMEM; on failure g is unchanged. */
int gram_inline_cheap(gram *g, uint64_t **root_pos);

struct dict;

/* Merge n grammars, each over its own dictionary (d[k], g[k] with topological orders), into
 * one: the dictionaries unified (each distinct token once), rules renumbered shard after
 * shard, roots concatenated in order, topological order kept. One grammar is moved, not
 * copied (d[0] and g[0] are left empty). On failure the outputs are empty. 0, -EOVERFLOW (too
 * many symbols for 32-bit ids) or -ENOMEM. */
int gram_merge(struct dict **d, gram *g, uint32_t n, struct dict **od, gram *og);

/* gbuild: joins the grammars of consecutive segments into one gram. Segment rules are
 * renumbered after the rules already present; barriers close files. Not thread-safe. */
typedef struct gbuild {
    gram g;         /* symbols tagged with SEQ_RULE until gbuild_finish */
    vec64 file_end; /* root length at each barrier seen so far, in order */
} gbuild;

/* Append a segment's grammar. Returns 0, -ENOMEM or -EOVERFLOW. */
int gbuild_add(gbuild *b, const seq_out *seg);

/* Rewrite tagged rule references as ntokens + rule and hand over the gram (the builder is
 * left empty except for file_end, which the caller frees with gbuild_free). */
int gbuild_finish(gbuild *b, uint32_t ntokens, gram *out);
void gbuild_free(gbuild *b);

#endif
