#include "tok.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Length of the run of same-class bytes starting at p, at most `max`. */
static size_t run_len(const unsigned char *p, size_t max, int word)
{
    size_t i = 0;
    while (i < max && tok_is_word_byte(p[i]) == word)
        i++;
    return i;
}

int tok_feed(tok_state *st, const void *data, size_t n, tok_emit_fn emit, void *ctx)
{
    const unsigned char *p = data, *end = p + n;
    int rc;
    if (st->npend) {
        /* Extend the held-back token with bytes of the same class. */
        int word = tok_is_word_byte(st->pend[0]);
        size_t room = TOK_CAP - st->npend;
        size_t k = run_len(p, (size_t)(end - p) < room ? (size_t)(end - p) : room, word);
        memcpy(st->pend + st->npend, p, k);
        st->npend += k;
        p += k;
        if (p == end && st->npend < TOK_CAP) return 0; /* still open */
        rc = emit(ctx, st->pend, st->npend);
        st->npend = 0;
        if (rc) return rc;
    }
    if (p == end) return 0;
    /* The last run may go on in the next chunk: what comes before it is whole (tok_split); of
     * the last run, its full TOK_CAP pieces go out and the rest is held back. */
    const unsigned char *last = end - 1;
    int word = tok_is_word_byte(*last);
    while (last > p && tok_is_word_byte(last[-1]) == word)
        last--;
    if ((rc = tok_split(p, (size_t)(last - p), emit, ctx))) return rc;
    for (; end - last >= TOK_CAP; last += TOK_CAP)
        if ((rc = emit(ctx, last, TOK_CAP))) return rc;
    memcpy(st->pend, last, (size_t)(end - last));
    st->npend = (size_t)(end - last);
    return 0;
}

int tok_finish(tok_state *st, tok_emit_fn emit, void *ctx)
{
    if (!st->npend) return 0;
    size_t n = st->npend;
    st->npend = 0;
    return emit(ctx, st->pend, n);
}

/* Bit i set when p[i] is a word byte, for the 64 bytes at p. */
static inline uint64_t word_mask(const unsigned char *p)
{
    uint64_t m = 0;
#ifdef __SSE2__
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
        __m128i f = _mm_or_si128(v, _mm_set1_epi8(0x20)); /* A-Z to a-z; no other byte lands there */
        __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                      _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
        __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(f, _mm_set1_epi8('a' - 1)),
                                      _mm_cmplt_epi8(f, _mm_set1_epi8('z' + 1)));
        __m128i w = _mm_or_si128(_mm_or_si128(digit, alpha), _mm_cmpeq_epi8(v, _mm_set1_epi8('_')));
        /* bytes >= 0x80 are negative as signed: their top bit is the movemask's */
        uint64_t bits = (uint32_t)(_mm_movemask_epi8(w) | _mm_movemask_epi8(v)) & 0xffffu;
        m |= bits << (16 * k);
    }
#else
    for (int i = 0; i < 64; i++)
        m |= (uint64_t)tok_is_word_byte(p[i]) << i;
#endif
    return m;
}

/* The run p[s..e) of one class as tokens of at most TOK_CAP bytes. */
static int emit_run(const unsigned char *p, size_t s, size_t e, tok_emit_fn emit, void *ctx)
{
    int rc = 0;
    for (; !rc && e - s > TOK_CAP; s += TOK_CAP)
        rc = emit(ctx, p + s, TOK_CAP);
    return rc ? rc : emit(ctx, p + s, e - s);
}

int tok_split(const unsigned char *p, size_t n, tok_emit_fn emit, void *ctx)
{
    if (!n) return 0;
    size_t start = 0;
    uint64_t prev = (uint64_t)tok_is_word_byte(p[0]); /* no boundary before the first byte */
    for (size_t base = 0; base < n; base += 64) {
        uint64_t m;
        size_t left = n - base;
        if (left >= 64) {
            m = word_mask(p + base);
        } else {
            unsigned char tail[64] = {0};
            memcpy(tail, p + base, left);
            m = word_mask(tail) & (((uint64_t)1 << left) - 1);
        }
        /* bit j: byte base + j starts a new run */
        uint64_t b = m ^ (m << 1 | prev);
        if (left < 64) b &= ((uint64_t)1 << left) - 1;
        prev = m >> 63;
        while (b) {
            size_t j = base + (size_t)__builtin_ctzll(b);
            b &= b - 1;
            int rc = emit_run(p, start, j, emit, ctx);
            if (rc) return rc;
            start = j;
        }
    }
    return emit_run(p, start, n, emit, ctx);
}
