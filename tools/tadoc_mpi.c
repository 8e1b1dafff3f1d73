/* tadoc-mpi: the analytics of one archive, and the packing of one, spread over the ranks of an
 * MPI job (docs/DESIGN.md, "Scale out"). Packing is tools/mpi_pack.c; this file is the
 * command line and the analytics.
 *
 *   mpirun -n N tadoc-mpi ANALYTIC ARCHIVE [SCOPE] [-o FILE]
 *   mpirun -n N tadoc-mpi pack DIR -o ARCHIVE [options]
 *
 * Every rank opens the archive's global part (header, file table, shard table) from a path
 * they all reach (shared storage, or a copy of the archive at the same path on every node),
 * deals the shards the scope needs among the ranks by content bytes (ana_shards_deal: every
 * rank computes the same deal), and analyses its own shards on all its cores, each shard
 * loaded alone (ana_by_shard_subset). Rank 0 gathers every rank's part and the edges of the
 * files cut between shards, merges them exactly (ana_merge) and writes the output: byte for
 * byte what `tadoc ANALYTIC ARCHIVE [SCOPE]` prints, to standard output or atomically to FILE.
 * A rank that fails (a shard it cannot read, no memory) makes the run fail: rank 0 prints the
 * rank and its message, which names the shard, writes nothing and exits non-zero; a rank that
 * dies makes mpirun end the job, before any output is written.
 *
 * Exit codes as tadoc's: 0 success, 1 failure, 2 usage, 3 a damaged archive. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/analytics/ana.h"
#include "../engine/analytics/ana_merge.h"
#include "../engine/analytics/ana_shards.h"
#include "../engine/analytics/analytics.h"
#include "../engine/backend/backend.h"
#include "../engine/base/err.h"
#include "../engine/base/fio.h"
#include "../engine/format/arc.h"
#include "../lib/env.h"
#include "tadoc_mpi.h"

static const char usage[] =
    "usage: mpirun -n N tadoc-mpi ANALYTIC ARCHIVE [SCOPE] [-o FILE]\n"
    "       mpirun -n N tadoc-mpi pack DIR -o ARCHIVE [options]   (tadoc-mpi pack --help)\n"
    "\n"
    "Run one of tadoc's analytics (wordcount, sort, invindex, termvector, seqcount,\n"
    "rankedinvindex) over ARCHIVE, or the directory or file SCOPE in it, with its shards\n"
    "dealt among the MPI ranks, each analysing its shards on all its cores; rank 0 merges\n"
    "the results and writes what `tadoc ANALYTIC ARCHIVE [SCOPE]` prints, to standard\n"
    "output or atomically to FILE. Every rank reads ARCHIVE at the same path. The\n"
    "environment variables of tadoc's analytics apply (tadoc --help).\n";

enum { TAG_STATUS = 1, TAG_PART, TAG_EDGES };

/* A rank's result as rank 0 receives it. */
typedef struct status {
    int32_t rc;
    char msg[1000];
} status;

static int failed_rank = -1; /* the rank whose failure mpi_agree returned last */

int mpi_agree(int rc)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    status mine = {.rc = rc}, *all = malloc((size_t)size * sizeof *all);
    if (rc) snprintf(mine.msg, sizeof mine.msg, "%s", tdc_errmsg());
    if (!all) { /* cannot learn the others' results: ours decides, and mpirun ends the rest */
        if (!rc) rc = tdc_error(-ENOMEM, "out of memory");
        MPI_Abort(MPI_COMM_WORLD, tdc_exit_status(rc));
    }
    MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    rc = 0;
    for (int r = 0; r < size && !rc; r++)
        if (all[r].rc) {
            rc = tdc_error(all[r].rc, "%s", all[r].msg);
            failed_rank = r;
        }
    free(all);
    return rc;
}

int mpi_report(int rc)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!rank && failed_rank >= 0)
        fprintf(stderr, "tadoc-mpi: rank %d: %s\n", failed_rank, tdc_errmsg());
    else if (!rank)
        fprintf(stderr, "tadoc-mpi: %s\n", tdc_errmsg());
    return tdc_exit_status(rc);
}

static void send_buf(const buf *b, int tag)
{
    uint64_t n = b->n;
    MPI_Send(&n, 1, MPI_UINT64_T, 0, tag, MPI_COMM_WORLD);
    for (uint64_t at = 0; at < n; at += SEND_MAX)
        MPI_Send(b->p + at, (int)(n - at < SEND_MAX ? n - at : SEND_MAX), MPI_BYTE, 0, tag,
                 MPI_COMM_WORLD);
}

static int recv_buf(int from, int tag, buf *b)
{
    uint64_t n;
    MPI_Recv(&n, 1, MPI_UINT64_T, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    b->n = 0;
    if (buf_reserve(b, n)) return tdc_error(-ENOMEM, "out of memory");
    for (uint64_t at = 0; at < n; at += SEND_MAX)
        MPI_Recv(b->p + at, (int)(n - at < SEND_MAX ? n - at : SEND_MAX), MPI_BYTE, from, tag,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    b->n = n;
    return 0;
}

/* The analytics' context with the options of tadoc's environment (lib/env.h). */
static ana_ctx *env_ctx(void)
{
    backend_opts o;
    backend_opts_init(&o);
    tdc_env_settings(&o);
    return ana_ctx_new(&o.ana);
}

/* This rank's share: its shards' part and edges (encoded). */
static int my_share(int kind, const arc *meta, uint32_t first, uint32_t end, int rank, int size,
                    buf *part, buf *edges)
{
    ana_ctx *c = env_ctx();
    int *owner = malloc((meta->nshards ? meta->nshards : 1) * sizeof *owner);
    unsigned char *take = malloc(meta->nshards ? meta->nshards : 1);
    int rc = c && owner && take ? ana_shards_deal(meta, first, end, NULL, size, owner)
                                : tdc_error(-ENOMEM, "out of memory");
    for (uint32_t k = 0; !rc && k < meta->nshards; k++)
        take[k] = owner[k] == rank;
    ana_subset sh = {.take = take};
    if (!rc) rc = ana_by_shard_subset(c, NULL, NULL, kind, meta, first, end, NULL, &sh, part);
    if (!rc) rc = ana_edges_encode(sh.edges, sh.nedges, edges);
    ana_subset_free(&sh);
    free(owner);
    free(take);
    ana_ctx_free(c);
    return rc;
}

/* Rank 0: every rank's part and edges merged into out; *bad the first rank that failed
 * (its message then in tdc_errmsg), or -1. */
static int gather(int kind, const arc *meta, uint32_t first, uint32_t end, int size, int rc0,
                  buf *part0, buf *edges0, buf *out, int *bad)
{
    ana_merge *m = NULL;
    buf part = {0}, edges = {0};
    int rc = rc0;
    char msg[1000] = "";
    *bad = rc ? 0 : -1;
    if (rc) snprintf(msg, sizeof msg, "%s", tdc_errmsg());
    if (!rc) rc = ana_merge_new(kind, meta, first, end, NULL, &m);
    for (int r = 0; r < size; r++) {
        status st = {0};
        if (r) {
            MPI_Recv(&st, sizeof st, MPI_BYTE, r, TAG_STATUS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int e = recv_buf(r, TAG_PART, &part);
            if (!e) e = recv_buf(r, TAG_EDGES, &edges);
            if (!rc && st.rc) {
                rc = st.rc;
                *bad = r;
                snprintf(msg, sizeof msg, "%s", st.msg);
            }
            if (!rc && e) rc = e;
        }
        if (rc) continue; /* receive the others' all the same: they wait to send */
        buf *p = r ? &part : part0, *eb = r ? &edges : edges0;
        ana_edge *e = NULL;
        size_t ne = 0;
        rc = ana_merge_part(m, p);
        if (!rc) rc = ana_edges_decode(eb->p, eb->n, &e, &ne);
        for (size_t i = 0; i < ne; i++) {
            if (!rc) rc = ana_merge_edge(m, &e[i]);
            buf_free(&e[i].words);
        }
        free(e);
    }
    if (!rc) rc = ana_merge_finish(m, out);
    if (*bad >= 0) tdc_error(rc, "%s", msg);
    ana_merge_free(m);
    buf_free(&part);
    buf_free(&edges);
    return rc;
}

/* Rank 0 where there is nothing to merge (one rank, or a version 1-3 archive that rank 0
 * analysed alone): every other rank's status received; the first failure (its own rc first)
 * is returned with its rank in *bad and its message in tdc_errmsg. */
static int drain(int size, int rc, int *bad)
{
    buf b = {0};
    char msg[1000];
    *bad = rc ? 0 : -1;
    snprintf(msg, sizeof msg, "%s", rc ? tdc_errmsg() : "");
    for (int r = 1; r < size; r++) {
        status st;
        MPI_Recv(&st, sizeof st, MPI_BYTE, r, TAG_STATUS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        recv_buf(r, TAG_PART, &b);
        recv_buf(r, TAG_EDGES, &b);
        if (!rc && st.rc) {
            rc = st.rc;
            *bad = r;
            snprintf(msg, sizeof msg, "%s", st.msg);
        }
    }
    buf_free(&b);
    if (rc) tdc_error(rc, "%s", msg);
    return rc;
}

/* out to FILE, atomically (a temporary file beside it, renamed over it), or to stdout. */
static int write_out(const char *file, const buf *out)
{
    if (!file) return fio_write_all(1, out->p, out->n, "stdout");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", file, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return tdc_error(-errno, "%s: %s", tmp, strerror(errno));
    int rc = fio_write_all(fd, out->p, out->n, tmp);
    if (!rc && fsync(fd)) rc = tdc_error(-errno, "%s: %s", tmp, strerror(errno));
    if (close(fd) && !rc) rc = tdc_error(-errno, "%s: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, file)) rc = tdc_error(-errno, "%s: %s", file, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && !strcmp(argv[1], "pack")) {
        int st = mpi_pack(argc - 1, argv + 1, rank, size);
        MPI_Finalize();
        return st;
    }
    const char *file = NULL, *pos[3];
    int npos = 0, help = 0, bad_arg = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            file = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            help = 1;
        else if (npos < 3 && argv[i][0] != '-')
            pos[npos++] = argv[i];
        else
            bad_arg = 1;
    }
    int kind = npos ? ana_find(pos[0]) : -1;
    if (help || bad_arg || npos < 2 || kind < 0) {
        if (!rank) {
            if (!help)
                fprintf(stderr, "tadoc-mpi: %s\n",
                        npos && kind < 0 ? "unknown analytic" : "bad arguments");
            fputs(usage, help ? stdout : stderr);
        }
        MPI_Finalize();
        return help ? EX_OK : EX_USAGE;
    }
    arc *meta = NULL;
    int64_t first = 0;
    buf part = {0}, edges = {0}, out = {0};
    int rc = arc_open_meta(pos[1], &meta);
    if (!rc && npos == 3) {
        const char *p = pos[2];
        while (*p == '/')
            p++;
        if ((first = arc_lookup(meta, p)) < 0)
            rc = tdc_error(-ENOENT, "%s: no such path in the archive", pos[2]);
    }
    uint32_t end = rc ? 0 : ana_subtree_end(meta, (uint32_t)first);
    if (!rc && meta->version < 4 && !rank) { /* one grammar: rank 0 alone, loaded whole */
        rc = arc_load_data(meta);
        if (!rc) rc = ana_table[kind].cpu(NULL, meta, (uint32_t)first, end, NULL, &out);
    } else if (!rc && size == 1) { /* alone: one merge, not a share's and then the whole's */
        ana_ctx *c = env_ctx();
        rc = c ? ana_by_shard(c, NULL, NULL, kind, meta, (uint32_t)first, end, NULL, &out)
               : tdc_error(-ENOMEM, "out of memory");
        ana_ctx_free(c);
    } else if (!rc && meta->version >= 4)
        rc = my_share(kind, meta, (uint32_t)first, end, rank, size, &part, &edges);
    /* Test hook (tests/bats/mpi.bats): TADOC_MPI_TEST_DIE=R makes rank R die after its work,
     * as a crash would. */
    const char *die = getenv("TADOC_MPI_TEST_DIE");
    if (die && *die && atoi(die) == rank) raise(SIGKILL);
    int status_code = EX_OK;
    if (rank) {
        status st = {.rc = rc};
        if (rc) snprintf(st.msg, sizeof st.msg, "%s", tdc_errmsg());
        MPI_Send(&st, sizeof st, MPI_BYTE, 0, TAG_STATUS, MPI_COMM_WORLD);
        send_buf(&part, TAG_PART);
        send_buf(&edges, TAG_EDGES);
    } else {
        int bad = -1;
        if (size > 1 && meta && meta->version >= 4)
            rc = gather(kind, meta, (uint32_t)first, end, size, rc, &part, &edges, &out, &bad);
        else
            rc = drain(size, rc, &bad);
        if (!rc) rc = write_out(file, &out);
        if (rc) {
            if (bad >= 0)
                fprintf(stderr, "tadoc-mpi: rank %d: %s\n", bad, tdc_errmsg());
            else
                fprintf(stderr, "tadoc-mpi: %s\n", tdc_errmsg());
            status_code = tdc_exit_status(rc);
        }
    }
    buf_free(&part);
    buf_free(&edges);
    buf_free(&out);
    arc_free(meta);
    MPI_Finalize();
    return status_code;
}
