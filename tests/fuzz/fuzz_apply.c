/* fuzz_apply: the parser and executor of `tadoc apply` (apply_stream in tools/edit.c). Each
 * input is an OPS_FILE (a first line "#batch" selects --offsets=batch), applied to a fresh
 * copy of the fixture archive. Whatever it does, the journal it leaves must replay to exactly
 * the tree the writer showed, and compaction must keep that tree. */
#include "fuzz.h"

#include "../../tools/tadoc.h"

const char *prog = "tadoc";
backend_opts tool_opts; /* cmd_apply's, unused here: apply_stream takes its backend */

int fail(int rc)
{
    fprintf(stderr, "%s: %s\n", prog, tdc_errmsg());
    return rc == -EBADMSG ? EX_CORRUPT : EX_FAIL;
}

int usage_err(const char *usage, const char *msg)
{
    (void)usage, (void)msg;
    return EX_USAGE;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char *path;
    size_t n;
    fz_fixture(&path, &n);
    /* Extracts print to stdout, messages go to stderr: keep the fuzzer's output readable. */
    if (!getenv("FUZZ_VERBOSE")) {
        if (!freopen("/dev/null", "w", stdout)) fz_die("/dev/null");
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init++) LLVMFuzzerInitialize(NULL, NULL);
    char *path;
    size_t an;
    fz_fixture(&path, &an);
    fz_reset_fixture();
    vol *v;
    vol_opts o = {.writable = 1, .level = 1};
    if (vol_open(path, &o, &v, NULL)) fz_die("vol_open fixture");
    FILE *in = fmemopen((void *)data, size ? size : 1, "r");
    if (!in) fz_die("fmemopen");
    if (!size) fgetc(in);
    int batch = size >= 6 && !memcmp(data, "#batch", 6);
    apply_stats st;
    FILE *err = stderr;
    if (!getenv("FUZZ_VERBOSE")) stderr = fopen("/dev/null", "w");
    apply_stream(v, NULL, in, batch, &st);
    if (stderr != err) {
        fclose(stderr);
        stderr = err;
    }
    fclose(in);
    buf live = {0};
    fz_dump(v, 1 << 16, &live);
    vol_close(v);
    fz_check_replay_compact(path, &live);
    buf_free(&live);
    return 0;
}
