/* errnocmp: run one fixed list of file system operations under two directories and print
 * every operation whose result differs between them.
 *
 *   errnocmp [--special] [-v] ROOT_A ROOT_B
 *
 * Each root gets a fresh subdirectory errnocmp.d in which the same sequence runs: namespace
 * changes (mkdir, rmdir, open with O_CREAT / O_EXCL / O_DIRECTORY / O_TRUNC ..., unlink,
 * rename and renameat2 over every pair of file / directory / symlink / missing / non-empty
 * directory / the source's own subdirectory), link, symlink, readlink, truncate, chmod,
 * chown, utimensat, extended attributes, names of 255, 256 and 1100 bytes, paths through a
 * file, symlink loops, a file's 65000-link limit, then a second pass as an unprivileged user
 * (uid and gid 65534, no other group) in world-writable sticky directories and on files
 * owned by others. Every operation's result (its return value or -1 with the errno name;
 * for stat calls also the type, mode, owners, link count and size of what it found) is one
 * line, and each case (a fresh directory) ends with a listing of what it holds. ROOT_A is
 * the reference (a local ext4 directory), ROOT_B the file system under test; their lines
 * are compared case by case, the listings as sets. Run as root.
 *
 * --special adds FIFOs, character and block devices (major 1, minor 3) and a unix socket
 * made with bind(2): off by default, while tadocfs does not create them.
 *
 * Exit status: 0 when every line agrees (or differs only where the allow-list below says
 * the file system under test differs by design), 1 otherwise, 2 on a usage or setup error.
 * -v also prints every line of ROOT_B's run. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534 /* the unprivileged pass's uid and gid */
#define OTHER 65533  /* owner of files that belong to neither root nor NOBODY */
#define EXT4_LINK_MAX 65000

/* Where tadocfs differs from ext4 by design: a line whose description starts with `op`, or
 * any line of a case whose title starts with `title`, may differ. Nothing else is excused. */
static const struct {
    const char *op, *title, *why;
} allowed[] = {
    /* Only the user namespace is stored: trusted.* and security.* attributes (which ext4
     * keeps for root) are refused with EOPNOTSUPP. */
    {"setxattr trusted.", NULL, "only user.* attributes are stored"},
    {"getxattr trusted.t f =", NULL, "only user.* attributes are stored"},
    {"getxattr trusted.t d =", NULL, "only user.* attributes are stored"},
    {"getxattr trusted.t l =", NULL, "only user.* attributes are stored"},
    /* Each directory resolves the analytics files (.wordcount, ...) and .search, which
     * exist without being listed. */
    {"lstat .wordcount", NULL, "analytics files exist in every directory"},
    {"lstat .search", NULL, "analytics files exist in every directory"},
    /* fallocate grows a file (mode 0) and accepts KEEP_SIZE (allocation means nothing to
     * the journal); modes that punch, zero, collapse or insert ranges are EOPNOTSUPP. */
    {NULL, "fallocate ranges", "only plain fallocate"},
    /* A FUSE mount is nodev unless mounted with -o dev, so opening a device node through it
     * is EACCES: an archive from elsewhere cannot hand out access to this machine's disks. */
    {"open c ", NULL, "device nodes do not open on a nodev mount"},
    {"open b ", NULL, "device nodes do not open on a nodev mount"},
    /* O_TMPFILE needs the FUSE tmpfile operation, which tadocfs does not have. */
    {"open tmpfile", NULL, "no O_TMPFILE (no FUSE tmpfile operation)"},
};
#define NALLOWED (sizeof allowed / sizeof allowed[0])

static FILE *out; /* this root's result lines */
static int special;

/* ---------------- recording ---------------- */

/* A name for descriptions: components longer than 32 bytes become "<N*c>". */
static const char *nm(const char *p)
{
    static char ring[4][256];
    static int at;
    char *o = ring[at++ % 4];
    size_t n = 0;
    while (*p && n < 200) {
        size_t len = strcspn(p, "/");
        if (len > 32)
            n += (size_t)snprintf(o + n, 256 - n, "<%zu*%c>", len, p[0]);
        else
            n += (size_t)snprintf(o + n, 256 - n, "%.*s", (int)len, p);
        p += len;
        if (*p == '/') o[n++] = '/', p++;
    }
    o[n] = 0;
    return o;
}

/* Record one result: "DESCRIPTION = VALUE" or "DESCRIPTION = -1 ENAME". errno survives. */
__attribute__((format(printf, 2, 3))) static long rec(long rc, const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    if (rc < 0)
        fprintf(out, " = -1 %s\n", strerrorname_np(e) ? strerrorname_np(e) : "E?");
    else
        fprintf(out, " = %ld\n", rc);
    errno = e;
    return rc;
}

static char type_of(mode_t m)
{
    return S_ISREG(m)    ? 'f'
           : S_ISDIR(m)  ? 'd'
           : S_ISLNK(m)  ? 'l'
           : S_ISFIFO(m) ? 'p'
           : S_ISSOCK(m) ? 's'
           : S_ISCHR(m)  ? 'c'
           : S_ISBLK(m)  ? 'b'
                         : '?';
}

/* fstatat, recorded with what it found (a directory's size is left out: ext4's grows in
 * blocks as entries come and go). */
static void st(const char *p, int follow)
{
    struct stat s;
    const char *op = follow ? "stat" : "lstat";
    if (fstatat(AT_FDCWD, p, &s, follow ? 0 : AT_SYMLINK_NOFOLLOW)) {
        rec(-1, "%s %s", op, nm(p));
        return;
    }
    fprintf(out, "%s %s = 0 %c%04o %u:%u n%lu", op, nm(p), type_of(s.st_mode),
            (unsigned)(s.st_mode & 07777), (unsigned)s.st_uid, (unsigned)s.st_gid,
            (unsigned long)s.st_nlink);
    if (!S_ISDIR(s.st_mode)) fprintf(out, " s%lld", (long long)s.st_size);
    if (S_ISCHR(s.st_mode) || S_ISBLK(s.st_mode))
        fprintf(out, " r%u,%u", major(s.st_rdev), minor(s.st_rdev));
    fputc('\n', out);
}

/* ---------------- fixtures ---------------- */

enum kind { K_MISSING, K_FILE, K_DIR, K_LINK, K_FULL, K_DLINK, K_DIRLINK, NKINDS };
static const char *const kname[NKINDS] = {"missing",      "file",     "dir",    "symlink",
                                          "nonempty-dir", "dangling", "dirlink"};

static long mkfile(const char *p, mode_t mode)
{
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, mode);
    rec(fd < 0 ? -1 : 0, "create %s %04o", nm(p), (unsigned)mode);
    if (fd < 0) { /* the same number of lines either way */
        fprintf(out, "write %s = skipped\n", nm(p));
        return -1;
    }
    rec(write(fd, "data\n", 5), "write %s", nm(p));
    close(fd);
    return 0;
}

static long mkd(const char *p, mode_t mode)
{
    return rec(mkdir(p, mode), "mkdir %s %04o", nm(p), (unsigned)mode);
}

static long sym(const char *target, const char *p)
{
    return rec(symlink(target, p), "symlink %s -> %s", nm(p), nm(target));
}

/* Make `p` of kind k; symlinks point at siblings "T" (a file) and "TD" (a directory) that
 * the case directory holds. */
static void mkkind(const char *p, enum kind k)
{
    char c[512];
    switch (k) {
    case K_MISSING:
    case NKINDS:
        break;
    case K_FILE:
        mkfile(p, 0644);
        break;
    case K_DIR:
        mkd(p, 0755);
        break;
    case K_LINK:
        sym("T", p);
        break;
    case K_FULL:
        mkd(p, 0755);
        snprintf(c, sizeof c, "%s/c", p);
        mkfile(c, 0644);
        break;
    case K_DLINK:
        sym("nowhere", p);
        break;
    case K_DIRLINK:
        sym("TD", p);
        break;
    }
}

static int ncase;

/* Enter a fresh case directory (with the symlink targets T and TD) under the pass's root. */
static void case_begin(const char *what)
{
    char d[64];
    snprintf(d, sizeof d, "c%04d", ++ncase);
    fprintf(out, "# case %s: %s\n", d, what);
    if (mkdir(d, 0755) || chdir(d)) {
        rec(-1, "enter %s", d);
        return;
    }
    mkfile("T", 0644);
    mkd("TD", 0755);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Everything below directory `dir`, in name order, as stat lines (readdir's d_type too). */
static void list_tree(const char *dir, int depth)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, by_name);
    if (n < 0) {
        rec(-1, "scandir %s", nm(dir));
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *e = ents[i]->d_name;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e);
        if (strcmp(e, ".") && strcmp(e, "..")) {
            fprintf(out, "entry %s d_type %d: ", nm(p), ents[i]->d_type);
            st(p, 0);
            if (ents[i]->d_type == DT_DIR && depth < 8) list_tree(p, depth + 1);
        }
        free(ents[i]);
    }
    free(ents);
}

static int no_listing; /* set for cases too large to list */

/* Leave the case directory, listing what it holds at the end. */
static void case_end(void)
{
    if (!no_listing) list_tree(".", 0);
    if (chdir("..")) rec(-1, "leave case");
}

static char L255[256], L256[257], L1100[1101];

static void long_names(void)
{
    memset(L255, 'a', 255);
    memset(L256, 'b', 256);
    memset(L1100, 'c', 1100);
}

/* ---------------- the operations ---------------- */

static long openrec(const char *p, int flags, const char *fl)
{
    int fd = open(p, flags, 0644);
    rec(fd < 0 ? -1 : 0, "open %s %s", nm(p), fl);
    if (fd >= 0) close(fd);
    return fd;
}

static const struct {
    int flags;
    const char *name;
} oflags[] = {
    {O_RDONLY, "RDONLY"},
    {O_WRONLY, "WRONLY"},
    {O_RDWR, "RDWR"},
    {O_WRONLY | O_CREAT, "WRONLY|CREAT"},
    {O_WRONLY | O_CREAT | O_EXCL, "WRONLY|CREAT|EXCL"},
    {O_RDONLY | O_CREAT | O_EXCL, "RDONLY|CREAT|EXCL"},
    {O_RDONLY | O_DIRECTORY, "RDONLY|DIRECTORY"},
    {O_RDONLY | O_CREAT | O_DIRECTORY, "RDONLY|CREAT|DIRECTORY"},
    {O_WRONLY | O_TRUNC, "WRONLY|TRUNC"},
    {O_RDONLY | O_TRUNC, "RDONLY|TRUNC"},
    {O_RDWR | O_CREAT | O_TRUNC, "RDWR|CREAT|TRUNC"},
    {O_RDONLY | O_NOFOLLOW, "RDONLY|NOFOLLOW"},
    {O_WRONLY | O_CREAT | O_NOFOLLOW, "WRONLY|CREAT|NOFOLLOW"},
    {O_PATH | O_NOFOLLOW, "PATH|NOFOLLOW"},
    {O_RDONLY | O_DIRECTORY | O_NOFOLLOW, "RDONLY|DIRECTORY|NOFOLLOW"},
};
#define NOFLAGS (sizeof oflags / sizeof oflags[0])

/* open(2) with each set of flags on each kind of name, then what is there afterwards. */
static void opens(void)
{
    for (int k = 0; k < NKINDS; k++)
        for (size_t f = 0; f < NOFLAGS; f++) {
            case_begin("open");
            mkkind("x", (enum kind)k);
            openrec("x", oflags[f].flags, oflags[f].name);
            st("x", 0);
            st("x", 1);
            case_end();
        }
    case_begin("open, odd");
    mkfile("f", 0644);
    mkd("d", 0755);
    openrec("d", O_WRONLY, "WRONLY dir");
    openrec("d", O_RDWR | O_CREAT, "RDWR|CREAT dir");
    openrec("f/", O_RDONLY, "RDONLY trailing slash on a file");
    openrec("d/", O_RDONLY, "RDONLY trailing slash on a dir");
    openrec("new/", O_WRONLY | O_CREAT, "WRONLY|CREAT trailing slash");
    openrec("f/x", O_WRONLY | O_CREAT, "WRONLY|CREAT through a file");
    openrec("f/x", O_RDONLY, "RDONLY through a file");
    openrec("nodir/x", O_WRONLY | O_CREAT, "WRONLY|CREAT in a missing dir");
    int fd = open("d", O_RDWR | O_TMPFILE, 0600);
    rec(fd < 0 ? -1 : 0, "open tmpfile in d");
    if (fd >= 0) close(fd);
    case_end();
}

static void mkdirs_rmdirs(void)
{
    for (int k = 0; k < NKINDS; k++) {
        case_begin("mkdir, rmdir, unlink");
        mkkind("x", (enum kind)k);
        mkd("x", 0755);
        rec(rmdir("x"), "rmdir %s", kname[k]);
        st("x", 0);
        case_end();
        case_begin("rmdir with slash");
        mkkind("x", (enum kind)k);
        rec(rmdir("x/"), "rmdir %s/", kname[k]);
        st("x", 0);
        case_end();
        case_begin("unlink");
        mkkind("x", (enum kind)k);
        rec(unlink("x"), "unlink %s", kname[k]);
        st("x", 0);
        rec(unlink("x/"), "unlink %s/ (after)", kname[k]);
        case_end();
        case_begin("mknod regular, symlink over");
        mkkind("x", (enum kind)k);
        rec(mknod("x", S_IFREG | 0644, 0), "mknod reg over %s", kname[k]);
        rec(symlink("T", "x"), "symlink over %s", kname[k]);
        rec(mkdir("x/sub", 0755), "mkdir below %s", kname[k]);
        st("x", 0);
        case_end();
    }
    case_begin("mkdir, rmdir, odd");
    mkd("d", 0755);
    mkfile("f", 0644);
    rec(rmdir("."), "rmdir .");
    rec(rmdir("d/."), "rmdir d/.");
    rec(rmdir("d/.."), "rmdir d/..");
    rec(mkdir("f/x", 0755), "mkdir through a file");
    rec(mkdir("no/x", 0755), "mkdir in a missing dir");
    rec(mkdir("d/", 0755), "mkdir existing with slash");
    rec(mkdir("n/", 0755), "mkdir new with slash");
    rec(mknod("m", 0644, 0), "mknod with no type bits");
    st("m", 0);
    rec(mkdir(".", 0755), "mkdir .");
    rec(mkdir("..", 0755), "mkdir ..");
    rec(unlink("."), "unlink .");
    rec(unlink("d"), "unlink dir");
    case_end();
}

/* renameat2 from each kind to each destination, with each flag, within one directory and
 * across two. */
enum dest { D_MISSING, D_FILE, D_DIR, D_LINK, D_FULL, D_DLINK, D_SUB, D_SELF, D_HARD, NDEST };
static const char *const dname[NDEST] = {"missing",    "file",         "dir",
                                         "symlink",    "nonempty-dir", "dangling",
                                         "own-subdir", "self",         "hardlink"};

static void rename_case(enum kind k, enum dest d, unsigned flags, int cross)
{
    static const char *const fname[] = {"0", "NOREPLACE", "EXCHANGE"};
    const char *fl = fname[flags == RENAME_NOREPLACE ? 1 : flags == RENAME_EXCHANGE ? 2 : 0];
    char what[128];
    snprintf(what, sizeof what, "rename %s -> %s %s%s", kname[k], dname[d], fl,
             cross ? " across dirs" : "");
    case_begin(what);
    mkd("A", 0755);
    mkd("B", 0755);
    mkkind("A/s", k);
    const char *dst = cross ? "B/t" : "A/t";
    if (d == D_SUB) {
        if (k == K_DIR || k == K_FULL) mkd("A/s/sub", 0755);
        dst = "A/s/sub";
    } else if (d == D_SELF) {
        dst = "A/s";
    } else if (d == D_HARD) {
        rec(link("A/s", dst), "link A/s %s", dst);
    } else {
        static const enum kind as_kind[] = {K_MISSING, K_FILE, K_DIR, K_LINK, K_FULL, K_DLINK};
        mkkind(dst, as_kind[d]);
    }
    rec(renameat2(AT_FDCWD, "A/s", AT_FDCWD, dst, flags), "%s", what);
    st("A", 0);
    st("B", 0);
    st("A/s", 0);
    st(dst, 0);
    st("A/s/c", 0);
    st("A/s/sub", 0);
    char c[64];
    snprintf(c, sizeof c, "%s/c", dst);
    st(c, 0);
    case_end();
}

static void renames(void)
{
    static const unsigned flags[] = {0, RENAME_NOREPLACE, RENAME_EXCHANGE};
    for (int k = 0; k < NKINDS; k++)
        for (int d = 0; d < NDEST; d++)
            for (int f = 0; f < 3; f++)
                for (int cross = 0; cross < 2; cross++)
                    if (!cross || d < D_SUB)
                        rename_case((enum kind)k, (enum dest)d, flags[f], cross);
    case_begin("rename, odd");
    mkd("d", 0755);
    mkd("d/e", 0755);
    mkfile("f", 0644);
    mkfile("g", 0644);
    rec(rename("f", "g/"), "rename file to file/");
    rec(rename("f/", "h"), "rename file/ to new");
    rec(rename("d/", "h/"), "rename dir/ to new/");
    rec(rename("h", "d"), "rename dir back");
    rec(rename("d", "d/e/x"), "rename dir into its grandchild");
    rec(rename("d/e", "d"), "rename dir onto its parent");
    rec(rename("d/e", "."), "rename onto .");
    rec(rename(".", "x"), "rename .");
    rec(rename("d/..", "x"), "rename ..");
    rec(rename("f", "nodir/x"), "rename into a missing dir");
    rec(rename("f", "g/x"), "rename through a file");
    rec(renameat2(AT_FDCWD, "f", AT_FDCWD, "g", RENAME_NOREPLACE | RENAME_EXCHANGE),
        "rename NOREPLACE|EXCHANGE");
    rec(renameat2(AT_FDCWD, "f", AT_FDCWD, "g", 1u << 7), "rename unknown flag");
    st("f", 0);
    st("g", 0);
    case_end();
}

static void links(void)
{
    case_begin("link");
    mkfile("f", 0644);
    mkd("d", 0755);
    sym("f", "l");
    sym("nowhere", "dl");
    rec(link("f", "f2"), "link file");
    st("f", 0);
    rec(link("d", "d2"), "link dir");
    rec(linkat(AT_FDCWD, "l", AT_FDCWD, "l3", AT_SYMLINK_FOLLOW), "link symlink followed");
    st("l3", 0);
    rec(linkat(AT_FDCWD, "dl", AT_FDCWD, "dl2", AT_SYMLINK_FOLLOW), "link dangling followed");
    rec(link("missing", "m2"), "link missing");
    rec(link("f", "f2"), "link onto existing");
    rec(link("f", "d"), "link onto dir");
    rec(link("f", "nodir/x"), "link into a missing dir");
    rec(link("f", "f/x"), "link through a file");
    rec(link("f", "d/"), "link onto dir/");
    rec(link("f/", "y"), "link file/");
    rec(unlink("f"), "unlink one of two names");
    st("f2", 0);
    case_end();
    case_begin("hard links to symlinks");
    sym("T", "l");
    sym("nowhere", "dl");
    rec(link("l", "l2"), "link symlink");
    st("l2", 0);
    st("l", 0);
    rec(link("dl", "dl2"), "link dangling");
    st("dl", 0);
    case_end();
}

/* fallocate with each mode in `fm`, on a file, a read-only descriptor and a directory. */
static void fallocates(const char *title, const int *modes, const char *const *names, size_t n)
{
    case_begin(title);
    mkfile("fa", 0644);
    mkd("d", 0755);
    int afd = open("fa", O_RDWR), rfd = open("fa", O_RDONLY), dfd = open("d", O_RDONLY);
    for (size_t i = 0; i < n; i++) {
        rec(fallocate(afd, modes[i], 0, 8192), "fallocate %s", names[i]);
        rec(fallocate(afd, modes[i], 4096, 4096), "fallocate %s at 4096", names[i]);
        rec(fallocate(rfd, modes[i], 0, 8192), "fallocate %s read-only fd", names[i]);
        rec(fallocate(dfd, modes[i], 0, 8192), "fallocate %s dir", names[i]);
        rec(fallocate(afd, modes[i], 0, 0), "fallocate %s length 0", names[i]);
        st("fa", 0);
    }
    close(afd);
    close(rfd);
    close(dfd);
    case_end();
}

/* Growing a file (mode 0) and allocating without growing; then the modes that punch, zero,
 * collapse and insert ranges, which tadocfs lacks (see the allow-list). */
static void fallocate_all(void)
{
    static const int plain[] = {0, FALLOC_FL_KEEP_SIZE};
    static const char *const plain_n[] = {"0", "KEEP_SIZE"};
    static const int ranges[] = {FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE,
                                 FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE};
    static const char *const ranges_n[] = {"PUNCH_HOLE", "ZERO_RANGE", "COLLAPSE_RANGE",
                                           "INSERT_RANGE"};
    fallocates("fallocate", plain, plain_n, 2);
    fallocates("fallocate ranges", ranges, ranges_n, 4);
}

/* Modes of new names with all bits asked for, under two umasks. */
static void new_modes(void)
{
    case_begin("modes of new names");
    mode_t masks[] = {022, 0};
    for (int i = 0; i < 2; i++) {
        umask(masks[i]);
        char p[32];
        snprintf(p, sizeof p, "d%o", (unsigned)masks[i]);
        mkd(p, 07777);
        st(p, 0);
        snprintf(p, sizeof p, "f%o", (unsigned)masks[i]);
        mkfile(p, 07777);
        st(p, 0);
        snprintf(p, sizeof p, "n%o", (unsigned)masks[i]);
        rec(mknod(p, S_IFREG | 07777, 0), "mknod %s", p);
        st(p, 0);
        snprintf(p, sizeof p, "l%o", (unsigned)masks[i]);
        sym("T", p);
        st(p, 0);
    }
    umask(022);
    rec(chmod("TD", 02755), "chmod TD 2755");
    rec(chown("TD", 0, 100), "chgrp TD");
    mkd("TD/sub", 0755);
    mkfile("TD/f", 02755);
    st("TD/sub", 0);
    st("TD/f", 0);
    case_end();
}

/* Calls on descriptors of names that went away. */
static void by_fd(void)
{
    case_begin("descriptors of removed names");
    mkfile("f", 0644);
    mkd("d", 0755);
    int fd = open("f", O_RDWR), dfd = open("d", O_RDONLY | O_DIRECTORY);
    rec(unlink("f"), "unlink f (open)");
    rec(rmdir("d"), "rmdir d (open)");
    struct stat s;
    rec(fstat(fd, &s), "fstat unlinked");
    fprintf(out, "nlink of unlinked: %lu, size %lld\n", (unsigned long)s.st_nlink,
            (long long)s.st_size);
    rec(fchmod(fd, 0600), "fchmod unlinked");
    rec(fchown(fd, 5, 5), "fchown unlinked");
    rec(ftruncate(fd, 10), "ftruncate unlinked");
    rec(pwrite(fd, "abc", 3, 20), "pwrite unlinked");
    rec(fsetxattr(fd, "user.x", "v", 1, 0), "fsetxattr unlinked");
    char b[16];
    rec(fgetxattr(fd, "user.x", b, sizeof b), "fgetxattr unlinked");
    rec(fstat(fd, &s), "fstat unlinked again");
    fprintf(out, "unlinked now: mode %o uid %u size %lld\n", (unsigned)s.st_mode,
            (unsigned)s.st_uid, (long long)s.st_size);
    rec(linkat(fd, "", AT_FDCWD, "back", AT_EMPTY_PATH), "linkat an unlinked file");
    rec(mkdirat(dfd, "x", 0755), "mkdirat in a removed dir");
    int x = openat(dfd, "x", O_WRONLY | O_CREAT, 0644);
    rec(x < 0 ? -1 : 0, "openat O_CREAT in a removed dir");
    if (x >= 0) close(x);
    rec(fstat(dfd, &s), "fstat removed dir");
    fprintf(out, "removed dir nlink %lu\n", (unsigned long)s.st_nlink);
    rec(fchmod(dfd, 0700), "fchmod removed dir");
    close(fd);
    close(dfd);
    mkfile("g", 0644);
    fd = open("g", O_RDONLY);
    rec(linkat(fd, "", AT_FDCWD, "g2", AT_EMPTY_PATH), "linkat an open file");
    st("g", 0);
    close(fd);
    /* A file replaced by a rename while open keeps its content and loses its name. */
    mkfile("h", 0644);
    fd = open("h", O_RDWR);
    rec(rename("g", "h"), "rename over an open file");
    rec(fstat(fd, &s), "fstat the replaced file");
    fprintf(out, "replaced: nlink %lu size %lld\n", (unsigned long)s.st_nlink,
            (long long)s.st_size);
    rec(pread(fd, b, sizeof b, 0), "pread the replaced file");
    close(fd);
    case_end();
}

static void readlinks_truncates(void)
{
    case_begin("readlink, truncate");
    mkfile("f", 0644);
    mkd("d", 0755);
    sym("f", "l");
    sym("d", "ld");
    sym("nowhere", "dl");
    char b[64];
    const char *ps[] = {"f", "d", "l", "ld", "dl", "missing", "f/x"};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        rec(readlink(ps[i], b, sizeof b), "readlink %s", ps[i]);
        rec(readlink(ps[i], b, 1), "readlink %s into 1 byte", ps[i]);
        rec(truncate(ps[i], 3), "truncate %s 3", ps[i]);
        st(ps[i], 1);
    }
    /* Targets: empty, the longest (4095 bytes), one too long. */
    static char t4095[4096], t4096[4097];
    memset(t4095, 'x', 4095);
    memset(t4096, 'y', 4096);
    rec(symlink("", "le"), "symlink empty target");
    rec(symlink(t4095, "l4095"), "symlink 4095-byte target");
    rec(symlink(t4096, "l4096"), "symlink 4096-byte target");
    static char big[5000];
    rec(readlink("l4095", big, sizeof big), "readlink 4095-byte target");
    st("l4095", 0);
    struct statvfs sv;
    rec(statvfs(".", &sv), "statvfs");
    fprintf(out, "statvfs namemax %lu\n", (unsigned long)sv.f_namemax);
    rec(truncate("f", -1), "truncate negative");
    rec(truncate("f", 100000), "truncate grow");
    st("f", 0);
    int fd = open("f", O_RDONLY);
    rec(ftruncate(fd, 0), "ftruncate a read-only fd");
    close(fd);
    fd = open("d", O_RDONLY | O_DIRECTORY);
    rec(ftruncate(fd, 0), "ftruncate a dir fd");
    close(fd);
    case_end();
}

static void attrs(void)
{
    case_begin("chmod, chown, utimensat");
    mkfile("f", 0644);
    mkd("d", 0755);
    sym("f", "l");
    sym("nowhere", "dl");
    const char *ps[] = {"f", "d", "l", "dl", "missing", "f/x"};
    struct timespec ts[2] = {{1000000000, 5}, {1100000000, 7}};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        const char *p = ps[i];
        rec(chmod(p, 0600), "chmod %s", p);
        rec(fchmodat(AT_FDCWD, p, 0640, AT_SYMLINK_NOFOLLOW), "chmod nofollow %s", p);
        rec(chmod(p, 07777), "chmod 7777 %s", p);
        rec(chown(p, 1234, 5678), "chown %s", p);
        rec(lchown(p, 4321, 8765), "lchown %s", p);
        rec(chown(p, (uid_t)-1, (gid_t)-1), "chown -1 -1 %s", p);
        rec(utimensat(AT_FDCWD, p, ts, 0), "utimensat %s", p);
        rec(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), "utimensat nofollow %s", p);
        rec(utimensat(AT_FDCWD, p, NULL, 0), "utimensat now %s", p);
        st(p, 0);
    }
    /* chown by root clears set-user-ID and set-group-ID of files (not of directories). */
    mkfile("s", 0644);
    rec(chmod("s", 06755), "chmod 6755 s");
    rec(chown("s", 1, 1), "chown s");
    st("s", 0);
    rec(chmod("d", 06755), "chmod 6755 d");
    rec(chown("d", 1, 1), "chown d");
    st("d", 0);
    case_end();
}

static long xset(const char *p, const char *name, const char *v, int flags)
{
    return rec(lsetxattr(p, name, v, strlen(v), flags), "setxattr %s %s flags %d", nm(p), nm(name),
               flags);
}

/* Whether setting user.a to v moves p's ctime: ext4 leaves it where the value is the same. */
static void xset_ctime(const char *p, const char *v)
{
    struct stat a, b;
    struct timespec pause = {0, 2000000};
    int ok =
        !lstat(p, &a) && !nanosleep(&pause, NULL) && xset(p, "user.a", v, 0) == 0 && !lstat(p, &b);
    fprintf(out, "setxattr %s user.a %s: ctime moved %d\n", nm(p), v,
            ok ? a.st_ctim.tv_sec != b.st_ctim.tv_sec || a.st_ctim.tv_nsec != b.st_ctim.tv_nsec
               : -1);
}

static void xattrs_on(const char *p)
{
    char b[256];
    xset(p, "user.a", "one", 0);
    xset(p, "user.a", "two", XATTR_CREATE);
    xset(p, "user.a", "three", XATTR_REPLACE);
    xset_ctime(p, "three");
    xset_ctime(p, "3");
    xset_ctime(p, "three");
    xset(p, "user.b", "four", XATTR_REPLACE);
    xset(p, "user.b", "", XATTR_CREATE);
    xset(p, "user.", "x", 0);
    xset(p, "user.a", "x", XATTR_CREATE | XATTR_REPLACE);
    rec(lgetxattr(p, "user.a", b, sizeof b), "getxattr %s user.a", nm(p));
    rec(lgetxattr(p, "user.a", NULL, 0), "getxattr %s user.a size", nm(p));
    rec(lgetxattr(p, "user.a", b, 2), "getxattr %s user.a short", nm(p));
    rec(lgetxattr(p, "user.b", b, sizeof b), "getxattr %s user.b", nm(p));
    rec(lgetxattr(p, "user.none", b, sizeof b), "getxattr %s user.none", nm(p));
    rec(lgetxattr(p, "user.", b, sizeof b), "getxattr %s user.", nm(p));
    rec(lgetxattr(p, "bogus.x", b, sizeof b), "getxattr %s bogus.x", nm(p));
    rec(lremovexattr(p, "user.none"), "removexattr %s user.none", nm(p));
    rec(lremovexattr(p, "user.a"), "removexattr %s user.a", nm(p));
    rec(lremovexattr(p, "user.a"), "removexattr %s user.a again", nm(p));
    rec(lremovexattr(p, "user."), "removexattr %s user.", nm(p));
    xset(p, "bogus.x", "x", 0);
    char longname[300] = "user.";
    memset(longname + 5, 'x', 250); /* 255 bytes in all: the longest name */
    xset(p, longname, "x", 0);
    rec(lgetxattr(p, longname, b, sizeof b), "getxattr %s user.<250>", nm(p));
    longname[255] = 'x'; /* 256 bytes */
    xset(p, longname, "x", 0);
    rec(lgetxattr(p, longname, b, sizeof b), "getxattr %s user.<251>", nm(p));
    rec(lremovexattr(p, longname), "removexattr %s user.<251>", nm(p));
}

/* Namespaces other than user.* (root may use trusted.* on ext4). */
static void xattrs_foreign(const char *p)
{
    char b[64];
    rec(lgetxattr(p, "trusted.t", b, sizeof b), "getxattr trusted.t %s (absent)", nm(p));
    rec(lgetxattr(p, "security.t", b, sizeof b), "getxattr security.t %s (absent)", nm(p));
    rec(lgetxattr(p, "system.t", b, sizeof b), "getxattr system.t %s", nm(p));
    rec(lsetxattr(p, "trusted.t", "x", 1, 0), "setxattr trusted.t %s", nm(p));
    rec(lgetxattr(p, "trusted.t", b, sizeof b), "getxattr trusted.t %s", nm(p));
}

static void xattrs(void)
{
    case_begin("xattr");
    mkfile("f", 0644);
    mkd("d", 0755);
    sym("f", "l");
    const char *ps[] = {"f", "d", "l", "missing", "f/x"};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        xattrs_on(ps[i]);
    static char val[65537];
    memset(val, 'v', sizeof val);
    rec(setxattr("d", "user.big", val, 3000, 0), "setxattr 3000-byte value");
    rec(getxattr("d", "user.big", NULL, 0), "getxattr 3000-byte value size");
    rec(setxattr("d", "user.big", val, 65537, 0), "setxattr 65537-byte value");
    rec(setxattr("d", "user.big", val, 0, XATTR_REPLACE), "setxattr empty value");
    rec(getxattr("d", "user.big", NULL, 0), "getxattr empty value size");
    char b[1024];
    rec(listxattr("d", b, sizeof b), "listxattr dir");
    rec(listxattr("d", b, 3), "listxattr dir into 3 bytes");
    rec(listxattr("missing", b, sizeof b), "listxattr missing");
    rec(listxattr("f", b, sizeof b), "listxattr file");
    rec(setxattr("l", "user.f", "v", 1, 0), "setxattr through symlink");
    rec(getxattr("l", "user.f", b, sizeof b), "getxattr through symlink");
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        xattrs_foreign(ps[i]);
    case_end();
}

/* Every call on a path with a component of 255, 256 and 1100 bytes. */
static void long_one(const char *n, const char *tag)
{
    char sub[1300];
    snprintf(sub, sizeof sub, "d/%s", n);
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    char b[64];
    unlink("f");
    unlink("g");
    mkfile("f", 0644);
    mkfile("g", 0644);
    st(sub, 1);
    st(sub, 0);
    rec(rmdir(sub), "rmdir %s missing", tag);
    rec(unlink(sub), "unlink %s missing", tag);
    rec(chmod(sub, 0600), "chmod %s missing", tag);
    rec(truncate(sub, 0), "truncate %s missing", tag);
    rec(rename(sub, "x"), "rename from %s missing", tag);
    rec(rename("f", sub), "rename onto %s", tag);
    rec(link("g", sub), "link onto %s", tag);
    rec(symlink("f", sub), "symlink at %s", tag);
    rec(readlink(sub, b, sizeof b), "readlink %s", tag);
    rec(mknod(sub, S_IFREG | 0644, 0), "mknod %s", tag);
    rec(unlink(sub), "unlink %s", tag);
    rec(mkdir(sub, 0755), "mkdir %s", tag);
    rec(rmdir(sub), "rmdir %s", tag);
    openrec(sub, O_WRONLY | O_CREAT, tag);
    openrec(sub, O_RDONLY, tag);
    rec(chmod(sub, 0600), "chmod %s", tag);
    rec(chown(sub, 7, 7), "chown %s", tag);
    rec(truncate(sub, 2), "truncate %s", tag);
    rec(utimensat(AT_FDCWD, sub, ts, 0), "utimensat %s", tag);
    rec(access(sub, R_OK), "access %s", tag);
    rec(setxattr(sub, "user.x", "v", 1, 0), "setxattr %s", tag);
    rec(getxattr(sub, "user.x", b, sizeof b), "getxattr %s", tag);
    rec(removexattr(sub, "user.x"), "removexattr %s", tag);
    rec(link(sub, "lnk"), "link from %s", tag);
    rec(unlink("lnk"), "unlink lnk (%s)", tag);
    rec(rename(sub, "moved"), "rename from %s", tag);
    rec(rename("moved", sub), "rename back to %s", tag);
    rec(renameat2(AT_FDCWD, sub, AT_FDCWD, "f", RENAME_EXCHANGE), "exchange %s", tag);
    char deeper[1400];
    snprintf(deeper, sizeof deeper, "%s/x", sub);
    st(deeper, 0);
    rec(mkdir(deeper, 0755), "mkdir below %s", tag);
    rec(unlink(sub), "unlink %s at the end", tag);
    st(sub, 0);
}

static void long_names_case(void)
{
    case_begin("long names");
    mkd("d", 0755);
    long_one(L255, "name255");
    long_one(L256, "name256");
    long_one(L1100, "name1100");
    case_end();
}

static void notdirs_loops(void)
{
    case_begin("ENOTDIR, ELOOP");
    mkfile("f", 0644);
    sym("f", "lf");
    sym("l1", "l2");
    sym("l2", "l1");
    sym("self", "self");
    const char *ps[] = {"f/x", "f/", "f/.", "f/..", "lf/", "lf/x", "l1", "l1/x", "self", "self/"};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        const char *p = ps[i];
        st(p, 1);
        st(p, 0);
        openrec(p, O_RDONLY, "RDONLY");
        openrec(p, O_WRONLY | O_CREAT, "WRONLY|CREAT");
        rec(mkdir(p, 0755), "mkdir %s", p);
        rec(unlink(p), "unlink %s", p);
        rec(rmdir(p), "rmdir %s", p);
        rec(rename(p, "z"), "rename %s z", p);
        rec(chmod(p, 0600), "chmod %s", p);
        rec(truncate(p, 0), "truncate %s", p);
        rec(access(p, F_OK), "access %s", p);
    }
    /* A chain of symlinks: 40 are followed, the 41st is ELOOP. */
    char a[16], b[16];
    mkfile("c0", 0644);
    for (int i = 1; i <= 41; i++) {
        snprintf(a, sizeof a, "c%d", i - 1);
        snprintf(b, sizeof b, "c%d", i);
        sym(a, b);
    }
    st("c40", 1);
    st("c41", 1);
    openrec("c40", O_RDONLY, "RDONLY");
    openrec("c41", O_RDONLY, "RDONLY");
    openrec("lf", O_RDONLY | O_NOFOLLOW, "NOFOLLOW on a symlink");
    case_end();
}

/* A file's link count stops at 65000 (ext4's EXT4_LINK_MAX). */
static void link_max(void)
{
    case_begin("EMLINK");
    mkfile("f", 0644);
    mkd("many", 0755); /* the links, in a directory of their own that checkers can skip */
    char n[32];
    int fails = 0, first = 0;
    for (int i = 1; i < EXT4_LINK_MAX; i++) {
        snprintf(n, sizeof n, "many/l%d", i);
        if (link("f", n) && !fails++) first = i;
    }
    fprintf(out, "links before the limit: %d failed (first %d)\n", fails, first);
    st("f", 0);
    rec(link("f", "one-more"), "link past the limit");
    rec(rename("many/l1", "many/l2"), "rename between two names of a file at the limit");
    rec(rename("many/l1", "l1"), "rename a name of a file at the limit");
    rec(unlink("l1"), "unlink at the limit");
    rec(link("f", "one-more"), "link again below the limit");
    no_listing = 1;
    case_end();
    no_listing = 0;
}

/* FIFOs, devices and a socket (--special). */
static void specials(void)
{
    case_begin("special files");
    rec(mkfifo("p", 0644), "mkfifo p");
    rec(mknod("c", S_IFCHR | 0644, makedev(1, 3)), "mknod chr 1,3");
    rec(mknod("b", S_IFBLK | 0644, makedev(1, 3)), "mknod blk 1,3");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strcpy(a.sun_path, "s");
    rec(bind(s, (struct sockaddr *)&a, sizeof a), "bind socket s");
    close(s);
    rec(mkfifo("p", 0644), "mkfifo existing");
    rec(mknod("T", S_IFCHR | 0644, makedev(1, 3)), "mknod over a file");
    rec(mkfifo("nodir/p", 0644), "mkfifo in a missing dir");
    rec(mkfifo(L256, 0644), "mkfifo name256");
    const char *ps[] = {"p", "c", "b", "s"};
    char b[64];
    for (size_t i = 0; i < 4; i++) {
        const char *p = ps[i];
        st(p, 0);
        openrec(p, O_RDONLY | O_NONBLOCK, "RDONLY|NONBLOCK");
        openrec(p, O_WRONLY | O_NONBLOCK, "WRONLY|NONBLOCK");
        rec(truncate(p, 0), "truncate %s", p);
        rec(readlink(p, b, sizeof b), "readlink %s", p);
        rec(setxattr(p, "user.x", "v", 1, 0), "setxattr %s", p);
        rec(chmod(p, 0600), "chmod %s", p);
        rec(link(p, "hl"), "link %s", p);
        st("hl", 0);
        rec(unlink("hl"), "unlink hl");
        rec(rename(p, "r"), "rename %s", p);
        rec(renameat2(AT_FDCWD, "r", AT_FDCWD, "T", RENAME_EXCHANGE), "exchange %s with file", p);
        rec(rename("T", p), "rename back %s", p);
        rec(rename("r", "T"), "rename back T");
        st(p, 0);
        rec(unlink(p), "unlink %s", p);
    }
    case_end();
}

/* ---------------- the unprivileged pass ---------------- */

/* Files owned by root, by OTHER and by NOBODY in a sticky world-writable directory, a plain
 * world-writable one, a sticky one NOBODY owns and a setgid one (made as root). */
static void other_fixture(void)
{
    mkd("sticky", 0755);
    rec(chmod("sticky", 01777), "chmod sticky 1777");
    mkd("plain", 0755);
    rec(chmod("plain", 0777), "chmod plain 777");
    mkd("mysticky", 0755);
    rec(chmod("mysticky", 01777), "chmod mysticky 1777");
    rec(chown("mysticky", NOBODY, NOBODY), "chown mysticky");
    mkd("sgid", 0755);
    rec(chmod("sgid", 02777), "chmod sgid 2777");
    rec(chown("sgid", 0, 100), "chown sgid");
    const char *dirs[] = {"sticky", "plain", "mysticky"};
    char p[64];
    for (int i = 0; i < 3; i++) {
        const char *d = dirs[i];
        struct {
            const char *n;
            mode_t mode;
            uid_t uid;
            int dir;
        } fs[] = {{"rootf", 0644, 0, 0},     {"rootw", 0666, 0, 0},      {"othf", 0666, OTHER, 0},
                  {"mine", 0644, NOBODY, 0}, {"mine2", 0644, NOBODY, 0}, {"rootd", 0755, 0, 1},
                  {"othd", 0777, OTHER, 1},  {"mined", 0755, NOBODY, 1}, {"suid", 04666, 0, 0},
                  {"sgidx", 06776, 0, 0}};
        for (size_t k = 0; k < sizeof fs / sizeof *fs; k++) {
            snprintf(p, sizeof p, "%s/%s", d, fs[k].n);
            if (fs[k].dir)
                mkd(p, 0755);
            else
                mkfile(p, 0644);
            rec(chmod(p, fs[k].mode), "chmod %s", p);
            rec(chown(p, fs[k].uid, fs[k].uid), "chown %s", p);
        }
        snprintf(p, sizeof p, "%s/rootl", d);
        sym("rootw", p);
    }
}

/* Become NOBODY (uid, gid and the only supplementary group) for good. */
static int drop(void)
{
    gid_t g = NOBODY;
    if (setgroups(1, &g) || setresgid(NOBODY, NOBODY, NOBODY) ||
        setresuid(NOBODY, NOBODY, NOBODY)) {
        rec(-1, "drop privileges");
        return -1;
    }
    return 0;
}

static void as_other_in(const char *d)
{
    char p[64], q[64];
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    const char *names[] = {"rootf", "rootw", "othf", "mine", "rootl"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(p, sizeof p, "%s/%s", d, names[i]);
        rec(chmod(p, 0600), "chmod %s", p);
        rec(chown(p, NOBODY, NOBODY), "chown to me %s", p);
        rec(chown(p, 0, (gid_t)-1), "chown to root %s", p);
        rec(chown(p, (uid_t)-1, 0), "chgrp to root %s", p);
        rec(chown(p, (uid_t)-1, (gid_t)-1), "chown -1 -1 %s", p);
        rec(lchown(p, NOBODY, (gid_t)-1), "lchown to me %s", p);
        rec(utimensat(AT_FDCWD, p, ts, 0), "utimensat %s", p);
        rec(utimensat(AT_FDCWD, p, NULL, 0), "utimensat now %s", p);
        rec(utimensat(AT_FDCWD, p, now, 0), "utimensat UTIME_NOW %s", p);
        rec(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), "utimensat nofollow %s", p);
        rec(lsetxattr(p, "user.o", "v", 1, 0), "lsetxattr %s", p);
        rec(removexattr(p, "user.o"), "removexattr %s", p);
        rec(truncate(p, 1), "truncate %s", p);
        openrec(p, O_WRONLY, "WRONLY");
        openrec(p, O_WRONLY | O_CREAT, "WRONLY|CREAT");
        rec(setxattr(p, "user.o", "v", 1, 0), "setxattr %s", p);
        snprintf(q, sizeof q, "%s/hl-%s", d, names[i]);
        rec(link(p, q), "link %s", p);
        st(p, 0);
    }
    /* The set-user-ID bit goes at a write by someone else. */
    snprintf(p, sizeof p, "%s/suid", d);
    int fd = open(p, O_WRONLY);
    rec(fd < 0 ? -1 : 0, "open %s WRONLY", p);
    rec(write(fd, "x", 1), "write %s", p); /* EBADF when the open failed */
    if (fd >= 0) close(fd);
    st(p, 0);
    snprintf(p, sizeof p, "%s/sgidx", d);
    rec(truncate(p, 0), "truncate %s", p);
    st(p, 0);
    /* Setting set-group-ID on a file of a group one is not in: the bit is dropped. */
    snprintf(p, sizeof p, "%s/mine", d);
    rec(chown(p, (uid_t)-1, NOBODY), "chgrp %s", p);
    rec(chmod(p, 02755), "chmod 2755 %s", p);
    st(p, 0);
    /* Renames and removals (the sticky bit: only the owner of the file or the directory). */
    const char *victims[] = {"rootf", "othf", "mine2", "rootl"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", d, victims[i]);
        snprintf(q, sizeof q, "%s/%s.moved", d, victims[i]);
        rec(rename(p, q), "rename %s", p);
        rec(rename("mymade", p), "rename mine over %s", p);
        rec(unlink(p), "unlink %s", p);
        st(p, 0);
    }
    const char *dvictims[] = {"rootd", "othd", "mined"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", d, dvictims[i]);
        snprintf(q, sizeof q, "%s/sub/%s", d, dvictims[i]);
        rec(rename(p, "elsewhere"), "rename dir %s out", p);
        rec(rename(p, q), "rename dir %s into a subdir", p);
        rec(rmdir(p), "rmdir %s", p);
        st(p, 0);
    }
    snprintf(p, sizeof p, "%s/new", d);
    rec(mkfile(p, 0644), "made %s", p);
    st(p, 0);
    rec(setxattr(d, "user.o", "v", 1, 0), "setxattr dir %s", d);
    st(d, 0);
}

static void as_other(void)
{
    mkd("mydir", 0755); /* in the world-writable top-level case dir */
    mkfile("mymade", 0644);
    rec(mkd("sticky/sub", 0777), "mkdir sticky/sub");
    rec(mkd("plain/sub", 0777), "mkdir plain/sub");
    rec(mkd("mysticky/sub", 0777), "mkdir mysticky/sub");
    as_other_in("sticky");
    as_other_in("plain");
    as_other_in("mysticky");
    /* New names in a set-group-ID directory take its group; directories keep the bit. */
    mkd("sgid/d", 0755);
    mkfile("sgid/f", 02755);
    st("sgid/d", 0);
    st("sgid/f", 0);
    rec(mkdir("sticky/../x", 0755), "mkdir in a dir not writable");
    rec(chmod(".", 0777), "chmod a dir of root");
}

/* Run fn as NOBODY in a child (privileges go for good there), with the case directory open
 * to it meanwhile. */
static void as_nobody(void (*fn)(void))
{
    rec(chmod(".", 0777), "chmod case dir 777");
    fflush(out);
    pid_t pid = fork();
    if (pid == 0) {
        if (!drop()) fn();
        fflush(out);
        _exit(0);
    }
    int ws;
    waitpid(pid, &ws, 0);
    rec(chmod(".", 0755), "chmod case dir back");
}

/* The unprivileged pass. */
static void unprivileged(void)
{
    case_begin("unprivileged");
    other_fixture();
    as_nobody(as_other);
    case_end();
}

/* Set-user-ID and set-group-ID bits that writes, truncations, allocations and changes of
 * owner drop (the kernel's rules; under FUSE_HANDLE_KILLPRIV_V2 the file system applies
 * them): by root (privs_dropped), then by NOBODY (privs_dropped_by_other). */
static const struct {
    const char *n;
    mode_t mode;
    uid_t uid;
    gid_t gid;
} priv_files[] = {{"ru", 06755, 0, 100},         {"rg", 02745, 0, 100}, {"w", 06777, 0, 0},
                  {"wg", 02676, 0, 0},           {"t", 06777, 0, 0},    {"ft", 04666, 0, 0},
                  {"fa", 04666, 0, 0},           {"own", 06775, NOBODY, 100},
                  {"ownx", 02745, NOBODY, NOBODY}};

static void privs_dropped_by_other(void)
{
    int fd = open("w", O_WRONLY);
    rec(write(fd, "x", 1), "write w");
    if (fd >= 0) close(fd);
    fd = open("wg", O_WRONLY); /* setgid of a group NOBODY is not in goes too */
    rec(pwrite(fd, "x", 1, 3), "pwrite wg");
    if (fd >= 0) close(fd);
    rec(truncate("t", 5), "truncate t");
    fd = open("ft", O_WRONLY);
    rec(ftruncate(fd, 2), "ftruncate ft");
    if (fd >= 0) close(fd);
    fd = open("fa", O_WRONLY);
    rec(fallocate(fd, 0, 0, 100), "fallocate fa");
    if (fd >= 0) close(fd);
    rec(chown("own", (uid_t)-1, NOBODY), "chgrp own");
    rec(chown("ownx", NOBODY, (gid_t)-1), "chown ownx to itself");
    for (size_t k = 2; k < sizeof priv_files / sizeof *priv_files; k++)
        st(priv_files[k].n, 0);
}

static void privs_dropped(void)
{
    case_begin("setuid and setgid dropped");
    for (size_t k = 0; k < sizeof priv_files / sizeof *priv_files; k++) {
        const char *n = priv_files[k].n;
        mkfile(n, 0644);
        rec(chown(n, priv_files[k].uid, priv_files[k].gid), "chown %s", n);
        rec(chmod(n, priv_files[k].mode), "chmod %s", n);
    }
    /* root: a change of owner drops setuid, and setgid where the group may execute */
    rec(chown("ru", 0, 100), "chown ru by root");
    rec(chown("rg", 1, (gid_t)-1), "chown rg by root");
    int fd = open("rg", O_WRONLY);
    rec(write(fd, "x", 1), "write rg by root"); /* root keeps both */
    if (fd >= 0) close(fd);
    st("ru", 0);
    st("rg", 0);
    as_nobody(privs_dropped_by_other);
    case_end();
}

/* ---------------- the whole list ---------------- */

static void run_all(void)
{
    long_names();
    opens();
    mkdirs_rmdirs();
    renames();
    links();
    readlinks_truncates();
    new_modes();
    fallocate_all();
    by_fd();
    attrs();
    xattrs();
    long_names_case();
    notdirs_loops();
    case_begin("virtual names");
    st(".wordcount", 0);
    st(".search", 0);
    case_end();
    if (special) specials();
    link_max();
    unprivileged();
    privs_dropped();
}

/* Run the list under root (in a child, so the working directory and umask stay here) into
 * a temporary file, returned rewound; NULL on failure. */
static FILE *run_root(const char *root)
{
    FILE *f = tmpfile();
    if (!f) return NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        out = f;
        umask(022);
        if (chdir(root) || mkdir("errnocmp.d", 0755) || chdir("errnocmp.d")) {
            fprintf(stderr, "errnocmp: %s/errnocmp.d: %s\n", root, strerror(errno));
            _exit(2);
        }
        run_all();
        fflush(out);
        _exit(0);
    }
    int ws;
    if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws)) {
        fclose(f);
        return NULL;
    }
    rewind(f);
    return f;
}

static int starts(const char *s, const char *prefix)
{
    return prefix && !strncmp(s, prefix, strlen(prefix));
}

/* Why `line` of the case titled `title` may differ; NULL when it may not. */
static const char *allowed_why(const char *line, const char *title)
{
    if (title && strstr(title, ": ")) title = strstr(title, ": ") + 2;
    for (size_t i = 0; i < NALLOWED; i++)
        if (starts(line, allowed[i].op) || (title && starts(title, allowed[i].title)))
            return allowed[i].why;
    return NULL;
}

/* A run's lines, all in memory. */
typedef struct lines {
    char **l;
    size_t n, cap;
} lines;

static int slurp(FILE *f, lines *L)
{
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) >= 0) {
        if (L->n == L->cap) {
            size_t nc = L->cap ? L->cap * 2 : 4096;
            char **p = realloc(L->l, nc * sizeof *p);
            if (!p) return -1;
            L->l = p;
            L->cap = nc;
        }
        if (!(L->l[L->n++] = strdup(line))) return -1;
    }
    free(line);
    return 0;
}

static void lines_free(lines *L)
{
    for (size_t i = 0; i < L->n; i++)
        free(L->l[i]);
    free(L->l);
}

static int is_entry(const char *line)
{
    return !strncmp(line, "entry ", 6);
}

/* Lines from `i` up to the next case's title (or the end). */
static size_t case_end_at(const lines *L, size_t i)
{
    for (i++; i < L->n && strncmp(L->l[i], "# case", 6); i++)
        ;
    return i;
}

typedef struct tally {
    int lines, bad, excused;
} tally;

/* Report one differing pair (either side may be missing). */
static void differ(tally *t, const char *title, const char *a, const char *b)
{
    const char *why = allowed_why(a ? a : b, title);
    if (why) {
        t->excused++;
        printf("allowed (%s):\n", why);
    } else {
        t->bad++;
        printf("DIFF in case %s\n", title ? title : "(none)");
    }
    printf("  A: %s  B: %s", a ? a : "(none)\n", b ? b : "(none)\n");
}

/* The listing lines of one case, compared as sets: the same entry may come at another
 * position when an earlier one is missing on one side. */
static void compare_entries(tally *t, const char *title, char **a, size_t na, char **b, size_t nb)
{
    char *used = calloc(nb + 1, 1);
    for (size_t i = 0; i < na; i++) {
        t->lines++;
        size_t j = 0;
        while (j < nb && (used[j] || strcmp(a[i], b[j])))
            j++;
        if (j < nb) {
            used[j] = 1;
            continue;
        }
        differ(t, title, a[i], NULL);
    }
    for (size_t j = 0; j < nb; j++)
        if (!used[j]) differ(t, title, NULL, b[j]);
    free(used);
}

/* One case: its calls' lines in order, then its listing. */
static void compare_case(tally *t, char **a, size_t na, char **b, size_t nb)
{
    char title[256] = "";
    if (na && !strncmp(a[0], "# case ", 7)) snprintf(title, sizeof title, "%s", a[0] + 7);
    title[strcspn(title, "\n")] = 0;
    const char *tt = strstr(title, ": ") ? strstr(title, ": ") + 2 : NULL;
    size_t ea = 0, eb = 0;
    while (ea < na && !is_entry(a[ea]))
        ea++;
    while (eb < nb && !is_entry(b[eb]))
        eb++;
    for (size_t i = 0; i < ea || i < eb; i++) {
        t->lines++;
        if (i < ea && i < eb && !strcmp(a[i], b[i])) continue;
        differ(t, tt ? title : NULL, i < ea ? a[i] : NULL, i < eb ? b[i] : NULL);
    }
    compare_entries(t, tt ? title : NULL, a + ea, na - ea, b + eb, nb - eb);
}

/* Compare the two runs case by case; every differing line is printed with both results. */
static int compare(FILE *fa, FILE *fb, int verbose)
{
    lines A = {0}, B = {0};
    tally t = {0};
    if (slurp(fa, &A) || slurp(fb, &B)) {
        fprintf(stderr, "errnocmp: out of memory\n");
        return 2;
    }
    if (verbose)
        for (size_t i = 0; i < B.n; i++)
            fputs(B.l[i], stdout);
    size_t ia = 0, ib = 0;
    while (ia < A.n || ib < B.n) {
        size_t ea = ia < A.n ? case_end_at(&A, ia) : ia, eb = ib < B.n ? case_end_at(&B, ib) : ib;
        compare_case(&t, A.l + ia, ea - ia, B.l + ib, eb - ib);
        ia = ea;
        ib = eb;
    }
    printf("%d lines, %d differ, %d of them allowed by design\n", t.lines, t.bad + t.excused,
           t.excused);
    lines_free(&A);
    lines_free(&B);
    return t.bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    int verbose = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--special"))
            special = 1;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else
            break;
    }
    if (argc - i != 2) {
        fprintf(stderr, "usage: errnocmp [--special] [-v] REFERENCE_DIR TESTED_DIR\n");
        return 2;
    }
    if (geteuid()) {
        fprintf(stderr, "errnocmp: run as root (the second pass changes users)\n");
        return 2;
    }
    FILE *a = run_root(argv[i]), *b = a ? run_root(argv[i + 1]) : NULL;
    if (!a || !b) {
        fprintf(stderr, "errnocmp: a run failed\n");
        return 2;
    }
    int rc = compare(a, b, verbose);
    fclose(a);
    fclose(b);
    return rc;
}
