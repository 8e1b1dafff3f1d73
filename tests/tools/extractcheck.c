/* extractcheck: compare random extracts from an archive with pread() on the original tree.
 * usage: extractcheck ARCHIVE DIR COUNT SEED
 * Requests include zero lengths, the last byte, reads that cross EOF and offsets past EOF.
 * Prints "N extracts agree" or the first disagreement (exit 1). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../engine/base/err.h"
#include "../../engine/index/idx.h"

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: extractcheck ARCHIVE DIR COUNT SEED\n");
        return 2;
    }
    arc *a;
    idx *x;
    if (arc_open(argv[1], &a) || idx_build(a, &x)) {
        fprintf(stderr, "extractcheck: %s\n", tdc_errmsg());
        return 1;
    }
    long count = atol(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 10) * 2654435761u + 1;
    uint32_t *files = malloc(a->nents * sizeof *files), nf = 0;
    for (uint32_t i = 0; i < a->nents; i++)
        if (a->ents[i].type == ARC_REG) files[nf++] = i;
    if (!nf) return 1;
    size_t cap = 1 << 20;
    unsigned char *got = malloc(cap), *want = malloc(cap);
    idx_cursor c;
    idx_cursor_init(&c);
    for (long t = 0; t < count; t++) {
        uint32_t e = files[rnd(&seed) % nf];
        uint64_t size = a->ents[e].size, off, len;
        switch (rnd(&seed) % 8) {
        case 0:
            off = size ? size - 1 : 0;
            len = 1 + rnd(&seed) % 8;
            break; /* last byte */
        case 1:
            off = size + rnd(&seed) % 100;
            len = 1 + rnd(&seed) % 100;
            break; /* past EOF */
        case 2:
            off = size ? rnd(&seed) % size : 0;
            len = 0;
            break;
        case 3:
            off = 0;
            len = size < cap ? size : cap;
            break; /* whole */
        default:
            off = size ? rnd(&seed) % size : 0;
            len = rnd(&seed) % (rnd(&seed) % 2 ? 64 : 70000);
        }
        if (len > cap) len = cap;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[2], a->ents[e].path);
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            perror(path);
            return 1;
        }
        ssize_t w = pread(fd, want, len, (off_t)off);
        close(fd);
        /* Alternate a fresh cursor and a reused one so both paths are checked. */
        ssize_t g = t % 2 ? idx_extract(x, e, off, got, len) : idx_read(x, &c, e, off, got, len);
        if (g != w || (w > 0 && memcmp(got, want, (size_t)w))) {
            fprintf(stderr, "extractcheck: MISMATCH %s off=%llu len=%llu got=%zd want=%zd\n",
                    a->ents[e].path, (unsigned long long)off, (unsigned long long)len, g, w);
            return 1;
        }
        /* Continue sequentially from where the cursor stands now. */
        if (t % 2 == 0 && g > 0) {
            ssize_t g2 = idx_read(x, &c, e, off + (uint64_t)g, got, 4096);
            fd = open(path, O_RDONLY);
            ssize_t w2 = pread(fd, want, 4096, (off_t)(off + (uint64_t)g));
            close(fd);
            if (g2 != w2 || (w2 > 0 && memcmp(got, want, (size_t)w2))) {
                fprintf(stderr, "extractcheck: MISMATCH (sequential) %s off=%llu\n",
                        a->ents[e].path, (unsigned long long)(off + (uint64_t)g));
                return 1;
            }
        }
    }
    printf("%ld extracts agree\n", count);
    idx_cursor_free(&c);
    free(got);
    free(want);
    free(files);
    idx_free(x);
    arc_free(a);
    return 0;
}
