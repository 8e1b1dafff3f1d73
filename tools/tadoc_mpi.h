/* tadoc-mpi's parts (tools/tadoc_mpi.c: the command line and the analytics; tools/mpi_pack.c:
 * pack) and the helpers they share. */
#ifndef TDC_TADOC_MPI_H
#define TDC_TADOC_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "../engine/base/buf.h"

#define SEND_MAX (1u << 30) /* bytes per MPI message or MPI-IO write */

/* Collective over MPI_COMM_WORLD: every rank passes its result, and every rank returns the
 * first failure in rank order (0 when none), with that rank's message in tdc_errmsg; the
 * failing rank is kept for mpi_report. */
int mpi_agree(int rc);

/* On rank 0, the failure rc printed on stderr, naming the rank that mpi_agree found failing;
 * returns tadoc's exit status for rc on every rank. */
int mpi_report(int rc);

/* Collective: every rank's `mine` gathered into `all` on every rank, in rank order, with each
 * rank's length in lens[rank] (size entries, malloc'ed); NULL lens is allowed. Of any size:
 * past a round's bytes (TADOC_MPI_ROUND, at most SEND_MAX) each rank's bytes go out in pieces.
 * 0, or -ENOMEM. */
int mpi_allgather_buf(const buf *mine, buf *all, size_t **lens);

/* Rank 0 creates a temporary file beside `out` (OUT.tmpXXXXXX) and tells every rank its name
 * (tmp, cap bytes). Collective; 0 or rank 0's error on every rank. */
int mpi_make_tmp(const char *out, char *tmp, size_t cap);

/* Bytes a rank writes at an offset of a shared file: from memory (p), or with p NULL from
 * the start of the file fd. */
typedef struct mpi_block {
    uint64_t off, n;
    const unsigned char *p;
    int fd;
} mpi_block;

/* Collective: the existing file `path` opened for writing on every rank (MPI-IO), this
 * rank's blocks written, the file synced and closed. 0 or -EIO naming path (this rank's
 * result: the caller agrees on it). */
int mpi_write_blocks(const char *path, const mpi_block *b, size_t n);

/* A rank's range of an output, n bytes: in memory (mem, fd < 0), or in an unlinked file (fd)
 * so that a large one is never held. */
typedef struct mpi_range {
    buf mem;
    int fd;
    uint64_t n;
} mpi_range;

/* An empty range in a new unlinked file in directory dir, or in memory where dir is NULL or
 * no file can be made there. */
void mpi_range_init(mpi_range *r, const char *dir);

void mpi_range_free(mpi_range *r);

/* An ana_sink appending to the mpi_range ctx. */
int mpi_range_sink(void *ctx, const unsigned char *p, size_t n);

/* Collective: every rank's range of the output (out) written in rank order: into a temporary
 * file beside `file` at offsets from a scan of the ranges' sizes (MPI-IO), renamed over it once
 * every rank wrote; or, with file NULL, to stdout through rank 0, one range after another,
 * each sent in pieces. 0 or the first failure on every rank. */
int mpi_write_ranges(const char *file, const mpi_range *out, int rank, int size);

/* `tadoc-mpi count|search ARCHIVE PATH WORD [-o FILE]` (argv[0] is the command); an exit
 * status. */
int mpi_query(int argc, char **argv, int rank, int size);

/* `tadoc-mpi pack ...` (argv[0] is "pack"); an exit status. */
int mpi_pack(int argc, char **argv, int rank, int size);

#endif
