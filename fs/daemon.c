#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "../engine/base/err.h"

int daemon_fork(int foreground, daemon_link *l)
{
    int p[2];
    l->fd = -1;
    if (foreground) return 0;
    if (pipe(p) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        l->fd = p[1];
        return 0;
    }
    close(p[1]);
    unsigned char status;
    ssize_t n;
    do
        n = read(p[0], &status, 1);
    while (n < 0 && errno == EINTR);
    _exit(n == 1 ? status : EX_FAIL);
}

static void report(daemon_link *l, int status)
{
    unsigned char b = (unsigned char)status;
    ssize_t n;
    do
        n = write(l->fd, &b, 1);
    while (n < 0 && errno == EINTR);
    close(l->fd);
    l->fd = -1;
}

void daemon_ready(daemon_link *l)
{
    int rc = chdir("/"); /* "/" is there */
    (void)rc;
    if (l->fd < 0) return;
    setsid();
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2) close(null);
    }
    report(l, EX_OK);
}

void daemon_exit(daemon_link *l, int status)
{
    if (l->fd >= 0) report(l, status);
}
