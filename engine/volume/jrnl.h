/* jrnl: the journal beside an archive (`ARCHIVE.journal`), an append-only log of edits.
 *
 * Layout: a 32-byte header (magic "TDCJRNL\0", version, the identity of the archive it
 * extends, XXH3-64 of the header), then records: u32 body length, u32 type, u64 sequence
 * number (1, 2, 3, ... with no gap), the body, and an XXH3-64 of everything before it in the
 * record. Replay stops at the first record whose length, sequence or checksum is wrong: that
 * record and everything after it are dropped (and cut off when opened for writing).
 *
 * Appends are collected in memory and written in batches (jrnl_flush), so a record is on
 * disk only after a flush and durable only after jrnl_sync. Space for buffered records is
 * reserved ahead with fallocate, so a full disk fails the append that would need the space
 * (-ENOSPC) instead of a later flush; where fallocate is unsupported every append is written
 * at once.
 *
 * Not thread-safe: the owner serialises appends, flushes and reads (reads may run
 * concurrently with each other but not with an append or flush). jrnl_sync may run
 * concurrently with appends, flushes and reads, but not with jrnl_reset or jrnl_close. */
#ifndef TDC_JRNL_H
#define TDC_JRNL_H

#include <stddef.h>
#include <stdint.h>

#include "../base/buf.h"

enum jrnl_type {
    JR_CREATE = 1, /* a new file, directory or symlink */
    JR_LINK,       /* a new name for an inode */
    JR_UNLINK,     /* remove a name (file or empty directory) */
    JR_RENAME,
    JR_SETATTR,  /* mode, owner, times */
    JR_TRUNCATE, /* set the size */
    JR_WRITE,    /* overwrite (or extend) at an offset */
    JR_INSERT,   /* insert bytes at an offset, shifting the rest */
    JR_SETXATTR,
    JR_RMXATTR,
    JR_NTYPES
};

/* The header: field offsets. */
#define JRNL_HDR 32         /* header size */
#define JRNL_HDR_MAGIC 0    /* 8 bytes, "TDCJRNL\0" */
#define JRNL_HDR_VERSION 8  /* u32; bytes 12..15 are zero */
#define JRNL_HDR_ID 16      /* u64: identity of the archive the journal extends */
#define JRNL_HDR_SUM 24     /* u64: XXH3-64 of the bytes before it */
#define JRNL_VERSION 1

/* A record's frame: field offsets from the record's start; the u64 XXH3-64 of the frame and
 * body follows the body. */
#define JRNL_REC_LEN 0               /* u32: body length */
#define JRNL_REC_TYPE 4              /* u32: enum jrnl_type */
#define JRNL_REC_SEQ 8               /* u64: sequence number */
#define JRNL_REC_BODY 16             /* the body */
#define JRNL_REC_OVERHEAD 24         /* length, type, sequence, checksum */
#define JRNL_MAX_BODY (64u << 20)    /* longer bodies are corruption */
#define JRNL_BATCH ((size_t)1 << 20) /* buffered bytes that trigger a write */

typedef struct jrnl jrnl;

/* Fill a header for archive `id` (checksum included). */
void jrnl_header_encode(unsigned char h[JRNL_HDR], uint64_t id);

/* Recompute the checksum of a header whose fields were changed in place. */
void jrnl_header_seal(unsigned char h[JRNL_HDR]);

/* 0 and the archive identity in *id when h is an intact header of this version, else -1. */
int jrnl_header_decode(const unsigned char h[JRNL_HDR], uint64_t *id);

/* Append one record (frame, body `head` then `data`, checksum) to b. 0 or -ENOMEM. */
int jrnl_rec_encode(buf *b, uint32_t type, uint64_t seq, const void *head, size_t hn,
                    const void *data, size_t dn);

/* Recompute the checksum of the record at `rec` (whose length field is right) after its
 * frame or body was changed in place. */
void jrnl_rec_seal(unsigned char *rec);

/* One replayed record; `body` is valid during the callback only. `off` is the journal file
 * offset of the body, so data inside it can be read back later with jrnl_read. */
typedef struct jrnl_rec {
    uint32_t type, len;
    uint64_t seq, off;
    const unsigned char *body;
} jrnl_rec;

typedef int (*jrnl_apply_fn)(void *ctx, const jrnl_rec *r);

typedef struct jrnl_stats {
    uint64_t records; /* records replayed */
    uint64_t dropped; /* bytes after the last good record (torn or corrupt tail) */
    uint64_t stale;   /* bytes of a journal already folded into the archive, discarded */
    char why[128];    /* why the tail was dropped */
} jrnl_stats;

/* Open the journal at `path` for the archive with identity `id` (compacted from `prev_id`)
 * and replay its records through `fn` in order; a non-zero return from `fn` stops and is
 * returned. A missing journal is empty (created when `writable`). A journal of the archive
 * `prev_id` was folded in by a compaction that did not get to reset it: it is discarded
 * (replaced with an empty one when writable). A journal of any other archive, or with a
 * damaged header, is refused with -EBADMSG and a message; nothing is changed. When
 * `writable`, a dropped tail is cut off so new records follow the last good one. */
int jrnl_open(const char *path, uint64_t id, uint64_t prev_id, int writable, jrnl_apply_fn fn,
              void *ctx, jrnl_stats *st, jrnl **out);

/* Flush (best effort) and close. */
void jrnl_close(jrnl *j);

/* Append a record whose body is `head` followed by `data`; *data_off receives the journal
 * offset where `data` will lie. Writes the batch out when it passes JRNL_BATCH. 0, -ENOSPC,
 * -EIO or -ENOMEM; on failure nothing is appended. Needs a writable journal (-EROFS). */
int jrnl_append(jrnl *j, uint32_t type, const void *head, size_t hn, const void *data, size_t dn,
                uint64_t *data_off);

/* Copy n bytes at journal offset `off` (inside appended records) into dst. 0 or -EIO. */
int jrnl_read(jrnl *j, uint64_t off, void *dst, size_t n);

/* Write buffered records to the file. 0 or a negative errno (sticky: later flushes and syncs
 * fail too, since acknowledged records could not be written). */
int jrnl_flush(jrnl *j);

/* Buffered bytes not yet written. */
size_t jrnl_pending(const jrnl *j);

/* Make everything flushed so far durable (fdatasync). */
int jrnl_sync(jrnl *j);

/* Journal size including buffered records, and the number of records. */
uint64_t jrnl_size(const jrnl *j);
uint64_t jrnl_records(const jrnl *j);

/* Replace the journal with an empty one bound to archive `id`, atomically (temporary file,
 * fsync, rename, directory fsync). Buffered records are discarded: call after their effects
 * are safely elsewhere. 0 or a negative errno (the old journal stays in place). */
int jrnl_reset(jrnl *j, uint64_t id);

#endif
