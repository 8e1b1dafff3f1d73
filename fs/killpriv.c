/* killpriv: ask the kernel for FUSE_HANDLE_KILLPRIV_V2 and FUSE_PARALLEL_DIROPS, which
 * libfuse 3.14 cannot (killpriv.h).
 *
 * libfuse writes its replies with writev(2) on the device. This file defines writev for the
 * daemon, which the dynamic linker binds libfuse's calls to (an executable's symbols come
 * first); it passes every call on to the next writev (the C library's, or a sanitizer's in
 * front of it, which must see every reply: ThreadSanitizer orders a reply before the request
 * another thread reads next), and sets the flags in the one reply it looks at: the first one
 * written on the device after fs_killpriv_arm, which is the answer to FUSE_INIT (the kernel
 * sends nothing else before INIT is answered). Where libfuse does not write that way (a
 * libfuse built statically, or with its own I/O), nothing is set and the kernel goes on
 * asking, which is only slower. */
#include "killpriv.h"

#include <dlfcn.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

static int dev_fd = -1;   /* the device whose next reply is INIT's; -1: none awaited */
static writev_fn next_writev; /* the writev this one stands in front of (NULL: none found) */

/* Found once at load, before any thread writes. */
__attribute__((constructor)) static void find_next_writev(void)
{
    void *p = dlsym(RTLD_NEXT, "writev");
    memcpy(&next_writev, &p, sizeof next_writev); /* a function's address, as dlsym gives it */
}

void fs_killpriv_arm(int fd)
{
    __atomic_store_n(&dev_fd, fd, __ATOMIC_RELEASE);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    if (fd >= 0 && fd == __atomic_load_n(&dev_fd, __ATOMIC_ACQUIRE) &&
        __atomic_exchange_n(&dev_fd, -1, __ATOMIC_ACQ_REL) == fd) {
        struct fuse_out_header *h = n >= 2 ? iov[0].iov_base : NULL;
        if (h && iov[0].iov_len == sizeof *h && !h->error &&
            iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
            struct fuse_init_out *o = iov[1].iov_base; /* libfuse's reply, not yet sent */
            o->flags |= FUSE_HANDLE_KILLPRIV_V2 | FUSE_PARALLEL_DIROPS;
        }
    }
    return next_writev ? next_writev(fd, iov, n) : syscall(SYS_writev, fd, iov, n);
}
