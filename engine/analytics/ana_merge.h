/* ana_merge: one analytic computed on parts of an archive (its shards, analysed one at a time
 * on CPU threads, and later GPUs or cluster ranks), merged exactly into the output the whole
 * archive gives (docs/DESIGN.md, "Analytics shard by shard").
 *
 * Each part contributes
 * - its output text: what the analytic prints for the scope on that part alone (arc_open_piece:
 *   every file counts only its content in that part), and
 * - an edge for every piece of a file that spans parts: the words at the two ends of the
 *   file's content in that part.
 * The merge sums counts by key (word, sequence, file), takes the union of the files of each
 * word, and adds the three-word sequences that cross a file's cut between parts, from the
 * edges (the parts counted only the sequences inside themselves). Words are never cut between
 * parts (pack cuts a file only where no word continues); where a writer did cut one, the merge
 * says so (-ENOTSUP) and the caller analyses the archive whole.
 *
 * Parts and edges may come in any order, from several threads at once. */
#ifndef TDC_ANA_MERGE_H
#define TDC_ANA_MERGE_H

#include <stdint.h>

#include "../format/arc.h"
#include "../base/buf.h"

/* The words at the ends of one file's content in one part. */
typedef struct ana_edge {
    uint32_t file;  /* its rank among the scope's files (ana_scope_files) */
    uint32_t part;  /* the part's (first) shard: a file's pieces follow in part order */
    uint32_t nw;    /* words in `words` */
    int whole;      /* 1: `words` are all the piece's words (4 or fewer); 0: the first two and
                       the last two of a piece of five or more */
    int word_first; /* the piece's first token is a word */
    int word_last;  /* the piece's last token is a word */
    buf words;      /* the words, each followed by one space */
} ana_edge;

/* Edges as bytes, to send between processes: per edge its file, part and word count (varints),
 * a flags byte (whole, word_first, word_last), the words' length (varint) and the words.
 * ana_edges_decode appends n edges to *e (malloc'ed), refusing (-EBADMSG) what
 * ana_edges_encode would not write. 0 or -ENOMEM. */
int ana_edges_encode(const ana_edge *e, size_t n, buf *out);
int ana_edges_decode(const unsigned char *p, size_t len, ana_edge **e, size_t *n);

typedef struct ana_merge ana_merge;

/* A merge of analytic `kind` (enum ana_id) over the files of entries [first, end) of `a`
 * visible in vis (ana.h); a's file table is all it reads (it needs no grammar). 0 or -ENOMEM. */
int ana_merge_new(int kind, const arc *a, uint32_t first, uint32_t end, const unsigned char *vis,
                  ana_merge **out);
void ana_merge_free(ana_merge *m);

/* Bound the merge's memory by an unlinked file in directory dir, used from the point where it
 * would hold more than `at` bytes: a list merge (invindex, termvector, rankedinvindex) keeps
 * the parts' texts there (each time the parts held would pass `at`, those and the new one
 * merged into one), each with a sparse index of its keys in memory, and reads them
 * back with pread in batches of about an eighth of `at`; a counts merge (wordcount, sort,
 * seqcount) writes its tables out in hash buckets, sums each bucket alone at the end and
 * merges the buckets' sorted outputs.
 * Where the file cannot be made or written before anything went to it, the merge stays in
 * memory. Before any part is added. */
void ana_merge_spill(ana_merge *m, const char *dir, uint64_t at);

/* The smallest pieces a merge that may spill works in, whatever its `at`: the parts the
 * shards' analytics hand it (ana_opts.early_at) and the batches of ranges it reads its file
 * back in. Pieces an eighth of a tiny `at` made their number, and the merge's tables of
 * ranges by parts, grow with the output over `at` (past a GiB for 16 MB of CSV at 4K).
 * Batches of 1 MiB, held about four times over, took the ranked index of Linux's fs/ to
 * 20-22 MiB under a budget of 1 MiB (15 with the fixed overhead); of 256 KiB, 12-15 MiB, and
 * the merge about a third slower. A range the samples cut too wide is split (twice its
 * share of a batch at most, unless one line or key's group is longer). */
#define ANA_MERGE_PART_MIN ((uint64_t)256 << 10)
#define ANA_MERGE_BATCH_MIN ((uint64_t)256 << 10)

/* Bytes the merge has written to its spill file so far (0: it stayed in memory). */
uint64_t ana_merge_spilled(const ana_merge *m);

/* A spilled list merge's batches: how many of their ranges were split where they held more
 * than twice their share of a batch (keys that many parts hold a little of, between two
 * samples), and the most spilled text one batch read back. */
void ana_merge_batches(const ana_merge *m, uint64_t *splits, uint64_t *widest);

/* The scope's files in rank order (ana_scope_files), as the merge holds them. */
const vec32 *ana_merge_files(const ana_merge *m);

/* Add one part's output text, taken over (text is left empty): what the analytic prints for
 * the scope on that part. -EBADMSG when a line is not one the analytic prints, -ENOMEM. Its
 * lines are checked here; for the analytics of counts they are also summed into the merge's
 * tables here (on as many threads as the merge has), and the text is freed. Thread-safe. */
int ana_merge_part(ana_merge *m, buf *text);

/* Add one piece's edge; its words move into the merge (e->words is left empty). */
int ana_merge_edge(ana_merge *m, ana_edge *e);

/* Take the edges added so far out of the merge (into *e, *n; malloc'ed, each edge's words
 * its own): a merge whose output is only a part of the whole, to be merged again with the
 * edges of every part (a cluster rank's share). */
void ana_merge_take_edges(ana_merge *m, ana_edge **e, size_t *n);

/* The merged output, appended to out: byte for byte what the analytic prints for the scope on
 * the whole archive. -ENOTSUP (with a message naming the file) when a file's content is cut
 * inside a word between two parts; -ENOMEM. */
int ana_merge_finish(ana_merge *m, buf *out);

/* Where a merge's output goes, piece after piece in order (ana_merge_finish_to): 0, or an
 * error that stops the merge (a negative errno with a message). */
typedef int (*ana_sink)(void *ctx, const unsigned char *p, size_t n);

/* ana_merge_finish with the output handed to sink in pieces as it is made, so that it is never
 * held whole (a list merge hands on each batch of key ranges). An error found before any
 * output (-ENOTSUP for a word cut between parts) comes before the first piece. */
int ana_merge_finish_to(ana_merge *m, ana_sink sink, void *ctx);

/* An ana_sink appending to the buf ctx. */
int ana_sink_buf(void *ctx, const unsigned char *p, size_t n);

/* ---- a merge spread over processes (tadoc-mpi) ----
 * The analytics whose output is in key order (ana_merge_keyed: sort, invindex, termvector,
 * rankedinvindex; a line's key is its text before the first tab) can be merged by ranges of
 * keys, each range on its own, the outputs of the ranges concatenated in key order: every
 * part is cut at the same keys (ana_merge_lower), range j of every part goes to the merge of
 * range j, which is given every part's edges and its range (ana_merge_range).
 * Those ordered by count (wordcount, seqcount) go in two rounds: the parts' lines are
 * shuffled by key (ana_merge_shuffle), each share merged with every part's edges
 * (ana_merge_share keeps its crossing sequences to its own keys), which sums every key in
 * one place; then the shares' outputs, in output order, are merged by ranges of that order
 * as above (a line's order key being then the whole line, count and key), without edges. */
int ana_merge_keyed(int kind);

/* The counts text t[0, n) (wordcount, sort or seqcount lines) dealt into parts buckets bk by
 * a hash of each line's key. 0, -EBADMSG for a malformed line, -ENOMEM. */
int ana_merge_shuffle(int kind, const unsigned char *t, size_t n, int parts, buf *bk);

/* Make m the merge of share `mine` of ana_merge_shuffle into `parts`: the crossing sequences
 * it makes itself (seqcount) are kept to the keys of that share. */
void ana_merge_share(ana_merge *m, int parts, int mine);

/* The order of order keys: byte order of keys (for termvector, of the raw bytes the escaped
 * paths stand for); for wordcount and seqcount, whose order key is the whole line, count
 * descending, then key. */
int ana_merge_key_cmp(int kind, const unsigned char *a, size_t an, const unsigned char *b,
                      size_t bn);

/* The offset of the first line of text[0, n) (lines in order) whose order key is not below
 * (k, kn); n when none. */
size_t ana_merge_lower(int kind, const unsigned char *text, size_t n, const unsigned char *k,
                       size_t kn);

/* Up to k order keys of the lines of text[0, n), evenly spaced, appended to keys, each
 * followed by a newline: samples for choosing the cuts. 0 or -ENOMEM. */
int ana_merge_sample(int kind, const unsigned char *text, size_t n, size_t k, buf *keys);

/* Make m the merge of the keys in [lo, hi) (NULL: unbounded on that side): the lines it makes
 * itself (the crossing sequences of rankedinvindex) are kept to that range; its parts must
 * hold only keys in it. 0 or -ENOMEM. */
int ana_merge_range(ana_merge *m, const unsigned char *lo, size_t lon, const unsigned char *hi,
                    size_t hin);

#endif
