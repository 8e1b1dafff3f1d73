#include "fs.h"

#include <errno.h>
#include <malloc.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <syslog.h>
#include <unistd.h>
#include <xxhash.h>

#include "../engine/analytics/ana.h"
#include "../engine/analytics/ana_shards.h"
#include "../engine/analytics/analytics.h"
#include "../engine/backend/backend.h"
#include "../engine/base/err.h"
#include "../engine/volume/hashck.h"
#include "../engine/index/words.h"
#include "perm.h"
#include "push.h"

#define USER_PREFIX "user."
#define TADOC_PREFIX "user.tadoc."

/* Virtual files: analytics resolved by name in every directory and never listed, and the
 * `.search` directory. Their inode numbers lie above every real one (real ones stay below
 * ARC_INO_MAX = 2^60): VINO_BIT | dir << 3 | kind for the per-directory ones, and
 * FS_SEARCH_BASE + k for the k-th `.search/WORD` looked up. */
#define VINO_BIT ((uint64_t)1 << 63)
#define FS_SEARCH_BASE ((uint64_t)1 << 62)

/* The kinds of virtual files: the analytics' ids (ana_table[kind].vfile), then .search. */
#define SEARCH_DIR ANA_NIDS
_Static_assert(SEARCH_DIR < 8, "a virtual file's kind is 3 bits of its inode number");

/* What every open file and directory handle begins with: its place among c->handles. */
typedef struct fs_handle {
    struct fs_handle *prev, *next;
    int dir;
} fs_handle;

static void handle_add(fs_ctx *c, fs_handle *h, int dir)
{
    h->dir = dir;
    pthread_mutex_lock(&c->hlock);
    h->prev = NULL;
    h->next = c->handles;
    if (c->handles) c->handles->prev = h;
    c->handles = h;
    pthread_mutex_unlock(&c->hlock);
}

static void handle_del(fs_ctx *c, fs_handle *h)
{
    pthread_mutex_lock(&c->hlock);
    if (h->prev)
        h->prev->next = h->next;
    else
        c->handles = h->next;
    if (h->next) h->next->prev = h->prev;
    pthread_mutex_unlock(&c->hlock);
}

/* Per-open state: a regular file (reader and running hash) or a computed virtual file. */
typedef struct fs_file {
    fs_handle h;
    pthread_mutex_t lock;
    int virt;
    vtext *vt; /* the virtual file's text (a reference) */
    uint64_t ino;
    vol_reader rd;
    hashck hc; /* the content-hash check of an unchanged file read in order */
    struct timespec hc_ctime; /* the file's ctime when hc began: a change moves it */
} fs_file;

/* A directory handle: a snapshot of the entries, taken at opendir and at rewinddir. */
typedef struct fs_dir {
    fs_handle h;
    uint64_t ino; /* the directory's (a virtual one's too) */
    vol_dirent *ents;
    size_t n;
    uint64_t parent;
} fs_dir;

static fs_ctx *ctx_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static int is_real(fuse_ino_t ino)
{
    return ino < FS_SEARCH_BASE;
}

/* ---------------- virtual inodes ---------------- */

static fuse_ino_t vino(uint64_t dir, uint32_t kind)
{
    return VINO_BIT | dir << 3 | kind;
}

/* Decode a per-directory virtual inode; 0 on success. */
static int vino_of(fuse_ino_t ino, uint64_t *dir, uint32_t *kind)
{
    if (!(ino & VINO_BIT)) return -1;
    *dir = (ino & ~VINO_BIT) >> 3;
    *kind = (uint32_t)(ino & 7);
    return *kind <= SEARCH_DIR ? 0 : -1;
}

/* 1 if `ino` is a search file's inode number (registered or not). */
static int is_sfile(fuse_ino_t ino)
{
    return ino >= FS_SEARCH_BASE && !(ino & VINO_BIT);
}

/* 0 with the directory and kind of registered inode `ino` (a search file, or noopen's
 * virtual file), a copy of its word when `word` is not NULL, a reference to its text (or
 * NULL) when `text` is not NULL; -1 if it is not one the kernel holds. */
static int sfile_of(fs_ctx *c, fuse_ino_t ino, uint64_t *dir, uint32_t *kind, char **word,
                    vtext **text)
{
    if (!is_sfile(ino)) return -1;
    return sreg_get(&c->search, ino - FS_SEARCH_BASE, dir, kind, word, text);
}

/* Attributes of any virtual inode; 0 if `ino` is one whose directory still exists. The size
 * of a virtual file is its own text's (noopen: each text has an inode of its own), else 0,
 * as a /proc file's: under -o open the callers of every visible set share the inode, so
 * its size and its pages in the kernel's cache would be theirs all; with size 0, read(2)
 * (direct I/O) reads the opener's text to its end and a mapping holds none. */
static int vattr(fs_ctx *c, fuse_ino_t ino, struct stat *st)
{
    uint64_t dir;
    uint32_t kind = 0;
    vtext *t = NULL;
    int reg = 0;
    if (vino_of(ino, &dir, &kind)) {
        if (sfile_of(c, ino, &dir, &kind, NULL, &t) < 0) return -1;
        reg = 1;
    }
    int isdir = !reg && kind == SEARCH_DIR;
    if (vol_getattr(c->v, dir, st) || !S_ISDIR(st->st_mode)) {
        vtext_put(t);
        return -1;
    }
    st->st_ino = (ino_t)ino;
    st->st_mode = isdir ? S_IFDIR | 0555 : S_IFREG | 0444;
    st->st_nlink = isdir ? 2 : 1;
    st->st_size = t ? (off_t)t->n : 0;
    vtext_put(t);
    st->st_blocks = (st->st_size + 511) / 512;
    if (c->uid != (uint32_t)-1) st->st_uid = c->uid;
    if (c->gid != (uint32_t)-1) st->st_gid = c->gid;
    return 0;
}

/* The inode of `.search/word` under directory `dir`, registered on first use, with one more
 * reference for the lookup that will answer with it. */
static int search_register(fs_ctx *c, uint64_t dir, const char *word, fuse_ino_t *ino)
{
    uint32_t slot;
    sreg_key k = {.dir = dir, .kind = SEARCH_DIR, .word = word};
    int rc = sreg_ref(&c->search, &k, &slot, NULL);
    if (!rc) *ino = (fuse_ino_t)(FS_SEARCH_BASE + slot);
    return rc;
}

/* ---------------- helpers ---------------- */

static void owners(const fs_ctx *c, struct stat *st)
{
    if (c->uid != (uint32_t)-1) st->st_uid = c->uid;
    if (c->gid != (uint32_t)-1) st->st_gid = c->gid;
}

/* With noopen on a writable mount, the kernel's lookup count of each inode is what keeps an
 * unlinked file readable until the kernel forgets the inode (vol_ref; opens and releases do
 * otherwise): taken before each entry goes to the kernel, given back at FORGET or when the
 * reply does not reach it. */
static void lookup_ref(fs_ctx *c, uint64_t ino, int delta)
{
    if (c->kept && !c->ro && ino) vol_ref(c->v, ino, delta);
}

static void reply_entry(fuse_req_t req, fs_ctx *c, const struct stat *st)
{
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = st->st_ino;
    e.generation = 1;
    e.attr = *st;
    owners(c, &e.attr);
    e.attr_timeout = e.entry_timeout = c->timeout;
    lookup_ref(c, e.ino, 1);
    if (fuse_reply_entry(req, &e)) lookup_ref(c, e.ino, -1);
}

static void reply_rc(fuse_req_t req, int rc)
{
    fuse_reply_err(req, rc < 0 ? -rc : rc);
}

/* Log unexpected failures (not the everyday ENOENT/EEXIST/...). */
static int logged(int rc, const char *what)
{
    if (rc == -EIO || rc == -EBADMSG || rc == -ENOMEM)
        syslog(LOG_ERR, "%s: %s", what, tdc_errmsg());
    return rc == -EBADMSG ? -EIO : rc;
}

/* 1 if `ino` is in the damaged list; the caller holds dlock. */
static int damaged_locked(const fs_ctx *c, uint64_t ino)
{
    for (size_t i = 0; i < c->ndamaged; i++)
        if (c->damaged[i] == ino) return 1;
    return 0;
}

/* Whether reads of `ino` fail because its content failed its hash. Every read asks: while
 * nothing is damaged (an intact archive) it takes no lock. */
static int is_damaged(fs_ctx *c, uint64_t ino)
{
    if (!__atomic_load_n(&c->ndamaged, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&c->dlock);
    int bad = damaged_locked(c, ino);
    pthread_mutex_unlock(&c->dlock);
    return bad;
}

/* Add `ino` to the damaged list, once: the list holds at most one entry per file. */
static void set_damaged(fs_ctx *c, uint64_t ino)
{
    pthread_mutex_lock(&c->dlock);
    uint64_t *p =
        damaged_locked(c, ino) ? NULL : realloc(c->damaged, (c->ndamaged + 1) * sizeof *p);
    if (p) {
        c->damaged = p;
        c->damaged[c->ndamaged] = ino;
        __atomic_store_n(&c->ndamaged, c->ndamaged + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->dlock);
}

/* ---------------- the request loop's policy ---------------- */

/* The kind of virtual file `name` names in a directory (an analytic's, or SEARCH_DIR for
 * .search), or -1 for any other name. */
static int vkind_of_name(const char *name)
{
    if (name[0] != '.') return -1;
    for (uint32_t k = 0; k <= SEARCH_DIR; k++)
        if (!strcmp(name, k == SEARCH_DIR ? ".search" : ana_table[k].vfile)) return (int)k;
    return -1;
}

/* 1 if the name of n bytes (a lookup's, NUL-terminated within them) is a virtual file's. */
static int is_vname(const char *name, size_t n)
{
    if (!n || name[n - 1]) return 0;
    int k = vkind_of_name(name);
    return k >= 0 && k != SEARCH_DIR;
}

int fs_quick(void *ctx, const void *msg, size_t len)
{
    fs_ctx *c = ctx;
    const struct fuse_in_header *h = msg;
    if (len < sizeof *h) return 1; /* libfuse answers that it is malformed */
    const void *arg = h + 1;
    size_t alen = len - sizeof *h;
    switch (h->opcode) {
    case FUSE_INIT: /* before anything else */
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_INTERRUPT:
        return 1;
    case FUSE_LOOKUP: /* noopen computes a virtual file's text at its lookup */
        return is_real(h->nodeid) && !(c->kept && !c->novirtual && is_vname(arg, alen));
    case FUSE_GETATTR:
    case FUSE_OPENDIR:
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
    case FUSE_RELEASEDIR:
        return is_real(h->nodeid);
    case FUSE_GETXATTR: /* the root's user.tadoc.* attributes gather statistics */
        return is_real(h->nodeid) && h->nodeid != FUSE_ROOT_ID;
    case FUSE_OPEN: { /* O_TRUNC is a change */
        const struct fuse_open_in *in = arg;
        return alen >= sizeof *in && is_real(h->nodeid) && !(in->flags & O_TRUNC);
    }
    case FUSE_RELEASE: /* a removed file's last release frees it: no journal */
        return is_real(h->nodeid);
    case FUSE_READ: {
        const struct fuse_read_in *in = arg;
        return alen >= sizeof *in && is_real(h->nodeid) && in->size <= FS_QUICK_BYTES &&
               vol_read_ready(c->v, h->nodeid, in->offset, in->size);
    }
    case FUSE_WRITE: {
        const struct fuse_write_in *in = arg;
        return alen >= sizeof *in && is_real(h->nodeid) && in->size <= FS_QUICK_BYTES &&
               vol_change_ready(c->v);
    }
    /* Changes of names and attributes: one journal record each. */
    case FUSE_CREATE:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    case FUSE_UNLINK:
    case FUSE_RMDIR:
    case FUSE_RENAME:
    case FUSE_RENAME2:
    case FUSE_SETATTR:
        return is_real(h->nodeid) && vol_change_ready(c->v);
    case FUSE_SETXATTR: /* user.tadoc.compact on the root compacts */
    case FUSE_REMOVEXATTR:
        return is_real(h->nodeid) && h->nodeid != FUSE_ROOT_ID && vol_change_ready(c->v);
    default:
        return 0;
    }
}

/* ---------------- lookup and attributes ---------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    fs_ctx *c = userdata;
    /* Large requests: 1 MiB reads, writes and readahead where the kernel allows them. */
    conn->max_readahead = 1 << 20;
    conn->max_write = 1 << 20;
    if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
    /* Attributes with every block of a listing, not only the first: a tar lists a directory
     * whole before it stats the entries, and "auto" left a LOOKUP per entry past that block. */
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    /* noopen on a kernel that would fail every open answered ENOSYS (one without the no-open
     * mode): the usual mode instead. No request has come yet. */
    if (c->kept && !(conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) fs_kept_free(c);
    /* noopen: no OPEN carries O_TRUNC; the kernel truncates through SETATTR instead. */
    if (c->kept) conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
}

static int kept_vfile(fuse_req_t req, fs_ctx *c, uint64_t dir, uint32_t kind, const char *word,
                      struct fuse_entry_param *e);

/* noopen: answer a lookup with virtual file `kind` of `dir` (`.search/word` when word is not
 * NULL) as req's caller sees it now. */
static void lookup_kept_vfile(fuse_req_t req, fs_ctx *c, uint64_t dir, uint32_t kind,
                              const char *word)
{
    struct fuse_entry_param e;
    int rc = kept_vfile(req, c, dir, kind, word, &e);
    if (rc) {
        syslog(LOG_ERR, "virtual file of directory %llu: %s", (unsigned long long)dir,
               tdc_errmsg());
        reply_rc(req, rc == -ENOMEM ? -ENOMEM : rc == -ENOENT ? -ENOENT : -EIO);
    } else if (fuse_reply_entry(req, &e)) {
        sreg_forget(&c->search, e.ino - FS_SEARCH_BASE, 1);
    }
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fs_ctx *c = ctx_of(req);
    uint64_t sdir;
    uint32_t skind;
    struct stat st;
    if (!vino_of(parent, &sdir, &skind) && skind == SEARCH_DIR) {
        /* Any name inside .search is a word to look for. */
        if (c->kept) {
            lookup_kept_vfile(req, c, sdir, SEARCH_DIR, name);
            return;
        }
        fuse_ino_t ino = 0;
        if (search_register(c, sdir, name, &ino) || vattr(c, ino, &st)) {
            if (ino) sreg_forget(&c->search, ino - FS_SEARCH_BASE, 1);
            fuse_reply_err(req, ENOMEM);
            return;
        }
        struct fuse_entry_param se = {.ino = ino, .generation = 1, .attr = st};
        if (fuse_reply_entry(req, &se)) sreg_forget(&c->search, ino - FS_SEARCH_BASE, 1);
        return;
    }
    if (!is_real(parent)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    int rc = vol_lookup(c->v, parent, name, &st);
    if (rc == -ENOENT) {
        /* A real entry of the same name wins over a virtual file. */
        int k = c->novirtual ? -1 : vkind_of_name(name);
        if (k >= 0 && c->kept && k != SEARCH_DIR) {
            lookup_kept_vfile(req, c, parent, (uint32_t)k, NULL);
            return;
        }
        struct fuse_entry_param ve = {.ino = k >= 0 ? vino(parent, (uint32_t)k) : 0,
                                      .generation = 1};
        if (k >= 0 && !vattr(c, ve.ino, &ve.attr)) {
            fuse_reply_entry(req, &ve); /* not cached: the size changes once computed */
            return;
        }
        /* A negative entry the kernel may cache; creations through the mount clear it. */
        struct fuse_entry_param ne = {.ino = 0, .entry_timeout = c->timeout};
        fuse_reply_entry(req, &ne);
        return;
    }
    if (rc) {
        reply_rc(req, rc);
        return;
    }
    reply_entry(req, c, &st);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    fs_ctx *c = ctx_of(req);
    struct stat st;
    if (!is_real(ino)) {
        if (vattr(c, ino, &st))
            fuse_reply_err(req, ENOENT);
        else
            fuse_reply_attr(req, &st, 0);
        return;
    }
    int rc = vol_getattr(c->v, ino, &st);
    if (rc) {
        reply_rc(req, rc);
        return;
    }
    owners(c, &st);
    fuse_reply_attr(req, &st, c->timeout);
}

static struct timespec now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts;
}

/* Is the caller in group gid (its own or a supplementary one)? */
static int caller_in_group(fuse_req_t req, gid_t gid)
{
    gid_t groups[64];
    if (fuse_req_ctx(req)->gid == gid) return 1;
    int n = fuse_req_getgroups(req, 64, groups);
    for (int i = 0; i < n && i < 64; i++)
        if (groups[i] == gid) return 1;
    return 0;
}

/* The mode bits of regular file st that a write or truncation by the caller keeps, as the
 * kernel's rule: for a caller without CAP_FSETID (not root) setuid goes, and setgid too when
 * the group may execute or the caller is not in the file's group. The kernel leaves this to
 * us for open(O_TRUNC) (atomic_o_trunc: no SETATTR carries the mode) and, where
 * FUSE_HANDLE_KILLPRIV_V2 is on (killpriv.h), for every write and truncation. */
static mode_t mode_after_write(fuse_req_t req, const struct stat *st)
{
    mode_t m = st->st_mode & 07777;
    if (fuse_req_ctx(req)->uid == 0 || !S_ISREG(st->st_mode)) return m;
    m &= ~(mode_t)S_ISUID;
    if ((m & S_IXGRP) || !caller_in_group(req, st->st_gid)) m &= ~(mode_t)S_ISGID;
    return m;
}

/* The mode bits a change of owner or group keeps (killpriv.h): of anything but a directory,
 * setuid goes for any caller, and setgid where the group may execute or the caller, not root,
 * is not in the file's group. */
static mode_t mode_after_chown(fuse_req_t req, const struct stat *st)
{
    mode_t m = st->st_mode & 07777;
    if (S_ISDIR(st->st_mode)) return m;
    m &= ~(mode_t)S_ISUID;
    if ((m & S_IXGRP) || (fuse_req_ctx(req)->uid != 0 && !caller_in_group(req, st->st_gid)))
        m &= ~(mode_t)S_ISGID;
    return m;
}

/* The kernel's cached attributes of ino are out of date: a request whose reply carries none
 * (an open, a write) changed its mode. Without this a stat(2) asking for the mode alone would
 * be answered from the cache (the kernel refreshes only what it knows changed). */
static void attrs_changed(fs_ctx *c, fuse_ino_t ino)
{
    /* A negative offset drops the attributes alone; it takes no lock the request holds. */
    if (c->se) fuse_lowlevel_notify_inval_inode(c->se, ino, -1, 0);
}

/* What a write by the caller (with `trunc`, an open that truncates) changes in file st
 * besides its content, where no reply carries attributes: the bits mode_after_write drops,
 * and with `trunc` the size. */
static int written(fuse_req_t req, fs_ctx *c, fuse_ino_t ino, const struct stat *st, int trunc)
{
    struct stat in = {.st_size = 0, .st_mode = mode_after_write(req, st)};
    unsigned valid = (trunc ? VOL_SET_SIZE : 0) | /* an empty file's times change too */
                     (in.st_mode != (st->st_mode & 07777) ? VOL_SET_MODE : 0);
    int rc = valid ? vol_setattr(c->v, ino, valid, &in, NULL) : 0;
    if (!rc && (valid & VOL_SET_MODE)) attrs_changed(c, ino);
    return rc;
}

/* Before a write or allocation by the caller. */
static int kill_suidgid(fuse_req_t req, fs_ctx *c, fuse_ino_t ino)
{
    struct stat st;
    if (fuse_req_ctx(req)->uid == 0) return 0; /* the common case, without a lookup */
    int rc = vol_getattr(c->v, ino, &st);
    return rc ? rc : written(req, c, ino, &st, 0);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    fs_ctx *c = ctx_of(req);
    if (!is_real(ino)) {
        fuse_reply_err(req, EACCES);
        return;
    }
    unsigned valid = 0;
    struct stat in = *attr, out;
    if (to_set & FUSE_SET_ATTR_MODE) valid |= VOL_SET_MODE;
    if (to_set & FUSE_SET_ATTR_UID) valid |= VOL_SET_UID;
    if (to_set & FUSE_SET_ATTR_GID) valid |= VOL_SET_GID;
    if (to_set & FUSE_SET_ATTR_SIZE) valid |= VOL_SET_SIZE;
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) valid |= VOL_SET_ATIME;
    if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) valid |= VOL_SET_MTIME;
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) in.st_atim = now();
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) in.st_mtim = now();
    /* a SETATTR that sets nothing else still changes the ctime (chown(2) to -1, -1, below) */
    if (!(to_set & ~FUSE_SET_ATTR_CTIME)) valid |= VOL_SET_CTIME;
    if (c->ro) {
        fuse_reply_err(req, EROFS);
        return;
    }
    /* A truncation or a change of owner drops setuid and setgid (mode_after_write,
     * mode_after_chown), from the mode this request sets if it sets one. A SETATTR that sets
     * nothing (or the ctime alone) comes from a chown(2) naming no owner and no group (-1,
     * -1), which drops them as any chown does, or from the kernel's privilege check before a
     * write by a caller who is not root, whom the write's own drop treats alike. */
    int owner = (valid & (VOL_SET_UID | VOL_SET_GID)) || !(to_set & ~FUSE_SET_ATTR_CTIME);
    int rc = 0;
    if ((valid & VOL_SET_SIZE) || owner) {
        struct stat now;
        rc = vol_getattr(c->v, ino, &now);
        if (!rc && (valid & VOL_SET_MODE))
            now.st_mode = (now.st_mode & S_IFMT) | (in.st_mode & 07777);
        mode_t m = now.st_mode & 07777;
        if (!rc && (valid & VOL_SET_SIZE)) m &= mode_after_write(req, &now);
        if (!rc && owner) m &= mode_after_chown(req, &now);
        if (!rc && m != (now.st_mode & 07777)) {
            in.st_mode = (now.st_mode & S_IFMT) | m;
            valid |= VOL_SET_MODE;
        }
    }
    if (!rc) rc = vol_setattr(c->v, ino, valid, &in, &out);
    if (rc) {
        reply_rc(req, logged(rc, "setattr"));
        return;
    }
    owners(c, &out);
    fuse_reply_attr(req, &out, c->timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    fs_ctx *c = ctx_of(req);
    char *t = NULL;
    int rc = is_real(ino) ? vol_readlink(c->v, ino, &t) : -EINVAL;
    if (rc)
        reply_rc(req, rc);
    else
        fuse_reply_readlink(req, t);
    free(t);
}

/* ---------------- namespace changes ---------------- */

/* Owner of a new inode: the caller, with the group of a setgid parent directory. */
static void new_owner(fuse_req_t req, fs_ctx *c, fuse_ino_t parent, uint32_t *mode, uint32_t *uid,
                      uint32_t *gid)
{
    const struct fuse_ctx *who = fuse_req_ctx(req);
    struct stat pst;
    *uid = who->uid;
    *gid = who->gid;
    if (!vol_getattr(c->v, parent, &pst) && (pst.st_mode & S_ISGID)) {
        *gid = pst.st_gid;
        if (S_ISDIR(*mode)) *mode |= S_ISGID;
    }
}

static int make(fuse_req_t req, fuse_ino_t parent, const char *name, uint32_t mode,
                const char *target, dev_t rdev, struct stat *st)
{
    fs_ctx *c = ctx_of(req);
    uint32_t uid, gid;
    if (!is_real(parent)) return -EACCES;
    if (c->ro) return -EROFS;
    new_owner(req, c, parent, &mode, &uid, &gid);
    return logged(vol_mknode(c->v, parent, name, mode, uid, gid, target, rdev, st), "create");
}

static void reply_made(fuse_req_t req, int rc, const struct stat *st)
{
    if (rc)
        reply_rc(req, rc);
    else
        reply_entry(req, ctx_of(req), st);
}

/* Regular files, FIFOs, sockets and devices (the kernel has checked CAP_MKNOD for devices);
 * a special file keeps its type, mode and rdev and has no content. */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    struct stat st;
    reply_made(req, make(req, parent, name, mode, NULL, rdev, &st), &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct stat st;
    reply_made(req, make(req, parent, name, S_IFDIR | (mode & 07777), NULL, 0, &st), &st);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct stat st;
    reply_made(req, make(req, parent, name, S_IFLNK | 0777, link, 0, &st), &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
    fs_ctx *c = ctx_of(req);
    struct stat st;
    int rc = !is_real(ino) || !is_real(parent) ? -EPERM : c->ro ? -EROFS : 0;
    if (!rc) rc = logged(vol_link(c->v, ino, parent, name, &st), "link");
    reply_made(req, rc, &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fs_ctx *c = ctx_of(req);
    int rc = !is_real(parent) ? -EACCES : c->ro ? -EROFS : 0;
    reply_rc(req, rc ? rc : logged(vol_unlink(c->v, parent, name, 0), "unlink"));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fs_ctx *c = ctx_of(req);
    int rc = !is_real(parent) ? -EACCES : c->ro ? -EROFS : 0;
    reply_rc(req, rc ? rc : logged(vol_unlink(c->v, parent, name, 1), "rmdir"));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    fs_ctx *c = ctx_of(req);
    int rc = !is_real(parent) || !is_real(newparent) ? -EACCES : c->ro ? -EROFS : 0;
    unsigned vf = (flags & RENAME_NOREPLACE ? VOL_RENAME_NOREPLACE : 0) |
                  (flags & RENAME_EXCHANGE ? VOL_RENAME_EXCHANGE : 0);
    if (!rc && (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))) rc = -EINVAL;
    /* A virtual file's name is taken, as for an open with O_CREAT: a rename onto it would make
     * a real file that every caller then reads as that directory's analytic. */
    struct stat st;
    if (!rc && !c->novirtual && vkind_of_name(newname) >= 0 &&
        vol_lookup(c->v, newparent, newname, &st) == -ENOENT)
        rc = -EACCES;
    if (!rc) rc = logged(vol_rename(c->v, parent, name, newparent, newname, vf), "rename");
    reply_rc(req, rc);
}

/* ---------------- directories ---------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    uint64_t dir;
    uint32_t kind;
    fs_dir *d = calloc(1, sizeof *d);
    if (!d) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    d->ino = ino;
    if (!vino_of(ino, &dir, &kind) && kind == SEARCH_DIR) {
        handle_add(c, &d->h, 1);
        fi->fh = (uint64_t)(uintptr_t)d; /* lists nothing: every word is there */
        fuse_reply_open(req, fi);
        return;
    }
    int rc = is_real(ino) ? vol_list(c->v, ino, &d->ents, &d->n, &d->parent) : -ENOTDIR;
    if (rc) {
        free(d);
        reply_rc(req, rc);
        return;
    }
    /* Counted like an open file: a directory removed while open keeps its attributes
     * (fstat, fchmod) until the handle goes, as on ext4. */
    vol_ref(c->v, ino, 1);
    handle_add(c, &d->h, 1);
    fi->fh = (uint64_t)(uintptr_t)d;
    /* On a read-only mount the kernel may keep the listing and answer the next listings of
     * this directory from it (a READDIR round trip less each): nothing changes there. Not
     * where it can change: the kernel's one listing per directory is filled by whichever
     * handle reads next, and each handle's offsets count in its own snapshot, so a handle
     * opened before a change went on in a listing made after it, shifted (an entry no one
     * touched skipped or given twice). */
    fi->cache_readdir = fi->keep_cache = c->ro;
    fuse_reply_open(req, fi);
}

/* readdir and readdirplus: offsets 1 and 2 are "." and "..", then entry k is k + 3. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, int plus)
{
    fs_ctx *c = ctx_of(req);
    fs_dir *d = (fs_dir *)(uintptr_t)fi->fh;
    uint64_t vdir;
    uint32_t kind;
    if (!vino_of(ino, &vdir, &kind) && kind == SEARCH_DIR) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if (off == 0) {
        /* rewinddir: see the directory as it is now. */
        vol_dirent *e;
        size_t n;
        uint64_t parent;
        if (!vol_list(c->v, ino, &e, &n, &parent)) {
            vol_list_free(d->ents, d->n);
            d->ents = e;
            d->n = n;
            d->parent = parent;
        }
    }
    char *b = malloc(size);
    size_t used = 0;
    if (!b) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    off_t last = off - 1; /* the last entry put in the reply */
    for (off_t k = off; k < (off_t)d->n + 2; k++) {
        uint64_t ent = k == 0 ? ino : k == 1 ? d->parent : d->ents[k - 2].ino;
        const char *name = k == 0 ? "." : k == 1 ? ".." : d->ents[k - 2].name;
        struct fuse_entry_param ep;
        memset(&ep, 0, sizeof ep);
        size_t need;
        if (plus) {
            /* An entry gives the kernel a name for the inode: only while the name is still
             * that inode's (not removed or renamed since the snapshot), else it is left out,
             * as POSIX lets a listing leave out what changed since it began. */
            if (k < 2 ? vol_getattr(c->v, ent, &ep.attr)
                      : vol_lookup(c->v, ino, name, &ep.attr) || ep.attr.st_ino != (ino_t)ent)
                continue;
            owners(c, &ep.attr);
            ep.ino = ent;
            ep.generation = 1;
            ep.attr_timeout = ep.entry_timeout = c->timeout;
            /* "." and ".." carry no entry, so the kernel takes no lookup reference. */
            if (k < 2) ep.ino = 0;
            need = fuse_add_direntry_plus(req, b + used, size - used, name, &ep, k + 1);
        } else {
            ep.attr.st_ino = (ino_t)ent;
            ep.attr.st_mode = k < 2 ? S_IFDIR : d->ents[k - 2].mode;
            need = fuse_add_direntry(req, b + used, size - used, name, &ep.attr, k + 1);
        }
        if (need > size - used) break;
        used += need;
        if (plus && k >= 2) lookup_ref(c, ent, 1);
        last = k;
    }
    if (fuse_reply_buf(req, b, used))
        for (off_t k = off < 2 ? 2 : off; plus && k <= last; k++)
            lookup_ref(c, d->ents[k - 2].ino, -1);
    free(b);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, 1);
}

/* A directory handle freed: at its RELEASEDIR, or at exit (fs_handles_free). */
static void dir_free(fs_ctx *c, fs_dir *d)
{
    handle_del(c, &d->h);
    if (is_real(d->ino)) vol_ref(c->v, d->ino, -1);
    vol_list_free(d->ents, d->n);
    free(d);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    dir_free(ctx_of(req), (fs_dir *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    reply_rc(req, logged(vol_sync(ctx_of(req)->v), "fsync"));
}

/* ---------------- virtual files ---------------- */

/* search_text's output: a file's occurrences as lines "path:offset". */
typedef struct search_out {
    const arc *a;
    const vec32 *files;
    size_t plen; /* the scope's prefix, cut from paths */
    vtext_w *out;
} search_out;

static int search_lines(void *ctx, size_t i, const vec64 *offs)
{
    search_out *so = ctx;
    if (!offs->n) return 0;
    buf p = {0}; /* the path escaped as the analytics write it: one line per occurrence */
    int rc = ana_put_path(&p, so->a->ents[so->files->p[i]].path + so->plen);
    for (size_t j = 0; j < offs->n && !rc; j++) {
        char num[32];
        int n = snprintf(num, sizeof num, ":%llu\n", (unsigned long long)offs->p[j]);
        rc = p.n ? vtext_w_put(so->out, p.p, p.n) : 0;
        if (!rc) rc = vtext_w_put(so->out, num, (size_t)n);
    }
    buf_free(&p);
    return rc;
}

/* "path:offset" for every occurrence of the word in the subtree's files visible in vis
 * (every name of a hard-linked file its own), paths relative to it, in path order; found
 * through the word index without reading the files: the archive's, built once per
 * generation, or, for a view of the file table alone (under -o mem=), each span's in turn.
 * -EAGAIN from the spans: the whole archive was loaded meanwhile. */
static int search_text(fs_ctx *c, const vol_view *w, const char *word, const unsigned char *vis,
                       vtext_w *out)
{
    int rc = 0;
    idx_words *words = NULL;
    uint32_t dir = (uint32_t)w->ent;
    vec32 files = {0};
    search_out so = {w->a, &files, ana_scope_prefix(w->a, dir), out};
    if (w->a->pending) {
        rc = ana_scope_files(w->a, dir, ana_subtree_end(w->a, dir), vis, &files);
        if (!rc) rc = vol_view_search(w, files.p, files.n, word, strlen(word), search_lines, &so);
        vec32_free(&files);
        return rc;
    }
    if (w->own) {
        rc = idx_words_build(w->x, &words); /* a snapshot: its own index, not kept */
    } else {
        /* The archive's index, built once per generation by the first search, which the
         * others wait for; the view's hold on the archive keeps it from being replaced while
         * it is used. */
        pthread_mutex_lock(&c->slock);
        if (c->words_gen != w->gen) { /* first use, or the archive was compacted since */
            idx_words_free(c->words);
            c->words = NULL;
            c->words_gen = 0;
            if (!(rc = idx_words_build(w->x, &c->words))) c->words_gen = w->gen;
        }
        words = c->words;
        pthread_mutex_unlock(&c->slock);
    }
    if (rc) return rc;
    vec64 offs = {0};
    rc = ana_scope_files(w->a, dir, ana_subtree_end(w->a, dir), vis, &files);
    for (size_t i = 0; i < files.n && !rc; i++) {
        offs.n = 0;
        rc = idx_search(words, files.p[i], word, strlen(word), &offs);
        if (!rc) rc = search_lines(&so, i, &offs);
    }
    if (w->own) idx_words_free(words);
    vec32_free(&files);
    vec64_free(&offs);
    return rc;
}

/* Analytic `kind` of archive a, not loaded (the view under -o mem=), shard by shard: one shard
 * per CPU at once, each taking its estimate from the volume's budget first (shared with the
 * reads' spans), so that as many run as the budget holds, at least one; each shard's part on
 * the GPU under -o gpu=on (backend_by_shard), else on the CPU; the merged output written into
 * out as it is made. -ENOTSUP when it must be loaded whole instead (the analytics options say
 * so, a version 1 to 3 archive, or a word cut between shards). */
static int by_shard(fs_ctx *c, uint32_t kind, const arc *a, uint32_t first, uint32_t end,
                    const unsigned char *vis, vtext_w *out)
{
    ana_opts o = *ana_ctx_opts(backend_ana(c->be));
    if (o.shards == ANA_WHOLE || a->version < 4) return -ENOTSUP; /* v1-3: one grammar */
    o.budget = vol_budget(c->v);
    if (!o.budget) o.shards = 1; /* a view of the file table while the loader runs */
    /* a list merge's parts held within a quarter of the budget, the rest in a file */
    if (c->mem) {
        o.spill_dir = c->spill_dir;
        o.spill_at = c->mem / 4;
    }
    ana_ctx *ac = ana_ctx_new(&o);
    int rc = ac ? backend_by_shard_to(c->be, ac, (int)kind, a, first, end, vis, vtext_w_sink, out)
                : -ENOMEM;
    ana_ctx_free(ac);
    return rc;
}

/* Analytic `kind` of the view's scope over its files visible in vis, with hard links whose
 * content the caller would otherwise miss given to a name it sees (fs_vis_relink). */
static int analytic_text(fs_ctx *c, const vol_view *w, uint32_t kind, const unsigned char *vis,
                         vtext_w *out)
{
    uint32_t first = (uint32_t)w->ent, end = ana_subtree_end(w->a, first);
    arc *cp;
    int rc = fs_vis_relink(w->a, vis, first, end, &cp);
    if (rc) return rc;
    /* An archive not loaded: shard by shard. Else on the GPU where the backend finds it worth
     * it, or ana_* on the CPU. A snapshot or a relinked copy is not kept on the GPU
     * (generation 0). */
    buf b = {0};
    if (w->a->pending)
        rc = by_shard(c, kind, cp ? cp : w->a, first, end, vis, out);
    else if (!(rc = backend_analytic(c->be, (int)kind, cp ? cp : w->a, cp || w->own ? 0 : w->gen,
                                     first, end, vis, &b)))
        rc = vtext_w_put(out, b.p, b.n);
    buf_free(&b);
    fs_vis_relink_free(cp);
    return rc;
}

/* The text of virtual file `kind` of directory `dir`, or with a word of `.search/word`, as
 * caller `who` may see it: over the files it may reach (fs/perm.h), from the cache of
 * texts when one was computed for the same scope, archive generation and visible set, else
 * computed (into a spill file from spill_at bytes on, vtext.h); *out gets a reference to
 * the text. */
static int virtual_text(const fs_who *who, fs_ctx *c, uint64_t dir, uint32_t kind, const char *word,
                        uint64_t spill_at, vtext **out)
{
    vol_view w;
    uint64_t key[2];
    unsigned char *vis = NULL;
    /* A search under -o mem= goes span by span over the file table alone where it can (the
     * archive's, or an edited directory's temporary archive); a view that is not the file
     * table needs its index. */
    int rc = vol_view_open(c->v, dir, word != NULL && !c->mem, &w);
    if (!rc && word && !w.a->pending && !w.x) {
        vol_view_close(&w);
        rc = vol_view_open(c->v, dir, 1, &w);
    }
    if (rc) return rc;
    uint32_t first = (uint32_t)w.ent, end = ana_subtree_end(w.a, first);
    if (!(rc = fs_vis_build(c, who, w.a, first, end, &vis))) {
        fs_vis_key(vis, first, end, key);
        vcache_key k = {.dir = dir,
                        .gen = w.gen, /* 0 for a snapshot in memory: not kept */
                        .kind = kind,
                        .word = word,
                        .vis = {key[0], key[1]}};
        if (!(*out = vcache_get(&c->vc, &k))) {
            vtext_w t;
            vtext_w_init(&t, c->spill_dir, spill_at);
            rc = word ? search_text(c, &w, word, vis, &t) : analytic_text(c, &w, kind, vis, &t);
            /* the file table alone would not do, or the spans went with a whole load */
            if ((rc == -ENOTSUP || rc == -EAGAIN) && w.a->pending) {
                vtext_w_reset(&t);
                vol_view_close(&w);
                rc = vol_view_open(c->v, dir, 1, &w);
                if (!rc)
                    rc = word ? search_text(c, &w, word, vis, &t)
                              : analytic_text(c, &w, kind, vis, &t);
            }
            if (!rc) rc = vtext_w_finish(&t, out);
            vtext_w_free(&t);
            /* Under a budget, what the analytic freed goes back to the system rather than
             * staying in the allocator's arenas. */
            if (c->mem) malloc_trim(0);
            if (!rc) vcache_put(&c->vc, &k, *out); /* when it cannot, the next one recomputes */
        }
    }
    free(vis);
    vol_view_close(&w);
    return rc;
}

/* Compute a virtual file's text when it is opened (or take it from the cache of texts); it
 * is then read from there, in memory or from its spill file. */
static void open_virtual(fuse_req_t req, fs_ctx *c, fuse_ino_t ino, struct fuse_file_info *fi)
{
    uint64_t dir;
    uint32_t kind;
    char *word = NULL;
    int search = vino_of(ino, &dir, &kind) != 0;
    if (search && sfile_of(c, ino, &dir, &kind, &word, NULL) < 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (!search && kind == SEARCH_DIR) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY) {
        free(word);
        fuse_reply_err(req, EACCES);
        return;
    }
    fs_file *f = calloc(1, sizeof *f);
    fs_who who;
    int rc = !f || (search && !word) ? -ENOMEM : fs_who_of(req, c, &who);
    if (!rc) {
        rc = virtual_text(&who, c, dir, search ? SEARCH_DIR : kind, word, c->spill_at, &f->vt);
        fs_who_free(&who);
    }
    free(word);
    if (rc) {
        syslog(LOG_ERR, "virtual file of directory %llu: %s", (unsigned long long)dir,
               tdc_errmsg());
        free(f);
        reply_rc(req, rc == -ENOMEM ? -ENOMEM : rc == -ENOENT ? -ENOENT : -EIO);
        return;
    }
    pthread_mutex_init(&f->lock, NULL);
    f->virt = 1;
    handle_add(c, &f->h, 0);
    fi->fh = (uint64_t)(uintptr_t)f;
    fi->direct_io = 1;
    fi->noflush = 1;
    fuse_reply_open(req, fi);
}

/* noopen: the tag of the text caller `who` would read now (sreg_key): who it is (zeros for
 * one who sees everything) and the state of the vol. */
static void caller_tag(const fs_who *who, fs_ctx *c, uint64_t tag[4])
{
    tag[0] = tag[1] = 0;
    if (!who->all) { /* uid, gid and groups; never all zeros (root may lack the rights) */
        tag[0] = (uint64_t)who->uid << 32 | who->gid;
        tag[1] = XXH3_64bits(who->groups, who->ngroups * sizeof *who->groups) | 1;
    }
    vol_state(c->v, tag + 2);
}

/* noopen: the entry of virtual file `kind` of `dir` (`.search/word` when word is not NULL) as
 * req's caller sees it now, with a reference to it. The kernel keeps a file's pages between
 * opens, so each text has an inode of its own, registered under the caller's credentials
 * and the vol's state (caller_tag): its text is computed here, when the registry has none
 * for the key, so that its size is right from the first stat, and it stays the inode's
 * while the kernel holds it. Entries are not cached: every path walk looks the name up
 * again, and another caller's walk, or a walk after a change, finds another inode. */
static int kept_vfile(fuse_req_t req, fs_ctx *c, uint64_t dir, uint32_t kind, const char *word,
                      struct fuse_entry_param *e)
{
    sreg_key k = {.dir = dir, .kind = kind, .word = word ? word : ""};
    uint32_t slot;
    vtext *t = NULL;
    fs_who who;
    int rc = fs_who_of(req, c, &who);
    if (rc) return rc;
    caller_tag(&who, c, k.tag);
    if (!(rc = sreg_ref(&c->search, &k, &slot, &t)) && !t) {
        /* The texts the kernel holds stay in memory up to the bound of the cache of texts;
         * past it they go to spill files however small. */
        uint64_t spill_at = sreg_mem(&c->search) < c->vc.mem ? c->spill_at : 0;
        rc = virtual_text(&who, c, dir, kind, word, spill_at, &t);
        if (!rc)
            sreg_set_text(&c->search, slot, t);
        else
            sreg_forget(&c->search, slot, 1);
    }
    fs_who_free(&who);
    if (rc) return rc;
    vtext_put(t);
    memset(e, 0, sizeof *e);
    e->ino = FS_SEARCH_BASE + slot;
    e->generation = 1;
    e->attr_timeout = c->timeout;          /* they stay as they are while the inode lives */
    if (vattr(c, e->ino, &e->attr)) {      /* its directory went meanwhile */
        sreg_forget(&c->search, slot, 1);
        return -ENOENT;
    }
    return 0;
}

/* ---------------- files ---------------- */

/* f's read state for file `ino`: a fresh reader, and the hash check of an unchanged file
 * (they carry their archived hash: it is checked as they are read in order). */
static void read_state(fs_ctx *c, fs_file *f, uint64_t ino)
{
    f->ino = ino;
    vol_reader_init(&f->rd);
    uint64_t want;
    struct stat st;
    if (vol_clean_hash(c->v, ino, &want) && !vol_getattr(c->v, ino, &st)) {
        hashck_init(&f->hc, want, (uint64_t)st.st_size);
        f->hc_ctime = st.st_ctim;
    }
}

/* 1 when the whole of file `ino` read in order through f hashed other than its archived hash,
 * the file clean and unchanged since the check began: its archive data is damaged. A file
 * written meanwhile (even back to its archived bytes, then compacted: clean, the same hash)
 * gave the check bytes of both, and says nothing. */
static int hash_differs(fs_ctx *c, const fs_file *f, uint64_t ino)
{
    uint64_t want;
    struct stat st;
    return vol_clean_hash(c->v, ino, &want) && want == f->hc.want && !vol_getattr(c->v, ino, &st) &&
           st.st_ctim.tv_sec == f->hc_ctime.tv_sec && st.st_ctim.tv_nsec == f->hc_ctime.tv_nsec;
}

static fs_file *new_file(fs_ctx *c, uint64_t ino)
{
    fs_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    pthread_mutex_init(&f->lock, NULL);
    read_state(c, f, ino);
    vol_ref(c->v, ino, 1);
    handle_add(c, &f->h, 0);
    return f;
}

/* The kept read state of file `ino` read without an open (noopen), locked: its slot, given
 * to `ino` if another file had it; NULL while a read of another file or of this one holds
 * it (the read then takes a reader of its own: a reader only saves work, and the hash check
 * of a file read out of turn stops, as it does for a reader that seeks). */
static fs_file *kept_file(fs_ctx *c, uint64_t ino)
{
    fs_file *f = &c->kept[ino % FS_KEPT_FILES]; /* numbers are given in order: spread */
    if (pthread_mutex_trylock(&f->lock)) return NULL;
    if (f->ino != ino) {
        vol_reader_free(&f->rd);
        hashck_free(&f->hc);
        read_state(c, f, ino);
    }
    return f;
}

int fs_kept_init(fs_ctx *c)
{
    if (!(c->kept = calloc(FS_KEPT_FILES, sizeof *c->kept))) return -ENOMEM;
    for (size_t i = 0; i < FS_KEPT_FILES; i++) {
        pthread_mutex_init(&c->kept[i].lock, NULL);
        vol_reader_init(&c->kept[i].rd);
    }
    return 0;
}

void fs_kept_free(fs_ctx *c)
{
    for (size_t i = 0; c->kept && i < FS_KEPT_FILES; i++) {
        vol_reader_free(&c->kept[i].rd);
        hashck_free(&c->kept[i].hc);
        pthread_mutex_destroy(&c->kept[i].lock);
    }
    free(c->kept);
    c->kept = NULL;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    if (c->kept) { /* noopen: the kernel opens the files itself from now on */
        fuse_reply_err(req, ENOSYS);
        return;
    }
    if (!is_real(ino)) {
        open_virtual(req, c, ino, fi);
        return;
    }
    struct stat st;
    int rc = vol_getattr(c->v, ino, &st);
    if (!rc && S_ISDIR(st.st_mode)) rc = -EISDIR;
    if (!rc && (fi->flags & O_ACCMODE) != O_RDONLY && c->ro) rc = -EROFS;
    /* O_TRUNC truncates whatever the access mode (O_RDONLY too, as on ext4): the kernel
     * checked write permission and leaves the truncation to this open (atomic_o_trunc),
     * setuid and setgid bits included. */
    if (!rc && (fi->flags & O_TRUNC) && c->ro) rc = -EROFS;
    /* open(O_TRUNC) empties the file and drops setuid and setgid as truncate does, also when
     * it is empty already. */
    if (!rc && (fi->flags & O_TRUNC) && S_ISREG(st.st_mode))
        rc = logged(written(req, c, ino, &st, 1), "truncate");
    fs_file *f = rc ? NULL : new_file(c, ino);
    if (!rc && !f) rc = -ENOMEM;
    if (rc) {
        reply_rc(req, rc);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)f;
    /* The content only changes through this mount, which the kernel's cache follows. */
    fi->keep_cache = 1;
    /* close(2) need not come here: every change is in the journal file once acknowledged
     * (jrnl_append), so there is nothing to flush; a request less per close. */
    fi->noflush = 1;
    fuse_reply_open(req, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    struct stat st;
    int rc = make(req, parent, name, S_IFREG | (mode & 07777), NULL, 0, &st);
    /* noopen: no handle, as for the files the kernel opens itself (it sends no RELEASE for
     * this one either once it is in its no-open mode; the lookup keeps the file). */
    fs_file *f = rc || c->kept ? NULL : new_file(c, st.st_ino);
    if (!rc && !f && !c->kept) rc = -ENOMEM;
    if (rc) {
        reply_rc(req, rc);
        return;
    }
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = st.st_ino;
    e.generation = 1;
    e.attr = st;
    owners(c, &e.attr);
    e.attr_timeout = e.entry_timeout = c->timeout;
    fi->fh = (uint64_t)(uintptr_t)f;
    fi->keep_cache = 1;
    fi->noflush = 1; /* as op_open */
    lookup_ref(c, e.ino, 1);
    if (fuse_reply_create(req, &e, fi)) lookup_ref(c, e.ino, -1);
}

/* Each loop thread's read buffer, freed when the thread ends (libfuse retires idle ones). */
static _Thread_local unsigned char *rbuf;
static _Thread_local size_t rcap;
static pthread_key_t rbuf_key;
static pthread_once_t rbuf_once = PTHREAD_ONCE_INIT;

static void rbuf_key_init(void)
{
    pthread_key_create(&rbuf_key, free);
}

/* Up to `size` bytes at `off` of a virtual file into this thread's read buffer: of its open
 * handle's text, or (f NULL: noopen) of its registered inode's; the count or -EIO. */
static ssize_t virtual_read(fs_ctx *c, fs_file *f, fuse_ino_t ino, off_t off, size_t size)
{
    if (f) {
        /* The kernel may release a handle while a read of it is still being answered: copy
         * under the handle's lock (which release takes) and reply from this thread's buffer. */
        pthread_mutex_lock(&f->lock);
        ssize_t n = vtext_read(f->vt, (uint64_t)off, rbuf, size);
        pthread_mutex_unlock(&f->lock);
        return n;
    }
    uint64_t dir;
    uint32_t kind;
    vtext *t = NULL;
    ssize_t n = sfile_of(c, ino, &dir, &kind, NULL, &t) || !t
                    ? -EIO
                    : vtext_read(t, (uint64_t)off, rbuf, size);
    vtext_put(t);
    return n;
}

/* op_read's work, its reply included. */
static void read_reply(fs_ctx *c, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    fs_file *f = (fs_file *)(uintptr_t)fi->fh; /* NULL: opened without the daemon (noopen) */
    if (size > rcap) {
        unsigned char *b = realloc(rbuf, size);
        if (!b) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        rbuf = b;
        rcap = size;
        pthread_once(&rbuf_once, rbuf_key_init);
        pthread_setspecific(rbuf_key, rbuf);
    }
    if ((f && f->virt) || !is_real(ino)) {
        ssize_t n = virtual_read(c, f, ino, off, size);
        if (n < 0)
            fuse_reply_err(req, EIO);
        else
            fuse_reply_buf(req, (const char *)rbuf, (size_t)n);
        return;
    }
    if (is_damaged(c, ino)) {
        fuse_reply_err(req, EIO);
        return;
    }
    fs_file own = {.ino = ino}; /* noopen, the file's slot busy: a reader of this read's own */
    if (f)
        pthread_mutex_lock(&f->lock);
    else if (!(f = kept_file(c, ino)))
        vol_reader_init(&(f = &own)->rd);
    ssize_t n = vol_read(c->v, &f->rd, ino, (uint64_t)off, rbuf, size);
    int bad = 0;
    if (n > 0 && hashck_feed(&f->hc, (uint64_t)off, rbuf, (size_t)n)) bad = hash_differs(c, f, ino);
    if (f == &own)
        vol_reader_free(&own.rd);
    else
        pthread_mutex_unlock(&f->lock);
    if (n < 0) {
        syslog(LOG_ERR, "inode %llu: read at %lld: %s", (unsigned long long)ino, (long long)off,
               tdc_errmsg());
        fuse_reply_err(req, n == -ENOMEM ? ENOMEM : EIO);
    } else if (bad) {
        set_damaged(c, ino); /* every later read of this file fails too, not only this one */
        syslog(LOG_ERR, "inode %llu: content hash mismatch: archive data is damaged",
               (unsigned long long)ino);
        fuse_reply_err(req, EIO);
    } else {
        /* the start of a file read without an open: store the next files ahead (push.h) */
        if (c->push && !off && !fi->fh) fs_push_hint(c, ino);
        fuse_reply_buf(req, (const char *)rbuf, (size_t)n);
    }
}

/* READ: replies once, with the bytes or an error. Under a small budget (lean) a thread keeps
 * no read buffer past FS_RBUF_KEEP between reads: the workers each held the largest read's
 * (1 MiB with the kernel's readahead), ten of them more than such a budget. */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    read_reply(c, req, ino, size, off, fi);
    if (c->lean && rcap > FS_RBUF_KEEP) {
        free(rbuf);
        rbuf = NULL;
        rcap = 0;
        pthread_setspecific(rbuf_key, NULL);
    }
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    fs_file *f = (fs_file *)(uintptr_t)fi->fh;
    /* f NULL: opened without the daemon (noopen), where a virtual file is refused here (root
     * passes the kernel's permission check of the open) */
    if (c->ro || (f && f->virt) || !is_real(ino)) {
        fuse_reply_err(req, c->ro ? EROFS : EACCES);
        return;
    }
    int rc = logged(kill_suidgid(req, c, ino), "write");
    if (!rc) rc = logged(vol_write(c->v, ino, (uint64_t)off, data, size), "write");
    if (rc)
        reply_rc(req, rc);
    else
        fuse_reply_write(req, size);
}

/* A file handle freed: at its RELEASE, or at exit (fs_handles_free). */
static void file_free(fs_ctx *c, fs_file *f)
{
    handle_del(c, &f->h);
    pthread_mutex_lock(&f->lock); /* wait for a read still answering from this handle */
    pthread_mutex_unlock(&f->lock);
    if (!f->virt) {
        vol_reader_free(&f->rd);
        vol_ref(c->v, f->ino, -1);
    }
    vtext_put(f->vt);
    hashck_free(&f->hc);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    if (fi->fh) file_free(ctx_of(req), (fs_file *)(uintptr_t)fi->fh); /* 0: noopen's */
    fuse_reply_err(req, 0);
}

void fs_handles_free(fs_ctx *c)
{
    while (c->handles) {
        fs_handle *h = c->handles;
        if (h->dir)
            dir_free(c, (fs_dir *)h);
        else
            file_free(c, (fs_file *)h);
    }
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
    (void)fi;
    fs_ctx *c = ctx_of(req);
    struct stat st;
    /* Plain allocation only: the size grows to off + len, with zeros. */
    int rc = mode & ~FALLOC_FL_KEEP_SIZE ? -EOPNOTSUPP : c->ro ? -EROFS : 0;
    if (!rc && (uint64_t)off + (uint64_t)len > VOL_MAX_FILE) rc = -EFBIG;
    if (!rc) rc = logged(kill_suidgid(req, c, ino), "fallocate");
    if (!rc) rc = vol_getattr(c->v, ino, &st);
    if (!rc) { /* as ext4, the times move whether or not the size does */
        struct stat in = {.st_size = off + len, .st_mtim = now()};
        unsigned grow = !(mode & FALLOC_FL_KEEP_SIZE) && off + len > st.st_size;
        rc = logged(vol_setattr(c->v, ino, VOL_SET_MTIME | (grow ? VOL_SET_SIZE : 0), &in, NULL),
                    "fallocate");
    }
    reply_rc(req, rc);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    fs_ctx *c = ctx_of(req);
    vol_info in;
    struct statvfs sv = {0}, under;
    vol_get_info(c->v, &in);
    sv.f_bsize = sv.f_frsize = 4096;
    /* Used space is the archive plus its journal; free space is the disk's under them. */
    uint64_t used = (in.archive_bytes + in.journal_bytes + 4095) / 4096;
    if (!statvfs(vol_path(c->v), &under)) {
        sv.f_bfree = sv.f_bavail = under.f_bavail * under.f_frsize / 4096;
        sv.f_ffree = sv.f_favail = under.f_favail;
    }
    sv.f_blocks = used + sv.f_bfree;
    sv.f_files = in.inodes + sv.f_ffree;
    sv.f_namemax = VOL_NAME_MAX;
    sv.f_flag = c->ro ? ST_RDONLY : 0;
    fuse_reply_statfs(req, &sv);
}

/* ---------------- extended attributes ---------------- */

/* The archive's rule count into v: from the shard table (an archive of shards), or the
 * grammar's (an older archive: waits for a lazy mount's load). */
static int root_rules(fs_ctx *c, char *v, size_t n)
{
    uint64_t r;
    int rc = vol_rules(c->v, &r);
    if (!rc) snprintf(v, n, "%" PRIu64, r);
    return rc;
}

/* Value of tadoc attribute `name` (without prefix) of inode `ino` into v; `all`: the caller
 * may see archive-wide values (fs_sees_all). The root directory's tadoc attributes describe
 * the whole archive (file count, content bytes, rules, journal activity, the backend's
 * request counts), private files included, so only those who see every file get them; the
 * kernel already asks for read permission on a file before its own attributes (size,
 * share, rules, pending) are read. */
static int attr_value(fs_ctx *c, uint64_t ino, const char *name, int all, char *v, size_t n)
{
    struct stat st;
    if (vol_getattr(c->v, ino, &st)) return -ENOENT;
    if (ino == 1 && !all) return -ENODATA;
    if (ino == 1) {
        vol_info in;
        vol_get_info(c->v, &in);
        if (!strcmp(name, "archive_size"))
            snprintf(v, n, "%" PRIu64, in.archive_bytes);
        else if (!strcmp(name, "files"))
            snprintf(v, n, "%" PRIu64, in.files);
        else if (!strcmp(name, "ratio"))
            snprintf(v, n, "%.3f", (double)in.content_bytes / (double)in.archive_bytes);
        else if (!strcmp(name, "rules"))
            return root_rules(c, v, n);
        else if (!strcmp(name, "journal_bytes"))
            snprintf(v, n, "%" PRIu64, in.journal_bytes);
        else if (!strcmp(name, "journal_records"))
            snprintf(v, n, "%" PRIu64, in.journal_records);
        else if (!strcmp(name, "dirty_files"))
            snprintf(v, n, "%" PRIu64, in.dirty_files);
        else if (!strcmp(name, "compactions"))
            snprintf(v, n, "%" PRIu64, in.compactions);
        else if (!strcmp(name, "backend"))
            backend_stats(c->be, v, n);
        else if (!strcmp(name, "archive")) /* its real path: how tadoc finds this mount */
            snprintf(v, n, "%s", vol_path(c->v));
        else if (!strcmp(name, "shard_cache")) /* reads served from their files' shards */
            snprintf(v, n,
                     "%" PRIu64 " reads; %" PRIu64 " spans kept, %" PRIu64 " bytes; %" PRIu64
                     " loads, %" PRIu64 " text, %" PRIu64 " read-ahead, %" PRIu64 " hits, %" PRIu64
                     " evictions; %d whole-archive; %" PRIu64 " budget, %" PRIu64 " used, %" PRIu64
                     " peak, %" PRIu64 " waits, %" PRIu64 " over, %" PRIu64 " trims",
                     in.early_reads, in.spans, in.span_bytes, in.span_loads, in.span_text,
                     in.span_ahead, in.span_hits, in.span_evictions, in.whole, in.budget,
                     in.budget_used, in.budget_peak, in.budget_waits, in.budget_over,
                     in.span_trims);
        else if (!strcmp(name, "virtual_texts")) /* the cache of virtual files' texts */
            vcache_describe(&c->vc, v, n);
        else if (!strcmp(name, "compact_error")) /* why the last compaction failed */
            return vol_compact_error(c->v, v, n), v[0] ? 0 : -ENODATA;
        else
            return -ENODATA;
        return 0;
    }
    if (!S_ISREG(st.st_mode)) return -ENODATA;
    if (!strcmp(name, "size")) {
        snprintf(v, n, "%lld", (long long)st.st_size);
        return 0;
    }
    uint64_t hash;
    int clean = vol_clean_hash(c->v, ino, &hash);
    if (!strcmp(name, "pending")) {
        snprintf(v, n, "%d", !clean);
        return 0;
    }
    if (strcmp(name, "share") && strcmp(name, "rules")) return -ENODATA;
    /* The file's place in a grammar every file shaped: its share moves with private files'
     * content, so it is the archive-wide attributes' readers' alone. */
    if (!all) return -ENODATA;
    if (!clean) return -ENODATA; /* edited: its grammar share is known after compaction */
    uint64_t rules;
    double share;
    int rc = vol_file_footprint(c->v, ino, &rules, &share);
    if (rc) return rc;
    if (!strcmp(name, "rules"))
        snprintf(v, n, "%" PRIu64, rules);
    else
        snprintf(v, n, "%.9f", share);
    return 0;
}

static void reply_value(fuse_req_t req, const void *p, size_t n, size_t size)
{
    if (size == 0)
        fuse_reply_xattr(req, n);
    else if (size < n)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, p, n);
}

/* What getxattr answers for a name outside user.* (where nothing is stored), as ext4
 * does: absent in the namespaces it knows, "not supported" in any other. */
static int foreign_xattr(const char *name)
{
    static const char *const known[] = {"trusted.", "security.", "system.posix_acl_access",
                                        "system.posix_acl_default"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strncmp(name, known[i], strlen(known[i]))) return -ENODATA;
    return -EOPNOTSUPP;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    fs_ctx *c = ctx_of(req);
    int user = !strncmp(name, USER_PREFIX, strlen(USER_PREFIX));
    if (!is_real(ino) || !user) {
        reply_rc(req, user ? -ENODATA : foreign_xattr(name));
        return;
    }
    if (!name[strlen(USER_PREFIX)]) { /* "user." alone names nothing */
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (!strncmp(name, TADOC_PREFIX, strlen(TADOC_PREFIX))) {
        char v[1024]; /* the longest, the backend's counters */
        int rc = attr_value(c, ino, name + strlen(TADOC_PREFIX), fs_sees_all(req, c), v, sizeof v);
        if (rc)
            reply_rc(req, logged(rc, "getxattr")); /* a file in a damaged shard: EIO */
        else
            reply_value(req, v, strlen(v), size);
        return;
    }
    buf b = {0};
    int rc = vol_getxattr(c->v, ino, name + strlen(USER_PREFIX), &b);
    if (rc)
        reply_rc(req, rc);
    else
        reply_value(req, b.p, b.n, size);
    buf_free(&b);
}

/* Only the attributes stored: the computed user.tadoc.* ones are read by name and never
 * listed, so that cp -a, tar --xattrs and rsync -X neither copy them out as stored
 * attributes nor fail to remove them from what they copy in (they cannot be removed), as
 * CephFS stopped listing its virtual ones. */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    fs_ctx *c = ctx_of(req);
    buf names = {0}, out = {0};
    if (!is_real(ino)) {
        fuse_reply_xattr(req, 0); /* virtual files have no attributes */
        return;
    }
    int rc = vol_listxattr(c->v, ino, &names);
    for (size_t i = 0; !rc && i < names.n; i += strlen((char *)names.p + i) + 1)
        rc = buf_put(&out, USER_PREFIX, strlen(USER_PREFIX)) ||
                     buf_put(&out, names.p + i, strlen((char *)names.p + i) + 1)
                 ? -ENOMEM
                 : 0;
    if (rc)
        reply_rc(req, rc);
    else
        reply_value(req, out.p, out.n, size);
    buf_free(&names);
    buf_free(&out);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    fs_ctx *c = ctx_of(req);
    int rc = !is_real(ino) ? -EACCES : c->ro ? -EROFS : 0;
    if (!rc && strncmp(name, USER_PREFIX, strlen(USER_PREFIX))) rc = -ENOTSUP;
    if (!rc && !strcmp(name, TADOC_PREFIX "compact") && ino != 1) {
        rc = -EINVAL;
    } else if (!rc && !strcmp(name, TADOC_PREFIX "compact") && size == 10 &&
               !memcmp(value, "background", 10)) {
        /* Started, not waited for: the kernel holds the mountpoint's directory locked for
         * as long as this call runs, and every lookup there would wait with it. */
        rc = vol_compact_start(c->v);
    } else if (!rc && !strcmp(name, TADOC_PREFIX "compact")) {
        /* Recompress now; the call returns when the new archive is in place. */
        vol_compact_stats st;
        rc = logged(vol_compact(c->v, &st), "compact");
        if (!rc)
            syslog(LOG_INFO, "compacted %" PRIu64 " dirty files in %.2f s", st.dirty_files,
                   st.build_s + st.write_s + st.check_s + st.swap_s);
    } else if (!rc && !strncmp(name, TADOC_PREFIX, strlen(TADOC_PREFIX))) {
        rc = -EPERM; /* computed attributes */
    } else if (!rc) {
        rc = logged(vol_setxattr(c->v, ino, name + strlen(USER_PREFIX), value, size, flags),
                    "setxattr");
    }
    reply_rc(req, rc);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    fs_ctx *c = ctx_of(req);
    int rc = !is_real(ino) ? -EACCES : c->ro ? -EROFS : 0;
    if (!rc && strncmp(name, USER_PREFIX, strlen(USER_PREFIX))) rc = -ENOTSUP;
    if (!rc && !strncmp(name, TADOC_PREFIX, strlen(TADOC_PREFIX))) rc = -EPERM;
    if (!rc) rc = logged(vol_removexattr(c->v, ino, name + strlen(USER_PREFIX)), "removexattr");
    reply_rc(req, rc);
}

/* The kernel drops n references of inode `ino`: a search file's registry entry goes with its
 * last one, and with noopen on a writable mount a real inode's count (lookup_ref) goes down
 * by n. Other inodes keep no per-reference state here. */
static void forget_one(fs_ctx *c, fuse_ino_t ino, uint64_t n)
{
    if (is_sfile(ino))
        sreg_forget(&c->search, ino - FS_SEARCH_BASE, n);
    else if (is_real(ino))
        lookup_ref(c, ino, -(int)n);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    forget_one(ctx_of(req), ino, nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    for (size_t i = 0; i < count; i++)
        forget_one(ctx_of(req), forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .symlink = op_symlink,
    .link = op_link,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .rename = op_rename,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsync,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .fsync = op_fsync,
    .release = op_release,
    .fallocate = op_fallocate,
    .statfs = op_statfs,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
};
