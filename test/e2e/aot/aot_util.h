/* Helpers for the AOT end-to-end programs (plain C11): dense buffers over caller memory, a
 * deterministic generator, and a failure counter. */
#ifndef TALLY_TEST_E2E_AOT_AOT_UTIL_H
#define TALLY_TEST_E2E_AOT_AOT_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tally_runtime.h"

/* Points `buf` at `host`: a dense buffer with extents[0] fastest, all mins 0 (the apps' buffer
 * convention). `dims` must have room for `rank` entries and outlive the buffer. */
static inline void aot_make_buffer(halide_buffer_t *buf, halide_dimension_t *dims, void *host,
                                   uint8_t code, uint8_t bits, int rank, const int *extents) {
    int32_t stride = 1;
    memset(buf, 0, sizeof(*buf));
    for (int d = 0; d < rank; d++) {
        dims[d].min = 0;
        dims[d].extent = extents[d];
        dims[d].stride = stride;
        dims[d].flags = 0;
        stride *= extents[d];
    }
    buf->host = (uint8_t *)host;
    buf->type.code = code;
    buf->type.bits = bits;
    buf->type.lanes = 1;
    buf->dimensions = rank;
    buf->dim = dims;
}

/* 64-bit LCG, high 32 bits out: the same sequence everywhere. */
static inline uint32_t aot_next(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 32);
}

static int aot_failures = 0;

#define AOT_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (aot_failures++ < 10) {                                                             \
                fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);           \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fprintf(stderr, "\n");                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif /* TALLY_TEST_E2E_AOT_AOT_UTIL_H */
