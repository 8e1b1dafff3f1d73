/* ana: text analytics computed on the grammar, never on expanded text (DESIGN.md section 5).
 * Paths in outputs are relative to the scope's directory (a file scope: its parent) and
 * written with C escapes for tab, newline and backslash.
 *
 * A scope is a range of file-table entries [first, end): the whole archive, one directory's
 * subtree (ana_subtree_end) or one file; entries other than regular files are ignored.
 * Words are maximal runs of word bytes, exactly as `tr -cs 'A-Za-z0-9_\200-\377' '\n'` cuts
 * them. Output is text, one record per line, byte order (LC_ALL=C) for ties.
 *
 * Functions only read the archive; several may run at once on one archive. */
#ifndef TDC_ANA_H
#define TDC_ANA_H

#include <stdint.h>

#include "arc.h"
#include "buf.h"

/* One past the last entry of the subtree rooted at entry `dir` (entries in path order put a
 * directory's descendants right after it). For a file, ent + 1. */
uint32_t ana_subtree_end(const arc *a, uint32_t dir);

/* The regular files of [first, end), appended to out in byte order of their paths. */
int ana_scope_files(const arc *a, uint32_t first, uint32_t end, vec32 *out);

/* Bytes to strip from archive paths so they are relative to the scope starting at `first`:
 * its directory, or for a single file its parent directory. */
size_t ana_scope_prefix(const arc *a, uint32_t first);

/* Word count: "count<TAB>word\n" lines, count descending, then word. Appends to out. */
int ana_wordcount(const arc *a, uint32_t first, uint32_t end, buf *out);

/* Word count records for per-token counts computed elsewhere (the GPU backend): tok has one
 * count per token id, separators 0; the output is what ana_wordcount prints for them. */
int ana_wordcount_counts(const arc *a, const uint64_t *tok, buf *out);

/* Sort: "word<TAB>count\n" lines by word. Appends to out. */
int ana_sort(const arc *a, uint32_t first, uint32_t end, buf *out);

/* Inverted index: "word<TAB>path<TAB>path...\n", words by word, paths by path. */
int ana_invindex(const arc *a, uint32_t first, uint32_t end, buf *out);

/* Term vector: "path<TAB>count<TAB>word\n" for every word of every file: files by path, then
 * count descending, then word. */
int ana_termvector(const arc *a, uint32_t first, uint32_t end, buf *out);

/* Sequence count: "count<TAB>w1 w2 w3\n" for every run of three consecutive words inside one
 * file (separators between them do not matter), count descending, then sequence. */
int ana_seqcount(const arc *a, uint32_t first, uint32_t end, buf *out);

/* Ranked inverted index: "w1 w2 w3<TAB>path:count<TAB>...\n", sequences by sequence, files
 * by count descending, then path. */
int ana_rankedinvindex(const arc *a, uint32_t first, uint32_t end, buf *out);

#endif
