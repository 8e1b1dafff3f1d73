/* tok: cut bytes into tokens, losslessly.
 *
 * A word is a maximal run of word bytes (ASCII letters, digits, '_', and every byte >= 0x80);
 * a separator is a maximal run of the other bytes. Runs longer than TOK_CAP bytes are cut
 * into TOK_CAP-byte pieces, so two word tokens are adjacent only where a long word was cut.
 * Concatenating the emitted tokens gives back the input exactly, for any bytes. */
#ifndef TDC_TOK_H
#define TDC_TOK_H

#include <stddef.h>

#define TOK_CAP 1024

/* 1 for a word byte, 0 for a separator byte. */
static inline int tok_is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c >= 0x80;
}

/* 1 when the n bytes are one word (all word bytes, n > 0): a word a query may look for. */
static inline int tok_is_word(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!tok_is_word_byte((unsigned char)w[i])) return 0;
    return n > 0;
}

/* Called once per token; a non-zero return stops tokenizing and is passed back. */
typedef int (*tok_emit_fn)(void *ctx, const unsigned char *p, size_t n);

/* Streaming state: a token may straddle two tok_feed calls. Zero-initialise before use. */
typedef struct tok_state {
    unsigned char pend[TOK_CAP];
    size_t npend;
} tok_state;

/* Tokenize the next `n` bytes of a stream. Tokens that may continue into the next chunk
 * are held back in `st` until tok_feed or tok_finish sees their end. */
int tok_feed(tok_state *st, const void *data, size_t n, tok_emit_fn emit, void *ctx);

/* End of stream: emit the held-back token, if any, and reset `st`. */
int tok_finish(tok_state *st, tok_emit_fn emit, void *ctx);

/* Tokenize a whole stream held in memory, p[0..n): the tokens tok_feed and tok_finish would
 * emit, found 64 bytes at a time from a mask of their classes (no branch per byte, nor one
 * that fails per token: bytes that do not compress make a token every two or three bytes). */
int tok_split(const unsigned char *p, size_t n, tok_emit_fn emit, void *ctx);

#endif
