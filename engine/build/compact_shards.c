#include "compact_shards.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "../base/err.h"
#include "../base/tok.h"
#include "bare.h"
#include "pack.h"

/* The shard holding the last symbol of e's run (e's own shard for an empty run). */
static uint32_t last_shard(const arc *a, const arc_entry *e)
{
    if (!e->root_len) return e->shard;
    uint64_t end = e->root_start + e->root_len - 1;
    uint32_t lo = e->shard, hi = a->nshards - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (a->shards[mid].root_off <= end)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

typedef struct plan {
    const arc *old;
    uint64_t shard_size;
    uint8_t *kept;    /* per old entry: its content is kept by a new entry */
    uint8_t *rebuild; /* per old shard */
    uint8_t *cut;     /* per old shard: holds part of a file cut over several shards */
    uint64_t *dead;   /* per old shard: bytes of content no new entry keeps */
    uint64_t *live;   /* per old shard: bytes of content staying in place */
    int64_t *newidx;  /* per old shard: its index in the new archive, -1 when not copied */
} plan;

static void plan_free(plan *p)
{
    free(p->kept);
    free(p->rebuild);
    free(p->cut);
    free(p->dead);
    free(p->live);
    free(p->newidx);
}

/* 1 if old entry o keeps its place: its content is kept and none of its shards is rebuilt. */
static int in_place(const plan *p, int64_t o)
{
    if (o < 0) return 0;
    const arc_entry *e = &p->old->ents[o];
    for (uint32_t s = e->shard, t = last_shard(p->old, e); s <= t; s++)
        if (p->rebuild[s]) return 0;
    return 1;
}

/* Content moving into new shards: new bytes, or kept content of a rebuilt shard. */
static int moves(const plan *p, const arc *nw, const int64_t *src, uint32_t i)
{
    return nw->ents[i].type == ARC_REG && src[i] != -2 && !in_place(p, src[i]);
}

/* Decide which old shards are rebuilt, which copied, and count what stays. */
static int make_plan(plan *p, const arc *nw, const int64_t *src)
{
    const arc *old = p->old;
    uint32_t ns = old->nshards;
    p->kept = calloc(old->nents ? old->nents : 1, 1);
    p->rebuild = calloc(ns, 1);
    p->cut = calloc(ns, 1);
    p->dead = calloc(ns, sizeof *p->dead);
    p->live = calloc(ns, sizeof *p->live);
    p->newidx = calloc(ns, sizeof *p->newidx);
    if (!p->kept || !p->rebuild || !p->cut || !p->dead || !p->live || !p->newidx) return -ENOMEM;
    int fresh = 0;
    for (uint32_t i = 0; i < nw->nents; i++) {
        if (src[i] >= 0) p->kept[src[i]] = 1;
        fresh |= src[i] == -1 && nw->ents[i].type == ARC_REG && nw->ents[i].size;
    }
    for (uint32_t o = 0; o < old->nents; o++) {
        const arc_entry *e = &old->ents[o];
        if (e->type != ARC_REG || !e->root_len) continue;
        for (uint32_t s = e->shard, t = last_shard(old, e); s < t; s++)
            p->cut[s] = p->cut[s + 1] = 1;
        if (p->kept[o]) continue;
        uint64_t left = e->size;
        for (uint32_t s = e->shard, t = last_shard(old, e); s <= t && left; s++) {
            uint64_t here = s == t || left < old->shards[s].bytes ? left : old->shards[s].bytes;
            p->dead[s] += here;
            left -= here;
        }
    }
    for (uint32_t s = 0; s < ns; s++) {
        uint64_t b = old->shards[s].bytes;
        p->rebuild[s] = (p->dead[s] && (p->dead[s] * 4 >= b || b < p->shard_size / 2)) ||
                        (fresh && b < p->shard_size / 4 && !p->cut[s]);
    }
    for (uint32_t i = 0; i < nw->nents; i++) {
        if (nw->ents[i].type != ARC_REG || src[i] < 0 || !in_place(p, src[i])) continue;
        const arc_entry *e = &old->ents[src[i]];
        for (uint32_t s = e->shard, t = last_shard(old, e); s <= t; s++)
            p->live[s] += 1 + nw->ents[i].size; /* kept, with every shard its run crosses */
    }
    return 0;
}

/* Reads of one group's entry k go to the caller's entry map[k]. */
typedef struct group_rd {
    compact_read_fn fn;
    void *ctx;
    const uint32_t *map;
} group_rd;

static int group_read(void *ctx, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    group_rd *g = ctx;
    return g->fn(g->ctx, g->map[ent], off, dst, n);
}

static void add_stats(compact_stats *st, const compact_stats *g)
{
    st->new_files += g->new_files;
    st->new_bytes += g->new_bytes;
    st->rules_new += g->rules_new;
    st->rules_after += g->rules_after;
    st->full |= g->full;
}

/* Bytes [at, at + len) of new entry `ent` appended to b, and to the file's hash (hs, unless
 * NULL). */
static int read_text(compact_read_fn fn, void *ctx, uint32_t ent, uint64_t at, uint64_t len, buf *b,
                     XXH3_state_t *hs)
{
    if (len > SIZE_MAX || buf_reserve(b, (size_t)len)) return tdc_error(-ENOMEM, "out of memory");
    for (uint64_t off = 0; off < len;) {
        size_t k = len - off < ((size_t)1 << 20) ? (size_t)(len - off) : (size_t)1 << 20;
        int rc = fn(ctx, ent, at + off, b->p + b->n, k);
        if (rc) return rc;
        if (hs) XXH3_64bits_update(hs, b->p + b->n, k);
        b->n += k;
        off += k;
    }
    return 0;
}

/* The shard of group entries ge[0..n) (new entries map[0..n), `bytes` of content), coded as
 * a grammar in *out, stored as its bare text instead where that is smaller (bare.h), as pack
 * stores it: the entries' runs are then the text's. Its text is read again through fn. */
static int group_bare(const uint32_t *map, uint32_t n, uint64_t bytes, compact_read_fn fn,
                      void *ctx, int level, arc_entry *ge, arc_coded *out)
{
    if (bytes < BARE_MIN || bytes > SIZE_MAX) return 0;
    buf text = {0};
    vec64 lens = {0}, runs = {0};
    arc_coded tc;
    int rc = buf_reserve(&text, (size_t)bytes) ? -ENOMEM : 0;
    for (uint32_t k = 0; k < n && !rc; k++) {
        if (!ge[k].size) continue;
        rc = read_text(fn, ctx, map[k], 0, ge[k].size, &text, NULL);
        if (!rc && vec64_push(&lens, ge[k].size)) rc = -ENOMEM;
    }
    if (!rc && bare_worth(NULL, text.p, text.n, out) &&
        (rc = bare_code(text.p, lens.p, lens.n, level, out, &tc, &runs)) == 1) {
        arc_coded_free(out);
        *out = tc;
        uint64_t start = 0;
        for (uint32_t k = 0, r = 0; k < n; k++) {
            ge[k].root_start = start;
            ge[k].root_len = ge[k].size ? runs.p[r++] : 0;
            start += ge[k].root_len;
        }
        rc = 0;
    }
    buf_free(&text);
    vec64_free(&lens);
    vec64_free(&runs);
    return rc == -ENOMEM ? tdc_error(rc, "out of memory storing a shard as its text") : rc;
}

/* Build entries map[0..n) of nw (content that moves) into one new shard, index `shard`. */
static int build_group(const arc *old, arc *nw, const int64_t *src, const uint32_t *map, uint32_t n,
                       uint32_t shard, compact_read_fn fn, void *ctx, int level, compact_stats *st,
                       arc_coded *out)
{
    arc g = {0};
    int64_t *gsrc = malloc((n ? n : 1) * sizeof *gsrc);
    g.ents = malloc((n ? n : 1) * sizeof *g.ents);
    int rc = gsrc && g.ents ? 0 : -ENOMEM;
    uint64_t bytes = 0;
    for (uint32_t k = 0; !rc && k < n; k++) {
        g.ents[k] = nw->ents[map[k]]; /* borrowed strings: the copies are freed, not cleared */
        gsrc[k] = src[map[k]];
        bytes += nw->ents[map[k]].size;
    }
    g.nents = n;
    group_rd rd = {fn, ctx, map};
    compact_stats gs;
    if (!rc) rc = compact_build(old, &g, gsrc, group_read, &rd, COMPACT_MAY_REBUILD, &gs);
    if (!rc) rc = arc_shard_encode(g.dict, &g.g, bytes, level, 0, out);
    if (!rc && (rc = group_bare(map, n, bytes, fn, ctx, level, g.ents, out))) arc_coded_free(out);
    if (!rc) gs.rules_after = out->info.nrules; /* none where it went bare */
    for (uint32_t k = 0; !rc && k < n; k++) {
        arc_entry *e = &nw->ents[map[k]];
        e->shard = shard;
        e->root_start = g.ents[k].root_start;
        e->root_len = g.ents[k].root_len;
        e->hash = g.ents[k].hash;
    }
    if (!rc) add_stats(st, &gs);
    dict_free(g.dict);
    gram_free(&g.g);
    free(g.byino);
    free(g.ents);
    free(gsrc);
    return rc;
}

/* Room for shard n in *sh (of *cap). */
static int room(arc_coded **sh, uint32_t n, uint32_t *cap)
{
    if (n < *cap) return 0;
    arc_coded *t = realloc(*sh, (*cap ? 2 * *cap : 8) * sizeof **sh);
    if (!t) return -ENOMEM;
    *sh = t;
    *cap = *cap ? 2 * *cap : 8;
    return 0;
}

/* Reads of the one entry of a part of file `ent`, which begins at byte `at` of it. The bytes
 * read in order, from the part's start on, go into the file's hash (the build reads each
 * file once, in order); `seq` is where the next such read begins, or UINT64_MAX once a read
 * came out of order (the hash is then made by reading the file again). */
typedef struct part_rd {
    compact_read_fn fn;
    void *ctx;
    uint32_t ent;
    uint64_t at, seq;
    XXH3_state_t *hs;
} part_rd;

static int part_read(void *ctx, uint32_t ent, uint64_t off, void *dst, size_t n)
{
    part_rd *r = ctx;
    (void)ent;
    int rc = r->fn(r->ctx, r->ent, r->at + off, dst, n);
    if (!rc && r->seq == r->at + off) {
        XXH3_64bits_update(r->hs, dst, n);
        r->seq += n;
    } else {
        r->seq = UINT64_MAX;
    }
    return rc;
}

/* Where a part of file `ent` that should end near `want` ends: the first change between word
 * and separator bytes at or after it (a token boundary wherever the file is tokenized from,
 * so each part tokenizes as the whole file would there), or `size` when none comes within
 * PART_SEEK bytes. 0 or a negative errno. */
#define PART_SEEK ((uint64_t)1 << 20)
static int part_end(compact_read_fn fn, void *ctx, uint32_t ent, uint64_t want, uint64_t size,
                    uint64_t *end)
{
    unsigned char b[4096];
    *end = size;
    for (uint64_t at = want - 1; at + 1 < size && at < want + PART_SEEK; at += sizeof b - 1) {
        size_t n = size - at < sizeof b ? (size_t)(size - at) : sizeof b;
        int rc = fn(ctx, ent, at, b, n);
        if (rc) return rc;
        for (size_t i = 1; i < n; i++)
            if (tok_is_word_byte(b[i]) != tok_is_word_byte(b[i - 1])) {
                *end = at + i;
                return 0;
            }
    }
    return 0;
}

/* New file i of nw, larger than the shard size, built into new shards of about that size
 * from index *n on, as pack cuts such a file: each shard one part of it, cut where a token
 * ends, so that reads load the part of their bytes alone (arc_entry_parts) and no build
 * holds more than a shard's content. */
static int build_parts(const arc *old, arc *nw, uint32_t i, uint64_t shard_size, compact_read_fn fn,
                       void *ctx, int level, compact_stats *st, arc_coded **sh, uint32_t *n,
                       uint32_t *cap)
{
    arc_entry *e = &nw->ents[i];
    part_rd rd = {fn, ctx, i, 0, 0, XXH3_createState()};
    uint64_t runs = 0;
    uint32_t first = *n;
    int rc = rd.hs ? 0 : -ENOMEM;
    if (rd.hs) XXH3_64bits_reset(rd.hs);
    while (!rc && rd.at < e->size) {
        uint64_t end = e->size;
        if (e->size - rd.at > shard_size)
            rc = part_end(fn, ctx, i, rd.at + shard_size, e->size, &end);
        if (rc || (rc = room(sh, *n, cap))) break;
        arc g = {0};
        int64_t gsrc = -1;
        compact_stats gs;
        if (!(g.ents = malloc(sizeof *g.ents))) {
            rc = -ENOMEM;
            break;
        }
        g.ents[0] = *e; /* borrowed strings, as build_group's */
        g.ents[0].size = end - rd.at;
        g.nents = 1;
        rc = compact_build(old, &g, &gsrc, part_read, &rd, COMPACT_MAY_REBUILD, &gs);
        if (!rc) rc = arc_shard_encode(g.dict, &g.g, end - rd.at, level, 0, &(*sh)[*n]);
        if (!rc) {
            runs += g.ents[0].root_len;
            add_stats(st, &gs);
            ++*n;
        }
        dict_free(g.dict);
        gram_free(&g.g);
        free(g.byino);
        free(g.ents);
        rd.at = end;
    }
    if (!rc && rd.seq != e->size) { /* read out of order: hash the file again */
        unsigned char b[65536];
        XXH3_64bits_reset(rd.hs);
        for (uint64_t off = 0; !rc && off < e->size; off += sizeof b) {
            size_t k = e->size - off < sizeof b ? (size_t)(e->size - off) : sizeof b;
            if (!(rc = fn(ctx, i, off, b, k))) XXH3_64bits_update(rd.hs, b, k);
        }
    }
    if (!rc) {
        e->shard = first;
        e->root_start = 0;
        e->root_len = runs;
        e->hash = XXH3_64bits_digest(rd.hs);
    }
    XXH3_freeState(rd.hs);
    return rc;
}

/* Whether moving file i is stored as its text: its content comes from a shard stored so with
 * token references (incompressible bytes), or it is new or from a bare shard and its first
 * bytes (read into blk, PACK_TEXT_SAMPLE bytes) do not compress (the trial in cc, NULL: a
 * context of its own). A bare shard's files join the grammar groups like any text: kept as
 * text shards of their own, the few files a compaction moves would pile up in small shards
 * that zstd codes apart; a group as large as BARE_MIN is stored bare where that is smaller
 * (group_bare), as pack stores it. 0 or a negative errno. */
static int text_file(const arc *old, const arc *nw, const int64_t *src, uint32_t i,
                     compact_read_fn fn, void *ctx, unsigned char *blk, ZSTD_CCtx *cc,
                     uint8_t *text)
{
    const arc_entry *e = &nw->ents[i];
    *text = 0;
    int from = src[i] >= 0 ? arc_shard_text(old, old->ents[src[i]].shard) : 2;
    if (from != 2) {
        *text = e->size && from;
        return 0;
    }
    if (e->size < PACK_TEXT_MIN) return 0;
    size_t n = e->size < PACK_TEXT_SAMPLE ? (size_t)e->size : PACK_TEXT_SAMPLE;
    int rc = fn(ctx, i, 0, blk, n);
    if (!rc) *text = (uint8_t)pack_incompressible(cc, blk, n);
    return rc;
}

/* The pieces in text and lens coded as shard *n (stored as its text), their runs in *runs;
 * text and lens left empty. */
static int text_shard(buf *text, vec64 *lens, vec64 *runs, int level, arc_coded **sh, uint32_t *n,
                      uint32_t *cap)
{
    int rc = room(sh, *n, cap);
    runs->n = 0;
    if (!rc) rc = arc_text_shard_encode(lens->p, lens->n, text->p, level, 1, &(*sh)[*n], runs);
    if (!rc) ++*n;
    text->n = lens->n = 0;
    return rc;
}

/* Entries map[0..k) of nw (each of at least one byte) stored as their text, from shard index
 * *n on: one shard holding a piece per file, or, for one file larger than the shard size,
 * shards of about that size, each one part of it cut where a token ends (part_end), as
 * build_parts cuts. */
static int build_text(arc *nw, const int64_t *src, const uint32_t *map, uint32_t k,
                      uint64_t shard_size, compact_read_fn fn, void *ctx, int level,
                      compact_stats *st, arc_coded **sh, uint32_t *n, uint32_t *cap)
{
    buf text = {0};
    vec64 lens = {0}, runs = {0};
    XXH3_state_t *hs = XXH3_createState();
    int rc = hs ? 0 : -ENOMEM;
    int cut = k == 1 && nw->ents[map[0]].size > shard_size;
    for (uint32_t j = 0; j < k && !rc; j++) {
        arc_entry *e = &nw->ents[map[j]];
        XXH3_64bits_reset(hs);
        e->shard = *n; /* the group's shard, or the first part's */
        e->root_start = e->root_len = 0;
        for (uint64_t at = 0, end; !rc && at < e->size; at = end) {
            end = e->size;
            if (cut && e->size - at > shard_size)
                rc = part_end(fn, ctx, map[j], at + shard_size, e->size, &end);
            if (!rc) rc = read_text(fn, ctx, map[j], at, end - at, &text, hs);
            if (!rc && vec64_push(&lens, end - at)) rc = -ENOMEM;
            /* each part of a cut file a shard of its own; a group's files one together */
            if (!rc && (cut || j + 1 == k)) rc = text_shard(&text, &lens, &runs, level, sh, n, cap);
            if (!rc && cut) e->root_len += runs.p[0];
        }
        if (!rc) e->hash = XXH3_64bits_digest(hs);
        if (!rc && src[map[j]] == -1) {
            st->new_files++;
            st->new_bytes += e->size;
        }
    }
    uint64_t start = 0;
    for (uint32_t j = 0; !rc && !cut && j < k; j++) {
        nw->ents[map[j]].root_start = start;
        nw->ents[map[j]].root_len = runs.p[j];
        start += runs.p[j];
    }
    XXH3_freeState(hs);
    buf_free(&text);
    vec64_free(&lens);
    vec64_free(&runs);
    if (rc == -ENOMEM) tdc_error(rc, "out of memory storing files as their text");
    return rc;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint64_t compact_shard_size(const arc *old, uint64_t asked)
{
    if (asked) return asked;
    uint64_t total = 0;
    for (uint32_t s = 0; s < old->nshards; s++)
        total += old->shards[s].bytes;
    uint64_t *b = old->nshards > 1 ? malloc(old->nshards * sizeof *b) : NULL;
    if (b) { /* the median: a shard holding one large file, or the last, does not move it */
        for (uint32_t s = 0; s < old->nshards; s++)
            b[s] = old->shards[s].bytes;
        qsort(b, old->nshards, sizeof *b, by_u64);
        uint64_t mid = b[old->nshards / 2];
        free(b);
        return mid > COMPACT_SHARD_MIN ? mid : COMPACT_SHARD_MIN;
    }
    return total <= PACK_ONE_SHARD_MAX ? PACK_ONE_SHARD_MAX : pack_shard_size(total);
}

int compact_by_shards(const arc *old, uint64_t shard_size)
{
    shard_size = compact_shard_size(old, shard_size);
    return old->nshards > 1 || (old->nshards == 1 &&
                                (old->shards[0].bytes >= shard_size / 2 || arc_shard_text(old, 0)));
}

int compact_shards(const arc *old, arc *nw, const int64_t *src, compact_read_fn fn, void *ctx,
                   uint64_t shard_size, int level, compact_stats *st, arc_coded **out,
                   uint32_t *nout)
{
    plan p = {.old = old, .shard_size = compact_shard_size(old, shard_size)};
    arc_coded *sh = NULL;
    uint32_t *map = malloc((nw->nents ? nw->nents : 1) * sizeof *map), n = 0, cap = 0;
    int rc = map ? make_plan(&p, nw, src) : -ENOMEM;
    memset(st, 0, sizeof *st);
    /* Old shards copied, in their order. */
    for (uint32_t s = 0; !rc && s < old->nshards; s++) {
        p.newidx[s] = -1;
        if (p.rebuild[s] || !p.live[s]) continue;
        if ((rc = room(&sh, n, &cap))) break;
        p.newidx[s] = n;
        rc = arc_shard_ref(old, s, &sh[n]); /* copied by the writer */
        if (!rc) st->rules_after += sh[n++].info.nrules;
    }
    /* Files in place: their run within the same shard, now numbered newidx. */
    for (uint32_t i = 0; !rc && i < nw->nents; i++) {
        arc_entry *e = &nw->ents[i];
        if (e->type != ARC_REG || src[i] < 0 || !in_place(&p, src[i])) continue;
        const arc_entry *o = &old->ents[src[i]];
        e->shard = (uint32_t)p.newidx[o->shard];
        e->root_start = o->root_start - old->shards[o->shard].root_off;
        e->root_len = o->root_len;
        e->hash = o->hash;
    }
    /* Which moving files are stored as their text (as pack decides). */
    uint8_t *text = calloc(nw->nents ? nw->nents : 1, 1);
    unsigned char *blk = malloc(PACK_TEXT_SAMPLE);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    uint32_t ntext = 0;
    if (!rc && (!text || !blk)) rc = tdc_error(-ENOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < nw->nents; i++)
        if (moves(&p, nw, src, i) && !(rc = text_file(old, nw, src, i, fn, ctx, blk, cc, &text[i])))
            ntext += text[i];
    ZSTD_freeCCtx(cc);
    /* Moving content, in path order, into groups of about the shard size: first the grammar
     * shards, then those stored as their text. */
    for (uint8_t pass = 0; pass < 2 && !rc; pass++) {
        uint32_t first = 0;
        while (!rc) {
            uint32_t k = 0;
            uint64_t bytes = 0;
            for (; first < nw->nents; first++) {
                if (!moves(&p, nw, src, first) || text[first] != pass) continue;
                if (k && bytes + nw->ents[first].size > p.shard_size) break;
                map[k++] = first;
                bytes += nw->ents[first].size;
            }
            if (pass) {
                if (!k) break;
                rc = build_text(nw, src, map, k, p.shard_size, fn, ctx, level, st, &sh, &n, &cap);
                continue;
            }
            if (!k && (n || ntext)) break;
            if (k == 1 && nw->ents[map[0]].size > p.shard_size) { /* a file of its own, cut */
                rc = build_parts(old, nw, map[0], p.shard_size, fn, ctx, level, st, &sh, &n, &cap);
                continue;
            }
            if ((rc = room(&sh, n, &cap))) break;
            rc = build_group(old, nw, src, map, k, n, fn, ctx, level, st, &sh[n]);
            if (!rc) n++;
            if (!k) break; /* nothing at all: one empty shard */
        }
    }
    plan_free(&p);
    free(map);
    free(text);
    free(blk);
    if (rc) {
        for (uint32_t k = 0; k < n; k++)
            arc_coded_free(&sh[k]);
        free(sh);
        return rc;
    }
    *out = sh;
    *nout = n;
    return 0;
}
