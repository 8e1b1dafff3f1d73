/* killpriv: ask the kernel for FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot (killpriv.h).
 *
 * libfuse writes its replies with writev(2) on the device. This file defines writev for the
 * daemon, which the dynamic linker binds libfuse's calls to (an executable's symbols come
 * first); it passes every call on to the next writev (the C library's, or a sanitizer's in
 * front of it, which must see every reply: ThreadSanitizer orders a reply before the request
 * another thread reads next), and sets the flag in the one reply it looks at: the first one
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

static int dev_fd = -1; /* the device whose next reply is INIT's; -1: none awaited */

void fs_killpriv_arm(int fd)
{
    __atomic_store_n(&dev_fd, fd, __ATOMIC_RELEASE);
}

/* The writev this one stands in front of; NULL when none is found (then the system call). */
static writev_fn next_writev(void)
{
    static writev_fn next;
    static int looked;
    if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
        void *p = dlsym(RTLD_NEXT, "writev");
        writev_fn f;
        memcpy(&f, &p, sizeof f); /* a function's address, as dlsym returns it */
        __atomic_store_n(&next, f, __ATOMIC_RELAXED);
        __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&next, __ATOMIC_RELAXED);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    if (fd >= 0 && fd == __atomic_load_n(&dev_fd, __ATOMIC_ACQUIRE) &&
        __atomic_exchange_n(&dev_fd, -1, __ATOMIC_ACQ_REL) == fd) {
        struct fuse_out_header *h = n >= 2 ? iov[0].iov_base : NULL;
        if (h && iov[0].iov_len == sizeof *h && !h->error &&
            iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
            struct fuse_init_out *o = iov[1].iov_base; /* libfuse's reply, not yet sent */
            o->flags |= FUSE_HANDLE_KILLPRIV_V2;
        }
    }
    writev_fn next = next_writev();
    return next ? next(fd, iov, n) : syscall(SYS_writev, fd, iov, n);
}
