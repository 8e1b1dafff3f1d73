#include "env.h"

#include <stdlib.h>
#include <string.h>

#include "../engine/base/fio.h"

void tdc_env_settings(backend_opts *o)
{
    const char *e = getenv("TADOC_TRAVERSAL");
    if (e)
        o->ana.traversal = !strcmp(e, "topdown") || !strcmp(e, "top-down")     ? ANA_TOPDOWN
                           : !strcmp(e, "bottomup") || !strcmp(e, "bottom-up") ? ANA_BOTTOMUP
                                                                               : ANA_AUTO;
    if ((e = getenv("TADOC_THREADS")) && *e) o->ana.threads = atoi(e) >= 2 ? 2 : 1;
    /* any value but "0" turns the decisions on; 2 and up adds each phase's time */
    if ((e = getenv("TADOC_ANA_VERBOSE")) && *e && strcmp(e, "0"))
        o->ana.verbose = atoi(e) >= 2 ? 2 : 1;
    if ((e = getenv("TADOC_ANA_CACHE"))) o->ana.cache = strcmp(e, "0") != 0;
    if ((e = getenv("TADOC_GPU_WIDE_SEQ"))) o->wide_seq = !strcmp(e, "1");
    uint64_t v;
    if ((e = getenv("TADOC_GPU_MEM")) && *e && !parse_size(e, &v)) o->gpu_mem = v;
    if ((e = getenv("TADOC_MERGE_MEM")) && *e && !parse_size(e, &v) && v) o->ana.spill_at = v;
    if ((e = getenv("TADOC_SHARDS")) && *e) o->ana.shards = !strcmp(e, "whole") ? ANA_WHOLE : atoi(e);
}

int tdc_env_gpu_mode(void)
{
    int m = backend_mode_parse(getenv("TADOC_GPU"));
    return m < 0 ? BACKEND_OFF : m;
}

void tdc_env_merge_spill(backend_opts *o)
{
    if (!o->ana.spill_at) o->ana.spill_at = TDC_MERGE_MEM;
    o->ana.spill_dir = fio_tmpdir();
}
