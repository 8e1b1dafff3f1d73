/* compact_shards: compaction of an archive kept in shards, at a cost that follows the edit.
 *
 * A shard none of whose files changed is copied as it is stored (arc_shard_ref: read by the
 * writer in pieces, its checksums checked, nothing decoded). A shard some of whose content is gone (files removed
 * or rewritten) keeps that dead content until it is worth rebuilding: once a quarter of its
 * bytes are dead, or at once when it is small (under half the shard size). New content, the
 * kept files of rebuilt shards and, when there is new content, every small shard (under a
 * quarter of the shard size, so that repeated small edits do not leave a trail of tiny
 * shards; not one holding part of a file cut over several) are packed into new shards of about the shard size in path order, each built by
 * compact_build from the old grammar (kept files reuse their rules; with `old` not loaded,
 * from their text read through fn) and coded on its own. A file larger than the shard size
 * that moves is cut as pack cuts it, into shards of its own of about that size, each one
 * part (cut where a token ends), so that reads load a part at a time and no build holds
 * more than a shard's content. A file whose shards are all kept stays where it is. The new
 * shards are built on several workers at once and go to the writer as they are made, in
 * order, so that what a compaction holds is the builds running, whatever the edit's size. */
#ifndef TDC_COMPACT_SHARDS_H
#define TDC_COMPACT_SHARDS_H

#include "../base/mbud.h"
#include "../format/arc.h"
#include "compact.h"

/* The workers compact_shards builds new shards on, a shard each at a time, the calling thread
 * the first: n of them, worker t reading new content through fn with the context at
 * (char *)ctx + t * stride. The first always works; each other takes `each` bytes of the
 * budget `bud` (when not NULL) for each shard it builds, only while the budget has room for
 * them (mbud_try), and waits otherwise. */
typedef struct compact_workers {
    void *ctx;
    size_t stride;
    unsigned n;
    mbud *bud;
    uint64_t each;
    /* Optional: how many leading bytes of new entry `ent` are, unchanged, the leading bytes
     * of old entry *old (0, *old -1: none known). With it, a new file larger than the shard
     * size whose old version was cut into parts keeps the parts it still begins with, each
     * of at least half the shard size and ending where a token still ends, as stored; only
     * the rest is built (an append to a large log builds its last part and the new bytes). */
    uint64_t (*prefix)(void *ctx, uint32_t ent, int64_t *old);
} compact_workers;

/* What building a shard holds, for a shard of `bytes` of content: measured with pack and
 * compaction (the grammar's build, and after it the trial as text). */
#define COMPACT_BUILD_MEM(bytes) ((bytes) * 12 + ((uint64_t)16 << 20))

/* `nw` as for compact_build (entries, src, fn reading new content). Fills every entry's
 * run on-disk style (shard, root_start within it, root_len), the hashes of new content, and
 * *out and *n with the shards in order, each freed by the caller with arc_coded_free and
 * free(*out). With a sink (arc_sink_open), each shard is put into it as soon as it is made
 * and all before it are, so that no more than the shards being built and a few waiting
 * their turn are held, and *out keeps their figures for arc_sink_finish; without, *out holds
 * them whole for arc_write_coded_tmp. The shards are the same whatever the workers. `old`
 * must be an opened archive, loaded or not, and stay open until the shards are written
 * (arc_shard_ref). 0 or a negative errno with a message (the sink is then the caller's to
 * abort). */
int compact_shards(const arc *old, arc *nw, const int64_t *src, compact_read_fn fn,
                   const compact_workers *cw, uint64_t shard_size, int level, arc_sink *sink,
                   compact_stats *st, arc_coded **out, uint32_t *n);

/* The smallest shard size compaction aims at (tadoc pack --shard-size's least). */
#define COMPACT_SHARD_MIN 1024

/* The shard size compaction aims at: `asked` when not 0; for an archive of several shards,
 * the median of its shards' content (what it was cut at: a daemon's compaction keeps the
 * shape `tadoc pack --shard-size` gave, and with it the first byte and the memory a shard
 * needs; out of memory for the median, as for one shard); for one shard, what pack would choose for the archive's content
 * (pack_shard_size), but at least PACK_ONE_SHARD_MAX, so that an archive pack made one
 * shard is compacted as one grammar while it stays that small. */
uint64_t compact_shard_size(const arc *old, uint64_t asked);

/* Whether compaction of `old` goes shard by shard: it has several shards, or one large
 * enough (half of compact_shard_size) that copying it beats compressing it again, or one
 * stored as its text (which one grammar of everything would not keep so). */
int compact_by_shards(const arc *old, uint64_t shard_size);

#endif
