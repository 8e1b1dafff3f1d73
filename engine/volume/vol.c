#include "vol.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../base/err.h"
#include "../base/fio.h"
#include "jrec.h"
#include "piece.h"
#include "vol_int.h"

/* ---------------- nodes ---------------- */

vnode *vol_node(const vol *v, uint64_t ino)
{
    return ino < v->cap ? v->nodes[ino] : NULL;
}

/* Room in v->nodes for inode numbers below `ino`. */
static int reserve_nodes(vol *v, uint64_t ino)
{
    if (ino <= v->cap) return 0;
    uint64_t cap = v->cap ? v->cap : 1024;
    while (cap < ino)
        cap *= 2;
    vnode **p = realloc(v->nodes, cap * sizeof *p);
    if (!p) return -ENOMEM;
    memset(p + v->cap, 0, (cap - v->cap) * sizeof *p);
    v->nodes = p;
    v->cap = cap;
    return 0;
}

static int put_node(vol *v, vnode *n)
{
    if (n->ino >= ARC_INO_MAX) return tdc_error(-EOVERFLOW, "inode numbers exhausted");
    if (reserve_nodes(v, n->ino + 1)) return -ENOMEM;
    v->nodes[n->ino] = n;
    v->ninodes++;
    if (n->ino >= v->next_ino) v->next_ino = n->ino + 1;
    return 0;
}

/* Whether p is part of the model's slab (not to be freed alone). */
static int in_slab(const vol *v, const void *p)
{
    return mem_within(p, v->slab.nodes, v->slab.nnodes * sizeof *v->slab.nodes) ||
           mem_within(p, v->slab.names, v->slab.nbytes);
}

static void free_name(const vol *v, char *name)
{
    if (!in_slab(v, name)) free(name);
}

static void free_node(vol *v, vnode *n)
{
    v->nodes[n->ino] = NULL;
    v->ninodes--;
    for (uint32_t k = 0; k < n->nkids; k++)
        free_name(v, n->kids[k].name);
    free(n->kids - n->kids_off);
    for (uint32_t k = 0; k < n->nxa; k++) {
        free(n->xa[k].name);
        free(n->xa[k].val);
    }
    free(n->xa);
    if (n->pt) {
        pt_free(n->pt);
        free(n->pt);
    }
    free(n->link);
    if (!in_slab(v, n)) free(n);
}

/* Position of `name` among a directory's children, or where it would go (*found 0). */
static uint32_t kid_pos(const vnode *d, const char *name, int *found)
{
    uint32_t lo = 0, hi = d->nkids;
    *found = 0;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(d->kids[mid].name, name);
        if (!c) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static vnode *kid(const vol *v, const vnode *d, const char *name)
{
    int found;
    uint32_t k = kid_pos(d, name, &found);
    return found ? vol_node(v, d->kids[k].ino) : NULL;
}

/* Add the child `nm` (the directory's from here on, unless this fails) as `ino`. */
static int put_kid(vnode *d, char *nm, uint64_t ino)
{
    int found;
    uint32_t k = kid_pos(d, nm, &found);
    if (found) return -EEXIST;
    if (d->kids_off && (k < d->nkids / 2 || d->nkids == d->capkids)) { /* room before */
        d->kids--;
        d->kids_off--;
        d->capkids++;
        memmove(d->kids, d->kids + 1, k * sizeof *d->kids);
    } else {
        if (d->nkids == d->capkids) {
            uint32_t cap = d->capkids ? d->capkids * 2 : 8;
            vdent *p = realloc(d->kids, cap * sizeof *p); /* kids_off is 0 here */
            if (!p) return -ENOMEM;
            d->kids = p;
            d->capkids = cap;
        }
        memmove(d->kids + k + 1, d->kids + k, (d->nkids - k) * sizeof *d->kids);
    }
    d->kids[k] = (vdent){nm, ino};
    d->nkids++;
    return 0;
}

static int add_kid(vnode *d, const char *name, uint64_t ino)
{
    char *nm = strdup(name);
    int rc = nm ? put_kid(d, nm, ino) : -ENOMEM;
    if (rc) free(nm);
    return rc;
}

static void del_kid(const vol *v, vnode *d, const char *name)
{
    int found;
    uint32_t k = kid_pos(d, name, &found);
    if (!found) return;
    free_name(v, d->kids[k].name);
    if (k < d->nkids / 2) { /* the names before it move up one */
        memmove(d->kids + 1, d->kids, k * sizeof *d->kids);
        d->kids++;
        d->kids_off++;
        d->capkids--;
    } else {
        memmove(d->kids + k, d->kids + k + 1, (d->nkids - k - 1) * sizeof *d->kids);
    }
    d->nkids--;
}

static void fill_stat(const vol *v, const vnode *n, struct stat *st)
{
    (void)v;
    memset(st, 0, sizeof *st);
    st->st_ino = (ino_t)n->ino;
    st->st_mode = n->mode;
    /* A directory counts "." and its subdirectories' ".."; a removed one (still open) 0,
     * and its size 0 (as ext4's). */
    int gone_dir = S_ISDIR(n->mode) && !n->nlink;
    st->st_nlink = S_ISDIR(n->mode) ? (n->nlink ? 2 + n->nsub : 0) : n->nlink;
    st->st_uid = n->uid;
    st->st_gid = n->gid;
    st->st_size = gone_dir ? 0 : (off_t)n->size;
    st->st_rdev = (dev_t)n->rdev;
    st->st_blocks = (blkcnt_t)(((uint64_t)st->st_size + 511) / 512);
    st->st_blksize = 4096;
    st->st_atim = n->atime;
    st->st_mtim = n->mtime;
    st->st_ctim = n->ctime;
}

/* ---------------- records ---------------- */

static struct timespec now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
}

_Static_assert(JREC_NAME_MAX == VOL_NAME_MAX, "a record carries any name the volume accepts");

#define BAD(what) tdc_error(-EBADMSG, "journal record does not apply: %s", what)

/* Inode numbers a create may skip past next_ino (compaction recomputes an archive's next_ino
 * from the inodes still in use, so a journal may start above it). */
#define VOL_INO_SLACK ((uint64_t)1 << 24)

static int name_ok(const char *name); /* 0, or why a name is refused */

static vnode *dir_node(vol *v, uint64_t ino)
{
    vnode *d = vol_node(v, ino);
    return d && S_ISDIR(d->mode) ? d : NULL;
}

/* Content of a regular file becomes editable: a piece table over its archived bytes. */
static int make_pt(vol *v, vnode *n)
{
    if (n->pt) return 0;
    pt *t = malloc(sizeof *t);
    if (!t || pt_init(t, n->ent >= 0 ? n->size : 0)) {
        free(t);
        return -ENOMEM;
    }
    n->pt = t;
    v->dirty_files++;
    return 0;
}

static void touch(vnode *n, struct timespec t, int content)
{
    if (content) n->mtime = t;
    n->ctime = t;
    n->edited = 1;
}

static int ap_create(vol *v, const jrec *r)
{
    uint64_t ino = r->ino, parent = r->dir, rdev = r->rdev;
    uint32_t mode = r->mode;
    struct timespec t = r->time;
    const char *name = r->name, *link = r->link;
    vnode *d = dir_node(v, parent);
    /* The writer gives new inodes increasing numbers from next_ino (past the archive's) and
     * only these types and bits; a number far beyond would make the inode table huge. Only
     * devices carry a device number (an optional last field of the record). */
    if (!d || vol_node(v, ino) || kid(v, d, name) || name_ok(name) || ino < v->next_ino ||
        ino - v->next_ino > VOL_INO_SLACK || (mode & ~(uint32_t)(S_IFMT | 07777)) ||
        !arc_type_of_mode(mode) || S_ISLNK(mode) != !!link[0] ||
        (rdev && !S_ISCHR(mode) && !S_ISBLK(mode)))
        return BAD("create");
    vnode *n = calloc(1, sizeof *n);
    if (!n) return -ENOMEM;
    n->ino = ino;
    n->mode = mode;
    n->uid = r->uid;
    n->gid = r->gid;
    n->nlink = 1;
    n->atime = n->mtime = n->ctime = t;
    n->ent = -1;
    n->edited = 1;
    n->parent = parent;
    n->rdev = rdev;
    if (S_ISLNK(mode)) {
        n->size = strlen(link);
        if (!(n->link = strdup(link))) {
            free(n);
            return -ENOMEM;
        }
    }
    if (S_ISDIR(mode)) n->size = 4096;
    int rc = put_node(v, n);
    if (!rc && (rc = add_kid(d, name, ino))) v->nodes[ino] = NULL, v->ninodes--;
    if (rc) {
        free(n->link);
        free(n);
        return rc;
    }
    if (S_ISDIR(mode)) d->nsub++;
    touch(d, t, 1);
    return 0;
}

static int ap_link(vol *v, const jrec *r)
{
    const char *name = r->name;
    struct timespec t = r->time;
    vnode *d = dir_node(v, r->dir), *n = vol_node(v, r->ino);
    if (!d || !n || S_ISDIR(n->mode) || kid(v, d, name) || name_ok(name)) return BAD("link");
    int rc = add_kid(d, name, r->ino);
    if (rc) return rc;
    n->nlink++;
    touch(n, t, 0);
    touch(d, t, 1);
    return 0;
}

/* Drop one name of n; frees it when nothing refers to it any more. */
static void drop_name(vol *v, vnode *n)
{
    n->nlink--;
    if (n->nlink == 0 && n->opens == 0 && !v->replaying) {
        if (n->pt) v->dirty_files--;
        free_node(v, n);
    }
}

static int ap_unlink(vol *v, const jrec *r)
{
    const char *name = r->name;
    struct timespec t = r->time;
    vnode *d = dir_node(v, r->dir), *n = d ? kid(v, d, name) : NULL;
    if (!n || (S_ISDIR(n->mode) && n->nkids)) return BAD("unlink");
    del_kid(v, d, name);
    touch(d, t, 1);
    if (S_ISDIR(n->mode)) {
        d->nsub--;
        n->nlink = 1;
    }
    touch(n, t, 0);
    drop_name(v, n);
    return 0;
}

/* 1 if directory `anc` is `ino` or one of its ancestors. */
static int is_ancestor(const vol *v, uint64_t anc, uint64_t ino)
{
    for (;;) {
        if (ino == anc) return 1;
        const vnode *n = vol_node(v, ino);
        if (!n || ino == 1) return 0;
        ino = n->parent;
    }
}

static int ap_rename(vol *v, const jrec *r)
{
    uint64_t p1 = r->dir, p2 = r->dir2;
    uint32_t flags = r->flags;
    struct timespec t = r->time;
    const char *n1 = r->name, *n2 = r->name2;
    vnode *d1 = dir_node(v, p1), *d2 = dir_node(v, p2);
    vnode *a = d1 ? kid(v, d1, n1) : NULL, *b = d2 ? kid(v, d2, n2) : NULL;
    if (!a || !d2 || (flags & VOL_RENAME_EXCHANGE && !b) || name_ok(n2)) return BAD("rename");
    if (a == b) return 0;
    /* What the writer refuses: a directory into itself or below, a directory over a
     * non-directory or the reverse. */
    if ((S_ISDIR(a->mode) && is_ancestor(v, a->ino, p2)) ||
        (b && flags & VOL_RENAME_EXCHANGE && S_ISDIR(b->mode) && is_ancestor(v, b->ino, p1)) ||
        (b && !(flags & VOL_RENAME_EXCHANGE) && !S_ISDIR(a->mode) != !S_ISDIR(b->mode)))
        return BAD("rename into itself or across types");
    int rc;
    if (flags & VOL_RENAME_EXCHANGE) {
        int f1, f2;
        uint32_t k1 = kid_pos(d1, n1, &f1), k2 = kid_pos(d2, n2, &f2);
        d1->kids[k1].ino = b->ino;
        d2->kids[k2].ino = a->ino;
        if (S_ISDIR(a->mode)) a->parent = p2, d1->nsub--, d2->nsub++;
        if (S_ISDIR(b->mode)) b->parent = p1, d2->nsub--, d1->nsub++;
        touch(a, t, 0);
        touch(b, t, 0);
    } else {
        if (b) {
            if (S_ISDIR(b->mode) && b->nkids) return BAD("rename over a non-empty directory");
            del_kid(v, d2, n2);
            if (S_ISDIR(b->mode)) {
                d2->nsub--;
                b->nlink = 1;
            }
            touch(b, t, 0);
            drop_name(v, b);
        }
        uint64_t ino = a->ino;
        del_kid(v, d1, n1);
        if ((rc = add_kid(d2, n2, ino))) return rc;
        if (S_ISDIR(a->mode)) a->parent = p2, d1->nsub--, d2->nsub++;
        touch(a, t, 0);
    }
    touch(d1, t, 1);
    touch(d2, t, 1);
    return 0;
}

static int ap_setattr(vol *v, const jrec *r)
{
    vnode *n = vol_node(v, r->ino);
    if (!n) return BAD("setattr");
    if (r->valid & VOL_SET_MODE) n->mode = (n->mode & S_IFMT) | (r->mode & 07777);
    if (r->valid & VOL_SET_UID) n->uid = r->uid;
    if (r->valid & VOL_SET_GID) n->gid = r->gid;
    if (r->valid & VOL_SET_ATIME) n->atime = r->atime;
    if (r->valid & VOL_SET_MTIME) n->mtime = r->mtime;
    touch(n, r->time, 0);
    return 0;
}

static int ap_truncate(vol *v, const jrec *r)
{
    vnode *n = vol_node(v, r->ino);
    if (!n || !S_ISREG(n->mode) || r->size > VOL_MAX_FILE) return BAD("truncate");
    int rc = make_pt(v, n);
    if (rc || (rc = pt_truncate(n->pt, r->size))) return rc;
    n->size = r->size;
    touch(n, r->time, 1);
    return 0;
}

/* WRITE and INSERT: the data (`len` bytes at journal offset `doff`) follows the fields. */
static int ap_data(vol *v, const jrec *r, uint64_t len, uint64_t doff, int insert)
{
    uint64_t off = r->off;
    vnode *n = vol_node(v, r->ino);
    /* the writers' bound (vol_write, vol_insert): a record past it was never written by one */
    if (!n || !S_ISREG(n->mode) || (insert && off > n->size) || off > VOL_MAX_FILE ||
        len > VOL_MAX_FILE - off || (insert && len > VOL_MAX_FILE - n->size))
        return BAD("write");
    int rc = make_pt(v, n);
    if (rc) return rc;
    rc = insert ? pt_insert(n->pt, off, len, PT_JRNL, doff)
                : pt_write(n->pt, off, len, PT_JRNL, doff);
    if (rc) return rc;
    n->size = pt_size(n->pt);
    touch(n, r->time, 1);
    return 0;
}

/* SETXATTR (the value is the record's tail) and RMXATTR. */
static int ap_xattr(vol *v, const jrec *r, int set)
{
    const char *name = r->name;
    struct timespec t = r->time;
    vnode *n = vol_node(v, r->ino);
    if (!n || !name[0]) return BAD("xattr");
    uint32_t k = 0;
    while (k < n->nxa && strcmp(n->xa[k].name, name) < 0)
        k++;
    int found = k < n->nxa && !strcmp(n->xa[k].name, name);
    if (!set) {
        if (!found) return BAD("removexattr of a missing attribute");
        free(n->xa[k].name);
        free(n->xa[k].val);
        memmove(n->xa + k, n->xa + k + 1, (n->nxa - k - 1) * sizeof *n->xa);
        n->nxa--;
        touch(n, t, 0);
        return 0;
    }
    size_t len = r->ntail;
    unsigned char *val = malloc(len ? len : 1);
    if (!val) return -ENOMEM;
    if (len) memcpy(val, r->tail, len);
    if (found) {
        free(n->xa[k].val);
    } else {
        arc_xattr *p = realloc(n->xa, (n->nxa + 1) * sizeof *p);
        char *nm = strdup(name);
        if (p) n->xa = p;
        if (!p || !nm) {
            free(nm);
            free(val);
            return -ENOMEM;
        }
        memmove(n->xa + k + 1, n->xa + k, (n->nxa - k) * sizeof *n->xa);
        n->xa[k].name = nm;
        n->nxa++;
    }
    n->xa[k].val = val;
    n->xa[k].len = (uint32_t)len;
    touch(n, t, 0);
    return 0;
}

/* Apply one record. `body` holds at least the fields (`have` bytes); the record's body is
 * `len` bytes long and starts at journal offset `off`. */
static int apply(vol *v, uint32_t type, const unsigned char *body, size_t have, uint64_t len,
                 uint64_t off)
{
    jrec r;
    if (type == 0 || type >= JR_NTYPES) return BAD("unknown type");
    if (jrec_decode(type, body, have, &r))
        return tdc_error(-EBADMSG, "journal record does not apply: malformed %s",
                         jrec_family(type));
    switch (type) {
    case JR_CREATE:
        return ap_create(v, &r);
    case JR_LINK:
        return ap_link(v, &r);
    case JR_UNLINK:
        return ap_unlink(v, &r);
    case JR_RENAME:
        return ap_rename(v, &r);
    case JR_SETATTR:
        return ap_setattr(v, &r);
    case JR_TRUNCATE:
        return ap_truncate(v, &r);
    case JR_WRITE:
    case JR_INSERT:
        return ap_data(v, &r, len - r.head, off + r.head, type == JR_INSERT);
    case JR_SETXATTR:
    case JR_RMXATTR:
        return ap_xattr(v, &r, type == JR_SETXATTR);
    }
    return BAD("unknown type");
}

int vol_model_replay(void *ctx, const jrnl_rec *r)
{
    vol *v = ctx;
    int rc = apply(v, r->type, r->body, r->len, r->len, r->off);
    if (rc == -EBADMSG) return tdc_error_ctx(rc, "journal record %llu", (unsigned long long)r->seq);
    return rc;
}

/* Append a record (head + data) and apply it. Caller holds wlock and the write lock. */
static int commit(vol *v, uint32_t type, const buf *head, const void *data, size_t dn)
{
    if (!v->o.writable) return -EROFS;
    if (v->broken) return tdc_error(-EIO, "changes are refused after an earlier failure; remount");
    uint64_t doff;
    int rc = jrnl_append(v->j, type, head->p, head->n, data, dn, &doff);
    if (rc) return rc;
    rc = apply(v, type, head->p, head->n, head->n + dn, doff - head->n);
    if (rc) {
        /* The record is logged but could not be applied (out of memory): a restart would
         * apply it, so stop accepting changes rather than diverge. */
        v->broken = 1;
        return rc;
    }
    __atomic_add_fetch(&v->changes, 1, __ATOMIC_RELEASE);
    if (v->o.compact_threshold && jrnl_size(v->j) > v->o.compact_threshold) vol_compact_async(v);
    return 0;
}

/* A string into a record's field (the caller has checked that it fits). */
static void set_str(char *field, size_t cap, const char *s)
{
    snprintf(field, cap, "%s", s ? s : "");
}

/* Encode record r, then append it with `data` after its fields and apply it. Caller holds
 * wlock and the write lock. */
static int commit_rec(vol *v, const jrec *r, const void *data, size_t dn)
{
    buf b = {0};
    int rc = jrec_encode(r, &b);
    if (!rc) rc = commit(v, r->type, &b, data, dn);
    buf_free(&b);
    return rc;
}

/* ---------------- locking ---------------- */

static void rbegin(vol *v)
{
    pthread_rwlock_rdlock(&v->lock);
}

static void rend(vol *v)
{
    pthread_rwlock_unlock(&v->lock);
}

/* Changes faster than compaction would grow the journal without bound (a compaction
 * re-reads every edited file, so its cost grows with the edits it folds in): once the
 * journal holds journal_max bytes, a change arriving while a background compaction runs or
 * is asked for first waits for it to end. What was written meanwhile is then what the next
 * compaction takes. No wait when none runs (one that failed waits until the journal has
 * grown by the threshold again: changes go on meanwhile). */
uint64_t vol_journal_max(uint64_t threshold)
{
    uint64_t floor = (uint64_t)256 << 20;
    if (threshold > UINT64_MAX / 4) return UINT64_MAX;
    return threshold * 4 > floor ? threshold * 4 : floor;
}

uint64_t vol_mem_default(void)
{
    const uint64_t most = (uint64_t)256 << 20, least = (uint64_t)64 << 20;
    uint64_t ram = fio_ram();
    uint64_t m = ram / 8 < most ? ram / 8 : most;
    return m > least ? m : least;
}

/* Whether the journal holds more than journal_max (and a compaction would drain it). */
static int backlogged(vol *v)
{
    if (!v->o.compact_threshold) return 0;
    rbegin(v);
    uint64_t size = jrnl_size(v->j);
    rend(v);
    return size > v->o.journal_max;
}

static void backlog_wait(vol *v)
{
    if (!backlogged(v)) return;
    pthread_mutex_lock(&v->tlock);
    uint64_t ends = v->cth_ends;
    while ((v->compacting || v->want_compact) && v->cth_ends == ends && !v->stop &&
           !(v->compacting && pthread_equal(pthread_self(), v->cth)))
        pthread_cond_wait(&v->drained, &v->tlock);
    pthread_mutex_unlock(&v->tlock);
}

static void wbegin(vol *v)
{
    backlog_wait(v);
    pthread_mutex_lock(&v->wlock);
    pthread_rwlock_wrlock(&v->lock);
}

static void wend(vol *v)
{
    pthread_rwlock_unlock(&v->lock);
    pthread_mutex_unlock(&v->wlock);
}

void vol_rdlock(vol *v)
{
    rbegin(v);
}

void vol_wrlock(vol *v)
{
    pthread_rwlock_wrlock(&v->lock);
}

void vol_unlock(vol *v)
{
    pthread_rwlock_unlock(&v->lock);
}

/* ---------------- building the model from the archive ---------------- */

/* A path's last component. */
static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The model's slab, sized for the archive's entries: an inode each (hard links leave a few
 * unused) and their names; and, in nkids, how many children each entry has. */
static int make_slab(vol *v, const uint32_t *pe, uint32_t *nkids)
{
    const arc *a = v->a;
    size_t bytes = 1;
    uint64_t top = 1;
    for (uint32_t i = 0; i < a->nents; i++) {
        if (i) nkids[pe[i]]++;
        if (i) bytes += strlen(base_name(a->ents[i].path)) + 1;
        if (a->ents[i].ino > top) top = a->ents[i].ino;
    }
    v->slab.nodes = calloc(a->nents ? a->nents : 1, sizeof *v->slab.nodes);
    v->slab.names = malloc(bytes);
    if (!v->slab.nodes || !v->slab.names) return -ENOMEM;
    v->slab.nbytes = bytes;
    v->slab.nnodes = a->nents;
    return reserve_nodes(v, top + 1);
}

/* The node of entry i, new (from the slab, its children's room made), or NULL. */
static vnode *entry_node(vol *v, uint32_t i, uint64_t parent, uint32_t nkids, size_t *used)
{
    const arc_entry *e = &v->a->ents[i];
    vnode *n = &v->slab.nodes[(*used)++];
    n->ino = e->ino;
    n->mode = arc_mode_of_type(e->type) | e->mode;
    n->rdev = e->rdev;
    n->uid = e->uid;
    n->gid = e->gid;
    n->nlink = 1;
    n->mtime = (struct timespec){(time_t)e->mtime_sec, e->mtime_nsec};
    n->atime = (struct timespec){(time_t)e->atime_sec, e->atime_nsec};
    n->ctime = (struct timespec){(time_t)e->ctime_sec, e->ctime_nsec};
    n->size = e->size;
    n->ent = i;
    n->parent = parent;
    if (put_node(v, n) || (e->link && !(n->link = strdup(e->link))) ||
        (nkids && !(n->kids = malloc(nkids * sizeof *n->kids))))
        return NULL;
    n->capkids = nkids;
    if (e->nxattrs && !(n->xa = calloc(e->nxattrs, sizeof *n->xa))) return NULL;
    for (uint32_t k = 0; k < e->nxattrs; k++) {
        n->nxa++; /* freed with the node from here on */
        n->xa[k].name = strdup(e->xattrs[k].name);
        n->xa[k].val = malloc(e->xattrs[k].len ? e->xattrs[k].len : 1);
        n->xa[k].len = e->xattrs[k].len;
        if (!n->xa[k].name || !n->xa[k].val) return NULL;
        memcpy(n->xa[k].val, e->xattrs[k].val, e->xattrs[k].len);
    }
    return n;
}

/* The nodes of the archive's entries (pe: each entry's parent), all in the model's slab. A
 * node half made on failure is the model's all the same, which free_model frees. */
static int load_entries(vol *v, const uint32_t *pe, uint32_t *nkids)
{
    const arc *a = v->a;
    int rc = make_slab(v, pe, nkids);
    size_t used = 0, at = 0;
    for (uint32_t i = 0; !rc && i < a->nents; i++) {
        const arc_entry *e = &a->ents[i];
        vnode *n = vol_node(v, e->ino);
        uint64_t parent = i ? a->ents[pe[i]].ino : 1;
        if (n) /* another name of a hard-linked file */
            n->nlink++;
        else if (!entry_node(v, i, parent, nkids[i], &used))
            rc = -ENOMEM;
        if (rc || !i) continue;
        vnode *d = vol_node(v, parent);
        const char *name = base_name(e->path);
        size_t len = strlen(name) + 1;
        memcpy(v->slab.names + at, name, len);
        if ((rc = put_kid(d, v->slab.names + at, e->ino))) break;
        at += len;
        if (e->type == ARC_DIR) d->nsub++;
    }
    return rc;
}

/* Build the nodes of the archive's entries. */
static int load_archive(vol *v)
{
    const arc *a = v->a;
    v->next_ino = a->next_ino;
    uint32_t *pe = malloc((a->nents ? a->nents : 1) * sizeof *pe);
    uint32_t *nkids = calloc(a->nents ? a->nents : 1, sizeof *nkids);
    int rc = !pe || !nkids || arc_parents(a, pe) ? -ENOMEM : load_entries(v, pe, nkids);
    free(pe);
    free(nkids);
    return rc;
}

static void free_model(vol *v)
{
    for (uint64_t i = 0; i < v->cap; i++)
        if (v->nodes[i]) free_node(v, v->nodes[i]);
    free(v->nodes);
    v->nodes = NULL;
    v->cap = v->ninodes = 0;
    free(v->slab.nodes);
    free(v->slab.names);
    v->slab = (struct vslab){0};
}

/* ---------------- a model for compaction to put in place ---------------- */

vol *vol_model_new(const arc *a)
{
    vol *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->a = (arc *)a; /* only read */
    w->replaying = 1; /* inodes that lose their last name stay until vol_model_swap */
    if (load_archive(w)) {
        vol_model_free(w);
        return NULL;
    }
    return w;
}

int vol_model_check(const vol *v, const vol *w)
{
    for (uint64_t i = 0; i < v->cap; i++)
        if (v->nodes[i] && v->nodes[i]->opens && !vol_node(w, i))
            return tdc_error(-EBUSY, "inode %llu is open but not in the compacted tree",
                             (unsigned long long)i);
    return 0;
}

void vol_model_swap(vol *v, vol *w)
{
    for (uint64_t i = 0; i < w->cap; i++) {
        vnode *n = w->nodes[i], *o = vol_node(v, i);
        if (!n) continue;
        n->opens = o ? o->opens : 0;
        if (n->nlink == 0 && n->opens == 0) {
            if (n->pt) w->dirty_files--;
            free_node(w, n);
        }
    }
    vnode **nodes = v->nodes;
    uint64_t cap = v->cap, ninodes = v->ninodes;
    v->nodes = w->nodes;
    v->cap = w->cap;
    v->ninodes = w->ninodes;
    v->next_ino = w->next_ino > v->next_ino ? w->next_ino : v->next_ino;
    v->dirty_files = w->dirty_files;
    w->nodes = nodes;
    w->cap = cap;
    w->ninodes = ninodes;
    struct vslab slab = v->slab;
    v->slab = w->slab;
    w->slab = slab;
}

void vol_model_free(vol *w)
{
    if (!w) return;
    free_model(w);
    free(w);
}

static void *background(void *p);

/* Remove temporary files a killed writer left beside the archive (ARCHIVE.tmpXXXXXX from a
 * compaction, ARCHIVE.journal.tmpXXXXXX from the creation of an empty journal; jrnl_open
 * deals with ARCHIVE.journal.next). Only the lock holder may. */
static void remove_stale_temps(const char *archive)
{
    char *copy = strdup(archive);
    if (!copy) return;
    char *slash = strrchr(copy, '/');
    const char *base = slash + 1;
    *slash = 0;
    DIR *d = opendir(copy[0] ? copy : "/");
    struct dirent *de;
    size_t bl = strlen(base);
    while (d && (de = readdir(d))) {
        const char *n = de->d_name;
        if (strncmp(n, base, bl)) continue;
        const char *rest = n + bl;
        if (!strncmp(rest, ".journal", 8)) rest += 8;
        if (strncmp(rest, ".tmp", 4) || strlen(rest) != 10) continue;
        unlinkat(dirfd(d), n, 0);
    }
    if (d) closedir(d);
    free(copy);
}

/* One writer per archive: take the lock file beside it (created if missing, never replaced)
 * into *fd. A writer that was just unmounted may still be writing out its last records: wait
 * for it a moment before calling the archive busy. */
static int take_lock(const char *archive, int *fd)
{
    char *lp = malloc(strlen(archive) + 16);
    int rc;
    if (!lp) return -ENOMEM;
    sprintf(lp, "%s.lock", archive);
    /* Readable by all, so a writer other than its creator can open it too (flock needs no
     * write access); it holds nothing. */
    *fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0 && errno == EACCES && (*fd = open(lp, O_RDONLY | O_CLOEXEC)) < 0 &&
        errno == ENOENT) { /* none there, and no right to make one: the first error says it */
        rc = tdc_error(-EACCES,
                       "%s: cannot create the lock file: %s (a read-only mount, -o ro, "
                       "takes none)",
                       lp, strerror(EACCES));
        free(lp);
        return rc;
    }
    int locked = -1;
    for (int tries = 0; *fd >= 0 && tries < 60; tries++) {
        if ((locked = flock(*fd, LOCK_EX | LOCK_NB)) == 0 || errno != EWOULDBLOCK) break;
        usleep(50000);
    }
    char who[128] = "";
    int busy = 0;
    rc = 0;
    if (*fd < 0 || (locked < 0 && errno != EWOULDBLOCK)) {
        rc = tdc_error(-errno, "%s: %s", lp, strerror(errno));
    } else if (locked < 0) {
        busy = 1;
        fio_flock_holder(*fd, who, sizeof who);
    } else { /* a writer whose lock file was removed (a cleaner, a user) holds its journal */
        sprintf(lp, "%s.journal", archive);
        busy = jrnl_held(lp, who, sizeof who);
    }
    if (busy)
        rc = tdc_error(-EBUSY,
                       "%s: the archive is in use by another writer (a mount, compact, apply or "
                       "pack%s%s)",
                       lp, who[0] ? ": " : "", who);
    if (rc && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    free(lp);
    return rc;
}

int vol_replace_begin(const char *path, vol_replace *r)
{
    r->lockfd = -1;
    r->jpath = NULL;
    /* The archive a symbolic link names is the one replaced: its journal and lock are those
     * beside it, as a writer (vol_open) finds them. */
    char *real = realpath(path, NULL);
    const char *archive = real ? real : path;
    struct stat sb;
    int rc = 0;
    /* Something other than a regular file is not replaced (the writer refuses it): no lock
     * file beside /dev/full or a directory. */
    if (real && stat(real, &sb) == 0 && !S_ISREG(sb.st_mode)) goto out;
    if (!(r->jpath = malloc(strlen(archive) + 16))) {
        rc = -ENOMEM;
        goto out;
    }
    sprintf(r->jpath, "%s.journal", archive);
    if (stat(r->jpath, &sb) < 0 && errno != ENOENT) {
        rc = tdc_error(-errno, "%s: %s", r->jpath, strerror(errno));
        vol_replace_end(r, 0);
        goto out;
    }
    /* Held until the new archive is in place, so that a writer opening the old one meanwhile
     * neither takes its temporary file for a dead writer's (remove_stale_temps) nor starts
     * a journal on an archive about to be replaced. */
    if (stat(archive, &sb) < 0 && errno == ENOENT && stat(r->jpath, &sb) < 0) {
        free(r->jpath);
        r->jpath = NULL; /* nothing there to guard */
        goto out;
    }
    if ((rc = take_lock(archive, &r->lockfd))) {
        vol_replace_end(r, 0);
        goto out;
    }
    if (real) remove_stale_temps(real); /* a killed pack's or compaction's, now the holder */
    /* Taken under the lock: a writer that held it has written out its last records. */
    if (stat(r->jpath, &sb) == 0 && sb.st_size > JRNL_HDR) {
        int gone = stat(archive, &sb) < 0; /* a journal without its archive: nothing to fold */
        rc = tdc_error(-EEXIST,
                       gone ? "%s holds edits of an archive no longer at %s: move the journal "
                              "aside (or put that archive back and run `tadoc compact %s`)"
                            : "%s holds edits not yet folded into %s: run `tadoc compact %s` "
                              "first, or remove the journal to drop them",
                       r->jpath, archive, archive);
        vol_replace_end(r, 0);
    }
out:
    free(real);
    return rc;
}

void vol_replace_end(vol_replace *r, int replaced)
{
    /* The journal named the old archive: with the new one in place it could only refuse
     * every writable open. It held no record (vol_replace_begin checked). */
    if (replaced && r->jpath) unlink(r->jpath);
    if (r->lockfd >= 0) close(r->lockfd);
    free(r->jpath);
    r->jpath = NULL;
    r->lockfd = -1;
}

int vol_open(const char *archive, const vol_opts *o, vol **out, jrnl_stats *rs)
{
    vol *v = calloc(1, sizeof *v);
    jrnl_stats st;
    int rc;
    if (!v) return -ENOMEM;
    v->o = *o;
    if (!v->o.journal_max) v->o.journal_max = vol_journal_max(o->compact_threshold);
    if (!v->o.level) v->o.level = VOL_LEVEL_DEFAULT;
    v->lockfd = -1;
    pthread_rwlock_init(&v->lock, NULL);
    pthread_rwlock_init(&v->alock, NULL);
    pthread_mutex_init(&v->swlock, NULL);
    pthread_cond_init(&v->swcond, NULL);
    pthread_mutex_init(&v->wlock, NULL);
    pthread_mutex_init(&v->cplock, NULL);
    pthread_mutex_init(&v->tlock, NULL);
    pthread_cond_init(&v->tcond, NULL);
    pthread_cond_init(&v->drained, NULL);
    pthread_mutex_init(&v->dlock, NULL);
    pthread_cond_init(&v->dcond, NULL);
    pthread_mutex_init(&v->splock, NULL);
    pthread_cond_init(&v->spcond, NULL);
    /* Absolute paths: a daemon changes to / after this, and compaction renames files here. */
    if (!(v->path = realpath(archive, NULL))) {
        rc = tdc_error(-errno, "%s: %s", archive, strerror(errno));
        goto fail;
    }
    archive = v->path;
    if (!(v->jpath = malloc(strlen(archive) + 16))) {
        rc = -ENOMEM;
        goto fail;
    }
    sprintf(v->jpath, "%s.journal", archive);
    if (o->writable) {
        /* What is no archive (a directory, a FIFO, an empty file) is refused, with the
         * reader's message, before a lock file is made beside it. */
        struct stat sb;
        int none = stat(archive, &sb) < 0 || !S_ISREG(sb.st_mode) || !sb.st_size;
        rc = 0;
        if (none && !(rc = arc_open_meta(archive, &v->a)))
            rc = tdc_error(-EINVAL, "%s: not an archive", archive);
        if (rc || (rc = take_lock(archive, &v->lockfd))) goto fail;
    }
    if (o->writable) remove_stale_temps(archive);
    if ((rc = arc_open_meta(archive, &v->a))) goto fail;
    /* By default reads go by shard (a cold read of the whole tree decodes each shard once,
     * reading ahead), and so do analytics: within the budget whatever the analytic holds
     * (an archive whose grammar fits the budget loaded whole can still need ten times that
     * for a ranked index). */
    if (o->lazy && !v->o.mem && v->a->version >= 4) v->o.mem = o->mem_auto;
    if (v->o.mem && (rc = vol_spans_budget(v))) goto fail;
    if (!o->lazy && (rc = vol_data(v))) goto fail;
    if ((rc = load_archive(v))) goto fail;
    v->replaying = 1;
    rc = jrnl_open(v->jpath, v->a->id, v->a->prev_id, o->writable, vol_model_replay, v, &st,
                   &v->j);
    v->replaying = 0;
    /* a journal left unread is for a caller that says so (rs); others refuse it as before */
    if (!rc && st.unread && !rs)
        rc = tdc_error(-EBADMSG,
                       "%s: %s; move the file aside to use the archive without its "
                       "pending edits",
                       v->jpath, st.why);
    if (rc) goto fail;
    /* Inodes whose last name went during replay had no opener to wait for. */
    for (uint64_t i = 0; i < v->cap; i++)
        if (v->nodes[i] && v->nodes[i]->nlink == 0) {
            if (v->nodes[i]->pt) v->dirty_files--;
            free_node(v, v->nodes[i]);
        }
    if (rs) *rs = st;
    *out = v;
    return 0;
fail:
    vol_close(v);
    return rc;
}

static uint64_t cache_budget(const vol *v)
{
    return v->o.cache_bytes ? v->o.cache_bytes : IDX_CACHE_DEFAULT;
}

/* Log each damaged shard of the loaded archive: its files fail with EIO, the others read. */
static void log_damage(vol *v)
{
    for (uint32_t k = 0; v->o.log && k < v->a->nshards; k++) {
        if (!v->a->shards[k].damage) continue;
        char line[1200];
        snprintf(line, sizeof line,
                 "cannot load %s: %s (reads of its files fail with EIO; other files read)",
                 v->path, v->a->shards[k].damage);
        v->o.log(v->o.log_ctx, line);
    }
}

/* Load the dictionary, grammar and index of the archive opened by arc_open_meta. Called with
 * v->dlock held and dstate 1; the lock is dropped meanwhile. With `defer_cache` the index is
 * published without its cache of short rules (build_cache adds it). */
static void load_data(vol *v, int defer_cache)
{
    pthread_mutex_unlock(&v->dlock);
    idx *x = NULL;
    int rc = arc_load_data(v->a);
    if (!rc)
        rc = defer_cache ? idx_build_base(v->a, &x) : idx_build_cached(v->a, cache_budget(v), &x);
    char *msg = rc ? strdup(tdc_errmsg()) : NULL;
    if (!rc) log_damage(v);
    pthread_mutex_lock(&v->dlock);
    v->x = x;
    v->dmsg = msg;
    /* Release: a reader that sees 2 without the lock (vol_data) also sees v->x and the arc. */
    __atomic_store_n(&v->dstate, rc ? (rc > 0 ? -EIO : rc) : 2, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&v->dcond);
    vol_spans_drop(v); /* reads go to the whole archive now */
}

/* The index's cache of short rules, built while reads go on (they use it once published).
 * alock keeps a compaction from swapping and freeing the index meanwhile. */
static void build_cache(vol *v)
{
    vol_arc_rdlock(v);
    int rc = idx_build_flat(v->x, cache_budget(v), &v->closing);
    vol_arc_unlock(v);
    if (rc == -ENOMEM && v->o.log)
        v->o.log(v->o.log_ctx, "no memory for the cache of short rules: reads descend into them");
}

/* The whole load failed where it ran: the log says why (reads of archived content fail). */
static void log_load_failure(vol *v)
{
    if (!v->o.log) return;
    char line[1200];
    snprintf(line, sizeof line,
             "cannot load the archive's data: %s (reads of archived content fail with EIO)",
             v->dmsg ? v->dmsg : "out of memory");
    v->o.log(v->o.log_ctx, line);
}

/* The file table the spans load from (v->smeta), copied from v->a rather than read again
 * at the first read, and after the mount rather than before it; that first read waits for
 * it (open_smeta) and, where the copy could not be made, opens it. `mine`: this thread is
 * the one that will load v->a whole (dstate 1 is its). The copy is made under dlock while
 * nobody loads v->a (load_data changes its entries), and kept only if no compaction put
 * another file table in place meanwhile (span_gen). */
static void copy_meta(vol *v, int mine)
{
    arc *m = NULL;
    pthread_mutex_lock(&v->splock);
    uint64_t gen = v->span_gen;
    pthread_mutex_unlock(&v->splock);
    pthread_mutex_lock(&v->dlock);
    if ((v->dstate == 0 || (mine && v->dstate == 1)) && v->a->pending) arc_meta_dup(v->a, &m);
    pthread_mutex_unlock(&v->dlock);
    pthread_mutex_lock(&v->splock);
    if (m && !v->smeta && v->span_gen == gen) {
        v->smeta = m;
        m = NULL;
    }
    v->smeta_pending = 0;
    pthread_cond_broadcast(&v->spcond);
    pthread_mutex_unlock(&v->splock);
    arc_free(m);
}

static void *loader(void *p)
{
    vol *v = p;
    if (v->smeta_pending) copy_meta(v, !v->o.mem);
    if (v->o.mem) return NULL; /* under a budget, started for the copy alone */
    if (v->o.load_hook) v->o.load_hook(v->o.load_ctx);
    pthread_mutex_lock(&v->dlock);
    int loaded_here = v->dstate == 1;
    if (loaded_here) load_data(v, 1);
    int failed = v->dstate < 0;
    pthread_mutex_unlock(&v->dlock);
    if (failed) {
        log_load_failure(v);
        return NULL;
    }
    /* The cache of short rules first: every read on the CPU uses it, in every GPU mode (auto
     * sends most reads to the CPU), and an upload of a large archive takes seconds. */
    if (loaded_here) build_cache(v);
    /* Then the GPU copy, not at the first read or analytic (unless the volume is closing). */
    if (__atomic_load_n(&v->closing, __ATOMIC_RELAXED)) return NULL;
    vol_arc_rdlock(v);
    backend_prepare(v->o.be, v->a, v->gen + 1);
    vol_arc_unlock(v);
    return NULL;
}

int vol_data(vol *v)
{
    /* Every read passes here: once loaded, no lock. */
    if (__atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) == 2) return 0;
    pthread_mutex_lock(&v->dlock);
    int here = v->dstate == 0;
    if (here) { /* nobody is loading: do it here */
        __atomic_store_n(&v->dstate, 1, __ATOMIC_RELAXED);
        load_data(v, 0);
    }
    while (v->dstate == 1)
        pthread_cond_wait(&v->dcond, &v->dlock);
    int rc = v->dstate < 0 ? v->dstate : 0;
    if (rc && here) log_load_failure(v);
    if (rc) tdc_error(rc, "%s", v->dmsg ? v->dmsg : "cannot load the archive: out of memory");
    pthread_mutex_unlock(&v->dlock);
    return rc;
}

int vol_start(vol *v)
{
    pthread_mutex_lock(&v->dlock);
    /* Under a budget, only what needs it loads it all. */
    int load = v->dstate == 0 && !v->o.mem;
    int copy = v->o.lazy && v->a->version >= 4 && v->a->pending && !v->loader_running;
    if (load) __atomic_store_n(&v->dstate, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&v->splock);
    v->smeta_pending = copy && !v->smeta;
    if (load || v->smeta_pending) v->loader_running = !pthread_create(&v->loader, NULL, loader, v);
    if (!v->loader_running) v->smeta_pending = 0; /* the first span opens it */
    pthread_mutex_unlock(&v->splock);
    if (load && !v->loader_running) /* the first reader loads it */
        __atomic_store_n(&v->dstate, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&v->dlock);
    if (!v->o.writable || v->th_running) return 0;
    v->th_running = !pthread_create(&v->th, NULL, background, v);
    if (!v->th_running) return tdc_error(-EAGAIN, "cannot start the journal thread");
    /* A journal already past the threshold (a mount before held it, briefly) is compacted now,
     * not at the next write. */
    if (v->o.compact_threshold && jrnl_size(v->j) > v->o.compact_threshold) vol_compact_async(v);
    return 0;
}

void vol_close(vol *v)
{
    if (!v) return;
    if (v->th_running) {
        pthread_mutex_lock(&v->tlock);
        __atomic_store_n(&v->stop, 1, __ATOMIC_RELAXED); /* read_new looks without the lock */
        pthread_cond_signal(&v->tcond);
        pthread_cond_broadcast(&v->drained);
        pthread_mutex_unlock(&v->tlock);
        pthread_join(v->th, NULL);
    }
    if (v->cth_joinable) pthread_join(v->cth, NULL);
    __atomic_store_n(&v->closing, 1, __ATOMIC_RELAXED); /* a cache still building stops */
    if (v->loader_running) pthread_join(v->loader, NULL);
    vol_spans_drop(v); /* and a read-ahead ends */
    jrnl_close(v->j);
    free_model(v);
    idx_free(v->x);
    arc_free(v->a);
    if (v->lockfd >= 0) close(v->lockfd);
    pthread_rwlock_destroy(&v->lock);
    pthread_rwlock_destroy(&v->alock);
    pthread_mutex_destroy(&v->swlock);
    pthread_cond_destroy(&v->swcond);
    pthread_mutex_destroy(&v->wlock);
    pthread_mutex_destroy(&v->cplock);
    pthread_mutex_destroy(&v->tlock);
    pthread_cond_destroy(&v->tcond);
    pthread_cond_destroy(&v->drained);
    vol_tview_put(v->tview);
    mbud_free(v->bud);
    arc_free(v->smeta);
    pthread_mutex_destroy(&v->splock);
    pthread_cond_destroy(&v->spcond);
    pthread_mutex_destroy(&v->dlock);
    pthread_cond_destroy(&v->dcond);
    free(v->dmsg);
    free(v->path);
    free(v->jpath);
    free(v);
}

/* ---------------- namespace operations ---------------- */

int vol_getattr(vol *v, uint64_t ino, struct stat *st)
{
    rbegin(v);
    vnode *n = vol_node(v, ino);
    if (n) fill_stat(v, n, st);
    rend(v);
    return n ? 0 : -ENOENT;
}

int vol_lookup(vol *v, uint64_t dir, const char *name, struct stat *st)
{
    rbegin(v);
    vnode *d = vol_node(v, dir), *n = NULL;
    int rc = !d ? -ENOENT : !S_ISDIR(d->mode) ? -ENOTDIR : 0;
    /* No name this long can exist: say so (as ext4 does), not merely ENOENT. */
    if (!rc && strlen(name) > VOL_NAME_MAX) rc = -ENAMETOOLONG;
    if (!rc) {
        if (!strcmp(name, "."))
            n = d;
        else if (!strcmp(name, ".."))
            n = vol_node(v, d->parent);
        else
            n = kid(v, d, name);
        if (n)
            fill_stat(v, n, st);
        else
            rc = -ENOENT;
    }
    rend(v);
    return rc;
}

int vol_resolve(vol *v, const char *path, uint64_t *ino)
{
    uint64_t cur = 1;
    char name[VOL_NAME_MAX + 1];
    while (*path) {
        const char *slash = strchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : strlen(path);
        if (n > VOL_NAME_MAX) return -ENAMETOOLONG;
        memcpy(name, path, n);
        name[n] = 0;
        path += n + (slash != NULL);
        if (!n) continue;
        struct stat st;
        int rc = vol_lookup(v, cur, name, &st);
        if (rc) return rc;
        cur = st.st_ino;
    }
    *ino = cur;
    return 0;
}

int vol_readlink(vol *v, uint64_t ino, char **target)
{
    rbegin(v);
    vnode *n = vol_node(v, ino);
    int rc = !n ? -ENOENT : !S_ISLNK(n->mode) ? -EINVAL : (*target = strdup(n->link)) ? 0 : -ENOMEM;
    rend(v);
    return rc;
}

int vol_list(vol *v, uint64_t dir, vol_dirent **ents, size_t *count, uint64_t *parent)
{
    rbegin(v);
    vnode *d = vol_node(v, dir);
    int rc = !d ? -ENOENT : !S_ISDIR(d->mode) ? -ENOTDIR : 0;
    vol_dirent *e = NULL;
    size_t k = 0;
    if (!rc && !(e = calloc(d->nkids + 1, sizeof *e))) rc = -ENOMEM;
    for (; !rc && k < d->nkids; k++) {
        vnode *n = vol_node(v, d->kids[k].ino);
        e[k].ino = n->ino;
        e[k].mode = n->mode & S_IFMT;
        if (!(e[k].name = strdup(d->kids[k].name))) rc = -ENOMEM;
    }
    if (!rc) {
        *ents = e;
        *count = k;
        *parent = d->parent;
    }
    rend(v);
    if (rc && e) vol_list_free(e, k);
    return rc;
}

void vol_list_free(vol_dirent *ents, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ents[i].name);
    free(ents);
}

static int name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n > VOL_NAME_MAX) return -ENAMETOOLONG;
    if (!n || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) return -EINVAL;
    return 0;
}

/* The directory `dir` for a change of its entry `name`: 0, or why not. */
static int dir_for_change(vol *v, uint64_t dir, const char *name, vnode **d)
{
    *d = vol_node(v, dir);
    if (!*d) return -ENOENT;
    if (!S_ISDIR((*d)->mode)) return -ENOTDIR;
    return name_ok(name);
}

int vol_mknode(vol *v, uint64_t dir, const char *name, uint32_t mode, uint32_t uid, uint32_t gid,
               const char *target, uint64_t rdev, struct stat *st)
{
    vnode *d;
    wbegin(v);
    int rc = dir_for_change(v, dir, name, &d);
    if (!rc && kid(v, d, name)) rc = -EEXIST;
    if (!rc && (!arc_type_of_mode(mode) || (mode & ~(uint32_t)(S_IFMT | 07777)))) rc = -EINVAL;
    if (!S_ISCHR(mode) && !S_ISBLK(mode)) rdev = 0;
    if (!rc && S_ISLNK(mode) && (!target || strlen(target) >= PATH_MAX)) rc = -ENAMETOOLONG;
    if (!rc && d->nlink == 0) rc = -ENOENT; /* a removed directory still open */
    uint64_t ino = v->next_ino;
    if (!rc) {
        jrec r = {.type = JR_CREATE, .ino = ino, .dir = dir, .mode = mode, .uid = uid, .gid = gid,
                  .time = now(), .rdev = rdev};
        set_str(r.name, sizeof r.name, name);
        set_str(r.link, sizeof r.link, S_ISLNK(mode) ? target : NULL);
        rc = commit_rec(v, &r, NULL, 0);
    }
    if (!rc) fill_stat(v, vol_node(v, ino), st);
    wend(v);
    return rc;
}

int vol_link(vol *v, uint64_t ino, uint64_t dir, const char *name, struct stat *st)
{
    vnode *d, *n;
    wbegin(v);
    int rc = dir_for_change(v, dir, name, &d);
    n = vol_node(v, ino);
    if (!rc && !n) rc = -ENOENT;
    if (!rc && S_ISDIR(n->mode)) rc = -EPERM;
    if (!rc && kid(v, d, name)) rc = -EEXIST;
    if (!rc && n->nlink >= 65000) rc = -EMLINK;
    if (!rc) {
        jrec r = {.type = JR_LINK, .ino = ino, .dir = dir, .time = now()};
        set_str(r.name, sizeof r.name, name);
        rc = commit_rec(v, &r, NULL, 0);
    }
    if (!rc) fill_stat(v, n, st);
    wend(v);
    return rc;
}

int vol_unlink(vol *v, uint64_t dir, const char *name, int isdir)
{
    vnode *d, *n = NULL;
    wbegin(v);
    int rc = dir_for_change(v, dir, name, &d);
    if (!rc && !(n = kid(v, d, name))) rc = -ENOENT;
    if (!rc && isdir && !S_ISDIR(n->mode)) rc = -ENOTDIR;
    if (!rc && !isdir && S_ISDIR(n->mode)) rc = -EISDIR;
    if (!rc && isdir && n->nkids) rc = -ENOTEMPTY;
    if (!rc) {
        jrec r = {.type = JR_UNLINK, .dir = dir, .time = now()};
        set_str(r.name, sizeof r.name, name);
        rc = commit_rec(v, &r, NULL, 0);
    }
    wend(v);
    return rc;
}

int vol_rename(vol *v, uint64_t dir, const char *name, uint64_t ndir, const char *nname,
               unsigned flags)
{
    vnode *d1, *d2, *a = NULL, *t = NULL;
    wbegin(v);
    int rc = dir_for_change(v, dir, name, &d1);
    if (!rc) rc = dir_for_change(v, ndir, nname, &d2);
    if (!rc && (flags & ~(unsigned)(VOL_RENAME_NOREPLACE | VOL_RENAME_EXCHANGE))) rc = -EINVAL;
    if (!rc && (flags & VOL_RENAME_NOREPLACE) && (flags & VOL_RENAME_EXCHANGE)) rc = -EINVAL;
    if (!rc && !(a = kid(v, d1, name))) rc = -ENOENT;
    if (!rc) t = kid(v, d2, nname);
    if (!rc && (flags & VOL_RENAME_EXCHANGE) && !t) rc = -ENOENT;
    if (!rc && (flags & VOL_RENAME_NOREPLACE) && t) rc = -EEXIST;
    if (!rc && d2->nlink == 0) rc = -ENOENT;
    /* A directory cannot move below itself. */
    if (!rc && S_ISDIR(a->mode) && is_ancestor(v, a->ino, ndir)) rc = -EINVAL;
    if (!rc && t && (flags & VOL_RENAME_EXCHANGE) && S_ISDIR(t->mode) &&
        is_ancestor(v, t->ino, dir))
        rc = -EINVAL;
    if (!rc && t && t != a && !(flags & VOL_RENAME_EXCHANGE)) {
        if (S_ISDIR(a->mode) && !S_ISDIR(t->mode))
            rc = -ENOTDIR;
        else if (!S_ISDIR(a->mode) && S_ISDIR(t->mode))
            rc = -EISDIR;
        else if (S_ISDIR(t->mode) && t->nkids)
            rc = -ENOTEMPTY;
    }
    if (!rc && a != t) {
        jrec r = {.type = JR_RENAME, .dir = dir, .dir2 = ndir, .flags = flags, .time = now()};
        set_str(r.name, sizeof r.name, name);
        set_str(r.name2, sizeof r.name2, nname);
        rc = commit_rec(v, &r, NULL, 0);
    }
    wend(v);
    return rc;
}

/* Append a TRUNCATE record for `ino`. */
static int log_truncate(vol *v, uint64_t ino, uint64_t size)
{
    jrec r = {.type = JR_TRUNCATE, .ino = ino, .size = size, .time = now()};
    return commit_rec(v, &r, NULL, 0);
}

int vol_setattr(vol *v, uint64_t ino, unsigned valid, const struct stat *in, struct stat *out)
{
    wbegin(v);
    vnode *n = vol_node(v, ino);
    int rc = n ? 0 : -ENOENT;
    if (!rc && (valid & VOL_SET_SIZE)) {
        if (S_ISDIR(n->mode))
            rc = -EISDIR;
        else if (!S_ISREG(n->mode))
            rc = -EINVAL;
        else if (in->st_size < 0)
            rc = -EINVAL;
        else if ((uint64_t)in->st_size > VOL_MAX_FILE)
            rc = -EFBIG;
        else
            rc = log_truncate(v, ino, (uint64_t)in->st_size);
    }
    /* Every record sets the change time: VOL_SET_CTIME alone needs one, unless the TRUNCATE */
    unsigned rest = valid & ~(unsigned)VOL_SET_SIZE;
    if (valid & VOL_SET_SIZE) rest &= ~(unsigned)VOL_SET_CTIME;
    if (!rc && rest) {
        jrec r = {.type = JR_SETATTR,
                  .ino = ino,
                  .valid = rest & ~(unsigned)VOL_SET_CTIME,
                  .mode = in->st_mode & 07777,
                  .uid = in->st_uid,
                  .gid = in->st_gid,
                  .atime = in->st_atim,
                  .mtime = in->st_mtim,
                  .time = now()};
        rc = commit_rec(v, &r, NULL, 0);
    }
    if (!rc && out) fill_stat(v, n, out);
    wend(v);
    return rc;
}

/* ---------------- content ---------------- */

static int data_op(vol *v, uint32_t type, uint64_t ino, uint64_t off, const void *p, size_t n)
{
    const unsigned char *q = p;
    const size_t chunk = (size_t)16 << 20;
    int rc = 0;
    wbegin(v);
    vnode *f = vol_node(v, ino);
    if (!f)
        rc = -ENOENT;
    else if (S_ISDIR(f->mode))
        rc = -EISDIR;
    else if (!S_ISREG(f->mode))
        rc = -EINVAL;
    else if (off > VOL_MAX_FILE || n > VOL_MAX_FILE - off ||
             (type == JR_INSERT && n > VOL_MAX_FILE - f->size))
        rc = -EFBIG;
    else if (type == JR_INSERT && off > f->size)
        rc = -EINVAL;
    /* Large writes become several records, each whole on its own. */
    for (size_t done = 0; !rc && (done < n || n == 0);) {
        size_t k = n - done < chunk ? n - done : chunk;
        jrec r = {.type = type, .ino = ino, .off = off + done, .time = now()};
        rc = commit_rec(v, &r, q + done, k);
        done += k;
        if (n == 0) break;
    }
    wend(v);
    return rc;
}

int vol_write(vol *v, uint64_t ino, uint64_t off, const void *p, size_t n)
{
    if (!n) return 0;
    return data_op(v, JR_WRITE, ino, off, p, n);
}

int vol_insert(vol *v, uint64_t ino, uint64_t off, const void *p, size_t n)
{
    if (!n) return 0;
    return data_op(v, JR_INSERT, ino, off, p, n);
}

void vol_reader_init(vol_reader *r)
{
    idx_cursor_init(&r->cur);
    r->gen = 0;
    r->span = NULL;
}

void vol_reader_free(vol_reader *r)
{
    idx_cursor_free(&r->cur);
}

typedef struct base_reader {
    vol *v;
    vol_reader *r;
} base_reader;

/* The CPU's read of archived bytes, with the reader's cursor (reset on a new archive). */
static ssize_t read_cpu(void *arg, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    vol *v = ((base_reader *)arg)->v;
    vol_reader *r = ((base_reader *)arg)->r;
    if (r->gen != v->gen) {
        idx_cursor_free(&r->cur);
        idx_cursor_init(&r->cur);
        r->gen = v->gen;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t k = idx_read(v->x, &r->cur, ent, off + done, (char *)dst + done, n - done);
        if (k < 0) return k;
        if (k == 0) return tdc_error(-EIO, "archived content ends early");
        done += (size_t)k;
    }
    return (ssize_t)done;
}

/* Read archived bytes of entry `ent`: on the CPU, or batched onto the GPU (backend_read). The
 * archive's generation + 1 names it there, as for analytics (vol_lock_arc). */
static ssize_t read_base(vol *v, vol_reader *r, int64_t ent, uint64_t off, void *dst, size_t n)
{
    if (__atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) != 2) /* not loaded (vol_read) */
        return vol_span_read(v, r->span, ent, off, dst, n);
    int dmg = arc_entry_damaged(v->a, (uint32_t)ent); /* the GPU would read the stand-in */
    if (dmg) return dmg;
    base_reader b = {v, r};
    return backend_read(v->o.be, v->a, v->gen + 1, (uint32_t)ent, off, dst, n, read_cpu, &b);
}

ssize_t vol_read_locked(vol *v, vol_reader *r, const vnode *f, uint64_t off, void *dst, size_t n)
{
    if (S_ISDIR(f->mode)) return -EISDIR;
    if (!S_ISREG(f->mode)) return -EINVAL;
    if (off >= f->size) return 0;
    if (n > f->size - off) n = (size_t)(f->size - off);
    if (n > SSIZE_MAX) n = SSIZE_MAX;
    if (!f->pt) return read_base(v, r, f->ent, off, dst, n);
    size_t done = 0;
    for (size_t i = pt_find(f->pt, off); done < n; i++) {
        const pt_piece *pc = &f->pt->p[i];
        uint64_t at = off + done - pt_start(f->pt, i);
        size_t k = pc->end - (off + done) < n - done ? (size_t)(pc->end - (off + done)) : n - done;
        char *d = (char *)dst + done;
        ssize_t rc = 0;
        if (pc->kind == PT_ZERO)
            memset(d, 0, k);
        else if (pc->kind == PT_JRNL)
            rc = jrnl_read(v->j, pc->src + at, d, k);
        else
            rc = read_base(v, r, f->ent, pc->src + at, d, k);
        if (rc < 0) return rc;
        done += k;
    }
    return (ssize_t)done;
}

/* Whether reads go to the shards of their files rather than to the whole archive: while the
 * loader runs, and always under a budget until something loads it all. */
static int reads_from_spans(vol *v)
{
    int ds = __atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE);
    return ds == 1 || (ds == 0 && v->o.mem && v->o.lazy);
}

/* The entry holding ino's archived content, or -1 (none, or not a regular file). */
static int64_t archived_entry(vol *v, uint64_t ino)
{
    rbegin(v);
    vnode *f = vol_node(v, ino);
    int64_t ent = f && S_ISREG(f->mode) && f->size ? f->ent : -1;
    rend(v);
    return ent;
}

/* Decode the shards of ino's archived content holding byte `off` (all of them but for a file
 * read part by part), if it has any, before the model lock is taken, so that changes need
 * not wait for the decoding; the span is held in r->span for the read (which then need not
 * find it kept, nor decode it again when it could not be kept). */
static void warm_span(vol *v, vol_reader *r, uint64_t ino, uint64_t off)
{
    int64_t ent = archived_entry(v, ino);
    if (ent >= 0) r->span = vol_span_hold(v, ent, off);
}

int vol_change_ready(vol *v)
{
    return !v->o.writable || !backlogged(v);
}

int vol_read_ready(vol *v, uint64_t ino, uint64_t off, size_t n)
{
    /* Loaded: only a read that may go to the GPU waits (for a batch); any other is served
     * at once in every mode, as a hand-off to a worker per small read costs more than it. */
    if (__atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) == 2)
        return !backend_read_may_queue(v->o.be, n);
    if (!reads_from_spans(v)) return 0; /* the read would load the whole archive */
    int64_t ent = archived_entry(v, ino);
    return ent < 0 || vol_span_kept(v, ent, off);
}

ssize_t vol_read(vol *v, vol_reader *r, uint64_t ino, uint64_t off, void *dst, size_t n)
{
    for (;;) {
        int spans = reads_from_spans(v);
        if (spans) {
            warm_span(v, r, ino, off);
        } else { /* before the model lock: changes go on while the data loads */
            int rc = vol_data(v);
            if (rc) return rc;
        }
        rbegin(v);
        vnode *f = vol_node(v, ino);
        ssize_t k = f ? vol_read_locked(v, r, f, off, dst, n) : -ENOENT;
        rend(v);
        vol_span_release(v, r->span);
        r->span = NULL;
        if (k != -EAGAIN || !spans) return k;
        int rc = vol_data(v); /* the spans could not serve it: the whole archive will */
        if (rc) return rc;
    }
}

/* Free `ino` if it has neither names nor open handles (left so by a vol_ref). */
static void free_orphan(vol *v, uint64_t ino)
{
    pthread_rwlock_wrlock(&v->lock);
    vnode *n = vol_node(v, ino);
    if (n && n->opens == 0 && n->nlink == 0) {
        if (n->pt) v->dirty_files--;
        free_node(v, n);
    }
    pthread_rwlock_unlock(&v->lock);
}

void vol_ref(vol *v, uint64_t ino, int delta)
{
    /* The shared lock, so that opening and closing files never waits for reads in flight;
     * only the last release of an inode without names takes the exclusive one. */
    rbegin(v);
    vnode *n = vol_node(v, ino);
    int orphan =
        n && __atomic_add_fetch(&n->opens, (uint32_t)delta, __ATOMIC_RELAXED) == 0 && n->nlink == 0;
    rend(v);
    if (orphan) free_orphan(v, ino);
}

void vol_state(vol *v, uint64_t st[2])
{
    rbegin(v); /* no swap halfway: the generation goes with the count it was made from */
    st[0] = v->gen;
    st[1] = __atomic_load_n(&v->changes, __ATOMIC_ACQUIRE);
    rend(v);
}

int vol_clean_hash(vol *v, uint64_t ino, uint64_t *hash)
{
    rbegin(v);
    vnode *n = vol_node(v, ino);
    int clean = n && S_ISREG(n->mode) && !n->pt && n->ent >= 0;
    if (clean) *hash = v->a->ents[n->ent].hash;
    rend(v);
    return clean;
}

/* ---------------- extended attributes ---------------- */

int vol_getxattr(vol *v, uint64_t ino, const char *name, buf *out)
{
    rbegin(v);
    vnode *n = vol_node(v, ino);
    int rc = n ? -ENODATA : -ENOENT;
    for (uint32_t k = 0; n && k < n->nxa; k++)
        if (!strcmp(n->xa[k].name, name)) {
            rc = buf_put(out, n->xa[k].val, n->xa[k].len) ? -ENOMEM : 0;
            break;
        }
    rend(v);
    return rc;
}

int vol_listxattr(vol *v, uint64_t ino, buf *out)
{
    rbegin(v);
    vnode *n = vol_node(v, ino);
    int rc = n ? 0 : -ENOENT;
    for (uint32_t k = 0; n && k < n->nxa && !rc; k++)
        rc = buf_put(out, n->xa[k].name, strlen(n->xa[k].name) + 1) ? -ENOMEM : 0;
    rend(v);
    return rc;
}

static int xattr_op(vol *v, uint64_t ino, const char *name, const void *val, size_t len, int flags,
                    int set)
{
    wbegin(v);
    vnode *n = vol_node(v, ino);
    int rc = n ? 0 : -ENOENT, have = 0, same = 0;
    if (!rc && (!name[0] || strlen(name) > VOL_NAME_MAX)) rc = name[0] ? -ERANGE : -EINVAL;
    /* the names as listxattr(2) returns them: "user." prefixed, each NUL-terminated */
    size_t list = rc ? 0 : strlen(name) + 6;
    for (uint32_t k = 0; !rc && k < n->nxa; k++) {
        if (!strcmp(n->xa[k].name, name)) {
            have = 1;
            same = set && n->xa[k].len == len && (!len || !memcmp(n->xa[k].val, val, len));
        }
        list += strlen(n->xa[k].name) + 6;
    }
    if (!rc && set && (flags & 1) && have) rc = -EEXIST;
    if (!rc && set && (flags & 2) && !have) rc = -ENODATA;
    if (!rc && !set && !have) rc = -ENODATA;
    if (!rc && len > 65536) rc = -E2BIG;
    /* a name more would make a list no listxattr could return (XATTR_LIST_MAX): as a full
     * ext4 inode, no room */
    if (!rc && set && !have && list > 65536) rc = -ENOSPC;
    /* the value it already has: as ext4, nothing changes, not even the ctime */
    if (!rc && !same) {
        jrec r = {.type = set ? JR_SETXATTR : JR_RMXATTR, .ino = ino, .time = now()};
        set_str(r.name, sizeof r.name, name);
        if (set) r.tail = val, r.ntail = len;
        rc = commit_rec(v, &r, NULL, 0);
    }
    wend(v);
    return rc;
}

int vol_setxattr(vol *v, uint64_t ino, const char *name, const void *val, size_t n, int flags)
{
    return xattr_op(v, ino, name, val, n, flags, 1);
}

int vol_removexattr(vol *v, uint64_t ino, const char *name)
{
    return xattr_op(v, ino, name, NULL, 0, 0, 0);
}

/* ---------------- durability ---------------- */

void vol_mark_get(vol *v, vol_mark *m)
{
    pthread_mutex_lock(&v->wlock);
    *m = v->j ? (vol_mark){jrnl_size(v->j), jrnl_records(v->j)} : (vol_mark){0, 0};
    pthread_mutex_unlock(&v->wlock);
}

int vol_undo(vol *v, const vol_mark *m)
{
    pthread_mutex_lock(&v->wlock);
    int rc = v->j ? jrnl_cut(v->j, m->end, m->seq) : 0;
    pthread_mutex_unlock(&v->wlock);
    return rc;
}

int vol_sync(vol *v)
{
    int rc = 0;
    if (v->o.writable) {
        /* jrnl_sync may race a compaction's journal reset: hold the change lock. */
        pthread_mutex_lock(&v->wlock);
        rc = jrnl_sync(v->j);
        pthread_mutex_unlock(&v->wlock);
    }
    return rc;
}

void vol_get_info(vol *v, vol_info *in)
{
    rbegin(v);
    memset(in, 0, sizeof *in);
    in->journal_bytes = v->j ? jrnl_size(v->j) : 0;
    in->journal_records = v->j ? jrnl_records(v->j) : 0;
    in->dirty_files = v->dirty_files;
    in->inodes = v->ninodes;
    in->compactions = v->compactions;
    in->archive_bytes = v->a->file_size;
    in->early_reads = __atomic_load_n(&v->early_reads, __ATOMIC_RELAXED);
    pthread_mutex_lock(&v->splock);
    in->span_loads = v->span_loads;
    in->span_hits = v->span_hits;
    in->span_evictions = v->span_evictions;
    in->span_ahead = v->span_ahead;
    in->span_text = v->span_text;
    in->span_trims = __atomic_load_n(&v->span_trims, __ATOMIC_RELAXED);
    in->spans = v->nspans;
    in->span_bytes = v->span_bytes;
    in->budget = v->o.mem;
    pthread_mutex_unlock(&v->splock);
    if (v->bud) {
        mbud_stats b;
        mbud_get_stats(v->bud, &b);
        in->budget_used = b.used;
        in->budget_peak = b.peak;
        in->budget_waits = b.waits;
        in->budget_over = b.over;
    }
    in->whole = __atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) == 2;
    for (uint64_t i = 0; i < v->cap; i++)
        if (v->nodes[i] && S_ISREG(v->nodes[i]->mode) && v->nodes[i]->nlink) {
            in->files++;
            in->content_bytes += v->nodes[i]->size;
        }
    rend(v);
}

mbud *vol_budget(vol *v)
{
    return v->bud;
}

const char *vol_path(const vol *v)
{
    return v->path;
}

int vol_rules(vol *v, uint64_t *n)
{
    *n = 0;
    vol_arc_rdlock(v);
    int shards = v->a->version >= 4;
    for (uint32_t k = 0; shards && k < v->a->nshards; k++)
        *n += v->a->shards[k].nrules;
    vol_arc_unlock(v);
    if (shards) return 0;
    const arc *a;
    const idx *x;
    int rc = vol_lock_arc(v, &a, &x);
    if (rc) return rc;
    *n = a->g.nrules;
    vol_unlock_arc(v);
    return 0;
}

/* alock holds of this thread (vol_arc_rdlock): any vol's, since one thread's holds nest. */
static __thread unsigned arc_holds;

void vol_arc_rdlock(vol *v)
{
    if (!arc_holds && __atomic_load_n(&v->switching, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&v->swlock);
        while (__atomic_load_n(&v->switching, __ATOMIC_RELAXED))
            pthread_cond_wait(&v->swcond, &v->swlock);
        pthread_mutex_unlock(&v->swlock);
    }
    pthread_rwlock_rdlock(&v->alock);
    arc_holds++;
}

void vol_arc_unlock(vol *v)
{
    arc_holds--;
    pthread_rwlock_unlock(&v->alock);
}

void vol_arc_wrlock(vol *v)
{
    pthread_mutex_lock(&v->swlock);
    __atomic_store_n(&v->switching, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&v->swlock);
    pthread_rwlock_wrlock(&v->alock);
}

void vol_arc_wrunlock(vol *v)
{
    pthread_rwlock_unlock(&v->alock);
    pthread_mutex_lock(&v->swlock);
    __atomic_store_n(&v->switching, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&v->swcond);
    pthread_mutex_unlock(&v->swlock);
}

void vol_cancel(vol *v)
{
    __atomic_store_n(&v->stop, 1, __ATOMIC_RELAXED);
}

int vol_lock_arc(vol *v, const arc **a, const idx **x)
{
    for (;;) {
        int rc = vol_data(v);
        if (rc) return rc;
        vol_arc_rdlock(v);
        /* A compaction under a budget may have put an archive not loaded in place since. */
        if (__atomic_load_n(&v->dstate, __ATOMIC_ACQUIRE) == 2) break;
        vol_arc_unlock(v);
    }
    *x = v->x;
    *a = v->a;
    return 0;
}

void vol_unlock_arc(vol *v)
{
    vol_arc_unlock(v);
}

/* 1 if n and everything below it are as archived. */
static int subtree_clean(const vol *v, const vnode *n)
{
    if (n->edited || n->pt || n->ent < 0) return 0;
    for (uint32_t k = 0; k < n->nkids; k++)
        if (!subtree_clean(v, vol_node(v, n->kids[k].ino))) return 0;
    return 1;
}

int64_t vol_clean_entry(vol *v, uint64_t ino)
{
    rbegin(v);
    vnode *n = vol_node(v, ino);
    int64_t e = -1;
    if (n && (jrnl_records(v->j) == 0 || subtree_clean(v, n))) e = n->ent;
    rend(v);
    return e;
}

/* ---------------- background: compaction ---------------- */

/* A background compaction (vol_compact_async), logged. */
static void *compactor(void *p)
{
    vol *v = p;
    vol_compact_stats st;
    int rc = vol_compact_bg(v, &st);
    rbegin(v);
    uint64_t size = jrnl_size(v->j);
    rend(v);
    /* After a failure, not again at every write: once the journal has grown as much again. */
    if (rc) __atomic_store_n(&v->retry_at, size + v->o.compact_threshold, __ATOMIC_RELAXED);
    if (v->o.log) {
        char msg[512];
        const char *why = tdc_errmsg();
        if (rc) /* the message may say it already */
            snprintf(msg, sizeof msg, "%s%s",
                     strncmp(why, "compaction failed", 17) ? "compaction failed: " : "", why);
        else
            snprintf(msg, sizeof msg,
                     "compacted %" PRIu64 " dirty files (%" PRIu64 " bytes): archive %" PRIu64
                     " -> %" PRIu64 " bytes in %.2f s (built on %u threads)",
                     st.dirty_files, st.dirty_bytes, st.archive_before, st.archive_after,
                     st.build_s + st.write_s + st.swap_s, st.build_threads);
        v->o.log(v->o.log_ctx, msg);
    }
    pthread_mutex_lock(&v->tlock);
    v->compacting = 0;
    v->cth_ends++;
    pthread_cond_broadcast(&v->drained);
    /* What was written meanwhile stayed in the journal: enough of it is compacted next. */
    if (!rc && size > v->o.compact_threshold) {
        v->want_compact = WANT_THRESHOLD;
        pthread_cond_signal(&v->tcond);
    }
    pthread_mutex_unlock(&v->tlock);
    return NULL;
}

static void *background(void *p)
{
    vol *v = p;
    pthread_mutex_lock(&v->tlock);
    for (;;) {
        while (!v->stop && !v->want_compact)
            pthread_cond_wait(&v->tcond, &v->tlock);
        if (v->stop) break;
        int compact = v->want_compact;
        v->want_compact = 0;
        pthread_mutex_unlock(&v->tlock);
        if (compact == WANT_THRESHOLD) {
            /* The request may predate the last compaction (a write raced it): only compact
             * when the journal is still past the threshold. */
            rbegin(v);
            uint64_t size = jrnl_size(v->j);
            compact = size > v->o.compact_threshold &&
                      size >= __atomic_load_n(&v->retry_at, __ATOMIC_RELAXED);
            rend(v);
        }
        pthread_mutex_lock(&v->tlock);
        if (compact && !v->compacting) {
            if (v->cth_joinable) pthread_join(v->cth, NULL);
            v->compacting = !pthread_create(&v->cth, NULL, compactor, v);
            v->cth_joinable = v->compacting;
        }
        if (!v->compacting) pthread_cond_broadcast(&v->drained); /* none asked after all */
    }
    pthread_mutex_unlock(&v->tlock);
    return NULL;
}

/* Ask the background thread for a compaction: `want` WANT_THRESHOLD (if the journal is still
 * past the threshold then) or WANT_NOW (whatever its size); a request for now stays one. */
static int ask_compaction(vol *v, int want)
{
    if (!v->th_running) return -EROFS;
    pthread_mutex_lock(&v->tlock);
    if (v->want_compact != WANT_NOW) v->want_compact = want;
    pthread_cond_signal(&v->tcond);
    pthread_mutex_unlock(&v->tlock);
    return 0;
}

void vol_compact_async(vol *v)
{
    ask_compaction(v, WANT_THRESHOLD);
}

int vol_compact_start(vol *v)
{
    return ask_compaction(v, WANT_NOW);
}
