/* readcost: auto mode's read cost model. From batches timed on a simulated GPU of known
 * fixed cost and rate (with noise), it recovers both; with batches of one size alone it stays
 * defined; the choice follows the costs: large reads to an idle fast GPU, small ones and reads
 * behind a long queue to the CPU, and everything to the CPU once it measures faster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>

#include "../../engine/backend/readcost.h"
#include "testutil.h"

/* A batch of `bytes` on a simulated GPU of `fixed` ns plus `ns_b` a byte, timed +-5%. */
static void gpu_batch(readcost *c, uint64_t *seed, size_t bytes, double fixed, double ns_b)
{
    double noise = 0.95 + 0.1 * (double)(tu_rand(seed) % 1000) / 1000;
    readcost_gpu(c, bytes, (fixed + ns_b * (double)bytes) * noise);
}

static void test_learns_the_gpu_line(void **state)
{
    (void)state;
    readcost c;
    readcost_init(&c);
    uint64_t seed = 11;
    for (int i = 0; i < 400; i++) /* 40 us + 0.5 ns a byte */
        gpu_batch(&c, &seed, (size_t)(64 << 10) * (1 + tu_rand(&seed) % 256), 40e3, 0.5);
    assert_true(fabs(c.gpu_ns_b - 0.5) < 0.05);
    assert_true(fabs(c.gpu_fixed_ns - 40e3) < 20e3);
    assert_true(fabs(readcost_batch_ns(&c, 8 << 20) - (40e3 + 0.5 * (8 << 20))) < 0.05 * 4.2e6);
}

/* A GPU far slower per byte than the priors say (a deep grammar), whose large batches are
 * one in eight, the rest small probes: the line follows the large ones too, so that auto
 * stops sending such reads to the GPU. */
static void test_learns_a_slow_gpu_from_rare_large_batches(void **state)
{
    (void)state;
    readcost c;
    readcost_init(&c);
    uint64_t seed = 5;
    for (int i = 0; i < 400; i++) /* 75 us + 20 ns a byte */
        gpu_batch(&c, &seed, i % 8 ? 10000 : 190000, 75e3, 20.0);
    double want = 75e3 + 20.0 * 190000;
    assert_true(fabs(readcost_batch_ns(&c, 190000) - want) < 0.1 * want);
    c.cpu_ns_b = 1.8;
    assert_false(readcost_to_gpu(&c, 190000, 0, 0)); /* 3.9 ms against 0.34 on the CPU */
}

static void test_one_size_stays_defined(void **state)
{
    (void)state;
    readcost c;
    readcost_init(&c);
    for (int i = 0; i < 1000; i++)
        readcost_gpu(&c, 1 << 20, 400e3);
    double t = readcost_batch_ns(&c, 1 << 20);
    assert_true(isfinite(c.gpu_ns_b) && isfinite(c.gpu_fixed_ns));
    assert_true(c.gpu_ns_b >= 0 && c.gpu_fixed_ns >= 0);
    assert_true(fabs(t - 400e3) < 20e3); /* the size it saw is predicted as seen */
}

static void test_choice_follows_costs(void **state)
{
    (void)state;
    readcost c;
    readcost_init(&c);
    for (int i = 0; i < 200; i++) {
        readcost_gpu(&c, 64 << 10, 80e3);
        readcost_gpu(&c, 8 << 20, 80e3 + 0.3 * (8 << 20));
        readcost_cpu(&c, 1 << 20, 2.0 * (1 << 20));
    }
    assert_true(readcost_to_gpu(&c, 1 << 20, 0, 0));          /* 0.4 ms against 2.1 */
    assert_false(readcost_to_gpu(&c, 16 << 10, 0, 0));        /* 85 us against 33 */
    assert_false(readcost_to_gpu(&c, 1 << 20, 0, 3e6));       /* 3 ms still to wait */
    assert_false(readcost_to_gpu(&c, 1 << 20, 8 << 20, 0));   /* behind 8 MiB: 2.9 ms */
    assert_true(readcost_to_gpu(&c, 1 << 20, 2 << 20, 0.5e6)); /* 1.5 ms against 2.1 */
    for (int i = 0; i < 200; i++) /* the CPU turns out faster: 0.2 ns a byte */
        readcost_cpu(&c, 1 << 20, 0.2 * (1 << 20));
    assert_false(readcost_to_gpu(&c, 1 << 20, 0, 0));
    assert_true(fabs(c.cpu_ns_b - 0.2) < 0.01);
}

/* The CPU's cost per byte is its reads' time over their bytes: seven 64 KiB reads at 1.9 ns a
 * byte (each descending a deep grammar) for one 2 MiB read at 0.3 cost 0.58 ns a byte in all,
 * where a mean of each read's own figure said about 1.7. */
static void test_cpu_cost_weighs_bytes(void **state)
{
    (void)state;
    readcost c;
    readcost_init(&c);
    for (int i = 0; i < 400; i++) {
        size_t n = i % 8 ? 64 << 10 : 2 << 20;
        readcost_cpu(&c, n, (i % 8 ? 1.9 : 0.3) * (double)n);
    }
    assert_true(c.cpu_ns_b > 0.5 && c.cpu_ns_b < 0.7);
}

/* Each side gets one read in READCOST_PROBE when the other is chosen: the CPU at once, the
 * GPU only when nothing runs or waits there. */
static void test_probes(void **state)
{
    (void)state;
    readcost c;
    readcost_init(&c);
    int cpu = 0;
    for (int i = 0; i < 10 * READCOST_PROBE; i++) /* the priors favour the GPU at 1 MiB */
        cpu += !readcost_to_gpu(&c, 1 << 20, 0, 0);
    assert_int_equal(cpu, 10);
    for (int i = 0; i < 200; i++) /* the CPU measures faster: 0.1 ns a byte */
        readcost_cpu(&c, 1 << 20, 0.1 * (1 << 20));
    int gpu = 0;
    for (int i = 0; i < 10 * READCOST_PROBE; i++) /* a batch running: no probe */
        gpu += readcost_to_gpu(&c, 1 << 20, 0, 1e3);
    assert_int_equal(gpu, 0);
    gpu = readcost_to_gpu(&c, 1 << 20, 0, 0); /* idle: the probe that was due */
    assert_int_equal(gpu, 1);
    for (int i = 0; i < 10 * READCOST_PROBE; i++)
        gpu += readcost_to_gpu(&c, 1 << 20, 0, 0);
    assert_int_equal(gpu, 11);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns_the_gpu_line),
        cmocka_unit_test(test_learns_a_slow_gpu_from_rare_large_batches),
        cmocka_unit_test(test_one_size_stays_defined),
        cmocka_unit_test(test_choice_follows_costs),
        cmocka_unit_test(test_cpu_cost_weighs_bytes),
        cmocka_unit_test(test_probes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
