/* mkcorrupt: generate the corpus of damaged archives and journals in tests/corrupt/.
 *
 * From the fuzz fixture (a small packed tree with text, binary, empty and nested files, a
 * symlink and a hard link) it writes base.tdc and base.journal (edits of every record type
 * made through the vol API), then damaged copies: truncations at every section boundary,
 * flipped bytes in every part, and "structural" damage behind valid checksums (sections
 * re-encoded raw with every checksum recomputed): oversized counts and lengths, rule cycles,
 * rule ids out of range, bad paths ('..', '/', NUL, empty components, duplicates), bad
 * types, modes, ranges, sizes, inodes; and damaged journals. MANIFEST lists each file with
 * what `tadoc verify` must answer:
 *   FILE<TAB>EXIT<TAB>MESSAGE<TAB>RECORDS
 * FILE is an archive (*.tdc, used without a journal) or a journal (*.journal, used beside
 * base.tdc); EXIT the exit status; MESSAGE a substring of the output; RECORDS, for journals
 * whose damaged tail is dropped, "K:OFFSET": K leading records still apply, and the tree must
 * equal that of base.journal cut at byte OFFSET (after them); else "-".
 * usage: mkcorrupt OUTDIR */
#include "../fuzz/fuzz.h"
#include "../../engine/volume/jrec.h"
#include "../../engine/base/tok.h"
#include "sarc.h"

static const char *outdir;
static FILE *manifest;
static unsigned char *base;
static size_t nbase;
static int ncases;

static void emit(const char *name, const void *p, size_t n, int code, const char *msg,
                 const char *records)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    fz_write(path, p, n);
    fprintf(manifest, "%s\t%d\t%s\t%s\n", name, code, msg, records ? records : "-");
    ncases++;
}

#define OK(x)                                                                                      \
    do {                                                                                           \
        int ok_rc_ = (x);                                                                          \
        if (ok_rc_) {                                                                              \
            fprintf(stderr, "mkcorrupt: line %d: %s returned %d\n", __LINE__, #x, ok_rc_);        \
            fz_die(#x);                                                                            \
        }                                                                                          \
    } while (0)

/* The dictionary stored with the front-coded codec (zstd-front) around a damaged front
 * coding, behind valid checksums: a prefix longer than the token before it, a truncated
 * coding; and the intact coding, which must open. */
static void front_case(const sarc *a, const char *name, const unsigned char *fc, size_t n, int code,
                       const char *msg)
{
    sarc b = *a;
    buf z = {0}, o = {0};
    OK(buf_reserve(&z, ZSTD_compressBound(n)));
    z.n = ZSTD_compress(z.p, ZSTD_compressBound(n), fc, n, 3);
    OK(ZSTD_isError(z.n));
    b.sec[0] = z;
    sarc_save(&b, &o);
    unsigned char *e = sarc_entry(o.p, 0);
    st32(e + ARC_SECENT_CODEC, 2);
    st64(e + ARC_SECENT_RAW, a->sec[0].n);
    sarc_seal(o.p, le64(o.p + ARC_HDR_TABLE), b.nsec);
    emit(name, o.p, o.n, code, msg, NULL);
    buf_free(&z);
    buf_free(&o);
}

static void front_cases(const sarc *a)
{
    buf fc = {0};
    OK(dict_front_encode(a->sec[0].p, a->sec[0].n, &fc));
    front_case(a, "front-good.tdc", fc.p, fc.n, 0, "ok:");
    const unsigned char longpre[] = {1, 3, 1, 'a'};
    front_case(a, "front-prefix.tdc", longpre, sizeof longpre, 3, "bad front coding of token 0");
    front_case(a, "front-short.tdc", fc.p, fc.n - 1, 3,
               "dictionary: front coding does not match the declared size");
    buf_free(&fc);
}

/* ---- section contents, decoded ---- */

typedef struct syms {
    uint64_t n;
    uint32_t *s;
} syms;

static void put_planes(buf *b, const uint32_t *s, uint64_t n)
{
    for (int k = 0; k < 4; k++)
        for (uint64_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)(s[i] >> (8 * k));
            buf_put(b, &c, 1);
        }
}

static void get_planes(rd *r, uint32_t *s, uint64_t n)
{
    const unsigned char *p;
    if (rd_bytes(r, 4 * n, &p)) fz_die("planes");
    for (uint64_t i = 0; i < n; i++)
        s[i] = (uint32_t)p[i] | (uint32_t)p[n + i] << 8 | (uint32_t)p[2 * n + i] << 16 |
               (uint32_t)p[3 * n + i] << 24;
}

typedef struct rules {
    uint64_t nr, nsyms;
    uint64_t lens[4096];
    uint32_t s[65536];
} rules;

static void dec_rules(const buf *b, rules *R)
{
    rd r = {b->p, b->p + b->n};
    if (rd_varint(&r, &R->nr) || R->nr > 4096) fz_die("rules");
    R->nsyms = 0;
    for (uint64_t i = 0; i < R->nr; i++) {
        if (rd_varint(&r, &R->lens[i])) fz_die("rules");
        R->nsyms += R->lens[i];
    }
    if (R->nsyms > 65536) fz_die("rules");
    get_planes(&r, R->s, R->nsyms);
}

static void enc_rules(buf *b, const rules *R, uint64_t nr_decl)
{
    b->n = 0;
    buf_put_varint(b, nr_decl);
    for (uint64_t i = 0; i < R->nr; i++)
        buf_put_varint(b, R->lens[i]);
    put_planes(b, R->s, R->nsyms);
}

static uint32_t ntokens(const sarc *a)
{
    rd r = {a->sec[0].p, a->sec[0].p + a->sec[0].n};
    uint64_t n;
    if (rd_varint(&r, &n)) fz_die("dict");
    return (uint32_t)n;
}

/* Version 4: rewrite the shard table so that each shard's root symbols, tokens and rules are
 * the counts its sections declare (for damage meant to be found past the shard table). */
static int fixshards;

static void fix_shards(sarc *a)
{
    if (a->version < 4) return;
    uint32_t ns = (a->nsec - 2) / 3;
    buf *t = &a->sec[a->nsec - 1], o = {0};
    rd r = {t->p, t->p + t->n};
    uint64_t cnt, v[4];
    if (rd_varint(&r, &cnt)) fz_die("shard table");
    buf_put_varint(&o, cnt);
    for (uint32_t k = 0; k < ns; k++) {
        for (int i = 0; i < 4; i++)
            if (rd_varint(&r, &v[i])) fz_die("shard table");
        uint64_t c[3];
        for (int i = 0; i < 3; i++) {
            rd q = {a->sec[3 * k + i].p, a->sec[3 * k + i].p + a->sec[3 * k + i].n};
            if (rd_varint(&q, &c[i])) fz_die("section count");
        }
        buf_put_varint(&o, v[0]);
        buf_put_varint(&o, c[2]); /* root symbols */
        buf_put_varint(&o, c[0]); /* tokens */
        buf_put_varint(&o, c[1]); /* rules */
    }
    buf_put(&o, r.p, (size_t)(r.end - r.p));
    buf_free(t);
    *t = o;
}

/* Write `a` (raw sections, checksums fixed) as a case. */
static void emit_sarc(const char *name, const sarc *a, int code, const char *msg)
{
    buf o = {0};
    if (fixshards) {
        sarc b = *a;
        buf t = {0};
        buf_put(&t, a->sec[a->nsec - 1].p, a->sec[a->nsec - 1].n);
        b.sec[a->nsec - 1] = t;
        fix_shards(&b);
        sarc_save(&b, &o);
        buf_free(&b.sec[a->nsec - 1]);
    } else {
        sarc_save(a, &o);
    }
    emit(name, o.p, o.n, code, msg, NULL);
    buf_free(&o);
}

/* Copy of the base archive split into raw sections. */
static void load(sarc *a)
{
    if (sarc_load(base, nbase, a)) fz_die("base");
}

/* Replace the bytes [off, off+len) of section `i` with `rep`. */
static void sec_splice(sarc *a, int i, size_t off, size_t len, const void *rep, size_t rn)
{
    buf *b = &a->sec[i], o = {0};
    buf_put(&o, b->p, off);
    buf_put(&o, rep, rn);
    buf_put(&o, b->p + off + len, b->n - off - len);
    buf_free(b);
    *b = o;
}

static size_t find(const buf *b, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= b->n; i++)
        if (!memcmp(b->p + i, s, n)) return i;
    fz_die(s);
    return 0;
}

/* 70 rules each twice the one before (never used by a file): 2^70 bytes. */
static void doubling(rules *R, uint32_t nt)
{
    R->s[R->nsyms] = 0, R->s[R->nsyms + 1] = 0, R->lens[R->nr] = 2, R->nsyms += 2, R->nr++;
    for (int k = 0; k < 70; k++) {
        R->s[R->nsyms] = R->s[R->nsyms + 1] = nt + (uint32_t)R->nr;
        R->lens[R->nr++] = 2, R->nsyms += 2;
    }
}

typedef struct flip {
    size_t at;
    const char *msg;
} flip;

static void archive_cases(void)
{
    char name[128], msg[256];
    sarc a;
    load(&a);
    /* Offsets of the parts of the base (zstd) archive. */
    arc_header h;
    arc_header_decode(base, &h);
    uint64_t toff = h.table;
    uint32_t nsec = h.nsec;
    uint64_t off[8], stored[8];
    for (uint32_t i = 0; i < nsec; i++) {
        arc_secinfo e;
        arc_secent_decode(base + toff + i * ARC_SECENT_SIZE, &e);
        off[i] = e.offset;
        stored[i] = e.stored;
    }
    static const char *sname[] = {"dictionary", "rules", "root", "file table", "shard table"};
    /* Truncations: inside the header, at and inside every section, inside the table. */
    size_t cuts[64], nc = 0;
    cuts[nc++] = 0;
    cuts[nc++] = 8;
    cuts[nc++] = ARC_HDR_SIZE - 1;
    cuts[nc++] = ARC_HDR_SIZE;
    for (uint32_t i = 0; i < nsec; i++) {
        cuts[nc++] = off[i] + 1;
        cuts[nc++] = off[i] + stored[i] / 2;
        cuts[nc++] = off[i] + stored[i];
    }
    cuts[nc++] = toff + 20;
    cuts[nc++] = nbase - 8;
    cuts[nc++] = nbase - 1;
    for (size_t k = 0; k < nc; k++) {
        snprintf(name, sizeof name, "trunc-%05zu.tdc", cuts[k]);
        emit(name, base, cuts[k], 3,
             cuts[k] < ARC_HDR_SIZE ? "too short to be an archive" : "section table lies outside the file",
             NULL);
    }
    /* Flipped bytes: magic, header fields, each section (first, middle, last byte), table. */
    unsigned char *p = malloc(nbase);
    flip flips[64];
    size_t nf = 0;
    flips[nf++] = (flip){0, "bad magic"};
    flips[nf++] = (flip){ARC_HDR_VERSION + 1, "header checksum mismatch"};
    flips[nf++] = (flip){ARC_HDR_TABLE + 1, "header checksum mismatch"};
    flips[nf++] = (flip){ARC_HDR_SUM + 3, "header checksum mismatch"};
    static char smsg[5][64];
    for (uint32_t i = 0; i < nsec && i < 5; i++) {
        snprintf(smsg[i], sizeof smsg[i], "section %s: checksum mismatch", sname[i]);
        flips[nf++] = (flip){off[i], smsg[i]};
        flips[nf++] = (flip){off[i] + stored[i] / 2, smsg[i]};
        flips[nf++] = (flip){off[i] + stored[i] - 1, smsg[i]};
    }
    for (uint32_t i = 0; i < nsec; i++)
        for (int f = 0; f < ARC_SECENT_SIZE; f += 8)
            flips[nf++] = (flip){toff + i * ARC_SECENT_SIZE + f, "section table checksum mismatch"};
    flips[nf++] = (flip){nbase - 1, "section table checksum mismatch"};
    for (size_t k = 0; k < nf; k++) {
        memcpy(p, base, nbase);
        p[flips[k].at] ^= 0x5a;
        snprintf(name, sizeof name, "flip-%05zu.tdc", flips[k].at);
        emit(name, p, nbase, 3, flips[k].msg, NULL);
    }
    free(p);

    /* Header and table damage behind valid checksums. */
    buf o = {0};
    sarc_save(&a, &o);
    emit("raw-good.tdc", o.p, o.n, 0, "ok:", NULL);
    uint64_t rtoff = le64(o.p + ARC_HDR_TABLE);
    unsigned char *e0 = sarc_entry(o.p, 0), *e1 = sarc_entry(o.p, 1);
#define REHASH() sarc_seal(o.p, rtoff, nsec)
    unsigned char *save = malloc(o.n);
    memcpy(save, o.p, o.n);
    st32(o.p + ARC_HDR_VERSION, ARC_VERSION + 1), REHASH();
    emit("hdr-version-next.tdc", o.p, o.n, 3, "unsupported archive version", NULL);
    memcpy(o.p, save, o.n), st32(o.p + ARC_HDR_NSEC, 9), REHASH();
    emit("hdr-nsec9.tdc", o.p, o.n, 3, "section table lies outside the file", NULL);
    memcpy(o.p, save, o.n), st32(o.p + ARC_HDR_NSEC, 3), REHASH();
    emit("hdr-nsec3.tdc", o.p, o.n, 3, "section table lies outside the file", NULL);
    memcpy(o.p, save, o.n), st64(o.p + ARC_HDR_TABLE, o.n), REHASH();
    emit("hdr-tableoff.tdc", o.p, o.n, 3, "section table lies outside the file", NULL);
    memcpy(o.p, save, o.n), st32(e0 + ARC_SECENT_TYPE, 2), st32(e1 + ARC_SECENT_TYPE, 1), REHASH();
    emit("tab-typeswap.tdc", o.p, o.n, 3, "where a dictionary belongs", NULL);
    memcpy(o.p, save, o.n), st32(e0 + ARC_SECENT_CODEC, 8), REHASH(); /* past the last codec */
    emit("tab-codec8.tdc", o.p, o.n, 3, "has a bad table entry", NULL);
    memcpy(o.p, save, o.n), st32(e0 + ARC_SECENT_CODEC, 7), REHASH(); /* bare: one section */
    emit("tab-bare-one.tdc", o.p, o.n, 3, "stored as text in some sections only", NULL);
    memcpy(o.p, save, o.n), st64(e1 + ARC_SECENT_OFFSET, o.n), REHASH();
    emit("tab-offset.tdc", o.p, o.n, 3, "has a bad table entry", NULL);
    memcpy(o.p, save, o.n), st64(e1 + ARC_SECENT_STORED, o.n), REHASH();
    emit("tab-stored.tdc", o.p, o.n, 3, "has a bad table entry", NULL);
    memcpy(o.p, save, o.n), st64(e0 + ARC_SECENT_RAW, (uint64_t)1 << 50), REHASH();
    emit("tab-rawhuge.tdc", o.p, o.n, 3, "is impossible", NULL);
    memcpy(o.p, save, o.n), st32(e0 + ARC_SECENT_CODEC, 1), st64(e0 + ARC_SECENT_RAW, 1 << 20),
        REHASH();
    emit("tab-notzstd.tdc", o.p, o.n, 3, "compressed frame does not match declared size", NULL);
    memcpy(o.p, save, o.n), st32(e1 + ARC_SECENT_CODEC, 2), REHASH();
    emit("tab-front-rules.tdc", o.p, o.n, 3, "(rules) has a bad table entry", NULL);
    memcpy(o.p, save, o.n), st32(e0 + ARC_SECENT_CODEC, 2), REHASH();
    emit("tab-front-notzstd.tdc", o.p, o.n, 3, "compressed frame does not match declared size",
         NULL);
#undef REHASH
    free(save);
    buf_free(&o);
    front_cases(&a);

    /* Dictionary. */
    sarc_free(&a), load(&a);
    unsigned char v[16];
    buf vb = {0};
    buf_put_varint(&vb, (uint64_t)1 << 40);
    {
        rd r = {a.sec[0].p, a.sec[0].p + a.sec[0].n};
        uint64_t n, l0;
        rd_varint(&r, &n);
        size_t at = (size_t)(r.p - a.sec[0].p);
        rd_varint(&r, &l0);
        sarc_free(&a), load(&a);
        sec_splice(&a, 0, 0, at, vb.p, vb.n);
        emit_sarc("dict-count-huge.tdc", &a, 3, "dictionary: bad token count");
        sarc_free(&a), load(&a);
        v[0] = 0;
        sec_splice(&a, 0, at, 1, v, 1);
        emit_sarc("dict-len0.tdc", &a, 3, "dictionary: bad length of token 0");
        sarc_free(&a), load(&a);
        buf w = {0};
        buf_put_varint(&w, 5000);
        sec_splice(&a, 0, at, 1, w.p, w.n);
        buf_free(&w);
        emit_sarc("dict-len-huge.tdc", &a, 3, "dictionary: bad length of token 0");
        sarc_free(&a), load(&a);
        a.sec[0].n--;
        emit_sarc("dict-blob-short.tdc", &a, 3, "dictionary: blob is");
        sarc_free(&a), load(&a);
        buf_put(&a.sec[0], "x", 1);
        emit_sarc("dict-trailing.tdc", &a, 3, "dictionary: blob is");
        /* A token mixing word and separator bytes: turn the first byte of a word into '.'. */
        sarc_free(&a), load(&a);
        size_t blob = a.sec[0].n;
        uint64_t sum = 0;
        rd r2 = {a.sec[0].p, a.sec[0].p + a.sec[0].n};
        rd_varint(&r2, &n);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t l;
            rd_varint(&r2, &l);
            sum += l;
        }
        blob -= sum;
        size_t k = blob;
        while (k < a.sec[0].n && !(tok_is_word_byte(a.sec[0].p[k]) && k + 1 < a.sec[0].n &&
                                   tok_is_word_byte(a.sec[0].p[k + 1])))
            k++;
        a.sec[0].p[k + 1] = '.';
        emit_sarc("dict-mixed-token.tdc", &a, 3, "mixes word and separator bytes");
    }
    buf_free(&vb);

    /* Rules. */
    static rules R, R0;
    sarc_free(&a), load(&a);
    uint32_t nt = ntokens(&a);
    dec_rules(&a.sec[1], &R0);
    if (R0.nr < 3) fz_die("base has too few rules");
#define RULES_CASE(file, msg, nrdecl, body)                                                        \
    do {                                                                                           \
        sarc_free(&a), load(&a);                                                                   \
        R = R0;                                                                                    \
        body;                                                                                      \
        enc_rules(&a.sec[1], &R, nrdecl);                                                          \
        emit_sarc(file, &a, 3, msg);                                                               \
    } while (0)
    RULES_CASE("rules-count-huge.tdc", "rules: bad rule count", (uint64_t)1 << 40, (void)0);
    RULES_CASE("rules-count-short.tdc", "rules:", R.nr - 1, R.nr--);
    RULES_CASE("rules-len0.tdc", "rules: bad length of rule 1", R.nr, R.lens[0] = 0);
    RULES_CASE("rules-len-huge.tdc", "rules: bad length of rule 1", R.nr, R.lens[0] += 100000);
    RULES_CASE("rules-len-long.tdc", "rules: symbol count too large", R.nr, R.lens[0] += 3);
    RULES_CASE("rules-syms-short.tdc", "rules: symbol count too large", R.nr, R.nsyms--);
    RULES_CASE("rules-selfcycle.tdc", "rules: cycle through rule 1", R.nr, R.s[0] = nt + 1);
    RULES_CASE("rules-cycle2.tdc", "rules: cycle through rule", R.nr,
               (R.s[0] = nt + 2, R.s[R.lens[0]] = nt + 1));
    snprintf(msg, sizeof msg, "rules: rule 1 refers to rule %llu (out of range)",
             (unsigned long long)R0.nr + 1);
    RULES_CASE("rules-id-range.tdc", msg, R.nr, R.s[0] = nt + (uint32_t)R.nr + 1);
    RULES_CASE("rules-id-huge.tdc", "out of range", R.nr, R.s[0] = 0xfffffff0u);
    RULES_CASE("rules-id-zero.tdc", "rules: rule 1 refers to rule 0", R.nr, R.s[0] = nt);
    /* 70 rules each twice the one before: an expansion of 2^70 bytes. */
    fixshards = 1; /* the shard table agrees: the overflow is what is found */
    RULES_CASE("rules-doubling.tdc", "overflows", R.nr, doubling(&R, nt));
    fixshards = 0;
    sarc_free(&a), load(&a);
    buf_put(&a.sec[1], "z", 1);
    emit_sarc("rules-trailing.tdc", &a, 3, "rules: trailing bytes");

    /* Root. */
    {
        sarc_free(&a), load(&a);
        rd r = {a.sec[2].p, a.sec[2].p + a.sec[2].n};
        uint64_t n;
        rd_varint(&r, &n);
        uint32_t *s = malloc(n * sizeof *s);
        get_planes(&r, s, n);
        buf b = {0};
#define ROOT_CASE(file, msg, ndecl, nsyms)                                                         \
    do {                                                                                           \
        sarc_free(&a), load(&a);                                                                   \
        b.n = 0;                                                                                   \
        buf_put_varint(&b, ndecl);                                                                 \
        put_planes(&b, s, nsyms);                                                                  \
        buf_free(&a.sec[2]);                                                                       \
        a.sec[2] = b;                                                                              \
        b = (buf){0};                                                                              \
        emit_sarc(file, &a, 3, msg);                                                               \
    } while (0)
        ROOT_CASE("root-count-huge.tdc", "root: symbol count too large", (uint64_t)1 << 40, n);
        fixshards = 1; /* the shard table agrees: the file runs no longer fit */
        ROOT_CASE("root-short.tdc", "root range", n - 1, n - 1);
        fixshards = 0;
        /* the root one symbol short of what the shard table says */
        ROOT_CASE("shards-root-mismatch.tdc", "grammar does not match the shard table", n - 1,
                  n - 1);
        uint32_t s0 = s[0];
        s[0] = nt + (uint32_t)R0.nr + 1;
        ROOT_CASE("root-id-range.tdc", "root: symbol 0 refers to rule", n, n);
        s[0] = nt;
        ROOT_CASE("root-id-zero.tdc", "root: symbol 0 refers to rule 0", n, n);
        s[0] = s0 == 0 ? 1 : 0;
        ROOT_CASE("root-wrong-symbol.tdc", "records", n, n);
        s[0] = s0;
        sarc_free(&a), load(&a);
        buf_put(&a.sec[2], "z", 1);
        emit_sarc("root-trailing.tdc", &a, 3, "root: trailing bytes");
        free(s);
    }

    /* File table, byte level. */
    {
        sarc_free(&a), load(&a);
        size_t at = find(&a.sec[3], "b.c");
        a.sec[3].p[at + 1] = 0;
        emit_sarc("files-path-nul.tdc", &a, 3, "entry 3 is truncated or malformed");
        sarc_free(&a), load(&a);
        buf_put(&a.sec[3], "z", 1);
        emit_sarc("files-trailing.tdc", &a, 3, "file table: trailing bytes");
        sarc_free(&a), load(&a);
        a.sec[3].n -= 3;
        emit_sarc("files-truncated.tdc", &a, 3, "is truncated or malformed");
        sarc_free(&a), load(&a);
        rd r = {a.sec[3].p + 16, a.sec[3].p + a.sec[3].n};
        uint64_t x;
        rd_varint(&r, &x);
        size_t c0 = (size_t)(r.p - a.sec[3].p);
        rd_varint(&r, &x);
        size_t c1 = (size_t)(r.p - a.sec[3].p);
        buf w = {0};
        buf_put_varint(&w, (uint64_t)1 << 40);
        sec_splice(&a, 3, c0, c1 - c0, w.p, w.n);
        emit_sarc("files-count-huge.tdc", &a, 3, "file table: bad entry count");
        sarc_free(&a), load(&a);
        w.n = 0;
        buf_put_varint(&w, 0);
        sec_splice(&a, 3, c0, c1 - c0, w.p, w.n);
        emit_sarc("files-count-zero.tdc", &a, 3, "file table: bad entry count");
        sarc_free(&a), load(&a);
        w.n = 0;
        buf_put_varint(&w, (uint64_t)1 << 61);
        sec_splice(&a, 3, 16, c0 - 16, w.p, w.n);
        emit_sarc("files-next-ino-huge.tdc", &a, 3, "file table: bad header");
        sarc_free(&a), load(&a);
        w.n = 0;
        buf_put_varint(&w, 3);
        sec_splice(&a, 3, 16, c0 - 16, w.p, w.n);
        emit_sarc("files-next-ino-low.tdc", &a, 3, "has bad inode number");
        buf_free(&w);
    }

    /* Shard table (version 4: the last section) and the shard field of the file table. */
    if (a.version >= 4) {
        uint32_t st = a.nsec - 1;
        buf w = {0};
        sarc_free(&a), load(&a);
        buf_put_varint(&w, (a.nsec - 2) / 3 + 1);
        sec_splice(&a, st, 0, 1, w.p, w.n);
        emit_sarc("shards-count.tdc", &a, 3, "shard table: shard count does not match the sections");
        sarc_free(&a), load(&a);
        a.sec[st].n--;
        emit_sarc("shards-truncated.tdc", &a, 3, "shard table: shard 0 is malformed");
        sarc_free(&a), load(&a);
        buf_put(&a.sec[st], "z", 1);
        emit_sarc("shards-trailing.tdc", &a, 3, "shard table: trailing bytes");
        /* shard 0's token count (its third varint) beyond 2^31 */
        sarc_free(&a), load(&a);
        {
            rd r = {a.sec[st].p, a.sec[st].p + a.sec[st].n};
            uint64_t x;
            rd_varint(&r, &x), rd_varint(&r, &x), rd_varint(&r, &x);
            size_t c0 = (size_t)(r.p - a.sec[st].p);
            rd_varint(&r, &x);
            size_t c1 = (size_t)(r.p - a.sec[st].p);
            w.n = 0;
            buf_put_varint(&w, (uint64_t)1 << 31);
            sec_splice(&a, st, c0, c1 - c0, w.p, w.n);
            emit_sarc("shards-tokens-huge.tdc", &a, 3, "shard table: shard 0 is malformed");
        }
        /* the root directory's entry names shard 1 of an archive of one shard: its shard
         * field follows the header (16 bytes, next inode, count) and the entry's path (""),
         * type, mode, uid, gid, mtime, nsec and size */
        sarc_free(&a), load(&a);
        {
            buf *f = &a.sec[a.nsec - 2];
            rd r = {f->p + 16, f->p + f->n};
            uint64_t x;
            const unsigned char *tb;
            rd_varint(&r, &x), rd_varint(&r, &x), rd_varint(&r, &x);
            rd_bytes(&r, 1, &tb);
            for (int i = 0; i < 6; i++)
                rd_varint(&r, &x);
            size_t c0 = (size_t)(r.p - f->p);
            rd_varint(&r, &x);
            if (x != 0) fz_die("root entry shard");
            w.n = 0;
            buf_put_varint(&w, (a.nsec - 2) / 3);
            sec_splice(&a, a.nsec - 2, c0, 1, w.p, w.n);
            emit_sarc("ent-shard-range.tdc", &a, 3, "has a bad shard or root range");
        }
        buf_free(&w);
    }
    sarc_free(&a);
}

/* File-table damage made through the arc API (arc_write keeps checksums valid). */
static void entry_cases(const char *basepath)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/entry.tmp.tdc", fz_tmpdir());
    struct {
        const char *name, *msg;
        int code;
    } cs[] = {
        {"ent-dotdot.tdc", "'..' component", 3},
        {"ent-dot.tdc", "'.' component", 3},
        {"ent-absolute.tdc", "absolute path", 3},
        {"ent-empty-component.tdc", "empty component", 3},
        {"ent-duplicate.tdc", "is duplicated or out of order", 3},
        {"ent-order.tdc", "is duplicated or out of order", 3},
        {"ent-type.tdc", "has unknown type 9", 3},
        {"ent-mode.tdc", "has bad mode, owner or time", 3},
        {"ent-nsec.tdc", "has bad mode, owner or time", 3},
        {"ent-ctime-nsec.tdc", "has bad mode, owner or time", 3},
        {"ent-atime-nsec.tdc", "has bad mode, owner or time", 3},
        {"ent-root-range.tdc", "has a bad root range", 3},
        {"ent-dir-range.tdc", "has a bad root range", 3},
        {"ent-size.tdc", "records", 3},
        {"ent-link-empty.tdc", "has a bad symlink target", 3},
        {"ent-link-on-file.tdc", "has a bad symlink target", 3},
        {"ent-link-size.tdc", "has a bad symlink size", 3},
        {"ent-noparent.tdc", "has no parent directory", 3},
        {"ent-parent-file.tdc", "has no parent directory", 3},
        {"ent-root-not-dir.tdc", "first entry is not the root directory", 3},
        {"ent-root-ino.tdc", "root is not inode 1", 3},
        {"ent-hardlink-differs.tdc", "but differs", 3},
        {"ent-dir-shares-ino.tdc", "but differs", 3},
        {"ent-fifo-size.tdc", "special file 'd/e/empty' has a size", 3},
        {"ent-xattr-order.tdc", "is truncated or malformed", 3},
        {"ent-hash.tdc", "content hash mismatch", 3},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        arc *a;
        if (arc_open(basepath, &a) || arc_own_strs(a)) fz_die("open base");
        int64_t ia = arc_lookup(a, "a.txt"), id = arc_lookup(a, "d"), ib = arc_lookup(a, "d/b.c"),
                il = arc_lookup(a, "d/l"), ih = arc_lookup(a, "d/hard"),
                ie = arc_lookup(a, "d/e/empty"), ibin = arc_lookup(a, "d/bin");
        if (ia < 0 || id < 0 || ib < 0 || il < 0 || ih < 0 || ie < 0 || ibin < 0)
            fz_die("base layout");
        arc_entry *E = a->ents;
        const char *n = cs[k].name;
#define REPATH(i, s) (free(E[i].path), E[i].path = strdup(s))
        if (!strcmp(n, "ent-dotdot.tdc")) REPATH(ie, "d/e/../../x");
        if (!strcmp(n, "ent-dot.tdc")) REPATH(ie, "d/e/./empty");
        if (!strcmp(n, "ent-absolute.tdc")) REPATH(ia, "/etc/passwd");
        if (!strcmp(n, "ent-empty-component.tdc")) REPATH(ie, "d/e//empty");
        if (!strcmp(n, "ent-duplicate.tdc")) REPATH(ibin, "d/b.c");
        if (!strcmp(n, "ent-order.tdc")) REPATH(ia, "zzz");
        if (!strcmp(n, "ent-type.tdc")) E[ib].type = 9;
        if (!strcmp(n, "ent-mode.tdc")) E[ib].mode = 010644;
        if (!strcmp(n, "ent-nsec.tdc")) E[ib].mtime_nsec = 1000000000u;
        if (!strcmp(n, "ent-ctime-nsec.tdc")) E[ib].ctime_nsec = 1000000000u;
        if (!strcmp(n, "ent-atime-nsec.tdc")) E[ib].atime_nsec = 1000000000u;
        if (!strcmp(n, "ent-root-range.tdc")) E[ib].root_len = a->g.root.n + 5;
        if (!strcmp(n, "ent-dir-range.tdc")) E[id].root_len = 1;
        if (!strcmp(n, "ent-size.tdc")) E[ib].size += 1;
        if (!strcmp(n, "ent-link-empty.tdc")) free(E[il].link), E[il].link = NULL;
        if (!strcmp(n, "ent-link-on-file.tdc")) E[ib].link = strdup("x");
        if (!strcmp(n, "ent-link-size.tdc")) E[il].size = 99;
        if (!strcmp(n, "ent-noparent.tdc")) REPATH(ie, "d/f/empty");
        if (!strcmp(n, "ent-parent-file.tdc")) E[arc_lookup(a, "d/e")].type = ARC_REG;
        if (!strcmp(n, "ent-root-not-dir.tdc")) E[0].type = ARC_REG;
        if (!strcmp(n, "ent-root-ino.tdc")) E[0].ino = 7;
        if (!strcmp(n, "ent-hardlink-differs.tdc")) E[ih].mode ^= 0100;
        if (!strcmp(n, "ent-dir-shares-ino.tdc")) E[id].ino = E[ib].ino;
        if (!strcmp(n, "ent-fifo-size.tdc")) E[ie].type = ARC_FIFO, E[ie].size = 3;
        if (!strcmp(n, "ent-hash.tdc")) E[ib].hash ^= 1;
        if (!strcmp(n, "ent-xattr-order.tdc")) {
            E[ib].xattrs = calloc(2, sizeof *E[ib].xattrs);
            E[ib].xattrs[0] = (arc_xattr){strdup("b"), (unsigned char *)strdup("1"), 1};
            E[ib].xattrs[1] = (arc_xattr){strdup("a"), (unsigned char *)strdup("2"), 1};
            E[ib].nxattrs = 2;
        }
        OK(arc_write_unchecked(tmp, a, 3));
        arc_free(a);
        size_t n2;
        unsigned char *p = fz_read(tmp, &n2);
        emit(n, p, n2, cs[k].code, cs[k].msg, NULL);
        free(p);
        unlink(tmp);
    }
}

/* ---- journals ---- */

static uint64_t recs_end[64];
static int nrecs;

static void scan_records(const unsigned char *p, size_t n)
{
    uint64_t off = JRNL_HDR;
    nrecs = 0;
    recs_end[0] = off;
    while (n - off >= JRNL_REC_OVERHEAD) {
        off += JRNL_REC_OVERHEAD + (uint64_t)le32(p + off + JRNL_REC_LEN);
        recs_end[++nrecs] = off;
    }
}

/* "K:OFFSET": K records apply, base.journal cut at OFFSET is the same journal. */
static const char *good(char *k, size_t cap, int r)
{
    snprintf(k, cap, "%d:%llu", r, (unsigned long long)recs_end[r]);
    return k;
}

static void journal_cases(const unsigned char *j, size_t n)
{
    char name[128], k[40];
    unsigned char *p = malloc(n + 8192);
    scan_records(j, n);
    int last = nrecs;
    emit("j-good.journal", j, n, 0, "journal:", NULL);
    /* Header. */
    emit("j-hdr-short.journal", j, 10, 3, "journal header is damaged", NULL);
    memcpy(p, j, n), p[JRNL_HDR_MAGIC + 1] ^= 1;
    emit("j-hdr-magic.journal", p, n, 3, "journal header is damaged", NULL);
    memcpy(p, j, n), p[JRNL_HDR_ID + 4] ^= 1;
    emit("j-hdr-checksum.journal", p, n, 3, "journal header is damaged", NULL);
    memcpy(p, j, n), st32(p + JRNL_HDR_VERSION, JRNL_VERSION + 1), jrnl_header_seal(p);
    emit("j-hdr-version.journal", p, n, 3, "journal header is damaged", NULL);
    memcpy(p, j, n), st64(p + JRNL_HDR_ID, 0x1234), jrnl_header_seal(p);
    emit("j-other-archive.journal", p, n, 3, "journal belongs to another archive", NULL);
    /* Torn tails: cut inside every record (0 records.. last-1 apply). */
    for (int r = 0; r < last; r++) {
        snprintf(name, sizeof name, "j-torn-%02d.journal", r);
        good(k, sizeof k, r);
        uint64_t cut = recs_end[r] + (recs_end[r + 1] - recs_end[r]) / 2;
        emit(name, j, cut, 0, "torn last record", k);
        snprintf(name, sizeof name, "j-torn-head-%02d.journal", r);
        emit(name, j, recs_end[r] + 5, 0, "torn record header", k);
    }
    /* A flipped byte in every record: that record and the rest are dropped. */
    for (int r = 0; r < last; r++) {
        memcpy(p, j, n);
        p[recs_end[r] + JRNL_REC_BODY + 2] ^= 0x20;
        snprintf(name, sizeof name, "j-flip-%02d.journal", r);
        good(k, sizeof k, r);
        emit(name, p, n, 3, "checksum mismatch", k);
    }
    good(k, sizeof k, last);
    memset(p, 0, n + 4096), memcpy(p, j, n);
    emit("j-zero-tail.journal", p, n + 4096, 0, "zero-filled tail", k);
    memcpy(p, j, n), memcpy(p + n, "garbage!garbage!garbage!garbage!", 32);
    emit("j-garbage-tail.journal", p, n + 32, 3, "damaged", k);
    /* Behind valid checksums. */
    good(k, sizeof k, last - 1);
    unsigned char *lastrec = p + recs_end[last - 1];
    memcpy(p, j, n), st64(lastrec + JRNL_REC_SEQ, 99), jrnl_rec_seal(lastrec);
    emit("j-seq-gap.journal", p, n, 3, "sequence gap", k);
    memcpy(p, j, n), st32(lastrec + JRNL_REC_TYPE, 77), jrnl_rec_seal(lastrec);
    emit("j-type-unknown.journal", p, n, 3, "unknown record type", k);
    memcpy(p, j, n), st32(lastrec + JRNL_REC_LEN, 0x7fffffff);
    emit("j-len-huge.journal", p, n, 3, "impossible record length", k);
    free(p);
}

/* A journal of one record with `body` (the record's fields, or bytes that are not), bound to
 * the archive's identity. */
static void one_record(const char *name, uint64_t id, uint32_t type, const buf *body,
                       const char *msg)
{
    buf b = {0};
    unsigned char h[JRNL_HDR];
    jrnl_header_encode(h, id);
    OK(buf_put(&b, h, JRNL_HDR));
    OK(jrnl_rec_encode(&b, type, 1, body->p, body->n, NULL, 0));
    emit(name, b.p, b.n, 3, msg, NULL);
    buf_free(&b);
}

/* A journal of the one record r. */
static void one_jrec(const char *name, uint64_t id, const jrec *r, const char *msg)
{
    buf b = {0};
    OK(jrec_encode(r, &b));
    one_record(name, id, r->type, &b, msg);
    buf_free(&b);
}

/* A record of `type` at time T0 (any time serves); the caller fills the rest. */
static jrec rec_of(uint32_t type)
{
    return (jrec){.type = type, .time = {.tv_sec = -1}};
}

/* A CREATE record with the fields the cases vary. */
static const jrec *create(jrec *r, uint64_t ino, uint64_t parent, uint32_t mode, const char *name,
                          const char *link)
{
    *r = rec_of(JR_CREATE);
    r->ino = ino, r->dir = parent, r->mode = mode;
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->link, sizeof r->link, "%s", link);
    return r;
}

/* A RENAME record from directory d1 to d2. */
static const jrec *rename_rec(jrec *r, uint64_t d1, const char *n1, uint64_t d2, const char *n2)
{
    *r = rec_of(JR_RENAME);
    r->dir = d1, r->dir2 = d2;
    snprintf(r->name, sizeof r->name, "%s", n1);
    snprintf(r->name2, sizeof r->name2, "%s", n2);
    return r;
}

/* A WRITE or INSERT record of "data" at `off`. */
static const jrec *data_rec(jrec *r, uint32_t type, uint64_t ino, uint64_t off)
{
    *r = rec_of(type);
    r->ino = ino, r->off = off;
    r->tail = (const unsigned char *)"data", r->ntail = 4;
    return r;
}

static void record_cases(uint64_t id, uint64_t next_ino, uint64_t dir_ino, uint64_t file_ino)
{
    jrec r;
    const uint32_t reg = S_IFREG | 0644;
    one_jrec("j-create-dotdot.journal", id, create(&r, next_ino, 1, reg, "..", ""),
             "does not apply: create");
    one_jrec("j-create-slash.journal", id, create(&r, next_ino, 1, reg, "a/b", ""),
             "does not apply: create");
    one_jrec("j-create-empty-name.journal", id, create(&r, next_ino, 1, reg, "", ""),
             "does not apply: create");
    one_jrec("j-create-exists.journal", id, create(&r, next_ino, 1, reg, "a.txt", ""),
             "does not apply: create");
    one_jrec("j-create-mode-bits.journal", id, create(&r, next_ino, 1, 0400644, "x", ""),
             "does not apply: create");
    one_jrec("j-create-fifo-link.journal", id, create(&r, next_ino, 1, S_IFIFO | 0644, "x", "t"),
             "does not apply: create");
    create(&r, next_ino, 1, reg, "x", ""), r.rdev = 259;
    one_jrec("j-create-rdev-on-file.journal", id, &r, "does not apply: create");
    one_jrec("j-create-link-empty.journal", id, create(&r, next_ino, 1, S_IFLNK | 0777, "x", ""),
             "does not apply: create");
    one_jrec("j-create-ino-huge.journal", id, create(&r, (uint64_t)1 << 40, 1, reg, "x", ""),
             "does not apply: create");
    one_jrec("j-create-ino-used.journal", id, create(&r, file_ino, 1, reg, "x", ""),
             "does not apply: create");
    one_jrec("j-create-in-file.journal", id, create(&r, next_ino, file_ino, reg, "x", ""),
             "does not apply: create");
    one_jrec("j-write-no-inode.journal", id, data_rec(&r, JR_WRITE, next_ino + 5, 0),
             "does not apply: write");
    one_jrec("j-write-dir.journal", id, data_rec(&r, JR_WRITE, dir_ino, 0),
             "does not apply: write");
    one_jrec("j-insert-past-end.journal", id, data_rec(&r, JR_INSERT, file_ino, 1 << 20),
             "does not apply: write");
    /* Past the writers' bound of VOL_MAX_FILE: none of them writes these, and a compaction
     * would write the holes out */
    one_jrec("j-write-past-max.journal", id, data_rec(&r, JR_WRITE, file_ino, VOL_MAX_FILE),
             "does not apply: write");
    one_jrec("j-write-wraps.journal", id, data_rec(&r, JR_WRITE, file_ino, UINT64_MAX - 1),
             "does not apply: write");
    r = rec_of(JR_TRUNCATE), r.ino = file_ino, r.size = VOL_MAX_FILE + 1;
    one_jrec("j-truncate-past-max.journal", id, &r, "does not apply: truncate");
    r.size = UINT64_MAX;
    one_jrec("j-truncate-huge.journal", id, &r, "does not apply: truncate");
    /* Bodies cut short after their first field. */
    buf b = {0};
    OK(buf_put_varint(&b, file_ino));
    one_record("j-write-malformed.journal", id, JR_WRITE, &b, "malformed write");
    one_record("j-truncate-malformed.journal", id, JR_TRUNCATE, &b, "malformed truncate");
    buf_free(&b);
    /* rename d into d/e (a directory into its own subtree) */
    one_jrec("j-rename-into-self.journal", id, rename_rec(&r, 1, "d", dir_ino, "d2"),
             "rename into itself");
    one_jrec("j-rename-dotdot.journal", id, rename_rec(&r, 1, "a.txt", 1, ".."),
             "does not apply: rename");
    one_jrec("j-rename-file-over-dir.journal", id, rename_rec(&r, 1, "a.txt", 1, "d"),
             "across types");
    r = rec_of(JR_RMXATTR), r.ino = file_ino, snprintf(r.name, sizeof r.name, "nope");
    one_jrec("j-rmxattr-missing.journal", id, &r, "removexattr of a missing");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkcorrupt OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    char path[512];
    snprintf(path, sizeof path, "%s/MANIFEST", outdir);
    if (!(manifest = fopen(path, "w"))) fz_die(path);
    fprintf(manifest, "# made by tests/tools/mkcorrupt (tests/corrupt/gen.sh); see its header\n");
    char *fix;
    /* the surgery edits the plain layout of the rules and root, and the file table in rows */
    fz_fixture_plain = ARC_PLAIN_SYMS | ARC_PLAIN_FILES;
    base = fz_fixture(&fix, &nbase);
    emit("base.tdc", base, nbase, 0, "ok:", NULL);
    /* The base journal: edits of every kind through the vol API. */
    fz_reset_fixture();
    vol_opts o = {.writable = 1};
    vol *v;
    struct stat st;
    uint64_t a, d, bin, f;
    OK(vol_open(fix, &o, &v, NULL));
    OK(vol_resolve(v, "a.txt", &a));
    OK(vol_resolve(v, "d", &d));
    OK(vol_resolve(v, "d/bin", &bin));
    OK(vol_mknode(v, d, "new", S_IFREG | 0644, 1000, 1000, NULL, 0, &st));
    f = st.st_ino;
    OK(vol_write(v, f, 0, "fresh text\n", 11));
    OK(vol_insert(v, a, 4, "very ", 5));
    OK(vol_write(v, bin, 290, "tail bytes past the end", 23));
    OK(vol_mknode(v, 1, "sub", S_IFDIR | 0755, 0, 0, NULL, 0, &st));
    uint64_t sub = st.st_ino;
    OK(vol_mknode(v, sub, "ln", S_IFLNK | 0777, 0, 0, "../a.txt", 0, &st));
    OK(vol_link(v, f, sub, "new2", &st));
    OK(vol_rename(v, d, "b.c", sub, "b.c", 0));
    OK(vol_setxattr(v, a, "k", "v", 1, 0));
    struct stat in = {.st_size = 50, .st_mode = 0600};
    OK(vol_setattr(v, bin, VOL_SET_SIZE | VOL_SET_MODE, &in, &st));
    OK(vol_unlink(v, d, "hard", 0));
    vol_close(v);
    size_t nj;
    snprintf(path, sizeof path, "%s.journal", fix);
    unsigned char *j = fz_read(path, &nj);
    emit("base.journal", j, nj, 0, "journal:", NULL);
    archive_cases();
    entry_cases(fix);
    journal_cases(j, nj);
    arc *ar;
    OK(arc_open(fix, &ar));
    int64_t di = arc_lookup(ar, "d"), fi = arc_lookup(ar, "a.txt");
    record_cases(ar->id, ar->next_ino, ar->ents[di].ino, ar->ents[fi].ino);
    arc_free(ar);
    free(j);
    fz_reset_fixture();
    fclose(manifest);
    printf("%d cases written to %s\n", ncases, outdir);
    return 0;
}
