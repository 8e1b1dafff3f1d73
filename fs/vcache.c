#include "vcache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_key(const vcache_key *a, const vcache_key *b)
{
    return a->dir == b->dir && a->gen == b->gen && a->kind == b->kind && a->vis[0] == b->vis[0] &&
           a->vis[1] == b->vis[1] &&
           (a->word && b->word ? !strcmp(a->word, b->word) : a->word == b->word);
}

/* Index of the slot holding k, or -1. Caller holds the lock. */
static int find(const vcache *c, const vcache_key *k)
{
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (c->slot[i].k.gen && same_key(&c->slot[i].k, k)) return i;
    return -1;
}

/* The count a text of c's takes from: its bytes in memory, or on disk when spilled. */
static uint64_t *tally(vcache *c, const vtext *t)
{
    return t->fd >= 0 ? &c->disk : &c->bytes;
}

static void drop(vcache *c, int i)
{
    *tally(c, c->slot[i].text) -= c->slot[i].text->n;
    vtext_put(c->slot[i].text);
    free((char *)c->slot[i].k.word);
    memset(&c->slot[i], 0, sizeof c->slot[i]);
}

/* The least recently used full slot holding a text of the same kind as t (in memory or
 * spilled; any kind with t NULL), or -1 when none. Caller holds the lock. */
static int oldest(const vcache *c, const vtext *t)
{
    int v = -1;
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (c->slot[i].k.gen && (!t || (c->slot[i].text->fd >= 0) == (t->fd >= 0)) &&
            (v < 0 || c->slot[i].used < c->slot[v].used))
            v = i;
    return v;
}

/* An empty slot, emptying the least recently used one when none is. Caller holds the lock. */
static int victim(vcache *c)
{
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (!c->slot[i].k.gen) return i;
    int v = oldest(c, NULL);
    drop(c, v);
    return v;
}

vtext *vcache_get(vcache *c, const vcache_key *k)
{
    if (!k->gen) return NULL;
    pthread_mutex_lock(&c->lock);
    int i = find(c, k);
    vtext *t = NULL;
    if (i >= 0) {
        c->slot[i].used = ++c->tick;
        t = vtext_ref(c->slot[i].text);
    }
    pthread_mutex_unlock(&c->lock);
    return t;
}

int vcache_put(vcache *c, const vcache_key *k, vtext *text)
{
    uint64_t bound = text->fd >= 0 ? VCACHE_DISK : c->mem ? c->mem : VCACHE_BYTES;
    if (!k->gen || text->n > bound / 4) return 0;
    char *word = k->word ? strdup(k->word) : NULL;
    if (k->word && !word) return -ENOMEM;
    pthread_mutex_lock(&c->lock);
    int i = find(c, k);
    if (i >= 0) drop(c, i); /* computed twice at once: keep the newer */
    while (*tally(c, text) + text->n > bound && (i = oldest(c, text)) >= 0)
        drop(c, i);
    i = victim(c);
    c->slot[i].k = *k;
    c->slot[i].k.word = word;
    c->slot[i].text = vtext_ref(text);
    c->slot[i].used = ++c->tick;
    *tally(c, text) += text->n;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void vcache_describe(vcache *c, char *v, size_t n)
{
    pthread_mutex_lock(&c->lock);
    int kept = 0;
    for (int i = 0; i < VCACHE_SLOTS; i++)
        kept += c->slot[i].k.gen != 0;
    snprintf(v, n, "%d texts; %" PRIu64 " bytes in memory, bound %" PRIu64 "; %" PRIu64
             " bytes spilled", kept, c->bytes, c->mem ? c->mem : VCACHE_BYTES, c->disk);
    pthread_mutex_unlock(&c->lock);
}

void vcache_clear(vcache *c)
{
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (c->slot[i].k.gen) drop(c, i);
    pthread_mutex_unlock(&c->lock);
}
