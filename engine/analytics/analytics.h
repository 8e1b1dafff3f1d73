/* analytics: the one table of the six analytics, which every layer uses: the tool's commands,
 * the daemon's virtual files, libtadoc, the backend's dispatch and the CPU selector. Adding an
 * analytic is a line here (and its id in gpu_api.h) plus its two implementations: ana_* on the
 * CPU (ana.h) and a kind of gpu_analytic. */
#ifndef TDC_ANALYTICS_H
#define TDC_ANALYTICS_H

#include <stdint.h>

#include "../format/arc.h"
#include "../base/buf.h"
#include "../backend/gpu_api.h" /* enum ana_id */

typedef struct ana_ctx ana_ctx; /* ana.h */

/* An analytic on the CPU, with c's options: the files of entries [first, end) visible in vis
 * (ana.h), appended to out. */
typedef int (*ana_fn)(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                      const unsigned char *vis, buf *out);

typedef struct ana_info {
    const char *name;  /* the tool's command and the analytic's name in messages */
    const char *vfile; /* the daemon's virtual file in every directory */
    ana_fn cpu;        /* the CPU implementation (ana.h); the GPU's kind is the id */
    int per_file;      /* one result per file (the selector's per-file cost model) */
    int seq;           /* over three-word sequences rather than words */
    const char *doc;   /* what it prints, for `tadoc NAME --help` */
} ana_info;

/* Indexed by enum ana_id. */
extern const ana_info ana_table[ANA_NIDS];

/* The id of the analytic called `name`, or -1. */
int ana_find(const char *name);

#endif
