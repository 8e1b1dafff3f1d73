#include "push.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <xxhash.h>

typedef struct fs_push {
    fs_ctx *c;
    pthread_t th;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t hint; /* the file whose READ came last (0: none since the last look) */
    uint64_t done; /* the last file stored or passed over */
    int stop;
    unsigned char *buf; /* PUSH_BYTES */
    vol_reader rd;
} fs_push;

/* Store file `ino` in the kernel's cache if it is small, unchanged, at hand and whole: 0, or
 * -ENOENT when the kernel does not hold the inode (the reader has not listed its directory yet). */
static int store(fs_push *p, uint64_t ino)
{
    fs_ctx *c = p->c;
    struct stat st;
    uint64_t want;
    /* only what is at hand: a store never loads a shard (under a budget it would take the
     * room of the reader's) */
    if (vol_getattr(c->v, ino, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (size_t)st.st_size > PUSH_BYTES || !vol_clean_hash(c->v, ino, &want) ||
        !vol_read_ready(c->v, ino, 0, (size_t)st.st_size))
        return 0;
    size_t n = (size_t)st.st_size, got = 0;
    while (got < n) {
        ssize_t r = vol_read(c->v, &p->rd, ino, got, p->buf + got, n - got);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    if (XXH3_64bits(p->buf, n) != want) return 0; /* damaged: its READ fails with EIO */
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
    bv.buf[0].mem = p->buf;
    return fuse_lowlevel_notify_store(c->se, ino, 0, &bv, 0) == -ENOENT ? -ENOENT : 0;
}

static void *push_main(void *arg)
{
    fs_push *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        if (!p->hint) {
            pthread_cond_wait(&p->cond, &p->lock);
            continue;
        }
        /* Go on after what was stored when the hint's window overlaps it; else start right
         * after the hint (another reader, or one that jumped). A hint at or past the file
         * being stored (the reader overtook this thread) starts the window again there. */
        uint64_t h = p->hint, ino = h < p->done && h + PUSH_FILES > p->done ? p->done + 1 : h + 1;
        p->hint = 0;
        for (; ino <= h + PUSH_FILES && !p->stop && (!p->hint || p->hint < ino); ino++) {
            pthread_mutex_unlock(&p->lock);
            int rc = store(p, ino);
            pthread_mutex_lock(&p->lock);
            if (rc) break; /* not listed yet: the window ends here, the next hint goes on */
            p->done = ino;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Free p, whose thread is not running (never started, or joined). */
static void push_free(fs_push *p)
{
    vol_reader_free(&p->rd);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p->buf);
    free(p);
}

int fs_push_start(fs_ctx *c)
{
    fs_push *p = calloc(1, sizeof *p);
    if (!p) return -ENOMEM;
    p->c = c;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    vol_reader_init(&p->rd);
    int rc = 0;
    if (!(p->buf = malloc(PUSH_BYTES)))
        rc = -ENOMEM;
    else if (pthread_create(&p->th, NULL, push_main, p))
        rc = -EAGAIN;
    if (rc)
        push_free(p);
    else
        c->push = p;
    return rc;
}

void fs_push_hint(fs_ctx *c, uint64_t ino)
{
    fs_push *p = c->push;
    pthread_mutex_lock(&p->lock);
    p->hint = ino;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void fs_push_stop(fs_ctx *c)
{
    fs_push *p = c->push;
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->th, NULL);
    push_free(p);
    c->push = NULL;
}
