/* dict: the token dictionary. Every distinct token gets a dense id (0, 1, 2, ...) in the
 * order first interned; bytes are stored once (offsets + one blob). Words and separators share
 * the id space; dict_is_word tells them apart by the first byte.
 *
 * A dict is not thread-safe for interning; concurrent read-only lookups (dict_bytes,
 * dict_find) are safe once no thread interns. */
#ifndef TDC_DICT_H
#define TDC_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/buf.h"

typedef struct dict dict;

/* A new, empty dictionary, or NULL when out of memory. */
dict *dict_new(void);
void dict_free(dict *d);

/* Id of token (p, n), adding it if new. n must be at least 1; a grammar's tokens are at most
 * TOK_CAP bytes, but a dict used as a table of strings (the analytics' joined long words and
 * merge keys) may hold longer ones. Returns 0 or -ENOMEM. */
int dict_intern(dict *d, const unsigned char *p, size_t n, uint32_t *id);

/* Add token (p, n), which the caller knows is not in d, as the next id (no lookup: a
 * dictionary read from a layout that says which tokens are new). 0, -ENOMEM or -EOVERFLOW. */
int dict_append(dict *d, const unsigned char *p, size_t n, uint32_t *id);

/* Room for `tokens` more tokens of `bytes` in all, their memory mapped at once (a dictionary
 * whose size is known before it is filled). 0 or -ENOMEM. */
int dict_room(dict *d, size_t tokens, size_t bytes);

/* Give back the room dict_room reserved beyond the tokens added since (for a bound that may be
 * well above the dictionary's size: a text shard reserves its text's), and dict_intern's
 * lookup table (rebuilt if it is needed again). */
void dict_fit(dict *d);

/* Room for `n` tokens in all before the table grows again (a hint: 0 or -ENOMEM). */
int dict_reserve(dict *d, size_t n);

/* Id of token (p, n) if present: 0 and *id set, or -ENOENT. */
int dict_find(const dict *d, const unsigned char *p, size_t n, uint32_t *id);

uint32_t dict_count(const dict *d);

/* Whether some word token is `cap` bytes long. The tokenizer cuts a longer word into pieces
 * of TOK_CAP bytes, so where no word token is TOK_CAP long no word was cut. */
int dict_has_word_of(const dict *d, size_t cap);

/* Total bytes of all tokens. */
uint64_t dict_blob_size(const dict *d);

/* Bytes of token `id` (id < dict_count); the pointer stays valid until the dict is freed
 * or interns again. At least DICT_PAD bytes past any token may be read (not used): a copy of
 * a short token may move a whole vector. */
#define DICT_PAD 16
static inline const unsigned char *dict_bytes(const dict *d, uint32_t id, size_t *len);

/* 1 if token `id` is a word, 0 if a separator. */
static inline int dict_is_word(const dict *d, uint32_t id);

/* Serialize: varint count, varint lengths, then the blob. */
int dict_encode(const dict *d, buf *out);

/* Parse what dict_encode wrote; -EBADMSG (with a message) on malformed input. */
int dict_decode(const unsigned char *p, size_t n, dict **out);

/* The token count at the head of an encoded dictionary, as dict_decode reads and checks it,
 * without decoding the rest: 0, or -EBADMSG (with tdc_error set). */
int dict_encoded_count(const unsigned char *p, size_t n, uint32_t *count);

/* Front coding of an encoded dictionary (what dict_encode wrote), for the archive's
 * front-coded dictionary codec: varint count; per token the varint length of the prefix it
 * shares with the previous token and the varint length of the rest; then the rests of all
 * tokens, in order.
 * Neighbours that share prefixes (tokens sorted within a frequency class, see pack.c) make
 * the text far more compressible than the plain blob. Any dictionary can be front coded;
 * decoding gives back exactly the bytes that were encoded. dict_front_encode: 0, -EBADMSG
 * on a malformed input, -ENOMEM. dict_front_decode appends the dict_encode layout to `out`
 * and refuses (-EBADMSG, with a message) anything that would not come from
 * dict_front_encode or would not decode to exactly `want` bytes, or to a dictionary that
 * dict_decode would refuse. dict_front_load decodes the same straight into a new dictionary
 * (as dict_decode would give), without the dict_encode layout in between. */
int dict_front_encode(const unsigned char *p, size_t n, buf *out);
int dict_front_decode(const unsigned char *p, size_t n, size_t want, buf *out);
int dict_front_load(const unsigned char *p, size_t n, size_t want, dict **out);
/* Each token's kind from a front coding (dict_front_load's input), as dict->word would hold
 * it, without decoding the tokens: a pass over their lengths, so that what needs only the
 * kinds need not wait for the whole dictionary. *out (count bytes, 1 for a word; the caller
 * frees it) and *count on 0; -EBADMSG for lengths dict_front_load would refuse, -ENOMEM. A
 * coding that passes here may still fail dict_front_load (tokens mixing kinds). */
int dict_front_words(const unsigned char *p, size_t n, unsigned char **out, uint32_t *count);

/* Implementation detail exposed for the inline accessor; treat as opaque. */
struct dict {
    vec64 offs; /* count + 1 offsets into blob */
    buf blob;   /* with DICT_PAD bytes of room past its end */
    uint64_t *table; /* open addressing: (hash >> 32) << 32 | (id + 1), 0 = empty; NULL until
                        the first intern/find */
    size_t tcap;
    buf word; /* one byte per token: 1 for a word (kept so hot loops avoid the blob) */
};

static inline int dict_is_word(const dict *d, uint32_t id)
{
    return d->word.p[id];
}

static inline const unsigned char *dict_bytes(const dict *d, uint32_t id, size_t *len)
{
    *len = (size_t)(d->offs.p[id + 1] - d->offs.p[id]);
    return d->blob.p + d->offs.p[id];
}

#endif
