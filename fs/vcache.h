/* vcache: texts of virtual files already computed, so callers who see the same files share
 * the work. A text is named by its scope directory, its kind (an analytic, or a
 * `.search` word), the archive generation it was computed from and the key of the visible set
 * (fs_vis_key). Only views of the archive itself are kept (a generation changes whenever the
 * archive is replaced); snapshots of pending changes are not, so a chmod, chown or rename
 * through the mount, which makes the scope's view a snapshot until the next compaction, is
 * never answered from before it. Texts are shared by reference (vtext), not copied. Bounded:
 * texts in memory to `mem` bytes, spilled texts to VCACHE_DISK bytes of their files; the
 * least recently used texts go first. */
#ifndef TDC_FS_VCACHE_H
#define TDC_FS_VCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "vtext.h"

#define VCACHE_SLOTS 32
#define VCACHE_BYTES ((uint64_t)64 << 20)  /* the default bound of texts in memory */
#define VCACHE_DISK ((uint64_t)4 << 30)    /* the bound of spilled texts kept */

typedef struct vcache_key {
    uint64_t dir, gen;
    uint32_t kind;    /* the virtual file's kind; the .search directory's for a word */
    const char *word; /* the .search word, or NULL */
    uint64_t vis[2];  /* fs_vis_key */
} vcache_key;

typedef struct vcache {
    pthread_mutex_t lock; /* PTHREAD_MUTEX_INITIALIZER or pthread_mutex_init */
    uint64_t mem;         /* the bound of texts in memory (set before use; 0: VCACHE_BYTES) */
    struct vcache_slot {
        vcache_key k; /* k.word owned */
        vtext *text;  /* a reference */
        uint64_t used;
    } slot[VCACHE_SLOTS];
    uint64_t tick;
    uint64_t bytes, disk; /* of the texts kept, in memory and spilled */
} vcache;

/* The text kept under k, with a reference for the caller (vtext_put), or NULL. */
vtext *vcache_get(vcache *c, const vcache_key *k);

/* Keep a reference to text under k (nothing when k.gen is 0, or the text is larger than a
 * quarter of its bound). 0 or -ENOMEM (then nothing is kept, which is harmless). */
int vcache_put(vcache *c, const vcache_key *k, vtext *text);

/* What c holds, as "N texts; B bytes in memory, bound M; D bytes spilled", into v (n bytes). */
void vcache_describe(vcache *c, char *v, size_t n);

/* Drop every text (the lock stays usable). */
void vcache_clear(vcache *c);

#endif
