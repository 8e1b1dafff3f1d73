/* tadoc-mpi count and search: tadoc's word queries on one file, its shards split among the
 * ranks of an MPI job.
 *
 *   mpirun -n N tadoc-mpi count ARCHIVE PATH WORD [-o FILE]
 *   mpirun -n N tadoc-mpi search ARCHIVE PATH WORD [-o FILE]
 *
 * A file larger than a shard spans consecutive shards, cut between tokens (pack never cuts a
 * word), so each of its parts answers for itself: the occurrences in the file are those of its
 * parts, and an offset in part k is one in the file plus the bytes of the parts before k.
 * Every rank opens the global part, cuts the file's shards into one consecutive run per rank,
 * balanced by content bytes (the same cut on every rank), loads each of its shards alone
 * (arc_open_piece) and queries the file's part there on all its cores. The ranks then learn
 * every part's size (the parts' bytes are only known once loaded); count sums the counts on
 * rank 0, search writes each rank's offsets at its place of the output, which rank order
 * keeps ascending. The output is byte for byte what `tadoc count|search` prints. */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/base/err.h"
#include "../engine/base/par.h"
#include "../engine/format/arc.h"
#include "../engine/index/idx.h"
#include "../engine/index/words.h"
#include "tadoc_mpi.h"

static const char usage_query[] =
    "usage: mpirun -n N tadoc-mpi count|search ARCHIVE PATH WORD [-o FILE]\n"
    "\n"
    "tadoc count (the occurrences of WORD as a whole word in the file PATH) or tadoc search\n"
    "(the byte offset of each, one per line), with the shards that PATH spans split among the\n"
    "MPI ranks, each querying its shards on all its cores. The output, to standard output or\n"
    "atomically to FILE, is what tadoc prints. Every rank reads ARCHIVE at the same path.\n";

/* One shard's part of the file, queried by a worker. */
typedef struct part {
    uint32_t k;      /* the shard */
    uint64_t bytes;  /* the part's size */
    uint64_t count;  /* count: its occurrences */
    vec64 offs;      /* search: their offsets in the part */
    int rc;
    char msg[1000];  /* rc's message (the worker thread's) */
} part;

typedef struct query {
    const arc *meta;
    uint32_t ent; /* the entry holding the file's content */
    const char *word;
    int search;
    part *parts; /* this rank's shards, in order */
    size_t n;
    size_t next; /* the next part a worker takes, under lock */
    pthread_mutex_t lock;
} query;

/* n and a newline appended to out. */
static int put_line(buf *out, uint64_t n)
{
    char d[24];
    int l = snprintf(d, sizeof d, "%llu\n", (unsigned long long)n);
    return buf_put(out, d, (size_t)l) ? tdc_error(-ENOMEM, "out of memory") : 0;
}

/* The query on one shard's part of the file: the shard loaded alone, indexed, queried. */
static int query_part(const query *q, part *pt)
{
    arc *p;
    idx *x = NULL;
    idx_words *w = NULL;
    int rc = arc_open_piece(q->meta, pt->k, &p);
    if (rc) return rc;
    if (!(rc = idx_build(p, &x))) {
        pt->bytes = idx_run_bytes(x, q->ent);
        rc = idx_words_build(x, &w);
    }
    if (!rc && q->search)
        rc = idx_search(w, q->ent, q->word, strlen(q->word), &pt->offs);
    else if (!rc)
        rc = idx_count(w, q->ent, q->word, strlen(q->word), &pt->count);
    if (rc) rc = tdc_error_ctx(rc, "shard %u", pt->k);
    idx_words_free(w);
    idx_free(x);
    arc_piece_free(p);
    return rc;
}

static void *worker(void *arg)
{
    query *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        size_t i = q->next++;
        pthread_mutex_unlock(&q->lock);
        if (i >= q->n) return NULL;
        part *pt = &q->parts[i];
        if ((pt->rc = query_part(q, pt))) snprintf(pt->msg, sizeof pt->msg, "%s", tdc_errmsg());
    }
}

/* The file's shards [first, last] cut into `size` consecutive runs balanced by the bytes of
 * the file each holds (a shard's bytes in proportion to the file's share of its root): rank
 * r's run is [lo[r], lo[r + 1]). The same on every rank. */
static void cut_runs(const arc *meta, uint32_t ent, uint32_t first, uint32_t last, int size,
                     uint32_t *lo)
{
    uint32_t n = last - first + 1;
    double total = 0, *w = malloc(n * sizeof *w), at = 0;
    for (uint32_t k = first; k <= last; k++) {
        uint64_t start, len;
        const arc_shard *s = &meta->shards[k];
        arc_entry_in_shard(meta, ent, k, &start, &len);
        double b = s->root_syms ? (double)s->bytes * (double)len / (double)s->root_syms : 0;
        if (w) w[k - first] = b;
        total += b;
    }
    /* Shard k goes to the rank whose slice of the total holds the middle of its bytes. */
    for (int r = 0; r <= size; r++)
        lo[r] = r ? first + n : first;
    for (uint32_t k = first, r = 0; k <= last; k++) {
        double mid = at + (w ? w[k - first] / 2 : 0);
        uint32_t own = total > 0 && w ? (uint32_t)(mid * size / total) : 0;
        if (own >= (uint32_t)size) own = (uint32_t)size - 1;
        while (r < own)
            lo[++r] = k;
        at += w ? w[k - first] : 0;
    }
    free(w);
}

/* This rank's run of the file's shards queried on all its cores (n parts, their shards set). */
static int query_run(query *q)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned nt = (unsigned)(q->n < (size_t)(cpus > 0 ? cpus : 1) ? q->n : (size_t)cpus);
    pthread_mutex_init(&q->lock, NULL);
    if (nt) par_run(nt, worker, q, 0);
    pthread_mutex_destroy(&q->lock);
    for (size_t i = 0; i < q->n; i++)
        if (q->parts[i].rc) return tdc_error(q->parts[i].rc, "%s", q->parts[i].msg);
    return 0;
}

int mpi_query(int argc, char **argv, int rank, int size)
{
    const char *file = NULL, *pos[4];
    int npos = 0, help = 0, bad = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            file = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            help = 1;
        else if (npos < 4 && (i < 3 || argv[i][0] != '-'))
            pos[npos++] = argv[i];
        else
            bad = 1;
    }
    if (help || bad || npos != 4) {
        if (!rank) {
            if (!help) fprintf(stderr, "tadoc-mpi: need ARCHIVE PATH WORD\n");
            fputs(usage_query, help ? stdout : stderr);
        }
        return help ? EX_OK : EX_USAGE;
    }
    int search = !strcmp(pos[0], "search");
    arc *meta = NULL;
    uint32_t ent = 0, first = 0, last = 0, *lo = calloc((size_t)size + 1, sizeof *lo);
    query q = {.word = pos[3], .search = search};
    buf out = {0};
    uint64_t *sizes = NULL, count = 0;
    int rc = lo ? arc_open_meta(pos[1], &meta) : tdc_error(-ENOMEM, "out of memory");
    if (!rc) rc = arc_find_file(meta, pos[2], &ent);
    if (!rc) {
        int64_t ce = arc_ino_entry(meta, meta->ents[ent].ino);
        q.ent = ce >= 0 ? (uint32_t)ce : ent;
        q.meta = meta;
        arc_entry_shards(meta, q.ent, &first, &last);
        if (meta->version < 4) { /* one grammar: rank 0 queries it whole */
            lo[0] = 0;
            for (int r = 1; r <= size; r++)
                lo[r] = 1;
        } else {
            cut_runs(meta, q.ent, first, last, size, lo);
        }
    }
    uint32_t nk = rc ? 0 : last - first + 1;
    if (!rc && !(sizes = calloc(nk, sizeof *sizes))) rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc && meta->version >= 4) {
        q.n = lo[rank + 1] - lo[rank];
        if (q.n && !(q.parts = calloc(q.n, sizeof *q.parts)))
            rc = tdc_error(-ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < q.n; i++)
            q.parts[i].k = lo[rank] + (uint32_t)i;
        if (!rc) rc = query_run(&q);
        for (size_t i = 0; !rc && i < q.n; i++) {
            sizes[q.parts[i].k - first] = q.parts[i].bytes;
            count += q.parts[i].count;
        }
    } else if (!rc && !rank) { /* version 1-3: the whole archive on rank 0 */
        idx *x = NULL;
        idx_words *w = NULL;
        vec64 offs = {0};
        rc = arc_load_data(meta);
        if (!rc) rc = idx_build(meta, &x);
        if (!rc) rc = idx_words_build(x, &w);
        if (!rc && search) rc = idx_search(w, q.ent, q.word, strlen(q.word), &offs);
        if (!rc && !search) rc = idx_count(w, q.ent, q.word, strlen(q.word), &count);
        if (!rc && search && !(q.parts = calloc(1, sizeof *q.parts)))
            rc = tdc_error(-ENOMEM, "out of memory");
        if (!rc && search) {
            q.n = 1;
            q.parts[0] = (part){.k = first, .offs = offs};
            offs = (vec64){0};
        }
        vec64_free(&offs);
        idx_words_free(w);
        idx_free(x);
    }
    rc = mpi_agree(rc);
    if (!rc) { /* every part's size, then each offset shifted by the parts before its own */
        MPI_Allreduce(MPI_IN_PLACE, sizes, (int)nk, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (!search && !rank) rc = put_line(&out, count);
        for (size_t i = 0; !rc && search && i < q.n; i++) {
            uint64_t base = 0;
            for (uint32_t k = first; k < q.parts[i].k; k++)
                base += sizes[k - first];
            for (size_t j = 0; !rc && j < q.parts[i].offs.n; j++)
                rc = put_line(&out, base + q.parts[i].offs.p[j]);
        }
        rc = mpi_agree(rc);
    }
    if (!rc) rc = mpi_write_ranges(file, &out, rank, size);
    int st = rc ? mpi_report(rc) : EX_OK;
    for (size_t i = 0; i < q.n; i++)
        vec64_free(&q.parts[i].offs);
    free(q.parts);
    free(sizes);
    free(lo);
    buf_free(&out);
    arc_free(meta);
    return st;
}
