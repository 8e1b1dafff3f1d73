#include "textshard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ztrial.h"
#include "../base/err.h"
#include "../base/tok.h"

/* Most tokens a shard's dictionary may hold (docs/FORMAT.md, the shard table). */
#define TEXT_TOKENS_MAX 0x7fffffffu

/* Tokens of at most SHORT_MAX bytes, most of the tokens of bytes that do not compress, have no
 * id in the payload: the reader finds them in a table indexed by their bytes. */
#define SHORT_MAX 2
#define SHORT_SLOTS (256 + 65536)

static inline size_t short_slot(const unsigned char *t, size_t n)
{
    return n == 1 ? t[0] : 256 + ((size_t)t[0] << 8 | t[1]);
}

/* Tokenize each piece alone (tok_split), handing every token to emit; with runs, each
 * piece's number of root symbols in g appended to it. */
static int tokenize(const uint64_t *lens, size_t np, const unsigned char *text, tok_emit_fn emit,
                    void *ctx, vec64 *runs, const gram *g)
{
    int rc = 0;
    for (size_t i = 0; i < np && !rc; i++) {
        uint64_t before = g ? g->root.n : 0;
        rc = tok_split(text, lens[i], emit, ctx);
        if (!rc && runs && vec64_push(runs, g->root.n - before)) rc = -ENOMEM;
        text += lens[i];
    }
    return rc;
}

static int count_token(void *ctx, const unsigned char *p, size_t n)
{
    (void)p;
    (void)n;
    ++*(uint64_t *)ctx;
    return 0;
}

uint64_t textshard_run(const unsigned char *piece, size_t n)
{
    uint64_t k = 0;
    tok_split(piece, n, count_token, &k);
    return k;
}

typedef struct enc {
    dict *d;
    buf *refs;
    vec64 last; /* per token id: 1 + its last position among the long tokens, 0 if short */
    uint64_t pos; /* long tokens so far */
} enc;

static int enc_token(void *ctx, const unsigned char *t, size_t n)
{
    enc *e = ctx;
    uint32_t id;
    int rc = dict_intern(e->d, t, n, &id);
    if (rc || n <= SHORT_MAX) return rc;
    while (e->last.n <= id) /* ids are given to short tokens too */
        if (vec64_push(&e->last, 0)) return -ENOMEM;
    uint64_t ref = e->last.p[id] ? e->pos + 1 - e->last.p[id] : 0;
    e->last.p[id] = ++e->pos;
    return buf_put_varint(e->refs, ref) ? -ENOMEM : 0;
}

/* The zstd level of the quick pass that judges a bare payload, and what it must save. */
#define BARE_LEVEL 1
#define BARE_SAVES(bare, full) ((bare) <= (full) - (full) / 10)

int textshard_encode(const uint64_t *lens, size_t np, const unsigned char *text, int bare,
                     buf *out, int *is_bare)
{
    buf ids = {0};
    enc e = {.d = dict_new(), .refs = &ids};
    uint64_t sum = 0;
    size_t at = out->n;
    int rc = e.d && !buf_put_varint(out, np) ? 0 : -ENOMEM;
    for (size_t i = 0; i < np && !rc; i++) {
        rc = buf_put_varint(out, lens[i]) ? -ENOMEM : 0;
        sum += lens[i];
    }
    if (!rc && bare != 2) rc = tokenize(lens, np, text, enc_token, &e, NULL, NULL);
    if (!rc && buf_put(out, text, sum)) rc = -ENOMEM;
    if (!rc && bare == 1) { /* bare unless the references cost less than a tenth */
        size_t zb = ztrial_size(NULL, out->p + at, out->n - at, BARE_LEVEL, 0);
        if (!rc && buf_put(out, ids.p, ids.n)) rc = -ENOMEM;
        size_t zf = rc ? 0 : ztrial_size(NULL, out->p + at, out->n - at, BARE_LEVEL, 0);
        bare = zb && zf && BARE_SAVES(zb, zf);
        if (bare) out->n -= ids.n;
    } else if (!rc && !bare && buf_put(out, ids.p, ids.n)) {
        rc = -ENOMEM;
    }
    *is_bare = !rc && bare;
    dict_free(e.d);
    buf_free(&ids);
    vec64_free(&e.last);
    return rc == -ENOMEM ? tdc_error(rc, "text shard: out of memory") : rc;
}

/* A bare shard's tokens of up to 8 bytes, the most of a text's, are looked up first in a
 * small table that their bytes fill exactly (no comparison with the dictionary's bytes), the
 * frequent ones staying in the processor's cache where the dictionary's hash table does not. */
#define NEAR_BITS 14
typedef struct near {
    uint64_t bytes; /* the token, zero-padded */
    uint32_t len;   /* 0: empty */
    uint32_t id;
} near;

/* The n (1 to 8) bytes at t as a number, little-endian, zero-padded: one load where 8 bytes are
 * readable there (before end), which spares a copy through memory that the load after it
 * would wait for. */
static inline uint64_t near_bytes(const unsigned char *t, size_t n, const unsigned char *end)
{
    if (t + 8 <= end) return le64(t) & ~0ULL >> (64 - 8 * n);
    uint64_t b = 0;
    for (size_t i = 0; i < n; i++)
        b |= (uint64_t)t[i] << 8 * i;
    return b;
}

typedef struct dec {
    int bare;                 /* no references: every token looked up by its bytes */
    near *near;               /* bare: NEAR_BITS-indexed */
    const unsigned char *end; /* of the pieces' bytes */
    dict *d;
    gram *g;
    uint32_t *shortid;
    rd ids;
    vec32 longs; /* the id of each long token so far */
} dec;

/* Internal failures of dec_token, made messages by textshard_grammar. */
#define BAD_ID (-EPROTO)
#define TOO_MANY (-E2BIG)

static int dec_token(void *ctx, const unsigned char *t, size_t n)
{
    dec *s = ctx;
    uint32_t id, *slot = n <= SHORT_MAX ? &s->shortid[short_slot(t, n)] : NULL;
    if (s->bare) { /* short tokens by their slot after their first time, as below */
        if (slot && *slot) return vec32_push(&s->g->root, *slot - 1) ? -ENOMEM : 0;
        near *e = NULL;
        uint64_t b = 0;
        if (!slot && n <= 8) {
            b = near_bytes(t, n, s->end);
            e = &s->near[((b ^ n) * 0x9e3779b97f4a7c15ULL) >> (64 - NEAR_BITS)];
            if (e->len == n && e->bytes == b) return vec32_push(&s->g->root, e->id) ? -ENOMEM : 0;
        }
        int rc = dict_count(s->d) >= TEXT_TOKENS_MAX ? TOO_MANY : dict_intern(s->d, t, n, &id);
        if (rc) return rc == -EOVERFLOW ? TOO_MANY : rc;
        if (slot) *slot = id + 1;
        if (e) *e = (near){b, (uint32_t)n, id};
        return vec32_push(&s->g->root, id) ? -ENOMEM : 0;
    }
    uint64_t r = 0;
    if (!slot && rd_varint(&s->ids, &r)) return BAD_ID;
    if (slot ? !*slot : !r) { /* new */
        int rc = dict_append(s->d, t, n, &id);
        if (rc) return rc == -EOVERFLOW ? TOO_MANY : rc;
        if (slot) *slot = id + 1;
    } else if (slot) {
        id = *slot - 1;
    } else { /* a long token seen r long tokens back: the same bytes */
        size_t len;
        if (r > s->longs.n) return BAD_ID;
        id = s->longs.p[s->longs.n - r];
        const unsigned char *q = dict_bytes(s->d, id, &len);
        if (len != n || memcmp(q, t, n)) return BAD_ID;
    }
    if (id >= TEXT_TOKENS_MAX) return TOO_MANY;
    if (!slot && vec32_push(&s->longs, id)) return -ENOMEM;
    return vec32_push(&s->g->root, id) ? -ENOMEM : 0;
}

/* The piece lengths of a payload: *np of them in *lens (fresh), the bytes after them at
 * *text, the ids after those. The lengths are read twice (checked, then kept) so a bad count
 * allocates nothing. */
static int read_lengths(const unsigned char *p, size_t n, uint64_t **lens, size_t *np,
                        const unsigned char **text, rd *ids)
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
    if (sum > (uint64_t)(r.end - r.p))
        return tdc_error(-EBADMSG, "text shard: pieces of %llu bytes but %llu follow",
                         (unsigned long long)sum, (unsigned long long)(r.end - r.p));
    if (!(*lens = malloc(count * sizeof **lens))) return -ENOMEM;
    for (uint64_t i = 0; i < count; i++)
        rd_varint(&body, &(*lens)[i]);
    *np = count;
    *text = r.p;
    *ids = (rd){r.p + sum, r.end};
    return 0;
}

int textshard_head(const unsigned char *p, size_t avail, size_t *len)
{
    rd r = {p, p + avail};
    uint64_t count, l;
    if (rd_varint(&r, &count) || count > avail) return 1;
    for (uint64_t i = 0; i < count; i++)
        if (rd_varint(&r, &l)) return 1;
    *len = (size_t)(r.p - p);
    return 0;
}

int textshard_pieces(const unsigned char *p, size_t n, uint64_t **lens, size_t *np,
                     const unsigned char **text)
{
    rd ids;
    return read_lengths(p, n, lens, np, text, &ids);
}

int textshard_grammar(const unsigned char *p, size_t n, int bare, uint64_t root_syms,
                      uint64_t ntokens, dict **d, gram *g, vec64 *runs)
{
    uint64_t *lens = NULL;
    size_t np = 0;
    const unsigned char *text = p;
    dec s = {.g = g, .bare = bare};
    int rc = read_lengths(p, n, &lens, &np, &text, &s.ids);
    if (!rc && (!(s.d = dict_new()) || !(s.shortid = calloc(SHORT_SLOTS, sizeof *s.shortid)) ||
                (bare && !(s.near = calloc((size_t)1 << NEAR_BITS, sizeof *s.near)))))
        rc = -ENOMEM;
    /* no rules: rule_start holds the one entry of an empty list */
    if (!rc && vec64_push(&g->rule_start, 0)) rc = -ENOMEM;
    /* The root and the dictionary's ids at the sizes the shard table gives (no more than a
     * token a byte of the text, whatever it says): growing them would copy them and fault
     * their pages in several times over. So would the dictionary's bytes: they get the
     * text's size, a bound (most of a text that does not compress is new tokens), and give
     * back what is left once the tokens are in. */
    uint64_t bytes = (uint64_t)(s.ids.p - text);
    root_syms = root_syms < bytes ? root_syms : bytes;
    ntokens = ntokens < root_syms ? ntokens : root_syms;
    if (!rc && (vec32_reserve(&g->root, (size_t)root_syms) ||
                dict_room(s.d, (size_t)ntokens, (size_t)bytes) ||
                (bare && dict_reserve(s.d, (size_t)ntokens))))
        rc = -ENOMEM;
    if (!rc) mem_populate(g->root.p, (size_t)root_syms * sizeof *g->root.p);
    s.end = s.ids.p;
    if (!rc) rc = tokenize(lens, np, text, dec_token, &s, runs, g);
    if (!rc && s.ids.p != s.ids.end) rc = BAD_ID;
    if (!rc) rc = gram_topo(g);
    if (!rc) dict_fit(s.d);
    free(lens);
    free(s.shortid);
    free(s.near);
    vec32_free(&s.longs);
    if (rc == BAD_ID && bare)
        rc = tdc_error(-EBADMSG, "text shard: bytes after the pieces");
    else if (rc == BAD_ID)
        rc = tdc_error(-EBADMSG, "text shard: token references missing, left over or to other bytes");
    else if (rc == TOO_MANY)
        rc = tdc_error(-EBADMSG, "text shard: more tokens than a shard may have");
    else if (rc == -ENOMEM)
        rc = tdc_error(rc, "text shard: out of memory");
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
