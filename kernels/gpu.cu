#include "gpu.h"

#include <cstdio>
#include <cuda_runtime.h>

extern "C" int gpu_probe(char *name, size_t n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(name, n, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return -1;
    }
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) {
        snprintf(name, n, "%s", cudaGetErrorString(e));
        return -1;
    }
    snprintf(name, n, "%s (sm_%d%d)", p.name, p.major, p.minor);
    return 0;
}
