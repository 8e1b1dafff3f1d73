/* stress: concurrent writers and readers on a mounted archive, checked against a model.
 *
 * usage: stress MOUNT SECONDS OUTDIR [WRITERS READERS]
 * Under MOUNT/stress, each writer owns FILES files and changes them at random: whole
 * overwrites (O_TRUNC), appends, overwrites inside, truncates down and up, editor-style
 * saves (write a temporary file, rename it over), renames to a new name, unlink and
 * recreate, fsync; file sizes from 0 to 1 MiB. The model keeps each file's bytes and name
 * and a sequence counter that is odd while the writer changes it. A reader takes the
 * counter, reads the file whole, and takes it again: when it did not change (no change
 * overlapped the read), the bytes must be exactly the model's; otherwise the read is only
 * counted. A compaction is requested every few seconds (user.tadoc.compact). At the end every
 * file is checked once more and the model is written to OUTDIR, to compare with the tree
 * after a remount. Prints the operation counts; exits 1 on any mismatch. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define FILES 4
#define MAXW 64
#define MAXLEN (1u << 20)

typedef struct mfile {
    pthread_mutex_t m;
    atomic_uint seq;
    char name[64];
    unsigned char *data;
    size_t len;
} mfile;

static const char *mnt;
static int nwriters, nreaders;
static mfile files[MAXW][FILES];
static atomic_int stop;
static atomic_ulong n_over, n_app, n_pwrite, n_trunc, n_ext, n_save, n_ren, n_unl, n_sync;
static atomic_ulong n_reads, n_exact, n_racy, n_bytes, n_compact, n_bad;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void fill(unsigned char *p, size_t n, uint64_t *s)
{
    /* Text-like bytes (words, spaces, newlines) so the tokenizer has work, some binary. */
    static const char al[] = "abcdefghijklmnopqrstuvwxyz      \n\n.,;0123456789ABCDEFGH_";
    int bin = rnd(s) % 8 == 0;
    for (size_t i = 0; i < n; i++)
        p[i] = bin ? (unsigned char)rnd(s) : (unsigned char)al[rnd(s) % (sizeof al - 1)];
}

static size_t pick_len(uint64_t *s)
{
    switch (rnd(s) % 6) {
    case 0:
        return 0;
    case 1:
        return rnd(s) % 64;
    case 2:
    case 3:
        return rnd(s) % 8192;
    case 4:
        return rnd(s) % 131072;
    default:
        return rnd(s) % MAXLEN;
    }
}

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/stress/%s", mnt, name);
}

static void die(const char *what, const char *path)
{
    fprintf(stderr, "stress: %s %s: %s\n", what, path, strerror(errno));
    atomic_fetch_add(&n_bad, 1);
    atomic_store(&stop, 1);
}

static int write_all(int fd, const unsigned char *p, size_t n, off_t off)
{
    while (n) {
        ssize_t k = pwrite(fd, p, n, off);
        if (k <= 0) return -1;
        p += k, n -= (size_t)k, off += k;
    }
    return 0;
}

/* Replace a file's content with `p` through path `path` (O_TRUNC). */
static int put_file(const char *path, const unsigned char *p, size_t n, int sync)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int rc = write_all(fd, p, n, 0);
    if (!rc && sync) rc = fsync(fd);
    if (close(fd)) rc = -1;
    return rc;
}

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(w + 1);
    unsigned char *tmp = malloc(MAXLEN);
    char path[512], path2[600];
    unsigned gen = 0;
    while (!atomic_load(&stop)) {
        mfile *f = &files[w][rnd(&s) % FILES];
        pthread_mutex_lock(&f->m);
        atomic_fetch_add(&f->seq, 1); /* odd: changing */
        path_of(path, sizeof path, f->name);
        size_t len = f->len;
        int op = (int)(rnd(&s) % 100), rc = 0;
        if (op < 20) { /* overwrite whole */
            size_t n = pick_len(&s);
            fill(f->data, n, &s);
            rc = put_file(path, f->data, n, 0);
            f->len = n;
            atomic_fetch_add(&n_over, 1);
        } else if (op < 45) { /* append */
            size_t n = rnd(&s) % 20000;
            if (len + n > MAXLEN) n = MAXLEN - len;
            fill(f->data + len, n, &s);
            int fd = open(path, O_WRONLY | O_APPEND);
            rc = fd < 0 || write(fd, f->data + len, n) != (ssize_t)n;
            if (fd >= 0 && close(fd)) rc = 1;
            f->len = len + n;
            atomic_fetch_add(&n_app, 1);
        } else if (op < 60) { /* overwrite inside (may extend) */
            size_t at = len ? rnd(&s) % len : 0, n = rnd(&s) % 10000;
            if (at + n > MAXLEN) n = MAXLEN - at;
            fill(f->data + at, n, &s);
            int fd = open(path, O_WRONLY);
            rc = fd < 0 || write_all(fd, f->data + at, n, (off_t)at);
            if (fd >= 0 && close(fd)) rc = 1;
            if (at + n > len) f->len = at + n;
            atomic_fetch_add(&n_pwrite, 1);
        } else if (op < 70) { /* truncate down or up (zeros) */
            size_t n = rnd(&s) % 2 ? (len ? rnd(&s) % len : 0) : len + rnd(&s) % 5000;
            if (n > MAXLEN) n = MAXLEN;
            if (n > len) memset(f->data + len, 0, n - len);
            rc = truncate(path, (off_t)n);
            atomic_fetch_add(n > len ? &n_ext : &n_trunc, 1);
            f->len = n;
        } else if (op < 80) { /* editor save: temporary file renamed over */
            size_t n = pick_len(&s);
            fill(tmp, n, &s);
            snprintf(path2, sizeof path2, "%s.tmp", path);
            rc = put_file(path2, tmp, n, rnd(&s) % 4 == 0) || rename(path2, path);
            memcpy(f->data, tmp, n);
            f->len = n;
            atomic_fetch_add(&n_save, 1);
        } else if (op < 88) { /* rename to a new name */
            char name[64];
            snprintf(name, sizeof name, "w%d-f%d.g%u", w, (int)(f - files[w]), ++gen);
            path_of(path2, sizeof path2, name);
            rc = rename(path, path2);
            if (!rc) strcpy(f->name, name);
            atomic_fetch_add(&n_ren, 1);
        } else if (op < 95) { /* unlink and recreate */
            size_t n = pick_len(&s);
            fill(f->data, n, &s);
            rc = unlink(path) || put_file(path, f->data, n, 0);
            f->len = n;
            atomic_fetch_add(&n_unl, 1);
        } else { /* fsync */
            int fd = open(path, O_RDWR);
            rc = fd < 0 || fsync(fd);
            if (fd >= 0) close(fd);
            atomic_fetch_add(&n_sync, 1);
        }
        if (rc) die("writer op failed on", path);
        atomic_fetch_add(&f->seq, 1); /* even: stable */
        pthread_mutex_unlock(&f->m);
        if (rnd(&s) % 4 == 0) usleep(1000);
    }
    free(tmp);
    return NULL;
}

/* Read file f whole and compare when no change overlapped. 1 exact, 0 racy, -1 mismatch. */
static int check(mfile *f, unsigned char *want, unsigned char *got)
{
    char path[512];
    pthread_mutex_lock(&f->m);
    unsigned s1 = atomic_load(&f->seq);
    path_of(path, sizeof path, f->name);
    size_t len = f->len;
    memcpy(want, f->data, len);
    pthread_mutex_unlock(&f->m);
    if (s1 & 1) return 0;
    size_t n = 0;
    int fd = open(path, O_RDONLY), err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        ssize_t k;
        while (n < MAXLEN + 1 && (k = read(fd, got + n, MAXLEN + 1 - n)) > 0)
            n += (size_t)k;
        if (k < 0) err = errno;
        close(fd);
    }
    atomic_fetch_add(&n_bytes, n);
    if (atomic_load(&f->seq) != s1) return 0;
    if (err || n != len || memcmp(want, got, n)) {
        size_t i = 0;
        while (i < n && i < len && want[i] == got[i])
            i++;
        fprintf(stderr,
                "stress: MISMATCH %s: %s; read %zu bytes, model %zu, first difference at %zu\n",
                path, err ? strerror(err) : "content", n, len, i);
        return -1;
    }
    return 1;
}

static void *reader(void *arg)
{
    uint64_t s = 0x1234567ull * (uint64_t)((intptr_t)arg + 7);
    unsigned char *want = malloc(MAXLEN + 1), *got = malloc(MAXLEN + 1);
    while (!atomic_load(&stop)) {
        mfile *f = &files[rnd(&s) % (uint64_t)nwriters][rnd(&s) % FILES];
        int r = check(f, want, got);
        atomic_fetch_add(&n_reads, 1);
        atomic_fetch_add(r > 0 ? &n_exact : r == 0 ? &n_racy : &n_bad, 1);
    }
    free(want);
    free(got);
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: stress MOUNT SECONDS OUTDIR [WRITERS READERS]\n");
        return 2;
    }
    mnt = argv[1];
    double secs = atof(argv[2]);
    const char *out = argv[3];
    nwriters = argc == 6 ? atoi(argv[4]) : 8;
    nreaders = argc == 6 ? atoi(argv[5]) : 8;
    if (nwriters < 1 || nwriters > MAXW || nreaders < 0) return 2;
    char path[512];
    snprintf(path, sizeof path, "%s/stress", mnt);
    if (mkdir(path, 0755) && errno != EEXIST) {
        perror(path);
        return 1;
    }
    for (int w = 0; w < nwriters; w++)
        for (int k = 0; k < FILES; k++) {
            mfile *f = &files[w][k];
            pthread_mutex_init(&f->m, NULL);
            f->data = malloc(MAXLEN);
            snprintf(f->name, sizeof f->name, "w%d-f%d", w, k);
            path_of(path, sizeof path, f->name);
            if (put_file(path, f->data, 0, 0)) {
                perror(path);
                return 1;
            }
        }
    pthread_t t[2 * MAXW + 64];
    int nt = 0;
    for (int w = 0; w < nwriters; w++)
        pthread_create(&t[nt++], NULL, writer, (void *)(intptr_t)w);
    for (int r = 0; r < nreaders; r++)
        pthread_create(&t[nt++], NULL, reader, (void *)(intptr_t)r);
    double t0 = now(), next = t0 + 2;
    while (now() - t0 < secs && !atomic_load(&stop)) {
        usleep(100000);
        if (now() >= next) {
            if (setxattr(mnt, "user.tadoc.compact", "1", 1, 0) == 0)
                atomic_fetch_add(&n_compact, 1);
            else
                fprintf(stderr, "stress: compaction request: %s\n", strerror(errno));
            next = now() + 3;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    /* Final check of every file, then the model to OUTDIR. */
    unsigned char *want = malloc(MAXLEN + 1), *got = malloc(MAXLEN + 1);
    int final_bad = 0;
    mkdir(out, 0755);
    for (int w = 0; w < nwriters; w++)
        for (int k = 0; k < FILES; k++) {
            mfile *f = &files[w][k];
            if (check(f, want, got) != 1) final_bad++;
            snprintf(path, sizeof path, "%s/%s", out, f->name);
            if (put_file(path, f->data, f->len, 0)) perror(path);
        }
    free(want);
    free(got);
    for (int w = 0; w < nwriters; w++)
        for (int k = 0; k < FILES; k++)
            free(files[w][k].data);
    unsigned long ops =
        n_over + n_app + n_pwrite + n_trunc + n_ext + n_save + n_ren + n_unl + n_sync;
    printf("stress: %d writers, %d readers, %.1f s: %lu writer ops (%lu overwrites, %lu appends, "
           "%lu inner writes, %lu truncates down, %lu up, %lu editor saves, %lu renames, %lu "
           "unlink+recreate, %lu fsyncs), %lu compactions requested\n",
           nwriters, nreaders, now() - t0, ops, (unsigned long)n_over, (unsigned long)n_app,
           (unsigned long)n_pwrite, (unsigned long)n_trunc, (unsigned long)n_ext,
           (unsigned long)n_save, (unsigned long)n_ren, (unsigned long)n_unl, (unsigned long)n_sync,
           (unsigned long)n_compact);
    printf("stress: %lu reads (%lu checked exactly, %lu overlapped a change), %lu MB read; "
           "%lu mismatches, %d in the final check\n",
           (unsigned long)n_reads, (unsigned long)n_exact, (unsigned long)n_racy,
           (unsigned long)(n_bytes >> 20), (unsigned long)n_bad, final_bad);
    return n_bad || final_bad ? 1 : 0;
}
