#include "piece.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pt_init(pt *t, uint64_t size)
{
    memset(t, 0, sizeof *t);
    if (!size) return 0;
    if (!(t->p = malloc(4 * sizeof *t->p))) return -ENOMEM;
    t->cap = 4;
    t->p[0] = (pt_piece){.end = size, .src = 0, .kind = PT_BASE};
    t->n = 1;
    return 0;
}

int pt_dup(const pt *t, pt *out)
{
    memset(out, 0, sizeof *out);
    if (!t->n) return 0;
    if (!(out->p = malloc(t->n * sizeof *out->p))) return -ENOMEM;
    memcpy(out->p, t->p, t->n * sizeof *out->p);
    out->n = out->cap = t->n;
    return 0;
}

void pt_free(pt *t)
{
    free(t->p);
    memset(t, 0, sizeof *t);
}

size_t pt_find(const pt *t, uint64_t off)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->p[mid].end <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for `extra` more pieces, so the edit that follows cannot fail halfway. */
static int reserve(pt *t, size_t extra)
{
    if (t->n + extra <= t->cap) return 0;
    size_t cap = t->cap ? t->cap * 2 : 8;
    while (cap < t->n + extra)
        cap *= 2;
    pt_piece *p = realloc(t->p, cap * sizeof *p);
    if (!p) return -ENOMEM;
    t->p = p;
    t->cap = cap;
    return 0;
}

static void insert_at(pt *t, size_t i, pt_piece pc)
{
    memmove(t->p + i + 1, t->p + i, (t->n - i) * sizeof *t->p);
    t->p[i] = pc;
    t->n++;
}

/* Make `pos` a piece boundary; returns the index of the piece starting there (n at the end). */
static size_t split(pt *t, uint64_t pos)
{
    if (pos == 0) return 0;
    if (pos >= pt_size(t)) return t->n;
    size_t j = pt_find(t, pos);
    uint64_t start = pt_start(t, j);
    if (start == pos) return j;
    pt_piece tail = t->p[j];
    if (tail.kind != PT_ZERO) tail.src += pos - start;
    t->p[j].end = pos;
    insert_at(t, j + 1, tail);
    return j + 1;
}

/* 1 if piece k continues piece k - 1 from the same source. */
static int continues(const pt *t, size_t k)
{
    const pt_piece *a = &t->p[k - 1], *b = &t->p[k];
    return a->kind == b->kind &&
           (a->kind == PT_ZERO || a->src + (a->end - pt_start(t, k - 1)) == b->src);
}

/* Merge piece i with its neighbours where they continue the same source. */
static void coalesce(pt *t, size_t i)
{
    for (size_t k = i + 2; k-- > i && k > 0;) {
        if (k >= t->n || !continues(t, k)) continue;
        t->p[k - 1].end = t->p[k].end;
        memmove(t->p + k, t->p + k + 1, (t->n - k - 1) * sizeof *t->p);
        t->n--;
    }
}

static void extend_zero(pt *t, uint64_t size)
{
    uint64_t cur = pt_size(t);
    if (size <= cur) return;
    insert_at(t, t->n, (pt_piece){.end = size, .src = 0, .kind = PT_ZERO});
    coalesce(t, t->n - 1);
}

int pt_write(pt *t, uint64_t off, uint64_t len, uint32_t kind, uint64_t src)
{
    if (!len) return 0;
    if (reserve(t, 3)) return -ENOMEM;
    extend_zero(t, off);
    uint64_t end = off + len, size = pt_size(t);
    size_t i = split(t, off), k = end < size ? split(t, end) : t->n;
    /* Pieces [i, k) are covered: replace them with the new one. */
    pt_piece pc = {.end = end, .src = src, .kind = kind};
    if (k > i) {
        t->p[i] = pc;
        memmove(t->p + i + 1, t->p + k, (t->n - k) * sizeof *t->p);
        t->n -= k - i - 1;
    } else {
        insert_at(t, i, pc);
    }
    coalesce(t, i);
    return 0;
}

int pt_insert(pt *t, uint64_t off, uint64_t len, uint32_t kind, uint64_t src)
{
    if (!len) return 0;
    if (reserve(t, 3)) return -ENOMEM;
    extend_zero(t, off);
    size_t i = split(t, off);
    insert_at(t, i, (pt_piece){.end = off + len, .src = src, .kind = kind});
    for (size_t j = i + 1; j < t->n; j++)
        t->p[j].end += len;
    coalesce(t, i);
    return 0;
}

int pt_truncate(pt *t, uint64_t size)
{
    if (reserve(t, 2)) return -ENOMEM;
    if (size >= pt_size(t))
        extend_zero(t, size);
    else
        t->n = split(t, size);
    return 0;
}
