/* tree: the directory structure of an archive, for the FUSE layer.
 *
 * Inode numbers are entry index + 1, so the root directory (entry 0) is FUSE_ROOT_ID and the
 * same archive always gives the same numbers. Each directory's children are kept in name
 * order for binary-search lookups and stable readdir offsets. Read-only after tree_build;
 * safe to share between threads. */
#ifndef TDC_FS_TREE_H
#define TDC_FS_TREE_H

#include <stdint.h>
#include <sys/stat.h>

#include "../engine/arc.h"

typedef struct fs_tree fs_tree;

/* Build the tree of an opened archive (which must outlive it). 0 or -ENOMEM. */
int tree_build(const arc *a, fs_tree **out);
void tree_free(fs_tree *t);

/* Entry of the child `name` of directory entry `dir`, or -ENOENT. */
int64_t tree_lookup(const fs_tree *t, uint32_t dir, const char *name);

/* Children of directory entry `dir`: *n entries starting at the returned pointer. */
const uint32_t *tree_children(const fs_tree *t, uint32_t dir, uint32_t *n);

/* Parent entry of `ent` (the root is its own parent). */
uint32_t tree_parent(const fs_tree *t, uint32_t ent);

/* Last path component of `ent` ("" for the root). */
const char *tree_name(const fs_tree *t, uint32_t ent);

/* Fill `st` for entry `ent`. uid/gid of (uint32_t)-1 keep the archived owners. */
void tree_stat(const fs_tree *t, uint32_t ent, uint32_t uid, uint32_t gid, struct stat *st);

#endif
