#include "env.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/base/buf.h"
#include "../engine/base/err.h"
#include "../engine/base/fio.h"

/* A variable set to a value it does not take: its name and what it takes. */
static int bad(const char *name, const char *value, const char *takes)
{
    return tdc_error(-EINVAL, "%s=%s: must be %s", name, value, takes);
}

/* A number from lo to hi (digits alone) into *n, or -1. */
static int num_in(const char *e, uint64_t lo, uint64_t hi, uint64_t *n)
{
    return parse_uint(e, n) || *n < lo || *n > hi ? -1 : 0;
}

int tdc_env_settings(backend_opts *o)
{
    const char *e;
    uint64_t v;
    if ((e = getenv("TADOC_TRAVERSAL")) && *e) {
        if (!strcmp(e, "topdown") || !strcmp(e, "top-down"))
            o->ana.traversal = ANA_TOPDOWN;
        else if (!strcmp(e, "bottomup") || !strcmp(e, "bottom-up"))
            o->ana.traversal = ANA_BOTTOMUP;
        else if (!strcmp(e, "auto"))
            o->ana.traversal = ANA_AUTO;
        else
            return bad("TADOC_TRAVERSAL", e, "auto, topdown or bottomup");
    }
    if ((e = getenv("TADOC_THREADS")) && *e) {
        if (num_in(e, 1, UINT32_MAX, &v)) return bad("TADOC_THREADS", e, "1 or 2");
        o->ana.threads = v >= 2 ? 2 : 1;
    }
    /* 1 turns the decisions on; 2 adds each phase's time */
    if ((e = getenv("TADOC_ANA_VERBOSE")) && *e) {
        if (num_in(e, 0, 2, &v)) return bad("TADOC_ANA_VERBOSE", e, "0, 1 or 2");
        o->ana.verbose = (int)v;
    }
    if ((e = getenv("TADOC_ANA_CACHE")) && *e) {
        if (num_in(e, 0, 1, &v)) return bad("TADOC_ANA_CACHE", e, "0 or 1");
        o->ana.cache = (int)v;
    }
    if ((e = getenv("TADOC_GPU_WIDE_SEQ")) && *e) {
        if (num_in(e, 0, 1, &v)) return bad("TADOC_GPU_WIDE_SEQ", e, "0 or 1");
        o->wide_seq = (int)v;
    }
    if ((e = getenv("TADOC_GPU_MEM")) && *e) {
        if (parse_size(e, &v)) return bad("TADOC_GPU_MEM", e, "a size (K, M, G)");
        o->gpu_mem = v;
    }
    if ((e = getenv("TADOC_MERGE_MEM")) && *e) {
        if (parse_size(e, &v)) return bad("TADOC_MERGE_MEM", e, "a size (K, M, G)");
        if (v) o->ana.spill_at = v;
    }
    if ((e = getenv("TADOC_SHARDS")) && *e) {
        if (!strcmp(e, "whole"))
            o->ana.shards = ANA_WHOLE;
        else if (num_in(e, 0, 1u << 20, &v)) /* 0: one per CPU, the default */
            return bad("TADOC_SHARDS", e, "a number of shards (0: one per CPU) or whole");
        else
            o->ana.shards = (int)v;
    }
    return 0;
}

int tdc_env_gpu_mode(void)
{
    const char *e = getenv("TADOC_GPU");
    int m = backend_mode_parse(e);
    return m < 0 ? bad("TADOC_GPU", e, "off, auto or on") : m;
}

int tdc_env_tool(backend_opts *o)
{
    int rc = tdc_env_settings(o), mode = rc ? rc : tdc_env_gpu_mode();
    if (mode < 0) return mode;
    o->mode = mode;
    return 0;
}

void tdc_env_merge_spill(backend_opts *o)
{
    if (!o->ana.spill_at) o->ana.spill_at = TDC_MERGE_MEM;
    o->ana.spill_dir = fio_tmpdir();
}
