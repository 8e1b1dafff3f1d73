/* tadocfs: mount a tadocfs archive with FUSE, writable through its journal.
 *
 * usage: tadocfs ARCHIVE MOUNTPOINT [-f] [-d] [-s] [-o OPTIONS]
 * Exit status: 0 clean unmount, 1 mount or I/O failure, 2 usage error, 3 corrupt archive. */
#include <dirent.h>
#include <libgen.h>
#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <syslog.h>

#include "../engine/backend/backend.h"
#include "../engine/base/fio.h"
#include "../engine/base/heap.h"
#include "../engine/base/err.h"
#include "../engine/index/words.h"
#include "../lib/env.h"
#include "fs.h"
#include "daemon.h"
#include "killpriv.h"
#include "loop.h"
#include "push.h"

#define TADOCFS_VERSION "0.1.0"

typedef struct options {
    char *archive;
    char *mountpoint;
    char *gpu;
    char *cache_size;
    char *compact_threshold;
    char *journal_max;
    char *gpu_read_min;
    char *gpu_mem, *gpus;
    char *mem;
    /* numbers as given, parsed by parse_uint (fuse_opt's %u takes "5x" for 5, "-1" for
     * 2^32 - 1) */
    char *gpu_read_wait, *spin, *max_threads, *uid, *gid;
    int ro, preload, open, novirtual;
    int help, version;
} options;

enum { KEY_HELP, KEY_VERSION, KEY_UID, KEY_GID };

static const struct fuse_opt spec[] = {
    {"gpu=%s", offsetof(options, gpu), 0},
    {"cache_size=%s", offsetof(options, cache_size), 0},
    {"compact_threshold=%s", offsetof(options, compact_threshold), 0},
    {"journal_max=%s", offsetof(options, journal_max), 0},
    {"gpu_read_min=%s", offsetof(options, gpu_read_min), 0},
    {"gpu_mem=%s", offsetof(options, gpu_mem), 0},
    {"gpus=%s", offsetof(options, gpus), 0},
    {"gpu_read_wait=%s", offsetof(options, gpu_read_wait), 0},
    {"spin=%s", offsetof(options, spin), 0},
    {"max_threads=%s", offsetof(options, max_threads), 0}, /* libfuse's, taken here */
    {"mem=%s", offsetof(options, mem), 0},
    {"ro", offsetof(options, ro), 1},
    {"rw", offsetof(options, ro), 0},
    {"preload", offsetof(options, preload), 1},
    {"open", offsetof(options, open), 1},
    {"noopen", offsetof(options, open), 0},
    {"novirtual", offsetof(options, novirtual), 1},
    {"uid=%s", offsetof(options, uid), 0},
    {"gid=%s", offsetof(options, gid), 0},
    /* Words of fstab's options field that mean nothing to the daemon: mount.fuse3 hands
     * "defaults" (and with -t, what mount(8) passes) on to us. */
    FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_END};

static const char usage[] =
    "usage: tadocfs ARCHIVE MOUNTPOINT [-f] [-d] [-s] [-o OPTION[,OPTION...]]\n"
    "\n"
    "Mount a tadocfs archive (made by `tadoc pack`). Files are read straight from the\n"
    "grammar. Changes are journaled in ARCHIVE.journal and folded into the archive by\n"
    "`tadoc compact`, by `setfattr -n user.tadoc.compact MOUNTPOINT`, or in the background\n"
    "once the journal passes compact_threshold.\n"
    "\n"
    "  -f                     stay in the foreground\n"
    "  -d                     debug output (implies -f)\n"
    "  -s                     single-threaded loop\n"
    "  -o max_threads=N       worker threads for requests that decode, compute or wait,\n"
    "                         and for parallel callers (default 10; the others are\n"
    "                         answered by the thread that reads them)\n"
    "  -o spin=US             while requests follow each other closer than US\n"
    "                         microseconds, the thread that reads them polls for the next\n"
    "                         one that long before it sleeps (default 50; 0 = never; at\n"
    "                         most 1000000): a request less to wake a thread for\n"
    "  -o ro                  read-only (the journal is replayed but never written; the\n"
    "                         small files after one read are stored ahead in the kernel's\n"
    "                         cache)\n"
    "  -o open                every open and close of a regular file is a request to the\n"
    "                         daemon, and a virtual file is computed at its open; by\n"
    "                         default (noopen) the kernel opens and closes files itself\n"
    "                         and keeps their pages between opens (two requests less per\n"
    "                         file read or appended to), and a virtual file is computed\n"
    "                         when its name is looked up\n"
    "  -o novirtual           no virtual files (.wordcount, .search, ...): those names are\n"
    "                         plain names, for trees that hold files of those names\n"
    "  -o dev,suid            device nodes open and set-user-ID bits count (default:\n"
    "                         nodev, nosuid: an archive from elsewhere grants nothing)\n"
    "  -o allow_other         let other users see the mount (needs user_allow_other)\n"
    "                         (permissions are always checked by the kernel against the\n"
    "                         files' modes: default_permissions is implied)\n"
    "  -o compact_threshold=BYTES  journal size that starts a background compaction\n"
    "                         (K, M, G suffixes; default 1G; 0 = never)\n"
    "  -o journal_max=BYTES   past this journal size a change waits for a running background\n"
    "                         compaction (default 4 x compact_threshold, at least 256M;\n"
    "                         0 = never waits)\n"
    "  -o uid=N,gid=N         show every file as owned by N instead of the archived owner\n"
    "  -o gpu=off|auto|on     compute backend (auto: GPU when usable; on: fail without one)\n"
    "  -o gpu_read_min=BYTES  auto: reads of at least this many bytes go to the GPU, batched\n"
    "                         (K, M suffixes; default 64K, the crossover measured on an H100)\n"
    "  -o gpu_read_wait=US    how long a batch of reads waits for more (default 0: batches\n"
    "                         form from the reads that arrive while one runs)\n"
    "  -o gpu_mem=BYTES       device memory a part of an analytic may take on a GPU (K, M,\n"
    "                         G; default TADOC_GPU_MEM, else half the free memory): under\n"
    "                         mem= analytics go through the GPUs in parts of consecutive\n"
    "                         shards of at most that\n"
    "  -o gpus=LIST           the GPUs to use, as CUDA_VISIBLE_DEVICES names them, separated\n"
    "                         by ':' (e.g. 0:1); default: every visible GPU\n"
    "  -o cache_size=BYTES    memory for pre-expanded short rules, which reads copy whole\n"
    "                         instead of descending (K, M, G suffixes; default 256M; 0 = none)\n"
    "  -o preload             load and check the whole archive before mounting (default:\n"
    "                         mount once the file table is read and checked; the grammar\n"
    "                         loads in the background, and a read meanwhile loads only\n"
    "                         its file's shards; a damaged grammar makes reads fail with\n"
    "                         EIO, logged)\n"
    "  -o mem=BYTES|whole     never load the whole archive for reads: a read loads only its\n"
    "                         file's shards, within BYTES with those being read and those\n"
    "                         analytics use (K, M, G; least recently used dropped; loads\n"
    "                         wait for room); virtual files go shard by shard. whole: load\n"
    "                         the whole archive. Default: 256M (an eighth of RAM if less)\n"
    "                         for an archive of shards (format 4); user.tadoc.shard_cache\n"
    "                         shows it\n"
    "  -h, --help             this help;  -V, --version  version and backend\n"
    "\n"
    "From /etc/fstab:  /data/corpus.tdc /mnt/corpus fuse.tadocfs nodev,nosuid 0 0\n"
    "Unmount with `fusermount3 -u MOUNTPOINT` or by sending the daemon SIGTERM.\n"
    "\n"
    "exit status: 0 unmounted cleanly, 1 mount or I/O failure, 2 usage error,\n"
    "             3 the archive is corrupt\n";

/* gpus=LIST as CUDA_VISIBLE_DEVICES: names of letters, digits and '-' (an index, a GPU-
 * or MIG- UUID) separated by ':' (a comma would split the mount options). 0, or -1 said. */
static int set_gpus(const char *list)
{
    char *v = strdup(list);
    int ok = v && *v && list[strlen(list) - 1] != ':' && *list != ':' && !strstr(list, "::");
    for (char *p = v; ok && *p; p++) {
        if (*p == ':')
            *p = ',';
        else if (!isalnum((unsigned char)*p) && *p != '-')
            ok = 0;
    }
    if (ok && setenv("CUDA_VISIBLE_DEVICES", v, 1)) ok = 0;
    if (!ok) fprintf(stderr, "tadocfs: gpus= must name GPUs (numbers or UUIDs) separated by ':'\n");
    free(v);
    return ok ? 0 : -1;
}

static int proc(void *data, const char *arg, int key, struct fuse_args *out)
{
    (void)out;
    options *o = data;
    switch (key) {
    case KEY_HELP:
        o->help = 1;
        return 0;
    case KEY_VERSION:
        o->version = 1;
        return 0;
    case FUSE_OPT_KEY_NONOPT:
        if (!o->archive) {
            o->archive = strdup(arg);
            return 0;
        }
        if (!o->mountpoint) {
            o->mountpoint = strdup(arg);
            return 1; /* fuse_parse_cmdline takes it from here */
        }
        fprintf(stderr, "tadocfs: unexpected argument '%s'\n", arg);
        return -1;
    }
    return 1;
}

/* Whether syslog copies every line to the terminal (LOG_PERROR: a foreground daemon). */
static int log_perror;

/* Background events: syslog, and the terminal (which a background daemon holds until it is
 * ready, so that what the mount found reaches the user who mounted). */
static void log_event(void *ctx, const char *msg)
{
    (void)ctx;
    int bad = strstr(msg, "failed") || !strncmp(msg, "cannot", 6);
    syslog(bad ? LOG_ERR : LOG_INFO, "%s", msg);
    if (!log_perror) fprintf(stderr, "tadocfs: %s\n", msg);
}

/* Whether a GPU is usable, asked in a child process: a CUDA context does not survive the
 * fork that puts the daemon in the background, so this process must not make one yet. */
static int gpu_usable_probe(void)
{
    pid_t pid = fork();
    if (pid == 0) _exit(backend_gpu_available() ? 0 : 1);
    int st;
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Refuse a mountpoint left behind by a daemon that died, with the command that clears it. */
/* Undo mountinfo's octal escapes (space, tab, newline, backslash) in place. */

/* The kernel caps a FUSE mount's readahead at its default 128 KiB, whatever max_readahead op_init
 * asks for; raise this mount's own limit (sysfs, root only) to READAHEAD_KB, so large files are
 * read in 1 MiB requests: a sequential read takes fewer requests and less CPU time. Best
 * effort: nothing changes where it fails.
 * `real` is the mountpoint's real path, taken before the mount (realpath would ask the daemon,
 * whose loop has not started yet). */
#define READAHEAD_KB 1024
typedef struct mount_dev {
    const char *real;
    char dev[32];
} mount_dev;

static int dev_of(void *ctx, const char *mnt, const char *type, const char *dev)
{
    mount_dev *m = ctx;
    (void)type;
    if (!strcmp(mnt, m->real)) snprintf(m->dev, sizeof m->dev, "%s", dev); /* the newest */
    return 0;
}

static void raise_readahead(const char *real)
{
    mount_dev m = {.real = real, .dev = ""};
    fio_mounts(dev_of, &m);
    const char *dev = m.dev;
    char path[96];
    snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
    FILE *ra = *dev ? fopen(path, "w") : NULL;
    if (ra) {
        fprintf(ra, "%d\n", READAHEAD_KB);
        fclose(ra);
    }
}

static int check_mountpoint(const char *mp)
{
    struct stat st;
    if (stat(mp, &st) < 0) {
        if (errno == ENOTCONN)
            fprintf(stderr,
                    "tadocfs: %s: stale mount (its daemon died); run 'fusermount3 -u %s' first\n",
                    mp, mp);
        else
            fprintf(stderr, "tadocfs: %s: %s\n", mp, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "tadocfs: %s: not a directory\n", mp);
        return -1;
    }
    /* stat may be answered from the kernel's cache of a dead mount; listing is not. */
    DIR *d = opendir(mp);
    if (!d && errno == ENOTCONN) {
        fprintf(stderr,
                "tadocfs: %s: stale mount (its daemon died); run 'fusermount3 -u %s' first\n", mp,
                mp);
        return -1;
    }
    if (d) closedir(d);
    return 0;
}

/* 1 when directory `dir` (a real path) is `mp` (a real path) or lies below it. */
static int dir_under(const char *dir, const char *mp)
{
    size_t n = strlen(mp);
    if (!strcmp(mp, "/")) return 1;
    return !strncmp(dir, mp, n) && (dir[n] == 0 || dir[n] == '/');
}

/* A writable mount whose archive's directory (as named, or the file's own after symlinks) is
 * the mountpoint or below it would write its journal and compactions through itself, which
 * the kernel holds while it waits for them: refused (-o ro writes nothing by path). */
static int check_archive_outside(const char *archive, const char *mp)
{
    char *m = realpath(mp, NULL), *named = strdup(archive), *file = realpath(archive, NULL);
    char *d1 = named ? realpath(dirname(named), NULL) : NULL;
    char *d2 = file ? realpath(dirname(file), NULL) : NULL;
    int bad = m && ((d1 && dir_under(d1, m)) || (d2 && dir_under(d2, m)));
    if (bad)
        fprintf(stderr,
                "tadocfs: %s lies under the mountpoint %s: its journal and compactions would go "
                "through the mount itself; mount it elsewhere, or with -o ro\n",
                archive, mp);
    free(m);
    free(named);
    free(file);
    free(d1);
    free(d2);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts co = {0};
    struct fuse_session *se = NULL;
    options o = {0};
    fs_ctx c = {0};
    daemon_link dl = {-1};
    int ret = EX_FAIL, rc;

    pthread_mutex_init(&c.slock, NULL);
    pthread_mutex_init(&c.dlock, NULL);
    pthread_mutex_init(&c.hlock, NULL);
    pthread_mutex_init(&c.vc.lock, NULL);
    sreg_init(&c.search);
    c.owner = (uint32_t)getuid();
    if (fuse_opt_parse(&args, &o, spec, proc) < 0) {
        fputs(usage, stderr);
        ret = EX_USAGE;
        goto out_args;
    }
    if (o.help) {
        fputs(usage, stdout);
        ret = EX_OK;
        goto out_args;
    }
    if (o.version) {
        printf("tadocfs %s (%s; libfuse %s)\n", TADOCFS_VERSION, backend_describe(),
               fuse_pkgversion());
        ret = EX_OK;
        goto out_args;
    }
    if (!o.archive || !o.mountpoint) {
        fprintf(stderr, "tadocfs: need ARCHIVE and MOUNTPOINT\n%s", usage);
        ret = EX_USAGE;
        goto out_args;
    }
    int gpu_mode = backend_mode_parse(o.gpu);
    if (gpu_mode < 0) {
        fprintf(stderr, "tadocfs: gpu= must be off, auto or on\n");
        ret = EX_USAGE;
        goto out_args;
    }
    /* 1 GiB: replaying a journal at mount is cheap per byte, while a compaction costs in
     * proportion to the dirty bytes plus a rewrite of the archive and holds changes meanwhile
     * (bench/results/write.md has the figures), so a large journal is the cheaper thing to
     * carry. */
    uint64_t cache = IDX_CACHE_DEFAULT, threshold = (uint64_t)1 << 30;
    if (o.cache_size && parse_size(o.cache_size, &cache)) {
        fprintf(stderr, "tadocfs: cache_size= must be a number of bytes (K, M, G allowed)\n");
        ret = EX_USAGE;
        goto out_args;
    }
    if (o.compact_threshold && parse_size(o.compact_threshold, &threshold)) {
        fprintf(stderr,
                "tadocfs: compact_threshold= must be a number of bytes (K, M, G allowed)\n");
        ret = EX_USAGE;
        goto out_args;
    }
    uint64_t journal_max = 0; /* vol_journal_max's default */
    if (o.journal_max) {
        if (parse_size(o.journal_max, &journal_max)) {
            fprintf(stderr, "tadocfs: journal_max= must be a number of bytes (K, M, G allowed)\n");
            ret = EX_USAGE;
            goto out_args;
        }
        if (!journal_max) journal_max = UINT64_MAX;
    }
    uint64_t read_min = BACKEND_READ_MIN_BYTES;
    if (o.gpu_read_min && parse_size(o.gpu_read_min, &read_min)) {
        fprintf(stderr, "tadocfs: gpu_read_min= must be a number of bytes (K, M, G allowed)\n");
        ret = EX_USAGE;
        goto out_args;
    }
    uint64_t gpu_mem = 0;
    if (o.gpu_mem && (parse_size(o.gpu_mem, &gpu_mem) || !gpu_mem)) {
        fprintf(stderr, "tadocfs: gpu_mem= must be a number of bytes above 0 (K, M, G allowed)\n");
        ret = EX_USAGE;
        goto out_args;
    }
    /* Before anything starts CUDA (gpu_usable_probe, the backend): it reads the variable
     * once. */
    if (o.gpus && set_gpus(o.gpus)) {
        ret = EX_USAGE;
        goto out_args;
    }
    if (check_mountpoint(o.mountpoint)) goto out_args;
    if (!o.ro && check_archive_outside(o.archive, o.mountpoint)) goto out_args;
    char *fsname = malloc(strlen(o.archive) + 64);
    if (!fsname) goto out_args;
    /* fsname is shown by mount(8) and df; commas would split the option list. */
    sprintf(fsname, "-ofsname=%s,subtype=tadocfs,default_permissions%s",
            strchr(o.archive, ',') ? "tadocfs" : o.archive, o.ro ? ",ro" : "");
    rc = fuse_opt_add_arg(&args, fsname);
    free(fsname);
    if (!rc) rc = fuse_parse_cmdline(&args, &co);
    if (rc) {
        ret = EX_USAGE;
        goto out_args;
    }
    /* The numbers: each within its range, digits alone. */
    uint64_t read_wait = BACKEND_READ_WAIT_US, spin = FS_SPIN_US, workers = FS_WORKERS, uid = 0,
             gid = 0;
    const struct {
        const char *name, *given;
        uint64_t *to, lo, hi;
    } nums[] = {{"max_threads", o.max_threads, &workers, 1, 1000},
                {"gpu_read_wait", o.gpu_read_wait, &read_wait, 0, 1000000},
                {"spin", o.spin, &spin, 0, 1000000},
                {"uid", o.uid, &uid, 0, UINT32_MAX - 1},
                {"gid", o.gid, &gid, 0, UINT32_MAX - 1}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        if (!nums[i].given) continue;
        if (parse_uint(nums[i].given, nums[i].to) || *nums[i].to < nums[i].lo ||
            *nums[i].to > nums[i].hi) {
            fprintf(stderr, "tadocfs: %s= must be a number from %llu to %llu\n", nums[i].name,
                    (unsigned long long)nums[i].lo, (unsigned long long)nums[i].hi);
            ret = EX_USAGE;
            goto out_args;
        }
    }
    /* Fork while the process is small, and before CUDA starts (it does not survive a fork);
     * from here on the daemon's messages reach the caller's terminal until it is ready. */
    if (daemon_fork(co.foreground, &dl) < 0) {
        fprintf(stderr, "tadocfs: cannot start the daemon: %s\n", strerror(errno));
        goto out_args;
    }
    /* A foreground daemon's log lines go to its terminal too (where there may be no syslog). */
    log_perror = co.foreground;
    openlog("tadocfs", LOG_PID | (log_perror ? LOG_PERROR : 0), LOG_DAEMON);
    if (gpu_mode == BACKEND_ON && !gpu_usable_probe()) {
        fprintf(stderr, "tadocfs: gpu=on but no usable GPU: %s\n", backend_describe());
        goto out_args;
    }
    uint64_t mem = 0, mem_auto = o.preload ? 0 : vol_mem_default();
    if (o.mem && !strcmp(o.mem, "whole")) {
        mem_auto = 0;
    } else if (o.mem && o.preload) {
        fprintf(stderr, "tadocfs: mem= and preload do not go together (preload loads the whole "
                        "archive)\n");
        ret = EX_USAGE;
        goto out_args;
    } else if (o.mem && (parse_size(o.mem, &mem) || !mem)) {
        fprintf(stderr, "tadocfs: mem= must be a number of bytes above 0 (K, M, G allowed) or "
                        "whole\n");
        ret = EX_USAGE;
        goto out_args;
    }
    /* Before the file table's model is built: unless the budget is small (mem= asks for
     * little, and a huge page is resident whole). */
    if (!mem || mem >= HEAP_HUGE_MIN) heap_huge(HEAP_HUGE_MIN);
    backend_opts bo;
    backend_opts_init(&bo);
    bo.mode = gpu_mode;
    bo.reads = 1; /* file reads may be batched onto the GPU (engine/backend/backend_read.c) */
    bo.read_min = (size_t)read_min;
    bo.read_wait_us = (unsigned)read_wait;
    if (tdc_env_settings(&bo)) { /* the analytics' TADOC_* variables (lib/env.h) */
        fprintf(stderr, "tadocfs: %s\n", tdc_errmsg());
        ret = EX_USAGE;
        goto out_args;
    }
    if (gpu_mem) bo.gpu_mem = gpu_mem; /* the option over TADOC_GPU_MEM */
    if (backend_new(&bo, &c.be)) {
        fprintf(stderr, "tadocfs: %s\n", tdc_errmsg());
        goto out_args;
    }

    /* libfuse's own options checked before anything is made beside the archive (a lock
     * file, a journal): a usage error leaves nothing behind. */
    se = fuse_session_new(&args, &fs_ops, sizeof fs_ops, &c);
    if (!se) {
        ret = EX_USAGE;
        goto out_args;
    }
    /* Open and check the file table (with -o preload the whole archive) and replay the
     * journal before mounting, so errors reach the terminal. */
    vol_opts vo = {.writable = !o.ro,
                   .cache_bytes = cache,
                   .compact_threshold = threshold,
                   .journal_max = journal_max,
                   .be = c.be,
                   .lazy = !o.preload,
                   .mem = mem,
                   .mem_auto = mem_auto,
                   .log = log_event};
    jrnl_stats js;
    if ((rc = vol_open(o.archive, &vo, &c.v, &js))) {
        if (rc == -ENOMEM) tdc_error(rc, "out of memory loading the archive");
        fprintf(stderr, "tadocfs: %s%s\n", tdc_errmsg(),
                rc == -EROFS && !o.ro ? " (mount it with -o ro to read it there)" : "");
        ret = tdc_exit_status(rc);
        goto out_session;
    }
    if (js.dropped)
        fprintf(stderr, "tadocfs: %s.journal: dropped %llu bytes (%s)%s\n", o.archive,
                (unsigned long long)js.dropped, js.why, o.ro ? "" : "; cut off");
    if (js.stale)
        fprintf(stderr, "tadocfs: %s.journal: already folded into the archive; discarded\n",
                o.archive);
    if (js.unread) /* read-only: the archive as written, the journal left as it is */
        fprintf(stderr,
                "tadocfs: %s.journal: %s: left unread; the archive is shown without its "
                "pending edits\n",
                o.archive, js.why);
    c.ro = o.ro;
    c.novirtual = o.novirtual;
    if (!o.open && fs_kept_init(&c)) {
        fprintf(stderr, "tadocfs: out of memory\n");
        goto out_session;
    }
    c.uid = o.uid ? (uint32_t)uid : (uint32_t)-1;
    c.gid = o.gid ? (uint32_t)gid : (uint32_t)-1;
    /* Every change goes through this daemon, which tells the kernel about it. */
    c.timeout = 86400;
    vol_info vi;
    vol_get_info(c.v, &vi);
    c.mem = vi.budget; /* mem=, or the default budget the archive's size called for */
    c.lean = c.mem && c.mem < HEAP_HUGE_MIN;
    /* Under a budget, one allocator arena for every thread: memory freed in the arenas of
     * other threads (a compaction's whole load, a span decoded by a FUSE thread) stayed
     * resident after malloc_trim, tens of MB on the test corpora, where one arena gives it
     * back. Set before any thread starts (vol_start, the FUSE loop). */
    if (c.mem) mallopt(M_ARENA_MAX, 1);
    /* Texts of virtual files: those kept in memory within a quarter of the budget; from a
     * quarter of that on, a text goes to an unlinked file as it is written (fs/vtext.h). */
    c.vc.mem = c.mem && c.mem / 4 < VCACHE_BYTES ? c.mem / 4 : VCACHE_BYTES;
    c.spill_at = c.vc.mem / 4 < FS_SPILL_AT ? c.vc.mem / 4 : FS_SPILL_AT;
    c.spill_dir = fio_tmpdir();

    if (fuse_set_signal_handlers(se) != 0) goto out_session;
    char *real = realpath(co.mountpoint, NULL);
    if (fuse_session_mount(se, co.mountpoint) != 0) {
        free(real);
        goto out_signals;
    }
    if (real) raise_readahead(real);
    free(real);
    c.se = se;
    fs_killpriv_arm(fuse_session_fd(se)); /* a GETXATTR less per write(2) */
    daemon_ready(&dl);
    if (vol_start(c.v)) {
        syslog(LOG_ERR, "%s", tdc_errmsg());
        goto out_unmount;
    }
    /* The files after one read stored ahead in the kernel's cache: read-only mounts in the
     * no-open mode (push.h); without the thread reads only go their usual way. */
    if (c.ro && c.kept && fs_push_start(&c)) syslog(LOG_WARNING, "no read-ahead thread");
    if (co.singlethread) {
        rc = fuse_session_loop(se);
    } else {
        /* Quick requests on the thread reading the device, the rest on max_threads workers */
        rc = fs_loop(se, (unsigned)workers, (unsigned)spin, fs_quick, &c);
    }
    /* libfuse's loop reports the signal that ended it; SIGTERM, SIGINT and SIGHUP are clean
     * exits, as is the end of fs_loop. */
    ret = rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP ? EX_OK : EX_FAIL;
out_unmount:
    fs_push_stop(&c);
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se);
    fs_handles_free(&c);
    fs_kept_free(&c);
    vol_close(c.v); /* writes out buffered records */
    sreg_free(&c.search);
    idx_words_free(c.words);
    pthread_mutex_destroy(&c.slock);
    pthread_mutex_destroy(&c.dlock);
    pthread_mutex_destroy(&c.hlock);
    vcache_clear(&c.vc);
    pthread_mutex_destroy(&c.vc.lock);
    free(c.damaged);
out_args:
    backend_free(c.be);
    free(co.mountpoint);
    free(o.archive);
    free(o.mountpoint);
    free(o.gpu);
    free(o.cache_size);
    free(o.compact_threshold);
    free(o.journal_max);
    free(o.gpu_read_min);
    free(o.gpu_mem);
    free(o.gpus);
    free(o.mem);
    free(o.gpu_read_wait);
    free(o.spin);
    free(o.max_threads);
    free(o.uid);
    free(o.gid);
    fuse_opt_free_args(&args);
    daemon_exit(&dl, ret); /* a daemon that never got ready: its status is the command's */
    return ret;
}
