/* fsx: a model-based random operation tester in the spirit of fsx.
 *
 * usage: fsx FILE OPS SEED [MAXLEN [keep]]
 * With "keep", FILE's existing content is the starting model (an archived file), else FILE
 * is created empty. FSX_MODEL=PATH in the environment writes the final model to PATH.
 * Applies OPS random operations to FILE (on the file system under test) and to an in-memory
 * model of its bytes: pwrite at random offsets (overwrites and extensions), appends, reads,
 * truncate down and up, fallocate, reads through a shared mmap, writes through a shared
 * mmap + msync, fsync, and close/reopen. Every read is compared with the model; at the end
 * the whole file is. Prints the seed and the first mismatch (offset, expected, got, the last
 * operations) and exits 1 on any difference; 0 and a summary otherwise. */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t rng;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static unsigned char *model;
static size_t msize, mcap, maxlen;
static int fd;
static const char *path;
static char hist[16][96];
static unsigned nhist;

static void note(const char *fmt, long long a, long long b)
{
    snprintf(hist[nhist++ % 16], sizeof hist[0], fmt, a, b);
}

static void die(const char *what)
{
    fprintf(stderr, "fsx: %s: %s (errno %d)\nlast operations:\n", path, what, errno);
    for (unsigned i = nhist > 16 ? nhist - 16 : 0; i < nhist; i++)
        fprintf(stderr, "  %s\n", hist[i % 16]);
    exit(1);
}

static void grow(size_t n)
{
    if (n > mcap) {
        size_t c = mcap ? mcap : 4096;
        while (c < n)
            c *= 2;
        model = realloc(model, c);
        if (!model) die("out of memory");
        mcap = c;
    }
    if (n > msize) memset(model + msize, 0, n - msize);
    msize = n;
}

static void check(const unsigned char *got, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != model[off + i]) {
            fprintf(stderr, "fsx: mismatch at offset %zu: expected 0x%02x, got 0x%02x\n", off + i,
                    model[off + i], got[i]);
            die("read returned wrong bytes");
        }
}

static void fill(unsigned char *p, size_t n)
{
    /* Text-like bytes, so the tokenizer sees words and separators. */
    static const char alpha[] = "abcdefghij klmnop\nqrst_uvwxyz0123 ,.;";
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)alpha[next() % (sizeof alpha - 1)];
}

static void do_read(void)
{
    if (!msize) return;
    size_t off = next() % msize, n = next() % (maxlen + 1);
    if (n > msize - off) n = msize - off;
    unsigned char *b = malloc(n + 1);
    note("read %lld+%lld", (long long)off, (long long)n);
    ssize_t k = pread(fd, b, n, (off_t)off);
    if (k != (ssize_t)n) die("short read");
    check(b, off, n);
    free(b);
}

static void do_write(int append)
{
    size_t n = 1 + next() % maxlen;
    size_t off = append ? msize : next() % (msize + maxlen);
    unsigned char *b = malloc(n);
    fill(b, n);
    note(append ? "append %lld+%lld" : "write %lld+%lld", (long long)off, (long long)n);
    if (pwrite(fd, b, n, (off_t)off) != (ssize_t)n) die("write failed");
    if (off + n > msize) grow(off + n);
    memcpy(model + off, b, n);
    free(b);
}

static void do_truncate(void)
{
    size_t n = next() % 2 ? (msize ? next() % msize : 0) : msize + next() % maxlen;
    note("truncate %lld (%lld)", (long long)n, (long long)msize);
    if (ftruncate(fd, (off_t)n) < 0) die("truncate failed");
    if (n > msize)
        grow(n);
    else
        msize = n;
}

static void do_fallocate(void)
{
    size_t off = next() % (msize + 1), n = 1 + next() % maxlen;
    note("fallocate %lld+%lld", (long long)off, (long long)n);
    if (fallocate(fd, 0, (off_t)off, (off_t)n) < 0) {
        if (errno == EOPNOTSUPP) return;
        die("fallocate failed");
    }
    if (off + n > msize) grow(off + n);
}

static void do_mmap(int write)
{
    if (!msize) return;
    size_t off = next() % msize, n = 1 + next() % maxlen;
    if (n > msize - off) n = msize - off;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), base = off / pg * pg;
    note(write ? "mapwrite %lld+%lld" : "mapread %lld+%lld", (long long)off, (long long)n);
    unsigned char *m = mmap(NULL, off + n - base, PROT_READ | (write ? PROT_WRITE : 0), MAP_SHARED,
                            fd, (off_t)base);
    if (m == MAP_FAILED) die("mmap failed");
    if (write) {
        fill(m + (off - base), n);
        memcpy(model + off, m + (off - base), n);
        if (msync(m, off + n - base, MS_SYNC) < 0) die("msync failed");
    } else {
        check(m + (off - base), off, n);
    }
    munmap(m, off + n - base);
}

static void reopen(void)
{
    note("reopen %lld%lld", 0LL, 0LL);
    if (close(fd) < 0) die("close failed");
    if ((fd = open(path, O_RDWR)) < 0) die("reopen failed");
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fsx FILE OPS SEED [MAXLEN [keep]]\n");
        return 2;
    }
    path = argv[1];
    long ops = atol(argv[2]);
    rng = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ull | 1;
    maxlen = argc > 4 ? (size_t)atol(argv[4]) : 65536;
    int keep = argc > 5 && !strcmp(argv[5], "keep");
    if ((fd = open(path, O_RDWR | O_CREAT | (keep ? 0 : O_TRUNC), 0644)) < 0) die("open failed");
    if (keep) {
        /* The starting content: read in large blocks, independent of the ops under test. */
        unsigned char blk[65536];
        ssize_t k;
        while ((k = read(fd, blk, sizeof blk)) > 0) {
            size_t at = msize;
            grow(msize + (size_t)k);
            memcpy(model + at, blk, (size_t)k);
        }
        if (k < 0) die("initial read failed");
    }
    long counts[10] = {0};
    for (long i = 0; i < ops; i++) {
        unsigned k = (unsigned)(next() % 100);
        int op = k < 30   ? 0
                 : k < 55 ? 1
                 : k < 65 ? 2
                 : k < 75 ? 3
                 : k < 80 ? 4
                 : k < 87 ? 5
                 : k < 92 ? 6
                 : k < 96 ? 7
                          : 8;
        counts[op]++;
        switch (op) {
        case 0:
            do_read();
            break;
        case 1:
            do_write(0);
            break;
        case 2:
            do_write(1);
            break;
        case 3:
            do_truncate();
            break;
        case 4:
            do_fallocate();
            break;
        case 5:
            do_mmap(0);
            break;
        case 6:
            do_mmap(1);
            break;
        case 7:
            note("fsync %lld%lld", 0LL, 0LL);
            if (fsync(fd) < 0) die("fsync failed");
            break;
        default:
            reopen();
        }
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size != msize) die("final size differs");
    unsigned char *b = malloc(msize + 1);
    if (pread(fd, b, msize, 0) != (ssize_t)msize) die("final read short");
    check(b, 0, msize);
    free(b);
    close(fd);
    /* FSX_MODEL=PATH: leave the model there, to compare after a remount or compaction. */
    const char *mp = getenv("FSX_MODEL");
    if (mp) {
        FILE *f = fopen(mp, "wb");
        if (!f || fwrite(model, 1, msize, f) != msize || fclose(f)) die("cannot write the model");
    }
    printf("fsx: %s: %ld operations (reads %ld, writes %ld, appends %ld, truncates %ld, "
           "fallocates %ld, mmap reads %ld, mmap writes %ld, fsyncs %ld, reopens %ld), final "
           "size %zu, no mismatch\n",
           path, ops, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6],
           counts[7], counts[8], msize);
    return 0;
}
