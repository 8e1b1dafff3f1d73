#include "compact.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "err.h"
#include "pack.h"
#include "seq.h"
#include "tok.h"

typedef struct cbuild {
    dict *d;
    vec32 toks; /* the segment being tokenized, SEQ_BARRIER after each file */
    gbuild gb;
    uint64_t seg;
} cbuild;

/* Compress the current segment and add it to the new-rule grammar. */
static int flush_seg(cbuild *c)
{
    if (!c->toks.n) return 0;
    seq *s = seq_new(c->toks.n);
    seq_out out = {0};
    int rc = s ? 0 : -ENOMEM;
    for (size_t i = 0; i < c->toks.n && !rc; i++)
        rc = c->toks.p[i] == SEQ_BARRIER ? seq_barrier(s) : seq_push(s, c->toks.p[i]);
    if (!rc) rc = seq_finish(s, &out);
    seq_free(s);
    if (!rc) rc = gbuild_add(&c->gb, &out);
    seq_out_free(&out);
    c->toks.n = 0;
    return rc;
}

static int emit(void *ctx, const unsigned char *t, size_t n)
{
    cbuild *c = ctx;
    uint32_t id;
    int rc = dict_intern(c->d, t, n, &id);
    if (rc) return rc;
    if (vec32_push(&c->toks, id)) return -ENOMEM;
    return c->toks.n >= c->seg ? flush_seg(c) : 0;
}

/* Tokenize new entry i through fn; records its hash. */
static int add_file(cbuild *c, arc_entry *e, uint32_t i, compact_read_fn fn, void *ctx,
                    unsigned char *blk, size_t blksz)
{
    XXH3_state_t *hs = XXH3_createState();
    tok_state ts = {.npend = 0};
    int rc = hs ? 0 : -ENOMEM;
    if (hs) XXH3_64bits_reset(hs);
    for (uint64_t off = 0; off < e->size && !rc; off += blksz) {
        size_t k = e->size - off < blksz ? (size_t)(e->size - off) : blksz;
        if ((rc = fn(ctx, i, off, blk, k))) break;
        XXH3_64bits_update(hs, blk, k);
        rc = tok_feed(&ts, blk, k, emit, c);
    }
    if (!rc) rc = tok_finish(&ts, emit, c);
    if (!rc && vec32_push(&c->toks, SEQ_BARRIER)) rc = -ENOMEM;
    if (!rc) e->hash = XXH3_64bits_digest(hs);
    XXH3_freeState(hs);
    return rc;
}

/* Keep only the rules reachable from the root, numbered in their old order. */
static int sweep(gram *g)
{
    uint32_t nt = g->ntokens, nr = g->nrules;
    uint32_t *nid = calloc((size_t)nr + 1, sizeof *nid);
    vec32 stack = {0}, syms = {0};
    vec64 start = {0};
    int rc = -ENOMEM;
    if (!nid) goto out;
    for (size_t i = 0; i < g->root.n; i++) {
        uint32_t s = g->root.p[i];
        if (s >= nt && !nid[s - nt]) {
            nid[s - nt] = 1;
            if (vec32_push(&stack, s - nt)) goto out;
        }
    }
    while (stack.n) {
        uint64_t n;
        const uint32_t *b = gram_body(g, stack.p[--stack.n], &n);
        for (uint64_t i = 0; i < n; i++)
            if (b[i] >= nt && !nid[b[i] - nt]) {
                nid[b[i] - nt] = 1;
                if (vec32_push(&stack, b[i] - nt)) goto out;
            }
    }
    uint32_t kept = 0;
    for (uint32_t r = 1; r <= nr; r++)
        if (nid[r]) nid[r] = ++kept;
    if (vec64_push(&start, 0)) goto out;
    for (uint32_t r = 1; r <= nr; r++) {
        if (!nid[r]) continue;
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        if (vec32_reserve(&syms, n) || vec64_push(&start, syms.n + n)) goto out;
        for (uint64_t i = 0; i < n; i++)
            syms.p[syms.n++] = b[i] < nt ? b[i] : nt + nid[b[i] - nt];
    }
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] >= nt) g->root.p[i] = nt + nid[g->root.p[i] - nt];
    vec32_free(&g->syms);
    vec64_free(&g->rule_start);
    g->syms = syms;
    g->rule_start = start;
    g->nrules = kept;
    syms = (vec32){0};
    start = (vec64){0};
    rc = 0;
out:
    free(nid);
    vec32_free(&stack);
    vec32_free(&syms);
    vec64_free(&start);
    return rc;
}

/* Inline the rules that no longer pay for themselves (gram_inline_cheap: the new content's,
 * and old rules left with one use by deleted files) and move the files' runs to match. */
static int prune(gram *g, arc *nw)
{
    uint64_t *pos;
    int rc = gram_inline_cheap(g, &pos);
    if (rc) return rc;
    for (uint32_t i = 0; i < nw->nents; i++) {
        arc_entry *e = &nw->ents[i];
        uint64_t end = e->root_start + e->root_len;
        e->root_start = pos[e->root_start];
        e->root_len = pos[end] - e->root_start;
    }
    free(pos);
    return 0;
}

int compact_build(const arc *old, arc *nw, const int64_t *src, compact_read_fn fn, void *ctx,
                  compact_stats *st)
{
    const gram *og = &old->g;
    cbuild c = {.seg = PACK_SEG_DEFAULT};
    gram ng = {0}, *g = &nw->g;
    buf enc = {0};
    const size_t blksz = 1 << 20;
    unsigned char *blk = malloc(blksz);
    int rc;
    memset(st, 0, sizeof *st);
    memset(g, 0, sizeof *g);
    st->rules_before = og->nrules;
    if (!blk || dict_encode(old->dict, &enc)) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = dict_decode(enc.p, enc.n, &c.d))) goto out;
    /* New content: tokens into the copied dictionary, Sequitur over them. */
    for (uint32_t i = 0; i < nw->nents; i++) {
        arc_entry *e = &nw->ents[i];
        if (e->type != ARC_REG || src[i] != -1) continue;
        if ((rc = add_file(&c, e, i, fn, ctx, blk, blksz))) goto out;
        st->new_files++;
        st->new_bytes += e->size;
    }
    if ((rc = flush_seg(&c))) goto out;
    uint32_t t0 = og->ntokens, t1 = dict_count(c.d), r0 = og->nrules;
    if ((rc = gbuild_finish(&c.gb, t1, &ng))) goto out;
    st->rules_new = ng.nrules;
    if ((uint64_t)t1 + r0 + ng.nrules + 1 > 0xffffffffu) {
        rc = tdc_error(-EOVERFLOW, "tokens plus rules exceed 2^32 symbols");
        goto out;
    }
    /* Old rules first (token ids kept, rule symbols moved up by the new tokens), then new. */
    g->ntokens = t1;
    g->nrules = r0 + ng.nrules;
    if (vec32_reserve(&g->syms, og->syms.n + ng.syms.n) ||
        vec64_reserve(&g->rule_start, (size_t)g->nrules + 1)) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < og->syms.n; i++) {
        uint32_t s = og->syms.p[i];
        g->syms.p[g->syms.n++] = s < t0 ? s : s - t0 + t1;
    }
    for (size_t i = 0; i < ng.syms.n; i++) {
        uint32_t s = ng.syms.p[i];
        g->syms.p[g->syms.n++] = s < t1 ? s : s + r0;
    }
    for (uint32_t r = 0; r <= r0; r++)
        g->rule_start.p[g->rule_start.n++] = og->rule_start.p[r];
    for (uint32_t r = 1; r <= ng.nrules; r++)
        g->rule_start.p[g->rule_start.n++] = og->syms.n + ng.rule_start.p[r];
    /* The root: each file's run, kept or new, in entry order. */
    uint64_t k = 0, nstart = 0;
    for (uint32_t i = 0; i < nw->nents; i++) {
        arc_entry *e = &nw->ents[i];
        e->root_start = g->root.n;
        e->root_len = 0;
        if (e->type != ARC_REG || src[i] == -2) continue;
        const uint32_t *run;
        uint64_t n;
        uint32_t tbase, rshift;
        if (src[i] >= 0) {
            const arc_entry *o = &old->ents[src[i]];
            run = og->root.p + o->root_start;
            n = o->root_len;
            e->hash = o->hash;
            tbase = t0;
            rshift = t1 - t0;
        } else {
            run = ng.root.p + nstart;
            n = c.gb.file_end.p[k] - nstart;
            nstart = c.gb.file_end.p[k++];
            tbase = t1;
            rshift = r0;
        }
        if (vec32_reserve(&g->root, n)) {
            rc = -ENOMEM;
            goto out;
        }
        for (uint64_t j = 0; j < n; j++)
            g->root.p[g->root.n++] = run[j] < tbase ? run[j] : run[j] + rshift;
        e->root_len = n;
    }
    if ((rc = sweep(g)) || (rc = prune(g, nw)) || (rc = gram_renumber_rules(g))) goto out;
    st->rules_after = g->nrules;
    nw->dict = c.d;
    c.d = NULL;
out:
    if (rc == -ENOMEM) tdc_error(rc, "out of memory while compacting");
    if (rc) gram_free(g);
    gram_free(&ng);
    gbuild_free(&c.gb);
    vec32_free(&c.toks);
    dict_free(c.d);
    buf_free(&enc);
    free(blk);
    return rc;
}
