/* tadoc.h: the public C API of libtadoc, read access to tadocfs archives (.tdc).
 *
 * An archive holds a tree of files compressed as one grammar (a dictionary of tokens and a
 * DAG of rules). This API opens one, lists and stats its entries, reads any byte range of a
 * file straight from the grammar, runs the six text analytics on the grammar and answers
 * whole-word count and search queries, all without expanding whole files.
 *
 * What the API shows is the archive as last written: edits still held in ARCHIVE.journal
 * (from a writable mount or `tadoc apply`) are not applied; `tadoc compact` folds them in.
 *
 * Conventions:
 * - Functions return 0 (or a count) on success and a negative errno value on failure:
 *   -ENOENT (no such archive or path), -EACCES, -EIO, -ENOMEM, -EINVAL (bad argument, e.g.
 *   reading something that is not a regular file), -EISDIR, and -EBADMSG when the archive is
 *   corrupt. tadoc_errmsg() then describes the failure of the calling thread.
 * - Handles are opaque. A tadoc_archive may be used by any number of threads at once.
 * - Paths inside the archive are relative and '/'-separated ("dir/file.txt"); leading
 *   slashes are ignored, and "" (or "/") names the root directory.
 * - Memory returned through `char **` or `uint64_t **` is malloc'ed; release it with
 *   tadoc_free().
 *
 * Link with `pkg-config --cflags --libs tadoc`. */
#ifndef TADOC_H
#define TADOC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this API: bumped only by additions; existing calls keep their meaning. */
#define TADOC_API_VERSION 1

/* The library's version string ("0.1.0"). */
const char *tadoc_version(void);

/* Description of the calling thread's last failure; never NULL. */
const char *tadoc_errmsg(void);

/* Release memory returned by this API. NULL is allowed. */
void tadoc_free(void *p);

typedef struct tadoc_archive tadoc_archive;

/* Open `path`, verify every checksum and build the random-access index. On success *out
 * is the handle; on failure *out is NULL and the result is negative. */
int tadoc_open(const char *path, tadoc_archive **out);

/* Close the handle and release everything it holds. NULL is allowed. */
void tadoc_close(tadoc_archive *a);

/* Entry types (the values never change). */
enum tadoc_type {
    TADOC_REG = 1,  /* regular file */
    TADOC_DIR = 2,  /* directory */
    TADOC_LNK = 3,  /* symbolic link */
    TADOC_FIFO = 4, /* named pipe */
    TADOC_SOCK = 5, /* socket */
    TADOC_CHR = 6,  /* character device */
    TADOC_BLK = 7,  /* block device */
};

/* What the archive records about one entry. `path` and `link` point into the archive and
 * stay valid until tadoc_close. */
typedef struct tadoc_stat {
    const char *path; /* "" for the root directory */
    const char *link; /* a symlink's target, else NULL */
    int type;         /* enum tadoc_type */
    uint32_t mode;    /* permission bits (07777) */
    uint32_t uid, gid;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t size;  /* content bytes of a file; a symlink's target length */
    uint64_t ino;   /* inode number; hard links share one */
    uint64_t rdev;  /* device number of a device, else 0 */
    uint32_t nlink; /* names that share the inode (1 for directories) */
} tadoc_stat;

/* Number of entries, the root directory (entry 0) included. Entries are in path order with
 * every directory directly followed by its descendants. */
size_t tadoc_entry_count(const tadoc_archive *a);

/* Facts of entry `i` (0 <= i < tadoc_entry_count). 0 or -EINVAL. */
int tadoc_entry(const tadoc_archive *a, size_t i, tadoc_stat *st);

/* Facts of the entry named `path`. 0 or -ENOENT. */
int tadoc_stat_path(const tadoc_archive *a, const char *path, tadoc_stat *st);

/* Read up to `n` bytes of the regular file `path` starting at byte `off` into `dst`.
 * Returns the number of bytes read (0 at or past the end of the file) or a negative errno
 * (-ENOENT, -EISDIR for a non-file, -EBADMSG for a file in a damaged shard of the archive).
 * Only the rules on the way to `off` are visited. */
ssize_t tadoc_read(const tadoc_archive *a, const char *path, uint64_t off, void *dst, size_t n);

/* The analytics of DESIGN.md section 5, computed on the grammar. */
enum tadoc_analytic {
    TADOC_WORDCOUNT = 1,      /* count<TAB>word, count descending, then word */
    TADOC_SORT = 2,           /* word<TAB>count, by word */
    TADOC_INVINDEX = 3,       /* word<TAB>path<TAB>path..., by word */
    TADOC_TERMVECTOR = 4,     /* path<TAB>count<TAB>word per file */
    TADOC_SEQCOUNT = 5,       /* count<TAB>w1 w2 w3 */
    TADOC_RANKEDINVINDEX = 6, /* w1 w2 w3<TAB>path:count<TAB>... */
};

/* Run `analytic` over `scope` (a directory or file path; NULL or "" for the whole archive)
 * and return its text output (lines ending in '\n', exactly what `tadoc ANALYTIC ARCHIVE
 * SCOPE` prints) in *out, *len bytes plus a terminating NUL (not counted). Free *out with
 * tadoc_free. 0 or a negative errno (-ENOENT for a missing scope, -EINVAL for an unknown
 * analytic, -EBADMSG when a file of the scope lies in a damaged shard). */
int tadoc_analytic(tadoc_archive *a, int analytic, const char *scope, char **out, size_t *len);

/* Number of whole-word occurrences of `word` in the regular file `path`. A word cut as by
 * `tr -cs 'A-Za-z0-9_\200-\377' '\n'`; one never seen in the archive occurs 0 times. */
int tadoc_count(tadoc_archive *a, const char *path, const char *word, uint64_t *count);

/* Byte offsets of every whole-word occurrence of `word` in `path`, ascending: *offsets (free
 * with tadoc_free; NULL when there are none) and *n. */
int tadoc_search(tadoc_archive *a, const char *path, const char *word, uint64_t **offsets,
                 size_t *n);

#ifdef __cplusplus
}
#endif

#endif
