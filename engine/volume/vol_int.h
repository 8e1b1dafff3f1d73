/* vol_int: the inside of a vol, shared by vol.c (model, records) and vol_compact.c. */
#ifndef TDC_VOL_INT_H
#define TDC_VOL_INT_H

#include <pthread.h>
#include <time.h>

#include "../base/mbud.h"
#include "piece.h"
#include "vol.h"

/* Spans decoded at once (vol_span.c): each holds its sections and decoding buffers meanwhile,
 * which the budget does not count, so their number is bounded; two keep a reader busy while
 * the next span decodes. */
#define VOL_SPAN_LOADS 2
/* Spans decoded ahead at once for a reader going through the shards in order, at most: one
 * per CPU but the reader's, up to this. */
#define VOL_AHEAD_MAX 8

/* What the background thread is asked for (vol.want_compact): a compaction if the journal is
 * still past compact_threshold when it looks, or one now whatever its size. */
enum { WANT_THRESHOLD = 1, WANT_NOW = 2 };

typedef struct vdent {
    char *name;
    uint64_t ino;
} vdent;

typedef struct vnode {
    uint64_t ino;
    uint32_t mode; /* type and permission bits */
    uint32_t uid, gid;
    uint32_t nlink; /* names (a directory's st_nlink is 2 + nsub) */
    uint32_t nsub;  /* subdirectories */
    uint32_t opens; /* open handles (vol_ref: atomic under the shared lock) */
    struct timespec atime, mtime, ctime;
    uint64_t size;
    uint64_t rdev; /* devices: st_rdev */
    int64_t ent;   /* archive entry with the original content or attributes, or -1 if new */
    int edited;    /* attributes, names or content changed since the archive */
    uint32_t nxa;  /* of xa, below (here, where it fills what would be padding) */
    pt *pt;        /* piece table once the content is edited; NULL: content is `ent`'s */
    char *link;
    vdent *kids; /* directories: children sorted by name */
    uint32_t nkids, capkids;
    uint32_t kids_off; /* slots before kids in its allocation: a removal in the first half
                          moves the names before it, so removing names in order is O(1) */
    uint64_t parent; /* directories: the parent (the root is its own) */
    arc_xattr *xa;   /* sorted by name (nxa of them) */
} vnode;

struct vol {
    char *path, *jpath;
    vol_opts o;
    arc *a;
    idx *x;
    jrnl *j;
    uint64_t gen;           /* archive generation: bumps when compaction swaps the archive */
    uint64_t changes;       /* changes applied since the open (atomic; vol_state) */
    pthread_rwlock_t lock;  /* the model: shared by readers, exclusive for changes */
    pthread_rwlock_t alock; /* the archive: shared by analytics, exclusive for a swap; taken
                             * through vol_arc_rdlock/vol_arc_wrlock, never directly */
    pthread_mutex_t swlock; /* with swcond and switching: the gate of vol_arc_rdlock */
    pthread_cond_t swcond;
    int switching;          /* a compaction waits for alock, or holds it, to switch archives */
    pthread_mutex_t wlock;  /* serialises changes; a compaction holds them off only while it
                             * takes its snapshot and while it puts the new archive in place */
    pthread_mutex_t cplock; /* one compaction at a time */
    vnode **nodes;          /* by inode number */
    uint64_t cap, ninodes, next_ino;
    /* The archive's inodes and their names, each made in one block when the model is built
     * (load_entries), which goes with the model (vol_model_swap) and is freed with it; what
     * changes make later is allocated one by one. */
    struct vslab {
        vnode *nodes;
        char *names;
        size_t nnodes, nbytes;
    } slab;
    uint64_t dirty_files;
    uint64_t compactions;
    int replaying;
    int broken; /* a logged change could not be applied: changes are refused */
    int lockfd;
    pthread_t th;
    pthread_mutex_t tlock;
    pthread_cond_t tcond;
    int stop, want_compact, th_running; /* want_compact: 0, WANT_THRESHOLD or WANT_NOW */
    pthread_t cth;    /* a background compaction, in a thread of its own */
    int cth_joinable; /* cth was started and not joined yet */
    int compacting;   /* cth has not finished (tlock) */
    uint64_t cth_ends; /* background compactions finished, either way (tlock) */
    pthread_cond_t drained; /* a background compaction finished, or the volume closes */
    char compact_err[512]; /* why the last compaction failed, "" if it did not (tlock) */
    /* The last view of an edited directory compacted into a temporary archive, kept for the
     * next view of the same directory in the same state (view_by_shards; tlock) */
    struct vol_tview *tview;
    uint64_t retry_at;     /* journal size before which a failed background compaction waits */
    /* The archive's data (dictionary, grammar, index): loaded in vol_open, or for a lazy
     * open by the loader thread vol_start starts (or by the first caller of vol_data). */
    pthread_mutex_t dlock;
    pthread_cond_t dcond;
    int dstate; /* 0 not loaded, 1 loading, 2 ready, < 0 the load's error */
    char *dmsg; /* its message */
    pthread_t loader;
    int loader_running;
    int closing; /* vol_close has begun (atomic): the loader stops building the cache */
    /* Reads served from the shards of their file alone (vol_span.c): while the loader runs,
     * and under a memory budget (o.mem) instead of loading the whole archive. */
    pthread_mutex_t splock;          /* guards the fields below but early_reads */
    struct vol_span *spans, *spans_tail; /* kept spans, most recently used first */
    uint32_t nspans;
    uint64_t span_bytes; /* what they occupy */
    arc *smeta;          /* a copy of the file table the spans load from (freed by vol_close) */
    int smeta_pending;   /* the loader thread is making smeta (vol_start): open_smeta waits */
    int spans_done;      /* the whole archive is loaded: no more spans */
    uint64_t span_loads, span_hits, span_evictions, span_ahead, span_text;
    uint32_t seq_next; /* the shard after the last one a read loaded: loads from there go on
                        * in order, and read ahead */
    int reading_ahead; /* read-ahead threads running */
    int span_jobs;     /* background threads of the spans, read-ahead or expanding short
                        * rules (vol_spans_drop waits for them) */
    int ahead_max;     /* how many may run: VOL_AHEAD_MAX, or fewer on fewer CPUs */
    struct vol_loading {
        uint32_t first, last;
        int64_t part; /* span_key's */
        int text;
        uint64_t gen;
        int busy, ahead;
    } loading[VOL_SPAN_LOADS + VOL_AHEAD_MAX]; /* spans being decoded (for reads, or ahead),
                                                * which their readers wait for */
    uint64_t span_gen; /* bumped when a compaction puts a new archive's file table in smeta */
    uint64_t syms, syms_gen; /* the symbols of smeta's shards (vol_file_footprint), and
                                span_gen + 1 when they were counted (0: not yet) */
    pthread_cond_t spcond; /* a decoding ended */
    mbud *bud; /* the budget (o.mem) spans and analytics shard by shard share, or NULL */
    /* Bytes freed spans gave back to the budget since the last malloc_trim (atomic), and
     * how many may be before the next (vol_span.c). */
    uint64_t untrimmed, trim_slack;
    uint64_t span_trims; /* malloc_trim calls of dropped spans (atomic) */
    uint64_t early_reads; /* reads served from spans (atomic) */
};

typedef struct vol_span vol_span;

/* The unloaded copy of the archive's file table that spans load from (opened on first use),
 * for work shard by shard; NULL once the whole archive is loaded, or when it is not the
 * archive's (replaced). The caller holds v->alock for reading, which keeps the archive. */
const arc *vol_span_meta(vol *v);

/* `n` bytes of entry ent's archived content from `off` read from the shards of its file alone
 * (from `held` when it is their span, else loading them, with their own index, unless a kept
 * span holds them), or -EAGAIN when the read must go to the whole archive instead (the spans
 * are dropped, or the file table's copy cannot tell). Thread-safe. */
ssize_t vol_span_read(vol *v, vol_span *held, int64_t ent, uint64_t off, void *dst, size_t n);

/* The span holding entry ent's content (its byte `off`, for a file read part by part),
 * loaded or found kept, with a reference for the caller (vol_span_release); NULL when there
 * is none to have. */
vol_span *vol_span_hold(vol *v, int64_t ent, uint64_t off);
void vol_span_release(vol *v, vol_span *s); /* NULL is allowed */

/* alock for reading, and its release. The lock lets readers in while a writer waits
 * (glibc's default), so overlapping views of virtual files could hold a compaction's switch
 * off forever: a thread's first hold waits while a switch is pending (`switching`), a hold
 * within a hold does not (the switch waits for the outer one). Holds are per thread: the
 * thread that takes one releases it. */
void vol_arc_rdlock(vol *v);
void vol_arc_unlock(vol *v);
/* alock for a compaction's switch: new first holds wait from now until vol_arc_wrunlock. */
void vol_arc_wrlock(vol *v);
void vol_arc_wrunlock(vol *v);

/* Whether the span holding entry ent's content (its byte `off`) is kept now, so that a read
 * there decodes nothing (a hint: it may be dropped before the read takes it). */
int vol_span_kept(vol *v, int64_t ent, uint64_t off);

/* The budget of o.mem bytes, with the kept spans as what it reclaims: 0 or -ENOMEM. */
int vol_spans_budget(vol *v);

/* Spans again, from `smeta` (taken over), the file table of the archive a compaction just
 * put in place, which is not loaded: the kept spans of the old one are dropped, and spans
 * of it still in use or being decoded are never matched or kept. Caller holds v->alock and
 * the model lock for writing. */
void vol_spans_reset(vol *v, arc *smeta);

/* No more spans: drop the kept ones (each freed by its last reader). Called when the whole
 * archive is loaded, and by vol_close. */
void vol_spans_drop(vol *v);

/* Wait until the archive's data is loaded: 0, or the load's error (with its message). */
int vol_data(vol *v);

/* The node of `ino`, or NULL. Caller holds v->lock. */
vnode *vol_node(const vol *v, uint64_t ino);

/* vol_read for a node already found; caller holds v->lock (shared is enough) and has had 0
 * from vol_data, or reads before the whole archive is loaded: then archived bytes come from
 * spans (vol_span_read), and -EAGAIN says to load the whole archive and read again. */
ssize_t vol_read_locked(vol *v, vol_reader *r, const vnode *f, uint64_t off, void *dst, size_t n);

/* A model of archive `a`'s tree alone (no journal), for a compaction: the records that came
 * after its snapshot are replayed into it (vol_model_replay), then it takes the place of v's
 * model (vol_model_swap). NULL when out of memory. */
vol *vol_model_new(const arc *a);

/* Apply one journal record to the model of vol `ctx` (a jrnl_apply_fn: a mount's replay, and
 * a compaction's replay into vol_model_new's model). */
int vol_model_replay(void *ctx, const jrnl_rec *r);

/* 0 when every inode open in v's model is in w (so open handles carry over), else -EBUSY. */
int vol_model_check(const vol *v, const vol *w);

/* v's model and w's trade places: open counts carry over by inode number, and inodes left
 * with neither names nor open handles go. Caller holds the write lock; w, holding the old
 * model, is freed after it lets go. */
void vol_model_swap(vol *v, vol *w);
void vol_model_free(vol *w);

/* vol_compact for the background compactor thread: on every other core (build_workers). */
int vol_compact_bg(vol *v, vol_compact_stats *st);

/* The lock discipline of vol.c, for vol_compact.c. */
void vol_rdlock(vol *v);
void vol_wrlock(vol *v);
void vol_unlock(vol *v);

#endif
