/* killpriv: the kernel's FUSE_HANDLE_KILLPRIV_V2 for a daemon built on libfuse 3.14.
 *
 * Why: FUSE superblocks lack SB_NOSEC, so before every write(2) the kernel asks the daemon
 * for the file's security.capability (a GETXATTR round trip), to know whether the write must
 * drop privileges, unless the connection says the daemon drops them itself
 * (FUSE_HANDLE_KILLPRIV_V2, kernel 5.11, protocol 7.33). libfuse learned to ask for it in
 * 3.16; Debian 12 has 3.14. With it a 4 KiB overwrite is one round trip instead of two.
 *
 * What the daemon then owes the kernel (fs/ops.c): a write or truncation by a caller
 * without CAP_FSETID drops set-user-ID, and set-group-ID where the group may execute or the
 * caller is not in the file's group; a change of owner or group of a file that is not a
 * directory drops them too, for any caller. security.capability needs nothing: only user.*
 * extended attributes are stored.
 *
 * The same reply also asks for FUSE_PARALLEL_DIROPS, which libfuse 3.14 does not pass on
 * from conn->want: without it the kernel sends one lookup or listing of a directory at a
 * time, and the lookup of a virtual file, which computes its text (fs/ops.c kept_vfile),
 * would hold up every other lookup in its directory; parallel readers of one directory
 * would queue too. The daemon's lookups and listings are thread-safe. */
#ifndef TDC_FS_KILLPRIV_H
#define TDC_FS_KILLPRIV_H

/* Set the flags in the next reply written on device `fd`: call before the session reads
 * FUSE_INIT. */
void fs_killpriv_arm(int fd);

#endif
