/* ana_shards: analytics shard by shard (ana_shards.h). */
#include "ana_shards.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ana_int.h"
#include "analytics.h"
#include "../base/err.h"
#include "../base/par.h"

/* ---- the words at the ends of a piece ---- */

/* Whether the first (or `last`) token of root run [start, start + len) is a word. */
static int end_is_word(const arc *p, uint64_t start, uint64_t len, int last)
{
    const gram *g = &p->g;
    uint32_t s = g->root.p[last ? start + len - 1 : start];
    while (s >= g->ntokens) {
        uint64_t n;
        const uint32_t *b = gram_body(g, s - g->ntokens, &n);
        if (!n) return 0;
        s = b[last ? n - 1 : 0];
    }
    return dict_is_word(p->dict, s);
}

/* Words taken at one end of a run (ana_run_words), each followed by a space, up to `want`:
 * the walk stops (MORE) at the word after them. */
typedef struct ends {
    const arc *p;
    buf *out;
    uint32_t n, want;
} ends;

#define MORE 1

static int take_word(void *ctx, uint32_t tok, const unsigned char *w, size_t n)
{
    ends *c = ctx;
    if (c->n == c->want) return MORE;
    if (tok != UINT32_MAX) w = dict_bytes(c->p->dict, tok, &n);
    c->n++;
    return buf_put(c->out, w, n) || buf_put(c->out, " ", 1) ? -ENOMEM : 0;
}

/* The edge (ana_merge.h) of file entry `ent`'s content in piece p (arc_open_piece of shard
 * `part`), for the file of rank `file` in the scope. */
static int piece_edge(const arc *p, uint32_t ent, uint32_t file, uint32_t part, ana_edge *e)
{
    const arc_entry *x = &p->ents[ent];
    *e = (ana_edge){.file = file, .part = part,
                    .word_first = end_is_word(p, x->root_start, x->root_len, 0),
                    .word_last = end_is_word(p, x->root_start, x->root_len, 1)};
    ends c = {p, &e->words, 0, 4};
    int rc = ana_run_words(p, x->root_start, x->root_len, 0, take_word, &c);
    e->nw = c.n;
    e->whole = rc == 0;
    if (rc == MORE) { /* five words or more: the first two, then the last two */
        buf last = {0};
        ends t = {p, &last, 0, 2};
        size_t cut = 0;
        for (int sp = 0; sp < 2; cut++)
            sp += e->words.p[cut] == ' ';
        e->words.n = cut;
        rc = ana_run_words(p, x->root_start, x->root_len, 1, take_word, &t);
        /* taken last first: "w4 w3 " goes on as "w3 w4 " */
        const unsigned char *sp = memchr(last.p, ' ', last.n);
        if (rc >= 0)
            rc = buf_put(&e->words, sp + 1, last.n - (size_t)(sp + 1 - last.p)) ||
                         buf_put(&e->words, last.p, (size_t)(sp + 1 - last.p))
                     ? -ENOMEM
                     : 0;
        buf_free(&last);
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

/* A part: shards [first, last] of the archive, analysed as one grammar. */
typedef struct span {
    uint32_t first, last;
} span;

typedef struct job {
    ana_ctx *ctx; /* each shard's analytic: the caller's options on one thread, nothing kept */
    ana_part_fn fn; /* or this, with arg */
    void *arg;
    int kind;
    const arc *meta;
    uint32_t first, end;
    const unsigned char *vis;
    const span *todo; /* the parts to work on: consecutive shards each */
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

static int do_part_loaded(job *j, span t);

/* The part of piece p (shards t of meta): its output and the edges of the wide files cut
 * between it and another part, into the merge. */
static int piece_part(job *j, const arc *p, span t)
{
    buf part = {0};
    size_t ne = 0;
    ana_edge *e = calloc(j->nwide ? j->nwide : 1, sizeof *e);
    int rc = 0;
    if (!e)
        rc = tdc_error(-ENOMEM, "out of memory");
    else if (j->fn)
        rc = j->fn(j->arg, j->kind, p, j->first, j->end, j->vis, &part);
    else
        rc = ana_table[j->kind].cpu(j->ctx, p, j->first, j->end, j->vis, &part);
    if (rc == ANA_PART_SPLIT) { /* nothing of it goes to the merge */
        free(e);
        buf_free(&part);
        return rc;
    }
    for (size_t i = 0; !rc && i < j->nwide; i++) {
        const wide *w = &j->wide[i];
        int meets = w->first <= t.last && t.first <= w->last;
        int inside = t.first <= w->first && w->last <= t.last; /* no cut in this part */
        if (meets && !inside && p->ents[w->ent].root_len &&
            !(rc = piece_edge(p, w->ent, w->rank, t.first, &e[ne])))
            ne++;
    }
    if (!rc) rc = ana_merge_part(j->m, &part);
    for (size_t i = 0; !rc && i < ne; i++)
        rc = ana_merge_edge(j->m, &e[i]);
    for (size_t i = 0; i < ne; i++)
        buf_free(&e[i].words);
    free(e);
    buf_free(&part);
    return rc;
}

/* Each shard of part t as a part of its own. */
static int shard_by_shard(job *j, span t)
{
    int rc = 0;
    for (uint32_t k = t.first; !rc && k <= t.last; k++)
        rc = do_part_loaded(j, (span){k, k});
    return rc;
}

/* do_part's work once the budget, if any, has room for it. A part of several shards one of
 * which is damaged goes shard by shard instead, so that the damage is the shard's alone, as
 * does one the part function does not take whole (ANA_PART_SPLIT). */
static int do_part_loaded(job *j, span t)
{
    arc *p;
    int rc = arc_open_pieces(j->meta, t.first, t.last, &p);
    if (rc == -EBADMSG && t.first < t.last) return shard_by_shard(j, t);
    if (rc == -EBADMSG) { /* whether it matters depends on the files (damage_check) */
        pthread_mutex_lock(&j->lock);
        j->damage[t.first] = strdup(tdc_errmsg());
        pthread_mutex_unlock(&j->lock);
        return j->damage[t.first] ? 0 : tdc_error(-ENOMEM, "out of memory");
    }
    if (rc) return tdc_error_ctx(rc, "%s", j->meta->path);
    rc = piece_part(j, p, t);
    arc_piece_free(p);
    return rc == ANA_PART_SPLIT && t.first < t.last ? shard_by_shard(j, t) : rc;
}

uint64_t ana_shard_mem(const arc *meta, uint32_t k)
{
    return 2 * arc_shard_mem_estimate(meta, k);
}

/* What part t is expected to hold while analysed (ana_shard_mem of its shards). */
static uint64_t part_mem(const arc *meta, span t)
{
    uint64_t n = 0;
    for (uint32_t k = t.first; k <= t.last; k++)
        n += ana_shard_mem(meta, k);
    return n;
}

/* Part t: its output and the edges of the wide files in it, into the merge. */
static int do_part(job *j, span t)
{
    mbud *b = ana_ctx_opts(j->ctx)->budget;
    uint64_t need = b ? part_mem(j->meta, t) : 0;
    if (b) mbud_take(b, need, 1);
    int rc = do_part_loaded(j, t);
    if (b) mbud_give(b, need);
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
        int rc = do_part(j, j->todo[i]);
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

int ana_shards_deal(const arc *meta, uint32_t first, uint32_t end, const unsigned char *vis,
                    int n, int *owner)
{
    vec32 files = {0}, todo = {0};
    wide *wd = NULL;
    size_t nw;
    int rc = ana_scope_files(meta, first, end, vis, &files) ? tdc_error(-ENOMEM, "out of memory")
                                                            : plan(meta, &files, NULL, &todo, &wd, &nw);
    uint64_t *bytes = rc ? NULL : malloc((meta->nshards ? meta->nshards : 1) * sizeof *bytes);
    if (!rc && !bytes) rc = tdc_error(-ENOMEM, "out of memory");
    for (uint32_t k = 0; k < meta->nshards; k++) {
        owner[k] = -1;
        if (bytes) bytes[k] = meta->shards[k].bytes;
    }
    if (!rc && par_deal(todo.p, todo.n, bytes, n, owner)) rc = tdc_error(-ENOMEM, "out of memory");
    free(bytes);
    free(wd);
    vec32_free(&files);
    vec32_free(&todo);
    return rc;
}

/* The shards of todo (in order) gathered into parts (ana_opts.group_room) in *parts, *n of
 * them: as many as the room needs, at least group_min, each of about the same need, cut
 * where the shards needed are not consecutive, and a part closed before it would pass the
 * room or half the budget. */
static int group(const arc *meta, const ana_opts *o, const vec32 *todo, span **parts, uint32_t *n)
{
    span *t = malloc((todo->n ? todo->n : 1) * sizeof *t);
    if (!(*parts = t)) return tdc_error(-ENOMEM, "out of memory");
    uint64_t room = o->group_need ? o->group_room : 0, total = 0, host = UINT64_MAX, m = 1;
    for (size_t i = 0; room && i < todo->n; i++)
        total += o->group_need(meta, todo->p[i]);
    if (room) {
        m = (total + room - 1) / room;
        if (m < (uint64_t)o->group_min) m = (uint64_t)o->group_min;
    }
    if (room && o->budget) {
        mbud_stats st;
        mbud_get_stats(o->budget, &st);
        host = st.limit / 2;
    }
    uint32_t np = 0;
    uint64_t cum = 0, need = 0, mem = 0, was = 0;
    for (size_t i = 0; i < todo->n; i++) {
        uint32_t k = todo->p[i];
        uint64_t nk = room ? o->group_need(meta, k) : 0, mk = ana_shard_mem(meta, k);
        /* the share of the total this shard's middle falls in */
        uint64_t g =
            total ? (uint64_t)(((double)cum + (double)nk / 2) * (double)m / (double)total) : 0;
        cum += nk;
        if (np && room && t[np - 1].last + 1 == k && g == was && need <= room &&
            nk <= room - need && mem <= host && mk <= host - mem) {
            t[np - 1].last = k;
            need += nk;
            mem += mk;
        } else {
            t[np++] = (span){k, k};
            need = nk;
            mem = mk;
        }
        was = g;
    }
    *n = np;
    return 0;
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

static int by_shard(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                    uint32_t first, uint32_t end, const unsigned char *vis, ana_subset *sh,
                    ana_sink sink, void *sctx);

int ana_by_shard(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                 uint32_t first, uint32_t end, const unsigned char *vis, buf *out)
{
    return by_shard(c, fn, arg, kind, meta, first, end, vis, NULL, ana_sink_buf, out);
}

int ana_by_shard_to(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                    uint32_t first, uint32_t end, const unsigned char *vis, ana_sink sink,
                    void *sctx)
{
    return by_shard(c, fn, arg, kind, meta, first, end, vis, NULL, sink, sctx);
}

int ana_by_shard_subset(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                        uint32_t first, uint32_t end, const unsigned char *vis, ana_subset *sh,
                        ana_sink sink, void *sctx)
{
    return by_shard(c, fn, arg, kind, meta, first, end, vis, sh, sink, sctx);
}

void ana_subset_free(ana_subset *sh)
{
    for (size_t i = 0; i < sh->nedges; i++)
        buf_free(&sh->edges[i].words);
    free(sh->edges);
    sh->edges = NULL;
    sh->nedges = 0;
}

/* ana_opts.early: a shard's lines handed on before it is done, into the merge arg. */
static int early_part(void *arg, buf *text)
{
    return ana_merge_part(arg, text);
}

static int by_shard(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                    uint32_t first, uint32_t end, const unsigned char *vis, ana_subset *sh,
                    ana_sink sink, void *sctx)
{
    if (kind < 0 || kind >= ANA_NIDS) return tdc_error(-EINVAL, "unknown analytic %d", kind);
    if (first > end || end > meta->nents) return tdc_error(-EINVAL, "analytics: bad scope");
    job j = {.fn = fn, .arg = arg, .kind = kind, .meta = meta, .first = first, .end = end,
             .vis = vis};
    vec32 todo = {0};
    wide *wd = NULL;
    span *parts = NULL;
    uint32_t nparts = 0;
    ana_opts o = *ana_ctx_opts(c);
    int rc = ana_merge_new(kind, meta, first, end, vis, &j.m);
    if (!rc && o.spill_dir) ana_merge_spill(j.m, o.spill_dir, o.spill_at);
    if (!rc) rc = plan(meta, ana_merge_files(j.m), sh ? sh->take : NULL, &todo, &wd, &j.nwide);
    if (!rc) rc = group(meta, &o, &todo, &parts, &nparts);
    if (!rc && o.verbose && nparts < todo.n)
        fprintf(stderr, "tadoc: %s: %zu shards in %u parts\n", ana_table[kind].name, todo.n,
                nparts);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nth = o.shards > 0 ? (uint32_t)o.shards : cpus > 1 ? (uint32_t)cpus : 1;
    if (nth > nparts) nth = nparts;
    o.cache = 0; /* every shard is another grammar */
    if (nth > 1) o.threads = 1;
    /* A shard's analysis hands what it holds to the merge each time it passes an eighth of
     * the shard's share of the merge's memory (ana_opts.early): that is copied about four
     * times on the way (a table grown, its text, the merge's buckets and tables), and smaller
     * tables miss the cache less, which more than pays for the keys the merge sees twice. */
    if (o.spill_dir && nth) {
        o.early = early_part;
        o.early_arg = j.m;
        o.early_at = o.spill_at / nth / 8;
        if (o.early_at < ANA_MERGE_PART_MIN) o.early_at = ANA_MERGE_PART_MIN;
    }
    if (!rc && (!(j.ctx = ana_ctx_new(&o)) || !(j.damage = calloc(meta->nshards, sizeof *j.damage))))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) {
        j.todo = parts;
        j.ntodo = nparts;
        j.wide = wd;
        pthread_mutex_init(&j.lock, NULL);
        par_run(nth ? nth : 1, worker, &j, 0);
        pthread_mutex_destroy(&j.lock);
        /* Bounded (a spill file given): what the shards' analyses freed goes back to the
         * system before the merge, rather than staying resident in the allocator's arenas */
        if (o.spill_dir) malloc_trim(0);
        rc = j.rc ? tdc_error(j.rc, "%s", j.msg) : damage_check(&j);
    }
    if (!rc && sh) ana_merge_take_edges(j.m, &sh->edges, &sh->nedges);
    if (!rc) rc = ana_merge_finish_to(j.m, sink, sctx);
    if (!rc && o.verbose && ana_merge_spilled(j.m)) {
        uint64_t splits, widest;
        char batches[96] = ""; /* a list merge's: read back in batches */
        ana_merge_batches(j.m, &splits, &widest);
        if (widest)
            snprintf(batches, sizeof batches, "; batches of at most %llu bytes, %llu ranges split",
                     (unsigned long long)widest, (unsigned long long)splits);
        fprintf(stderr, "tadoc: %s: the merge went on in a file in %s (%llu bytes%s)\n",
                ana_table[kind].name, o.spill_dir, (unsigned long long)ana_merge_spilled(j.m),
                batches);
    }
    for (uint32_t k = 0; j.damage && k < meta->nshards; k++)
        free(j.damage[k]);
    free(j.damage);
    ana_ctx_free(j.ctx);
    ana_merge_free(j.m);
    vec32_free(&todo);
    free(parts);
    free(wd);
    return rc;
}
