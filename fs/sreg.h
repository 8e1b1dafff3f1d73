/* sreg: the registry of virtual inodes that stand for more than their directory and kind:
 * `.search/WORD` files, and under noopen every virtual file as one caller sees it in one
 * state of the tree, with its text.
 *
 * Hashed by key (directory, kind, word, tag). An entry lives while the kernel holds
 * references to its inode: sreg_ref counts each lookup answered with it, sreg_forget drops
 * what the kernel forgets. An entry with a text lingers after its last reference (the
 * SREG_LINGER most recent ones), so that a lookup of the same key soon after finds the text
 * instead of computing it again: the kernel forgets the inode a path walk's revalidation
 * was answered with whenever it is not the one the name had, then looks the name up again.
 * An inode number is a base plus a slot. Thread-safe: one mutex, held only inside these
 * calls, never while computing a text. */
#ifndef TDC_FS_SREG_H
#define TDC_FS_SREG_H

#include <pthread.h>
#include <stdint.h>

#include "vtext.h"

#define SREG_LINGER 8

typedef struct sreg_key {
    uint64_t dir;     /* the directory whose subtree is analysed or searched */
    uint32_t kind;    /* the virtual file's kind */
    const char *word; /* the .search word, or "" */
    uint64_t tag[4];  /* whose view and of which state (zeros: one inode for everyone) */
} sreg_key;

typedef struct sreg_ent {
    sreg_key k;       /* k.word owned; NULL: a free slot */
    vtext *text;      /* a reference, or NULL (not computed, or computed at open) */
    uint64_t nlookup; /* references the kernel holds */
    /* lingering: its neighbours + 1 in the list of lingering entries, oldest first (0:
     * none); both 0 and not the list's head while referenced */
    uint32_t older, newer;
    uint32_t next; /* the next slot + 1 in its hash chain, or in the free list; 0: none */
} sreg_ent;

typedef struct sreg {
    pthread_mutex_t lock;
    sreg_ent *ents;
    uint32_t n, cap;         /* slots used so far, allocated */
    uint32_t free;           /* the first free slot + 1, 0: none */
    uint32_t live;           /* entries in use */
    uint32_t idle;           /* of them, lingering without references */
    uint32_t oldest, newest; /* the list of lingering entries: slot + 1, 0 when empty */
    uint64_t mem;            /* bytes of the texts held in memory (not spilled) */
    uint32_t *bucket;        /* the first slot + 1 of each hash chain */
    uint32_t nbucket;        /* a power of two */
} sreg;

void sreg_init(sreg *r);
void sreg_free(sreg *r);

/* The slot of key k, added on first use, with one more reference; *text (when not NULL)
 * gets a reference to its text, or NULL. 0 or -ENOMEM. */
int sreg_ref(sreg *r, const sreg_key *k, uint32_t *slot, vtext **text);

/* Give the entry of `slot` its text (a reference is taken) unless it has one. */
void sreg_set_text(sreg *r, uint32_t slot, vtext *text);

/* The bytes of the texts the entries hold in memory (not spilled). */
uint64_t sreg_mem(sreg *r);

/* The directory and kind of `slot`, a copy of its word when `word` is not NULL (the caller
 * frees it), and a reference to its text (or NULL) when `text` is not NULL; 0, or -1 when
 * the slot holds no entry (or the copy fails). */
int sreg_get(sreg *r, uint64_t slot, uint64_t *dir, uint32_t *kind, char **word, vtext **text);

/* Drop n references of `slot`; the entry goes with its last one, or lingers if it has a
 * text. */
void sreg_forget(sreg *r, uint64_t slot, uint64_t n);

#endif
