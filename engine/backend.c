#include "backend.h"

#include <pthread.h>
#include <stdio.h>

#ifdef TDC_HAVE_CUDA
#include "../kernels/gpu.h"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_gpu;
static char desc[256];

static void probe(void)
{
#ifdef TDC_HAVE_CUDA
    char name[128];
    have_gpu = gpu_probe(name, sizeof name) == 0;
    if (have_gpu)
        snprintf(desc, sizeof desc, "cpu backend; gpu backend on %s", name);
    else
        snprintf(desc, sizeof desc, "cpu backend; CUDA compiled in, no usable GPU (%s)", name);
#else
    snprintf(desc, sizeof desc, "cpu backend; no CUDA support compiled in");
#endif
}

int backend_gpu_available(void)
{
    pthread_once(&once, probe);
    return have_gpu;
}

const char *backend_describe(void)
{
    pthread_once(&once, probe);
    return desc;
}
