/* mreads: read every regular file under DIR once, from THREADS threads at once, in pread(2)s of
 * CHUNK bytes (files taken in path order from a shared counter, each read start to end), and
 * print the bytes, the wall time, the throughput and the p50/p99 latency of one pread.
 * usage: mreads DIR THREADS CHUNK [SUM]
 * On a fresh mount every read reaches the daemon. With SUM (any fourth argument) it also
 * prints a checksum of every file's content (by path order), so runs can be compared; the
 * checksum costs CPU time, so time runs without it. */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char **paths;
static size_t npaths, cap;
static size_t chunk;
static int sum;        /* checksum the content (costs CPU: off for timings) */
static size_t next;    /* shared: the next file to read */
static uint64_t *fsum; /* per file: a checksum of its bytes */
static double *lat;    /* per pread, microseconds */
static size_t nlat, latcap;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int add(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)f;
    if (type != FTW_F) return 0;
    if (npaths == cap) {
        cap = cap ? 2 * cap : 1024;
        if (!(paths = realloc(paths, cap * sizeof *paths))) return -1;
    }
    return (paths[npaths++] = strdup(p)) ? 0 : -1;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int by_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *reader(void *p)
{
    uint64_t *bytes = p;
    char *b = malloc(chunk);
    double *l = NULL;
    size_t nl = 0, lc = 0;
    for (;;) {
        size_t i = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
        if (i >= npaths || !b) break;
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0) {
            perror(paths[i]);
            exit(1);
        }
        uint64_t h = 1469598103934665603ull;
        for (off_t off = 0;;) {
            double t0 = now_us();
            ssize_t k = pread(fd, b, chunk, off);
            double t1 = now_us();
            if (k < 0) {
                perror(paths[i]);
                exit(1);
            }
            if (nl == lc && !(l = realloc(l, (lc = lc ? 2 * lc : 4096) * sizeof *l))) exit(1);
            l[nl++] = t1 - t0;
            if (!k) break;
            for (ssize_t j = 0; sum && j < k; j++)
                h = (h ^ (unsigned char)b[j]) * 1099511628211ull;
            off += k;
            *bytes += (uint64_t)k;
        }
        fsum[i] = h;
        close(fd);
    }
    pthread_mutex_lock(&mu);
    if (nlat + nl > latcap && !(lat = realloc(lat, (latcap = nlat + nl) * sizeof *lat))) exit(1);
    memcpy(lat + nlat, l, nl * sizeof *l);
    nlat += nl;
    pthread_mutex_unlock(&mu);
    free(l);
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: mreads DIR THREADS CHUNK [SUM]\n");
        return 2;
    }
    int nt = atoi(argv[2]);
    chunk = strtoull(argv[3], NULL, 0);
    if (nt < 1 || nt > 256 || !chunk) {
        fprintf(stderr, "mreads: THREADS 1..256 and CHUNK > 0\n");
        return 2;
    }
    if (nftw(argv[1], add, 64, FTW_PHYS)) {
        perror(argv[1]);
        return 1;
    }
    qsort(paths, npaths, sizeof *paths, by_str);
    sum = argc == 5;
    if (!(fsum = calloc(npaths + 1, sizeof *fsum))) return 1;
    pthread_t th[256];
    uint64_t bytes[256] = {0}, total = 0;
    double t0 = now_us();
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, reader, &bytes[i])) return 1;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        total += bytes[i];
    }
    double s = (now_us() - t0) / 1e6;
    qsort(lat, nlat, sizeof *lat, by_dbl);
    printf("%zu files, %llu bytes, %d threads, %zu-byte preads: %.3f s, %.1f MB/s, pread p50 "
           "%.0f us, p99 %.0f us\n",
           npaths, (unsigned long long)total, nt, chunk, s, total / s / 1e6,
           nlat ? lat[nlat / 2] : 0, nlat ? lat[nlat * 99 / 100] : 0);
    if (argc == 5) {
        uint64_t h = 0;
        for (size_t i = 0; i < npaths; i++)
            h = h * 31 + fsum[i];
        printf("content checksum %016llx\n", (unsigned long long)h);
    }
    for (size_t i = 0; i < npaths; i++)
        free(paths[i]);
    free(paths);
    free(fsum);
    free(lat);
    return 0;
}
