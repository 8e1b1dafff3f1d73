/* fs: the FUSE low-level operations of tadocfs over one opened archive.
 *
 * The handlers only read the archive, its index and its tree, which are immutable while
 * mounted, so any number of loop threads may run them at once; per-open state (a read
 * cursor and a running content hash) is guarded by its own mutex. */
#ifndef TDC_FS_H
#define TDC_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>

#include "../engine/arc.h"
#include "../index/idx.h"
#include "tree.h"

/* Virtual files per directory that inode numbers leave room for. */
#define FS_VKINDS 8

typedef struct fs_ctx {
    arc *a;
    idx *x;
    fs_tree *t;
    uint32_t uid, gid; /* (uint32_t)-1: show the archived owners */
    double timeout;    /* entry and attribute cache timeout, seconds */
    uint64_t content_bytes;
    uint64_t files;
    _Atomic unsigned char *damaged; /* per entry: content hash mismatch seen; reads fail */
    _Atomic uint64_t *vsize;        /* per directory and virtual file: size last computed */
    pthread_mutex_t slock;          /* guards words and the search registry */
    struct idx_words *words;        /* word index, built on the first .search lookup */
    struct {
        uint32_t dir;
        char *word;
    } * search; /* .search/WORD files looked up so far; index = inode - search base */
    size_t nsearch, capsearch;
} fs_ctx;

/* The operation table; every handler replies exactly once. */
extern const struct fuse_lowlevel_ops fs_ops;

#endif
