/* fio: small file I/O helpers shared by the archive and journal writers, and the list of
 * mounts. Each returns 0 or a negative errno with a message naming `path`. Thread-safe. */
#ifndef TDC_FIO_H
#define TDC_FIO_H

#include <stddef.h>
#include <stdint.h>

/* Write all n bytes at the current position (retrying short writes and EINTR). */
int fio_write_all(int fd, const void *p, size_t n, const char *path);

struct stat;

/* A path the system calls accept for `path`, however long: `path` itself when shorter than
 * PATH_MAX (nothing is opened), else "/proc/self/fd/N/REST", N a descriptor of a directory on
 * the way opened chunk by chunk (a tree deeper than PATH_MAX, which ext4 allows and tar
 * walks). Use l->p until fio_long_end. 0, or -errno of an open on the way (with the thread's
 * message naming `path`). */
typedef struct fio_long {
    const char *p;
    int fd;    /* the directory REST is relative to, or -1 */
    char *mem; /* l->p when made here */
} fio_long;
int fio_long_path(const char *path, fio_long *l);
void fio_long_end(fio_long *l);

/* open(path, flags) of a file that must be a regular one, without waiting where it is not (a
 * FIFO's open waits for the other end): the descriptor, its fstat in *st; or -1 with errno
 * set, EINVAL for something other than a regular file. */
int fio_open_file(const char *path, int flags, struct stat *st);

/* Write all n bytes at offset `off`. */
int fio_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *path);

struct iovec;

/* Write the cnt buffers of iov one after another at offset `off` (iov is changed). */
int fio_pwritev_all(int fd, struct iovec *iov, int cnt, uint64_t off, const char *path);

/* Read exactly n bytes at `off`; -EBADMSG ("truncated") if the file ends first. */
int fio_read_at(int fd, void *p, size_t n, uint64_t off, const char *path);

/* A new unlinked file in directory dir, open for reading and writing (O_TMPFILE where the
 * file system has it, else a named temporary file removed at once); -1 with errno set. */
int fio_tmpfile(const char *dir);

/* Where unlinked scratch files go: $TMPDIR when it is an absolute path, else /var/tmp (which
 * is on disk where /tmp may be memory). */
const char *fio_tmpdir(void);

/* Who else holds an flock on the file open at fd, for a message: "pid N (command)" into
 * who[n] from /proc/locks, or "" where that cannot be told (another PID namespace, no
 * /proc). */
void fio_flock_holder(int fd, char *who, size_t n);

/* Physical memory in bytes, or the cgroup's memory limit where that is lower; 0 if unknown. */
uint64_t fio_ram(void);

/* fsync the directory holding `path`, so a rename into it is durable. */
int fio_sync_dir(const char *path);

/* Every mount of /proc/self/mountinfo in order (the newest last): fn(ctx, mount point,
 * filesystem type, "major:minor") with the escapes of the names undone; a non-zero return
 * stops there and is returned. 0 when all were seen (or mountinfo cannot be read). */
int fio_mounts(int (*fn)(void *ctx, const char *mnt, const char *type, const char *dev),
               void *ctx);

#endif
