/* ana_shards: analytics shard by shard (ana_shards.h). */
#include "ana_shards.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analytics.h"
#include "../base/err.h"
#include "../base/par.h"

/* ---- the words at the ends of a run ---- */

typedef struct frame {
    const uint32_t *body;
    uint64_t n, i; /* symbols, and the next to take (forward) or the ones left (backward) */
} frame;

typedef struct walker {
    const gram *g;
    const dict *d;
    frame *f;
    size_t nf, cap;
} walker;

static int push(walker *w, const uint32_t *body, uint64_t n, int back)
{
    if (w->nf == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        frame *f = realloc(w->f, cap * sizeof *f);
        if (!f) return -ENOMEM;
        w->f = f;
        w->cap = cap;
    }
    w->f[w->nf++] = (frame){body, n, back ? n : 0};
    return 0;
}

/* The next token of the run, forward or backward (UINT32_MAX at its end). */
static int next_token(walker *w, int back, uint32_t *tok)
{
    while (w->nf) {
        frame *f = &w->f[w->nf - 1];
        if (back ? !f->i : f->i == f->n) {
            w->nf--;
            continue;
        }
        uint32_t s = back ? f->body[--f->i] : f->body[f->i++];
        if (!gram_is_rule(w->g, s)) {
            *tok = s;
            return 0;
        }
        uint64_t n;
        const uint32_t *b = gram_body(w->g, s - w->g->ntokens, &n);
        if (push(w, b, n, back)) return -ENOMEM;
    }
    *tok = UINT32_MAX;
    return 0;
}

/* Up to `want` whole words from one end of run [start, start + len) of p's root, each
 * followed by a space, in the run's order, into out (*nw of them); *edge: whether the token at
 * that end is a word; *last (forward only, when the walk reached the run's end): whether the
 * final token is a word. Returns 1 when the run holds more words than taken, 0, or -ENOMEM. */
static int end_words(const arc *p, uint64_t start, uint64_t len, int back, uint32_t want,
                     buf *out, uint32_t *nw, int *edge, int *last)
{
    walker w = {.g = &p->g, .d = p->dict};
    buf word = {0};
    int rc = push(&w, p->g.root.p + start, len, back), in_word = 0, more = 0, seen = 0, kind = 0;
    size_t from = out->n;
    *nw = 0;
    while (!rc) {
        uint32_t t;
        if ((rc = next_token(&w, back, &t))) break;
        int is_word = t != UINT32_MAX && dict_is_word(w.d, t);
        if (t != UINT32_MAX && !seen++) *edge = is_word;
        if (t != UINT32_MAX) kind = is_word;
        if (is_word) {
            size_t n;
            const unsigned char *b = dict_bytes(w.d, t, &n);
            if (back)
                for (size_t i = n; i-- > 0 && !rc;)
                    rc = buf_put(&word, b + i, 1);
            else
                rc = buf_put(&word, b, n);
            in_word = 1;
            continue;
        }
        if (in_word) {
            if (*nw == want) { /* a word past those wanted */
                more = 1;
                break;
            }
            if (back)
                for (size_t i = 0; i < word.n / 2; i++) {
                    unsigned char c = word.p[i];
                    word.p[i] = word.p[word.n - 1 - i];
                    word.p[word.n - 1 - i] = c;
                }
            rc = buf_put(out, word.p, word.n) || buf_put(out, " ", 1) ? -ENOMEM : 0;
            ++*nw;
            word.n = 0;
            in_word = 0;
        }
        if (t == UINT32_MAX) {
            if (last) *last = kind;
            break;
        }
    }
    if (!rc && back) { /* taken last word first: put the words in the run's order */
        buf r = {0};
        const unsigned char *s = out->p + from, *e = out->p + out->n;
        while (!rc && e > s) {
            const unsigned char *q = e - 1; /* the space after the word */
            while (q > s && q[-1] != ' ')
                q--;
            rc = buf_put(&r, q, (size_t)(e - q));
            e = q;
        }
        if (!rc) memcpy(out->p + from, r.p, r.n);
        buf_free(&r);
    }
    free(w.f);
    buf_free(&word);
    return rc ? -ENOMEM : more;
}

int ana_piece_edge(const arc *p, uint32_t ent, uint32_t file, uint32_t part, ana_edge *e)
{
    const arc_entry *x = &p->ents[ent];
    memset(e, 0, sizeof *e);
    e->file = file;
    e->part = part;
    int rc = end_words(p, x->root_start, x->root_len, 0, 4, &e->words, &e->nw, &e->word_first,
                       &e->word_last);
    e->whole = rc == 0;
    if (rc == 1) { /* five words or more: the first two and the last two */
        uint32_t n = 0;
        size_t cut = 0;
        while (n < 2)
            if (e->words.p[cut++] == ' ') n++;
        e->words.n = cut;
        rc = end_words(p, x->root_start, x->root_len, 1, 2, &e->words, &n, &e->word_last, NULL);
        e->nw = 4;
    }
    if (rc < 0) {
        buf_free(&e->words);
        return tdc_error(-ENOMEM, "analytics: out of memory");
    }
    return 0;
}

/* ---- the shards, on worker threads ---- */

/* A file of the scope whose content spans shards [first, last]. */
typedef struct wide {
    uint32_t ent, rank, first, last;
} wide;

typedef struct job {
    ana_ctx *ctx; /* each shard's analytic: the caller's options on one thread, nothing kept */
    ana_part_fn fn; /* or this, with arg */
    void *arg;
    int kind;
    const arc *meta;
    uint32_t first, end;
    const unsigned char *vis;
    const uint32_t *todo; /* the shards to work on */
    uint32_t ntodo;
    const wide *wide;
    size_t nwide;
    ana_merge *m;
    char **damage; /* per shard of meta: why it could not be loaded */
    pthread_mutex_t lock;
    uint32_t next;
    int rc;
    char msg[512];
} job;

static void job_fail(job *j, int rc)
{
    pthread_mutex_lock(&j->lock);
    if (!j->rc) {
        j->rc = rc;
        snprintf(j->msg, sizeof j->msg, "%s", tdc_errmsg());
    }
    pthread_mutex_unlock(&j->lock);
}

/* Shard k: its output and the edges of the wide files in it, into the merge. */
static int do_shard(job *j, uint32_t k)
{
    arc *p;
    int rc = arc_open_piece(j->meta, k, &p);
    if (rc == -EBADMSG) { /* whether it matters depends on the files (damage_check) */
        pthread_mutex_lock(&j->lock);
        j->damage[k] = strdup(tdc_errmsg());
        pthread_mutex_unlock(&j->lock);
        return j->damage[k] ? 0 : tdc_error(-ENOMEM, "out of memory");
    }
    if (rc) return tdc_error_ctx(rc, "%s", j->meta->path);
    buf part = {0};
    size_t ne = 0;
    ana_edge *e = calloc(j->nwide ? j->nwide : 1, sizeof *e);
    if (!e)
        rc = tdc_error(-ENOMEM, "out of memory");
    else if (j->fn)
        rc = j->fn(j->arg, j->kind, p, j->first, j->end, j->vis, &part);
    else
        rc = ana_table[j->kind].cpu(j->ctx, p, j->first, j->end, j->vis, &part);
    for (size_t i = 0; !rc && i < j->nwide; i++)
        if (j->wide[i].first <= k && k <= j->wide[i].last && p->ents[j->wide[i].ent].root_len &&
            !(rc = ana_piece_edge(p, j->wide[i].ent, j->wide[i].rank, k, &e[ne])))
            ne++;
    arc_piece_free(p);
    if (!rc) rc = ana_merge_part(j->m, &part);
    for (size_t i = 0; !rc && i < ne; i++)
        rc = ana_merge_edge(j->m, &e[i]);
    for (size_t i = 0; i < ne; i++)
        buf_free(&e[i].words);
    free(e);
    buf_free(&part);
    return rc;
}

static void *worker(void *arg)
{
    job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint32_t i = j->rc ? j->ntodo : j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->ntodo) return NULL;
        int rc = do_shard(j, j->todo[i]);
        if (rc) job_fail(j, rc);
    }
}

/* The entry holding regular entry e's content (its first name), or e. */
static uint32_t holder(const arc *a, uint32_t e)
{
    int64_t h = arc_ino_entry(a, a->ents[e].ino);
    return h >= 0 ? (uint32_t)h : e;
}

/* What the scope needs: the shards holding its visible files' content (*todo; with take, only
 * those it marks), and the files whose content spans shards (*wide, with their ranks in the
 * scope). */
static int plan(const arc *a, const vec32 *files, const unsigned char *take, vec32 *todo,
                wide **wd, size_t *nwide)
{
    unsigned char *need = calloc(a->nshards, 1);
    *wd = calloc(files->n ? files->n : 1, sizeof **wd);
    *nwide = 0;
    if (!need || !*wd) {
        free(need);
        return tdc_error(-ENOMEM, "out of memory");
    }
    for (size_t r = 0; r < files->n; r++) {
        uint32_t e = files->p[r], f, l;
        arc_entry_shards(a, holder(a, e), &f, &l);
        if (!a->ents[holder(a, e)].root_len) continue;
        memset(need + f, 1, l - f + 1);
        if (f != l && a->ents[e].root_len) (*wd)[(*nwide)++] = (wide){e, (uint32_t)r, f, l};
    }
    int rc = 0;
    for (uint32_t k = 0; k < a->nshards && !rc; k++)
        if (need[k] && (!take || take[k]) && vec32_push(todo, k))
            rc = tdc_error(-ENOMEM, "out of memory");
    free(need);
    return rc;
}

typedef struct sized {
    uint64_t bytes;
    uint32_t k;
} sized;

static int by_bytes_desc(const void *x, const void *y)
{
    const sized *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return (a->k > b->k) - (a->k < b->k);
}

int ana_shards_deal(const arc *meta, uint32_t first, uint32_t end, const unsigned char *vis,
                    int n, int *owner)
{
    vec32 files = {0}, todo = {0};
    wide *wd = NULL;
    size_t nw;
    int rc = ana_scope_files(meta, first, end, vis, &files) ? tdc_error(-ENOMEM, "out of memory")
                                                            : plan(meta, &files, NULL, &todo, &wd, &nw);
    sized *s = rc ? NULL : malloc((todo.n ? todo.n : 1) * sizeof *s);
    uint64_t *load = rc ? NULL : calloc((size_t)(n > 0 ? n : 1), sizeof *load);
    if (!rc && (!s || !load)) rc = tdc_error(-ENOMEM, "out of memory");
    for (uint32_t k = 0; k < meta->nshards; k++)
        owner[k] = -1;
    for (size_t i = 0; !rc && i < todo.n; i++)
        s[i] = (sized){meta->shards[todo.p[i]].bytes, todo.p[i]};
    if (!rc) sort_n(s, todo.n, sizeof *s, by_bytes_desc);
    for (size_t i = 0; !rc && i < todo.n; i++) {
        int best = 0;
        for (int r = 1; r < n; r++)
            if (load[r] < load[best]) best = r;
        owner[s[i].k] = best;
        load[best] += s[i].bytes;
    }
    free(s);
    free(load);
    free(wd);
    vec32_free(&files);
    vec32_free(&todo);
    return rc;
}

/* The error of the whole archive's load for this scope: the first visible file (in entry
 * order) whose content lies in a damaged shard, named with the first such shard. */
static int damage_check(const job *j)
{
    const arc *a = j->meta;
    for (uint32_t e = j->first; e < j->end; e++) {
        if (a->ents[e].type != ARC_REG || !ana_visible(j->vis, e)) continue;
        uint32_t f, l;
        arc_entry_shards(a, holder(a, e), &f, &l);
        if (!a->ents[holder(a, e)].root_len) continue;
        for (uint32_t k = f; k <= l; k++)
            if (j->damage[k])
                return tdc_error_ctx(arc_damage_error(a, e, k, j->damage[k]), "%s",
                                     ana_table[j->kind].name);
    }
    return 0;
}

int ana_by_shard(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                 uint32_t first, uint32_t end, const unsigned char *vis, buf *out)
{
    return ana_by_shard_share(c, fn, arg, kind, meta, first, end, vis, NULL, out);
}

void ana_share_free(ana_share *sh)
{
    for (size_t i = 0; i < sh->nedges; i++)
        buf_free(&sh->edges[i].words);
    free(sh->edges);
    sh->edges = NULL;
    sh->nedges = 0;
}

int ana_by_shard_share(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                       uint32_t first, uint32_t end, const unsigned char *vis, ana_share *sh,
                       buf *out)
{
    if (kind < 0 || kind >= ANA_NIDS) return tdc_error(-EINVAL, "unknown analytic %d", kind);
    if (first > end || end > meta->nents) return tdc_error(-EINVAL, "analytics: bad scope");
    job j = {.fn = fn, .arg = arg, .kind = kind, .meta = meta, .first = first, .end = end,
             .vis = vis};
    vec32 files = {0}, todo = {0};
    wide *wd = NULL;
    int rc = ana_merge_new(kind, meta, first, end, vis, &j.m);
    if (!rc) rc = ana_scope_files(meta, first, end, vis, &files) ? -ENOMEM : 0;
    if (!rc) rc = plan(meta, &files, sh ? sh->take : NULL, &todo, &wd, &j.nwide);
    ana_opts o = *ana_ctx_opts(c);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nth = o.shards > 0 ? (uint32_t)o.shards : cpus > 1 ? (uint32_t)cpus : 1;
    if (nth > todo.n) nth = (uint32_t)todo.n;
    o.cache = 0; /* every shard is another grammar */
    if (nth > 1) o.threads = 1;
    if (!rc && (!(j.ctx = ana_ctx_new(&o)) || !(j.damage = calloc(meta->nshards, sizeof *j.damage))))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) {
        j.todo = todo.p;
        j.ntodo = (uint32_t)todo.n;
        j.wide = wd;
        pthread_mutex_init(&j.lock, NULL);
        par_run(nth ? nth : 1, worker, &j, 0);
        pthread_mutex_destroy(&j.lock);
        rc = j.rc ? tdc_error(j.rc, "%s", j.msg) : damage_check(&j);
    }
    if (!rc && sh) ana_merge_take_edges(j.m, &sh->edges, &sh->nedges);
    if (!rc) rc = ana_merge_finish(j.m, out);
    for (uint32_t k = 0; j.damage && k < meta->nshards; k++)
        free(j.damage[k]);
    free(j.damage);
    ana_ctx_free(j.ctx);
    ana_merge_free(j.m);
    vec32_free(&files);
    vec32_free(&todo);
    free(wd);
    return rc;
}
