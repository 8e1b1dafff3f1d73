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

#include <signal.h>
#include <stdint.h>

#include "../base/buf.h"
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
    int copies_apart; /* copies of a file packed in their own places, not after the first */
    unsigned plain;
    /* Optional progress report, called now and then from any worker (one call at a time). */
    void (*progress)(void *ctx, uint64_t bytes_done, uint64_t bytes_total);
    void (*warn)(void *ctx, const char *msg);
    void *ctx;
    /* Optional: once *stop is nonzero (a signal handler sets it), the pack fails with
     * -ECANCELED at its next read, leaving nothing under the archive's name. */
    const volatile sig_atomic_t *stop;
} pack_opts;

typedef struct pack_stats {
    uint64_t files, dirs, links, special, skipped; /* special: FIFOs, sockets, devices;
                                                    * dirs: the root too */
    uint64_t changed; /* files that changed while they were read (warned of) */
    uint64_t bytes_in, bytes_out, tokens, dict_tokens, rules, segments, shards;
    uint64_t copies, copy_bytes; /* files packed after a file of the same content */
    uint64_t text_shards; /* shards stored as their text (textshard.h) */
} pack_stats;

#define PACK_SEG_DEFAULT (24u << 20)
#define PACK_LEVEL_DEFAULT 19

/* The default shard size for a tree of `content` bytes. A tree of up to PACK_ONE_SHARD_MAX is
 * one grammar: cutting it would buy little time and repeat in each shard the tokens the
 * shards share. A larger tree is cut into about PACK_SHARDS_AIM shards, so that a machine of
 * many cores packs them at once, each of PACK_SHARD_MIN to PACK_SHARD_MAX bytes (smaller
 * shards lose ratio and slow whole-archive analytics, which merge a part per shard; larger
 * ones load slowly, and a mounted file's first byte waits for its shard: bench/results/
 * shardsize.md). It depends on the content alone, so the same tree packs to the same archive
 * on any machine. */
#define PACK_ONE_SHARD_MAX ((uint64_t)64 << 20)
#define PACK_SHARDS_AIM 32
#define PACK_SHARD_MIN ((uint64_t)8 << 20)
#define PACK_SHARD_MAX ((uint64_t)16 << 20)

/* A file whose first PACK_TEXT_SAMPLE bytes (at least PACK_TEXT_MIN) a quick zstd pass cannot
 * bring under nine tenths of their size is stored as its text (textshard.h): a grammar would
 * spend a dictionary entry and a symbol on each of its short tokens, more than its bytes. */
#define PACK_TEXT_MIN 512
#define PACK_TEXT_SAMPLE ((size_t)64 << 10)

/* Whether a file beginning with p[0..n) is stored as its text; cc: a zstd context to use
 * (NULL: one of its own). */
struct ZSTD_CCtx_s;
int pack_incompressible(struct ZSTD_CCtx_s *cc, const unsigned char *p, size_t n);
uint64_t pack_shard_size(uint64_t content);

/* Pack `dir` into archive `out`: pack_plan, pack_run of every group, pack_write. Returns 0
 * or a negative errno with a message. */
int pack_dir(const char *dir, const char *out, const pack_opts *opts, pack_stats *stats);

/* Packing in steps, for a packer spread over processes (tadoc-mpi): one process walks the
 * tree and plans the groups, the others take the plan it sends (pack_plan_encode), each
 * packs the groups it is dealt and sends the others what they need of its groups
 * (pack_group_encode: shard figures, section sizes and checksums, file runs, sizes and
 * hashes; the sections' bytes go straight into the archive file). */
typedef struct pack_job pack_job;

/* Walk `dir` and cut its content files into groups (the tree's order and the shard size
 * alone decide them, so every process that walks the same tree plans the same groups).
 * `opts` must outlive the job. */
int pack_plan(const char *dir, const pack_opts *opts, pack_job **out);
uint32_t pack_ngroups(const pack_job *j);
uint64_t pack_group_bytes(const pack_job *j, uint32_t g);
/* The walk's result (the entries, in the file table's coding, and the counts) appended to b,
 * 0 or -ENOMEM; and a job planned from it for the same tree at `dir` without walking it: the
 * same groups. -EBADMSG for bytes that are not such a plan, -ENOMEM. */
int pack_plan_encode(const pack_job *j, buf *b);
int pack_plan_decode(const char *dir, const pack_opts *opts, const unsigned char *p, size_t n,
                     pack_job **out);

/* Pack the groups g with take[g] set (NULL: all) on opts->jobs threads. */
int pack_run(pack_job *j, const unsigned char *take);
/* Pack every group, each group's shards written as soon as it and those before it are packed
 * into a temporary file beside `out` (arc_sink), which pack_write(j, out, ...) then
 * completes and commits; so that no more than the groups being packed and a few waiting
 * their turn are held. The file is removed if the pack fails or the job is freed unwritten. */
int pack_run_to(pack_job *j, const char *out);
/* Files this process found changed as it read them (pack_stats.changed) in its pack_run. */
uint64_t pack_changed(const pack_job *j);
/* The error a pack that wrote `out` but found `changed` files changed as it read them ends
 * with, as tar: -EAGAIN, its message set. */
int pack_changed_error(const char *out, uint64_t changed);

/* Group g's coded shards (after pack_run packed it). */
const arc_coded *pack_group_coded(const pack_job *j, uint32_t g, uint32_t *n);

/* Group g's result without its sections' bytes, appended to b; pack_group_decode gives it to
 * a job that did not pack g (its shards then have no data). -ENOMEM, -EBADMSG, -EINVAL. */
int pack_group_encode(const pack_job *j, uint32_t g, buf *b);
int pack_group_decode(pack_job *j, uint32_t g, const unsigned char *p, size_t n);

/* Once every group is packed or decoded: the archive's shards in order (the job's, made on
 * the first call and kept until pack_job_free), every file given its shard and run; group
 * g's shards start at index pack_group_first_shard(g). */
int pack_shards(pack_job *j, const arc_coded **sh, uint32_t *n);
uint32_t pack_group_first_shard(const pack_job *j, uint32_t g);

/* Write the archive: to a new file committed at `out` (every group packed here; after
 * pack_run_to, the file it wrote completed and committed), or into
 * `tmp`, which holds every shard's sections at arc_coded_offset (arc_write_coded_over; the
 * caller commits). *st: what the plan and the groups counted. */
int pack_write(pack_job *j, const char *out, pack_stats *st);
int pack_write_over(pack_job *j, const char *tmp, pack_stats *st);
void pack_job_free(pack_job *j);

#endif
