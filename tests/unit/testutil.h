/* Helpers shared by the unit tests: a deterministic PRNG and temporary paths. */
#ifndef TDC_TESTUTIL_H
#define TDC_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline uint64_t tu_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A fresh path under $TMPDIR (or /tmp) for this process; caller frees. */
static inline char *tu_tmppath(const char *name)
{
    const char *d = getenv("TMPDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/tdc-unit-%d-%s", d ? d : "/tmp", (int)getpid(), name);
    return p;
}

/* Write n bytes at p to dir/name; 0, or -1. */
static inline int tu_put(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Read a whole file (for real-text inputs); NULL if unreadable. */
static inline unsigned char *tu_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

#endif
