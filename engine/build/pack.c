#include "pack.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "../format/arc.h"
#include "../format/ztrial.h"
#include "../base/err.h"
#include "../base/fio.h"
#include "../base/par.h"
#include "../grammar/seq.h"
#include "bare.h"
#include "shape.h"
#include "../base/tok.h"

/* One file's run in one shard: the k-th barrier of a shard ends its k-th part. */
typedef struct part {
    uint32_t ent;
    uint32_t shard; /* within the group until the groups are numbered */
    uint64_t start, len;
} part;

/* A group of consecutive content files, packed by one worker into one or more shards (more
 * only where a file is larger than a shard, cut on a token boundary). */
typedef struct group {
    uint32_t first, end; /* range of packer.files */
    arc_coded *sh;
    uint32_t nsh;
    size_t capsh;
    part *parts;
    size_t nparts, capparts;
    uint32_t base; /* index of its first shard in the archive */
    uint64_t tokens, dict_tokens, rules, segments; /* what packing it counted */
} group;

struct pack_job {
    const pack_opts *o;
    pack_stats st;
    uint64_t shard_size, seg;
    int level;
    /* entries, in archive order */
    arc_entry *ents;
    size_t nents, cap;
    uint32_t *files; /* entries that hold content, in order */
    unsigned char *copy; /* per files[i]: 1 where its content is the file's before it */
    size_t nfiles;
    group *groups;
    size_t ngroups;
    /* regular files with more than one link: (device, inode) -> entry, to keep hard links */
    struct hlink {
        dev_t dev;
        ino_t ino;
        size_t ent;
    } * links;
    size_t nlinks, caplinks;
    const char *top;
    /* shared by the workers, under lock */
    pthread_mutex_t lock;
    const unsigned char *take; /* the groups pack_run packs; NULL: all */
    arc_coded *all;            /* pack_shards: every group's shards in order (borrowed data) */
    uint32_t nall;
    size_t next_group;
    uint64_t done, total;
    int rc;
    char err[512];
    /* pack_run_to: each group's shards written to the sink as soon as it and every group
     * before it are packed, so that a pack holds the groups being packed and a few waiting
     * their turn, not every coded shard (`order`, over the groups) */
    arc_sink *sink;
    par_order order;
    pthread_cond_t turn; /* a group was written, or a worker failed */
};
typedef struct pack_job packer;

/* A shard being built by a worker: its dictionary, its token stream (SEQ_BARRIER after each
 * part) and the parts it holds. A shard stored as its text (`text`) keeps its parts' bytes
 * and lengths instead. */
typedef struct sbuild {
    packer *p;
    group *g;
    dict *d;
    vec32 toks;
    int text;
    buf raw;     /* text: the parts' bytes */
    vec64 lens;  /* text: each part's length */
    uint64_t bytes, tokens;
    uint64_t limit; /* the content after which the shard closes: the shard size, or more for a
                       copy of the file before it, which joins that file's shard */
    size_t part0;  /* first part of this shard in g->parts */
    uint32_t ent;  /* the file being tokenized */
    int last_word; /* the file's last token so far is a word */
    ZSTD_CCtx *cc; /* the quick passes' (NULL: no shard stored as its text) */
} sbuild;

/* The zstd level of the quick pass that finds incompressible files. */
#define TEXT_LEVEL 1

/* Room for element n of the array *p of *cap elements of `size` bytes (doubling it, from
 * `first`). */
static int room(void **p, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap) return 0;
    size_t c = *cap ? 2 * *cap : first;
    void *q = realloc(*p, c * size);
    if (!q) return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* Room in g for one more part, one more shard. */
static int part_room(group *g)
{
    return room((void **)&g->parts, &g->capparts, g->nparts, sizeof *g->parts, 64);
}

static int shard_room(group *g)
{
    return room((void **)&g->sh, &g->capsh, g->nsh, sizeof *g->sh, 4);
}

static int add_part(sbuild *b)
{
    group *g = b->g;
    if (part_room(g)) return -ENOMEM;
    if (b->text && vec64_push(&b->lens, 0)) return -ENOMEM;
    g->parts[g->nparts++] = (part){.ent = b->ent, .shard = g->nsh};
    return 0;
}


/* The builder left empty for the next shard. */
static int next_shard(sbuild *b)
{
    dict_free(b->d);
    b->d = NULL;
    b->toks.n = b->raw.n = b->lens.n = 0;
    b->bytes = b->tokens = 0;
    b->part0 = b->g->nparts;
    return b->text || (b->d = dict_new()) ? 0 : -ENOMEM;
}

/* Close a shard stored as its text: its parts' runs are the reader's tokens of each. */
static int close_text_shard(sbuild *b)
{
    group *g = b->g;
    vec64 runs = {0};
    int rc = shard_room(g);
    if (!rc)
        rc = arc_text_shard_encode(b->lens.p, b->lens.n, b->raw.p, b->p->level,
                                   !(b->p->o->plain & ARC_PLAIN_BARE), &g->sh[g->nsh], &runs);
    if (!rc) {
        uint64_t start = 0;
        for (size_t k = 0; k < runs.n; k++) {
            g->parts[b->part0 + k].start = start;
            g->parts[b->part0 + k].len = runs.p[k];
            start += runs.p[k];
        }
        g->tokens += start;
        g->dict_tokens += g->sh[g->nsh].info.ntokens;
        g->nsh++;
    }
    vec64_free(&runs);
    int rc2 = next_shard(b);
    return rc ? rc : rc2;
}

/* Sequitur over the shard's tokens, segment by segment, joined into one grammar. */
static int compress(sbuild *b, gbuild *gb)
{
    int rc = 0;
    for (size_t at = 0; at < b->toks.n && !rc; at += b->p->seg) {
        size_t n = b->toks.n - at < b->p->seg ? b->toks.n - at : b->p->seg;
        seq *s = seq_new(n);
        seq_out out = {0};
        if (!s) return -ENOMEM;
        for (size_t i = at; i < at + n && !rc; i++)
            rc = b->toks.p[i] == SEQ_BARRIER ? seq_barrier(s) : seq_push(s, b->toks.p[i]);
        if (!rc) rc = seq_finish(s, &out);
        seq_free(s);
        if (!rc) rc = gbuild_add(gb, &out);
        seq_out_free(&out);
        if (!rc) b->g->segments++;
    }
    return rc;
}

/* A grammar shard's text, the other way to store it (bare.h). */
typedef struct alt {
    buf text;   /* the parts' bytes with content, back to back */
    vec64 lens; /* their lengths */
    vec64 toks; /* each part's token count (empty parts too) */
} alt;

static void alt_free(alt *a)
{
    buf_free(&a->text);
    vec64_free(&a->lens);
    vec64_free(&a->toks);
}

/* The text of b's shard from its tokens (each part ends with a barrier), before shaping
 * renumbers them. */
static int bare_text(const sbuild *b, alt *a)
{
    uint64_t n = 0, len = 0;
    if (buf_reserve(&a->text, (size_t)b->bytes)) return -ENOMEM;
    for (size_t i = 0; i < b->toks.n; i++) {
        uint32_t id = b->toks.p[i];
        if (id == SEQ_BARRIER) {
            if ((len && vec64_push(&a->lens, len)) || vec64_push(&a->toks, n)) return -ENOMEM;
            n = len = 0;
            continue;
        }
        size_t tn;
        const unsigned char *t = dict_bytes(b->d, id, &tn);
        if (buf_put(&a->text, t, tn)) return -ENOMEM;
        len += tn;
        n++;
    }
    return 0;
}

/* Store b's shard, just coded as a grammar in g->sh[g->nsh] with its parts' runs in le, as
 * its bare text instead where that is worth it (bare_worth, bare_code) and the text's runs
 * are the grammar's token counts (so its files read the same); else leave it. *swapped says
 * which. */
static int try_bare(sbuild *b, alt *a, arc_entry *le, int *swapped)
{
    arc_coded *gc = &b->g->sh[b->g->nsh], tc;
    vec64 runs = {0};
    *swapped = 0;
    if (!bare_worth(b->cc, a->text.p, a->text.n, gc)) return 0;
    int keep = bare_code(a->text.p, a->lens.p, a->lens.n, b->p->level, gc, &tc, &runs);
    if (keep < 0) return keep;
    int better = keep;
    for (size_t k = 0, r = 0; keep && k < a->toks.n; k++) /* pieces: the parts with content */
        keep = !a->toks.p[k] || runs.p[r++] == a->toks.p[k];
    for (size_t k = 0, r = 0, start = 0; keep && k < a->toks.n; k++) {
        le[k].root_start = start;
        le[k].root_len = a->toks.p[k] ? runs.p[r++] : 0;
        start += le[k].root_len;
    }
    vec64_free(&runs);
    if (better && !keep) arc_coded_free(&tc);
    if (!keep) return 0;
    arc_coded_free(gc);
    *gc = tc;
    *swapped = 1;
    return 0;
}

/* Close the shard: compress, shape and code it; its parts get their runs. The builder is
 * left empty for the next shard. */
static int close_shard(sbuild *b)
{
    if (b->text) return close_text_shard(b);
    packer *p = b->p;
    group *g = b->g;
    gbuild gb = {0};
    gram gr = {0};
    alt a = {0};
    size_t np = g->nparts - b->part0;
    arc_entry *le = calloc(np ? np : 1, sizeof *le);
    int rc = le ? 0 : -ENOMEM, bare = 0;
    if (!rc && !(p->o->plain & ARC_PLAIN_BARE) && b->cc && b->bytes >= BARE_MIN)
        rc = bare_text(b, &a);
    if (!rc) rc = compress(b, &gb);
    if (!rc) rc = gbuild_finish(&gb, dict_count(b->d), &gr);
    uint64_t start = 0;
    for (size_t k = 0; !rc && k < np; k++) {
        le[k].type = ARC_REG;
        le[k].root_start = start;
        le[k].root_len = gb.file_end.p[k] - start;
        start = gb.file_end.p[k];
    }
    shape_opts so = {.keep_rules = p->o->keep_rules, .freq_order = p->o->freq_order};
    if (!rc) rc = shape_grammar(&gr, &b->d, le, np, &so);
    if (!rc) rc = shard_room(g);
    if (!rc) rc = arc_shard_encode(b->d, &gr, b->bytes, p->level, p->o->plain, &g->sh[g->nsh]);
    if (!rc && a.lens.n && (rc = try_bare(b, &a, le, &bare))) arc_coded_free(&g->sh[g->nsh]);
    if (!rc) {
        for (size_t k = 0; k < np; k++) {
            g->parts[b->part0 + k].start = le[k].root_start;
            g->parts[b->part0 + k].len = le[k].root_len;
        }
        g->tokens += b->tokens;
        g->dict_tokens += bare ? g->sh[g->nsh].info.ntokens : dict_count(b->d);
        g->rules += bare ? 0 : gr.nrules;
        g->nsh++;
    }
    alt_free(&a);
    gbuild_free(&gb);
    gram_free(&gr);
    free(le);
    int rc2 = next_shard(b);
    return rc ? rc : rc2;
}

/* One token of the file being read. Once the shard holds its size of content, it is closed
 * at the next token boundary that is not between two words (so no cut falls inside a word)
 * and the file goes on in the next shard. The cut waits for the next token, so a file that
 * ends there leaves no empty shard behind. */
static int emit(void *ctx, const unsigned char *t, size_t n)
{
    sbuild *b = ctx;
    int word = tok_is_word_byte(t[0]), rc;
    if (b->bytes >= b->limit && !(b->last_word && word)) {
        if (!b->text && vec32_push(&b->toks, SEQ_BARRIER)) return -ENOMEM;
        if ((rc = close_shard(b)) || (rc = add_part(b))) return rc;
    }
    if (b->text) {
        if (buf_put(&b->raw, t, n)) return -ENOMEM;
        b->lens.p[b->lens.n - 1] += n;
    } else {
        uint32_t id;
        if ((rc = dict_intern(b->d, t, n, &id))) return rc;
        if (vec32_push(&b->toks, id)) return -ENOMEM;
    }
    b->bytes += n;
    b->tokens++;
    b->last_word = word;
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
    /* The tree's modification time as all three, as squashfs keeps them: the source's
     * access times are what pack's own reads make them, and a new archive's files change
     * nothing yet. */
    e->atime_sec = e->ctime_sec = e->mtime_sec;
    e->atime_nsec = e->ctime_nsec = e->mtime_nsec;
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
    fio_long dl;
    int rc = fio_long_path(abs, &dl);
    if (rc) return rc;
    DIR *dir = opendir(dl.p);
    fio_long_end(&dl);
    if (!dir) return tdc_error(-errno, "%s: %s", abs, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
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
        fio_long al; /* `a` for the system calls; messages name `a` */
        if ((rc = fio_long_path(a, &al))) {
            free(a);
            free(r);
            break;
        }
        if (lstat(al.p, &sb) < 0) {
            rc = tdc_error(-errno, "%s: %s", a, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            p->st.dirs++;
            if (!(rc = add_entry(p, r, &sb, ARC_DIR)) &&
                !(rc = read_xattrs(al.p, &p->ents[p->nents - 1]))) {
                fio_long_end(&al); /* not held down the subtree: a descriptor a level */
                rc = walk(p, a, r);
            }
        } else if (S_ISREG(sb.st_mode)) {
            p->st.files++;
            rc = add_entry(p, r, &sb, ARC_REG);
            if (!rc) rc = read_xattrs(al.p, &p->ents[p->nents - 1]);
            if (!rc && sb.st_nlink > 1) rc = note_link(p, &sb);
            if (!rc && !p->ents[p->nents - 1].ino) p->total += (uint64_t)sb.st_size;
        } else if (S_ISLNK(sb.st_mode)) {
            p->st.links++;
            char *t = malloc((size_t)sb.st_size + 1);
            ssize_t k = t ? readlink(al.p, t, (size_t)sb.st_size + 1) : -1;
            if (k < 0 || k > sb.st_size) {
                rc = tdc_error(t ? -errno : -ENOMEM, "%s: cannot read link", a);
                free(t);
            } else {
                t[k] = 0;
                rc = add_entry(p, r, &sb, ARC_LNK);
                if (!rc) {
                    p->ents[p->nents - 1].link = t;
                    p->ents[p->nents - 1].size = (uint64_t)k;
                    rc = read_xattrs(al.p, &p->ents[p->nents - 1]);
                } else {
                    free(t);
                }
            }
            if (!rc && sb.st_nlink > 1) rc = note_link(p, &sb);
        } else if (arc_type_of_mode(sb.st_mode)) { /* FIFO, socket or device: no content */
            p->st.special++;
            rc = add_entry(p, r, &sb, arc_type_of_mode(sb.st_mode));
            if (!rc) {
                arc_entry *e = &p->ents[p->nents - 1];
                e->size = 0;
                if (S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode)) e->rdev = (uint64_t)sb.st_rdev;
                rc = read_xattrs(al.p, e);
            }
            if (!rc && sb.st_nlink > 1) rc = note_link(p, &sb);
        } else {
            p->st.skipped++;
            if (p->o->warn) {
                char msg[512];
                snprintf(msg, sizeof msg, "skipping %s: a file type archives cannot hold", a);
                p->o->warn(p->o->ctx, msg);
            }
        }
        fio_long_end(&al);
        free(a);
        free(r);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* Count bytes read for the progress report; -ECANCELED once the caller says stop. */
static int progress(packer *p, uint64_t k)
{
    pthread_mutex_lock(&p->lock);
    p->done += k;
    if (p->o->progress) p->o->progress(p->o->ctx, p->done, p->total);
    pthread_mutex_unlock(&p->lock);
    return p->o->stop && *p->o->stop ? tdc_error(-ECANCELED, "stopped by a signal") : 0;
}

/* A file that changed while it was packed (written to, grown or cut since the walk saw it),
 * as tar finds one: its archived bytes are those read, up to the size the walk saw, which may
 * be no state the file was ever in; one removed since the walk (fd < 0) is archived empty.
 * Warned of and counted (pack_stats.changed). */
static void note_change(packer *p, const arc_entry *e, int fd, uint64_t want, const char *path)
{
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && e->size == want && (uint64_t)sb.st_size == want &&
        sb.st_mtim.tv_sec == e->mtime_sec && (uint32_t)sb.st_mtim.tv_nsec == e->mtime_nsec)
        return;
    pthread_mutex_lock(&p->lock);
    p->st.changed++;
    pthread_mutex_unlock(&p->lock);
    if (p->o->warn) {
        char msg[PATH_MAX + 128];
        if (fd < 0)
            snprintf(msg, sizeof msg,
                     "%s: removed or no regular file before it was read (archived empty)", path);
        else
            snprintf(msg, sizeof msg, "%s: changed as it was read (archived: %llu bytes as read)",
                     path, (unsigned long long)e->size);
        p->o->warn(p->o->ctx, msg);
    }
}

int pack_incompressible(ZSTD_CCtx *cc, const unsigned char *p, size_t n)
{
    if (n < PACK_TEXT_MIN) return 0;
    size_t in = n < PACK_TEXT_SAMPLE ? n : PACK_TEXT_SAMPLE;
    size_t z = ztrial_size(cc, p, in, TEXT_LEVEL, 0); /* 0, no memory: a grammar works always */
    return z >= in - in / 10;
}

/* A file of `left` bytes begins in builder b. A shard that filled up exactly at the end of
 * the previous file is closed first, unless this file is empty: it adds nothing, and would
 * otherwise open a shard of no content (which every tree whose last file is empty got, its
 * one shard being exactly full). */
static int start_file(sbuild *b, uint32_t ent, uint64_t left, int copy)
{
    /* A copy of the file before it stays in its shard (where the grammar, or zstd in a text
     * shard, stores it in next to nothing), up to twice the shard size. */
    uint64_t s = b->p->shard_size;
    int join = copy && b->bytes + left <= 2 * s;
    int rc = b->bytes >= s && left > 0 && !join ? close_shard(b) : 0;
    b->limit = join ? b->bytes + left + 1 : s;
    b->ent = ent;
    b->last_word = 0;
    return rc ? rc : add_part(b);
}

/* Tokenize one file into the shard being built: gb's, or, for a file its first block shows
 * incompressible (with tb not NULL), tb's, a shard stored as its text. Records its size and
 * hash. */
/* Open regular entry e of the tree for reading: the descriptor (or -1, errno set) and its
 * path in *path (fresh; NULL without memory, which returns -1 with ENOMEM). A file the walk
 * saw that is gone or is no regular file any more (a symlink, a directory, a FIFO, whose open
 * fio_open_file keeps from waiting) is -1 with ENOENT: archived empty, as one removed. */
static int open_in_tree(const packer *p, const arc_entry *e, char **path)
{
    struct stat st;
    if (!(*path = malloc(strlen(p->top) + strlen(e->path) + 2))) {
        errno = ENOMEM;
        return -1;
    }
    sprintf(*path, "%s/%s", p->top, e->path);
    fio_long l;
    int lr = fio_long_path(*path, &l);
    if (lr) {
        errno = -lr;
        return -1;
    }
    int fd = fio_open_file(l.p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, &st);
    int e2 = errno;
    fio_long_end(&l);
    errno = e2;
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR || errno == EINVAL)) errno = ENOENT;
    return fd;
}

static int pack_file(sbuild *gb, sbuild *tb, ZSTD_CCtx *cc, uint32_t ent, int copy,
                     unsigned char *blk, size_t blksz)
{
    sbuild *b = NULL;
    arc_entry *e = &gb->p->ents[ent];
    char *path;
    int fd = open_in_tree(gb->p, e, &path);
    if (!path) return -ENOMEM;
    if (fd < 0 && errno != ENOENT) { /* gone since the walk: archived empty (note_change) */
        int rc = tdc_error(-errno, "%s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    XXH3_state_t *hs = XXH3_createState();
    tok_state ts = {.npend = 0};
    /* The size the walk saw, which the read stops at. */
    uint64_t size = 0, want = e->size, left = fd < 0 ? 0 : want;
    int rc = hs ? 0 : -ENOMEM;
    if (hs) XXH3_64bits_reset(hs);
    while (!rc && size < left) {
        ssize_t k = read(fd, blk, left - size < blksz ? (size_t)(left - size) : blksz);
        if (k < 0) {
            if (errno == EINTR) continue;
            rc = tdc_error(-errno, "%s: read: %s", path, strerror(errno));
            break;
        }
        if (k == 0) break;
        if (!b) {
            b = tb && pack_incompressible(cc, blk, (size_t)k) ? tb : gb;
            if ((rc = start_file(b, ent, left, copy))) break;
        }
        XXH3_64bits_update(hs, blk, (size_t)k);
        size += (uint64_t)k;
        rc = tok_feed(&ts, blk, (size_t)k, emit, b);
        if (!rc) rc = progress(b->p, (uint64_t)k);
    }
    if (!b && !rc) rc = start_file(b = gb, ent, 0, 0); /* nothing read: empty */
    if (!rc) rc = tok_finish(&ts, emit, b);
    if (!rc && !b->text && vec32_push(&b->toks, SEQ_BARRIER)) rc = -ENOMEM;
    if (!rc) {
        e->size = size;
        e->hash = XXH3_64bits_digest(hs);
        note_change(gb->p, e, fd, want, path);
    }
    XXH3_freeState(hs);
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* The shards and parts of tg (a group's files stored as their text) after g's own. */
static int append_group(group *g, group *tg)
{
    for (size_t k = 0; k < tg->nparts; k++) {
        if (part_room(g)) return -ENOMEM;
        g->parts[g->nparts] = tg->parts[k];
        g->parts[g->nparts++].shard += g->nsh;
    }
    for (uint32_t k = 0; k < tg->nsh; k++) {
        if (shard_room(g)) return -ENOMEM;
        g->sh[g->nsh++] = tg->sh[k];
    }
    tg->nsh = 0;
    g->tokens += tg->tokens;
    g->dict_tokens += tg->dict_tokens;
    return 0;
}

/* Pack one group into its shards: its files' grammar shards, then those of its files stored
 * as their text. */
static int pack_group(packer *p, group *g, unsigned char *blk, size_t blksz)
{
    group tg = {0};
    sbuild b = {.p = p, .g = g, .d = dict_new()}, tb = {.p = p, .g = &tg, .text = 1};
    int text = !(p->o->plain & ARC_PLAIN_TEXT);
    ZSTD_CCtx *cc = text ? ZSTD_createCCtx() : NULL; /* the trials' (NULL: one each) */
    b.cc = cc;
    int rc = b.d ? 0 : -ENOMEM;
    for (uint32_t i = g->first; i < g->end && !rc; i++)
        rc = pack_file(&b, text ? &tb : NULL, cc, p->files[i], p->copy[i], blk, blksz);
    /* a group of empty files only: one empty grammar shard */
    if (!rc && (g->nparts > b.part0 || (!g->nsh && !tg.nparts))) rc = close_shard(&b);
    if (!rc && tg.nparts > tb.part0) rc = close_shard(&tb);
    if (!rc) rc = append_group(g, &tg);
    for (uint32_t k = 0; k < tg.nsh; k++)
        arc_coded_free(&tg.sh[k]);
    free(tg.sh);
    free(tg.parts);
    ZSTD_freeCCtx(cc);
    dict_free(b.d);
    vec32_free(&b.toks);
    buf_free(&tb.raw);
    vec64_free(&tb.lens);
    return rc;
}

/* The worker's failure rc recorded, unless one came first. Caller holds the lock. */
static void failed(packer *p, int rc)
{
    if (!p->rc) {
        p->rc = rc;
        snprintf(p->err, sizeof p->err, "%s", tdc_errmsg());
    }
    pthread_cond_broadcast(&p->turn);
}

/* Group gi's shards into the sink (par_order's put). */
static int put_group(void *ctx, size_t gi)
{
    packer *p = ctx;
    const group *g = &p->groups[gi];
    int rc = 0;
    for (uint32_t k = 0; k < g->nsh && !rc; k++)
        rc = arc_sink_put(p->sink, &g->sh[k]);
    return rc;
}

/* Group gi packed: with a sink, it and the packed groups after it written in their turn. */
static void put_ready(packer *p, size_t gi)
{
    pthread_mutex_lock(&p->lock);
    int rc = par_order_done(&p->order, gi, &p->lock, &p->turn, &p->rc, put_group, p);
    if (rc) failed(p, rc);
    pthread_mutex_unlock(&p->lock);
}

/* A worker: takes the next group until none is left or a worker failed. */
static void *worker(void *arg)
{
    packer *p = arg;
    const size_t blksz = 1 << 20;
    unsigned char *blk = malloc(blksz);
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->sink && !p->rc && p->next_group < p->ngroups &&
               !par_order_room(&p->order, p->next_group))
            pthread_cond_wait(&p->turn, &p->lock);
        size_t gi = p->next_group;
        while (gi < p->ngroups && p->take && !p->take[gi])
            gi++;
        if (p->rc || !blk) gi = p->ngroups;
        p->next_group = gi + 1;
        if (!blk && !p->rc) p->rc = tdc_error(-ENOMEM, "out of memory");
        pthread_mutex_unlock(&p->lock);
        if (gi >= p->ngroups) break;
        int rc = pack_group(p, &p->groups[gi], blk, blksz);
        if (rc) {
            if (rc == -ENOMEM) tdc_error(rc, "out of memory while packing");
            pthread_mutex_lock(&p->lock);
            failed(p, rc);
            pthread_mutex_unlock(&p->lock);
        } else if (p->sink) {
            put_ready(p, gi);
        }
    }
    free(blk);
    return NULL;
}

/* 1 if entry i is a further name of a hard-linked file (its content is the first name's). */
static int is_extra_link(const packer *p, size_t i)
{
    return p->ents[i].ino && p->ents[i].ino != i + 1;
}

uint64_t pack_shard_size(uint64_t content)
{
    if (content <= PACK_ONE_SHARD_MAX) return content ? content : 1;
    uint64_t s = content / PACK_SHARDS_AIM;
    return s < PACK_SHARD_MIN ? PACK_SHARD_MIN : s > PACK_SHARD_MAX ? PACK_SHARD_MAX : s;
}

/* Files of at least this many bytes are looked for copies (by size, then by content). */
#define COPY_MIN 1024

static int is_content(const packer *p, size_t i)
{
    return p->ents[i].type == ARC_REG && !is_extra_link(p, i);
}

/* Entries by size, then (with `ctx` hashes set) content hash, then index. */
static int by_content(const void *a, const void *b, void *ctx)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const arc_entry *x = &((const arc_entry *)ctx)[i], *y = &((const arc_entry *)ctx)[j];
    if (x->size != y->size) return (x->size > y->size) - (x->size < y->size);
    if (x->hash != y->hash) return (x->hash > y->hash) - (x->hash < y->hash);
    return (i > j) - (i < j);
}

/* The content hash of each file of COPY_MIN bytes or more whose size another file has, in
 * its entry (pack_file sets it again as it reads): what plan_groups finds copies by. A file
 * that cannot be read keeps 0 and is nobody's copy. */
static int hash_same_sizes(packer *p)
{
    uint32_t *v = malloc((p->nents ? p->nents : 1) * sizeof *v), n = 0;
    unsigned char *blk = malloc(1 << 20);
    char *path = NULL;
    int rc = v && blk ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && !p->o->copies_apart && i < p->nents; i++)
        if (is_content(p, i) && p->ents[i].size >= COPY_MIN) v[n++] = (uint32_t)i;
    for (uint32_t i = 0; !rc && i < n; i++)
        p->ents[v[i]].hash = 0; /* the walk's: none yet */
    if (!rc) sort_r(v, n, sizeof *v, by_content, p->ents);
    for (uint32_t i = 0; !rc && i < n; i++) {
        arc_entry *e = &p->ents[v[i]];
        if (!(i && p->ents[v[i - 1]].size == e->size) &&
            !(i + 1 < n && p->ents[v[i + 1]].size == e->size))
            continue;
        free(path);
        int fd = open_in_tree(p, e, &path);
        if (!path) {
            rc = -ENOMEM;
            break;
        }
        if (fd < 0) continue; /* pack_file says what is wrong */
        XXH3_state_t *hs = XXH3_createState();
        uint64_t left = e->size;
        if (hs) XXH3_64bits_reset(hs);
        while (hs && left) {
            ssize_t k = read(fd, blk, left < (1 << 20) ? (size_t)left : (1 << 20));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            XXH3_64bits_update(hs, blk, (size_t)k);
            left -= (uint64_t)k;
        }
        e->hash = hs && !left ? XXH3_64bits_digest(hs) : 0;
        if (!hs) rc = -ENOMEM;
        XXH3_freeState(hs);
        close(fd);
    }
    free(path);
    free(blk);
    free(v);
    return rc;
}

/* The content files in order, cut into groups of at most the shard size (a larger file is a
 * group of its own, which the worker cuts into shards); at least one group. A copy of an
 * earlier file (hash_same_sizes) comes right after it instead of in its own place, marked in
 * p->copy, so that it lands in the same shard: the archive stores it in next to nothing, and
 * its reads load that shard. */
static int plan_groups(packer *p)
{
    p->files = malloc((p->nents ? p->nents : 1) * sizeof *p->files);
    p->copy = calloc(p->nents ? p->nents : 1, 1);
    p->groups = calloc(p->nents + 1, sizeof *p->groups);
    size_t n = p->nents ? p->nents : 1;
    uint32_t *hashed = malloc(n * sizeof *hashed), nh = 0;
    /* per entry: its next copy + 1, or 0 (a copy's original is the first of its kind) */
    uint32_t *next = calloc(n, sizeof *next);
    unsigned char *is_copy = calloc(n, 1);
    int rc = p->files && p->copy && p->groups && hashed && next && is_copy ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < p->nents; i++)
        if (is_content(p, i) && p->ents[i].size >= COPY_MIN && p->ents[i].hash)
            hashed[nh++] = (uint32_t)i;
    if (!rc) sort_r(hashed, nh, sizeof *hashed, by_content, p->ents);
    for (uint32_t i = 1; !rc && i < nh; i++) {
        const arc_entry *x = &p->ents[hashed[i - 1]], *y = &p->ents[hashed[i]];
        if (x->size == y->size && x->hash == y->hash) {
            next[hashed[i - 1]] = hashed[i] + 1;
            is_copy[hashed[i]] = 1;
        }
    }
    free(hashed);
    if (rc) {
        free(next);
        free(is_copy);
        return rc;
    }
    if (!p->shard_size) {
        uint64_t total = 0;
        for (size_t i = 0; i < p->nents; i++)
            if (p->ents[i].type == ARC_REG && !is_extra_link(p, i)) total += p->ents[i].size;
        p->shard_size = pack_shard_size(total);
    }
    uint64_t bytes = 0;
    group *g = &p->groups[0];
    p->ngroups = 1;
    for (size_t i = 0; i < p->nents; i++) {
        if (!is_content(p, i) || is_copy[i]) continue;
        uint64_t sz = p->ents[i].size;
        if (g->end > g->first && bytes + sz > p->shard_size) {
            g = &p->groups[p->ngroups++];
            g->first = g->end = (uint32_t)p->nfiles;
            bytes = 0;
        }
        p->files[p->nfiles++] = (uint32_t)i;
        g->end++;
        bytes += sz;
        for (uint32_t j = next[i]; j; j = next[j - 1]) { /* its copies, in entry order */
            p->copy[p->nfiles] = 1;
            p->files[p->nfiles++] = j - 1;
            g->end++;
            bytes += sz;
            p->st.copies++;
            p->st.copy_bytes += sz;
        }
    }
    free(next);
    free(is_copy);
    return 0;
}

/* Run the groups taken on the workers (the calling thread is one of them). */
static int run_workers(packer *p)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t jobs = p->o->jobs ? p->o->jobs : cpus > 0 ? (size_t)cpus : 1, ntake = 0;
    for (size_t gi = 0; gi < p->ngroups; gi++)
        ntake += !p->take || p->take[gi];
    if (jobs > ntake) jobs = ntake;
    if (!jobs) return 0;
    pthread_t *th = calloc(jobs, sizeof *th);
    size_t started = 0;
    if (!th) return -ENOMEM;
    p->order.window = 4 * jobs; /* room for groups slower than the others */
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)256 << 20); /* Sequitur recurses */
    for (; started < jobs; started++)
        if (pthread_create(&th[started], &at, worker, p)) break;
    pthread_attr_destroy(&at);
    if (!started) {
        free(th);
        return tdc_error(-EAGAIN, "cannot start a packing thread");
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    return p->rc ? tdc_error(p->rc, "%s", p->err) : 0;
}

/* Number the shards group after group and give each file its shard and run. */
static void place_files(packer *p)
{
    uint32_t base = 0;
    for (size_t gi = 0; gi < p->ngroups; gi++) {
        group *g = &p->groups[gi];
        g->base = base;
        base += g->nsh;
        for (size_t k = 0; k < g->nparts; k++) {
            const part *pt = &g->parts[k];
            arc_entry *e = &p->ents[pt->ent];
            if (!k || g->parts[k - 1].ent != pt->ent) {
                e->shard = g->base + pt->shard;
                e->root_start = pt->start;
                e->root_len = 0;
            }
            e->root_len += pt->len;
        }
    }
    for (size_t i = 0; i < p->nents; i++) {
        if (p->ents[i].type != ARC_REG || !is_extra_link(p, i)) continue;
        /* Same content as the first name of the inode, which came earlier. */
        const arc_entry *f = &p->ents[p->ents[i].ino - 1];
        p->ents[i].size = f->size;
        p->ents[i].hash = f->hash;
        p->ents[i].root_start = p->ents[i].root_len = 0;
    }
}

/* A job for `dir` with options opts (NULL: the defaults), no entries yet; NULL without memory. */
static packer *new_packer(const char *dir, const pack_opts *opts)
{
    static const pack_opts none = {0};
    packer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->o = opts ? opts : &none;
    p->top = dir;
    p->seg = p->o->seg_tokens ? p->o->seg_tokens : PACK_SEG_DEFAULT;
    p->shard_size = p->o->shard_size; /* 0: chosen by plan_groups from the content */
    p->level = p->o->level ? p->o->level : PACK_LEVEL_DEFAULT;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->turn, NULL);
    return p;
}

int pack_plan(const char *dir, const pack_opts *opts, pack_job **out)
{
    packer *p = new_packer(dir, opts);
    struct stat sb;
    int rc;
    *out = NULL;
    if (!p) return tdc_error(-ENOMEM, "out of memory while packing");
    if (stat(dir, &sb) < 0)
        rc = tdc_error(-errno, "%s: %s", dir, strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        rc = tdc_error(-ENOTDIR, "%s: not a directory", dir);
    else if (!(rc = add_entry(p, "", &sb, ARC_DIR)) && !(rc = read_xattrs(dir, &p->ents[0]))) {
        p->st.dirs = 1; /* the root counts, as find and tadoc stat count it */
        if (!(rc = walk(p, dir, "")) && !(rc = hash_same_sizes(p))) rc = plan_groups(p);
    }
    if (rc) {
        if (rc == -ENOMEM) tdc_error(rc, "out of memory while packing");
        pack_job_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int pack_plan_encode(const pack_job *p, buf *b)
{
    const uint64_t n[] = {p->nents, p->st.files, p->st.dirs, p->st.links, p->st.special,
                          p->st.skipped, p->total};
    for (size_t i = 0; i < sizeof n / sizeof *n; i++)
        if (buf_put_varint(b, n[i])) return -ENOMEM;
    for (size_t i = 0; i < p->nents; i++)
        if (arc_entry_encode(b, &p->ents[i], 0)) return -ENOMEM;
    return 0;
}

int pack_plan_decode(const char *dir, const pack_opts *opts, const unsigned char *q, size_t n,
                     pack_job **out)
{
    packer *p = new_packer(dir, opts);
    rd r = {q, q + n};
    uint64_t cnt = 0, shard;
    *out = NULL;
    if (!p) return tdc_error(-ENOMEM, "out of memory while packing");
    int rc = rd_varint(&r, &cnt) || cnt > n || rd_varint(&r, &p->st.files) ||
                     rd_varint(&r, &p->st.dirs) || rd_varint(&r, &p->st.links) ||
                     rd_varint(&r, &p->st.special) || rd_varint(&r, &p->st.skipped) ||
                     rd_varint(&r, &p->total)
                 ? -EPROTO
                 : 0;
    if (!rc && !(p->ents = calloc(cnt ? cnt : 1, sizeof *p->ents))) rc = -ENOMEM;
    if (!rc) p->cap = cnt;
    for (uint64_t i = 0; !rc && i < cnt; i++) {
        p->nents = i + 1; /* what arc_entry_decode allocated is freed with the job */
        rc = arc_entry_decode(&r, ARC_VERSION, &p->ents[i], &shard);
    }
    if (!rc && r.p != r.end) rc = -EPROTO;
    if (!rc) rc = plan_groups(p);
    if (rc) {
        pack_job_free(p);
        return rc == -ENOMEM ? tdc_error(rc, "out of memory while packing")
                             : tdc_error(-EBADMSG, "a malformed plan of %s", dir);
    }
    *out = p;
    return 0;
}

uint32_t pack_ngroups(const pack_job *p)
{
    return (uint32_t)p->ngroups;
}

uint64_t pack_changed(const pack_job *p)
{
    return p->st.changed;
}

int pack_changed_error(const char *out, uint64_t changed)
{
    return tdc_error(-EAGAIN, "%s written, but %llu files changed as they were read (each "
                              "warned of above): pack again to archive them whole",
                     out, (unsigned long long)changed);
}

uint64_t pack_group_bytes(const pack_job *p, uint32_t gi)
{
    uint64_t n = 0;
    for (uint32_t i = p->groups[gi].first; i < p->groups[gi].end; i++)
        n += p->ents[p->files[i]].size;
    return n;
}

int pack_run(pack_job *p, const unsigned char *take)
{
    p->take = take;
    p->next_group = 0;
    int rc = run_workers(p);
    if (rc == -ENOMEM) tdc_error(rc, "out of memory while packing");
    return rc;
}

int pack_run_to(pack_job *p, const char *out)
{
    if (p->sink) return tdc_error(-EINVAL, "packed twice");
    p->sink = calloc(1, sizeof *p->sink);
    if (!p->sink || par_order_init(&p->order, p->ngroups, 1))
        return tdc_error(-ENOMEM, "out of memory while packing");
    int rc = arc_sink_open(p->sink, out);
    if (rc) {
        free(p->sink);
        p->sink = NULL;
        return rc;
    }
    rc = pack_run(p, NULL);
    if (!rc && p->order.next != p->ngroups) rc = tdc_error(-EIO, "internal: groups left unwritten");
    return rc;
}

const arc_coded *pack_group_coded(const pack_job *p, uint32_t gi, uint32_t *n)
{
    *n = p->groups[gi].nsh;
    return p->groups[gi].sh;
}

/* The fields of a shard's section that travel (its offset is the writer's). */
static int put_sec(buf *b, const arc_secinfo *s)
{
    return buf_put_varint(b, s->type) || buf_put_varint(b, s->codec) ||
           buf_put_varint(b, s->stored) || buf_put_varint(b, s->raw) || buf_put_u64(b, s->hash);
}

int pack_group_encode(const pack_job *p, uint32_t gi, buf *b)
{
    const group *g = &p->groups[gi];
    int rc = buf_put_varint(b, g->nsh);
    for (uint32_t k = 0; !rc && k < g->nsh; k++) {
        const arc_shard *s = &g->sh[k].info;
        rc = buf_put_varint(b, s->bytes) || buf_put_varint(b, s->root_syms) ||
             buf_put_varint(b, s->ntokens) || buf_put_varint(b, s->nrules) ||
             buf_put_varint(b, s->long_words);
        for (int i = 0; !rc && i < 3; i++)
            rc = put_sec(b, &g->sh[k].secs[i]);
    }
    rc = rc || buf_put_varint(b, g->nparts);
    for (size_t k = 0; !rc && k < g->nparts; k++) {
        const part *pt = &g->parts[k];
        rc = buf_put_varint(b, pt->ent) || buf_put_varint(b, pt->shard) ||
             buf_put_varint(b, pt->start) || buf_put_varint(b, pt->len);
    }
    for (uint32_t i = g->first; !rc && i < g->end; i++)
        rc = buf_put_varint(b, p->ents[p->files[i]].size) ||
             buf_put_u64(b, p->ents[p->files[i]].hash);
    rc = rc || buf_put_varint(b, g->tokens) || buf_put_varint(b, g->dict_tokens) ||
         buf_put_varint(b, g->rules) || buf_put_varint(b, g->segments);
    return rc ? tdc_error(-ENOMEM, "out of memory while packing") : 0;
}

/* A varint that must fit `max`. */
static int rd_upto(rd *r, uint64_t max, uint64_t *x)
{
    return rd_varint(r, x) || *x > max ? -EBADMSG : 0;
}

static int get_sec(rd *r, arc_secinfo *s)
{
    uint64_t type, codec;
    if (rd_upto(r, UINT32_MAX, &type) || rd_upto(r, UINT32_MAX, &codec) ||
        rd_varint(r, &s->stored) || rd_varint(r, &s->raw) || rd_u64(r, &s->hash))
        return -EBADMSG;
    s->type = (uint32_t)type;
    s->codec = (uint32_t)codec;
    return 0;
}

/* pack_group_decode's work; -EBADMSG or -ENOMEM. */
static int group_decode(pack_job *p, group *g, rd *r)
{
    uint64_t nsh, np, x[4];
    if (rd_upto(r, (uint64_t)(r->end - r->p), &nsh)) return -EBADMSG;
    if (!(g->sh = calloc(nsh ? nsh : 1, sizeof *g->sh))) return -ENOMEM;
    g->capsh = nsh;
    for (; g->nsh < nsh; g->nsh++) {
        arc_shard *s = &g->sh[g->nsh].info;
        if (rd_varint(r, &s->bytes) || rd_varint(r, &s->root_syms) ||
            rd_upto(r, UINT32_MAX, &x[0]) || rd_upto(r, UINT32_MAX, &x[1]) ||
            rd_upto(r, ARC_LONG_YES, &x[2]))
            return -EBADMSG;
        s->ntokens = (uint32_t)x[0];
        s->nrules = (uint32_t)x[1];
        s->long_words = (uint8_t)x[2];
        for (int i = 0; i < 3; i++)
            if (get_sec(r, &g->sh[g->nsh].secs[i])) return -EBADMSG;
    }
    if (rd_upto(r, (uint64_t)(r->end - r->p), &np)) return -EBADMSG;
    if (!(g->parts = calloc(np ? np : 1, sizeof *g->parts))) return -ENOMEM;
    g->capparts = np;
    for (; g->nparts < np; g->nparts++) {
        if (rd_upto(r, p->nents - 1, &x[0]) || rd_upto(r, nsh ? nsh - 1 : 0, &x[1]) ||
            rd_varint(r, &x[2]) || rd_varint(r, &x[3]))
            return -EBADMSG;
        g->parts[g->nparts] = (part){(uint32_t)x[0], (uint32_t)x[1], x[2], x[3]};
    }
    for (uint32_t i = g->first; i < g->end; i++) {
        arc_entry *e = &p->ents[p->files[i]];
        if (rd_varint(r, &e->size) || rd_u64(r, &e->hash)) return -EBADMSG;
    }
    if (rd_varint(r, &g->tokens) || rd_varint(r, &g->dict_tokens) || rd_varint(r, &g->rules) ||
        rd_varint(r, &g->segments) || r->p != r->end)
        return -EBADMSG;
    return 0;
}

int pack_group_decode(pack_job *p, uint32_t gi, const unsigned char *data, size_t n)
{
    group *g = &p->groups[gi];
    rd r = {data, data + n};
    if (g->nsh || g->nparts) return tdc_error(-EINVAL, "group %u is packed twice", gi);
    int rc = group_decode(p, g, &r);
    if (rc) {
        for (uint32_t k = 0; k < g->nsh; k++)
            arc_coded_free(&g->sh[k]);
        free(g->sh);
        free(g->parts);
        *g = (group){.first = g->first, .end = g->end};
    }
    return rc == -ENOMEM   ? tdc_error(rc, "out of memory while packing")
           : rc            ? tdc_error(rc, "group %u: malformed result", gi)
                           : 0;
}

int pack_shards(pack_job *p, const arc_coded **out, uint32_t *n)
{
    if (!p->all) { /* once: the files placed and the list made */
        p->nall = 0;
        for (size_t gi = 0; gi < p->ngroups; gi++)
            p->nall += p->groups[gi].nsh;
        if (!(p->all = malloc((p->nall ? p->nall : 1) * sizeof *p->all)))
            return tdc_error(-ENOMEM, "out of memory while packing");
        place_files(p);
        for (size_t gi = 0, k = 0; gi < p->ngroups; gi++)
            for (uint32_t j = 0; j < p->groups[gi].nsh; j++)
                p->all[k++] = p->groups[gi].sh[j];
    }
    *out = p->all;
    *n = p->nall;
    return 0;
}

uint32_t pack_group_first_shard(const pack_job *p, uint32_t gi)
{
    return p->groups[gi].base;
}

/* The archive written from every group's shards: into a new file at `out`, or, given
 * `over`, into that file, which holds their sections already. */
static int write_job(pack_job *p, const char *out, const char *over, pack_stats *st)
{
    arc a = {0};
    const arc_coded *sh = NULL;
    uint32_t n = 0;
    int rc = pack_shards(p, &sh, &n);
    if (rc) return rc;
    a.ents = p->ents;
    a.nents = (uint32_t)p->nents;
    a.plain = p->o->plain;
    if (p->sink) { /* pack_run_to wrote the shards */
        rc = arc_sink_commit(p->sink, &a, sh, n, p->level, out);
        free(p->sink);
        p->sink = NULL;
    } else {
        rc = over ? arc_write_coded_over(over, &a, sh, n, p->level)
                  : arc_write_coded(out, &a, sh, n, p->level);
    }
    free(a.byino); /* the inode order arc_write's table check built */
    *st = p->st;
    for (size_t i = 0; i < p->nfiles; i++)
        st->bytes_in += p->ents[p->files[i]].size;
    for (size_t gi = 0; gi < p->ngroups; gi++) {
        const group *g = &p->groups[gi];
        st->tokens += g->tokens;
        st->dict_tokens += g->dict_tokens;
        st->rules += g->rules;
        st->segments += g->segments;
    }
    for (uint32_t k = 0; k < n; k++)
        st->text_shards += arc_coded_text(&sh[k]);
    st->bytes_out = a.file_size;
    st->shards = n;
    return rc;
}

int pack_write(pack_job *p, const char *out, pack_stats *st)
{
    return write_job(p, out, NULL, st);
}

int pack_write_over(pack_job *p, const char *tmp, pack_stats *st)
{
    return write_job(p, tmp, tmp, st);
}

void pack_job_free(pack_job *p)
{
    if (!p) return;
    for (size_t gi = 0; p->groups && gi < p->ngroups; gi++) {
        for (uint32_t j = 0; j < p->groups[gi].nsh; j++)
            arc_coded_free(&p->groups[gi].sh[j]);
        free(p->groups[gi].sh);
        free(p->groups[gi].parts);
    }
    free(p->all);
    free(p->groups);
    free(p->files);
    free(p->copy);
    for (size_t i = 0; i < p->nents; i++)
        arc_entry_clear(&p->ents[i]);
    free(p->ents);
    free(p->links);
    if (p->sink) arc_sink_abort(p->sink); /* a pack that failed before it was written */
    free(p->sink);
    par_order_free(&p->order);
    pthread_cond_destroy(&p->turn);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int pack_dir(const char *dir, const char *out, const pack_opts *opts, pack_stats *stats)
{
    pack_job *p;
    memset(stats, 0, sizeof *stats);
    int rc = pack_plan(dir, opts, &p);
    if (!rc) rc = pack_run_to(p, out);
    if (!rc) rc = pack_write(p, out, stats);
    pack_job_free(p);
    return rc;
}
