/* arc: the .tdc archive file.
 *
 * Layout: a 40-byte header (magic "TADOCFS\0", version, flags, section-table offset, section
 * count, header checksum), the sections, then the section table (40 bytes per section and an
 * XXH3-64 of the table). Each section records its type, codec (raw or zstd), offset, stored
 * and raw lengths and the XXH3-64 of its stored bytes, checked before it is decoded.
 *
 * An opened archive is read-only and may be shared by any number of threads. */
#ifndef TDC_ARC_H
#define TDC_ARC_H

#include <stdint.h>

#include "dict.h"
#include "gram.h"

/* Version 2 added inode numbers (shared by hard links), user xattrs and the archive ids the
 * journal binds to; version 1 archives are still read (inode = entry index + 1). */
#define ARC_VERSION 2

enum arc_type { ARC_REG = 1, ARC_DIR = 2, ARC_LNK = 3 };

enum arc_section {
    ARC_SEC_DICT = 1,
    ARC_SEC_RULES = 2,
    ARC_SEC_ROOT = 3,
    ARC_SEC_FILES = 4,
};

/* One extended attribute (name without the "user." prefix, value of any bytes). */
typedef struct arc_xattr {
    char *name;
    unsigned char *val;
    uint32_t len;
} arc_xattr;

/* One file-table entry. Entry 0 is the root directory with path "". Paths are relative,
 * '/'-separated, with no empty, "." or ".." components, and sorted by arc_path_cmp.
 * Hard links are entries that share `ino`: only the first of them (in path order) holds the
 * content (root run); the others are regular files with root_len 0 and the same size, hash,
 * mode, owner and time. Inode 1 is the root directory. */
typedef struct arc_entry {
    char *path;
    char *link; /* symlink target, or NULL */
    uint8_t type;
    uint32_t mode; /* permission bits only (07777) */
    uint32_t uid, gid;
    int64_t mtime_sec;
    uint32_t mtime_nsec;
    uint64_t size; /* bytes of content; a directory's st_size; a symlink's target length */
    uint64_t root_start, root_len; /* the file's run of root symbols */
    uint64_t hash;                 /* XXH3-64 of the content */
    uint64_t ino;                  /* inode number, >= 1, below ARC_INO_MAX */
    arc_xattr *xattrs;             /* user.* attributes, sorted by name */
    uint32_t nxattrs;
} arc_entry;

#define ARC_INO_MAX ((uint64_t)1 << 60)

typedef struct arc_secinfo {
    uint32_t type, codec;
    uint64_t offset, stored, raw, hash;
} arc_secinfo;

typedef struct arc {
    dict *dict;
    gram g;
    arc_entry *ents;
    uint32_t nents;
    arc_secinfo secs[8];
    uint32_t nsecs;
    uint64_t file_size;
    uint64_t id;       /* random identity of this archive (journals name the one they extend) */
    uint64_t prev_id;  /* identity of the archive this one was compacted from, or 0 */
    uint64_t next_ino; /* above every inode number in use */
    uint32_t *byino;   /* entry indices ordered by (ino, index), from arc_open */
    uint32_t version;  /* format version read (arc_open*) */
    char *path;        /* as opened (arc_open*) */
    int pending;       /* 1 between arc_open_meta and arc_load_data: dict and g are empty */
    int fd;            /* the open archive while pending */
} arc;

/* A fresh random archive identity (never 0). */
uint64_t arc_new_id(void);

/* Complete an archive assembled in memory (entries with inode numbers, dictionary, grammar)
 * as arc_open would: check the grammar and record its topological order, index inodes.
 * 0, -EBADMSG or -ENOMEM. */
int arc_finish(arc *a);

/* Index of the entry that holds the content of inode `ino` (the first with that number),
 * or -ENOENT. Built on open; O(log n). */
int64_t arc_ino_entry(const arc *a, uint64_t ino);

/* Human name of a section type ("dictionary", "rules", ...). */
const char *arc_section_name(uint32_t type);

/* Compare paths so that a directory's descendants follow it directly ('/' sorts first). */
int arc_path_cmp(const char *a, const char *b);

/* 0 if `path` is a valid relative archive path, else -EINVAL with a message. */
int arc_path_check(const char *path);

/* Write the archive atomically: a temporary file beside `path`, fsync, rename, fsync of the
 * directory. `level` is the zstd level of the sections. Fills a->secs and a->file_size.
 * Entries with ino 0 get entry index + 1; a->id 0 gets a new identity; next_ino is computed. */
int arc_write(const char *path, arc *a, int level);

/* Open, verify every checksum, decode and validate an archive. On failure returns -EBADMSG
 * (corrupt), -ENOENT/-EACCES/-EIO (cannot read) or -ENOMEM, with a message naming the part. */
int arc_open(const char *path, arc **out);

/* The first half of arc_open: the header, the section table and the file table, verified
 * and decoded; the dictionary, rules and root (the bulk of the archive) are left on disk, so
 * a->dict is NULL and a->g empty until arc_load_data. The archive's file stays open (a
 * rename over it does not change what is loaded later). Errors as arc_open. */
int arc_open_meta(const char *path, arc **out);

/* The second half: read, verify and decode the dictionary (on a second thread), the rules
 * (checking the graph is acyclic) and the root, and check every file's run against the root.
 * 0 at once if already loaded. On failure the archive stays as arc_open_meta left it and the
 * message names the archive and the part. Nothing may read a->dict or a->g during the call. */
int arc_load_data(arc *a);

/* Free what an entry owns (path, link, xattrs) and zero it. */
void arc_entry_clear(arc_entry *e);

/* Free an archive from arc_open, or one assembled by a writer (frees dict, gram, entries). */
void arc_free(arc *a);

/* Index of the entry with this path, or -ENOENT. */
int64_t arc_lookup(const arc *a, const char *path);

#endif
