/* sreg: the registry of `.search/WORD` inodes, which directory and word each one stands for.
 *
 * Hashed by (directory, word). An entry lives while the kernel holds references to its
 * inode: sreg_ref counts each lookup answered with it, sreg_forget drops what the kernel
 * forgets, and the entry goes (its slot reused) when none is left; so the registry is no
 * larger than the kernel's cache of these inodes. An inode number is a base plus a slot.
 * Thread-safe: one mutex, held only inside these calls, never while computing a text. */
#ifndef TDC_FS_SREG_H
#define TDC_FS_SREG_H

#include <pthread.h>
#include <stdint.h>

typedef struct sreg_ent {
    uint64_t dir;     /* the directory whose subtree is searched */
    char *word;       /* NULL: a free slot */
    uint64_t nlookup; /* references the kernel holds */
    uint32_t next;    /* the next slot + 1 in its hash chain, or in the free list; 0: none */
} sreg_ent;

typedef struct sreg {
    pthread_mutex_t lock;
    sreg_ent *ents;
    uint32_t n, cap;  /* slots used so far, allocated */
    uint32_t free;    /* the first free slot + 1, 0: none */
    uint32_t live;    /* entries in use */
    uint32_t *bucket; /* the first slot + 1 of each hash chain */
    uint32_t nbucket; /* a power of two */
} sreg;

void sreg_init(sreg *r);
void sreg_free(sreg *r);

/* The slot of (dir, word), added on first use, with one more reference. 0 or -ENOMEM. */
int sreg_ref(sreg *r, uint64_t dir, const char *word, uint32_t *slot);

/* The directory of `slot`, and a copy of its word when `word` is not NULL (the caller frees
 * it); 0, or -1 when the slot holds no entry (or the copy fails). */
int sreg_get(sreg *r, uint64_t slot, uint64_t *dir, char **word);

/* Drop n references of `slot`; the entry goes with its last one. */
void sreg_forget(sreg *r, uint64_t slot, uint64_t n);

#endif
