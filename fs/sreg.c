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
    for (uint32_t i = 0; i < r->n; i++) {
        free((char *)r->ents[i].k.word);
        vtext_put(r->ents[i].text);
    }
    free(r->ents);
    free(r->bucket);
    pthread_mutex_destroy(&r->lock);
}

static uint32_t bucket_of(const sreg *r, const sreg_key *k)
{
    uint64_t f[6] = {k->dir, k->kind, k->tag[0], k->tag[1], k->tag[2], k->tag[3]};
    uint64_t seed = XXH3_64bits(f, sizeof f);
    return (uint32_t)(XXH3_64bits_withSeed(k->word, strlen(k->word), seed) & (r->nbucket - 1));
}

static int same(const sreg_key *a, const sreg_key *b)
{
    return a->dir == b->dir && a->kind == b->kind && !memcmp(a->tag, b->tag, sizeof a->tag) &&
           !strcmp(a->word, b->word);
}

/* The slot + 1 of key k, 0 if absent. */
static uint32_t find(const sreg *r, const sreg_key *k)
{
    if (!r->nbucket) return 0;
    for (uint32_t s = r->bucket[bucket_of(r, k)]; s; s = r->ents[s - 1].next)
        if (same(&r->ents[s - 1].k, k)) return s;
    return 0;
}

static void link_in(sreg *r, uint32_t slot)
{
    uint32_t *b = &r->bucket[bucket_of(r, &r->ents[slot].k)];
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
        if (r->ents[i].k.word) link_in(r, i);
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

/* A new entry for key k with one reference. 0 or -ENOMEM. */
static int add(sreg *r, const sreg_key *k, uint32_t *slot)
{
    char *w = strdup(k->word);
    /* Where the buckets cannot grow, the chains get longer: only none at all fails. */
    if (!w || (grow_buckets(r) && !r->nbucket) || new_slot(r, slot)) {
        free(w);
        return -ENOMEM;
    }
    r->ents[*slot] = (sreg_ent){.k = *k, .nlookup = 1};
    r->ents[*slot].k.word = w;
    r->live++;
    link_in(r, *slot);
    return 0;
}

/* Put `slot`, whose last reference went, at the newest end of the list of lingering
 * entries. */
static void linger(sreg *r, uint32_t slot)
{
    r->ents[slot].older = r->newest;
    if (r->newest)
        r->ents[r->newest - 1].newer = slot + 1;
    else
        r->oldest = slot + 1;
    r->newest = slot + 1;
    r->idle++;
}

/* Take lingering `slot` out of the list of lingering entries. */
static void unlinger(sreg *r, uint32_t slot)
{
    sreg_ent *e = &r->ents[slot];
    if (e->older)
        r->ents[e->older - 1].newer = e->newer;
    else
        r->oldest = e->newer;
    if (e->newer)
        r->ents[e->newer - 1].older = e->older;
    else
        r->newest = e->older;
    e->older = e->newer = 0;
    r->idle--;
}

int sreg_ref(sreg *r, const sreg_key *k, uint32_t *slot, vtext **text)
{
    int rc = 0;
    pthread_mutex_lock(&r->lock);
    uint32_t s = find(r, k);
    if (s) {
        sreg_ent *e = &r->ents[(*slot = s - 1)];
        if (!e->nlookup++) unlinger(r, *slot);
    } else {
        rc = add(r, k, slot);
    }
    if (text) *text = rc ? NULL : vtext_ref(r->ents[*slot].text);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void sreg_set_text(sreg *r, uint32_t slot, vtext *text)
{
    pthread_mutex_lock(&r->lock);
    if (slot < r->n && r->ents[slot].k.word && !r->ents[slot].text) {
        r->ents[slot].text = vtext_ref(text);
        if (text->fd < 0) r->mem += text->n;
    }
    pthread_mutex_unlock(&r->lock);
}

uint64_t sreg_mem(sreg *r)
{
    pthread_mutex_lock(&r->lock);
    uint64_t n = r->mem;
    pthread_mutex_unlock(&r->lock);
    return n;
}

int sreg_get(sreg *r, uint64_t slot, uint64_t *dir, uint32_t *kind, char **word, vtext **text)
{
    int rc = -1;
    pthread_mutex_lock(&r->lock);
    if (slot < r->n && r->ents[slot].k.word) {
        const sreg_ent *e = &r->ents[slot];
        *dir = e->k.dir;
        *kind = e->k.kind;
        rc = 0;
        if (word && !(*word = strdup(e->k.word))) rc = -1;
        if (!rc && text) *text = vtext_ref(e->text);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Take `slot` out of its hash chain and put it on the free list. */
static void release(sreg *r, uint32_t slot)
{
    uint32_t *p = &r->bucket[bucket_of(r, &r->ents[slot].k)];
    while (*p != slot + 1)
        p = &r->ents[*p - 1].next;
    *p = r->ents[slot].next;
    free((char *)r->ents[slot].k.word);
    const vtext *t = r->ents[slot].text;
    if (t && t->fd < 0) r->mem -= t->n;
    vtext_put(r->ents[slot].text);
    r->ents[slot] = (sreg_ent){.next = r->free};
    r->free = slot + 1;
    r->live--;
}

/* Past SREG_LINGER lingering entries, the one idle longest goes. */
static void trim_idle(sreg *r)
{
    while (r->idle > SREG_LINGER) {
        uint32_t old = r->oldest - 1;
        unlinger(r, old);
        release(r, old);
    }
}

void sreg_forget(sreg *r, uint64_t slot, uint64_t n)
{
    pthread_mutex_lock(&r->lock);
    if (slot < r->n && r->ents[slot].k.word && r->ents[slot].nlookup) {
        sreg_ent *e = &r->ents[slot];
        e->nlookup = n < e->nlookup ? e->nlookup - n : 0;
        if (!e->nlookup && !e->text) {
            release(r, (uint32_t)slot);
        } else if (!e->nlookup) {
            linger(r, (uint32_t)slot);
            trim_idle(r);
        }
    }
    pthread_mutex_unlock(&r->lock);
}
