/** \file
 * Benchmarks that run Tally next to other code in one process (Halide 14's runtime, the apps' C++
 * references) share glibc's heap with it. glibc's adaptive thresholds then hand the other side's
 * freed buffers back to the kernel after most runs (Tally's allocations in between move the top
 * of the heap), so each of its runs page-faults its buffers afresh, which it does not do in a
 * process of its own (measured: float_chain in halide14_bench, 20-40 ms against 0.4 ms per Halide
 * run). Tally's own halide_malloc keeps big blocks in a cache of its own and is not affected.
 */
#ifndef TALLY_BENCH_SHAREDHEAP_H
#define TALLY_BENCH_SHAREDHEAP_H

#include <malloc.h>

/** Fixes glibc's mmap and trim thresholds (64 MiB, 512 MiB) so that freed memory stays in the
 * process for every allocator in it. Call first thing in main(). */
inline void keep_freed_memory_in_process() {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

#endif  // TALLY_BENCH_SHAREDHEAP_H
