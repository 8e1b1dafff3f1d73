/* walk: one reader's way through a grammar to bytes of a file, as each lane of the extract
 * kernel (extract.cu) takes it: a descent from the file's root symbols to the byte it starts
 * at, by binary search over prefix offsets (each symbol's expanded bytes summed before it),
 * then a walk token by token. The path from the root is kept in a ring of WALK_MAXD frames so
 * that its size is fixed whatever the grammar's depth; a walk that climbs past the frames the
 * ring kept descends again from the root to the byte it is at (only a walk out of more than
 * WALK_MAXD nested rules does). Pure functions over plain arrays, compiled for the device by
 * nvcc and for the CPU by the tests (tests/unit/test_walk.c). */
#ifndef TDC_WALK_H
#define TDC_WALK_H

#include <stdint.h>

#ifdef __CUDACC__
#define WALK_FN static inline __host__ __device__
#else
#define WALK_FN static inline
#endif

#define WALK_MAXD 64 /* a power of two */

typedef unsigned long long walk_u64; /* the device code's 64-bit type */

/* The grammar as the extract kernel sees it. Rule r (1..) is syms[rule_start[r - 1] ..
 * rule_start[r]); symbols from nt up are rules (symbol nt + r is rule r), the rest tokens,
 * whose bytes are blob[toff[t] .. toff[t + 1]). root_pre and syms_pre are exclusive prefix
 * sums of the symbols' expanded sizes over root and syms; differences of two are exact even
 * if the sums wrapped. */
typedef struct walk_gram {
    const uint32_t *root, *syms;
    const walk_u64 *rule_start, *root_pre, *syms_pre, *toff;
    const unsigned char *blob;
    uint32_t nt;
} walk_gram;

/* The path: frames bot..top valid (depth 0 the root's), each the index of the symbol taken
 * and the end of the body it lies in. */
typedef struct walk_path {
    walk_u64 fi[WALK_MAXD], fe[WALK_MAXD];
    uint32_t top, bot;
} walk_path;

WALK_FN void walk_push(walk_path *w, walk_u64 i, walk_u64 e)
{
    if (++w->top - w->bot == WALK_MAXD) w->bot++; /* the shallowest frame gives way */
    w->fi[w->top % WALK_MAXD] = i;
    w->fe[w->top % WALK_MAXD] = e;
}

/* The last index of [l, h) whose prefix offset (relative to pre[l]) is at most *rem; *rem
 * becomes the offset inside that symbol. */
WALK_FN walk_u64 walk_find(const walk_u64 *pre, walk_u64 l, walk_u64 h, walk_u64 *rem)
{
    walk_u64 base = pre[l];
    while (h - l > 1) {
        walk_u64 mid = l + (h - l) / 2;
        if (pre[mid] - base <= *rem)
            l = mid;
        else
            h = mid;
    }
    *rem -= pre[l] - base;
    return l;
}

/* Descend from the root symbols [rs, re) of a file to its byte `pos`: the token there, with
 * *rem its offset inside that token, and w the path to it. */
WALK_FN uint32_t walk_descend(const walk_gram *g, walk_path *w, walk_u64 rs, walk_u64 re,
                              walk_u64 pos, walk_u64 *rem)
{
    *rem = pos;
    walk_u64 l = walk_find(g->root_pre, rs, re, rem);
    w->top = w->bot = 0;
    w->fi[0] = l;
    w->fe[0] = re;
    uint32_t cur = g->root[l];
    while (cur >= g->nt) {
        uint32_t r = cur - g->nt;
        walk_u64 e = g->rule_start[r];
        l = walk_find(g->syms_pre, g->rule_start[r - 1], e, rem);
        walk_push(w, l, e);
        cur = g->syms[l];
    }
    return cur;
}

/* Bytes [pos, pos + n) of the file whose root symbols are [rs, re) into out; they must lie
 * inside the file. */
WALK_FN void walk_copy(const walk_gram *g, walk_u64 rs, walk_u64 re, walk_u64 pos, uint32_t n,
                       unsigned char *out)
{
    walk_path w;
    walk_u64 rem;
    uint32_t cur = walk_descend(g, &w, rs, re, pos, &rem);
    for (uint32_t p = 0;;) {
        walk_u64 t0 = g->toff[cur] + rem, k = g->toff[cur + 1] - t0;
        if (k > n - p) k = n - p;
        for (walk_u64 i = 0; i < k; i++)
            out[p + i] = g->blob[t0 + i];
        p += (uint32_t)k;
        if (p == n) return;
        /* The next token: up past the bodies that end here, then down first children. */
        while (++w.fi[w.top % WALK_MAXD] == w.fe[w.top % WALK_MAXD] && w.top > w.bot)
            w.top--;
        if (w.fi[w.top % WALK_MAXD] == w.fe[w.top % WALK_MAXD]) { /* climbed past the ring */
            cur = walk_descend(g, &w, rs, re, pos + p, &rem);
            continue;
        }
        walk_u64 i = w.fi[w.top % WALK_MAXD];
        cur = w.top ? g->syms[i] : g->root[i];
        while (cur >= g->nt) {
            walk_u64 b = g->rule_start[cur - g->nt - 1];
            walk_push(&w, b, g->rule_start[cur - g->nt]);
            cur = g->syms[b];
        }
        rem = 0;
    }
}

#endif
