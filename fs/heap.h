/* heap: the start of the daemon's main heap backed by transparent huge pages.
 *
 * Mounting builds the model of the file table (an entry, a path and an inode per file) out
 * of many small blocks, tens of MiB for a large tree, all on the main thread. On 4 KiB pages
 * that is one page fault per 4 KiB, which on a virtual machine costs more than the building
 * itself. Huge pages turn 512 faults into one. Only for a budget large enough that a few huge
 * pages more do not matter (FS_HEAP_HUGE_MIN): a 2 MiB page is resident as a whole. */
#ifndef TDC_FS_HEAP_H
#define TDC_FS_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* The smallest memory budget for which fs_heap_huge is worth its pages. */
#define FS_HEAP_HUGE_MIN ((uint64_t)64 << 20)

/* Grow the main heap to at least `bytes` (the allocator keeps that much at its top from then
 * on) and ask for huge pages over it. Best effort: where the allocator or the kernel says no,
 * the heap stays as it was. Call early, before other threads start. */
void fs_heap_huge(size_t bytes);

#endif
