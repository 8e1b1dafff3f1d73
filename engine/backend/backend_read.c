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

static void count_read(backend_reads *r, int cpu, size_t n)
{
    __atomic_fetch_add(&r->req_n[cpu], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->req_bytes[cpu], (uint64_t)n, __ATOMIC_RELAXED);
}

/* The mean ns a byte of auto's reads served on the GPU (side 0) or CPU (1), as timed. */
static double timed_ns_b(backend_reads *r, int side)
{
    uint64_t b = __atomic_load_n(&r->e2e_bytes[side], __ATOMIC_RELAXED);
    return b ? (double)__atomic_load_n(&r->e2e_ns[side], __ATOMIC_RELAXED) / (double)b : 0;
}

void backend_read_stats(backend *b, char *out, size_t n)
{
    backend_reads *r = &b->rd;
    pthread_mutex_lock(&r->mu);
    readcost cost = r->cost;
    pthread_mutex_unlock(&r->mu);
    snprintf(out, n,
             "reads gpu: %llu requests %llu bytes in %llu batches (largest %u); reads cpu: %llu "
             "requests %llu bytes; at most %u reads at once; auto's costs: cpu %.2f ns/B, "
             "gpu batch %.0f us + %.2f ns/B; auto's reads as timed: gpu %.2f ns/B, cpu %.2f ns/B",
             (unsigned long long)__atomic_load_n(&r->req_n[0], __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&r->req_bytes[0], __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&r->batches, __ATOMIC_RELAXED),
             __atomic_load_n(&r->largest, __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&r->req_n[1], __ATOMIC_RELAXED),
             (unsigned long long)__atomic_load_n(&r->req_bytes[1], __ATOMIC_RELAXED),
             __atomic_load_n(&r->most, __ATOMIC_RELAXED), cost.cpu_ns_b, cost.gpu_fixed_ns / 1e3,
             cost.gpu_ns_b, timed_ns_b(r, 0), timed_ns_b(r, 1));
}

/* Raise *most to v if it is higher. */
static void raise_to(uint32_t *most, uint32_t v)
{
    uint32_t m = __atomic_load_n(most, __ATOMIC_RELAXED);
    while (v > m &&
           !__atomic_compare_exchange_n(most, &m, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static ssize_t on_cpu(backend_reads *r, backend_cpu_read cpu, void *arg, uint32_t ent,
                      uint64_t off, void *dst, size_t n)
{
    ssize_t k = cpu(arg, ent, off, dst, n);
    if (k >= 0 && r) count_read(r, 1, (size_t)k);
    return k;
}

static ssize_t serve(backend *b, const arc *a, uint64_t gen, uint32_t ent, uint64_t off,
                     void *dst, size_t n, backend_cpu_read cpu, void *arg);

int backend_read_may_queue(const backend *b, size_t n)
{
    if (!b || !b->o.reads || !n || n > BACKEND_READ_FULL || n > UINT32_MAX) return 0;
    int m = backend_mode(b);
    return m != BACKEND_OFF && !(m == BACKEND_AUTO && n < b->o.read_min) &&
           backend_gpu_available();
}

ssize_t backend_read(backend *b, const arc *a, uint64_t gen, uint32_t ent, uint64_t off,
                     void *dst, size_t n, backend_cpu_read cpu, void *arg)
{
    if (!b) return on_cpu(NULL, cpu, arg, ent, off, dst, n);
    backend_reads *r = &b->rd;
    raise_to(&r->most, __atomic_add_fetch(&r->active, 1, __ATOMIC_RELAXED));
    ssize_t k = serve(b, a, gen, ent, off, dst, n, cpu, arg);
    __atomic_sub_fetch(&r->active, 1, __ATOMIC_RELAXED);
    return k;
}

void backend_reads_init(backend_reads *r)
{
    pthread_condattr_t ca;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the batch window's deadline */
    pthread_cond_init(&r->work, &ca);
    pthread_cond_init(&r->done, NULL);
    pthread_condattr_destroy(&ca);
    r->tail = &r->head;
    readcost_init(&r->cost);
}

#ifndef TDC_HAVE_CUDA
static ssize_t serve(backend *b, const arc *a, uint64_t gen, uint32_t ent, uint64_t off,
                     void *dst, size_t n, backend_cpu_read cpu, void *arg)
{
    (void)a;
    (void)gen;
    return on_cpu(&b->rd, cpu, arg, ent, off, dst, n);
}

void backend_prepare(backend *b, const arc *a, uint64_t gen)
{
    (void)b;
    (void)a;
    (void)gen;
}

static void stop_batcher(backend_reads *r)
{
    (void)r;
}
#else

enum { RQ_WAIT, RQ_GPU, RQ_CPU };

static double ts_ns(const struct timespec *t)
{
    return (double)t->tv_sec * 1e9 + (double)t->tv_nsec;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ts_ns(&t);
}

/* Room for a batch of n reads; r->mu held. */
static int q_room(backend_reads *r, size_t n)
{
    if (!r->pin && !(r->pin = gpu_host_alloc(BACKEND_READ_FULL))) return -ENOMEM;
    if (n <= r->cap) return 0;
    size_t c = n > 2 * r->cap ? n : 2 * r->cap;
    gpu_req *q = realloc(r->req, c * sizeof *q);
    if (q) r->req = q;
    uint32_t *g = q ? realloc(r->got, c * sizeof *g) : NULL;
    if (g) r->got = g;
    if (!q || !g) return -ENOMEM;
    r->cap = c;
    return 0;
}

/* The n reads (`bytes` in all) from list l as one gpu_extract into r->pin: 1 when the GPU
 * served them all, 0 when the CPU must (auto mode and the GPU busy, or a failure). *uploaded
 * is set when the batch had to upload the archive first. r->mu not held; the batcher is the only
 * user of pin, req and got. */
static int run_batch(backend *b, const arc *a, uint64_t gen, backend_rreq *l, size_t n,
                     size_t bytes, int *uploaded)
{
    backend_reads *r = &b->rd;
    if (backend_mode(b) == BACKEND_ON)
        pthread_mutex_lock(&b->gpu_lock);
    else if (pthread_mutex_trylock(&b->gpu_lock))
        return 0; /* an analytic holds the GPU: the CPU threads are free */
    size_t k = 0;
    for (backend_rreq *q = l; q; q = q->next, k++)
        r->req[k] = (gpu_req){q->ent, (uint32_t)q->n, q->off};
    *uploaded = !backend_resident(b, a, gen, 0);
    gpu_gram *g = backend_resident(b, a, gen, 1); /* once per archive: the first batch uploads */
    int64_t got = g ? gpu_extract(g, r->req, n, r->pin, BACKEND_READ_FULL, r->got) : -EIO;
    if (got < 0 && g && got != -EINVAL && got != -ENOTSUP) backend_drop(b, g); /* may be unusable */
    pthread_mutex_unlock(&b->gpu_lock);
    int ok = got == (int64_t)bytes;
    size_t pos = 0;
    k = 0;
    for (backend_rreq *q = l; ok && q; q = q->next, k++) {
        ok = r->got[k] == q->n; /* a read inside the file always gets all its bytes */
        q->src = r->pin + pos;
        pos += q->n;
    }
    if (!ok) {
        if (got >= 0)
            tdc_error(-EIO, "gpu: extract returned %lld bytes, not %zu", (long long)got, bytes);
        backend_fallback(b);
    }
    return ok;
}

/* GPU batches not timed for auto's cost model at the start (see batcher). */
#define READ_WARMUP 8

static void deadline_wait(backend *b)
{
    backend_reads *r = &b->rd;
    unsigned us = b->o.read_wait_us;
    if (!us) return;
    struct timespec d = r->first;
    d.tv_nsec += (long)us * 1000;
    d.tv_sec += d.tv_nsec / 1000000000;
    d.tv_nsec %= 1000000000;
    while (!r->stop && r->bytes < BACKEND_READ_FULL &&
           pthread_cond_timedwait(&r->work, &r->mu, &d) != ETIMEDOUT) {
    }
}

/* Detach the oldest queued reads, up to BACKEND_READ_FULL bytes (at least one): their count
 * in *n, their bytes in *bytes; r->mu held. */
static backend_rreq *take(backend_reads *r, size_t *n, size_t *bytes_out)
{
    backend_rreq *l = r->head, **p = &r->head;
    size_t bytes = 0;
    for (*n = 0; *p && (!*n || bytes + (*p)->n <= BACKEND_READ_FULL); p = &(*p)->next, ++*n)
        bytes += (*p)->n;
    r->head = *p;
    *p = NULL;
    if (!r->head) r->tail = &r->head;
    r->bytes -= bytes;
    if (r->head) clock_gettime(CLOCK_MONOTONIC, &r->first);
    *bytes_out = bytes;
    return l;
}

static void *batcher(void *arg)
{
    backend *b = arg;
    backend_reads *r = &b->rd;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        int idle = !r->head; /* its batch then starts when its first read arrived */
        while (!r->head && !r->stop)
            pthread_cond_wait(&r->work, &r->mu);
        if (r->stop) break;
        deadline_wait(b);
        if (r->stop) break;
        while (r->copying) /* the last batch's callers still read pin */
            pthread_cond_wait(&r->done, &r->mu);
        if (!r->head) continue;
        size_t n, bytes;
        const arc *a = r->a;
        uint64_t gen = r->gen;
        double from = idle ? ts_ns(&r->first) : now_ns();
        backend_rreq *l = take(r, &n, &bytes);
        int ok = !q_room(r, n), upload = 0;
        r->busy = 1;
        r->run_start = now_ns();
        r->run_bytes = bytes;
        pthread_mutex_unlock(&r->mu);
        if (ok) ok = run_batch(b, a, gen, l, n, bytes, &upload);
        pthread_mutex_lock(&r->mu);
        r->busy = 0;
        /* The callers wait for r->mu, so the list stays valid until this loop ends. */
        for (backend_rreq *q = l; q; q = q->next)
            q->state = ok ? RQ_GPU : RQ_CPU;
        if (ok) {
            /* The cost model takes the batch once its last copy is done; not the first
             * READ_WARMUP batches, nor one that uploaded the archive: a cold GPU (the pinned
             * buffer allocated, clocks rising, the upload) takes many times what a batch
             * does, and with only such times the model keeps reads off the GPU. */
            r->turn_from = upload || r->batches < READ_WARMUP ? -1 : from;
            r->turn_bytes = bytes;
            r->copying = n;
            __atomic_fetch_add(&r->batches, 1, __ATOMIC_RELAXED);
            raise_to(&r->largest, (uint32_t)n);
        }
        pthread_cond_broadcast(&r->done);
    }
    for (backend_rreq *q = r->head; q; q = q->next) /* stopping: the CPU serves what is left */
        q->state = RQ_CPU;
    r->head = NULL;
    r->tail = &r->head;
    r->bytes = 0;
    pthread_cond_broadcast(&r->done);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Queue q for the batcher, starting it on first use: 0, or nonzero when the CPU must serve q
 * (another archive's reads are queued, or no thread). r->mu held. */
static int enqueue(backend *b, backend_rreq *q, const arc *a, uint64_t gen)
{
    backend_reads *r = &b->rd;
    if (!r->started) {
        if (r->stop || pthread_create(&r->th, NULL, batcher, b)) return -1;
        r->started = 1;
    }
    if (r->head && (r->a != a || r->gen != gen)) return -1;
    if (!r->head) {
        r->a = a;
        r->gen = gen;
        clock_gettime(CLOCK_MONOTONIC, &r->first);
    }
    *r->tail = q;
    r->tail = &q->next;
    r->bytes += q->n;
    pthread_cond_signal(&r->work);
    return 0;
}

/* An auto read of n bytes that `side` (0 GPU, 1 CPU) served in ns, for backend_read_stats. */
static void count_timed(backend_reads *r, int side, size_t n, double ns)
{
    __atomic_fetch_add(&r->e2e_ns[side], (uint64_t)ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->e2e_bytes[side], (uint64_t)n, __ATOMIC_RELAXED);
}

/* A read the GPU could have served, served on the CPU; in auto mode timed for the cost
 * model. */
static ssize_t timed_cpu(backend_reads *r, int m, backend_cpu_read cpu, void *arg, uint32_t ent,
                         uint64_t off, void *dst, size_t n)
{
    if (m != BACKEND_AUTO) return on_cpu(r, cpu, arg, ent, off, dst, n);
    double t = now_ns();
    ssize_t k = on_cpu(r, cpu, arg, ent, off, dst, n);
    t = now_ns() - t;
    if (k == (ssize_t)n) {
        count_timed(r, 1, n, t);
        pthread_mutex_lock(&r->mu);
        readcost_cpu(&r->cost, n, t);
        pthread_mutex_unlock(&r->mu);
    }
    return k;
}

static ssize_t serve(backend *b, const arc *a, uint64_t gen, uint32_t ent, uint64_t off,
                     void *dst, size_t n, backend_cpu_read cpu, void *arg)
{
    backend_reads *r = &b->rd;
    int m = backend_mode(b);
    if (!gen || !backend_read_may_queue(b, n)) return on_cpu(r, cpu, arg, ent, off, dst, n);
    backend_rreq q = {ent, off, n, RQ_WAIT, NULL, NULL};
    double t = m == BACKEND_AUTO ? now_ns() : 0;
    pthread_mutex_lock(&r->mu);
    /* Auto: a read joins the queue only if the GPU is expected to have it done (what is left
     * of the running batch, then the next one with it) no later than this thread's CPU;
     * otherwise the CPU takes it, so both work at once. */
    if (m == BACKEND_AUTO) {
        double left = 0; /* none runs */
        if (r->busy) { /* at least a little, even when it runs longer than expected */
            left = r->run_start + readcost_batch_ns(&r->cost, r->run_bytes) - now_ns();
            if (left < 1) left = 1;
        }
        if (!readcost_to_gpu(&r->cost, n, r->bytes, left)) q.state = RQ_CPU;
    }
    if (q.state == RQ_WAIT && enqueue(b, &q, a, gen)) q.state = RQ_CPU;
    while (q.state == RQ_WAIT)
        pthread_cond_wait(&r->done, &r->mu);
    pthread_mutex_unlock(&r->mu);
    if (q.state == RQ_CPU) return timed_cpu(r, m, cpu, arg, ent, off, dst, n);
    memcpy(dst, q.src, n);
    count_read(r, 0, n);
    if (m == BACKEND_AUTO) count_timed(r, 0, n, now_ns() - t);
    pthread_mutex_lock(&r->mu);
    if (!--r->copying) { /* the batch's readers have their bytes: what it cost them */
        if (r->turn_from >= 0) readcost_gpu(&r->cost, r->turn_bytes, now_ns() - r->turn_from);
        pthread_cond_broadcast(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    return (ssize_t)n;
}

void backend_prepare(backend *b, const arc *a, uint64_t gen)
{
    if (!b || backend_mode(b) == BACKEND_OFF || !gen || !backend_gpu_available()) return;
    pthread_mutex_lock(&b->gpu_lock);
    backend_resident(b, a, gen, 1);
    pthread_mutex_unlock(&b->gpu_lock);
}

/* Stop the batcher thread (the CPU serves what is queued) and free its buffers. */
static void stop_batcher(backend_reads *r)
{
    pthread_mutex_lock(&r->mu);
    int started = r->started;
    r->stop = 1;
    if (started) pthread_cond_signal(&r->work);
    pthread_mutex_unlock(&r->mu);
    if (started) pthread_join(r->th, NULL);
    gpu_host_free(r->pin);
    free(r->req);
    free(r->got);
}
#endif

void backend_reads_free(backend_reads *r)
{
    stop_batcher(r);
    pthread_cond_destroy(&r->work);
    pthread_cond_destroy(&r->done);
    pthread_mutex_destroy(&r->mu);
}
