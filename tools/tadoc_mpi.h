/* tadoc-mpi's parts (tools/tadoc_mpi.c: the command line and the analytics; tools/mpi_pack.c:
 * pack) and the helpers they share. */
#ifndef TDC_TADOC_MPI_H
#define TDC_TADOC_MPI_H

#define SEND_MAX (1u << 30) /* bytes per MPI message or MPI-IO write */

/* Collective over MPI_COMM_WORLD: every rank passes its result, and every rank returns the
 * first failure in rank order (0 when none), with that rank's message in tdc_errmsg; the
 * failing rank is kept for mpi_report. */
int mpi_agree(int rc);

/* On rank 0, the failure rc printed on stderr, naming the rank that mpi_agree found failing;
 * returns tadoc's exit status for rc on every rank. */
int mpi_report(int rc);

/* `tadoc-mpi pack ...` (argv[0] is "pack"); an exit status. */
int mpi_pack(int argc, char **argv, int rank, int size);

#endif
