/* jrnl: records come back exactly as appended; every kind of damage (a flipped byte, a cut
 * tail, a bogus length, a sequence gap, a damaged header, another archive's journal) is
 * detected, the good records before it are replayed, and a writable open cuts the damage off
 * so new records follow the last good one.
 *
 * The reference journal is written once per test through the API; damaged copies are made
 * from its image. Record layout (jrnl.h): u32 len, u32 type, u64 seq, body, XXH3-64 of the
 * rest; the header: "TDCJRNL\0", u32 version 1, 4 zero bytes, u64 archive id, XXH3-64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <xxhash.h>

#include "../../engine/base/buf.h"
#include "../../engine/base/err.h"
#include "../../engine/volume/jrnl.h"
#include "testutil.h"

#define ID1 0x1111222233334444ULL
#define ID2 0x5555666677778888ULL
#define ID3 0x99990000aaaabbbbULL

/* ---------------- records written, records seen ---------------- */

typedef struct rec {
    uint32_t type;
    size_t hn, dn;
    unsigned char *body; /* head then data */
    uint64_t start, end; /* file offsets of the whole record */
    uint64_t doff;       /* where the data lies */
} rec;

typedef struct seen_rec {
    uint32_t type, len;
    uint64_t seq, off;
    unsigned char *body;
} seen_rec;

typedef struct seen {
    seen_rec *r;
    size_t n, cap;
    size_t stop_at; /* return stop_rc at this record (0 based); SIZE_MAX: never */
    int stop_rc;
} seen;

static int collect(void *ctx, const jrnl_rec *r)
{
    seen *s = ctx;
    if (s->n == s->stop_at) return s->stop_rc;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->r = realloc(s->r, s->cap * sizeof *s->r);
        assert_non_null(s->r);
    }
    seen_rec *x = &s->r[s->n++];
    x->type = r->type;
    x->len = r->len;
    x->seq = r->seq;
    x->off = r->off;
    x->body = malloc(r->len ? r->len : 1);
    assert_non_null(x->body);
    memcpy(x->body, r->body, r->len);
    return 0;
}

static void seen_init(seen *s)
{
    memset(s, 0, sizeof *s);
    s->stop_at = SIZE_MAX;
}

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->r[i].body);
    free(s->r);
    seen_init(s);
}

static char *dir, *P, *Q; /* scratch dir, the reference journal, damaged copies */

static int setup(void **state)
{
    (void)state;
    dir = tu_tmppath("jrnl");
    if (mkdir(dir, 0700) < 0) return -1;
    P = malloc(4200);
    Q = malloc(4200);
    snprintf(P, 4200, "%s/ref.journal", dir);
    snprintf(Q, 4200, "%s/copy.journal", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    free(dir);
    free(P);
    free(Q);
    return rc ? -1 : 0;
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (uint64_t)sb.st_size;
}

static void put_file(const char *path, const unsigned char *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    unsigned char *p = tu_slurp(path, n);
    assert_non_null(p);
    return p;
}

#define BIG ((size_t)1 << 20)

/* Record bodies of assorted sizes; `big` adds a few of half a megabyte or more. */
static void make_body(uint64_t *rs, rec *r, int big)
{
    uint64_t k = tu_rand(rs) % 16;
    r->type = 1 + (uint32_t)(tu_rand(rs) % (JR_NTYPES - 1));
    r->hn = tu_rand(rs) % 3 == 0 ? 0 : 1 + tu_rand(rs) % 30;
    r->dn = k < 3    ? 0
            : k < 12 ? tu_rand(rs) % 150
            : big    ? BIG / 2 + tu_rand(rs) % (2 * BIG)
                     : 150 + tu_rand(rs) % 400;
    r->body = malloc(r->hn + r->dn + 1);
    assert_non_null(r->body);
    for (size_t i = 0; i < r->hn + r->dn; i++)
        r->body[i] = (unsigned char)tu_rand(rs);
}

/* Append n records to an open journal, checking sizes, offsets and jrnl_read as it goes, and
 * that each is in the file once acknowledged. */
static void append_recs(jrnl *j, rec *R, size_t from, size_t n, uint64_t *rs, int big)
{
    for (size_t i = from; i < from + n; i++) {
        rec *r = &R[i];
        make_body(rs, r, big);
        uint64_t before = jrnl_size(j), recs = jrnl_records(j);
        assert_int_equal(jrnl_append(j, r->type, r->body, r->hn, r->body + r->hn, r->dn, &r->doff),
                         0);
        r->start = before;
        r->end = before + r->hn + r->dn + JRNL_REC_OVERHEAD;
        assert_int_equal(jrnl_size(j), r->end);
        assert_int_equal(jrnl_records(j), recs + 1);
        assert_int_equal(r->doff, r->start + 16 + r->hn);
        if (r->dn) {
            unsigned char *d = malloc(r->dn);
            assert_int_equal(jrnl_read(j, r->doff, d, r->dn), 0);
            assert_memory_equal(d, r->body + r->hn, r->dn);
            free(d);
        }
        assert_true(file_size(P) >= r->end);
    }
}

static void free_recs(rec *R, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(R[i].body);
    free(R);
}

/* Write a fresh journal at P bound to ID1 with n records. */
static rec *write_ref(size_t n, uint64_t seed, int big)
{
    rec *R = calloc(n + 8, sizeof *R);
    uint64_t rs = seed;
    jrnl_stats st;
    jrnl *j = NULL;
    unlink(P);
    assert_non_null(R);
    assert_int_equal(jrnl_open(P, ID1, 0, 1, collect, NULL, &st, &j), 0);
    assert_int_equal(file_size(P), JRNL_HDR);
    assert_int_equal(jrnl_size(j), JRNL_HDR);
    append_recs(j, R, 0, n, &rs, big);
    assert_int_equal(jrnl_sync(j), 0);
    assert_int_equal(file_size(P), n ? R[n - 1].end : JRNL_HDR);
    jrnl_close(j);
    assert_int_equal(file_size(P), n ? R[n - 1].end : JRNL_HDR);
    return R;
}

/* The seen records are exactly R[0..k), and their data reads back through j. */
static void check_prefix(const seen *s, const rec *R, size_t k, jrnl *j, const char *what)
{
    if (s->n != k) fail_msg("%s: replayed %zu records, want %zu", what, s->n, k);
    for (size_t i = 0; i < k; i++) {
        const seen_rec *x = &s->r[i];
        const rec *r = &R[i];
        if (x->type != r->type || x->len != r->hn + r->dn || x->seq != i + 1 ||
            x->off != r->start + 16)
            fail_msg("%s: record %zu: type %u len %u seq %llu off %llu, want %u %zu %zu %llu", what,
                     i, x->type, x->len, (unsigned long long)x->seq, (unsigned long long)x->off,
                     r->type, r->hn + r->dn, i + 1, (unsigned long long)(r->start + 16));
        if (memcmp(x->body, r->body, x->len)) fail_msg("%s: record %zu: body differs", what, i);
        if (j && r->dn) {
            unsigned char *d = malloc(r->dn);
            assert_int_equal(jrnl_read(j, x->off + r->hn, d, r->dn), 0);
            if (memcmp(d, r->body + r->hn, r->dn))
                fail_msg("%s: record %zu: jrnl_read differs", what, i);
            free(d);
        }
    }
}

/* Open `path` (read-only, then writable) expecting the first k records of R, `dropped` bytes
 * of damage after them, and a file cut at R[k].start by the writable open, after which a new
 * record follows. `why` (optional) must appear in st.why. Where the read-only open finds an
 * intact record after the damage (returned), the writable open must refuse the file and
 * leave it as it is; it is then cut there by hand, as the refusal says, and opened. */
static uint64_t expect_damage(const char *path, const rec *R, size_t k, uint64_t dropped,
                              const char *why, const char *what, int writable_too)
{
    seen s;
    jrnl_stats st;
    jrnl *j = NULL;
    uint64_t size = file_size(path);
    uint64_t good = k ? R[k - 1].end : JRNL_HDR;
    size_t n0;
    unsigned char *before = slurp(path, &n0);
    seen_init(&s);
    int rc = jrnl_open(path, ID1, ID2, 0, collect, &s, &st, &j);
    if (rc) fail_msg("%s: read-only open failed: %d %s", what, rc, tdc_errmsg());
    check_prefix(&s, R, k, j, what);
    if (st.records != k || st.dropped != dropped || st.stale)
        fail_msg("%s: records %llu dropped %llu stale %llu, want %zu %llu 0", what,
                 (unsigned long long)st.records, (unsigned long long)st.dropped,
                 (unsigned long long)st.stale, k, (unsigned long long)dropped);
    if (dropped && !st.why[0]) fail_msg("%s: no reason given for the dropped tail", what);
    if (!dropped && st.why[0]) fail_msg("%s: a reason (%s) but nothing dropped", what, st.why);
    if (why && !strstr(st.why, why)) fail_msg("%s: why is \"%s\", want \"%s\"", what, st.why, why);
    assert_int_equal(jrnl_records(j), k);
    assert_int_equal(jrnl_append(j, JR_WRITE, "x", 1, NULL, 0, NULL), -EROFS);
    jrnl_close(j);
    seen_free(&s);
    /* Read-only opens change nothing. */
    size_t n1;
    unsigned char *after = slurp(path, &n1);
    if (n0 != n1 || memcmp(before, after, n0)) fail_msg("%s: a read-only open changed the file", what);
    free(before);
    free(after);
    assert_int_equal(size, n0);
    uint64_t intact = st.intact_at;
    if (intact && (intact <= good || intact >= size))
        fail_msg("%s: intact record at %llu, outside the damage", what, (unsigned long long)intact);
    if (!writable_too) return intact;

    if (intact) {
        seen_init(&s);
        rc = jrnl_open(path, ID1, ID2, 1, collect, &s, &st, &j);
        if (rc != -EBADMSG || !strstr(tdc_errmsg(), "damaged, not torn"))
            fail_msg("%s: writable open of damage before an intact record: %d %s", what, rc,
                     tdc_errmsg());
        seen_free(&s);
        if (file_size(path) != size) fail_msg("%s: the refused journal was changed", what);
        assert_int_equal(truncate(path, (off_t)good), 0);
        dropped = 0;
    }
    seen_init(&s);
    rc = jrnl_open(path, ID1, ID2, 1, collect, &s, &st, &j);
    if (rc) fail_msg("%s: writable open failed: %d %s", what, rc, tdc_errmsg());
    check_prefix(&s, R, k, j, what);
    assert_int_equal(st.dropped, dropped);
    if (file_size(path) != good)
        fail_msg("%s: writable open left %llu bytes, want %llu", what,
                 (unsigned long long)file_size(path), (unsigned long long)good);
    assert_int_equal(jrnl_size(j), good);
    seen_free(&s);
    uint64_t doff;
    assert_int_equal(jrnl_append(j, JR_TRUNCATE, "HEAD", 4, "new data", 8, &doff), 0);
    assert_int_equal(doff, good + 16 + 4);
    jrnl_close(j);
    assert_int_equal(file_size(path), good + 12 + JRNL_REC_OVERHEAD);
    rc = jrnl_open(path, ID1, ID2, 0, collect, &s, &st, &j);
    if (rc) fail_msg("%s: reopen after the new record failed: %s", what, tdc_errmsg());
    if (s.n != k + 1) fail_msg("%s: after the cut, %zu records, want %zu", what, s.n, k + 1);
    s.n--;
    check_prefix(&s, R, k, j, what);
    s.n++;
    assert_int_equal(s.r[k].seq, k + 1);
    assert_int_equal(s.r[k].type, JR_TRUNCATE);
    assert_int_equal(s.r[k].len, 12);
    assert_memory_equal(s.r[k].body, "HEADnew data", 12);
    char d[8];
    assert_int_equal(jrnl_read(j, doff, d, 8), 0);
    assert_memory_equal(d, "new data", 8);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.why[0], 0);
    jrnl_close(j);
    seen_free(&s);
    return intact;
}

/* ---------------- crafting records by hand (the documented layout) ---------------- */

static void craft_header(unsigned char *h, uint64_t id, uint32_t version)
{
    memset(h, 0, JRNL_HDR);
    memcpy(h, "TDCJRNL", 8);
    st32(h + 8, version);
    st64(h + 16, id);
    st64(h + 24, XXH3_64bits(h, 24));
}

static void craft_rec(buf *b, uint32_t type, uint64_t seq, const char *body)
{
    size_t n = strlen(body), start = b->n;
    unsigned char h[16];
    st32(h, (uint32_t)n);
    st32(h + 4, type);
    st64(h + 8, seq);
    assert_int_equal(buf_put(b, h, 16), 0);
    assert_int_equal(buf_put(b, body, n), 0);
    assert_int_equal(buf_put_u64(b, XXH3_64bits(b->p + start, 16 + n)), 0);
}

/* The bytes of record r with sequence number seq, as the layout says. */
static void rec_image(const rec *r, uint64_t seq, buf *b)
{
    size_t n = r->hn + r->dn, start = b->n;
    unsigned char h[16];
    st32(h, (uint32_t)n);
    st32(h + 4, r->type);
    st64(h + 8, seq);
    assert_int_equal(buf_put(b, h, 16), 0);
    assert_int_equal(buf_put(b, r->body, n), 0);
    assert_int_equal(buf_put_u64(b, XXH3_64bits(b->p + start, 16 + n)), 0);
}

/* ---------------- tests ---------------- */

static void test_roundtrip(void **state)
{
    (void)state;
    const size_t n = 300;
    rec *R = write_ref(n, 42, 1);
    size_t big = 0;
    for (size_t i = 0; i < n; i++)
        big += R[i].dn >= BIG / 2;
    assert_true(big >= 3); /* some records of half a megabyte or more */
    /* The file is exactly the header and the records in the documented layout. */
    buf want = {0};
    unsigned char h[JRNL_HDR];
    craft_header(h, ID1, 1);
    assert_int_equal(buf_put(&want, h, JRNL_HDR), 0);
    for (size_t i = 0; i < n; i++)
        rec_image(&R[i], i + 1, &want);
    size_t fn;
    unsigned char *img = slurp(P, &fn);
    assert_int_equal(fn, want.n);
    assert_memory_equal(img, want.p, fn);
    free(img);
    buf_free(&want);
    seen s;
    jrnl_stats st;
    jrnl *j;
    seen_init(&s);
    assert_int_equal(jrnl_open(P, ID1, 0, 0, collect, &s, &st, &j), 0);
    check_prefix(&s, R, n, j, "roundtrip");
    assert_int_equal(st.records, n);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.stale, 0);
    assert_int_equal(st.why[0], 0);
    assert_int_equal(jrnl_records(j), n);
    assert_int_equal(jrnl_size(j), R[n - 1].end);
    char d4[4];
    assert_int_equal(jrnl_read(j, R[n - 1].end - 2, d4, 4), -EIO); /* past the end */
    assert_int_equal(jrnl_read(j, R[n - 1].end + 100, d4, 4), -EIO);
    jrnl_close(j);
    seen_free(&s);
    /* Writable reopen: appends continue the sequence; everything comes back again. */
    uint64_t rs = 4242;
    assert_int_equal(jrnl_open(P, ID1, 0, 1, collect, &s, &st, &j), 0);
    seen_free(&s);
    R = realloc(R, (n + 50) * sizeof *R);
    append_recs(j, R, n, 50, &rs, 0);
    jrnl_close(j);
    assert_int_equal(file_size(P), R[n + 49].end);
    assert_int_equal(jrnl_open(P, ID1, 0, 0, collect, &s, &st, &j), 0);
    check_prefix(&s, R, n + 50, j, "roundtrip after reopen");
    jrnl_close(j);
    seen_free(&s);
    free_recs(R, n + 50);
}

/* What is on disk: every record once acknowledged; a killed writer loses none of them. */
static void test_written_and_kill(void **state)
{
    (void)state;
    rec *R = calloc(64, sizeof *R);
    uint64_t rs = 7;
    jrnl_stats st;
    jrnl *j;
    unlink(P);
    assert_int_equal(jrnl_open(P, ID1, 0, 1, collect, NULL, &st, &j), 0);
    append_recs(j, R, 0, 8, &rs, 0);
    /* A copy now is what a crash of this process leaves: every record. */
    size_t n;
    unsigned char *img = slurp(P, &n);
    put_file(Q, img, n);
    free(img);
    expect_damage(Q, R, 8, 0, NULL, "copy without a close", 0);
    /* Reads span records: compare with the records' images. */
    buf want = {0};
    for (size_t i = 3; i < 8; i++)
        rec_image(&R[i], i + 1, &want);
    assert_int_equal(want.n, R[7].end - R[3].start);
    unsigned char *d = malloc(want.n);
    assert_int_equal(jrnl_read(j, R[3].start, d, want.n), 0);
    assert_memory_equal(d, want.p, want.n);
    assert_int_equal(jrnl_read(j, R[4].end - 5, d, 10), 0);
    assert_memory_equal(d, want.p + (R[4].end - 5 - R[3].start), 10);
    free(d);
    buf_free(&want);
    jrnl_close(j);
    free_recs(R, 8);

    /* A writer killed (no close: the reservation is never given back). */
    R = calloc(64, sizeof *R);
    unlink(P);
    rs = 99;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (jrnl_open(P, ID1, 0, 1, collect, NULL, &st, &j)) _exit(1);
        rec *C = calloc(64, sizeof *C);
        append_recs(j, C, 0, 23, &rs, 0);
        raise(SIGKILL);
        _exit(3);
    }
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    rs = 99;
    /* The same bodies again, to compare with (the same PRNG stream). */
    for (size_t i = 0; i < 23; i++)
        make_body(&rs, &R[i], 0);
    uint64_t off = JRNL_HDR;
    for (size_t i = 0; i < 23; i++) {
        R[i].start = off;
        R[i].end = off += R[i].hn + R[i].dn + JRNL_REC_OVERHEAD;
        R[i].doff = R[i].start + 16 + R[i].hn;
    }
    assert_int_equal(file_size(P), R[22].end);
    expect_damage(P, R, 23, 0, NULL, "killed writer", 1);
    free_recs(R, 23);
}

static void test_every_flip(void **state)
{
    (void)state;
    const size_t n = 24;
    rec *R = write_ref(n, 5, 0);
    size_t size;
    unsigned char *img = slurp(P, &size);
    assert_int_equal(size, R[n - 1].end);
    size_t targets[] = {n - 1, n - 2, n / 2, 0};
    size_t flips = 0;
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        size_t k = targets[t];
        for (uint64_t pos = R[k].start; pos < R[k].end; pos++) {
            char what[128];
            snprintf(what, sizeof what, "flip at %llu (record %zu)", (unsigned long long)pos, k);
            unsigned char x = (unsigned char)(1u << (pos % 8));
            img[pos] ^= x;
            put_file(Q, img, size);
            img[pos] ^= x;
            /* Writable checks on every byte of the last record, sampled elsewhere. */
            uint64_t intact =
                expect_damage(Q, R, k, size - R[k].start, NULL, what, t == 0 || pos % 7 == 0);
            /* with the length intact, the next record is found: damage, not a torn tail */
            if (k + 1 < n && pos >= R[k].start + 4 && intact != R[k + 1].start)
                fail_msg("%s: intact record found at %llu, want %llu", what,
                         (unsigned long long)intact, (unsigned long long)R[k + 1].start);
            if (k + 1 == n && intact) fail_msg("%s: an intact record after the last", what);
            flips++;
        }
    }
    assert_true(flips > 100);
    free(img);
    free_recs(R, n);
}

/* A journal the opens cannot read (header damaged, another archive's): a writable open
 * refuses it with -EBADMSG and a message holding `msg`; a read-only one leaves it unread
 * (jrnl_stats.unread, why holding msg) and opens with nothing replayed. */
static void expect_unreadable(const char *path, uint64_t id, uint64_t prev, int writable, seen *s,
                              const char *msg, const char *what)
{
    jrnl_stats st;
    jrnl *j = NULL;
    int rc = jrnl_open(path, id, prev, writable, collect, s, &st, &j);
    if (writable) {
        if (rc != -EBADMSG) fail_msg("%s: rc %d, want -EBADMSG", what, rc);
        if (!strstr(tdc_errmsg(), msg)) fail_msg("%s: message \"%s\"", what, tdc_errmsg());
    } else {
        if (rc || !st.unread || !strstr(st.why, msg))
            fail_msg("%s (read-only): rc %d, unread %llu, why \"%s\"", what, rc,
                     (unsigned long long)st.unread, st.why);
        jrnl_close(j);
    }
    assert_int_equal(s->n, 0);
}

static void test_every_truncation(void **state)
{
    (void)state;
    const size_t n = 16;
    rec *R = write_ref(n, 11, 0);
    size_t size;
    unsigned char *img = slurp(P, &size);
    for (size_t cut = 0; cut <= size; cut++) {
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", cut, size);
        put_file(Q, img, cut);
        if (cut < JRNL_HDR) {
            seen s;
            seen_init(&s);
            for (int w = 0; w < 2; w++) {
                expect_unreadable(Q, ID1, 0, w, &s, "header", what);
                assert_int_equal(file_size(Q), cut);
            }
            continue;
        }
        size_t k = 0;
        while (k < n && R[k].end <= cut)
            k++;
        uint64_t good = k ? R[k - 1].end : JRNL_HDR;
        const char *why = cut - good == 0                      ? NULL
                          : cut - good < JRNL_REC_OVERHEAD     ? "torn record header"
                                                               : "torn record";
        /* Writable checks near the end and on a sample elsewhere (each one syncs). */
        expect_damage(Q, R, k, cut - good, why, what, k >= n - 2 || cut % 5 == 0);
    }
    free(img);
    free_recs(R, n);
}

static void test_bogus_lengths(void **state)
{
    (void)state;
    const size_t n = 12;
    rec *R = write_ref(n, 17, 0);
    size_t size;
    unsigned char *img = slurp(P, &size);
    size_t targets[] = {0, n / 2, n - 1};
    for (size_t t = 0; t < 3; t++) {
        size_t k = targets[t];
        uint32_t len = (uint32_t)(R[k].hn + R[k].dn);
        uint64_t room = size - R[k].start - JRNL_REC_OVERHEAD; /* the largest length that fits */
        struct {
            uint32_t len;
            const char *why;
        } cases[] = {
            {0xffffffffu, "impossible record length"},
            {JRNL_MAX_BODY + 1, "impossible record length"},
            {0x80000000u, "impossible record length"},
            /* with records after it, a length past the end is damage to the length */
            {(uint32_t)room + 1, k + 1 < n ? "damaged record length" : "torn record"},
            {JRNL_MAX_BODY, k + 1 < n ? "damaged record length" : "torn record"},
            {len + 1, "checksum mismatch"},
            {len ? len - 1 : 3, "checksum mismatch"},
            {0, "checksum mismatch"},
        };
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            if (cases[c].len == len) continue;
            if (cases[c].len > room && !strcmp(cases[c].why, "checksum mismatch")) continue;
            char what[96];
            snprintf(what, sizeof what, "record %zu length %u (really %u)", k, cases[c].len, len);
            unsigned char save[4];
            memcpy(save, img + R[k].start, 4);
            st32(img + R[k].start, cases[c].len);
            put_file(Q, img, size);
            memcpy(img + R[k].start, save, 4);
            uint64_t intact = expect_damage(Q, R, k, size - R[k].start, cases[c].why, what, 1);
            if ((k + 1 < n) != (intact != 0))
                fail_msg("%s: intact record at %llu", what, (unsigned long long)intact);
        }
    }
    free(img);
    free_recs(R, n);
}

/* Records with valid checksums but a wrong sequence number or type stop the replay. */
static void test_sequence_and_type(void **state)
{
    (void)state;
    unsigned char h[JRNL_HDR];
    craft_header(h, ID1, 1);
    struct {
        uint32_t type[4];
        uint64_t seq[4];
        size_t good;
        const char *why;
    } cases[] = {
        {{JR_WRITE, JR_CREATE, JR_UNLINK, JR_RENAME}, {1, 2, 3, 4}, 4, NULL},
        {{JR_WRITE, JR_CREATE, JR_UNLINK, JR_RENAME}, {1, 2, 4, 5}, 2, "sequence gap"},
        {{JR_WRITE, JR_CREATE, JR_UNLINK, JR_RENAME}, {1, 2, 2, 3}, 2, "sequence gap"},
        {{JR_WRITE, JR_CREATE, JR_UNLINK, JR_RENAME}, {2, 3, 4, 5}, 0, "sequence gap"},
        {{JR_WRITE, JR_CREATE, JR_UNLINK, JR_RENAME}, {0, 1, 2, 3}, 0, "sequence gap"},
        {{JR_WRITE, 0, JR_UNLINK, JR_RENAME}, {1, 2, 3, 4}, 1, "unknown record type"},
        {{JR_WRITE, JR_CREATE, JR_NTYPES, JR_RENAME}, {1, 2, 3, 4}, 2, "unknown record type"},
        {{JR_WRITE, JR_CREATE, JR_RMXATTR, 0xffffffffu}, {1, 2, 3, 4}, 3, "unknown record type"},
    };
    static const char *bodies[4] = {"first body", "", "third", "the fourth body, longer"};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        buf b = {0};
        uint64_t ends[4];
        assert_int_equal(buf_put(&b, h, JRNL_HDR), 0);
        for (int i = 0; i < 4; i++) {
            craft_rec(&b, cases[c].type[i], cases[c].seq[i], bodies[i]);
            ends[i] = b.n;
        }
        put_file(Q, b.p, b.n);
        seen s;
        jrnl_stats st;
        jrnl *j;
        size_t k = cases[c].good;
        uint64_t good = k ? ends[k - 1] : JRNL_HDR;
        seen_init(&s);
        if (k < 3) { /* a good record follows the bad one: damage, refused until cut */
            if (jrnl_open(Q, ID1, 0, 1, collect, &s, &st, &j) != -EBADMSG ||
                !strstr(tdc_errmsg(), "an intact record follows"))
                fail_msg("case %zu: writable open: %s", c, tdc_errmsg());
            assert_int_equal(file_size(Q), b.n);
            seen_free(&s);
            seen_init(&s);
            assert_int_equal(jrnl_open(Q, ID1, 0, 0, collect, &s, &st, &j), 0);
            assert_true(st.intact_at > good);
            jrnl_close(j);
            seen_free(&s);
            seen_init(&s);
            assert_int_equal(truncate(Q, (off_t)good), 0);
            b.n = good;
        }
        assert_int_equal(jrnl_open(Q, ID1, 0, 1, collect, &s, &st, &j), 0);
        if (s.n != k) fail_msg("case %zu: %zu records, want %zu", c, s.n, k);
        for (size_t i = 0; i < k; i++) {
            assert_int_equal(s.r[i].type, cases[c].type[i]);
            assert_int_equal(s.r[i].seq, i + 1);
            assert_int_equal(s.r[i].len, strlen(bodies[i]));
            assert_memory_equal(s.r[i].body, bodies[i], s.r[i].len);
        }
        assert_int_equal(st.dropped, b.n - good);
        if (cases[c].why && b.n > good && !strstr(st.why, cases[c].why))
            fail_msg("case %zu: why \"%s\", want \"%s\"", c, st.why, cases[c].why);
        assert_int_equal(file_size(Q), good);
        /* The next record takes the next sequence number. */
        assert_int_equal(jrnl_append(j, JR_SETATTR, "abc", 3, NULL, 0, NULL), 0);
        jrnl_close(j);
        seen_free(&s);
        assert_int_equal(jrnl_open(Q, ID1, 0, 0, collect, &s, &st, &j), 0);
        assert_int_equal(s.n, k + 1);
        assert_int_equal(s.r[k].seq, k + 1);
        assert_int_equal(st.dropped, 0);
        jrnl_close(j);
        seen_free(&s);
        buf_free(&b);
    }
}

/* Header damage and foreign journals are refused with -EBADMSG by a writable open and left
 * unread by a read-only one, and change nothing; a journal of the archive this one was
 * compacted from is stale and discarded. */
static void test_headers_and_ids(void **state)
{
    (void)state;
    const size_t n = 6;
    rec *R = write_ref(n, 23, 0);
    size_t size;
    unsigned char *img = slurp(P, &size);
    seen s;
    jrnl_stats st;
    jrnl *j;
    seen_init(&s);
    for (size_t pos = 0; pos < JRNL_HDR; pos++) {
        for (int w = 0; w < 2; w++) {
            img[pos] ^= 0x10;
            put_file(Q, img, size);
            img[pos] ^= 0x10;
            char what[64];
            snprintf(what, sizeof what, "header flip at %zu (writable %d)", pos, w);
            expect_unreadable(Q, ID1, ID2, w, &s, "header is damaged", what);
            size_t m;
            unsigned char *now = slurp(Q, &m);
            img[pos] ^= 0x10;
            assert_int_equal(m, size);
            assert_memory_equal(now, img, size);
            img[pos] ^= 0x10;
            free(now);
        }
    }
    /* A well-formed header of another version. */
    unsigned char h[JRNL_HDR];
    craft_header(h, ID1, 2);
    memcpy(img, h, JRNL_HDR);
    put_file(Q, img, size);
    assert_int_equal(jrnl_open(Q, ID1, 0, 1, collect, &s, &st, &j), -EBADMSG);
    assert_int_equal(file_size(Q), size);
    /* The crafted version-1 header is what the writer writes. */
    craft_header(h, ID1, 1);
    memcpy(img, h, JRNL_HDR);
    size_t m;
    unsigned char *orig = slurp(P, &m);
    assert_memory_equal(orig, h, JRNL_HDR);
    free(orig);

    /* Another archive's journal: refused (writable) or left unread, whatever prev_id is. */
    uint64_t ids[][2] = {{ID2, 0}, {ID2, ID3}, {0, 0}, {ID1 + 1, ID1 - 1}};
    for (size_t i = 0; i < 4; i++)
        for (int w = 0; w < 2; w++) {
            char what[64];
            snprintf(what, sizeof what, "foreign id case %zu (writable %d)", i, w);
            expect_unreadable(P, ids[i][0], ids[i][1], w, &s, "another archive", what);
            assert_int_equal(file_size(P), size);
        }

    /* Stale (bound to prev_id): read-only leaves it alone, replays nothing. */
    assert_int_equal(jrnl_open(P, ID2, ID1, 0, collect, &s, &st, &j), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(st.records, 0);
    assert_int_equal(st.stale, size);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(jrnl_records(j), 0);
    jrnl_close(j);
    assert_int_equal(file_size(P), size);
    /* Writable: replaced with an empty journal bound to the new archive. */
    assert_int_equal(jrnl_open(P, ID2, ID1, 1, collect, &s, &st, &j), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(st.stale, size);
    assert_int_equal(jrnl_size(j), JRNL_HDR);
    assert_int_equal(file_size(P), JRNL_HDR);
    assert_int_equal(jrnl_append(j, JR_WRITE, "after", 5, "!", 1, NULL), 0);
    jrnl_close(j);
    assert_int_equal(jrnl_open(P, ID2, ID1, 0, collect, &s, &st, &j), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.r[0].seq, 1);
    assert_int_equal(st.stale, 0);
    assert_memory_equal(s.r[0].body, "after!", 6);
    jrnl_close(j);
    seen_free(&s);
    expect_unreadable(P, ID1, 0, 0, &s, "another archive", "the new archive's journal");
    /* prev_id 0 means "none": a journal bound to 0 is not stale for an archive with id X. */
    craft_header(h, 0, 1);
    put_file(Q, h, JRNL_HDR);
    assert_int_equal(jrnl_open(Q, ID1, 0, 1, collect, &s, &st, &j), -EBADMSG);
    assert_int_equal(file_size(Q), JRNL_HDR);

    /* Missing: empty; created only when writable. */
    unlink(Q);
    assert_int_equal(jrnl_open(Q, ID1, 0, 0, collect, &s, &st, &j), 0);
    assert_int_equal(jrnl_records(j), 0);
    assert_int_equal(jrnl_append(j, JR_WRITE, "x", 1, NULL, 0, NULL), -EROFS);
    jrnl_next nx;
    assert_int_equal(jrnl_next_begin(j, ID2, JRNL_HDR, 0, &nx), -EROFS);
    jrnl_close(j);
    assert_int_equal(access(Q, F_OK), -1);
    assert_int_equal(jrnl_open(Q, ID1, 0, 1, collect, &s, &st, &j), 0);
    jrnl_close(j);
    size_t qn;
    unsigned char *q = slurp(Q, &qn);
    assert_int_equal(qn, JRNL_HDR);
    assert_memory_equal(q, h, 8); /* magic */
    assert_int_equal(le64(q + 16), ID1);
    free(q);
    free(img);
    free_recs(R, n);
}

/* A callback's error stops the replay, is returned and changes nothing. */
static void test_callback_error(void **state)
{
    (void)state;
    const size_t n = 10;
    rec *R = write_ref(n, 31, 0);
    size_t size;
    unsigned char *img = slurp(P, &size);
    /* Put a damaged tail after it too: the callback error wins, the tail is not cut. */
    unsigned char *img2 = malloc(size + 10);
    memcpy(img2, img, size);
    memset(img2 + size, 0xab, 10);
    put_file(Q, img2, size + 10);
    for (int w = 0; w < 2; w++) {
        seen s;
        jrnl_stats st;
        jrnl *j = (jrnl *)&s;
        seen_init(&s);
        s.stop_at = 4;
        s.stop_rc = -ECANCELED;
        assert_int_equal(jrnl_open(Q, ID1, 0, w, collect, &s, &st, &j), -ECANCELED);
        assert_ptr_equal(j, (jrnl *)&s);
        check_prefix(&s, R, 4, NULL, "callback error");
        assert_int_equal(file_size(Q), size + 10);
        seen_free(&s);
    }
    free(img);
    free(img2);
    free_recs(R, n);
}

/* Records r[0..n) of s are those of R, renumbered from 1, and each body reads back from the
 * journal file `path` at the offset the callback was given. */
static void check_copied(const seen *s, const rec *R, size_t n, const char *path)
{
    assert_int_equal(s->n, n);
    size_t fn;
    unsigned char *img = slurp(path, &fn);
    for (size_t i = 0; i < n; i++) {
        const seen_rec *x = &s->r[i];
        assert_int_equal(x->seq, i + 1);
        assert_int_equal(x->type, R[i].type);
        assert_int_equal(x->len, R[i].hn + R[i].dn);
        assert_memory_equal(x->body, R[i].body, x->len);
        assert_true(x->off + x->len <= fn);
        assert_memory_equal(img + x->off, R[i].body, x->len);
    }
    free(img);
}

/* A compaction's next journal: the records after its snapshot copied while appends go on,
 * renumbered, then put in place; and what an open finds beside a journal after a crash. */
static void test_next(void **state)
{
    (void)state;
    rec *R = calloc(40, sizeof *R);
    uint64_t rs = 3;
    jrnl_stats st;
    jrnl *j;
    seen s;
    seen_init(&s);
    char *np = malloc(strlen(P) + 8);
    sprintf(np, "%s.next", P);
    unlink(P);
    assert_int_equal(jrnl_open(P, ID1, 0, 1, collect, NULL, &st, &j), 0);
    append_recs(j, R, 0, 20, &rs, 0);
    /* The snapshot was taken after record 10. */
    jrnl_next n;
    assert_int_equal(jrnl_next_begin(j, ID2, R[9].end, 10, &n), 0);
    assert_int_equal(jrnl_next_copy(j, &n, R[14].end, collect, &s), 0);
    check_copied(&s, R + 10, 5, np);
    append_recs(j, R, 20, 5, &rs, 0); /* appends go on meanwhile */
    assert_int_equal(jrnl_next_copy(j, &n, jrnl_size(j), collect, &s), 0);
    check_copied(&s, R + 10, 15, np);
    jrnl_next_abort(&n);
    assert_int_equal(access(np, F_OK), -1);
    /* A copy of a record whose sequence number does not follow is refused. */
    jrnl_next bad;
    assert_int_equal(jrnl_next_begin(j, ID2, R[9].end, 9, &bad), 0);
    seen s2;
    seen_init(&s2);
    assert_int_equal(jrnl_next_copy(j, &bad, R[10].end, collect, &s2), -EIO);
    jrnl_next_abort(&bad);
    seen_free(&s2);
    /* Begin again and copy the same records. */
    seen_free(&s);
    assert_int_equal(jrnl_next_begin(j, ID2, R[9].end, 10, &n), 0);
    assert_int_equal(jrnl_next_copy(j, &n, jrnl_size(j), collect, &s), 0);
    assert_int_equal(jrnl_next_sync(&n), 0);
    /* A crash here, with the archive renamed (ID2) but not the journal: an open takes the
     * next journal, read where it lies when read-only, renamed into place when writable. */
    jrnl *j2;
    seen_free(&s2);
    assert_int_equal(jrnl_open(P, ID2, ID1, 0, collect, &s2, &st, &j2), 0);
    check_copied(&s2, R + 10, 15, np);
    jrnl_close(j2);
    assert_int_equal(access(np, F_OK), 0);
    /* ... while the old archive (ID1) still in place ignores it (read-only). */
    seen_free(&s2);
    assert_int_equal(jrnl_open(P, ID1, 0, 0, collect, &s2, &st, &j2), 0);
    assert_int_equal(s2.n, 25);
    jrnl_close(j2);
    assert_int_equal(access(np, F_OK), 0);
    /* Commit: j appends to the next journal, now the journal. */
    assert_int_equal(jrnl_next_commit(j, &n), 0);
    assert_int_equal(access(np, F_OK), -1);
    assert_int_equal(jrnl_records(j), 15);
    assert_int_equal(jrnl_size(j), file_size(P));
    rec *T = calloc(4, sizeof *T);
    append_recs(j, T, 0, 3, &rs, 0);
    jrnl_close(j);
    seen_free(&s2);
    assert_int_equal(jrnl_open(P, ID2, ID1, 0, collect, &s2, &st, &j2), 0);
    assert_int_equal(s2.n, 18);
    s2.n = 15;
    check_copied(&s2, R + 10, 15, P);
    s2.n = 18;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(s2.r[15 + i].seq, 16 + i);
        assert_memory_equal(s2.r[15 + i].body, T[i].body, T[i].hn + T[i].dn);
    }
    jrnl_close(j2);
    seen_free(&s2);

    /* Writable open, crash between the renames: the next journal is renamed into place. */
    unsigned char *img;
    size_t fn;
    img = slurp(P, &fn);
    put_file(np, img, fn);
    unsigned char h[JRNL_HDR];
    jrnl_header_encode(h, ID1);
    put_file(P, h, JRNL_HDR); /* the old archive's journal */
    assert_int_equal(jrnl_open(P, ID2, ID1, 1, collect, &s2, &st, &j2), 0);
    assert_int_equal(s2.n, 18);
    assert_int_equal(st.stale, 0);
    jrnl_close(j2);
    assert_int_equal(access(np, F_OK), -1);
    assert_int_equal(file_size(P), fn);
    seen_free(&s2);
    /* A next journal of an archive never put in place (ID3), or cut short, is removed by a
     * writable open and the journal replays as it is. */
    for (int cut = 0; cut < 2; cut++) {
        jrnl_header_encode(h, ID3);
        put_file(np, h, cut ? JRNL_HDR - 5 : JRNL_HDR);
        assert_int_equal(jrnl_open(P, ID2, ID1, 0, collect, &s2, &st, &j2), 0);
        jrnl_close(j2);
        assert_int_equal(access(np, F_OK), 0); /* read-only: left */
        assert_int_equal(s2.n, 18);
        seen_free(&s2);
        assert_int_equal(jrnl_open(P, ID2, ID1, 1, collect, &s2, &st, &j2), 0);
        assert_int_equal(s2.n, 18);
        jrnl_close(j2);
        assert_int_equal(access(np, F_OK), -1);
        seen_free(&s2);
    }
    free(img);
    free(np);
    seen_free(&s);
    free_recs(R, 25);
    free_recs(T, 3);
    /* No temporary files are left behind. */
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls '%s' | grep -v -x -e ref.journal -e copy.journal)\"",
             dir);
    assert_int_equal(system(cmd), 0);
}

static void test_too_large(void **state)
{
    (void)state;
    jrnl_stats st;
    jrnl *j;
    unlink(P);
    assert_int_equal(jrnl_open(P, ID1, 0, 1, collect, NULL, &st, &j), 0);
    assert_int_equal(jrnl_append(j, JR_WRITE, "h", 1, NULL, 0, NULL), 0);
    static const char dummy[16];
    assert_int_equal(jrnl_append(j, JR_WRITE, dummy, 16, dummy, JRNL_MAX_BODY, NULL), -EFBIG);
    assert_int_equal(jrnl_records(j), 1);
    assert_int_equal(jrnl_size(j), JRNL_HDR + 1 + JRNL_REC_OVERHEAD);
    assert_int_equal(jrnl_append(j, JR_WRITE, "i", 1, NULL, 0, NULL), 0);
    char d4[4];
    assert_int_equal(jrnl_read(j, jrnl_size(j) - 2, d4, 4), -EIO); /* past the end */
    assert_int_equal(jrnl_read(j, jrnl_size(j) - 4, d4, 4), 0);
    jrnl_close(j);
    seen s;
    seen_init(&s);
    assert_int_equal(jrnl_open(P, ID1, 0, 0, collect, &s, &st, &j), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.r[1].seq, 2);
    jrnl_close(j);
    seen_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_written_and_kill),
        cmocka_unit_test(test_every_flip),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_bogus_lengths),
        cmocka_unit_test(test_sequence_and_type),
        cmocka_unit_test(test_headers_and_ids),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_next),
        cmocka_unit_test(test_too_large),
    };
    return cmocka_run_group_tests_name("jrnl", tests, setup, teardown);
}
