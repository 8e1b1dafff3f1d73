#include "tok.h"

#include <string.h>

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
    while (p < end) {
        int word = tok_is_word_byte(*p);
        size_t max = (size_t)(end - p) < TOK_CAP ? (size_t)(end - p) : TOK_CAP;
        size_t k = run_len(p, max, word);
        if (p + k == end && k < TOK_CAP) {
            /* The run reaches the end of this chunk: it may continue in the next one. */
            memcpy(st->pend, p, k);
            st->npend = k;
            return 0;
        }
        if ((rc = emit(ctx, p, k))) return rc;
        p += k;
    }
    return 0;
}

int tok_finish(tok_state *st, tok_emit_fn emit, void *ctx)
{
    if (!st->npend) return 0;
    size_t n = st->npend;
    st->npend = 0;
    return emit(ctx, st->pend, n);
}
