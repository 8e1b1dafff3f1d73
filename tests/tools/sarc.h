/* sarc.h: archive surgery for test generators. Splits an archive file into its header
 * fields and decompressed sections, and writes it back with raw (uncompressed) sections and
 * every checksum recomputed, so a test can change bytes behind the checksums. */
#ifndef TDC_SARC_H
#define TDC_SARC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "../../engine/buf.h"

typedef struct sarc {
    uint32_t version, nsec;
    uint32_t type[8];
    buf sec[8]; /* decompressed contents */
} sarc;

/* 0, or -1 when `p` is not a readable archive. */
static inline int sarc_load(const unsigned char *p, size_t n, sarc *a)
{
    memset(a, 0, sizeof *a);
    if (n < 40 || memcmp(p, "TADOCFS", 8)) return -1;
    a->version = le32(p + 8);
    uint64_t toff = le64(p + 16);
    a->nsec = le32(p + 24);
    if (a->nsec > 8 || toff > n || a->nsec * 40ull + 8 > n - toff) return -1;
    for (uint32_t i = 0; i < a->nsec; i++) {
        const unsigned char *e = p + toff + i * 40;
        uint32_t codec = le32(e + 4);
        uint64_t off = le64(e + 8), stored = le64(e + 16), raw = le64(e + 24);
        if (off > n || stored > n - off || raw > (1u << 30)) return -1;
        a->type[i] = le32(e);
        if (buf_reserve(&a->sec[i], raw + 1)) return -1;
        if (codec == 0) {
            buf_put(&a->sec[i], p + off, stored);
        } else {
            size_t got = ZSTD_decompress(a->sec[i].p, raw, p + off, stored);
            if (ZSTD_isError(got) || got != raw) return -1;
            a->sec[i].n = raw;
        }
    }
    return 0;
}

/* The archive with raw sections in order and fresh checksums. */
static inline void sarc_save(const sarc *a, buf *out)
{
    unsigned char hdr[40] = {0}, e[40];
    out->n = 0;
    buf_put(out, hdr, 40);
    uint64_t offs[8];
    for (uint32_t i = 0; i < a->nsec; i++) {
        offs[i] = out->n;
        buf_put(out, a->sec[i].p, a->sec[i].n);
    }
    uint64_t toff = out->n;
    for (uint32_t i = 0; i < a->nsec; i++) {
        st32(e, a->type[i]);
        st32(e + 4, 0);
        st64(e + 8, offs[i]);
        st64(e + 16, a->sec[i].n);
        st64(e + 24, a->sec[i].n);
        st64(e + 32, XXH3_64bits(a->sec[i].p, a->sec[i].n));
        buf_put(out, e, 40);
    }
    buf_put_u64(out, XXH3_64bits(out->p + toff, out->n - toff));
    memcpy(out->p, "TADOCFS", 8);
    st32(out->p + 8, a->version);
    st64(out->p + 16, toff);
    st32(out->p + 24, a->nsec);
    st64(out->p + 32, XXH3_64bits(out->p, 32));
}

static inline void sarc_free(sarc *a)
{
    for (int i = 0; i < 8; i++)
        buf_free(&a->sec[i]);
}

#endif
