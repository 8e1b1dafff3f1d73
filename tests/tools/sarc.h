/* sarc.h: archive surgery for test generators. Splits an archive file into its header
 * fields and decompressed sections, and writes it back with raw (uncompressed) sections and
 * every checksum recomputed, so a test can change bytes behind the checksums. Sections in the
 * kind layout (codecs 3 and 4) are written back raw in that layout (codec 3). */
#ifndef TDC_SARC_H
#define TDC_SARC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "../../engine/format/arc.h"
#include "../../engine/base/buf.h"

typedef struct sarc {
    uint32_t version, nsec;
    uint32_t type[8];
    int kinded[8]; /* in the kind layout */
    buf sec[8]; /* decompressed contents */
} sarc;

/* 0, or -1 when `p` is not a readable archive. */
static inline int sarc_load(const unsigned char *p, size_t n, sarc *a)
{
    arc_header h;
    memset(a, 0, sizeof *a);
    if (n < ARC_HDR_SIZE || arc_header_decode(p, &h)) return -1;
    a->version = h.version;
    a->nsec = h.nsec;
    if (a->nsec > 8 || h.table > n || a->nsec * (uint64_t)ARC_SECENT_SIZE + 8 > n - h.table)
        return -1;
    for (uint32_t i = 0; i < a->nsec; i++) {
        arc_secinfo e;
        arc_secent_decode(p + h.table + i * ARC_SECENT_SIZE, &e);
        if (e.offset > n || e.stored > n - e.offset || e.raw > (1u << 30)) return -1;
        a->type[i] = e.type;
        a->kinded[i] = e.codec == 3 || e.codec == 4;
        if (buf_reserve(&a->sec[i], e.raw + 1)) return -1;
        if (e.codec == 0 || e.codec == 3) {
            buf_put(&a->sec[i], p + e.offset, e.stored);
        } else {
            size_t got = ZSTD_decompress(a->sec[i].p, e.raw, p + e.offset, e.stored);
            if (ZSTD_isError(got) || got != e.raw) return -1;
            a->sec[i].n = e.raw;
        }
    }
    return 0;
}

/* The archive with raw sections in order and fresh checksums. */
static inline void sarc_save(const sarc *a, buf *out)
{
    unsigned char hdr[ARC_HDR_SIZE] = {0}, e[ARC_SECENT_SIZE];
    out->n = 0;
    buf_put(out, hdr, ARC_HDR_SIZE);
    uint64_t offs[8];
    for (uint32_t i = 0; i < a->nsec; i++) {
        offs[i] = out->n;
        buf_put(out, a->sec[i].p, a->sec[i].n);
    }
    uint64_t toff = out->n;
    for (uint32_t i = 0; i < a->nsec; i++) {
        arc_secinfo s = {.type = a->type[i],
                         .codec = a->kinded[i] ? 3 : 0,
                         .offset = offs[i],
                         .stored = a->sec[i].n,
                         .raw = a->sec[i].n,
                         .hash = XXH3_64bits(a->sec[i].p, a->sec[i].n)};
        arc_secent_encode(e, &s);
        buf_put(out, e, ARC_SECENT_SIZE);
    }
    buf_put_u64(out, 0);
    arc_table_seal(out->p + toff, a->nsec);
    arc_header_encode(out->p, &(arc_header){.version = a->version, .nsec = a->nsec, .table = toff});
}

/* The section-table entry k of the archive image p. */
static inline unsigned char *sarc_entry(unsigned char *p, uint32_t k)
{
    return p + le64(p + ARC_HDR_TABLE) + (uint64_t)k * ARC_SECENT_SIZE;
}

/* Recompute the table and header checksums of an archive image after its header fields or
 * table entries were changed in place (the table stays where the header said it was). */
static inline void sarc_seal(unsigned char *p, uint64_t table, uint32_t nsec)
{
    arc_table_seal(p + table, nsec);
    arc_header_seal(p);
}

static inline void sarc_free(sarc *a)
{
    for (int i = 0; i < 8; i++)
        buf_free(&a->sec[i]);
}

#endif
