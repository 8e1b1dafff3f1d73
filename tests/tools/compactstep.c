/* compactstep: compact an archive and stop at a chosen step, to test that a compaction that
 * dies or fails anywhere leaves either the old archive with its journal or the new archive
 * with an empty one.
 *
 *   compactstep ARCHIVE STEP crash     _exit(42) as soon as step STEP is done
 *   compactstep ARCHIVE STEP fail      fail with EIO after step STEP, as a failure there would
 *   compactstep ARCHIVE 2 damage       flip a byte of the temporary archive once it is written
 *                                      (what a writer bug or a bad disk would leave), so the
 *                                      check before the rename must catch it
 *   compactstep ARCHIVE 0 none         compact normally
 *   compactstep ARCHIVE STEP write-crash
 *                                      append a line to ca01 once the new archive is checked
 *                                      (step 3: a change made while the compaction runs, made
 *                                      durable with a sync), then _exit(42) after step STEP
 *   compactstep ARCHIVE 0 write        append that line and sync, without compacting (what
 *                                      the tree must show after write-crash)
 *
 * STEP is an enum vol_step value (1 built, 2 written, 3 checked, 4 renamed, 5 journal reset).
 * Exit 0 when the compaction succeeded, 1 with its message on stderr when it failed, 42 for
 * a crash. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../engine/base/err.h"
#include "../../engine/volume/vol.h"

typedef struct plan {
    int step;
    const char *mode;
    vol *v;
} plan;

/* Append a line to ca01 and make it durable. */
static int write_line(vol *v)
{
    static const char line[] = "written while the compaction ran\n";
    uint64_t ino;
    struct stat st;
    int rc = vol_resolve(v, "ca01", &ino);
    if (!rc) rc = vol_getattr(v, ino, &st);
    if (!rc) rc = vol_write(v, ino, (uint64_t)st.st_size, line, sizeof line - 1);
    if (!rc) rc = vol_sync(v);
    return rc;
}

/* Flip one byte in the middle of the file at `path`. */
static int damage(const char *path)
{
    int fd = open(path, O_RDWR);
    struct stat st;
    unsigned char b;
    if (fd < 0 || fstat(fd, &st) < 0) return -EIO;
    off_t at = st.st_size / 2;
    int ok = pread(fd, &b, 1, at) == 1 && (b ^= 0x40, pwrite(fd, &b, 1, at) == 1);
    close(fd);
    return ok ? 0 : -EIO;
}

static int on_step(void *ctx, int step, const char *tmp)
{
    const plan *p = ctx;
    int writes = !strncmp(p->mode, "write-", 6), rc;
    if (writes && step == VOL_STEP_CHECKED && (rc = write_line(p->v))) return rc;
    if (step != p->step) return 0;
    if (!strcmp(p->mode, "crash") || !strcmp(p->mode, "write-crash")) _exit(42);
    if (!strcmp(p->mode, "fail")) return -EIO;
    if (!strcmp(p->mode, "damage") && tmp) return damage(tmp);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: compactstep ARCHIVE STEP crash|fail|damage|none\n");
        return 2;
    }
    plan p = {atoi(argv[2]), argv[3], NULL};
    vol_opts o = {.writable = 1, .compact_step = on_step, .step_ctx = &p};
    vol *v;
    jrnl_stats js;
    int rc = vol_open(argv[1], &o, &v, &js);
    if (rc) {
        fprintf(stderr, "compactstep: %s\n", tdc_errmsg());
        return 1;
    }
    p.v = v;
    vol_compact_stats st;
    if (!strcmp(p.mode, "write")) {
        rc = write_line(v);
        if (rc) fprintf(stderr, "compactstep: %s\n", tdc_errmsg());
        vol_close(v);
        return rc ? 1 : 0;
    }
    rc = vol_compact(v, &st);
    if (rc) fprintf(stderr, "compactstep: %s\n", tdc_errmsg());
    vol_close(v);
    return rc ? 1 : 0;
}
