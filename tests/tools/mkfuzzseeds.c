/* mkfuzzseeds: write the seed corpus of the fuzz targets (tests/fuzz/seeds/) from the
 * fuzz fixture: the fixture archive with raw sections (so mutations reach the decoders) and
 * journals of every record type, made through the vol API.
 * usage: mkfuzzseeds SEEDS_DIR */
#include "../fuzz/fuzz.h"
#include "sarc.h"

#include <sys/sysmacros.h>

static const char *seeds;

static void save_journal(const char *arcpath, const char *name)
{
    char jp[256], out[512];
    size_t n;
    snprintf(jp, sizeof jp, "%s.journal", arcpath);
    unsigned char *p = fz_read(jp, &n);
    snprintf(out, sizeof out, "%s/jrnl/%s", seeds, name);
    fz_write(out, p, n);
    free(p);
}

#define OK(x)                                                                                      \
    do {                                                                                           \
        if ((x)) fz_die(#x);                                                                       \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkfuzzseeds SEEDS_DIR\n");
        return 2;
    }
    seeds = argv[1];
    char *path, out[512];
    size_t n;
    unsigned char *fix = fz_fixture(&path, &n);
    sarc s;
    buf b = {0};
    if (sarc_load(fix, n, &s)) fz_die("fixture");
    sarc_save(&s, &b);
    snprintf(out, sizeof out, "%s/arc/fixture.tdc", seeds);
    fz_write(out, b.p, b.n);
    sarc_free(&s);
    buf_free(&b);

    vol_opts o = {.writable = 1};
    vol *v;
    struct stat st;
    uint64_t a, bin, d, f;
    /* 1: create, write, append, insert, truncate. */
    fz_reset_fixture();
    OK(vol_open(path, &o, &v, NULL));
    OK(vol_resolve(v, "a.txt", &a));
    OK(vol_resolve(v, "d", &d));
    OK(vol_resolve(v, "d/bin", &bin));
    OK(vol_mknode(v, d, "new", S_IFREG | 0644, 1000, 1000, NULL, 0, &st));
    f = st.st_ino;
    OK(vol_write(v, f, 0, "fresh text\n", 11));
    OK(vol_write(v, f, 11, "more\n", 5));
    OK(vol_insert(v, a, 4, "very ", 5));
    OK(vol_write(v, bin, 290, "tail bytes past the end", 23));
    struct stat in = {.st_size = 100};
    OK(vol_setattr(v, bin, VOL_SET_SIZE, &in, &st));
    vol_close(v);
    save_journal(path, "data.journal");
    /* 2: the namespace: mkdir, symlink, link, rename, unlink, rmdir. */
    fz_reset_fixture();
    OK(vol_open(path, &o, &v, NULL));
    OK(vol_resolve(v, "a.txt", &a));
    OK(vol_resolve(v, "d", &d));
    OK(vol_mknode(v, 1, "sub", S_IFDIR | 0755, 0, 0, NULL, 0, &st));
    uint64_t sub = st.st_ino;
    OK(vol_mknode(v, sub, "ln", S_IFLNK | 0777, 0, 0, "../a.txt", 0, &st));
    OK(vol_link(v, a, sub, "a2", &st));
    OK(vol_rename(v, 1, "a.txt", sub, "moved", 0));
    OK(vol_rename(v, d, "b.c", d, "bin", VOL_RENAME_EXCHANGE));
    OK(vol_unlink(v, sub, "ln", 0));
    OK(vol_mknode(v, sub, "gone", S_IFDIR | 0700, 0, 0, NULL, 0, &st));
    OK(vol_unlink(v, sub, "gone", 1));
    vol_close(v);
    save_journal(path, "names.journal");
    /* 3: attributes and xattrs. */
    fz_reset_fixture();
    OK(vol_open(path, &o, &v, NULL));
    OK(vol_resolve(v, "a.txt", &a));
    struct stat at = {.st_mode = 0600, .st_uid = 5, .st_gid = 6};
    at.st_mtim.tv_sec = 1000000;
    OK(vol_setattr(v, a, VOL_SET_MODE | VOL_SET_UID | VOL_SET_GID | VOL_SET_MTIME, &at, &st));
    OK(vol_setxattr(v, a, "k1", "v1", 2, 0));
    OK(vol_setxattr(v, a, "k0", "value zero", 10, 0));
    OK(vol_setxattr(v, a, "k1", "", 0, 2));
    OK(vol_removexattr(v, a, "k0"));
    vol_close(v);
    save_journal(path, "attrs.journal");
    /* 4: special files (FIFO, socket, devices with their numbers) and a hard-linked
     * symlink. */
    fz_reset_fixture();
    OK(vol_open(path, &o, &v, NULL));
    OK(vol_resolve(v, "d", &d));
    OK(vol_mknode(v, d, "fifo", S_IFIFO | 0644, 0, 0, NULL, 0, &st));
    OK(vol_link(v, st.st_ino, 1, "fifo2", &st));
    OK(vol_mknode(v, 1, "sock", S_IFSOCK | 0755, 0, 0, NULL, 0, &st));
    OK(vol_mknode(v, 1, "cdev", S_IFCHR | 0600, 0, 0, NULL, makedev(1, 3), &st));
    OK(vol_mknode(v, d, "bdev", S_IFBLK | 0660, 0, 6, NULL, makedev(7, 0), &st));
    OK(vol_mknode(v, 1, "s1", S_IFLNK | 0777, 0, 0, "d/b.c", 0, &st));
    OK(vol_link(v, st.st_ino, d, "s2", &st));
    vol_close(v);
    save_journal(path, "special.journal");
    fz_reset_fixture();
    printf("seeds written to %s\n", seeds);
    return 0;
}
