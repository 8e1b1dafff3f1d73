/* ana: text analytics computed on the grammar, never on expanded text (docs/DESIGN.md,
 * "Analytics"). Paths in outputs are relative to the scope's directory (a file scope: its parent) and
 * written with C escapes for tab, newline and backslash.
 *
 * A scope is a range of file-table entries [first, end): the whole archive, one directory's
 * subtree (ana_subtree_end) or one file; entries other than regular files are ignored.
 * Words are maximal runs of word bytes, exactly as `tr -cs 'A-Za-z0-9_\200-\377' '\n'` cuts
 * them. Output is text, one record per line, byte order (LC_ALL=C) for ties.
 *
 * Functions only read the archive; several may run at once on one archive.
 *
 * Traversals (G-TADOC, ICDE 2021, section IV-B). Each analytic runs either
 * - top-down: rule weights (occurrences in the scope, or in one file for the per-file
 *   analytics) pushed from the root level down the topological levels, then every rule's own
 *   words (or crossing sequences) counted times its weight. The per-file analytics (invindex,
 *   termvector, rankedinvindex) do one such pass per file, over the rules that file uses; or
 * - bottom-up: every rule the scope uses gets a local table (word -> count, or 3-word
 *   sequence -> count) built level by level from its children's tables plus its own words (or
 *   the sequences crossing its children, from their head and tail buffers, IV-D); a file's
 *   result is then its root words plus the tables of the rules in its root run times their
 *   multiplicity (the "level-2" reduction), without descending.
 * Both give the same output, byte for byte.
 *
 * The selector (auto) decides per analytic and scope from grammar statistics, using the cost
 * terms of the paper's complexity analysis (Algorithms 1 and 2):
 * - wordcount, sort, seqcount (one result for the scope): top-down. One weight pass touches
 *   each rule the scope uses once with |body| work; bottom-up touches the same rules and
 *   merges at least one table entry per word or child of each body, then reduces the level-2
 *   tables, so its cost is never lower.
 * - invindex, termvector, rankedinvindex (one result per file): with F(r) an upper bound on
 *   the number of scope files that use rule r (files whose root run holds r, pushed down the
 *   levels: F(child) += F(parent), capped at the file count), and T(r) a bound on the size of
 *   r's table (words in its expansion, or that minus 2 for sequences):
 *     top-down  = sum over used rules of F(r) * (|body(r)| + 2)
 *     bottom-up = sum over used rules of (words of r + sum of T(c) over its children c,
 *                 plus 2 per child for sequences: the ones crossing its boundaries)
 *                 + sum over files of T(c) for each distinct rule c of the file's root run
 *   and bottom-up is chosen when its estimate is below top-down's. Many small files sharing
 *   rules (F large, tables small) go bottom-up; few files, or rules with large expansions,
 *   go top-down. Bottom-up is also ruled out when a rule's expansion holds 2^32 words or more
 *   (tables keep 32-bit counts).
 *
 * Threads: with 2, bottom-up splits each level's rules between two threads (tables are only
 * read by the level above), per-file work splits the files into two ranges of equal root
 * symbols, top-down weight passes split the files likewise, each thread pushing weights
 * through the rules its half uses into arrays of its own, added together at the end,
 * sequence tables are split by hash, and large output sorts sort two halves in parallel and
 * merge. Word count and sort print from a word order of the dictionary (radix-sorted once per
 * grammar and kept) and a counting sort by count, formatted by both threads in place.
 *
 * Options (ana_opts, in the context the caller passes; the tools and the daemon fill them from
 * their options and environment, see tadoc --help): the traversal, topdown, bottomup or auto
 * (the default); threads, 1 or 2 (unset: 2 when the machine has two or more CPUs and the scope
 * has at least 65,536 root symbols, since below that starting a thread does not pay; else 1);
 * verbosity 1 prints each decision and the two estimates on stderr (2 also each phase's time);
 * the cache of the last grammar's levels and head/tail buffers between calls (ana_int.h), on
 * by default. */
#ifndef TDC_ANA_H
#define TDC_ANA_H

#include <stdint.h>

#include "../format/arc.h"
#include "../base/buf.h"
#include "../base/mbud.h"

/* Visibility masks. Every analytic takes `vis`: NULL for every entry, or one byte per entry of
 * the archive (a->nents), non-zero for the entries the caller may see. A regular file whose
 * byte is 0 is left out as if it were not in the scope: no path, word, count or sequence of it
 * reaches the output. The daemon builds one per caller from the files' modes (fs/perm.h); NULL
 * keeps every analytic exactly as it was. The same mask goes to the GPU (gpu_analytic). */
static inline int ana_visible(const unsigned char *vis, uint32_t e)
{
    return !vis || vis[e];
}

/* One past the last entry of the subtree rooted at entry `dir` (entries in path order put a
 * directory's descendants right after it). For a file, ent + 1. */
uint32_t ana_subtree_end(const arc *a, uint32_t dir);

enum ana_traversal { ANA_AUTO = 0, ANA_TOPDOWN = 1, ANA_BOTTOMUP = 2 };

/* The analytics' settings, chosen by the caller (tadoc and tadocfs from their options and
 * environment, see tadoc --help). */
typedef struct ana_opts {
    int traversal; /* ANA_AUTO (the selector), ANA_TOPDOWN or ANA_BOTTOMUP */
    int threads;   /* 1 or 2 (more is taken as 2); 0: the machine and the scope decide */
    int cache;     /* keep the last grammar's preparation between calls */
    int verbose;   /* 0: quiet; 1: each choice and its estimates on stderr; 2: also phase times */
    int shards;    /* archives of several shards: how many shards ana_by_shard analyses at
                      once (0: one per CPU), or ANA_WHOLE to load the archive whole instead */
    mbud *budget;  /* or NULL: the memory budget each shard ana_by_shard loads takes its
                      estimate from first (ana_shard_mem), waiting for room */
    const char *spill_dir; /* or NULL: where ana_by_shard's merge keeps what passes spill_at */
    uint64_t spill_at;     /* bytes the merge holds in memory at most (ana_merge_spill) */
    /* An analytic on a part of a merge (set by ana_by_shard when its merge may spill) hands
     * what it holds to early(early_arg, text) as lines of its output, and goes on from empty,
     * each time that passes early_at bytes: seqcount its table of sequences (lines in no
     * order), invindex, termvector and rankedinvindex the records of the files done so far
     * (lines in the output's order; a file's records are never split, but for the ranked
     * index of a file with more sequences than eight times early_at holds, whose sequences
     * so far go on as a part of their own). The merge sums or unites a key that comes several
     * times. NULL: everything goes into the output. */
    int (*early)(void *arg, buf *text);
    void *early_arg;
    uint64_t early_at;
    /* Parts of several shards: ana_by_shard gathers consecutive shards of the scope into one
     * part, loaded as one grammar (arc_open_pieces) and analysed at once, while the sum of
     * group_need(meta, k) over its shards stays within group_room (a shard needing more is a
     * part alone), in at least group_min parts where the scope has that many shards, and
     * within half the budget, if any. For a GPU: one upload per part rather than per shard,
     * and fewer parts to merge. group_room 0: one shard a part. */
    uint64_t group_room;
    int group_min;
    uint64_t (*group_need)(const arc *meta, uint32_t k);
} ana_opts;

#define ANA_WHOLE (-1)
#define ANA_OPTS_INIT                                                                              \
    {                                                                                              \
        ANA_AUTO, 0, 1, 0, 0, NULL, NULL, 0, NULL, NULL, 0, 0, 0, NULL                             \
    }

/* A context: the options and, when they ask for it, the last grammar's preparation, kept for
 * the next call on the same grammar. Calls may share one context from several threads. Every
 * analytic takes one; NULL runs with ANA_OPTS_INIT's options and keeps nothing. */
typedef struct ana_ctx ana_ctx;

/* A new context with options o (NULL: ANA_OPTS_INIT); NULL when out of memory. */
ana_ctx *ana_ctx_new(const ana_opts *o);
void ana_ctx_free(ana_ctx *c);

/* c's options (ANA_OPTS_INIT's for NULL). */
const ana_opts *ana_ctx_opts(const ana_ctx *c);

/* The threads c asks for, or when it leaves them to the machine, 2 on a machine of two CPUs or
 * more, else 1 (small scopes still run on one thread unless threads were asked for). */
int ana_threads(const ana_ctx *c);

/* The regular files of [first, end) visible in `vis`, appended to out in byte order of their
 * paths. */
int ana_scope_files(const arc *a, uint32_t first, uint32_t end, const unsigned char *vis,
                    vec32 *out);

/* Hard links: analytics count a hard-linked file's content once, under the name that holds
 * it (the first in path order). Where that name is outside [first, end) or hidden by `vis`
 * but another name of the file is visible there, the content counts under the first such name
 * instead, as a pipeline over the files of the scope would count it. ana_orphan_link: 1 when
 * entry e is such a name (one to give the content to, or a later one of the same file).
 * ana_relink: each file's first such name gets the holder's root run in `ents` (a's entry
 * table, or a copy of it for a's reader to keep its own). 0 or -ENOMEM. */
int ana_orphan_link(const arc *a, const unsigned char *vis, uint32_t first, uint32_t end,
                    uint32_t e);
int ana_relink(const arc *a, const unsigned char *vis, uint32_t first, uint32_t end,
               arc_entry *ents);

/* Bytes to strip from archive paths so they are relative to the scope starting at `first`:
 * its directory, or for a single file its parent directory. */
size_t ana_scope_prefix(const arc *a, uint32_t first);

/* Append path p with tab, newline and backslash written as C escapes, as every analytic (and
 * the mount's word search) prints paths. 0 or -ENOMEM. */
int ana_put_path(buf *b, const char *p);

/* Word count: "count<TAB>word\n" lines, count descending, then word. Appends to out. */
int ana_wordcount(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis,
                  buf *out);

/* Word count records for per-token counts computed elsewhere (the GPU backend): tok has one
 * count per token id, separators 0; the output is what ana_wordcount prints for them. */
int ana_wordcount_counts(ana_ctx *c, const arc *a, const uint64_t *tok, buf *out);

/* Sort: "word<TAB>count\n" lines by word. Appends to out. */
int ana_sort(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis,
             buf *out);

/* Inverted index: "word<TAB>path<TAB>path...\n", words by word, paths by path. */
int ana_invindex(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis,
                 buf *out);

/* Term vector: "path<TAB>count<TAB>word\n" for every word of every file: files by path, then
 * count descending, then word. */
int ana_termvector(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis,
                   buf *out);

/* Sequence count: "count<TAB>w1 w2 w3\n" for every run of three consecutive words inside one
 * file (separators between them do not matter), count descending, then sequence. */
int ana_seqcount(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis,
                 buf *out);

/* Ranked inverted index: "w1 w2 w3<TAB>path:count<TAB>...\n", sequences by sequence, files
 * by count descending, then path. */
int ana_rankedinvindex(ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                  const unsigned char *vis,
                       buf *out);

#endif
