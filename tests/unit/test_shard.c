/* Archives of several shards, assembled from independently packed pieces: the reader merges
 * their grammars, a file whose run crosses two shard cuts reads back whole and at any offset,
 * analytics equal those of the same tree packed as one shard, and a damaged shard costs only
 * the files with content in it (named in the message) and is never compacted. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "../../engine/analytics/ana.h"
#include "../../engine/analytics/ana_shards.h"
#include "../../engine/analytics/analytics.h"
#include "../../engine/format/arc.h"
#include "../../engine/build/compact_shards.h"
#include "../../engine/backend/backend.h"
#include "../../engine/base/err.h"
#include "../../engine/base/tok.h"
#include "../../engine/build/pack.h"
#include "../../engine/volume/vol.h"
#include "../../engine/index/idx.h"
#include "testutil.h"

static char *dir, *sharded, *whole;
static char *mismatch; /* sharded, but the shard table gives shard 1 one rule too many */
static char *badhash;  /* sharded, but a.txt's recorded hash is wrong */
static buf big;        /* the file cut over three shards */

static void put(const char *sub, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Pack DIR/sub into its own archive and open it. */
static arc *pack_part(const char *sub)
{
    char src[4096], out[4096];
    snprintf(src, sizeof src, "%s/%s", dir, sub);
    snprintf(out, sizeof out, "%s/%s.tdc", dir, sub);
    pack_stats st;
    arc *a;
    if (pack_dir(src, out, NULL, &st) || arc_open(out, &a)) fail_msg("%s", tdc_errmsg());
    return a;
}

static arc_entry copy_entry(const arc_entry *e, uint32_t shard)
{
    arc_entry c = *e;
    c.path = strdup(e->path);
    c.link = NULL;
    c.xattrs = NULL;
    c.nxattrs = 0;
    c.ino = 0;
    c.shard = shard;
    return c;
}

/* Words with some repetition, cut into three parts on separators. */
static void make_text(void)
{
    uint64_t seed = 7;
    static const char *w[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"};
    while (big.n < 30000) {
        const char *s = w[tu_rand(&seed) % 7];
        buf_put(&big, s, strlen(s));
        buf_put(&big, tu_rand(&seed) % 9 ? " " : ".\n", tu_rand(&seed) % 9 ? 1 : 2);
    }
}

/* Free what a hand-made archive was written from: the parts packed apart, their coded
 * shards (n of each) and the file table. */
static void free_parts(arc **p, arc_coded *c, size_t n, arc *w)
{
    for (size_t k = 0; k < n; k++) {
        arc_coded_free(&c[k]);
        arc_free(p[k]);
    }
    for (uint32_t i = 0; i < w->nents; i++)
        arc_entry_clear(&w->ents[i]);
    free(w->ents);
    free(w->byino);
}

/* Write `out`: the tree of "all" in three shards, hand-cut: "big" cut at c1 and c2 (after a
 * space, or inside a word for an archive no pack writes), going on from shard 0 through shard
 * 1 into shard 2. With `mis`, also that archive with one rule too many in shard 1's
 * figures; with `bad`, also that archive with a.txt's recorded hash wrong. */
static void write_sharded(const char *out, const char *mis, const char *bad, size_t c1, size_t c2)
{
    const char *a = "the quick brown fox jumps over the lazy dog\n";
    const char *z = "zeta eta alpha and the end\n";
    put("p0", "a.txt", a, strlen(a));
    put("p0", "big", big.p, c1);
    put("p1", "big", big.p + c1, c2 - c1);
    put("p2", "big", big.p + c2, big.n - c2);
    put("p2", "zz.txt", z, strlen(z));
    put("all", "a.txt", a, strlen(a));
    put("all", "big", big.p, big.n);
    put("all", "zz.txt", z, strlen(z));

    arc *p[3] = {pack_part("p0"), pack_part("p1"), pack_part("p2")};
    arc_coded c[3];
    /* shard 1 in the plain layout of rules and root, the others in the kind layout: an
     * archive may mix them (compaction copies shards as they are stored) */
    for (int k = 0; k < 3; k++)
        assert_int_equal(arc_shard_encode(p[k]->dict, &p[k]->g, p[k]->shards[0].bytes, 3,
                                          k == 1 ? ARC_PLAIN_SYMS : 0, &c[k]),
                         0);
    /* Entries: "", a.txt and big from part 0 (big goes on through parts 1 and 2), zz.txt
     * from part 2. */
    arc w = {0};
    w.nents = 4;
    w.ents = calloc(4, sizeof *w.ents);
    w.ents[0] = copy_entry(&p[0]->ents[0], 0);
    w.ents[1] = copy_entry(&p[0]->ents[1], 0);
    w.ents[2] = copy_entry(&p[0]->ents[2], 0);
    w.ents[2].root_len += p[1]->ents[1].root_len + p[2]->ents[1].root_len;
    w.ents[2].size = big.n;
    w.ents[2].hash = XXH3_64bits(big.p, big.n);
    w.ents[3] = copy_entry(&p[2]->ents[2], 2);
    assert_string_equal(w.ents[3].path, "zz.txt");
    int rc = arc_write_coded(out, &w, c, 3, 3);
    if (rc) fail_msg("%s", tdc_errmsg());
    c[1].info.nrules++;
    if (mis && arc_write_coded(mis, &w, c, 3, 3)) fail_msg("%s", tdc_errmsg());
    c[1].info.nrules--;
    w.ents[1].hash ^= 1;
    if (bad && arc_write_coded(bad, &w, c, 3, 3)) fail_msg("%s", tdc_errmsg());
    w.ents[1].hash ^= 1;
    free_parts(p, c, 3, &w);
}

static int setup(void **state)
{
    (void)state;
    dir = tu_tmppath("shards");
    sharded = tu_tmppath("sharded.tdc");
    whole = tu_tmppath("whole.tdc");
    mismatch = tu_tmppath("mismatch.tdc");
    badhash = tu_tmppath("badhash.tdc");
    mkdir(dir, 0755);
    make_text();
    size_t c1 = 9000, c2 = 21000;
    while (big.p[c1 - 1] != ' ')
        c1++;
    while (big.p[c2 - 1] != ' ')
        c2++;
    write_sharded(sharded, mismatch, badhash, c1, c2);
    /* TDC_SHARD_KEEP=PATH: a copy of the three-shard archive (format.bats reads it) */
    const char *keep = getenv("TDC_SHARD_KEEP");
    if (keep) {
        char cmd[8300];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", sharded, keep);
        if (system(cmd)) fail_msg("cannot keep %s", sharded);
    }
    char src[4096];
    snprintf(src, sizeof src, "%s/all", dir);
    pack_stats st;
    return pack_dir(src, whole, NULL, &st);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s' '%s' '%s'", dir, sharded, whole, mismatch,
             badhash);
    if (system(cmd)) return -1;
    free(dir);
    free(mismatch);
    free(badhash);
    free(sharded);
    free(whole);
    buf_free(&big);
    return 0;
}

static void test_reads_across_cuts(void **state)
{
    (void)state;
    arc *a;
    idx *x;
    assert_int_equal(arc_open(sharded, &a), 0);
    assert_int_equal(a->nshards, 3);
    assert_int_equal(a->version, ARC_VERSION);
    assert_int_equal(a->ents[2].shard, 0);
    assert_int_equal(a->ents[3].shard, 2);
    assert_int_equal(idx_build(a, &x), 0);
    uint64_t files = 0;
    assert_int_equal(idx_check_content(x, NULL, NULL, NULL, &files, NULL), 0);
    assert_int_equal(files, 3);
    unsigned char *out = malloc(big.n);
    uint64_t seed = 3;
    for (int i = 0; i < 200; i++) {
        size_t off = tu_rand(&seed) % big.n, n = 1 + tu_rand(&seed) % 12000;
        ssize_t got = idx_extract(x, 2, off, out, n);
        size_t want = off + n > big.n ? big.n - off : n;
        assert_int_equal(got, want);
        assert_memory_equal(out, big.p + off, want);
    }
    free(out);
    idx_free(x);
    arc_free(a);
}

/* The loader of a lazy open, held until the test lets it go. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static void gate_wait(void *p)
{
    gate *g = p;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Read every regular file of v at 20 random ranges each, byte-exact against x (a full load
 * of the same archive); the number of reads. */
static uint64_t read_all(vol *v, vol_reader *r, const arc *a, const idx *x)
{
    uint64_t reads = 0;
    for (uint32_t e = 0; e < a->nents; e++) {
        if (a->ents[e].type != ARC_REG) continue;
        uint64_t ino, size = a->ents[e].size;
        assert_int_equal(vol_resolve(v, a->ents[e].path, &ino), 0);
        unsigned char *want = malloc(size + 1), *got = malloc(size + 1);
        assert_int_equal(idx_extract(x, e, 0, want, size), (ssize_t)size);
        uint64_t seed = e;
        for (int i = 0; i < 20 && size; i++) {
            uint64_t off = tu_rand(&seed) % size, n = 1 + tu_rand(&seed) % size;
            ssize_t k = vol_read(v, r, ino, off, got, n);
            assert_int_equal(k, n < size - off ? n : size - off);
            assert_memory_equal(got, want + off, (size_t)k);
            reads++;
        }
        free(want);
        free(got);
    }
    return reads;
}

/* Wait for v's whole archive (vol_lock_arc loads it). */
static void load_whole(vol *v)
{
    const arc *la;
    const idx *lx;
    assert_int_equal(vol_lock_arc(v, &la, &lx), 0);
    vol_unlock_arc(v);
}

/* Load v's whole archive, read every file again (from it: the early reads stay at `reads`,
 * no span is kept), then free r and close v. */
static void read_loaded_and_close(vol *v, vol_reader *r, const arc *a, const idx *x, uint64_t reads)
{
    vol_info in;
    load_whole(v);
    read_all(v, r, a, x);
    vol_get_info(v, &in);
    assert_int_equal(in.early_reads, reads);
    assert_int_equal(in.spans, 0);
    vol_reader_free(r);
    vol_close(v);
}

/* A scratch copy of the three-shard archive (free it with drop_copy). */
static char *copy_sharded(const char *name)
{
    char *p = tu_tmppath(name), cmd[8300];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", sharded, p);
    assert_int_equal(system(cmd), 0);
    return p;
}

/* Remove archive copy p, its journal and the writer's lock file a writable open made. */
static void drop_copy(char *p)
{
    char j[8300];
    snprintf(j, sizeof j, "%s.journal", p);
    unlink(j);
    snprintf(j, sizeof j, "%s.lock", p);
    unlink(j);
    unlink(p);
    free(p);
}

/* Reads of a lazy mount while its loader has not started: every file reads byte-exact from
 * the shards it spans alone, without waiting for the load; after the load, reads go on. */
static void test_reads_before_the_load(void **state)
{
    (void)state;
    arc *a;
    idx *x;
    assert_int_equal(arc_open(sharded, &a), 0);
    assert_int_equal(idx_build(a, &x), 0);
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    vol_opts o = {.lazy = 1, .load_hook = gate_wait, .load_ctx = &g};
    vol *v;
    vol_reader r;
    vol_reader_init(&r);
    assert_int_equal(vol_open(sharded, &o, &v, NULL), 0);
    assert_int_equal(vol_start(v), 0);
    uint64_t reads = read_all(v, &r, a, x);
    vol_info in;
    vol_get_info(v, &in);
    /* the loader still waits: every read came from spans */
    assert_int_equal(in.early_reads, reads);
    assert_true(in.span_loads >= 1 && in.span_loads <= 3);
    gate_open(&g);
    read_loaded_and_close(v, &r, a, x, reads);
    idx_free(x);
    arc_free(a);
}

typedef struct reader_job {
    vol *v;
    const arc *a;
    const idx *x;
    uint64_t reads;
} reader_job;

static void *reader_main(void *p)
{
    reader_job *j = p;
    vol_reader r;
    vol_reader_init(&r);
    j->reads = read_all(j->v, &r, j->a, j->x);
    vol_reader_free(&r);
    return NULL;
}

/* Under a memory budget no loader starts: reads come from spans kept within the budget (the
 * least recently used dropped), byte-exact; under a budget too small for any span, the span
 * in use is kept alone. What needs the whole archive still loads it. */
static void test_reads_under_a_budget(void **state)
{
    (void)state;
    arc *a;
    idx *x;
    assert_int_equal(arc_open(sharded, &a), 0);
    assert_int_equal(idx_build(a, &x), 0);
    uint64_t one = 0; /* the three spans' bytes, from an unbounded run */
    for (int pass = 0; pass < 3; pass++) {
        vol_opts o = {.lazy = 1, .mem = pass == 0 ? (uint64_t)1 << 40 : pass == 1 ? one - 1 : 1};
        vol *v;
        vol_reader r;
        vol_reader_init(&r);
        assert_int_equal(vol_open(sharded, &o, &v, NULL), 0);
        assert_int_equal(vol_start(v), 0);
        uint64_t reads = read_all(v, &r, a, x);
        reads += read_all(v, &r, a, x);
        if (pass == 1) { /* four readers at once, spans dropped under them */
            reader_job j[4];
            pthread_t th[4];
            for (int i = 0; i < 4; i++) {
                j[i] = (reader_job){v, a, x, 0};
                assert_int_equal(pthread_create(&th[i], NULL, reader_main, &j[i]), 0);
            }
            for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                reads += j[i].reads;
            }
        }
        vol_info in;
        vol_get_info(v, &in);
        assert_int_equal(in.early_reads, reads);
        assert_true(in.span_bytes <= o.mem || in.spans == 1); /* one span larger than it */
        if (pass == 0) { /* everything kept: three spans, each loaded once (read ahead
                          * or by a read) */
            assert_int_equal(in.span_loads, 3);
            assert_true(in.span_ahead <= 2); /* "big"'s span and the next, read in order */
            assert_int_equal(in.spans, 3);
            assert_int_equal(in.span_evictions, 0);
            one = in.span_bytes; /* the next pass has room for all but one byte of them */
        } else if (pass == 1) {  /* not room for all: spans dropped and loaded again */
            assert_true(in.span_evictions >= 1);
            assert_true(in.span_loads > 3);
        } else { /* room for none: the span in use kept alone, loaded again on each switch */
            assert_int_equal(in.spans, 1);
            assert_true(in.span_loads > 3 && in.span_loads < reads);
        }
        read_loaded_and_close(v, &r, a, x, reads);
    }
    idx_free(x);
    arc_free(a);
}

/* Without mem, a lazy open of an archive of several shards takes mem_auto as its budget, and
 * analytics go shard by shard over the file table however large the budget: the archive's
 * grammar may fit it loaded whole while an analytic of it needs many times that. */
static void test_default_budget(void **state)
{
    (void)state;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t budget = pass ? (uint64_t)1 << 40 : (uint64_t)1 << 20;
        vol_opts o = {.lazy = 1, .mem_auto = budget};
        vol *v;
        vol_info in;
        assert_int_equal(vol_open(sharded, &o, &v, NULL), 0);
        assert_int_equal(vol_start(v), 0);
        vol_get_info(v, &in);
        assert_int_equal(in.budget, budget);
        vol_view w;
        assert_int_equal(vol_view_open(v, 1, 0, &w), 0);
        assert_int_equal(w.a->pending, 1); /* the file table alone */
        assert_null(w.x);
        vol_view_close(&w);
        vol_get_info(v, &in);
        assert_int_equal(in.whole, 0);
        vol_close(v);
    }
}

static void append_zz(vol *v);

/* Under a budget, a file with edits not yet compacted reads its archived bytes from spans
 * too: the whole archive stays unloaded. */
static void test_edited_reads_under_a_budget(void **state)
{
    (void)state;
    char *p = copy_sharded("budget.tdc");
    arc *a;
    idx *x;
    assert_int_equal(arc_open(p, &a), 0);
    assert_int_equal(idx_build(a, &x), 0);
    int64_t e = arc_lookup(a, "zz.txt");
    assert_true(e > 0);
    uint64_t size = a->ents[e].size, ino;
    unsigned char want[4096], got[4096];
    assert_true(size + 11 <= sizeof want);
    assert_int_equal(idx_extract(x, (uint32_t)e, 0, want, size), (ssize_t)size);
    memcpy(want + size, "more words\n", 11);
    vol_opts o = {.writable = 1, .lazy = 1, .mem = (uint64_t)1 << 30};
    vol *v;
    vol_reader r;
    vol_reader_init(&r);
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    assert_int_equal(vol_start(v), 0);
    append_zz(v);
    assert_int_equal(vol_resolve(v, "zz.txt", &ino), 0);
    assert_int_equal(vol_read(v, &r, ino, 0, got, sizeof got), (ssize_t)(size + 11));
    assert_memory_equal(got, want, size + 11);
    vol_info in;
    vol_get_info(v, &in);
    assert_true(in.early_reads >= 1);
    assert_int_equal(in.spans, 1); /* still kept: nothing loaded the whole archive */
    vol_reader_free(&r);
    vol_close(v);
    idx_free(x);
    arc_free(a);
    drop_copy(p);
}

/* Sequences and counts over the cuts are those of the same tree in one grammar. */
static void test_analytics_as_one_grammar(void **state)
{
    (void)state;
    arc *s, *w;
    assert_int_equal(arc_open(sharded, &s), 0);
    assert_int_equal(arc_open(whole, &w), 0);
    assert_int_equal(w->nshards, 1);
    int (*fn[])(ana_ctx *, const arc *, uint32_t, uint32_t, const unsigned char *, buf *) = {
        ana_wordcount, ana_sort, ana_invindex, ana_termvector, ana_seqcount, ana_rankedinvindex};
    for (size_t k = 0; k < sizeof fn / sizeof *fn; k++) {
        buf x = {0}, y = {0};
        assert_int_equal(fn[k](NULL, s, 0, s->nents, NULL, &x), 0);
        assert_int_equal(fn[k](NULL, w, 0, w->nents, NULL, &y), 0);
        assert_int_equal(x.n, y.n);
        assert_memory_equal(x.p, y.p, x.n);
        buf_free(&x);
        buf_free(&y);
    }
    arc_free(s);
    arc_free(w);
}

/* Shard by shard (ana_by_shard) each analytic prints what it prints on the archive loaded
 * whole, over the tree and each file; a file cut inside a word between two shards (which
 * pack never writes) is refused with -ENOTSUP before any output, and the archive loaded whole
 * still answers. */
static void test_analytics_by_shard(void **state)
{
    (void)state;
    char *cut = tu_tmppath("cutword.tdc");
    size_t c1 = 9000, c2 = 21000;
    while (!(big.p[c1 - 1] != ' ' && big.p[c1] != ' ' && big.p[c1] != '.'))
        c1++;
    while (big.p[c2 - 1] != ' ')
        c2++;
    write_sharded(cut, NULL, NULL, c1, c2);
    arc *m, *w, *cm, *cw;
    assert_int_equal(arc_open_meta(sharded, &m), 0);
    assert_int_equal(arc_open(whole, &w), 0); /* the same tree, packed at once */
    assert_int_equal(arc_open_meta(cut, &cm), 0);
    assert_int_equal(arc_open(cut, &cw), 0);
    for (int k = 0; k < ANA_NIDS; k++) {
        for (uint32_t first = 0; first < w->nents; first++) {
            uint32_t end = ana_subtree_end(w, first);
            buf x = {0}, y = {0};
            assert_int_equal(ana_by_shard(NULL, NULL, NULL, k, m, first, end, NULL, &x), 0);
            assert_int_equal(ana_table[k].cpu(NULL, w, first, end, NULL, &y), 0);
            assert_int_equal(x.n, y.n);
            assert_memory_equal(x.p, y.p, x.n);
            x.n = 0;
            int rc = ana_by_shard(NULL, NULL, NULL, k, cm, first, end, NULL, &x);
            if (first == 0 || first == 2) { /* scopes holding big */
                assert_int_equal(rc, -ENOTSUP);
                assert_non_null(strstr(tdc_errmsg(), "'big' is cut inside a word"));
                assert_int_equal(x.n, 0); /* refused before any output (tadoc streams it) */
            } else {
                assert_int_equal(rc, 0);
            }
            buf_free(&x);
            buf_free(&y);
        }
        buf y = {0};
        assert_int_equal(ana_table[k].cpu(NULL, cw, 0, cw->nents, NULL, &y), 0);
        assert_true(y.n > 0);
        buf_free(&y);
    }
    arc_free(m);
    arc_free(w);
    arc_free(cm);
    arc_free(cw);
    unlink(cut);
    free(cut);
}

/* Write `out`: "big" alone, cut over n + 1 shards of its own at cuts[0..n) (ascending). */
static void write_parts(const char *out, const size_t *cuts, size_t n)
{
    arc **p = calloc(n + 1, sizeof *p);
    arc_coded *c = calloc(n + 1, sizeof *c);
    assert_true(p && c);
    for (size_t k = 0; k <= n; k++) {
        char sub[32];
        size_t from = k ? cuts[k - 1] : 0, to = k < n ? cuts[k] : big.n;
        snprintf(sub, sizeof sub, "q%zu", k);
        put(sub, "big", big.p + from, to - from);
        p[k] = pack_part(sub);
        assert_int_equal(arc_shard_encode(p[k]->dict, &p[k]->g, p[k]->shards[0].bytes, 3, 0, &c[k]),
                         0);
    }
    arc w = {0};
    w.nents = 2;
    w.ents = calloc(2, sizeof *w.ents);
    w.ents[0] = copy_entry(&p[0]->ents[0], 0);
    w.ents[1] = copy_entry(&p[0]->ents[1], 0);
    for (size_t k = 1; k <= n; k++)
        w.ents[1].root_len += p[k]->ents[1].root_len;
    w.ents[1].size = big.n;
    w.ents[1].hash = XXH3_64bits(big.p, big.n);
    if (arc_write_coded(out, &w, c, (uint32_t)n + 1, 3)) fail_msg("%s", tdc_errmsg());
    free_parts(p, c, n + 1, &w);
    free(p);
    free(c);
}

/* Where `pat` occurs in big from byte `from` on (it must). */
static size_t find_in_big(const char *pat, size_t from)
{
    size_t n = strlen(pat);
    for (size_t i = from; i + n <= big.n; i++)
        if (!memcmp(big.p + i, pat, n)) return i;
    fail_msg("no '%s' in the text", pat);
    return 0;
}

static int collect_offsets(void *ctx, size_t i, const vec64 *offs)
{
    vec64 *all = ctx;
    assert_int_equal(i, 0);
    assert_true(offs->n > 0);
    for (size_t j = 0; j < offs->n; j++) {
        assert_true(!all->n || all->p[all->n - 1] < offs->p[j]); /* ascending */
        assert_int_equal(vec64_push(all, offs->p[j]), 0);
    }
    return 0;
}

/* Under a budget, .search goes through a file cut over shards of its own part by part, and
 * finds exactly its whole-word occurrences where the cuts fall between words and where a
 * writer other than pack cut inside one: a word's pieces are not found alone, the word is,
 * whatever the pieces (one a part of its own). */
static void test_search_part_by_part(void **state)
{
    (void)state;
    size_t a = find_in_big(" alpha ", 2000) + 1, z = find_in_big(" zeta ", 8000) + 1;
    size_t b = find_in_big(" beta ", 14000) + 1, g = find_in_big(" gamma", 20000) + 1;
    size_t cuts[] = {a + 1, a + 4, z + 1, b + 4, g}; /* al|lph|a, z|eta, beta| , |gamma */
    char *path = tu_tmppath("parts.tdc");
    write_parts(path, cuts, 5);
    vol_opts o = {.lazy = 1, .mem = (uint64_t)1 << 20};
    vol *v;
    assert_int_equal(vol_open(path, &o, &v, NULL), 0);
    assert_int_equal(vol_start(v), 0);
    vol_view w;
    assert_int_equal(vol_view_open(v, 1, 0, &w), 0);
    assert_int_equal(w.a->pending, 1);
    uint32_t first, last, file = 1;
    assert_int_equal(arc_entry_parts(w.a, file, &first, &last), 1);
    assert_int_equal(last - first, 5);
    static const char *words[] = {"alpha", "al",   "lph",   "pha",   "a",   "zeta", "eta",
                                  "z",     "beta", "gamma", "delta", "eps", "omega"};
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        size_t n = strlen(words[k]);
        vec64 got = {0}, want = {0};
        for (size_t i = 0; i + n <= big.n; i++) /* maximal runs of word bytes equal to it */
            if (!memcmp(big.p + i, words[k], n) && (!i || !tok_is_word_byte(big.p[i - 1])) &&
                (i + n == big.n || !tok_is_word_byte(big.p[i + n])))
                assert_int_equal(vec64_push(&want, i), 0);
        assert_int_equal(vol_view_search(&w, &file, 1, words[k], n, collect_offsets, &got), 0);
        if (got.n != want.n) fail_msg("'%s': %zu found, %zu in the text", words[k], got.n, want.n);
        if (want.n) assert_memory_equal(got.p, want.p, want.n * sizeof *want.p);
        vec64_free(&got);
        vec64_free(&want);
    }
    vol_view_close(&w);
    vol_info in;
    vol_get_info(v, &in);
    assert_int_equal(in.whole, 0);
    assert_true(in.span_loads >= 6); /* a span per part */
    vol_close(v);
    unlink(path);
    free(path);
}

/* A part's need of a byte a shard (ana_opts.group_need). */
static uint64_t one_byte(const arc *meta, uint32_t k)
{
    (void)meta;
    (void)k;
    return 1;
}

/* A copy of the sharded archive with one byte of shard k's section i (0 dictionary, 1 rules,
 * 2 root) flipped in its middle; its path (free it). */
static char *damaged_copy(uint32_t k, int i)
{
    arc *a;
    assert_int_equal(arc_open_meta(sharded, &a), 0);
    const arc_secinfo *s = &a->secs[a->shards[k].sec + i];
    uint64_t at = s->offset + s->stored / 2;
    arc_free(a);
    size_t n = 0;
    unsigned char *img = tu_slurp(sharded, &n);
    img[at] ^= 1;
    char *p = tu_tmppath("bad.tdc");
    FILE *f = fopen(p, "wb");
    fwrite(img, 1, n, f);
    fclose(f);
    free(img);
    return p;
}

/* A flipped byte in the middle shard's root: the archive opens, the shard is recorded as
 * damaged with a message naming it and the section, and only the file with content in it
 * ("big", which runs from shard 0 through 1 into 2) is unreadable; a.txt (shard 0) and zz.txt
 * (shard 2, after big's end) read exactly. */
static void test_damaged_shard_costs_its_files(void **state)
{
    (void)state;
    for (int sec = 0; sec < 3; sec++) {
        char *p = damaged_copy(1, sec);
        arc *a;
        idx *x;
        assert_int_equal(arc_open(p, &a), 0);
        assert_int_equal(a->ndamaged, 1);
        assert_null(a->shards[0].damage);
        assert_null(a->shards[2].damage);
        assert_non_null(strstr(a->shards[1].damage, "shard 1"));
        if (sec == 2)
            assert_non_null(strstr(a->shards[1].damage, "section root: checksum mismatch"));
        assert_int_equal(a->ents[1].damaged, 0);
        assert_int_equal(a->ents[2].damaged, 2);
        assert_int_equal(a->ents[3].damaged, 0);
        assert_int_equal(idx_build(a, &x), 0);
        char out[64];
        const char *z = "zeta eta alpha and the end\n";
        assert_int_equal(idx_extract(x, 3, 0, out, sizeof out), strlen(z));
        assert_memory_equal(out, z, strlen(z));
        assert_int_equal(idx_extract(x, 1, 0, out, 9), 9);
        assert_memory_equal(out, "the quick", 9);
        assert_int_equal(idx_extract(x, 2, 0, out, 9), -EBADMSG);
        assert_non_null(strstr(tdc_errmsg(), "'big'"));
        assert_non_null(strstr(tdc_errmsg(), "shard 1"));
        /* verify's check: big is the one bad file; an analytic over the whole tree fails,
         * over zz.txt alone gives its words. */
        uint64_t files = 0;
        assert_int_equal(idx_check_content(x, NULL, NULL, NULL, &files, NULL), -EBADMSG);
        assert_int_equal(files, 3);
        buf b = {0};
        backend *be;
        assert_int_equal(backend_new(NULL, &be), 0);
        assert_int_equal(backend_analytic(be, ANA_WORDCOUNT, a, 0, 0, a->nents, NULL, &b),
                         -EBADMSG);
        assert_int_equal(b.n, 0);
        /* shard by shard: the same error, and zz.txt alone gives the same words */
        char *why = strdup(tdc_errmsg());
        arc *m;
        assert_int_equal(arc_open_meta(p, &m), 0);
        assert_int_equal(ana_by_shard(NULL, NULL, NULL, ANA_WORDCOUNT, m, 0, m->nents, NULL, &b),
                         -EBADMSG);
        assert_string_equal(tdc_errmsg(), why);
        free(why);
        assert_int_equal(ana_by_shard(NULL, NULL, NULL, ANA_WORDCOUNT, m, 3, 4, NULL, &b), 0);
        buf c = {0};
        assert_int_equal(backend_analytic(be, ANA_WORDCOUNT, a, 0, 3, 4, NULL, &c), 0);
        assert_int_equal(b.n, c.n);
        assert_memory_equal(b.p, c.p, c.n);
        /* every shard in one part (ana_opts.group_*): the damaged one makes that part go
         * shard by shard, with the same error and the same words */
        ana_opts go = ANA_OPTS_INIT;
        go.group_room = UINT64_MAX / 2;
        go.group_need = one_byte;
        ana_ctx *gc = ana_ctx_new(&go);
        assert_non_null(gc);
        buf g = {0};
        assert_int_equal(ana_by_shard(gc, NULL, NULL, ANA_WORDCOUNT, m, 0, m->nents, NULL, &g),
                         -EBADMSG);
        assert_non_null(strstr(tdc_errmsg(), "'big'"));
        assert_int_equal(ana_by_shard(gc, NULL, NULL, ANA_WORDCOUNT, m, 3, 4, NULL, &g), 0);
        assert_int_equal(g.n, c.n);
        assert_memory_equal(g.p, c.p, c.n);
        buf_free(&g);
        ana_ctx_free(gc);
        buf_free(&c);
        arc_free(m);
        b.n = 0;
        assert_int_equal(backend_analytic(be, ANA_WORDCOUNT, a, 0, 3, 4, NULL, &b), 0);
        assert_non_null(memmem(b.p, b.n, "1\tzeta\n", 7));
        backend_free(be);
        buf_free(&b);
        idx_free(x);
        arc_free(a);
        unlink(p);
        free(p);
    }
}

/* What idx_check_spans reported. */
typedef struct span_seen {
    int bad, damaged;
    uint32_t shard;
    char path[64];
} span_seen;

static void seen_bad(void *ctx, const arc *s, uint32_t ent)
{
    span_seen *v = ctx;
    v->bad++;
    snprintf(v->path, sizeof v->path, "%s", s->ents[ent].path);
}

static void seen_damage(void *ctx, uint32_t k, const char *why)
{
    span_seen *v = ctx;
    v->damaged++;
    v->shard = k;
    assert_non_null(strstr(why, "shard 1"));
}

/* idx_check_spans on `path` (all files, or `only`), reporting into *v and *st. */
static int check_spans(const char *path, const unsigned char *only, span_seen *v,
                       idx_span_check *st)
{
    arc *m;
    assert_int_equal(arc_open_meta(path, &m), 0);
    memset(v, 0, sizeof *v);
    *st = (idx_span_check){.on_bad = seen_bad, .on_damage = seen_damage, .ctx = v};
    int rc = idx_check_spans(m, only, st);
    uint64_t all = m->ents[1].size + m->ents[2].size + m->ents[3].size;
    if (!only) assert_int_equal(st->bytes, v->damaged ? all - m->ents[2].size : all);
    /* without listeners (as a compaction's check): the same verdict, at the first bad file */
    idx_span_check quiet = {0};
    assert_int_equal(idx_check_spans(m, only, &quiet), rc);
    arc_free(m);
    return rc;
}

/* verify's check, span by span: every file of the three-shard archive once (big runs from
 * shard 0 through 2); a wrong hash or a damaged shard found and named, the other files
 * still checked; a selection reads only what it names. */
static void test_check_spans(void **state)
{
    (void)state;
    span_seen v;
    idx_span_check st;
    assert_int_equal(check_spans(sharded, NULL, &v, &st), 0);
    assert_int_equal(st.files, 3);
    assert_int_equal(v.bad + v.damaged, 0);

    /* a.txt, bad, is alone in the first span; the check goes on to the others */
    assert_int_equal(check_spans(badhash, NULL, &v, &st), -EBADMSG);
    assert_int_equal(st.files, 3);
    assert_int_equal(v.bad, 1);
    assert_string_equal(v.path, "a.txt");
    arc *m;
    assert_int_equal(arc_open_meta(badhash, &m), 0);
    idx_span_check quiet = {0};
    assert_int_equal(idx_check_spans(m, NULL, &quiet), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "'a.txt': content does not match its hash"));
    arc_free(m);
    const unsigned char only_big[4] = {0, 0, 1, 0}, only_zz[4] = {0, 0, 0, 1};
    assert_int_equal(check_spans(badhash, only_big, &v, &st), 0);
    assert_int_equal(st.files, 1);
    assert_int_equal(check_spans(badhash, only_zz, &v, &st), 0);
    assert_int_equal(st.files, 1);

    char *p = damaged_copy(1, 2);
    assert_int_equal(check_spans(p, NULL, &v, &st), -EBADMSG);
    assert_int_equal(st.files, 3);
    assert_int_equal(v.damaged, 1);
    assert_int_equal(st.damaged, 1);
    assert_int_equal(v.shard, 1);
    assert_int_equal(v.bad, 1);
    assert_string_equal(v.path, "big");
    assert_int_equal(check_spans(p, only_zz, &v, &st), 0); /* shard 2 alone: sound */
    unlink(p);
    free(p);
}

/* A shard whose decoded grammar disagrees with the shard table is damaged too, and costs
 * only its files. */
static void test_shard_table_disagreement(void **state)
{
    (void)state;
    arc *a;
    idx *x;
    assert_int_equal(arc_open(mismatch, &a), 0);
    assert_int_equal(a->ndamaged, 1);
    assert_non_null(strstr(a->shards[1].damage, "shard 1: grammar does not match the shard table"));
    assert_int_equal(idx_build(a, &x), 0);
    char out[8];
    assert_int_equal(idx_extract(x, 2, 100, out, 8), -EBADMSG);
    assert_int_equal(idx_extract(x, 3, 0, out, 8), 8);
    assert_memory_equal(out, "zeta eta", 8);
    idx_free(x);
    arc_free(a);
}

/* A compaction of an archive with a damaged shard is refused: the archive stays as it was. */
static int temps_beside(const char *path);

static void test_damaged_shard_not_compacted(void **state)
{
    (void)state;
    char *p = damaged_copy(1, 1);
    size_t n0 = 0, n1 = 0;
    unsigned char *before = tu_slurp(p, &n0);
    vol_opts o = {.writable = 1, .shard_size = 1000};
    vol *v;
    vol_compact_stats st;
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    append_zz(v);
    assert_int_equal(vol_compact(v, &st), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "shard 1"));
    assert_false(temps_beside(p)); /* the copy failed on a worker: the sink is removed */
    vol_close(v);
    unsigned char *after = tu_slurp(p, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
    drop_copy(p);
}

/* Shards by reference of the archive at `path` and a writer's table of its entries, as a
 * compaction that keeps every shard has them (freed by free_copy). */
typedef struct copy_job {
    arc *m;
    arc w;
    arc_coded *c;
} copy_job;

static void take_copy(const char *path, copy_job *j)
{
    assert_int_equal(arc_open_meta(path, &j->m), 0);
    assert_int_equal(arc_own_strs(j->m), 0);
    j->c = calloc(j->m->nshards, sizeof *j->c);
    for (uint32_t s = 0; s < j->m->nshards; s++)
        assert_int_equal(arc_shard_ref(j->m, s, &j->c[s]), 0);
    j->w = (arc){.ents = j->m->ents, .nents = j->m->nents, .id = j->m->id};
    j->m->ents = NULL;
    j->m->nents = 0;
    for (uint32_t i = 0; i < j->w.nents; i++)
        j->w.ents[i].root_start -= j->m->shards[j->w.ents[i].shard].root_off;
}

static void free_copy(copy_job *j)
{
    for (uint32_t s = 0; s < j->m->nshards; s++)
        arc_coded_free(&j->c[s]);
    free(j->c);
    for (uint32_t i = 0; i < j->w.nents; i++)
        arc_entry_clear(&j->w.ents[i]);
    free(j->w.ents);
    free(j->w.byino);
    arc_free(j->m);
}

static int temps_beside(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls '%s'.tmp* >/dev/null 2>&1", path);
    return system(cmd) == 0;
}

/* A sink (what compaction writes its shards to as it makes them) writes the same bytes as
 * the writer given every shard at once, keeps only each shard's figures once it is put, and
 * leaves no file when a shard it copies turns out damaged. */
static void test_sink(void **state)
{
    (void)state;
    char *one = tu_tmppath("all-at-once.tdc"), *two = tu_tmppath("by-sink.tdc");
    copy_job j;
    take_copy(sharded, &j);
    char *t1, *t2;
    if (arc_write_coded_tmp(one, &j.w, j.c, j.m->nshards, 3, &t1)) fail_msg("%s", tdc_errmsg());
    arc_sink sk = {0};
    arc_sink_abort(&sk); /* a zeroed sink: nothing to do */
    assert_int_equal(arc_sink_open(&sk, two), 0);
    for (uint32_t s = 0; s < j.m->nshards; s++) {
        assert_int_equal(arc_sink_put(&sk, &j.c[s]), 0);
        assert_null(j.c[s].from);
        assert_true(j.c[s].secs[2].stored > 0);
    }
    if (arc_sink_finish(&sk, &j.w, j.c, j.m->nshards, 3, &t2)) fail_msg("%s", tdc_errmsg());
    size_t n1, n2;
    unsigned char *b1 = tu_slurp(t1, &n1), *b2 = tu_slurp(t2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    arc *r;
    assert_int_equal(arc_open(t2, &r), 0);
    assert_int_equal(r->nshards, 3);
    assert_int_equal(r->ndamaged, 0);
    arc_free(r);
    /* The same sections written by someone else (tadoc-mpi's ranks): the rest written after
     * them gives the same file again; a table the reader would refuse removes the file. */
    char *over = tu_tmppath("over.tdc");
    assert_int_equal(tu_put("", over, b1, (size_t)arc_coded_offset(j.c, j.m->nshards)), 0);
    if (arc_write_coded_over(over, &j.w, j.c, j.m->nshards, 3)) fail_msg("%s", tdc_errmsg());
    size_t n3;
    unsigned char *b3 = tu_slurp(over, &n3);
    assert_int_equal(n3, n1);
    assert_memory_equal(b3, b1, n1);
    uint32_t was = j.w.ents[j.w.nents - 1].shard;
    j.w.ents[j.w.nents - 1].shard = j.m->nshards; /* no such shard */
    assert_int_equal(arc_write_coded_over(over, &j.w, j.c, j.m->nshards, 3), -EBADMSG);
    assert_int_equal(access(over, F_OK), -1);
    j.w.ents[j.w.nents - 1].shard = was;
    free(b3);
    free(over);
    unlink(t1);
    unlink(t2);
    free(b1);
    free(b2);
    free(t1);
    free(t2);
    free_copy(&j);

    char *bad = damaged_copy(1, 2);
    take_copy(bad, &j);
    assert_int_equal(arc_sink_open(&sk, two), 0);
    assert_int_equal(arc_sink_put(&sk, &j.c[0]), 0);
    assert_int_equal(arc_sink_put(&sk, &j.c[1]), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "shard 1"));
    assert_true(temps_beside(two));
    arc_sink_abort(&sk);
    assert_false(temps_beside(two));
    arc_sink_abort(&sk); /* twice: nothing */
    free_copy(&j);
    drop_copy(bad);
    free(one);
    free(two);
}

/* New content for a compaction in shards of 4 KiB: a file of words ("cut", to be cut into
 * parts), small files to be grouped, a file of random bytes ("noise", stored as its text and
 * cut too), whose bytes go to *want. */
static void new_content(vol *v, buf *want)
{
    struct stat sb;
    assert_int_equal(vol_mknode(v, 1, "cut", S_IFREG | 0644, 0, 0, NULL, 0, &sb), 0);
    assert_int_equal(vol_write(v, sb.st_ino, 0, big.p, big.n), 0);
    for (int i = 0; i < 6; i++) {
        char n[32];
        snprintf(n, sizeof n, "small%d", i);
        assert_int_equal(vol_mknode(v, 1, n, S_IFREG | 0644, 0, 0, NULL, 0, &sb), 0);
        assert_int_equal(vol_write(v, sb.st_ino, 0, big.p + 100 * i, 700 + 300 * i), 0);
    }
    want->n = 0;
    assert_int_equal(buf_reserve(want, 20000), 0);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < 20000; i++) { /* xorshift: bytes zstd cannot compress */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        want->p[want->n++] = (unsigned char)x;
    }
    assert_int_equal(vol_mknode(v, 1, "noise", S_IFREG | 0644, 0, 0, NULL, 0, &sb), 0);
    assert_int_equal(vol_write(v, sb.st_ino, 0, want->p, want->n), 0);
    append_zz(v);
}

/* A copy of the three-shard archive with new_content compacted in shards of 4 KiB on `jobs`
 * workers. Returns the copy's path; *want the random file's bytes. */
static char *compact_on(const char *name, unsigned jobs, uint64_t mem, buf *want)
{
    char *p = copy_sharded(name);
    vol_opts o = {
        .writable = 1, .shard_size = 4096, .compact_jobs = jobs, .lazy = !!mem, .mem = mem};
    vol *v;
    vol_compact_stats st;
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    new_content(v, want);
    if (vol_compact(v, &st)) fail_msg("%s", tdc_errmsg());
    assert_true(st.build_threads >= 1 && st.build_threads <= jobs);
    vol_close(v);
    return p;
}

/* The same entries in x and y: paths, content hashes, and their runs (`runs`) or modes. */
static void same_entries(const arc *x, const arc *y, int runs)
{
    assert_int_equal(x->nents, y->nents);
    for (uint32_t i = 0; i < x->nents; i++) {
        assert_string_equal(x->ents[i].path, y->ents[i].path);
        assert_int_equal(x->ents[i].hash, y->ents[i].hash);
        if (runs) {
            assert_int_equal(x->ents[i].root_start, y->ents[i].root_start);
            assert_int_equal(x->ents[i].root_len, y->ents[i].root_len);
        } else {
            assert_int_equal(x->ents[i].mode, y->ents[i].mode);
        }
    }
}

/* The same sections, shard by shard, in the archives at paths p and q. */
static void same_shards(const char *p, const char *q)
{
    arc *a, *b;
    assert_int_equal(arc_open_meta(p, &a), 0);
    assert_int_equal(arc_open_meta(q, &b), 0);
    assert_int_equal(a->nshards, b->nshards);
    for (uint32_t s = 0; s < a->nshards; s++)
        for (int i = 0; i < 3; i++)
            assert_int_equal(a->secs[a->shards[s].sec + i].hash,
                             b->secs[b->shards[s].sec + i].hash);
    arc_free(a);
    arc_free(b);
}

/* A compaction shard by shard makes the same shards on one worker and on four, and under a
 * budget (the old archive then read by shard, not loaded) on one and on three with room for
 * one build past the first at a time: the same sections, the same runs and hashes, every
 * file read back as written. */
static void test_compaction_workers(void **state)
{
    (void)state;
    buf noise = {0};
    uint64_t mem = COMPACT_BUILD_MEM(4096) * 3 / 2;
    char *bud1 = compact_on("bud1.tdc", 1, mem, &noise),
         *bud3 = compact_on("bud3.tdc", 3, mem, &noise);
    same_shards(bud1, bud3);
    drop_copy(bud1);
    drop_copy(bud3);
    char *one = compact_on("jobs1.tdc", 1, 0, &noise),
         *four = compact_on("jobs4.tdc", 4, 0, &noise);
    same_shards(one, four);
    arc *a, *b;
    assert_int_equal(arc_open(one, &a), 0);
    assert_int_equal(arc_open(four, &b), 0);
    assert_true(a->nshards > 8); /* parts of "cut" and of "noise", and groups */
    assert_int_equal(a->nshards, b->nshards);
    int text = 0;
    for (uint32_t s = 0; s < a->nshards; s++) {
        for (int i = 0; i < 3; i++)
            assert_int_equal(a->secs[a->shards[s].sec + i].hash,
                             b->secs[b->shards[s].sec + i].hash);
        text += arc_shard_text(a, s) != 0;
    }
    assert_true(text >= 2);
    same_entries(a, b, 1);
    idx *x;
    assert_int_equal(idx_build(b, &x), 0);
    for (uint32_t i = 0; i < b->nents; i++) { /* every file, moved or kept, reads back */
        if (b->ents[i].type != ARC_REG || !b->ents[i].size) continue;
        char *all = malloc(b->ents[i].size);
        assert_int_equal(idx_extract(x, i, 0, all, b->ents[i].size), (ssize_t)b->ents[i].size);
        assert_int_equal(XXH3_64bits(all, b->ents[i].size), b->ents[i].hash);
        free(all);
    }
    int64_t e = arc_lookup(b, "cut"), n = arc_lookup(b, "noise");
    assert_true(e > 0 && n > 0);
    assert_int_equal(b->ents[e].size, big.n);
    char *got = malloc(big.n);
    assert_int_equal(idx_extract(x, (uint32_t)e, 0, got, big.n), (ssize_t)big.n);
    assert_memory_equal(got, big.p, big.n);
    assert_int_equal(idx_extract(x, (uint32_t)n, 0, got, noise.n), (ssize_t)noise.n);
    assert_memory_equal(got, noise.p, noise.n);
    assert_int_equal(b->ents[n].hash, XXH3_64bits(noise.p, noise.n));
    free(got);
    idx_free(x);
    arc_free(a);
    arc_free(b);
    drop_copy(one);
    drop_copy(four);
    buf_free(&noise);
}

/* The file size limits the out-of-space tests try, for a file of `full` bytes: step k of
 * LIMIT_STEPS from 0 up, and at the last step one byte short of the whole. */
#define LIMIT_STEPS 24
static rlim_t limit_at(size_t full, int k)
{
    return k < LIMIT_STEPS ? (rlim_t)(full * (size_t)k / LIMIT_STEPS) : (rlim_t)full - 1;
}

/* An archive's random identity sits in a compressed section, so a write can come out a few
 * bytes shorter than the one that measured `full`. Where a job under limit *lim succeeded
 * (rc 0) and the file it wrote at `path` fits the limit, it is tried again one byte under that
 * file (1; at most a few times); any other result is left to the caller (0). */
static int shorter_this_time(int rc, const char *path, rlim_t *lim, int *tries)
{
    struct stat st;
    if (rc || stat(path, &st) || (rlim_t)st.st_size > *lim || ++*tries > 8) return 0;
    *lim = (rlim_t)st.st_size - 1;
    return 1;
}

/* Files this process writes stop growing at `lim` bytes, as a full disk stops them (write
 * fails with EFBIG; SIGXFSZ is ignored), until fsize_unlimit. */
static struct rlimit fsize_was;
static void (*xfsz_was)(int);

static void fsize_limit(rlim_t lim)
{
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &fsize_was), 0);
    xfsz_was = signal(SIGXFSZ, SIG_IGN);
    struct rlimit r = {lim, fsize_was.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &r), 0);
}

static void fsize_unlimit(void)
{
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &fsize_was), 0);
    signal(SIGXFSZ, xfsz_was);
}

/* File `name` of v reads back as the n bytes at want. */
static void reads_as(vol *v, const char *name, const void *want, size_t n)
{
    uint64_t ino;
    vol_reader r;
    char *got = malloc(n + 1);
    vol_reader_init(&r);
    assert_int_equal(vol_resolve(v, name, &ino), 0);
    assert_int_equal(vol_read(v, &r, ino, 0, got, n + 1), (ssize_t)n);
    assert_memory_equal(got, want, n);
    vol_reader_free(&r);
    free(got);
}

/* A compaction that cannot write its new archive wherever the file stops growing (a file
 * size limit, as a full disk would stop it): it fails with EFBIG, leaves no temporary file
 * and the archive byte for byte as it was, and the changes still read back; run on four
 * workers, so that the failure meets builds in flight and shards waiting for their turn. */
static void test_compaction_out_of_space(void **state)
{
    (void)state;
    char *p = copy_sharded("space.tdc"), j[1024];
    snprintf(j, sizeof j, "%s.journal", p);
    vol_opts o = {.writable = 1, .shard_size = 4096, .compact_jobs = 4};
    vol *v;
    vol_compact_stats st;
    buf noise = {0};
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    new_content(v, &noise);
    vol_close(v);
    size_t na = 0, nj = 0, nfull = 0;
    unsigned char *arch = tu_slurp(p, &na), *jrnl = tu_slurp(j, &nj);
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    assert_int_equal(vol_compact(v, &st), 0);
    vol_close(v);
    free(tu_slurp(p, &nfull)); /* the size the new archive takes */
    for (int k = 0, tries = 0; k <= LIMIT_STEPS; k++) {
        rlim_t lim = limit_at(nfull, k);
        int rc;
        do {
            assert_int_equal(tu_put("/", p, arch, na), 0);
            assert_int_equal(tu_put("/", j, jrnl, nj), 0);
            assert_int_equal(vol_open(p, &o, &v, NULL), 0);
            fsize_limit(lim);
            rc = vol_compact(v, &st);
            fsize_unlimit();
        } while (shorter_this_time(rc, p, &lim, &tries) && (vol_close(v), 1));
        if (rc != -EFBIG) fail_msg("limit %llu: %d: %s", (unsigned long long)lim, rc, tdc_errmsg());
        assert_false(temps_beside(p));
        size_t n;
        unsigned char *now = tu_slurp(p, &n);
        assert_int_equal(n, na);
        assert_memory_equal(now, arch, na);
        free(now);
        reads_as(v, "cut", big.p, big.n); /* the changes are still there, also remounted */
        reads_as(v, "noise", noise.p, noise.n);
        vol_close(v);
        assert_int_equal(vol_open(p, &o, &v, NULL), 0);
        reads_as(v, "cut", big.p, big.n);
        reads_as(v, "small5", big.p + 500, 2200);
        vol_close(v);
    }
    free(arch);
    free(jrnl);
    buf_free(&noise);
    drop_copy(p);
}

/* The byte where each part of file `name` ends in the archive at `path` (ends[0..*n)). */
static void part_ends(const char *path, const char *name, uint64_t *ends, uint32_t *n)
{
    arc *a;
    uint32_t first, last;
    assert_int_equal(arc_open_meta(path, &a), 0);
    int64_t e = arc_lookup(a, name);
    assert_true(e > 0);
    assert_true(arc_entry_parts(a, (uint32_t)e, &first, &last));
    *n = 0;
    for (uint64_t at = 0; first <= last; first++)
        ends[(*n)++] = at += a->shards[first].bytes;
    arc_free(a);
}

/* Compact v; the bytes it built anew. Then file `name` must read as want (n bytes) with its
 * hash, in the archive at path. */
static uint64_t compact_check(vol *v, const char *path, const char *name, const char *want,
                              size_t n)
{
    vol_compact_stats st;
    if (vol_compact(v, &st)) fail_msg("%s", tdc_errmsg());
    arc *a;
    idx *x;
    assert_int_equal(arc_open(path, &a), 0);
    assert_int_equal(idx_build(a, &x), 0);
    int64_t e = arc_lookup(a, name);
    assert_true(e > 0);
    assert_int_equal(a->ents[e].size, n);
    char *got = malloc(n);
    assert_int_equal(idx_extract(x, (uint32_t)e, 0, got, n), (ssize_t)n);
    assert_memory_equal(got, want, n);
    assert_int_equal(a->ents[e].hash, XXH3_64bits(want, n));
    free(got);
    idx_free(x);
    arc_free(a);
    return st.dirty_bytes;
}

/* A file cut into parts keeps, through a compaction, the parts its new version still begins
 * with: after an append only the short last part and the new bytes are built; after a cut
 * back to a part's end and an append that joins a word across it, the parts before that one;
 * after an edit in the first part, nothing. The file reads back exactly every time. */
static void test_compaction_keeps_parts(void **state)
{
    (void)state;
    char *p = copy_sharded("keep.tdc");
    vol_opts o = {.writable = 1, .shard_size = 4096};
    vol *v;
    struct stat sb, in = {0};
    buf want = {0};
    uint64_t ends[64];
    uint32_t n;
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    assert_int_equal(vol_mknode(v, 1, "log", S_IFREG | 0644, 0, 0, NULL, 0, &sb), 0);
    buf_put(&want, big.p, big.n);
    assert_int_equal(vol_write(v, sb.st_ino, 0, want.p, want.n), 0);
    assert_int_equal(compact_check(v, p, "log", (char *)want.p, want.n), want.n);
    part_ends(p, "log", ends, &n);
    assert_true(n >= 6);
    /* an append: every part but a short last one is kept */
    uint32_t full = ends[n - 1] - ends[n - 2] >= 2048 ? n : n - 1;
    assert_int_equal(vol_write(v, sb.st_ino, want.n, " tail words\n", 12), 0);
    buf_put(&want, " tail words\n", 12);
    assert_int_equal(compact_check(v, p, "log", (char *)want.p, want.n), want.n - ends[full - 1]);
    /* cut back to the end of a part after a word, and a word appended to it: that part's
     * end is no longer where a token ends, so it is built again with what follows */
    part_ends(p, "log", ends, &n);
    uint32_t k = 2;
    while (k < n - 1 && !tok_is_word_byte(want.p[ends[k] - 1]))
        k++;
    assert_true(k < n - 1);
    in.st_size = (off_t)ends[k];
    assert_int_equal(vol_setattr(v, sb.st_ino, VOL_SET_SIZE, &in, &sb), 0);
    assert_int_equal(vol_write(v, sb.st_ino, ends[k], "zzz", 3), 0);
    want.n = ends[k];
    buf_put(&want, "zzz", 3);
    assert_int_equal(compact_check(v, p, "log", (char *)want.p, want.n), want.n - ends[k - 1]);
    /* an edit in the first part: nothing kept */
    assert_int_equal(vol_write(v, sb.st_ino, 10, "X", 1), 0);
    want.p[10] = 'X';
    assert_int_equal(compact_check(v, p, "log", (char *)want.p, want.n), want.n);
    vol_close(v);
    buf_free(&want);
    drop_copy(p);
}

/* pack_run_to writes each group's shards as it goes into a temporary file that pack_write
 * completes and commits: the archive is the same as one packed with pack_run and pack_write
 * (but for its id), and a job freed before pack_write leaves no file behind. */
static void test_pack_streamed(void **state)
{
    (void)state;
    char src[4096];
    snprintf(src, sizeof src, "%s/all", dir);
    pack_opts po = {.shard_size = 4096, .jobs = 3};
    char *a = tu_tmppath("streamed.tdc"), *b = tu_tmppath("at-once.tdc");
    pack_job *j;
    pack_stats st;
    assert_int_equal(pack_plan(src, &po, &j), 0);
    assert_int_equal(pack_run_to(j, a), 0);
    assert_int_equal(pack_run_to(j, a), -EINVAL);
    assert_true(temps_beside(a));
    assert_int_equal(pack_write(j, a, &st), 0);
    assert_false(temps_beside(a));
    pack_job_free(j);
    assert_int_equal(pack_plan(src, &po, &j), 0);
    assert_int_equal(pack_run(j, NULL), 0);
    assert_int_equal(pack_write(j, b, &st), 0);
    pack_job_free(j);
    assert_true(st.shards > 4);
    same_shards(a, b);
    arc *x, *y;
    assert_int_equal(arc_open(a, &x), 0);
    assert_int_equal(arc_open(b, &y), 0);
    same_entries(x, y, 1);
    arc_free(x);
    arc_free(y);
    unlink(a);
    unlink(b);
    /* freed unwritten: the temporary file goes with it */
    assert_int_equal(pack_plan(src, &po, &j), 0);
    assert_int_equal(pack_run_to(j, a), 0);
    assert_true(temps_beside(a));
    pack_job_free(j);
    assert_false(temps_beside(a));
    assert_int_equal(access(a, F_OK), -1);
    free(a);
    free(b);
}

/* A pack whose archive cannot grow past a limit, wherever that falls (shards on three
 * workers, handed to the file in order, or the tables): it fails with EFBIG and leaves
 * neither the archive nor a temporary file. */
static void test_pack_out_of_space(void **state)
{
    (void)state;
    char src[4096];
    snprintf(src, sizeof src, "%s/all", dir);
    pack_opts po = {.shard_size = 4096, .jobs = 3};
    char *a = tu_tmppath("full.tdc");
    pack_job *j;
    pack_stats st;
    size_t nfull = 0;
    assert_int_equal(pack_plan(src, &po, &j), 0);
    assert_int_equal(pack_run_to(j, a), 0);
    assert_int_equal(pack_write(j, a, &st), 0);
    pack_job_free(j);
    free(tu_slurp(a, &nfull));
    unlink(a);
    for (int k = 0, tries = 0; k <= LIMIT_STEPS; k++) {
        rlim_t lim = limit_at(nfull, k);
        int rc;
        do {
            assert_int_equal(pack_plan(src, &po, &j), 0);
            fsize_limit(lim);
            rc = pack_run_to(j, a);
            if (!rc) rc = pack_write(j, a, &st);
            fsize_unlimit();
        } while (shorter_this_time(rc, a, &lim, &tries) && (pack_job_free(j), unlink(a), 1));
        if (rc != -EFBIG) fail_msg("limit %llu: %d: %s", (unsigned long long)lim, rc, tdc_errmsg());
        pack_job_free(j);
        assert_false(temps_beside(a));
        assert_int_equal(access(a, F_OK), -1);
    }
    free(a);
}

/* The stored hash of each shard's sections, to tell a copied shard from a rebuilt one. */
static uint64_t shard_sig(const char *path, uint32_t k)
{
    arc *a;
    assert_int_equal(arc_open_meta(path, &a), 0);
    uint64_t h = 0;
    for (int i = 0; i < 3; i++)
        h = h * 31 + a->secs[a->shards[k].sec + i].hash;
    arc_free(a);
    return h;
}

/* A shard filled exactly by the files before empty ones is not followed by an empty shard:
 * a small tree (whose one shard is exactly its content) ending in empty files, and a tree cut
 * into shards of exactly its first file's size, give one shard and two. */
static void test_no_empty_shard(void **state)
{
    (void)state;
    char *t = tu_tmppath("emptylast"), *out = tu_tmppath("emptylast.tdc"), p[8300];
    mkdir(t, 0755);
    const char *names[] = {"a.txt", "b.txt", "y-empty", "z-empty"};
    const char *texts[] = {"some words here\n", "more words\n", "", ""};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", t, names[i]);
        FILE *f = fopen(p, "w");
        fputs(texts[i], f);
        fclose(f);
    }
    pack_stats st;
    pack_opts po = {0};
    for (int k = 0; k < 2; k++) {
        po.shard_size = k ? strlen(texts[0]) : 0;
        assert_int_equal(pack_dir(t, out, &po, &st), 0);
        arc *a;
        assert_int_equal(arc_open(out, &a), 0);
        assert_int_equal(a->nshards, 1 + k);
        for (uint32_t s = 0; s < a->nshards; s++)
            assert_true(a->shards[s].bytes > 0);
        arc_free(a);
    }
    snprintf(p, sizeof p, "rm -rf '%s' '%s'", t, out);
    assert_int_equal(system(p), 0);
    free(t);
    free(out);
}

/* A plan sent to another process (tadoc-mpi pack): decoded, it is the walk's plan (the same
 * entries and groups), packs to an archive with the same files, and bytes that are not a
 * plan are refused. */
static void test_plan_sent(void **state)
{
    (void)state;
    pack_opts po = {.shard_size = 4096};
    pack_job *j, *k;
    buf b = {0}, c = {0};
    char src[4096];
    snprintf(src, sizeof src, "%s/all", dir);
    assert_int_equal(pack_plan(src, &po, &j), 0);
    assert_int_equal(pack_plan_encode(j, &b), 0);
    assert_int_equal(pack_plan_decode(src, &po, b.p, b.n, &k), 0);
    assert_int_equal(pack_plan_encode(k, &c), 0);
    assert_int_equal(b.n, c.n);
    assert_memory_equal(b.p, c.p, b.n);
    assert_true(pack_ngroups(j) > 2);
    assert_int_equal(pack_ngroups(k), pack_ngroups(j));
    for (uint32_t g = 0; g < pack_ngroups(j); g++)
        assert_int_equal(pack_group_bytes(k, g), pack_group_bytes(j, g));
    char *out = tu_tmppath("plan-sent.tdc");
    pack_stats st;
    arc *a, *w;
    assert_int_equal(pack_run(k, NULL), 0);
    assert_int_equal(pack_write(k, out, &st), 0);
    assert_int_equal(arc_open(out, &a), 0);
    assert_int_equal(arc_open(whole, &w), 0); /* the same tree, packed at once */
    same_entries(a, w, 0);
    arc_free(a);
    arc_free(w);
    unlink(out);
    free(out);
    pack_job_free(k);
    for (size_t n = 0; n < b.n; n += b.n / 7 + 1) /* cut short anywhere */
        assert_int_equal(pack_plan_decode(src, &po, b.p, n, &k), -EBADMSG);
    b.p[0] ^= 0x7f; /* another entry count */
    assert_int_equal(pack_plan_decode(src, &po, b.p, b.n, &k), -EBADMSG);
    pack_job_free(j);
    buf_free(&b);
    buf_free(&c);
}

/* The default shard size: small trees stay one grammar, larger ones get about
 * PACK_SHARDS_AIM shards within [PACK_SHARD_MIN, PACK_SHARD_MAX]. */
static void test_default_shard_size(void **state)
{
    (void)state;
    const uint64_t M = 1 << 20;
    assert_true(pack_shard_size(0) >= 1);
    assert_int_equal(pack_shard_size(10 * M), 10 * M);
    assert_int_equal(pack_shard_size(PACK_ONE_SHARD_MAX), PACK_ONE_SHARD_MAX);
    assert_int_equal(pack_shard_size(PACK_ONE_SHARD_MAX + 1), PACK_SHARD_MIN);
    assert_int_equal(pack_shard_size(500 * M), 500 * M / PACK_SHARDS_AIM);
    assert_int_equal(pack_shard_size(4096 * M), PACK_SHARD_MAX);
    for (uint64_t c = PACK_ONE_SHARD_MAX + 1; c < 8192 * M; c += 37 * M) {
        uint64_t s = pack_shard_size(c);
        assert_true(s >= PACK_SHARD_MIN && s <= PACK_SHARD_MAX);
    }
}

/* Compaction keeps the shard size an archive of several shards was cut at, so that its
 * first compaction merges nothing back, and rebuilds a small one that pack left one grammar
 * as one. */
static void test_compaction_shard_size(void **state)
{
    (void)state;
    const uint64_t M = 1 << 20;
    arc_shard sh[3] = {{.bytes = 20 * M}, {.bytes = 40 * M}, {.bytes = 40 * M}};
    arc a = {.shards = sh, .nshards = 1};
    assert_int_equal(compact_shard_size(&a, 12345), 12345);
    assert_int_equal(compact_shard_size(&a, 0), PACK_ONE_SHARD_MAX);
    assert_false(compact_by_shards(&a, 0)); /* small: one grammar, rebuilt whole */
    sh[0].bytes = 40 * M;
    assert_true(compact_by_shards(&a, 0)); /* large: copied when it stays, edits beside it */
    a.nshards = 3;                         /* several: the size it was cut at, the median shard's */
    assert_int_equal(compact_shard_size(&a, 0), 40 * M);
    sh[1].bytes = 500 * M; /* one large file alone in a shard does not move it */
    sh[2].bytes = 3 * M;   /* nor does a small last shard */
    assert_int_equal(compact_shard_size(&a, 0), 40 * M);
    assert_true(compact_by_shards(&a, 0));
    sh[0].bytes = sh[1].bytes = sh[2].bytes = 100; /* tiny shards stay tiny, within reason */
    assert_int_equal(compact_shard_size(&a, 0), COMPACT_SHARD_MIN);
}

static void compact_vol(const char *path, void (*edit)(vol *v), uint32_t want_shards)
{
    vol_opts o = {.writable = 1, .shard_size = 1000};
    vol *v;
    vol_compact_stats st;
    assert_int_equal(vol_open(path, &o, &v, NULL), 0);
    edit(v);
    if (vol_compact(v, &st)) fail_msg("%s", tdc_errmsg());
    vol_close(v);
    arc *a;
    idx *x;
    assert_int_equal(arc_open(path, &a), 0);
    assert_int_equal(a->nshards, want_shards);
    assert_int_equal(idx_build(a, &x), 0);
    assert_int_equal(idx_check_content(x, NULL, NULL, NULL, NULL, NULL), 0);
    idx_free(x);
    arc_free(a);
}

static void append_zz(vol *v)
{
    uint64_t ino;
    struct stat sb;
    assert_int_equal(vol_resolve(v, "zz.txt", &ino), 0);
    assert_int_equal(vol_getattr(v, ino, &sb), 0);
    assert_int_equal(vol_write(v, ino, (uint64_t)sb.st_size, "more words\n", 11), 0);
}

/* A compaction's switch against views that overlap: while the switch waits for the archive,
 * views opened after it wait for the switch, so views that follow one another without a gap
 * cannot hold it off (the lock alone lets readers in while a writer waits). */
typedef struct switch_race {
    pthread_mutex_t m;
    pthread_cond_t c;
    vol *v;
    int checked;   /* the compaction reached its last step before the switch */
    int viewed;    /* the later view is open */
    uint64_t seen; /* compactions done when the later view opened */
    int compact_rc, view_rc;
} switch_race;

static int note_checked(void *ctx, int step, const char *tmp)
{
    (void)tmp;
    switch_race *s = ctx;
    if (step != VOL_STEP_CHECKED) return 0;
    pthread_mutex_lock(&s->m);
    s->checked = 1;
    pthread_cond_broadcast(&s->c);
    pthread_mutex_unlock(&s->m);
    return 0;
}

static void *compact_main(void *p)
{
    switch_race *s = p;
    vol_compact_stats st;
    s->compact_rc = vol_compact(s->v, &st);
    return NULL;
}

static void *later_view(void *p)
{
    switch_race *s = p;
    vol_view w;
    vol_info in;
    int rc = vol_view_open(s->v, 1, 0, &w);
    vol_get_info(s->v, &in);
    if (!rc) vol_view_close(&w);
    pthread_mutex_lock(&s->m);
    s->view_rc = rc;
    s->seen = in.compactions;
    s->viewed = 1;
    pthread_mutex_unlock(&s->m);
    return NULL;
}

static void test_switch_before_later_views(void **state)
{
    (void)state;
    char *p = copy_sharded("switch.tdc");
    switch_race s = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER};
    vol_opts o = {.writable = 1, .compact_step = note_checked, .step_ctx = &s};
    assert_int_equal(vol_open(p, &o, &s.v, NULL), 0);
    assert_int_equal(vol_start(s.v), 0);
    vol_view first;
    assert_int_equal(vol_view_open(s.v, 1, 0, &first), 0); /* holds the archive */
    append_zz(s.v);
    pthread_t cth, vth;
    assert_int_equal(pthread_create(&cth, NULL, compact_main, &s), 0);
    pthread_mutex_lock(&s.m);
    while (!s.checked)
        pthread_cond_wait(&s.c, &s.m);
    pthread_mutex_unlock(&s.m);
    usleep(100 * 1000); /* the compaction goes on to wait for the archive */
    assert_int_equal(pthread_create(&vth, NULL, later_view, &s), 0);
    usleep(200 * 1000);
    pthread_mutex_lock(&s.m);
    int early = s.viewed;
    pthread_mutex_unlock(&s.m);
    assert_false(early); /* it waits behind the switch, which waits for `first` */
    vol_view_close(&first);
    pthread_join(cth, NULL);
    pthread_join(vth, NULL);
    assert_int_equal(s.compact_rc, 0);
    assert_int_equal(s.view_rc, 0);
    assert_int_equal(s.seen, 1); /* opened on the new archive */
    vol_close(s.v);
    drop_copy(p);
}

static void remove_big(vol *v)
{
    assert_int_equal(vol_unlink(v, 1, "big", 0), 0);
}

/* A background compaction the test holds at its first step, and a writer's progress. */
typedef struct held {
    pthread_mutex_t m;
    pthread_cond_t c;
    int in, go; /* the first compaction is at its hook; the test lets it go on */
    vol *v;
    uint64_t ino, total, written; /* the writer's file, aim and bytes written so far */
    int done, rc;
} held;

static int hold_first(void *ctx, int step, const char *tmp)
{
    (void)tmp;
    held *h = ctx;
    if (step != VOL_STEP_BUILT) return 0;
    pthread_mutex_lock(&h->m);
    if (!h->in) {
        h->in = 1;
        pthread_cond_broadcast(&h->c);
        while (!h->go)
            pthread_cond_wait(&h->c, &h->m);
    }
    pthread_mutex_unlock(&h->m);
    return 0;
}

static void *write_on(void *arg)
{
    held *h = arg;
    char blk[4096];
    memset(blk, 'w', sizeof blk);
    int rc = 0;
    for (uint64_t off = 0; off < h->total && !rc; off += sizeof blk) {
        rc = vol_write(h->v, h->ino, off, blk, sizeof blk);
        pthread_mutex_lock(&h->m);
        h->written = off + sizeof blk;
        h->rc = rc;
        pthread_mutex_unlock(&h->m);
    }
    pthread_mutex_lock(&h->m);
    h->done = 1;
    pthread_mutex_unlock(&h->m);
    return NULL;
}

/* Writes faster than compaction: while a background compaction runs (held here at its first
 * step), a writer goes on until the journal holds journal_max, then waits; it goes on when
 * the compaction ends, and every byte it wrote is there. */
static void test_backlog(void **state)
{
    (void)state;
    enum { T = 64 << 10 };
    char *p = copy_sharded("backlog.tdc");
    held h = {.m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER, .total = 2 << 20};
    vol_opts o = {.writable = 1,
                  .compact_threshold = T,
                  .journal_max = 4 * T,
                  .compact_step = hold_first,
                  .step_ctx = &h};
    vol *v;
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    assert_int_equal(vol_start(v), 0);
    h.v = v;
    assert_int_equal(vol_resolve(v, "a.txt", &h.ino), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_on, &h), 0);
    pthread_mutex_lock(&h.m);
    while (!h.in)
        pthread_cond_wait(&h.c, &h.m);
    pthread_mutex_unlock(&h.m);
    /* until the writer stops for 300 ms, or ends */
    uint64_t last = UINT64_MAX, now;
    int done;
    for (;;) {
        pthread_mutex_lock(&h.m);
        now = h.written;
        done = h.done;
        pthread_mutex_unlock(&h.m);
        if (done || now == last) break;
        last = now;
        usleep(300000);
    }
    vol_info in;
    vol_get_info(v, &in);
    assert_false(done);
    assert_true(now < h.total);
    assert_true(in.journal_bytes >= 4 * T);
    assert_true(in.journal_bytes <= 4 * T + 16384); /* the bound and the write that reached it */
    pthread_mutex_lock(&h.m);
    h.go = 1;
    pthread_cond_broadcast(&h.c);
    pthread_mutex_unlock(&h.m);
    pthread_join(t, NULL);
    assert_int_equal(h.rc, 0);
    assert_int_equal(h.written, h.total);
    vol_reader r;
    vol_reader_init(&r);
    char *got = malloc(h.total + 1);
    assert_int_equal(vol_read(v, &r, h.ino, 0, got, h.total + 1), (ssize_t)h.total);
    for (uint64_t i = 0; i < h.total; i++)
        if (got[i] != 'w') fail_msg("byte %llu of a.txt: %d", (unsigned long long)i, got[i]);
    free(got);
    vol_reader_free(&r);
    vol_get_info(v, &in);
    assert_true(in.compactions >= 1);
    vol_close(v);
    drop_copy(p);
}

/* Compaction shard by shard: an edit of one small file copies every shard as stored (shard
 * 1 keeps its plain layout) and adds one (in the kind layout); removing the file that spans
 * three shards drops the one it filled alone and rebuilds the two it shared, keeping the
 * shard of the edit as it was. */
static void test_compaction_by_shard(void **state)
{
    (void)state;
    char *p = copy_sharded("edit.tdc");
    uint64_t before[3] = {shard_sig(p, 0), shard_sig(p, 1), shard_sig(p, 2)};
    compact_vol(p, append_zz, 4);
    for (uint32_t k = 0; k < 3; k++)
        assert_true(shard_sig(p, k) == before[k]);
    arc *m;
    assert_int_equal(arc_open_meta(p, &m), 0); /* shard 1 copied in its plain layout */
    assert_string_equal(arc_codec_name(m->secs[m->shards[1].sec + 1].codec), "zstd");
    assert_string_equal(arc_codec_name(m->secs[m->shards[3].sec + 2].codec), "zstd-kind");
    arc_free(m);
    uint64_t edited = shard_sig(p, 3);
    compact_vol(p, remove_big, 2);
    assert_true(shard_sig(p, 0) == edited);
    arc *a;
    assert_int_equal(arc_open(p, &a), 0);
    assert_int_equal(a->nents, 3);
    assert_int_equal(a->ents[2].size, strlen("zeta eta alpha and the end\n") + 11);
    arc_free(a);
    drop_copy(p);
}

/* arc_same_content tells from the tables alone that a run is unchanged: the same place in
 * shards stored alike, the same size and hash; anything else is not shown unchanged. */
static void test_same_content(void **state)
{
    (void)state;
    arc *a, *b;
    assert_int_equal(arc_open_meta(sharded, &a), 0);
    assert_int_equal(arc_open(sharded, &b), 0);
    for (uint32_t i = 1; i < 4; i++)
        assert_int_equal(arc_same_content(a, i, b, i), 1);
    assert_int_equal(arc_same_content(a, 1, b, 3), 0); /* another file */
    assert_int_equal(arc_same_content(a, 0, b, 0), 0); /* not a regular file */
    b->ents[1].root_start++;                           /* a.txt one symbol on */
    assert_int_equal(arc_same_content(a, 1, b, 1), 0);
    b->ents[1].root_start--;
    b->ents[3].hash ^= 1;
    assert_int_equal(arc_same_content(a, 3, b, 3), 0);
    b->ents[3].hash ^= 1;
    b->secs[b->shards[1].sec + 2].hash ^= 1;           /* shard 1's root stored otherwise */
    assert_int_equal(arc_same_content(a, 2, b, 2), 0); /* big runs through it */
    assert_int_equal(arc_same_content(a, 1, b, 1), 1);
    assert_int_equal(arc_same_content(a, 3, b, 3), 1);
    b->secs[b->shards[1].sec + 2].hash ^= 1;
    b->shards[2].root_syms++; /* shard 2's root one symbol longer */
    assert_int_equal(arc_same_content(a, 2, b, 2), 0);
    assert_int_equal(arc_same_content(a, 3, b, 3), 0);
    b->shards[2].root_syms--;
    b->version = 3;
    assert_int_equal(arc_same_content(a, 1, b, 1), 0);
    arc_free(a);
    arc_free(b);
}

/* The rule symbols of every shard, read from its rules section alone, add up to those of the
 * grammar loaded whole (the shards' grammars merged, rule for rule); a shard number past the
 * table is refused, and a rules section whose rule count disagrees with the shard table is
 * damage. */
static void test_shard_rule_syms(void **state)
{
    (void)state;
    arc *m, *a;
    assert_int_equal(arc_open_meta(sharded, &m), 0);
    assert_int_equal(arc_open(sharded, &a), 0);
    uint64_t sum = 0, n, rules = 0;
    for (uint32_t k = 0; k < m->nshards; k++) {
        assert_int_equal(arc_shard_rule_syms(m, k, &n), 0);
        sum += n;
        rules += m->shards[k].nrules;
    }
    assert_true(rules > 0);
    assert_int_equal(sum, a->g.syms.n);
    assert_int_equal(arc_shard_rule_syms(m, m->nshards, &n), -EINVAL);
    uint32_t k = 0;
    while (!m->shards[k].nrules)
        k++;
    m->shards[k].nrules++;
    assert_int_equal(arc_shard_rule_syms(m, k, &n), -EBADMSG);
    arc_free(m);
    arc_free(a);
}

/* arc_meta_dup gives what arc_open_meta gives, and a copy that outlives its source serves
 * spans: every entry equal field by field (strings by value, in memory of its own), and a
 * span loaded from the copy after the source is freed reads big's content. */
static void test_meta_dup(void **state)
{
    (void)state;
    arc *a, *c, *d;
    assert_int_equal(arc_open_meta(sharded, &a), 0);
    assert_int_equal(arc_open_meta(sharded, &d), 0);
    assert_int_equal(arc_meta_dup(a, &c), 0);
    assert_int_equal(c->nents, a->nents);
    assert_int_equal(c->nshards, a->nshards);
    assert_int_equal(c->nsecs, a->nsecs);
    assert_true(c->id == a->id && c->pending && c->fd >= 0 && c->fd != a->fd);
    for (uint32_t i = 0; i < a->nents; i++) {
        assert_string_equal(c->ents[i].path, a->ents[i].path);
        assert_ptr_not_equal(c->ents[i].path, a->ents[i].path);
        assert_true(c->ents[i].ino == a->ents[i].ino && c->ents[i].size == a->ents[i].size &&
                    c->ents[i].root_start == a->ents[i].root_start &&
                    c->ents[i].root_len == a->ents[i].root_len &&
                    c->ents[i].shard == a->ents[i].shard && c->ents[i].hash == a->ents[i].hash &&
                    c->byino[i] == a->byino[i]);
    }
    assert_memory_equal(c->shards, a->shards, a->nshards * sizeof *a->shards);
    assert_memory_equal(c->secs, a->secs, a->nsecs * sizeof *a->secs);
    arc_free(a);
    arc *sp;
    uint32_t *ids, nids;
    int64_t big = arc_lookup(c, "big");
    uint32_t first, last;
    assert_true(big > 0);
    arc_entry_shards(c, (uint32_t)big, &first, &last);
    assert_int_equal(arc_open_span(c, first, last, &sp, &ids, &nids), 0);
    idx *x;
    assert_int_equal(idx_build(sp, &x), 0);
    uint32_t i = 0;
    while (i < nids && ids[i] != (uint32_t)big)
        i++;
    assert_true(i < nids);
    assert_int_equal(sp->ents[i].size, d->ents[big].size);
    idx_free(x);
    arc_free(sp);
    free(ids);
    arc_free(c);
    arc_free(d);
}

/* Write the archive at `path` again as a writer with a bug would leave it, every checksum
 * good: shard k's sections replaced by `sub` (taken over) when given, and the file table
 * passed through `edit` when given. */
static void rewrite(const char *path, int k, arc_coded *sub, void (*edit)(arc *w))
{
    arc *m;
    assert_int_equal(arc_open_meta(path, &m), 0);
    assert_int_equal(arc_own_strs(m), 0); /* its entries are taken below */
    uint32_t n = m->nshards;
    arc_coded *c = calloc(n, sizeof *c);
    for (uint32_t s = 0; s < n; s++) {
        if ((int)s == k)
            c[s] = *sub;
        else
            assert_int_equal(arc_shard_ref(m, s, &c[s]), 0);
    }
    arc w = {.ents = m->ents, .nents = m->nents, .id = m->id, .prev_id = m->prev_id};
    m->ents = NULL;
    m->nents = 0;
    for (uint32_t i = 0; i < w.nents; i++) /* runs on-disk style: within their first shard */
        w.ents[i].root_start -= m->shards[w.ents[i].shard].root_off;
    if (edit) edit(&w);
    char *t;
    if (arc_write_coded_tmp(path, &w, c, n, 3, &t)) fail_msg("%s", tdc_errmsg());
    assert_int_equal(rename(t, path), 0);
    free(t);
    for (uint32_t s = 0; s < n; s++)
        arc_coded_free(&c[s]);
    free(c);
    for (uint32_t i = 0; i < w.nents; i++)
        arc_entry_clear(&w.ents[i]);
    free(w.ents);
    free(w.byino);
    arc_free(m);
}

/* Shard k of the archive at `path` coded again at zstd level 1, its root's first symbol
 * swapped with the first that differs from it when `swap` is set: the same figures, other
 * bytes. */
static void recode_shard(const char *path, uint32_t k, int swap)
{
    arc *m;
    assert_int_equal(arc_open_meta(path, &m), 0);
    assert_int_equal(arc_load_span(m, k, k), 0);
    uint32_t *r = m->g.root.p;
    for (uint64_t j = 1; swap && j < m->g.root.n; j++) {
        if (r[j] == r[0]) continue;
        uint32_t t = r[0];
        r[0] = r[j];
        r[j] = t;
        break;
    }
    arc_coded c;
    assert_int_equal(arc_shard_encode(m->dict, &m->g, m->shards[k].bytes, 1, 0, &c), 0);
    int differs = 0;
    for (int i = 0; i < 3; i++)
        differs |= c.secs[i].hash != m->secs[m->shards[k].sec + i].hash;
    assert_true(differs);
    arc_free(m);
    rewrite(path, (int)k, &c, NULL);
}

static void recode_shard1(const char *tmp)
{
    recode_shard(tmp, 1, 0);
}

static void corrupt_shard1(const char *tmp)
{
    recode_shard(tmp, 1, 1);
}

static void flip_shard1(const char *tmp)
{
    arc *m;
    assert_int_equal(arc_open_meta(tmp, &m), 0);
    const arc_secinfo *s = &m->secs[m->shards[1].sec + 2];
    off_t at = (off_t)(s->offset + s->stored / 2);
    arc_free(m);
    int fd = open(tmp, O_RDWR);
    unsigned char b;
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
}

/* a.txt and big trade their content in the file table: each still agrees with its own size
 * and hash, but neither holds what it held. */
static void swap_entries(arc *w)
{
    arc_entry *a = &w->ents[1], *b = &w->ents[2];
    assert_string_equal(a->path, "a.txt");
    assert_string_equal(b->path, "big");
    arc_entry t = *a;
    a->shard = b->shard;
    a->root_start = b->root_start;
    a->root_len = b->root_len;
    a->size = b->size;
    a->hash = b->hash;
    b->shard = t.shard;
    b->root_start = t.root_start;
    b->root_len = t.root_len;
    b->size = t.size;
    b->hash = t.hash;
}

static void swap_files(const char *tmp)
{
    rewrite(tmp, -1, NULL, swap_entries);
}

static int tamper_step(void *ctx, int step, const char *tmp)
{
    void (**tamper)(const char *) = ctx;
    if (step == VOL_STEP_WRITTEN && *tamper) (*tamper)(tmp);
    return 0;
}

/* Append to zz.txt in a copy of the three-shard archive and compact it (shards 0 to 2 copied,
 * zz.txt in a new one), `tamper` (if any) applied to the new archive once it is written.
 * Returns vol_compact's result with its figures in *st. A compaction that fails leaves the
 * archive byte for byte; one that succeeds leaves every file agreeing with its hash. */
static int compact_tampered(void (*tamper)(const char *), vol_compact_stats *st)
{
    char *p = copy_sharded("tamper.tdc");
    size_t n0 = 0, n1 = 0;
    unsigned char *before = tu_slurp(p, &n0);
    vol_opts o = {
        .writable = 1, .shard_size = 1000, .compact_step = tamper_step, .step_ctx = &tamper};
    vol *v;
    assert_int_equal(vol_open(p, &o, &v, NULL), 0);
    append_zz(v);
    int rc = vol_compact(v, st);
    vol_close(v);
    unsigned char *after = tu_slurp(p, &n1);
    if (rc) {
        assert_int_equal(n0, n1);
        assert_memory_equal(before, after, n0);
    } else {
        arc *a;
        idx *x;
        assert_int_equal(arc_open(p, &a), 0);
        assert_int_equal(a->nshards, 4);
        assert_int_equal(idx_build(a, &x), 0);
        assert_int_equal(idx_check_content(x, NULL, NULL, NULL, NULL, NULL), 0);
        idx_free(x);
        arc_free(a);
    }
    free(before);
    free(after);
    drop_copy(p);
    return rc;
}

/* The check before the rename reads back only the files the tables do not show unchanged in
 * shards copied as stored, and still refuses every damage a writer could leave in them. */
static void test_compaction_check_follows_the_edit(void **state)
{
    (void)state;
    const uint64_t zz = strlen("zeta eta alpha and the end\n") + 11;
    vol_compact_stats st;
    /* Shards 0 to 2 copied: only zz.txt, in the new shard, is read back. */
    assert_int_equal(compact_tampered(NULL, &st), 0);
    assert_int_equal(st.check_files, 1);
    assert_int_equal(st.check_bytes, zz);
    /* Shard 1 stored otherwise (coded again, the same grammar): big, which runs through it,
     * is read back too, and agrees. */
    assert_int_equal(compact_tampered(recode_shard1, &st), 0);
    assert_int_equal(st.check_files, 2);
    assert_int_equal(st.check_bytes, zz + big.n);
    /* A byte of a copied shard flipped: its checksum fails on reopening. */
    assert_int_equal(compact_tampered(flip_shard1, &st), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "shard 1"));
    assert_non_null(strstr(tdc_errmsg(), "checking the compacted archive"));
    /* Shard 1 coded again with two root symbols swapped, every checksum good and every size
     * right: big is read back and its hash differs. */
    assert_int_equal(compact_tampered(corrupt_shard1, &st), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "'big': content does not match its hash"));
    /* Two kept files trade their runs, sizes and hashes in the file table: each would agree
     * with its own hash, but a.txt no longer has its archived content. */
    assert_int_equal(compact_tampered(swap_files, &st), -EBADMSG);
    assert_non_null(strstr(tdc_errmsg(), "'a.txt' does not keep its archived content"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_across_cuts),
        cmocka_unit_test(test_plan_sent),
        cmocka_unit_test(test_reads_before_the_load),
        cmocka_unit_test(test_reads_under_a_budget),
        cmocka_unit_test(test_edited_reads_under_a_budget),
        cmocka_unit_test(test_analytics_as_one_grammar),
        cmocka_unit_test(test_analytics_by_shard),
        cmocka_unit_test(test_search_part_by_part),
        cmocka_unit_test(test_damaged_shard_costs_its_files),
        cmocka_unit_test(test_shard_table_disagreement),
        cmocka_unit_test(test_check_spans),
        cmocka_unit_test(test_backlog),
        cmocka_unit_test(test_damaged_shard_not_compacted),
        cmocka_unit_test(test_compaction_by_shard),
        cmocka_unit_test(test_same_content),
        cmocka_unit_test(test_shard_rule_syms),
        cmocka_unit_test(test_meta_dup),
        cmocka_unit_test(test_compaction_check_follows_the_edit),
        cmocka_unit_test(test_default_shard_size),
        cmocka_unit_test(test_default_budget),
        cmocka_unit_test(test_no_empty_shard),
        cmocka_unit_test(test_sink),
        cmocka_unit_test(test_compaction_workers),
        cmocka_unit_test(test_compaction_out_of_space),
        cmocka_unit_test(test_compaction_keeps_parts),
        cmocka_unit_test(test_pack_streamed),
        cmocka_unit_test(test_pack_out_of_space),
        cmocka_unit_test(test_compaction_shard_size),
        cmocka_unit_test(test_switch_before_later_views),
    };
    return cmocka_run_group_tests_name("shard", tests, setup, teardown);
}
