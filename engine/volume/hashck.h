/* hashck: the content-hash check of a file read in order. The bytes read from offset 0 on are
 * hashed (XXH3-64, the archive's content hash), and when they reach the file's size the hash
 * must equal the archived one, so damage the section checksums missed is never passed on
 * silently. A read that does not continue where the last one ended stops the check (a reader
 * that seeks is not checked). Used by tadoc cat and the daemon's reads of unchanged files. */
#ifndef TDC_HASHCK_H
#define TDC_HASHCK_H

#include <stddef.h>
#include <stdint.h>

typedef struct hashck {
    void *st;            /* the XXH3 state; NULL once the check is over (or never started) */
    uint64_t want, size; /* the archived hash and the file's size */
    uint64_t done;       /* bytes hashed so far: [0, done) */
} hashck;

/* Start checking a file of `size` bytes whose content hash is `want`. Without memory for the
 * state the file is simply not checked. */
void hashck_init(hashck *h, uint64_t want, uint64_t size);

/* The `n` bytes at `off` were read: 0, or 1 when they complete the file and its hash differs
 * from the archived one (the check is then over). */
int hashck_feed(hashck *h, uint64_t off, const void *p, size_t n);

void hashck_free(hashck *h);

#endif
