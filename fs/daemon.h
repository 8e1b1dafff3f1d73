/* daemon: the mount command returns once its daemon serves the mount, or with the exit
 * status of the error that stopped it, whose message the daemon printed on the caller's
 * terminal.
 *
 * The process forks before it builds anything (daemon_fork): the parent waits for one byte,
 * the exit status, and exits with it; the child opens the archive, mounts, and says so
 * (daemon_ready), or says why it stops (daemon_exit). libfuse's fuse_daemonize forks after
 * the mount instead, when the process already holds the file table's model (tens of MiB for
 * a large tree): that fork, and the exit of a parent sharing all of it, cost a sixth of the
 * mount command on a virtual machine, where page tables are dear. A daemon in the foreground
 * never forks. */
#ifndef TDC_FS_DAEMON_H
#define TDC_FS_DAEMON_H

/* Where the child reports to: the pipe's end, or -1 (foreground, or reported already). */
typedef struct daemon_link {
    int fd;
} daemon_link;

/* In the foreground: nothing (l->fd = -1). Else fork; the parent exits with the status its
 * child reports (EX_FAIL if the child ends without one); the child returns 0. -1 with errno
 * set when the process cannot fork (nothing forked). */
int daemon_fork(int foreground, daemon_link *l);

/* The mount is up: the child leaves the caller's session and terminal (stdin, stdout and
 * stderr on /dev/null) and lets the parent exit 0. Either way the working directory
 * becomes /, as the daemon needs no other. */
void daemon_ready(daemon_link *l);

/* The child stops before daemon_ready: the parent exits with `status`. Nothing once ready. */
void daemon_exit(daemon_link *l, int status);

#endif
