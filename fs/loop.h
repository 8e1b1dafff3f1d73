/* loop: the daemon's request loop. One thread reads the requests from the FUSE device and
 * answers at once those a policy calls quick (a lookup, an attribute, an open or a read
 * whose bytes are at hand); the others go to a pool of worker threads. While requests keep
 * arriving faster than that thread answers them (callers in parallel), idle workers read
 * the device too and answer what they read.
 *
 * Why: a cold or warm `tar` sends one small request at a time, and libfuse's own
 * multithreaded loop hands each to whichever of its threads is waiting, a wakeup of another
 * thread per request; on a small virtual machine that costs more than answering. The
 * requests that can take long (decoding a shard, an analytic, an fsync) still run beside
 * each other in the pool, so they do not hold up the quick ones, and parallel callers still
 * get several threads. */
#ifndef TDC_FS_LOOP_H
#define TDC_FS_LOOP_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stddef.h>

/* libfuse's default for its multithreaded loop's max_threads. */
#define FS_WORKERS 10

/* How long the reading thread polls the device before it sleeps, while requests come that
 * close together (-o spin): longer than a shell's or a tar's time between two requests, short
 * enough that a caller that stops costs a negligible moment of one core. */
#define FS_SPIN_US 50

/* Whether the request `msg` (`len` bytes as read from the device: a header, then its
 * arguments) is answered by the thread that read it rather than handed to a worker. */
typedef int (*fs_loop_quick)(void *ctx, const void *msg, size_t len);

/* Serve se's requests until it is unmounted or exited (a signal): 0, or a negative errno
 * when reading the device failed. `workers` threads take the requests that `quick` does not
 * and help read (none: everything is answered by the reading thread); every request taken
 * is answered before this returns. While requests arrive less than `spin_us` apart, the
 * reading thread polls for the next that long before it blocks (0: it always blocks). */
int fs_loop(struct fuse_session *se, unsigned workers, unsigned spin_us, fs_loop_quick quick,
            void *ctx);

#endif
