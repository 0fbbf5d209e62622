// Halide's mutex arrays (halide_mutex_array_*): the per-element locks of an atomic update that
// Halide cannot make lock-free (a non-associative update, or one of a tuple). Halide 14 and 21
// lower `f.update().atomic()` of such an update to halide_mutex_array_create with f's
// allocation, a lock / unlock around each element's update, and halide_mutex_array_destroy as
// the allocation's destructor.
//
// Each entry is a pthread mutex, created unlocked. The array comes from the C heap, not
// halide_malloc: it is the runtime's bookkeeping, not a pipeline allocation, so the profiler
// never bills it to a Func.

#include "tally_runtime.h"

#include <pthread.h>
#include <stdlib.h>

struct halide_mutex_array {
    uint64_t size;
    pthread_mutex_t *entries;
};

struct halide_mutex_array *halide_mutex_array_create(uint64_t sz) {
    // Halide 14 passes an int, which may be negative (an empty Func): no entries then.
    if ((int64_t)sz < 0) {
        sz = 0;
    }
    if (sz > SIZE_MAX / sizeof(pthread_mutex_t)) {
        return NULL;
    }
    struct halide_mutex_array *a = (struct halide_mutex_array *)malloc(sizeof(*a));
    if (!a) {
        return NULL;
    }
    a->size = sz;
    a->entries = (pthread_mutex_t *)malloc((size_t)(sz ? sz : 1) * sizeof(pthread_mutex_t));
    if (!a->entries) {
        free(a);
        return NULL;
    }
    for (uint64_t i = 0; i < sz; i++) {
        pthread_mutex_init(&a->entries[i], NULL);
    }
    return a;
}

void halide_mutex_array_destroy(void *user_context, void *array) {
    (void)user_context;
    struct halide_mutex_array *a = (struct halide_mutex_array *)array;
    if (!a) {
        return;
    }
    for (uint64_t i = 0; i < a->size; i++) {
        pthread_mutex_destroy(&a->entries[i]);
    }
    free(a->entries);
    free(a);
}

int32_t halide_mutex_array_lock(struct halide_mutex_array *array, int32_t entry) {
    pthread_mutex_lock(&array->entries[entry]);
    return 0;
}

int32_t halide_mutex_array_unlock(struct halide_mutex_array *array, int32_t entry) {
    pthread_mutex_unlock(&array->entries[entry]);
    return 0;
}
