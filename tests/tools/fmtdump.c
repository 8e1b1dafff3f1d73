/* fmtdump: what the C code makes of an archive and its journal, in the canonical listing that
 * tests/format/readfmt.py (an independent reader written from docs/FORMAT.md) prints, so the
 * two can be compared byte for byte (tests/bats/format.bats).
 *
 * usage: fmtdump ARCHIVE      the tree the archive plus its journal shows (read-only open)
 *        fmtdump -j ARCHIVE   the journal's records that replay: "seq<TAB>type<TAB>body length"
 *
 * Tree listing: one line per inode name, the root first as ".", then depth first with the
 * names of a directory in byte order; fields separated by a TAB:
 *   path type mode uid gid size mtime ino nlink rdev link xattrs content
 * type is one of "-dlpscb"; mode is 4 octal digits; mtime is SEC.NSEC (9 digits); link is the
 * symlink target in hex ("-" for others); xattrs are NAME=HEXVALUE joined by "," ("-" for
 * none); content is a regular file's bytes in hex ("-" for other types, "" when empty).
 * Exit 3 when the archive or journal is refused, 1 on other errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../engine/format/arc.h"
#include "../../engine/base/buf.h"
#include "../../engine/base/err.h"
#include "../../engine/volume/jrec.h"
#include "../../engine/volume/jrnl.h"
#include "../../engine/volume/vol.h"

static void hex(const void *p, size_t n)
{
    const unsigned char *q = p;
    for (size_t i = 0; i < n; i++)
        printf("%02x", q[i]);
}

static char type_char(mode_t m)
{
    return S_ISREG(m) ? '-' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISFIFO(m) ? 'p'
           : S_ISSOCK(m) ? 's' : S_ISCHR(m) ? 'c' : S_ISBLK(m) ? 'b' : '?';
}

static int line(vol *v, vol_reader *rd, uint64_t ino, const char *path)
{
    struct stat st;
    int rc = vol_getattr(v, ino, &st);
    if (rc) return rc;
    printf("%s\t%c\t%04o\t%u\t%u\t%lld\t%lld.%09ld\t%llu\t%llu\t%llu\t", path,
           type_char(st.st_mode), (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
           (unsigned)st.st_gid, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
           st.st_mtim.tv_nsec, (unsigned long long)st.st_ino, (unsigned long long)st.st_nlink,
           (unsigned long long)st.st_rdev);
    if (S_ISLNK(st.st_mode)) {
        char *t;
        if ((rc = vol_readlink(v, ino, &t))) return rc;
        hex(t, strlen(t));
        free(t);
    } else {
        putchar('-');
    }
    putchar('\t');
    buf names = {0};
    if ((rc = vol_listxattr(v, ino, &names))) return rc;
    if (!names.n) putchar('-');
    for (size_t p = 0; p < names.n; p += strlen((char *)names.p + p) + 1) {
        const char *nm = (const char *)names.p + p;
        buf val = {0};
        if ((rc = vol_getxattr(v, ino, nm, &val))) return rc;
        printf("%s%s=", p ? "," : "", nm);
        hex(val.p, val.n);
        buf_free(&val);
    }
    buf_free(&names);
    putchar('\t');
    if (S_ISREG(st.st_mode)) {
        size_t n = (size_t)st.st_size;
        unsigned char *b = malloc(n ? n : 1);
        if (!b) return -ENOMEM;
        ssize_t got = vol_read(v, rd, ino, 0, b, n);
        if (got < 0 || (size_t)got != n) {
            free(b);
            return got < 0 ? (int)got : tdc_error(-EIO, "%s: short read", path);
        }
        hex(b, n);
        free(b);
    } else {
        putchar('-');
    }
    putchar('\n');
    return 0;
}

static int walk(vol *v, vol_reader *rd, uint64_t dir, const char *prefix)
{
    vol_dirent *ents;
    size_t n;
    uint64_t parent;
    int rc = vol_list(v, dir, &ents, &n, &parent);
    if (rc) return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t len = strlen(prefix) + strlen(ents[i].name) + 2;
        char *path = malloc(len);
        if (!path) {
            rc = -ENOMEM;
            break;
        }
        snprintf(path, len, "%s%s%s", prefix, prefix[0] ? "/" : "", ents[i].name);
        rc = line(v, rd, ents[i].ino, path);
        if (!rc && S_ISDIR(ents[i].mode)) rc = walk(v, rd, ents[i].ino, path);
        free(path);
    }
    vol_list_free(ents, n);
    return rc;
}

static int print_rec(void *ctx, const jrnl_rec *r)
{
    (void)ctx;
    printf("%llu\t%s\t%u\n", (unsigned long long)r->seq,
           jrec_name(r->type), r->len);
    return 0;
}

static int records(const char *archive)
{
    arc *a;
    int rc = arc_open_meta(archive, &a);
    if (rc) return rc;
    size_t n = strlen(archive) + sizeof ".journal";
    char *jp = malloc(n);
    if (!jp) {
        arc_free(a);
        return -ENOMEM;
    }
    snprintf(jp, n, "%s.journal", archive);
    jrnl *j;
    jrnl_stats st;
    rc = jrnl_open(jp, a->id, a->prev_id, 0, print_rec, NULL, &st, &j);
    if (!rc) jrnl_close(j);
    free(jp);
    arc_free(a);
    return rc;
}

int main(int argc, char **argv)
{
    int rc;
    if (argc == 3 && !strcmp(argv[1], "-j")) {
        rc = records(argv[2]);
    } else if (argc == 2) {
        vol *v;
        vol_opts o = {0};
        if (!(rc = vol_open(argv[1], &o, &v, NULL))) {
            vol_reader rd;
            vol_reader_init(&rd);
            rc = line(v, &rd, 1, ".");
            if (!rc) rc = walk(v, &rd, 1, "");
            vol_reader_free(&rd);
            vol_close(v);
        }
    } else {
        fprintf(stderr, "usage: fmtdump [-j] ARCHIVE\n");
        return 2;
    }
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "fmtdump: %s\n", tdc_errmsg()[0] ? tdc_errmsg() : strerror(-rc));
        return tdc_exit_status(rc);
    }
    return 0;
}
