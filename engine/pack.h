/* pack: turn a directory tree into an archive.
 *
 * Walks the tree (regular files, directories, symlinks, FIFOs, sockets and devices, hard
 * links of any of them but directories; a type archives cannot hold is skipped with a
 * warning), tokenizes every file into one shared dictionary, compresses the token stream with
 * Sequitur in segments of a bounded size (PACK_WORKERS segments are compressed on worker
 * threads while the next is tokenized), and writes the archive atomically. */
#ifndef TDC_PACK_H
#define TDC_PACK_H

#include <stdint.h>

typedef struct pack_opts {
    uint64_t seg_tokens; /* tokens per Sequitur segment (bounds memory); 0 = default */
    int level;           /* zstd level for sections; 0 = default */
    /* Switches for the ablation measurements (bench/codecs.sh), off by default: keep every
     * rule, plain frequency order of tokens, never the front-coded dictionary. */
    int keep_rules, freq_order, plain_dict;
    /* Optional progress report, called from the packing thread now and then. */
    void (*progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void (*warn)(void *ctx, const char *msg);
    void *ctx;
} pack_opts;

typedef struct pack_stats {
    uint64_t files, dirs, links, special, skipped; /* special: FIFOs, sockets, devices */
    uint64_t bytes_in, bytes_out, tokens, dict_tokens, rules, segments;
} pack_stats;

#define PACK_SEG_DEFAULT (24u << 20)
#define PACK_WORKERS 2 /* segments compressed at once, each on its own thread */
#define PACK_LEVEL_DEFAULT 19

/* Pack `dir` into archive `out`. Returns 0 or a negative errno with a message. */
int pack_dir(const char *dir, const char *out, const pack_opts *opts, pack_stats *stats);

#endif
