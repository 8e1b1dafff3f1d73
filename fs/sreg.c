#include "sreg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void sreg_init(sreg *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
}

void sreg_free(sreg *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        free(r->ents[i].word);
    free(r->ents);
    free(r->bucket);
    pthread_mutex_destroy(&r->lock);
}

static uint32_t bucket_of(const sreg *r, uint64_t dir, const char *word)
{
    return (uint32_t)(XXH3_64bits_withSeed(word, strlen(word), dir) & (r->nbucket - 1));
}

/* The slot + 1 of (dir, word), 0 if absent. */
static uint32_t find(const sreg *r, uint64_t dir, const char *word)
{
    if (!r->nbucket) return 0;
    for (uint32_t s = r->bucket[bucket_of(r, dir, word)]; s; s = r->ents[s - 1].next)
        if (r->ents[s - 1].dir == dir && !strcmp(r->ents[s - 1].word, word)) return s;
    return 0;
}

static void link_in(sreg *r, uint32_t slot)
{
    uint32_t *b = &r->bucket[bucket_of(r, r->ents[slot].dir, r->ents[slot].word)];
    r->ents[slot].next = *b;
    *b = slot + 1;
}

/* Keep at most one entry per bucket on average: double the buckets and chain again. */
static int grow_buckets(sreg *r)
{
    if (r->live < r->nbucket) return 0;
    uint32_t nb = r->nbucket ? r->nbucket * 2 : 64;
    uint32_t *b = calloc(nb, sizeof *b);
    if (!b) return -ENOMEM;
    free(r->bucket);
    r->bucket = b;
    r->nbucket = nb;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->ents[i].word) link_in(r, i);
    return 0;
}

/* A free slot: a released one, else a new one. */
static int new_slot(sreg *r, uint32_t *slot)
{
    if (r->free) {
        *slot = r->free - 1;
        r->free = r->ents[*slot].next;
        return 0;
    }
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 64;
        sreg_ent *p = realloc(r->ents, cap * sizeof *p);
        if (!p) return -ENOMEM;
        r->ents = p;
        r->cap = cap;
    }
    *slot = r->n++;
    return 0;
}

/* A new entry for (dir, word) with one reference. 0 or -ENOMEM. */
static int add(sreg *r, uint64_t dir, const char *word, uint32_t *slot)
{
    char *w = strdup(word);
    /* Where the buckets cannot grow, the chains get longer: only none at all fails. */
    if (!w || (grow_buckets(r) && !r->nbucket) || new_slot(r, slot)) {
        free(w);
        return -ENOMEM;
    }
    r->ents[*slot] = (sreg_ent){.dir = dir, .word = w, .nlookup = 1};
    r->live++;
    link_in(r, *slot);
    return 0;
}

int sreg_ref(sreg *r, uint64_t dir, const char *word, uint32_t *slot)
{
    int rc = 0;
    pthread_mutex_lock(&r->lock);
    uint32_t s = find(r, dir, word);
    if (s) {
        *slot = s - 1;
        r->ents[*slot].nlookup++;
    } else {
        rc = add(r, dir, word, slot);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int sreg_get(sreg *r, uint64_t slot, uint64_t *dir, char **word)
{
    int rc = -1;
    pthread_mutex_lock(&r->lock);
    if (slot < r->n && r->ents[slot].word) {
        *dir = r->ents[slot].dir;
        rc = 0;
        if (word && !(*word = strdup(r->ents[slot].word))) rc = -1;
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Take `slot` out of its hash chain and put it on the free list. */
static void release(sreg *r, uint32_t slot)
{
    uint32_t *p = &r->bucket[bucket_of(r, r->ents[slot].dir, r->ents[slot].word)];
    while (*p != slot + 1)
        p = &r->ents[*p - 1].next;
    *p = r->ents[slot].next;
    free(r->ents[slot].word);
    r->ents[slot] = (sreg_ent){.next = r->free};
    r->free = slot + 1;
    r->live--;
}

void sreg_forget(sreg *r, uint64_t slot, uint64_t n)
{
    pthread_mutex_lock(&r->lock);
    if (slot < r->n && r->ents[slot].word) {
        sreg_ent *e = &r->ents[slot];
        e->nlookup = n < e->nlookup ? e->nlookup - n : 0;
        if (!e->nlookup) release(r, (uint32_t)slot);
    }
    pthread_mutex_unlock(&r->lock);
}
