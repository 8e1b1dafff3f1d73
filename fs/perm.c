#include "perm.h"

#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "../engine/analytics/ana.h"

enum { MAY_X = 1, MAY_R = 4 };

/* 1 when thread `pid` holds CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH in the daemon's user
 * namespace, with which the kernel lets it read every file and list every directory of the
 * mount; 0 when it holds neither, belongs to another user namespace (its capabilities count
 * only there) or cannot be looked at (pid 0: a caller in another PID namespace), which can
 * only hide more. Being uid 0 is not enough: root without those capabilities reads only
 * what its modes allow. */
/* The daemon's user namespace ("user:[N]"), read once: it does not change. */
static char own_ns[64];

static void read_own_ns(void)
{
    if (readlink("/proc/self/ns/user", own_ns, sizeof own_ns - 1) <= 0) own_ns[0] = 0;
}

static int reads_everything(pid_t pid)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    char path[64], ns[64] = "", line[256];
    unsigned long long caps = 0;
    int found = 0;
    if (pid <= 0) return 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "CapEff: %llx", &caps) == 1;
    if (f) fclose(f);
    /* most callers hold neither: the namespaces are compared only for those who do */
    if (!found || !(caps & (1ULL << CAP_DAC_OVERRIDE | 1ULL << CAP_DAC_READ_SEARCH))) return 0;
    pthread_once(&once, read_own_ns);
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    ssize_t n = readlink(path, ns, sizeof ns - 1);
    return n > 0 && own_ns[0] && !strcmp(ns, own_ns);
}

int fs_sees_all(fuse_req_t req, const fs_ctx *c)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    /* the owner of a user's mount can read its archive; root's is judged by its rights */
    return (ctx->uid == c->owner && c->owner != 0) || reads_everything(ctx->pid);
}

int fs_who_of(fuse_req_t req, const fs_ctx *c, fs_who *w)
{
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    memset(w, 0, sizeof *w);
    w->uid = ctx->uid;
    w->gid = ctx->gid;
    w->all = fs_sees_all(req, c);
    if (w->all) return 0;
    /* The count may exceed the buffer: ask again with room for all of them. */
    int size = 32;
    for (;;) {
        gid_t *g = realloc(w->groups, (size_t)size * sizeof *g);
        if (!g) {
            fs_who_free(w);
            return -ENOMEM;
        }
        w->groups = g;
        int n = fuse_req_getgroups(req, size, g);
        if (n < 0) n = 0; /* unreadable: no supplementary groups, which only hides more */
        if (n <= size) {
            w->ngroups = (size_t)n;
            return 0;
        }
        size = n;
    }
}

void fs_who_free(fs_who *w)
{
    free(w->groups);
    memset(w, 0, sizeof *w);
}

static int in_group(const fs_who *w, uint32_t gid)
{
    if (w->gid == gid) return 1;
    for (size_t i = 0; i < w->ngroups; i++)
        if ((uint32_t)w->groups[i] == gid) return 1;
    return 0;
}

/* 1 when w has every permission in `want` (MAY_R, MAY_X) on entry e, as generic_permission
 * judges it: the owner's bits for the owner, else the group's for a member, else the
 * others'. Owners are those the mount shows. */
static int may(const fs_ctx *c, const fs_who *w, const arc_entry *e, unsigned want)
{
    uint32_t uid = c->uid != (uint32_t)-1 ? c->uid : e->uid;
    uint32_t gid = c->gid != (uint32_t)-1 ? c->gid : e->gid;
    unsigned bits = uid == w->uid ? e->mode >> 6 : in_group(w, gid) ? e->mode >> 3 : e->mode;
    return (bits & want) == want;
}

/* Directories open on the walk: where each one's subtree ends, and whether it is reachable. */
typedef struct dstack {
    struct dlevel {
        uint32_t end;
        int ok;
    } * p;
    size_t n, cap;
} dstack;

static int push(dstack *s, uint32_t end, int ok)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct dlevel *p = realloc(s->p, cap * sizeof *p);
        if (!p) return -ENOMEM;
        s->p = p;
        s->cap = cap;
    }
    s->p[s->n++] = (struct dlevel){end, ok};
    return 0;
}

int fs_vis_build(const fs_ctx *c, const fs_who *w, const arc *a, uint32_t first, uint32_t end,
                 unsigned char **vis)
{
    *vis = NULL;
    if (w->all || first >= end) return 0;
    unsigned char *m = calloc(a->nents, 1);
    dstack s = {0};
    int rc = m ? 0 : -ENOMEM, hidden = 0;
    /* Entries are in path order: a directory's subtree follows it, so the innermost open
     * directory whose subtree holds e is e's parent. The scope's own directory counts too. */
    for (uint32_t e = first; e < end && !rc; e++) {
        while (s.n && s.p[s.n - 1].end <= e)
            s.n--;
        int up = s.n ? s.p[s.n - 1].ok : 1;
        const arc_entry *x = &a->ents[e];
        if (x->type == ARC_DIR) {
            rc = push(&s, ana_subtree_end(a, e), up && may(c, w, x, MAY_R | MAY_X));
        } else if (x->type == ARC_REG) {
            m[e] = (unsigned char)(up && may(c, w, x, MAY_R));
            hidden |= !m[e];
        }
    }
    free(s.p);
    if (rc || !hidden) {
        free(m);
        return rc;
    }
    *vis = m;
    return 0;
}

void fs_vis_key(const unsigned char *vis, uint32_t first, uint32_t end, uint64_t key[2])
{
    key[0] = key[1] = 0;
    if (!vis) return;
    XXH128_hash_t h = XXH3_128bits(vis + first, end - first);
    key[0] = h.low64;
    key[1] = h.high64 ? h.high64 : 1; /* never {0, 0}, which names "everything" */
}

int fs_vis_relink(const arc *a, const unsigned char *vis, uint32_t first, uint32_t end, arc **out)
{
    *out = NULL;
    uint32_t e = first;
    while (e < end && !ana_orphan_link(a, vis, first, end, e))
        e++;
    if (e == end) return 0; /* the usual case: no copy */
    arc *cp = malloc(sizeof *cp);
    if (!cp) return -ENOMEM;
    *cp = *a;
    if (!(cp->ents = malloc((size_t)a->nents * sizeof *cp->ents))) {
        free(cp);
        return -ENOMEM;
    }
    memcpy(cp->ents, a->ents, (size_t)a->nents * sizeof *cp->ents);
    if (ana_relink(a, vis, first, end, cp->ents)) {
        fs_vis_relink_free(cp);
        return -ENOMEM;
    }
    *out = cp;
    return 0;
}

void fs_vis_relink_free(arc *cp)
{
    if (!cp) return;
    free(cp->ents); /* everything else is the original archive's */
    free(cp);
}
