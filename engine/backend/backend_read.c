/* backend_read: the daemon's file reads, batched onto the GPU (TPDS'23 random access, with
 * CODAG's warp-per-slice extract). Reads large enough to gain from the GPU queue for one
 * batcher thread, which hands whatever is queued to gpu_extract as one batch, into a pinned
 * buffer; each caller then copies its own bytes out, in parallel. Reads arriving while a batch
 * runs form the next one, so the batch grows with the load without any wait. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_int.h"
#include "../base/err.h"

static int enabled; /* the daemon turns the batcher on; tools read on the CPU */
static size_t read_min = BACKEND_READ_MIN_BYTES;
static unsigned wait_us = BACKEND_READ_WAIT_US;
static uint64_t rs_req[2], rs_bytes[2], rs_batches; /* [0] gpu, [1] cpu */
static uint32_t rs_active, rs_most, rs_largest;     /* reads at once now, at most; largest batch */

void backend_read_enable(int on)
{
    __atomic_store_n(&enabled, on, __ATOMIC_RELAXED);
}

void backend_set_read_batch(size_t min_bytes, unsigned us)
{
    __atomic_store_n(&read_min, min_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&wait_us, us, __ATOMIC_RELAXED);
}

static void count_read(int cpu, size_t n)
{
    __atomic_fetch_add(&rs_req[cpu], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&rs_bytes[cpu], (uint64_t)n, __ATOMIC_RELAXED);
}

void backend_read_stats(char *out, size_t n)
{
    snprintf(out, n,
             "reads gpu: %llu requests %llu bytes in %llu batches (largest %u); reads cpu: %llu "
             "requests %llu bytes; at most %u reads at once",
             (unsigned long long)__atomic_load_n(&rs_req[0], __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&rs_bytes[0], __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&rs_batches, __ATOMIC_RELAXED),
             __atomic_load_n(&rs_largest, __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&rs_req[1], __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&rs_bytes[1], __ATOMIC_RELAXED),
             __atomic_load_n(&rs_most, __ATOMIC_RELAXED));
}

/* Raise *most to v if it is higher. */
static void raise_to(uint32_t *most, uint32_t v)
{
    uint32_t m = __atomic_load_n(most, __ATOMIC_RELAXED);
    while (v > m &&
           !__atomic_compare_exchange_n(most, &m, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static ssize_t on_cpu(backend_cpu_read cpu, void *arg, uint32_t ent, uint64_t off, void *dst,
                      size_t n)
{
    ssize_t k = cpu(arg, ent, off, dst, n);
    if (k >= 0) count_read(1, (size_t)k);
    return k;
}

static ssize_t serve(const arc *a, uint64_t gen, uint32_t ent, uint64_t off, void *dst, size_t n,
                     backend_cpu_read cpu, void *arg);

ssize_t backend_read(const arc *a, uint64_t gen, uint32_t ent, uint64_t off, void *dst, size_t n,
                     backend_cpu_read cpu, void *arg)
{
    raise_to(&rs_most, __atomic_add_fetch(&rs_active, 1, __ATOMIC_RELAXED));
    ssize_t k = serve(a, gen, ent, off, dst, n, cpu, arg);
    __atomic_sub_fetch(&rs_active, 1, __ATOMIC_RELAXED);
    return k;
}

#ifndef TDC_HAVE_CUDA
static ssize_t serve(const arc *a, uint64_t gen, uint32_t ent, uint64_t off, void *dst, size_t n,
                     backend_cpu_read cpu, void *arg)
{
    (void)a;
    (void)gen;
    return on_cpu(cpu, arg, ent, off, dst, n);
}

void backend_prepare(const arc *a, uint64_t gen)
{
    (void)a;
    (void)gen;
}

void backend_read_stop(void) {}
#else

enum { RQ_WAIT, RQ_GPU, RQ_CPU };

/* A queued read; it lives on its caller's stack until the caller sees its state change. */
typedef struct rreq {
    uint32_t ent;
    uint64_t off;
    size_t n;
    int state;                /* RQ_*, under q.mu */
    const unsigned char *src; /* RQ_GPU: its bytes in q.pin */
    struct rreq *next;
} rreq;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work; /* for the batcher: a read was queued, or stop */
    pthread_cond_t done; /* for callers: a batch ended; for the batcher: copies ended */
    rreq *head, **tail;
    size_t bytes; /* queued */
    const arc *a; /* archive of the queued reads */
    uint64_t gen;
    struct timespec first;   /* when the oldest queued read arrived */
    int started, stop, busy; /* busy: a batch is on the GPU */
    pthread_t th;
    unsigned char *pin; /* pinned: the last batch's bytes */
    size_t copying;     /* callers still copying out of pin */
    gpu_req *req;
    uint32_t *got;
    size_t cap; /* of req and got */
} q = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t q_once = PTHREAD_ONCE_INIT;

static void q_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the batch window's deadline */
    pthread_cond_init(&q.work, &ca);
    pthread_cond_init(&q.done, NULL);
    pthread_condattr_destroy(&ca);
    q.tail = &q.head;
}

/* Room for a batch of n reads; q.mu held. */
static int q_room(size_t n)
{
    if (!q.pin && !(q.pin = gpu_host_alloc(BACKEND_READ_FULL))) return -ENOMEM;
    if (n <= q.cap) return 0;
    size_t c = n > 2 * q.cap ? n : 2 * q.cap;
    gpu_req *r = realloc(q.req, c * sizeof *r);
    if (r) q.req = r;
    uint32_t *g = r ? realloc(q.got, c * sizeof *g) : NULL;
    if (g) q.got = g;
    if (!r || !g) return -ENOMEM;
    q.cap = c;
    return 0;
}

/* The n reads from b (a list) as one gpu_extract into q.pin: 1 when the GPU served them all,
 * 0 when the CPU must (auto mode and the GPU busy, or a failure). q.mu not held; the batcher
 * is the only user of q.pin, q.req and q.got. */
static int run_batch(const arc *a, uint64_t gen, rreq *b, size_t n)
{
    int on = backend_get_mode() == BACKEND_ON;
    if (on)
        pthread_mutex_lock(&backend_gpu_lock);
    else if (pthread_mutex_trylock(&backend_gpu_lock))
        return 0; /* an analytic holds the GPU: the CPU threads are free */
    size_t k = 0, bytes = 0;
    for (rreq *r = b; r; r = r->next, k++) {
        q.req[k] = (gpu_req){r->ent, (uint32_t)r->n, r->off};
        bytes += r->n;
    }
    gpu_gram *g = backend_resident(a, gen, 1); /* once per archive: the first batch uploads */
    int64_t got = g ? gpu_extract(g, q.req, n, q.pin, BACKEND_READ_FULL, q.got) : -EIO;
    if (got < 0 && g && got != -EINVAL && got != -ENOTSUP) backend_drop(g); /* may be unusable */
    pthread_mutex_unlock(&backend_gpu_lock);
    int ok = got == (int64_t)bytes;
    size_t pos = 0;
    k = 0;
    for (rreq *r = b; ok && r; r = r->next, k++) {
        ok = q.got[k] == r->n; /* a read inside the file always gets all its bytes */
        r->src = q.pin + pos;
        pos += r->n;
    }
    if (!ok) {
        __atomic_fetch_add(&backend_fallbacks, 1, __ATOMIC_RELAXED);
        if (got >= 0)
            tdc_error(-EIO, "gpu: extract returned %lld bytes, not %zu", (long long)got, bytes);
    }
    return ok;
}

static void deadline_wait(void)
{
    unsigned us = __atomic_load_n(&wait_us, __ATOMIC_RELAXED);
    if (!us) return;
    struct timespec d = q.first;
    d.tv_nsec += (long)us * 1000;
    d.tv_sec += d.tv_nsec / 1000000000;
    d.tv_nsec %= 1000000000;
    while (!q.stop && q.bytes < BACKEND_READ_FULL &&
           pthread_cond_timedwait(&q.work, &q.mu, &d) != ETIMEDOUT) {
    }
}

/* Detach the oldest queued reads, up to BACKEND_READ_FULL bytes (at least one); q.mu held. */
static rreq *take(size_t *n)
{
    rreq *b = q.head, **p = &q.head;
    size_t bytes = 0;
    for (*n = 0; *p && (!*n || bytes + (*p)->n <= BACKEND_READ_FULL); p = &(*p)->next, ++*n)
        bytes += (*p)->n;
    q.head = *p;
    *p = NULL;
    if (!q.head) q.tail = &q.head;
    q.bytes -= bytes;
    if (q.head) clock_gettime(CLOCK_MONOTONIC, &q.first);
    return b;
}

static void *batcher(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&q.mu);
    for (;;) {
        while (!q.head && !q.stop)
            pthread_cond_wait(&q.work, &q.mu);
        if (q.stop) break;
        deadline_wait();
        if (q.stop) break;
        while (q.copying) /* the last batch's callers still read q.pin */
            pthread_cond_wait(&q.done, &q.mu);
        if (!q.head) continue;
        size_t n;
        const arc *a = q.a;
        uint64_t gen = q.gen;
        rreq *b = take(&n);
        int ok = !q_room(n);
        q.busy = 1;
        pthread_mutex_unlock(&q.mu);
        if (ok) ok = run_batch(a, gen, b, n);
        pthread_mutex_lock(&q.mu);
        q.busy = 0;
        /* The callers wait for q.mu, so the list stays valid until this loop ends. */
        for (rreq *r = b; r; r = r->next)
            r->state = ok ? RQ_GPU : RQ_CPU;
        if (ok) {
            q.copying = n;
            __atomic_fetch_add(&rs_batches, 1, __ATOMIC_RELAXED);
            raise_to(&rs_largest, (uint32_t)n);
        }
        pthread_cond_broadcast(&q.done);
    }
    for (rreq *r = q.head; r; r = r->next) /* stopping: the CPU serves what is left */
        r->state = RQ_CPU;
    q.head = NULL;
    q.tail = &q.head;
    q.bytes = 0;
    pthread_cond_broadcast(&q.done);
    pthread_mutex_unlock(&q.mu);
    return NULL;
}

/* Queue r for the batcher, starting it on first use: 0, or nonzero when the CPU must serve r
 * (another archive's reads are queued, or no thread). q.mu held. */
static int enqueue(rreq *r, const arc *a, uint64_t gen)
{
    if (!q.started) {
        if (q.stop || pthread_create(&q.th, NULL, batcher, NULL)) return -1;
        q.started = 1;
    }
    if (q.head && (q.a != a || q.gen != gen)) return -1;
    if (!q.head) {
        q.a = a;
        q.gen = gen;
        clock_gettime(CLOCK_MONOTONIC, &q.first);
    }
    *q.tail = r;
    q.tail = &r->next;
    q.bytes += r->n;
    pthread_cond_signal(&q.work);
    return 0;
}

static ssize_t serve(const arc *a, uint64_t gen, uint32_t ent, uint64_t off, void *dst, size_t n,
                     backend_cpu_read cpu, void *arg)
{
    int m = backend_get_mode();
    if (m == BACKEND_OFF || !__atomic_load_n(&enabled, __ATOMIC_RELAXED) || !gen || !n ||
        n > BACKEND_READ_FULL || n > UINT32_MAX ||
        (m == BACKEND_AUTO && n < __atomic_load_n(&read_min, __ATOMIC_RELAXED)) ||
        !backend_gpu_available())
        return on_cpu(cpu, arg, ent, off, dst, n);
    rreq r = {ent, off, n, RQ_WAIT, NULL, NULL};
    pthread_once(&q_once, q_init);
    pthread_mutex_lock(&q.mu);
    /* Auto: while a batch runs, a read joins the next one only if that one stays small enough
     * to be done about as soon as the CPU would be; otherwise this thread's CPU takes it, so
     * both work at once. */
    if ((m == BACKEND_AUTO && q.busy && q.bytes + n > BACKEND_READ_QUEUE * n) ||
        enqueue(&r, a, gen))
        r.state = RQ_CPU;
    while (r.state == RQ_WAIT)
        pthread_cond_wait(&q.done, &q.mu);
    pthread_mutex_unlock(&q.mu);
    if (r.state == RQ_CPU) return on_cpu(cpu, arg, ent, off, dst, n);
    memcpy(dst, r.src, n);
    count_read(0, n);
    pthread_mutex_lock(&q.mu);
    if (!--q.copying) pthread_cond_broadcast(&q.done);
    pthread_mutex_unlock(&q.mu);
    return (ssize_t)n;
}

void backend_prepare(const arc *a, uint64_t gen)
{
    if (backend_get_mode() == BACKEND_OFF || !gen || !backend_gpu_available()) return;
    pthread_mutex_lock(&backend_gpu_lock);
    backend_resident(a, gen, 1);
    pthread_mutex_unlock(&backend_gpu_lock);
}

void backend_read_stop(void)
{
    pthread_once(&q_once, q_init);
    pthread_mutex_lock(&q.mu);
    int started = q.started;
    q.stop = 1;
    if (started) pthread_cond_signal(&q.work);
    pthread_mutex_unlock(&q.mu);
    if (started) pthread_join(q.th, NULL);
    pthread_mutex_lock(&q.mu);
    gpu_host_free(q.pin);
    free(q.req);
    free(q.got);
    q.pin = NULL;
    q.req = NULL;
    q.got = NULL;
    q.cap = 0;
    q.started = 0;
    q.stop = 0; /* a later read starts the batcher again */
    pthread_mutex_unlock(&q.mu);
}
#endif
