/* extractlat: latency of random small extracts from an archive.
 * usage: extractlat ARCHIVE COUNT LEN SEED
 * Picks COUNT random (file, offset) pairs, weighted by file size, and times each
 * LEN-byte extract with a fresh cursor (a full descent from the root). Prints the median,
 * p99 and mean in microseconds, plus the index build time. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../engine/base/err.h"
#include "../engine/index/idx.h"
#include "pick.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: extractlat ARCHIVE COUNT LEN SEED\n");
        return 2;
    }
    double t0 = now();
    arc *a;
    idx *x;
    if (arc_open(argv[1], &a)) {
        fprintf(stderr, "extractlat: %s\n", tdc_errmsg());
        return 1;
    }
    double t1 = now();
    if (idx_build(a, &x)) {
        fprintf(stderr, "extractlat: %s\n", tdc_errmsg());
        return 1;
    }
    double t2 = now();
    long count = atol(argv[2]);
    size_t len = (size_t)atol(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 10) | 1, total;
    uint64_t *cum = pick_table(a, &total);
    double *lat = malloc((size_t)count * sizeof *lat);
    char *buf = malloc(len + 1);
    for (long t = 0; t < count; t++) {
        uint64_t off;
        uint32_t lo = pick(a, cum, total, &seed, &off);
        double s = now();
        ssize_t k = idx_extract(x, lo, off, buf, len);
        lat[t] = (now() - s) * 1e6;
        if (k < 0) return 1;
    }
    qsort(lat, (size_t)count, sizeof *lat, cmp_d);
    double sum = 0;
    for (long t = 0; t < count; t++)
        sum += lat[t];
    printf(
        "open_s %.3f index_s %.3f extracts %ld len %zu median_us %.3f p99_us %.3f mean_us %.3f\n",
        t1 - t0, t2 - t1, count, len, lat[count / 2], lat[count * 99 / 100], sum / count);
    return 0;
}
