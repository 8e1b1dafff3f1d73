/* ftcols: the file table's column layout (section codec zstd-cols, docs/FORMAT.md).
 *
 * A file table (version 4 on) is written entry by entry, each entry's fields one after another.
 * Fields of one kind look alike from entry to entry (paths share long prefixes with the path
 * before, owners and modes repeat, a file's run starts where the previous file's ended), but
 * zstd sees them interleaved with fields of other kinds. The column layout moves each kind of
 * field into a stream of its own, paths front coded and several numbers as differences from
 * what the entries before predict, so that zstd models each stream apart. It is a pure
 * transform of the section's bytes: decoding gives back exactly the rows that were encoded,
 * which the file table's reader then parses as always. */
#ifndef TDC_FTCOLS_H
#define TDC_FTCOLS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/buf.h"

/* Append the column layout of the file table rows p[0..n) of archive version `version` (4 or
 * later: version 5 rows end in their times) to out. 0, -EBADMSG when the rows do not parse
 * (with a message), -ENOMEM. */
int ftcols_encode(const unsigned char *p, size_t n, uint32_t version, buf *out);

/* The rows back from a column layout of n bytes, which must come to exactly `want` bytes:
 * *out (the caller frees it) on 0; -EBADMSG with a message for anything ftcols_encode could
 * not have written, -ENOMEM. */
int ftcols_decode(const unsigned char *p, size_t n, uint64_t want, uint32_t version,
                  unsigned char **out);

#endif
