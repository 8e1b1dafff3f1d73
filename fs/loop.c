/* loop: one thread reads the FUSE device and answers the quick requests itself; a pool of
 * workers answers the rest (loop.h). */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

/* A request for the workers: the buffer it was read into, which goes back to the reading
 * thread afterwards for the next request, so no request waits for an allocation. */
typedef struct job {
    struct job *next;
    void *mem;
    size_t size;
} job;

typedef struct loop {
    struct fuse_session *se;
    pthread_mutex_t lock;
    pthread_cond_t more; /* a request queued, or done */
    job *head, *tail;    /* the workers' requests, oldest first */
    job *spare;          /* answered jobs whose buffers await reuse */
    unsigned nspare, most_spare;
    unsigned idle; /* workers waiting for a request */
    int done; /* no more requests come: the workers finish the queue and end */
} loop;

static void *worker_main(void *arg)
{
    loop *l = arg;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        __atomic_add_fetch(&l->idle, 1, __ATOMIC_RELAXED); /* read without the lock */
        while (!l->head && !l->done)
            pthread_cond_wait(&l->more, &l->lock);
        __atomic_sub_fetch(&l->idle, 1, __ATOMIC_RELAXED);
        job *j = l->head;
        if (!j) break;
        l->head = j->next;
        if (!l->head) l->tail = NULL;
        pthread_mutex_unlock(&l->lock);
        struct fuse_buf b = {.size = j->size, .mem = j->mem};
        fuse_session_process_buf(l->se, &b);
        pthread_mutex_lock(&l->lock);
        if (l->nspare < l->most_spare) {
            j->next = l->spare;
            l->spare = j;
            l->nspare++;
        } else {
            free(j->mem);
            free(j);
        }
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* Queue the request in *b for the workers, giving *b a spare buffer (or none: libfuse makes
 * one at the next read). 0, or -ENOMEM (the request is still in *b). */
static int hand_over(loop *l, struct fuse_buf *b)
{
    pthread_mutex_lock(&l->lock);
    job *j = l->spare;
    if (j) {
        l->spare = j->next;
        l->nspare--;
    }
    pthread_mutex_unlock(&l->lock);
    if (!j && !(j = calloc(1, sizeof *j))) return -ENOMEM;
    void *next = j->mem;
    j->mem = b->mem;
    j->size = b->size;
    j->next = NULL;
    b->mem = next;
    pthread_mutex_lock(&l->lock);
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    pthread_cond_signal(&l->more);
    pthread_mutex_unlock(&l->lock);
    return 0;
}

/* Whether a request the policy would answer here unless callers are in parallel goes to a
 * worker: the next request is already waiting on the device and a worker is idle. A caller
 * alone seldom finds one waiting (the release of the file it read last, sent without
 * waiting, is a metadata request: those are answered here whatever waits). */
static int spread(loop *l, int fd)
{
    if (!__atomic_load_n(&l->idle, __ATOMIC_RELAXED)) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

int fs_loop(struct fuse_session *se, unsigned workers, fs_loop_quick quick, void *ctx)
{
    loop l = {.se = se, .most_spare = workers + 1};
    pthread_mutex_init(&l.lock, NULL);
    pthread_cond_init(&l.more, NULL);
    pthread_t *th = calloc(workers ? workers : 1, sizeof *th);
    unsigned n = 0;
    while (th && n < workers && !pthread_create(&th[n], NULL, worker_main, &l))
        n++;
    struct fuse_buf b = {0};
    int rc = 0;
    while (!fuse_session_exited(se)) {
        int res = fuse_session_receive_buf(se, &b);
        if (res == -EINTR) continue;
        if (res <= 0) { /* 0: unmounted or exited */
            rc = res;
            break;
        }
        /* A request in a pipe (splice) cannot be looked at: answered here. Without workers,
         * everything is. */
        int where = !n || (b.flags & FUSE_BUF_IS_FD) ? FS_LOOP_HERE : quick(ctx, b.mem, b.size);
        int here = where == FS_LOOP_HERE ||
                   (where == FS_LOOP_HERE_ALONE && !spread(&l, fuse_session_fd(se)));
        if (here || hand_over(&l, &b)) fuse_session_process_buf(se, &b);
    }
    pthread_mutex_lock(&l.lock);
    l.done = 1;
    pthread_cond_broadcast(&l.more);
    pthread_mutex_unlock(&l.lock);
    for (unsigned i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    free(th);
    while (l.spare) {
        job *j = l.spare;
        l.spare = j->next;
        free(j->mem);
        free(j);
    }
    free(b.mem);
    pthread_cond_destroy(&l.more);
    pthread_mutex_destroy(&l.lock);
    fuse_session_reset(se);
    return rc;
}
