#include "tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fs_tree {
    const arc *a;
    uint32_t *parent;
    uint32_t *first; /* children of entry i: kids[first[i] .. first[i] + nkids[i]) */
    uint32_t *nkids;
    uint32_t *nsubdirs;
    uint32_t *kids;
};

int tree_build(const arc *a, fs_tree **out)
{
    fs_tree *t = calloc(1, sizeof *t);
    size_t n = a->nents;
    if (!t) return -ENOMEM;
    t->a = a;
    t->parent = calloc(n, sizeof *t->parent);
    t->first = calloc(n, sizeof *t->first);
    t->nkids = calloc(n, sizeof *t->nkids);
    t->nsubdirs = calloc(n, sizeof *t->nsubdirs);
    t->kids = calloc(n ? n : 1, sizeof *t->kids);
    if (!t->parent || !t->first || !t->nkids || !t->nsubdirs || !t->kids) {
        tree_free(t);
        return -ENOMEM;
    }
    /* The archive guarantees every parent is an earlier directory entry. */
    for (uint32_t i = 1; i < n; i++) {
        const char *slash = strrchr(a->ents[i].path, '/');
        uint32_t p = 0;
        if (slash) {
            char *dir = strndup(a->ents[i].path, (size_t)(slash - a->ents[i].path));
            if (!dir) {
                tree_free(t);
                return -ENOMEM;
            }
            p = (uint32_t)arc_lookup(a, dir);
            free(dir);
        }
        t->parent[i] = p;
        t->nkids[p]++;
        if (a->ents[i].type == ARC_DIR) t->nsubdirs[p]++;
    }
    uint32_t acc = 0;
    for (uint32_t i = 0; i < n; i++) {
        t->first[i] = acc;
        acc += t->nkids[i];
        t->nkids[i] = 0;
    }
    /* Entries are in path order, so each directory's children arrive sorted by name. */
    for (uint32_t i = 1; i < n; i++) {
        uint32_t p = t->parent[i];
        t->kids[t->first[p] + t->nkids[p]++] = i;
    }
    *out = t;
    return 0;
}

void tree_free(fs_tree *t)
{
    if (!t) return;
    free(t->parent);
    free(t->first);
    free(t->nkids);
    free(t->nsubdirs);
    free(t->kids);
    free(t);
}

const char *tree_name(const fs_tree *t, uint32_t ent)
{
    const char *p = t->a->ents[ent].path, *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int64_t tree_lookup(const fs_tree *t, uint32_t dir, const char *name)
{
    uint32_t lo = 0, hi = t->nkids[dir];
    const uint32_t *k = t->kids + t->first[dir];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(tree_name(t, k[mid]), name);
        if (c == 0) return k[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -ENOENT;
}

const uint32_t *tree_children(const fs_tree *t, uint32_t dir, uint32_t *n)
{
    *n = t->nkids[dir];
    return t->kids + t->first[dir];
}

uint32_t tree_parent(const fs_tree *t, uint32_t ent)
{
    return t->parent[ent];
}

void tree_stat(const fs_tree *t, uint32_t ent, uint32_t uid, uint32_t gid, struct stat *st)
{
    const arc_entry *e = &t->a->ents[ent];
    static const mode_t fmt[] = {0, S_IFREG, S_IFDIR, S_IFLNK};
    memset(st, 0, sizeof *st);
    st->st_ino = (ino_t)ent + 1;
    st->st_mode = fmt[e->type] | e->mode;
    st->st_nlink = e->type == ARC_DIR ? 2 + t->nsubdirs[ent] : 1;
    st->st_uid = uid != (uint32_t)-1 ? uid : e->uid;
    st->st_gid = gid != (uint32_t)-1 ? gid : e->gid;
    st->st_size = (off_t)e->size;
    st->st_blksize = 4096;
    st->st_blocks = (blkcnt_t)((e->size + 511) / 512);
    st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = (time_t)e->mtime_sec;
    st->st_mtim.tv_nsec = st->st_atim.tv_nsec = st->st_ctim.tv_nsec = e->mtime_nsec;
}
