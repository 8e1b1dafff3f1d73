#include "bare.h"

#include "../format/ztrial.h"

#define BARE_TRY_LEVEL 3
#define BARE_HOPE 0.72
#define BARE_MARGIN 100

static uint64_t coded_bytes(const arc_coded *c)
{
    return c->secs[0].stored + c->secs[1].stored + c->secs[2].stored;
}

int bare_worth(ZSTD_CCtx *cc, const unsigned char *text, size_t n, const arc_coded *gc)
{
    if (n < BARE_MIN) return 0;
    size_t z = ztrial_size(cc, text, n, BARE_TRY_LEVEL, 1);
    return z && (uint64_t)((double)z * BARE_HOPE) < coded_bytes(gc);
}

int bare_code(const unsigned char *text, const uint64_t *lens, size_t np, int level,
              const arc_coded *gc, arc_coded *tc, vec64 *runs)
{
    runs->n = 0;
    int rc = arc_text_shard_encode(lens, np, text, level, 2, tc, runs);
    if (rc) return rc;
    uint64_t g = coded_bytes(gc);
    if (coded_bytes(tc) < g - g / BARE_MARGIN && runs->n == np && tc->info.bytes == gc->info.bytes)
        return 1;
    arc_coded_free(tc);
    runs->n = 0;
    return 0;
}
