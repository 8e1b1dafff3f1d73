/* vol_compact: fold a vol's journal into a new archive and switch to it.
 *
 * Order of durable steps, so a crash or failure at any point leaves either the old archive
 * with its journal or the new archive with an empty one: (1) the new archive, which records
 * the old one's identity as prev_id, is written to a temporary file beside the old one and
 * fsynced (arc_write_tmp); (2) the temporary file is opened by the reader a mount uses
 * (arc_open: every section and reference, the file table) and indexed, its file table is
 * compared with the build, and content is extracted and checked against its hash: every
 * file's, except, in a compaction shard by shard, the files the tables show unchanged in
 * shards copied as stored (check_new); any failure so far removes the temporary file and
 * leaves the old archive, its journal and the mount as they were; (3) the temporary file is
 * renamed over the old archive (arc_commit); (4) the journal is replaced by an empty one
 * bound to the new archive. A crash between (3) and (4) leaves a journal bound to prev_id,
 * which jrnl_open recognises as already folded in and discards. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../build/compact.h"
#include "../build/compact_shards.h"
#include "../base/err.h"
#include "vol_int.h"

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct cctx {
    vol *v;
    arc nw;
    arc_coded *sh; /* shard by shard (compact_shards): the shards to write */
    uint32_t nsh;
    size_t cap;
    int64_t *src;
    uint64_t *ino; /* per new entry */
    vol_reader rd;
    int view; /* building an in-memory view, not an archive to write */
    const arc *old; /* the archive compacted: v->a loaded, or under a budget `meta` */
    arc *meta;      /* a copy of v->a's file table alone, which a load cannot change */
} cctx;

static int read_new(void *p, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    cctx *c = p;
    const vnode *f = vol_node(c->v, c->ino[ent]);
    ssize_t k = vol_read_locked(c->v, &c->rd, f, off, dst, n);
    if (k < 0) return (int)k;
    return (size_t)k == n ? 0 : tdc_error(-EIO, "file changed size while compacting");
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
        if (e) c->nw.ents = e;
        if (s) c->src = s;
        if (in) c->ino = in;
        if (!e || !s || !in) {
            free(path);
            return -ENOMEM;
        }
        c->cap = cap;
    }
    uint32_t i = c->nw.nents++;
    arc_entry *e = &c->nw.ents[i];
    memset(e, 0, sizeof *e);
    e->path = path;
    e->type = arc_type_of_mode(n->mode);
    e->rdev = n->rdev;
    e->mode = n->mode & 07777;
    e->uid = n->uid;
    e->gid = n->gid;
    e->mtime_sec = n->mtime.tv_sec;
    e->mtime_nsec = (uint32_t)n->mtime.tv_nsec;
    e->size = n->size;
    e->ino = n->ino;
    e->link = n->link; /* borrowed: cleared before the entries are freed */
    e->xattrs = n->xa; /* borrowed */
    e->nxattrs = n->nxa;
    c->ino[i] = n->ino;
    c->src[i] = -1;
    if (e->type == ARC_REG) {
        if (first[n->ino]) {
            c->src[i] = -2; /* its hash is the first name's, set once known */
        } else {
            first[n->ino] = i + 1;
            c->src[i] = !n->pt && n->ent >= 0 ? n->ent : -1;
        }
    }
    for (uint32_t k = 0; k < n->nkids; k++) {
        size_t lp = strlen(path), ln = strlen(n->kids[k].name);
        char *p = malloc(lp + ln + 2);
        if (!p) return -ENOMEM;
        sprintf(p, "%s%s%s", path, lp ? "/" : "", n->kids[k].name);
        int rc = add_tree(c, vol_node(v, n->kids[k].ino), p, first);
        if (rc) return rc;
    }
    return 0;
}

static void free_entries(cctx *c)
{
    for (uint32_t i = 0; i < c->nw.nents; i++) {
        c->nw.ents[i].link = NULL;
        c->nw.ents[i].xattrs = NULL;
        c->nw.ents[i].nxattrs = 0;
        arc_entry_clear(&c->nw.ents[i]);
    }
    free(c->nw.ents);
    c->nw.ents = NULL;
    c->nw.nents = 0;
}

/* Build the new archive's entries, dictionary and grammar from the model into c->nw.
 * Caller holds wlock and the shared model lock. */
static int build(vol *v, cctx *c, compact_stats *cs)
{
    uint32_t *first = calloc(v->cap, sizeof *first);
    char *root = strdup("");
    int rc = first && root ? 0 : -ENOMEM;
    c->v = v;
    vol_reader_init(&c->rd);
    if (!rc) {
        rc = add_tree(c, vol_node(v, 1), root, first);
        root = NULL;
    }
    /* A file kept as archived in a damaged shard: its run is a stand-in's, never copied. */
    for (uint32_t i = 0; !rc && i < c->nw.nents; i++)
        if (c->src[i] >= 0) rc = arc_entry_damaged(c->old, (uint32_t)c->src[i]);
    unsigned flags = c->view ? 0 : COMPACT_MAY_REBUILD;
    if (!rc && !c->view && compact_by_shards(c->old, v->o.shard_size))
        rc = compact_shards(c->old, &c->nw, c->src, read_new, c, v->o.shard_size, v->o.level, cs,
                            &c->sh, &c->nsh);
    else if (!rc)
        rc = compact_build(c->old, &c->nw, c->src, read_new, c, flags, cs);
    for (uint32_t i = 0; !rc && i < c->nw.nents; i++)
        if (c->src[i] == -2) c->nw.ents[i].hash = c->nw.ents[first[c->ino[i]] - 1].hash;
    free(root);
    free(first);
    return rc;
}

static void cctx_free(cctx *c)
{
    vol_reader_free(&c->rd);
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
 * content of every file check_table does not show unchanged read back against its hash, from
 * the shards that hold it loaded alone (arc_open_span, whose index checks the sizes of the
 * span's files), one span at a time. *na is the new archive's file table. */
static int check_new_spans(const cctx *c, const char *tmp, arc **na,
                           vol_compact_stats *st)
{
    unsigned char *only = NULL, *sel = NULL;
    int rc = arc_open_meta(tmp, na);
    if (!rc) rc = check_table(c, *na, &only);
    const arc *m = *na;
    for (uint32_t k = 0; !rc && k < m->nshards; k++)
        rc = arc_shard_check(m, k);
    double t0 = secs();
    /* Spans in entry order: consecutive files mostly share one. */
    for (uint32_t i = 0; !rc && i < m->nents; i++) {
        uint32_t first, last;
        if (!only[i] || m->ents[i].type != ARC_REG || !m->ents[i].root_len) continue;
        arc_entry_shards(m, i, &first, &last);
        arc *s = NULL;
        idx *x = NULL;
        uint32_t *ids = NULL, nids = 0;
        rc = arc_open_span(m, first, last, &s, &ids, &nids);
        if (!rc) rc = idx_build_base(s, &x);
        if (!rc && !(sel = calloc(s->nents ? s->nents : 1, 1))) rc = -ENOMEM;
        for (uint32_t l = 0; !rc && l < nids; l++) { /* the span's files to check, done */
            uint32_t f, g;
            arc_entry_shards(m, ids[l], &f, &g);
            if (only[ids[l]] && f == first && g == last) {
                sel[l] = 1;
                only[ids[l]] = 0;
            }
        }
        uint64_t files = 0, bytes = 0;
        if (!rc) rc = idx_check_content(x, sel, NULL, NULL, &files, &bytes);
        st->check_files += files;
        st->check_bytes += bytes;
        free(sel);
        sel = NULL;
        free(ids);
        idx_free(x);
        arc_free(s);
        if (!rc && only[i]) /* not the span's own entry (a further name): nothing holds it */
            rc = tdc_error(-EBADMSG, "'%s': its content is in no span of its shards",
                           m->ents[i].path);
    }
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

/* Switch the vol to the new archive `na` (already renamed into place) and restart the
 * journal. Under a memory budget the vol goes back to reading shard by shard: it takes the
 * new archive's file table alone (opened again from its path), and na, loaded whole for the
 * check, is dropped, so memory returns within the budget; what needs the whole archive loads
 * it again. Caller holds wlock and no model lock. */
static void swap_in(vol *v, arc *na, idx *nx)
{
    arc *lazy = NULL, *smeta = NULL;
    if (na->pending) { /* checked span by span: its file table alone, opened as `tmp` */
        char *path = strdup(v->path);
        if (path) { /* else its messages name the temporary file */
            free(na->path);
            na->path = path;
        }
        lazy = na;
    } else if (v->o.mem && v->o.lazy && na->version >= 4 && !arc_open_meta(v->path, &lazy) &&
               lazy->id != na->id) {
        arc_free(lazy); /* replaced again meanwhile: keep na */
        lazy = NULL;
    }
    if (lazy && arc_meta_dup(lazy, &smeta)) smeta = NULL; /* the first span opens it */
    pthread_rwlock_wrlock(&v->alock);
    vol_wrlock(v);
    int rc = jrnl_reset(v->j, na->id);
    if (rc) {
        /* The archive holds everything, but new records would go to a journal the next open
         * discards as folded in: refuse changes instead. */
        v->broken = 1;
        tdc_error_ctx(rc, "restarting the journal after compaction");
    }
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
    for (uint64_t i = 0; i < v->cap; i++) {
        vnode *n = v->nodes[i];
        if (!n) continue;
        n->ent = arc_ino_entry(v->a, n->ino);
        n->edited = 0;
        if (n->pt) {
            pt_free(n->pt);
            free(n->pt);
            n->pt = NULL;
        }
    }
    v->dirty_files = 0;
    v->compactions++;
    vol_unlock(v);
    pthread_rwlock_unlock(&v->alock);
    backend_release(v->o.be, oa); /* its copy on the GPU, if any */
    idx_free(ox);
    arc_free(oa);
    if (lazy && lazy != na) {
        idx_free(nx);
        arc_free(na);
    }
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

int vol_compact(vol *v, vol_compact_stats *st)
{
    cctx c = {.v = v};
    arc *na = NULL;
    idx *nx = NULL;
    char *tmp = NULL;
    compact_stats cs;
    int rc;
    double t0 = secs();
    memset(st, 0, sizeof *st);
    if (!v->o.writable) return tdc_error(-EROFS, "%s: opened read-only", v->path);
    /* Under a memory budget, with the archive not loaded: from its file table alone (a copy,
     * which a load meanwhile does not change), reading content shard by shard (the reads'
     * spans), checked span by span. Else from the archive loaded whole. */
    for (;;) {
        pthread_mutex_lock(&v->wlock); /* no changes from here on */
        pthread_mutex_lock(&v->dlock);
        int ds = v->dstate;
        if (ds == 0 && v->o.mem && v->o.lazy && v->a->version >= 4 &&
            compact_by_shards(v->a, v->o.shard_size) && (rc = arc_meta_dup(v->a, &c.meta))) {
            pthread_mutex_unlock(&v->dlock);
            pthread_mutex_unlock(&v->wlock);
            return rc;
        }
        pthread_mutex_unlock(&v->dlock);
        if (ds == 2 || c.meta) break;
        pthread_mutex_unlock(&v->wlock);
        if ((rc = vol_data(v))) return rc;
    }
    c.old = c.meta ? c.meta : v->a;
    if (v->broken) {
        rc = tdc_error(-EIO, "changes are refused after an earlier failure; remount");
        goto unlock;
    }
    if ((rc = refuse_damaged(c.old))) goto unlock;
    vol_wrlock(v);
    rc = jrnl_flush(v->j);
    vol_unlock(v);
    if (rc) goto unlock;
    vol_rdlock(v); /* reads go on */
    for (uint64_t i = 0; i < v->cap && !rc; i++)
        if (v->nodes[i] && v->nodes[i]->nlink == 0)
            rc = tdc_error(-EBUSY, "a removed file is still open: compact again once it is closed");
    if (!rc) {
        st->archive_before = c.old->file_size;
        st->rules_before = c.old->g.nrules;
        for (uint32_t k = 0; c.meta && k < c.old->nshards; k++)
            st->rules_before += c.old->shards[k].nrules;
        rc = build(v, &c, &cs);
    }
    if (!rc) rc = step_done(v, VOL_STEP_BUILT, NULL);
    c.nw.prev_id = c.old->id;
    st->build_s = secs() - t0;
    double t1 = secs();
    if (!rc)
        rc = c.nsh ? arc_write_coded_tmp(v->path, &c.nw, c.sh, c.nsh, v->o.level, &tmp)
                   : arc_write_tmp(v->path, &c.nw, v->o.level, &tmp);
    st->write_s = secs() - t1;
    if (!rc) rc = step_done(v, VOL_STEP_WRITTEN, tmp);
    double t3 = secs();
    if (!rc) rc = c.meta ? check_new_spans(&c, tmp, &na, st) : check_new(v, &c, tmp, &na, &nx, st);
    st->check_s = secs() - t3;
    if (!rc) rc = step_done(v, VOL_STEP_CHECKED, tmp);
    vol_unlock(v);
    /* Until the rename, a failure leaves the old archive and journal in force. arc_commit
     * removes the temporary file itself when the rename fails; a positive result is a rename
     * whose directory fsync failed, which the journal restart's directory fsync makes good. */
    if (!rc) {
        rc = arc_commit(tmp, v->path);
        free(tmp);
        tmp = NULL;
        if (rc > 0) rc = 0;
    }
    if (rc) goto fail;
    /* The new archive is in place: switch to it whatever the test hook says. */
    int hook = step_done(v, VOL_STEP_RENAMED, NULL);
    double t2 = secs();
    swap_in(v, na, nx);
    na = NULL;
    nx = NULL;
    st->swap_s = secs() - t2;
    st->dirty_files = cs.new_files;
    st->dirty_bytes = cs.new_bytes;
    st->rules_new = cs.rules_new;
    st->rules_after = cs.rules_after;
    st->files = c.nw.nents;
    st->archive_after = v->a->file_size;
    rc = v->broken ? -EIO : hook ? hook : step_done(v, VOL_STEP_RESET, NULL);
    goto done;
fail:
    if (tmp) unlink(tmp);
    tdc_error_ctx(rc, "compaction failed; the archive and its journal are unchanged");
done:
    free(tmp);
    cctx_free(&c);
    idx_free(nx);
    arc_free(na);
    if (v->o.mem) malloc_trim(0); /* what the compaction loaded goes back to the system */
unlock:
    arc_free(c.meta); /* when refused before the build (cctx_free clears it) */
    note_result(v, rc);
    pthread_mutex_unlock(&v->wlock);
    return rc;
}

void vol_compact_error(vol *v, char *msg, size_t n)
{
    pthread_mutex_lock(&v->tlock);
    snprintf(msg, n, "%s", v->compact_err);
    pthread_mutex_unlock(&v->tlock);
}

int vol_view_open(vol *v, uint64_t ino, int need_idx, vol_view *w)
{
    memset(w, 0, sizeof *w);
    w->v = v;
    const idx *x;
    const arc *a;
    /* Under a memory budget, before anything loaded the whole archive: its file table alone,
     * for analytics shard by shard. */
    if (!need_idx && v->o.mem && __atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) != 2) {
        pthread_rwlock_rdlock(&v->alock);
        const arc *m = vol_span_meta(v);
        int64_t e = m ? vol_clean_entry(v, ino) : -1;
        if (e >= 0) {
            w->a = m;
            w->ent = e;
            w->gen = v->gen + 1;
            return 0; /* alock is held until vol_view_close */
        }
        pthread_rwlock_unlock(&v->alock);
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
    /* Pending edits below `ino`: recompress the current state in memory, from the archive
     * loaded (compactions wait for wlock; one that ran since vol_lock_arc may have left the
     * vol reading by shard: then load again). */
    cctx c = {.v = v, .view = 1};
    compact_stats cs;
    pthread_mutex_lock(&v->wlock);
    vol_rdlock(v);
    int loaded = __atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) == 2;
    c.old = v->a;
    rc = !loaded ? 0 : vol_node(v, ino) ? build(v, &c, &cs) : -ENOENT;
    vol_unlock(v);
    pthread_mutex_unlock(&v->wlock);
    if (!loaded) return vol_view_open(v, ino, need_idx, w);
    arc *own = NULL;
    if (!rc && !(own = calloc(1, sizeof *own))) rc = -ENOMEM;
    if (!rc) {
        /* Symlink targets and xattrs are the model's (borrowed): the snapshot owns copies of
         * the targets (the file table's rules need them) and drops the xattrs (analytics need
         * none). */
        for (uint32_t i = 0; i < c.nw.nents; i++) {
            arc_entry *e = &c.nw.ents[i];
            e->xattrs = NULL;
            e->nxattrs = 0;
            if (e->link && !(e->link = strdup(e->link))) rc = -ENOMEM;
        }
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
    if (w->own) {
        idx_free(w->ownx);
        arc_free(w->own);
    } else if (w->a) {
        vol_unlock_arc(w->v);
    }
    memset(w, 0, sizeof *w);
}
