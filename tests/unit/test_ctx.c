/* Contexts (docs/DESIGN.md, "Settings live in contexts the caller makes"): analytics contexts
 * with different options give the same text, also when used at once from several threads;
 * two backends in one process keep their own mode and counters; lib/env.c fills the options
 * from the environment. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../engine/analytics/ana.h"
#include "../../engine/analytics/analytics.h"
#include "../../engine/backend/backend.h"
#include "../../engine/build/pack.h"
#include "../../engine/format/arc.h"
#include "../../engine/base/err.h"
#include "../../lib/env.h"
#include "testutil.h"

static arc *A;

static int setup(void **state)
{
    (void)state;
    char *dir = tu_tmppath("ctx"), p[4200], ar[4200], cmd[8500];
    const char *w[] = {"alpha", "beta", "gamma", "the", "cat", "sat", "on", "mat"};
    uint64_t s = 7;
    mkdir(dir, 0755);
    for (int f = 0; f < 6; f++) {
        snprintf(p, sizeof p, "%s/f%d.txt", dir, f);
        FILE *fp = fopen(p, "w");
        if (!fp) return -1;
        for (int i = 0; i < 3000; i++)
            fprintf(fp, "%s%s", w[tu_rand(&s) % 8], tu_rand(&s) % 9 ? " " : ".\n");
        fclose(fp);
    }
    snprintf(ar, sizeof ar, "%s.tdc", dir);
    pack_opts o = {.seg_tokens = 512};
    pack_stats st;
    int rc = pack_dir(dir, ar, &o, &st);
    if (!rc) rc = arc_open(ar, &A);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, ar);
    if (system(cmd)) rc = -1;
    free(dir);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    arc_free(A);
    return 0;
}

/* Every analytic of the whole archive with c, into out[k]. */
static void all_six(ana_ctx *c, buf *out)
{
    for (int k = 0; k < ANA_NIDS; k++) {
        out[k].n = 0;
        assert_int_equal(ana_table[k].cpu(c, A, 0, A->nents, NULL, &out[k]), 0);
    }
}

static void same_six(const buf *x, const buf *y)
{
    for (int k = 0; k < ANA_NIDS; k++) {
        assert_int_equal(x[k].n, y[k].n);
        assert_memory_equal(x[k].p, y[k].p, x[k].n);
    }
}

static void free_six(buf *b)
{
    for (int k = 0; k < ANA_NIDS; k++)
        buf_free(&b[k]);
}

typedef struct job {
    ana_ctx *c;
    buf out[ANA_NIDS];
} job;

static void *run_job(void *x)
{
    job *j = x;
    for (int r = 0; r < 3; r++) /* again: a context that keeps its preparation finds it */
        all_six(j->c, j->out);
    return NULL;
}

static void test_contexts_agree(void **state)
{
    (void)state;
    buf want[ANA_NIDS] = {{0}};
    all_six(NULL, want);
    /* each traversal and thread count, with and without kept preparations, four at once */
    job j[12];
    pthread_t th[12];
    for (int i = 0; i < 12; i++) {
        ana_opts o = {i % 3, 1 + (i / 3) % 2, i < 6, 0, 0, NULL, NULL, 0, NULL, NULL, 0, 0, 0,
                      NULL};
        memset(&j[i], 0, sizeof j[i]);
        assert_non_null(j[i].c = ana_ctx_new(&o));
        assert_int_equal(ana_ctx_opts(j[i].c)->traversal, i % 3);
        assert_int_equal(ana_threads(j[i].c), 1 + (i / 3) % 2);
    }
    for (int i = 0; i < 12; i += 4) {
        for (int t = i; t < i + 4; t++)
            assert_int_equal(pthread_create(&th[t], NULL, run_job, &j[t]), 0);
        for (int t = i; t < i + 4; t++)
            pthread_join(th[t], NULL);
    }
    for (int i = 0; i < 12; i++) {
        same_six(j[i].out, want);
        free_six(j[i].out);
        ana_ctx_free(j[i].c);
    }
    free_six(want);
}

static void test_options_normalized(void **state)
{
    (void)state;
    const ana_opts *d = ana_ctx_opts(NULL);
    assert_int_equal(d->traversal, ANA_AUTO);
    assert_int_equal(d->threads, 0);
    assert_int_equal(d->cache, 1);
    ana_opts o = {7, 9, 1, -3, 0, NULL, NULL, 0, NULL, NULL, 0, 0, 0, NULL};
    ana_ctx *c = ana_ctx_new(&o);
    assert_non_null(c);
    assert_int_equal(ana_ctx_opts(c)->traversal, ANA_AUTO);
    assert_int_equal(ana_ctx_opts(c)->threads, 2);
    assert_int_equal(ana_ctx_opts(c)->verbose, 0);
    ana_ctx_free(c);
}

/* "cpu: N requests" of b's stats. */
static unsigned long long cpu_requests(backend *b)
{
    char st[1024];
    unsigned long long g, gb, c, cb;
    backend_stats(b, st, sizeof st);
    assert_int_equal(
        sscanf(st, "gpu: %llu requests %llu bytes; cpu: %llu requests %llu bytes", &g, &gb, &c, &cb),
        4);
    return c;
}

static void test_backends_apart(void **state)
{
    (void)state;
    backend_opts o;
    backend_opts_init(&o);
    o.mode = BACKEND_OFF;
    o.ana.traversal = ANA_BOTTOMUP;
    backend *b1, *b2;
    assert_int_equal(backend_new(&o, &b1), 0);
    assert_int_equal(backend_new(NULL, &b2), 0);
    assert_int_equal(backend_options(b2)->mode, BACKEND_AUTO);
    assert_int_equal(ana_ctx_opts(backend_ana(b1))->traversal, ANA_BOTTOMUP);
    assert_int_equal(ana_ctx_opts(backend_ana(b2))->traversal, ANA_AUTO);
    buf x = {0}, y = {0}, want = {0};
    assert_int_equal(ana_seqcount(NULL, A, 0, A->nents, NULL, &want), 0);
    for (int i = 0; i < 2; i++) {
        x.n = 0;
        assert_int_equal(backend_analytic(b1, ANA_SEQCOUNT, A, 1, 0, A->nents, NULL, &x), 0);
    }
    assert_int_equal(backend_analytic(b2, ANA_SEQCOUNT, A, 1, 0, A->nents, NULL, &y), 0);
    assert_int_equal(x.n, want.n);
    assert_memory_equal(x.p, want.p, x.n);
    assert_int_equal(y.n, want.n);
    assert_memory_equal(y.p, want.p, y.n);
    /* each counts its own requests; a mode set on one is not the other's */
    assert_int_equal(cpu_requests(b1), 2);
    assert_int_equal(cpu_requests(b2), 1);
    backend_set_mode(b2, BACKEND_ON);
    assert_int_equal(backend_options(b1)->mode, BACKEND_OFF);
    assert_int_equal(backend_options(b2)->mode, BACKEND_ON);
    assert_int_equal(backend_analytic(b1, ANA_NIDS, A, 1, 0, A->nents, NULL, &x), -EINVAL);
    /* the GPU half alone: off (or no GPU) leaves it to the caller, out untouched, uncounted */
    x.n = 0;
    assert_int_equal(backend_gpu_analytic(b1, ANA_SEQCOUNT, A, 1, 0, A->nents, NULL, &x), 1);
    assert_int_equal(x.n, 0);
    assert_int_equal(cpu_requests(b1), 2);
    assert_int_equal(backend_gpu_analytic(b1, ANA_NIDS, A, 1, 0, A->nents, NULL, &x), -EINVAL);
    assert_int_equal(backend_gpu_analytic(b1, ANA_SEQCOUNT, A, 1, 1, 0, NULL, &x), -EINVAL);
    backend_free(b1);
    backend_free(b2);
    buf_free(&x);
    buf_free(&y);
    buf_free(&want);
}

static void test_env(void **state)
{
    (void)state;
    backend_opts o;
    backend_opts_init(&o);
    unsetenv("TADOC_TRAVERSAL");
    unsetenv("TADOC_THREADS");
    unsetenv("TADOC_ANA_VERBOSE");
    unsetenv("TADOC_ANA_CACHE");
    unsetenv("TADOC_GPU_WIDE_SEQ");
    unsetenv("TADOC_MERGE_MEM");
    assert_int_equal(tdc_env_settings(&o), 0);
    assert_int_equal(o.ana.traversal, ANA_AUTO);
    assert_int_equal(o.ana.spill_at, 0);
    assert_int_equal(o.ana.threads, 0);
    assert_int_equal(o.ana.cache, 1);
    assert_int_equal(o.wide_seq, 0);
    setenv("TADOC_TRAVERSAL", "bottom-up", 1);
    setenv("TADOC_THREADS", "5", 1);
    setenv("TADOC_ANA_VERBOSE", "2", 1);
    setenv("TADOC_ANA_CACHE", "0", 1);
    setenv("TADOC_GPU_WIDE_SEQ", "1", 1);
    setenv("TADOC_MERGE_MEM", "3M", 1);
    assert_int_equal(tdc_env_settings(&o), 0);
    assert_int_equal(o.ana.spill_at, 3 << 20);
    assert_int_equal(o.ana.traversal, ANA_BOTTOMUP);
    assert_int_equal(o.ana.threads, 2);
    assert_int_equal(o.ana.verbose, 2);
    assert_int_equal(o.ana.cache, 0);
    assert_int_equal(o.wide_seq, 1);
    assert_int_equal(o.mode, BACKEND_AUTO); /* TADOC_GPU is the tools' to read */
    /* a value a variable does not take is refused, naming it */
    static const char *bad[][2] = {{"TADOC_TRAVERSAL", "sideways"}, {"TADOC_THREADS", "abc"},
                                   {"TADOC_ANA_VERBOSE", "x"},      {"TADOC_SHARDS", "-1"},
                                   {"TADOC_GPU_MEM", "x"},          {"TADOC_MERGE_MEM", " 1M"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        assert_int_equal(tdc_env_settings(&o), -EINVAL);
        assert_non_null(strstr(tdc_errmsg(), bad[i][0]));
        unsetenv(bad[i][0]);
    }
    setenv("TADOC_GPU", "maybe", 1);
    assert_int_equal(tdc_env_gpu_mode(), -EINVAL);
    unsetenv("TADOC_GPU");
}

/* The ranks of a host share its GPUs: one each while they are as many as the GPUs or more,
 * several each while fewer; every GPU used by someone. */
static void test_gpu_shares(void **state)
{
    (void)state;
    int dev[BACKEND_MAX_GPUS];
    assert_int_equal(backend_pick_devices(2, 0, 0, dev), 2); /* no sharing: every one */
    assert_int_equal(dev[0], 0);
    assert_int_equal(dev[1], 1);
    assert_int_equal(backend_pick_devices(2, 0, 1, dev), 2); /* one rank: every one */
    assert_int_equal(backend_pick_devices(2, 1, 2, dev), 1);
    assert_int_equal(dev[0], 1);
    assert_int_equal(backend_pick_devices(2, 2, 3, dev), 1); /* three ranks, two GPUs */
    assert_int_equal(dev[0], 0);
    assert_int_equal(backend_pick_devices(4, 1, 2, dev), 2); /* two ranks, four GPUs */
    assert_int_equal(dev[0], 1);
    assert_int_equal(dev[1], 3);
    assert_int_equal(backend_pick_devices(0, 0, 2, dev), 0);
    assert_int_equal(backend_pick_devices(BACKEND_MAX_GPUS + 4, 0, 0, dev), BACKEND_MAX_GPUS);
    for (int n = 1; n <= 5; n++) /* every GPU taken by some rank, whatever the rank count */
        for (int shares = 1; shares <= 7; shares++) {
            int used[8] = {0}, each = -1;
            for (int r = 0; r < shares; r++) {
                int k = backend_pick_devices(n, r, shares, dev);
                assert_true(k >= 1);
                if (each < 0) each = k;
                if (shares >= n || n % shares == 0) assert_int_equal(k, each); /* even shares */
                for (int i = 0; i < k; i++)
                    used[dev[i]]++;
            }
            for (int d = 0; d < n; d++)
                assert_true(used[d] >= 1);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contexts_agree), cmocka_unit_test(test_options_normalized),
        cmocka_unit_test(test_backends_apart), cmocka_unit_test(test_env),
        cmocka_unit_test(test_gpu_shares)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
