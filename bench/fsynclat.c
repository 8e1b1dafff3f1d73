/* fsynclat: latency of fsync after a small write.
 * usage: fsynclat FILE COUNT [BLOCK]
 * Creates (truncates) FILE, then COUNT times writes BLOCK bytes (default 4096) at the end
 * and times the fsync that follows. Prints the median, p99, mean and maximum fsync latency
 * in microseconds, and the mean time of the writes, on one line. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: fsynclat FILE COUNT [BLOCK]\n");
        return 2;
    }
    long count = atol(argv[2]);
    size_t block = argc == 4 ? (size_t)atol(argv[3]) : 4096;
    if (count < 1 || block < 1) {
        fprintf(stderr, "fsynclat: COUNT and BLOCK must be positive\n");
        return 2;
    }
    char *b = malloc(block);
    double *lat = malloc((size_t)count * sizeof *lat);
    if (!b || !lat) {
        fprintf(stderr, "fsynclat: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < block; i++)
        b[i] = (char)('a' + i % 26);
    b[block - 1] = '\n';
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    double wsum = 0, sum = 0;
    for (long i = 0; i < count; i++) {
        double t0 = now();
        if (write(fd, b, block) != (ssize_t)block) {
            perror("write");
            return 1;
        }
        double t1 = now();
        if (fsync(fd) < 0) {
            perror("fsync");
            return 1;
        }
        lat[i] = (now() - t1) * 1e6;
        wsum += (t1 - t0) * 1e6;
        sum += lat[i];
    }
    if (close(fd) < 0) {
        perror("close");
        return 1;
    }
    qsort(lat, (size_t)count, sizeof *lat, cmp_d);
    printf("fsyncs %ld block %zu p50_us %.1f p99_us %.1f mean_us %.1f max_us %.1f write_mean_us "
           "%.1f\n",
           count, block, lat[count / 2], lat[(size_t)((double)count * 0.99)], sum / (double)count,
           lat[count - 1], wsum / (double)count);
    free(b);
    free(lat);
    return 0;
}
