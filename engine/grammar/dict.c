#include "dict.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../base/err.h"
#include "../base/tok.h"

dict *dict_new(void)
{
    dict *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    if (vec64_push(&d->offs, 0)) {
        free(d);
        return NULL;
    }
    return d;
}

void dict_free(dict *d)
{
    if (!d) return;
    vec64_free(&d->offs);
    buf_free(&d->blob);
    buf_free(&d->word);
    free(d->table);
    free(d);
}

uint32_t dict_count(const dict *d)
{
    return (uint32_t)(d->offs.n - 1);
}

int dict_has_word_of(const dict *d, size_t cap)
{
    for (uint32_t id = 0; id < dict_count(d); id++)
        if (dict_is_word(d, id) && d->offs.p[id + 1] - d->offs.p[id] == cap) return 1;
    return 0;
}

uint64_t dict_blob_size(const dict *d)
{
    return d->blob.n;
}

static int eq(const dict *d, uint32_t id, const unsigned char *p, size_t n)
{
    size_t len;
    const unsigned char *q = dict_bytes(d, id, &len);
    return len == n && memcmp(q, p, n) == 0;
}

/* A token's hash: its high half picks the slot and is kept in it, so that a probe compares
 * bytes only on a full 32-bit match and a rehash needs no bytes at all. */
static inline uint64_t fp_of(const unsigned char *p, size_t n)
{
    return XXH3_64bits(p, n) >> 32;
}

/* Slot of a fingerprint at capacity `cap` (a power of two of at most 2^32). */
static inline size_t slot_of(uint64_t fp, size_t cap)
{
    return (size_t)fp & (cap - 1);
}

/* (Re)build the hash table with room for at least `need` entries at load <= 1/2. */
static int rehash(dict *d, size_t need)
{
    size_t cap = 1024;
    while (cap < need * 2)
        cap *= 2;
    uint64_t *t = calloc(cap, sizeof *t);
    if (!t) return -ENOMEM;
    if (d->table) {
        for (size_t i = 0; i < d->tcap; i++) {
            if (!d->table[i]) continue;
            size_t h = slot_of(d->table[i] >> 32, cap);
            while (t[h])
                h = (h + 1) & (cap - 1);
            t[h] = d->table[i];
        }
    } else {
        for (uint32_t id = 0; id < dict_count(d); id++) {
            size_t len;
            const unsigned char *q = dict_bytes(d, id, &len);
            uint64_t fp = fp_of(q, len);
            size_t h = slot_of(fp, cap);
            while (t[h])
                h = (h + 1) & (cap - 1);
            t[h] = fp << 32 | (id + 1);
        }
    }
    uint64_t *old = d->table;
    /* atomic: what a span occupies (arc_mem) is counted while its dict's finders may build
     * its table */
    __atomic_store_n(&d->tcap, cap, __ATOMIC_RELAXED);
    __atomic_store_n(&d->table, t, __ATOMIC_RELEASE); /* tcap first: see dict_find */
    free(old);
    return 0;
}

/* Slot holding (p, n) of fingerprint fp, or the empty slot where it would go. */
static size_t probe(const dict *d, uint64_t fp, const unsigned char *p, size_t n)
{
    size_t h = slot_of(fp, d->tcap);
    for (uint64_t e; (e = d->table[h]); h = (h + 1) & (d->tcap - 1))
        if (e >> 32 == fp && eq(d, (uint32_t)e - 1, p, n)) break;
    return h;
}

int dict_reserve(dict *d, size_t n)
{
    /* n + 1 entries at load 1/2 is what dict_intern grows at: room for n, no more (a table
     * twice that size is twice the cache misses of every lookup) */
    return d->table && n * 2 + 2 <= d->tcap ? 0 : rehash(d, n + 1);
}

int dict_find(const dict *d, const unsigned char *p, size_t n, uint32_t *id)
{
    if (!__atomic_load_n(&d->table, __ATOMIC_ACQUIRE)) {
        /* Read-only lookups on a decoded dict build the table once, lazily; concurrent
         * finders (daemon threads) wait for the one that builds it. */
        static pthread_mutex_t lazy = PTHREAD_MUTEX_INITIALIZER;
        int rc = 0;
        pthread_mutex_lock(&lazy);
        if (!d->table) rc = rehash((dict *)d, dict_count(d) + 1);
        pthread_mutex_unlock(&lazy);
        if (rc) return -ENOMEM;
    }
    size_t h = probe(d, fp_of(p, n), p, n);
    if (!d->table[h]) return -ENOENT;
    *id = (uint32_t)d->table[h] - 1;
    return 0;
}

/* Add token (p, n) as the next id, without a lookup. */
static int push_token(dict *d, const unsigned char *p, size_t n, uint32_t *id)
{
    if (dict_count(d) >= 0x7fffffffu) return tdc_error(-EOVERFLOW, "too many distinct tokens");
    unsigned char w = (unsigned char)tok_is_word_byte(p[0]);
    if (buf_reserve(&d->word, 1) || buf_reserve(&d->blob, n + DICT_PAD) ||
        buf_put(&d->blob, p, n) || vec64_push(&d->offs, d->blob.n))
        return -ENOMEM;
    d->word.p[d->word.n++] = w;
    *id = dict_count(d) - 1;
    return 0;
}

int dict_intern(dict *d, const unsigned char *p, size_t n, uint32_t *id)
{
    if (!d->table || (size_t)dict_count(d) * 2 + 2 > d->tcap) {
        if (rehash(d, (size_t)dict_count(d) * 2 + 2)) return -ENOMEM;
    }
    uint64_t fp = fp_of(p, n);
    size_t h = probe(d, fp, p, n);
    if (d->table[h]) {
        *id = (uint32_t)d->table[h] - 1;
        return 0;
    }
    int rc = push_token(d, p, n, id);
    if (!rc) d->table[h] = fp << 32 | (*id + 1);
    return rc;
}

int dict_room(dict *d, size_t tokens, size_t bytes)
{
    if (vec64_reserve(&d->offs, tokens) || buf_reserve(&d->word, tokens) ||
        buf_reserve(&d->blob, bytes + DICT_PAD))
        return -ENOMEM;
    mem_populate(d->offs.p + d->offs.n, tokens * sizeof *d->offs.p);
    mem_populate(d->word.p + d->word.n, tokens);
    mem_populate(d->blob.p + d->blob.n, bytes + DICT_PAD);
    return 0;
}

void dict_fit(dict *d)
{
    free(d->table);
    d->table = NULL;
    d->tcap = 0;
    size_t want = d->blob.n + DICT_PAD;
    if (d->blob.cap <= want) return;
    unsigned char *q = realloc(d->blob.p, want); /* a shrink: in place, or the old kept */
    if (q) {
        d->blob.p = q;
        d->blob.cap = want;
    }
}

int dict_append(dict *d, const unsigned char *p, size_t n, uint32_t *id)
{
    free(d->table); /* rebuilt from the tokens when a lookup needs it */
    d->table = NULL;
    d->tcap = 0;
    return push_token(d, p, n, id);
}

int dict_encode(const dict *d, buf *out)
{
    uint32_t n = dict_count(d);
    if (buf_put_varint(out, n)) return -ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        if (buf_put_varint(out, d->offs.p[i + 1] - d->offs.p[i])) return -ENOMEM;
    return buf_put(out, d->blob.p, d->blob.n);
}

int dict_encoded_count(const unsigned char *p, size_t n, uint32_t *count)
{
    rd r = {p, p + n};
    uint64_t c;
    if (rd_varint(&r, &c) || c > 0x7fffffffu || c > n)
        return tdc_error(-EBADMSG, "dictionary: bad token count");
    *count = (uint32_t)c;
    return 0;
}

int dict_decode(const unsigned char *p, size_t n, dict **out)
{
    rd r = {p, p + n};
    uint64_t count;
    uint32_t c32;
    dict *d = NULL;
    if (dict_encoded_count(p, n, &c32)) return -EBADMSG;
    rd_varint(&r, &count); /* read and checked just above */
    if (!(d = dict_new()) || vec64_reserve(&d->offs, count)) goto nomem;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len;
        if (rd_varint(&r, &len) || len == 0 || len > TOK_CAP) {
            dict_free(d);
            return tdc_error(-EBADMSG, "dictionary: bad length of token %llu",
                             (unsigned long long)i);
        }
        d->offs.p[d->offs.n] = d->offs.p[d->offs.n - 1] + len;
        d->offs.n++;
    }
    uint64_t blob = d->offs.p[count];
    if ((uint64_t)(r.end - r.p) != blob) {
        dict_free(d);
        return tdc_error(-EBADMSG, "dictionary: blob is %llu bytes, lengths add up to %llu",
                         (unsigned long long)(r.end - r.p), (unsigned long long)blob);
    }
    if (buf_reserve(&d->blob, blob + DICT_PAD) || buf_put(&d->blob, r.p, blob) ||
        buf_reserve(&d->word, count ? count : 1))
        goto nomem;
    /* A token must be all word bytes or all separator bytes, else extraction and analytics
     * would disagree with the tokenizer. (A table: this visits every byte of the blob.) */
    unsigned char isword[256];
    for (int c = 0; c < 256; c++)
        isword[c] = (unsigned char)tok_is_word_byte((unsigned char)c);
    for (uint64_t i = 0; i < count; i++) {
        size_t len;
        const unsigned char *q = dict_bytes(d, (uint32_t)i, &len);
        unsigned char w = isword[q[0]];
        d->word.p[d->word.n++] = w;
        for (size_t k = 1; k < len; k++)
            if (isword[q[k]] != w) {
                dict_free(d);
                return tdc_error(-EBADMSG, "dictionary: token %llu mixes word and separator bytes",
                                 (unsigned long long)i);
            }
    }
    *out = d;
    return 0;
nomem:
    dict_free(d);
    return tdc_error(-ENOMEM, "dictionary: out of memory");
}

int dict_front_encode(const unsigned char *p, size_t n, buf *out)
{
    rd r = {p, p + n}, lens;
    uint64_t count, len, prev_len = 0, total = 0;
    if (rd_varint(&r, &count) || count > n || buf_put_varint(out, count)) return -EBADMSG;
    lens = r;
    for (uint64_t i = 0; i < count; i++) /* find where the blob starts */
        if (rd_varint(&r, &len) || (total += len) > n) return -EBADMSG;
    const unsigned char *blob = r.p, *prev = NULL, *tok = blob;
    if ((uint64_t)(r.end - blob) != total) return -EBADMSG;
    /* The lengths first, then the new bytes of every token: each stream is more regular
     * alone, which zstd turns into a smaller section than the two interleaved. */
    for (int pass = 0; pass < 2; pass++) {
        rd l = lens;
        prev = NULL, prev_len = 0, tok = blob;
        for (uint64_t i = 0; i < count; i++) {
            rd_varint(&l, &len); /* read once above */
            uint64_t pre = 0;
            while (pre < len && pre < prev_len && tok[pre] == prev[pre])
                pre++;
            int rc = pass ? buf_put(out, tok + pre, len - pre)
                          : buf_put_varint(out, pre) || buf_put_varint(out, len - pre);
            if (rc) return -ENOMEM;
            prev = tok;
            prev_len = len;
            tok += len;
        }
    }
    return 0;
}

static size_t varint_len(uint64_t x)
{
    size_t k = 1;
    while (x >= 0x80)
        x >>= 7, k++;
    return k;
}

/* Where the blob starts in dict_encode's layout of `count` tokens of `total` bytes that
 * take `want` bytes in all: the header is the count and one varint per token. */
static int front_header_len(uint64_t count, uint64_t total, size_t want, size_t *hdr)
{
    if (total > want) return -1;
    *hdr = want - total;
    return *hdr < 1 + count ? -1 : 0;
}

/* Check the lengths of a front coding (read from *r) and add up the new bytes (*rest_total)
 * and the tokens' bytes (*total). */
static int front_check_lens(rd *r, uint64_t count, uint64_t *rest_total, uint64_t *total)
{
    uint64_t pre, rest, prev_len = 0;
    *rest_total = *total = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (rd_varint(r, &pre) || rd_varint(r, &rest) || pre > prev_len || rest > TOK_CAP ||
            pre + rest == 0 || pre + rest > TOK_CAP)
            return tdc_error(-EBADMSG, "dictionary: bad front coding of token %llu",
                             (unsigned long long)i);
        prev_len = pre + rest;
        *rest_total += rest;
        *total += prev_len;
    }
    return 0;
}

/* The parts of a front coding of n bytes at p: its token count, its lengths (checked, for a
 * second pass), where the rests start, and the tokens' total length. 0 or -EBADMSG. */
static int front_open(const unsigned char *p, size_t n, uint64_t *count, rd *lens,
                      const unsigned char **text, uint64_t *total)
{
    rd r = {p, p + n};
    uint64_t rest_total;
    if (rd_varint(&r, count) || *count > n || *count > 0x7fffffffu)
        return tdc_error(-EBADMSG, "dictionary: bad token count in the front coding");
    *lens = r;
    int rc = front_check_lens(&r, *count, &rest_total, total);
    if (rc) return rc;
    *text = r.p;
    if ((uint64_t)(r.end - r.p) != rest_total)
        return tdc_error(-EBADMSG, "dictionary: front coding does not match the declared size");
    return 0;
}

int dict_front_load(const unsigned char *p, size_t n, size_t want, dict **out)
{
    *out = NULL;
    uint64_t count, pre, rest, total;
    rd lens;
    const unsigned char *text;
    int rc = front_open(p, n, &count, &lens, &text, &total);
    if (rc) return rc;
    size_t hdr, lens_len = varint_len(count);
    if (front_header_len(count, total, want, &hdr))
        return tdc_error(-EBADMSG, "dictionary: front coding does not match the declared size");
    dict *d = dict_new();
    if (!d || vec64_reserve(&d->offs, count) || buf_reserve(&d->blob, total + DICT_PAD) ||
        buf_reserve(&d->word, count ? count : 1)) {
        dict_free(d);
        return tdc_error(-ENOMEM, "dictionary: out of memory");
    }
    unsigned char isword[256];
    for (int c = 0; c < 256; c++)
        isword[c] = (unsigned char)tok_is_word_byte((unsigned char)c);
    mem_populate(d->offs.p + 1, count * sizeof *d->offs.p);
    mem_populate(d->blob.p, total);
    mem_populate(d->word.p, count);
    unsigned char *blob = d->blob.p, *prev = NULL, *word = d->word.p;
    uint64_t at = 0, *offs = d->offs.p + 1;
    for (uint64_t i = 0; i < count; i++) {
        rd_varint(&lens, &pre); /* all checked by front_check_lens */
        rd_varint(&lens, &rest);
        lens_len += varint_len(pre + rest);
        if (pre) memcpy(blob + at, prev, pre); /* prev ends where this token starts */
        memcpy(blob + at + pre, text, rest);
        /* A token is all word bytes or all separator bytes, else extraction and analytics
         * would disagree with the tokenizer. A shared prefix comes from the previous token,
         * checked already and of the same kind (the same first byte): only the rest is new. */
        unsigned char w = isword[blob[at]];
        for (uint64_t k = 0; k < rest; k++)
            if (isword[text[k]] != w) {
                dict_free(d);
                return tdc_error(-EBADMSG, "dictionary: token %llu mixes word and separator bytes",
                                 (unsigned long long)i);
            }
        text += rest;
        prev = blob + at;
        at += pre + rest;
        offs[i] = at;
        word[i] = w;
    }
    if (lens_len != hdr) {
        dict_free(d);
        return tdc_error(-EBADMSG, "dictionary: front coding does not match the declared size");
    }
    d->offs.n = count + 1;
    d->word.n = count;
    d->blob.n = total;
    *out = d;
    return 0;
}

int dict_front_words(const unsigned char *p, size_t n, unsigned char **out, uint32_t *count)
{
    *out = NULL;
    uint64_t cnt, pre, rest, total;
    rd lens;
    const unsigned char *text;
    int rc = front_open(p, n, &cnt, &lens, &text, &total);
    if (rc) return rc;
    unsigned char *word = malloc(cnt ? cnt : 1);
    if (!word) return tdc_error(-ENOMEM, "dictionary: out of memory");
    /* A token's kind is its first byte's: the previous token's when it shares a prefix with
     * it (front_check_lens allows none to the first), else its own text's. */
    unsigned char w = 0;
    for (uint64_t i = 0; i < cnt; i++) {
        rd_varint(&lens, &pre); /* all checked by front_check_lens */
        rd_varint(&lens, &rest);
        if (!pre) w = (unsigned char)tok_is_word_byte(*text);
        text += rest;
        word[i] = w;
    }
    *out = word;
    *count = (uint32_t)cnt;
    return 0;
}

int dict_front_decode(const unsigned char *p, size_t n, size_t want, buf *out)
{
    dict *d;
    int rc = dict_front_load(p, n, want, &d);
    if (!rc && dict_encode(d, out)) rc = tdc_error(-ENOMEM, "dictionary: out of memory");
    dict_free(d);
    return rc;
}
