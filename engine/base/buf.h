/* buf: growable byte buffers and typed vectors, plus LEB128 varints.
 *
 * All growth functions return 0 or -ENOMEM and leave the buffer intact on failure.
 * Buffers own their memory; buf_free() releases it and resets the buffer. Not thread-safe. */
#ifndef TDC_BUF_H
#define TDC_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

typedef struct vec32 {
    uint32_t *p;
    size_t n, cap;
} vec32;

typedef struct vec64 {
    uint64_t *p;
    size_t n, cap;
} vec64;

/* Ask for transparent huge pages on the 2 MiB-aligned part of [p, p + n) when it is large:
 * the grammar's tables are read at random positions, and with 4 KiB pages most such reads
 * also miss the TLB; filling them also takes 512 times fewer page faults. Only advice. */
void mem_huge(void *p, size_t n);

/* [p, p + n) is about to be written whole: map its pages now, in one system call, rather
 * than on a page fault each as they are first written (a virtual machine can make each fault
 * cost as much as copying tens of KiB). For exact-size buffers only: a buffer with room to
 * spare would hold memory it never uses. Only advice; small buffers are left alone. */
void mem_populate(void *p, size_t n);

/* Whether p points into the block [base, base + n) (base may be NULL: never): what a
 * structure that keeps many strings or records in one block asks before freeing one alone. */
int mem_within(const void *p, const void *base, size_t n);

/* Make room for at least `extra` more bytes (elements) beyond n (large ones get mem_huge). */
int buf_reserve(buf *b, size_t extra);
int vec32_reserve(vec32 *v, size_t extra);
int vec64_reserve(vec64 *v, size_t extra);

int buf_put(buf *b, const void *p, size_t n);
int buf_put_u32(buf *b, uint32_t x); /* little-endian */
int buf_put_u64(buf *b, uint64_t x); /* little-endian */
int buf_put_varint(buf *b, uint64_t x);
/* Zigzag, for a signed number (or a difference modulo 2^64) stored as a varint: 0, -1, 1,
 * -2, ... become 0, 1, 2, 3, ... */
static inline uint64_t zig64(uint64_t d)
{
    return d << 1 ^ (uint64_t)((int64_t)d >> 63);
}
static inline uint64_t unzig64(uint64_t z)
{
    return z >> 1 ^ (0 - (z & 1));
}
/* n bytes preceded by their count as a varint (the formats' strings). */
int buf_put_str(buf *b, const void *p, size_t n);

static inline int vec32_push(vec32 *v, uint32_t x)
{
    if (v->n == v->cap && vec32_reserve(v, 1)) return -12; /* -ENOMEM */
    v->p[v->n++] = x;
    return 0;
}
static inline int vec64_push(vec64 *v, uint64_t x)
{
    if (v->n == v->cap && vec64_reserve(v, 1)) return -12;
    v->p[v->n++] = x;
    return 0;
}

void buf_free(buf *b);
void vec32_free(vec32 *v);
void vec64_free(vec64 *v);

/* A bounds-checked reader over a byte range; every get returns 0 or -EBADMSG when the
 * range is exhausted or a varint is malformed. */
typedef struct rd {
    const unsigned char *p, *end;
} rd;

int rd_u32(rd *r, uint32_t *x);
int rd_u64(rd *r, uint64_t *x);
int rd_varint_long(rd *r, uint64_t *x);

/* A LEB128 varint: 0, or -EBADMSG when cut short or over 64 bits. Most are one or two
 * bytes, read here without a call. */
static inline int rd_varint(rd *r, uint64_t *x)
{
    const unsigned char *p = r->p;
    if (p < r->end && p[0] < 0x80) {
        *x = p[0];
        r->p = p + 1;
        return 0;
    }
    if (r->end - p >= 2 && p[1] < 0x80) {
        *x = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        r->p = p + 2;
        return 0;
    }
    return rd_varint_long(r, x);
}
int rd_bytes(rd *r, size_t n, const unsigned char **p);

static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}
static inline void st32(unsigned char *p, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(x >> (8 * i));
}
static inline void st64(unsigned char *p, uint64_t x)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(x >> (8 * i));
}

/* Index of x in a[0..n) (ascending), or -1. */
static inline int64_t find_u32(const uint32_t *a, size_t n, uint32_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && a[lo] == x ? (int64_t)lo : -1;
}

/* qsort that accepts an empty (possibly NULL) array, which plain qsort does not. */
static inline void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1) qsort(base, n, size, cmp);
}

/* sort_n with a context pointer handed to the comparator (glibc qsort_r), so comparators
 * need no globals and sorts on different threads cannot disturb each other. */
static inline void sort_r(void *base, size_t n, size_t size,
                          int (*cmp)(const void *, const void *, void *), void *ctx)
{
    if (n > 1) qsort_r(base, n, size, cmp, ctx);
}

/* Parse a decimal number, digits alone (no sign, space or suffix), at most 2^64 - 1, as
 * options and fields are given; 0, or -1 for anything else. */
int parse_uint(const char *s, uint64_t *out);

/* Parse a byte count with an optional K, M or G suffix (command-line sizes); 0, or -1 for
 * anything else. */
int parse_size(const char *s, uint64_t *out);

#endif
