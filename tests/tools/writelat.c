/* writelat: random changes made the same way to a directory of a mount and to a model
 * directory, timing every call on the mount, to show how long a change can wait (for a
 * compaction, say).
 *
 *   writelat MOUNTDIR MODELDIR SECONDS [SEED]
 *
 * For SECONDS, on files f0 .. f15 (created as needed) of both directories: appends of 1 to
 * 16 KiB of generated text (words of a fixed vocabulary, so that a compaction has real work),
 * overwrites of up to 4 KiB inside a file, truncations, fsyncs, and renames of a file over
 * another. Prints one line:
 *   "calls N max_ms X p99_ms Y slowest CALL bytes B fsync_ms F model_fsync_ms G fsync_p99_ms P"
 * where N, Y and X are of the mount's calls (open, write, pwrite, ftruncate, fsync, close,
 * rename; X of all but fsync, the slowest being CALL), B the bytes written, F and G the
 * longest fsync on the mount and on the model directory (an fsync waits for the disk, which
 * other writers share), and P the 99th percentile of the mount's fsyncs. Exit 1 with a
 * message when a call fails on either side. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NFILES 16
#define NWORDS 4096
#define MAXCALLS (1 << 22)

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static char words[NWORDS][12];
static double *lat, *flat; /* the mount's calls' times, and its fsyncs' */
static size_t ncalls, nfsyncs;
static double worst, fsync_worst[2];
static const char *worst_call = "none";
static const char *side[2] = {"mount", "model"};

static void die(const char *call, int d)
{
    fprintf(stderr, "writelat: %s on the %s: %s\n", call, side[d], strerror(errno));
    exit(1);
}

/* The end of a call on side d started at t0 (the mount's are timed, and fsync on both sides):
 * its result r, which must not be negative. */
static long done(int d, const char *name, double t0, long r)
{
    double ms = now_ms() - t0;
    if (d == 0 && ncalls < MAXCALLS) lat[ncalls++] = ms;
    if (!strcmp(name, "fsync")) {
        fsync_worst[d] = ms > fsync_worst[d] ? ms : fsync_worst[d];
        if (d == 0 && nfsyncs < MAXCALLS) flat[nfsyncs++] = ms;
    } else if (d == 0 && ms > worst)
        worst = ms, worst_call = name;
    if (r < 0) die(name, d);
    return r;
}

#define CALL(d, name, expr)                                                                        \
    ({                                                                                             \
        double t0_ = now_ms();                                                                     \
        done(d, name, t0_, (long)(expr));                                                          \
    })

/* n bytes of text: words and spaces, a newline now and then. */
static void text(uint64_t *s, char *out, size_t n)
{
    size_t k = 0;
    while (k < n) {
        const char *w = words[rnd(s) % NWORDS];
        size_t l = strlen(w);
        for (size_t i = 0; i < l && k < n; i++)
            out[k++] = w[i];
        if (k < n) out[k++] = rnd(s) % 12 ? ' ' : '\n';
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: writelat MOUNTDIR MODELDIR SECONDS [SEED]\n");
        return 2;
    }
    const char *dir[2] = {argv[1], argv[2]};
    double end = now_ms() + atof(argv[3]) * 1e3;
    uint64_t s = argc > 4 ? strtoull(argv[4], NULL, 10) * 2654435761u + 1 : 1;
    if (!(lat = malloc(MAXCALLS * sizeof *lat)) || !(flat = malloc(MAXCALLS * sizeof *flat)))
        return 2;
    for (int w = 0; w < NWORDS; w++) {
        int l = 2 + (int)(rnd(&s) % 9);
        for (int i = 0; i < l; i++)
            words[w][i] = (char)('a' + rnd(&s) % 26);
        words[w][l] = 0;
    }
    static char buf[16384];
    char p[2][4096], q[2][4096];
    uint64_t size[NFILES] = {0}, bytes = 0;
    while (now_ms() < end) {
        int f = (int)(rnd(&s) % NFILES), op = (int)(rnd(&s) % 100);
        for (int d = 0; d < 2; d++)
            snprintf(p[d], sizeof p[d], "%s/f%d", dir[d], f);
        if (op < 60 || !size[f]) { /* append */
            size_t n = 1024 + rnd(&s) % 15361;
            text(&s, buf, n);
            for (int d = 0; d < 2; d++) {
                int fd = (int)CALL(d, "open", open(p[d], O_WRONLY | O_CREAT | O_APPEND, 0644));
                if (CALL(d, "write", write(fd, buf, n)) != (long)n) die("write", d);
                CALL(d, "close", close(fd));
            }
            size[f] += n;
            bytes += n;
        } else if (op < 80) { /* overwrite inside */
            size_t n = 1 + rnd(&s) % 4096;
            uint64_t off = rnd(&s) % size[f];
            text(&s, buf, n);
            for (int d = 0; d < 2; d++) {
                int fd = (int)CALL(d, "open", open(p[d], O_WRONLY));
                if (CALL(d, "pwrite", pwrite(fd, buf, n, (off_t)off)) != (long)n) die("pwrite", d);
                CALL(d, "close", close(fd));
            }
            if (off + n > size[f]) size[f] = off + n;
            bytes += n;
        } else if (op < 85) { /* truncate */
            uint64_t to = rnd(&s) % (size[f] + 1);
            for (int d = 0; d < 2; d++)
                CALL(d, "truncate", truncate(p[d], (off_t)to));
            size[f] = to;
        } else if (op < 95) { /* fsync */
            for (int d = 0; d < 2; d++) {
                int fd = (int)CALL(d, "open", open(p[d], O_WRONLY));
                CALL(d, "fsync", fsync(fd));
                CALL(d, "close", close(fd));
            }
        } else { /* rename over another file */
            int g = (int)(rnd(&s) % NFILES);
            if (g == f) continue;
            for (int d = 0; d < 2; d++) {
                snprintf(q[d], sizeof q[d], "%s/f%d", dir[d], g);
                CALL(d, "rename", rename(p[d], q[d]));
            }
            size[g] = size[f];
            size[f] = 0;
        }
    }
    qsort(lat, ncalls, sizeof *lat, cmp);
    qsort(flat, nfsyncs, sizeof *flat, cmp);
    double p99 = ncalls ? lat[ncalls * 99 / 100] : 0;
    double fp99 = nfsyncs ? flat[nfsyncs * 99 / 100] : 0;
    printf("calls %zu max_ms %.1f p99_ms %.2f slowest %s bytes %llu fsync_ms %.1f "
           "model_fsync_ms %.1f fsync_p99_ms %.1f\n",
           ncalls, worst, p99, worst_call, (unsigned long long)bytes, fsync_worst[0],
           fsync_worst[1], fp99);
    free(lat);
    free(flat);
    return 0;
}
