#include "words.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "../base/tok.h"

struct idx_words {
    const idx *x;
    const arc *a;
    uint64_t *w2r_at; /* ntokens + 1 offsets into w2r_rule / w2r_cnt */
    uint32_t *w2r_rule, *w2r_cnt;
    uint64_t *par_at; /* nrules + 2 offsets into par */
    uint32_t *par;
    uint32_t *pos;   /* per rule: position in g->topo */
    uint32_t *stamp; /* per rule: == gen when the rule holds the current word */
    uint64_t *cnt;   /* per rule: occurrences of the current word in its expansion */
    uint32_t gen;
    vec32 marked;
    pthread_mutex_t lock;
    /* The dictionary holds a word token of TOK_CAP bytes: a word was cut, and its last piece
     * is a token that a whole word's cannot be told from (by_text). */
    int cut;
};

void idx_words_free(idx_words *w)
{
    if (!w) return;
    free(w->w2r_at);
    free(w->w2r_rule);
    free(w->w2r_cnt);
    free(w->par_at);
    free(w->par);
    free(w->pos);
    free(w->stamp);
    free(w->cnt);
    vec32_free(&w->marked);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int idx_words_build(const idx *x, idx_words **out)
{
    const arc *a = idx_arc(x);
    const gram *g = &a->g;
    size_t nt = g->ntokens, nr = (size_t)g->nrules + 1;
    idx_words *w = calloc(1, sizeof *w);
    if (!w) return tdc_error(-ENOMEM, "word index: out of memory");
    pthread_mutex_init(&w->lock, NULL);
    w->x = x;
    w->a = a;
    w->cut = dict_has_word_of(a->dict, TOK_CAP);
    w->w2r_at = calloc(nt + 1, sizeof *w->w2r_at);
    w->par_at = calloc(nr + 1, sizeof *w->par_at);
    w->stamp = calloc(nr, sizeof *w->stamp);
    w->cnt = malloc(nr * sizeof *w->cnt);
    if (!w->w2r_at || !w->par_at || !w->stamp || !w->cnt || gram_topo_positions(g, &w->pos))
        goto nomem;
    /* Counting pass: one word2rule entry per (token, rule) pair, so count distinct pairs by
     * noting the last rule seen for each token. */
    uint32_t *last = malloc((nt ? nt : 1) * sizeof *last);
    if (!last) goto nomem;
    memset(last, 0, (nt ? nt : 1) * sizeof *last);
    for (uint32_t r = 1; r < nr; r++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s = b[i];
            if (s >= nt) {
                w->par_at[s - nt + 1]++;
            } else if (last[s] != r) {
                last[s] = r;
                w->w2r_at[s + 1]++;
            }
        }
    }
    for (size_t t = 0; t < nt; t++)
        w->w2r_at[t + 1] += w->w2r_at[t];
    for (size_t r = 0; r < nr; r++)
        w->par_at[r + 1] += w->par_at[r];
    w->w2r_rule = malloc((w->w2r_at[nt] ? w->w2r_at[nt] : 1) * sizeof *w->w2r_rule);
    w->w2r_cnt = malloc((w->w2r_at[nt] ? w->w2r_at[nt] : 1) * sizeof *w->w2r_cnt);
    w->par = malloc((w->par_at[nr] ? w->par_at[nr] : 1) * sizeof *w->par);
    uint64_t *wf = calloc(nt + 1, sizeof *wf), *pf = calloc(nr + 1, sizeof *pf);
    if (!w->w2r_rule || !w->w2r_cnt || !w->par || !wf || !pf) {
        free(last);
        free(wf);
        free(pf);
        goto nomem;
    }
    memset(last, 0, (nt ? nt : 1) * sizeof *last);
    for (uint32_t r = 1; r < nr; r++) {
        uint64_t n;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s = b[i];
            if (s >= nt) {
                w->par[w->par_at[s - nt] + pf[s - nt]++] = r;
            } else if (last[s] != r) {
                last[s] = r;
                uint64_t k = w->w2r_at[s] + wf[s]++;
                w->w2r_rule[k] = r;
                w->w2r_cnt[k] = 1;
            } else {
                w->w2r_cnt[w->w2r_at[s] + wf[s] - 1]++;
            }
        }
    }
    free(last);
    free(wf);
    free(pf);
    *out = w;
    return 0;
nomem:
    idx_words_free(w);
    return tdc_error(-ENOMEM, "word index: out of memory");
}

static void next_gen(idx_words *w)
{
    if (++w->gen == 0) { /* wrapped: clear the stamps */
        memset(w->stamp, 0, ((size_t)w->a->g.nrules + 1) * sizeof *w->stamp);
        w->gen = 1;
    }
}

/* The file's way: every rule reachable from run[0..len) gets stamp == gen and cnt = the
 * occurrences of token t in its expansion (maybe 0), by a memoized depth-first walk. Its
 * cost is the size of the file's part of the DAG, whatever the word. */
static int mark_file(idx_words *w, uint32_t t, const uint32_t *run, uint64_t len)
{
    const gram *g = &w->a->g;
    const uint32_t nt = g->ntokens;
    vec32 rs = {0};
    vec64 is = {0};
    int rc = 0;
    next_gen(w);
    for (uint64_t j = 0; j < len && !rc; j++) {
        if (run[j] < nt || w->stamp[run[j] - nt] == w->gen) continue;
        uint32_t c = run[j] - nt;
        w->stamp[c] = w->gen;
        w->cnt[c] = 0;
        if (vec32_push(&rs, c) || vec64_push(&is, 0)) rc = -ENOMEM;
        while (!rc && rs.n) {
            uint32_t r = rs.p[rs.n - 1];
            uint64_t n, i = is.p[is.n - 1];
            const uint32_t *b = gram_body(g, r, &n);
            for (; i < n; i++) {
                uint32_t s = b[i];
                if (s == t) {
                    w->cnt[r]++;
                } else if (s >= nt) {
                    if (w->stamp[s - nt] != w->gen) break; /* a DAG: stamped means finished */
                    w->cnt[r] += w->cnt[s - nt];
                }
            }
            if (i == n) {
                rs.n--;
                is.n--;
                if (rs.n) w->cnt[rs.p[rs.n - 1]] += w->cnt[r];
                continue;
            }
            is.p[is.n - 1] = i + 1;
            c = b[i] - nt;
            w->stamp[c] = w->gen;
            w->cnt[c] = 0;
            if (vec32_push(&rs, c) || vec64_push(&is, 0)) rc = -ENOMEM;
        }
    }
    vec32_free(&rs);
    vec64_free(&is);
    return rc;
}

/* Stamp (== gen) every rule whose expansion holds token t and compute its occurrence count
 * there (cnt), children first: the rules of word2rule and their ancestors, breadth first.
 * A frequent word has ancestors all over the grammar: once they outnumber `budget`, the
 * walk gives up and the file's way (mark_file over run[0..len)) is taken instead. */
static int mark(idx_words *w, uint32_t t, const uint32_t *run, uint64_t len, uint64_t budget)
{
    const gram *g = &w->a->g;
    w->marked.n = 0;
    next_gen(w);
    if (w->w2r_at[t + 1] - w->w2r_at[t] > budget) return mark_file(w, t, run, len);
    for (uint64_t k = w->w2r_at[t]; k < w->w2r_at[t + 1]; k++) {
        uint32_t r = w->w2r_rule[k];
        w->stamp[r] = w->gen;
        if (vec32_push(&w->marked, r)) return -ENOMEM;
    }
    for (size_t j = 0; j < w->marked.n; j++) { /* ancestors, breadth first */
        uint32_t r = w->marked.p[j];
        for (uint64_t k = w->par_at[r]; k < w->par_at[r + 1]; k++) {
            uint32_t p = w->par[k];
            if (w->stamp[p] == w->gen) continue;
            w->stamp[p] = w->gen;
            if (vec32_push(&w->marked, p)) return -ENOMEM;
        }
        if (w->marked.n > budget) return mark_file(w, t, run, len);
    }
    gram_sort_topo(w->pos, w->marked.p, w->marked.n, 0);
    for (size_t j = 0; j < w->marked.n; j++) {
        uint32_t r = w->marked.p[j];
        uint64_t n, c = 0;
        const uint32_t *b = gram_body(g, r, &n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t s = b[i];
            if (s == t)
                c++;
            else if (s >= g->ntokens && w->stamp[s - g->ntokens] == w->gen)
                c += w->cnt[s - g->ntokens];
        }
        w->cnt[r] = c;
    }
    return 0;
}

/* Token id of a whole word, or -ENOENT when the dictionary does not hold it as a word. */
static int word_token(const idx_words *w, const char *word, size_t n, uint32_t *t)
{
    /* longer words are cut across tokens (long_word) */
    if (n >= TOK_CAP || !tok_is_word(word, n)) return -ENOENT;
    return dict_find(w->a->dict, (const unsigned char *)word, n, t);
}

/* 1 when the word is counted from the file's text (scan_long) rather than from its token: a
 * word the tokenizer cuts across tokens (TOK_CAP word bytes or more; a word of exactly
 * TOK_CAP bytes is one token, but so is each full piece of a longer one), and any word of a
 * grammar that holds a cut word, whose last piece (a token of its own) a short word's token
 * cannot be told from. */
static int by_text(const idx_words *w, const char *word, size_t n)
{
    return (n >= TOK_CAP || w->cut) && tok_is_word(word, n);
}

/* Occurrences of a word (by_text) in entry `ent`: the file's text is read through a cursor,
 * block by block, and every maximal run of word bytes equal to it counts (with its offset
 * when out is not NULL). Cut words are rare and the read is the one a `grep -w` would make. */
static int scan_long(const idx_words *w, uint32_t ent, const char *word, size_t n, uint64_t *count,
                     vec64 *out)
{
    enum { BLK = 1 << 16 };
    unsigned char *b = malloc(BLK);
    idx_cursor c;
    idx_cursor_init(&c);
    uint64_t off = 0, start = 0, run = 0;
    int same = 0, rc = b ? 0 : -ENOMEM;
    ssize_t k = 0;
    *count = 0;
    /* a run ends at a separator byte or at the end of the file (k == 0) */
    for (int end = 0; !rc && !end; off += (uint64_t)k) {
        if ((k = b ? idx_read(w->x, &c, ent, off, b, BLK) : 0) < 0) {
            rc = (int)k;
            break;
        }
        end = k == 0;
        for (ssize_t i = 0; i < k + end && !rc; i++) {
            if (i < k && tok_is_word_byte(b[i])) {
                if (!run) start = off + (uint64_t)i, same = 1;
                same = same && run < n && (unsigned char)word[run] == b[i];
                run++;
                continue;
            }
            if (run == n && same) {
                (*count)++;
                if (out && vec64_push(out, start)) rc = -ENOMEM;
            }
            run = 0;
        }
    }
    idx_cursor_free(&c);
    free(b);
    return rc == -ENOMEM ? tdc_error(rc, "word index: out of memory") : rc;
}

/* Start a query: check the entry, find the word's token, take the lock and mark the rules
 * holding it (all over the grammar, or within the file's rules when that is cheaper). Returns 1
 * with the lock held when there is something to look for, 0 when the word is counted from the
 * text (by_text) or is not in the dictionary (no occurrences), or a negative error. */
static int begin(idx_words *w, uint32_t ent, const char *word, size_t n, uint32_t *t)
{
    if (ent >= w->a->nents || w->a->ents[ent].type != ARC_REG)
        return tdc_error(-EINVAL, "entry %u is not a regular file", ent);
    int rc = arc_entry_damaged(w->a, ent); /* its run is a stand-in's: no answer to give */
    if (rc) return rc;
    if (by_text(w, word, n) || word_token(w, word, n, t)) return 0;
    const arc_entry *f = &w->a->ents[arc_ino_entry(w->a, w->a->ents[ent].ino)];
    pthread_mutex_lock(&w->lock);
    /* The budget: about what the file's way costs (its part of the DAG is a few rules per
     * root symbol). */
    if (mark(w, *t, w->a->g.root.p + f->root_start, f->root_len, 4 * f->root_len + 256)) {
        pthread_mutex_unlock(&w->lock);
        return tdc_error(-ENOMEM, "word index: out of memory");
    }
    return 1;
}

int idx_count(idx_words *w, uint32_t ent, const char *word, size_t n, uint64_t *count)
{
    const gram *g = &w->a->g;
    uint32_t t;
    *count = 0;
    int rc = begin(w, ent, word, n, &t);
    if (!rc && by_text(w, word, n)) return scan_long(w, ent, word, n, count, NULL);
    if (rc <= 0) return rc;
    const arc_entry *f = &w->a->ents[arc_ino_entry(w->a, w->a->ents[ent].ino)];
    for (uint64_t i = f->root_start; i < f->root_start + f->root_len; i++) {
        uint32_t s = g->root.p[i];
        if (s == t)
            (*count)++;
        else if (s >= g->ntokens && w->stamp[s - g->ntokens] == w->gen)
            *count += w->cnt[s - g->ntokens];
    }
    pthread_mutex_unlock(&w->lock);
    return 0;
}

int idx_search(idx_words *w, uint32_t ent, const char *word, size_t n, vec64 *out)
{
    const gram *g = &w->a->g;
    uint32_t t;
    uint64_t nlong;
    int rc = begin(w, ent, word, n, &t);
    if (!rc && by_text(w, word, n)) return scan_long(w, ent, word, n, &nlong, out);
    if (rc <= 0) return rc;
    rc = 0;
    /* Depth-first over the file, descending only into rules that hold the word. */
    const arc_entry *f = &w->a->ents[arc_ino_entry(w->a, w->a->ents[ent].ino)];
    vec32 rs = {0};
    vec64 is = {0};
    uint64_t off = 0;
    if (vec32_push(&rs, 0) || vec64_push(&is, f->root_start)) rc = -ENOMEM;
    while (!rc && rs.n) {
        uint64_t nb, i = is.p[is.n - 1];
        const uint32_t *b = gram_body(g, rs.p[rs.n - 1], &nb);
        if (rs.n == 1) nb = f->root_start + f->root_len;
        if (i == nb) {
            rs.n--;
            is.n--;
            continue;
        }
        is.p[is.n - 1] = i + 1;
        uint32_t s = b[i];
        if (s < g->ntokens) {
            size_t l;
            dict_bytes(w->a->dict, s, &l);
            if (s == t) rc = vec64_push(out, off);
            off += l;
        } else if (w->stamp[s - g->ntokens] == w->gen && w->cnt[s - g->ntokens]) {
            if (vec32_push(&rs, s - g->ntokens) || vec64_push(&is, 0)) rc = -ENOMEM;
        } else {
            off += idx_rule_len(w->x, s - g->ntokens);
        }
    }
    vec32_free(&rs);
    vec64_free(&is);
    pthread_mutex_unlock(&w->lock);
    return rc ? tdc_error(rc, "word index: out of memory") : 0;
}
