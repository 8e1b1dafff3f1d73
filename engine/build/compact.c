#include "compact.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../base/err.h"
#include "pack.h"
#include "../grammar/seq.h"
#include "shape.h"
#include "../base/tok.h"

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

/* Add token `id` to the segment, compressing the segment once it is full. */
static int push_tok(cbuild *c, uint32_t id)
{
    if (vec32_push(&c->toks, id)) return -ENOMEM;
    return c->toks.n >= c->seg ? flush_seg(c) : 0;
}

static int emit(void *ctx, const unsigned char *t, size_t n)
{
    cbuild *c = ctx;
    uint32_t id;
    int rc = dict_intern(c->d, t, n, &id);
    return rc ? rc : push_tok(c, id);
}

/* Feed the tokens of a kept file's root run (symbols of the old grammar) to the segment, as
 * if its bytes had been tokenized again: the copied dictionary gives old tokens their old
 * ids. Depth-first with an explicit stack (the DAG may be deep). */
static int expand_run(cbuild *c, const gram *og, const uint32_t *run, uint64_t n)
{
    typedef struct frame {
        const uint32_t *p;
        uint64_t left;
    } frame;
    frame *st = NULL;
    size_t depth = 0, cap = 0;
    int rc = 0;
    const uint32_t *p = run;
    uint64_t left = n;
    for (;;) {
        if (!left) {
            if (!depth) break;
            depth--;
            p = st[depth].p;
            left = st[depth].left;
            continue;
        }
        uint32_t s = *p++;
        left--;
        if (s < og->ntokens) {
            if ((rc = push_tok(c, s))) break;
            continue;
        }
        if (depth == cap) {
            size_t nc = cap ? cap * 2 : 64;
            frame *ns = realloc(st, nc * sizeof *ns);
            if (!ns) {
                rc = -ENOMEM;
                break;
            }
            st = ns;
            cap = nc;
        }
        st[depth++] = (frame){p, left};
        p = gram_body(og, s - og->ntokens, &left);
    }
    free(st);
    return rc;
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

/* Whether the grammar has decayed: at least 1/COMPACT_DECAY_DIV of its rules are used only
 * once. Sequitur leaves none (rule utility), and so does a full rebuild; they appear when the
 * other users of a kept rule were rewritten or deleted, and they come with the loss that only
 * compressing everything together recovers: the new text's rules repeat phrases the kept
 * rules hold (measured on edit histories, the archive grows against a fresh pack about as
 * the share of once-used rules does). One pass over the grammar. -ENOMEM or 0/1. */
static int decayed(const gram *g)
{
    uint32_t nt = g->ntokens, once = 0;
    uint8_t *uses = calloc((size_t)g->nrules + 1, 1); /* 0, 1, or 2 for "more" */
    if (!uses) return -ENOMEM;
    for (size_t i = 0; i < g->syms.n; i++)
        if (g->syms.p[i] >= nt && uses[g->syms.p[i] - nt] < 2) uses[g->syms.p[i] - nt]++;
    for (size_t i = 0; i < g->root.n; i++)
        if (g->root.p[i] >= nt && uses[g->root.p[i] - nt] < 2) uses[g->root.p[i] - nt]++;
    for (uint32_t r = 1; r <= g->nrules; r++)
        once += uses[r] == 1;
    free(uses);
    return once && once >= g->nrules / COMPACT_DECAY_DIV;
}

/* Whether to compress all content again, as pack would, rather than only the new bytes. Only
 * when there are new bytes, and then when they are at least 1/COMPACT_FULL_DIV of all (the
 * cost stays within that factor of compressing them alone), or when the old grammar has
 * decayed (the rewrites that decayed it were a share of the archive, so the rebuilds' cost
 * is spread over edits in proportion to it). -ENOMEM or 0/1. */
static int rebuild_all(const gram *og, const arc *nw, const int64_t *src)
{
    uint64_t fresh = 0, all = 0;
    for (uint32_t i = 0; i < nw->nents; i++) {
        if (nw->ents[i].type != ARC_REG || src[i] == -2) continue;
        all += nw->ents[i].size;
        if (src[i] == -1) fresh += nw->ents[i].size;
    }
    if (!fresh) return 0;
    return fresh >= all / COMPACT_FULL_DIV ? 1 : decayed(og);
}

int compact_build(const arc *old, arc *nw, const int64_t *src, compact_read_fn fn, void *ctx,
                  unsigned flags, compact_stats *st)
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
    /* An old archive not loaded (its file table alone): every file is read through fn and
     * compressed from an empty dictionary. */
    const int text = old->pending;
    if (!blk || (text ? !(c.d = dict_new()) : dict_encode(old->dict, &enc))) {
        rc = -ENOMEM;
        goto out;
    }
    if (!text && (rc = dict_decode(enc.p, enc.n, &c.d))) goto out;
    int full = text;
    if (!text && (flags & COMPACT_MAY_REBUILD) && (full = rebuild_all(og, nw, src)) < 0) {
        rc = full;
        goto out;
    }
    st->full = full;
    /* New content (with `full`, all content): tokens into the copied dictionary, Sequitur
     * over them. */
    for (uint32_t i = 0; i < nw->nents; i++) {
        arc_entry *e = &nw->ents[i];
        if (e->type != ARC_REG || src[i] == -2 || (src[i] >= 0 && !full)) continue;
        if (src[i] >= 0 && text) { /* kept content read back: it must be what was archived */
            if ((rc = add_file(&c, e, i, fn, ctx, blk, blksz))) goto out;
            if (e->hash != old->ents[src[i]].hash) {
                rc = tdc_error(-EBADMSG, "'%s' reads back other than archived (hash)", e->path);
                goto out;
            }
            continue;
        }
        if (src[i] >= 0) {
            const arc_entry *o = &old->ents[src[i]];
            if ((rc = expand_run(&c, og, og->root.p + o->root_start, o->root_len))) goto out;
            if (vec32_push(&c.toks, SEQ_BARRIER)) {
                rc = -ENOMEM;
                goto out;
            }
            continue;
        }
        if ((rc = add_file(&c, e, i, fn, ctx, blk, blksz))) goto out;
        st->new_files++;
        st->new_bytes += e->size;
    }
    if ((rc = flush_seg(&c))) goto out;
    /* Kept rules: all of the old grammar's (the sweep drops the dead ones), none if `full`. */
    uint32_t t0 = og->ntokens, t1 = dict_count(c.d), r0 = full ? 0 : og->nrules;
    uint64_t osyms = full ? 0 : og->syms.n;
    if ((rc = gbuild_finish(&c.gb, t1, &ng))) goto out;
    st->rules_new = ng.nrules;
    if ((uint64_t)t1 + r0 + ng.nrules + 1 > 0xffffffffu) {
        rc = tdc_error(-EOVERFLOW, "tokens plus rules exceed 2^32 symbols");
        goto out;
    }
    /* Old rules first (token ids kept, rule symbols moved up by the new tokens), then new. */
    g->ntokens = t1;
    g->nrules = r0 + ng.nrules;
    if (vec32_reserve(&g->syms, osyms + ng.syms.n) ||
        vec64_reserve(&g->rule_start, (size_t)g->nrules + 1)) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < osyms; i++) {
        uint32_t s = og->syms.p[i];
        g->syms.p[g->syms.n++] = s < t0 ? s : s - t0 + t1;
    }
    for (size_t i = 0; i < ng.syms.n; i++) {
        uint32_t s = ng.syms.p[i];
        g->syms.p[g->syms.n++] = s < t1 ? s : s + r0;
    }
    g->rule_start.p[g->rule_start.n++] = 0;
    for (uint32_t r = 1; r <= r0; r++)
        g->rule_start.p[g->rule_start.n++] = og->rule_start.p[r];
    for (uint32_t r = 1; r <= ng.nrules; r++)
        g->rule_start.p[g->rule_start.n++] = osyms + ng.rule_start.p[r];
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
        if (src[i] >= 0) e->hash = old->ents[src[i]].hash;
        if (src[i] >= 0 && !full) {
            const arc_entry *o = &old->ents[src[i]];
            run = og->root.p + o->root_start;
            n = o->root_len;
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
    /* An incremental build keeps the old rules that lost their other uses: they are what
     * tells a later compaction the grammar has decayed (decayed()), and the full rebuild
     * that follows inlines what does not pay. */
    shape_opts so = {.keep_rules = !full};
    if ((rc = sweep(g)) || (rc = shape_grammar(g, &c.d, nw->ents, nw->nents, &so))) goto out;
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
