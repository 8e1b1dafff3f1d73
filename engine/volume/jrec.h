/* jrec: the bodies of journal records, declared once. One table lists, for every record kind
 * (enum jrnl_type), the fields of its body in order; jrec_encode and jrec_decode follow it, so
 * the volume that writes records, the replay that reads them (and `tadoc verify` through it)
 * and the test tools that build damaged journals agree by construction.
 *
 * Field encodings: integers are LEB128 varints; a time is the zigzag varint of its seconds and
 * the varint of its nanoseconds (below 10^9); a string is the varint of its length and its
 * bytes (no NUL). Whatever follows the fields is the record's tail: the data of WRITE and
 * INSERT, the value of SETXATTR, and CREATE's optional device number (present only when
 * non-zero). See docs/FORMAT.md for the field list of each kind.
 *
 * Pure functions of their arguments; thread-safe. */
#ifndef TDC_JREC_H
#define TDC_JREC_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../base/buf.h"
#include "jrnl.h"

#define JREC_NAME_MAX 255 /* longest name (bytes) a record may carry */

/* The fields of any record kind; each kind uses the ones its table row names. Strings are
 * NUL-terminated; after jrec_decode they live in the struct's own buffers. */
typedef struct jrec {
    uint32_t type;           /* enum jrnl_type */
    uint64_t ino;            /* CREATE, LINK, SETATTR, TRUNCATE, WRITE, INSERT, *XATTR */
    uint64_t dir;            /* CREATE, LINK (the parent); UNLINK, RENAME (the source) */
    uint64_t dir2;           /* RENAME: the target directory */
    uint64_t size;           /* TRUNCATE: the new size */
    uint64_t off;            /* WRITE, INSERT: the file offset */
    uint64_t rdev;           /* CREATE: the device number, 0 for none */
    uint32_t mode, uid, gid; /* CREATE, SETATTR */
    uint32_t flags;          /* RENAME: VOL_RENAME_* */
    uint32_t valid;          /* SETATTR: VOL_SET_* bits */
    struct timespec time;    /* every kind: when the change was made */
    struct timespec atime, mtime; /* SETATTR */
    char name[JREC_NAME_MAX + 1]; /* CREATE, LINK, UNLINK, RENAME (source), *XATTR */
    char name2[JREC_NAME_MAX + 1]; /* RENAME: the target name */
    char link[PATH_MAX];          /* CREATE: the symlink target, "" for none */
    /* The tail: on encode, bytes appended after the fields (NULL when the caller passes them
     * to jrnl_append separately); on decode, the bytes after the fields in the buffer. */
    const unsigned char *tail;
    size_t ntail;
    size_t head; /* on decode: the bytes the fields took */
} jrec;

/* The kind's name as tools print it ("create", ... "rmxattr"), or "?" for an unknown type. */
const char *jrec_name(uint32_t type);

/* The name of the kind's family in replay errors ("write" for WRITE and INSERT, "xattr" for
 * SETXATTR and RMXATTR, else the kind's name). */
const char *jrec_family(uint32_t type);

/* Append r's fields for kind r->type, then r->tail, to b. 0, or -ENOMEM (b may hold part of
 * the record), or -EINVAL for an unknown type or a string too long for its field. */
int jrec_encode(const jrec *r, buf *b);

/* Read the fields of kind `type` from p[0..n) into *r (tail, ntail and head set as above).
 * 0, or -EBADMSG when the fields are malformed or cut short (no message set: the caller says
 * which record). */
int jrec_decode(uint32_t type, const unsigned char *p, size_t n, jrec *r);

#endif
