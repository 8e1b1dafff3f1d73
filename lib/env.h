/* env: the environment variables that tune the analytics, read in one place for the tadoc
 * tool, the tadocfs daemon and libtadoc (engine/ and kernels/ never read the environment; they
 * take their settings in the contexts their callers make). tadoc --help and README list them. */
#ifndef TDC_ENV_H
#define TDC_ENV_H

#include "../engine/backend/backend.h"

/* Set in o what the environment asks for: TADOC_TRAVERSAL (topdown, bottomup or auto),
 * TADOC_THREADS (1 or 2), TADOC_ANA_VERBOSE (1 or 2), TADOC_ANA_CACHE (0: off),
 * TADOC_GPU_WIDE_SEQ (1: on), TADOC_SHARDS (N shards analysed at once, or "whole") and
 * TADOC_GPU_MEM (device bytes a whole archive may take; K, M, G) and TADOC_MERGE_MEM (bytes
 * a merge of shards' outputs holds before it goes on in a file; the tool then sets the
 * directory). Unset or empty variables leave o as it was. 0, or -EINVAL with a message naming
 * a variable set to a value it does not take. */
int tdc_env_settings(backend_opts *o);

/* The tools' bound on a merge of shards' outputs (ana_opts.spill_at), TADOC_MERGE_MEM unless
 * set: past it a merge goes on in an unlinked file of the temporary directory, as sort(1)
 * does. As much as the daemon's merges hold under its default budget. */
#define TDC_MERGE_MEM ((uint64_t)64 << 20)
void tdc_env_merge_spill(backend_opts *o);

/* The tools' mode from TADOC_GPU: on, off or auto (unset or empty: auto); -EINVAL with a
 * message for anything else. (tadocfs takes its mode from its -o gpu= option instead.) */
int tdc_env_gpu_mode(void);

/* A tool's settings from the environment: tdc_env_settings and the mode of tdc_env_gpu_mode
 * into o. 0, or -EINVAL with a message naming the variable. */
int tdc_env_tool(backend_opts *o);

#endif
