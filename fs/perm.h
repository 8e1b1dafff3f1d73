/* perm: what a caller may reach through the mount, for the virtual files.
 *
 * The kernel judges every lookup and open with default_permissions; the virtual files and
 * `.search/WORD` are computed by the daemon over many files at once, so the daemon judges
 * each of those files as the kernel would judge a caller who finds it by listing the
 * directories: read permission on the file, read and search (r and x) permission on every
 * directory from the scope's directory down to it (search alone lets a caller open names it
 * already knows, never learn them, and the analytics print names), with the caller's uid,
 * gid and supplementary groups (owner bits when the uid matches the owner, else group bits
 * when the gid or a supplementary group matches the group, else other bits). Owners are the
 * ones the mount shows (the -o uid=/gid= options replace the archived ones). A caller with
 * CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH (root as usual, not root stripped of them) and
 * the mount's owner (who can read the archive itself) see everything. The result is a visibility
 * mask (engine/analytics/ana.h) over the entries of the archive view being analysed, whose modes
 * and owners are the live ones (vol_view_open snapshots the model whenever anything below the scope
 * changed, a chmod included). */
#ifndef TDC_FS_PERM_H
#define TDC_FS_PERM_H

#include <stdint.h>
#include <sys/types.h>

#include "fs.h"

/* Who calls: credentials of one request. */
typedef struct fs_who {
    uint32_t uid, gid;
    gid_t *groups; /* supplementary groups (malloc'ed), from /proc of the calling thread */
    size_t ngroups;
    int all; /* reads everything, or the mount's owner: every entry is visible */
} fs_who;

/* 1 when the caller of req sees every file: CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH in the
 * daemon's user namespace, or the owner of a mount started by another user than root. */
int fs_sees_all(fuse_req_t req, const fs_ctx *c);

/* The credentials of request `req` into w (fs_who_free it). When the supplementary groups
 * cannot be read (the caller has exited), none are taken: that can only hide more. 0 or
 * -ENOMEM. */
int fs_who_of(fuse_req_t req, const fs_ctx *c, fs_who *w);
void fs_who_free(fs_who *w);

/* The visibility mask of w over entries [first, end) of archive a: *vis = NULL when every
 * regular file of the scope is visible (so callers who see the same share the unmasked
 * work), else a calloc'ed byte per entry of a, 1 for each regular file w may reach (bytes
 * outside the scope 0). 0 or -ENOMEM. */
int fs_vis_build(const fs_ctx *c, const fs_who *w, const arc *a, uint32_t first, uint32_t end,
                 unsigned char **vis);

/* A 128-bit name of the visible set in key[2]: {0, 0} for NULL (everything), else a hash of
 * the mask's bytes [first, end). Results and sizes computed for one key serve every caller
 * with that key. */
void fs_vis_key(const unsigned char *vis, uint32_t first, uint32_t end, uint64_t key[2]);

/* Analytics count a hard-linked file's content once, under the name that holds it (the first
 * in path order). When that name is outside the scope or hidden from the caller but another
 * name of the file is visible in the scope, the content must count under the first such
 * name instead, as the caller's own pipeline over the mount would count it. *out = NULL when
 * no file needs it (the usual case), else a copy of `a` sharing everything but its entry
 * table, in which each such name holds the content's root run: free it with
 * fs_vis_relink_free; it has no archive generation of its own (pass 0 to the backend).
 * 0 or -ENOMEM. */
int fs_vis_relink(const arc *a, const unsigned char *vis, uint32_t first, uint32_t end, arc **out);
void fs_vis_relink_free(arc *cp);

#endif
