/* fio: small file I/O helpers shared by the archive and journal writers. Each returns 0 or a
 * negative errno with a message naming `path`. Thread-safe. */
#ifndef TDC_FIO_H
#define TDC_FIO_H

#include <stddef.h>
#include <stdint.h>

/* Write all n bytes at the current position (retrying short writes and EINTR). */
int fio_write_all(int fd, const void *p, size_t n, const char *path);

/* Write all n bytes at offset `off`. */
int fio_pwrite_all(int fd, const void *p, size_t n, uint64_t off, const char *path);

/* Read exactly n bytes at `off`; -EBADMSG ("truncated") if the file ends first. */
int fio_read_at(int fd, void *p, size_t n, uint64_t off, const char *path);

/* fsync the directory holding `path`, so a rename into it is durable. */
int fio_sync_dir(const char *path);

#endif
