#include "ztrial.h"

#include <stdlib.h>

void ztrial_far(ZSTD_CCtx *cc)
{
    ZSTD_CCtx_setParameter(cc, ZSTD_c_enableLongDistanceMatching, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 27);
}

size_t ztrial_size(ZSTD_CCtx *cc, const void *p, size_t n, int level, int far)
{
    ZSTD_CCtx *own = cc ? NULL : ZSTD_createCCtx();
    size_t cap = ZSTD_compressBound(n), z = 0;
    void *out = malloc(cap ? cap : 1);
    if (out && (cc || own)) {
        ZSTD_CCtx *c = cc ? cc : own;
        ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
        ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
        if (far) ztrial_far(c);
        z = ZSTD_compress2(c, out, cap, p, n);
    }
    free(out);
    ZSTD_freeCCtx(own);
    return ZSTD_isError(z) ? 0 : z;
}
