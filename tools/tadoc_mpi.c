/* tadoc-mpi: the analytics of one archive, and the packing of one, spread over the ranks of an
 * MPI job (docs/DESIGN.md, "Scale out"). Packing is tools/mpi_pack.c, the word queries
 * count and search tools/mpi_query.c; this file is the command line and the analytics.
 *
 *   mpirun -n N tadoc-mpi ANALYTIC ARCHIVE [SCOPE] [-o FILE]
 *   mpirun -n N tadoc-mpi count|search ARCHIVE PATH WORD [-o FILE]
 *   mpirun -n N tadoc-mpi pack DIR -o ARCHIVE [options]
 *
 * Every rank opens the archive's global part (header, file table, shard table) from a path
 * they all reach (shared storage, or a copy of the archive at the same path on every node),
 * deals the shards the scope needs among the ranks by content bytes (ana_shards_deal: every
 * rank computes the same deal), and analyses its own shards on all its cores, each shard
 * loaded alone (ana_by_shard_subset). The parts and the edges of the files cut between
 * shards are then merged exactly (ana_merge) over all the ranks, no rank holding its share
 * of the output whole: by ranges of the output's order, one range a rank (spread_merge), the
 * parts kept in files and exchanged in rounds merged as they arrive (exchange_merge), each
 * range written at its offset of the output from a file; for the analytics ordered by count
 * (wordcount, seqcount) after a first round that sums each key's counts on one rank
 * (shuffle_counts), in pieces the same way. The output is byte for byte what
 * `tadoc ANALYTIC ARCHIVE [SCOPE]` prints, to standard output or atomically to FILE.
 * A rank that fails (a shard it cannot read, no memory) makes the run fail: rank 0 prints the
 * rank and its message, which names the shard, writes nothing and exits non-zero; a rank that
 * dies makes mpirun end the job, before any output is written.
 *
 * Exit codes as tadoc's: 0 success, 1 failure, 2 usage, 3 a damaged archive. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
    "usage: mpirun -n N tadoc-mpi ANALYTIC ARCHIVE [SCOPE] [-o FILE] [-v]\n"
    "       mpirun -n N tadoc-mpi count|search ARCHIVE PATH WORD [-o FILE]\n"
    "       mpirun -n N tadoc-mpi pack DIR -o ARCHIVE [options]   (tadoc-mpi pack --help)\n"
    "\n"
    "Run one of tadoc's analytics (wordcount, sort, invindex, termvector, seqcount,\n"
    "rankedinvindex) over ARCHIVE, or the directory or file SCOPE in it, with its shards\n"
    "dealt among the MPI ranks, each analysing its shards on all its cores; the ranks\n"
    "merge the results exactly and write what `tadoc ANALYTIC ARCHIVE [SCOPE]` prints, to\n"
    "standard output or atomically to FILE. count and search answer tadoc's word queries\n"
    "on the file PATH with its shards split among the ranks (tadoc-mpi count --help).\n"
    "Every rank reads ARCHIVE at the same path. The environment variables of tadoc's\n"
    "analytics apply (tadoc --help); with TADOC_GPU, the ranks of one host share its GPUs,\n"
    "one GPU each while they are as many as the GPUs or more. -v: each rank prints where\n"
    "its shards' parts were computed (CPU, GPU by device) to standard error.\n";

enum { TAG_PART = 1, TAG_EXCHANGE };

#define PIECE_MAX ((size_t)8 << 20)

/* A rank's result as every rank learns it (mpi_agree). */
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

/* The most bytes one round of a collective exchange moves to or from a rank, so that every
 * count and offset of one MPI call fits an int whatever the exchange's size; the same on every
 * rank (the least of theirs). TADOC_MPI_ROUND=BYTES makes it smaller, for tests (many rounds
 * on small data). */
static size_t round_bytes(void)
{
    static unsigned long long all; /* agreed at the first exchange, which every rank makes */
    if (all) return (size_t)all;
    const char *e = getenv("TADOC_MPI_ROUND");
    unsigned long long mine = SEND_MAX, v = e ? strtoull(e, NULL, 10) : 0;
    if (v && v < mine) mine = v;
    MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    return (size_t)all;
}

/* The bytes of a file-backed range read, sent or written at once: at most a round's (so that
 * TADOC_MPI_ROUND makes them small for tests). Collective on its first call, as round_bytes. */
static size_t piece_bytes(void)
{
    size_t r = round_bytes();
    return r < PIECE_MAX ? r : PIECE_MAX;
}

int mpi_allgather_buf(const buf *mine, buf *all, size_t **lens_out)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t round = round_bytes();
    unsigned long long len = mine->n;
    unsigned long long *lens = malloc((size_t)size * sizeof *lens);
    int *il = malloc((size_t)size * 2 * sizeof *il), *at = il ? il + size : NULL;
    int ok = lens && il, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        free(lens);
        free(il);
        return tdc_error(-ENOMEM, "out of memory");
    }
    MPI_Allgather(&len, 1, MPI_UNSIGNED_LONG_LONG, lens, 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    uint64_t total = 0;
    for (int r = 0; r < size; r++)
        total += lens[r];
    ok = !buf_reserve(all, (size_t)total + 1);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int rc = all_ok ? 0 : tdc_error(-ENOMEM, "out of memory");
    if (!rc && total <= round) { /* one call */
        for (int r = 0, a = 0; r < size; a += il[r++]) {
            il[r] = (int)lens[r];
            at[r] = a;
        }
        MPI_Allgatherv(mine->p, (int)len, MPI_BYTE, all->p, il, at, MPI_BYTE, MPI_COMM_WORLD);
    } else if (!rc) { /* each rank's bytes from it to all, in pieces of a round */
        uint64_t a = 0;
        int me;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        for (int r = 0; r < size; a += lens[r++]) {
            if (r == me && len) memcpy(all->p + a, mine->p, len);
            for (uint64_t d = 0; d < lens[r]; d += round)
                MPI_Bcast(all->p + a + d, (int)(lens[r] - d < round ? lens[r] - d : round),
                          MPI_BYTE, r, MPI_COMM_WORLD);
        }
    }
    if (!rc) all->n = (size_t)total;
    free(il);
    size_t *out = !rc && lens_out ? malloc((size_t)size * sizeof *out) : NULL;
    for (int r = 0; out && r < size; r++)
        out[r] = (size_t)lens[r];
    free(lens);
    if (!rc && lens_out && !(*lens_out = out)) rc = tdc_error(-ENOMEM, "out of memory");
    return rc;
}

int mpi_make_tmp(const char *out, char *tmp, size_t cap)
{
    int rank, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!rank) {
        arc_target t;
        if ((rc = arc_target_of(out, &t))) {
            /* refused: nothing is created */
        } else if (snprintf(tmp, cap, "%s.tmpXXXXXX", t.path) >= (int)cap) {
            rc = tdc_error(-ENAMETOOLONG, "%s: name too long", out);
        } else {
            int fd = mkstemp(tmp);
            if (fd < 0)
                rc = tdc_error(-errno, "%s: cannot create: %s", tmp, strerror(errno));
            else
                rc = arc_target_apply(&t, fd, tmp); /* the mode, not mkstemp's 0600 */
            if (fd >= 0) close(fd);
            if (rc && fd >= 0) unlink(tmp);
        }
        arc_target_free(&t);
    }
    MPI_Bcast(tmp, (int)cap, MPI_CHAR, 0, MPI_COMM_WORLD);
    return mpi_agree(rc);
}

int mpi_write_blocks(const char *path, const mpi_block *b, size_t n)
{
    MPI_File f;
    if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY, MPI_INFO_NULL, &f) != MPI_SUCCESS)
        return tdc_error(-EIO, "%s: cannot open with MPI-IO", path); /* on every rank */
    int rc = 0;
    size_t piece = piece_bytes();
    unsigned char *bounce = NULL; /* a piece of a block read from its file */
    for (size_t i = 0; i < n && !rc; i++) {
        size_t step = b[i].p ? SEND_MAX : piece;
        for (uint64_t d = 0; d < b[i].n && !rc; d += step) {
            size_t cnt = b[i].n - d < step ? (size_t)(b[i].n - d) : step;
            const unsigned char *src = b[i].p ? b[i].p + d : NULL;
            if (!src && !bounce && !(bounce = malloc(piece)))
                rc = tdc_error(-ENOMEM, "out of memory");
            if (!src && !rc && !(rc = fio_read_at(b[i].fd, bounce, cnt, d, "a temporary file")))
                src = bounce;
            if (!rc && MPI_File_write_at(f, (MPI_Offset)(b[i].off + d), src, (int)cnt, MPI_BYTE,
                                         MPI_STATUS_IGNORE) != MPI_SUCCESS)
                rc = tdc_error(-EIO, "%s: cannot write at %llu", path,
                               (unsigned long long)(b[i].off + d));
        }
    }
    free(bounce);
    if (MPI_File_sync(f) != MPI_SUCCESS && !rc) rc = tdc_error(-EIO, "%s: cannot sync", path);
    MPI_File_close(&f);
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

void mpi_range_init(mpi_range *r, const char *dir)
{
    *r = (mpi_range){.fd = dir ? fio_tmpfile(dir) : -1};
}

void mpi_range_free(mpi_range *r)
{
    if (r->fd >= 0) close(r->fd);
    buf_free(&r->mem);
    r->fd = -1;
    r->n = 0;
}

int mpi_range_sink(void *ctx, const unsigned char *p, size_t n)
{
    mpi_range *r = ctx;
    int rc = r->fd >= 0                ? fio_write_all(r->fd, p, n, "a temporary file")
             : buf_put(&r->mem, p, n) ? tdc_error(-ENOMEM, "out of memory")
                                      : 0;
    if (!rc) r->n += n;
    return rc;
}

/* Bytes [at, at + n) of range r: in its memory, or read into bounce. */
static int range_bytes(const mpi_range *r, uint64_t at, size_t n, unsigned char *bounce,
                       const unsigned char **p)
{
    *p = r->fd < 0 ? r->mem.p + at : bounce;
    return r->fd < 0 ? 0 : fio_read_at(r->fd, bounce, n, at, "a temporary file");
}

/* Range r sent to rank 0 in pieces of `piece` bytes, its size first; a piece that cannot be
 * read goes empty, so that rank 0 receives what it expects and notices. */
static int send_range(const mpi_range *r, unsigned char *bounce, size_t piece)
{
    const unsigned char *p = bounce;
    int rc = 0;
    uint64_t n = r->n;
    MPI_Send(&n, 1, MPI_UINT64_T, 0, TAG_PART, MPI_COMM_WORLD);
    for (uint64_t at = 0; at < n; at += piece) {
        size_t k = n - at < piece ? (size_t)(n - at) : piece;
        if (!rc) rc = range_bytes(r, at, k, bounce, &p);
        MPI_Send(rc ? bounce : p, rc ? 0 : (int)k, MPI_BYTE, 0, TAG_PART, MPI_COMM_WORLD);
    }
    return rc;
}

/* On rank 0: rank `from`'s range (send_range) received piece by piece and written to stdout
 * (rc: the failure so far, after which it is received all the same). */
static int recv_write(int from, unsigned char *bounce, size_t piece, int rc)
{
    uint64_t n;
    MPI_Recv(&n, 1, MPI_UINT64_T, from, TAG_PART, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (uint64_t at = 0; at < n; at += piece) {
        MPI_Status st;
        int got;
        MPI_Recv(bounce, (int)piece, MPI_BYTE, from, TAG_PART, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (!rc && (uint64_t)got != (n - at < piece ? n - at : piece))
            rc = tdc_error(-EIO, "rank %d could not read its output", from);
        if (!rc) rc = fio_write_all(1, bounce, (size_t)got, "stdout");
    }
    return rc;
}

/* This rank's backend: the options of tadoc's environment (lib/env.h), and the GPUs of its
 * host shared with the other ranks there (local: its rank among them, nlocal: how many). */
static backend *rank_backend(int local, int nlocal)
{
    backend_opts o;
    backend *b;
    backend_opts_init(&o);
    if (tdc_env_tool(&o)) {
        fprintf(stderr, "tadoc-mpi: %s\n", tdc_errmsg());
        return NULL;
    }
    tdc_env_merge_spill(&o); /* a rank's merges bounded as tadoc's are */
    o.gpu_share = local;
    o.gpu_shares = nlocal;
    return backend_new(&o, &b) ? NULL : b;
}

/* This rank's share: its shards' part (into the range `part`) and edges (encoded). */
static int my_share(backend *b, int kind, const arc *meta, uint32_t first, uint32_t end,
                    int rank, int size, mpi_range *part, buf *edges)
{
    int *owner = malloc((meta->nshards ? meta->nshards : 1) * sizeof *owner);
    unsigned char *take = malloc(meta->nshards ? meta->nshards : 1);
    int rc = owner && take ? ana_shards_deal(meta, first, end, NULL, size, owner)
                           : tdc_error(-ENOMEM, "out of memory");
    for (uint32_t k = 0; !rc && k < meta->nshards; k++)
        take[k] = owner[k] == rank;
    ana_subset sh = {.take = take};
    if (!rc)
        rc = ana_by_shard_subset(backend_ana(b), backend_part_fn(b, kind, meta, first, end), b,
                                 kind, meta, first, end, NULL, &sh, mpi_range_sink, part);
    if (!rc) rc = ana_edges_encode(sh.edges, sh.nedges, edges);
    ana_subset_free(&sh);
    free(owner);
    free(take);
    return rc;
}

/* A key of the samples: its bytes (up to its newline). */
typedef struct skey {
    const unsigned char *p;
    size_t n;
} skey;

static int skey_cmp(const void *x, const void *y, void *kind)
{
    const skey *a = x, *b = y;
    return ana_merge_key_cmp(*(const int *)kind, a->p, a->n, b->p, b->n);
}

/* The cuts between the ranks' key ranges: size - 1 keys (spl, into the bytes of `all`) at even
 * steps of every rank's samples, sorted (the same on every rank). Without samples (every part
 * empty) every cut is the empty key, below every other: all goes to the last rank. */
static int choose_cuts(int kind, const buf *all, int size, skey *spl)
{
    size_t nk = 0;
    for (size_t i = 0; i < all->n; i++)
        nk += all->p[i] == '\n';
    skey *k = malloc((nk ? nk : 1) * sizeof *k);
    if (!k) return tdc_error(-ENOMEM, "out of memory");
    for (size_t i = 0, at = 0, j = 0; i < all->n; i++)
        if (all->p[i] == '\n') {
            k[j++] = (skey){all->p + at, i - at};
            at = i + 1;
        }
    sort_r(k, nk, sizeof *k, skey_cmp, &kind);
    for (int r = 1; r < size; r++)
        spl[r - 1] = nk ? k[(size_t)r * nk / (size_t)size] : (skey){(const unsigned char *)"", 0};
    free(k);
    return 0;
}

/* A text a rank sends in an exchange: in memory, or its range's file mapped (`mapped`), whose
 * pages it drops from its memory as it sends them (text_drop): the file stays, so a rank
 * never holds its whole part. */
typedef struct mpi_text {
    const unsigned char *p;
    size_t n;
    int mapped;
} mpi_text;

/* Range r as a text: its memory, or its file mapped. */
static int text_of(const mpi_range *r, mpi_text *t)
{
    *t = (mpi_text){r->mem.p, r->n, 0};
    if (r->fd < 0 || !r->n) return 0;
    if (r->n > SIZE_MAX) return tdc_error(-EFBIG, "a temporary file: too large to map");
    void *p = mmap(NULL, (size_t)r->n, PROT_READ, MAP_SHARED, r->fd, 0);
    if (p == MAP_FAILED)
        return tdc_error(-errno, "a temporary file: cannot map: %s", strerror(errno));
    *t = (mpi_text){p, (size_t)r->n, 1};
    return 0;
}

/* The pages of bytes [from, to) of a mapped text given back (read again from the file when
 * touched again: neighbours not yet sent may share the edge pages). */
static void text_drop(const mpi_text *t, size_t from, size_t to)
{
    if (!t->mapped || to <= from) return;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)(t->p + from) & ~(pg - 1);
    uintptr_t e = ((uintptr_t)(t->p + to) + pg - 1) & ~(pg - 1);
    madvise((void *)a, e - a, MADV_DONTNEED);
}

static void text_unmap(mpi_text *t)
{
    if (t->mapped) munmap((void *)t->p, t->n);
    *t = (mpi_text){NULL, 0, 0};
}

/* Where the piece of send[at, end) that goes in one round ends: at the last line's end within
 * `share` bytes, or where the first line ends when it is longer (a piece holds whole lines,
 * so that each is a part of a merge on its own: in key order, every key in one piece). */
static size_t piece_end(const unsigned char *send, size_t at, size_t end, size_t share)
{
    if (end - at <= share) return end;
    const unsigned char *q = memrchr(send + at, '\n', share);
    if (!q) q = memchr(send + at + share, '\n', end - at - share);
    return q ? (size_t)(q - send) + 1 : end;
}

/* Every rank's send->p[cut[r], cut[r + 1]) to rank r, each piece a part of m (ana_merge_part) as
 * it arrives: in rounds, each moving whole lines (a longer line goes whole) from each rank to
 * each other, at most a share of a round's bytes (round_bytes, and at most `bound`, the
 * merge's memory), so that besides the merge, which goes on in a file past that bound, a rank
 * holds about one round of what it sends and one of what it receives. Collective; 0 or the
 * first failure on every rank. */
static int exchange_merge(ana_merge *m, const mpi_text *send, const size_t *cut, int size,
                          uint64_t bound)
{
    size_t round = round_bytes(), share = (bound && bound < round ? bound : round) / (size_t)size;
    if (!share) share = 1;
    size_t *at = malloc((size_t)size * 2 * sizeof *at), *from = at ? at + size : NULL;
    unsigned long long *sn = malloc((size_t)size * 2 * sizeof *sn), *rn = sn ? sn + size : NULL;
    MPI_Request *rq = malloc((size_t)size * 2 * sizeof *rq);
    buf *piece = calloc((size_t)size, sizeof *piece); /* what each rank sent this round */
    int rc = mpi_agree(at && sn && rq && piece ? 0 : tdc_error(-ENOMEM, "out of memory"));
    for (int r = 0; !rc && r < size; r++)
        at[r] = cut[r];
    for (unsigned long long more = !rc; more;) {
        for (int r = 0; r < size; r++) { /* this round's piece for each rank */
            from[r] = at[r];
            at[r] = piece_end(send->p, at[r], cut[r + 1], share);
            sn[r] = at[r] - from[r];
        }
        MPI_Alltoall(sn, 1, MPI_UNSIGNED_LONG_LONG, rn, 1, MPI_UNSIGNED_LONG_LONG,
                     MPI_COMM_WORLD);
        for (int r = 0; r < size && !rc; r++)
            if (sn[r] > INT_MAX || rn[r] > INT_MAX)
                rc = tdc_error(-E2BIG, "analytics: a line too long for one MPI message");
            else if (buf_reserve(&piece[r], (size_t)rn[r] + 1))
                rc = tdc_error(-ENOMEM, "out of memory");
        if ((rc = mpi_agree(rc))) break;
        int nq = 0;
        for (int r = 0; r < size; r++) {
            if (rn[r])
                MPI_Irecv(piece[r].p, (int)rn[r], MPI_BYTE, r, TAG_EXCHANGE, MPI_COMM_WORLD,
                          &rq[nq++]);
            if (sn[r])
                MPI_Isend(send->p + from[r], (int)sn[r], MPI_BYTE, r, TAG_EXCHANGE,
                          MPI_COMM_WORLD, &rq[nq++]);
        }
        MPI_Waitall(nq, rq, MPI_STATUSES_IGNORE);
        for (int r = 0; r < size; r++)
            text_drop(send, from[r], at[r]);
        for (int r = 0; r < size; r++) { /* the merge takes parts in any order, and owns them */
            piece[r].n = (size_t)rn[r];
            if (!rc && rn[r]) rc = ana_merge_part(m, &piece[r]);
            buf_free(&piece[r]);
        }
        if ((rc = mpi_agree(rc))) break;
        unsigned long long left = 0;
        for (int r = 0; r < size; r++)
            left |= at[r] < cut[r + 1];
        MPI_Allreduce(&left, &more, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    }
    for (int r = 0; piece && r < size; r++)
        buf_free(&piece[r]);
    free(piece);
    free(rq);
    free(at);
    free(sn);
    return rc;
}

/* Every rank's edges (`edges`, encoded) added to m. */
static int add_edges(ana_merge *m, const buf *edges)
{
    buf all = {0};
    size_t *len = NULL, at = 0;
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc = mpi_allgather_buf(edges, &all, &len);
    for (int r = 0; !rc && r < size; at += len[r++]) {
        ana_edge *e = NULL;
        size_t ne = 0;
        rc = ana_edges_decode(all.p + at, len[r], &e, &ne);
        for (size_t i = 0; i < ne; i++) {
            if (!rc) rc = ana_merge_edge(m, &e[i]);
            buf_free(&e[i].words);
        }
        free(e);
    }
    free(len);
    buf_free(&all);
    return rc;
}

/* What the merges over the ranks take: the bound on a merge's memory and its spill directory
 * (the analytics' options), and what they spilled (for -v). */
typedef struct mctx {
    const ana_opts *o;
    uint64_t spilled;
} mctx;

/* A merge of the scope's output (ana_merge_new) that goes on in a file past the options'
 * bound, as tadoc's merges do. */
static int new_merge(const mctx *mc, int kind, const arc *meta, uint32_t first, uint32_t end,
                     ana_merge **m)
{
    int rc = ana_merge_new(kind, meta, first, end, NULL, m);
    if (!rc) ana_merge_spill(*m, mc->o->spill_dir, mc->o->spill_at);
    return rc;
}

/* m (rc: the caller's result so far) takes every rank's edges where given (collective then)
 * and hands its output to sink; m is freed. */
static int merge_finish(mctx *mc, ana_merge *m, int rc, const buf *edges, ana_sink sink,
                        void *sctx)
{
    if (edges && !(rc = mpi_agree(rc))) rc = add_edges(m, edges);
    if (!rc) rc = ana_merge_finish_to(m, sink, sctx);
    if (m) mc->spilled += ana_merge_spilled(m);
    ana_merge_free(m);
    return rc;
}

/* Merged by ranges of the output's order, one range a rank, instead of all on rank 0: the
 * ranks' texts (each in output order) are cut at the same keys (chosen from samples of every
 * text), range r of every text goes to rank r (exchange_merge), and each merges its range:
 * with every rank's edges kept to its range (`edges`; the analytics in key order, whose texts
 * are the ranks' parts), or without (NULL: the counts' second round, whose texts are the
 * shares of shuffle_counts, already with their edges). *out: this rank's range of the output
 * (the ranges in rank order are the whole). Collective. */
static int spread_merge(mctx *mc, int kind, const arc *meta, uint32_t first, uint32_t end,
                        int rank, int size, const mpi_text *text, const buf *edges,
                        mpi_range *out)
{
    buf smp = {0}, all = {0};
    skey *spl = calloc((size_t)size, sizeof *spl);
    size_t *cut = calloc((size_t)size + 1, sizeof *cut);
    ana_merge *m = NULL;
    int rc = spl && cut ? ana_merge_sample(kind, text->p, text->n, 64, &smp)
                        : tdc_error(-ENOMEM, "out of memory");
    if (!(rc = mpi_agree(rc))) rc = mpi_allgather_buf(&smp, &all, NULL);
    if (!rc) rc = mpi_agree(choose_cuts(kind, &all, size, spl));
    for (int r = 1; !rc && r <= size; r++) { /* this rank's text cut at the keys */
        cut[r] = r < size ? ana_merge_lower(kind, text->p, text->n, spl[r - 1].p, spl[r - 1].n)
                          : text->n;
        if (cut[r] < cut[r - 1]) cut[r] = cut[r - 1];
    }
    if (!rc) {
        const skey *lo = rank ? &spl[rank - 1] : NULL, *hi = rank + 1 < size ? &spl[rank] : NULL;
        rc = new_merge(mc, kind, meta, first, end, &m);
        if (!rc && edges)
            rc = ana_merge_range(m, lo ? lo->p : NULL, lo ? lo->n : 0, hi ? hi->p : NULL,
                                 hi ? hi->n : 0);
        if (!(rc = mpi_agree(rc))) rc = exchange_merge(m, text, cut, size, mc->o->spill_at);
    }
    rc = merge_finish(mc, m, rc, edges, mpi_range_sink, out);
    free(cut);
    free(spl);
    buf_free(&smp);
    buf_free(&all);
    return rc;
}

/* The counts ordered by count (wordcount, seqcount), first round: the ranks' parts shuffled
 * by key (ana_merge_shuffle), so that each key's counts meet on one rank, and each rank's
 * share merged with every rank's edges (its own crossing sequences: ana_merge_share). The
 * part goes a piece of whole lines at a time, up to the merge's bound: dealt, its pages
 * dropped, and exchanged (exchange_merge), until every rank's is done. *out: this rank's
 * share of the keys with their whole counts, in output order. Collective. */
static int shuffle_counts(mctx *mc, int kind, const arc *meta, uint32_t first, uint32_t end,
                          int rank, int size, const mpi_text *part, const buf *edges,
                          mpi_range *out)
{
    uint64_t bound = mc->o->spill_at ? mc->o->spill_at : SEND_MAX;
    buf *bk = calloc((size_t)size, sizeof *bk), send = {0};
    size_t *cut = calloc((size_t)size + 1, sizeof *cut), at = 0;
    ana_merge *m = NULL;
    int rc = bk && cut ? new_merge(mc, kind, meta, first, end, &m)
                       : tdc_error(-ENOMEM, "out of memory");
    if (!rc) ana_merge_share(m, size, rank);
    for (unsigned long long more = !(rc = mpi_agree(rc)); more;) {
        size_t e = piece_end(part->p, at, part->n, bound);
        rc = ana_merge_shuffle(kind, part->p + at, e - at, size, bk);
        text_drop(part, at, e);
        at = e;
        send.n = 0;
        for (int r = 0; r < size; r++) {
            if (!rc && buf_put(&send, bk[r].p, bk[r].n)) rc = tdc_error(-ENOMEM, "out of memory");
            cut[r + 1] = send.n;
            bk[r].n = 0;
        }
        mpi_text st = {send.p, send.n, 0};
        if ((rc = mpi_agree(rc)) || (rc = exchange_merge(m, &st, cut, size, bound))) break;
        unsigned long long left = at < part->n;
        MPI_Allreduce(&left, &more, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    }
    buf_free(&send);
    rc = merge_finish(mc, m, rc, edges, mpi_range_sink, out);
    for (int r = 0; bk && r < size; r++)
        buf_free(&bk[r]);
    free(bk);
    free(cut);
    return rc;
}

int mpi_write_ranges(const char *file, const mpi_range *out, int rank, int size)
{
    if (!file) {
        size_t piece = piece_bytes();
        unsigned char *bounce = malloc(piece);
        const unsigned char *p;
        int rc = mpi_agree(bounce ? 0 : tdc_error(-ENOMEM, "out of memory"));
        if (!rc && rank) rc = send_range(out, bounce, piece);
        for (uint64_t at = 0; !rc && !rank && at < out->n; at += piece) {
            size_t k = out->n - at < piece ? (size_t)(out->n - at) : piece;
            if (!(rc = range_bytes(out, at, k, bounce, &p))) rc = fio_write_all(1, p, k, "stdout");
        }
        for (int r = 1; bounce && !rank && r < size; r++) /* the others wait to send */
            rc = recv_write(r, bounce, piece, rc);
        free(bounce);
        return rc;
    }
    char tmp[4200];
    int rc = mpi_make_tmp(file, tmp, sizeof tmp);
    if (rc) return rc;
    uint64_t n = out->n, off = 0;
    MPI_Exscan(&n, &off, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (!rank) off = 0; /* MPI_Exscan leaves rank 0's undefined */
    mpi_block b = {off, n, out->fd < 0 ? out->mem.p : NULL, out->fd};
    rc = mpi_agree(mpi_write_blocks(tmp, &b, 1));
    if (!rank) {
        if (!rc && (rc = arc_commit(tmp, file)) > 0) rc = -EIO; /* renamed, not synced */
        if (rc) unlink(tmp);
    }
    return mpi_agree(rc);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int pack = argc > 1 && !strcmp(argv[1], "pack");
    if (pack || (argc > 1 && (!strcmp(argv[1], "count") || !strcmp(argv[1], "search")))) {
        int st = pack ? mpi_pack(argc - 1, argv + 1, rank, size)
                      : mpi_query(argc - 1, argv + 1, rank, size);
        MPI_Finalize();
        return st;
    }
    const char *file = NULL, *pos[3];
    int npos = 0, help = 0, bad_arg = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            file = argv[++i];
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
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
    MPI_Comm host; /* the ranks of this host, which share its GPUs */
    int local, nlocal;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local);
    MPI_Comm_size(host, &nlocal);
    MPI_Comm_free(&host);
    backend *be = rank_backend(local, nlocal);
    arc *meta = NULL;
    int64_t first = 0;
    buf edges = {0};
    /* this rank's part (its shards' output, when the ranks share the merge) and range of the
     * output, in files where they can be made */
    const char *tmpdir = be ? backend_options(be)->ana.spill_dir : NULL;
    mpi_range part = {.fd = -1}, out;
    mpi_range_init(&out, tmpdir);
    int rc = be ? arc_open_meta(pos[1], &meta) : tdc_error(-ENOMEM, "out of memory");
    if (!rc && npos == 3) {
        uint32_t e;
        if (!(rc = arc_lookup_path(meta, pos[2], &e))) first = e;
    }
    uint32_t end = rc ? 0 : ana_subtree_end(meta, (uint32_t)first);
    if (!rc && meta->version < 4 && !rank) { /* one grammar: rank 0 alone, loaded whole */
        buf whole = {0};
        rc = arc_load_data(meta);
        if (!rc) rc = ana_table[kind].cpu(NULL, meta, (uint32_t)first, end, NULL, &whole);
        if (!rc) rc = mpi_range_sink(&out, whole.p, whole.n);
        buf_free(&whole);
    } else if (!rc && size == 1) { /* alone: one merge, not a share's and then the whole's */
        rc = backend_by_shard_to(be, NULL, kind, meta, (uint32_t)first, end, NULL,
                                 mpi_range_sink, &out);
    } else if (!rc && meta->version >= 4) {
        mpi_range_init(&part, tmpdir);
        rc = my_share(be, kind, meta, (uint32_t)first, end, rank, size, &part, &edges);
    }
    /* Test hook (tests/bats/mpi.bats): TADOC_MPI_TEST_DIE=R makes rank R die after its work,
     * as a crash would. */
    const char *die = getenv("TADOC_MPI_TEST_DIE");
    if (die && *die && atoi(die) == rank) raise(SIGKILL);
    rc = mpi_agree(rc);
    mctx mc = {be ? &backend_options(be)->ana : NULL, 0};
    if (!rc && size > 1 && meta->version >= 4) { /* the merge spread over the ranks */
        mpi_text t;
        rc = mpi_agree(text_of(&part, &t));
        if (!rc && !ana_merge_keyed(kind)) { /* by count: each key summed on one rank first */
            mpi_range share;
            mpi_range_init(&share, tmpdir);
            rc = mpi_agree(shuffle_counts(&mc, kind, meta, (uint32_t)first, end, rank, size, &t,
                                          &edges, &share));
            text_unmap(&t);
            mpi_range_free(&part);
            part = share;
            if (!rc) rc = mpi_agree(text_of(&part, &t));
        }
        if (!rc)
            rc = mpi_agree(spread_merge(&mc, kind, meta, (uint32_t)first, end, rank, size, &t,
                                        ana_merge_keyed(kind) ? &edges : NULL, &out));
        text_unmap(&t);
    }
    if (verbose && be && meta) {
        char st[1024];
        backend_stats(be, st, sizeof st); /* what the GPUs did, where they did anything */
        if (!strstr(st, "shard parts by gpu") && !strstr(st, "gpu fallbacks"))
            snprintf(st, sizeof st, "every part on the CPU");
        fprintf(stderr,
                "tadoc-mpi: rank %d of %d (%d of %d on its host; %s): %s; its merges with the "
                "other ranks spilled %llu bytes; its range of the output: %llu bytes %s\n",
                rank, size, local, nlocal, backend_describe(), st,
                (unsigned long long)mc.spilled, (unsigned long long)out.n,
                out.fd >= 0 ? "in a file" : "in memory");
    }
    /* each rank's range (with one rank, or one grammar that rank 0 analysed alone, the
     * others' are empty) */
    if (!rc) rc = mpi_write_ranges(file, &out, rank, size);
    int status_code = rc ? mpi_report(rc) : EX_OK;
    mpi_range_free(&part);
    buf_free(&edges);
    mpi_range_free(&out);
    arc_free(meta);
    backend_free(be);
    MPI_Finalize();
    return status_code;
}
