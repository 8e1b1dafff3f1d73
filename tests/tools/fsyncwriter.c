/* fsyncwriter: write numbered lines into files of a mount and record which ones a successful
 * fsync (or close) acknowledged, then check what survived a crash.
 *
 *   fsyncwriter write DIR NFILES LOG [SEED]
 *       Create DIR/f0 .. DIR/f{NFILES-1} and append lines to them (each write(2) carries
 *       1 to 20 whole lines, now and then a few thousand; now and then the same bytes are
 *       written again over themselves with pwrite, or the file is truncated to its own size,
 *       so overwrites and truncations are among the records) until a call fails. After every
 *       successful fsync or close, append "S n0 n1 ..." to LOG (the lines of each file written
 *       so far, all of them durable from then on: fsync and close make every earlier write of
 *       the mount durable, not only the file's own). On the failing call print "T a0 a1 ..."
 *       (lines attempted, including the failed write) and "error: CALL: MESSAGE" on stdout.
 *   fsyncwriter fill DIR LOG
 *       The same with one file and 64 KiB writes (short writes are continued, as any writer
 *       does), for a full disk: stops at the first write that fails and prints
 *       "error: write: MESSAGE", then tries fsync and prints "fsync: ok" or "fsync: MESSAGE".
 *       Exit 0 once a write failed.
 *   fsyncwriter more DIR LOG N
 *       Cut DIR/f0 after its last whole line (a failed write may have left part of one), append
 *       N more lines, fsync, log "S n0", print "ok N0" with the new total; exit 1 with
 *       "error: ..." on a failure.
 *   fsyncwriter replace DIR LOG [SEED]
 *       Editor-style saves until a call fails: write version n of DIR/target to DIR/tmp
 *       (O_TRUNC, 1 to 60000 bytes), close, rename over DIR/target; now and then fsync the
 *       directory and log "S n" (version n or a later one survives). Prints "T n" (the last
 *       version attempted) and "error: ..." on the failing call.
 *   fsyncwriter checkreplace DIR LOG OUT
 *       DIR/target must be exactly one whole version v, last S <= v <= T (never empty, never
 *       a mix, never a torn save). Prints "ok v".
 *   fsyncwriter check DIR NFILES LOG [OUT]
 *       Every DIR/fI must hold exactly lines 1..M of file I (no garbage, no hole) with M at
 *       least the last S entry of LOG and at most the attempted count from OUT (the T line).
 *       When OUT is given, the file may end in part of line M+1 (a write(2) the kernel split
 *       into several requests, cut by the crash; it never returned), and M+1 must then be at
 *       most the attempted count. Prints "ok M0 M1 ... (acked ...)" or the first problem
 *       (exit 1).
 *
 * Line n (from 1) of file f: "f<f> line <n> " then (n*7+f)%41 copies of 'a'+n%26, "\n". */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXF 64

static size_t line(char *out, int f, uint64_t n)
{
    size_t k = (size_t)sprintf(out, "f%d line %llu ", f, (unsigned long long)n);
    size_t pad = (size_t)((n * 7 + (uint64_t)f) % 41);
    memset(out + k, 'a' + (int)(n % 26), pad);
    out[k + pad] = '\n';
    return k + pad + 1;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int logfd = -1;

static void log_acked(const uint64_t *w, int nf)
{
    char b[MAXF * 24 + 8];
    size_t k = 1;
    b[0] = 'S';
    for (int f = 0; f < nf; f++)
        k += (size_t)sprintf(b + k, " %llu", (unsigned long long)w[f]);
    b[k++] = '\n';
    if (write(logfd, b, k) != (ssize_t)k) {
        perror("log");
        exit(2);
    }
}

static void print_counts(char tag, const uint64_t *w, int nf)
{
    printf("%c", tag);
    for (int f = 0; f < nf; f++)
        printf(" %llu", (unsigned long long)w[f]);
    printf("\n");
}

static char *path_of(const char *dir, int f)
{
    char *p = malloc(strlen(dir) + 32);
    sprintf(p, "%s/f%d", dir, f);
    return p;
}

static int do_write(const char *dir, int nf, uint64_t seed, int fill)
{
    int fd[MAXF], fdw[MAXF];
    uint64_t w[MAXF] = {0}, att[MAXF] = {0}, sz[MAXF] = {0};
    size_t cap = 8 << 20;
    char *b = malloc(cap);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        printf("error: mkdir: %s\n", strerror(errno));
        return 1;
    }
    for (int f = 0; f < nf; f++) {
        char *p = path_of(dir, f);
        fd[f] = open(p, O_WRONLY | O_CREAT | O_APPEND, 0644);
        fdw[f] = fd[f] < 0 ? -1 : open(p, O_WRONLY);
        free(p);
        if (fd[f] < 0 || fdw[f] < 0) {
            print_counts('T', att, nf);
            printf("error: open: %s\n", strerror(errno));
            return 1;
        }
    }
    for (uint64_t it = 0;; it++) {
        int f = (int)(rnd(&seed) % (uint64_t)nf);
        uint64_t k = fill ? 0 : rnd(&seed) % 60 == 0 ? 1000 + rnd(&seed) % 3000 : 1 + rnd(&seed) % 20;
        size_t n = 0;
        if (fill) {
            while (n < 65536 - 100)
                n += line(b + n, f, w[f] + ++k);
        } else {
            for (uint64_t i = 1; i <= k; i++)
                n += line(b + n, f, w[f] + i);
        }
        att[f] = w[f] + k;
        ssize_t r = write(fd[f], b, n);
        size_t done = r > 0 ? (size_t)r : 0;
        while (fill && r > 0 && done < n) { /* a short write: go on with the rest */
            r = write(fd[f], b + done, n - done);
            if (r > 0) done += (size_t)r;
        }
        if (done != n) {
            print_counts('T', att, nf);
            printf("error: write: %s\n", r < 0 ? strerror(errno) : "short write");
            if (fill) {
                printf("(after %zu of %zu bytes)\n", done, n);
                int s = fsync(fd[f]);
                printf("fsync: %s\n", s ? strerror(errno) : "ok");
                return r < 0 ? 0 : 1;
            }
            return 1;
        }
        w[f] += k;
        sz[f] += n;
        uint64_t o = rnd(&seed) % 30;
        if (!fill && o < 3) {
            /* The same bytes again over themselves (the content does not change). */
            size_t part = n > 1 ? 1 + (size_t)(rnd(&seed) % n) : n;
            if (pwrite(fdw[f], b + (n - part), part, (off_t)(sz[f] - part)) != (ssize_t)part) {
                print_counts('T', att, nf);
                printf("error: pwrite: %s\n", strerror(errno));
                return 1;
            }
        } else if (!fill && o == 3 && ftruncate(fdw[f], (off_t)sz[f]) < 0) {
            print_counts('T', att, nf);
            printf("error: ftruncate: %s\n", strerror(errno));
            return 1;
        }
        uint64_t c = rnd(&seed) % 16;
        if (c < 3 || (fill && it % 8 == 7)) {
            if (fsync(fd[f]) < 0) {
                print_counts('T', att, nf);
                printf("error: fsync: %s\n", strerror(errno));
                return 1;
            }
            log_acked(w, nf);
        } else if (c == 3) {
            /* close: its flush hands every buffered record to the kernel */
            if (close(fd[f]) < 0) {
                print_counts('T', att, nf);
                printf("error: close: %s\n", strerror(errno));
                return 1;
            }
            log_acked(w, nf);
            char *p = path_of(dir, f);
            fd[f] = open(p, O_WRONLY | O_APPEND);
            free(p);
            if (fd[f] < 0) {
                print_counts('T', att, nf);
                printf("error: open: %s\n", strerror(errno));
                return 1;
            }
        }
    }
}

/* The number of whole lines of file f in `p`, or -1 with a message. With `partial`, the
 * file may end in a proper prefix of the next line: *tail receives its length. */
static long long count_lines(const char *p, size_t n, int f, const char *path, int partial,
                             size_t *tail)
{
    char want[128];
    size_t at = 0;
    uint64_t i = 0;
    *tail = 0;
    while (at < n) {
        size_t k = line(want, f, ++i);
        if (partial && n - at < k && !memcmp(p + at, want, n - at)) {
            *tail = n - at;
            return (long long)(i - 1);
        }
        if (n - at < k || memcmp(p + at, want, k)) {
            size_t m = n - at < k ? n - at : k;
            printf("%s: byte %zu (line %llu) is not what was written: \"%.*s\" instead of "
                   "\"%.*s\" (%zu bytes left in the file)\n",
                   path, at, (unsigned long long)i, (int)(m > 60 ? 60 : m), p + at,
                   (int)(k - 1 > 60 ? 60 : k - 1), want, n - at);
            return -1;
        }
        at += k;
    }
    return (long long)i;
}

/* The last line of `path` starting with `tag`, parsed into counts; 0 if none. */
static int last_counts(const char *path, char tag, uint64_t *w, int nf)
{
    FILE *fp = fopen(path, "r");
    char *l = NULL;
    size_t cap = 0;
    int found = 0;
    if (!fp) return 0;
    while (getline(&l, &cap, fp) > 0) {
        if (l[0] != tag || l[1] != ' ') continue;
        char *s = l + 1;
        for (int f = 0; f < nf; f++)
            w[f] = strtoull(s, &s, 10);
        found = 1;
    }
    free(l);
    fclose(fp);
    return found;
}

static int do_check(const char *dir, int nf, const char *logp, const char *outp)
{
    uint64_t acked[MAXF] = {0}, att[MAXF];
    int have_att = outp && last_counts(outp, 'T', att, nf);
    last_counts(logp, 'S', acked, nf);
    long long got[MAXF];
    for (int f = 0; f < nf; f++) {
        char *p = path_of(dir, f);
        size_t n = 0;
        char *b = NULL;
        int fd = open(p, O_RDONLY);
        if (fd < 0) {
            if (errno != ENOENT || acked[f]) {
                printf("%s: %s (%llu lines were acknowledged)\n", p, strerror(errno),
                       (unsigned long long)acked[f]);
                return 1;
            }
            got[f] = 0;
            free(p);
            continue;
        }
        struct stat sb;
        fstat(fd, &sb);
        b = malloc((size_t)sb.st_size + 1);
        for (ssize_t r; n < (size_t)sb.st_size && (r = read(fd, b + n, (size_t)sb.st_size - n)) > 0;)
            n += (size_t)r;
        char extra;
        if (n != (size_t)sb.st_size || read(fd, &extra, 1) != 0) {
            printf("%s: read %zu bytes, size %lld\n", p, n, (long long)sb.st_size);
            return 1;
        }
        close(fd);
        size_t tail;
        got[f] = count_lines(b, n, f, p, have_att, &tail);
        if (got[f] < 0) return 1;
        if (tail && (uint64_t)got[f] + 1 > att[f]) {
            printf("%s: ends in part of line %lld, which was never written\n", p, got[f] + 1);
            return 1;
        }
        if (tail) printf("%s: %zu bytes of line %lld (a write cut by the crash)\n", p, tail, got[f] + 1);
        if ((uint64_t)got[f] < acked[f]) {
            printf("%s: %lld lines, but %llu were acknowledged by fsync/close\n", p, got[f],
                   (unsigned long long)acked[f]);
            return 1;
        }
        if (have_att && (uint64_t)got[f] > att[f]) {
            printf("%s: %lld lines, but only %llu were ever written\n", p, got[f],
                   (unsigned long long)att[f]);
            return 1;
        }
        free(b);
        free(p);
    }
    printf("ok");
    for (int f = 0; f < nf; f++)
        printf(" %lld", got[f]);
    printf(" (acked");
    for (int f = 0; f < nf; f++)
        printf(" %llu", (unsigned long long)acked[f]);
    printf(")\n");
    return 0;
}

/* Version n of the replaced file: its length and lines follow from n. */
static size_t version(char *b, uint64_t n)
{
    uint64_t s = n * 0x9e3779b97f4a7c15ULL | 1;
    size_t len = 1 + (size_t)(rnd(&s) % 60000), k = 0;
    for (uint64_t i = 1; k < len; i++) {
        char l[64];
        int m = sprintf(l, "version %llu line %llu\n", (unsigned long long)n, (unsigned long long)i);
        size_t c = len - k < (size_t)m ? len - k : (size_t)m;
        memcpy(b + k, l, c);
        k += c;
    }
    return len;
}

static int do_replace(const char *dir, uint64_t seed)
{
    char *tmp = malloc(strlen(dir) + 16), *target = malloc(strlen(dir) + 16);
    char *b = malloc(65536);
    sprintf(tmp, "%s/tmp", dir);
    sprintf(target, "%s/target", dir);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        printf("error: mkdir: %s\n", strerror(errno));
        return 1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0) {
        printf("error: open dir: %s\n", strerror(errno));
        return 1;
    }
    for (uint64_t n = 1;; n++) {
        size_t len = version(b, n);
        const char *what = NULL;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            what = "open";
        else if (write(fd, b, len) != (ssize_t)len)
            what = "write";
        else if (close(fd) < 0)
            what = "close";
        else if (rename(tmp, target) < 0)
            what = "rename";
        else if (rnd(&seed) % 4 == 0) {
            if (fsync(dfd) < 0)
                what = "fsync";
            else
                log_acked(&n, 1);
        }
        if (what) {
            printf("T %llu\nerror: %s: %s\n", (unsigned long long)n, what, strerror(errno));
            return 1;
        }
    }
}

static int do_checkreplace(const char *dir, const char *logp, const char *outp)
{
    uint64_t acked = 0, att = 0;
    last_counts(logp, 'S', &acked, 1);
    if (!last_counts(outp, 'T', &att, 1)) {
        printf("%s: no T line\n", outp);
        return 1;
    }
    char *target = malloc(strlen(dir) + 16);
    sprintf(target, "%s/target", dir);
    int fd = open(target, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT && !acked) {
            printf("ok 0 (nothing saved)\n");
            return 0;
        }
        printf("%s: %s (version %llu was acknowledged)\n", target, strerror(errno),
               (unsigned long long)acked);
        return 1;
    }
    char *b = malloc(65536), *want = malloc(65536);
    ssize_t n = read(fd, b, 65536);
    close(fd);
    unsigned long long v = 0;
    if (n <= 0 || sscanf(b, "version %llu", &v) != 1) {
        printf("%s: %zd bytes, not a version\n", target, n);
        return 1;
    }
    size_t len = version(want, v);
    if ((size_t)n != len || memcmp(b, want, len)) {
        printf("%s: %zd bytes of version %llu, which has %zu: torn or mixed\n", target, n, v, len);
        return 1;
    }
    if (v < acked || v > att) {
        printf("%s: version %llu, acknowledged %llu, attempted %llu\n", target, v,
               (unsigned long long)acked, (unsigned long long)att);
        return 1;
    }
    printf("ok %llu (acked %llu, attempted %llu)\n", v, (unsigned long long)acked,
           (unsigned long long)att);
    return 0;
}

static int do_more(const char *dir, uint64_t nmore)
{
    char *p = path_of(dir, 0);
    int fd = open(p, O_RDWR | O_APPEND);
    if (fd < 0) {
        printf("error: open: %s\n", strerror(errno));
        return 1;
    }
    struct stat sb;
    fstat(fd, &sb);
    char *b = malloc((size_t)sb.st_size + 1);
    ssize_t r = pread(fd, b, (size_t)sb.st_size, 0);
    size_t tail = 0;
    long long have = r == sb.st_size ? count_lines(b, (size_t)r, 0, p, 1, &tail) : -1;
    free(b);
    if (have < 0) return 1;
    if (tail && ftruncate(fd, sb.st_size - (off_t)tail) < 0) {
        printf("error: ftruncate: %s\n", strerror(errno));
        return 1;
    }
    char l[128];
    for (uint64_t i = 1; i <= nmore; i++) {
        size_t k = line(l, 0, (uint64_t)have + i);
        if (write(fd, l, k) != (ssize_t)k) {
            printf("error: write: %s\n", strerror(errno));
            return 1;
        }
    }
    if (fsync(fd) < 0 || close(fd) < 0) {
        printf("error: fsync: %s\n", strerror(errno));
        return 1;
    }
    uint64_t w = (uint64_t)have + nmore;
    log_acked(&w, 1);
    printf("ok %llu\n", (unsigned long long)w);
    free(p);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 5 && !strcmp(argv[1], "write")) {
        int nf = atoi(argv[3]);
        if (nf < 1 || nf > MAXF) return 2;
        if ((logfd = open(argv[4], O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0) return 2;
        uint64_t seed = argc > 5 ? strtoull(argv[5], NULL, 10) : (uint64_t)getpid();
        return do_write(argv[2], nf, seed | 1, 0);
    }
    if (argc == 4 && !strcmp(argv[1], "fill")) {
        if ((logfd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0) return 2;
        return do_write(argv[2], 1, 12345, 1);
    }
    if (argc == 5 && !strcmp(argv[1], "more")) {
        if ((logfd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0) return 2;
        return do_more(argv[2], strtoull(argv[4], NULL, 10));
    }
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "replace")) {
        if ((logfd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644)) < 0) return 2;
        return do_replace(argv[2], argc == 5 ? strtoull(argv[4], NULL, 10) | 1 : 77);
    }
    if (argc == 5 && !strcmp(argv[1], "checkreplace"))
        return do_checkreplace(argv[2], argv[3], argv[4]);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "check")) {
        int nf = atoi(argv[3]);
        if (nf < 1 || nf > MAXF) return 2;
        return do_check(argv[2], nf, argv[4], argc == 6 ? argv[5] : NULL);
    }
    fprintf(stderr, "usage: fsyncwriter write DIR NFILES LOG [SEED] | fill DIR LOG | "
                    "more DIR LOG N | check DIR NFILES LOG [OUT] | replace DIR LOG [SEED] | "
                    "checkreplace DIR LOG OUT\n");
    return 2;
}
