#include "jrec.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The fields a body may hold. */
enum jrec_field {
    F_END,
    F_INO,
    F_DIR,
    F_DIR2,
    F_SIZE,
    F_OFF,
    F_MODE,
    F_UID,
    F_GID,
    F_FLAGS,
    F_VALID,
    F_TIME,
    F_ATIME,
    F_MTIME,
    F_NAME,
    F_NAME2,
    F_LINK,
    F_RDEV, /* last of its kind's fields, present only when non-zero */
    F_COUNT
};

/* How a field is encoded. */
enum jrec_enc {
    E_U64,  /* varint */
    E_U32,  /* varint of at most 32 bits */
    E_TIME, /* zigzag varint seconds, varint nanoseconds */
    E_STR,  /* varint length, bytes */
};

/* Each field's encoding and place in struct jrec (a string's buffer size bounds it). */
static const struct {
    uint8_t enc;
    size_t at, cap;
} FIELDS[F_COUNT] = {
    [F_INO] = {E_U64, offsetof(jrec, ino), 0},
    [F_DIR] = {E_U64, offsetof(jrec, dir), 0},
    [F_DIR2] = {E_U64, offsetof(jrec, dir2), 0},
    [F_SIZE] = {E_U64, offsetof(jrec, size), 0},
    [F_OFF] = {E_U64, offsetof(jrec, off), 0},
    [F_RDEV] = {E_U64, offsetof(jrec, rdev), 0},
    [F_MODE] = {E_U32, offsetof(jrec, mode), 0},
    [F_UID] = {E_U32, offsetof(jrec, uid), 0},
    [F_GID] = {E_U32, offsetof(jrec, gid), 0},
    [F_FLAGS] = {E_U32, offsetof(jrec, flags), 0},
    [F_VALID] = {E_U32, offsetof(jrec, valid), 0},
    [F_TIME] = {E_TIME, offsetof(jrec, time), 0},
    [F_ATIME] = {E_TIME, offsetof(jrec, atime), 0},
    [F_MTIME] = {E_TIME, offsetof(jrec, mtime), 0},
    [F_NAME] = {E_STR, offsetof(jrec, name), JREC_NAME_MAX + 1},
    [F_NAME2] = {E_STR, offsetof(jrec, name2), JREC_NAME_MAX + 1},
    [F_LINK] = {E_STR, offsetof(jrec, link), PATH_MAX},
};

#define JREC_MAX_FIELDS 10

/* One record kind: its names and its fields in order. */
typedef struct jrec_kind {
    const char *name, *family;
    uint8_t fields[JREC_MAX_FIELDS];
} jrec_kind;

static const jrec_kind KINDS[JR_NTYPES] = {
    [JR_CREATE] = {"create",
                   "create",
                   {F_INO, F_DIR, F_MODE, F_UID, F_GID, F_TIME, F_NAME, F_LINK, F_RDEV}},
    [JR_LINK] = {"link", "link", {F_INO, F_DIR, F_TIME, F_NAME}},
    [JR_UNLINK] = {"unlink", "unlink", {F_DIR, F_TIME, F_NAME}},
    [JR_RENAME] = {"rename", "rename", {F_DIR, F_DIR2, F_FLAGS, F_TIME, F_NAME, F_NAME2}},
    [JR_SETATTR] = {"setattr",
                    "setattr",
                    {F_INO, F_VALID, F_MODE, F_UID, F_GID, F_ATIME, F_MTIME, F_TIME}},
    [JR_TRUNCATE] = {"truncate", "truncate", {F_INO, F_SIZE, F_TIME}},
    [JR_WRITE] = {"write", "write", {F_INO, F_OFF, F_TIME}},
    [JR_INSERT] = {"insert", "write", {F_INO, F_OFF, F_TIME}},
    [JR_SETXATTR] = {"setxattr", "xattr", {F_INO, F_TIME, F_NAME}},
    [JR_RMXATTR] = {"rmxattr", "xattr", {F_INO, F_TIME, F_NAME}},
};

static const jrec_kind *kind_of(uint32_t type)
{
    return type > 0 && type < JR_NTYPES ? &KINDS[type] : NULL;
}

const char *jrec_name(uint32_t type)
{
    const jrec_kind *k = kind_of(type);
    return k ? k->name : "?";
}

const char *jrec_family(uint32_t type)
{
    const jrec_kind *k = kind_of(type);
    return k ? k->family : "?";
}

static int put_time(buf *b, struct timespec t)
{
    return buf_put_varint(b, zig64((uint64_t)t.tv_sec)) || buf_put_varint(b, (uint64_t)t.tv_nsec);
}

static int get_time(rd *r, struct timespec *t)
{
    uint64_t zz, ns;
    if (rd_varint(r, &zz) || rd_varint(r, &ns) || ns >= 1000000000u) return -1;
    t->tv_sec = (time_t)(int64_t)unzig64(zz);
    t->tv_nsec = (long)ns;
    return 0;
}

/* A string into a NUL-terminated buffer of `cap` bytes; no NUL inside. */
static int get_str(rd *r, char *out, size_t cap)
{
    uint64_t n;
    const unsigned char *p;
    if (rd_varint(r, &n) || n >= cap || rd_bytes(r, n, &p) || memchr(p, 0, n)) return -1;
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
}

static int get_u32(rd *r, uint32_t *x)
{
    uint64_t y;
    if (rd_varint(r, &y) || y > UINT32_MAX) return -1;
    *x = (uint32_t)y;
    return 0;
}

/* Append one field: 0, -ENOMEM or -EINVAL (a string that does not fit its field). */
static int put_field(buf *b, const jrec *r, int f)
{
    const void *x = (const char *)r + FIELDS[f].at;
    switch (FIELDS[f].enc) {
    case E_U64:
        if (f == F_RDEV && !r->rdev) return 0;
        return buf_put_varint(b, *(const uint64_t *)x) ? -ENOMEM : 0;
    case E_U32:
        return buf_put_varint(b, *(const uint32_t *)x) ? -ENOMEM : 0;
    case E_TIME:
        return put_time(b, *(const struct timespec *)x) ? -ENOMEM : 0;
    }
    size_t n = strnlen(x, FIELDS[f].cap);
    if (n >= FIELDS[f].cap) return -EINVAL;
    return buf_put_str(b, x, n);
}

/* Read one field: 0, or -1 when malformed. */
static int get_field(rd *in, jrec *r, int f)
{
    void *x = (char *)r + FIELDS[f].at;
    switch (FIELDS[f].enc) {
    case E_U64:
        if (f == F_RDEV && in->p == in->end) return 0;
        return rd_varint(in, x) ? -1 : 0;
    case E_U32:
        return get_u32(in, x);
    case E_TIME:
        return get_time(in, x);
    }
    return get_str(in, x, FIELDS[f].cap);
}

int jrec_encode(const jrec *r, buf *b)
{
    const jrec_kind *k = kind_of(r->type);
    if (!k) return -EINVAL;
    for (int i = 0; i < JREC_MAX_FIELDS && k->fields[i] != F_END; i++) {
        int rc = put_field(b, r, k->fields[i]);
        if (rc) return rc;
    }
    if (r->ntail && buf_put(b, r->tail, r->ntail)) return -ENOMEM;
    return 0;
}

int jrec_decode(uint32_t type, const unsigned char *p, size_t n, jrec *r)
{
    const jrec_kind *k = kind_of(type);
    rd in = {p, p + n};
    memset(r, 0, offsetof(jrec, name));
    r->name[0] = r->name2[0] = r->link[0] = 0;
    r->type = type;
    if (!k) return -EBADMSG;
    for (int i = 0; i < JREC_MAX_FIELDS && k->fields[i] != F_END; i++)
        if (get_field(&in, r, k->fields[i])) return -EBADMSG;
    r->head = (size_t)(in.p - p);
    r->tail = in.p;
    r->ntail = (size_t)(in.end - in.p);
    return 0;
}
