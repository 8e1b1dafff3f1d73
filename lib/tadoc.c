/* libtadoc's public API (include/tadoc.h): a thin layer over arc (the archive), idx (random
 * access), ana (analytics) and words (count/search). It keeps the engine's structures out of
 * the public header so they can change without breaking programs built against it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/analytics/ana.h"
#include "../engine/analytics/analytics.h"
#include "../engine/format/arc.h"
#include "../engine/base/err.h"
#include "../include/tadoc.h"
#include "../engine/index/idx.h"
#include "../engine/index/words.h"
#include "env.h"

#define TADOC_LIB_VERSION "0.1.0"

struct tadoc_archive {
    arc *a;
    idx *x;
    pthread_mutex_t wlock; /* guards building `w` */
    idx_words *w;          /* word index, built by the first count or search */
    ana_ctx *ana;          /* the analytics' options (the environment's) and kept preparation */
};

const char *tadoc_version(void)
{
    return TADOC_LIB_VERSION;
}

const char *tadoc_errmsg(void)
{
    return tdc_errmsg();
}

void tadoc_free(void *p)
{
    free(p);
}

int tadoc_open(const char *path, tadoc_archive **out)
{
    *out = NULL;
    if (!path) return tdc_error(-EINVAL, "no archive path given");
    tadoc_archive *t = calloc(1, sizeof *t);
    if (!t) return tdc_error(-ENOMEM, "out of memory");
    /* The analytics' TADOC_* variables hold for programs using the library too. */
    backend_opts o;
    backend_opts_init(&o);
    int env = tdc_env_settings(&o);
    if (env) {
        free(t);
        return env;
    }
    if (!(t->ana = ana_ctx_new(&o.ana))) {
        free(t);
        return tdc_error(-ENOMEM, "out of memory");
    }
    int rc = arc_open(path, &t->a);
    if (!rc && (rc = idx_build(t->a, &t->x))) tdc_error_ctx(rc, "%s", path);
    if (rc) {
        arc_free(t->a);
        ana_ctx_free(t->ana);
        free(t);
        return rc;
    }
    pthread_mutex_init(&t->wlock, NULL);
    *out = t;
    return 0;
}

void tadoc_close(tadoc_archive *t)
{
    if (!t) return;
    idx_words_free(t->w);
    idx_free(t->x);
    arc_free(t->a);
    ana_ctx_free(t->ana);
    pthread_mutex_destroy(&t->wlock);
    free(t);
}

size_t tadoc_entry_count(const tadoc_archive *t)
{
    return t->a->nents;
}

int tadoc_entry(const tadoc_archive *t, size_t i, tadoc_stat *st)
{
    if (i >= t->a->nents) return tdc_error(-EINVAL, "entry %zu: out of range", i);
    const arc_entry *e = &t->a->ents[i];
    *st = (tadoc_stat){.path = e->path,
                       .link = e->link,
                       .type = e->type,
                       .mode = e->mode,
                       .uid = e->uid,
                       .gid = e->gid,
                       .mtime_sec = e->mtime_sec,
                       .mtime_nsec = e->mtime_nsec,
                       .size = e->size,
                       .ino = e->ino,
                       .rdev = e->rdev,
                       .nlink = e->type == ARC_DIR ? 1 : arc_ino_links(t->a, e->ino, NULL)};
    return 0;
}

/* Entry index of `path` (leading slashes ignored), or -ENOENT with a message. */
static int64_t find(const arc *a, const char *path)
{
    if (!path) return tdc_error(-EINVAL, "no path given");
    while (*path == '/')
        path++;
    int64_t i = arc_lookup(a, path);
    if (i < 0) return tdc_error(-ENOENT, "%s: no such path in the archive", path);
    return i;
}

/* Entry index of the regular file `path`, or a negative errno with a message. */
static int64_t find_file(const arc *a, const char *path)
{
    int64_t i = find(a, path);
    if (i >= 0 && a->ents[i].type != ARC_REG)
        return tdc_error(-EISDIR, "%s: not a regular file", path);
    return i;
}

int tadoc_stat_path(const tadoc_archive *t, const char *path, tadoc_stat *st)
{
    int64_t i = find(t->a, path);
    return i < 0 ? (int)i : tadoc_entry(t, (size_t)i, st);
}

ssize_t tadoc_read(const tadoc_archive *t, const char *path, uint64_t off, void *dst, size_t n)
{
    int64_t i = find_file(t->a, path);
    if (i < 0) return i;
    ssize_t r = idx_extract(t->x, (uint32_t)i, off, dst, n);
    if (r < 0) tdc_error_ctx(r, "%s: read failed", path); /* keeps why (a damaged shard...) */
    return r;
}

int tadoc_analytic(tadoc_archive *t, int analytic, const char *scope, char **out, size_t *len)
{
    /* The public ids are the engine's plus one (include/tadoc.h keeps 0 unused). */
    _Static_assert(
        TADOC_WORDCOUNT == ANA_WORDCOUNT + 1 && TADOC_SORT == ANA_SORT + 1 &&
            TADOC_INVINDEX == ANA_INVINDEX + 1 && TADOC_TERMVECTOR == ANA_TERMVECTOR + 1 &&
            TADOC_SEQCOUNT == ANA_SEQCOUNT + 1 && TADOC_RANKEDINVINDEX == ANA_RANKEDINVINDEX + 1,
        "include/tadoc.h's analytics follow enum ana_id");
    *out = NULL;
    *len = 0;
    if (analytic < TADOC_WORDCOUNT || analytic > TADOC_RANKEDINVINDEX)
        return tdc_error(-EINVAL, "unknown analytic %d", analytic);
    int64_t first = scope ? find(t->a, scope) : 0;
    if (first < 0) return (int)first;
    uint32_t end = ana_subtree_end(t->a, (uint32_t)first);
    int rc = arc_range_damaged(t->a, (uint32_t)first, end, NULL); /* no wrong numbers */
    if (rc) return tdc_error_ctx(rc, "%s", ana_table[analytic - 1].name);
    buf b = {0};
    rc = ana_table[analytic - 1].cpu(t->ana, t->a, (uint32_t)first, end, NULL, &b);
    if (!rc) rc = buf_put(&b, "", 1); /* the terminating NUL */
    if (rc) {
        buf_free(&b);
        return rc == -ENOMEM ? tdc_error(rc, "out of memory") : rc;
    }
    *len = b.n - 1;
    *out = (char *)b.p; /* buf memory comes from malloc/realloc: tadoc_free releases it */
    return 0;
}

/* The word index, built once per handle by whichever query comes first. */
static int words_of(tadoc_archive *t, idx_words **w)
{
    int rc = 0;
    pthread_mutex_lock(&t->wlock);
    if (!t->w) rc = idx_words_build(t->x, &t->w);
    *w = t->w;
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int tadoc_count(tadoc_archive *t, const char *path, const char *word, uint64_t *count)
{
    *count = 0;
    if (!word) return tdc_error(-EINVAL, "no word given");
    int64_t i = find_file(t->a, path);
    if (i < 0) return (int)i;
    idx_words *w;
    int rc = words_of(t, &w);
    return rc ? rc : idx_count(w, (uint32_t)i, word, strlen(word), count);
}

int tadoc_search(tadoc_archive *t, const char *path, const char *word, uint64_t **offsets,
                 size_t *n)
{
    *offsets = NULL;
    *n = 0;
    if (!word) return tdc_error(-EINVAL, "no word given");
    int64_t i = find_file(t->a, path);
    if (i < 0) return (int)i;
    idx_words *w;
    vec64 v = {0};
    int rc = words_of(t, &w);
    if (!rc) rc = idx_search(w, (uint32_t)i, word, strlen(word), &v);
    if (rc) {
        vec64_free(&v);
        return rc;
    }
    *offsets = v.p;
    *n = v.n;
    return 0;
}
