#include "pack.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#include "arc.h"
#include "err.h"
#include "seq.h"
#include "shape.h"
#include "tok.h"

/* A segment being compressed on the worker thread. */
typedef struct worker {
    vec32 toks; /* token ids, SEQ_BARRIER after each file */
    seq_out out;
    int rc;
    char err[256];
    pthread_t th;
    int running;
} worker;

typedef struct packer {
    const pack_opts *o;
    pack_stats *st;
    dict *d;
    gbuild gb;
    vec32 cur;              /* the segment being tokenized */
    worker w[PACK_WORKERS]; /* a ring: w[head] is the oldest segment in flight */
    unsigned head, inflight;
    uint64_t seg;
    uint64_t done, total;
    /* entries, in archive order */
    arc_entry *ents;
    size_t nents, cap;
    /* regular files with more than one link: (device, inode) -> entry, to keep hard links */
    struct hlink {
        dev_t dev;
        ino_t ino;
        size_t ent;
    } * links;
    size_t nlinks, caplinks;
} packer;

static void *work(void *p)
{
    worker *w = p;
    seq *s = seq_new(w->toks.n);
    w->rc = -ENOMEM;
    if (s) {
        w->rc = 0;
        for (size_t i = 0; i < w->toks.n && !w->rc; i++)
            w->rc = w->toks.p[i] == SEQ_BARRIER ? seq_barrier(s) : seq_push(s, w->toks.p[i]);
        if (!w->rc) w->rc = seq_finish(s, &w->out);
        seq_free(s);
    }
    if (w->rc) snprintf(w->err, sizeof w->err, "%s", tdc_errmsg());
    return NULL;
}

/* Wait for the oldest segment in flight and merge it into the grammar (segments must be
 * merged in stream order). */
static int collect(packer *p)
{
    if (!p->inflight) return 0;
    worker *w = &p->w[p->head];
    pthread_join(w->th, NULL);
    w->running = 0;
    p->head = (p->head + 1) % PACK_WORKERS;
    p->inflight--;
    int rc = w->rc;
    if (rc) return tdc_error(rc, "compressing segment: %s", w->err);
    rc = gbuild_add(&p->gb, &w->out);
    seq_out_free(&w->out);
    p->st->segments++;
    return rc;
}

/* Hand the current segment to a free worker, merging the oldest one first if all are busy. */
static int flush(packer *p)
{
    int rc = p->inflight == PACK_WORKERS ? collect(p) : 0;
    if (rc || !p->cur.n) return rc;
    worker *w = &p->w[(p->head + p->inflight) % PACK_WORKERS];
    vec32 t = w->toks;
    w->toks = p->cur;
    p->cur = t;
    p->cur.n = 0;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)256 << 20); /* Sequitur recurses */
    rc = pthread_create(&w->th, &at, work, w);
    pthread_attr_destroy(&at);
    if (rc) return tdc_error(-rc, "cannot start worker thread");
    w->running = 1;
    p->inflight++;
    return 0;
}

static int emit(void *ctx, const unsigned char *t, size_t n)
{
    packer *p = ctx;
    uint32_t id;
    int rc = dict_intern(p->d, t, n, &id);
    if (rc) return rc;
    if (vec32_push(&p->cur, id)) return -ENOMEM;
    p->st->tokens++;
    if (p->cur.n >= p->seg) return flush(p);
    return 0;
}

static int add_entry(packer *p, const char *path, const struct stat *sb, uint8_t type)
{
    if (p->nents == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        arc_entry *e = realloc(p->ents, cap * sizeof *e);
        if (!e) return -ENOMEM;
        p->ents = e;
        p->cap = cap;
    }
    arc_entry *e = &p->ents[p->nents];
    memset(e, 0, sizeof *e);
    if (!(e->path = strdup(path))) return -ENOMEM;
    p->nents++;
    e->type = type;
    e->mode = sb->st_mode & 07777;
    e->uid = sb->st_uid;
    e->gid = sb->st_gid;
    e->mtime_sec = sb->st_mtim.tv_sec;
    e->mtime_nsec = (uint32_t)sb->st_mtim.tv_nsec;
    /* Directories keep their on-disk size so a mount shows the same st_size. */
    e->size = type == ARC_LNK ? 0 : (uint64_t)sb->st_size;
    return 0;
}

/* A file with several links: the first name seen holds the content, later ones share its
 * inode number (set here; arc_write numbers the rest). */
static int note_link(packer *p, const struct stat *sb)
{
    arc_entry *e = &p->ents[p->nents - 1];
    for (size_t i = 0; i < p->nlinks; i++)
        if (p->links[i].dev == sb->st_dev && p->links[i].ino == sb->st_ino) {
            arc_entry *f = &p->ents[p->links[i].ent];
            if (!f->ino) f->ino = p->links[i].ent + 1;
            e->ino = f->ino;
            return 0;
        }
    if (p->nlinks == p->caplinks) {
        size_t cap = p->caplinks ? p->caplinks * 2 : 64;
        struct hlink *n = realloc(p->links, cap * sizeof *n);
        if (!n) return -ENOMEM;
        p->links = n;
        p->caplinks = cap;
    }
    p->links[p->nlinks++] = (struct hlink){sb->st_dev, sb->st_ino, p->nents - 1};
    return 0;
}

static int by_xname(const void *a, const void *b)
{
    return strcmp(((const arc_xattr *)a)->name, ((const arc_xattr *)b)->name);
}

/* Keep the user.* extended attributes of `path` (without the prefix), sorted by name.
 * File systems without xattrs simply have none. */
static int read_xattrs(const char *path, arc_entry *e)
{
    char list[65536];
    ssize_t n = llistxattr(path, list, sizeof list);
    if (n <= 0) return 0;
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(list + i) + 1) {
        if (strncmp(list + i, "user.", 5) || !list[i + 5]) continue;
        unsigned char val[65536];
        ssize_t k = lgetxattr(path, list + i, val, sizeof val);
        if (k < 0) continue; /* removed meanwhile */
        arc_xattr *x = realloc(e->xattrs, (e->nxattrs + 1) * sizeof *x);
        if (!x) return -ENOMEM;
        e->xattrs = x;
        x = &e->xattrs[e->nxattrs];
        x->name = strdup(list + i + 5);
        x->val = malloc(k ? (size_t)k : 1);
        x->len = (uint32_t)k;
        if (!x->name || !x->val) {
            free(x->name);
            free(x->val);
            return -ENOMEM;
        }
        memcpy(x->val, val, (size_t)k);
        e->nxattrs++;
    }
    sort_n(e->xattrs, e->nxattrs, sizeof *e->xattrs, by_xname);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Depth-first walk with sorted siblings, which is arc_path_cmp order. `rel` is the path
 * inside the archive ("" for the top), `abs` the path on disk. */
static int walk(packer *p, const char *abs, const char *rel)
{
    DIR *dir = opendir(abs);
    if (!dir) return tdc_error(-errno, "%s: %s", abs, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = -ENOMEM;
                break;
            }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(dir);
    if (!rc) sort_n(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n && !rc; i++) {
        size_t la = strlen(abs), lr = strlen(rel), ln = strlen(names[i]);
        char *a = malloc(la + ln + 2), *r = malloc(lr + ln + 2);
        if (!a || !r) {
            free(a);
            free(r);
            rc = -ENOMEM;
            break;
        }
        sprintf(a, "%s/%s", abs, names[i]);
        sprintf(r, "%s%s%s", rel, lr ? "/" : "", names[i]);
        struct stat sb;
        if (lstat(a, &sb) < 0) {
            rc = tdc_error(-errno, "%s: %s", a, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            p->st->dirs++;
            if (!(rc = add_entry(p, r, &sb, ARC_DIR)) &&
                !(rc = read_xattrs(a, &p->ents[p->nents - 1])))
                rc = walk(p, a, r);
        } else if (S_ISREG(sb.st_mode)) {
            p->st->files++;
            rc = add_entry(p, r, &sb, ARC_REG);
            if (!rc) rc = read_xattrs(a, &p->ents[p->nents - 1]);
            if (!rc && sb.st_nlink > 1) rc = note_link(p, &sb);
            if (!rc && !p->ents[p->nents - 1].ino) p->total += (uint64_t)sb.st_size;
        } else if (S_ISLNK(sb.st_mode)) {
            p->st->links++;
            char *t = malloc((size_t)sb.st_size + 1);
            ssize_t k = t ? readlink(a, t, (size_t)sb.st_size + 1) : -1;
            if (k < 0 || k > sb.st_size) {
                rc = tdc_error(t ? -errno : -ENOMEM, "%s: cannot read link", a);
                free(t);
            } else {
                t[k] = 0;
                rc = add_entry(p, r, &sb, ARC_LNK);
                if (!rc) {
                    p->ents[p->nents - 1].link = t;
                    p->ents[p->nents - 1].size = (uint64_t)k;
                    rc = read_xattrs(a, &p->ents[p->nents - 1]);
                } else {
                    free(t);
                }
            }
            if (!rc && sb.st_nlink > 1) rc = note_link(p, &sb);
        } else if (arc_type_of_mode(sb.st_mode)) { /* FIFO, socket or device: no content */
            p->st->special++;
            rc = add_entry(p, r, &sb, arc_type_of_mode(sb.st_mode));
            if (!rc) {
                arc_entry *e = &p->ents[p->nents - 1];
                e->size = 0;
                if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) e->rdev = (uint64_t)sb.st_rdev;
                rc = read_xattrs(a, e);
            }
            if (!rc && sb.st_nlink > 1) rc = note_link(p, &sb);
        } else {
            p->st->skipped++;
            if (p->o->warn) {
                char msg[512];
                snprintf(msg, sizeof msg, "skipping %s: a file type archives cannot hold", a);
                p->o->warn(p->o->ctx, msg);
            }
        }
        free(a);
        free(r);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* Tokenize one file into the current segment; records its size and hash. */
static int pack_file(packer *p, const char *top, arc_entry *e, unsigned char *blk, size_t blksz)
{
    char *path = malloc(strlen(top) + strlen(e->path) + 2);
    if (!path) return -ENOMEM;
    sprintf(path, "%s/%s", top, e->path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    XXH3_state_t *hs = XXH3_createState();
    tok_state ts = {.npend = 0};
    uint64_t size = 0;
    int rc = hs ? 0 : -ENOMEM;
    if (hs) XXH3_64bits_reset(hs);
    while (!rc) {
        ssize_t k = read(fd, blk, blksz);
        if (k < 0) {
            if (errno == EINTR) continue;
            rc = tdc_error(-errno, "%s: read: %s", path, strerror(errno));
            break;
        }
        if (k == 0) break;
        XXH3_64bits_update(hs, blk, (size_t)k);
        size += (uint64_t)k;
        rc = tok_feed(&ts, blk, (size_t)k, emit, p);
        p->done += (uint64_t)k;
        if (p->o->progress) p->o->progress(p->o->ctx, p->done, p->total);
    }
    if (!rc) rc = tok_finish(&ts, emit, p);
    if (!rc && vec32_push(&p->cur, SEQ_BARRIER)) rc = -ENOMEM;
    if (!rc) {
        e->size = size;
        e->hash = XXH3_64bits_digest(hs);
    }
    XXH3_freeState(hs);
    close(fd);
    free(path);
    return rc;
}

/* 1 if entry i is a further name of a hard-linked file (its content is the first name's). */
static int is_extra_link(const packer *p, size_t i)
{
    return p->ents[i].ino && p->ents[i].ino != i + 1;
}

int pack_dir(const char *dir, const char *out, const pack_opts *opts, pack_stats *stats)
{
    static const pack_opts none = {0};
    packer p = {.o = opts ? opts : &none, .st = stats};
    arc a = {0};
    struct stat sb;
    unsigned char *blk = NULL;
    const size_t blksz = 1 << 20;
    int rc;
    memset(stats, 0, sizeof *stats);
    p.seg = p.o->seg_tokens ? p.o->seg_tokens : PACK_SEG_DEFAULT;
    if (stat(dir, &sb) < 0) return tdc_error(-errno, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return tdc_error(-ENOTDIR, "%s: not a directory", dir);
    if (!(p.d = dict_new()) || !(blk = malloc(blksz))) {
        rc = -ENOMEM;
        goto done;
    }
    if ((rc = add_entry(&p, "", &sb, ARC_DIR)) || (rc = read_xattrs(dir, &p.ents[0])) ||
        (rc = walk(&p, dir, "")))
        goto done;
    for (size_t i = 0; i < p.nents; i++) {
        if (p.ents[i].type != ARC_REG || is_extra_link(&p, i)) continue;
        if ((rc = pack_file(&p, dir, &p.ents[i], blk, blksz))) goto done;
        stats->bytes_in += p.ents[i].size;
    }
    if ((rc = flush(&p))) goto done;
    while (p.inflight)
        if ((rc = collect(&p))) goto done;
    /* Files closed in order: the k-th barrier ends the k-th regular file. */
    uint64_t k = 0, start = 0;
    for (size_t i = 0; i < p.nents; i++) {
        if (p.ents[i].type != ARC_REG) continue;
        if (is_extra_link(&p, i)) {
            /* Same content as the first name of the inode, which came earlier. */
            const arc_entry *f = &p.ents[p.ents[i].ino - 1];
            p.ents[i].size = f->size;
            p.ents[i].hash = f->hash;
            p.ents[i].root_start = p.ents[i].root_len = 0;
            continue;
        }
        p.ents[i].root_start = start;
        p.ents[i].root_len = p.gb.file_end.p[k] - start;
        start = p.gb.file_end.p[k++];
    }
    shape_opts so = {.keep_rules = p.o->keep_rules, .freq_order = p.o->freq_order};
    if ((rc = gbuild_finish(&p.gb, dict_count(p.d), &a.g)) ||
        (rc = shape_grammar(&a.g, &p.d, p.ents, p.nents, &so)))
        goto done;
    a.dict = p.d;
    a.plain_dict = p.o->plain_dict;
    a.ents = p.ents;
    a.nents = (uint32_t)p.nents;
    rc = arc_write(out, &a, p.o->level ? p.o->level : PACK_LEVEL_DEFAULT);
    stats->bytes_out = a.file_size;
    stats->dict_tokens = dict_count(p.d);
    stats->rules = a.g.nrules;
    gram_free(&a.g);
    free(a.byino); /* the inode order arc_write's table check built */
done:
    for (int i = 0; i < PACK_WORKERS; i++) {
        if (p.w[i].running) pthread_join(p.w[i].th, NULL);
        seq_out_free(&p.w[i].out);
        vec32_free(&p.w[i].toks);
    }
    vec32_free(&p.cur);
    gbuild_free(&p.gb);
    dict_free(p.d);
    for (size_t i = 0; i < p.nents; i++)
        arc_entry_clear(&p.ents[i]);
    free(p.ents);
    free(p.links);
    free(blk);
    if (rc == -ENOMEM) tdc_error(rc, "out of memory while packing");
    return rc;
}
