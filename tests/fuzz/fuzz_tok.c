/* fuzz_tok: the tokenizer. The input is cut into chunks (sizes taken from its first bytes)
 * and fed to tok_feed; the tokens must concatenate back to the input, each be one class of
 * byte and at most TOK_CAP long, and be maximal (a token ends where the class changes, or at
 * TOK_CAP), and chunking must not change them: the stream gives the same tokens as the
 * whole input in one call, and tok_split (the whole input in memory) gives them too. */
#include "fuzz.h"

#include "../../engine/base/tok.h"

typedef struct toks {
    buf bytes;
    vec64 ends;
} toks;

static int emit(void *ctx, const unsigned char *p, size_t n)
{
    toks *t = ctx;
    FUZZ_CHECK(n > 0 && n <= TOK_CAP, "token of %zu bytes", n);
    int w = tok_is_word_byte(p[0]);
    for (size_t i = 1; i < n; i++)
        FUZZ_CHECK(tok_is_word_byte(p[i]) == w, "mixed token at byte %zu", i);
    if (buf_put(&t->bytes, p, n) || vec64_push(&t->ends, t->bytes.n)) abort();
    return 0;
}

/* Stop after `left` tokens: the callback's return must come back from tok_feed. */
typedef struct stopper {
    int left, calls;
} stopper;

static int stop_emit(void *ctx, const unsigned char *p, size_t n)
{
    (void)p, (void)n;
    stopper *s = ctx;
    s->calls++;
    return --s->left <= 0 ? 42 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t ncut = size ? data[0] % 8 : 0;
    size_t hdr = 1 + 2 * ncut;
    if (size < hdr) return 0;
    const unsigned char *in = data + hdr;
    size_t n = size - hdr;
    toks whole = {0}, parts = {0}, split = {0};
    tok_state st = {0};
    FUZZ_CHECK(!tok_feed(&st, in, n, emit, &whole) && !tok_finish(&st, emit, &whole), "rc");
    size_t pos = 0;
    for (size_t k = 0; k <= ncut; k++) {
        size_t len = k < ncut ? (size_t)(data[1 + 2 * k] | data[2 + 2 * k] << 8) : n - pos;
        if (len > n - pos) len = n - pos;
        FUZZ_CHECK(!tok_feed(&st, in + pos, len, emit, &parts), "rc");
        pos += len;
    }
    FUZZ_CHECK(!tok_finish(&st, emit, &parts), "rc");
    FUZZ_CHECK(whole.bytes.n == n && (!n || !memcmp(whole.bytes.p, in, n)), "lossy");
    FUZZ_CHECK(parts.bytes.n == n && (!n || !memcmp(parts.bytes.p, in, n)), "lossy in chunks");
    FUZZ_CHECK(whole.ends.n == parts.ends.n &&
                   (!whole.ends.n ||
                    !memcmp(whole.ends.p, parts.ends.p, whole.ends.n * sizeof *whole.ends.p)),
               "chunking changed the tokens (%zu vs %zu)", whole.ends.n, parts.ends.n);
    /* tok_split over the whole input: the same tokens. */
    FUZZ_CHECK(!tok_split(in, n, emit, &split), "rc");
    FUZZ_CHECK(whole.ends.n == split.ends.n &&
                   (!whole.ends.n ||
                    !memcmp(whole.ends.p, split.ends.p, whole.ends.n * sizeof *whole.ends.p)),
               "tok_split's tokens differ (%zu vs %zu)", split.ends.n, whole.ends.n);
    /* Maximal: adjacent tokens of one class only where the first is TOK_CAP long. */
    for (size_t i = 1; i < whole.ends.n; i++) {
        uint64_t s = i > 1 ? whole.ends.p[i - 2] : 0, e = whole.ends.p[i - 1];
        if (tok_is_word_byte(in[e - 1]) == tok_is_word_byte(in[e]))
            FUZZ_CHECK(e - s == TOK_CAP, "token %zu ends early", i - 1);
    }
    /* An emit that stops is passed back at once. */
    if (whole.ends.n) {
        stopper sp = {(int)(whole.ends.n + 1) / 2, 0};
        tok_state s2 = {0};
        int rc = tok_feed(&s2, in, n, stop_emit, &sp);
        if (!rc) rc = tok_finish(&s2, stop_emit, &sp);
        FUZZ_CHECK(rc == 42 && sp.calls == (int)(whole.ends.n + 1) / 2, "stop not honoured");
        stopper sp2 = {(int)(whole.ends.n + 1) / 2, 0};
        rc = tok_split(in, n, stop_emit, &sp2);
        FUZZ_CHECK(rc == 42 && sp2.calls == sp.calls, "tok_split: stop not honoured");
    }
    buf_free(&whole.bytes);
    buf_free(&parts.bytes);
    buf_free(&split.bytes);
    vec64_free(&whole.ends);
    vec64_free(&parts.ends);
    vec64_free(&split.ends);
    return 0;
}
