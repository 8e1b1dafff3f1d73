#include "query.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "../base/err.h"
#include "../base/par.h"
#include "idx.h"
#include "words.h"

typedef struct job {
    const arc *meta;
    uint32_t ent;
    const char *word;
    size_t wn;
    int search;
    idx_part *parts;
    size_t n;
    size_t next; /* the next part a worker takes, under lock */
    pthread_mutex_t lock;
    int rc;          /* the first failure in shard order, under lock */
    size_t failed;   /* its part */
    char msg[1000];  /* its message (the worker's thread's) */
} job;

/* The query on one shard's part of the file: the shard loaded alone (an archive of one
 * grammar, version 1 to 3, loaded whole), indexed, queried. */
static int query_part(const job *j, idx_part *pt)
{
    arc *p;
    idx *x = NULL;
    idx_words *w = NULL;
    int whole = j->meta->version < 4;
    int rc = whole ? arc_open(j->meta->path, &p) : arc_open_piece(j->meta, pt->k, &p);
    if (rc) return rc;
    if (!(rc = idx_build_base(p, &x))) { /* no cache of flat rules: nothing is read */
        pt->bytes = idx_run_bytes(x, j->ent);
        rc = idx_words_build(x, &w);
    }
    if (!rc && j->search)
        rc = idx_search(w, j->ent, j->word, j->wn, &pt->offs);
    else if (!rc)
        rc = idx_count(w, j->ent, j->word, j->wn, &pt->count);
    if (rc && !whole) rc = tdc_error_ctx(rc, "shard %u", pt->k);
    idx_words_free(w);
    idx_free(x);
    if (whole)
        arc_free(p);
    else
        arc_piece_free(p);
    return rc;
}

static void *worker(void *arg)
{
    job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        size_t i = j->next++;
        int stop = j->rc != 0;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->n || stop) return NULL;
        idx_part *pt = &j->parts[i];
        int rc = query_part(j, pt);
        if (!rc) continue;
        pthread_mutex_lock(&j->lock);
        if (!j->rc || i < j->failed) {
            j->rc = rc;
            j->failed = i;
            snprintf(j->msg, sizeof j->msg, "%s", tdc_errmsg());
        }
        pthread_mutex_unlock(&j->lock);
    }
}

int idx_query_parts(const arc *meta, uint32_t ent, uint32_t lo, uint32_t hi, const char *word,
                    size_t n, int search, unsigned threads, idx_part *parts)
{
    job j = {.meta = meta, .ent = ent, .word = word, .wn = n, .search = search,
             .parts = parts, .n = hi > lo ? hi - lo : 0};
    for (size_t i = 0; i < j.n; i++)
        parts[i] = (idx_part){.k = lo + (uint32_t)i};
    if (!threads) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 1 ? (unsigned)cpus : 1;
    }
    if (threads > j.n) threads = (unsigned)j.n;
    pthread_mutex_init(&j.lock, NULL);
    if (threads) par_run(threads, worker, &j, 0);
    pthread_mutex_destroy(&j.lock);
    return j.rc ? tdc_error(j.rc, "%s", j.msg) : 0;
}

void idx_parts_free(idx_part *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        vec64_free(&parts[i].offs);
}
