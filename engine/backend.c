#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ana.h"
#include "err.h"

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

int backend_wordcount(const arc *a, gpu_gram *g, uint32_t first, uint32_t end, buf *out)
{
#ifdef TDC_HAVE_CUDA
    if (g) {
        uint64_t *cnt = malloc(((size_t)a->g.ntokens + 1) * sizeof *cnt);
        if (!cnt) return tdc_error(-ENOMEM, "analytics: out of memory");
        int rc = gpu_wordcount(g, first, end, cnt);
        if (!rc) rc = ana_wordcount_counts(a, cnt, out);
        free(cnt);
        if (rc != -ENOTSUP) return rc;
    }
#else
    (void)g;
#endif
    return ana_wordcount(a, first, end, out);
}
