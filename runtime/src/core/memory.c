// Host memory: halide_malloc and halide_free, the allocator generated code and the host device
// interface use, with a cache of freed large blocks.
//
// Allocations are aligned to TALLY_MALLOC_ALIGNMENT and rounded up to a multiple of it. Every
// allocation is an operation fault injection counts (fault.c, "malloc"): an injected failure
// returns NULL exactly as an exhausted heap does, so generated code takes its out-of-memory path.
// The cache changes none of that: the fault check comes first, and a hit is an allocation too.
//
// Why a cache: the C library hands large blocks straight back to the kernel when they are freed
// (munmap, or a trim of the top of its heap once more than its trim threshold is free there, which
// catches blocks of a few hundred KiB too), so a pipeline run again page-faults its big
// intermediates afresh on every run, and the kernel zeroes each page again (async_fork of the
// conformance corpus at 512x384: two 384 KiB intermediates, ~180 faults and ~1.8 ms a run). Freed
// blocks of at least TALLY_MALLOC_CACHE_MIN_BYTES are kept instead, per size class, and
// halide_malloc takes back the smallest cached block that holds the request (best fit), so an
// intermediate reuses the pages of one freed before it, as the C library's heap would. Size
// classes are four per power of two (1, 1.25, 1.5 and 1.75 times 2^k): a cacheable request is
// rounded up to its class, at most a quarter more address space, whose untouched pages cost
// nothing.
//
// What the cache may hold: never more than the peak of the large blocks live at once (`peak`,
// counted in request bytes), live blocks included. Without that bound each of a pipeline's
// intermediates kept a block of its own, so the process held the sum of them rather than the
// peak of those alive together (the corpus's local_laplacian: 26.7 MiB added to the process
// against Halide's 21.3 MiB); with it, Tally's code holds what Halide's does. Blocks over the
// bound are handed back, the largest first. A further bound on the bytes cached (the limit)
// applies too. Everything cached is released by tally_malloc_cache_release, a lower limit, and
// at process exit (lifetime.c).
//
// Layout: each block starts with a header of TALLY_MALLOC_ALIGNMENT bytes (the block size, a
// magic word, the cache link, the pointer malloc returned: a block is malloc'd with room to align
// it) in front of the pointer handed out. halide_free checks the magic;
// a pointer that was not handed out by halide_malloc is memory corruption, and aborts.
//
// Locking: one mutex guards the cache lists and counts; it is taken only for cacheable sizes.

#include "core/memory.h"
#include "core/env.h"
#include "core/error.h"
#include "core/fault.h"
#include "tally_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct block_header {
    uint64_t magic;
    uint64_t size;  // bytes of the block, header included
    struct block_header *next;
    void *base;          // what malloc returned, for free
    int32_t size_class;  // -1: not cacheable
    uint64_t request;    // live: the bytes of the request's class, header included
} block_header;

_Static_assert(sizeof(block_header) <= TALLY_MALLOC_ALIGNMENT, "the header must fit its slot");

#define BLOCK_MAGIC 0x7461336c6c794d41ull  // in use
#define BLOCK_FREED 0x7461336c6c794646ull  // in the cache
// log2 of TALLY_MALLOC_CACHE_MIN_BYTES: the first size class starts there.
#define MIN_CLASS_LOG2 __builtin_ctz(TALLY_MALLOC_CACHE_MIN_BYTES)
#define NUM_CLASSES (4 * 48)

_Static_assert((TALLY_MALLOC_CACHE_MIN_BYTES & (TALLY_MALLOC_CACHE_MIN_BYTES - 1)) == 0,
               "TALLY_MALLOC_CACHE_MIN_BYTES must be a power of two");

static struct {
    pthread_mutex_t lock;
    block_header *lists[NUM_CLASSES];
    uint64_t cached_bytes;
    uint64_t cached_blocks;
    uint64_t hits;
    uint64_t misses;
    uint64_t overflows;
    uint64_t limit;
    int limit_set;
    uint64_t live_bytes;    // blocks handed out (cacheable sizes), header included
    uint64_t live_request;  // their requests' class bytes, header included
    uint64_t peak;          // the most live_request has been since the last release
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t default_limit(void) {
    uint64_t limit = 1ull << 30;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 4 < limit) {
        limit = (uint64_t)pages * (uint64_t)page / 4;
    }
    char instead[96];
    snprintf(instead, sizeof instead, "%llu (a quarter of memory, at most 1 GiB)",
             (unsigned long long)limit);
    return (uint64_t)tally_env_int("TALLY_MALLOC_CACHE_BYTES", 0, INT64_MAX, (int64_t)limit,
                                   instead);
}

static uint64_t limit_locked(void) {
    if (!cache.limit_set) {
        cache.limit = default_limit();
        cache.limit_set = 1;
    }
    return cache.limit;
}

// The class of a request of `bytes` (rounded, header not included) and the bytes every block of
// the class can hold, or -1 when the size is not cached.
static int32_t size_class(uint64_t bytes, uint64_t *class_bytes) {
    if (bytes < TALLY_MALLOC_CACHE_MIN_BYTES || bytes > (1ull << 60)) {
        return -1;  // small, or too big to round up without overflow
    }
    int32_t k = 63 - __builtin_clzll(bytes);  // 2^k <= bytes < 2^(k+1)
    uint64_t base = 1ull << k, step = base / 4;
    uint64_t j = (bytes - base + step - 1) / step;  // 0..4
    int32_t c = (k - MIN_CLASS_LOG2) * 4 + (int32_t)j;
    if (c < 0 || c >= NUM_CLASSES) {
        return -1;
    }
    *class_bytes = base + j * step;
    return c;
}

// The bytes the cache may hold now beside the live blocks (cache lock held): what keeps live and
// cached blocks within the peak of live requests, and within the limit.
static uint64_t room_locked(void) {
    uint64_t room = cache.peak > cache.live_bytes ? cache.peak - cache.live_bytes : 0;
    uint64_t limit = limit_locked();
    return room < limit ? room : limit;
}

// Frees cached blocks until at most `keep` bytes remain (cache lock held); largest classes
// first.
static void trim_locked(uint64_t keep) {
    for (int32_t c = NUM_CLASSES - 1; c >= 0 && cache.cached_bytes > keep; c--) {
        while (cache.lists[c] && cache.cached_bytes > keep) {
            block_header *h = cache.lists[c];
            cache.lists[c] = h->next;
            cache.cached_bytes -= h->size;
            cache.cached_blocks--;
            free(h->base);
        }
    }
}

void *halide_malloc(void *user_context, size_t size) {
    if (tally_fault_check(user_context, TALLY_FAULT_MALLOC,
                          "halide_malloc: out of memory allocating %zu bytes", size)) {
        return NULL;
    }
    if (size > SIZE_MAX - 2 * TALLY_MALLOC_ALIGNMENT) {
        tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                           "halide_malloc: out of memory allocating %zu bytes", size);
        return NULL;
    }
    // Round up so that the allocation ends on an alignment boundary too: vectorized loops may
    // read a full vector past the last element of a row. Size 0 still gets a unique block.
    size_t rounded = (size + TALLY_MALLOC_ALIGNMENT - 1) & ~(size_t)(TALLY_MALLOC_ALIGNMENT - 1);
    if (rounded == 0) {
        rounded = TALLY_MALLOC_ALIGNMENT;
    }
    uint64_t class_bytes = rounded;
    int32_t c = size_class(rounded, &class_bytes);
    size_t total = (size_t)class_bytes + TALLY_MALLOC_ALIGNMENT;
    block_header *h = NULL;
    if (c >= 0) {
        pthread_mutex_lock(&cache.lock);
        for (int32_t k = c; k < NUM_CLASSES && !h; k++) {
            h = cache.lists[k];  // the smallest cached block that holds the request
        }
        if (h) {
            cache.lists[h->size_class] = h->next;
            cache.cached_bytes -= h->size;
            cache.cached_blocks--;
            cache.hits++;
            cache.live_bytes += h->size;
        } else {
            cache.misses++;
            cache.live_bytes += total;
        }
        cache.live_request += total;
        if (cache.live_request > cache.peak) {
            cache.peak = cache.live_request;
        }
        // A fresh block, or a bigger one than the request, may leave less room for the cache:
        // hand back what is over it before the new block's pages are touched.
        trim_locked(room_locked());
        pthread_mutex_unlock(&cache.lock);
    }
    if (!h) {
        // malloc and align by hand, as Halide's runtime does: posix_memalign takes glibc's slow
        // path (about 60-80 ns an allocation and free against 14 for malloc, measured with the
        // small per-row buffers of the corpus's demosaic, which allocates a dozen a row).
        void *p = total <= SIZE_MAX - TALLY_MALLOC_ALIGNMENT
                      ? malloc(total + TALLY_MALLOC_ALIGNMENT)
                      : NULL;
        if (!p) {
            tally_report_error(user_context, TALLY_ERROR_OUT_OF_MEMORY,
                               "halide_malloc: out of memory allocating %zu bytes", size);
            return NULL;
        }
        uintptr_t aligned =
            ((uintptr_t)p + TALLY_MALLOC_ALIGNMENT - 1) & ~(uintptr_t)(TALLY_MALLOC_ALIGNMENT - 1);
        h = (block_header *)aligned;
        h->base = p;
        h->size = total;
        h->size_class = c;
    }
    h->magic = BLOCK_MAGIC;
    h->next = NULL;
    h->request = total;
    return (char *)h + TALLY_MALLOC_ALIGNMENT;
}

void halide_free(void *user_context, void *ptr) {
    (void)user_context;
    if (!ptr) {
        return;
    }
    block_header *h = (block_header *)((char *)ptr - TALLY_MALLOC_ALIGNMENT);
    if (h->magic != BLOCK_MAGIC) {
        // Not a live halide_malloc block (a double free, or a foreign pointer): corruption.
        fprintf(stderr, "tally: halide_free(%p): not a block from halide_malloc (%s)\n", ptr,
                h->magic == BLOCK_FREED ? "freed twice" : "bad header");
        abort();
    }
    if (h->size_class >= 0) {
        pthread_mutex_lock(&cache.lock);
        cache.live_bytes -= h->size;
        cache.live_request -= h->request;
        if (cache.cached_bytes + h->size <= room_locked()) {
            h->magic = BLOCK_FREED;
            h->next = cache.lists[h->size_class];
            cache.lists[h->size_class] = h;
            cache.cached_bytes += h->size;
            cache.cached_blocks++;
            h = NULL;
        } else {
            cache.overflows++;
        }
        pthread_mutex_unlock(&cache.lock);
        if (!h) {
            return;
        }
    }
    h->magic = 0;
    free(h->base);
}

void tally_malloc_cache_get_stats(tally_malloc_cache_stats *out) {
    if (!out) {
        return;
    }
    pthread_mutex_lock(&cache.lock);
    out->cached_bytes = cache.cached_bytes;
    out->cached_blocks = cache.cached_blocks;
    out->hits = cache.hits;
    out->misses = cache.misses;
    out->overflows = cache.overflows;
    out->limit_bytes = limit_locked();
    out->live_bytes = cache.live_bytes;
    out->peak_bytes = cache.peak;
    pthread_mutex_unlock(&cache.lock);
}

uint64_t tally_malloc_cache_set_limit(uint64_t bytes) {
    pthread_mutex_lock(&cache.lock);
    uint64_t previous = limit_locked();
    cache.limit = bytes;
    trim_locked(bytes);
    pthread_mutex_unlock(&cache.lock);
    return previous;
}

void tally_malloc_cache_release(void) {
    pthread_mutex_lock(&cache.lock);
    trim_locked(0);
    cache.hits = cache.misses = cache.overflows = 0;
    cache.peak = cache.live_request;
    pthread_mutex_unlock(&cache.lock);
}

void tally_malloc_cache_shutdown(void) {
    tally_malloc_cache_release();
}

void tally_malloc_prefault(void) {
    pthread_mutex_lock(&cache.lock);
    (void)limit_locked();
    pthread_mutex_unlock(&cache.lock);
}

void tally_malloc_fork_prepare(void) {
    pthread_mutex_lock(&cache.lock);
}

void tally_malloc_fork_parent(void) {
    pthread_mutex_unlock(&cache.lock);
}

void tally_malloc_fork_child(void) {
    pthread_mutex_unlock(&cache.lock);
}
