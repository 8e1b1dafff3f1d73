/* idx: random access into an archive's files without expanding them.
 *
 * Built once per opened archive: the expanded byte length of every rule (children first, so
 * one pass), each file's byte offset within the root's expansion, and for every body longer
 * than IDX_SAMPLE symbols the prefix offset of every IDX_SAMPLE-th symbol, so a descent scans
 * at most IDX_SAMPLE symbols per level. extract costs O(depth * IDX_SAMPLE + length).
 *
 * An idx borrows its archive (which must outlive it) and is read-only after idx_build: any
 * number of threads may extract concurrently, each with its own cursor. idx_build_base and
 * idx_build_flat split the build so that reads can start before the cache of short rules
 * exists: it is published atomically, and reads use it from then on. */
#ifndef TDC_IDX_H
#define TDC_IDX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../format/arc.h"

#define IDX_SAMPLE 16

typedef struct idx idx;

/* Build the index; checks that every file's run expands to exactly its recorded size
 * (-EBADMSG naming the file if not; files in damaged shards, arc_entry.damaged, excepted).
 * Uses IDX_CACHE_DEFAULT bytes of expansion cache. */
int idx_build(const arc *a, idx **out);

#define IDX_CACHE_DEFAULT ((uint64_t)256 << 20)

/* As idx_build, with up to `cache_bytes` spent on the expanded bytes of short rules: every
 * rule whose expansion is at most L bytes is kept flat, with L the largest length (up to 4096)
 * that fits the budget, so reads copy such a rule in one go instead of descending into it. */
int idx_build_cached(const arc *a, uint64_t cache_bytes, idx **out);
void idx_free(idx *x);

/* idx_build without the cache: reads descend every rule until idx_build_flat adds it. */
int idx_build_base(const arc *a, idx **out);

/* Build the cache of idx_build_cached and publish it; reads may run meanwhile. One thread at a
 * time; a call after a build that published a cache does nothing. Returns 0, -ENOMEM, or
 * -ECANCELED when *cancel (if given) became nonzero. */
int idx_build_flat(idx *x, uint64_t cache_bytes, const int *cancel);

/* The archive the index was built on. */
const arc *idx_arc(const idx *x);

/* Bytes regular entry ent's run spells: its size, or for a piece (arc_open_piece) the size
 * of its part in that shard; 0 for a hard link that does not hold its inode's content. */
uint64_t idx_run_bytes(const idx *x, uint32_t ent);

/* Expanded length of rule r (0 = root). */
uint64_t idx_rule_len(const idx *x, uint32_t r);

/* Longest root-to-token path, counting the root (computed at the first call; 0 if out of
 * memory). Thread-safe. */
uint32_t idx_depth(const idx *x);

/* Longest rule expansion kept flat (0 if none). */
uint32_t idx_flat_max(const idx *x);

/* Bytes the index itself occupies. */
uint64_t idx_mem(const idx *x);

/* A position inside one file. A cursor continues where the previous read stopped, so
 * sequential reads do not descend from the root again. One thread at a time per cursor. */
typedef struct idx_frame {
    const uint32_t *body; /* symbols of the rule being walked */
    uint64_t n, i;        /* its length and the current symbol */
} idx_frame;

typedef struct idx_cursor {
    uint32_t ent;
    uint64_t pos;    /* file offset of the next byte */
    uint32_t tokoff; /* bytes of the current token already emitted */
    uint32_t depth;  /* frames in use; frame 0 is the root */
    uint32_t cap;
    idx_frame *f;
} idx_cursor;

/* Initialise an empty cursor (no allocation). */
void idx_cursor_init(idx_cursor *c);
void idx_cursor_free(idx_cursor *c);

/* Read up to n bytes of entry `ent` at `off` into dst, reusing the cursor when it already
 * stands at (ent, off). Returns the byte count (0 at or past EOF), or -EINVAL for an entry
 * that is not a regular file, -EBADMSG for a file in a damaged shard (arc_entry_damaged), or
 * -ENOMEM. */
ssize_t idx_read(const idx *x, idx_cursor *c, uint32_t ent, uint64_t off, void *dst, size_t n);

/* One-shot read with a temporary cursor. */
ssize_t idx_extract(const idx *x, uint32_t ent, uint64_t off, void *dst, size_t n);

/* Check the content of every regular file that holds its own (the first name of each
 * inode): its bytes, extracted from the grammar, must have the entry's size and hash.
 * `only` (optional: NULL checks every file) holds a byte per entry; a file whose byte is 0
 * is skipped. `on_bad` (optional) hears of each file that does not agree, and of each file
 * in a damaged shard (counted, not read); the check goes on past it. *files and *bytes
 * (optional) receive what was checked. 0 when every file agrees; -EBADMSG with a message
 * naming the first bad file and the count; -ENOMEM. */
int idx_check_content(const idx *x, const unsigned char *only,
                      void (*on_bad)(void *ctx, uint32_t ent), void *ctx, uint64_t *files,
                      uint64_t *bytes);

/* idx_check_spans' callbacks (set by the caller) and findings (set by the check). */
typedef struct idx_span_check {
    /* Optional: each file that does not agree or lies in a damaged shard, as entry `ent` of
     * the span `s` that holds it (its path and damage are there); the check goes on past
     * it. Without it, the first bad file ends the check. */
    void (*on_bad)(void *ctx, const arc *s, uint32_t ent);
    /* Optional: each damaged shard, once, with why. */
    void (*on_damage)(void *ctx, uint32_t k, const char *why);
    void *ctx;
    uint64_t files, bytes; /* checked */
    uint64_t bad;          /* files on_bad heard of */
    uint32_t damaged;      /* damaged shards found */
    int long_words;        /* a decoded shard's dictionary holds a word token of TOK_CAP bytes */
    unsigned char *loaded; /* the check's own: per shard, decoded yet */
} idx_span_check;

/* idx_check_content in bounded memory, for `meta` (an archive opened by arc_open_meta and not
 * loaded): each file is read back from the shards that hold it, loaded alone with an index
 * of their own (arc_open_span, whose index also checks every file's size), one span at a
 * time: the shards of the next file not yet checked, in entry order, checking with it every
 * other file that lies inside them, so a shard is decoded about twice at most; a file cut
 * over shards of its own (arc_entry_parts) a shard at a time, its parts hashed in order
 * (arc_open_part). `only` as for
 * idx_check_content (NULL: every file, and then shards that hold no file's content are
 * decoded too). A damaged shard of several costs only its files. 0 when every file agrees;
 * -EBADMSG (after on_bad and on_damage heard of each finding, or at the first one without
 * on_bad), -ENOMEM or a read error. */
int idx_check_spans(const arc *meta, const unsigned char *only, idx_span_check *st);

/* Distinct rules the data of regular entry `ent` uses, and the file's share of the grammar:
 * its root run plus, for every rule it uses, the rule's body weighted by the fraction of the
 * rule's occurrences that fall in this file. Shares of all files add up to 1. The first call
 * computes every rule's total occurrences once (8 + 4 bytes per rule, kept). 0, -EINVAL for a
 * non-file, -EBADMSG for a file in a damaged shard, or -ENOMEM. Thread-safe. */
int idx_file_footprint(const idx *x, uint32_t ent, uint64_t *rules, double *share);

#endif
