/* pack: turn a directory tree into an archive.
 *
 * Walks the tree (regular files, directories, symlinks, FIFOs, sockets and devices, hard
 * links of any of them but directories; a type archives cannot hold is skipped with a
 * warning), cuts the files that hold content, in path order, into groups of at most the shard
 * size (a larger file alone, cut into several shards on a token boundary that is not between
 * two words), and packs the groups on worker threads, each group into its own shards: its
 * own dictionary, Sequitur in segments of a bounded size, shaping (shape_grammar) and the
 * coding of its sections (arc_shard_encode). The archive is written atomically once all are
 * done. Memory grows with the shard size times the number of workers, not with the tree. */
#ifndef TDC_PACK_H
#define TDC_PACK_H

#include <stdint.h>

#include "../format/arc.h"

typedef struct pack_opts {
    uint64_t seg_tokens; /* tokens per Sequitur segment (bounds memory); 0 = default */
    int level;           /* zstd level for sections; 0 = default */
    uint64_t shard_size; /* content per shard; 0 = pack_shard_size() of the tree's content */
    unsigned jobs;       /* shards packed at once, one per thread; 0 = one per online CPU */
    /* Switches for the ablation measurements (bench/codecs.sh), off by default: keep every
     * rule, plain frequency order of tokens; `plain`: the ARC_PLAIN_* techniques of the
     * archive's coding to leave out. */
    int keep_rules, freq_order;
    unsigned plain;
    /* Optional progress report, called now and then from any worker (one call at a time). */
    void (*progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void (*warn)(void *ctx, const char *msg);
    void *ctx;
} pack_opts;

typedef struct pack_stats {
    uint64_t files, dirs, links, special, skipped; /* special: FIFOs, sockets, devices */
    uint64_t bytes_in, bytes_out, tokens, dict_tokens, rules, segments, shards;
} pack_stats;

#define PACK_SEG_DEFAULT (24u << 20)
#define PACK_LEVEL_DEFAULT 19

/* The default shard size for a tree of `content` bytes. A tree of up to PACK_ONE_SHARD_MAX is
 * one grammar: cutting it would buy little time and repeat in each shard the tokens the
 * shards share. A larger tree is cut into about PACK_SHARDS_AIM shards, so that a machine of
 * many cores packs them at once, each of PACK_SHARD_MIN to PACK_SHARD_MAX bytes (smaller
 * shards lose ratio, larger ones load slowly). It depends on the content alone, so the same
 * tree packs to the same archive on any machine. */
#define PACK_ONE_SHARD_MAX ((uint64_t)64 << 20)
#define PACK_SHARDS_AIM 32
#define PACK_SHARD_MIN ((uint64_t)8 << 20)
#define PACK_SHARD_MAX ((uint64_t)32 << 20)
uint64_t pack_shard_size(uint64_t content);

/* Pack `dir` into archive `out`. Returns 0 or a negative errno with a message. */
int pack_dir(const char *dir, const char *out, const pack_opts *opts, pack_stats *stats);

#endif
