/* heap: the start of a process's main heap backed by transparent huge pages.
 *
 * Opening an archive builds its file table (an entry and a path per file, and in the daemon
 * an inode per file) out of many small blocks, tens of MiB for a large tree, all on the main
 * thread. On 4 KiB pages that is one page fault per 4 KiB, which on a virtual machine costs
 * more than the building itself. Huge pages turn 512 faults into one. Only where a few huge
 * pages more do not matter (the daemon: a budget of HEAP_HUGE_MIN or more): a 2 MiB page is
 * resident as a whole. */
#ifndef TDC_HEAP_H
#define TDC_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* glibc's largest dynamic mmap threshold on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX). */
#define HEAP_MMAP_THRESHOLD (32 << 20)

/* What heap_huge asks for, and the smallest budget of the daemon's it is worth. */
#define HEAP_HUGE_MIN ((uint64_t)64 << 20)

/* Grow the main heap to at least `bytes` (the allocator keeps that much at its top from then
 * on) and ask for huge pages over it. Best effort: where the allocator or the kernel says no,
 * the heap stays as it was. Call early, before other threads start. */
void heap_huge(size_t bytes);

#endif
