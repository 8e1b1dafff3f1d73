#include "zlazy.h"

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_stableOutBuffer */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

#include "../base/buf.h"
#include "../base/err.h"

/* Compressed bytes fed to zstd per step: a step expands to a few hundred KiB of text, so a
 * read decodes little past the bytes it wants. */
#define ZLAZY_STEP (64u << 10)

/* The buffer is made resident this much at a time ahead of the decoding (one huge page): a
 * fault per 4 KiB page as zstd writes costs more than the decoding on a virtual machine. */
#define ZLAZY_POPULATE ((size_t)2 << 20)

struct zlazy {
    pthread_mutex_t mu;
    size_t done; /* dst[0, done) decoded; read without the lock (acquire), set under it */
    int failed;  /* the frame proved corrupt: -EBADMSG from now on */
    ZSTD_DCtx *dc;
    unsigned char *st; /* the frame; NULL once decoded whole */
    size_t stored, raw;
    size_t resident; /* dst[0, resident) populated */
    ZSTD_inBuffer in;
    ZSTD_outBuffer out;
    char name[64];
};

int zlazy_new(unsigned char *st, size_t stored, unsigned char *dst, size_t raw, const char *name,
              zlazy **out)
{
    *out = NULL;
    if (ZSTD_getFrameContentSize(st, stored) != raw) {
        free(st);
        return tdc_error(-EBADMSG, "section %s: compressed frame does not match declared size",
                         name);
    }
    zlazy *z = calloc(1, sizeof *z);
    if (!z || !(z->dc = ZSTD_createDCtx())) {
        free(z);
        free(st);
        return tdc_error(-ENOMEM, "section %s: out of memory", name);
    }
    pthread_mutex_init(&z->mu, NULL);
    mem_huge(dst, raw);
    /* Into dst directly (no window buffer); any window the archive's coder may use. */
    ZSTD_DCtx_setParameter(z->dc, ZSTD_d_stableOutBuffer, 1);
    ZSTD_DCtx_setParameter(z->dc, ZSTD_d_windowLogMax, ZSTD_WINDOWLOG_MAX);
    z->st = st;
    z->stored = stored;
    z->raw = raw;
    z->in = (ZSTD_inBuffer){st, 0, 0};
    z->out = (ZSTD_outBuffer){dst, raw, 0};
    snprintf(z->name, sizeof z->name, "%s", name);
    *out = z;
    return 0;
}

/* The frame is decoded whole: what only decoding needed goes. */
static void finish(zlazy *z)
{
    ZSTD_freeDCtx(z->dc);
    free(z->st);
    z->dc = NULL;
    z->st = NULL;
}

int zlazy_need(zlazy *z, size_t upto)
{
    if (upto > z->raw) upto = z->raw;
    if (__atomic_load_n(&z->done, __ATOMIC_ACQUIRE) >= upto) return 0;
    pthread_mutex_lock(&z->mu);
    while (!z->failed && z->out.pos < upto) {
        if (z->resident < z->raw && z->out.pos + ZLAZY_POPULATE / 2 >= z->resident) {
            size_t end = z->raw - z->resident > ZLAZY_POPULATE ? z->resident + ZLAZY_POPULATE
                                                               : z->raw;
            mem_populate((unsigned char *)z->out.dst + z->resident, end - z->resident);
            z->resident = end;
        }
        if (z->in.size < z->stored)
            z->in.size = z->stored - z->in.size > ZLAZY_STEP ? z->in.size + ZLAZY_STEP : z->stored;
        size_t before = z->out.pos, took = z->in.pos;
        size_t r = ZSTD_decompressStream(z->dc, &z->out, &z->in);
        if (ZSTD_isError(r) ||
            (z->out.pos == before && z->in.pos == took && z->in.size == z->stored))
            z->failed = 1; /* corrupt, or the input ends before the bytes it declared */
        __atomic_store_n(&z->done, z->out.pos, __ATOMIC_RELEASE);
    }
    if (!z->failed && z->out.pos == z->raw && z->st) finish(z);
    int rc = z->failed ? tdc_error(-EBADMSG, "section %s: decompression failed", z->name) : 0;
    pthread_mutex_unlock(&z->mu);
    return rc;
}

size_t zlazy_done(const zlazy *z)
{
    return __atomic_load_n(&z->done, __ATOMIC_ACQUIRE);
}

size_t zlazy_mem(const zlazy *z)
{
    return sizeof *z + z->stored + ZSTD_estimateDCtxSize();
}

void zlazy_free(zlazy *z)
{
    if (!z) return;
    finish(z);
    pthread_mutex_destroy(&z->mu);
    free(z);
}
