/* ana: text analytics computed on the grammar, never on expanded text (DESIGN.md section 5).
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

/* Word count: "count<TAB>word\n" lines, count descending, then word. Appends to out. */
int ana_wordcount(const arc *a, uint32_t first, uint32_t end, buf *out);

/* Sort: "word<TAB>count\n" lines by word. Appends to out. */
int ana_sort(const arc *a, uint32_t first, uint32_t end, buf *out);

#endif
