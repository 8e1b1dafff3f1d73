#include "textshard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../base/err.h"
#include "../base/tok.h"

/* Most tokens a shard's dictionary may hold (docs/FORMAT.md, the shard table). */
#define TEXT_TOKENS_MAX 0x7fffffffu

int textshard_payload(const uint64_t *lens, size_t np, const unsigned char *text, buf *out)
{
    uint64_t sum = 0;
    if (buf_put_varint(out, np)) return -ENOMEM;
    for (size_t i = 0; i < np; i++) {
        if (buf_put_varint(out, lens[i])) return -ENOMEM;
        sum += lens[i];
    }
    return buf_put(out, text, sum) ? -ENOMEM : 0;
}

typedef struct text_sink {
    dict *d;
    gram *g;
} text_sink;

static int intern(void *ctx, const unsigned char *t, size_t n)
{
    text_sink *s = ctx;
    uint32_t id;
    if (dict_intern(s->d, t, n, &id)) return -ENOMEM;
    if (id >= TEXT_TOKENS_MAX) return -E2BIG;
    return vec32_push(&s->g->root, id) ? -ENOMEM : 0;
}

/* The piece lengths of a payload: *np of them in *lens (fresh), the bytes after them at *text.
 * The lengths are read twice (counted, then kept) so a bad count allocates nothing. */
static int read_lengths(const unsigned char *p, size_t n, uint64_t **lens, size_t *np,
                        const unsigned char **text)
{
    rd r = {p, p + n};
    uint64_t count, sum = 0, len;
    if (rd_varint(&r, &count) || !count || count > n)
        return tdc_error(-EBADMSG, "text shard: bad piece count");
    rd body = r;
    for (uint64_t i = 0; i < count; i++) {
        if (rd_varint(&r, &len) || !len || len > n) /* n bounds the sum too: no overflow */
            return tdc_error(-EBADMSG, "text shard: bad length of piece %llu",
                             (unsigned long long)i);
        sum += len;
    }
    if (sum != (uint64_t)(r.end - r.p))
        return tdc_error(-EBADMSG, "text shard: pieces of %llu bytes but %llu follow",
                         (unsigned long long)sum, (unsigned long long)(r.end - r.p));
    if (!(*lens = malloc(count * sizeof **lens))) return -ENOMEM;
    for (uint64_t i = 0; i < count; i++)
        rd_varint(&body, &(*lens)[i]);
    *np = count;
    *text = r.p;
    return 0;
}

int textshard_grammar(const unsigned char *p, size_t n, dict **d, gram *g, vec64 *runs)
{
    uint64_t *lens = NULL;
    size_t np = 0;
    const unsigned char *text;
    int rc = read_lengths(p, n, &lens, &np, &text);
    text_sink s = {.d = rc ? NULL : dict_new(), .g = g};
    if (!rc && !s.d) rc = -ENOMEM;
    /* no rules: rule_start holds the one entry of an empty list */
    if (!rc && vec64_push(&g->rule_start, 0)) rc = -ENOMEM;
    for (size_t i = 0; i < np && !rc; i++) {
        tok_state ts = {.npend = 0};
        uint64_t before = g->root.n;
        rc = tok_feed(&ts, text, lens[i], intern, &s);
        if (!rc) rc = tok_finish(&ts, intern, &s);
        if (!rc && runs && vec64_push(runs, g->root.n - before)) rc = -ENOMEM;
        text += lens[i];
    }
    free(lens);
    if (rc == -E2BIG) rc = tdc_error(-EBADMSG, "text shard: more tokens than a shard may have");
    else if (rc == -ENOMEM) rc = tdc_error(rc, "text shard: out of memory");
    if (!rc) {
        g->ntokens = dict_count(s.d);
        g->nrules = 0;
        *d = s.d;
        return 0;
    }
    dict_free(s.d);
    gram_free(g);
    memset(g, 0, sizeof *g);
    *d = NULL;
    return rc;
}
