/* backend: which compute backend serves heavy operations (CPU always; CUDA when built with
 * nvcc and a usable GPU is present). Later operations dispatch through here. */
#ifndef TDC_BACKEND_H
#define TDC_BACKEND_H

/* 1 if a CUDA device is usable in this process, else 0. Probes once; thread-safe. */
int backend_gpu_available(void);

/* A one-line description such as "cpu backend; no CUDA support compiled in" or
 * "cpu backend; gpu backend on NVIDIA H100 80GB HBM3 (sm_90)". Static storage. */
const char *backend_describe(void);

#endif
