/* gpu: the CUDA backend's C interface. Only kernels/ includes CUDA headers; everything here
 * is plain C callable from the engine. */
#ifndef TDC_GPU_H
#define TDC_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Find a usable CUDA device. Returns 0 and writes "NAME (sm_XY)" into name, or a negative
 * value and writes the CUDA error text into name. Never aborts. */
int gpu_probe(char *name, size_t n);

#ifdef __cplusplus
}
#endif

#endif
