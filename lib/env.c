#include "env.h"

#include <stdlib.h>
#include <string.h>

#include "../engine/analytics/ana.h"
#include "../engine/backend/backend.h"

void tdc_env_settings(void)
{
    const char *e = getenv("TADOC_TRAVERSAL");
    if (e)
        ana_set_traversal(!strcmp(e, "topdown") || !strcmp(e, "top-down")     ? ANA_TOPDOWN
                          : !strcmp(e, "bottomup") || !strcmp(e, "bottom-up") ? ANA_BOTTOMUP
                                                                              : ANA_AUTO);
    if ((e = getenv("TADOC_THREADS")) && *e) ana_set_threads(atoi(e) >= 2 ? 2 : 1);
    /* any value but "0" turns the decisions on; 2 and up adds each phase's time */
    if ((e = getenv("TADOC_ANA_VERBOSE")) && *e && strcmp(e, "0"))
        ana_set_verbose(atoi(e) >= 2 ? 2 : 1);
    if ((e = getenv("TADOC_ANA_CACHE"))) ana_set_cache(strcmp(e, "0") != 0);
    if ((e = getenv("TADOC_GPU_WIDE_SEQ"))) backend_set_gpu_wide_seq(!strcmp(e, "1"));
}
