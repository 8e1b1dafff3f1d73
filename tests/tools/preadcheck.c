/* preadcheck: compare concurrent random pread()s on a mounted tree with the original tree.
 * usage: preadcheck ORIG_DIR MNT_DIR COUNT SEED THREADS [SIZE]
 * Each of THREADS threads does COUNT preads of the same relative path in both trees and
 * compares return values and bytes. Even-numbered threads share one file (the largest) through
 * one descriptor per tree, so the daemon sees concurrent reads on one handle; the others open
 * random files for each read. Sizes are 1 B..256 KiB (skewed small) or exactly SIZE; offsets
 * include the last byte, past EOF and zero lengths. Prints "N preads agree (T threads)" or the
 * first disagreement (exit 1). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXREAD (256 * 1024)

typedef struct {
    char *path; /* relative to the tree roots */
    uint64_t size;
} file;

static file *files;
static size_t nfiles, capfiles, rootlen;
static const char *orig_dir, *mnt_dir;
static long count;
static size_t fixed_size;
static uint64_t seed;
static size_t shared;    /* index of the file the even threads hammer */
static int shared_fd[2]; /* its descriptors: original, mount */
static atomic_int failed;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int add_file(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)f;
    if (flag != FTW_F || !S_ISREG(st->st_mode)) return 0;
    if (nfiles == capfiles) {
        capfiles = capfiles ? 2 * capfiles : 256;
        files = realloc(files, capfiles * sizeof *files);
        if (!files) return -1;
    }
    files[nfiles].path = strdup(p + rootlen + 1);
    files[nfiles].size = (uint64_t)st->st_size;
    return files[nfiles++].path ? 0 : -1;
}

static int open_in(const char *dir, const char *rel)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    int fd = open(path, O_RDONLY);
    if (fd < 0) fprintf(stderr, "preadcheck: %s: %s\n", path, strerror(errno));
    return fd;
}

/* One request: offsets and lengths chosen to hit the edges as well as the middle. */
static void pick(uint64_t *s, uint64_t size, uint64_t *off, size_t *len)
{
    size_t l = fixed_size;
    if (!l) { /* mostly small reads, like real readers, with some up to the maximum */
        static const size_t cls[] = {64, 4096, 65536, MAXREAD};
        l = 1 + rnd(s) % cls[rnd(s) % 4];
    }
    switch (rnd(s) % 10) {
    case 0: /* last byte */
        *off = size ? size - 1 : 0;
        break;
    case 1: /* past EOF */
        *off = size + rnd(s) % 5000;
        break;
    case 2: /* far past EOF */
        *off = (uint64_t)1 << 40;
        break;
    case 3: /* zero length */
        *off = size ? rnd(s) % size : 0;
        l = 0;
        break;
    case 4: /* crosses EOF */
        *off = size > l ? size - l + rnd(s) % 100 : 0;
        break;
    case 5:
        *off = 0;
        break;
    default:
        *off = size ? rnd(s) % size : 0;
    }
    *len = l;
}

static void *worker(void *arg)
{
    long id = (long)arg;
    uint64_t s = seed ^ ((uint64_t)(id + 1) * 0x9E3779B97F4A7C15u);
    rnd(&s);
    size_t cap = fixed_size ? fixed_size : MAXREAD;
    unsigned char *want = malloc(cap), *got = malloc(cap);
    if (!want || !got) {
        atomic_store(&failed, 1);
        fprintf(stderr, "preadcheck: out of memory\n");
    }
    for (long t = 0; t < count && !atomic_load(&failed); t++) {
        size_t f = id % 2 == 0 ? shared : rnd(&s) % nfiles;
        int fd[2] = {shared_fd[0], shared_fd[1]};
        if (f != shared || id % 2) {
            fd[0] = open_in(orig_dir, files[f].path);
            fd[1] = open_in(mnt_dir, files[f].path);
        }
        uint64_t off;
        size_t len;
        pick(&s, files[f].size, &off, &len);
        ssize_t w = fd[0] < 0 ? -1 : pread(fd[0], want, len, (off_t)off);
        int we = errno;
        ssize_t g = fd[1] < 0 ? -1 : pread(fd[1], got, len, (off_t)off);
        int ge = errno;
        if (fd[0] != shared_fd[0]) {
            if (fd[0] >= 0) close(fd[0]);
            if (fd[1] >= 0) close(fd[1]);
        }
        int bad = fd[0] < 0 || fd[1] < 0 || g != w || (g < 0 && ge != we);
        ssize_t at = -1;
        for (ssize_t i = 0; !bad && i < w; i++)
            if (got[i] != want[i]) {
                bad = 1;
                at = i;
            }
        if (bad && !atomic_exchange(&failed, 1)) {
            pthread_mutex_lock(&out_lock);
            printf("MISMATCH thread %ld read %ld: %s off=%llu len=%zu got=%zd%s%s want=%zd%s%s", id,
                   t, files[f].path, (unsigned long long)off, len, g, g < 0 ? " " : "",
                   g < 0 ? strerror(ge) : "", w, w < 0 ? " " : "", w < 0 ? strerror(we) : "");
            if (at >= 0)
                printf(" first differing byte at +%zd: got 0x%02x want 0x%02x", at, got[at],
                       want[at]);
            printf("\n");
            pthread_mutex_unlock(&out_lock);
        }
    }
    free(want);
    free(got);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: preadcheck ORIG_DIR MNT_DIR COUNT SEED THREADS [SIZE]\n");
        return 2;
    }
    orig_dir = argv[1];
    mnt_dir = argv[2];
    count = atol(argv[3]);
    seed = strtoull(argv[4], NULL, 10) * 2654435761u + 1;
    long nthreads = atol(argv[5]);
    fixed_size = argc == 7 ? strtoull(argv[6], NULL, 10) : 0;
    if (count < 0 || nthreads < 1 || nthreads > 1024 || (argc == 7 && !fixed_size)) {
        fprintf(stderr, "preadcheck: bad COUNT, THREADS or SIZE\n");
        return 2;
    }
    rootlen = strlen(orig_dir);
    while (rootlen > 1 && orig_dir[rootlen - 1] == '/')
        rootlen--;
    if (nftw(orig_dir, add_file, 64, FTW_PHYS)) {
        fprintf(stderr, "preadcheck: %s: %s\n", orig_dir, strerror(errno));
        return 1;
    }
    if (!nfiles) {
        fprintf(stderr, "preadcheck: no regular files under %s\n", orig_dir);
        return 1;
    }
    for (size_t i = 1; i < nfiles; i++)
        if (files[i].size > files[shared].size) shared = i;
    shared_fd[0] = open_in(orig_dir, files[shared].path);
    shared_fd[1] = open_in(mnt_dir, files[shared].path);
    if (shared_fd[0] < 0 || shared_fd[1] < 0) return 1;

    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    if (!th) return 1;
    for (long i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)i)) {
            fprintf(stderr, "preadcheck: cannot start thread %ld\n", i);
            return 1;
        }
    for (long i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    if (atomic_load(&failed)) return 1;
    printf("%ld preads agree (%ld threads)\n", count * nthreads, nthreads);
    close(shared_fd[0]);
    close(shared_fd[1]);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i].path);
    free(files);
    free(th);
    return 0;
}
