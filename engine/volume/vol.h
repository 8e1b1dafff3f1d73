/* vol: a live, editable view of an archive: the archive plus its journal.
 *
 * A vol keeps the namespace (inodes, directories, names) and each edited file's piece table
 * in memory. Every change is first appended to the journal as a record and then applied by
 * the same code that replays the journal when the archive is opened again, so what a
 * restart rebuilds is exactly what was served. Clean files read straight from the grammar;
 * edited ones through their piece tables. vol_compact folds everything into a new archive.
 *
 * Inode numbers are the archive's (stable across remounts and compactions); new inodes take
 * numbers from the archive's next_ino upward, in record order.
 *
 * Thread safety: every function may be called from any number of threads. Readers share a
 * lock; changes take it exclusively for the moment they touch memory; a compaction blocks
 * changes (not reads) while it runs. Errors are negative errno values with a message
 * (tdc_errmsg) where the cause is not obvious from the code alone. */
#ifndef TDC_VOL_H
#define TDC_VOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../index/idx.h"
#include "../base/mbud.h"
#include "../format/arc.h"
#include "../base/buf.h"
#include "jrnl.h"

typedef struct vol vol;

typedef struct vol_opts {
    int writable;               /* 0: read-only (the journal is replayed, never written) */
    uint64_t cache_bytes;       /* flat-rule cache of the index (0: IDX_CACHE_DEFAULT) */
    uint64_t compact_threshold; /* journal bytes that start a background compaction (0: never) */
    /* Journal bytes past which a change waits for a background compaction that runs or is
     * asked for (0: vol_journal_max(compact_threshold); UINT64_MAX: never waits) */
    uint64_t journal_max;
    int level;                  /* zstd level of compacted archives (0: VOL_LEVEL_DEFAULT) */
    uint64_t shard_size; /* content of the shards compaction builds (0: compact_shard_size) */
    unsigned compact_jobs; /* shards a compaction builds at once (0: one a core as memory
                              allows, vol_compact.c's build_workers) */
    struct backend *be; /* serves reads (batched onto the GPU) and keeps the archive's GPU
                           copies: the caller's (engine/backend/backend.h), optional (NULL:
                           the CPU reads), and it outlives the volume */
    /* Test hook, optional: called by the loader thread of a lazy open before it loads. */
    void (*load_hook)(void *ctx);
    void *load_ctx;
    int lazy; /* open only the file table; vol_start loads the rest in the background, and
                 whatever needs content waits for it (and fails with the load's error), except
                 reads, which meanwhile load only their file's shards */
    uint64_t mem;      /* with lazy: no background load; reads load only their file's shards,
                          within a budget of `mem` bytes (vol_budget) that spans being decoded,
                          read and kept share with the analytics shard by shard (least recently
                          used dropped, loads waiting for room). What needs the whole archive
                          (idx_file_footprint) still loads it, and the
                          budget holds no more after. 0: none, or mem_auto's choice */
    uint64_t mem_auto; /* with lazy and no mem: the budget the volume takes as mem for an
                          archive of shards (format 4), reads and analytics then going by shard
                          as under mem. 0: load it whole in the background from the start */
    void (*log)(void *ctx, const char *msg); /* background events (compaction), optional */
    void *log_ctx;
    /* Test hook, optional: called as each step of a compaction is done (enum vol_step; `tmp`
     * names the temporary archive where there is one). A non-zero return (a negative errno)
     * stops the compaction there as a failure would; crash tests exit the process in it. */
    int (*compact_step)(void *ctx, int step, const char *tmp);
    void *step_ctx;
} vol_opts;

/* The default journal_max: four times the compaction threshold, at least 256 MiB, so a short
 * burst of changes never waits and a sustained one cannot outrun compaction without bound. */
uint64_t vol_journal_max(uint64_t threshold);

/* The default memory budget (vol_opts.mem_auto) of the daemon and of `tadoc compact`: 256
 * MiB, or an eighth of the memory this process may use (RAM, or its control group's limit
 * where that is lower, as in a container) where that is less, 64 MiB at least. Reads go shard
 * by shard within it at the speed of a larger budget (a cold read of a whole tree evicts
 * anyway) and with a fraction of the memory; a daemon serving one corpus leaves the rest to
 * the page cache, which holds the compressed archive, and to the programs reading it.
 * Analytics and compaction go shard by shard within it too. */
uint64_t vol_mem_default(void);

/* The steps of a compaction, in order (see vol_compact). */
enum vol_step {
    VOL_STEP_BUILT = 1, /* the new archive exists in memory */
    VOL_STEP_WRITTEN,   /* ... in a temporary file beside the old one, fsynced */
    VOL_STEP_CHECKED,   /* ... reopened by the reader and checked (vol_compact) */
    VOL_STEP_RENAMED,   /* ... renamed over the old archive */
    VOL_STEP_RESET,     /* the journal replaced by the next one, bound to the new archive */
};

#define VOL_LEVEL_DEFAULT 9
#define VOL_NAME_MAX 255
/* The largest size a file may grow to through writes, truncates and fallocate (EFBIG past
 * it). A compaction stores a file's holes as the zero bytes they read as, about a second and
 * a half per GiB on one core: a terabyte takes it most of an hour, and a size near 2^63, which
 * ext4 would refuse too, years. */
#define VOL_MAX_FILE ((uint64_t)1 << 40)

/* Replacing an archive by a new one (tadoc pack -o over it): the journal beside the old one
 * names the old archive, so it must go, and it may only go if it holds no edit.
 * vol_replace_begin refuses (-EEXIST, with a message) when `archive`.journal holds records,
 * and -EBUSY while a writer (mount, compact, apply) holds the archive; otherwise it keeps the
 * writers' lock until vol_replace_end, which removes the empty journal when `replaced` (the
 * new archive is in place). Without an archive or a journal there is nothing to guard. A
 * symbolic link stands for the archive it names; something other than a regular file is not
 * guarded (the writer refuses it). The lock's holder removes temporary files a killed
 * writer left beside the archive. */
typedef struct vol_replace {
    char *jpath;
    int lockfd;
} vol_replace;
int vol_replace_begin(const char *archive, vol_replace *r);
void vol_replace_end(vol_replace *r, int replaced);

/* Open `archive` and replay `archive`.journal. *rs (optional) receives what replay did; a
 * read-only open with rs leaves a journal whose header is damaged or names another archive
 * unread (rs->unread), one without rs refuses it (-EBADMSG), as a writable open does. */
int vol_open(const char *archive, const vol_opts *o, vol **out, jrnl_stats *rs);

/* Start the background threads: for a lazy open, the one that loads the archive's data; for
 * a writable vol, the one that runs a compaction when the journal passes compact_threshold or
 * vol_compact_async asks. Call after any fork (threads do not survive one). */
int vol_start(vol *v);

/* Close; the vol is freed. */
void vol_close(vol *v);

/* Stop a compaction in flight at its next read of content, as a failure (-ECANCELED: the
 * old archive and journal stay), and every later one: for a signal handler (it only stores
 * a flag). */
void vol_cancel(vol *v);

/* ---- namespace ---- */

/* Attributes of inode `ino`: 0 or -ENOENT. */
int vol_getattr(vol *v, uint64_t ino, struct stat *st);

/* The inode called `name` in directory `dir`: 0 (st filled), -ENOENT, -ENOTDIR or
 * -ENAMETOOLONG (a name over VOL_NAME_MAX bytes). */
int vol_lookup(vol *v, uint64_t dir, const char *name, struct stat *st);

/* Inode of a relative path ("" is the root), following no symlinks: 0, -ENOENT, -ENOTDIR. */
int vol_resolve(vol *v, const char *path, uint64_t *ino);

/* Symlink target (malloc'ed) of `ino`: 0, -ENOENT or -EINVAL. */
int vol_readlink(vol *v, uint64_t ino, char **target);

typedef struct vol_dirent {
    char *name;
    uint64_t ino;
    uint32_t mode; /* type bits only */
} vol_dirent;

/* A snapshot of directory `dir`: its entries in name order and its parent. Free with
 * vol_list_free. 0, -ENOENT, -ENOTDIR or -ENOMEM. */
int vol_list(vol *v, uint64_t dir, vol_dirent **ents, size_t *n, uint64_t *parent);
void vol_list_free(vol_dirent *ents, size_t n);

/* Create `name` in `dir`: a regular file, directory, symlink, FIFO, socket or device (`mode`
 * carries the type bits; `target` is the symlink's, `rdev` the device's number, ignored for
 * other types). 0 with st filled, -EEXIST, -ENOENT, -ENOTDIR, -ENAMETOOLONG, -EINVAL (an
 * unknown type), -EROFS, -ENOSPC. */
int vol_mknode(vol *v, uint64_t dir, const char *name, uint32_t mode, uint32_t uid, uint32_t gid,
               const char *target, uint64_t rdev, struct stat *st);

/* A new name for a regular file (a hard link): -EPERM for a directory or a symlink. */
int vol_link(vol *v, uint64_t ino, uint64_t dir, const char *name, struct stat *st);

/* Remove a name: a non-directory (`isdir` 0) or an empty directory (`isdir` 1). An inode
 * whose last name goes stays readable while open (vol_ref). */
int vol_unlink(vol *v, uint64_t dir, const char *name, int isdir);

#define VOL_RENAME_NOREPLACE (1u << 0) /* the renameat2 flag values */
#define VOL_RENAME_EXCHANGE (1u << 1)

/* rename(2) with renameat2 flags VOL_RENAME_NOREPLACE and VOL_RENAME_EXCHANGE. Renaming a
 * name onto another name of the same inode does nothing. */
int vol_rename(vol *v, uint64_t dir, const char *name, uint64_t ndir, const char *nname,
               unsigned flags);

enum vol_set {
    VOL_SET_MODE = 1,
    VOL_SET_UID = 2,
    VOL_SET_GID = 4,
    VOL_SET_SIZE = 8,
    VOL_SET_ATIME = 16,
    VOL_SET_MTIME = 32,
    VOL_SET_CTIME = 64, /* the change time, whatever else is set (a chown(2) to -1, -1) */
};

/* Change the attributes named in `valid` (from `in`; times are st_atim / st_mtim). The
 * change time is set to now. 0 with *out filled, or an error. */
int vol_setattr(vol *v, uint64_t ino, unsigned valid, const struct stat *in, struct stat *out);

/* ---- content ---- */

/* Overwrite n bytes at `off` (extending the file as needed). 0 or an error (-EISDIR,
 * -ENOSPC, -EFBIG, ...); nothing is changed on failure. Large writes become several
 * records. */
int vol_write(vol *v, uint64_t ino, uint64_t off, const void *p, size_t n);

/* Insert n bytes at `off` <= size, shifting the rest (the papers' insert). */
int vol_insert(vol *v, uint64_t ino, uint64_t off, const void *p, size_t n);

struct vol_span;

/* Per-reader state (a grammar cursor); one thread at a time per reader. */
typedef struct vol_reader {
    idx_cursor cur;
    uint64_t gen;
    struct vol_span *span; /* within vol_read: the span it decoded for this read, held */
} vol_reader;

void vol_reader_init(vol_reader *r);
void vol_reader_free(vol_reader *r);

/* Read up to n bytes of regular file `ino` at `off`: the count (0 at EOF) or an error. */
ssize_t vol_read(vol *v, vol_reader *r, uint64_t ino, uint64_t off, void *dst, size_t n);

/* Whether a change now would be taken at once rather than wait for a running compaction to
 * drain a journal past journal_max (a hint, as vol_read_ready). Thread-safe. */
int vol_change_ready(vol *v);

/* Whether a read of n bytes of `ino` at `off` now would find its bytes at hand, decoding
 * nothing and waiting for no batch: its archived content (if any) in a kept span, or the
 * whole archive loaded and the read one the backend serves on the CPU at once
 * (backend_read_may_queue). A hint for a caller choosing where to run the read.
 * Thread-safe. */
int vol_read_ready(vol *v, uint64_t ino, uint64_t off, size_t n);

/* Count an open handle of `ino` (+1 on open, -1 on release): an inode without names is
 * freed at its last release. */
void vol_ref(vol *v, uint64_t ino, int delta);

/* The state of everything the vol shows, as two numbers that differ for any two states: the
 * archive generation and the count of changes applied since the open. What is computed from
 * the vol (a virtual file's text) can be named by it. Thread-safe. */
void vol_state(vol *v, uint64_t st[2]);

/* XXH3-64 of the archived content when `ino` is unchanged since the archive was written
 * (1 returned, *hash set); 0 for an edited or new file. */
int vol_clean_hash(vol *v, uint64_t ino, uint64_t *hash);

/* ---- extended attributes (names without the "user." prefix) ---- */

int vol_getxattr(vol *v, uint64_t ino, const char *name, buf *out); /* -ENODATA if absent */
int vol_listxattr(vol *v, uint64_t ino, buf *out); /* "name\0" for each, without prefix */
/* flags: XATTR_CREATE / XATTR_REPLACE semantics (1 / 2). */
int vol_setxattr(vol *v, uint64_t ino, const char *name, const void *val, size_t n, int flags);
int vol_removexattr(vol *v, uint64_t ino, const char *name);

/* ---- durability and compaction ---- */

/* fdatasync the journal: every change acknowledged so far survives a system crash (a crash
 * of this process keeps them without it: each is written to the journal file at once). */
int vol_sync(vol *v);

/* A place in the journal (vol_mark) and the changes since it undone (vol_undo): the
 * journal is cut back there, synced. The volume's tree still shows them: vol_close is all
 * that may follow. For a batch that stops midway (tadoc apply). */
typedef struct vol_mark {
    uint64_t end, seq;
} vol_mark;
void vol_mark_get(vol *v, vol_mark *m);
int vol_undo(vol *v, const vol_mark *m);

typedef struct vol_compact_stats {
    uint64_t dirty_files, dirty_bytes, files;
    uint64_t rules_before, rules_after, rules_new;
    uint64_t archive_before, archive_after;
    uint64_t check_files, check_bytes; /* what the check before the rename read back */
    double build_s, write_s, check_s, swap_s;
    double check_read_s; /* of check_s: reading those files back (the rest: open and index) */
    unsigned build_threads; /* that built the new grammar (shard by shard: one or more) */
} vol_compact_stats;

/* Fold the journal into a new archive, whose journal then holds only what was written
 * while the compaction ran. The new archive is written
 * to a temporary file, fsynced, reopened and checked by the reader (every section, the file
 * table against the build, and content against its hash: every file's, or, shard by shard,
 * that of every file not left unchanged in shards copied as stored) and only then renamed
 * over the old one. A
 * failure before the rename removes the temporary file and leaves the old archive, the
 * journal and the vol as they were (still writable); vol_compact_error tells why. Reads and
 * changes go on meanwhile: the build works from a snapshot, and the records written since
 * it go to the new archive's journal; changes wait only while the snapshot is taken and the
 * files are renamed. One compaction runs at a time. An archive with a damaged shard is not
 * compacted (-EBADMSG). */
int vol_compact(vol *v, vol_compact_stats *st);

/* Why the last compaction failed (its message), or "" when it succeeded or none ran. */
void vol_compact_error(vol *v, char *msg, size_t n);

/* Ask the background thread to compact soon (returns at once). */
void vol_compact_async(vol *v);

/* Ask the background thread for a compaction now, whatever the journal's size; one already
 * running answers it. Returns at once: 0, or -EROFS where no thread runs (read-only). The
 * compactions count (vol_info) goes up when it is done; vol_compact_error says why it failed. */
int vol_compact_start(vol *v);

typedef struct vol_info {
    uint64_t journal_bytes, journal_records;
    uint64_t dirty_files; /* regular files whose content differs from the archive */
    uint64_t inodes;
    uint64_t files; /* regular files */
    uint64_t compactions;
    uint64_t archive_bytes;
    uint64_t content_bytes; /* sum of regular file sizes */
    /* Reads served from the shards of their file alone (before a lazy open's load was done,
     * or under vol_opts.mem), the shard spans loaded for them, found kept, and dropped to
     * make room, and the spans kept now and their bytes. */
    uint64_t early_reads, span_loads, span_hits, span_evictions, spans, span_bytes;
    uint64_t span_ahead; /* of the loads: spans read ahead for a reader going in shard order */
    uint64_t span_text;  /* of the loads: text shards as their bytes (arc_open_text) */
    uint64_t span_trims; /* times the memory of dropped spans went back to the system */
    uint64_t budget; /* the budget reads keep their spans within (vol_opts.mem), or 0 */
    /* Under a budget: what spans and analytics shard by shard hold of it now and at most, how
     * many loads waited for room, and how many were let over it (vol_budget). */
    uint64_t budget_used, budget_peak, budget_waits, budget_over;
    int whole; /* the whole archive is loaded (dictionary, grammar, index) */
} vol_info;

void vol_get_info(vol *v, vol_info *in);

/* ---- access to the archive for analytics ---- */

/* The memory budget (vol_opts.mem, or the one mem_auto called for) that reads' spans hold
 * their bytes in, for the analytics shard by shard to share (ana_opts.budget); NULL without
 * one. It lives as long as the volume. */
mbud *vol_budget(vol *v);

/* The archive's rule count: its shards' (the shard table's) for an archive of shards, without
 * loading anything; else the loaded grammar's (waiting for a lazy open's data). 0 or the load's
 * error. */
int vol_rules(vol *v, uint64_t *n);

/* Hold the archive steady: the archive and index returned stay valid until vol_unlock_arc.
 * Changes may go on meanwhile (they do not touch the archive); compaction waits. Waits for a
 * lazy open's data; 0, or its load error (then nothing is held). */
int vol_lock_arc(vol *v, const arc **a, const idx **x);
void vol_unlock_arc(vol *v);

/* Archive entry of directory or file inode `ino` when it and (for a directory) everything
 * below it are unchanged since the archive was written; -1 otherwise. Call between
 * vol_lock_arc and vol_unlock_arc. */
int64_t vol_clean_entry(vol *v, uint64_t ino);

/* A read-only archive showing directory or file `ino` as it is now, for analytics: the
 * archive itself when nothing below `ino` changed since it was written (held steady until
 * vol_view_close), otherwise an in-memory recompression of the current state (changes wait
 * while its snapshot is taken; its cost follows the edited data plus a pass over the grammar).
 * `ent` is the entry of `ino` in it; `x` its index (for a snapshot only when need_idx). A snapshot
 * of an archive with a file in a damaged shard fails (-EBADMSG naming it). Under a memory
 * budget (vol_opts.mem), before anything loaded the whole archive, the view of an unchanged
 * subtree without need_idx is the archive's file table alone (a->pending, no index), to be
 * analysed shard by shard (ana_by_shard), which keeps memory to the shards worked on; that
 * of an edited directory without need_idx, of a version 4 archive, is its subtree compacted
 * shard by shard within the budget into an unlinked temporary archive, whose file table the
 * view owns (own and a->pending: analysed shard by shard, searched span by span). */
typedef struct vol_view {
    uint64_t gen; /* archive generation of a view of the archive itself; for one of an edited
                     directory compacted into a temporary archive, a key of the state it
                     shows (high bit set); 0 for a snapshot in memory */
    const arc *a;
    const idx *x;
    int64_t ent;
    arc *own;
    idx *ownx;
    vol *v;
    struct vol_tview *tv; /* where own is a kept temporary archive's file table */
} vol_view;

int vol_view_open(vol *v, uint64_t ino, int need_idx, vol_view *w);
void vol_view_close(vol_view *w);

/* Drop a reference to a kept temporary archive of an edited directory (vol_view.tv; NULL is
 * allowed): the last frees it. */
void vol_tview_put(struct vol_tview *t);

/* For a view of the file table alone (w->a->pending): the byte offsets of every whole-word
 * occurrence of `word` in each of files[0..n) (entries of w->a), from the word index of the
 * shards that hold the file, built for one span at a time (from the read cache, or for a view
 * that owns its file table, loaded from that alone): a file's shards, or each part of a
 * file cut over shards of its own (arc_entry_parts) in turn. Spans are waited for with none
 * held and hold their estimate of the budget, so memory stays within the budget plus one span's
 * word index and one part's offsets, whatever the file's size. emit(ctx, i, offs) for each
 * file in order that has occurrences, in one call or one per part, offsets ascending. -EAGAIN
 * when the whole archive was loaded meanwhile (the spans are gone: open the view again),
 * -EBADMSG for a file in a damaged shard, or emit's error. */
int vol_view_search(const vol_view *w, const uint32_t *files, size_t n, const char *word, size_t wn,
                    int (*emit)(void *ctx, size_t i, const vec64 *offs), void *ctx);

/* Clean regular file ino's place in the grammar (idx_file_footprint): the rules it uses and
 * its share of the grammar's symbols. Under a memory budget, with the archive not loaded,
 * from each span of the file's shards in turn (as vol_view_search) over the symbols of every
 * shard, counted once per file table from the shard table and the rules sections; else from
 * the archive loaded whole. -ENODATA for a file with edits pending. */
int vol_file_footprint(vol *v, uint64_t ino, uint64_t *rules, double *share);

/* The archive's path. */
const char *vol_path(const vol *v);

#endif
