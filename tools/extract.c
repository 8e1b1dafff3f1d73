/* extract.c: the tadoc commands that read files out of an archive (cat, extract, unpack). Each
 * loads only the shards the files it writes lie in, one span at a time, so that its memory
 * follows the largest shard, not the archive. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../engine/base/buf.h"
#include "../engine/base/fio.h"
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
        !arc_open_text(*a, first, -1, t)) {
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

/* Write bytes [off, off + len) of meta's entry ce (fewer at its end), which text shard t
 * holds (arc_open_text), into fd (named `to` in messages), through hc as copy_out does (at:
 * where t's bytes begin in the file). 0, -EBADMSG (no message) for a hash that differs, or a
 * write's error. */
static int text_out(const arc_text *t, uint32_t ce, uint64_t off, uint64_t len, uint64_t at,
                    hashck *hc, int fd, const char *to)
{
    int64_t i = find_u32(t->ids, t->nids, ce);
    if (i < 0) return tdc_error(-EIO, "entry %u: not in its shard", ce);
    const unsigned char *p;
    size_t n = arc_text_bytes(t, (uint32_t)i, off, len < SIZE_MAX ? (size_t)len : SIZE_MAX, &p);
    if (hc && hashck_feed(hc, at + off, p, n)) return -EBADMSG;
    return n ? fio_write_all(fd, p, n, to) : 0;
}

/* Stream `len` bytes of entry `e` from `off` into fd. With hc, each block goes through the
 * content-hash check first, at its offset in the file plus `at` (where the entry is a part of
 * the file): -EBADMSG (no message) when the file's hash differs. */
static int copy_out(const idx *x, uint32_t e, uint64_t off, uint64_t len, uint64_t at, int fd,
                    const char *name, hashck *hc)
{
    static unsigned char blk[CHUNK];
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
        if ((rc = fio_write_all(fd, blk, (size_t)k, name))) break;
        off += (uint64_t)k;
        len -= (uint64_t)k;
    }
    idx_cursor_free(&c);
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
                     int fd, const char *to)
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
        if (arc_shard_text(m, k) && !arc_open_text(m, k, ce, &t)) { /* checked above */
            if ((rc = text_out(&t, ce, lo, hi - lo, at, check ? &hc : NULL, fd, to)) == -EBADMSG)
                tdc_error(rc, damaged_hash, name);
            arc_text_free(&t);
            continue;
        }
        arc *p = NULL;
        idx *x = NULL;
        if (!(rc = arc_open_part(m, ce, k, &p)) && !(rc = index_for(p, hi - lo, n, &x)) &&
            !(rc = arc_entry_damaged(p, 0)) &&
            (rc = copy_out(x, 0, lo, hi - lo, at, fd, to, check ? &hc : NULL)) == -EBADMSG)
            tdc_error(rc, damaged_hash, name);
        close_all(p, x);
    }
    hashck_free(&hc);
    return rc;
}

int cmd_cat(int argc, char **argv)
{
    if (argc != 3) return usage_err(usage_cat, "need ARCHIVE and PATH");
    arc *a;
    idx *x;
    uint32_t e;
    arc_text t;
    int rc = open_file(argv[1], argv[2], UINT64_MAX, &a, &x, &e, &t);
    if (rc) return fail(rc);
    if (t.payload) {
        hashck hc = {0};
        hashck_init(&hc, a->ents[e].hash, a->ents[e].size);
        if ((rc = text_out(&t, e, 0, a->ents[e].size, 0, &hc, 1, "stdout")) == -EBADMSG)
            tdc_error(rc, damaged_hash, argv[2]);
        hashck_free(&hc);
        arc_text_free(&t);
    } else if (!x) {
        rc = parts_out(a, e, argv[2], 0, UINT64_MAX, 1, 1, "stdout");
    } else if (!(rc = arc_entry_damaged(a, e))) {
        /* The content's hash is the archived one of the inode's first name. */
        int64_t ce = arc_ino_entry(a, a->ents[e].ino);
        hashck hc = {0};
        if (ce >= 0) hashck_init(&hc, a->ents[ce].hash, a->ents[ce].size);
        rc = copy_out(x, e, 0, a->ents[e].size, 0, 1, "stdout", &hc);
        hashck_free(&hc);
        if (rc == -EBADMSG) tdc_error(rc, damaged_hash, argv[2]);
    }
    close_all(a, x);
    return rc ? fail(rc) : EX_OK;
}

const char usage_extract[] =
    "usage: tadoc extract ARCHIVE PATH OFFSET LENGTH\n"
    "\n"
    "Write LENGTH bytes of PATH starting at byte OFFSET (fewer at end of file, none past it).\n"
    "Only the rules on the way to OFFSET are visited: the file is never expanded whole.\n";

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-') return -1;
    *v = strtoull(s, &end, 0);
    return *end || errno ? -1 : 0;
}

int cmd_extract(int argc, char **argv)
{
    uint64_t off, len;
    if (argc != 5) return usage_err(usage_extract, "need ARCHIVE PATH OFFSET LENGTH");
    if (parse_u64(argv[3], &off) || parse_u64(argv[4], &len))
        return usage_err(usage_extract, "OFFSET and LENGTH must be non-negative integers");
    arc *a;
    idx *x;
    uint32_t e;
    arc_text t;
    int rc = open_file(argv[1], argv[2], len, &a, &x, &e, &t);
    if (rc) return fail(rc);
    if (t.payload) {
        rc = text_out(&t, e, off, len, 0, NULL, 1, "stdout");
        arc_text_free(&t);
    } else if (!x) {
        rc = parts_out(a, e, argv[2], off, len, 0, 1, "stdout");
    } else if (!(rc = arc_entry_damaged(a, e))) {
        rc = copy_out(x, e, off, len, 0, 1, "stdout", NULL);
    }
    close_all(a, x);
    return rc ? fail(rc) : EX_OK;
}

/* ---------------- unpack ---------------- */

const char usage_unpack[] =
    "usage: tadoc unpack ARCHIVE DIR\n"
    "\n"
    "Recreate the archived tree under DIR, which must not exist or be empty. Modes and times\n"
    "are restored; owners too when run as root. Devices need root: without it each one is\n"
    "reported and left out, and the exit status is 1. A file with content in a damaged shard\n"
    "(or not matching its hash) is reported and left out, the rest restored, exit status 3.\n"
    "Files are written shard by shard, so memory follows the largest shard, not the archive.\n";

static int restore_meta(const char *path, const arc_entry *e)
{
    for (uint32_t k = 0; k < e->nxattrs; k++) {
        char name[300];
        snprintf(name, sizeof name, "user.%s", e->xattrs[k].name);
        if (lsetxattr(path, name, e->xattrs[k].val, e->xattrs[k].len, 0) < 0 && errno != ENOTSUP &&
            errno != EPERM)
            return tdc_error(-errno, "%s: set %s: %s", path, name, strerror(errno));
    }
    struct timespec ts[2] = {{e->mtime_sec, e->mtime_nsec}, {e->mtime_sec, e->mtime_nsec}};
    if (geteuid() == 0 && lchown(path, e->uid, e->gid) < 0)
        return tdc_error(-errno, "%s: chown: %s", path, strerror(errno));
    if (e->type != ARC_LNK && chmod(path, e->mode) < 0)
        return tdc_error(-errno, "%s: chmod: %s", path, strerror(errno));
    if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return tdc_error(-errno, "%s: set times: %s", path, strerror(errno));
    return 0;
}

/* The files unpack writes content to: the first name of each regular inode, with the shards
 * its content lies in. They are written in shard order, not path order, so that each shard is
 * loaded about once (a span or a text shard at a time) however pack grouped the files. */
typedef struct unp_file {
    uint32_t first, last, ent;
    int parts; /* cut over shards of its own (arc_entry_parts): written a part at a time */
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
    arc *m;          /* the archive: its file table alone (arc_open_meta) */
    const char *dir; /* the tree's new root */
    arc *span;       /* shards [sfirst, slast] (arc_open_span), or NULL */
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
    int rc = arc_open_text(s->m, k, -1, &s->t);
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
        arc_damage_error(s->m, f->ent, f->first, s->twhy);
        unp_lose(s, f->ent);
        return 0;
    }
    if (text < 0) return text;
    int rc = whole && !text ? unp_span(s, f->first, span_last) : 0;
    if (rc) return rc;
    if (whole && !text) {
        if ((j = find_u32(s->ids, s->nids, f->ent)) < 0)
            return tdc_error(-EIO, "%s: not in the shards its run names", e->path);
        if (arc_entry_damaged(s->span, (uint32_t)j)) {
            unp_lose(s, f->ent);
            return 0;
        }
    }
    char *path = unp_path(s->dir, e, f->ent);
    if (!path) return tdc_error(-ENOMEM, "out of memory");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    hashck hc = {0};
    hashck_init(&hc, e->hash, e->size);
    if (f->parts)
        rc = parts_out(s->m, f->ent, e->path, 0, UINT64_MAX, 1, fd, path);
    else if (text)
        rc = text_out(&s->t, f->ent, 0, e->size, 0, &hc, fd, path);
    else if (whole)
        rc = copy_out(s->x, (uint32_t)j, 0, e->size, 0, fd, path, &hc);
    hashck_free(&hc);
    if (close(fd) < 0 && !rc) rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
    if (rc == -EBADMSG) {
        if (!f->parts) tdc_error(rc, damaged_hash, e->path); /* parts_out said why */
        unlink(path);
        unp_lose(s, f->ent);
        rc = 0;
    } else if (!rc) {
        rc = restore_meta(path, e);
    }
    free(path);
    return rc;
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
        if (e->type != ARC_DIR && arc_ino_entry(a, e->ino) != (int64_t)i) continue; /* a link */
        if (e->type == ARC_REG) {
            unp_file *f = &files[(*nfiles)++];
            f->ent = i;
            if (!(f->parts = arc_entry_parts(a, i, &f->first, &f->last)))
                arc_entry_shards(a, i, &f->first, &f->last);
            continue;
        }
        char *path = unp_path(s->dir, e, i);
        if (!path) return tdc_error(-ENOMEM, "out of memory");
        if (e->type == ARC_DIR) {
            if (mkdir(path, 0700) < 0) rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        } else if (e->type == ARC_LNK) {
            if (symlink(e->link, path) < 0)
                rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
            else
                rc = restore_meta(path, e);
        } else if (mknod(path, arc_mode_of_type(e->type) | 0600, (dev_t)e->rdev) == 0) {
            rc = restore_meta(path, e);
        } else if (errno == EPERM && (e->type == ARC_CHR || e->type == ARC_BLK)) {
            fprintf(stderr, "%s: warning: %s: device not created (needs root)\n", prog, path);
            ++*skipped;
        } else {
            rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        }
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
        int64_t first = arc_ino_entry(a, e->ino);
        if (e->type == ARC_DIR || first == (int64_t)i) continue;
        const arc_entry *f = &a->ents[first];
        char *path = unp_path(s->dir, e, i), *to = unp_path(s->dir, f, (uint32_t)first);
        if (!path || !to) {
            rc = tdc_error(-ENOMEM, "out of memory");
        } else if (linkat(AT_FDCWD, to, AT_FDCWD, path, 0) < 0) {
            /* The first name may be a device left out for want of root, or a lost file. */
            if (errno == ENOENT && (f->type == ARC_CHR || f->type == ARC_BLK))
                ++*skipped;
            else if (errno == ENOENT && s->lost[first])
                s->nlost++;
            else
                rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        }
        free(path);
        free(to);
    }
    for (uint32_t i = a->nents; i-- > 0 && !rc;) {
        const arc_entry *e = &a->ents[i];
        if (e->type != ARC_DIR) continue;
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
    struct dirent *de;
    int empty = d != NULL;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) empty = 0;
    if (d) closedir(d);
    if (empty) return 0;
    return tdc_error(err == EEXIST ? -EEXIST : -err, "%s: %s", dir,
                     err == EEXIST ? "directory is not empty" : strerror(err));
}

int cmd_unpack(int argc, char **argv)
{
    if (argc != 3) return usage_err(usage_unpack, "need ARCHIVE and DIR");
    unp_state s = {.dir = argv[2], .tk = -1};
    int rc = arc_open_meta(argv[1], &s.m); /* the file table; shards load as files need them */
    if (rc) return fail(rc);
    note_journal(argv[1], s.m);
    const arc *a = s.m;
    unp_file *files = malloc(((size_t)a->nents + 1) * sizeof *files);
    uint32_t n = 0;
    uint64_t skipped = 0; /* names not created: devices without root, and their links */
    if (!files || !(s.lost = calloc((size_t)a->nents + 1, 1)))
        rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) rc = unp_root(s.dir);
    if (!rc) rc = unp_names(&s, files, &n, &skipped);
    if (!rc) qsort(files, n, sizeof *files, unp_cmp);
    for (uint32_t i = 0; i < n && !rc;) {
        /* The files that begin in one shard: a span loaded for one of them holds them all. */
        uint32_t end = i, last = files[i].first;
        for (; end < n && files[end].first == files[i].first; end++)
            if (!files[end].parts && a->ents[files[end].ent].size && files[end].last > last)
                last = files[end].last;
        for (; i < end && !rc; i++)
            rc = unp_write(&s, &files[i], last);
    }
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
    arc_free(s.m);
    return rc ? fail(rc) : EX_OK;
}
