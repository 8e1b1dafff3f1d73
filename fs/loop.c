/* loop: one thread reads the FUSE device and answers the quick requests itself; a pool of
 * workers answers the rest and, while requests keep arriving faster than that thread
 * answers them, reads the device too (loop.h). */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Consecutive requests after each of which the next was already waiting on the device: the
 * sign of callers in parallel that calls a worker to read the device beside the reading
 * thread. A caller alone makes short runs (the release of the file it read last is sent
 * without waiting); a cold tar of Linux still made 600 runs of 16 in 540,000 requests, and
 * 2,000 of 8, each a worker woken to read for it. */
#define BACKLOG_RUN 16

/* A request for the workers: the buffer it was read into, which goes back to the reading
 * thread afterwards for the next request, so no request waits for an allocation. */
typedef struct job {
    struct job *next;
    void *mem;
    size_t size;
} job;

typedef struct loop loop;

typedef struct worker {
    loop *l;
    pthread_t th;
    struct fuse_buf buf; /* where it reads requests from the device */
} worker;

struct loop {
    struct fuse_session *se;
    int fd; /* the device */
    pthread_mutex_t lock;
    pthread_cond_t more; /* a request queued, a reader wanted, or done */
    job *head, *tail;    /* the workers' requests, oldest first */
    job *spare;          /* answered jobs whose buffers await reuse */
    unsigned nspare, most_spare;
    unsigned idle;    /* workers waiting (read without the lock by spin_wait) */
    unsigned want;    /* readers asked for and not yet started */
    unsigned reading; /* workers reading the device (help_read) */
    unsigned workers; /* started (the reading thread's alone) */
    int done;      /* no more requests come: the workers finish the queue and end */
};

/* Whether a request waits on the device, or the connection ended (a read then says so:
 * the reading thread must not poll on after an unmount). */
static int waiting(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLERR | POLLHUP));
}

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* Before the reading thread blocks on the device: poll it until `until` (microseconds,
 * now_us), as long as a core is left for the busy workers, yielding the core between polls
 * to whatever else wants it (a warm tar and the wc it writes to keep two cores busy
 * themselves). A caller that sends one request after the other (a shell appending, a tar)
 * then finds this thread awake: its request is answered without first waking a sleeping
 * thread, which on a virtual machine costs as much as the answer. 1 when a request came
 * while it polled, 0 when it did not poll or the time ran out. */
static int spin_wait(loop *l, unsigned workers, unsigned ncpu, uint64_t until)
{
    unsigned idle = __atomic_load_n(&l->idle, __ATOMIC_RELAXED);
    if (workers - (idle < workers ? idle : workers) + 1 >= ncpu) return 0;
    for (;;) {
        if (waiting(l->fd)) return 1;
        if (now_us() >= until) return 0;
        sched_yield();
    }
}

/* A worker reading the device: it answers every request it reads (whatever it costs), for
 * as long as the next one is already waiting. It may block in the read when the reading
 * thread took that request first; only there can it be cancelled (fs_loop's end). */
static void help_read(worker *w)
{
    loop *l = w->l;
    while (!fuse_session_exited(l->se) && waiting(l->fd)) {
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        int res = fuse_session_receive_buf(l->se, &w->buf);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
        if (res <= 0) break; /* interrupted, unmounted or exited */
        fuse_session_process_buf(l->se, &w->buf);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    loop *l = w->l;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    pthread_mutex_lock(&l->lock);
    for (;;) {
        __atomic_add_fetch(&l->idle, 1, __ATOMIC_RELAXED);
        while (!l->head && !l->want && !l->done)
            pthread_cond_wait(&l->more, &l->lock);
        __atomic_sub_fetch(&l->idle, 1, __ATOMIC_RELAXED);
        job *j = l->head;
        if (j) {
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
        } else if (l->done) {
            break;
        } else {
            l->want--;
            l->reading++;
            pthread_mutex_unlock(&l->lock);
            help_read(w);
            pthread_mutex_lock(&l->lock);
            l->reading--;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* Queue the request in *b for the workers, giving *b a spare buffer (or none: libfuse makes
 * one at the next read). 0; -EBUSY when every worker is reading the device, where each may
 * block until another request comes (the one in *b may be the last its caller sends, so it
 * would wait for ever: the reading thread answers it); -ENOMEM. The request stays in *b
 * unless 0. */
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
    pthread_mutex_lock(&l->lock);
    int stuck = !l->idle && l->reading == l->workers;
    if (stuck) {
        j->next = l->spare; /* back, unused */
        l->spare = j;
        l->nspare++;
    } else {
        void *next = j->mem;
        j->mem = b->mem;
        j->size = b->size;
        j->next = NULL;
        b->mem = next;
        if (l->tail)
            l->tail->next = j;
        else
            l->head = j;
        l->tail = j;
        pthread_cond_signal(&l->more);
    }
    pthread_mutex_unlock(&l->lock);
    return stuck ? -EBUSY : 0;
}

/* One more worker reading the device, if one is idle. */
static void call_reader(loop *l)
{
    pthread_mutex_lock(&l->lock);
    if (l->idle > l->want) {
        l->want++;
        pthread_cond_signal(&l->more);
    }
    pthread_mutex_unlock(&l->lock);
}

/* The end: the workers finish the queue; those blocked reading the device are cancelled
 * there (nothing else can wake them before the unmount), as libfuse's loop does. */
static void finish(loop *l, worker *w, unsigned n)
{
    pthread_mutex_lock(&l->lock);
    l->done = 1;
    pthread_cond_broadcast(&l->more);
    pthread_mutex_unlock(&l->lock);
    for (unsigned i = 0; i < n; i++)
        pthread_cancel(w[i].th); /* takes effect only inside a read of the device */
    for (unsigned i = 0; i < n; i++) {
        pthread_join(w[i].th, NULL);
        free(w[i].buf.mem);
    }
    while (l->spare) {
        job *j = l->spare;
        l->spare = j->next;
        free(j->mem);
        free(j);
    }
}

int fs_loop(struct fuse_session *se, unsigned workers, unsigned spin_us, fs_loop_quick quick,
            void *ctx)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned ncpu = online > 0 ? (unsigned)online : 1;
    loop l = {.se = se, .fd = fuse_session_fd(se), .most_spare = workers + 1};
    pthread_mutex_init(&l.lock, NULL);
    pthread_cond_init(&l.more, NULL);
    worker *w = calloc(workers ? workers : 1, sizeof *w);
    unsigned n = 0;
    while (w && n < workers) {
        w[n].l = &l;
        if (pthread_create(&w[n].th, NULL, worker_main, &w[n])) break;
        n++;
    }
    l.workers = n; /* read by hand_over, on this thread */
    struct fuse_buf b = {0};
    int rc = 0, run = 0;
    /* Spin only while the requests come closer together than the spin lasts (from the
     * last answer to the next request): a caller that pauses longer, or an idle mount,
     * costs no CPU beyond one spin. A request found by the spin needs no clock read. */
    int spin = 0;
    uint64_t answered = 0; /* when the last answer went (now_us), 0: none yet */
    while (!fuse_session_exited(se)) {
        int found = spin && spin_wait(&l, n, ncpu, answered + spin_us);
        int res = fuse_session_receive_buf(se, &b);
        if (spin_us && !found) spin = answered && now_us() - answered <= spin_us;
        if (res == -EINTR) continue;
        if (res <= 0) { /* 0: unmounted or exited */
            rc = res;
            break;
        }
        /* A request in a pipe (splice) cannot be looked at: answered here. Without workers,
         * everything is. */
        int here = !n || (b.flags & FUSE_BUF_IS_FD) || quick(ctx, b.mem, b.size);
        if (here || hand_over(&l, &b)) fuse_session_process_buf(se, &b);
        if (spin_us) answered = now_us();
        run = n && waiting(l.fd) ? run + 1 : 0;
        if (run >= BACKLOG_RUN) {
            call_reader(&l);
            run = 0;
        }
    }
    finish(&l, w, n);
    free(w);
    free(b.mem);
    pthread_cond_destroy(&l.more);
    pthread_mutex_destroy(&l.lock);
    fuse_session_reset(se);
    return rc;
}
