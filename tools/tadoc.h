/* tadoc.h: what the tadoc tool's command files share. */
#ifndef TDC_TADOC_H
#define TDC_TADOC_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "../engine/base/err.h"
#include "../engine/backend/backend.h"
#include "../engine/format/arc.h"
#include "../engine/volume/vol.h"

extern const char *prog;

/* The engine's options for this process: TADOC_GPU and the analytics' variables (main). */
extern backend_opts tool_opts;

/* Print the thread's error message; the exit code for `rc` (3 when corrupt, else 1). */
int fail(int rc);

/* Print msg (if any) and the usage text to stderr; returns EX_USAGE. */
int usage_err(const char *usage, const char *msg);

/* Write bytes p[0..n) to f with the C escapes `tadoc apply` reads back: \t \n \\ and \xHH for
 * the other control bytes and DEL, so that one name or text is one line and no byte reaches a
 * terminal as a control sequence. */
void put_escaped(FILE *f, const void *p, size_t n);

/* SIGINT, SIGTERM and SIGHUP while a command writes (pack, compact, apply): caught (where
 * not ignored), so that the command stops at its next step and undoes what it began (its
 * temporary file, its batch); tool_stopped is the signal (0: none), `hook` (optional) runs in
 * the handler. tool_die_if_stopped then dies of it, as the command would have. In edit.c. */
extern volatile sig_atomic_t tool_stopped;
void tool_catch_stops(void (*hook)(void));
void tool_die_if_stopped(void);

/* Say on stderr when the journal of archive `path` (opened as a) holds edits not folded in. */
void note_journal(const char *path, const arc *a);

/* Commands in extract.c: files out of an archive, loading only the shards they lie in. */
extern const char usage_cat[], usage_extract[], usage_unpack[];
int cmd_cat(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_unpack(int argc, char **argv);

/* Commands in edit.c: journaled batch operations and compaction. */
extern const char usage_apply[], usage_compact[];
int cmd_apply(int argc, char **argv);
int cmd_compact(int argc, char **argv);

typedef struct apply_stats {
    uint64_t inserts, appends, extracts, bytes; /* operations parsed, text bytes */
    uint64_t others;                            /* writes, truncates and deletes */
    double secs;                                /* time spent applying them */
    int offsets_gpu;                            /* batch offsets computed on the GPU */
} apply_stats;

/* Parse the operations of `in` (the OPS_FILE format of usage_apply) and apply them to the
 * writable vol `v` (offsets in batch meaning when `batch`, computed by be: NULL for the CPU),
 * then sync. Extracts print to
 * stdout. Returns EX_OK, EX_USAGE for a bad line (nothing applied; message on stderr) or the
 * exit code of a failed operation (message printed). */
int apply_stream(vol *v, backend *be, FILE *in, int batch, apply_stats *st);

#endif
