// The growable byte string the report and the exports build their output in (bytes.c).
// Layer core (runtime/layers.txt). Not installed, not seen by generated code. C11.
#ifndef TALLY_RUNTIME_SRC_CORE_BYTES_H
#define TALLY_RUNTIME_SRC_CORE_BYTES_H

#include <stddef.h>

// Hidden, like every internal declaration of runtime/src: no part of libtally.so's ABI, and
// calls between the runtime's files stay direct calls (no PLT, no interposition).
#pragma GCC visibility push(hidden)

// A growable byte string; zero-initialise it. An append that runs out of memory sets `failed`
// and makes every later call a no-op. After any append, data[len] == '\0'.
typedef struct tally_bytes {
    char *data;
    size_t len;
    size_t cap;
    int failed;
} tally_bytes;

// Makes room for `extra` more bytes and a NUL.
void tally_bytes_reserve(tally_bytes *b, size_t extra);
void tally_bytes_append(tally_bytes *b, const void *bytes, size_t n);
void tally_bytes_printf(tally_bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tally_bytes_free(tally_bytes *b);
// Appends `s` as a JSON string (RFC 8259, so valid UTF-8): names are any bytes; a byte that does
// not begin a well-formed UTF-8 sequence is written as U+FFFD, control bytes as \u00XX.
void tally_bytes_json_string(tally_bytes *b, const char *s);

#pragma GCC visibility pop

#endif  // TALLY_RUNTIME_SRC_CORE_BYTES_H
