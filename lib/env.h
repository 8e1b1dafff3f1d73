/* env: the environment variables that tune the analytics, read in one place for the tadoc
 * tool, the tadocfs daemon and libtadoc (engine/, index/ and kernels/ never read the
 * environment; they take settings through their setters). tadoc --help and README list them. */
#ifndef TDC_ENV_H
#define TDC_ENV_H

/* Apply TADOC_TRAVERSAL (topdown, bottomup or auto), TADOC_THREADS (1 or 2),
 * TADOC_ANA_VERBOSE (1 or 2), TADOC_ANA_CACHE (0: off) and TADOC_GPU_WIDE_SEQ (1: on) to the
 * engine's settings (ana_set_*, backend_set_gpu_wide_seq). Unset variables leave the
 * defaults. Call before the first analytic; not thread-safe against analytics running. */
void tdc_env_settings(void);

#endif
