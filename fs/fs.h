/* fs: the FUSE low-level operations of tadocfs over one vol (an archive and its journal).
 *
 * The handlers keep no file system state of their own: names, attributes and contents live
 * in the vol, which is safe to call from every loop thread. Per-open state (a read cursor,
 * a running content hash, a computed virtual file) is guarded by its own mutex, and so is
 * each registry below; reading a file takes none of them. */
#ifndef TDC_FS_H
#define TDC_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>

#include "../engine/backend/backend.h"
#include "../engine/volume/vol.h"
#include "sreg.h"
#include "vcache.h"

/* Virtual files per directory that inode numbers leave room for. */
#define FS_VKINDS 8

/* The read buffer a loop thread keeps between reads under a small budget (fs_ctx.lean). */
#define FS_RBUF_KEEP ((size_t)128 << 10)

/* The size from which a virtual file's text goes to a file rather than the heap (at most). */
#define FS_SPILL_AT ((uint64_t)1 << 20)

typedef struct fs_ctx {
    vol *v;
    struct fuse_session *se; /* for notifications to the kernel */
    backend *be; /* the daemon's backend: mode, thresholds and analytics options from -o and
                    the environment; GPU copies, read batcher, counters */
    int ro;
    int novirtual;           /* -o novirtual: no virtual files; their names are plain names */
    uint32_t uid, gid;       /* (uint32_t)-1: show the archived owners */
    uint32_t owner;          /* the uid that started the daemon: sees every virtual file whole */
    double timeout;          /* entry and attribute cache timeout, seconds */
    uint64_t mem;            /* -o mem= (0: none): analytics shard by shard keep about this */
    int lean;                /* a budget under HEAP_HUGE_MIN: memory before speed (op_read) */
    pthread_mutex_t slock;   /* guards the word index */
    struct idx_words *words; /* word index of archive generation `words_gen` (0: none yet) */
    uint64_t words_gen;
    sreg search;           /* .search/WORD inodes the kernel holds; slot = inode - FS_SEARCH_BASE */
    pthread_mutex_t dlock; /* guards damaged; ndamaged is also read without it */
    uint64_t *damaged;     /* inodes whose content failed its hash; reads fail */
    size_t ndamaged;
    vcache vc; /* virtual file texts computed so far (its own lock) */
    pthread_mutex_t hlock;     /* guards handles */
    struct fs_handle *handles; /* the open file and directory handles (fs_handles_free) */
    const char *spill_dir; /* where texts of virtual files larger than spill_at go (vtext.h) */
    uint64_t spill_at;
    /* noopen (NULL: -o open): the read state of files the kernel opens without the daemon,
     * FS_KEPT_FILES slots taken by inode (fs_kept_init) */
    struct fs_file *kept;
    struct fs_push *push; /* read-only and noopen: the files stored ahead (push.h), or NULL */
} fs_ctx;

/* Read states kept for files opened without the daemon: slots taken by inode, so that
 * readers of this many files at once each keep their own. */
#define FS_KEPT_FILES 64

/* The default (noopen; -o open turns it off): OPEN is answered ENOSYS, which puts the kernel
 * in its no-open mode for the connection: it opens and closes regular files without a
 * request, and keeps their pages between opens. Reads and writes then carry no handle (a
 * CREATE makes none either) and reads use the kept read states; an O_TRUNC open truncates
 * through SETATTR (atomic_o_trunc off); an unlinked file stays readable while the kernel
 * holds a lookup of it (counted from the entries replied until FORGET). A virtual file's
 * text, per caller, is computed at its lookup and has an inode of its own (kept_vfile in
 * ops.c), so that the kept pages serve it to no one else. 0 or -ENOMEM. */
int fs_kept_init(fs_ctx *c);
void fs_kept_free(fs_ctx *c);

/* The operation table; every handler replies exactly once. */
extern const struct fuse_lowlevel_ops fs_ops;

/* Free the handles the kernel never released, after the session ended: a RELEASE queued
 * behind the unmount's DESTROY is dropped when the kernel aborts the connection. */
void fs_handles_free(fs_ctx *c);

/* Reads and writes up to this size are quick (fs_quick) where they need not wait: larger ones
 * go to the workers, so that parallel readers of large files extract on several cores. */
#define FS_QUICK_BYTES ((size_t)128 << 10)

/* The request loop's policy (fs/loop.h; ctx is the fs_ctx). Quick are the requests that
 * neither decode, compute nor wait for a compaction, on real inodes: lookups, attributes,
 * extended attributes (but the root's, which gather statistics or compact), listings, opens
 * (but with O_TRUNC) and releases, reads up to FS_QUICK_BYTES whose bytes are at
 * hand (vol_read_ready), and writes of that size and changes of names and attributes while
 * the journal takes them at once (vol_change_ready); forgets. Not quick: fsync, virtual
 * files, .search, reads that decode a shard, larger transfers. */
int fs_quick(void *ctx, const void *msg, size_t len);

#endif
