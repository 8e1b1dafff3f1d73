/* fsmodel: a randomized model test of a whole tree on a mounted archive.
 *
 * usage: fsmodel SEED OPS MODELDIR MOUNTPOINT [ARCHIVE]
 *        fsmodel -c [-t] MODELDIR OTHERDIR
 * Applies OPS random operations, chosen from SEED, to MODELDIR (a plain directory on a local
 * file system: the model) and to MOUNTPOINT (a tadocfs mount), and checks that each gives
 * the same result (return value or errno) on both: create, write at random offsets (also
 * past EOF, leaving holes), truncate up and down, rename (plain, over existing targets,
 * RENAME_NOREPLACE, RENAME_EXCHANGE), link (to files, symlinks, FIFOs, sockets, devices),
 * unlink, mkdir, rmdir, chmod, chown, utimensat, setxattr and removexattr (user.*), mknod
 * (FIFO, character and block devices with varied major and minor), mkfifo, bind() of a unix
 * socket and symlink; and a file kept open while it is unlinked, renamed or linked (and
 * the mount perhaps compacted), then written through the descriptor and read back. Names
 * are mostly one letter of six, and new paths one to three names deep, so EEXIST, ENOENT,
 * ENOTEMPTY, ENOTDIR and EISDIR come often; now and then a name is odd (see rand_name).
 * Above BIGTREE entries only removals, renames and truncates are chosen.
 *
 * Every few operations (the period comes from the seed) and at the end it compares the two
 * trees entry by entry: names, type, mode, uid, gid, size (not of directories: that belongs
 * to the host file system), link count, rdev, user.* attributes (not the computed
 * user.tadoc.*), symlink targets, the bytes of regular files, and which names are hard links
 * of one inode. mtime is compared only where it was set explicitly: utimensat with explicit
 * times marks the model's inode, and any operation that may change its mtime implicitly
 * (a write or truncate of it or through a symlink to it; a create, remove or rename in it or
 * of it) clears the mark, as implicit times differ by nanoseconds between the two file
 * systems. chmod, chown and xattr changes keep it (they change ctime only).
 *
 * Also every few operations it compacts: online (setxattr user.tadoc.compact on the mount)
 * or, when ARCHIVE is given, offline: fusermount3 -u, `$TADOC compact ARCHIVE`,
 * `$TADOC verify ARCHIVE`, and `$TADOCFS ARCHIVE MOUNTPOINT` again (TADOC and TADOCFS from
 * the environment; mount options from FSMODEL_MOUNT_OPTS); or it only unmounts and mounts
 * again, so the journal is replayed. The trees are compared after each. The kernel keeps
 * tadocfs's entries and attributes for a day; FSMODEL_DROP_CACHES=1 drops them (globally:
 * /proc/sys/vm/drop_caches) after each online compaction.
 *
 * FSMODEL_AS=UID:GID[,UID:GID...] runs each operation with one of those effective ids (the
 * two roots must let them in, and the mount needs allow_other); comparisons and compactions
 * run as root.
 *
 * `fsmodel -c [-t] MODELDIR OTHERDIR` only compares two trees (mtimes only with -t): the
 * model with an unpacked archive, or with a mount of the model packed; with -t a mount of an
 * archive with the archive unpacked.
 *
 * Never opens anything but regular files and directories (device nodes may name real
 * devices), and symlink targets contain no "..", so nothing outside the two trees is reached.
 * On the first difference prints the seed, the operation number, the last operations and the
 * difference, and exits 1; exits 0 with a summary otherwise. */

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAXENT 4096 /* entries in one walk of the model */
#define LOGN 40     /* operations kept for the failure report */
#define BIGTREE 60  /* above this many entries only removals and renames are chosen */
#define XNAME 256   /* an attribute name and its NUL */

static uint64_t rng, seed;
static long opno;
static const char *root[2]; /* [0] the model directory, [1] the mountpoint */
static const char *archive;
static char oplog[LOGN][600];
static long nlog;
static int compare_only; /* fsmodel -c */
static int all_mtimes;   /* fsmodel -c -t */

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t below(uint64_t n)
{
    return n ? next() % n : 0;
}

/* ---------------- failure report ---------------- */

/* in with newlines, backslashes and other bytes outside printable ASCII as C escapes (names
 * may hold them), so that each report line is one line. */
static void escape(char *out, size_t n, const char *in)
{
    size_t w = 0;
    for (; *in && w + 5 < n; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '\\')
            w += (size_t)snprintf(out + w, n - w, "\\\\");
        else if (c == '\n')
            w += (size_t)snprintf(out + w, n - w, "\\n");
        else if (c < 0x20 || c >= 0x7f)
            w += (size_t)snprintf(out + w, n - w, "\\x%02x", c);
        else
            out[w++] = (char)c;
    }
    out[w] = 0;
}

static void logop(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logop(const char *fmt, ...)
{
    char raw[sizeof oplog[0]];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    escape(oplog[nlog++ % LOGN], sizeof oplog[0], raw);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    char raw[2048], msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    escape(msg, sizeof msg, raw);
    if (compare_only) {
        fprintf(stderr, "fsmodel: %s and %s differ: %s\n", root[0], root[1], msg);
        exit(1);
    }
    fprintf(stderr, "fsmodel: seed %llu, after operation %ld: %s", (unsigned long long)seed, opno,
            msg);
    fprintf(stderr, "\nlast operations (model result / mount result):\n");
    for (long i = nlog > LOGN ? nlog - LOGN : 0; i < nlog; i++)
        fprintf(stderr, "  %s\n", oplog[i % LOGN]);
    exit(1);
}

static void full(char *out, int side, const char *rel)
{
    if (snprintf(out, PATH_MAX, "%s/%s", root[side], rel) >= PATH_MAX) fail("path too long");
}

/* ---------------- explicit mtimes ---------------- */

/* Model inodes whose mtime was set by utimensat with explicit times and not changed since. */
static ino_t expl[MAXENT];
static size_t nexpl;

static void expl_clear(ino_t ino)
{
    for (size_t i = 0; i < nexpl; i++)
        if (expl[i] == ino) expl[i--] = expl[--nexpl];
}

static int expl_has(ino_t ino)
{
    for (size_t i = 0; i < nexpl; i++)
        if (expl[i] == ino) return 1;
    return 0;
}

static void expl_set(ino_t ino)
{
    if (!expl_has(ino) && nexpl < MAXENT) expl[nexpl++] = ino;
}

/* An operation on rel may change the mtime of rel's inode (or, as truncate follows a symlink,
 * of what it points to) and of its directory (reached through symlinks): forget them all.
 * Called before (the inode that goes away) and after (the one that came) an operation. */
static void touched(const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    full(p, 0, rel);
    if (!lstat(p, &st)) expl_clear(st.st_ino);
    if (!stat(p, &st)) expl_clear(st.st_ino);
    char *slash = strrchr(p, '/');
    *slash = 0;
    if (!stat(p, &st)) expl_clear(st.st_ino);
}

/* ---------------- the model's entries ---------------- */

static char ents[MAXENT][1024];
static mode_t etype[MAXENT];
static size_t nent, ndir;
static size_t dirs[MAXENT]; /* indexes into ents of the directories */

static int cmpstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in directory path (no "." or ".."); count into *n. NULL when it can't open. */
static char **names_of(const char *path, size_t *n)
{
    DIR *d = opendir(path);
    if (!d) return NULL;
    size_t cap = 16;
    char **v = malloc(cap * sizeof *v); /* not NULL when empty: NULL means unreadable */
    struct dirent *e;
    if (!v) fail("out of memory");
    *n = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (*n == cap) {
            cap *= 2;
            v = realloc(v, cap * sizeof *v);
            if (!v) fail("out of memory");
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof *v, cmpstr);
    return v;
}

static void free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Every entry under the model's rel, depth first in name order (deterministic for a seed). */
static void walk(const char *rel)
{
    char p[PATH_MAX];
    size_t n;
    full(p, 0, rel);
    char **v = names_of(p, &n);
    for (size_t i = 0; v && i < n && nent < MAXENT; i++) {
        char r[PATH_MAX];
        struct stat st;
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", v[i]);
        full(p, 0, r);
        if (strlen(r) >= sizeof ents[0] || lstat(p, &st)) continue;
        strcpy(ents[nent], r);
        etype[nent] = st.st_mode & S_IFMT;
        if (S_ISDIR(st.st_mode)) {
            dirs[ndir++] = nent++;
            walk(r);
        } else {
            nent++;
        }
    }
    free_names(v, n);
}

static const char letters[] = "abcdef";

/* A name: mostly one letter, sometimes one that sorts around '/' ("a-b" < "a.b" < "a/b"),
 * has a space, newline, backslash or UTF-8, or is as long as a name may be. No leading
 * dot: .search and the analytics (.sort, ...) are names every directory resolves. */
static const char *rand_name(void)
{
    static const char *const odd[] = {"a b",  "a-b", "a.b", "a\nb", "\xc3\xa9t\xc3\xa9",
                                      "a\\b", "-",   "a=b", "*?",   "A",
                                      "a:b",  "a0"};
    static char one[2], longest[256];
    if (!below(12)) {
        uint64_t k = below(sizeof odd / sizeof odd[0] + 1);
        if (k < sizeof odd / sizeof odd[0]) return odd[k];
        memset(longest, 'n', 255);
        return longest;
    }
    one[0] = letters[below(sizeof letters - 1)];
    return one;
}

/* A path for an operation: an existing entry, a new name in an existing directory, or up to
 * three random names deep (which may cross a non-directory or a missing one). */
static void pick(char *out)
{
    uint64_t k = below(100);
    if (k < 50 && nent) {
        strcpy(out, ents[below(nent)]);
    } else if (k < 85 && ndir && below(4)) {
        const char *d = ents[dirs[below(ndir)]];
        snprintf(out, PATH_MAX, "%s/%s", d, rand_name());
    } else if (k < 85) {
        strcpy(out, rand_name());
    } else {
        int depth = 1 + (int)below(3);
        out[0] = 0;
        for (int i = 0; i < depth; i++) {
            if (i) strcat(out, "/");
            strcat(out, rand_name());
        }
    }
}

/* An existing entry that is a directory (dir 1) or not (dir 0) when there is one, for rmdir
 * and link, which otherwise mostly fail with ENOENT or ENOTDIR; else any path. */
static void pick_kind_of(char *out, int dir)
{
    size_t n = 0, at = 0;
    for (size_t i = 0; i < nent; i++)
        n += !S_ISDIR(etype[i]) ^ dir;
    if (!n || !below(4)) {
        pick(out);
        return;
    }
    size_t k = below(n);
    for (size_t i = 0; i < nent; i++)
        if ((!S_ISDIR(etype[i]) ^ dir) && at++ == k) strcpy(out, ents[i]);
}

/* Type of the model's entry at rel (0 when there is none). */
static mode_t model_type(const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    full(p, 0, rel);
    return lstat(p, &st) ? 0 : st.st_mode & S_IFMT;
}

/* ---------------- operations ---------------- */

/* One operation's arguments; both sides get the same. */
typedef struct op {
    const char *name;
    char a[PATH_MAX], b[PATH_MAX], target[PATH_MAX]; /* target: a symlink's or an xattr name */
    unsigned flags, mode;
    uid_t uid;
    gid_t gid;
    dev_t rdev;
    off_t off, len;
    struct timespec ts[2];
    unsigned char *data;
} op;

typedef long (*op_fn)(int side, const op *o);

static long err(long rc)
{
    return rc < 0 ? -errno : rc;
}

/* Open, create and close a regular file (flags: O_EXCL and O_TRUNC or not). */
static long do_create(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    int fd = open(p, O_CREAT | O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | o->flags, o->mode);
    if (fd < 0) return -errno;
    return close(fd) ? -errno : 0;
}

/* pwrite of len bytes at off to a regular file (created when flags has O_CREAT). */
static long do_write(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    int fd = open(p, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | o->flags, 0644);
    if (fd < 0) return -errno;
    long rc = err(pwrite(fd, o->data, (size_t)o->len, o->off));
    if (close(fd) && rc >= 0) rc = -errno;
    return rc;
}

static long do_truncate(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(truncate(p, o->len));
}

static long do_rename(int side, const op *o)
{
    char p[PATH_MAX], q[PATH_MAX];
    full(p, side, o->a);
    full(q, side, o->b);
    return err(renameat2(AT_FDCWD, p, AT_FDCWD, q, o->flags));
}

static long do_link(int side, const op *o)
{
    char p[PATH_MAX], q[PATH_MAX];
    full(p, side, o->a);
    full(q, side, o->b);
    return err(link(p, q));
}

static long do_unlink(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(unlink(p));
}

static long do_mkdir(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(mkdir(p, o->mode));
}

static long do_rmdir(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(rmdir(p));
}

static long do_chmod(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(chmod(p, o->mode));
}

/* chown (follows a symlink) or lchown (flags 1). */
static long do_chown(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(o->flags ? lchown(p, o->uid, o->gid) : chown(p, o->uid, o->gid));
}

static long do_utimes(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(utimensat(AT_FDCWD, p, o->ts, (int)o->flags));
}

static long do_setxattr(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(lsetxattr(p, o->target, o->data, (size_t)o->len, (int)o->flags));
}

static long do_removexattr(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(lremovexattr(p, o->target));
}

/* mknod of a FIFO or a device (mode has the type), or mkfifo (flags 1). */
static long do_mknod(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(o->flags ? mkfifo(p, o->mode & 07777) : mknod(p, o->mode, o->rdev));
}

static long do_symlink(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    return err(symlink(o->target, p));
}

/* bind() a unix socket: from inside its directory, as sun_path holds only 108 bytes. */
static long do_bind(int side, const op *o)
{
    char p[PATH_MAX];
    full(p, side, o->a);
    char *slash = strrchr(p, '/');
    *slash = 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(slash + 1) >= sizeof sa.sun_path) return -ENAMETOOLONG; /* never truncated */
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", slash + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) fail("socket: %s", strerror(errno));
    long rc = chdir(p) ? -errno : err(bind(s, (struct sockaddr *)&sa, sizeof sa));
    close(s);
    if (chdir("/")) fail("chdir /: %s", strerror(errno));
    return rc;
}

/* What the descriptor of do_held saw at the end, per side: compared after both ran. */
static struct stat held_st[2];
static unsigned char *held_bytes[2];
static size_t held_n[2];

static void become_user(int on);

/* Online compaction while fd is open: it must succeed, except that a removed file still
 * open makes it refuse with EBUSY (as documented: compact again once it is closed). An
 * earlier removed file whose release is still on its way counts too: retry a little. */
static void compact_holding(int fd, const char *rel)
{
    struct stat st;
    for (int tries = 0;; tries++) {
        become_user(0); /* compactions run as root */
        int rc = setxattr(root[1], "user.tadoc.compact", "1", 1, 0), e = errno;
        become_user(1);
        if (!rc) return;
        if (fstat(fd, &st)) fail("fstat: %s", strerror(errno));
        if (e == EBUSY && st.st_nlink == 0) return;
        if (e != EBUSY || tries == 100)
            fail("online compaction with %s open (%lu links): %s", rel, (unsigned long)st.st_nlink,
                 strerror(e));
        usleep(20000);
    }
}

/* A file kept open across a namespace change: open rel a, then unlink it (mode 0), rename it
 * to b (1) or link it as b (2), on the mount with flags 1 compact online, then pwrite
 * through the descriptor, fstat it and read it back whole. Returns the first failure, else
 * the namespace change's result. */
static long do_held(int side, const op *o)
{
    char p[PATH_MAX], q[PATH_MAX];
    full(p, side, o->a);
    full(q, side, o->b);
    free(held_bytes[side]);
    held_bytes[side] = NULL;
    held_n[side] = 0;
    int fd = open(p, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    long rc = err(o->mode == 0 ? unlink(p) : o->mode == 1 ? rename(p, q) : link(p, q));
    if (side == 1 && o->flags) compact_holding(fd, o->a);
    long w = err(pwrite(fd, o->data, (size_t)o->len, o->off));
    if (fstat(fd, &held_st[side])) fail("fstat: %s", strerror(errno));
    held_bytes[side] = malloc((size_t)held_st[side].st_size + 1);
    if (!held_bytes[side]) fail("out of memory");
    ssize_t k = pread(fd, held_bytes[side], (size_t)held_st[side].st_size, 0);
    held_n[side] = k < 0 ? 0 : (size_t)k;
    if (k < 0) w = -errno;
    if (close(fd) && w >= 0) w = -errno;
    return rc < 0 ? rc : w < 0 ? w : rc;
}

/* After do_held on both sides: the open file's link count, size and bytes must agree. */
static void held_compare(const char *d)
{
    if (held_st[0].st_nlink != held_st[1].st_nlink || held_st[0].st_size != held_st[1].st_size)
        fail("%s: open file: model nlink %lu size %ld, mount nlink %lu size %ld", d,
             (unsigned long)held_st[0].st_nlink, (long)held_st[0].st_size,
             (unsigned long)held_st[1].st_nlink, (long)held_st[1].st_size);
    if (held_n[0] != held_n[1] || memcmp(held_bytes[0], held_bytes[1], held_n[0]))
        fail("%s: open file: read back %zu bytes from the model, %zu from the mount%s", d,
             held_n[0], held_n[1], held_n[0] == held_n[1] ? " (different bytes)" : "");
}

/* ---------------- choosing an operation ---------------- */

static unsigned char wbuf[70000];

static void fill(unsigned char *p, size_t n)
{
    static const char al[] = "abcdefghij klmnop\nqrst_uvwxyz0123 ,.;";
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)al[below(sizeof al - 1)];
}

static off_t model_size(const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    full(p, 0, rel);
    return stat(p, &st) ? 0 : st.st_size;
}

static unsigned rand_mode(void)
{
    static const unsigned common[] = {0644, 0755, 0600, 0444, 0700, 0640, 0000, 0777};
    if (below(5)) return common[below(8)];
    return (unsigned)below(010000); /* setuid, setgid and sticky bits too */
}

static const uid_t ids[] = {0, 1, 1000, 1234, 65534};

/* Explicit times from 1970 to about 2038, with nanoseconds (or UTIME_OMIT on one). */
static void rand_times(struct timespec *ts)
{
    for (int i = 0; i < 2; i++) {
        ts[i].tv_sec = (time_t)below(2100000000);
        ts[i].tv_nsec = below(3) ? (long)below(1000000000) : 0;
    }
    if (!below(8)) ts[below(2)].tv_nsec = UTIME_OMIT;
}

/* A symlink target into t (PATH_MAX bytes): an entry of the tree, a letter, or a long one. */
static void rand_target(char *t)
{
    uint64_t k = below(10);
    if (k < 5 && nent) {
        strcpy(t, ents[below(nent)]);
    } else if (k < 9) {
        t[0] = letters[below(sizeof letters - 1)];
        t[1] = 0;
    } else {
        size_t n = 1 + below(300); /* a long target; no "..", nothing outside the tree */
        memset(t, 'x', n);
        for (size_t i = 8; i < n; i += 9)
            t[i] = '/';
        t[n] = 0;
    }
}

/* An attribute name: user.a, user.b or user.c mostly; sometimes one of 255 bytes (the
 * longest there is) or one with a space and a control byte. */
static void xname(char *t)
{
    uint64_t k = below(12);
    if (k == 0) {
        memcpy(t, "user.", 5);
        memset(t + 5, 'x', 250);
        t[255] = 0;
    } else if (k == 1) {
        strcpy(t, "user.a b\001");
    } else {
        sprintf(t, "user.%c", letters[below(3)]);
    }
}

/* Device numbers: small and large majors and minors (12 and 20 bits). */
static dev_t rand_dev(void)
{
    unsigned maj = below(2) ? (unsigned)below(16) : (unsigned)below(4096);
    unsigned min = below(2) ? (unsigned)below(256) : (unsigned)below(1u << 20);
    return makedev(maj, min);
}

enum {
    K_CREATE,
    K_WRITE,
    K_TRUNC,
    K_RENAME,
    K_LINK,
    K_UNLINK,
    K_MKDIR,
    K_RMDIR,
    K_CHMOD,
    K_CHOWN,
    K_UTIMES,
    K_SETX,
    K_REMX,
    K_MKNOD,
    K_FIFO,
    K_BIND,
    K_SYMLINK,
    K_HELD,
    K_N
};
static const unsigned weight[K_N] = {8, 14, 6, 10, 8, 6, 6, 4, 4, 4, 6, 5, 3, 4, 2, 2, 5, 4};
static long counts[K_N];

/* Fill o for kind k; returns its function, or NULL to skip (a write to a non-regular file). */
static op_fn choose(int k, op *o)
{
    memset(o, 0, sizeof *o);
    pick(o->a);
    o->data = wbuf;
    switch (k) {
    case K_CREATE:
        o->name = "create";
        o->flags = below(3) ? 0 : O_EXCL;
        if (below(3)) o->flags |= O_TRUNC; /* an existing file opened for writing is emptied */
        o->mode = rand_mode();
        /* O_CREAT opens an existing entry: only regular files and directories are safe. */
        if (model_type(o->a) && !S_ISREG(model_type(o->a)) && !S_ISDIR(model_type(o->a)))
            o->flags = O_EXCL;
        return do_create;
    case K_WRITE: {
        mode_t t = model_type(o->a);
        if (t && !S_ISREG(t)) return NULL; /* never open a device, FIFO or socket */
        o->name = "write";
        o->flags = t ? 0 : O_CREAT;
        off_t size = model_size(o->a);
        o->off = below(4) ? (off_t)below((uint64_t)size + 1) : (off_t)below((uint64_t)size + 40000);
        o->len = below(4) ? 1 + (off_t)below(200) : 1 + (off_t)below(sizeof wbuf - 1);
        fill(wbuf, (size_t)o->len);
        return do_write;
    }
    case K_TRUNC:
        o->name = "truncate";
        o->len = (off_t)below((uint64_t)model_size(o->a) * 2 + 5000);
        return do_truncate;
    case K_RENAME: {
        static const unsigned rf[] = {0, 0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE};
        o->name = "rename";
        pick(o->b);
        o->flags = rf[below(5)];
        return do_rename;
    }
    case K_LINK:
        o->name = "link";
        pick_kind_of(o->a, 0);
        pick(o->b);
        return do_link;
    case K_UNLINK:
        o->name = "unlink";
        return do_unlink;
    case K_MKDIR:
        o->name = "mkdir";
        o->mode = below(4) ? 0755 : rand_mode();
        return do_mkdir;
    case K_RMDIR:
        o->name = "rmdir";
        pick_kind_of(o->a, 1);
        return do_rmdir;
    case K_CHMOD:
        o->name = "chmod";
        o->mode = rand_mode();
        return do_chmod;
    case K_CHOWN:
        o->name = "chown";
        o->uid = below(4) ? ids[below(5)] : (uid_t)-1;
        o->gid = below(4) ? ids[below(5)] : (gid_t)-1;
        o->flags = (unsigned)below(2);
        return do_chown;
    case K_UTIMES:
        o->name = "utimes";
        rand_times(o->ts);
        o->flags = below(3) ? 0 : AT_SYMLINK_NOFOLLOW;
        return do_utimes;
    case K_SETX: {
        static const unsigned xf[] = {0, 0, XATTR_CREATE, XATTR_REPLACE};
        o->name = "setxattr";
        xname(o->target);
        o->len = below(5) ? (off_t)below(100) : (off_t)below(500); /* 5 fit in an ext4 block */
        fill(wbuf, (size_t)o->len);
        if (o->len && !below(4)) wbuf[below((uint64_t)o->len)] = 0; /* values are bytes */
        o->flags = xf[below(4)];
        return do_setxattr;
    }
    case K_REMX:
        o->name = "removexattr";
        xname(o->target);
        return do_removexattr;
    case K_MKNOD: {
        static const unsigned types[] = {S_IFIFO, S_IFCHR, S_IFBLK};
        o->name = "mknod";
        o->mode = types[below(3)] | (below(2) ? 0644 : rand_mode());
        o->rdev = S_ISFIFO(o->mode) ? 0 : rand_dev();
        return do_mknod;
    }
    case K_FIFO:
        o->name = "mkfifo";
        o->flags = 1;
        o->mode = S_IFIFO | rand_mode();
        return do_mknod;
    case K_HELD: {
        pick_kind_of(o->a, 0);
        if (model_type(o->a) != S_IFREG) return NULL; /* only regular files are opened */
        static const char *const hn[] = {"held+unlink", "held+rename", "held+link"};
        o->mode = (unsigned)below(3);
        o->name = hn[o->mode]; /* flags 1: and an online compaction */
        o->flags = !below(3);
        if (o->mode) pick(o->b);
        off_t size = model_size(o->a);
        o->off = (off_t)below((uint64_t)size + 5000);
        o->len = 1 + (off_t)below(3000);
        fill(wbuf, (size_t)o->len);
        return do_held;
    }
    case K_BIND:
        o->name = "bind";
        return do_bind;
    default:
        o->name = "symlink";
        rand_target(o->target);
        return do_symlink;
    }
}

static int pick_kind(void)
{
    static const int shrink[] = {K_UNLINK, K_RMDIR, K_RENAME, K_TRUNC};
    if (nent > BIGTREE) return shrink[below(4)];
    unsigned total = 0;
    for (int k = 0; k < K_N; k++)
        total += weight[k];
    unsigned r = (unsigned)below(total);
    int k = 0;
    while (r >= weight[k])
        r -= weight[k++];
    return k;
}

/* Append to d (used w of n) what printf makes of fmt. */
static void add(char *d, size_t n, size_t *w, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *d, size_t n, size_t *w, const char *fmt, ...)
{
    va_list ap;
    if (*w >= n) return;
    va_start(ap, fmt);
    int k = vsnprintf(d + *w, n - *w, fmt, ap);
    va_end(ap);
    *w += k > 0 ? (size_t)k : 0;
}

/* The operation and the arguments it uses, for the log. */
static void describe(const op *o, char *d, size_t n)
{
    size_t w = 0;
    add(d, n, &w, "%s %s", o->name, o->a);
    if (o->b[0]) add(d, n, &w, " %s", o->b);
    if (o->target[0]) add(d, n, &w, " '%.40s%s'", o->target, strlen(o->target) > 40 ? "..." : "");
    if (o->flags) add(d, n, &w, " flags=%#x", o->flags);
    if ((o->mode || !strcmp(o->name, "chmod")) && strncmp(o->name, "held", 4))
        add(d, n, &w, " mode=%#o", o->mode);
    if (o->uid || o->gid) add(d, n, &w, " uid=%d gid=%d", (int)o->uid, (int)o->gid);
    if (o->rdev) add(d, n, &w, " rdev=%u:%u", major(o->rdev), minor(o->rdev));
    if (o->off || o->len) add(d, n, &w, " off=%lld len=%lld", (long long)o->off, (long long)o->len);
    if (o->ts[0].tv_sec || o->ts[0].tv_nsec || o->ts[1].tv_sec || o->ts[1].tv_nsec)
        add(d, n, &w, " atime=%lld.%09ld mtime=%lld.%09ld", (long long)o->ts[0].tv_sec,
            o->ts[0].tv_nsec, (long long)o->ts[1].tv_sec, o->ts[1].tv_nsec);
}

/* Which model inode utimensat gave explicit times: rel itself, or what it points to. */
static void mark_explicit(const op *o)
{
    char p[PATH_MAX];
    struct stat st;
    full(p, 0, o->a);
    int r = o->flags & AT_SYMLINK_NOFOLLOW ? lstat(p, &st) : stat(p, &st);
    if (r) return;
    if (o->ts[1].tv_nsec == UTIME_OMIT) return; /* mtime unchanged: keep what was known */
    expl_set(st.st_ino);
}

/* Does kind k possibly change an mtime implicitly? chmod, chown and xattrs change ctime only. */
static int changes_mtime(int k)
{
    return k != K_CHMOD && k != K_CHOWN && k != K_SETX && k != K_REMX && k != K_UTIMES;
}

/* An operation's result for the log: the value, or the errno's name. */
static const char *result(long r, char *s)
{
    const char *name = r < 0 ? strerrorname_np((int)-r) : NULL;
    if (name)
        snprintf(s, 32, "%s", name);
    else
        snprintf(s, 32, "%ld", r);
    return s;
}

/* FSMODEL_AS=UID:GID[,UID:GID...]: each operation runs with one of those effective ids
 * (chosen from the seed; no supplementary groups), so permission checks and the rules for
 * unprivileged callers (chown, setgid bits, sticky directories, ...) are compared;
 * comparisons and compactions run as root. */
#define MAXAS 8
static uid_t as_uid[MAXAS];
static gid_t as_gid[MAXAS];
static int nas, as_now;

static void become_user(int on)
{
    if (!nas) return;
    if (on ? setegid(as_gid[as_now]) || seteuid(as_uid[as_now]) : seteuid(0) || setegid(0))
        fail("switching ids: %s", strerror(errno));
}

static void parse_as(void)
{
    const char *e = getenv("FSMODEL_AS");
    unsigned u, g;
    int k;
    while (e && *e && nas < MAXAS) {
        if (sscanf(e, "%u:%u%n", &u, &g, &k) != 2) fail("FSMODEL_AS must be UID:GID[,UID:GID...]");
        as_uid[nas] = u;
        as_gid[nas++] = g;
        e += k;
        e += *e == ',';
    }
    if (nas && setgroups(0, NULL)) fail("setgroups: %s", strerror(errno));
}

/* One random operation on both trees; a different result is a failure. */
static void step(void)
{
    op o;
    int k = pick_kind();
    op_fn fn = choose(k, &o);
    if (!fn) return;
    char d[1200];
    describe(&o, d, sizeof d);
    if (changes_mtime(k)) {
        touched(o.a);
        if (o.b[0]) touched(o.b);
    }
    as_now = nas > 1 ? (int)below((uint64_t)nas) : 0;
    /* chown(f, -1, -1) by a user who does not own f: ext4 refuses it (EPERM) where it would
     * drop setuid or setgid, tadocfs drops them: the kernel sends it as a SETATTR that sets
     * nothing, which the daemon cannot tell from the one it sends before a write by such a
     * user, which must succeed (fs/ops.c, op_setattr). A known difference: made as root. */
    for (int i = 0; k == K_CHOWN && o.uid == (uid_t)-1 && o.gid == (gid_t)-1 && i < nas; i++)
        if (as_uid[i] == 0) as_now = i;
    if (nas > 1) snprintf(d + strlen(d), sizeof d - strlen(d), " as %u", (unsigned)as_uid[as_now]);
    become_user(1);
    long r0 = fn(0, &o), r1 = fn(1, &o);
    become_user(0);
    char s0[32], s1[32];
    logop("#%ld %s -> %s / %s", opno, d, result(r0, s0), result(r1, s1));
    if (r0 != r1) fail("%s: model %s, mount %s", d, s0, s1);
    if (changes_mtime(k)) {
        touched(o.a);
        if (o.b[0]) touched(o.b);
    } else if (k == K_UTIMES && r0 == 0) {
        mark_explicit(&o);
    }
    if (k == K_HELD && r0 >= 0) held_compare(d);
    if (r0 >= 0) counts[k]++;
}

/* ---------------- comparing the trees ---------------- */

/* Pairs (model inode, mount inode) seen in one comparison: hard links must agree. */
static ino_t pair[MAXENT][2];
static size_t npair;

static void check_inode(const char *rel, ino_t m, ino_t f)
{
    for (size_t i = 0; i < npair; i++) {
        if (pair[i][0] == m && pair[i][1] != f)
            fail("%s: a hard link in the model, a different inode on the mount", rel);
        if (pair[i][1] == f && pair[i][0] != m)
            fail("%s: one inode on the mount, different inodes in the model", rel);
        if (pair[i][0] == m) return;
    }
    if (npair < MAXENT) {
        pair[npair][0] = m;
        pair[npair++][1] = f;
    }
}

static unsigned char *slurp(const char *p, size_t *n)
{
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 65536;
    unsigned char *b = malloc(cap);
    *n = 0;
    for (;;) {
        if (*n == cap) b = realloc(b, cap *= 2);
        if (!b) fail("out of memory");
        ssize_t k = read(fd, b + *n, cap - *n);
        if (k < 0) fail("read %s: %s", p, strerror(errno));
        if (k == 0) break;
        *n += (size_t)k;
    }
    close(fd);
    return b;
}

static void cmp_bytes(const char *rel, const char *pm, const char *pf)
{
    size_t nm, nf;
    unsigned char *bm = slurp(pm, &nm), *bf = slurp(pf, &nf);
    if (!bm || !bf)
        fail("%s: cannot open (model %s, mount %s)", rel, bm ? "ok" : "failed",
             bf ? "ok" : "failed");
    if (nm != nf) fail("%s: read %zu bytes from the model, %zu from the mount", rel, nm, nf);
    for (size_t i = 0; i < nm; i++)
        if (bm[i] != bf[i]) fail("%s: byte %zu: model 0x%02x, mount 0x%02x", rel, i, bm[i], bf[i]);
    free(bm);
    free(bf);
}

static int cmpname(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The user.* attribute names of p (the test's are short), sorted, into v; the computed
 * user.tadoc.* are left out. Returns the count. */
static size_t xnames(const char *p, char v[][XNAME])
{
    char list[8192];
    ssize_t n = llistxattr(p, list, sizeof list);
    size_t k = 0;
    if (n < 0) fail("listxattr %s: %s", p, strerror(errno));
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1)
        if (!strncmp(list + i, "user.", 5) && strncmp(list + i, "user.tadoc.", 11) && k < 64)
            snprintf(v[k++], XNAME, "%.255s", list + i);
    qsort(v, k, XNAME, cmpname);
    return k;
}

static void cmp_xattrs(const char *rel, const char *pm, const char *pf)
{
    static char xm[64][XNAME], xf[64][XNAME];
    static char vm[70000], vf[70000];
    size_t nm = xnames(pm, xm), nf = xnames(pf, xf);
    for (size_t i = 0; i < nm || i < nf; i++) {
        if (i >= nm || i >= nf || strcmp(xm[i], xf[i]))
            fail("%s: attribute %s only in the %s", rel, i < nm ? xm[i] : xf[i],
                 i >= nf || (i < nm && strcmp(xm[i], xf[i]) < 0) ? "model" : "mount");
        ssize_t a = lgetxattr(pm, xm[i], vm, sizeof vm), b = lgetxattr(pf, xf[i], vf, sizeof vf);
        if (a < 0 || b < 0) fail("%s: getxattr %s: %s", rel, xm[i], strerror(errno));
        if (a != b || memcmp(vm, vf, (size_t)a))
            fail("%s: attribute %s: %zd bytes in the model, %zd on the mount%s", rel, xm[i], a, b,
                 a == b ? " (different bytes)" : "");
    }
}

static void cmp_entry(const char *rel)
{
    char pm[PATH_MAX], pf[PATH_MAX];
    struct stat m, f;
    full(pm, 0, rel);
    full(pf, 1, rel);
    if (lstat(pm, &m)) fail("%s: lstat in the model: %s", rel, strerror(errno));
    if (lstat(pf, &f)) fail("%s: lstat on the mount: %s", rel, strerror(errno));
#define SAME(field, fmt)                                                                           \
    if (m.field != f.field)                                                                        \
        fail("%s: " #field ": model " fmt ", mount " fmt, rel, m.field, f.field);
    SAME(st_mode, "%#o");
    SAME(st_uid, "%u");
    SAME(st_gid, "%u");
    SAME(st_nlink, "%lu");
    if (!S_ISDIR(m.st_mode)) SAME(st_size, "%ld");
    if (S_ISCHR(m.st_mode) || S_ISBLK(m.st_mode)) SAME(st_rdev, "%#lx");
    if ((all_mtimes || expl_has(m.st_ino)) &&
        (m.st_mtim.tv_sec != f.st_mtim.tv_sec || m.st_mtim.tv_nsec != f.st_mtim.tv_nsec))
        fail("%s: explicit mtime: model %lld.%09ld, mount %lld.%09ld", rel,
             (long long)m.st_mtim.tv_sec, m.st_mtim.tv_nsec, (long long)f.st_mtim.tv_sec,
             f.st_mtim.tv_nsec);
#undef SAME
    if (!S_ISDIR(m.st_mode)) check_inode(rel, m.st_ino, f.st_ino);
    cmp_xattrs(rel, pm, pf);
    if (S_ISLNK(m.st_mode)) {
        char tm[PATH_MAX], tf[PATH_MAX];
        ssize_t a = readlink(pm, tm, sizeof tm), b = readlink(pf, tf, sizeof tf);
        if (a < 0 || b < 0 || a != b || memcmp(tm, tf, (size_t)a))
            fail("%s: symlink target: model '%.*s', mount '%.*s'", rel, (int)(a < 0 ? 0 : a), tm,
                 (int)(b < 0 ? 0 : b), tf);
    }
    if (S_ISREG(m.st_mode)) cmp_bytes(rel, pm, pf);
}

static long ncompared;

/* The mount's readdir of rel must give each entry the type and inode number lstat gives. */
static void check_dirents(const char *rel)
{
    char p[PATH_MAX];
    full(p, 1, rel);
    DIR *d = opendir(p);
    struct dirent *e;
    if (!d) fail("%s: cannot list on the mount: %s", *rel ? rel : ".", strerror(errno));
    while ((e = readdir(d))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
            fail("%s/%s: listed but lstat fails: %s", rel, e->d_name, strerror(errno));
        if (e->d_type != DT_UNKNOWN && e->d_type != IFTODT(st.st_mode))
            fail("%s/%s: readdir type %u, lstat type %u", rel, e->d_name, e->d_type,
                 IFTODT(st.st_mode));
        if (e->d_ino != st.st_ino)
            fail("%s/%s: readdir inode %llu, lstat inode %llu", rel, e->d_name,
                 (unsigned long long)e->d_ino, (unsigned long long)st.st_ino);
    }
    closedir(d);
}

/* Compare directory rel in both trees and everything under it. */
static void cmp_dir(const char *rel)
{
    char pm[PATH_MAX], pf[PATH_MAX];
    size_t nm, nf;
    full(pm, 0, rel);
    full(pf, 1, rel);
    char **vm = names_of(pm, &nm), **vf = names_of(pf, &nf);
    if (!vm || !vf)
        fail("%s: cannot list (model %s, mount %s)", rel, vm ? "ok" : "failed",
             vf ? "ok" : "failed");
    for (size_t i = 0; i < nm || i < nf; i++)
        if (i >= nm || i >= nf || strcmp(vm[i], vf[i]))
            fail("%s: entry '%s' only in the %s", *rel ? rel : ".", i < nm ? vm[i] : vf[i],
                 i >= nf || (i < nm && strcmp(vm[i], vf[i]) < 0) ? "model" : "mount");
    for (size_t i = 0; i < nm; i++) {
        char r[PATH_MAX];
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", vm[i]);
        cmp_entry(r);
        ncompared++;
        struct stat st;
        full(pm, 0, r);
        if (!lstat(pm, &st) && S_ISDIR(st.st_mode)) cmp_dir(r);
    }
    free_names(vm, nm);
    free_names(vf, nf);
    if (!compare_only) check_dirents(rel);
}

static void compare(const char *when)
{
    npair = 0;
    logop("-- compare (%s)", when);
    cmp_dir("");
}

/* ---------------- compaction ---------------- */

/* Run argv (no shell), with no inherited descriptors past stderr (BATS waits on fd 3). */
static int run(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0) fail("fork: %s", strerror(errno));
    if (pid == 0) {
        for (int fd = 3; fd < 256; fd++)
            close(fd);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) < 0) fail("waitpid: %s", strerror(errno));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* With FSMODEL_DROP_CACHES=1, forget the kernel's cached dentries and inodes (the mount
 * gives them a day's timeout), so that the comparison after an online compaction sees the
 * daemon's new state rather than what the kernel remembers. It is global: opt-in. */
static void drop_caches(void)
{
    const char *e = getenv("FSMODEL_DROP_CACHES");
    if (!e || strcmp(e, "1")) return;
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "2", 1) != 1) fail("drop_caches: %s", strerror(errno));
    close(fd);
}

static void compact_online(void)
{
    logop("-- online compaction");
    /* EBUSY: a removed file is still open. The last close of one is answered before the
     * kernel's (asynchronous) release reaches the daemon, so wait for it a little. */
    int rc, tries = 0;
    while ((rc = setxattr(root[1], "user.tadoc.compact", "1", 1, 0)) && errno == EBUSY &&
           tries++ < 100)
        usleep(20000);
    if (rc) {
        char why[512] = "";
        int e = errno;
        ssize_t n = getxattr(root[1], "user.tadoc.compact_error", why, sizeof why - 1);
        why[n > 0 ? n : 0] = 0;
        fail("online compaction: %s (compact_error: %s)", strerror(e), why);
    }
    drop_caches();
}

/* Unmount, then (with compact) tadoc compact and tadoc verify, and mount again: without
 * compact the new daemon replays the journal onto the archive as it was. */
static void remount(int compact)
{
    const char *tadoc = getenv("TADOC"), *tadocfs = getenv("TADOCFS");
    if (!tadoc || !tadocfs) fail("offline compaction needs TADOC and TADOCFS");
    logop(compact ? "-- unmount, tadoc compact, remount" : "-- unmount, remount (journal replay)");
    char *um[] = {"fusermount3", "-u", (char *)root[1], NULL};
    int rc = 1;
    for (int i = 0; i < 50 && (rc = run(um)); i++)
        usleep(100000); /* busy for a moment after the last close */
    if (rc) fail("fusermount3 -u %s: status %d", root[1], rc);
    char *cp[] = {(char *)tadoc, "compact", (char *)archive, NULL};
    if (compact && (rc = run(cp))) fail("tadoc compact %s: status %d", archive, rc);
    char *vf[] = {(char *)tadoc, "verify", (char *)archive, NULL};
    if (compact && (rc = run(vf))) fail("tadoc verify %s: status %d", archive, rc);
    char *opts = getenv("FSMODEL_MOUNT_OPTS"); /* as the first mount had them */
    char *mt[] = {
        (char *)tadocfs, (char *)archive, (char *)root[1], opts ? "-o" : NULL, opts, NULL};
    if ((rc = run(mt))) fail("remount %s: status %d", archive, rc);
}

int main(int argc, char **argv)
{
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "-c")) {
        /* Compare two trees only: a model and an unpacked or packed copy (mtimes aside), or
         * with -t two copies of one archive (mtimes too). */
        all_mtimes = argc == 5 && !strcmp(argv[2], "-t");
        root[0] = argv[argc - 2];
        root[1] = argv[argc - 1];
        compare_only = 1;
        compare("-c");
        printf("fsmodel: %s and %s agree (%ld entries)\n", root[0], root[1], ncompared);
        return 0;
    }
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: fsmodel SEED OPS MODELDIR MOUNTPOINT [ARCHIVE]\n"
                        "       fsmodel -c [-t] MODELDIR OTHERDIR\n");
        return 2;
    }
    seed = strtoull(argv[1], NULL, 10);
    long ops = atol(argv[2]);
    root[0] = argv[3];
    root[1] = argv[4];
    archive = argc > 5 ? argv[5] : NULL;
    rng = seed * 0x9E3779B97F4A7C15ull + 1;
    static const mode_t masks[] = {022, 0, 077, 002};
    umask(masks[below(4)]); /* the kernel applies it on both sides, unless tadocfs asks not to */
    if (chdir("/")) return 1;
    parse_as();
    /* Periods from the seed: tree comparisons and compactions. */
    long cmp_every = 5 + (long)below(30), compact_every = 20 + (long)below(80);
    long online = 0, offline = 0, replays = 0;
    for (opno = 1; opno <= ops; opno++) {
        nent = ndir = 0;
        walk("");
        step();
        if (opno % cmp_every == 0) compare("periodic");
        if (opno % compact_every == 0) {
            compare("before compaction");
            uint64_t how = archive ? below(5) : 0;
            if (how >= 3) {
                remount(how == 3); /* 3: compact offline; 4: replay the journal */
                how == 3 ? offline++ : replays++;
            } else {
                compact_online();
                online++;
            }
            compare("after compaction");
        }
    }
    opno--;
    compare("end");
    printf("fsmodel: seed %llu: %ld operations (", (unsigned long long)seed, ops);
    static const char *const kn[K_N] = {"create", "write",    "truncate",    "rename", "link",
                                        "unlink", "mkdir",    "rmdir",       "chmod",  "chown",
                                        "utimes", "setxattr", "removexattr", "mknod",  "mkfifo",
                                        "bind",   "symlink",  "held"};
    for (int k = 0; k < K_N; k++)
        printf("%s%s %ld", k ? ", " : "", kn[k], counts[k]);
    printf(" succeeded), %ld entries compared, %ld online and %ld offline compactions, "
           "%ld remounts without, %zu entries at the end\n",
           ncompared, online, offline, replays, nent);
    return 0;
}
