// Host memory: halide_malloc and halide_free, the allocator generated code and the host device
// interface use.
//
// Allocations are aligned to TALLY_MALLOC_ALIGNMENT and rounded up to a multiple of it. Every
// allocation is an operation fault injection counts (fault.c, "malloc"): an injected failure
// returns NULL exactly as an exhausted heap does, so generated code takes its out-of-memory path.

#include "internal.h"

#include <stdlib.h>

void *halide_malloc(void *user_context, size_t size) {
    if (tally_fault_check(user_context, TALLY_FAULT_MALLOC,
                          "halide_malloc: out of memory allocating %zu bytes", size)) {
        return NULL;
    }
    void *p = NULL;
    // Round up so that the allocation ends on an alignment boundary too: vectorized loops may
    // read a full vector past the last element of a row.
    size_t rounded = (size + TALLY_MALLOC_ALIGNMENT - 1) & ~(size_t)(TALLY_MALLOC_ALIGNMENT - 1);
    if (rounded < size) {
        rounded = 0;  // overflow: make posix_memalign fail below via an impossible size
    }
    if (rounded == 0 && size == 0) {
        rounded = TALLY_MALLOC_ALIGNMENT;
    }
    if (rounded == 0 || posix_memalign(&p, TALLY_MALLOC_ALIGNMENT, rounded) != 0) {
        tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                           "halide_malloc: out of memory allocating %zu bytes", size);
        return NULL;
    }
    return p;
}

void halide_free(void *user_context, void *ptr) {
    (void)user_context;
    free(ptr);
}
