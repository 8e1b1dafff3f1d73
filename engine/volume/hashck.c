#include "hashck.h"

#include <xxhash.h>

void hashck_init(hashck *h, uint64_t want, uint64_t size)
{
    h->want = want;
    h->size = size;
    h->done = 0;
    h->st = XXH3_createState();
    if (h->st) XXH3_64bits_reset(h->st);
}

int hashck_feed(hashck *h, uint64_t off, const void *p, size_t n)
{
    if (!h->st || off != h->done || !n) return 0;
    XXH3_64bits_update(h->st, p, n);
    h->done += n;
    if (h->done < h->size) return 0;
    int bad = h->done != h->size || XXH3_64bits_digest(h->st) != h->want;
    hashck_free(h);
    return bad;
}

void hashck_free(hashck *h)
{
    XXH3_freeState(h->st);
    h->st = NULL;
}
