/* tadoc-mpi count and search: tadoc's word queries on one file, its shards split among the
 * ranks of an MPI job.
 *
 *   mpirun -n N tadoc-mpi count ARCHIVE PATH WORD [-o FILE]
 *   mpirun -n N tadoc-mpi search ARCHIVE PATH WORD [-o FILE]
 *
 * Each part of a file cut over shards answers for itself (engine/index/query.h). Every rank
 * opens the global part, cuts the file's shards into one consecutive run per rank, balanced by
 * content bytes (the same cut on every rank), and queries its run as tadoc queries them all
 * (idx_query_parts: each shard loaded alone, on all its cores). The ranks then learn
 * every part's size (the parts' bytes are only known once loaded); count sums the counts on
 * rank 0, search writes each rank's offsets at its place of the output, which rank order
 * keeps ascending. The output is byte for byte what `tadoc count|search` prints. A version
 * 1 to 3 archive (one grammar) is queried whole on rank 0. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/base/err.h"
#include "../engine/format/arc.h"
#include "../engine/index/query.h"
#include "tadoc_mpi.h"

static const char usage_query[] =
    "usage: mpirun -n N tadoc-mpi count|search ARCHIVE PATH WORD [-o FILE]\n"
    "\n"
    "tadoc count (the occurrences of WORD as a whole word in the file PATH) or tadoc search\n"
    "(the byte offset of each, one per line), with the shards that PATH spans split among the\n"
    "MPI ranks, each querying its shards on all its cores. The output, to standard output or\n"
    "atomically to FILE, is what tadoc prints. Every rank reads ARCHIVE at the same path.\n";

/* n and a newline appended to out. */
static int put_line(buf *out, uint64_t n)
{
    char d[24];
    int l = snprintf(d, sizeof d, "%llu\n", (unsigned long long)n);
    return buf_put(out, d, (size_t)l) ? tdc_error(-ENOMEM, "out of memory") : 0;
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
    const char *word = pos[3];
    arc *meta = NULL;
    uint32_t ent = 0, first = 0, last = 0, *lo = calloc((size_t)size + 1, sizeof *lo);
    idx_part *parts = NULL;
    size_t np = 0;
    buf out = {0};
    uint64_t *sizes = NULL, count = 0;
    int rc = lo ? arc_open_meta(pos[1], &meta) : tdc_error(-ENOMEM, "out of memory");
    if (!rc) rc = arc_find_file(meta, pos[2], &ent);
    if (!rc) {
        int64_t ce = arc_ino_entry(meta, meta->ents[ent].ino);
        ent = ce >= 0 ? (uint32_t)ce : ent;
        arc_entry_shards(meta, ent, &first, &last);
        if (meta->version >= 4)
            cut_runs(meta, ent, first, last, size, lo);
        else /* one grammar: rank 0 queries it whole */
            for (int r = 0; r <= size; r++)
                lo[r] = r ? last + 1 : first;
    }
    uint32_t nk = rc ? 0 : last - first + 1;
    if (!rc && !(sizes = calloc(nk, sizeof *sizes))) rc = tdc_error(-ENOMEM, "out of memory");
    if (!rc) {
        np = lo[rank + 1] - lo[rank];
        if (np && !(parts = calloc(np, sizeof *parts))) rc = tdc_error(-ENOMEM, "out of memory");
        if (!rc)
            rc = idx_query_parts(meta, ent, lo[rank], lo[rank + 1], word, strlen(word), search, 0,
                                 parts);
        for (size_t i = 0; !rc && i < np; i++) {
            sizes[parts[i].k - first] = parts[i].bytes;
            count += parts[i].count;
        }
    }
    rc = mpi_agree(rc);
    if (!rc) { /* every part's size, then each offset shifted by the parts before its own */
        MPI_Allreduce(MPI_IN_PLACE, sizes, (int)nk, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (!search && !rank) rc = put_line(&out, count);
        for (size_t i = 0; !rc && search && i < np; i++) {
            uint64_t base = 0;
            for (uint32_t k = first; k < parts[i].k; k++)
                base += sizes[k - first];
            for (size_t j = 0; !rc && j < parts[i].offs.n; j++)
                rc = put_line(&out, base + parts[i].offs.p[j]);
        }
        rc = mpi_agree(rc);
    }
    mpi_range r = {.mem = out, .fd = -1, .n = out.n};
    if (!rc) rc = mpi_write_ranges(file, &r, rank, size);
    int st = rc ? mpi_report(rc) : EX_OK;
    if (parts) idx_parts_free(parts, np);
    free(parts);
    free(sizes);
    free(lo);
    buf_free(&out);
    arc_free(meta);
    return st;
}
