#include "fs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <xxhash.h>

#include "../engine/ana.h"
#include "../engine/err.h"
#include "../index/words.h"

#define XATTR_PREFIX "user.tadoc."

/* Virtual analytics files: resolved by name in every directory, never listed. Inode numbers
 * follow the real ones: nents + 1 + dir * FS_VKINDS + kind. */

static const struct {
    const char *name;
    int (*fn)(const arc *, uint32_t, uint32_t, buf *);
} vfiles[] = {{".wordcount", ana_wordcount}, {".sort", ana_sort},
              {".invindex", ana_invindex},   {".termvector", ana_termvector},
              {".seqcount", ana_seqcount},   {".rankedinvindex", ana_rankedinvindex}};
#define NVFILES (sizeof vfiles / sizeof vfiles[0])

/* Per-open state: a regular file (cursor and running hash) or a computed virtual file. */
typedef struct fs_file {
    pthread_mutex_t lock;
    int virt;
    buf vout; /* the virtual file's text */
    uint32_t ent;
    idx_cursor cur;
    XXH3_state_t *hs; /* content hash of bytes [0, hashed), while reads are sequential */
    uint64_t hashed;
} fs_file;

static fs_ctx *ctx_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* Entry index of inode `ino`, or -1 when it is not ours. */
static int64_t ent_of(const fs_ctx *c, fuse_ino_t ino)
{
    return ino >= 1 && ino <= c->a->nents ? (int64_t)ino - 1 : -1;
}

/* Kind of the `.search` directory, after the analytics files; the files inside it are
 * numbered from search_base() in the order they are first looked up. */
#define SEARCH_DIR NVFILES

static uint64_t search_base(const fs_ctx *c)
{
    return (uint64_t)c->a->nents + 1 + (uint64_t)c->a->nents * FS_VKINDS;
}

/* Decode a virtual inode into its directory entry and kind (an analytics file, or
 * SEARCH_DIR); 0 on success. */
static int vino_of(const fs_ctx *c, fuse_ino_t ino, uint32_t *dir, uint32_t *kind)
{
    if (ino <= c->a->nents || ino >= search_base(c)) return -1;
    uint64_t v = ino - c->a->nents - 1;
    if (v % FS_VKINDS > SEARCH_DIR) return -1;
    *dir = (uint32_t)(v / FS_VKINDS);
    *kind = (uint32_t)(v % FS_VKINDS);
    return c->a->ents[*dir].type == ARC_DIR ? 0 : -1;
}

/* Attributes of a virtual file: read-only, the directory's times, the size of its last
 * computed text (0 until first opened; reads use direct_io, so the size is only a hint). */
static void vstat(const fs_ctx *c, uint32_t dir, uint32_t kind, struct stat *st)
{
    tree_stat(c->t, dir, c->uid, c->gid, st);
    st->st_ino = (ino_t)(c->a->nents + 1 + (uint64_t)dir * FS_VKINDS + kind);
    st->st_mode = kind == SEARCH_DIR ? S_IFDIR | 0555 : S_IFREG | 0444;
    st->st_nlink = kind == SEARCH_DIR ? 2 : 1;
    st->st_size = (off_t)c->vsize[(uint64_t)dir * FS_VKINDS + kind];
    st->st_blocks = (st->st_size + 511) / 512;
}

/* Registry index of search file inode `ino`, or -1. */
static int64_t sfile_of(fs_ctx *c, fuse_ino_t ino)
{
    if (ino < search_base(c)) return -1;
    pthread_mutex_lock(&c->slock);
    int64_t k = ino - search_base(c) < c->nsearch ? (int64_t)(ino - search_base(c)) : -1;
    pthread_mutex_unlock(&c->slock);
    return k;
}

/* Attributes of any virtual inode; 0 if `ino` is one. */
static int vattr(fs_ctx *c, fuse_ino_t ino, struct stat *st)
{
    uint32_t dir, kind;
    if (!vino_of(c, ino, &dir, &kind)) {
        vstat(c, dir, kind, st);
        return 0;
    }
    int64_t k = sfile_of(c, ino);
    if (k < 0) return -1;
    pthread_mutex_lock(&c->slock);
    dir = c->search[k].dir;
    pthread_mutex_unlock(&c->slock);
    tree_stat(c->t, dir, c->uid, c->gid, st);
    st->st_ino = (ino_t)ino;
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = 0; /* computed on open and read with direct_io */
    st->st_blocks = 0;
    return 0;
}

/* The inode of `.search/word` under directory `dir`, registering it on first use. */
static int search_register(fs_ctx *c, uint32_t dir, const char *word, fuse_ino_t *ino)
{
    int rc = 0;
    pthread_mutex_lock(&c->slock);
    size_t k = 0;
    while (k < c->nsearch && (c->search[k].dir != dir || strcmp(c->search[k].word, word)))
        k++;
    if (k == c->nsearch) {
        if (c->nsearch == c->capsearch) {
            size_t cap = c->capsearch ? c->capsearch * 2 : 64;
            void *n = realloc(c->search, cap * sizeof *c->search);
            if (n) {
                c->search = n;
                c->capsearch = cap;
            }
        }
        char *w = c->nsearch < c->capsearch ? strdup(word) : NULL;
        if (w) {
            c->search[k].dir = dir;
            c->search[k].word = w;
            c->nsearch++;
        } else {
            rc = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&c->slock);
    *ino = (fuse_ino_t)(search_base(c) + k);
    return rc;
}

static void fill_entry(const fs_ctx *c, uint32_t ent, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = (fuse_ino_t)ent + 1;
    e->generation = 1;
    e->attr_timeout = e->entry_timeout = c->timeout;
    tree_stat(c->t, ent, c->uid, c->gid, &e->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* Large requests: 1 MiB reads and readahead where the kernel allows them. */
    conn->max_readahead = 1 << 20;
    conn->max_write = 1 << 20;
    if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fs_ctx *c = ctx_of(req);
    int64_t p = ent_of(c, parent);
    uint32_t sdir, skind;
    if (p < 0 && !vino_of(c, parent, &sdir, &skind) && skind == SEARCH_DIR) {
        /* Any name inside .search is a word to look for. */
        struct fuse_entry_param se = {.generation = 1};
        fuse_ino_t ino;
        if (search_register(c, sdir, name, &ino)) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        vattr(c, ino, &se.attr);
        se.ino = ino;
        fuse_reply_entry(req, &se);
        return;
    }
    if (p < 0 || c->a->ents[p].type != ARC_DIR) {
        fuse_reply_err(req, p < 0 ? ESTALE : ENOTDIR);
        return;
    }
    int64_t e = tree_lookup(c->t, (uint32_t)p, name);
    /* A real entry of the same name wins over a virtual file. */
    for (uint32_t k = 0; k <= SEARCH_DIR && e < 0; k++) {
        if (strcmp(name, k == SEARCH_DIR ? ".search" : vfiles[k].name)) continue;
        struct fuse_entry_param ve = {.generation = 1};
        vstat(c, (uint32_t)p, k, &ve.attr);
        ve.ino = ve.attr.st_ino;
        fuse_reply_entry(req, &ve); /* no caching: the size changes once computed */
        return;
    }
    if (e < 0) {
        /* A negative entry the kernel may cache as long as positive ones. */
        struct fuse_entry_param ne = {.ino = 0, .entry_timeout = c->timeout};
        fuse_reply_entry(req, &ne);
        return;
    }
    struct fuse_entry_param ep;
    fill_entry(c, (uint32_t)e, &ep);
    fuse_reply_entry(req, &ep);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    struct stat st;
    if (e < 0 && !vattr(c, ino, &st)) {
        fuse_reply_attr(req, &st, 0);
        return;
    }
    if (e < 0) {
        fuse_reply_err(req, ESTALE);
        return;
    }
    tree_stat(c->t, (uint32_t)e, c->uid, c->gid, &st);
    fuse_reply_attr(req, &st, c->timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    if (e < 0 || c->a->ents[e].type != ARC_LNK)
        fuse_reply_err(req, e < 0 ? ESTALE : EINVAL);
    else
        fuse_reply_readlink(req, c->a->ents[e].link);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    uint32_t dir, kind;
    if (e < 0 && !vino_of(c, ino, &dir, &kind) && kind == SEARCH_DIR) {
        fuse_reply_open(req, fi); /* lists nothing: every word is there */
        return;
    }
    if (e < 0 || c->a->ents[e].type != ARC_DIR) {
        fuse_reply_err(req, e < 0 ? ESTALE : ENOTDIR);
        return;
    }
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

/* readdir and readdirplus: offsets 1 and 2 are "." and "..", then child k is k + 3. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    uint32_t n, dir, kind;
    if (e < 0 && !vino_of(c, ino, &dir, &kind) && kind == SEARCH_DIR) {
        fuse_reply_buf(req, NULL, 0); /* no entries, not even . and .. */
        return;
    }
    if (e < 0) {
        fuse_reply_err(req, ESTALE);
        return;
    }
    const uint32_t *kids = tree_children(c->t, (uint32_t)e, &n);
    char *buf = malloc(size);
    size_t used = 0;
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    for (off_t k = off; k < (off_t)n + 2; k++) {
        uint32_t ent = k == 0 ? (uint32_t)e : k == 1 ? tree_parent(c->t, (uint32_t)e) : kids[k - 2];
        const char *name = k == 0 ? "." : k == 1 ? ".." : tree_name(c->t, ent);
        struct fuse_entry_param ep;
        fill_entry(c, ent, &ep);
        size_t need;
        if (plus) {
            /* "." and ".." carry no entry, so the kernel takes no lookup reference. */
            if (k < 2) {
                ep.ino = 0;
                ep.attr.st_ino = (ino_t)ent + 1;
            }
            need = fuse_add_direntry_plus(req, buf + used, size - used, name, &ep, k + 1);
        } else {
            need = fuse_add_direntry(req, buf + used, size - used, name, &ep.attr, k + 1);
        }
        if (need > size - used) break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    do_readdir(req, ino, size, off, 1);
}

/* Compute a virtual file's text when it is opened; it is then read from memory. */
static void open_virtual(fuse_req_t req, fs_ctx *c, uint32_t dir, uint32_t kind,
                         struct fuse_file_info *fi)
{
    if ((fi->flags & O_ACCMODE) != O_RDONLY) {
        fuse_reply_err(req, EROFS);
        return;
    }
    fs_file *f = calloc(1, sizeof *f);
    if (!f) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    int rc = vfiles[kind].fn(c->a, dir, ana_subtree_end(c->a, dir), &f->vout);
    if (rc) {
        syslog(LOG_ERR, "%s/%s: %s", c->a->ents[dir].path, vfiles[kind].name, tdc_errmsg());
        buf_free(&f->vout);
        free(f);
        fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
        return;
    }
    pthread_mutex_init(&f->lock, NULL);
    f->virt = 1;
    c->vsize[(uint64_t)dir * FS_VKINDS + kind] = f->vout.n;
    fi->fh = (uint64_t)(uintptr_t)f;
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

/* "path:offset" for every occurrence of the word in the subtree, paths relative to it, in
 * path order; found through the word index without reading the files. */
static int search_text(fs_ctx *c, uint32_t dir, const char *word, buf *out)
{
    int rc = 0;
    pthread_mutex_lock(&c->slock);
    if (!c->words) rc = idx_words_build(c->x, &c->words);
    pthread_mutex_unlock(&c->slock);
    if (rc) return rc;
    size_t plen = ana_scope_prefix(c->a, dir);
    vec32 files = {0};
    vec64 offs = {0};
    rc = ana_scope_files(c->a, dir, ana_subtree_end(c->a, dir), &files);
    for (size_t i = 0; i < files.n && !rc; i++) {
        offs.n = 0;
        rc = idx_search(c->words, files.p[i], word, strlen(word), &offs);
        for (size_t j = 0; j < offs.n && !rc; j++) {
            char num[32];
            int n = snprintf(num, sizeof num, ":%llu\n", (unsigned long long)offs.p[j]);
            rc = buf_put(out, c->a->ents[files.p[i]].path + plen,
                         strlen(c->a->ents[files.p[i]].path + plen)) ||
                 buf_put(out, num, (size_t)n);
        }
    }
    vec32_free(&files);
    vec64_free(&offs);
    return rc ? -ENOMEM : 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    uint32_t dir, kind;
    if (e < 0 && !vino_of(c, ino, &dir, &kind)) {
        if (kind == SEARCH_DIR)
            fuse_reply_err(req, EISDIR);
        else
            open_virtual(req, c, dir, kind, fi);
        return;
    }
    int64_t sk = e < 0 ? sfile_of(c, ino) : -1;
    if (sk >= 0) {
        fs_file *f = calloc(1, sizeof *f);
        pthread_mutex_lock(&c->slock);
        uint32_t sdir = c->search[sk].dir;
        char *word = strdup(c->search[sk].word);
        pthread_mutex_unlock(&c->slock);
        int rc = f && word ? search_text(c, sdir, word, &f->vout) : -ENOMEM;
        free(word);
        if (rc) {
            if (f) buf_free(&f->vout);
            free(f);
            fuse_reply_err(req, ENOMEM);
            return;
        }
        pthread_mutex_init(&f->lock, NULL);
        f->virt = 1;
        fi->fh = (uint64_t)(uintptr_t)f;
        fi->direct_io = 1;
        fuse_reply_open(req, fi);
        return;
    }
    if (e < 0 || c->a->ents[e].type != ARC_REG) {
        fuse_reply_err(req, e < 0 ? ESTALE : EISDIR);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    fs_file *f = calloc(1, sizeof *f);
    if (!f || !(f->hs = XXH3_createState())) {
        free(f);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pthread_mutex_init(&f->lock, NULL);
    f->ent = (uint32_t)e;
    idx_cursor_init(&f->cur);
    XXH3_64bits_reset(f->hs);
    fi->fh = (uint64_t)(uintptr_t)f;
    fi->keep_cache = 1; /* the archive never changes under a read-only mount */
    fuse_reply_open(req, fi);
}

static _Thread_local unsigned char *rbuf;
static _Thread_local size_t rcap;

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    fs_ctx *c = ctx_of(req);
    fs_file *f = (fs_file *)(uintptr_t)fi->fh;
    if (f->virt) {
        size_t o = (uint64_t)off < f->vout.n ? (size_t)off : f->vout.n;
        fuse_reply_buf(req, (const char *)f->vout.p + o,
                       size < f->vout.n - o ? size : f->vout.n - o);
        return;
    }
    if (size > rcap) {
        unsigned char *b = realloc(rbuf, size);
        if (!b) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        rbuf = b;
        rcap = size;
    }
    const arc_entry *e = &c->a->ents[f->ent];
    if (c->damaged[f->ent]) {
        fuse_reply_err(req, EIO);
        return;
    }
    pthread_mutex_lock(&f->lock);
    ssize_t n = idx_read(c->x, &f->cur, f->ent, (uint64_t)off, rbuf, size);
    int bad = 0;
    if (n > 0 && f->hs && (uint64_t)off == f->hashed) {
        /* Read sequentially from byte 0 so far: extend the content hash, and at EOF compare
         * it with the one recorded at pack time, so damage checksums missed is never served
         * silently. */
        XXH3_64bits_update(f->hs, rbuf, (size_t)n);
        f->hashed += (uint64_t)n;
        if (f->hashed == e->size) {
            bad = XXH3_64bits_digest(f->hs) != e->hash;
            XXH3_freeState(f->hs);
            f->hs = NULL;
        }
    }
    pthread_mutex_unlock(&f->lock);
    if (n < 0) {
        syslog(LOG_ERR, "%s: read at %lld: %s", e->path, (long long)off, tdc_errmsg());
        fuse_reply_err(req, n == -ENOMEM ? ENOMEM : EIO);
    } else if (bad) {
        c->damaged[f->ent] = 1; /* every later read of this file fails too, not only this one */
        syslog(LOG_ERR, "%s: content hash mismatch: archive data is damaged", e->path);
        fprintf(stderr, "tadocfs: %s: content hash mismatch: archive data is damaged\n", e->path);
        fuse_reply_err(req, EIO);
    } else {
        fuse_reply_buf(req, (const char *)rbuf, (size_t)n);
    }
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    fs_file *f = (fs_file *)(uintptr_t)fi->fh;
    buf_free(&f->vout);
    idx_cursor_free(&f->cur);
    XXH3_freeState(f->hs);
    pthread_mutex_destroy(&f->lock);
    free(f);
    fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    fs_ctx *c = ctx_of(req);
    struct statvfs sv = {0};
    sv.f_bsize = sv.f_frsize = 4096;
    sv.f_blocks = (c->a->file_size + 4095) / 4096;
    sv.f_files = c->a->nents;
    sv.f_namemax = 255;
    sv.f_flag = ST_RDONLY;
    fuse_reply_statfs(req, &sv);
}

/* ---------------- extended attributes ---------------- */

static const char *const file_attrs[] = {"size", "share", "rules"};
static const char *const root_attrs[] = {"archive_size", "files", "ratio", "rules"};

/* Value of attribute `name` (without prefix) of entry e into v; 0, -ENODATA or -ENOMEM. */
static int attr_value(const fs_ctx *c, uint32_t e, const char *name, char *v, size_t n)
{
    const arc_entry *f = &c->a->ents[e];
    if (e == 0) {
        if (!strcmp(name, "archive_size"))
            snprintf(v, n, "%" PRIu64, c->a->file_size);
        else if (!strcmp(name, "files"))
            snprintf(v, n, "%" PRIu64, c->files);
        else if (!strcmp(name, "ratio"))
            snprintf(v, n, "%.3f", (double)c->content_bytes / (double)c->a->file_size);
        else if (!strcmp(name, "rules"))
            snprintf(v, n, "%u", c->a->g.nrules);
        else
            return -ENODATA;
        return 0;
    }
    if (f->type != ARC_REG) return -ENODATA;
    if (!strcmp(name, "size")) {
        snprintf(v, n, "%" PRIu64, f->size);
        return 0;
    }
    if (strcmp(name, "share") && strcmp(name, "rules")) return -ENODATA;
    uint64_t rules;
    double share;
    if (idx_file_footprint(c->x, e, &rules, &share)) return -ENOMEM;
    if (!strcmp(name, "rules"))
        snprintf(v, n, "%" PRIu64, rules);
    else
        snprintf(v, n, "%.9f", share);
    return 0;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    char v[64];
    if (e < 0) {
        fuse_reply_err(req, ino > c->a->nents ? ENODATA : ESTALE);
        return;
    }
    if (strncmp(name, XATTR_PREFIX, strlen(XATTR_PREFIX))) {
        fuse_reply_err(req, ENODATA);
        return;
    }
    int rc = attr_value(c, (uint32_t)e, name + strlen(XATTR_PREFIX), v, sizeof v);
    if (rc)
        fuse_reply_err(req, -rc);
    else if (size == 0)
        fuse_reply_xattr(req, strlen(v));
    else if (size < strlen(v))
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, v, strlen(v));
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    char list[256];
    size_t used = 0;
    if (e < 0 && ino > c->a->nents) {
        fuse_reply_xattr(req, 0); /* virtual files have no attributes */
        return;
    }
    if (e < 0) {
        fuse_reply_err(req, ESTALE);
        return;
    }
    const char *const *names = e == 0 ? root_attrs : file_attrs;
    size_t count = e == 0 ? 4 : c->a->ents[e].type == ARC_REG ? 3 : 0;
    for (size_t i = 0; i < count; i++)
        used +=
            (size_t)snprintf(list + used, sizeof list - used, "%s%s", XATTR_PREFIX, names[i]) + 1;
    if (size == 0)
        fuse_reply_xattr(req, used);
    else if (size < used)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, list, used);
}

/* Permission check for callers that did not ask for default_permissions. */
static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    fs_ctx *c = ctx_of(req);
    int64_t e = ent_of(c, ino);
    struct stat st;
    if (e < 0 && vattr(c, ino, &st)) {
        fuse_reply_err(req, ESTALE);
        return;
    }
    if (mask & W_OK) {
        fuse_reply_err(req, EROFS);
        return;
    }
    const struct fuse_ctx *who = fuse_req_ctx(req);
    if (e >= 0) tree_stat(c->t, (uint32_t)e, c->uid, c->gid, &st);
    if (who->uid == 0) {
        /* root may read anything, and execute what anyone may execute */
        int ok = !(mask & X_OK) || S_ISDIR(st.st_mode) || (st.st_mode & 0111);
        fuse_reply_err(req, ok ? 0 : EACCES);
        return;
    }
    mode_t bits = who->uid == st.st_uid   ? (st.st_mode >> 6)
                  : who->gid == st.st_gid ? (st.st_mode >> 3)
                                          : st.st_mode;
    int want = (mask & R_OK ? 4 : 0) | (mask & X_OK ? 1 : 0);
    fuse_reply_err(req, (int)(bits & 7 & (mode_t)want) == want ? 0 : EACCES);
}

const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .statfs = op_statfs,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .access = op_access,
};
