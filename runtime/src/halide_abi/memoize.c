// Halide 14's memoization cache (Func::memoize): the calls its lowering makes around a memoized
// Func, with Halide's meaning.
//
//   lookup  before the Func is computed: on a hit the realization's buffers are pointed at the
//           cached data (returns 0, and the code skips the Func's production); on a miss each
//           buffer gets fresh host memory to be computed into (returns 1); -1 when that memory
//           cannot be had.
//   store   after a miss's production: the cache takes the blocks lookup allocated (no copy).
//   release each buffer's host pointer when the realization ends (the allocation's
//           custom_delete): a block the cache does not hold is freed, one it holds is unpinned.
//
// A key is the bytes the generated code packed (a string constant's address naming the Func,
// then each Param and memoize_tag the Func depends on) plus the realization's bounds and each
// buffer's shape. Entries are kept in least-recently-used order and pruned past the cache's
// size (halide_memoization_cache_set_size; 1 MiB by default, as in Halide), never while in use.
//
// Each block lookup allocates has a header in front of the host pointer naming its entry (NULL
// until stored), so release can tell what it frees. The header is TALLY_MALLOC_ALIGNMENT bytes,
// so the host pointer keeps halide_malloc's alignment. One mutex guards the cache.

#include "tally_runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct memo_entry {
    struct memo_entry *newer, *older;  // the LRU list; newest at the head
    uint64_t hash;
    uint8_t *key;
    int32_t key_size;
    halide_dimension_t *bounds;  // the realization's bounds, bounds_dims of them
    int32_t bounds_dims;
    int32_t tuple_count;
    halide_buffer_t *buffers;  // [tuple_count], each with its dims in `dims`
    halide_dimension_t *dims;
    uint64_t bytes;  // data held
    int32_t in_use;  // buffers handed out and not yet released
    int has_eviction_key;
    uint64_t eviction_key;
} memo_entry;

typedef struct memo_header {
    memo_entry *entry;  // NULL: not held by the cache (release frees the block)
} memo_header;

#define MEMO_HEADER_BYTES TALLY_MALLOC_ALIGNMENT
#define MEMO_DEFAULT_SIZE ((uint64_t)1 << 20)

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static memo_entry *newest, *oldest;
static uint64_t held_bytes, max_bytes = MEMO_DEFAULT_SIZE;

static memo_header *header_of(const void *host) {
    return (memo_header *)((uint8_t *)host - MEMO_HEADER_BYTES);
}

static uint64_t hash_key(const uint8_t *key, int32_t size) {
    uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (int32_t i = 0; i < size; i++) {
        h = (h ^ key[i]) * 1099511628211ull;
    }
    return h;
}

static int same_dims(const halide_dimension_t *a, const halide_dimension_t *b, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        if (a[i].min != b[i].min || a[i].extent != b[i].extent || a[i].stride != b[i].stride) {
            return 0;
        }
    }
    return 1;
}

static int entry_matches(const memo_entry *e, uint64_t hash, const uint8_t *key, int32_t key_size,
                         const halide_buffer_t *bounds, int32_t tuple_count,
                         halide_buffer_t **buffers) {
    if (e->hash != hash || e->key_size != key_size || memcmp(e->key, key, (size_t)key_size) != 0 ||
        e->bounds_dims != bounds->dimensions ||
        !same_dims(e->bounds, bounds->dim, bounds->dimensions) || e->tuple_count != tuple_count) {
        return 0;
    }
    for (int32_t i = 0; i < tuple_count; i++) {
        const halide_buffer_t *c = &e->buffers[i], *b = buffers[i];
        if (c->dimensions != b->dimensions || c->type.code != b->type.code ||
            c->type.bits != b->type.bits || c->type.lanes != b->type.lanes ||
            !same_dims(c->dim, b->dim, b->dimensions)) {
            return 0;
        }
    }
    return 1;
}

static memo_entry *find_locked(uint64_t hash, const uint8_t *key, int32_t key_size,
                               const halide_buffer_t *bounds, int32_t tuple_count,
                               halide_buffer_t **buffers) {
    for (memo_entry *e = newest; e; e = e->older) {
        if (entry_matches(e, hash, key, key_size, bounds, tuple_count, buffers)) {
            return e;
        }
    }
    return NULL;
}

static void unlink_locked(memo_entry *e) {
    if (e->newer) {
        e->newer->older = e->older;
    } else {
        newest = e->older;
    }
    if (e->older) {
        e->older->newer = e->newer;
    } else {
        oldest = e->newer;
    }
    e->newer = e->older = NULL;
}

static void push_newest_locked(memo_entry *e) {
    e->newer = NULL;
    e->older = newest;
    if (newest) {
        newest->newer = e;
    } else {
        oldest = e;
    }
    newest = e;
}

static void destroy_entry_locked(void *user_context, memo_entry *e) {
    unlink_locked(e);
    held_bytes -= e->bytes;
    for (int32_t i = 0; i < e->tuple_count; i++) {
        halide_free(user_context, header_of(e->buffers[i].host));
    }
    free(e->key);
    free(e->bounds);
    free(e->buffers);
    free(e->dims);
    free(e);
}

// Drops the least recently used entries not in use until the cache holds at most max_bytes.
static void prune_locked(void *user_context) {
    memo_entry *e = oldest;
    while (held_bytes > max_bytes && e) {
        memo_entry *next = e->newer;
        if (e->in_use == 0) {
            destroy_entry_locked(user_context, e);
        }
        e = next;
    }
}

int halide_memoization_cache_lookup(void *user_context, const uint8_t *cache_key, int32_t size,
                                    halide_buffer_t *computed_bounds, int32_t tuple_count,
                                    halide_buffer_t **tuple_buffers) {
    if (!cache_key || size < 0 || !computed_bounds || tuple_count < 0 ||
        (tuple_count > 0 && !tuple_buffers)) {
        halide_error(user_context, "halide_memoization_cache_lookup: bad arguments");
        return -1;
    }
    const uint64_t hash = hash_key(cache_key, size);
    pthread_mutex_lock(&memo_lock);
    memo_entry *e = find_locked(hash, cache_key, size, computed_bounds, tuple_count, tuple_buffers);
    if (e) {
        unlink_locked(e);
        push_newest_locked(e);
        e->in_use += tuple_count;
        for (int32_t i = 0; i < tuple_count; i++) {
            tuple_buffers[i]->host = e->buffers[i].host;
            tuple_buffers[i]->flags = e->buffers[i].flags;
        }
        pthread_mutex_unlock(&memo_lock);
        return 0;
    }
    pthread_mutex_unlock(&memo_lock);
    for (int32_t i = 0; i < tuple_count; i++) {
        uint64_t bytes = tally_buffer_size_in_bytes(tuple_buffers[i]);
        uint8_t *block = (uint8_t *)halide_malloc(user_context, (size_t)bytes + MEMO_HEADER_BYTES);
        if (!block) {
            for (int32_t j = 0; j < i; j++) {
                halide_free(user_context, header_of(tuple_buffers[j]->host));
                tuple_buffers[j]->host = NULL;
            }
            return -1;
        }
        ((memo_header *)block)->entry = NULL;
        tuple_buffers[i]->host = block + MEMO_HEADER_BYTES;
    }
    return 1;
}

int halide_memoization_cache_store(void *user_context, const uint8_t *cache_key, int32_t size,
                                   halide_buffer_t *computed_bounds, int32_t tuple_count,
                                   halide_buffer_t **tuple_buffers, bool has_eviction_key,
                                   uint64_t eviction_key) {
    if (!cache_key || size < 0 || !computed_bounds || tuple_count < 0 ||
        (tuple_count > 0 && !tuple_buffers)) {
        halide_error(user_context, "halide_memoization_cache_store: bad arguments");
        return -1;
    }
    const uint64_t hash = hash_key(cache_key, size);
    pthread_mutex_lock(&memo_lock);
    if (find_locked(hash, cache_key, size, computed_bounds, tuple_count, tuple_buffers)) {
        // Another realization stored the same key first: this one's blocks stay uncached.
        pthread_mutex_unlock(&memo_lock);
        return 0;
    }
    memo_entry *e = (memo_entry *)calloc(1, sizeof(memo_entry));
    int32_t total_dims = 0;
    for (int32_t i = 0; i < tuple_count; i++) {
        total_dims += tuple_buffers[i]->dimensions;
    }
    if (e) {
        e->key = (uint8_t *)malloc((size_t)size + 1);
        e->bounds = (halide_dimension_t *)calloc((size_t)computed_bounds->dimensions + 1,
                                                 sizeof(halide_dimension_t));
        e->buffers = (halide_buffer_t *)calloc((size_t)tuple_count + 1, sizeof(halide_buffer_t));
        e->dims = (halide_dimension_t *)calloc((size_t)total_dims + 1, sizeof(halide_dimension_t));
    }
    if (!e || !e->key || !e->bounds || !e->buffers || !e->dims) {
        if (e) {
            free(e->key);
            free(e->bounds);
            free(e->buffers);
            free(e->dims);
            free(e);
        }
        pthread_mutex_unlock(&memo_lock);
        return 0;  // not cached: the realization still has its data, and release frees it
    }
    memcpy(e->key, cache_key, (size_t)size);
    e->key_size = size;
    e->hash = hash;
    e->bounds_dims = computed_bounds->dimensions;
    memcpy(e->bounds, computed_bounds->dim,
           (size_t)computed_bounds->dimensions * sizeof(halide_dimension_t));
    e->tuple_count = tuple_count;
    halide_dimension_t *dims = e->dims;
    for (int32_t i = 0; i < tuple_count; i++) {
        const halide_buffer_t *b = tuple_buffers[i];
        e->buffers[i] = *b;
        e->buffers[i].dim = dims;
        e->buffers[i].device = 0;
        e->buffers[i].device_interface = NULL;
        memcpy(dims, b->dim, (size_t)b->dimensions * sizeof(halide_dimension_t));
        dims += b->dimensions;
        e->bytes += tally_buffer_size_in_bytes(b);
        header_of(b->host)->entry = e;
    }
    e->in_use = tuple_count;  // the realization that computed them holds them until release
    e->has_eviction_key = has_eviction_key;
    e->eviction_key = eviction_key;
    push_newest_locked(e);
    held_bytes += e->bytes;
    prune_locked(user_context);
    pthread_mutex_unlock(&memo_lock);
    return 0;
}

void halide_memoization_cache_release(void *user_context, void *host) {
    if (!host) {
        return;
    }
    memo_header *h = header_of(host);
    pthread_mutex_lock(&memo_lock);
    memo_entry *e = h->entry;
    if (e) {
        if (e->in_use > 0) {
            e->in_use--;
        }
        prune_locked(user_context);
    }
    pthread_mutex_unlock(&memo_lock);
    if (!e) {
        halide_free(user_context, h);
    }
}

void halide_memoization_cache_set_size(int64_t size) {
    pthread_mutex_lock(&memo_lock);
    max_bytes = size > 0 ? (uint64_t)size : MEMO_DEFAULT_SIZE;
    prune_locked(NULL);
    pthread_mutex_unlock(&memo_lock);
}

void halide_memoization_cache_evict(void *user_context, uint64_t eviction_key) {
    pthread_mutex_lock(&memo_lock);
    for (memo_entry *e = newest; e;) {
        memo_entry *next = e->older;
        if (e->has_eviction_key && e->eviction_key == eviction_key && e->in_use == 0) {
            destroy_entry_locked(user_context, e);
        }
        e = next;
    }
    pthread_mutex_unlock(&memo_lock);
}

void halide_memoization_cache_cleanup(void) {
    // Entries still handed out stay: their realizations release them later.
    pthread_mutex_lock(&memo_lock);
    for (memo_entry *e = oldest; e;) {
        memo_entry *next = e->newer;
        if (e->in_use == 0) {
            destroy_entry_locked(NULL, e);
        }
        e = next;
    }
    pthread_mutex_unlock(&memo_lock);
}

uint64_t tally_memoization_cache_bytes(void) {
    pthread_mutex_lock(&memo_lock);
    uint64_t bytes = held_bytes;
    pthread_mutex_unlock(&memo_lock);
    return bytes;
}

uint64_t tally_memoization_cache_in_use(void) {
    pthread_mutex_lock(&memo_lock);
    uint64_t n = 0;
    for (const memo_entry *e = newest; e; e = e->older) {
        n += (uint64_t)e->in_use;
    }
    pthread_mutex_unlock(&memo_lock);
    return n;
}
