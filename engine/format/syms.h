/* syms: the raw bytes of a shard's rules and root sections, in either of two layouts.
 *
 * Plain layout (codecs raw and zstd): symbols as they are in memory, as four byte planes.
 *
 * Kind layout (codecs kind and zstd-kind): a token is a word or a separator and the tokens of
 * a file alternate between the two, so the last token of one symbol nearly always tells the
 * kind of the first token of the next. Each symbol (token or rule) belongs to the kind of its
 * first token; the symbols of a kind are numbered among themselves, most used first, and a
 * symbol is written as its number within the kind the previous symbol calls for. Where the
 * alternation breaks (a run cut at TOK_CAP bytes, the root's first symbol, a file that starts
 * with a separator) an escape, the number one past that kind's last, says the next number is
 * of the other kind. Each kind holds about half the symbols and tokens and rules are numbered
 * together by use, so the numbers are smaller and more alike than the in-memory ids. The
 * numbers read in each kind go to a stream of their own (separator-kind numbers, mostly
 * small, as varints; word-kind numbers as byte planes), so each stream's statistics stay
 * apart under zstd. The rules section carries what a decoder needs: each rule's first and last
 * kind and which numbers of each kind are tokens and which rules. docs/FORMAT.md specifies both
 * layouts byte by byte. */
#ifndef TDC_SYMS_H
#define TDC_SYMS_H

#include <stddef.h>

#include "../base/buf.h"
#include "../grammar/dict.h"
#include "../grammar/gram.h"

/* The kinds of a shard's symbols and their numbers within their kind: built from a grammar
 * (syms_enc_rules) or read from a rules section (syms_dec_rules), then used for the root. */
typedef struct syms_kinds syms_kinds;

void syms_kinds_free(syms_kinds *k);

/* Append the rules section of g over dictionary d. kinded 0: plain layout (*k set to NULL);
 * 1: kind layout, with the kinds to code the root with in *k (caller frees). 0, -ENOMEM, or
 * (kind layout) -EBADMSG for a symbol that is neither a token nor a rule, or a cycle. */
int syms_enc_rules(const gram *g, const dict *d, int kinded, buf *out, syms_kinds **k);

/* Append the root section of g: plain layout when k is NULL, else the kind layout. */
int syms_enc_root(const gram *g, const syms_kinds *k, buf *out);

/* Decode a rules section of n bytes into g (g->ntokens set beforehand), ordering the rules
 * (gram_topo). words NULL: plain layout; else kind layout over a dictionary whose tokens'
 * kinds words gives (g->ntokens bytes, 1 for a word: dict->word, or dict_front_words's),
 * with the kinds the root needs in *k. As soon as the kinds are read, before the bodies are
 * decoded, known(ctx, *k) is called (when not NULL), so the root can be decoded on another
 * thread meanwhile; *k does not change after that call. The caller frees *k (NULL if never
 * set) whatever the return: 0, -EBADMSG with a message, or -ENOMEM. */
int syms_dec_rules(gram *g, const unsigned char *words, const unsigned char *p, size_t n,
                   syms_kinds **k, void (*known)(void *ctx, const syms_kinds *k), void *ctx);

/* Decode a root section of n bytes into g->root: plain layout when k is NULL, else the kind
 * layout with the kinds of the shard's rules section, its numbers read where they lie in p.
 * 0, -EBADMSG with a message, -ENOMEM. */
int syms_dec_root(gram *g, const syms_kinds *k, const unsigned char *p, size_t n);

#endif
