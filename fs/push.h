/* push: on a read-only mount in the no-open mode, a reader going through files in order (tar,
 * grep -r, cp -r, diff -r) finds the next small files' pages already in the kernel's cache.
 *
 * Why: in the no-open mode a small file read whole costs one request, its READ; stored ahead
 * of the reader by a thread of the daemon (FUSE_NOTIFY_STORE), its pages are there when the
 * reader opens it, and no request is sent at all. Files are taken in inode order, which is the
 * order of their paths in the archive (the order a recursive reader goes in). A READ at the
 * start of a file is the hint: the files after it are stored, up to a window, each one whole,
 * small (at most PUSH_BYTES), unchanged, at hand (its shard decoded already: a store never
 * loads one) and checked against its archived content hash before it is stored (a damaged file is
 * left to its READ, which fails with EIO). Read-only mounts only: on a writable one a store could
 * land after a write to the same file and put back what it replaced. The guess costs decoding where
 * the reader does not go on in order. */
#ifndef TDC_FS_PUSH_H
#define TDC_FS_PUSH_H

#include <stdint.h>

#include "fs.h"

#define PUSH_FILES 64                  /* files stored past the one whose READ was the hint */
#define PUSH_BYTES ((size_t)128 << 10) /* the largest file stored */

/* Start the thread (c->push); 0 or -ENOMEM / -EAGAIN. */
int fs_push_start(fs_ctx *c);

/* A READ at offset 0 of file `ino` came: store the files after it. Cheap; thread-safe. */
void fs_push_hint(fs_ctx *c, uint64_t ino);

/* Stop the thread and free c->push (NULL allowed). */
void fs_push_stop(fs_ctx *c);

#endif
