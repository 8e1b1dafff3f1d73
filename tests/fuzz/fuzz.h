/* fuzz.h: what the fuzz targets share.
 *
 * Each target defines LLVMFuzzerTestOneInput (and optionally LLVMFuzzerInitialize). Built
 * with clang -fsanitize=fuzzer by `make fuzz`; built with standalone.c (a main that feeds
 * each file named on the command line through the target once) by the normal build, so
 * `make test` replays the seeds and every regression input under ASan and UBSan. A target
 * that finds a wrong result (not just a crash) calls FUZZ_CHECK, which aborts. */
#ifndef TDC_FUZZ_H
#define TDC_FUZZ_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "../../engine/format/arc.h"
#include "../../engine/format/arc_test.h"
#include "../../engine/base/buf.h"
#include "../../engine/base/err.h"
#include "../../engine/build/pack.h"
#include "../../engine/volume/vol.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline void fz_die(const char *what)
{
    fprintf(stderr, "fuzz setup: %s: %s (%s)\n", what, strerror(errno), tdc_errmsg());
    exit(1);
}

static inline void fz_write(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fz_die(path);
    const unsigned char *q = p;
    while (n) {
        ssize_t k = write(fd, q, n);
        if (k <= 0) fz_die(path);
        q += k;
        n -= (size_t)k;
    }
    close(fd);
}

static inline unsigned char *fz_read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) fz_die(path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(len > 0 ? (size_t)len : 1);
    if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) fz_die(path);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* A private scratch directory (on /dev/shm when there is one: fsync is free there). */
static inline char *fz_tmpdir(void)
{
    static char dir[64];
    if (dir[0]) return dir;
    snprintf(dir, sizeof dir, "%s/tdcfuzz.XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
    if (!mkdtemp(dir)) fz_die("mkdtemp");
    return dir;
}

/* Remove the scratch directory at exit (one level of files and directories below it). */
static inline void fz_rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p) continue;
        struct stat st;
        if (!lstat(p, &st) && S_ISDIR(st.st_mode))
            fz_rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static inline void fz_cleanup(void)
{
    fz_rm_tree(fz_tmpdir());
}

/* ARC_PLAIN_* techniques the fixture is packed without (set before the first fz_fixture). */
static unsigned fz_fixture_plain;

/* The fixture: a small archive packed from a tree with text, binary, empty and nested files,
 * a symlink and a hard link, kept as bytes so each input starts from the same archive.
 * Sets *path to the archive's path in the scratch directory. */
static inline unsigned char *fz_fixture(char **path, size_t *n)
{
    static char arcpath[128];
    static unsigned char *bytes;
    static size_t nbytes;
    if (!bytes) {
        char *t = fz_tmpdir(), p[256];
        atexit(fz_cleanup);
        snprintf(p, sizeof p, "%s/src", t);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/src/d", t);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/src/d/e", t);
        mkdir(p, 0755);
        static const char text[] = "the quick brown fox jumps over the lazy dog\n"
                                   "the lazy dog sleeps; the quick fox runs\n"
                                   "int main(void) { return 0; }\n";
        snprintf(p, sizeof p, "%s/src/a.txt", t);
        fz_write(p, text, sizeof text - 1);
        snprintf(p, sizeof p, "%s/src/d/b.c", t);
        fz_write(p, text + 44, sizeof text - 45);
        unsigned char bin[300];
        for (int i = 0; i < 300; i++)
            bin[i] = (unsigned char)(i * 7);
        snprintf(p, sizeof p, "%s/src/d/bin", t);
        fz_write(p, bin, sizeof bin);
        snprintf(p, sizeof p, "%s/src/d/e/empty", t);
        fz_write(p, "", 0);
        char q[256];
        snprintf(p, sizeof p, "%s/src/d/l", t);
        if (symlink("../a.txt", p)) fz_die("symlink");
        snprintf(p, sizeof p, "%s/src/a.txt", t);
        snprintf(q, sizeof q, "%s/src/d/hard", t);
        if (link(p, q)) fz_die("link");
        snprintf(arcpath, sizeof arcpath, "%s/fix.tdc", t);
        snprintf(p, sizeof p, "%s/src", t);
        pack_opts po = {.level = 1, .plain = fz_fixture_plain};
        pack_stats ps;
        if (pack_dir(p, arcpath, &po, &ps)) fz_die("pack");
        bytes = fz_read(arcpath, &nbytes);
    }
    *path = arcpath;
    *n = nbytes;
    return bytes;
}

/* The largest file size the last fz_dump saw. */
static uint64_t fz_max_size;

/* Everything a vol shows: each path with its attributes, target, xattrs and content, in
 * tree order. Reads at most `cap` bytes of each file. */
static inline void fz_dump_dir(vol *v, vol_reader *rd, uint64_t dir, const char *prefix, size_t cap,
                               buf *out, int depth)
{
    vol_dirent *ents;
    size_t n;
    uint64_t parent;
    if (depth > 64 || vol_list(v, dir, &ents, &n, &parent)) return;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", prefix, ents[i].name) >= sizeof path)
            continue;
        if (vol_getattr(v, ents[i].ino, &st)) continue;
        char line[4400];
        int k = snprintf(line, sizeof line, "%s ino=%llu mode=%o uid=%u gid=%u size=%lld\n", path,
                         (unsigned long long)st.st_ino, (unsigned)st.st_mode, (unsigned)st.st_uid,
                         (unsigned)st.st_gid, (long long)st.st_size);
        buf_put(out, line, (size_t)k);
        buf xa = {0};
        if (!vol_listxattr(v, ents[i].ino, &xa)) {
            for (size_t p = 0; p < xa.n;) {
                const char *nm = (const char *)xa.p + p;
                buf val = {0};
                buf_put(out, nm, strlen(nm) + 1);
                if (!vol_getxattr(v, ents[i].ino, nm, &val)) buf_put(out, val.p, val.n);
                buf_free(&val);
                p += strlen(nm) + 1;
            }
        }
        buf_free(&xa);
        if (S_ISLNK(st.st_mode)) {
            char *t;
            if (!vol_readlink(v, ents[i].ino, &t)) {
                buf_put(out, t, strlen(t) + 1);
                free(t);
            }
        } else if (S_ISREG(st.st_mode)) {
            if ((uint64_t)st.st_size > fz_max_size) fz_max_size = (uint64_t)st.st_size;
            size_t want = (uint64_t)st.st_size < cap ? (size_t)st.st_size : cap;
            unsigned char *b = malloc(want ? want : 1);
            ssize_t got = b ? vol_read(v, rd, ents[i].ino, 0, b, want) : -ENOMEM;
            char msg[64];
            k = snprintf(msg, sizeof msg, "read=%zd\n", got);
            buf_put(out, msg, (size_t)k);
            if (got > 0) buf_put(out, b, (size_t)got);
            free(b);
        } else if (S_ISDIR(st.st_mode)) {
            fz_dump_dir(v, rd, ents[i].ino, path, cap, out, depth + 1);
        }
    }
    vol_list_free(ents, n);
}

static inline void fz_dump(vol *v, size_t cap, buf *out)
{
    vol_reader rd;
    vol_reader_init(&rd);
    out->n = 0;
    fz_max_size = 0;
    fz_dump_dir(v, &rd, 1, "", cap, out, 0);
    vol_reader_free(&rd);
}

/* With FUZZ_VERBOSE set, keep two dumps that differ in /tmp/fuzz-dump-{a,b} for a diff. */
static inline void fz_keep_dumps(const buf *a, const buf *b)
{
    if (!getenv("FUZZ_VERBOSE")) return;
    fz_write("/tmp/fuzz-dump-a", a->p, a->n);
    fz_write("/tmp/fuzz-dump-b", b->p, b->n);
}

/* The state replayed from the journal must be what the writer saw, and compaction must
 * keep it: open read-only and dump, open writable and compact, reopen and compare. `live`
 * (optional) is the dump of the vol that wrote the journal. Restores nothing. */
#define FZ_COMPACT_MAX ((uint64_t)4 << 20)

static inline void fz_check_replay_compact(const char *arcpath, const buf *live)
{
    vol *v;
    vol_opts ro = {0}, rw = {.writable = 1, .level = 1};
    buf a = {0}, b = {0};
    if (vol_open(arcpath, &ro, &v, NULL)) {
        FUZZ_CHECK(!live, "a journal the writer made does not replay: %s", tdc_errmsg());
        return;
    }
    fz_dump(v, 1 << 16, &a);
    vol_close(v);
    if (live && (a.n != live->n || memcmp(a.p, live->p, a.n))) fz_keep_dumps(live, &a);
    if (live)
        FUZZ_CHECK(a.n == live->n && !memcmp(a.p, live->p, a.n),
                   "replayed state differs from the writer's (%zu vs %zu bytes of dump)", a.n,
                   live->n);
    /* Compaction tokenizes every byte of an edited file: a sparse file of terabytes (a
     * truncate record can make one, as `truncate -s 1T` can) is legal but takes as long. */
    if (fz_max_size <= FZ_COMPACT_MAX && !vol_open(arcpath, &rw, &v, NULL)) {
        vol_compact_stats cs;
        int rc = vol_compact(v, &cs);
        if (!rc) fz_dump(v, 1 << 16, &b);
        vol_close(v);
        /* Compaction may refuse (e.g. a file whose archived bytes do not match its hash),
         * but when it succeeds the tree must be unchanged, before and after a reopen. */
        if (!rc) {
            if (a.n != b.n || memcmp(a.p, b.p, a.n)) fz_keep_dumps(&a, &b);
            FUZZ_CHECK(a.n == b.n && !memcmp(a.p, b.p, a.n),
                       "compaction changed the tree (%zu vs %zu bytes of dump)", a.n, b.n);
            FUZZ_CHECK(!vol_open(arcpath, &ro, &v, NULL), "compacted archive does not open: %s",
                       tdc_errmsg());
            fz_dump(v, 1 << 16, &b);
            vol_close(v);
            if (a.n != b.n || memcmp(a.p, b.p, a.n)) fz_keep_dumps(&a, &b);
            FUZZ_CHECK(a.n == b.n && !memcmp(a.p, b.p, a.n),
                       "compacted archive reopens different (%zu vs %zu bytes of dump)", a.n, b.n);
        }
    }
    buf_free(&a);
    buf_free(&b);
}

/* Put the fixture archive back and remove any journal, lock or temporary files. */
static inline void fz_reset_fixture(void)
{
    char *path, p[256];
    size_t n;
    unsigned char *bytes = fz_fixture(&path, &n);
    fz_write(path, bytes, n);
    snprintf(p, sizeof p, "%s.journal", path);
    unlink(p);
}

#endif
