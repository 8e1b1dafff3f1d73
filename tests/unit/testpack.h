/* testpack: pack a tree the test wrote and open the archive, removing both (the unit tests
 * that need a real archive of chosen files). Include after cmocka.h and testutil.h. */
#ifndef TDC_TESTPACK_H
#define TDC_TESTPACK_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "../../engine/build/pack.h"
#include "../../engine/format/arc.h"

/* Pack directory `dir` with options o (NULL: defaults) into a temporary archive, open it,
 * remove the directory and the archive file; the pack's statistics into *st if not NULL. */
static inline arc *tu_pack_open(const char *dir, const pack_opts *o, pack_stats *st)
{
    char ar[4200], cmd[8500];
    snprintf(ar, sizeof ar, "%s.tdc", dir);
    pack_opts d = {0};
    pack_stats s;
    arc *a;
    assert_int_equal(pack_dir(dir, ar, o ? o : &d, st ? st : &s), 0);
    assert_int_equal(arc_open(ar, &a), 0);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, ar);
    assert_int_equal(system(cmd), 0);
    return a;
}

/* Write files names[0..n) with content[i] of size[i] bytes into a fresh directory named
 * after `tag`, then tu_pack_open it. */
static inline arc *tu_pack_files(const char *tag, int n, const char *const *names,
                                 unsigned char *const *content, const size_t *size,
                                 const pack_opts *o, pack_stats *st)
{
    char *dir = tu_tmppath(tag), path[4200];
    mkdir(dir, 0755);
    for (int f = 0; f < n; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        FILE *fp = fopen(path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(content[f], 1, size[f], fp), size[f]);
        assert_int_equal(fclose(fp), 0);
    }
    arc *a = tu_pack_open(dir, o, st);
    free(dir);
    return a;
}

#endif
