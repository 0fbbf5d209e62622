// halide_buffer_t helpers the runtime's files share beyond the public ones of tally_runtime.h
// (buffer.c). Layer core (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_BUFFER_H
#define TALLY_RUNTIME_SRC_CORE_BUFFER_H

#include "tally_runtime.h"

#include <stdint.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// Bytes from the start of the buffer's element span (tally_buffer_begin) to the element
// buf->host points at: nonzero only with negative strides; 0 for an empty buffer.
uint64_t tally_buffer_host_offset(const halide_buffer_t *buf);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_BUFFER_H
