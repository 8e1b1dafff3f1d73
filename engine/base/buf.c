#include "buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
/* Smaller blocks are not worth a system call. From two huge pages a block holds at least one
 * whole aligned one, so a shard's root section and symbols fault in a huge page at a time:
 * fewer faults in a span's decoding, which a virtual machine makes costly. */
#define HUGE_MIN (2 * HUGE_PAGE)

void mem_huge(void *p, size_t n)
{
    if (n < HUGE_MIN) return;
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);
    if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
}

/* Below this a buffer takes few faults: not worth a system call. */
#define POPULATE_MIN ((size_t)64 << 10)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it (EINVAL) */
#endif

int mem_within(const void *p, const void *base, size_t n)
{
    uintptr_t x = (uintptr_t)p, b = (uintptr_t)base;
    return p && base && x >= b && x - b < n;
}

void mem_populate(void *p, size_t n)
{
    if (n < POPULATE_MIN) return;
    mem_huge(p, n);
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), e = ((uintptr_t)p + n) & ~(pg - 1);
    if (e > a) madvise((void *)a, e - a, MADV_POPULATE_WRITE);
}

/* Grow an array of `elem`-byte elements so that n + extra fit: to at least twice its room,
 * which keeps pushes O(1), and to exactly n + extra when that is more (a reservation of a
 * known size, such as a shard's root, takes no more: unused room in reused or huge-page
 * memory is resident all the same). */
static int grow(void **p, size_t *cap, size_t n, size_t extra, size_t elem)
{
    if (n + extra <= *cap) return 0;
    size_t need = n + extra, c = *cap ? 2 * *cap : 16;
    if (need < n || *cap > SIZE_MAX / 2 / elem) return -ENOMEM;
    if (c < need) c = need;
    if (c > SIZE_MAX / elem) return -ENOMEM;
    void *q = realloc(*p, c * elem);
    if (!q) return -ENOMEM;
    mem_huge(q, c * elem);
    *p = q;
    *cap = c;
    return 0;
}

int buf_reserve(buf *b, size_t extra)
{
    return grow((void **)&b->p, &b->cap, b->n, extra, 1);
}
int vec32_reserve(vec32 *v, size_t extra)
{
    return grow((void **)&v->p, &v->cap, v->n, extra, 4);
}
int vec64_reserve(vec64 *v, size_t extra)
{
    return grow((void **)&v->p, &v->cap, v->n, extra, 8);
}

int buf_put(buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n)) return -ENOMEM;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

int buf_put_u32(buf *b, uint32_t x)
{
    unsigned char t[4];
    st32(t, x);
    return buf_put(b, t, 4);
}

int buf_put_u64(buf *b, uint64_t x)
{
    unsigned char t[8];
    st64(t, x);
    return buf_put(b, t, 8);
}

int buf_put_varint(buf *b, uint64_t x)
{
    if (buf_reserve(b, 10)) return -ENOMEM;
    while (x >= 0x80) {
        b->p[b->n++] = (unsigned char)(x | 0x80);
        x >>= 7;
    }
    b->p[b->n++] = (unsigned char)x;
    return 0;
}

int buf_put_str(buf *b, const void *p, size_t n)
{
    return buf_put_varint(b, n) || buf_put(b, p, n) ? -ENOMEM : 0;
}

void buf_free(buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}
void vec32_free(vec32 *v)
{
    free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}
void vec64_free(vec64 *v)
{
    free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}

int rd_bytes(rd *r, size_t n, const unsigned char **p)
{
    if ((size_t)(r->end - r->p) < n) return -EBADMSG;
    *p = r->p;
    r->p += n;
    return 0;
}

int rd_u32(rd *r, uint32_t *x)
{
    const unsigned char *p;
    if (rd_bytes(r, 4, &p)) return -EBADMSG;
    *x = le32(p);
    return 0;
}

int rd_u64(rd *r, uint64_t *x)
{
    const unsigned char *p;
    if (rd_bytes(r, 8, &p)) return -EBADMSG;
    *x = le64(p);
    return 0;
}

int rd_varint_long(rd *r, uint64_t *x)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return -EBADMSG;
        unsigned char c = *r->p++;
        if (shift == 63 && c > 1) return -EBADMSG;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *x = v;
            return 0;
        }
    }
    return -EBADMSG;
}

int parse_uint(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9') return -1; /* strtoull would take a sign or a space */
    errno = 0;
    uint64_t v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int parse_size(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    uint64_t v = strtoull(s, &end, 10);
    int shift = !strcmp(end, "K") ? 10 : !strcmp(end, "M") ? 20 : !strcmp(end, "G") ? 30 : 0;
    if (errno || (*end && !shift) || v > (UINT64_MAX >> shift)) return -1;
    *out = v << shift;
    return 0;
}
