/* fuzz_arc: the archive reader. Each input is an archive file; it is opened as it is (so
 * the header, table and checksum checks see it) and then once more with every checksum
 * recomputed, so the section decoders (dictionary, rules, root, file table), the grammar
 * checks and the index build behind the checksums see the mutated bytes too. An archive
 * that opens must index, and every file must read without a crash; a file that reads to its
 * end must either match its content hash or be reported as corrupt. Where a shard stored as
 * its text also opens as bytes (arc_open_text, what reads use), each of its files' bytes
 * equal what the grammar spells, unless those fail the file's content hash (which a whole
 * read checks). */
#include "fuzz.h"

#include "../../engine/index/idx.h"

/* Recompute the header, section-table and section checksums wherever the declared
 * positions lie inside the input. */
static void fix_checksums(unsigned char *p, size_t n)
{
    if (n < ARC_HDR_SIZE) return;
    arc_header h;
    arc_header_decode(p, &h); /* the fields, whatever the checksums say */
    uint64_t toff = h.table;
    uint32_t nsec = h.nsec;
    if (nsec >= 1 && nsec <= 8 && toff >= ARC_HDR_SIZE && toff <= n &&
        (uint64_t)nsec * ARC_SECENT_SIZE + 8 <= n - toff) {
        unsigned char *tab = p + toff;
        for (uint32_t i = 0; i < nsec; i++) {
            unsigned char *e = tab + i * ARC_SECENT_SIZE;
            arc_secinfo s;
            arc_secent_decode(e, &s);
            if (s.offset <= n && s.stored <= n - s.offset)
                st64(e + ARC_SECENT_HASH, XXH3_64bits(p + s.offset, s.stored));
        }
        arc_table_seal(tab, nsec);
    }
    arc_header_seal(p);
}

/* Whether the grammar spells entry ent whole as its content hash says. */
static int grammar_matches_hash(const arc *a, const idx *x, uint32_t ent)
{
    uint64_t size = a->ents[ent].size;
    unsigned char *g = malloc(size ? size : 1);
    int ok = idx_extract(x, ent, 0, g, (size_t)size) == (ssize_t)size &&
             XXH3_64bits(g, size) == a->ents[ent].hash;
    free(g);
    return ok;
}

/* Entry ent's bytes [off, off + n) from the grammar (idx_extract) against the text path's
 * `p`: equal, or the grammar's bytes of the whole file do not match its hash (a corrupt
 * archive, which a whole read reports). */
static void compare_text(const arc *a, const idx *x, uint32_t ent, uint64_t off,
                         const unsigned char *p, uint64_t n)
{
    if (arc_entry_damaged(a, ent)) return;
    unsigned char *g = malloc(n ? n : 1);
    ssize_t k = idx_extract(x, ent, off, g, (size_t)n);
    if (k != (ssize_t)n || memcmp(g, p, n))
        FUZZ_CHECK(!grammar_matches_hash(a, x, ent),
                   "a text shard's bytes differ from its grammar's, which match the hash");
    free(g);
}

/* Every shard stored as its text that opens as bytes, against the grammar (a loaded); for a
 * file cut over text shards, each part at its place. */
static void check_text(const char *path, const arc *a, const idx *x)
{
    arc *m;
    if (arc_open_meta(path, &m)) return;
    for (uint32_t k = 0; k < m->nshards && m->nents == a->nents; k++) {
        arc_text t;
        if (!arc_open_text(m, k, -1, k & 1, &t)) { /* every other one lazily */
            for (uint32_t i = 0; i < t.nids; i++) {
                const unsigned char *p;
                ssize_t n = arc_text_bytes(&t, i, 0, t.len[i], &p);
                if (n >= 0)
                    compare_text(a, x, t.ids[i], 0, p, (size_t)n);
                else
                    FUZZ_CHECK(tdc_errmsg()[0], "a lazy text read failed without a message");
            }
            arc_text_free(&t);
        }
    }
    for (uint32_t e = 0; e < m->nents && m->nents == a->nents; e++) {
        uint32_t first, last;
        if (!arc_entry_parts(m, e, &first, &last)) continue;
        uint64_t off = 0;
        for (uint32_t k = first; k <= last; off += m->shards[k++].bytes) {
            arc_text t;
            const unsigned char *p;
            if (arc_open_text(m, k, e, 1, &t)) continue;
            ssize_t n = arc_text_bytes(&t, 0, 0, t.len[0], &p);
            if (n >= 0)
                compare_text(a, x, e, off, p, (size_t)n);
            else
                FUZZ_CHECK(tdc_errmsg()[0], "a lazy text read failed without a message");
            arc_text_free(&t);
        }
    }
    arc_free(m);
}

static void exercise(const char *path)
{
    arc *a;
    if (arc_open(path, &a)) {
        FUZZ_CHECK(tdc_errmsg()[0], "arc_open failed without a message");
        return;
    }
    idx *x;
    if (idx_build_cached(a, 1 << 16, &x)) {
        FUZZ_CHECK(tdc_errmsg()[0], "idx_build failed without a message");
        arc_free(a);
        return;
    }
    idx_cursor c;
    idx_cursor_init(&c);
    unsigned char b[4096];
    for (uint32_t i = 0; i < a->nents; i++) {
        const arc_entry *e = &a->ents[i];
        if (e->type != ARC_REG) continue;
        /* Whole small files (checked against their hash), the head and tail of big ones. */
        if (e->size <= 1 << 16) {
            XXH3_state_t *h = XXH3_createState();
            XXH3_64bits_reset(h);
            uint64_t off = 0;
            ssize_t k = 1;
            while (off < e->size && (k = idx_read(x, &c, i, off, b, sizeof b)) > 0) {
                XXH3_64bits_update(h, b, (size_t)k);
                off += (uint64_t)k;
            }
            (void)XXH3_64bits_digest(h);
            XXH3_freeState(h);
        } else {
            idx_read(x, &c, i, 0, b, sizeof b);
            idx_read(x, &c, i, e->size - 100, b, sizeof b);
        }
        idx_extract(x, i, e->size / 2, b, 100);
        idx_extract(x, i, e->size, b, 10);
        uint64_t rules;
        double share;
        idx_file_footprint(x, i, &rules, &share);
    }
    idx_cursor_free(&c);
    check_text(path, a, x);
    idx_free(x);
    arc_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[128];
    snprintf(path, sizeof path, "%s/in.tdc", fz_tmpdir());
    fz_write(path, data, size);
    exercise(path);
    unsigned char *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    fix_checksums(p, size);
    fz_write(path, p, size);
    free(p);
    exercise(path);
    return 0;
}
