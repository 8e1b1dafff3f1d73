/* jrnl: the journal beside an archive (`ARCHIVE.journal`), an append-only log of edits.
 *
 * Layout: a 32-byte header (magic "TDCJRNL\0", version, the identity of the archive it
 * extends, XXH3-64 of the header), then records: u32 body length, u32 type, u64 sequence
 * number (1, 2, 3, ... with no gap), the body, and an XXH3-64 of everything before it in the
 * record. Replay stops at the first record whose length, sequence or checksum is wrong: that
 * record and everything after it are dropped (and cut off when opened for writing).
 *
 * Each append is written to the file at once, so a record survives a crash of the process
 * as soon as it is acknowledged, and a system crash after jrnl_sync. A full disk fails the
 * append that needs the space (-ENOSPC), and an append that fails leaves nothing behind that
 * replay would take. Writeback of the appended records is started every few megabytes, so
 * that jrnl_sync after a large write waits only for the last of them.
 *
 * The owner serialises appends; reads and jrnl_size may run concurrently with each other and
 * with an append, and jrnl_sync with all of them, but none with jrnl_next_commit or
 * jrnl_close. */
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
    /* Where those bytes hold an intact record further on (damage, not a torn tail), its
     * offset: a writable open then refuses the journal (cutting would drop that record), a
     * read-only one replays the records before the damage. 0: none. */
    uint64_t intact_at;
    uint64_t stale;   /* bytes of a journal already folded into the archive, discarded */
    /* 1 when a read-only open left the journal unread: its header damaged or another
     * archive's (a writable open refuses it); the archive is read as written. why says it. */
    int unread;
    char why[128]; /* why the tail was dropped, or the journal left unread */
} jrnl_stats;

/* Open the journal at `path` for the archive with identity `id` (compacted from `prev_id`)
 * and replay its records through `fn` in order; a non-zero return from `fn` stops and is
 * returned. A torn or damaged tail is cut off when `writable`, unless an intact record lies
 * after the damage (-EBADMSG, the file left as it is; see jrnl_stats). A missing journal is empty
 * (created when `writable`). A next journal (jrnl_next) bound to `id` is the journal: a compaction
 * stopped between its two renames (it is renamed into place when `writable`, and read where it lies
 * otherwise); a next journal bound to anything else is removed when `writable`. A journal of the
 * archive `prev_id` was folded in by such a compaction: it is discarded (replaced with an empty one
 * when writable). A journal of any other archive, or with a damaged header, is refused with
 * -EBADMSG and a message by a writable open (nothing is changed); a read-only one leaves it
 * unread (jrnl_stats.unread) and reads the archive as written. */
int jrnl_open(const char *path, uint64_t id, uint64_t prev_id, int writable, jrnl_apply_fn fn,
              void *ctx, jrnl_stats *st, jrnl **out);

/* Close (the file synced). */
void jrnl_close(jrnl *j);

/* 1 when a writer holds the journal at `path` (who[n]: that writer, fio_flock_holder): a
 * writable journal's file is locked (flock) for as long as it is open, the next journal that
 * replaces it locked before the rename, so a live writer is found here even when the lock
 * file beside the archive was removed under it. 0 when none does or there is no journal. */
int jrnl_held(const char *path, char *who, size_t n);

/* Append a record whose body is `head` followed by `data`, written to the file at once (a
 * crash of this process keeps it; jrnl_sync makes it survive a system crash); *data_off
 * receives the journal offset where `data` lies. 0, -ENOSPC, -EIO or -ENOMEM; on failure
 * nothing is appended. Needs a writable journal (-EROFS). */
int jrnl_append(jrnl *j, uint32_t type, const void *head, size_t hn, const void *data, size_t dn,
                uint64_t *data_off);

/* Copy n bytes at journal offset `off` (inside appended records) into dst. 0 or -EIO. It
 * reads the file alone, so it may run concurrently with appends (not with
 * jrnl_next_commit). */
int jrnl_read(const jrnl *j, uint64_t off, void *dst, size_t n);

/* Make every record appended so far durable (fdatasync). */
int jrnl_sync(jrnl *j);

/* Journal size (the end of the last record; may be read concurrently with appends, as
 * jrnl_read), and the number of records. */
uint64_t jrnl_size(const jrnl *j);
uint64_t jrnl_records(const jrnl *j);

/* Cut journal j back to `end`, where record `seq` ends (jrnl_size and jrnl_records taken
 * before), synced: the records after it are gone. What replayed them is the caller's to
 * drop. */
int jrnl_cut(jrnl *j, uint64_t end, uint64_t seq);

/* The journal of the archive a compaction is about to put in place: `ARCHIVE.journal.next`,
 * bound to the new archive, receiving the records appended to the current journal since the
 * compaction took its snapshot, renumbered from 1. The records are copied while changes go
 * on (jrnl_next_copy), the last ones with changes held; once synced, the new archive is
 * renamed into place, then the next journal over the journal (jrnl_next_commit). A crash
 * between the two renames leaves a next journal bound to the archive in place, which
 * jrnl_open takes as the journal; one bound to anything else is left from a compaction that
 * never replaced the archive, and is removed. */
typedef struct jrnl_next {
    char *path;
    int fd;
    uint64_t size; /* bytes written */
    uint64_t seq;  /* records copied */
    uint64_t from; /* offset in the current journal of the next record to copy */
    uint64_t seq0; /* sequence number of the last record folded into the new archive */
} jrnl_next;

/* Start the next journal of j for archive `id`, the records after journal offset `from`
 * (the end of a record, whose sequence number is seq0) to be copied. 0 or a negative errno
 * with a message. */
int jrnl_next_begin(const jrnl *j, uint64_t id, uint64_t from, uint64_t seq0, jrnl_next *n);

/* Copy the records of j from n->from to `upto` (a record's end at or below jrnl_size),
 * giving each, as it lies in the next journal, to `fn` (which may fail the copy). Safe
 * concurrently with appends. 0 or a negative errno. */
int jrnl_next_copy(const jrnl *j, jrnl_next *n, uint64_t upto, jrnl_apply_fn fn, void *ctx);

/* Make the next journal durable (fdatasync). */
int jrnl_next_sync(jrnl_next *n);

/* Rename the next journal over j's file and make j append to it (copy every record
 * first). On failure j is unchanged and the next journal stays,
 * for jrnl_open to find. n is finished either way. */
int jrnl_next_commit(jrnl *j, jrnl_next *n);

/* Remove an unfinished next journal (NULL path: nothing). */
void jrnl_next_abort(jrnl_next *n);

#endif
