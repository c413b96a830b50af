//===- SwapFiles.h - ZeRO-Offload's swap files, for the swap kernels -*- C++ -*-===//
//
// Executor maps an offload arena from a swap file (its `path`) and registers
// the mapping here; the CPU kernels SwapIn / SwapOut look up the file of the
// pages they move: SwapOut starts their writeback (sync_file_range, which
// returns once the writes are queued) and unmaps them (MADV_DONTNEED; a shared
// file mapping keeps their bytes in the page cache and the file), so the
// writes overlap what runs next, and the kernel may drop the clean pages
// whenever it needs the memory. SwapIn asks for them back ahead of use
// (MADV_WILLNEED: read-ahead from the page cache or the file) and queues them
// for the reader thread, which maps them in (MADV_POPULATE_WRITE) beside the
// streams.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_IO_SWAPFILES_H
#define ZRT_IO_SWAPFILES_H

#include <cstddef>

namespace zrt {

/// Records that [base, base + bytes) maps file `fd` from offset 0.
void registerSwapFile(void *base, size_t bytes, int fd);
/// Forgets the mapping at `base` (before it is unmapped).
void unregisterSwapFile(void *base);

/// SwapIn of [p, p + n) (page-aligned): read-ahead, returns at once.
void swapInPages(void *p, size_t n);
/// SwapOut of [p, p + n) (page-aligned): writeback started, pages unmapped.
void swapOutPages(void *p, size_t n);

/// What the swaps did in this process so far: bytes asked back (SwapIn) and
/// sent out (SwapOut); seconds the streams spent in the swap calls (not
/// overlapped with their kernels), the writer thread in its writebacks and
/// the reader thread mapping pages in (both overlapped: they run beside the
/// streams).
struct SwapCounters {
  unsigned long long bytesIn = 0, bytesOut = 0;
  double streamSeconds = 0, writerSeconds = 0, readerSeconds = 0;
};
SwapCounters swapCounters();

} // namespace zrt

#endif // ZRT_IO_SWAPFILES_H
