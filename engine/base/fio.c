#include "fio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "err.h"

int fio_write_all(int fd, const void *p, size_t n, const char *path)
{
    const unsigned char *q = p;
    while (n) {
        ssize_t w = write(fd, q, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return tdc_error(-errno, "%s: write: %s", path, strerror(errno));
        }
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

int fio_tmpfile(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR)) return fd;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tadoc-tmp.XXXXXX", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

const char *fio_tmpdir(void)
{
    const char *d = getenv("TMPDIR");
    return d && d[0] == '/' ? d : "/var/tmp";
}

uint64_t fio_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0, lim;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r"); /* "max" where there is no limit */
    if (f) {
        if (fscanf(f, "%" SCNu64, &lim) == 1 && lim < ram) ram = lim;
        fclose(f);
    }
    return ram;
}

int fio_pwritev_all(int fd, struct iovec *iov, int cnt, uint64_t off, const char *path)
{
    while (cnt > 0) {
        ssize_t w = pwritev(fd, iov, cnt, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return tdc_error(-errno, "%s: write: %s", path, strerror(errno));
        }
        off += (uint64_t)w;
        for (; cnt > 0 && (size_t)w >= iov->iov_len; iov++, cnt--)
            w -= (ssize_t)iov->iov_len;
        if (cnt > 0) { /* a short write: the rest of this buffer next */
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

int fio_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *path)
{
    struct iovec v = {(void *)p, n};
    return fio_pwritev_all(fd, &v, 1, off, path);
}

int fio_read_at(int fd, void *p, size_t n, uint64_t off, const char *path)
{
    unsigned char *q = p;
    while (n) {
        ssize_t k = pread(fd, q, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR) continue;
            return tdc_error(-errno, "%s: read: %s", path, strerror(errno));
        }
        if (k == 0) return tdc_error(-EBADMSG, "%s: file is truncated", path);
        q += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

int fio_sync_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return -ENOMEM;
    int rc = 0, dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) < 0)
        rc = tdc_error(-errno, "%s: fsync of its directory: %s", path, strerror(errno));
    if (dfd >= 0) close(dfd);
    free(copy);
    return rc;
}

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place. */
static void unescape_mountinfo(char *s)
{
    char *o = s;
    for (; *s; s++)
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    *o = 0;
}

int fio_mounts(int (*fn)(void *ctx, const char *mnt, const char *type, const char *dev), void *ctx)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[8192];
    int rc = 0;
    while (!rc && f && fgets(line, sizeof line, f)) {
        char dev[32], mp[4096], type[256];
        const char *sep = strstr(line, " - ");
        if (!sep || sscanf(line, "%*s %*s %31s %*s %4095s", dev, mp) != 2 ||
            sscanf(sep + 3, "%255s", type) != 1)
            continue;
        unescape_mountinfo(mp);
        rc = fn(ctx, mp, type, dev);
    }
    if (f) fclose(f);
    return rc;
}

int fio_open_file(const char *path, int flags, struct stat *st)
{
    int fd = open(path, flags | O_NONBLOCK);
    if (fd < 0) return -1;
    int e = fstat(fd, st) < 0 ? errno : S_ISREG(st->st_mode) ? 0 : EINVAL;
    /* a regular file's reads ignore O_NONBLOCK, but the descriptor is left as asked */
    if (!e && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) e = errno;
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int fio_long_path(const char *path, fio_long *l)
{
    *l = (fio_long){.p = path, .fd = -1};
    if (strlen(path) < PATH_MAX) return 0;
    /* room for REST beside "/proc/self/fd/N/" */
    enum { ROOM = PATH_MAX - 64 };
    const char *rest = path;
    int fd = AT_FDCWD, err = 0;
    while (!err && strlen(rest) >= ROOM) {
        const char *cut = rest + ROOM - 1; /* the longest chunk that ends before a '/' */
        while (cut > rest && *cut != '/')
            cut--;
        char *chunk = cut > rest ? strndup(rest, (size_t)(cut - rest)) : NULL;
        int next = chunk ? openat(fd, chunk, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        err = !chunk ? (cut > rest ? ENOMEM : ENAMETOOLONG) : next < 0 ? errno : 0;
        free(chunk);
        if (fd != AT_FDCWD) close(fd);
        fd = next;
        for (rest = cut; *rest == '/'; rest++)
            ;
    }
    if (!err && !(l->mem = malloc(strlen(rest) + 32))) err = ENOMEM;
    if (err) {
        if (fd >= 0) close(fd);
        return tdc_error(-err, "%s: %s", path, strerror(err));
    }
    sprintf(l->mem, "/proc/self/fd/%d/%s", fd, rest);
    l->p = l->mem;
    l->fd = fd;
    return 0;
}

void fio_long_end(fio_long *l)
{
    if (l->fd >= 0) close(l->fd);
    free(l->mem);
    *l = (fio_long){.fd = -1};
}

void fio_flock_holder(int fd, char *who, size_t n)
{
    struct stat st;
    char line[256], comm[64] = "";
    unsigned maj, min;
    unsigned long long ino;
    long pid = 0;
    FILE *f = fstat(fd, &st) == 0 ? fopen("/proc/locks", "re") : NULL;
    who[0] = 0;
    /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": the device in hex, the inode */
    while (f && !pid && fgets(line, sizeof line, f)) {
        long p;
        if (strstr(line, " FLOCK ") &&
            sscanf(line, "%*s %*s %*s %*s %ld %x:%x:%llu", &p, &maj, &min, &ino) == 4 &&
            ino == (unsigned long long)st.st_ino && maj == major(st.st_dev) &&
            min == minor(st.st_dev) && p != (long)getpid())
            pid = p;
    }
    if (f) fclose(f);
    if (!pid) return;
    snprintf(line, sizeof line, "/proc/%ld/comm", pid);
    FILE *c = fopen(line, "re");
    if (c && fgets(comm, sizeof comm, c)) comm[strcspn(comm, "\n")] = 0;
    if (c) fclose(c);
    snprintf(who, n, comm[0] ? "pid %ld (%s)" : "pid %ld", pid, comm);
}
