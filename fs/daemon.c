#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../engine/base/err.h"

int daemon_fork(int foreground, daemon_link *l)
{
    int p[2];
    l->fd = -1;
    if (foreground) return 0;
    if (pipe2(p, O_CLOEXEC) < 0) return -1; /* no helper it execs holds it open */
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
    if (n == 1) _exit(status);
    /* The child ended without a word (killed, or out of memory): say so, and how. */
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st))
        fprintf(stderr, "tadocfs: the daemon was killed by signal %d (%s) before it mounted\n",
                WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        fprintf(stderr, "tadocfs: the daemon ended before it mounted\n");
    _exit(EX_FAIL);
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
