#include "ftcols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"

/* The streams, in the order they are stored (docs/FORMAT.md, codec zstd-cols). */
enum {
    C_PRE,   /* varint: bytes the path shares with the previous entry's */
    C_SUF,   /* varint length, then the rest of the path */
    C_TYPE,  /* one byte per entry */
    C_MODE,  /* varint */
    C_OWNER, /* varint uid, varint gid */
    C_MTIME, /* varint zigzag: seconds after the previous entry's */
    C_NSEC,  /* varint */
    C_SIZE,  /* varint */
    C_SHARD, /* varint zigzag: after the previous entry's shard */
    C_START, /* varint zigzag: root_start after the predicted start */
    C_LEN,   /* varint root_len */
    C_HASH,  /* 8 bytes */
    C_LINK,  /* varint length, then the link target */
    C_INO,   /* varint zigzag: ino after the previous entry's ino + 1 */
    C_EXTRA, /* rdev (devices), the xattr count and the xattrs, as the row has them */
    NCOLS
};

#define T_REG 1
#define T_CHR 6
#define T_BLK 7

/* Rows' bytes per byte of columns that ftcols_decode reserves for at most (front-coded paths
 * come back whole). */
#define ROWS_PER_COL_BYTE 8

/* What the entries before tell about the next one, on both sides. Differences wrap modulo
 * 2^64, so every value has a code. */
typedef struct state {
    uint64_t mtime; /* the previous entry's mtime_sec, as the signed value's bits */
    uint64_t shard, ino;
    uint64_t end, end_shard; /* where the last regular file's run ended, in which shard */
} state;

/* The start predicted for a regular file: where the previous run of its shard ended. */
static uint64_t start_guess(const state *s, unsigned type, uint64_t shard)
{
    return type == T_REG && shard == s->end_shard ? s->end : 0;
}

static void state_after(state *s, unsigned type, uint64_t shard, uint64_t start, uint64_t len)
{
    if (type == T_REG && len) {
        s->end = start + len;
        s->end_shard = shard;
    }
}

/* The tail of a row that goes to C_EXTRA whole: rdev for a device, the xattrs, and from
 * version 5 the four differences of the change and access times from mtime. */
static int skip_extra(rd *r, unsigned type, uint32_t version)
{
    uint64_t x, nx, len;
    const unsigned char *p;
    if ((type == T_CHR || type == T_BLK) && rd_varint(r, &x)) return -1;
    if (rd_varint(r, &nx) || nx > (uint64_t)(r->end - r->p)) return -1;
    for (uint64_t k = 0; k < nx; k++)
        if (rd_varint(r, &len) || rd_bytes(r, len, &p) || rd_varint(r, &len) ||
            rd_bytes(r, len, &p))
            return -1;
    for (int k = 0; version >= 5 && k < 4; k++)
        if (rd_varint(r, &x)) return -1;
    return 0;
}

/* One row's fields into the columns; -EBADMSG when it does not parse. */
static int encode_row(rd *r, buf *c, state *s, const unsigned char **prev, uint64_t *prev_n,
                      uint32_t version)
{
    uint64_t n, mode, uid, gid, zz, nsec, size, shard, start, len, ino;
    const unsigned char *path, *t, *hash, *link, *extra;
    if (rd_varint(r, &n) || rd_bytes(r, n, &path) || rd_bytes(r, 1, &t) || rd_varint(r, &mode) ||
        rd_varint(r, &uid) || rd_varint(r, &gid) || rd_varint(r, &zz) || rd_varint(r, &nsec) ||
        rd_varint(r, &size) || rd_varint(r, &shard) || rd_varint(r, &start) || rd_varint(r, &len) ||
        rd_bytes(r, 8, &hash))
        return -EBADMSG;
    uint64_t ln;
    if (rd_varint(r, &ln) || rd_bytes(r, ln, &link) || rd_varint(r, &ino)) return -EBADMSG;
    extra = r->p;
    if (skip_extra(r, *t, version)) return -EBADMSG;
    uint64_t pre = 0;
    while (pre < n && pre < *prev_n && path[pre] == (*prev)[pre])
        pre++;
    uint64_t mtime = unzig64(zz);
    int rc =
        buf_put_varint(&c[C_PRE], pre) || buf_put_str(&c[C_SUF], path + pre, n - pre) ||
        buf_put(&c[C_TYPE], t, 1) || buf_put_varint(&c[C_MODE], mode) ||
        buf_put_varint(&c[C_OWNER], uid) || buf_put_varint(&c[C_OWNER], gid) ||
        buf_put_varint(&c[C_MTIME], zig64(mtime - s->mtime)) || buf_put_varint(&c[C_NSEC], nsec) ||
        buf_put_varint(&c[C_SIZE], size) || buf_put_varint(&c[C_SHARD], zig64(shard - s->shard)) ||
        buf_put_varint(&c[C_START], zig64(start - start_guess(s, *t, shard))) ||
        buf_put_varint(&c[C_LEN], len) || buf_put(&c[C_HASH], hash, 8) ||
        buf_put_str(&c[C_LINK], link, ln) || buf_put_varint(&c[C_INO], zig64(ino - s->ino - 1)) ||
        buf_put(&c[C_EXTRA], extra, (size_t)(r->p - extra));
    if (rc) return -ENOMEM;
    s->mtime = mtime;
    s->shard = shard;
    s->ino = ino;
    state_after(s, *t, shard, start, len);
    *prev = path;
    *prev_n = n;
    return 0;
}

/* The header of the rows: identity, previous identity, next inode, entry count. */
static int header(rd *r, uint64_t *id, uint64_t *prev, uint64_t *next, uint64_t *count)
{
    return rd_u64(r, id) || rd_u64(r, prev) || rd_varint(r, next) || rd_varint(r, count) ? -1 : 0;
}

static int put_header(buf *b, uint64_t id, uint64_t prev, uint64_t next, uint64_t count)
{
    return buf_put_u64(b, id) || buf_put_u64(b, prev) || buf_put_varint(b, next) ||
                   buf_put_varint(b, count)
               ? -ENOMEM
               : 0;
}

int ftcols_encode(const unsigned char *p, size_t n, uint32_t version, buf *out)
{
    rd r = {p, p + n};
    uint64_t id, prev_id, next, count;
    if (header(&r, &id, &prev_id, &next, &count) || count > n)
        return tdc_error(-EBADMSG, "file table: bad header");
    buf c[NCOLS] = {{0}};
    state s = {0};
    const unsigned char *prev = NULL;
    uint64_t prev_n = 0;
    int rc = 0;
    for (uint64_t i = 0; i < count && !rc; i++)
        rc = encode_row(&r, c, &s, &prev, &prev_n, version);
    if (rc == -EBADMSG || (!rc && r.p != r.end))
        rc = tdc_error(-EBADMSG, "file table: rows that cannot be coded in columns");
    if (!rc) rc = put_header(out, id, prev_id, next, count);
    for (int k = 0; k < NCOLS && !rc; k++)
        if (buf_put_varint(out, c[k].n)) rc = -ENOMEM;
    for (int k = 0; k < NCOLS && !rc; k++)
        if (buf_put(out, c[k].p, c[k].n)) rc = -ENOMEM;
    for (int k = 0; k < NCOLS; k++)
        buf_free(&c[k]);
    return rc;
}

/* Put one row back from the columns at c; -1 when they do not hold one, -ENOMEM. */
static int decode_row(rd *c, buf *o, state *s, size_t *prev_at, uint64_t *prev_n, uint32_t version)
{
    uint64_t pre, n, mode, uid, gid, dm, nsec, size, dsh, dst, len, ln, dino;
    const unsigned char *suf, *t, *hash, *link, *extra;
    if (rd_varint(&c[C_PRE], &pre) || pre > *prev_n || rd_varint(&c[C_SUF], &n) ||
        rd_bytes(&c[C_SUF], n, &suf) || rd_bytes(&c[C_TYPE], 1, &t) ||
        rd_varint(&c[C_MODE], &mode) || rd_varint(&c[C_OWNER], &uid) ||
        rd_varint(&c[C_OWNER], &gid) || rd_varint(&c[C_MTIME], &dm) ||
        rd_varint(&c[C_NSEC], &nsec) || rd_varint(&c[C_SIZE], &size) ||
        rd_varint(&c[C_SHARD], &dsh) || rd_varint(&c[C_START], &dst) ||
        rd_varint(&c[C_LEN], &len) || rd_bytes(&c[C_HASH], 8, &hash) ||
        rd_varint(&c[C_LINK], &ln) || rd_bytes(&c[C_LINK], ln, &link) ||
        rd_varint(&c[C_INO], &dino))
        return -1;
    extra = c[C_EXTRA].p;
    if (skip_extra(&c[C_EXTRA], *t, version)) return -1;
    size_t nextra = (size_t)(c[C_EXTRA].p - extra);
    uint64_t mtime = s->mtime + unzig64(dm), shard = s->shard + unzig64(dsh);
    uint64_t start = start_guess(s, *t, shard) + unzig64(dst), ino = s->ino + 1 + unzig64(dino);
    /* The shared prefix comes from the previous path in o itself: room first, so it does
     * not move while it is copied. */
    if (buf_reserve(o, 10 + pre + n)) return -ENOMEM;
    if (buf_put_varint(o, pre + n)) return -ENOMEM;
    size_t at = o->n;
    memcpy(o->p + o->n, o->p + *prev_at, pre);
    o->n += pre;
    if (buf_put(o, suf, n) || buf_put(o, t, 1) || buf_put_varint(o, mode) ||
        buf_put_varint(o, uid) || buf_put_varint(o, gid) || buf_put_varint(o, zig64(mtime)) ||
        buf_put_varint(o, nsec) || buf_put_varint(o, size) || buf_put_varint(o, shard) ||
        buf_put_varint(o, start) || buf_put_varint(o, len) || buf_put(o, hash, 8) ||
        buf_put_str(o, link, ln) || buf_put_varint(o, ino) || buf_put(o, extra, nextra))
        return -ENOMEM;
    s->mtime = mtime;
    s->shard = shard;
    s->ino = ino;
    state_after(s, *t, shard, start, len);
    *prev_at = at;
    *prev_n = pre + n;
    return 0;
}

int ftcols_decode(const unsigned char *p, size_t n, uint64_t want, uint32_t version,
                  unsigned char **out)
{
    *out = NULL;
    rd r = {p, p + n};
    uint64_t id, prev_id, next, count, len[NCOLS], total = 0;
    if (header(&r, &id, &prev_id, &next, &count))
        return tdc_error(-EBADMSG, "file table: bad column header");
    for (int k = 0; k < NCOLS; k++) {
        if (rd_varint(&r, &len[k]) || len[k] > n)
            return tdc_error(-EBADMSG, "file table: bad column length");
        total += len[k];
    }
    /* one type byte per entry: the count cannot drive the loop past the data */
    if (total != (uint64_t)(r.end - r.p) || len[C_TYPE] != count)
        return tdc_error(-EBADMSG, "file table: columns do not match their lengths");
    rd c[NCOLS];
    for (int k = 0; k < NCOLS; k++) {
        c[k] = (rd){r.p, r.p + len[k]};
        r.p += len[k];
    }
    buf o = {0};
    state s = {0};
    size_t prev_at = 0;
    uint64_t prev_n = 0;
    /* The rows' declared size at once, rather than doubling up to it (each doubling copies
     * what came before and touches fresh memory), as far as the columns can plausibly make:
     * a declared size out of proportion to them grows as the rows come instead. */
    int rc = buf_reserve(&o, want < ROWS_PER_COL_BYTE * n ? want : ROWS_PER_COL_BYTE * n);
    if (!rc) rc = put_header(&o, id, prev_id, next, count);
    for (uint64_t i = 0; i < count && !rc && o.n <= want; i++)
        rc = decode_row(c, &o, &s, &prev_at, &prev_n, version);
    for (int k = 0; k < NCOLS && !rc; k++)
        if (c[k].p != c[k].end) rc = -1;
    if (rc == -ENOMEM) {
        buf_free(&o);
        return tdc_error(-ENOMEM, "file table: out of memory");
    }
    if (rc || o.n != want) {
        buf_free(&o);
        return tdc_error(-EBADMSG, "file table: columns that do not make the declared rows");
    }
    *out = o.p ? o.p : malloc(1);
    if (!*out) return tdc_error(-ENOMEM, "file table: out of memory");
    return 0;
}
