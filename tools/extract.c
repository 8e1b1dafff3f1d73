/* extract.c: the tadoc commands that read files out of an archive (cat, extract, unpack). Each
 * loads only the shards the files it writes lie in, one span at a time, so that its memory
 * follows the largest shard, not the archive. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../engine/base/buf.h"
#include "../engine/base/fio.h"
#include "../engine/base/par.h"
#include "../engine/format/arc.h"
#include "../engine/index/idx.h"
#include "../engine/volume/hashck.h"
#include "tadoc.h"

#define CHUNK (1u << 20)

/* A read of one file gets the index's cache of short rules when it takes at least this share
 * (1/N) of the loaded shards' content: the cache costs about a fifth of the decoding and makes
 * reads about three times faster, which breaks even about there (Linux, 16 MiB shards: a 4.6
 * MB file cats as fast either way). */
#define READ_CACHE_SHARE 4

/* The index of `a` (loaded, `content` bytes) for reading `bytes` of it. */
static int index_for(const arc *a, uint64_t bytes, uint64_t content, idx **x)
{
    return bytes >= content / READ_CACHE_SHARE ? idx_build(a, x) : idx_build_base(a, x);
}

/* For reading up to `len` bytes of one file: open `path` and load only the shards that file
 * `name` spans (its content entry's), so that the first byte of a file of a large archive
 * comes at once; *ent is the entry of `name`. A file cut over shards of its own
 * (arc_entry_parts) is left to parts_out: nothing is loaded, *x is NULL and *ent is its
 * content entry. So is a file in a shard stored as its text, which *t then holds (else its
 * payload is NULL): its bytes need no tokens (text_out). */
static int open_file(const char *path, const char *name, uint64_t len, arc **a, idx **x,
                     uint32_t *ent, arc_text *t)
{
    uint32_t first, last;
    *x = NULL;
    memset(t, 0, sizeof *t);
    int rc = arc_open_meta(path, a);
    if (rc) return rc;
    if ((rc = arc_find_file(*a, name, ent))) goto fail;
    note_journal(path, *a);
    int64_t ce = arc_ino_entry(*a, (*a)->ents[*ent].ino);
    if (ce >= 0 && arc_entry_parts(*a, (uint32_t)ce, &first, &last)) {
        *ent = (uint32_t)ce;
        return 0;
    }
    arc_entry_shards(*a, ce >= 0 ? (uint32_t)ce : *ent, &first, &last);
    /* Where that fails (damage among others) the grammar's load says why. */
    if (ce >= 0 && (*a)->ents[ce].size && first == last && arc_shard_text(*a, first) &&
        !arc_open_text(*a, first, -1, 1, t)) {
        *ent = (uint32_t)ce;
        return 0;
    }
    uint64_t content = 0;
    for (uint32_t k = first; k <= last; k++)
        content += (*a)->shards[k].bytes;
    uint64_t size = (*a)->ents[*ent].size;
    if ((rc = arc_load_span(*a, first, last))) goto fail;
    if ((rc = index_for(*a, len < size ? len : size, content, x))) {
        rc = tdc_error_ctx(rc, "%s", path);
        goto fail;
    }
    return 0;
fail:
    arc_free(*a);
    *a = NULL;
    return rc;
}

static void close_all(arc *a, idx *x)
{
    idx_free(x);
    arc_free(a);
}

/* Write n bytes at fd's position; with `holes` (a file unpack made), 4 KiB blocks of zeros
 * are skipped over instead (the file's size is set at its end), so a sparse file comes back
 * sparse, as `cp --sparse=auto` makes it, and takes no more room than it took. */
static int out_bytes(int fd, const unsigned char *p, size_t n, const char *to, int holes)
{
    enum { BLK = 4096 };
    static const unsigned char zeros[BLK];
    size_t done = 0, i = 0; /* bytes written or skipped; the block looked at */
    while (holes && i < n) {
        if (n - i < BLK || memcmp(p + i, zeros, BLK)) {
            i += BLK;
            continue;
        }
        size_t j = i + BLK; /* the run of zero blocks from i */
        while (n - j >= BLK && !memcmp(p + j, zeros, BLK))
            j += BLK;
        int rc = i > done ? fio_write_all(fd, p + done, i - done, to) : 0;
        if (rc) return rc;
        if (lseek(fd, (off_t)(j - i), SEEK_CUR) < 0)
            return tdc_error(-errno, "%s: %s", to, strerror(errno));
        done = i = j;
    }
    return done < n ? fio_write_all(fd, p + done, n - done, to) : 0;
}

/* Write bytes [off, off + len) of meta's entry ce (fewer at its end), which text shard t
 * holds (arc_open_text), into fd (named `to` in messages), through hc as copy_out does (at:
 * where t's bytes begin in the file). 0, -EBADMSG (no message) for a hash that differs, or a
 * write's error. */
static int text_out(const arc_text *t, uint32_t ce, uint64_t off, uint64_t len, uint64_t at,
                    hashck *hc, int fd, const char *to, int holes)
{
    int64_t i = find_u32(t->ids, t->nids, ce);
    if (i < 0) return tdc_error(-EIO, "entry %u: not in its shard", ce);
    const unsigned char *p;
    ssize_t n = arc_text_bytes(t, (uint32_t)i, off, len < SIZE_MAX ? (size_t)len : SIZE_MAX, &p);
    if (n < 0) return (int)n;
    if (hc && hashck_feed(hc, at + off, p, (size_t)n)) return -EBADMSG;
    return n ? out_bytes(fd, p, (size_t)n, to, holes) : 0;
}

/* Stream `len` bytes of entry `e` from `off` into fd. With hc, each block goes through the
 * content-hash check first, at its offset in the file plus `at` (where the entry is a part of
 * the file): -EBADMSG (no message) when the file's hash differs. */
static int copy_out(const idx *x, uint32_t e, uint64_t off, uint64_t len, uint64_t at, int fd,
                    const char *name, hashck *hc, int holes)
{
    size_t cap = len < CHUNK ? (size_t)len : CHUNK; /* its own: unpack's threads call it */
    unsigned char *blk = malloc(cap ? cap : 1);
    if (!blk) return tdc_error(-ENOMEM, "out of memory");
    idx_cursor c;
    idx_cursor_init(&c);
    int rc = 0;
    while (len) {
        ssize_t k = idx_read(x, &c, e, off, blk, len < CHUNK ? (size_t)len : CHUNK);
        if (k < 0) {
            rc = (int)k;
            break;
        }
        if (k == 0) break;
        if (hc && hashck_feed(hc, at + off, blk, (size_t)k)) {
            rc = -EBADMSG;
            break;
        }
        if ((rc = out_bytes(fd, blk, (size_t)k, name, holes))) break;
        off += (uint64_t)k;
        len -= (uint64_t)k;
    }
    idx_cursor_free(&c);
    free(blk);
    return rc;
}

const char usage_cat[] =
    "usage: tadoc cat ARCHIVE PATH\n"
    "\n"
    "Write the archived file PATH to standard output, extracted from the grammar, checking\n"
    "its content hash (exit status 3 when the archive data is damaged).\n";

static const char damaged_hash[] = "%s: content does not match its hash (archive data is damaged)";

/* tadoc cat and unpack (with `check`: the whole file, its hash checked) and extract of
 * content entry ce of m (not loaded), cut over shards of its own (arc_entry_parts), into fd
 * (named `to`; `name` is the archived path): a part at a time, each shard loaded alone with
 * the file's part (arc_open_part), so memory stays one shard's whatever the file's size. A
 * damaged part fails it (-EBADMSG, with a message) before anything is written. */
static int parts_out(arc *m, uint32_t ce, const char *name, uint64_t off, uint64_t len, int check,
                     int fd, const char *to, int holes)
{
    uint32_t first, last;
    int rc = 0;
    arc_entry_parts(m, ce, &first, &last);
    const arc_entry *f = &m->ents[ce];
    hashck hc = {0};
    if (check) hashck_init(&hc, f->hash, f->size);
    uint64_t end = len > f->size || off > f->size - len ? f->size : off + len, at = 0;
    /* The parts' sections against their checksums first, so that a damaged part fails the
     * command before it writes anything, as for a file read whole. */
    for (uint32_t k = first; !rc && k <= last && at < end; at += m->shards[k++].bytes) {
        if (at + m->shards[k].bytes <= off || !(rc = arc_shard_check(m, k))) continue;
        char why[512];
        snprintf(why, sizeof why, "%s", tdc_errmsg());
        rc = arc_damage_error(m, ce, k, why);
    }
    at = 0;
    for (uint32_t k = first; !rc && k <= last && at < end; at += m->shards[k++].bytes) {
        uint64_t n = m->shards[k].bytes;
        if (at + n <= off) continue;
        uint64_t lo = off > at ? off - at : 0, hi = end - at < n ? end - at : n;
        arc_text t;
        if (arc_shard_text(m, k) && !arc_open_text(m, k, ce, 1, &t)) { /* checked above */
            if ((rc = text_out(&t, ce, lo, hi - lo, at, check ? &hc : NULL, fd, to, holes)) ==
                -EBADMSG)
                tdc_error(rc, damaged_hash, name);
            arc_text_free(&t);
            continue;
        }
        arc *p = NULL;
        idx *x = NULL;
        if (!(rc = arc_open_part(m, ce, k, &p)) && !(rc = index_for(p, hi - lo, n, &x)) &&
            !(rc = arc_entry_damaged(p, 0)) &&
            (rc = copy_out(x, 0, lo, hi - lo, at, fd, to, check ? &hc : NULL, holes)) == -EBADMSG)
            tdc_error(rc, damaged_hash, name);
        close_all(p, x);
    }
    hashck_free(&hc);
    return rc;
}

/* tadoc cat (`check`: the whole file, its content hash checked) and extract: bytes [off, off
 * + len) of archived file `name` of archive `path` to standard output; an exit code. */
static int file_out(const char *path, const char *name, uint64_t off, uint64_t len, int check)
{
    arc *a;
    idx *x;
    uint32_t e;
    arc_text t;
    int rc = open_file(path, name, len, &a, &x, &e, &t);
    if (rc) return fail(rc);
    /* The content's hash is the archived one of the inode's first name (open_file gives that
     * entry for a text shard or a file in parts). */
    int64_t ce = t.payload || !x ? (int64_t)e : arc_ino_entry(a, a->ents[e].ino);
    hashck hc = {0};
    if (check && ce >= 0) hashck_init(&hc, a->ents[ce].hash, a->ents[ce].size);
    hashck *h = check ? &hc : NULL;
    int hashed = 0; /* read here through h: -EBADMSG without a message is its finding */
    if (t.payload) {
        rc = text_out(&t, e, off, len, 0, h, 1, "stdout", 0);
        hashed = 1;
        arc_text_free(&t);
    } else if (!x) {
        rc = parts_out(a, e, name, off, len, check, 1, "stdout", 0);
    } else if (!(rc = arc_entry_damaged(a, e))) {
        rc = copy_out(x, e, off, len, 0, 1, "stdout", h, 0);
        hashed = 1;
    }
    if (hashed && check && rc == -EBADMSG) tdc_error(rc, damaged_hash, name);
    hashck_free(&hc);
    close_all(a, x);
    return rc ? fail(rc) : EX_OK;
}

int cmd_cat(int argc, char **argv)
{
    if (argc != 3) return usage_err(usage_cat, "need ARCHIVE and PATH");
    return file_out(argv[1], argv[2], 0, UINT64_MAX, 1);
}

const char usage_extract[] =
    "usage: tadoc extract ARCHIVE PATH OFFSET LENGTH\n"
    "\n"
    "Write LENGTH bytes of PATH starting at byte OFFSET (fewer at end of file, none past it).\n"
    "Only the rules on the way to OFFSET are visited: the file is never expanded whole.\n";

/* A decimal number (as every number tadoc reads: "010" is ten, not eight). */
int cmd_extract(int argc, char **argv)
{
    uint64_t off, len;
    if (argc != 5) return usage_err(usage_extract, "need ARCHIVE PATH OFFSET LENGTH");
    if (parse_uint(argv[3], &off) || parse_uint(argv[4], &len))
        return usage_err(usage_extract, "OFFSET and LENGTH must be non-negative integers");
    return file_out(argv[1], argv[2], off, len, 0);
}

/* ---------------- unpack ---------------- */

const char usage_unpack[] =
    "usage: tadoc unpack [-j N] ARCHIVE DIR [PATH...]\n"
    "\n"
    "Recreate the archived tree under DIR, which must not exist or be empty. Modes and times\n"
    "are restored; owners too when run as root. Devices need root: without it each one is\n"
    "reported and left out, and the exit status is 1. A file with content in a damaged shard\n"
    "(or not matching its hash) is reported and left out, the rest restored, exit status 3.\n"
    "Files are written shard by shard, so memory follows the largest shard, not the archive.\n"
    "With PATHs, only those files and directories (with all they hold) are restored, and the\n"
    "directories that lead to them; only the shards their content lies in are read.\n"
    "\n"
    "  -j, --jobs N   shards written at once, each by a thread holding it (default: one per\n"
    "                 CPU, at most 4)\n";

/* The archived metadata on the restored `path` (`sys`: its name for the system calls,
 * fio_long_path): user.* attributes, owner (as root), mode, times. */
static int restore_meta_at(const char *path, const char *sys, const arc_entry *e)
{
    for (uint32_t k = 0; k < e->nxattrs; k++) {
        char name[300];
        snprintf(name, sizeof name, "user.%s", e->xattrs[k].name);
        if (lsetxattr(sys, name, e->xattrs[k].val, e->xattrs[k].len, 0) < 0 && errno != ENOTSUP &&
            errno != EPERM)
            return tdc_error(-errno, "%s: set %s: %s", path, name, strerror(errno));
    }
    struct timespec ts[2] = {{e->atime_sec, e->atime_nsec}, {e->mtime_sec, e->mtime_nsec}};
    if (geteuid() == 0 && lchown(sys, e->uid, e->gid) < 0)
        return tdc_error(-errno, "%s: chown: %s", path, strerror(errno));
    if (e->type != ARC_LNK && chmod(sys, e->mode) < 0)
        return tdc_error(-errno, "%s: chmod: %s", path, strerror(errno));
    if (utimensat(AT_FDCWD, sys, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return tdc_error(-errno, "%s: set times: %s", path, strerror(errno));
    return 0;
}

/* restore_meta_at of a path not yet named for the system calls */
static int restore_meta(const char *path, const arc_entry *e)
{
    fio_long l;
    int rc = fio_long_path(path, &l);
    if (!rc) rc = restore_meta_at(path, l.p, e);
    fio_long_end(&l);
    return rc;
}

/* The files unpack writes content to: the first name of each regular inode, with the shards
 * its content lies in. They are written in shard order, not path order, so that each shard is
 * loaded about once (a span or a text shard at a time) however pack grouped the files. */
typedef struct unp_file {
    uint32_t first, last;
    uint32_t ent; /* the inode's content entry, read */
    uint32_t out; /* the name written: the first one unpacked (unp_first) */
    int parts;    /* cut over shards of its own (arc_entry_parts): written a part at a time */
} unp_file;

static int unp_cmp(const void *pa, const void *pb)
{
    const unp_file *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->last != b->last) return a->last < b->last ? -1 : 1;
    return (a->ent > b->ent) - (a->ent < b->ent);
}

/* What unpack holds loaded: one span of shards with its index, or one text shard. */
typedef struct unp_state {
    arc *m;                   /* the archive: its file table alone (arc_open_meta) */
    const char *dir;          /* the tree's new root */
    const unsigned char *sel; /* per entry: unpacked (PATHs given), or NULL: every one */
    arc *span;                /* shards [sfirst, slast] (arc_open_span), or NULL */
    idx *x;
    uint32_t *ids, nids, sfirst, slast;
    arc_text t; /* text shard tk, when tstate is 1 */
    int64_t tk; /* the text shard last opened, or -1 */
    int tstate; /* tk's: 1 loaded in t, 0 not readable as text (its grammar reads it),
                 * -EBADMSG damaged (twhy says why) */
    char twhy[512];
    unsigned char *lost; /* per entry: its content was not restored */
    uint64_t nlost;
} unp_state;

static void unp_drop(unp_state *s)
{
    idx_free(s->x);
    arc_free(s->span);
    free(s->ids);
    s->x = NULL;
    s->span = NULL;
    s->ids = NULL;
    arc_text_free(&s->t);
    s->tk = -1;
}

/* dir/path of entry i (dir itself for the root), malloc'ed; NULL when out of memory. */
static char *unp_path(const char *dir, const arc_entry *e, uint32_t i)
{
    char *p = malloc(strlen(dir) + strlen(e->path) + 2);
    if (p) sprintf(p, "%s%s%s", dir, i ? "/" : "", e->path);
    return p;
}

/* Content entry ent is not restored: say why (the thread's message); the others go on. */
static void unp_lose(unp_state *s, uint32_t ent)
{
    fprintf(stderr, "%s: %s\n", prog, tdc_errmsg());
    s->lost[ent] = 1;
    s->nlost++;
}

/* Text shard k, opened once for all its files: s->tstate, or another error. */
static int unp_text(unp_state *s, uint32_t k)
{
    if (s->tk == (int64_t)k) return s->tstate;
    unp_drop(s);
    int rc = arc_open_text(s->m, k, -1, 0, &s->t);
    if (rc && rc != -ENOTSUP && rc != -EBADMSG) return rc;
    if (rc == -EBADMSG) snprintf(s->twhy, sizeof s->twhy, "%s", tdc_errmsg());
    s->tk = k;
    return s->tstate = !rc ? 1 : rc == -ENOTSUP ? 0 : rc;
}

/* Shards [first, last] loaded and indexed, unless a span holding them is. */
static int unp_span(unp_state *s, uint32_t first, uint32_t last)
{
    if (s->span && first >= s->sfirst && last <= s->slast) return 0;
    unp_drop(s);
    int rc = arc_open_span(s->m, first, last, &s->span, &s->ids, &s->nids);
    if (rc) return rc;
    s->sfirst = first;
    s->slast = last;
    return (rc = idx_build(s->span, &s->x)) ? tdc_error_ctx(rc, "%s", s->m->path) : 0;
}

/* An archive of one shard fails whole where that shard does (no file is lost alone): its
 * shard loaded before anything is made, and kept for the files. 0 or the error. */
static int unp_one_shard(unp_state *s)
{
    int text = arc_shard_text(s->m, 0) ? unp_text(s, 0) : 0;
    return text < 0 ? text : text ? 0 : unp_span(s, 0, 0);
}

/* Write file f to its path (span_last: where a span loaded for it ends, to serve the files
 * after it too). A file whose content is damaged (a shard's checksums or decoding, or its
 * content hash) is reported, counted and not left behind; returns 0 then, or an error that
 * ends the unpack. */
static int unp_write(unp_state *s, const unp_file *f, uint32_t span_last)
{
    const arc_entry *e = &s->m->ents[f->ent];
    int whole = e->size && !f->parts; /* read from one span or text shard */
    int text =
        whole && f->first == f->last && arc_shard_text(s->m, f->first) ? unp_text(s, f->first) : 0;
    int64_t j = -1;
    if (text == -EBADMSG) {
        arc_damage_error(s->m, f->out, f->first, s->twhy);
        unp_lose(s, f->out);
        return 0;
    }
    if (text < 0) return text;
    int rc = whole && !text ? unp_span(s, f->first, span_last) : 0;
    if (rc) return rc;
    if (whole && !text) {
        if ((j = find_u32(s->ids, s->nids, f->ent)) < 0)
            return tdc_error(-EIO, "%s: not in the shards its run names", e->path);
        if (arc_entry_damaged(s->span, (uint32_t)j)) {
            unp_lose(s, f->out);
            return 0;
        }
    }
    const arc_entry *o = &s->m->ents[f->out]; /* another name of e's inode, or e */
    char *path = unp_path(s->dir, o, f->out);
    if (!path) return tdc_error(-ENOMEM, "out of memory");
    fio_long l;
    if ((rc = fio_long_path(path, &l))) {
        free(path);
        return rc;
    }
    int fd = open(l.p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        fio_long_end(&l);
        free(path);
        return rc;
    }
    hashck hc = {0};
    hashck_init(&hc, e->hash, e->size);
    if (f->parts)
        rc = parts_out(s->m, f->ent, e->path, 0, UINT64_MAX, 1, fd, path, 1);
    else if (text)
        rc = text_out(&s->t, f->ent, 0, e->size, 0, &hc, fd, path, 1);
    else if (whole)
        rc = copy_out(s->x, (uint32_t)j, 0, e->size, 0, fd, path, &hc, 1);
    hashck_free(&hc);
    /* the size, where the file ends in zeros skipped over (out_bytes) */
    if (!rc && ftruncate(fd, (off_t)e->size) < 0)
        rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
    if (close(fd) < 0 && !rc) rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
    if (rc == -EBADMSG) {
        if (!f->parts) tdc_error(rc, damaged_hash, o->path); /* parts_out said why */
        unlink(l.p);
        unp_lose(s, f->out);
        rc = 0;
    } else if (!rc) {
        rc = restore_meta_at(path, l.p, o);
    }
    fio_long_end(&l);
    free(path);
    return rc;
}

/* The first name of entry i's inode that is unpacked: the one made (with the content), the
 * others linked to it. */
static uint32_t unp_first(const unp_state *s, uint32_t i)
{
    uint32_t pos, n = arc_ino_links(s->m, s->m->ents[i].ino, &pos);
    for (uint32_t k = 0; k < n; k++)
        if (!s->sel || s->sel[s->m->byino[pos + k]]) return s->m->byino[pos + k];
    return i;
}

/* The tree's names other than regular files' content: directories (created now, their
 * metadata set last), symlinks and special files; each regular inode's first name goes to
 * *files. Returns 0 or an error; *skipped counts devices not created for want of root. */
static int unp_names(unp_state *s, unp_file *files, uint32_t *nfiles, uint64_t *skipped)
{
    const arc *a = s->m;
    int rc = 0;
    *nfiles = 0;
    for (uint32_t i = 1; i < a->nents && !rc; i++) {
        const arc_entry *e = &a->ents[i];
        if ((s->sel && !s->sel[i]) || (e->type != ARC_DIR && unp_first(s, i) != i))
            continue; /* not asked for, or a link */
        if (e->type == ARC_REG) {
            unp_file *f = &files[(*nfiles)++];
            int64_t ce = arc_ino_entry(a, e->ino);
            f->ent = ce >= 0 ? (uint32_t)ce : i;
            f->out = i;
            if (!(f->parts = arc_entry_parts(a, f->ent, &f->first, &f->last)))
                arc_entry_shards(a, f->ent, &f->first, &f->last);
            continue;
        }
        char *path = unp_path(s->dir, e, i);
        if (!path) return tdc_error(-ENOMEM, "out of memory");
        fio_long l;
        if ((rc = fio_long_path(path, &l))) {
        } else if (e->type == ARC_DIR) {
            if (mkdir(l.p, 0700) < 0) rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        } else if (e->type == ARC_LNK) {
            if (symlink(e->link, l.p) < 0)
                rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
            else
                rc = restore_meta_at(path, l.p, e);
        } else if (mknod(l.p, arc_mode_of_type(e->type) | 0600, (dev_t)e->rdev) == 0) {
            rc = restore_meta_at(path, l.p, e);
        } else if (errno == EPERM && (e->type == ARC_CHR || e->type == ARC_BLK)) {
            fprintf(stderr, "%s: warning: %s: device not created (needs root)\n", prog, path);
            ++*skipped;
        } else {
            rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        }
        fio_long_end(&l);
        free(path);
    }
    return rc;
}

/* Every name of a hard-linked inode after its first, linked to the first (never following
 * a symlink); then the directories' metadata, deepest first, so that their modes and times
 * stick. Names whose first is a device left out or a file lost are counted as those are. */
static int unp_links_and_dirs(unp_state *s, uint64_t *skipped)
{
    const arc *a = s->m;
    int rc = 0;
    for (uint32_t i = 1; i < a->nents && !rc; i++) {
        const arc_entry *e = &a->ents[i];
        uint32_t first = e->type == ARC_DIR ? i : unp_first(s, i);
        if (first == i || (s->sel && !s->sel[i])) continue;
        const arc_entry *f = &a->ents[first];
        char *path = unp_path(s->dir, e, i), *to = unp_path(s->dir, f, first);
        fio_long lp = {.fd = -1}, lt = {.fd = -1};
        if (!path || !to) {
            rc = tdc_error(-ENOMEM, "out of memory");
        } else if ((rc = fio_long_path(path, &lp)) || (rc = fio_long_path(to, &lt))) {
        } else if (linkat(AT_FDCWD, lt.p, AT_FDCWD, lp.p, 0) < 0) {
            /* The first name may be a device left out for want of root, or a lost file. */
            if (errno == ENOENT && (f->type == ARC_CHR || f->type == ARC_BLK))
                ++*skipped;
            else if (errno == ENOENT && s->lost[first])
                s->nlost++;
            else
                rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        }
        fio_long_end(&lp);
        fio_long_end(&lt);
        free(path);
        free(to);
    }
    for (uint32_t i = a->nents; i-- > 0 && !rc;) {
        const arc_entry *e = &a->ents[i];
        if (e->type != ARC_DIR || (s->sel && !s->sel[i])) continue;
        char *path = unp_path(s->dir, e, i);
        rc = path ? restore_meta(path, e) : tdc_error(-ENOMEM, "out of memory");
        free(path);
    }
    return rc;
}

/* DIR made, or found empty. */
static int unp_root(const char *dir)
{
    if (mkdir(dir, 0700) == 0) return 0;
    int err = errno;
    DIR *d = err == EEXIST ? opendir(dir) : NULL;
    if (err == EEXIST && !d) err = errno; /* not a directory (a file, a dangling link) */
    struct dirent *de;
    int empty = d != NULL;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = 0;
    if (d) closedir(d);
    if (empty) return 0;
    if (err == ENOENT) err = ENOTDIR; /* a link to nothing: there, but no directory */
    return tdc_error(err == EEXIST ? -EEXIST : -err, "%s: %s", dir,
                     err == EEXIST ? "directory is not empty" : strerror(err));
}

/* The writing of files, shared by unpack's threads: groups of files that begin in one shard,
 * taken in turn. */
typedef struct unp_job {
    const unp_file *files;
    const uint32_t *group; /* group g is files [group[g], group[g + 1]) */
    uint32_t ngroups;
    uint32_t next; /* the next group to take */
    int rc;        /* the first error, which stops every thread; its message in msg */
    char msg[1024];
    pthread_mutex_t mu;
} unp_job;

/* One thread's share: its own loaded span or text shard. */
typedef struct unp_worker {
    unp_job *job;
    unp_state s;
} unp_worker;

static void *unp_work(void *arg)
{
    unp_worker *w = arg;
    unp_job *j = w->job;
    const arc *a = w->s.m;
    for (;;) {
        uint32_t g = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (g >= j->ngroups || __atomic_load_n(&j->rc, __ATOMIC_RELAXED)) break;
        /* A span loaded for one file of the group holds every other one. */
        uint32_t lo = j->group[g], hi = j->group[g + 1], last = j->files[lo].first;
        for (uint32_t i = lo; i < hi; i++)
            if (!j->files[i].parts && a->ents[j->files[i].ent].size && j->files[i].last > last)
                last = j->files[i].last;
        int rc = 0;
        for (uint32_t i = lo; i < hi && !rc; i++)
            rc = unp_write(&w->s, &j->files[i], last);
        if (rc) {
            pthread_mutex_lock(&j->mu);
            if (!j->rc) {
                snprintf(j->msg, sizeof j->msg, "%s", tdc_errmsg());
                __atomic_store_n(&j->rc, rc, __ATOMIC_RELAXED);
            }
            pthread_mutex_unlock(&j->mu);
            break;
        }
    }
    unp_drop(&w->s);
    return NULL;
}

/* Write files[0, n) (in shard order) on `threads` threads, s (possibly holding a load
 * already) being the first one's state. Returns 0 or the first error, its message set. */
static int unp_files(unp_state *s, const unp_file *files, uint32_t n, unsigned threads)
{
    uint32_t *group = malloc(((size_t)n + 2) * sizeof *group), ng = 0;
    if (!group) return tdc_error(-ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        if (!i || files[i].first != files[i - 1].first) group[ng++] = i;
    group[ng] = n;
    unp_job j = {.files = files, .group = group, .ngroups = ng};
    pthread_mutex_init(&j.mu, NULL);
    if (threads > ng) threads = ng ? ng : 1;
    unp_worker *w = calloc(threads, sizeof *w);
    if (!w) {
        free(group);
        return tdc_error(-ENOMEM, "out of memory");
    }
    for (unsigned t = 0; t < threads; t++) {
        w[t].job = &j;
        w[t].s = t ? (unp_state){.m = s->m, .dir = s->dir, .tk = -1, .lost = s->lost} : *s;
    }
    par_run(threads, unp_work, w, sizeof *w);
    *s = w[0].s; /* what it held is dropped */
    for (unsigned t = 1; t < threads; t++)
        s->nlost += w[t].s.nlost;
    int rc = j.rc ? tdc_error(j.rc, "%s", j.msg) : 0;
    pthread_mutex_destroy(&j.mu);
    free(w);
    free(group);
    return rc;
}

/* s->sel for the PATHs given (each a file or directory of the archive, with all it holds) and
 * the directories that lead to them. -ENOENT with a message for a path not in the archive. */
static int unp_select(unp_state *s, char **paths, int n)
{
    const arc *a = s->m;
    /* per entry: bit 1 unpacked; bit 2 a PATH or inside one, which its entries inherit */
    unsigned char *sel = calloc((size_t)a->nents + 1, 1);
    uint32_t *parent = malloc(((size_t)a->nents + 1) * sizeof *parent);
    int rc = !sel || !parent || arc_parents(a, parent) ? tdc_error(-ENOMEM, "out of memory") : 0;
    for (int k = 0; k < n && !rc; k++) {
        uint32_t e;
        if ((rc = arc_lookup_path(a, paths[k], &e))) continue;
        sel[e] = 3;
        for (uint32_t d = parent[e];; d = parent[d]) { /* the way to it */
            sel[d] |= 1;
            if (!d) break;
        }
    }
    /* in path order a directory comes before what it holds */
    for (uint32_t i = 1; !rc && i < a->nents; i++)
        if (sel[parent[i]] & 2) sel[i] = 3;
    free(parent);
    if (rc) {
        free(sel);
        return rc;
    }
    s->sel = sel;
    return 0;
}

/* unpack's threads by default: one per CPU, at most this many, as each holds a shard's
 * span (tens of MB for a shard of 16 MiB) and more seldom pay on a disk. */
#define UNP_THREADS_MAX 4

int cmd_unpack(int argc, char **argv)
{
    long jobs = sysconf(_SC_NPROCESSORS_ONLN);
    int c;
    static const struct option longs[] = {{"jobs", required_argument, NULL, 'j'}, {0}};
    jobs = jobs < 1 ? 1 : jobs > UNP_THREADS_MAX ? UNP_THREADS_MAX : jobs;
    while ((c = getopt_long(argc, argv, "j:", longs, NULL)) != -1) {
        uint64_t n;
        if (c != 'j') return usage_err(usage_unpack, NULL);
        if (parse_uint(optarg, &n) || n < 1 || n > 1024)
            return usage_err(usage_unpack, "--jobs takes a number from 1 to 1024");
        jobs = (int)n;
    }
    if (optind + 2 > argc) return usage_err(usage_unpack, "need ARCHIVE and DIR");
    const char *path = argv[optind];
    unp_state s = {.dir = argv[optind + 1], .tk = -1};
    int rc = arc_open_meta(path, &s.m); /* the file table; shards load as files need them */
    if (rc) return fail(rc);
    note_journal(path, s.m);
    const arc *a = s.m;
    unp_file *files = malloc(((size_t)a->nents + 1) * sizeof *files);
    uint32_t n = 0;
    uint64_t skipped = 0; /* names not created: devices without root, and their links */
    if (!files || !(s.lost = calloc((size_t)a->nents + 1, 1)))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc && optind + 2 < argc) rc = unp_select(&s, argv + optind + 2, argc - optind - 2);
    if (!rc && a->nshards == 1) rc = unp_one_shard(&s);
    if (!rc) rc = unp_root(s.dir);
    if (!rc) rc = unp_names(&s, files, &n, &skipped);
    if (!rc) qsort(files, n, sizeof *files, unp_cmp);
    if (!rc) rc = unp_files(&s, files, n, a->nshards == 1 ? 1 : (unsigned)jobs);
    unp_drop(&s);
    if (!rc) rc = unp_links_and_dirs(&s, &skipped);
    if (!rc && s.nlost)
        rc = tdc_error(-EBADMSG, "%llu files not restored: their content lies in damaged shards",
                       (unsigned long long)s.nlost);
    if (!rc && skipped)
        rc = tdc_error(-EPERM, "%llu device names not created: run as root to restore them",
                       (unsigned long long)skipped);
    free(files);
    free(s.lost);
    free((void *)s.sel);
    arc_free(s.m);
    return rc ? fail(rc) : EX_OK;
}
