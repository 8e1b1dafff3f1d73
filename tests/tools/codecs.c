/* codecs: measure entropy coders on the sections of an archive (issue 18).
 *
 * For each section it takes the raw bytes the writer hands to the section coder ("planes":
 * symbols as four byte planes), and for the rules and the root also other layouts of the
 * same symbols ("varint": one LEB128 varint per symbol; "le32": interleaved little-endian
 * words, for the striped coders), and for the dictionary its tokens sorted and front coded
 * (plus what the permutation back to frequency order would cost, coded apart). Each layout
 * goes through every candidate coder; each result is decoded and compared, and the table
 * gives its size, its size against the stored section, and its encode and decode speed in
 * MB/s of raw input on one thread.
 *
 * With -d it only times the archive's decode instead, with the heap set up as tadoc and the
 * daemon set it (heap_huge), in MB/s of file content: whole (arc_open_meta and arc_load_data,
 * the dictionary and root on a second thread, best of five) and shard by shard as a read or
 * an analytic loads one (arc_open_piece of each shard alone on one thread, best of five
 * each, the times summed).
 *
 * With -m it estimates instead what whole-symbol context models would make of each shard's
 * root and rules (either layout): the ideal code length (the sum of -log2 p, which an
 * arithmetic coder reaches within a few bytes) of adaptive models that predict a symbol from
 * the one or two before it, escaping to shorter contexts as PPM's method C does (no
 * exclusion), against the stored sections; see model_shard.
 *
 * usage: codecs [-q|-d|-m] ARCHIVE...   (-q: only the zstd, xz and one order-1 candidate per
 * layout) */
#include <math.h>
#include <htscodecs/arith_dynamic.h>
#include <htscodecs/rANS_static4x16.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "../../engine/format/arc.h"
#include "../../engine/format/arc_test.h"
#include "../../engine/base/buf.h"
#include "../../engine/base/err.h"
#include "../../engine/base/heap.h"

/* htscodecs' flags beside the order (as in its rANS_static4x16pr.c, not in its headers). */
#define X_PACK 0x80
#define X_RLE 0x40
#define X_STRIPE 0x08
#define X_32 0x04

static int quick;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "codecs: %s: %s\n", what, tdc_errmsg());
    exit(1);
}

/* A coder: encode `n` bytes into a malloc'ed buffer (size in *zn), or decode into `out`
 * of exactly `n` bytes (0 on success). `arg` picks the level or order. */
typedef struct coder {
    const char *name;
    unsigned char *(*enc)(const unsigned char *p, size_t n, size_t *zn, int arg);
    int (*dec)(const unsigned char *z, size_t zn, unsigned char *out, size_t n, int arg);
    int arg;
    int quick; /* part of the -q set */
} coder;

static unsigned char *zstd_enc(const unsigned char *p, size_t n, size_t *zn, int level)
{
    size_t cap = ZSTD_compressBound(n);
    unsigned char *z = malloc(cap ? cap : 1);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_enableLongDistanceMatching, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, 27);
    *zn = ZSTD_compress2(cc, z, cap, p, n);
    ZSTD_freeCCtx(cc);
    if (ZSTD_isError(*zn)) {
        free(z);
        return NULL;
    }
    return z;
}

static int zstd_dec(const unsigned char *z, size_t zn, unsigned char *out, size_t n, int arg)
{
    (void)arg;
    size_t got = ZSTD_decompress(out, n, z, zn);
    return ZSTD_isError(got) || got != n;
}

static unsigned char *xz_enc(const unsigned char *p, size_t n, size_t *zn, int preset)
{
    size_t cap = lzma_stream_buffer_bound(n);
    unsigned char *z = malloc(cap);
    *zn = 0;
    if (lzma_easy_buffer_encode((uint32_t)preset, LZMA_CHECK_NONE, NULL, p, n, z, zn, cap) !=
        LZMA_OK) {
        free(z);
        return NULL;
    }
    return z;
}

static int xz_dec(const unsigned char *z, size_t zn, unsigned char *out, size_t n, int arg)
{
    (void)arg;
    uint64_t limit = UINT64_MAX;
    size_t ip = 0, op = 0;
    return lzma_stream_buffer_decode(&limit, 0, NULL, z, &ip, zn, out, &op, n) != LZMA_OK ||
           op != n;
}

static unsigned char *rans_enc(const unsigned char *p, size_t n, size_t *zn, int order)
{
    unsigned int o = 0;
    unsigned char *z = rans_compress_4x16((unsigned char *)p, (unsigned int)n, &o, order);
    *zn = o;
    return z;
}

static int rans_dec(const unsigned char *z, size_t zn, unsigned char *out, size_t n, int arg)
{
    (void)arg;
    unsigned int o = (unsigned int)n;
    return !rans_uncompress_to_4x16((unsigned char *)z, (unsigned int)zn, out, &o) || o != n;
}

static unsigned char *arith_enc(const unsigned char *p, size_t n, size_t *zn, int order)
{
    unsigned int o = 0;
    unsigned char *z = arith_compress((unsigned char *)p, (unsigned int)n, &o, order);
    *zn = o;
    return z;
}

static int arith_dec(const unsigned char *z, size_t zn, unsigned char *out, size_t n, int arg)
{
    (void)arg;
    unsigned int o = (unsigned int)n;
    return !arith_uncompress_to((unsigned char *)z, (unsigned int)zn, out, &o) || o != n;
}

static const coder coders[] = {
    {"zstd-19-long", zstd_enc, zstd_dec, 19, 1},
    {"zstd-22-long", zstd_enc, zstd_dec, 22, 0},
    {"xz-6", xz_enc, xz_dec, 6, 0},
    {"xz-9e", xz_enc, xz_dec, 9 | (int)LZMA_PRESET_EXTREME, 1},
    {"rans-o0", rans_enc, rans_dec, 0, 0},
    {"rans-o1", rans_enc, rans_dec, 1, 1},
    {"rans-o1-32", rans_enc, rans_dec, 1 | X_32, 0},
    {"rans-o0-pack", rans_enc, rans_dec, X_PACK, 0},
    {"rans-o1-pack", rans_enc, rans_dec, 1 | X_PACK, 0},
    {"rans-o0-stripe4", rans_enc, rans_dec, X_STRIPE | (4 << 8), 0},
    {"rans-o1-stripe4", rans_enc, rans_dec, 1 | X_STRIPE | (4 << 8), 0},
    {"arith-o0", arith_enc, arith_dec, 0, 0},
    {"arith-o1", arith_enc, arith_dec, 1, 1},
    {"arith-o1-rle", arith_enc, arith_dec, 1 | X_RLE, 0},
    {"arith-o1-stripe4", arith_enc, arith_dec, 1 | X_STRIPE | (4 << 8), 0},
};

/* One layout of a section through every coder: one table row each. */
static void measure(const char *sec, const char *layout, const unsigned char *p, size_t n,
                    uint64_t stored)
{
    unsigned char *back = malloc(n ? n : 1);
    for (size_t c = 0; c < sizeof coders / sizeof *coders; c++) {
        const coder *k = &coders[c];
        if (quick && !k->quick) continue;
        /* stripe coders work on whole words */
        if (strstr(k->name, "stripe") && strcmp(layout, "le32")) continue;
        if (!strstr(k->name, "stripe") && !strcmp(layout, "le32")) continue;
        size_t zn = 0;
        double t0 = now();
        unsigned char *z = k->enc(p, n, &zn, k->arg);
        double t1 = now();
        if (!z) {
            printf("| %s | %s | %s | failed | | | |\n", sec, layout, k->name);
            continue;
        }
        int bad = 0;
        double dt = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            double t = now();
            bad |= k->dec(z, zn, back, n, k->arg) || memcmp(back, p, n);
            if (now() - t < dt) dt = now() - t;
        }
        double t2 = t1 + dt;
        printf("| %s | %s | %s | %zu | %.1f%% | %.1f | %.1f |%s\n", sec, layout, k->name, zn,
               stored ? 100.0 * (double)zn / (double)stored : 0.0,
               (double)n / 1e6 / (t1 - t0 + 1e-9), (double)n / 1e6 / (t2 - t1 + 1e-9),
               bad ? " ROUND TRIP FAILED" : "");
        fflush(stdout);
        free(z);
    }
    free(back);
}

/* Symbols of a rules or root section (after its varint header) as varints or words. */
static void relayout(const unsigned char *p, size_t n, size_t hdr, buf *varint, buf *le32w)
{
    size_t cnt = (n - hdr) / 4;
    const unsigned char *s = p + hdr;
    buf_put(varint, p, hdr);
    buf_put(le32w, p, hdr);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t x = (uint32_t)s[i] | (uint32_t)s[cnt + i] << 8 | (uint32_t)s[2 * cnt + i] << 16 |
                     (uint32_t)s[3 * cnt + i] << 24;
        buf_put_varint(varint, x);
        buf_put_u32(le32w, x);
    }
}

/* Length of the varint header of a rules (count, then one length per rule) or root section. */
static size_t header_len(const unsigned char *p, size_t n, int rules)
{
    rd r = {p, p + n};
    uint64_t cnt, x;
    rd_varint(&r, &cnt);
    if (rules)
        for (uint64_t i = 0; i < cnt; i++)
            rd_varint(&r, &x);
    return (size_t)(r.p - p);
}

typedef struct tokref {
    const unsigned char *p;
    uint32_t len, id;
} tokref;

static int tokcmp(const void *a, const void *b)
{
    const tokref *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, m);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The dictionary sorted and front coded (shared prefix length, suffix length, suffix), and
 * the permutation from sorted position to token id as varints. */
static void front_code(const unsigned char *p, size_t n, buf *fc, buf *perm)
{
    rd r = {p, p + n};
    uint64_t cnt, len;
    rd_varint(&r, &cnt);
    tokref *t = calloc(cnt ? cnt : 1, sizeof *t);
    for (uint64_t i = 0; i < cnt; i++) {
        rd_varint(&r, &len);
        t[i].len = (uint32_t)len;
        t[i].id = (uint32_t)i;
    }
    const unsigned char *blob = r.p;
    for (uint64_t i = 0; i < cnt; i++) {
        t[i].p = blob;
        blob += t[i].len;
    }
    qsort(t, cnt, sizeof *t, tokcmp);
    buf_put_varint(fc, cnt);
    for (uint64_t i = 0; i < cnt; i++) {
        uint32_t pre = 0;
        if (i)
            while (pre < t[i].len && pre < t[i - 1].len && t[i].p[pre] == t[i - 1].p[pre])
                pre++;
        buf_put_varint(fc, pre);
        buf_put_varint(fc, t[i].len - pre);
        buf_put(fc, t[i].p + pre, t[i].len - pre);
        buf_put_varint(perm, t[i].id);
    }
    free(t);
}

static void one_archive(const char *path)
{
    arc *a;
    if (arc_open_meta(path, &a)) die(path);
    printf("\n### %s (%llu bytes)\n\n", path, (unsigned long long)a->file_size);
    printf("| section | layout | coder | bytes | of stored | enc MB/s | dec MB/s |\n");
    printf("|---|---|---|---:|---:|---:|---:|\n");
    for (uint32_t i = 0; i < a->nsecs; i++) {
        unsigned char *p;
        const arc_secinfo *s = &a->secs[i];
        const char *name = arc_section_name(s->type);
        if (strstr(arc_codec_name(s->codec), "kind")) {
            fprintf(stderr, "codecs: %s: %s in the kind layout; the layouts measured here start "
                            "from the plain one (pack with TADOC_NO_KIND=1)\n", path, name);
            exit(1);
        }
        if (arc_section_bytes(a, i, &p)) die(name);
        printf("| %s | raw | stored (%s) | %llu | 100%% | | |\n", name, arc_codec_name(s->codec),
               (unsigned long long)s->stored);
        printf("| %s | raw | none | %llu | | | |\n", name, (unsigned long long)s->raw);
        measure(name, "planes", p, s->raw, s->stored);
        if (s->type == ARC_SEC_RULES || s->type == ARC_SEC_ROOT) {
            buf v = {0}, w = {0};
            relayout(p, s->raw, header_len(p, s->raw, s->type == ARC_SEC_RULES), &v, &w);
            measure(name, "varint", v.p, v.n, s->stored);
            measure(name, "le32", w.p, w.n, s->stored);
            buf_free(&v);
            buf_free(&w);
        }
        if (s->type == ARC_SEC_DICT) {
            buf fc = {0}, perm = {0};
            front_code(p, s->raw, &fc, &perm);
            measure(name, "front-coded", fc.p, fc.n, s->stored);
            measure(name, "sort-permutation", perm.p, perm.n, s->stored);
            buf_free(&fc);
            buf_free(&perm);
        }
        free(p);
    }
    arc_free(a);
}

/* Counts of an adaptive context model: per context, its total and distinct symbols; per
 * (context, symbol), its count. Open addressing on 64-bit keys (0 is free: keys are made
 * nonzero). */
typedef struct ctab {
    uint64_t *key;
    uint32_t *val;
    size_t cap, n;
} ctab;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ x >> 33;
}

static uint32_t *ctab_at(ctab *t, uint64_t k)
{
    k |= 1ULL << 63;
    if (2 * (t->n + 1) > t->cap) {
        ctab old = *t;
        t->cap = old.cap ? 2 * old.cap : 1 << 16;
        t->key = calloc(t->cap, sizeof *t->key);
        t->val = calloc(t->cap, sizeof *t->val);
        if (!t->key || !t->val) die("model: out of memory");
        t->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.key[i]) *ctab_at(t, old.key[i]) = old.val[i];
        free(old.key);
        free(old.val);
    }
    size_t i = mix(k) & (t->cap - 1);
    while (t->key[i] && t->key[i] != k)
        i = (i + 1) & (t->cap - 1);
    if (!t->key[i]) t->key[i] = k, t->n++;
    return &t->val[i];
}

static void ctab_free(ctab *t)
{
    free(t->key);
    free(t->val);
}

/* One adaptive model of order `order` (0, 1 or 2 symbols of context) over an alphabet of
 * `nsyms`: the bits it spends on symbol s after the symbols p1 (the one before) and p2. */
typedef struct model {
    int order;
    ctab pair, tot, dist; /* (context, symbol) counts; per context: total, distinct */
    uint64_t nsyms, seen;  /* alphabet size; distinct symbols seen at order 0 */
} model;

static double model_code(model *m, uint64_t p1, uint64_t p2, uint32_t s)
{
    double bits = 0;
    for (int o = m->order; o >= 0; o--) {
        uint64_t ctx = o == 2 ? (p2 << 32 | p1) * 3 + 2 : o == 1 ? p1 * 3 + 1 : 0;
        uint64_t c = mix(ctx);
        uint32_t *cnt = ctab_at(&m->pair, mix(c + 0x9e3779b97f4a7c15ULL * ((uint64_t)s + 1)));
        uint32_t *tot = ctab_at(&m->tot, c), *dist = ctab_at(&m->dist, c);
        double t = *tot, d = *dist;
        int hit = *cnt > 0;
        if (hit)
            bits -= log2(*cnt / (t + d));
        else if (t > 0)
            bits -= log2(d / (t + d)); /* escape to the shorter context */
        if (!*cnt) (*dist)++;
        (*cnt)++;
        (*tot)++;
        if (hit) return bits;
    }
    /* New at order 0 as well: uniform over the symbols not seen yet. */
    bits += log2((double)(m->nsyms - m->seen));
    m->seen++;
    return bits;
}

static void model_free(model *m)
{
    ctab_free(&m->pair);
    ctab_free(&m->tot);
    ctab_free(&m->dist);
}

/* Bytes the models of order 0, 1 and 2 would spend on n symbols s (one stream: a rule body
 * starts after symbol `start`, the root after 0). */
static void model_stream(model *m, const uint32_t *s, uint64_t n, uint64_t start, double *bits)
{
    uint64_t p1 = start, p2 = start;
    for (uint64_t i = 0; i < n; i++) {
        for (int o = 0; o < 3; o++)
            bits[o] += model_code(&m[o], p1, p2, s[i]);
        p2 = p1;
        p1 = (uint64_t)s[i] + 1;
    }
}

/* The context models' estimates for each shard's root and rules against the stored sizes. */
static void model_archive(const char *path)
{
    arc *meta;
    if (arc_open_meta(path, &meta)) die(path);
    printf("\n### %s (%llu bytes, %u shards): whole-symbol context models, ideal code length\n\n",
           path, (unsigned long long)meta->file_size, meta->nshards);
    double stored[2] = {0, 0}, est[2][3] = {{0}};
    uint64_t nsyms[2] = {0, 0};
    for (uint32_t k = 0; k < meta->nshards; k++) {
        if (arc_shard_text(meta, k)) continue;
        arc *a;
        uint32_t *ids, nids;
        if (arc_open_span(meta, k, k, &a, &ids, &nids)) die(path);
        const gram *g = &a->g;
        uint64_t alpha = (uint64_t)g->ntokens + g->nrules;
        for (int sec = 0; sec < 2; sec++) { /* 0 root, 1 rules */
            model m[3] = {{.order = 0}, {.order = 1}, {.order = 2}};
            for (int o = 0; o < 3; o++)
                m[o].nsyms = alpha;
            if (sec == 0) {
                model_stream(m, g->root.p, g->root.n, 0, est[0]);
                nsyms[0] += g->root.n;
            } else {
                for (uint32_t r = 1; r <= g->nrules; r++) {
                    uint64_t n;
                    const uint32_t *b = gram_body(g, r, &n);
                    model_stream(m, b, n, (uint64_t)UINT32_MAX + 1, est[1]);
                    nsyms[1] += n;
                }
            }
            for (int o = 0; o < 3; o++)
                model_free(&m[o]);
            stored[sec] += (double)meta->secs[3 * k + (sec ? 1 : 2)].stored;
        }
        free(ids);
        arc_free(a);
    }
    printf("| section | symbols | stored bytes | order 0 | order 1 | order 2 |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    for (int sec = 0; sec < 2; sec++) {
        printf("| %s | %llu | %.0f", sec ? "rules (bodies)" : "root",
               (unsigned long long)nsyms[sec], stored[sec]);
        for (int o = 0; o < 3; o++)
            printf(" | %.0f (%+.1f%%)", est[sec][o] / 8,
                   stored[sec] ? 100.0 * (est[sec][o] / 8 - stored[sec]) / stored[sec] : 0);
        printf(" |\n");
    }
    arc_free(meta);
}

/* Each shard of `a` (opened by arc_open_meta) loaded alone, best of five: the sum of the
 * times, in seconds. */
static double time_shards(arc *a, const char *path)
{
    double sum = 0;
    for (uint32_t k = 0; k < a->nshards; k++) {
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            arc *p;
            double t0 = now();
            if (arc_open_piece(a, k, &p)) die(path);
            double t = now() - t0;
            arc_piece_free(p);
            if (t < best) best = t;
        }
        sum += best;
    }
    return sum;
}

/* Decode the whole archive five times, and each shard alone; print the best time of the
 * whole, the sum of the shards' and the content rates. */
static void time_decode(const char *path)
{
    double best = 1e30;
    uint64_t content = 0, size = 0;
    for (int k = 0; k < 5; k++) {
        arc *a;
        double t0 = now();
        if (arc_open_meta(path, &a) || arc_load_data(a)) die(path);
        double t = now() - t0;
        if (t < best) best = t;
        content = 0;
        for (uint32_t e = 0; e < a->nents; e++)
            if (a->ents[e].type == ARC_REG) content += a->ents[e].size;
        size = a->file_size;
        arc_free(a);
    }
    arc *a;
    if (arc_open_meta(path, &a)) die(path);
    double shards = a->nshards ? time_shards(a, path) : 0;
    arc_free(a);
    printf("%s: %llu bytes, %llu bytes of content, decoded in %.1f ms: %.0f MB/s of content; "
           "shard by shard in %.1f ms: %.0f MB/s of content\n",
           path, (unsigned long long)size, (unsigned long long)content, best * 1e3,
           (double)content / 1e6 / best, shards * 1e3,
           shards > 0 ? (double)content / 1e6 / shards : 0);
}

int main(int argc, char **argv)
{
    int i = 1, decode = 0, est = 0;
    if (i < argc && !strcmp(argv[i], "-q")) quick = 1, i++;
    if (i < argc && !strcmp(argv[i], "-d")) decode = 1, i++;
    if (i < argc && !strcmp(argv[i], "-m")) est = 1, i++;
    if (i >= argc) {
        fprintf(stderr, "usage: codecs [-q|-d|-m] ARCHIVE...\n");
        return 2;
    }
    if (decode) heap_huge(HEAP_HUGE_MIN);
    for (; i < argc; i++)
        if (est)
            model_archive(argv[i]);
        else if (decode)
            time_decode(argv[i]);
        else
            one_archive(argv[i]);
    return 0;
}
