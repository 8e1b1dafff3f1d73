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
 * shards are then merged exactly (ana_merge) over all the ranks, no rank holding more than
 * its share of the output: by ranges of the output's order, one range a rank
 * (spread_merge), each range written at its offset of the output; for the analytics ordered
 * by count (wordcount, seqcount) after a first round that sums each key's counts on one rank
 * (shuffle_counts). The output is byte for byte what `tadoc ANALYTIC ARCHIVE [SCOPE]`
 * prints, to standard output or atomically to FILE.
 * A rank that fails (a shard it cannot read, no memory) makes the run fail: rank 0 prints the
 * rank and its message, which names the shard, writes nothing and exits non-zero; a rank that
 * dies makes mpirun end the job, before any output is written.
 *
 * Exit codes as tadoc's: 0 success, 1 failure, 2 usage, 3 a damaged archive. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

enum { TAG_PART = 1 };

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
        if (snprintf(tmp, cap, "%s.tmpXXXXXX", out) >= (int)cap) {
            rc = tdc_error(-ENAMETOOLONG, "%s: name too long", out);
        } else {
            mode_t mask = umask(0); /* a new file's mode, not mkstemp's 0600 */
            umask(mask);
            int fd = mkstemp(tmp);
            if (fd < 0)
                rc = tdc_error(-errno, "%s: cannot create: %s", tmp, strerror(errno));
            else if (fchmod(fd, 0666 & ~mask) < 0)
                rc = tdc_error(-errno, "%s: %s", tmp, strerror(errno));
            if (fd >= 0) close(fd);
            if (rc && fd >= 0) unlink(tmp);
        }
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
    for (size_t i = 0; i < n && !rc; i++)
        for (uint64_t d = 0; d < b[i].n && !rc; d += SEND_MAX) {
            int cnt = (int)(b[i].n - d < SEND_MAX ? b[i].n - d : SEND_MAX);
            if (MPI_File_write_at(f, (MPI_Offset)(b[i].off + d), b[i].p + d, cnt, MPI_BYTE,
                                  MPI_STATUS_IGNORE) != MPI_SUCCESS)
                rc = tdc_error(-EIO, "%s: cannot write at %llu", path,
                               (unsigned long long)(b[i].off + d));
        }
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

/* This rank's backend: the options of tadoc's environment (lib/env.h), and the GPUs of its
 * host shared with the other ranks there (local: its rank among them, nlocal: how many). */
static backend *rank_backend(int local, int nlocal)
{
    backend_opts o;
    backend *b;
    backend_opts_init(&o);
    tdc_env_settings(&o);
    tdc_env_merge_spill(&o); /* a rank's merges bounded as tadoc's are */
    o.mode = tdc_env_gpu_mode();
    o.gpu_share = local;
    o.gpu_shares = nlocal;
    return backend_new(&o, &b) ? NULL : b;
}

/* This rank's share: its shards' part and edges (encoded). */
static int my_share(backend *b, int kind, const arc *meta, uint32_t first, uint32_t end,
                    int rank, int size, buf *part, buf *edges)
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
                                 kind, meta, first, end, NULL, &sh, part);
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

/* MPI_Alltoallv of any size: rank r gets send[cut[r], cut[r + 1]), and rank j's rcnt[j]
 * bytes land at recv + rat[j]. In one call where every pair's bytes fit a round's share
 * (round / size); else in rounds, each moving up to that share per pair through buffers of
 * a round. Collective; 0 or -ENOMEM on every rank. */
static int alltoallv_big(const unsigned char *send, const size_t *cut, unsigned char *recv,
                         const size_t *rcnt, const size_t *rat, int size)
{
    size_t share = round_bytes() / (size_t)size;
    if (!share) share = 1;
    unsigned long long most = 0, rounds;
    for (int r = 0; r < size; r++) {
        unsigned long long s = (cut[r + 1] - cut[r] + share - 1) / share, t = (rcnt[r] + share - 1) / share;
        if (s > most) most = s;
        if (t > most) most = t;
    }
    MPI_Allreduce(&most, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    int *ia = malloc((size_t)size * 4 * sizeof *ia);
    int *sc = ia, *sd = ia ? ia + size : NULL, *rcn = ia ? ia + 2 * size : NULL,
        *rd = ia ? ia + 3 * size : NULL;
    int one = rounds <= 1;
    unsigned char *sb = one ? NULL : malloc(share * (size_t)size);
    unsigned char *rb = one ? NULL : malloc(share * (size_t)size);
    int rc = mpi_agree(ia && (one || (sb && rb)) ? 0 : tdc_error(-ENOMEM, "out of memory"));
    for (unsigned long long k = 0; !rc && k < (rounds ? rounds : 1); k++) {
        size_t sa = 0, ra = 0;
        for (int r = 0; r < size; r++) { /* this round's piece of each pair */
            uint64_t s = cut[r + 1] - cut[r], t = rcnt[r], off = k * share;
            size_t sn = one ? s : s > off ? (s - off < share ? s - off : share) : 0;
            size_t rn = one ? t : t > off ? (t - off < share ? t - off : share) : 0;
            if (!one && sn) memcpy(sb + sa, send + cut[r] + off, sn);
            sc[r] = (int)sn;
            sd[r] = (int)(one ? cut[r] : sa);
            rcn[r] = (int)rn;
            rd[r] = (int)(one ? rat[r] : ra);
            sa += sn;
            ra += rn;
        }
        MPI_Alltoallv(one ? send : sb, sc, sd, MPI_BYTE, one ? recv : rb, rcn, rd, MPI_BYTE,
                      MPI_COMM_WORLD);
        for (int r = 0; !one && r < size; r++)
            if (rcn[r]) memcpy(recv + rat[r] + k * share, rb + rd[r], (size_t)rcn[r]);
    }
    free(sb);
    free(rb);
    free(ia);
    return rc;
}

/* Every rank's send[cut[r], cut[r + 1]) to rank r: *recv holds what each rank sent this one,
 * rank j's rcnt[j] bytes at rat[j]. Collective. */
static int exchange(const unsigned char *send, const size_t *cut, int size, buf *recv,
                    size_t *rcnt, size_t *rat)
{
    unsigned long long *sn = malloc((size_t)size * 2 * sizeof *sn), *rn = sn ? sn + size : NULL;
    int rc = mpi_agree(sn ? 0 : tdc_error(-ENOMEM, "out of memory"));
    if (rc) {
        free(sn);
        return rc;
    }
    for (int r = 0; r < size; r++)
        sn[r] = cut[r + 1] - cut[r];
    MPI_Alltoall(sn, 1, MPI_UNSIGNED_LONG_LONG, rn, 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    size_t total = 0;
    for (int r = 0; r < size; r++) {
        rat[r] = total;
        rcnt[r] = (size_t)rn[r];
        total += rcnt[r];
    }
    free(sn);
    recv->n = 0;
    if (!(rc = mpi_agree(buf_reserve(recv, total + 1) ? tdc_error(-ENOMEM, "out of memory") : 0)))
        rc = alltoallv_big(send, cut, recv->p, rcnt, rat, size);
    if (!rc) recv->n = total;
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

/* What every rank sent this one (exchange), each rank's bytes a part of m, taken from the
 * end of recv, which shrinks behind them, so that the copies and recv together hold about one
 * share at any time (a part must be a buffer of its own). */
static int add_parts(ana_merge *m, buf *recv, const size_t *rcnt, const size_t *rat, int size)
{
    int rc = 0;
    for (int r = size - 1; !rc && r >= 0; r--) { /* the merge takes parts in any order */
        buf b = {0};
        if (!rcnt[r]) continue;
        rc = buf_put(&b, recv->p + rat[r], rcnt[r]) ? tdc_error(-ENOMEM, "out of memory")
                                                   : ana_merge_part(m, &b);
        buf_free(&b);
        unsigned char *p = realloc(recv->p, rat[r] ? rat[r] : 1);
        if (p) { /* else it stays as large: still right */
            recv->p = p;
            recv->cap = rat[r] ? rat[r] : 1;
        }
        recv->n = rat[r];
    }
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

/* m, set up by the caller (rc its result so far), merges what every rank sent this one
 * (add_parts) and, given `edges`, every rank's edges (collective then), into out; m is freed
 * and recv too. */
static int merge_received(mctx *mc, ana_merge *m, int rc, buf *recv, const size_t *rcnt,
                          const size_t *rat, int size, const buf *edges, buf *out)
{
    if (!rc) rc = add_parts(m, recv, rcnt, rat, size);
    if (edges && !(rc = mpi_agree(rc))) rc = add_edges(m, edges);
    if (!rc) rc = ana_merge_finish(m, out);
    if (m) mc->spilled += ana_merge_spilled(m);
    ana_merge_free(m);
    buf_free(recv);
    return rc;
}

/* Merged by ranges of the output's order, one range a rank, instead of all on rank 0: the
 * ranks' texts (each in output order) are cut at the same keys (chosen from samples of every
 * text), range r of every text goes to rank r, and each merges its range: with every rank's
 * edges kept to its range (`edges`; the analytics in key order, whose texts are the ranks'
 * parts), or without (NULL: the counts' second round, whose texts are the shares of
 * shuffle_counts, already with their edges). *out: this rank's range of the output (the
 * ranges in rank order are the whole). Collective; text is consumed. */
static int spread_merge(mctx *mc, int kind, const arc *meta, uint32_t first, uint32_t end,
                        int rank, int size, buf *text, const buf *edges, buf *out)
{
    buf smp = {0}, all = {0}, recv = {0};
    skey *spl = calloc((size_t)size, sizeof *spl);
    size_t *rcnt = calloc((size_t)size * 2, sizeof *rcnt), *rat = rcnt ? rcnt + size : NULL;
    size_t *cut = calloc((size_t)size + 1, sizeof *cut);
    ana_merge *m = NULL;
    int rc = spl && rcnt && cut ? ana_merge_sample(kind, text->p, text->n, 64, &smp)
                                : tdc_error(-ENOMEM, "out of memory");
    if (!(rc = mpi_agree(rc))) rc = mpi_allgather_buf(&smp, &all, NULL);
    if (!rc) rc = mpi_agree(choose_cuts(kind, &all, size, spl));
    for (int r = 1; !rc && r <= size; r++) { /* this rank's text cut at the keys */
        cut[r] = r < size ? ana_merge_lower(kind, text->p, text->n, spl[r - 1].p, spl[r - 1].n)
                          : text->n;
        if (cut[r] < cut[r - 1]) cut[r] = cut[r - 1];
    }
    if (!rc) rc = exchange(text->p, cut, size, &recv, rcnt, rat);
    buf_free(text);
    if (!rc) {
        const skey *lo = rank ? &spl[rank - 1] : NULL, *hi = rank + 1 < size ? &spl[rank] : NULL;
        rc = new_merge(mc, kind, meta, first, end, &m);
        if (!rc && edges)
            rc = ana_merge_range(m, lo ? lo->p : NULL, lo ? lo->n : 0, hi ? hi->p : NULL,
                                 hi ? hi->n : 0);
    }
    rc = merge_received(mc, m, rc, &recv, rcnt, rat, size, edges, out);
    free(cut);
    free(spl);
    free(rcnt);
    buf_free(&smp);
    buf_free(&all);
    return rc;
}

/* The counts ordered by count (wordcount, seqcount), first round: the ranks' parts shuffled
 * by key (ana_merge_shuffle), so that each key's counts meet on one rank, and each rank's
 * share merged with every rank's edges (its own crossing sequences: ana_merge_share). *out:
 * this rank's share of the keys with their whole counts, in output order. Collective; part
 * is consumed. */
static int shuffle_counts(mctx *mc, int kind, const arc *meta, uint32_t first, uint32_t end,
                          int rank, int size, buf *part, const buf *edges, buf *out)
{
    buf *bk = calloc((size_t)size, sizeof *bk), send = {0}, recv = {0};
    size_t *rcnt = calloc((size_t)size * 2, sizeof *rcnt), *rat = rcnt ? rcnt + size : NULL;
    size_t *cut = calloc((size_t)size + 1, sizeof *cut);
    ana_merge *m = NULL;
    int rc = bk && rcnt && cut ? ana_merge_shuffle(kind, part->p, part->n, size, bk)
                               : tdc_error(-ENOMEM, "out of memory");
    buf_free(part);
    for (int r = 0; !rc && r < size; r++) {
        if (buf_put(&send, bk[r].p, bk[r].n)) rc = tdc_error(-ENOMEM, "out of memory");
        cut[r + 1] = send.n;
        buf_free(&bk[r]);
    }
    if (!(rc = mpi_agree(rc))) rc = exchange(send.p, cut, size, &recv, rcnt, rat);
    buf_free(&send);
    if (!rc) rc = new_merge(mc, kind, meta, first, end, &m);
    if (!rc) ana_merge_share(m, size, rank);
    rc = merge_received(mc, m, rc, &recv, rcnt, rat, size, edges, out);
    for (int r = 0; bk && r < size; r++)
        buf_free(&bk[r]);
    free(bk);
    free(rcnt);
    free(cut);
    return rc;
}

int mpi_write_ranges(const char *file, const buf *out, int rank, int size)
{
    if (!file) {
        int rc = 0;
        if (rank) {
            send_buf(out, TAG_PART);
            return 0;
        }
        buf b = {0};
        rc = fio_write_all(1, out->p, out->n, "stdout");
        for (int r = 1; r < size; r++) { /* received all the same: the others wait to send */
            int e = recv_buf(r, TAG_PART, &b);
            if (!rc) rc = e ? e : fio_write_all(1, b.p, b.n, "stdout");
        }
        buf_free(&b);
        return rc;
    }
    char tmp[4200];
    int rc = mpi_make_tmp(file, tmp, sizeof tmp);
    if (rc) return rc;
    uint64_t n = out->n, off = 0;
    MPI_Exscan(&n, &off, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (!rank) off = 0; /* MPI_Exscan leaves rank 0's undefined */
    mpi_block b = {off, n, out->p};
    rc = mpi_agree(mpi_write_blocks(tmp, &b, 1));
    if (!rank) {
        if (!rc && rename(tmp, file)) rc = tdc_error(-errno, "%s: %s", file, strerror(errno));
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
    buf part = {0}, edges = {0}, out = {0};
    int rc = be ? arc_open_meta(pos[1], &meta) : tdc_error(-ENOMEM, "out of memory");
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
        rc = backend_by_shard(be, NULL, kind, meta, (uint32_t)first, end, NULL, &out);
    } else if (!rc && meta->version >= 4)
        rc = my_share(be, kind, meta, (uint32_t)first, end, rank, size, &part, &edges);
    /* Test hook (tests/bats/mpi.bats): TADOC_MPI_TEST_DIE=R makes rank R die after its work,
     * as a crash would. */
    const char *die = getenv("TADOC_MPI_TEST_DIE");
    if (die && *die && atoi(die) == rank) raise(SIGKILL);
    rc = mpi_agree(rc);
    mctx mc = {be ? &backend_options(be)->ana : NULL, 0};
    if (!rc && size > 1 && meta->version >= 4) { /* the merge spread over the ranks */
        if (!ana_merge_keyed(kind)) { /* ordered by count: each key summed on one rank first */
            buf share = {0};
            rc = mpi_agree(
                shuffle_counts(&mc, kind, meta, (uint32_t)first, end, rank, size, &part, &edges,
                               &share));
            part = share;
        }
        if (!rc)
            rc = mpi_agree(spread_merge(&mc, kind, meta, (uint32_t)first, end, rank, size,
                                        &part,
                                        ana_merge_keyed(kind) ? &edges : NULL, &out));
    }
    if (verbose && be && meta) {
        char st[512];
        backend_stats(be, st, sizeof st); /* what the GPUs did, where they did anything */
        if (!strstr(st, "shard parts by gpu") && !strstr(st, "gpu fallbacks"))
            snprintf(st, sizeof st, "every part on the CPU");
        fprintf(stderr,
                "tadoc-mpi: rank %d of %d (%d of %d on its host; %s): %s; its merges with the "
                "other ranks spilled %llu bytes\n",
                rank, size, local, nlocal, backend_describe(), st,
                (unsigned long long)mc.spilled);
    }
    /* each rank's range (with one rank, or one grammar that rank 0 analysed alone, the
     * others' are empty) */
    if (!rc) rc = mpi_write_ranges(file, &out, rank, size);
    int status_code = rc ? mpi_report(rc) : EX_OK;
    buf_free(&part);
    buf_free(&edges);
    buf_free(&out);
    arc_free(meta);
    backend_free(be);
    MPI_Finalize();
    return status_code;
}
