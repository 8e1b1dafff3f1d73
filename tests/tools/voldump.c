/* voldump: print what a read-only vol shows (archive plus journal): every path with its
 * inode, mode, owner, size, xattrs, symlink target and content, in tree order. Two trees are
 * the same exactly when their dumps are. Exit 3 (message on stderr) when the archive or the
 * journal is refused, 1 on other errors.
 * usage: voldump ARCHIVE */
#include "../fuzz/fuzz.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: voldump ARCHIVE\n");
        return 2;
    }
    vol *v;
    vol_opts o = {0};
    jrnl_stats js;
    int rc = vol_open(argv[1], &o, &v, &js);
    if (rc) {
        fprintf(stderr, "voldump: %s\n", tdc_errmsg());
        return tdc_exit_status(rc);
    }
    if (js.unread) { /* replay is what this tool checks: a journal it could not read fails */
        fprintf(stderr, "voldump: %s.journal: %s\n", argv[1], js.why);
        vol_close(v);
        return 3;
    }
    buf b = {0};
    fz_dump(v, (size_t)1 << 30, &b);
    vol_close(v);
    fwrite(b.p, 1, b.n, stdout);
    buf_free(&b);
    fprintf(stderr, "voldump: %llu records replayed, %llu bytes dropped%s%s\n",
            (unsigned long long)js.records, (unsigned long long)js.dropped, js.dropped ? ": " : "",
            js.why);
    return 0;
}
