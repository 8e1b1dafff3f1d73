/* ana_shards: the analytics computed shard by shard (docs/DESIGN.md, "Analytics shard by
 * shard"): each shard the scope touches is loaded alone (arc_open_piece), analysed with the
 * CPU analytic on one thread, and dropped; worker threads take one shard each, and the
 * shards' results are merged exactly (ana_merge). Memory follows the shards being worked on,
 * not the archive, and the work spreads over every core. Where ana_opts.group_room asks
 * (a GPU's parts), a part is several consecutive shards loaded as one grammar
 * (arc_open_pieces) instead of one shard. */
#ifndef TDC_ANA_SHARDS_H
#define TDC_ANA_SHARDS_H

#include <stdint.h>

#include "ana.h"
#include "ana_merge.h"

/* What computes one part (the analytic of the scope on piece p, arc_open_piece or, for a part
 * of several shards, arc_open_pieces), appended to out, exactly as the CPU analytic would
 * print it; arg is the caller's. Called from the worker threads, several at once. For a part
 * of several shards (p->piece > 1) it may return ANA_PART_SPLIT instead, with out as it was:
 * the part then goes shard by shard. */
#define ANA_PART_SPLIT 1
typedef int (*ana_part_fn)(void *arg, int kind, const arc *p, uint32_t first, uint32_t end,
                           const unsigned char *vis, buf *out);

/* Analytic `kind` (enum ana_id) of the files of entries [first, end) of `meta` visible in vis,
 * appended to out: byte for byte what ana_table[kind].cpu prints on the whole archive loaded.
 * Each shard's part comes from fn(arg, ...), or with fn NULL from the CPU analytic.
 * meta is a version 4 archive opened by arc_open_meta and not loaded (only read). c's
 * traversal and verbosity apply to each shard, and its `shards` (ana_opts) shards are worked
 * on at once (0 or ANA_WHOLE: one per CPU), each on one thread (on up to two, as c says,
 * when there are fewer shards than CPUs). Errors: those of the analytic and of loading a shard; -EBADMSG, with
 * arc_entry_damaged's message, when a visible file of the scope has content in a damaged shard;
 * -ENOTSUP when a file is cut inside a word between shards (the caller then loads the
 * archive whole). */
int ana_by_shard(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                 uint32_t first, uint32_t end, const unsigned char *vis, buf *out);

/* What analysing shard k of meta alone is expected to hold (its grammar, dictionary and the
 * analytic's tables), from the shard table: what ana_by_shard takes of ana_opts.budget. */
uint64_t ana_shard_mem(const arc *meta, uint32_t k);

/* ana_by_shard with the output handed to sink piece by piece as the merge makes it
 * (ana_merge_finish_to), never held whole: for a caller that writes it out. Errors found
 * before the merge's output (a damaged shard, -ENOTSUP) come before the first piece. */
int ana_by_shard_to(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                    uint32_t first, uint32_t end, const unsigned char *vis, ana_sink sink,
                    void *sctx);

/* One share of an analytic split between processes (cluster ranks): the shards a process
 * works on, and the edges it hands on. */
typedef struct ana_subset {
    const unsigned char *take; /* per shard of meta: nonzero for the shards of this share */
    ana_edge *edges;           /* out: the edges of its pieces of files that span shards */
    size_t nedges;
} ana_subset;

/* ana_by_shard_to over the shards of share sh only, its edges returned in sh (free them with
 * ana_subset_free) rather than merged: what goes to sink is then a part of the whole analytic
 * (ana_merge), which the caller merges with the other shares' parts and every share's edges.
 * Damage is checked in this share's shards only. */
int ana_by_shard_subset(ana_ctx *c, ana_part_fn fn, void *arg, int kind, const arc *meta,
                        uint32_t first, uint32_t end, const unsigned char *vis, ana_subset *sh,
                        ana_sink sink, void *sctx);
void ana_subset_free(ana_subset *sh);

/* Deal the shards that the files of [first, end) visible in vis need among n shares, balanced
 * by their content bytes (largest first, each to the share with the fewest bytes so far):
 * owner[k] (meta->nshards of them) becomes the share of shard k, or -1 where no share needs
 * it. The same on every process for the same archive. 0 or -ENOMEM. */
int ana_shards_deal(const arc *meta, uint32_t first, uint32_t end, const unsigned char *vis,
                    int n, int *owner);

#endif
