#include "jrnl.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "../base/buf.h"
#include "../base/err.h"
#include "../base/fio.h"

static const char JMAGIC[8] = {'T', 'D', 'C', 'J', 'R', 'N', 'L', 0};
/* Records are handed to the disk (writeback started, not waited for) each time this much
 * more was appended, so that a later fsync has only the last of them left to write: a large
 * file written through the mount and synced at the end goes to the disk while it comes in. */
#define WRITEBACK_CHUNK ((uint64_t)8 << 20)

/* Every record is written to the file as it is appended: nothing waits in memory, so a
 * close(2) has nothing to write (the daemon opens files with FOPEN_NOFLUSH, saving the
 * kernel's FLUSH round trips) and a crash of this process loses no acknowledged record. A
 * full disk fails the write that needs the space (-ENOSPC), as the file system reports it
 * there; nothing is reserved ahead. */
struct jrnl {
    char *path;
    int fd;
    int writable;
    uint64_t end;    /* the file's logical end, after the last record (atomic: jrnl_read) */
    uint64_t handed; /* where writeback was last started (WRITEBACK_CHUNK) */
    uint64_t seq;    /* last sequence number used */
    XXH3_state_t *h; /* a record's checksum, over its pieces (writable journals) */
};

void jrnl_header_seal(unsigned char h[JRNL_HDR])
{
    st64(h + JRNL_HDR_SUM, XXH3_64bits(h, JRNL_HDR_SUM));
}

void jrnl_header_encode(unsigned char h[JRNL_HDR], uint64_t id)
{
    memset(h, 0, JRNL_HDR);
    memcpy(h + JRNL_HDR_MAGIC, JMAGIC, sizeof JMAGIC);
    st32(h + JRNL_HDR_VERSION, JRNL_VERSION);
    st64(h + JRNL_HDR_ID, id);
    jrnl_header_seal(h);
}

int jrnl_header_decode(const unsigned char h[JRNL_HDR], uint64_t *id)
{
    if (memcmp(h + JRNL_HDR_MAGIC, JMAGIC, sizeof JMAGIC) ||
        XXH3_64bits(h, JRNL_HDR_SUM) != le64(h + JRNL_HDR_SUM) ||
        le32(h + JRNL_HDR_VERSION) != JRNL_VERSION)
        return -1;
    *id = le64(h + JRNL_HDR_ID);
    return 0;
}

/* The checksum of a record: of its frame and body. */
static uint64_t rec_sum(const unsigned char *rec, uint32_t len)
{
    return XXH3_64bits(rec, JRNL_REC_BODY + (size_t)len);
}

void jrnl_rec_seal(unsigned char *rec)
{
    uint32_t len = le32(rec + JRNL_REC_LEN);
    st64(rec + JRNL_REC_BODY + len, rec_sum(rec, len));
}

/* A record's frame: its body length, type and sequence number. */
static void rec_frame(unsigned char f[JRNL_REC_BODY], uint32_t type, uint64_t seq, size_t len)
{
    st32(f + JRNL_REC_LEN, (uint32_t)len);
    st32(f + JRNL_REC_TYPE, type);
    st64(f + JRNL_REC_SEQ, seq);
}

int jrnl_rec_encode(buf *b, uint32_t type, uint64_t seq, const void *head, size_t hn,
                    const void *data, size_t dn)
{
    size_t start = b->n, len = hn + dn;
    unsigned char f[JRNL_REC_BODY];
    rec_frame(f, type, seq, len);
    if (buf_reserve(b, len + JRNL_REC_OVERHEAD)) return -ENOMEM;
    buf_put(b, f, sizeof f);
    buf_put(b, head, hn);
    buf_put(b, data, dn);
    buf_put_u64(b, rec_sum(b->p + start, (uint32_t)len));
    return 0;
}

/* A new file `fd` for the journal at `path` takes its archive's read and write bits (and
 * keeps its own owner's), and where this process may give it, the archive's owner: whoever
 * may read the archive may read its edits, and the archive's owner may go on writing after
 * root did. The archive is the journal's path less ".journal"; 0600 where it is not there. */
static int take_archive_perm(int fd, const char *path)
{
    size_t n = strlen(path);
    mode_t mode = 0600;
    struct stat sb;
    char *a = n > 8 && !strcmp(path + n - 8, ".journal") ? strndup(path, n - 8) : NULL;
    if (a && stat(a, &sb) == 0) {
        mode |= sb.st_mode & 0666;
        if (geteuid() == 0 && fchown(fd, sb.st_uid, sb.st_gid) < 0) mode = 0600;
    }
    free(a);
    return fchmod(fd, mode);
}

/* Lock a writable journal's file descriptor for as long as it is open (jrnl_held). */
static int hold(int fd, const char *path)
{
    if (!flock(fd, LOCK_EX | LOCK_NB)) return 0;
    return errno == EWOULDBLOCK
               ? tdc_error(-EBUSY, "%s: the journal is held by another writer", path)
               : tdc_error(-errno, "%s: lock: %s", path, strerror(errno));
}

int jrnl_held(const char *path, char *who, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), held = 0;
    if (fd < 0) return 0; /* none (or none that a writer could hold either) */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
        held = 1;
        fio_flock_holder(fd, who, n);
    }
    close(fd); /* the lock taken here goes with it */
    return held;
}

/* Create an empty journal for archive `id` at `path` atomically; returns its fd. */
static int create_empty(const char *path, uint64_t id)
{
    char *tmp = malloc(strlen(path) + 16);
    if (!tmp) return -ENOMEM;
    sprintf(tmp, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp), rc;
    if (fd < 0) {
        rc = tdc_error(-errno, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    unsigned char h[JRNL_HDR];
    jrnl_header_encode(h, id);
    if ((rc = fio_write_all(fd, h, JRNL_HDR, tmp)) || (rc = hold(fd, tmp))) goto fail;
    if (take_archive_perm(fd, path) < 0 || fsync(fd) < 0) {
        rc = tdc_error(-errno, "%s: %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) < 0) {
        rc = tdc_error(-errno, "rename %s to %s: %s", tmp, path, strerror(errno));
        goto fail;
    }
    free(tmp);
    if ((rc = fio_sync_dir(path))) {
        close(fd);
        return rc;
    }
    return fd;
fail:
    close(fd);
    unlink(tmp);
    free(tmp);
    return rc;
}

/* 1 if bytes [off, size) are all zero: what a crash can leave where the file system had
 * extended the file but not yet written the data. Checks at most 1 MiB. */
static int zero_tail(jrnl *j, uint64_t off, uint64_t size)
{
    unsigned char b[4096];
    if (size - off > (1u << 20)) return 0;
    while (off < size) {
        size_t k = size - off < sizeof b ? (size_t)(size - off) : sizeof b;
        if (fio_read_at(j->fd, b, k, off, j->path)) return 0;
        for (size_t i = 0; i < k; i++)
            if (b[i]) return 0;
        off += k;
    }
    return 1;
}

/* The record at offset `off` of j's file, which ends at `size`, read whole into b: NULL when
 * it is whole, intact, of a known type and numbered `seq`, else why not; *rc is set (and
 * NULL returned) when the file cannot be read or memory runs out. */
static const char *read_rec(const jrnl *j, uint64_t off, uint64_t size, uint64_t seq, buf *b,
                            int *rc)
{
    unsigned char h[JRNL_REC_BODY];
    *rc = 0;
    if (size - off < JRNL_REC_OVERHEAD) return "torn record header";
    if ((*rc = fio_read_at(j->fd, h, sizeof h, off, j->path))) return NULL;
    uint32_t len = le32(h + JRNL_REC_LEN), type = le32(h + JRNL_REC_TYPE);
    if (len > JRNL_MAX_BODY) return "impossible record length";
    if (len + (uint64_t)JRNL_REC_OVERHEAD > size - off) return "torn record";
    b->n = 0;
    if (buf_reserve(b, len + JRNL_REC_OVERHEAD)) {
        *rc = tdc_error(-ENOMEM, "journal: out of memory");
        return NULL;
    }
    if ((*rc = fio_read_at(j->fd, b->p, len + JRNL_REC_OVERHEAD, off, j->path))) return NULL;
    b->n = len + JRNL_REC_OVERHEAD;
    if (rec_sum(b->p, len) != le64(b->p + JRNL_REC_BODY + len)) return "checksum mismatch";
    if (le64(h + JRNL_REC_SEQ) != seq) return "sequence gap";
    if (type == 0 || type >= JR_NTYPES) return "unknown record type";
    return NULL;
}

/* Offset of the first intact record numbered above `seq` after offset `off` (where a record
 * is damaged or torn) in j's file, which ends at `size`, or 0: looked for at every byte from
 * where the record's length says the next starts (from the next byte where that length is
 * impossible: it may be what is damaged; so a record's own data, which may hold anything, is
 * not searched unless its length is), the file read a chunk at a time and only a plausible
 * header (length, a number between seq and what the bytes left could hold) read whole. */
static uint64_t intact_after(const jrnl *j, uint64_t off, uint64_t size, uint64_t seq, buf *b,
                             int *rc)
{
    enum { CHUNK = 1 << 20 };
    unsigned char h[JRNL_REC_BODY], *c = malloc(CHUNK + JRNL_REC_BODY);
    uint64_t found = 0, most = seq + (size - off) / JRNL_REC_OVERHEAD;
    if (!c) {
        *rc = tdc_error(-ENOMEM, "journal: out of memory");
        return 0;
    }
    uint64_t from = off + 1;
    if (size - off >= JRNL_REC_BODY && !(*rc = fio_read_at(j->fd, h, sizeof h, off, j->path))) {
        uint64_t next = off + JRNL_REC_OVERHEAD + (uint64_t)le32(h + JRNL_REC_LEN);
        if (next < size) from = next;
    }
    for (uint64_t p = from; !found && !*rc && p + JRNL_REC_OVERHEAD <= size; p += CHUNK) {
        size_t n = (size_t)(size - p < CHUNK + JRNL_REC_BODY ? size - p : CHUNK + JRNL_REC_BODY);
        if ((*rc = fio_read_at(j->fd, c, n, p, j->path))) break;
        for (size_t i = 0; !found && !*rc && i < CHUNK && i + JRNL_REC_BODY <= n; i++) {
            /* a plausible header, then the record read whole as read_rec checks it */
            uint64_t s = le64(c + i + JRNL_REC_SEQ);
            if (le32(c + i + JRNL_REC_LEN) <= JRNL_MAX_BODY && s > seq && s <= most &&
                !read_rec(j, p + i, size, s, b, rc))
                found = p + i;
        }
    }
    free(c);
    return *rc ? 0 : found;
}

/* The record read whole in b, as given to a jrnl_apply_fn: `off` is where it starts. */
static jrnl_rec rec_of(const buf *b, uint64_t off)
{
    uint32_t len = le32(b->p + JRNL_REC_LEN);
    return (jrnl_rec){le32(b->p + JRNL_REC_TYPE), len, le64(b->p + JRNL_REC_SEQ),
                      off + JRNL_REC_BODY, b->p + JRNL_REC_BODY};
}

/* Replay records from JRNL_HDR to the end of the file; sets *end to the end of the last good
 * record. */
static int replay(jrnl *j, uint64_t size, jrnl_apply_fn fn, void *ctx, jrnl_stats *st,
                  uint64_t *end)
{
    uint64_t off = JRNL_HDR;
    buf b = {0};
    int rc = 0;
    *end = off;
    while (off < size) {
        const char *why = read_rec(j, off, size, j->seq + 1, &b, &rc);
        if (rc) break;
        if (!why) {
            jrnl_rec r = rec_of(&b, off);
            if ((rc = fn(ctx, &r))) break;
            j->seq = r.seq;
            st->records++;
            off += b.n;
            *end = off;
            continue;
        }
        if (strncmp(why, "torn", 4) && zero_tail(j, off, size))
            why = "torn record (zero-filled tail)";
        else if (!(st->intact_at = intact_after(j, off, size, j->seq, &b, &rc)) && rc)
            break;
        if (st->intact_at && !strncmp(why, "torn", 4)) why = "damaged record length";
        st->dropped = size - off;
        snprintf(st->why, sizeof st->why, "%s at offset %llu after record %llu", why,
                 (unsigned long long)off, (unsigned long long)j->seq);
        break;
    }
    buf_free(&b);
    return rc;
}

/* The next journal beside `path` (jrnl_next), if any: bound to `id`, it is the journal,
 * renamed into place when writable, or else *read_path (malloc'ed) is where to read it;
 * bound to anything else (or cut short), it is removed when writable. */
static int take_next(const char *path, uint64_t id, int writable, char **read_path)
{
    char *np = malloc(strlen(path) + 8);
    if (!np) return tdc_error(-ENOMEM, "out of memory");
    sprintf(np, "%s.next", path);
    int fd = open(np, O_RDONLY | O_CLOEXEC), rc = 0;
    if (fd < 0) {
        rc = errno == ENOENT ? 0 : tdc_error(-errno, "%s: %s", np, strerror(errno));
        free(np);
        return rc;
    }
    unsigned char h[JRNL_HDR];
    uint64_t hid;
    struct stat sb;
    int bound = fstat(fd, &sb) == 0 && sb.st_size >= JRNL_HDR &&
                !fio_read_at(fd, h, JRNL_HDR, 0, np) && !jrnl_header_decode(h, &hid) && hid == id;
    close(fd);
    if (bound && !writable) {
        *read_path = np;
        return 0;
    }
    if (!bound && writable && unlink(np) < 0)
        rc = tdc_error(-errno, "%s: cannot remove: %s", np, strerror(errno));
    if (bound && rename(np, path) < 0)
        rc = tdc_error(-errno, "rename %s to %s: %s", np, path, strerror(errno));
    else if (bound)
        rc = fio_sync_dir(path);
    free(np);
    return rc;
}

int jrnl_open(const char *path, uint64_t id, uint64_t prev_id, int writable, jrnl_apply_fn fn,
              void *ctx, jrnl_stats *st, jrnl **out)
{
    char *next = NULL;
    int rc = take_next(path, id, writable, &next);
    if (rc) return rc;
    if (next) path = next;
    jrnl *j = calloc(1, sizeof *j);
    memset(st, 0, sizeof *st);
    if (!j || !(j->path = strdup(path))) {
        free(j);
        free(next);
        return tdc_error(-ENOMEM, "out of memory");
    }
    free(next);
    path = j->path;
    j->writable = writable;
    j->fd = -1;
    if (writable && !(j->h = XXH3_createState())) {
        rc = tdc_error(-ENOMEM, "out of memory");
        goto fail;
    }
    unsigned char h[JRNL_HDR];
    uint64_t hid = 0;
    struct stat sb;
    j->fd = fio_open_file(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, &sb);
    if (j->fd < 0 && errno != ENOENT) {
        rc = errno == EINVAL || errno == EISDIR
                 ? tdc_error(-EINVAL, "%s: the journal is not a regular file", path)
                 : tdc_error(-errno, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if (j->fd >= 0 && writable && (rc = hold(j->fd, path))) goto fail;
    if (j->fd >= 0) {
        int bad = (uint64_t)sb.st_size < JRNL_HDR || fio_read_at(j->fd, h, JRNL_HDR, 0, path) ||
                  jrnl_header_decode(h, &hid);
        int stale = !bad && hid == prev_id && prev_id;
        if (!writable && (bad || (hid != id && !stale))) { /* left unread, said why */
            st->unread = 1;
            snprintf(st->why, sizeof st->why, "%s",
                     bad ? "journal header is damaged" : "journal belongs to another archive");
            close(j->fd);
            j->fd = -1;
        } else if (bad) {
            rc = tdc_error(-EBADMSG,
                           "%s: journal header is damaged; move the file aside to use the archive "
                           "without its pending edits (a read-only open, -o ro, leaves it unread)",
                           path);
            goto fail;
        } else if (stale) {
            /* Folded in by a compaction that stopped before resetting the journal. */
            st->stale = (uint64_t)sb.st_size;
            close(j->fd);
            j->fd = -1;
        } else if (hid != id) {
            rc = tdc_error(-EBADMSG,
                           "%s: journal belongs to another archive (id %016llx, archive is "
                           "%016llx)",
                           path, (unsigned long long)hid, (unsigned long long)id);
            goto fail;
        }
    }
    if (j->fd >= 0) {
        uint64_t end;
        if ((rc = replay(j, (uint64_t)sb.st_size, fn, ctx, st, &end))) goto fail;
        if (writable && st->intact_at) {
            rc = tdc_error(-EBADMSG,
                           "%s: damaged, not torn: %s, and an intact record follows at offset "
                           "%llu; nothing was cut. Mount read-only (-o ro) to read the edits "
                           "before the damage; 'truncate -s %llu %s' keeps only those, moving "
                           "the journal aside keeps none",
                           path, st->why, (unsigned long long)st->intact_at,
                           (unsigned long long)end, path);
            goto fail;
        }
        if (writable && end < (uint64_t)sb.st_size && ftruncate(j->fd, (off_t)end) < 0) {
            rc = tdc_error(-errno, "%s: cannot cut the damaged tail: %s", path, strerror(errno));
            goto fail;
        }
        j->end = end;
    } else if (writable) {
        if ((j->fd = create_empty(path, id)) < 0) {
            rc = j->fd;
            goto fail;
        }
        j->end = JRNL_HDR;
    }
    j->handed = j->end;
    *out = j;
    return 0;
fail:
    if (j->fd >= 0) close(j->fd);
    XXH3_freeState(j->h);
    free(j->path);
    free(j);
    return rc;
}

/* -EIO where j's file was cut below its last record or removed (replaced by a rename) since
 * it was opened: a record written now would follow a hole, or go to a file no open finds. */
static int still_there(const jrnl *j)
{
    struct stat sb;
    if (fstat(j->fd, &sb) < 0) return tdc_error(-errno, "%s: %s", j->path, strerror(errno));
    if (sb.st_nlink && (uint64_t)sb.st_size >= j->end) return 0;
    return tdc_error(-EIO,
                     "%s: the journal was %s while this writer had it open; nothing more is "
                     "written to it (a new open replays what it holds)",
                     j->path, sb.st_nlink ? "cut short" : "removed or replaced");
}

int jrnl_append(jrnl *j, uint32_t type, const void *head, size_t hn, const void *data, size_t dn,
                uint64_t *data_off)
{
    if (!j->writable) return tdc_error(-EROFS, "%s: journal is read-only", j->path);
    if (hn + dn > JRNL_MAX_BODY) return tdc_error(-EFBIG, "journal record too large");
    size_t len = hn + dn;
    /* The record as jrnl_rec_encode lays it out, written from where its pieces lie: the
     * data, up to a megabyte a write, is not copied. */
    unsigned char f[JRNL_REC_BODY], sum[8];
    rec_frame(f, type, j->seq + 1, len);
    XXH3_64bits_reset(j->h);
    XXH3_64bits_update(j->h, f, sizeof f);
    XXH3_64bits_update(j->h, head, hn);
    XXH3_64bits_update(j->h, data, dn);
    st64(sum, XXH3_64bits_digest(j->h));
    struct iovec v[4] = {{f, sizeof f}, {(void *)head, hn}, {(void *)data, dn}, {sum, 8}};
    /* A record only partly written is not acknowledged: the next one overwrites it, or
     * replay drops it as a torn tail. */
    uint64_t at = j->end;
    int rc = still_there(j);
    if (!rc) rc = fio_pwritev_all(j->fd, v, 4, at, j->path);
    if (rc) return rc;
    if (data_off) *data_off = at + JRNL_REC_BODY + hn;
    j->seq++;
    __atomic_store_n(&j->end, at + len + JRNL_REC_OVERHEAD, __ATOMIC_RELEASE);
    if (j->end - j->handed >= WRITEBACK_CHUNK) { /* best effort: jrnl_sync does the rest */
        (void)sync_file_range(j->fd, (off_t)j->handed, (off_t)(j->end - j->handed),
                              SYNC_FILE_RANGE_WRITE);
        j->handed = j->end;
    }
    return 0;
}

int jrnl_read(const jrnl *j, uint64_t off, void *dst, size_t n)
{
    uint64_t end = __atomic_load_n(&j->end, __ATOMIC_ACQUIRE);
    if (n > end || off > end - n)
        return tdc_error(-EIO, "%s: read past the end", j->path);
    return fio_read_at(j->fd, dst, n, off, j->path) ? -EIO : 0;
}

int jrnl_sync(jrnl *j)
{
    if (!j->writable) return 0;
    if (fdatasync(j->fd) < 0)
        return tdc_error(-errno, "%s: fdatasync: %s", j->path, strerror(errno));
    return still_there(j);
}

uint64_t jrnl_size(const jrnl *j)
{
    return __atomic_load_n(&j->end, __ATOMIC_ACQUIRE);
}

uint64_t jrnl_records(const jrnl *j)
{
    return j->seq;
}

int jrnl_cut(jrnl *j, uint64_t end, uint64_t seq)
{
    if (!j->writable || end > j->end || seq > j->seq)
        return tdc_error(-EINVAL, "%s: no such place to cut at", j->path);
    if (ftruncate(j->fd, (off_t)end) < 0 || fdatasync(j->fd) < 0)
        return tdc_error(-errno, "%s: cannot cut back to %llu bytes: %s", j->path,
                         (unsigned long long)end, strerror(errno));
    __atomic_store_n(&j->end, end, __ATOMIC_RELEASE);
    j->seq = seq;
    if (j->handed > end) j->handed = end;
    return 0;
}

int jrnl_next_begin(const jrnl *j, uint64_t id, uint64_t from, uint64_t seq0, jrnl_next *n)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    if (!j->writable) return tdc_error(-EROFS, "%s: journal is read-only", j->path);
    if (!(n->path = malloc(strlen(j->path) + 8))) return tdc_error(-ENOMEM, "out of memory");
    sprintf(n->path, "%s.next", j->path);
    n->fd = open(n->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = n->fd < 0 ? tdc_error(-errno, "%s: cannot create: %s", n->path, strerror(errno)) : 0;
    if (!rc) rc = hold(n->fd, n->path); /* the journal's lock once renamed into place */
    if (!rc && take_archive_perm(n->fd, j->path) < 0)
        rc = tdc_error(-errno, "%s: %s", n->path, strerror(errno));
    unsigned char h[JRNL_HDR];
    jrnl_header_encode(h, id);
    if (!rc) rc = fio_write_all(n->fd, h, JRNL_HDR, n->path);
    if (rc) {
        jrnl_next_abort(n);
        return rc;
    }
    n->size = JRNL_HDR;
    n->from = from;
    n->seq0 = seq0;
    return 0;
}

int jrnl_next_copy(const jrnl *j, jrnl_next *n, uint64_t upto, jrnl_apply_fn fn, void *ctx)
{
    buf b = {0};
    int rc = 0;
    while (!rc && n->from < upto) {
        /* Written by this process: a record that does not read back whole is damage. */
        const char *why = read_rec(j, n->from, upto, n->seq0 + n->seq + 1, &b, &rc);
        if (why)
            rc = tdc_error(-EIO, "%s: record at offset %llu reads back damaged (%s)", j->path,
                           (unsigned long long)n->from, why);
        if (rc) break;
        st64(b.p + JRNL_REC_SEQ, n->seq + 1);
        jrnl_rec_seal(b.p);
        if ((rc = fio_pwrite_all(n->fd, b.p, b.n, n->size, n->path))) break;
        jrnl_rec r = rec_of(&b, n->size);
        if ((rc = fn(ctx, &r))) break;
        n->size += b.n;
        n->from += b.n;
        n->seq++;
    }
    buf_free(&b);
    return rc;
}

int jrnl_next_sync(jrnl_next *n)
{
    if (fdatasync(n->fd) < 0)
        return tdc_error(-errno, "%s: fdatasync: %s", n->path, strerror(errno));
    return 0;
}

int jrnl_next_commit(jrnl *j, jrnl_next *n)
{
    int rc = 0;
    if (rename(n->path, j->path) < 0)
        rc = tdc_error(-errno, "rename %s to %s: %s", n->path, j->path, strerror(errno));
    else
        rc = fio_sync_dir(j->path);
    /* Adopted even when the rename failed: the records the model now points at are in this
     * file, and jrnl_open takes a next journal bound to the archive as the journal. */
    close(j->fd);
    j->fd = n->fd;
    j->end = j->handed = n->size;
    j->seq = n->seq;
    free(n->path);
    memset(n, 0, sizeof *n);
    n->fd = -1;
    return rc;
}

void jrnl_next_abort(jrnl_next *n)
{
    if (n->fd >= 0) close(n->fd);
    if (n->path) unlink(n->path);
    free(n->path);
    memset(n, 0, sizeof *n);
    n->fd = -1;
}

void jrnl_close(jrnl *j)
{
    if (!j) return;
    if (j->writable && j->fd >= 0) {
        /* Cut what a failed append may have left after the last record (never grown: a
         * file cut short by someone else is not padded with zeros). */
        struct stat sb;
        if (!fstat(j->fd, &sb) && (uint64_t)sb.st_size > j->end && ftruncate(j->fd, (off_t)j->end))
            (void)0;
        fdatasync(j->fd);
    }
    if (j->fd >= 0) close(j->fd);
    XXH3_freeState(j->h);
    free(j->path);
    free(j);
}
