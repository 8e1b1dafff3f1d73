/* piece: random edit sequences against a flat byte-array model.
 *
 * Every source byte is a fixed function of (kind, src): PT_BASE byte s is base_byte(s),
 * PT_JRNL byte s is jrnl_byte(s), PT_ZERO is 0. Materialising the table is then a pure
 * function of its pieces, so after every edit it is compared byte for byte with a model that
 * applies the same edit to a plain array. The table's invariants are checked too: no empty
 * piece, ends strictly increasing, no two neighbours that continue the same source (they must
 * have been merged), pt_find agrees with a linear scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <time.h>

#include "../../engine/volume/piece.h"
#include "testutil.h"

#define MAXSIZE ((uint64_t)1 << 16) /* model files stay below this (plus one edit) */

static unsigned char mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (unsigned char)x;
}

static unsigned char base_byte(uint64_t s)
{
    return mix(s * 2 + 1) | 1; /* never 0, so holes and base bytes differ */
}

static unsigned char jrnl_byte(uint64_t s)
{
    return mix(s * 2 + 0x9e3779b97f4a7c15ULL) | 0x80;
}

static unsigned char src_byte(uint32_t kind, uint64_t s)
{
    return kind == PT_BASE ? base_byte(s) : kind == PT_JRNL ? jrnl_byte(s) : 0;
}

typedef struct model {
    unsigned char *b;
    uint64_t n, cap;
} model;

static void m_reserve(model *m, uint64_t n)
{
    if (n <= m->cap) return;
    uint64_t cap = m->cap ? m->cap : 1024;
    while (cap < n)
        cap *= 2;
    m->b = realloc(m->b, cap);
    assert_non_null(m->b);
    m->cap = cap;
}

static void m_init(model *m, uint64_t size)
{
    memset(m, 0, sizeof *m);
    m_reserve(m, size + 1);
    for (uint64_t i = 0; i < size; i++)
        m->b[i] = base_byte(i);
    m->n = size;
}

static void m_extend(model *m, uint64_t size)
{
    if (size <= m->n) return;
    m_reserve(m, size);
    memset(m->b + m->n, 0, size - m->n);
    m->n = size;
}

static void m_write(model *m, uint64_t off, uint64_t len, uint32_t kind, uint64_t src)
{
    if (!len) return;
    m_extend(m, off);
    m_reserve(m, off + len);
    for (uint64_t i = 0; i < len; i++)
        m->b[off + i] = src_byte(kind, src + i);
    if (off + len > m->n) m->n = off + len;
}

static void m_insert(model *m, uint64_t off, uint64_t len, uint32_t kind, uint64_t src)
{
    if (!len) return;
    m_extend(m, off);
    m_reserve(m, m->n + len);
    memmove(m->b + off + len, m->b + off, m->n - off);
    for (uint64_t i = 0; i < len; i++)
        m->b[off + i] = src_byte(kind, src + i);
    m->n += len;
}

static void m_truncate(model *m, uint64_t size)
{
    if (size > m->n)
        m_extend(m, size);
    else
        m->n = size;
}

/* The table's structure and content against the model; `what` names the last edit. */
static void check(const pt *t, const model *m, unsigned char *scratch, const char *what)
{
    if (pt_size(t) != m->n)
        fail_msg("%s: size %llu, model %llu", what, (unsigned long long)pt_size(t),
                 (unsigned long long)m->n);
    if (t->n > t->cap) fail_msg("%s: %zu pieces but capacity %zu", what, t->n, t->cap);
    if (m->n == 0 && t->n != 0) fail_msg("%s: empty file with %zu pieces", what, t->n);
    uint64_t prev = 0;
    for (size_t i = 0; i < t->n; i++) {
        const pt_piece *p = &t->p[i];
        if (p->end <= prev)
            fail_msg("%s: piece %zu ends at %llu after %llu (empty or out of order)", what, i,
                     (unsigned long long)p->end, (unsigned long long)prev);
        if (p->kind != PT_BASE && p->kind != PT_JRNL && p->kind != PT_ZERO)
            fail_msg("%s: piece %zu has kind %u", what, i, p->kind);
        if (i) {
            const pt_piece *a = &t->p[i - 1];
            uint64_t alen = a->end - pt_start(t, i - 1);
            if (a->kind == p->kind && (p->kind == PT_ZERO || a->src + alen == p->src))
                fail_msg("%s: pieces %zu and %zu continue one source (kind %u, src %llu+%llu "
                         "and %llu) but were not merged",
                         what, i - 1, i, p->kind, (unsigned long long)a->src,
                         (unsigned long long)alen, (unsigned long long)p->src);
        }
        for (uint64_t o = prev; o < p->end; o++)
            scratch[o] = p->kind == PT_ZERO ? 0 : src_byte(p->kind, p->src + (o - prev));
        prev = p->end;
    }
    for (uint64_t o = 0; o < m->n; o++)
        if (scratch[o] != m->b[o])
            fail_msg("%s: byte %llu is %02x, model %02x", what, (unsigned long long)o, scratch[o],
                     m->b[o]);
}

/* pt_find on a few offsets (every boundary and neighbours) against a linear scan. */
static void check_find(const pt *t, uint64_t *rs)
{
    for (size_t i = 0; i < t->n; i++) {
        uint64_t s = pt_start(t, i), e = t->p[i].end;
        uint64_t probe[4] = {s, e - 1, s + (e - s) / 2, s + tu_rand(rs) % (e - s)};
        for (int k = 0; k < 4; k++)
            if (pt_find(t, probe[k]) != i)
                fail_msg("pt_find(%llu) = %zu, want %zu", (unsigned long long)probe[k],
                         pt_find(t, probe[k]), i);
    }
}

typedef struct counts {
    unsigned long writes, inserts, truncs, maxpieces, merges_seen;
} counts;

/* One random run of `nops` edits from seed `seed`. */
static void run(uint64_t seed, int nops, counts *cn)
{
    uint64_t rs = seed * 2654435761u + 1;
    model m;
    pt t;
    uint64_t size0 = tu_rand(&rs) % 4 == 0 ? 0 : tu_rand(&rs) % 20000;
    uint64_t jnext = 32 + tu_rand(&rs) % 1000; /* next journal offset, growing like a log */
    uint64_t last_jend = 0;                    /* end of the last journal bytes used */
    unsigned char *scratch = malloc(MAXSIZE * 4);
    char what[256];
    assert_non_null(scratch);
    m_init(&m, size0);
    assert_int_equal(pt_init(&t, size0), 0);
    check(&t, &m, scratch, "init");
    for (int op = 0; op < nops; op++) {
        uint64_t size = m.n, r = tu_rand(&rs) % 100;
        /* Offsets: often at the end (appends), at 0, at the size boundary of pieces, or random;
         * sometimes past the end (holes). */
        uint64_t off;
        switch (tu_rand(&rs) % 6) {
        case 0:
            off = size;
            break;
        case 1:
            off = 0;
            break;
        case 2:
            off = t.n ? pt_start(&t, tu_rand(&rs) % t.n) : 0;
            break;
        case 3:
            off = size + tu_rand(&rs) % 300;
            break;
        default:
            off = size ? tu_rand(&rs) % (size + 1) : 0;
        }
        uint64_t len = tu_rand(&rs) % 8 == 0 ? 0
                       : tu_rand(&rs) % 4 == 0 ? 1 + tu_rand(&rs) % 4
                                               : 1 + tu_rand(&rs) % 700;
        /* Sources: fresh journal bytes (the usual case), journal bytes that continue the last
         * ones (sequential writes, mergeable), base bytes (mergeable when they line up with
         * the neighbour), or zeros. */
        uint32_t kind;
        uint64_t src;
        uint64_t ks = tu_rand(&rs) % 10;
        if (ks < 5) {
            kind = PT_JRNL;
            src = jnext + tu_rand(&rs) % 40;
        } else if (ks < 7) {
            kind = PT_JRNL;
            src = last_jend ? last_jend : jnext;
        } else if (ks < 9) {
            kind = PT_BASE;
            /* Often exactly what the file had at `off` originally. */
            src = tu_rand(&rs) % 2 ? off : tu_rand(&rs) % (size0 + 1);
        } else {
            kind = PT_ZERO;
            src = tu_rand(&rs);
        }
        if (kind == PT_JRNL && len) {
            last_jend = src + len;
            if (last_jend > jnext) jnext = last_jend + 24; /* a record header in between */
        }
        if (m.n > MAXSIZE) r = 95; /* keep it bounded: cut */
        size_t before = t.n;
        if (r < 45) {
            if (off + len > MAXSIZE * 2) off = size;
            snprintf(what, sizeof what, "seed %llu op %d: write off %llu len %llu kind %u src %llu",
                     (unsigned long long)seed, op, (unsigned long long)off,
                     (unsigned long long)len, kind, (unsigned long long)src);
            assert_int_equal(pt_write(&t, off, len, kind, src), 0);
            m_write(&m, off, len, kind, src);
            cn->writes++;
        } else if (r < 85) {
            if (off > size) off = size; /* pt_insert wants off <= size */
            snprintf(what, sizeof what,
                     "seed %llu op %d: insert off %llu len %llu kind %u src %llu",
                     (unsigned long long)seed, op, (unsigned long long)off,
                     (unsigned long long)len, kind, (unsigned long long)src);
            assert_int_equal(pt_insert(&t, off, len, kind, src), 0);
            m_insert(&m, off, len, kind, src);
            cn->inserts++;
        } else {
            uint64_t ns = tu_rand(&rs) % 3 == 0   ? size + tu_rand(&rs) % 500
                          : tu_rand(&rs) % 10 == 0 ? 0
                          : size                   ? tu_rand(&rs) % (size + 1)
                                                   : 0;
            if (m.n > MAXSIZE) ns = m.n / 2;
            snprintf(what, sizeof what, "seed %llu op %d: truncate %llu -> %llu",
                     (unsigned long long)seed, op, (unsigned long long)size,
                     (unsigned long long)ns);
            assert_int_equal(pt_truncate(&t, ns), 0);
            m_truncate(&m, ns);
            cn->truncs++;
        }
        check(&t, &m, scratch, what);
        check_find(&t, &rs);
        if (t.n > cn->maxpieces) cn->maxpieces = t.n;
        if (t.n < before + 1 && len && r < 85) cn->merges_seen++;
    }
    pt_free(&t);
    assert_int_equal(t.n, 0);
    assert_null(t.p);
    free(m.b);
    free(scratch);
}

static void test_fixed_seeds(void **state)
{
    (void)state;
    counts cn = {0};
    for (uint64_t seed = 1; seed <= 40; seed++)
        run(seed, 400, &cn);
    /* The generator must reach the interesting cases, or the test proves little. */
    assert_true(cn.writes > 4000 && cn.inserts > 4000 && cn.truncs > 1000);
    assert_true(cn.maxpieces > 50);
    assert_true(cn.merges_seen > 500);
}

static void test_fresh_seeds(void **state)
{
    (void)state;
    counts cn = {0};
    uint64_t base = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    for (int k = 0; k < 6; k++) {
        uint64_t seed = base + (uint64_t)k * 7919;
        print_message("# piece: fresh seed %llu\n", (unsigned long long)seed);
        run(seed, 1500, &cn);
    }
}

/* A few hand-made cases whose exact shape is known. */
static void test_shapes(void **state)
{
    (void)state;
    pt t;
    assert_int_equal(pt_init(&t, 0), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(pt_size(&t), 0);
    /* Sequential appends from contiguous journal bytes stay one piece. */
    for (uint64_t i = 0; i < 100; i++)
        assert_int_equal(pt_write(&t, i * 10, 10, PT_JRNL, 1000 + i * 10), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.p[0].end, 1000);
    assert_int_equal(t.p[0].src, 1000);
    /* A write past the end leaves one zero piece for the hole. */
    assert_int_equal(pt_write(&t, 1500, 5, PT_JRNL, 9000), 0);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.p[1].kind, PT_ZERO);
    assert_int_equal(t.p[1].end, 1500);
    assert_int_equal(pt_size(&t), 1505);
    /* Extending with zeros merges with the hole only when adjacent. */
    assert_int_equal(pt_truncate(&t, 1400), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(pt_truncate(&t, 1600), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.p[1].kind, PT_ZERO);
    assert_int_equal(pt_truncate(&t, 0), 0);
    assert_int_equal(t.n, 0);
    /* Writing back what was there merges the three parts again. */
    pt_free(&t);
    assert_int_equal(pt_init(&t, 100), 0);
    assert_int_equal(pt_write(&t, 40, 10, PT_JRNL, 77), 0);
    assert_int_equal(t.n, 3);
    assert_int_equal(pt_write(&t, 40, 10, PT_BASE, 40), 0);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.p[0].end, 100);
    /* An insert of the missing middle of a base range rejoins it with its left part. */
    assert_int_equal(pt_truncate(&t, 50), 0);
    assert_int_equal(pt_insert(&t, 50, 50, PT_BASE, 50), 0);
    assert_int_equal(t.n, 1);
    /* pt_find at every offset of a two-piece table. */
    assert_int_equal(pt_insert(&t, 30, 5, PT_ZERO, 0), 0);
    assert_int_equal(t.n, 3);
    for (uint64_t o = 0; o < pt_size(&t); o++)
        assert_int_equal(pt_find(&t, o), o < 30 ? 0 : o < 35 ? 1 : 2);
    /* Zero-length edits change nothing. */
    pt_piece copy[3];
    memcpy(copy, t.p, sizeof copy);
    assert_int_equal(pt_write(&t, 7, 0, PT_JRNL, 5), 0);
    assert_int_equal(pt_insert(&t, 7, 0, PT_JRNL, 5), 0);
    assert_int_equal(pt_write(&t, 5000, 0, PT_JRNL, 5), 0);
    assert_int_equal(t.n, 3);
    assert_memory_equal(copy, t.p, sizeof copy);
    pt_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_fixed_seeds),
        cmocka_unit_test(test_fresh_seeds),
    };
    return cmocka_run_group_tests_name("piece", tests, NULL, NULL);
}
