/* loop: the daemon's request loop. One thread reads the requests from the FUSE device and
 * answers at once those a policy calls quick (a lookup, an attribute, an open or a read
 * whose bytes are at hand); the others go to a pool of worker threads, and so do quick reads
 * while further requests are already waiting and a worker is idle (callers in parallel).
 *
 * Why: a cold or warm `tar` sends one small request at a time, and libfuse's own
 * multithreaded loop hands each to whichever of its threads is waiting, a wakeup of another
 * thread per request; on a small virtual machine that costs more than answering. The
 * requests that can take long (decoding a shard, an analytic, a write and its journal) still
 * run beside each other in the pool, so they do not hold up the quick ones. */
#ifndef TDC_FS_LOOP_H
#define TDC_FS_LOOP_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stddef.h>

/* Where the request `msg` (`len` bytes as read from the device: a header, then its arguments)
 * is answered: FS_LOOP_WORKER, FS_LOOP_HERE by the reading thread, or FS_LOOP_HERE_ALONE by
 * it unless the next request is already waiting and a worker is idle (a request that copies
 * data: with callers in parallel, the reading thread alone would serve them on one core). */
enum { FS_LOOP_WORKER, FS_LOOP_HERE, FS_LOOP_HERE_ALONE };

/* libfuse's default for its multithreaded loop's max_threads. */
#define FS_WORKERS 10

typedef int (*fs_loop_quick)(void *ctx, const void *msg, size_t len);

/* Serve se's requests until it is unmounted or exited (a signal): 0, or a negative errno
 * when reading the device failed. `workers` threads (at least one) take the requests that
 * `quick` does not; every request taken is answered before this returns. */
int fs_loop(struct fuse_session *se, unsigned workers, fs_loop_quick quick, void *ctx);

#endif
