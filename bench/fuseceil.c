/* fuseceil: the smallest useful FUSE filesystem, to measure what FUSE itself allows here.
 * usage: fuseceil MNT SIZE_MB [-f]
 * Serves one read-only file, /data, of SIZE_MB MiB generated in memory at start, opened with
 * direct_io (every read() reaches the daemon, as with a cold cache) and served by libfuse's
 * multithreaded loop with one copy from memory per request, so read speeds through this mount
 * are an upper bound for any FUSE daemon on the machine. Backgrounds itself once mounted unless
 * -f is given; unmount with `fusermount3 -u MNT` or SIGTERM. */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DATA_INO 2

static const char *data_name = "data";
static unsigned char *data;
static size_t data_size;
static time_t started;

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mtime = st->st_atime = st->st_ctime = started;
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0555;
        st->st_nlink = 2;
    } else {
        st->st_mode = S_IFREG | 0444;
        st->st_nlink = 1;
        st->st_size = (off_t)data_size;
        st->st_blocks = (blkcnt_t)((data_size + 511) / 512);
    }
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    if (parent != FUSE_ROOT_ID || strcmp(name, data_name)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = DATA_INO;
    /* Long timeouts keep lookups and getattrs out of the read measurements. */
    e.attr_timeout = e.entry_timeout = 3600;
    fill_attr(e.ino, &e.attr);
    fuse_reply_entry(req, &e);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    if (ino != FUSE_ROOT_ID && ino != DATA_INO) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct stat st;
    fill_attr(ino, &st);
    fuse_reply_attr(req, &st, 3600);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    if (ino != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    static const char *names[] = {".", "..", "data"};
    static const fuse_ino_t inos[] = {FUSE_ROOT_ID, FUSE_ROOT_ID, DATA_INO};
    char buf[512];
    size_t used = 0;
    for (off_t i = off; i < 3; i++) {
        struct stat st;
        fill_attr(inos[i], &st);
        size_t n = fuse_add_direntry(req, buf + used, sizeof buf - used, names[i], &st, i + 1);
        if (n > sizeof buf - used || used + n > size) break;
        used += n;
    }
    fuse_reply_buf(req, buf, used);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (ino != DATA_INO) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    if ((fi->flags & O_ACCMODE) != O_RDONLY) {
        fuse_reply_err(req, EROFS);
        return;
    }
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    if (off < 0 || (size_t)off >= data_size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    size_t n = data_size - (size_t)off < size ? data_size - (size_t)off : size;
    fuse_reply_buf(req, (const char *)data + off, n);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = ll_lookup,
    .getattr = ll_getattr,
    .readdir = ll_readdir,
    .open = ll_open,
    .read = ll_read,
};

int main(int argc, char **argv)
{
    int foreground = argc == 4 && !strcmp(argv[3], "-f");
    char *end = "";
    unsigned long mb = argc >= 3 ? strtoul(argv[2], &end, 10) : 0;
    if ((argc != 3 && !foreground) || !mb || *end || mb > (SIZE_MAX >> 21)) {
        fprintf(stderr, "usage: fuseceil MNT SIZE_MB [-f]\n");
        return 2;
    }
    data_size = (size_t)mb << 20;
    data = malloc(data_size);
    if (!data) {
        fprintf(stderr, "fuseceil: cannot allocate %lu MiB\n", mb);
        return 1;
    }
    /* Printable pseudo-random bytes, so nothing downstream can shortcut zeros. */
    uint64_t s = 88172645463325252u;
    for (size_t i = 0; i < data_size; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        data[i] = (unsigned char)(' ' + s % 95);
    }
    started = time(NULL);

    char *fargv[] = {argv[0], "-o", "ro,fsname=fuseceil,subtype=fuseceil", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    int rc = 1;
    if (!se) goto out;
    if (fuse_set_signal_handlers(se)) goto out_session;
    if (fuse_session_mount(se, argv[1])) goto out_signals;
    /* Mount first, then detach: the parent exits only once the mount is usable. */
    if (fuse_daemonize(foreground)) goto out_unmount;
    /* libfuse's default loop settings, as tadocfs runs with them. */
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (!cfg) goto out_unmount;
    /* Errors come back negative; SIGTERM or SIGINT ends the loop with the signal's number. */
    rc = fuse_session_loop_mt(se, cfg) < 0;
    fuse_loop_cfg_destroy(cfg);
out_unmount:
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se);
out:
    fuse_opt_free_args(&args);
    free(data);
    return rc;
}
