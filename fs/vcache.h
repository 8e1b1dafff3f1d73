/* vcache: texts of virtual files already computed, so callers who see the same files share
 * the work. A text is named by its scope directory, its kind (an analytic, or a
 * `.search` word), the archive generation it was computed from and the key of the visible set
 * (fs_vis_key). Only views of the archive itself are kept (a generation changes whenever the
 * archive is replaced); snapshots of pending changes are not, so a chmod, chown or rename
 * through the mount, which makes the scope's view a snapshot until the next compaction, is
 * never answered from before it. Bounded: the least recently used texts go first. */
#ifndef TDC_FS_VCACHE_H
#define TDC_FS_VCACHE_H

#include <pthread.h>
#include <stdint.h>

#include "../engine/base/buf.h"

#define VCACHE_SLOTS 32
#define VCACHE_BYTES ((size_t)64 << 20)

typedef struct vcache_key {
    uint64_t dir, gen;
    uint32_t kind;    /* the virtual file's kind; the .search directory's for a word */
    const char *word; /* the .search word, or NULL */
    uint64_t vis[2];  /* fs_vis_key */
} vcache_key;

typedef struct vcache {
    pthread_mutex_t lock; /* PTHREAD_MUTEX_INITIALIZER or pthread_mutex_init */
    struct vcache_slot {
        vcache_key k; /* k.word owned */
        buf text;
        uint64_t used;
    } slot[VCACHE_SLOTS];
    uint64_t tick;
    size_t bytes;
} vcache;

/* Append the text kept under k to out: 1 when found, 0 when not, -ENOMEM. */
int vcache_get(vcache *c, const vcache_key *k, buf *out);

/* Keep a copy of text under k (nothing when k.gen is 0, or the text is larger than a quarter
 * of VCACHE_BYTES). 0 or -ENOMEM (then nothing is kept, which is harmless). */
int vcache_put(vcache *c, const vcache_key *k, const buf *text);

/* Drop every text (the lock stays usable). */
void vcache_clear(vcache *c);

#endif
