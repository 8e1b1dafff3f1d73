/* ana_int: what the analytics modules share internally (not a public interface).
 *
 * ana.c       word count and sort, cut long words, the scope helpers
 * ana_docs.c  inverted index, term vector, sequence count, ranked inverted index
 * ana_plan.c  per-grammar preparation (levels, head/tail, word order), the traversal
 *             selector, options, the two-thread helpers
 * ana_sort.c  words in byte order (radix sort), word count order and output */
#ifndef TDC_ANA_INT_H
#define TDC_ANA_INT_H

#include <pthread.h>
#include <time.h>

#include "ana.h"
#include "analytics.h" /* enum ana_id: the `kind` of the selector */
#include "../format/arc.h"
#include "../base/tok.h"

/* Called for each word of a file in order: a single-token word as its token id (w = NULL),
 * or a word longer than TOK_CAP, cut into several tokens, as tok = UINT32_MAX and its joined
 * bytes. A non-zero return stops the walk and is passed back. */
typedef int (*ana_word_fn)(void *ctx, uint32_t tok, const unsigned char *w, size_t n);

/* Walk every token of root run [start, start + len) depth-first and report its words,
 * joining cut ones: forward, or with `back` from the end to the start (each word still given
 * with its bytes in the text's order). fn's non-zero return stops the walk and is returned. */
int ana_run_words(const arc *a, uint64_t start, uint64_t len, int back, ana_word_fn fn,
                  void *ctx);

/* ana_run_words forward over regular entry e's run. For the few files that hold cut words;
 * others are counted on the grammar. */
int ana_file_words(const arc *a, uint32_t e, ana_word_fn fn, void *ctx);

/* ---- per-grammar preparation ---- */

/* Computed once per grammar:
 * - always: every token's class (word; a TOK_CAP-byte word, a piece of a cut long word),
 * - with ANA_PREP_LEVELS, in one children-first pass over g->topo: the topological level of
 *   every rule, its height (0 for a rule of tokens only, else one more than its highest
 *   child). A rule's children all sit on lower levels, so the rules of one level are
 *   independent: bottom-up passes go level 0, 1, ...; top-down passes go from the highest
 *   level down; either can split a level between threads. With them, the rules' cut flags (the
 *   expansion holds a cut piece) and the words in each rule's expansion (for the selector).
 *   Computed whenever the dictionary has a cut piece (the cut flags are needed then); without
 *   levels every rule's class is 0,
 * - with ANA_PREP_HT (implies levels), head and tail buffers (G-TADOC IV-D): each rule's
 *   first two and last two words, so a parent counts the 3-word sequences that cross its
 *   children's boundaries without descending,
 * - with ANA_PREP_ORDER, every word token of the dictionary in byte order of its bytes (word
 *   count and sort then print without sorting words); on two threads it is sorted by the
 *   second thread while the first computes the levels.
 * The context (ana_ctx) keeps its last grammar's preparation for the next call (a daemon answering analytics on
 * one archive computes it once): it is found again by a 128-bit XXH3 fingerprint of the
 * grammar and the dictionary's word flags and lengths (a hash pass over the grammar, far cheaper than recomputing), so an
 * archive freed and another one allocated at the same addresses can never be mistaken for
 * it. It costs 1 byte per symbol, up to 32 more per rule with levels (12 without head/tail),
 * and 4 per word token with the order; a call that needs a part the kept one lacks recomputes
 * it with every part either asked for. A context without ana_opts.cache keeps nothing. Prepared data
 * is read-only and shared by concurrent calls. */
enum { ANA_PREP_LEVELS = 1, ANA_PREP_HT = 2, ANA_PREP_ORDER = 4 };

struct ana_prep_data;

/* Phase times at verbosity 2 (ana_mark): the verbosity and the last mark. */
typedef struct ana_clock {
    int verbose;
    struct timespec wall, cpu;
} ana_clock;

typedef struct ana_prep {
    ana_ctx *ctx; /* the caller's options (NULL: the defaults) */
    ana_clock clock; /* ana_mark's */
    const arc *a;
    const gram *g;
    struct ana_prep_data *data; /* the shared arrays below (released by ana_prep_free) */
    uint64_t *hx;               /* per rule (index 1..nrules): height | cut << 31 | words << 32 */
    uint32_t nlevels;           /* highest height + 1 (0 without levels) */
    uint32_t *lvl_at;           /* nlevels + 1 offsets into lvl */
    uint32_t *lvl;              /* rules 1..nrules by level, level 0 first */
    unsigned char *cls;         /* per symbol (tokens, then rules): ANA_WORD | ANA_CUT */
    uint32_t ncut;              /* cut tokens in the dictionary */
    uint32_t (*ht)[5];          /* per rule: head[2], tail[2], words (capped at 3); ANA_PREP_HT */
    uint32_t *order;            /* the word tokens in byte order; ANA_PREP_ORDER */
    uint32_t norder;
} ana_prep;

/* Prepare `a` with the parts in flags, under c's options; found again in c when it keeps
 * preparations (ana_opts.cache). Starts ana_mark's clock. */
int ana_prep_init(ana_prep *p, ana_ctx *c, const arc *a, int flags);
void ana_prep_free(ana_prep *p);

enum { ANA_WORD = 1, ANA_CUT = 2 };

/* Rule r's height, and the word tokens in its expansion (saturating at UINT32_MAX). */
static inline uint32_t ana_height(const ana_prep *p, uint32_t r)
{
    return (uint32_t)p->hx[r] & 0x7fffffffu;
}
static inline uint32_t ana_ew(const ana_prep *p, uint32_t r)
{
    return (uint32_t)(p->hx[r] >> 32);
}

/* 1 when regular entry e holds a cut long word. */
int ana_file_has_cut(const ana_prep *p, uint32_t e);

/* ---- options and the traversal selector ---- */

typedef struct ana_plan {
    int bottomup;  /* 0: top-down, 1: bottom-up */
    int threads;   /* 1 or 2 */
    int forced;    /* set by ana_opts.traversal rather than chosen */
    double est_td; /* selector's cost estimates (0 when not estimated) */
    double est_bu;
    uint64_t scope_syms; /* root symbols of the scope's files */
    uint32_t nfiles;     /* regular files in the scope */
} ana_plan;

/* Choose the traversal and thread count for analytic `kind` over the files of [first, end)
 * visible in `vis` (see ana.h for the rule and the mask). Never fails: without memory for the
 * estimate it picks top-down. Prints the choice on stderr at verbosity 1 and up (ana_opts.verbose). */
void ana_plan_make(const ana_prep *p, int kind, uint32_t first, uint32_t end,
                   const unsigned char *vis, ana_plan *out);

/* The threads ana_plan_make gives [first, end), and the root symbols and files of its files
 * visible in `vis`. */
int ana_plan_threads(const ana_ctx *c, const arc *a, uint32_t first, uint32_t end,
                     const unsigned char *vis, uint64_t *syms, uint32_t *nfiles);

/* The files of [first, end) visible in `vis` that hold no cut word, in entry order. */
int ana_plain_files(const ana_prep *p, uint32_t first, uint32_t end, const unsigned char *vis,
                    vec32 *out);

/* Split files[0..n) into `parts` contiguous ranges of about equal root symbols:
 * range t is [at[t], at[t + 1]). */
void ana_split_files(const arc *a, const uint32_t *files, size_t n, int parts, size_t *at);

/* Mark (need[r] = 1) every rule reachable from the root runs of files[0..n): the rules a
 * scope uses. need is calloc'ed nrules + 1 bytes. */
int ana_mark_reach(const ana_prep *p, const uint32_t *files, size_t n, unsigned char **need);

/* At verbosity 2 (ana_opts.verbose): print on stderr the wall seconds, and this thread's CPU
 * seconds (what counts on a busy machine), since k's previous mark (or since `what` is NULL,
 * which starts the clock; ana_prep_init starts its prep's). */
void ana_mark(ana_clock *k, const char *what);

/* ---- two threads ---- */

/* A team of threads running one task: each calls ana_sync between levels. */
typedef struct ana_team {
    int tid, n;
    pthread_barrier_t *bar;
} ana_team;

typedef int (*ana_task_fn)(void *ctx, const ana_team *t);

/* Run fn on `n` threads (1 or 2; the caller is thread 0) and return the first non-zero
 * result. When a second thread cannot start, fn runs once with n = 1. */
int ana_par(int n, ana_task_fn fn, void *ctx);
void ana_sync(const ana_team *t);

/* The part [*lo, *hi) of [0, n) that thread t handles. */
static inline void ana_share(const ana_team *t, size_t n, size_t *lo, size_t *hi)
{
    *lo = n * (size_t)t->tid / (size_t)t->n;
    *hi = n * (size_t)(t->tid + 1) / (size_t)t->n;
}

/* sort_r on `threads` threads: halves sorted in parallel, then merged. The comparators of the
 * analytics are total orders, so the result is the same as sort_r's. */
void ana_psort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *, void *),
               void *ctx, int threads);

/* Print records [0, n) with fn(ctx, lo, hi, out), which appends records [lo, hi) to out:
 * on two threads [0, mid) into out and [mid, n) into a second buffer appended after it, so
 * mid must start a record group (a line). One thread below 65,536 records. 0 or -ENOMEM. */
typedef int (*ana_print_fn)(void *ctx, size_t lo, size_t hi, buf *out);
int ana_par_print(ana_print_fn fn, void *ctx, size_t n, size_t mid, buf *out, int threads);

/* ---- chunked arenas: allocations that never move (tables read by the other thread) ---- */

typedef struct ana_arena {
    unsigned char **chunks;
    size_t nchunks, capchunks;
    size_t used, size; /* bytes used and size of the last chunk */
    uint64_t total;    /* bytes handed out */
} ana_arena;

/* `bytes` (a multiple of 8) of 8-byte aligned memory, or NULL. */
void *ana_arena_alloc(ana_arena *ar, size_t bytes);
void ana_arena_free(ana_arena *ar);

/* ---- traversal building blocks ---- */

/* Top-down weights of files[0..n) (plain files): w[r] (calloc'ed nrules + 1 by the caller)
 * += occurrences of r in their root runs; with `down`, then pushed down, parents first
 * (g->topo backwards; no levels needed), so w[r] is r's occurrences in the files' expansion.
 * Two threads take half the files each, the second into arrays of its own (nrules + ntokens
 * 8-byte counts more), added in at the end. With tok (ntokens long), word
 * tokens are counted too: the root runs' and, with `down`, every rule's own words times its
 * weight (word count, Algorithm 1). 0 or -ENOMEM. */
int ana_weights(const ana_prep *p, const uint32_t *files, size_t n, uint64_t *w, uint64_t *tok,
                int down, int threads);

/* Bottom-up word tables (Algorithm 2): for every rule with need[r], the words of its expansion
 * with their counts (unordered), built level by level from its children's tables. */
typedef struct ana_wpair {
    uint32_t w, n;
} ana_wpair;

typedef struct ana_wtab {
    const ana_wpair **tab; /* per rule; NULL when empty or not needed */
    uint32_t *n;           /* entries of tab[r] */
    ana_arena ar[2];       /* one per thread */
} ana_wtab;

int ana_wtab_build(ana_wtab *wt, const ana_prep *p, const unsigned char *need, int threads);
void ana_wtab_free(ana_wtab *wt);

/* ---- output (ana_docs.c) ---- */

/* A number in decimal. 0 or -ENOMEM. */
int ana_put_num(buf *b, uint64_t v);

/* How many digits ana_put_num writes for v. */
size_t ana_num_len(uint64_t v);

/* ---- words in byte order, word count output (ana_sort.c) ---- */

typedef struct ana_wrec {
    uint64_t key; /* the first 8 bytes, big-endian, zero-padded (ana_prefix_key) */
    const unsigned char *w;
    uint32_t n, id; /* length; id: the caller's */
} ana_wrec;

uint64_t ana_prefix_key(const unsigned char *w, size_t n);

/* Byte order of two words (a prefix first). */
int ana_wrec_cmp(const ana_wrec *a, const ana_wrec *b);

/* Sort r[0..n), distinct words without NUL bytes, into byte order, on `threads` threads.
 * 0 or -ENOMEM (r unchanged then). Past 32 words the keys are left those of later bytes. */
int ana_sort_words(ana_wrec *r, size_t n, int threads);

/* A word and its count, as printed. */
typedef struct ana_crec {
    const unsigned char *w;
    size_t n;
    uint64_t cnt;
} ana_crec;

/* Reorder r[0..n), in byte order of the words, by count descending, ties kept in order (a
 * counting sort for counts below 65,536). 0 or -ENOMEM. */
int ana_by_count(ana_crec *r, size_t n);

/* Append "count<TAB>word\n" (count_first) or "word<TAB>count\n" lines for r[0..n), formatted
 * on `threads` threads straight into their place in out. 0 or -ENOMEM. */
int ana_print_counts(const ana_crec *r, size_t n, int count_first, buf *out, int threads);

#endif
