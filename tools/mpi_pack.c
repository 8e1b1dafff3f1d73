/* tadoc-mpi pack: one archive packed by the ranks of an MPI job (docs/DESIGN.md, "Scale out").
 *
 *   mpirun -n N tadoc-mpi pack DIR -o ARCHIVE [--level N] [--shard-size SIZE] [-j N] [-q]
 *
 * Rank 0 walks DIR and plans the groups of files (pack_plan: the tree and the shard size
 * decide them) and sends the plan to the other ranks (pack_plan_encode: the entries, as the
 * file table codes them), which read DIR (a path they all reach) only for the files they
 * pack; the ranks deal the groups by content bytes, and each packs its groups on all its
 * cores. The ranks then swap
 * their groups' results without the sections' bytes (a few bytes a file), so that each knows
 * where every shard lies in the archive, and write their own shards' sections into one
 * temporary file beside ARCHIVE at once (MPI-IO). Rank 0 writes the global part after them
 * (file table, shard table, section table, header); every rank reads its shards back and
 * checks their checksums; only then does rank 0 rename the file over ARCHIVE. So the archive
 * is the one `tadoc pack` makes of the same tree with the same options, byte for byte but for
 * its random id. Whatever fails (a file a rank cannot read, trees that differ between ranks,
 * a write, a check) fails the run on every rank with the rank and its message, and leaves
 * ARCHIVE as it was and no temporary file; a rank that dies while packing makes mpirun end
 * the job before the temporary file exists. */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/base/err.h"
#include "../engine/base/par.h"
#include "../engine/build/pack.h"
#include "../engine/format/arc.h"
#include "../engine/volume/vol.h"
#include "tadoc_mpi.h"

static const char usage[] =
    "usage: mpirun -n N tadoc-mpi pack DIR -o ARCHIVE [--level N] [--shard-size SIZE] [-j N] "
    "[-q]\n"
    "\n"
    "Pack the tree under DIR into ARCHIVE as `tadoc pack` does, with its groups of files\n"
    "dealt among the MPI ranks, each packing its share on N threads (default: one per CPU)\n"
    "and writing its shards into the archive; rank 0 writes the file table and commits\n"
    "the archive once every rank has checked its shards. Every rank reads DIR and writes\n"
    "ARCHIVE at the same paths. Options as for `tadoc pack`.\n";

/* The plan of `dir` on every rank: rank 0 walks the tree, the others decode what it sends.
 * Collective (the result is this rank's: the caller agrees on it). */
static int share_plan(const char *dir, const pack_opts *o, int rank, pack_job **j)
{
    buf mine = {0}, all = {0};
    int rc = rank ? 0 : pack_plan(dir, o, j);
    if (!rank && !rc && pack_plan_encode(*j, &mine)) rc = tdc_error(-ENOMEM, "out of memory");
    if (!(rc = mpi_agree(rc))) rc = mpi_allgather_buf(&mine, &all, NULL);
    if (!rc && rank) rc = pack_plan_decode(dir, o, all.p, all.n, j);
    buf_free(&mine);
    buf_free(&all);
    return rc;
}

/* Deal the groups among `size` ranks by content bytes (par_deal: the same deal on every
 * rank). take[g] = 1 for this rank's. */
static int deal(const pack_job *j, int rank, int size, unsigned char *take)
{
    uint32_t n = pack_ngroups(j);
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    uint64_t *bytes = malloc((n ? n : 1) * sizeof *bytes);
    int *owner = malloc((n ? n : 1) * sizeof *owner);
    int rc = ids && bytes && owner ? 0 : -ENOMEM;
    for (uint32_t g = 0; !rc && g < n; g++) {
        ids[g] = g;
        bytes[g] = pack_group_bytes(j, g);
    }
    if (!rc) rc = par_deal(ids, n, bytes, size, owner);
    for (uint32_t g = 0; !rc && g < n; g++)
        take[g] = owner[g] == rank;
    free(ids);
    free(bytes);
    free(owner);
    return rc ? tdc_error(rc, "out of memory") : 0;
}

/* Every rank's packed groups, known to every rank: each encodes its own (group index,
 * length, result), all gather them, each decodes the others'. */
static int swap_groups(pack_job *j, const unsigned char *take)
{
    buf mine = {0}, all = {0};
    uint32_t n = pack_ngroups(j);
    int rc = 0;
    for (uint32_t g = 0; !rc && g < n; g++) {
        if (!take[g]) continue;
        size_t at;
        rc = buf_put_varint(&mine, g) || buf_put_u64(&mine, 0) ? -ENOMEM : 0;
        at = mine.n;
        if (!rc) rc = pack_group_encode(j, g, &mine);
        if (!rc) st64(mine.p + at - 8, mine.n - at);
    }
    if (!(rc = mpi_agree(rc))) rc = mpi_allgather_buf(&mine, &all, NULL);
    rd in = {all.p, all.p + all.n};
    while (!rc && in.p < in.end) {
        uint64_t g, n8;
        const unsigned char *p;
        if (rd_varint(&in, &g) || rd_u64(&in, &n8) || g >= n || rd_bytes(&in, n8, &p))
            rc = tdc_error(-EBADMSG, "malformed groups from another rank");
        else if (!take[g])
            rc = pack_group_decode(j, (uint32_t)g, p, n8);
    }
    buf_free(&all);
    buf_free(&mine);
    return rc;
}

/* This rank's shards' sections written at their places in the file `tmp`, which every rank
 * opens together. */
static int write_sections(const pack_job *j, const unsigned char *take, const arc_coded *all,
                          uint32_t nall, const char *tmp)
{
    mpi_block *b = malloc(((size_t)nall * 3 + 1) * sizeof *b);
    size_t nb = 0;
    for (uint32_t g = 0; b && g < pack_ngroups(j); g++) {
        if (!take[g]) continue;
        uint32_t n, first = pack_group_first_shard(j, g);
        const arc_coded *sh = pack_group_coded(j, g, &n);
        uint64_t off = arc_coded_offset(all, first); /* the group's sections follow */
        for (uint32_t k = 0; k < n; k++)
            for (int i = 0; i < 3; i++) {
                b[nb++] = (mpi_block){off, sh[k].secs[i].stored, sh[k].data[i], -1};
                off += sh[k].secs[i].stored;
            }
    }
    int rc = mpi_write_blocks(tmp, b, nb); /* collective: called even without memory */
    if (!b && !rc) rc = tdc_error(-ENOMEM, "out of memory");
    free(b);
    return rc;
}

/* This rank's shards read back from the written file and their checksums checked. */
static int check_shards(const pack_job *j, const unsigned char *take, const char *tmp)
{
    arc *a = NULL;
    int rc = arc_open_meta(tmp, &a);
    for (uint32_t g = 0; !rc && g < pack_ngroups(j); g++) {
        if (!take[g]) continue;
        uint32_t n, first = pack_group_first_shard(j, g);
        pack_group_coded(j, g, &n);
        for (uint32_t k = 0; !rc && k < n; k++)
            rc = arc_shard_check(a, first + k);
    }
    arc_free(a);
    return rc ? tdc_error_ctx(rc, "checking the written shards") : 0;
}

static void on_warn(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "tadoc-mpi: warning: %s\n", msg);
}

int mpi_pack(int argc, char **argv, int rank, int size)
{
    static const struct option lo[] = {{"output", 1, 0, 'o'}, {"level", 1, 0, 'l'},
                                       {"shard-size", 1, 0, 'S'}, {"jobs", 1, 0, 'j'},
                                       {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *out = NULL;
    int quiet = 0, c, bad = 0;
    pack_opts o = {.warn = on_warn};
    while ((c = getopt_long(argc, argv, "o:l:S:j:qh", lo, NULL)) != -1) {
        char *end;
        if (c == 'o') {
            out = optarg;
        } else if (c == 'l') {
            o.level = (int)strtol(optarg, &end, 10);
            bad |= *end || o.level < 1 || o.level > 22;
        } else if (c == 'S') {
            bad |= parse_size(optarg, &o.shard_size) || o.shard_size < 1024;
        } else if (c == 'j') {
            unsigned long jn = strtoul(optarg, &end, 10);
            bad |= *end || jn < 1 || jn > 1024;
            o.jobs = (unsigned)jn;
        } else if (c == 'q') {
            quiet = 1;
        } else if (c == 'h') {
            if (!rank) fputs(usage, stdout);
            return EX_OK;
        } else {
            bad = 1;
        }
    }
    if (bad || optind + 1 != argc || !out) {
        if (!rank) fprintf(stderr, "tadoc-mpi: bad arguments\n%s", usage);
        return EX_USAGE;
    }
    pack_job *j = NULL;
    unsigned char *take = NULL;
    const arc_coded *all = NULL;
    uint32_t nall = 0;
    vol_replace vr = {0};
    int have_vr = 0, have_tmp = 0, committed = 0;
    char tmp[4200] = "";
    pack_stats st = {0};
    double t0 = MPI_Wtime();
    /* The plan: rank 0's walk, sent to every rank. */
    int rc = mpi_agree(share_plan(argv[optind], &o, rank, &j));
    if (!rc) {
        take = calloc(pack_ngroups(j) + 1, 1);
        rc = mpi_agree(take ? deal(j, rank, size, take) : tdc_error(-ENOMEM, "out of memory"));
    }
    if (!rc) rc = mpi_agree(pack_run(j, take));
    uint64_t mine = j ? pack_changed(j) : 0, changed = 0; /* files that changed as read */
    if (!rc) MPI_Allreduce(&mine, &changed, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    /* Test hook (tests/bats/mpi.bats): TADOC_MPI_TEST_DIE=R makes rank R die after its
     * work, as a crash would. */
    const char *die = getenv("TADOC_MPI_TEST_DIE");
    if (die && *die && atoi(die) == rank) raise(SIGKILL);
    if (!rc) rc = mpi_agree(swap_groups(j, take));
    if (!rc) rc = mpi_agree(pack_shards(j, &all, &nall));
    if (!rc) {
        int e = rank ? 0 : vol_replace_begin(out, &vr);
        have_vr = !rank && !e;
        rc = mpi_agree(e);
    }
    if (!rc) rc = mpi_make_tmp(out, tmp, sizeof tmp);
    have_tmp = !rc;
    if (!rc) rc = mpi_agree(write_sections(j, take, all, nall, tmp));
    if (!rc) rc = mpi_agree(rank ? 0 : pack_write_over(j, tmp, &st));
    if (!rc) rc = mpi_agree(check_shards(j, take, tmp));
    if (!rank && have_tmp) {
        if (!rc) {
            int e = arc_commit(tmp, out); /* > 0: renamed, but the rename not synced */
            committed = e >= 0;
            if (e) rc = e < 0 ? e : -EIO;
        } else {
            unlink(tmp);
        }
    }
    if (have_vr) vol_replace_end(&vr, committed);
    if (!rank && !rc && !quiet)
        fprintf(stderr,
                "packed %llu files (%llu bytes) into %llu bytes, %llu shards, on %d ranks in "
                "%.2f s\n",
                (unsigned long long)st.files, (unsigned long long)st.bytes_in,
                (unsigned long long)st.bytes_out, (unsigned long long)st.shards, size,
                MPI_Wtime() - t0);
    free(take);
    pack_job_free(j);
    if (!rc && changed) rc = pack_changed_error(out, changed);
    return rc ? mpi_report(rc) : EX_OK;
}
