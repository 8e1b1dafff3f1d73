#include "vcache.h"

#include <errno.h>
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

static void drop(vcache *c, int i)
{
    c->bytes -= c->slot[i].text.n;
    buf_free(&c->slot[i].text);
    free((char *)c->slot[i].k.word);
    memset(&c->slot[i], 0, sizeof c->slot[i]);
}

/* The least recently used full slot, or -1 when all are empty. Caller holds the lock. */
static int oldest(const vcache *c)
{
    int v = -1;
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (c->slot[i].k.gen && (v < 0 || c->slot[i].used < c->slot[v].used)) v = i;
    return v;
}

/* An empty slot, emptying the least recently used one when none is. Caller holds the lock. */
static int victim(vcache *c)
{
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (!c->slot[i].k.gen) return i;
    int v = oldest(c);
    drop(c, v);
    return v;
}

int vcache_get(vcache *c, const vcache_key *k, buf *out)
{
    if (!k->gen) return 0;
    pthread_mutex_lock(&c->lock);
    int i = find(c, k), rc = 0;
    if (i >= 0) {
        c->slot[i].used = ++c->tick;
        rc = buf_put(out, c->slot[i].text.p, c->slot[i].text.n) ? -ENOMEM : 1;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int vcache_put(vcache *c, const vcache_key *k, const buf *text)
{
    if (!k->gen || text->n > VCACHE_BYTES / 4) return 0;
    buf copy = {0};
    char *word = k->word ? strdup(k->word) : NULL;
    if ((k->word && !word) || buf_put(&copy, text->p, text->n)) {
        free(word);
        buf_free(&copy);
        return -ENOMEM;
    }
    pthread_mutex_lock(&c->lock);
    int i = find(c, k);
    if (i >= 0) drop(c, i); /* computed twice at once: keep the newer */
    while (c->bytes + copy.n > VCACHE_BYTES && (i = oldest(c)) >= 0)
        drop(c, i);
    i = victim(c);
    c->slot[i].k = *k;
    c->slot[i].k.word = word;
    c->slot[i].text = copy;
    c->slot[i].used = ++c->tick;
    c->bytes += copy.n;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void vcache_clear(vcache *c)
{
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < VCACHE_SLOTS; i++)
        if (c->slot[i].k.gen) drop(c, i);
    pthread_mutex_unlock(&c->lock);
}
