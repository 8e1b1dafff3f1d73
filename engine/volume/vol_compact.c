/* vol_compact: fold a vol's journal into a new archive and switch to it, while reads and
 * changes go on.
 *
 * With changes held for a moment, the journal's end is noted and the model copied (the tree, and
 * each edited file's piece table, whose pieces point at bytes that no longer change): the
 * snapshot. Then, without locks, in this order of durable steps, so a crash or failure at any
 * point leaves either the old archive with its journal or the new archive with a journal
 * holding what was written since the snapshot: (1) the new archive, which records the old
 * one's identity as prev_id, is built from the snapshot and written to a temporary file
 * beside the old one and fsynced (arc_write_tmp); (2) the temporary file is opened by the
 * reader a mount uses (arc_open: every section and reference, the file table) and indexed,
 * its file table is compared with the build, and content is extracted and checked against
 * its hash: every file's, except, in a compaction shard by shard, the files the tables show
 * unchanged in shards copied as stored (check_new); any failure so far removes the temporary
 * file and leaves the old archive, its journal and the mount as they were; (3) the records
 * written since the snapshot are copied into the next journal (jrnl_next, bound to the new
 * archive) and replayed into a model of the new archive, the last of them with changes held,
 * and the next journal is fsynced; (4) the temporary file is renamed over the old archive
 * (arc_commit); (5) the next journal is renamed over the journal, and the vol switches to the
 * new archive, journal and model. A crash between (4) and (5) leaves a journal bound to
 * prev_id beside a next journal bound to the new archive, which jrnl_open takes as the
 * journal. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../build/compact.h"
#include "../build/compact_shards.h"
#include "../build/pack.h"
#include "../base/err.h"
#include "../base/fio.h"
#include "vol_int.h"

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct cctx cctx;

/* A reader of the snapshot: a build's, or one per compaction worker (compact_workers). */
typedef struct creader {
    cctx *c;
    vol_reader rd;
} creader;

struct cctx {
    vol *v;
    arc nw;
    arc_coded *sh; /* shard by shard (compact_shards): the shards' figures, in order */
    int grew;      /* shard by shard because the edits made a one-grammar archive large: the
                    * new archive is checked span by span and put in place unloaded, as under a
                    * budget, not loaded whole (many times its content) */
    uint32_t nsh;
    arc_sink sink; /* shard by shard: the temporary archive the shards go to as made */
    size_t cap;
    int64_t *src;
    uint64_t *ino; /* per new entry */
    creader *rds;  /* nrds of them, the first the build's own */
    unsigned nrds;
    int view; /* building a view (vol_view_open), not the archive's replacement */
    /* a view shard by shard, into a temporary archive beside this path (view_by_shards) */
    const char *view_at;
    int bg;   /* a background compaction (vol_compact_bg) */
    const arc *old; /* the archive compacted: v->a loaded, or under a budget `meta` */
    arc *meta;      /* a copy of v->a's file table alone, which a load cannot change */
    /* The snapshot the build reads, so that changes go on meanwhile: per new entry, for a
     * regular file whose content is not its archived one, a copy of its node (size, archive
     * entry, piece table), else NULL; and `first`, inode -> its first entry + 1. */
    vnode **snap;
    uint32_t nsnap;
    uint32_t *first;
    uint64_t jfrom, seq0; /* the journal's end and last record when the snapshot was taken */
};

static int read_new(void *p, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    creader *r = p;
    cctx *c = r->c;
    /* A mount closing stops a compaction (a huge file's can take long): it fails, as any
     * failure does, before anything is replaced. */
    if (__atomic_load_n(&c->v->stop, __ATOMIC_RELAXED))
        return tdc_error(-ECANCELED, "stopped: the volume is closing or a signal came");
    /* A file kept as archived: its entry in the old archive. */
    vnode kept = {.mode = S_IFREG, .ent = c->src[ent]};
    if (!c->snap[ent] && c->src[ent] < 0)
        return tdc_error(-EIO, "internal: no content for entry %u", ent);
    if (!c->snap[ent]) kept.size = c->old->ents[c->src[ent]].size;
    ssize_t k = vol_read_locked(c->v, &r->rd, c->snap[ent] ? c->snap[ent] : &kept, off, dst, n);
    if (k < 0) return (int)k;
    return (size_t)k == n ? 0 : tdc_error(-EIO, "file changed size while compacting");
}

/* How many leading bytes of new entry `ent` are its archived content's, unchanged, and
 * which old entry that is (compact_workers' prefix): the pieces its table begins with that
 * come from the archive at their own offsets. */
static uint64_t same_prefix(void *p, uint32_t ent, int64_t *old)
{
    const creader *r = p;
    const vnode *n = r->c->snap[ent];
    uint64_t end = 0;
    *old = -1;
    if (!n || !n->pt || n->ent < 0) return 0;
    for (size_t i = 0; i < n->pt->n; i++) {
        const pt_piece *pc = &n->pt->p[i];
        if (pc->kind != PT_BASE || pc->src != end) break;
        end = pc->end;
    }
    if (end) *old = n->ent;
    return end;
}

/* What reading node n's content needs, copied: the snapshot of a changed file. */
static vnode *snap_node(const vnode *n)
{
    vnode *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ino = n->ino;
    s->mode = n->mode;
    s->size = n->size;
    s->ent = n->ent;
    if (n->pt && (!(s->pt = malloc(sizeof *s->pt)) || pt_dup(n->pt, s->pt))) {
        free(s->pt);
        free(s);
        return NULL;
    }
    return s;
}

static void snap_free(vnode *s)
{
    if (!s) return;
    if (s->pt) pt_free(s->pt);
    free(s->pt);
    free(s);
}

/* Append the entry for node n at `path` (taken over), then its children, depth first in name
 * order, which is archive path order. `first` maps inode -> first entry index + 1. */
static int add_tree(cctx *c, const vnode *n, char *path, uint32_t *first)
{
    vol *v = c->v;
    if (c->nw.nents == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        arc_entry *e = realloc(c->nw.ents, cap * sizeof *e);
        int64_t *s = realloc(c->src, cap * sizeof *s);
        uint64_t *in = realloc(c->ino, cap * sizeof *in);
        vnode **sn = realloc(c->snap, cap * sizeof *sn);
        if (e) c->nw.ents = e;
        if (s) c->src = s;
        if (in) c->ino = in;
        if (sn) c->snap = sn;
        if (!e || !s || !in || !sn) {
            free(path);
            return -ENOMEM;
        }
        c->cap = cap;
    }
    uint32_t i = c->nw.nents;
    arc_entry *e = &c->nw.ents[i], tmp = {0};
    /* The entry owns copies of the node's link target and attributes, which change on. */
    tmp.link = n->link;
    tmp.xattrs = n->xa;
    tmp.nxattrs = n->nxa;
    tmp.path = path;
    int rc = arc_entry_copy(&tmp, e);
    free(path);
    c->snap[i] = NULL;
    c->nsnap = ++c->nw.nents;
    if (rc) return rc;
    path = e->path;
    e->type = arc_type_of_mode(n->mode);
    e->rdev = n->rdev;
    e->mode = n->mode & 07777;
    e->uid = n->uid;
    e->gid = n->gid;
    e->mtime_sec = n->mtime.tv_sec;
    e->mtime_nsec = (uint32_t)n->mtime.tv_nsec;
    e->atime_sec = n->atime.tv_sec;
    e->atime_nsec = (uint32_t)n->atime.tv_nsec;
    e->ctime_sec = n->ctime.tv_sec;
    e->ctime_nsec = (uint32_t)n->ctime.tv_nsec;
    e->size = n->size;
    e->ino = n->ino;
    c->ino[i] = n->ino;
    c->src[i] = -1;
    if (e->type == ARC_REG) {
        if (first[n->ino]) {
            c->src[i] = -2; /* its hash is the first name's, set once known */
        } else {
            first[n->ino] = i + 1;
            c->src[i] = !n->pt && n->ent >= 0 ? n->ent : -1;
            if (c->src[i] == -1 && !(c->snap[i] = snap_node(n))) return -ENOMEM;
        }
    }
    for (uint32_t k = 0; k < n->nkids && !rc; k++) {
        size_t lp = strlen(path), ln = strlen(n->kids[k].name);
        char *p = malloc(lp + ln + 2);
        if (!p) return -ENOMEM;
        sprintf(p, "%s%s%s", path, lp ? "/" : "", n->kids[k].name);
        rc = add_tree(c, vol_node(v, n->kids[k].ino), p, first);
    }
    return rc;
}

static void free_entries(cctx *c)
{
    for (uint32_t i = 0; i < c->nw.nents; i++)
        arc_entry_clear(&c->nw.ents[i]);
    for (uint32_t i = 0; i < c->nsnap; i++)
        snap_free(c->snap[i]);
    free(c->snap);
    c->snap = NULL;
    c->nsnap = 0;
    free(c->nw.ents);
    c->nw.ents = NULL;
    c->nw.nents = 0;
}

/* The snapshot of the model the build works from (c->nw's entries, c->src, c->ino,
 * c->snap, c->first): the tree below directory `top` (the root, 1, for a compaction), `top`
 * its root. Caller holds wlock (no changes) and the shared model lock. */
static int snapshot(vol *v, cctx *c, uint64_t top)
{
    char *root = strdup("");
    c->v = v;
    c->first = calloc(v->cap, sizeof *c->first);
    if (!root || !c->first) {
        free(root);
        return -ENOMEM;
    }
    int rc = add_tree(c, vol_node(v, top), root, c->first);
    /* A file kept as archived in a damaged shard: its run is a stand-in's, never copied. */
    for (uint32_t i = 0; !rc && i < c->nw.nents; i++)
        if (c->src[i] >= 0) rc = arc_entry_damaged(c->old, (uint32_t)c->src[i]);
    return rc;
}

/* How many shards a compaction builds at once (unless the options say): one a core, or for a
 * background compaction one on every other core (reads and changes keep the rest), as many
 * as the memory allows each (COMPACT_BUILD_MEM): under a budget the workers past the first
 * take their share of it (compact_workers), else a quarter of the machine's memory bounds
 * them. */
static unsigned build_workers(const vol *v, int bg, uint64_t each)
{
    if (v->o.compact_jobs) return v->o.compact_jobs;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t n = cpus > 1 ? (uint64_t)cpus : 1;
    if (bg && n > 1) n /= 2;
    if (!v->bud && pages > 0 && page > 0) {
        uint64_t fit = (uint64_t)pages * (uint64_t)page / 4 / each;
        if (fit < n) n = fit ? fit : 1;
    }
    return (unsigned)(n < 64 ? n : 64);
}

/* The snapshot's readers: n of them. */
static int make_readers(cctx *c, unsigned n)
{
    if (!(c->rds = calloc(n, sizeof *c->rds))) return tdc_error(-ENOMEM, "out of memory");
    c->nrds = n;
    for (unsigned t = 0; t < n; t++) {
        c->rds[t].c = c;
        vol_reader_init(&c->rds[t].rd);
    }
    return 0;
}

/* Build the new archive's dictionary and grammar from the snapshot into c->nw. Needs no
 * lock: the snapshot reads archived bytes and journal records that no longer change. */
static int build(vol *v, cctx *c, compact_stats *cs)
{
    unsigned flags = c->view ? 0 : COMPACT_MAY_REBUILD;
    uint64_t size = v->o.shard_size;
    int shards = c->view ? c->view_at != NULL : compact_by_shards(c->old, size);
    /* An archive small enough for one grammar that the edits make large (gigabytes written to
     * it): shard by shard too, at the shard size pack would choose for the new content, not
     * one grammar of everything in memory (about fifteen times the new content). */
    if (!shards && !c->view && c->old->version >= 4) {
        uint64_t total = 0;
        for (uint32_t i = 0; i < c->nw.nents; i++)
            if (c->nw.ents[i].type == ARC_REG) total += c->nw.ents[i].size;
        if (total > PACK_ONE_SHARD_MAX) {
            shards = c->grew = 1;
            if (!size) size = pack_shard_size(total);
        }
    }
    int rc;
    if (shards) {
        uint64_t each = COMPACT_BUILD_MEM(compact_shard_size(c->old, size));
        unsigned n = build_workers(v, c->bg, each);
        rc = make_readers(c, n);
        compact_workers cw = {c->rds, sizeof *c->rds, n, v->bud, each, same_prefix};
        if (!rc) rc = arc_sink_open(&c->sink, c->view_at ? c->view_at : v->path);
        if (!rc)
            rc = compact_shards(c->old, &c->nw, c->src, read_new, &cw, size, v->o.level, &c->sink,
                                cs, &c->sh, &c->nsh);
    } else {
        rc = make_readers(c, 1);
        if (!rc) rc = compact_build(c->old, &c->nw, c->src, read_new, &c->rds[0], flags, cs);
    }
    for (uint32_t i = 0; !rc && i < c->nw.nents; i++)
        if (c->src[i] == -2) c->nw.ents[i].hash = c->nw.ents[c->first[c->ino[i]] - 1].hash;
    return rc;
}

static void cctx_free(cctx *c)
{
    arc_sink_abort(&c->sink); /* a build that failed, or was not written */
    for (unsigned t = 0; t < c->nrds; t++)
        vol_reader_free(&c->rds[t].rd);
    free(c->rds);
    for (uint32_t k = 0; k < c->nsh; k++)
        arc_coded_free(&c->sh[k]);
    free(c->sh);
    arc_free(c->meta);
    dict_free(c->nw.dict);
    gram_free(&c->nw.g);
    free(c->nw.byino);
    free_entries(c);
    free(c->src);
    free(c->ino);
    free(c->first);
    memset(c, 0, sizeof *c);
}

/* Tell the test hook (vol_opts.compact_step) that `step` is done; its error aborts. */
static int step_done(vol *v, int step, const char *tmp)
{
    int rc = v->o.compact_step ? v->o.compact_step(v->o.step_ctx, step, tmp) : 0;
    return rc ? tdc_error(rc, "compaction stopped after step %d by the test hook", step) : 0;
}

/* Compare the new archive's file table `na` with what was built, and choose the files whose
 * content the check reads back. The entries must be those written (the same count and
 * paths), and a file whose content the model keeps as archived (c->src) must keep its old
 * size and hash: two kept files swapped in the table would each still agree with their own
 * hash. With `only`, *only receives a byte per entry: 0 for a kept file that the tables
 * show unchanged (arc_same_content: its run as long and at the same place, in shards stored
 * as the old archive stores them), 1 for every other file (new content, content moved into
 * rebuilt or new shards, and anything the tables do not show unchanged). */
static int check_table(const cctx *c, const arc *na, unsigned char **only)
{
    const arc *old = c->old;
    if (na->nents != c->nw.nents)
        return tdc_error(-EBADMSG, "the file table holds %u entries where %u were written",
                         na->nents, c->nw.nents);
    unsigned char *sel = only ? malloc(na->nents) : NULL;
    if (only && !sel) return tdc_error(-ENOMEM, "out of memory");
    for (uint32_t i = 0; i < na->nents; i++) {
        const arc_entry *e = &na->ents[i];
        int64_t o = c->src[i];
        int rc = 0;
        if (strcmp(e->path, c->nw.ents[i].path))
            rc = tdc_error(-EBADMSG, "file table entry %u is '%s' where '%s' was written", i,
                           e->path, c->nw.ents[i].path);
        else if (o >= 0 && (e->size != old->ents[o].size || e->hash != old->ents[o].hash))
            rc = tdc_error(-EBADMSG, "'%s' does not keep its archived content (size or hash)",
                           e->path);
        if (rc) {
            free(sel);
            return rc;
        }
        if (sel) sel[i] = o < 0 || !arc_same_content(old, (uint32_t)o, na, i);
    }
    if (only) *only = sel;
    return 0;
}

/* Open the freshly written archive `tmp` the way a mount does (every section against its
 * checksum, every shard decoded, the tables and runs checked, the index built, which checks
 * every file's size), check its file table against the build (check_table), and read back
 * content and check it against its hash: when the compaction went shard by shard from a
 * version 4 archive, only that of the files check_table does not show unchanged in shards
 * copied as stored (their bytes are the old archive's, whose content was checked when it
 * was written); else every file's. On success *na and *nx are the archive and its index.
 * What was read back is counted in st. */
static int check_new(vol *v, const cctx *c, const char *tmp, arc **na, idx **nx,
                     vol_compact_stats *st)
{
    uint64_t cache = v->o.cache_bytes ? v->o.cache_bytes : IDX_CACHE_DEFAULT;
    unsigned char *only = NULL;
    int rc = arc_open(tmp, na);
    for (uint32_t k = 0; !rc && k < (*na)->nshards; k++) /* damaged since it was written */
        if ((*na)->shards[k].damage) rc = tdc_error(-EBADMSG, "%s", (*na)->shards[k].damage);
    if (!rc) rc = idx_build_cached(*na, cache, nx);
    if (!rc) rc = check_table(c, *na, c->nsh && c->old->version >= 4 ? &only : NULL);
    double t0 = secs();
    if (!rc) rc = idx_check_content(*nx, only, NULL, NULL, &st->check_files, &st->check_bytes);
    st->check_read_s = secs() - t0;
    free(only);
    return rc ? tdc_error_ctx(rc, "checking the compacted archive before it replaces the old one")
              : 0;
}

/* check_new without the new archive in memory, for a compaction under a memory budget: its
 * file table alone (arc_open_meta checks the tables), compared with the build (check_table);
 * every section of every shard read back against its checksum, a shard at a time; and the
 * content of every file check_table does not show unchanged read back against its hash, a
 * span of shards at a time (idx_check_spans). *na is the new archive's file table. */
static int check_new_spans(const cctx *c, const char *tmp, arc **na,
                           vol_compact_stats *st)
{
    unsigned char *only = NULL;
    int rc = arc_open_meta(tmp, na);
    if (!rc) rc = check_table(c, *na, &only);
    for (uint32_t k = 0; !rc && k < (*na)->nshards; k++)
        rc = arc_shard_check(*na, k);
    double t0 = secs();
    idx_span_check sc = {0};
    if (!rc) rc = idx_check_spans(*na, only, &sc);
    st->check_files += sc.files;
    st->check_bytes += sc.bytes;
    st->check_read_s = secs() - t0;
    free(only);
    return rc ? tdc_error_ctx(rc, "checking the compacted archive before it replaces the old one")
              : 0;
}

/* Remember why the last compaction failed (vol_compact_error); "" after a success. */
static void note_result(vol *v, int rc)
{
    pthread_mutex_lock(&v->tlock);
    if (rc)
        snprintf(v->compact_err, sizeof v->compact_err, "%s", tdc_errmsg());
    else
        v->compact_err[0] = 0;
    pthread_mutex_unlock(&v->tlock);
}

/* Records written since the snapshot are copied while changes go on until fewer than this
 * many bytes of them are left, which are copied with changes held (at most TAIL_ROUNDS
 * rounds, each copying what came during the one before). */
#define TAIL_HELD ((uint64_t)1 << 20)
#define TAIL_ROUNDS 8

/* Copy the records written since the snapshot into the next journal jn and replay them into
 * w (the new archive's model), while changes go on. */
static int carry_tail(vol *v, jrnl_next *jn, vol *w)
{
    int rc = 0;
    for (int round = 0; !rc && round < TAIL_ROUNDS; round++) {
        vol_rdlock(v);
        uint64_t upto = jrnl_size(v->j);
        vol_unlock(v);
        if (upto - jn->from < TAIL_HELD) break;
        rc = jrnl_next_copy(v->j, jn, upto, vol_model_replay, w);
        /* synced now, so that the sync with changes held has only the last records to do */
        if (!rc) rc = jrnl_next_sync(jn);
    }
    return rc;
}

/* 0 when the archive's path still names the file v serves: one that a user put in its
 * place meanwhile, or its removal or move, is not overwritten by a compaction of the file
 * that is gone from there. */
static int still_there(const vol *v)
{
    struct stat a, p;
    if (fstat(v->a->fd, &a) < 0) return tdc_error(-errno, "%s: %s", v->path, strerror(errno));
    int gone = stat(v->path, &p) < 0;
    if (gone && errno != ENOENT) return tdc_error(-errno, "%s: %s", v->path, strerror(errno));
    if (gone || a.st_dev != p.st_dev || a.st_ino != p.st_ino)
        return tdc_error(-ESTALE,
                         "%s: the archive was replaced, moved or removed while in use: not "
                         "compacted (unmount; the edits are in the journal of the file it was)",
                         v->path);
    return 0;
}

/* Put the checked archive `tmp` (na: loaded whole with its index nx, or its file table alone)
 * in place, with the records written since the snapshot. With changes held: the last records
 * are copied into the next journal jn and replayed into w (the new archive's model, which
 * must hold every open inode), jn is synced, the archive renamed over the old one, jn over
 * the journal; the vol then switches to the new archive, journal and model. A failure before
 * the archive's rename leaves the old archive, journal and vol as they were (tmp removed;
 * the caller removes jn). Under a memory budget the vol goes back to reading shard by shard:
 * it takes the new archive's file table alone, and na, loaded whole for the check, is
 * dropped, so memory returns within the budget; what needs the whole archive loads it
 * again. 0 once the archive is renamed (na, nx and w are then taken over, and *after is
 * the test hook's error or the journal rename's, the switch made regardless), else the
 * failure. */
static int put_in_place(vol *v, const char *tmp, arc *na, idx *nx, vol *w, jrnl_next *jn,
                        int *after)
{
    arc *lazy = NULL, *smeta = NULL;
    int rc = 0;
    if (na->pending) /* checked span by span: its file table alone */
        lazy = na;
    else if (v->o.mem && v->o.lazy && na->version >= 4 && arc_open_meta(tmp, &lazy))
        lazy = NULL; /* keep na loaded */
    if (lazy) { /* opened as `tmp`: name it as it will be */
        char *path = strdup(v->path);
        if (path) { /* else its messages name the temporary file */
            free(lazy->path);
            lazy->path = path;
        }
    }
    if (lazy && arc_meta_dup(lazy, &smeta)) smeta = NULL; /* the first span opens it */
    vol_arc_wrlock(v); /* analytics end first: they hold the old archive */
    pthread_mutex_lock(&v->wlock);
    vol_wrlock(v);
    rc = jrnl_next_copy(v->j, jn, jrnl_size(v->j), vol_model_replay, w);
    if (!rc) rc = vol_model_check(v, w);
    if (!rc) rc = jrnl_next_sync(jn);
    if (!rc) rc = still_there(v);
    /* renamed but its directory not synced: reported once the switch is made, since a later
     * sync of the directory (the journal's rename) need not mean that one is on disk */
    int unsynced = 0;
    if (!rc && (rc = arc_commit(tmp, v->path)) > 0) unsynced = 1, rc = 0;
    if (rc) {
        vol_unlock(v);
        pthread_mutex_unlock(&v->wlock);
        vol_arc_wrunlock(v);
        if (lazy != na) arc_free(lazy);
        arc_free(smeta);
        return rc < 0 ? rc : -EIO;
    }
    /* The new archive is in place: switch to it whatever the test hook says. */
    *after = step_done(v, VOL_STEP_RENAMED, NULL);
    int jrc = jrnl_next_commit(v->j, jn); /* its message names the next journal */
    if (jrc && !*after)
        *after = tdc_error_ctx(jrc, "the archive is replaced, and its journal stays the next one");
    if (unsynced && !*after)
        *after = tdc_error(-EIO,
                           "%s: the archive is replaced, but its directory could not be "
                           "synced: it may not survive a crash until a sync succeeds",
                           v->path);
    /* A whole load another caller began meanwhile (vol_data: not under these locks) ends
     * first, since it works on v->a; the switch and the state change under dlock, so that the
     * next load takes the new archive. */
    pthread_mutex_lock(&v->dlock);
    while (lazy && v->dstate == 1)
        pthread_cond_wait(&v->dcond, &v->dlock);
    arc *oa = v->a;
    idx *ox = v->x;
    v->a = lazy ? lazy : na;
    v->x = lazy ? NULL : nx;
    if (lazy) {
        __atomic_store_n(&v->dstate, 0, __ATOMIC_RELEASE);
        free(v->dmsg); /* a failed load's message was the old archive's */
        v->dmsg = NULL;
    }
    pthread_mutex_unlock(&v->dlock);
    v->gen++;
    if (lazy) vol_spans_reset(v, smeta);
    vol_model_swap(v, w);
    v->compactions++;
    vol_unlock(v);
    pthread_mutex_unlock(&v->wlock);
    vol_arc_wrunlock(v);
    vol_model_free(w); /* the old model */
    backend_release(v->o.be, oa); /* its copy on the GPU, if any */
    idx_free(ox);
    arc_free(oa);
    if (lazy && lazy != na) {
        idx_free(nx);
        arc_free(na);
    }
    return 0;
}

/* 0, or -EBADMSG when a shard of the archive is damaged: a compaction would drop the files
 * it holds (or copy the damage), so none is made and the archive and journal stay. */
static int refuse_damaged(const arc *a)
{
    for (uint32_t k = 0; k < a->nshards; k++)
        if (a->shards[k].damage)
            return tdc_error(-EBADMSG,
                             "%s: not compacted: %s (its files cannot be read; the archive and "
                             "its journal are unchanged)",
                             a->path, a->shards[k].damage);
    return 0;
}

/* With changes held: choose what the build reads the old archive through, note the
 * journal's end and take the snapshot (c->jfrom and c->seq0 are where the journal stood). Under a
 * memory budget, with the archive not loaded: from its file table alone (a copy, which a load
 * meanwhile does not change), reading content shard by shard (the reads' spans), checked span
 * by span. Else from the archive loaded whole. Returns with changes going on again. */
static int take_snapshot(vol *v, cctx *c, vol_compact_stats *st)
{
    int rc;
    for (;;) {
        pthread_mutex_lock(&v->wlock);
        pthread_mutex_lock(&v->dlock);
        int ds = v->dstate;
        if (ds == 0 && v->o.mem && v->o.lazy && v->a->version >= 4 &&
            compact_by_shards(v->a, v->o.shard_size) && (rc = arc_meta_dup(v->a, &c->meta))) {
            pthread_mutex_unlock(&v->dlock);
            pthread_mutex_unlock(&v->wlock);
            return rc;
        }
        pthread_mutex_unlock(&v->dlock);
        if (ds == 2 || c->meta) break;
        pthread_mutex_unlock(&v->wlock);
        if ((rc = vol_data(v))) return rc;
    }
    c->old = c->meta ? c->meta : v->a;
    rc = v->broken ? tdc_error(-EIO, "changes are refused after an earlier failure; remount")
                   : refuse_damaged(c->old);
    if (!rc) {
        vol_wrlock(v);
        c->jfrom = jrnl_size(v->j);
        c->seq0 = jrnl_records(v->j);
        vol_unlock(v);
    }
    if (!rc) {
        vol_rdlock(v); /* reads go on */
        for (uint64_t i = 0; i < v->cap && !rc; i++)
            if (v->nodes[i] && v->nodes[i]->nlink == 0)
                rc = tdc_error(-EBUSY,
                               "a removed file is still open: compact again once it is closed");
        if (!rc) rc = snapshot(v, c, 1);
        vol_unlock(v);
    }
    pthread_mutex_unlock(&v->wlock);
    st->archive_before = c->old->file_size;
    st->rules_before = c->old->g.nrules;
    for (uint32_t k = 0; c->meta && k < c->old->nshards; k++)
        st->rules_before += c->old->shards[k].nrules;
    return rc;
}

/* A temporary archive of an edited directory's state (view_by_shards): its file table, the
 * directory and the state (vol_view.gen), and the references of the views using it and of
 * the vol that keeps it. */
struct vol_tview {
    arc *meta;
    uint64_t ino, state;
    int refs; /* atomic */
};

void vol_tview_put(struct vol_tview *t)
{
    if (t && __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        arc_free(t->meta);
        free(t);
    }
}

/* Drop the kept temporary archive (a compaction changed the state it shows). */
static void tview_drop(vol *v)
{
    pthread_mutex_lock(&v->tlock);
    struct vol_tview *t = v->tview;
    v->tview = NULL;
    pthread_mutex_unlock(&v->tlock);
    vol_tview_put(t);
}

/* The view of temporary archive t for its directory, with a reference. */
static void tview_use(struct vol_tview *t, vol_view *w)
{
    __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
    w->tv = t;
    w->own = t->meta;
    w->a = t->meta;
    w->ent = 0;
    w->gen = t->state;
}

/* The kept temporary archive as view w where it shows directory ino in `state` (1); else it is
 * dropped, its disk given back before another is written (0). */
static int tview_take(vol *v, uint64_t ino, uint64_t state, vol_view *w)
{
    struct vol_tview *stale = NULL;
    pthread_mutex_lock(&v->tlock);
    struct vol_tview *t = v->tview;
    int same = t && t->ino == ino && t->state == state;
    if (same) {
        tview_use(t, w);
    } else {
        stale = t;
        v->tview = NULL;
    }
    pthread_mutex_unlock(&v->tlock);
    vol_tview_put(stale);
    return same;
}

/* Keep the temporary archive `meta` (taken over) of directory ino in `state`, and make it
 * view w. 0 or -ENOMEM (meta freed). */
static int tview_keep(vol *v, arc *meta, uint64_t ino, uint64_t state, vol_view *w)
{
    struct vol_tview *t = calloc(1, sizeof *t);
    if (!t) {
        arc_free(meta);
        return -ENOMEM;
    }
    *t = (struct vol_tview){meta, ino, state, 1}; /* the vol's reference */
    tview_use(t, w);
    pthread_mutex_lock(&v->tlock);
    struct vol_tview *old = v->tview; /* another view's, made meanwhile */
    v->tview = t;
    pthread_mutex_unlock(&v->tlock);
    vol_tview_put(old);
    return 0;
}

/* Whether error rc says the temporary directory cannot take an archive (view_by_shards). */
static int tmpdir_refused(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG || rc == -EACCES || rc == -EPERM ||
           rc == -EROFS || rc == -ENOENT || rc == -ENOTDIR;
}

/* vol_compact under cplock; `bg` for a background one. */
static int compact(vol *v, vol_compact_stats *st, int bg)
{
    cctx c = {.v = v, .bg = bg};
    arc *na = NULL;
    idx *nx = NULL;
    char *tmp = NULL;
    vol *w = NULL;
    jrnl_next jn = {.fd = -1};
    compact_stats cs;
    double t0 = secs();
    int rc = take_snapshot(v, &c, st), after = 0;
    if (!rc) rc = build(v, &c, &cs);
    if (!rc) rc = step_done(v, VOL_STEP_BUILT, NULL);
    c.nw.prev_id = c.old ? c.old->id : 0;
    st->build_s = secs() - t0;
    double t1 = secs();
    if (!rc)
        rc = c.sink.tmp ? arc_sink_finish(&c.sink, &c.nw, c.sh, c.nsh, v->o.level, &tmp)
                        : arc_write_tmp(v->path, &c.nw, v->o.level, &tmp);
    st->write_s = secs() - t1;
    if (!rc) rc = step_done(v, VOL_STEP_WRITTEN, tmp);
    double t3 = secs();
    if (!rc)
        rc = c.meta || (c.grew && v->o.lazy) ? check_new_spans(&c, tmp, &na, st)
                                             : check_new(v, &c, tmp, &na, &nx, st);
    st->check_s = secs() - t3;
    if (!rc) rc = step_done(v, VOL_STEP_CHECKED, tmp);
    double t2 = secs();
    /* The records written meanwhile go to the new archive's journal, and into its model. */
    if (!rc && !(w = vol_model_new(na))) rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) rc = jrnl_next_begin(v->j, na->id, c.jfrom, c.seq0, &jn);
    if (!rc) rc = carry_tail(v, &jn, w);
    /* Until the rename, a failure leaves the old archive and journal in force (put_in_place's
     * arc_commit removes the temporary file itself when the rename fails). */
    if (!rc) rc = put_in_place(v, tmp, na, nx, w, &jn, &after);
    if (rc) {
        jrnl_next_abort(&jn);
        vol_model_free(w);
        if (tmp) unlink(tmp);
        tdc_error_ctx(rc, "compaction failed; the archive and its journal are unchanged");
    } else {
        na = NULL;
        nx = NULL;
        st->swap_s = secs() - t2;
        st->dirty_files = cs.new_files;
        st->dirty_bytes = cs.new_bytes;
        st->rules_new = cs.rules_new;
        st->rules_after = cs.rules_after;
        st->build_threads = cs.workers ? cs.workers : 1;
        st->files = c.nw.nents;
        st->archive_after = v->a->file_size;
        tview_drop(v);
        rc = after ? after : step_done(v, VOL_STEP_RESET, NULL);
    }
    free(tmp);
    cctx_free(&c);
    idx_free(nx);
    arc_free(na);
    if (v->o.mem) malloc_trim(0); /* what the compaction loaded goes back to the system */
    return rc;
}

static int compact_locked(vol *v, vol_compact_stats *st, int bg)
{
    memset(st, 0, sizeof *st);
    if (!v->o.writable) return tdc_error(-EROFS, "%s: opened read-only", v->path);
    pthread_mutex_lock(&v->cplock);
    int rc = compact(v, st, bg);
    note_result(v, rc);
    pthread_mutex_unlock(&v->cplock);
    return rc;
}

int vol_compact(vol *v, vol_compact_stats *st)
{
    return compact_locked(v, st, 0);
}

int vol_compact_bg(vol *v, vol_compact_stats *st)
{
    return compact_locked(v, st, 1);
}

void vol_compact_error(vol *v, char *msg, size_t n)
{
    pthread_mutex_lock(&v->tlock);
    snprintf(msg, n, "%s", v->compact_err);
    pthread_mutex_unlock(&v->tlock);
}

/* vol_view_open's view of directory `ino` with edits below it, under a memory budget and
 * with the archive not loaded: its subtree as it is now, compacted shard by shard as a
 * compaction under the budget builds (reading content through the spans), into an unlinked
 * temporary archive in the temporary directory, whose file table the view holds, to be
 * analysed shard by shard. Its memory is the compaction's, its disk the subtree's archive.
 * The last one made is kept for the views of the same directory in the same state (the other
 * analytics read after one), until a view of another state or directory or a compaction
 * (its disk is given back then). -ENOTSUP where this does not apply, or where the temporary
 * directory cannot take the archive (full, read-only, not there: said in the log): the caller
 * builds the view in memory. */
static int view_by_shards(vol *v, uint64_t ino, vol_view *w)
{
    char *at = NULL;
    if (asprintf(&at, "%s/tadocfs-view.tdc", fio_tmpdir()) < 0) return -ENOMEM;
    cctx c = {.v = v, .view = 1, .view_at = at};
    compact_stats cs;
    int rc = 0;
    vol_arc_rdlock(v); /* no compaction replaces the archive the build reads */
    pthread_mutex_lock(&v->wlock);
    pthread_mutex_lock(&v->dlock);
    if (v->dstate != 0 || v->a->version < 4) rc = -ENOTSUP;
    pthread_mutex_unlock(&v->dlock);
    /* The state it shows, which changes with every record and compaction (the high bit:
     * never an archive's generation) */
    uint64_t state = (uint64_t)1 << 63 | (v->gen & 0x7fffff) << 40 | jrnl_records(v->j);
    int kept = !rc && tview_take(v, ino, state, w);
    if (!rc && !kept && !(rc = arc_meta_dup(v->a, &c.meta))) {
        c.old = c.meta;
        rc = refuse_damaged(c.old);
        vol_rdlock(v); /* reads go on; changes wait for wlock */
        const vnode *n = vol_node(v, ino);
        if (!rc) rc = !n ? -ENOENT : !S_ISDIR(n->mode) ? -ENOTSUP : snapshot(v, &c, ino);
        vol_unlock(v);
        if (!rc) c.nw.ents[0].ino = 1; /* an archive's root */
    }
    pthread_mutex_unlock(&v->wlock);
    int built = !rc && !kept; /* from here on an error may be the temporary directory's */
    if (built) rc = build(v, &c, &cs);
    vol_arc_unlock(v);
    if (kept) {
        cctx_free(&c);
        free(at);
        return 0;
    }
    char *tmp = NULL;
    arc *own = NULL;
    if (!rc) rc = arc_sink_finish(&c.sink, &c.nw, c.sh, c.nsh, v->o.level, &tmp);
    if (!rc) rc = arc_open_meta(tmp, &own);
    if (tmp) unlink(tmp); /* the view's descriptor keeps it */
    free(tmp);
    cctx_free(&c);
    malloc_trim(0); /* what the build held goes back before the view's work */
    free(at);
    if (built && tmpdir_refused(rc)) {
        char line[1280];
        snprintf(line, sizeof line, "analytics of an edited directory: %s; computed in memory",
                 tdc_errmsg());
        if (v->o.log) v->o.log(v->o.log_ctx, line);
        rc = -ENOTSUP;
    }
    if (rc) {
        arc_free(own);
        return rc;
    }
    return tview_keep(v, own, ino, state, w);
}

int vol_view_open(vol *v, uint64_t ino, int need_idx, vol_view *w)
{
    memset(w, 0, sizeof *w);
    w->v = v;
    const idx *x;
    const arc *a;
    /* Under a memory budget, before anything loaded the whole archive: its file table alone,
     * for analytics shard by shard, or for an edited directory its state compacted into a
     * temporary archive (view_by_shards). */
    if (!need_idx && v->o.mem &&
        __atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) != 2) {
        vol_arc_rdlock(v);
        const arc *m = vol_span_meta(v);
        int64_t e = m ? vol_clean_entry(v, ino) : -1;
        if (e >= 0) {
            w->a = m;
            w->ent = e;
            w->gen = v->gen + 1;
            return 0; /* alock is held until vol_view_close */
        }
        vol_arc_unlock(v);
        int rc = m ? view_by_shards(v, ino, w) : -ENOTSUP;
        if (rc != -ENOTSUP) return rc;
    }
    int rc = vol_lock_arc(v, &a, &x);
    if (rc) return rc;
    int64_t e = vol_clean_entry(v, ino);
    if (e >= 0) {
        w->a = a;
        w->x = x;
        w->ent = e;
        w->gen = v->gen + 1; /* stable while the archive lock is held */
        return 0; /* the archive lock is held until vol_view_close */
    }
    vol_unlock_arc(v);
    /* Pending edits below `ino`: recompress the current state in memory, from a snapshot
     * and the archive loaded, which the archive lock keeps (a compaction that ran since
     * vol_lock_arc may have left the vol reading by shard: then load again). */
    cctx c = {.v = v, .view = 1};
    compact_stats cs;
    vol_arc_rdlock(v);
    pthread_mutex_lock(&v->wlock);
    vol_wrlock(v); /* no change while the snapshot is taken */
    int loaded = __atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) == 2;
    c.old = v->a;
    rc = !loaded || vol_node(v, ino) ? 0 : -ENOENT;
    if (!rc && loaded) rc = snapshot(v, &c, 1);
    vol_unlock(v);
    pthread_mutex_unlock(&v->wlock);
    if (!rc && loaded) rc = build(v, &c, &cs);
    vol_arc_unlock(v);
    if (!loaded) {
        cctx_free(&c);
        return vol_view_open(v, ino, need_idx, w);
    }
    arc *own = NULL;
    if (!rc && !(own = calloc(1, sizeof *own))) rc = -ENOMEM;
    if (!rc) {
        *own = c.nw;
        memset(&c.nw, 0, sizeof c.nw);
        if (!rc) rc = arc_finish(own);
    }
    if (!rc) w->ent = arc_ino_entry(own, ino);
    if (!rc && w->ent < 0) rc = -ENOENT;
    if (!rc && need_idx) rc = idx_build_cached(own, 0, &w->ownx);
    cctx_free(&c);
    if (rc) {
        arc_free(own);
        return rc;
    }
    w->own = own;
    w->a = own;
    w->x = w->ownx;
    return 0;
}

void vol_view_close(vol_view *w)
{
    if (w->tv) {
        vol_tview_put(w->tv);
    } else if (w->own) {
        idx_free(w->ownx);
        arc_free(w->own);
    } else if (w->a) {
        vol_unlock_arc(w->v);
    }
    memset(w, 0, sizeof *w);
}
