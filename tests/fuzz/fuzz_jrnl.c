/* fuzz_jrnl: the journal replayer. Each input is a journal for the fixture archive (its
 * header names the fixture's identity: the target writes it in, so inputs stay valid for
 * any fixture build). Unless bit 0 of header byte 12 (unused by the format) is set, every
 * record's sequence number and checksum are recomputed, so the record decoders behind the
 * checksum see the mutated bodies. The journal is replayed by vol_open read-only, the tree
 * is walked and read; then it is replayed writable (cutting a bad tail) and compacted, and
 * the compacted archive must show exactly the replayed tree. */
#include "fuzz.h"

static uint64_t fix_id;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char *path;
    size_t n;
    fz_fixture(&path, &n);
    arc *a;
    if (arc_open(path, &a)) fz_die("open fixture");
    fix_id = a->id;
    arc_free(a);
    return 0;
}

static void fix_records(unsigned char *p, size_t n)
{
    uint64_t off = JRNL_HDR, seq = 1;
    while (n - off >= JRNL_REC_OVERHEAD) {
        uint32_t len = le32(p + off + JRNL_REC_LEN);
        if (len > n - off - JRNL_REC_OVERHEAD) break;
        st64(p + off + JRNL_REC_SEQ, seq++);
        jrnl_rec_seal(p + off);
        off += JRNL_REC_OVERHEAD + (uint64_t)len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fix_id) LLVMFuzzerInitialize(NULL, NULL);
    char *path, jp[256];
    size_t an;
    fz_fixture(&path, &an);
    fz_reset_fixture();
    snprintf(jp, sizeof jp, "%s.journal", path);
    unsigned char *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    if (size >= JRNL_HDR) {
        st64(p + JRNL_HDR_ID, fix_id);
        jrnl_header_seal(p);
        if (!(p[12] & 1)) fix_records(p, size);
    }
    fz_write(jp, p, size);
    free(p);
    fz_check_replay_compact(path, NULL);
    return 0;
}
